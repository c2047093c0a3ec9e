"""The benchmark ledger: one entry per (model, suite, benchmark, metric, variant) value, and the
version tables of seed 001 built from it, with a mean row, deltas and significance marks.

Entries come from saved evaluations (with their predictions, so deltas get paired confidence
intervals) or from ``labledger table import`` of CSV, JSONL or a Markdown table like seed 001's.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import orjson

from labledger.errors import LedgerError, RecordError
from labledger.schema import BenchmarkEntry, EvaluationDoc, MetricId, VersionTableDoc, ci_label, decode, format_p
from labledger.schema.documents import VersionDelta, VersionMean, VersionProvenance, VersionRow
from labledger.store.index import add_benchmark_rows, current_benchmark_rows

#: Stated vs recomputed mean rows of an imported table: two roundings to 0.01 points.
ROUNDING_TOLERANCE = 0.0001 + 1e-9
_AGGREGATE = re.compile(r"(\bmean\b|\baverage\b|\bavg\b|평균)", re.I)


#: The benchmark ledger's entries are :class:`labledger.schema.BenchmarkEntry` documents (this name
#: is kept for the callers that import it from here; it is the same type).
Entry = BenchmarkEntry


def _table_metric(text: str) -> tuple[str, dict[str, Any]]:
    """A registry metric and its parameters from a table's label (``Macro-F1`` -> f1, macro)."""
    mid = MetricId.parse(text, table=True)
    return mid.name, mid.param_dict


# -- storage -------------------------------------------------------------------------------------
def entry_origin(e: BenchmarkEntry) -> str | None:
    """Where an entry's value comes from, as one column of a version table should hold only one:
    ``run:<id>`` (a saved evaluation or an imported harness run), ``file:<name>`` (a table imported
    from that file), or None when the entry does not say.

    >>> entry_origin(BenchmarkEntry(model="m", suite="s", benchmark="b", metric="accuracy", value=1.0, run_id="r1"))
    'run:r1'
    >>> entry_origin(BenchmarkEntry(model="m", suite="s", benchmark="b", metric="accuracy", value=1.0, source="t.csv:3"))
    'file:t.csv'
    """
    if e.run_id:
        return f"run:{e.run_id}"
    if e.source and e.source != "evaluation":
        return "file:" + e.source.rsplit(":", 1)[0]
    return None


@dataclass
class ModelReuse:
    """A model name whose column (model, suite, variant) already holds current entries of another
    origin (:func:`entry_origin`) than the entries about to be added."""

    model: str
    suite: str
    variant: str
    held_by: str  #: the origin of the entries the column holds now
    new: str  #: the origin of the entries about to be added
    replaced: list[str]  #: benchmarks the new entries supersede
    kept: list[str]  #: benchmarks of ``held_by`` that stay in the column (it then mixes origins)

    @property
    def column(self) -> str:
        return f"'{self.model}'" + (f" ({self.variant})" if self.variant != "raw" else "") + f" of suite '{self.suite}'"

    def refusal(self, ledger: Any) -> str:
        """The one-line error that refuses the entries."""
        return (
            f"model {self.column} already holds the entries of {describe_origin(ledger, self.held_by)} "
            f"({', '.join(self.replaced + self.kept)}); these are of {describe_origin(ledger, self.new)}: "
            "pass --replace to put them in its place, or choose another model name"
        )

    def replacement(self, ledger: Any) -> str:
        """What adding them anyway did: the benchmarks replaced, and those left to the other origin."""
        held = describe_origin(ledger, self.held_by)
        text = f"model {self.column}: {', '.join(self.replaced) or 'no benchmark'} replaced ({held} before)"
        if self.kept:
            text += (
                f"; {', '.join(self.kept)} still from {held}, so the column mixes two sources "
                "(choose another model name to keep them apart)"
            )
        return text


def describe_origin(ledger: Any, origin: str) -> str:
    """``run <id> (<name>)`` (the id alone when the run is gone) or ``table <file>``."""
    kind, _, what = origin.partition(":")
    if kind != "run":
        return f"table {what}"
    try:
        return f"run {what} ({ledger.run(what).name})"
    except LedgerError:
        return f"run {what}"


def model_reuse(ledger: Any, entries: Iterable[BenchmarkEntry]) -> list[ModelReuse]:
    """The columns (model, suite, variant) of ``entries`` that already hold current entries of
    another origin than theirs (:func:`entry_origin`; entries of unknown origin are never counted),
    e.g. ``eval RUN:test --save ... --model h32`` where h32's entries came from another run."""
    new: dict[tuple[str, str, str], tuple[str, set[str]]] = {}
    for e in entries:
        origin = entry_origin(e)
        if origin is not None:
            new.setdefault((e.model, e.suite, e.variant), (origin, set()))[1].add(e.benchmark)
    if not new:
        return []
    held: dict[tuple[str, str, str, str], list[str]] = {}
    for e in read_entries(ledger, models=sorted({m for m, _, _ in new})):
        key = (e.model, e.suite, e.variant)
        origin = entry_origin(e)
        if key in new and origin is not None and origin != new[key][0]:
            held.setdefault((*key, origin), []).append(e.benchmark)
    return [
        ModelReuse(
            model=m,
            suite=suite,
            variant=variant,
            held_by=origin,
            new=new[(m, suite, variant)][0],
            replaced=[b for b in benchmarks if b in new[(m, suite, variant)][1]],
            kept=[b for b in benchmarks if b not in new[(m, suite, variant)][1]],
        )
        for (m, suite, variant, origin), benchmarks in held.items()
    ]


def refuse_model_reuse(ledger: Any, reuse: Sequence[ModelReuse]) -> None:
    """Raise the one-line :class:`LedgerError` of the first reused column, if any."""
    if reuse:
        more = f" (and {len(reuse) - 1} more column(s))" if len(reuse) > 1 else ""
        raise LedgerError(reuse[0].refusal(ledger) + more)


def mixed_columns(entries: Iterable[BenchmarkEntry]) -> dict[tuple[str, str], dict[str, list[str]]]:
    """The (model, variant) columns whose entries come from more than one origin
    (:func:`entry_origin`): column -> origin -> its benchmarks.

    >>> E = lambda b, r: BenchmarkEntry(model="h32", suite="s", benchmark=b, metric="accuracy", value=1.0, run_id=r)
    >>> mixed_columns([E("digits", "r2"), E("is_eight", "r1")])
    {('h32', 'raw'): {'run:r2': ['digits'], 'run:r1': ['is_eight']}}
    """
    by_col: dict[tuple[str, str], dict[str, list[str]]] = {}
    for e in entries:
        origin = entry_origin(e)
        if origin is not None:
            by_col.setdefault((e.model, e.variant), {}).setdefault(origin, []).append(e.benchmark)
    return {c: origins for c, origins in by_col.items() if len(origins) > 1}


def add_entries(
    ledger,
    entries: Iterable[BenchmarkEntry],
    *,
    replace: bool = True,
    on_replace: Callable[[str], None] | None = None,
) -> int:
    """Add entries in one transaction (all or nothing). Later entries supersede earlier ones with
    the same model, suite, benchmark and variant in tables; nothing is deleted.

    With ``replace=False``, entries whose model name already holds, in the same suite and variant,
    the entries of another run or imported table (:func:`model_reuse`) are refused with a one-line
    :class:`LedgerError` naming both, and nothing is added. With ``replace`` (the default, for
    callers that mean the newest run of a name to be that model), ``on_replace`` is told, one line
    per such column, what was replaced and what stays from the other origin."""
    entries = list(entries)
    reuse = model_reuse(ledger, entries) if (not replace or on_replace is not None) else []
    if not replace:
        refuse_model_reuse(ledger, reuse)
    rows = []
    for e in entries:
        if not isinstance(e.value, (int, float)) or isinstance(e.value, bool) or not math.isfinite(e.value):
            raise RecordError(f"must be a finite number; got {e.value!r} for {e.model}/{e.benchmark}", field="value")
        rows.append(
            (
                e.model,
                e.suite,
                e.benchmark,
                e.category,
                e.metric,
                orjson.dumps(e.params, option=orjson.OPT_SORT_KEYS).decode(),
                e.variant,
                float(e.value),
                e.n,
                e.ci_low,
                e.ci_high,
                e.run_id,
                e.evaluation,
                _stored_path(ledger, e.results_path),
                e.source,
            )
        )
    added = add_benchmark_rows(ledger, rows)
    if on_replace is not None:
        for r in reuse:
            on_replace(r.replacement(ledger))
    return added


def read_entries(
    ledger, *, suite: str | None = None, models: Sequence[str] | None = None, variants: Sequence[str] | None = None
) -> list[BenchmarkEntry]:
    """The current entries (latest per model, suite, benchmark, variant)."""
    out = []
    for d in current_benchmark_rows(ledger, suite=suite, models=models, variants=variants):
        d["params"] = orjson.loads(d["params"])
        d["results_path"] = _found_path(ledger, d["results_path"], d["run_id"], d["evaluation"])
        out.append(BenchmarkEntry(**d))
    return out


def _stored_path(ledger, path: str | None) -> str | None:
    """A results path as the index keeps it: relative to the ledger's folder when it lies inside it,
    so that a ledger copied or moved elsewhere still finds its predictions."""
    if path is None:
        return path
    try:
        return Path(path).resolve().relative_to(Path(ledger.root).resolve()).as_posix()
    except ValueError:
        return path


def _found_path(ledger, path: str | None, run_id: str | None, evaluation: str | None) -> str | None:
    """The file a stored results path names today: a relative one lies in the ledger's folder; an
    absolute one written by an older version (or before the ledger was moved) that no longer exists
    is the entry's own run's result set when that run is here."""
    if path is None:
        return path
    p = Path(path)
    if not p.is_absolute():
        return str(Path(ledger.root) / p)
    if not p.exists() and run_id and evaluation:
        here = Path(ledger.run_dir(run_id)) / "evals" / evaluation / "results.jsonl"
        if here.exists():
            return str(here)
    return path


def entries_from_evaluation(
    document: EvaluationDoc | dict[str, Any],
    *,
    model: str,
    suite: str,
    variant: str = "raw",
    run_id: str | None = None,
    evaluation: str | None = None,
    results_path: str | None = None,
    category: str = "",
) -> list[BenchmarkEntry]:
    """One entry per task of an evaluation document: its headline metric, with n and CI."""
    doc = document if isinstance(document, EvaluationDoc) else decode(document, type=EvaluationDoc)
    out = []
    for task, body in doc.tasks.items():
        m = next((x for x in body.metrics if x.key == body.headline), None)
        if m is None or m.value is None:
            continue
        out.append(
            BenchmarkEntry(
                model=model,
                suite=suite,
                benchmark=task,
                category=category,
                metric=m.metric,
                params=dict(m.params),
                variant=variant,
                value=float(m.value),
                n=m.n,
                ci_low=m.ci_low,
                ci_high=m.ci_high,
                run_id=run_id,
                evaluation=evaluation,
                results_path=results_path,
                source="evaluation",
            )
        )
    return out


def record_evaluation(
    ledger: Any,
    run_ref: str,
    name: str,
    document: EvaluationDoc | dict[str, Any],
    *,
    model: str | None = None,
    suite: str = "public",
    variant: str = "raw",
    results_path: str | None = None,
    replace: bool = True,
    on_replace: Callable[[str], None] | None = None,
) -> Path:
    """``ledger.save_evaluation(run_ref, name, document)``, and with ``model`` each task's headline
    value as a benchmark entry (model, ``suite``, benchmark = task, ``variant``) pointing at this
    evaluation and at ``results_path`` (its predictions, so version tables test deltas on paired items).

    ``replace``/``on_replace`` as :func:`add_entries`: with ``replace=False`` a model name whose
    column holds another run's entries is refused before anything is saved.
    """
    doc = document if isinstance(document, EvaluationDoc) else decode(document, type=EvaluationDoc)
    entries: list[BenchmarkEntry] = []
    if model is not None:
        entries = entries_from_evaluation(
            doc,
            model=model,
            suite=suite,
            variant=variant,
            run_id=ledger.resolve(run_ref),
            evaluation=name,
            results_path=results_path,
        )
        if not replace:
            refuse_model_reuse(ledger, model_reuse(ledger, entries))
    path: Path = ledger.save_evaluation(run_ref, name, doc)
    if entries:
        add_entries(ledger, entries, replace=True, on_replace=on_replace)
    return path


# -- import --------------------------------------------------------------------------------------
@dataclass
class ImportResult:
    entries: list[BenchmarkEntry]
    aggregates: list[dict[str, Any]] = field(default_factory=list)  # stated vs recomputed mean rows
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": [e.to_dict() for e in self.entries],
            "aggregates": self.aggregates,
            "warnings": self.warnings,
        }


def _num(cell: str, *, percent: bool, source: str, line: int, fld: str) -> float | None:
    c = cell.strip().strip("*`").replace(",", "")
    if c in ("", "—", "-", "–", "n/a", "N/A"):
        return None
    is_pct = c.endswith("%")
    try:
        v = float(c.rstrip("%"))
    except ValueError:
        raise RecordError(
            f"must be a number or a percentage; got {cell.strip()!r}", source=source, line=line, field=fld
        ) from None
    return v / 100.0 if (is_pct or percent) else v


def _split_md_row(line: str) -> list[str] | None:
    s = line.strip()
    s = s.replace("\\|", "|")
    if not s.startswith("|"):
        return None
    cells = [c.strip() for c in s.strip("|").split("|")]
    return cells


def import_markdown(
    path: str | Path,
    *,
    suite: str,
    columns: dict[str, str] | None = None,
    category_suites: dict[str, str] | None = None,
) -> ImportResult:
    """Entries from a Markdown table like seed 001's: category, ``Benchmark (Metric)``, model columns.

    ``columns`` maps a header (exactly, or a prefix before a space/parenthesis) to ``model`` or
    ``model:variant``; without it, every column whose cells are percentages is a model named by
    its header. Aggregate rows (mean/average) are not entries: their stated values are compared
    with the recomputed macro mean over the rows above them (``aggregates``). Rows of a category
    listed in ``category_suites`` go to that suite.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    table_rows: list[tuple[int, list[str]]] = []
    for i, line in enumerate(lines, 1):
        cells = _split_md_row(line)
        if cells is None:
            if table_rows:
                break
            continue
        table_rows.append((i, cells))
    if len(table_rows) < 3:
        raise RecordError("no Markdown table found (a header row, a --- row and data rows)", source=str(path))
    header_line, header = table_rows[0]
    body = [(i, c) for i, c in table_rows[1:] if not all(re.fullmatch(r":?-{3,}:?", x) for x in c if x)]
    bench_col = next((j for j, h in enumerate(header) if re.search(r"benchmark|벤치마크|task", h, re.I)), 1)
    cat_col = 0 if bench_col > 0 else None
    model_cols: dict[int, tuple[str, str]] = {}
    for j, h in enumerate(header):
        if j <= bench_col:
            continue
        spec = None
        if columns:
            for key, val in columns.items():
                if spec_matches(h, key):
                    spec = val
                    break
            if spec is None:
                continue
        else:
            sample = [c[j] for _, c in body if j < len(c) and c[j]]
            if not sample or not all(s.strip().endswith("%") or s.strip() in ("—", "-") for s in sample):
                continue
            spec = h
        model, _, variant = spec.partition(":")
        model_cols[j] = (model.strip(), (variant or "raw").strip())
    if not model_cols:
        raise RecordError(
            f"no model columns found in the header {header}; name them with --column HEADER=MODEL",
            source=str(path),
            line=header_line,
        )
    if columns:
        missing = [k for k in columns if not any(spec_matches(h, k) for h in header)]
        if missing:
            raise RecordError(f"column(s) {missing} not in the header {header}", source=str(path), line=header_line)
    entries: list[BenchmarkEntry] = []
    aggregates: list[dict[str, Any]] = []
    category = ""
    block: list[BenchmarkEntry] = []
    for lineno, cells in body:
        if cat_col is not None and cat_col < len(cells) and cells[cat_col]:
            category = cells[cat_col]
        label = cells[bench_col] if bench_col < len(cells) else ""
        this_suite = (category_suites or {}).get(category, suite)
        if _AGGREGATE.search(label) or _AGGREGATE.search(category):
            stated = {}
            for j, (model, variant) in model_cols.items():
                v = (
                    _num(cells[j], percent=False, source=str(path), line=lineno, fld=header[j])
                    if j < len(cells)
                    else None
                )
                if v is not None:
                    vals = [e.value for e in block if e.model == model and e.variant == variant]
                    mean = sum(vals) / len(vals) if vals else None
                    # cells are rounded to 0.01 points: the mean of rounded cells can be off by 0.005
                    # points, and the stated mean by another 0.005 (0.0001 as a fraction)
                    aggregates.append(
                        {
                            "row": label,
                            "line": lineno,
                            "model": model,
                            "variant": variant,
                            "stated": v,
                            "recomputed": mean,
                            "n": len(vals),
                            "difference": None if mean is None else mean - v,
                            "consistent": None if mean is None else abs(mean - v) <= ROUNDING_TOLERANCE,
                        }
                    )
                    stated[header[j]] = v
            block = []
            continue
        m = re.match(r"^(.*?)\s*\(([^()]*)\)\s*$", label)
        bench, metric_text = (m.group(1), m.group(2)) if m else (label, "")
        metric, params = _table_metric(metric_text) if metric_text else ("value", {})
        for j, (model, variant) in model_cols.items():
            if j >= len(cells):
                continue
            v = _num(cells[j], percent=False, source=str(path), line=lineno, fld=header[j])
            if v is None:
                continue
            e = BenchmarkEntry(
                model=model,
                suite=this_suite,
                benchmark=bench.strip(),
                category=category,
                metric=metric,
                params=params,
                variant=variant,
                value=v,
                source=f"{path.name}:{lineno}",
            )
            entries.append(e)
            if this_suite == suite:
                block.append(e)
    return ImportResult(entries=entries, aggregates=aggregates)


def spec_matches(header: str, key: str) -> bool:
    """A header matches a --column key exactly or by its part before a space or parenthesis."""
    return header == key or header.startswith((key + " ", key + "(")) or header.split(" (")[0] == key


def import_records(path: str | Path) -> ImportResult:
    """Entries from CSV or JSONL with keys model, suite, benchmark, category, metric, variant, value (n)."""
    path = Path(path)
    required = ("model", "suite", "benchmark", "metric", "value")
    rows: list[tuple[int, dict[str, Any]]] = []
    if path.suffix.lower() == ".csv":
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            line = path.read_bytes()[: exc.start].count(b"\n") + 1
            raise RecordError(f"not valid UTF-8 (byte {exc.start})", source=str(path), line=line) from None
        except OSError as exc:
            raise RecordError(f"cannot read ({exc.strerror or exc})", source=str(path)) from None
        if text.startswith("\ufeff"):
            raise RecordError(
                "starts with a byte-order mark; save the file as UTF-8 without one", source=str(path), line=1
            )
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            for i, row in enumerate(reader, 2):
                if None in row:
                    raise RecordError("has more cells than the header", source=str(path), line=i)
                rows.append((i, row))
        except csv.Error as exc:  # a field over csv's size limit, a NUL byte, ...
            raise RecordError(f"not valid CSV ({exc})", source=str(path), line=reader.line_num) from None
    else:
        from labledger.store.jsonl import decode_line, iter_lines

        for i, raw in iter_lines(path):
            rows.append((i, decode_line(raw, str(path), i)))
    if not rows:
        raise RecordError("holds no records (an empty table)", source=str(path))
    entries = []
    for i, row in rows:
        # One set of rules for CSV and JSONL: text fields are strings, value a number, n an integer.
        for k in ("model", "suite", "benchmark", "category", "metric", "variant"):
            v = row.get(k)
            if v is not None and not isinstance(v, str):
                raise RecordError(f"must be a string; got {v!r:.60}", source=str(path), line=i, field=k)
        for k in required:
            if row.get(k) in (None, ""):
                raise RecordError("is missing", source=str(path), line=i, field=k)
        value = row["value"]
        if isinstance(value, str):
            value = _num(value, percent=False, source=str(path), line=i, fld="value")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise RecordError(
                f"must be a finite number; got {row['value']!r:.60}", source=str(path), line=i, field="value"
            )
        metric, params = _table_metric(str(row["metric"]))
        if isinstance(row.get("params"), dict):
            params.update(row["params"])
        n = row.get("n")
        if isinstance(n, bool) or (n is not None and not isinstance(n, (int, str))):
            raise RecordError(f"must be an integer; got {n!r:.60}", source=str(path), line=i, field="n")
        try:
            n = int(n) if n not in (None, "") else None
        except ValueError:
            raise RecordError(f"must be an integer; got {n!r:.60}", source=str(path), line=i, field="n") from None
        entries.append(
            BenchmarkEntry(
                model=str(row["model"]),
                suite=str(row["suite"]),
                benchmark=str(row["benchmark"]),
                category=str(row.get("category") or ""),
                metric=metric,
                params=params,
                variant=str(row.get("variant") or "raw"),
                value=float(value),
                n=n,
                source=f"{path.name}:{i}",
            )
        )
    return ImportResult(entries=entries)


# -- version tables ------------------------------------------------------------------------------
@dataclass
class VersionTable:
    """Rows = benchmarks grouped by category; columns = model/variant; a mean row and a delta."""

    suite: str
    columns: list[tuple[str, str]]
    rows: list[dict[str, Any]]
    mean: dict[str, Any]
    delta_from: tuple[str, str] | None
    delta_to: tuple[str, str] | None
    warnings: list[str]
    adjust: str = "holm"
    family: str | None = None
    #: ``{"sha256", "entries", "with_predictions"}`` of the predictions behind the cells
    #: (:func:`predictions_digest`); ``None`` when no cell has stored predictions.
    provenance: dict[str, Any] | None = None

    @staticmethod
    def col_name(col: tuple[str, str]) -> str:
        return col[0] if col[1] == "raw" else f"{col[0]} ({col[1]})"

    #: The level of the paired CIs behind the significance marks (``groups.paired_entry_test``'s).
    ci: float = 0.95

    @property
    def definition(self) -> str:
        """What the mean row, the delta column and its marks mean (only what this table shows)."""
        text = "mean = macro average over the benchmarks present in every column"
        if self.delta_from:
            text += (
                f"; delta = {self.col_name(self.delta_to) if self.delta_to else 'last column'} minus "
                f"{self.col_name(self.delta_from)}, with its paired {ci_label(self.ci).removesuffix(' CI')} bootstrap CI "
                "and p-value (from stored predictions on the same items); '*' marks a delta whose p, adjusted for "
                "the number of deltas tested (see 'family'), is below 0.05, 'n.s.' one whose adjusted p is not, "
                "with its minimum detectable effect at 80% power; no mark = no stored predictions to test"
            )
        if any(r.get("ranking") is not None for r in self.rows):
            text += (
                "; #r [lo–hi] = the column's rank on the benchmark's stored predictions (1 + columns with a better "
                "value) and its rank interval, joint over the row's columns at 95% (paired studentized bootstrap, "
                "step-down max-t over all pairs of the row); '≈1' = not separable from the row's best"
            )
        return text

    def _repr_html_(self) -> str:
        """Notebook display (the document's table, :mod:`labledger.schema.html`)."""
        return self.to_document()._repr_html_()

    def to_document(self) -> VersionTableDoc:
        """The table as a typed :class:`~labledger.schema.VersionTableDoc`."""
        return VersionTableDoc(
            suite=self.suite,
            columns=[self.col_name(c) for c in self.columns],
            rows=[msgspec.convert(r, VersionRow) for r in self.rows],
            mean=msgspec.convert(self.mean, VersionMean),
            delta=None
            if not self.delta_from
            else VersionDelta(
                from_=self.col_name(self.delta_from), to=self.col_name(self.delta_to) if self.delta_to else None
            ),
            warnings=self.warnings,
            definition=self.definition,
            ci=self.ci if self.delta_from else None,
            adjust=self.adjust if self.delta_from else None,
            family=self.family,
            provenance=msgspec.convert(self.provenance, VersionProvenance) if self.provenance else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return self.to_document().to_dict()

    def _cells(self, pct: bool = True):
        def fmt(v):
            return "—" if v is None else (f"{v * 100:.2f}%" if pct else f"{v:.4f}")

        head = ["category", "benchmark (metric)"] + [self.col_name(c) for c in self.columns]
        if self.delta_from and self.delta_to:
            head.append(f"Δ {self.col_name(self.delta_to)} − {self.col_name(self.delta_from)}")
        body = []
        last_cat = None
        for r in self.rows:
            cat = r["category"] if r["category"] != last_cat else ""
            last_cat = r["category"]
            cells = [cat, f"{r['benchmark']} ({r['metric_id']})"] + [
                fmt(r["values"].get(self.col_name(c))) + _rank_mark(r.get("ranking"), self.col_name(c))
                for c in self.columns
            ]
            if self.delta_from:
                d = r.get("delta")
                mark = {"significant": " *", "not significant": " n.s."}.get(r.get("significance") or "", "")
                if mark == " n.s." and r.get("mde") is not None:
                    mark += f" (MDE {r['mde'] * 100:.1f} pp)"
                cells.append("—" if d is None else f"{d * 100:+.2f}pp{mark}")
            body.append(cells)
        n = self.mean["n"]
        mean_cells = ["", f"Mean ({n} benchmark{'' if n == 1 else 's'})"] + [
            fmt(self.mean["values"].get(self.col_name(c))) for c in self.columns
        ]
        if self.delta_from:
            d = self.mean.get("delta")
            mean_cells.append("—" if d is None else f"{d * 100:+.2f}pp")
        body.append(mean_cells)
        return head, body

    def paper_cells(self) -> tuple[list[str], list[list[tuple[str, str]]]]:
        """The table for a paper: header, and per row ``(value, interval)`` text pairs. A value in
        percent with its stored interval; the benchmark label carries its metric and n (each cell
        its own n when the columns differ); the delta its paired interval and mark, and a last
        column the delta's p adjusted over the table's family."""

        def pct(v: float | None, sign: str = "") -> str:
            return "—" if v is None else f"{v * 100:{sign}.2f}"

        def interval(ci: Any, sign: str = "") -> str:
            return "" if not ci or ci[0] is None else f"[{pct(ci[0], sign)}, {pct(ci[1], sign)}]"

        names = [self.col_name(c) for c in self.columns]
        head = ["Category", "Benchmark (metric, n)", *names]
        delta = bool(self.delta_from and self.delta_to)
        if delta:
            head += [f"Δ {self.col_name(self.delta_to)} − {self.col_name(self.delta_from)}", f"p ({self.adjust})"]  # type: ignore[arg-type]
        body: list[list[tuple[str, str]]] = []
        last_cat = None
        for r in self.rows:
            ns = {v for v in r["n"].values() if v is not None}
            label = f"{r['benchmark']} ({r['metric_id']}" + (f", n={ns.pop():,})" if len(ns) == 1 else ")")
            cells = [(r["category"] if r["category"] != last_cat else "", ""), (label, "")]
            last_cat = r["category"]
            for name in names:
                n_own = f" n={r['n'][name]:,}" if len({v for v in r["n"].values() if v is not None}) > 1 else ""
                rank = _rank_mark(r.get("ranking"), name)
                cells.append((pct(r["values"].get(name)), (interval(r["ci"].get(name)) + n_own + rank).strip()))
            if delta:
                mark = {"significant": "*", "not significant": " n.s."}.get(r.get("significance") or "", "")
                if mark == " n.s." and r.get("mde") is not None:
                    mark += f" (MDE {r['mde'] * 100:.1f} pp)"
                cells.append((pct(r.get("delta"), "+") + mark, interval(r.get("delta_ci"), "+")))
                cells.append((format_p(r.get("p_adjusted")) if r.get("p_adjusted") is not None else "—", ""))
            body.append(cells)
        n = self.mean["n"]
        mean = [("", ""), (f"Mean ({n} benchmark{'' if n == 1 else 's'})", "")]
        mean += [(pct(self.mean["values"].get(name)), "") for name in names]
        if delta:
            mean += [(pct(self.mean.get("delta"), "+"), ""), ("", "")]
        body.append(mean)
        return head, body

    def footnote(self) -> str:
        """What a paper's table says under it: values, intervals, the test and its adjustment, and
        the provenance of the predictions."""
        text = "Values in percent; [low, high] = each entry's stored interval; " + self.definition
        if self.family:
            text += f"; deltas tested: {self.family}"
        prov = self.provenance
        if prov:
            text += (
                f". Predictions: sha256 {prov['sha256']} over the stored predictions of {prov['with_predictions']} "
                f"of {prov['entries']} entries (labledger.analysis.benchmarks.predictions_digest)"
            )
        else:
            text += ". No entry kept its predictions: no file recomputes these values"
        return text + "."

    def to_markdown(self) -> str:
        """The table in Markdown, each value with its interval and n, the footnote under it."""
        head, body = self.paper_cells()
        out = io.StringIO()
        out.write("| " + " | ".join(head) + " |\n")
        out.write("| " + " | ".join([":---", ":---"] + ["---:"] * (len(head) - 2)) + " |\n")
        for cells in body:
            shown = [f"{v} {ci}".strip() for v, ci in cells]
            out.write("| " + " | ".join(c.replace("|", "\\|") for c in shown) + " |\n")
        out.write("\n" + self.footnote() + "\n")
        return out.getvalue()

    def to_latex(self) -> str:
        """The table as a LaTeX ``table`` (booktabs): each value with its interval in small type,
        the delta with its interval and mark, its adjusted p, and the footnote under the tabular."""
        head, body = self.paper_cells()
        cols = "ll" + "r" * (len(head) - 2)
        out = io.StringIO()
        out.write(f"% labledger version table, suite {self.suite!r} (needs \\usepackage{{booktabs}})\n")
        out.write("\\begin{table}[t]\n\\centering\n\\small\n")
        out.write(f"\\begin{{tabular}}{{{cols}}}\n\\toprule\n")
        out.write(" & ".join(_tex(h) for h in head) + " \\\\\n\\midrule\n")
        for i, cells in enumerate(body):
            if i == len(body) - 1:
                out.write("\\midrule\n")
            shown = [_tex(v) + (f" {{\\scriptsize {_tex(ci)}}}" if ci else "") for v, ci in cells]
            out.write(" & ".join(shown) + " \\\\\n")
        out.write("\\bottomrule\n\\end{tabular}\n")
        out.write(f"\\par\\smallskip\\footnotesize {_tex(self.footnote())}\n\\end{{table}}\n")
        return out.getvalue()

    def to_csv(self) -> str:
        head, body = self._cells()
        out = io.StringIO()
        w = csv.writer(out)
        w.writerow(head)
        w.writerows(body)
        return out.getvalue()

    def to_html(self) -> str:
        head, body = self._cells()
        e = html.escape
        rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>\n" for cells in body)
        return (
            f'<table class="version-table">\n<thead><tr>{"".join(f"<th>{e(h)}</th>" for h in head)}'
            f"</tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n"
        )


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "Δ": r"$\Delta$",
    "−": r"$-$",
    "≈": r"$\approx$",
    "–": "--",
    "—": "---",
}


def _tex(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (and the table's few symbols in math).

    >>> print(_tex("f1[average=macro] & 5% of $x_1$"))
    f1[average=macro] \\& 5\\% of \\$x\\_1\\$
    """
    return "".join(_TEX.get(ch, ch) for ch in text)


def predictions_digest(entries: Iterable[BenchmarkEntry]) -> dict[str, Any] | None:
    """``{"sha256", "entries", "with_predictions"}``: the sha256 over the sorted lines
    ``benchmark, model, variant, sha256 of the entry's results file`` (tab-separated, one per
    entry that kept its predictions), so that the same predictions give the same digest and a
    table's numbers can be traced to the files that recompute them; ``None`` when no entry kept
    predictions."""
    import hashlib

    from labledger.store.manifest import sha256_file

    lines, total = [], 0
    for e in entries:
        total += 1
        if not e.results_path or not Path(e.results_path).is_file():
            continue
        lines.append(f"{e.benchmark}\t{e.model}\t{e.variant}\t{sha256_file(e.results_path)[0]}\n")
    if not lines:
        return None
    digest = hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()
    return {"sha256": digest, "entries": total, "with_predictions": len(lines)}


def _rank_mark(ranking: Any, column: str) -> str:
    """`` #r [lo–hi]`` (and ``≈1`` when not separable from the best) of a column in a row's ranking."""
    if ranking is None:
        return ""
    for e in ranking.systems:
        if e.name == column:
            return f" #{e.rank} [{e.rank_low}–{e.rank_high}]" + (" ≈1" if e.tied_with_best else "")
    return ""


PairedTest = Callable[[BenchmarkEntry, BenchmarkEntry], dict[str, Any] | None]
#: Ranks a row's entries (named by their columns): ``(RankingDoc, None)`` or ``(None, why not)``
#: (:func:`labledger.analysis.ranking.rank_entries`).
Ranker = Callable[[Sequence[BenchmarkEntry], Sequence[str]], tuple[Any, str | None]]


def version_table(
    entries: Sequence[BenchmarkEntry],
    *,
    suite: str,
    models: Sequence[str],
    variants: Sequence[str] = ("raw",),
    delta_from: str | None = None,
    paired_test: PairedTest | None = None,
    adjust: str = "holm",
    ranker: Ranker | None = None,
) -> VersionTable:
    """Build the table for ``models`` x ``variants`` of ``suite`` (see :class:`VersionTable`).

    ``adjust``: multiplicity adjustment of the deltas' p-values over the tested rows (``holm``,
    ``bh`` or ``none``); the marks use the adjusted p, both are kept (``p_value``, ``p_adjusted``).

    ``ranker`` (``table --ranks``): each row's present columns are ranked on their stored
    predictions (each row its own family: its separations at alpha over its pairs of columns); the
    row's ``ranking`` holds the document, a row that cannot be ranked adds a warning saying why.
    """
    columns = [(m, v) for m in models for v in variants]
    by_key: dict[tuple[str, str, str], BenchmarkEntry] = {}
    for e in entries:
        if e.suite == suite:
            by_key[(e.benchmark, e.model, e.variant)] = e
    present_cols = [c for c in columns if any((b, c[0], c[1]) in by_key for b, _, _ in by_key)]
    mixed = mixed_columns(by_key.values())
    warnings = [
        f"no entries for {VersionTable.col_name(c)} in suite '{suite}'" for c in columns if c not in present_cols
    ]
    warnings += [
        f"column '{VersionTable.col_name(c)}' mixes entries of "
        + " and ".join(f"{o.replace(':', ' ', 1)} ({', '.join(b)})" for o, b in mixed[c].items())
        + "; save each run under its own model name"
        for c in present_cols
        if c in mixed
    ]
    columns = present_cols
    if not columns:
        suites = sorted({e.suite for e in entries})
        which = f"models {list(models)}" if models else "any model"
        raise LedgerError(
            f"no benchmark entries for {which} in suite '{suite}'"
            + (f" (suites with entries: {', '.join(suites)}; pass --suite)" if suites else "")
        )
    benchmarks: list[tuple[str, str]] = []
    for e in entries:
        if (
            e.suite == suite
            and (e.model, e.variant) in columns
            and (e.category, e.benchmark) not in benchmarks
            and not any(b == e.benchmark for _, b in benchmarks)
        ):
            benchmarks.append((e.category, e.benchmark))
    # keep categories together, in first-seen order
    cat_order = list(dict.fromkeys(c for c, _ in benchmarks))
    benchmarks.sort(key=lambda cb: cat_order.index(cb[0]))
    dfrom = dto = None
    if delta_from:
        base_model, _, base_var = delta_from.partition(":")
        dfrom = (base_model, base_var or "raw")
        if dfrom not in columns:
            raise LedgerError(f"--delta-from {delta_from}: no entries for it in suite '{suite}'")
        dto = columns[-1] if columns[-1] != dfrom else None
    rows = []
    common = []
    ci_level = 0.95
    for cat, bench in benchmarks:
        cells = {c: by_key.get((bench, *c)) for c in columns}
        present = [x for x in cells.values() if x is not None]
        metric_ids = sorted({x.metric_id for x in present})
        if len(metric_ids) > 1:
            warnings.append(f"'{bench}' is measured with different metrics across models: {', '.join(metric_ids)}")
        ns = sorted({x.n for x in present if x.n is not None})
        if len(ns) > 1:
            warnings.append(f"'{bench}' has different n across models: {', '.join(map(str, ns))}")
        row: dict[str, Any] = {
            "category": cat,
            "benchmark": bench,
            "metric_id": present[0].metric_id if present else "",
            "values": {VersionTable.col_name(c): (x.value if x else None) for c, x in cells.items()},
            "ci": {
                VersionTable.col_name(c): ([x.ci_low, x.ci_high] if x and x.ci_low is not None else None)
                for c, x in cells.items()
            },
            "n": {VersionTable.col_name(c): (x.n if x else None) for c, x in cells.items()},
        }
        to_entry, from_entry = (cells.get(dto), cells.get(dfrom)) if dfrom and dto else (None, None)
        if to_entry and from_entry:
            row["delta"] = to_entry.value - from_entry.value
            test = paired_test(to_entry, from_entry) if paired_test else None
            if test:
                ci_level = test.get("ci", ci_level)
                row["delta_ci"] = [test["ci_low"], test["ci_high"]]
                row["p_value"] = test.get("p_value")
                row["mde"] = test.get("mde")
                if test.get("warning"):
                    row["warning"] = test["warning"]
        if ranker is not None:
            named = [(VersionTable.col_name(c), x) for c, x in cells.items() if x is not None]
            ranked, why = ranker([x for _, x in named], [name for name, _ in named])
            if ranked is not None:
                row["ranking"] = ranked
            else:
                warnings.append(f"'{bench}' is not ranked: {why}")
        if all(x is not None for x in cells.values()):
            common.append(row)
        else:
            lacking = [VersionTable.col_name(c) for c, x in cells.items() if x is None]
            warnings.append(f"'{bench}' is missing for {', '.join(lacking)}: left out of the mean")
        rows.append(row)
    family = _mark_significance(rows, adjust)
    mean_vals = {}
    for c in columns:
        name = VersionTable.col_name(c)
        vals = [r["values"][name] for r in common]
        mean_vals[name] = sum(vals) / len(vals) if vals else None
    mean = {"n": len(common), "values": mean_vals}
    if dfrom and dto:
        a, b = mean_vals.get(VersionTable.col_name(dto)), mean_vals.get(VersionTable.col_name(dfrom))
        mean["delta"] = None if a is None or b is None else a - b
    return VersionTable(
        suite=suite,
        columns=columns,
        rows=rows,
        mean=mean,
        delta_from=dfrom,
        delta_to=dto,
        warnings=warnings,
        ci=ci_level,
        adjust=adjust,
        family=family,
        provenance=predictions_digest(x for x in by_key.values() if (x.model, x.variant) in columns),
    )


def _mark_significance(rows: list[dict[str, Any]], adjust: str) -> str | None:
    """Adjust the tested rows' p-values as one family; mark each row by its adjusted p (< 0.05)."""
    from labledger.metrics.stats import adjust_p, family_note

    tested = [r for r in rows if r.get("p_value") is not None]
    adjusted = adjust_p([r["p_value"] for r in tested], adjust)
    for r, p in zip(tested, adjusted):
        r["p_adjusted"] = p
        r["significance"] = "significant" if p is not None and p < 0.05 else "not significant"
    return family_note(len(tested), adjust) if tested else None
