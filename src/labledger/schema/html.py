"""Notebook HTML of the typed documents (their ``_repr_html_``): evaluation, comparison,
calibration report and version table as small tables with their intervals and definitions.

Rendered from the documents alone (no I/O), self-contained (inline style, no script, no network),
and every string escaped, so a task, label or model named ``<script>`` shows as text.

>>> from labledger.schema.documents import ComparisonDoc
>>> page = ComparisonDoc(a="<a>.jsonl", b="b.jsonl", ci=0.95, resamples=0, seed=0, tasks={})._repr_html_()
>>> "&lt;a&gt;.jsonl" in page and "<a>" not in page
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from labledger.schema.values import ci_label

if TYPE_CHECKING:
    from labledger.schema.documents import CalibrationDoc, ComparisonDoc, EvaluationDoc, VersionTableDoc

_STYLE = "font-family:sans-serif;font-size:12px"
_TABLE = 'style="border-collapse:collapse;margin:4px 0 10px"'
_CELL = "padding:2px 8px;border-bottom:1px solid #ddd;text-align:left"


def num(v: Any, digits: int = 4) -> str:
    """A number as shown in the tables (``-`` for none, ``nan`` kept visible).

    >>> num(0.123456), num(None), num(3), num(float("nan"))
    ('0.1235', '-', '3', 'nan')
    """
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.{digits}g}" if abs(v) >= 1e4 else f"{v:.{digits}f}"
    return str(v)


def interval(low: Any, high: Any) -> str:
    """``[low, high]``, or ``-`` when there is no interval.

    >>> interval(0.1, 0.25), interval(None, None)
    ('[0.1000, 0.2500]', '-')
    """
    if low is None and high is None:
        return "-"
    return f"[{num(low)}, {num(high)}]"


def table(head: Sequence[str], rows: Iterable[Sequence[Any]], *, titles: Sequence[str | None] = ()) -> str:
    """An HTML table; every cell escaped. ``titles``: a hover text per row (the metric definitions).

    >>> table(["a"], [["<b>"]])
    '<table style="border-collapse:collapse;margin:4px 0 10px"><tr><th style="padding:2px 8px;border-bottom:1px solid #ddd;text-align:left">a</th></tr><tr><td style="padding:2px 8px;border-bottom:1px solid #ddd;text-align:left">&lt;b&gt;</td></tr></table>'
    """
    titles = list(titles)
    out = [f"<table {_TABLE}><tr>", *(f'<th style="{_CELL}">{escape(str(h))}</th>' for h in head), "</tr>"]
    for i, row in enumerate(rows):
        title = titles[i] if i < len(titles) else None
        out.append(f'<tr title="{escape(title)}">' if title else "<tr>")
        out.extend(f'<td style="{_CELL}">{escape(c if isinstance(c, str) else num(c))}</td>' for c in row)
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _wrap(kind: str, title: str, body: list[str]) -> str:
    return f'<div class="labledger-{kind}" style="{_STYLE}"><h4>{escape(title)}</h4>{"".join(body)}</div>'


def _definitions(pairs: Iterable[tuple[str, str | None]]) -> str:
    seen: dict[str, str] = {}
    for name, text in pairs:
        if text and name not in seen:
            seen[name] = text
    if not seen:
        return ""
    items = "".join(f"<li><b>{escape(k)}</b>: {escape(v)}</li>" for k, v in seen.items())
    return f'<details><summary>Definitions</summary><ul style="margin:2px 0">{items}</ul></details>'


def evaluation_html(doc: EvaluationDoc) -> str:
    """An evaluation: one table per task (value, CI, n), its slices, the suite mean, definitions."""
    label = ci_label(doc.ci)
    body = [f"<p>{escape(doc.source)}: {doc.n:,} rows, {doc.resamples:,} resamples, seed {doc.seed}</p>"]
    defs: list[tuple[str, str | None]] = []
    for name, task in doc.tasks.items():
        headline = f", headline {task.headline}" if task.headline else ""
        body.append(f"<h5>{escape(name)} ({escape(task.kind)}, n = {task.n:,}{escape(headline)})</h5>")
        body.append(
            table(
                ["metric", "value", label, "n", "note"],
                [[m.key, m.value, interval(m.ci_low, m.ci_high), m.n, m.warning or ""] for m in task.metrics],
                titles=[m.definition for m in task.metrics],
            )
        )
        defs.extend((m.key, m.definition) for m in task.metrics)
        for field, groups in (task.slices or {}).items():
            keys = list(dict.fromkeys(m.key for g in groups.values() for m in g.metrics))
            rows = []
            for value, group in groups.items():
                by_key = {m.key: m for m in group.metrics}
                cells = [
                    f"{num(by_key[k].value)} {interval(by_key[k].ci_low, by_key[k].ci_high)}" if k in by_key else "-"
                    for k in keys
                ]
                rows.append([value, group.n, *cells])
            body.append(f"<p>by {escape(field)} (value {escape(label)})</p>" + table([field, "n", *keys], rows))
    if doc.suite is not None:
        s = doc.suite
        body.append(
            "<h5>Suite mean</h5>"
            + table(
                ["metric", "value", ci_label(s.ci), "tasks", "excluded"],
                [[s.metric, s.value, interval(s.ci_low, s.ci_high), s.n_tasks, ", ".join(s.excluded)]],
            )
        )
        defs.append((s.metric, s.definition))
    body.append(_definitions(defs))
    return _wrap("evaluation", "Evaluation", body)


def comparison_html(doc: ComparisonDoc) -> str:
    """A comparison: A, B, A - B with its CI, p and adjusted p per task and metric, definitions."""
    names = doc.names or {}
    a, b = names.get("a") or doc.a, names.get("b") or doc.b
    adjust = f"; p adjusted by {doc.adjust} over {doc.family}" if doc.adjust and doc.family else ""
    body = [f"<p>A = {escape(a)}, B = {escape(b)}; {doc.resamples:,} resamples, seed {doc.seed}{escape(adjust)}</p>"]
    defs: list[tuple[str, str | None]] = []
    label = ci_label(doc.ci)
    for name, task in doc.tasks.items():
        paired = "paired" if task.paired else "unpaired"
        body.append(f"<h5>{escape(name)} ({escape(task.kind)}, {paired}, n = {task.n_a:,} / {task.n_b:,})</h5>")
        body.append(
            table(
                ["metric", "A", "B", "A - B", label, "p", "p adjusted", "note"],
                [
                    [m.key, m.a, m.b, m.diff, interval(m.ci_low, m.ci_high), m.p_value, m.p_adjusted, m.warning or ""]
                    for m in task.metrics
                ],
                titles=[m.definition for m in task.metrics],
            )
        )
        defs.extend((m.key, m.definition) for m in task.metrics)
    body.append(_definitions(defs))
    return _wrap("comparison", "Comparison", body)


def calibration_html(doc: CalibrationDoc) -> str:
    """A calibration report: its headline table (raw, calibrated, the paired difference), definitions."""
    label = ci_label(doc.ci)
    body = [f"<p>{escape(doc.source)}: n = {doc.n:,}, {doc.resamples:,} resamples, seed {doc.seed}</p>"]
    rows = [
        [
            r.task,
            r.method,
            r.metric,
            r.variant,
            r.fitted,
            r.raw,
            r.calibrated,
            r.diff,
            interval(r.ci_low, r.ci_high),
            r.p_value,
            r.n,
            "yes" if r.honest else "no",
        ]
        for r in doc.table
    ]
    head = ["task", "method", "metric", "variant", "fitted on", "raw", "calibrated", "diff", label, "p", "n", "honest"]
    body.append(table(head, rows))
    body.append(_definitions(sorted(doc.definitions.items())))
    return _wrap("calibration", "Calibration report", body)


def version_table_html(doc: VersionTableDoc) -> str:
    """A version table: benchmarks x columns (value and CI), the delta with its mark, the mean row."""
    delta = doc.delta is not None
    head = ["category", "benchmark", "metric", *doc.columns] + (
        ["delta", "delta CI", "p adjusted", ""] if delta else []
    )
    rows: list[list[Any]] = []
    for r in doc.rows:
        cells: list[Any] = []
        for col in doc.columns:
            ci = (r.ci or {}).get(col)
            cells.append(num(r.values.get(col)) + (f" {interval(ci[0], ci[1])}" if ci else ""))
        extra: list[Any] = (
            [r.delta, interval(*(r.delta_ci or [None, None])), r.p_adjusted, r.significance or ""] if delta else []
        )
        rows.append([r.category, r.benchmark, r.metric_id, *cells, *extra])
    mean = doc.mean
    tail: list[Any] = [mean.delta, "", "", ""] if delta else []
    rows.append(["", f"mean ({mean.n})", "", *(num(mean.values.get(c)) for c in doc.columns), *tail])
    body = [table(head, rows)]
    body.extend(f'<p style="color:#a60">{escape(w)}</p>' for w in doc.warnings)
    body.append(f"<p>{escape(doc.definition)}</p>")
    return _wrap("version-table", f"Version table: {doc.suite}", body)
