"""What differs between two runs: config (dotted keys), environment, data, scalar summaries and
stored evaluations, with a paired comparison of result sets whose items match (issue 12).

Only differences are reported; equal values are left out. Read from the index (fields) and each
run's ``run.json``; result sets are compared through :func:`labledger.compare` (a paired bootstrap
when both runs scored the same items).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from labledger.errors import ComparisonError, LedgerError
from labledger.store.fields import flatten
from labledger.store.index import index_fields

#: Sections of a diff, in the order they are shown.
SECTIONS = ("config", "environment", "data", "scalars", "evaluations")


def _changes(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, _MISSING), b.get(key, _MISSING)
        if _same(va, vb):
            continue
        row: dict[str, Any] = {"key": key, "a": _shown(va), "b": _shown(vb)}
        if _number(va) and _number(vb):
            row["delta"] = vb - va
        if va is _MISSING or vb is _MISSING:
            row["only"] = "a" if vb is _MISSING else "b"
        out.append(row)
    return out


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


_MISSING = _Missing()


def _same(a: Any, b: Any) -> bool:
    if _number(a) and _number(b):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shown(v: Any) -> Any:
    return None if v is _MISSING else v


def _environment(meta: dict[str, Any]) -> dict[str, Any]:
    git = meta.get("git") or {}
    out: dict[str, Any] = {
        "python": meta.get("python"),
        "platform": meta.get("platform"),
        "host": meta.get("host"),
        "user": meta.get("user"),
        "git.commit": git.get("commit"),
        "git.dirty": git.get("dirty"),
        "git.branch": git.get("branch"),
    }
    for name, version in (meta.get("packages") or {}).items():
        out[f"packages.{name}"] = version
    return {k: v for k, v in out.items() if v is not None}


def _data(book: Any, view: Any) -> dict[str, Any]:
    config = view.config or {}
    out: dict[str, Any] = {}
    mixture = config.get("mixture") if isinstance(config, dict) else None
    if isinstance(mixture, dict):
        out.update({f"mixture.{k}": v for k, v in flatten(mixture)})
    for name in view.results_names():
        meta_path = view.dir / "evals" / name / "meta.json"
        try:
            meta = orjson.loads(meta_path.read_bytes()) if meta_path.exists() else {}
        except (OSError, orjson.JSONDecodeError):
            meta = {}
        out[f"results.{name}.rows"] = meta.get("rows", meta.get("n"))  # (its sha256 covers the predictions:
        # not data; whether two result sets hold the same items is the comparison's paired or not)
    return out


def _distinct_evaluations(fields: dict[str, Any]) -> dict[str, Any]:
    """The ``eval.*`` fields less the second names of each value: a per-task key whose set holds one
    task (``eval.<set>.<metric>`` is there), and a stored key whose short form (the one ``eval``
    prints, :func:`labledger.store.fields.eval_fields`) is there.

    >>> _distinct_evaluations({"t.a.f1[average=macro,zero_division=0]": 1, "t.a.f1[average=macro]": 1,
    ...     "t.f1[average=macro,zero_division=0]": 1, "t.f1[average=macro]": 1})
    {'t.f1[average=macro]': 1}
    """
    from labledger.schema.ids import MetricId

    out = {}
    for key, value in fields.items():
        head, bracket, params = key.partition("[")
        parts = head.split(".")
        if len(parts) == 3 and f"{parts[0]}.{parts[2]}{bracket}{params}" in fields:
            continue  # the set's only task: the set-level key says it
        if bracket:
            try:
                short = MetricId.parse(f"{parts[-1]}[{params}").short
            except LedgerError:
                short = None
            if short is not None and short != f"{parts[-1]}[{params}" and ".".join([*parts[:-1], short]) in fields:
                continue
        out[key] = value
    return out


def _fields(book: Any, run_id: str) -> dict[str, Any]:
    found = index_fields(book, [run_id]).get(run_id)
    return found.fields if found is not None else {}


def run_sides(book: Any, view: Any) -> dict[str, dict[str, Any]]:
    """The values of one run that :func:`diff_runs` compares, section by section (the static site
    writes them per run and its diff view compares two of them the same way).

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("a", config={"model": {"hidden": 32}}, ledger=d) as run:
    ...     run.log(1, loss=0.5)
    >>> book = labledger.open_ledger(d)
    >>> run_sides(book, book.run("a"))["config"]
    {'model.hidden': 32}
    """
    fields = _fields(book, view.id)

    def part(prefix: str) -> dict[str, Any]:
        return {k[len(prefix) :]: v for k, v in fields.items() if k.startswith(prefix)}

    return {
        "config": dict(flatten(view.config or {})),
        "environment": _environment(view.meta),
        "data": _data(book, view),
        "scalars": part("scalars."),
        "evaluations": _distinct_evaluations(part("eval.")),
    }


def diff_runs(book: Any, a: str, b: str, *, compare_results: bool = True, resamples: int = 1000) -> dict[str, Any]:
    """Everything that differs between runs ``a`` and ``b`` (ids, names or ``name@K``), as a document:
    ``{"a", "b", "config", "environment", "data", "scalars", "evaluations", "comparisons"}``; each
    section is a list of ``{"key", "a", "b"[, "delta"][, "only"]}``.

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> for h in (32, 128):
    ...     with labledger.start_run(f"mlp-h{h}", config={"model": {"hidden": h}, "lr": 0.1}, ledger=d) as run:
    ...         run.log(1, loss=1.0 / h)
    >>> doc = diff_runs(labledger.open_ledger(d), "mlp-h32", "mlp-h128")
    >>> [(c["key"], c["a"], c["b"]) for c in doc["config"]]
    [('model.hidden', 32, 128)]
    """
    va, vb = book.run(a), book.run(b)
    sa, sb = run_sides(book, va), run_sides(book, vb)
    doc: dict[str, Any] = {
        "a": {"id": va.id, "name": va.name},
        "b": {"id": vb.id, "name": vb.name},
        **{section: _changes(sa[section], sb[section]) for section in SECTIONS},
        "comparisons": [],
    }
    if compare_results:
        doc["comparisons"] = run_comparisons(va, vb, resamples=resamples)
    return doc


def run_comparisons(va: Any, vb: Any, *, resamples: int) -> list[dict[str, Any]]:
    """The ``comparisons`` of :func:`diff_runs`: each result set both runs (views) stored, compared
    through :func:`labledger.compare` (B against A), or a note saying why it was not. Each metric has
    ``p`` (two-sided, per comparison: below 0.05 exactly when the 95% CI excludes 0) and ``p_adjusted``
    (Holm over the metrics and tasks of that result set, as ``compare`` adjusts; ``adjust`` and
    ``family`` say so). A result set imported from an evaluation harness is compared on the
    harness's own metrics (:func:`~labledger.analysis.harness.set_metrics`: ``accuracy`` for
    lm-eval's ``acc``, ``mean`` for a scorer), not on every registry default of its row kind, and
    ``harness`` names the harness.

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> for flip in (2, 3):
    ...     with labledger.start_run(f"r{flip}", ledger=d) as run:
    ...         _ = run.log_results("test", [{"id": f"x{i}", "task": "t", "gold": i % 2, "pred": int(i % flip == 0)} for i in range(30)])
    >>> book = labledger.open_ledger(d)
    >>> [(c["results"], c["paired"]) for c in run_comparisons(book.run("r2"), book.run("r3"), resamples=100)]
    [('test', True)]
    """
    from labledger.analysis.evaluation import compare
    from labledger.analysis.harness import harness_meta, set_metrics

    out = []
    for name in sorted(set(va.results_names()) & set(vb.results_names())):
        entry: dict[str, Any] = {"results": name}
        meta = harness_meta(va.results_path(name))
        metrics = set_metrics(va.results_path(name))
        if meta:
            entry["harness"] = meta.get("name")
        try:
            if metrics == {}:  # a harness set with no metric labledger recomputes
                raise ComparisonError("the harness's metrics of this set are not recomputed from its rows")
            cmp = compare(str(vb.results_path(name)), str(va.results_path(name)), metrics=metrics, resamples=resamples)
        except ComparisonError as exc:
            entry["paired"] = False
            entry["note"] = f"not compared: {str(exc).splitlines()[0]}"
            out.append(entry)
            continue
        except LedgerError as exc:
            entry["paired"] = False
            entry["note"] = f"not compared: {exc}"
            out.append(entry)
            continue
        entry["paired"] = True
        rows = []
        # compare(B, A): the document's A is run B, so its a/b swap back and diff is B - A
        for task, body in cmp.doc.tasks.items():
            for m in body.metrics:
                rows.append(
                    {
                        "task": task,
                        "metric": m.key,
                        "a": m.b,
                        "b": m.a,
                        "diff": m.diff,
                        "ci_low": m.ci_low,
                        "ci_high": m.ci_high,
                        "p": m.p_value,
                        "p_adjusted": m.p_adjusted,
                        "n": m.n,
                        "method": m.method,
                    }
                )
        entry["metrics"] = rows
        entry["adjust"] = cmp.doc.adjust
        entry["family"] = cmp.doc.family
        out.append(entry)
    return out
