"""Result rows with a repeat index (inspect's epochs, best-of-k samples): count questions, not attempts.

Rows that share ``task`` and ``id`` and differ by ``epoch`` (or ``sample``) are split by repeat, each
repeat's per-item values of a mean metric (accuracy, exact match, log loss...) are computed with the
registry's definition, and they are reduced per item (``mean``, or ``max`` = best of k, ``min``)
before any interval. The document keeps K and n and the variance decomposition (between items,
within items; Miller 2024, section 3).

>>> rows = [{"id": i, "task": "t", "gold": "y", "pred": "y" if (i + e) % 3 else "n", "epoch": e}
...         for i in range(40) for e in range(3)]
>>> doc = evaluate_repeats(rows, metrics=["exact_match"], resamples=200)
>>> m = doc["tasks"]["t"]["metrics"][0]
>>> m["k"], m["n"], m["reduction"], round(m["value"], 4)
(3, 40, 'mean', 0.6667)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from labledger.errors import MetricInputError, RecordError
from labledger.inputs.results import REPEAT_FIELDS, ResultSet


def _by_repeat(rs: ResultSet) -> dict[Any, ResultSet]:
    """A set read with ``repeats=True`` split into one set per repeat value (in order of first line)."""
    keys = {
        name: [repr((type(v).__name__, v)) for v in ([] if td.repeat is None else td.repeat.tolist())]
        for name, td in rs.tasks.items()
    }
    first: dict[str, tuple[int, Any]] = {}
    for name, td in rs.tasks.items():
        values = [] if td.repeat is None else td.repeat.tolist()
        for key, v, line in zip(keys[name], values, td.lines.tolist()):
            if key not in first or line < first[key][0]:
                first[key] = (line, v)
    out: dict[Any, ResultSet] = {}
    for key, (_, v) in sorted(first.items(), key=lambda kv: kv[1][0]):
        tasks = {}
        for name, td in rs.tasks.items():
            mask = np.asarray([k == key for k in keys[name]], dtype=bool)
            if mask.any():
                sub = td.subset(mask)
                sub.repeat = None
                tasks[name] = sub
        out[v] = ResultSet(tasks, source=rs.source)
    return out


def _rows(source: Any) -> list[dict[str, Any]]:
    if isinstance(source, (str, Path)):
        from labledger.inputs.results import rows_in

        return [row for _, row in rows_in(Path(source).read_bytes(), str(source))]
    return list(source)


def repeat_field(rows: Iterable[dict[str, Any]]) -> str | None:
    """The repeat field the rows carry (``epoch`` or ``sample``), or None."""
    rows = list(rows)
    for f in REPEAT_FIELDS:
        if rows and all(isinstance(r, dict) and f in r for r in rows):
            return f
    return None


def evaluate_repeats(
    source: Any,
    *,
    metrics: Sequence[str] = ("accuracy",),
    field: str | None = None,
    reduction: str = "mean",
    ci: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-item reduced values of mean metrics over repeated rows, with intervals over items.

    ``source``: rows, a results file, or a :class:`ResultSet` read with ``repeats=True`` (its
    ``repeat_field`` is used; the file is then read once, by the columnar reader).
    """
    from labledger.analysis.intervals import item_values
    from labledger.analysis.tasks import prepare_task, task_params
    from labledger.analysis.threads import chunk_map
    from labledger.inputs.results import load
    from labledger.metrics.prepared import MeanPrepared
    from labledger.metrics.registry import parse_metric
    from labledger.metrics.resample import Interval, bootstrap_samples, interval
    from labledger.metrics.stats import coverage_note, mean_interval, reduce_repeats

    sets: dict[Any, ResultSet]
    if isinstance(source, ResultSet) and source.repeat_field is not None and field in (None, source.repeat_field):
        field = source.repeat_field
        sets = _by_repeat(source)
    else:
        rows = _rows(source)
        field = field or repeat_field(rows)
        if field is None:
            raise RecordError(f"no repeat field: every row needs one of {', '.join(REPEAT_FIELDS)}", field="epoch")
        by_repeat: dict[Any, list[dict[str, Any]]] = {}
        for r in rows:
            by_repeat.setdefault(r[field], []).append({k: v for k, v in r.items() if k != field})
        sets = {k: load(v) for k, v in by_repeat.items()}
    tasks = list(dict.fromkeys(t for rs in sets.values() for t in rs))
    # builtins of a schema.RepeatsDoc (decode(doc, type=RepeatsDoc) types them)
    doc: dict[str, Any] = {"kind": "repeats", "schema_version": 2, "repeat_field": field, "ci": ci, "tasks": {}}
    for task in tasks:
        entries: list[dict[str, Any]] = []
        for name in metrics:
            spec = parse_metric(name)
            ids: list[str] = []
            vals: list[float] = []
            groups: dict[str, Any] = {}
            for rs in sets.values():
                if task not in rs:
                    continue
                td = rs[task]
                prep = prepare_task(spec.metric, task_params(spec.metric, dict(spec.params), td), td)
                item = item_values(prep)
                if item is None or item[1] is not None:
                    raise MetricInputError(f"repeats are reduced per item for mean metrics only; got '{name}'")
                ids.extend(str(i) for i in td.ids.tolist())
                vals.extend(item[0].tolist())
                if td.group is not None:
                    groups.update(zip((str(i) for i in td.ids.tolist()), td.group.tolist()))
            red = reduce_repeats(ids, vals, how=reduction)
            v = np.asarray(red["values"], dtype=np.float64)
            g = np.asarray([groups[i] for i in red["items"]], dtype=np.int64) if groups else None
            mean = MeanPrepared(metric=spec.metric.name, params={}, n=len(v), n_used=len(v), values=v)
            draws = bootstrap_samples(mean, resamples=resamples, seed=[seed, len(entries)], groups=g, run=chunk_map)
            iv = interval(mean, mean.value(), draws, ci=ci, resamples=resamples, groups=g)
            if not isinstance(iv, Interval):  # a mean is a scalar metric
                raise MetricInputError(f"repeats are reduced per item for scalar metrics only; got '{name}'")
            entry = {
                "metric": spec.metric.name,
                "value": float(v.mean()) if len(v) else None,
                "ci_low": iv.low,
                "ci_high": iv.high,
                "method": iv.method + f"; per-item {reduction} over repeats first",
                "analytic": mean_interval(v, groups=g, ci=ci),
                "reduction": reduction,
                "k": red["k"],
                "n": red["n"],
                "n_scores": red["n_scores"],
                "between": red["between"],
                "within": red["within"],
            }
            note = coverage_note(iv.clusters if iv.clusters is not None else red["n"], clusters=iv.clusters is not None)
            if note:
                entry["warning"] = note
            entries.append(entry)
        doc["tasks"][task] = {"metrics": entries}
    return doc


__all__ = ["REPEAT_FIELDS", "evaluate_repeats", "repeat_field"]
