"""The rows of the index's ``metric_values`` table that a stored document gives (``Ledger.save_evaluation``).

Apart from :mod:`labledger.store.ledger` so that opening a ledger (``labledger runs``) loads no
msgspec and no document types: only storing an evaluation needs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import orjson

from labledger.schema import CalibrationDoc, Document, EvaluationDoc


def iter_metric_values(document: Document | dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    """(task, slice, metric, params, value, ci_low, ci_high, n, definition) rows of a document:
    every scalar value of an evaluation (tasks and slices) or a calibration report, and the
    ``tasks.<task>.metrics`` entries of any other stored document (an imported report).

    >>> list(iter_metric_values({"tasks": {"t": {"metrics": [{"metric": "f1", "value": 0.5}]}}}))
    [('t', '', 'f1', '{}', 0.5, None, None, None, None)]
    """
    if isinstance(document, (EvaluationDoc, CalibrationDoc)):
        tasks: dict[str, Any] = document.tasks  # both: task -> body with .metrics and .slices
        for task, body in tasks.items():
            yield from _metric_rows(task, "", body.metrics)
            for fld, values in (body.slices or {}).items():
                for val, sbody in values.items():
                    yield from _metric_rows(task, f"{fld}={val}", sbody.metrics)
    elif isinstance(document, dict) and isinstance(document.get("tasks"), dict):
        for task, other in document["tasks"].items():
            entries = other.get("metrics") if isinstance(other, dict) else None
            if isinstance(entries, list):
                scalars = [
                    m
                    for m in entries
                    if isinstance(m, dict)
                    and isinstance(m.get("metric"), str)
                    and isinstance(m.get("value"), (int, float))
                    and not isinstance(m.get("value"), bool)
                ]
                yield from _metric_rows(task, "", [decode_value(m) for m in scalars])


def decode_value(m: dict[str, Any]) -> _Scalar:
    """A calibration slice's value entry as a typed scalar."""
    return msgspec.convert(m, _Scalar, strict=False)


class _Scalar(msgspec.Struct, kw_only=True):
    metric: str
    params: dict[str, Any] = {}
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    definition: str | None = None


def _metric_rows(task: str, slice_: str, metrics: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    for m in metrics:
        if m.value is None:
            continue  # undefined values and tables (confusion matrices, per-class) live in the document only
        yield (
            task,
            slice_,
            m.metric,
            orjson.dumps(m.params, option=orjson.OPT_SORT_KEYS).decode(),
            m.value,
            m.ci_low,
            m.ci_high,
            m.n,
            m.definition,
        )
