"""Metrics of a numeric field the result rows carry beside the prediction: cost, tokens, latency.

A results row may carry ``cost``, ``tokens_in``, ``tokens_out``, ``latency_ms`` (inspect_ai,
lm-eval and HELM report them; any other numeric field works the same). ``field_mean`` is their mean
over the items that carry the field, ``field_total`` their sum over all items; both are means of
per-item values, so they get the same bootstrap intervals over items or clusters as accuracy, and
``compare`` gives a paired interval of A - B on the same items (a cost-accuracy comparison of two
runs is ``compare A B --metric accuracy --metric mean_cost``). Short names: ``mean_cost``,
``total_cost``, ``mean_latency_ms``, ``mean_tokens_in``, ``mean_tokens_out``, ``total_tokens_in``,
``total_tokens_out``.

>>> field_mean(values=[0.5, None, 1.5]), field_total(values=[0.5, None, 1.5])
(1.0, 2.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics.entry import Metric
from labledger.metrics.prepared import MeanPrepared

#: The task kinds a row field can be read from: all of them.
KINDS = ("classification", "binary", "regression", "ranking", "sets", "match")
#: The fields harnesses report per item, that the short names cover.
USAGE_FIELDS = ("cost", "tokens_in", "tokens_out", "latency_ms")


def field_values(values: Sequence[Any], field: str) -> tuple[np.ndarray, np.ndarray]:
    """``(values as float64 with 0 where missing, whether each item carries one)`` of a row field;
    a value that is not a number raises :class:`~labledger.errors.MetricInputError` naming it.

    >>> v, has = field_values([1, None, 2.5], "cost"); v.tolist(), has.tolist()
    ([1.0, 0.0, 2.5], [True, False, True])
    """
    out = np.zeros(len(values))
    has = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise MetricInputError(f"field '{field}' must hold numbers; item {i + 1} has {v!r}")
        out[i], has[i] = v, True
    if not np.isfinite(out).all():
        raise MetricInputError(f"field '{field}' must hold finite numbers")
    return out, has


def field_prepared(name: str, params: dict[str, Any], values: Sequence[Any]) -> MeanPrepared:
    """A :class:`~labledger.metrics.prepared.MeanPrepared` of ``field_mean`` (the items that carry
    the field) or ``field_total`` (n x the mean over all items, missing as 0)."""
    field = params.get("field")
    if not field:
        raise MetricInputError(f"{name} needs the field: {name}:field=cost (or mean_cost, mean_latency_ms, ...)")
    v, has = field_values(values, str(field))
    if not has.any():
        raise MetricInputError(f"no item carries the field '{field}'")
    n = len(v)
    if name == "field_mean":
        return MeanPrepared(metric=name, params=params, n=n, n_used=int(has.sum()), values=v, mask=has)
    if name == "field_total":
        return MeanPrepared(metric=name, params=params, n=n, n_used=n, values=v, post=lambda m: m * n)
    raise MetricInputError(f"{name} is not a field metric")


def field_mean(*, values: Sequence[Any], gold: Any = None, field: str = "values") -> float:
    """Mean of the numbers in ``values`` (``None``: the item does not carry the field); ``gold`` is
    not used (the field is the item's own)."""
    v, has = field_values(values, field)
    return float(v[has].mean()) if has.any() else float("nan")


def field_total(*, values: Sequence[Any], gold: Any = None, field: str = "values") -> float:
    """Sum of the numbers in ``values`` (``None`` counts 0); ``gold`` is not used."""
    return float(field_values(values, field)[0].sum())


def _prep(name: str) -> Any:
    def prep(*, values: Sequence[Any], gold: Any = None, **params: Any) -> MeanPrepared:
        return field_prepared(name, params, values)

    return prep


_DEFS = {
    "field_mean": "Mean of the rows' numeric field {field} over the items that carry it (cost, tokens, "
    "latency: lower is better); n_used counts those items.",
    "field_total": "Sum over the items of the rows' numeric field {field} (an item without it counts 0): "
    "n times its mean over all items (lower is better).",
}

METRICS: list[Metric] = [
    Metric(
        name=name,
        definition=definition,
        higher_is_better=False,
        needs="fields",
        kinds=KINDS,
        prepare=_prep(name),
        fn=field_mean if name == "field_mean" else field_total,
        params={"field": None},
        strategy="mean",
    )
    for name, definition in _DEFS.items()
]

__all__ = ["KINDS", "METRICS", "USAGE_FIELDS", "field_mean", "field_prepared", "field_total", "field_values"]
