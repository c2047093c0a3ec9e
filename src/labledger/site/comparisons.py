"""The Comparisons page's data (``data/compare.js``): version tables of the benchmark ledger, stored
comparison documents of the site's runs, and summaries of the values recorded by groups of runs.

- **Version tables**: one per suite of the benchmark ledger, every model in entry order and every
  variant present, the delta column from the first model to the last column, with significance
  marks from :func:`labledger.analysis.groups.paired_entry_test` (paired bootstrap on stored predictions),
  and each row's ranks with their joint intervals and the tie group of the best
  (:func:`labledger.analysis.ranking.rank_entries`, as ``table --ranks``) where every column of the
  row kept its predictions. Paired tests and rankings are cached in the site manifest by the size and
  modification time of the prediction files, so a rebuild does not resample again.
- **Comparison documents**: every ``evals/<name>/comparison.json`` (``ledger.save_evaluation(...,
  kind="comparison")``) of the runs in the site, reduced to what the page shows.
- **Group summaries**: for each group with at least two runs in the site, the mean, sample standard
  deviation, minimum and maximum of each value the runs recorded in ``summary["headline"]``. These
  are recorded values, summarised as they are: nothing is recomputed and no test is made.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import LedgerError
from labledger.inputs.records import finite_or_none
from labledger.schema.ids import MetricId
from labledger.store.jsonl import read_json
from labledger.store.ledger import Ledger, RunInfo

#: What a comparison document's metric entry keeps on the page.
_METRIC_KEYS = (
    "metric",
    "key",
    "params",
    "definition",
    "higher_is_better",
    "a",
    "b",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "ci",
    "method",
    "n",
    "clusters",
    # the statistics of #16: adjusted p, SE and minimum detectable effect of the difference, the
    # analytic interval, the few-cluster warning and why an interval was refused
    "p_adjusted",
    "se",
    "mde",
    "analytic",
    "warning",
    "interval_note",
)

#: The discordant items a page keeps per task (``compare --items``; the counts stay whole).
FLIP_ITEMS = 500
#: Longest text (prompt, target, output) a page keeps per item; the document has it whole.
FLIP_TEXT = 300
#: What a discordant item keeps on the page (:class:`labledger.schema.FlippedItem`).
_FLIP_KEYS = ("id", "better", "cluster", "gold", "pred_a", "pred_b", "error_a", "error_b")
_FLIP_TEXT_KEYS = ("prompt", "prompt_b", "target", "output_a", "output_b")

#: The level of the paired tests behind the version tables' significance marks.
PAIRED_CI = 0.95

GROUP_DEFINITION = (
    "recorded values: each run's summary headline (run.set_summary) as the run stored it; "
    "mean, sample standard deviation (n - 1), minimum and maximum over the runs of the group "
    "that recorded the value; nothing is recomputed and no significance test is made"
)


_num = finite_or_none


def _file_key(path: str | None) -> list[Any] | None:
    if not path:
        return None
    try:
        st = Path(path).stat()
    except OSError:
        return [path, None, None]
    return [path, st.st_size, st.st_mtime_ns]


class PairedTestCache:
    """Memoises :func:`labledger.analysis.groups.paired_entry_test` by both prediction files' size and mtime."""

    def __init__(self, old: dict[str, Any] | None):
        self.old = old if isinstance(old, dict) else {}
        self.new: dict[str, Any] = {}
        #: Why tests asked for since the last :meth:`take_errors` could not be made.
        self.errors: list[str] = []

    def take_errors(self) -> list[str]:
        errors, self.errors = self.errors, []
        return errors

    def __call__(self, a, b) -> dict[str, Any] | None:
        from labledger.analysis.groups import paired_entry_test

        if not a.results_path or not b.results_path:
            return None
        key = hashlib.sha256(
            orjson.dumps(
                [
                    _file_key(a.results_path),
                    _file_key(b.results_path),
                    a.metric_id,
                    b.metric_id,
                    a.metric,
                    a.params,
                    a.benchmark,
                ],
                option=orjson.OPT_SORT_KEYS,
            )
        ).hexdigest()
        if key in self.old:
            self.new[key] = self.old[key]
        elif key not in self.new:
            try:
                self.new[key] = {"test": paired_entry_test(a, b, ci=PAIRED_CI)}
            except LedgerError as exc:
                self.new[key] = {
                    "error": f"'{a.benchmark}': no paired test of {a.model} ({a.variant}) against "
                    f"{b.model} ({b.variant}): {exc}"
                }
        got = self.new[key]
        if got.get("error"):
            self.errors.append(got["error"])
        return got.get("test")

    def rank(self, entries: Sequence[Any], names: Sequence[str]) -> tuple[Any, str | None]:
        """:func:`labledger.analysis.ranking.rank_entries` of a version-table row, memoised by every
        prediction file's size and mtime: ``(RankingDoc, None)`` or ``(None, why not)``."""
        import msgspec

        from labledger.analysis.ranking import rank_entries
        from labledger.schema import RankingDoc

        key = hashlib.sha256(
            orjson.dumps(
                ["rank", [_file_key(e.results_path) for e in entries], [e.metric_id for e in entries], list(names)],
                option=orjson.OPT_SORT_KEYS,
            )
        ).hexdigest()
        if key in self.old:
            self.new[key] = self.old[key]
        elif key not in self.new:
            doc, why = rank_entries(entries, names)
            self.new[key] = {"ranking": msgspec.to_builtins(doc) if doc is not None else None, "why": why}
        got = self.new[key]
        if got.get("ranking") is None:
            return None, got.get("why") or "not ranked"
        return msgspec.convert(got["ranking"], RankingDoc), None


def version_tables(ledger: Ledger, paired_test: Callable[..., Any] | None, warnings: list[str]) -> list[dict[str, Any]]:
    """One version table per suite of the benchmark ledger (see the module docstring).

    >>> import tempfile, labledger
    >>> from labledger.analysis.benchmarks import add_entries
    >>> from labledger.schema import BenchmarkEntry as E
    >>> book = labledger.open_ledger(tempfile.mkdtemp(), create=True)
    >>> _ = add_entries(book, [E(model=m, suite="s", benchmark="b", metric="accuracy", value=v) for m, v in (("m1", 0.5), ("m2", 0.75))])
    >>> [t] = version_tables(book, None, [])
    >>> t["suite"], t["columns"], t["rows"][0]["delta"], t["mean"]["n"]
    ('s', ['m1', 'm2'], 0.25, 1)
    """
    from labledger.analysis.benchmarks import VersionTable, read_entries, version_table

    entries = read_entries(ledger)
    suites = list(dict.fromkeys(e.suite for e in entries))
    out = []
    for suite in suites:
        mine = [e for e in entries if e.suite == suite]
        models = list(dict.fromkeys(e.model for e in mine))
        variants = list(dict.fromkeys(e.variant for e in mine))
        first = models[0]
        first_variant = (
            "raw"
            if any(e.model == first and e.variant == "raw" for e in mine)
            else next(e.variant for e in mine if e.model == first)
        )
        delta_from = first if first_variant == "raw" else f"{first}:{first_variant}"
        take = getattr(paired_test, "take_errors", None)
        if take:
            take()
        try:
            table = version_table(
                mine,
                suite=suite,
                models=models,
                variants=variants,
                delta_from=delta_from if len(models) > 1 or len(variants) > 1 else None,
                paired_test=paired_test,
                ranker=getattr(paired_test, "rank", None),
            )
        except LedgerError as exc:
            warnings.append(f"version table of suite {suite!r} left out: {exc}")
            continue
        doc = table.to_dict()
        # The grid is every model x every variant of the suite; a pair with no entries is expected
        # (only some models have a calibrated variant), so its warning is left out.
        absent = {
            f"no entries for {VersionTable.col_name((m, v))} in suite '{suite}'" for m in models for v in variants
        }
        doc["warnings"] = [w for w in doc["warnings"] if w not in absent] + (take() if take else [])
        doc["models"] = models
        doc["variants"] = variants
        doc["delta_from_arg"] = delta_from
        doc["ci"] = PAIRED_CI
        doc["runs"] = sorted({e.run_id for e in mine if e.run_id})
        out.append(doc)
    return out


def _metric_view(m: dict[str, Any]) -> dict[str, Any]:
    out = {k: m.get(k) for k in _METRIC_KEYS if k in m}
    if isinstance(m.get("metric"), str) and isinstance(m.get("params"), dict):
        # the name eval and compare print (quiet defaults left out): the page's label; key stays whole
        out["label"] = MetricId(m["metric"], m["params"]).short
    mc = m.get("mcnemar")
    if isinstance(mc, dict):
        out["mcnemar"] = {k: mc.get(k) for k in ("b", "c", "statistic", "p_value", "method", "clusters") if k in mc}
    else:
        out["mcnemar"] = None
    return out


def _cut(value: Any) -> Any:
    """A text field for the page: strings cut to ``FLIP_TEXT`` characters, other values as JSON text."""
    if value is None:
        return None
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= FLIP_TEXT else text[: FLIP_TEXT - 1] + "…"


def flips_view(flips: Any) -> dict[str, Any] | None:
    """A task's discordant items (``ItemFlips`` as a dict) for the page: the counts whole, the first
    ``FLIP_ITEMS`` items of each direction, their texts cut to ``FLIP_TEXT`` characters.

    >>> v = flips_view({"basis": "correct", "a_better": 1, "b_better": 0,
    ...                 "items": [{"id": "x", "better": "a", "gold": "y", "pred_a": "y", "pred_b": "n", "prompt": "q" * 400}]})
    >>> v["a_better"], v["shown"], len(v["items"][0]["prompt"]), v["items"][0]["pred_b"]
    (1, 1, 300, 'n')
    """
    if not isinstance(flips, dict):
        return None
    items = [x for x in flips.get("items") or () if isinstance(x, dict)]
    kept = [x for x in items if x.get("better") == "a"][:FLIP_ITEMS] + [x for x in items if x.get("better") != "a"][
        :FLIP_ITEMS
    ]
    out = []
    for x in kept:
        row = {k: x.get(k) for k in _FLIP_KEYS}
        for k in ("gold", "pred_a", "pred_b"):
            if isinstance(row[k], (list, dict)):
                row[k] = _cut(row[k])
        row.update({k: _cut(x.get(k)) for k in _FLIP_TEXT_KEYS if x.get(k) is not None})
        out.append(row)
    return {
        "basis": flips.get("basis"),
        "a_better": flips.get("a_better"),
        "b_better": flips.get("b_better"),
        "cluster": flips.get("cluster"),
        "listed": len(items),
        "shown": len(out),
        "items": out,
    }


def comparison_view(doc: dict[str, Any], run_id: str, run_name: str, name: str) -> dict[str, Any]:
    """A stored comparison document reduced to what the pages show (one shape for both the
    Comparisons page and the run's evaluation page).

    >>> m = {"metric": "accuracy", "a": 0.9, "b": 0.8, "diff": 0.1, "p_value": 0.01, "mcnemar": None}
    >>> v = comparison_view({"a": "r1:t", "b": "r2:t", "ci": 0.9, "tasks": {"t": {"n": 10, "metrics": [m]}}},
    ...                     "r1", "one", "compare-two")
    >>> v["ci"], v["tasks"][0]["task"], v["tasks"][0]["metrics"][0]["diff"], v["names"]
    (0.9, 't', 0.1, {'a': 'r1:t', 'b': 'r2:t'})
    """
    raw_names = doc.get("names")
    names: dict[str, Any] = raw_names if isinstance(raw_names, dict) else {}
    tasks = []
    for task, body in (doc.get("tasks") or {}).items():
        if not isinstance(body, dict):
            continue
        tasks.append(
            {
                "task": task,
                "kind": body.get("kind"),
                "paired": body.get("paired"),
                "n": body.get("n"),
                "n_a": body.get("n_a"),
                "n_b": body.get("n_b"),
                "metrics": [_metric_view(m) for m in body.get("metrics") or () if isinstance(m, dict)],
                "prompts_differ": body.get("prompts_differ"),
                "flips": flips_view(body.get("flips")),
            }
        )
    return {
        "run": run_id,
        "run_name": run_name,
        "name": name,
        "a": doc.get("a"),
        "b": doc.get("b"),
        "names": {"a": names.get("a") or doc.get("a"), "b": names.get("b") or doc.get("b")},
        "ci": doc.get("ci"),
        "resamples": doc.get("resamples"),
        "adjust": doc.get("adjust"),
        "family": doc.get("family"),
        "tasks": tasks,
    }


def comparison_documents(run_id: str, run_name: str, run_dir: Path) -> list[dict[str, Any]]:
    """The comparison documents stored by one run (``evals/<name>/comparison.json``), reduced."""
    root = run_dir / "evals"
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        path = folder / "comparison.json"
        if not path.is_file():
            continue
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise LedgerError(f"{path}: a comparison document must be a JSON object")
        out.append(comparison_view(doc, run_id, run_name, folder.name))
    return out


def group_summaries(infos: Sequence[RunInfo]) -> list[dict[str, Any]]:
    """Mean/std/min/max of each headline value over the runs of every group with >= 2 runs.

    >>> from labledger.store.ledger import RunInfo
    >>> def info(i, acc):
    ...     return RunInfo(id=i, name=i, group="g", tags=[], status="finished", started=float(len(i)),
    ...                    ended=None, host=None, pid=None, git_commit=None, git_dirty=None, error=None,
    ...                    summary={"headline": {"acc": acc}})
    >>> [g] = group_summaries([info("a", 0.5), info("bb", 0.7)])
    >>> m = g["metrics"][0]
    >>> m["key"], m["n"], round(m["mean"], 3), round(m["std"], 4), m["min"], m["max"]
    ('acc', 2, 0.6, 0.1414, 0.5, 0.7)
    """
    groups: dict[str, list[RunInfo]] = {}
    for info in infos:
        if info.group:
            groups.setdefault(info.group, []).append(info)
    out = []
    for group in sorted(groups):
        runs = sorted(groups[group], key=lambda i: (i.started or 0, i.id))
        if len(runs) < 2:
            continue
        keys: list[str] = []
        for info in runs:
            for k, v in ((info.summary or {}).get("headline") or {}).items():
                if _num(v) is not None and k not in keys:
                    keys.append(k)
        metrics = []
        for k in keys:
            values = [[info.id, _num(((info.summary or {}).get("headline") or {}).get(k))] for info in runs]
            nums = [v for _, v in values if isinstance(v, float)]
            metrics.append(
                {
                    "key": k,
                    "n": len(nums),
                    "values": values,
                    "mean": statistics.fmean(nums),
                    "std": statistics.stdev(nums) if len(nums) >= 2 else None,
                    "min": min(nums),
                    "max": max(nums),
                }
            )
        out.append({"group": group, "runs": [{"id": i.id, "name": i.name} for i in runs], "metrics": metrics})
    return out


def compare_payload(
    ledger: Ledger,
    infos: Sequence[RunInfo],
    readable: dict[str, Path],
    paired_test: Callable[..., Any] | None,
    warnings: list[str],
    holders: Collection[str] | None = None,
) -> dict[str, Any]:
    """Everything ``compare.html`` shows. ``readable`` maps the site's readable runs to their folders;
    ``holders``: the runs known to hold comparison documents (the others' ``evals`` folders are not
    looked into; ``None``: every run's is).

    >>> import tempfile, labledger
    >>> book = labledger.open_ledger(tempfile.mkdtemp(), create=True)
    >>> sorted(compare_payload(book, [], {}, None, []))
    ['comparisons', 'group_definition', 'groups', 'tables']
    """
    documents: list[dict[str, Any]] = []
    for info in infos:
        if info.id not in readable or (holders is not None and info.id not in holders):
            continue
        try:
            documents.extend(comparison_documents(info.id, info.name, readable[info.id]))
        except (LedgerError, OSError, ValueError) as exc:
            warnings.append(f"run {info.id} ({info.name}): comparison documents left out: {exc}")
    tables = version_tables(ledger, paired_test, warnings)
    groups = group_summaries([i for i in infos if i.id in readable])
    return {"tables": tables, "comparisons": documents, "groups": groups, "group_definition": GROUP_DEFINITION}
