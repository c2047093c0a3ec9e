"""Regression metrics, including the multimodal-sentiment family of seed 003 (pure numpy, no I/O).

The sentiment metrics turn real-valued gold/pred into labels, then score those labels:

- ``has0_acc`` / ``has0_f1``: labels ``gold >= 0`` vs ``pred >= 0`` (negative vs non-negative, zero
  included); accuracy / weighted F1 (scikit-learn ``f1_score(y_true, y_pred, average="weighted")``).
- ``non0_acc`` / ``non0_f1``: only items with ``gold != 0``; labels ``gold > 0`` vs ``pred > 0``.
- ``zero_f1``: labels ``round(gold) == 0`` vs ``round(pred) == 0`` (numpy rounding: half to even);
  weighted F1 of those is-zero labels.
- ``acc5`` / ``acc7``: clip both to [-2, 2] / [-3, 3], round (half to even), accuracy.

Pearson and Spearman are nan when either side is constant (as scipy).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics._inputs import numbers, same_length
from labledger.metrics.classification import label_prepared
from labledger.metrics.entry import Metric
from labledger.metrics.prepared import MeanPrepared, Prepared, Strategy, TablePrepared, WeightsFunction, WeightsPrepared

KINDS = ("regression",)


def _values(gold: Any, pred: Any) -> tuple[np.ndarray, np.ndarray]:
    g = numbers(gold, "gold")
    p = numbers(pred, "pred")
    same_length(gold=g, pred=p)
    return g, p


def _unit_scale(c: np.ndarray) -> np.ndarray:
    """``c`` times the power of two that brings its largest magnitude into [0.5, 1): exact, so the
    correlation is unchanged bit for bit, and squares of tiny deviations (1e-169) do not underflow
    to a false "constant" (nor huge ones overflow)."""
    m = float(np.max(np.abs(c))) if len(c) else 0.0
    return np.ldexp(c, -math.frexp(m)[1]) if 0.0 < m < math.inf else c


def _pearson_w(x: np.ndarray, y: np.ndarray) -> WeightsFunction:
    xc = _unit_scale(x - x.mean()) if len(x) else x
    yc = _unit_scale(y - y.mean()) if len(y) else y
    xx, yy, xy = xc * xc, yc * yc, xc * yc

    def fn(w: np.ndarray, exchangeable: bool = False) -> np.ndarray:
        sw = w.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mx = (w @ xc) / sw
            my = (w @ yc) / sw
            cov = (w @ xy) / sw - mx * my
            vx = (w @ xx) / sw - mx * mx
            vy = (w @ yy) / sw - my * my
            # a side is constant when its spread is at rounding level
            tiny = 1e-13 * np.maximum((w @ xx) / sw, np.finfo(float).tiny)
            tiny_y = 1e-13 * np.maximum((w @ yy) / sw, np.finfo(float).tiny)
            ok = (vx > tiny) & (vy > tiny_y)
            r = np.where(ok, cov / np.sqrt(np.where(ok, vx * vy, 1.0)), math.nan)
        return np.clip(r, -1.0, 1.0)

    return fn


def _midranks_w(x: np.ndarray) -> Any:
    """A function of weights (B, n) giving each item's weighted mid-rank (as if repeated w times)."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    n = len(x)
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]]) if n else np.zeros(0, np.int64)
    group_of_sorted = np.cumsum(np.r_[True, xs[1:] != xs[:-1]]) - 1 if n else np.zeros(0, np.int64)
    group = np.empty(n, dtype=np.int64)
    group[order] = group_of_sorted

    def ranks(w: Any) -> Any:
        ws = w[:, order]
        gw = np.add.reduceat(ws, starts, axis=1)
        before = np.cumsum(gw, axis=1) - gw
        mid = before + (gw + 1.0) / 2.0
        return mid[:, group]

    return ranks


def _spearman_w(x: np.ndarray, y: np.ndarray) -> WeightsFunction:
    rx, ry = _midranks_w(x), _midranks_w(y)

    def fn(w: np.ndarray, exchangeable: bool = False) -> np.ndarray:
        a, b = rx(w), ry(w)
        sw = w.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ma = np.einsum("ij,ij->i", w, a) / sw
            mb = np.einsum("ij,ij->i", w, b) / sw
            ac = a - ma[:, None]
            bc = b - mb[:, None]
            cov = np.einsum("ij,ij,ij->i", w, ac, bc)
            va = np.einsum("ij,ij,ij->i", w, ac, ac)
            vb = np.einsum("ij,ij,ij->i", w, bc, bc)
            ok = (va > 0) & (vb > 0)
            r = np.where(ok, cov / np.sqrt(np.where(ok, va * vb, 1.0)), math.nan)
        return np.clip(r, -1.0, 1.0)

    return fn


def regression_prepared(name: str, params: dict[str, Any], gold: np.ndarray, pred: np.ndarray) -> Prepared:
    """A :class:`Prepared` for regression metric ``name`` on float arrays."""
    n = len(gold)

    def mean(values: np.ndarray, post: Callable[[np.ndarray], np.ndarray] | None = None) -> MeanPrepared:
        return MeanPrepared(metric=name, params=params, n=n, n_used=n, values=values, post=post)

    def weights(from_weights: WeightsFunction) -> WeightsPrepared:
        return WeightsPrepared(metric=name, params=params, n=n, n_used=n, from_weights=from_weights)

    if name == "mae":
        return mean(np.abs(pred - gold))
    if name == "mean":
        return mean(np.asarray(pred, dtype=np.float64))
    if name == "rmse":
        return mean((pred - gold) ** 2, np.sqrt)
    if name == "pearson":
        return weights(_pearson_w(gold, pred))
    if name == "spearman":
        return weights(_spearman_w(gold, pred))
    if name in ("acc5", "acc7"):
        lim = 2.0 if name == "acc5" else 3.0
        hit = np.round(np.clip(pred, -lim, lim)) == np.round(np.clip(gold, -lim, lim))
        return mean(hit.astype(np.float64))
    if name in ("has0_acc", "has0_f1"):
        g, p = (gold >= 0).astype(np.int64), (pred >= 0).astype(np.int64)
    elif name in ("non0_acc", "non0_f1"):
        keep = gold != 0
        g = np.where(keep, (gold > 0).astype(np.int64), -1)
        p = (pred > 0).astype(np.int64)
    elif name == "zero_f1":
        g, p = (np.round(gold) == 0).astype(np.int64), (np.round(pred) == 0).astype(np.int64)
    else:
        raise MetricInputError(f"{name} is not a regression metric")
    inner = "accuracy" if name.endswith("_acc") else "f1"
    inner_params = {} if inner == "accuracy" else {"average": "weighted", "zero_division": 0.0}
    inner_prep = label_prepared(inner, inner_params, np.maximum(g, 0), p, (0, 1))
    return TablePrepared(
        metric=name,
        params=params,
        n=n,
        n_used=int((g >= 0).sum()),
        from_tables=inner_prep.from_tables,
        n_cells=inner_prep.n_cells,
        cells=np.where(g >= 0, inner_prep.get_cells(), -1),
    )


def _public(name: str) -> Callable[..., float]:
    def fn(*, gold: Any, pred: Any, sample_weight: Any = None) -> float:
        g, p = _values(gold, pred)
        if sample_weight is not None:
            w = np.asarray(sample_weight)
            if w.shape == g.shape:  # frequency weights: an item of weight 0 is not there at all
                keep = w != 0
                g, p, sample_weight = g[keep], p[keep], w[keep]
        return float(regression_prepared(name, {}, g, p).value(sample_weight))

    fn.__name__ = name
    return fn


def _prep(name: str) -> Callable[..., Prepared]:
    def prep(*, gold: Any, pred: Any) -> Prepared:
        g, p = _values(gold, pred)
        return regression_prepared(name, {}, g, p)

    return prep


mae = _public("mae")
mae.__doc__ = """Mean absolute error ``mean |pred - gold|``.

    >>> mae(gold=[1.0, -1.0], pred=[0.5, -1.0])
    0.25
    """
rmse = _public("rmse")
rmse.__doc__ = """Root mean squared error ``sqrt(mean (pred - gold)^2)``.

    >>> rmse(gold=[0.0, 0.0], pred=[3.0, 4.0]) == (12.5) ** 0.5
    True
    """
pearson = _public("pearson")
pearson.__doc__ = """Pearson correlation of gold and pred (nan when either is constant).

    >>> round(pearson(gold=[1.0, 2.0, 3.0], pred=[1.0, 2.5, 2.9]), 4)
    0.9484
    """
spearman = _public("spearman")
spearman.__doc__ = """Spearman rank correlation (Pearson of mid-ranks; nan when either is constant).

    >>> spearman(gold=[1.0, 2.0, 3.0], pred=[0.1, 0.5, 0.4])
    0.5
    """
has0_acc = _public("has0_acc")
has0_acc.__doc__ = """Accuracy of ``pred >= 0`` against ``gold >= 0``.

    >>> has0_acc(gold=[-1.0, 0.0, 2.0], pred=[-0.2, -0.1, 1.0])
    0.6666666666666666
    """
has0_f1 = _public("has0_f1")
has0_f1.__doc__ = """Weighted F1 of ``pred >= 0`` against ``gold >= 0`` (y_true = gold).

    >>> round(has0_f1(gold=[-1.0, 0.0, 2.0], pred=[-0.2, -0.1, 1.0]), 4)
    0.6667
    """
non0_acc = _public("non0_acc")
non0_acc.__doc__ = """Accuracy of ``pred > 0`` against ``gold > 0`` over items with ``gold != 0``.

    >>> non0_acc(gold=[-1.0, 0.0, 2.0], pred=[-0.2, 3.0, 1.0])
    1.0
    """
non0_f1 = _public("non0_f1")
non0_f1.__doc__ = """Weighted F1 of ``pred > 0`` against ``gold > 0`` over items with ``gold != 0``.

    >>> non0_f1(gold=[-1.0, 0.0, 2.0], pred=[-0.2, 3.0, 1.0])
    1.0
    """
zero_f1 = _public("zero_f1")
zero_f1.__doc__ = """Weighted F1 of ``round(pred) == 0`` against ``round(gold) == 0``.

    >>> zero_f1(gold=[0.2, 1.4, -2.0], pred=[0.4, 0.2, -1.6])
    0.6666666666666666
    """
acc5 = _public("acc5")
acc5.__doc__ = """Accuracy after clipping to [-2, 2] and rounding: ``round(clip(pred)) == round(clip(gold))``.

    >>> acc5(gold=[2.6, -0.4], pred=[1.7, 0.6])
    0.5
    """
acc7 = _public("acc7")
acc7.__doc__ = """Accuracy after clipping to [-3, 3] and rounding.

    >>> acc7(gold=[2.6, -0.4], pred=[1.7, 0.6])
    0.0
    """

mean = _public("mean")
mean.__doc__ = """Mean of ``pred``: the per-item scores a harness gave (gold, the best score, is not used).

    >>> mean(gold=[1.0, 1.0, 1.0], pred=[1.0, 0.5, 0.0])
    0.5
    """

_DEFS: dict[str, tuple[str, bool, Strategy]] = {
    "mean": (
        "Mean over items of pred, the per-item score an evaluation harness gave (gold is not used).",
        True,
        "mean",
    ),
    "mae": ("Mean absolute error: mean over items of |pred - gold|.", False, "mean"),
    "rmse": ("Root mean squared error: sqrt(mean over items of (pred - gold)^2).", False, "mean"),
    "pearson": ("Pearson correlation between gold and pred; nan when either is constant.", True, "weights"),
    "spearman": (
        "Spearman rank correlation: Pearson correlation of the mid-ranks of gold and of pred; nan when "
        "either is constant.",
        True,
        "weights",
    ),
    "has0_acc": (
        "Accuracy of the binary labels pred >= 0 against gold >= 0 (negative vs non-negative, zero "
        "counted as non-negative), over all items.",
        True,
        "table",
    ),
    "has0_f1": (
        "Weighted F1 (per-label F1 weighted by gold support, y_true = gold) of the binary labels "
        "pred >= 0 against gold >= 0, over all items.",
        True,
        "table",
    ),
    "non0_acc": (
        "Accuracy of the sign labels pred > 0 against gold > 0, over the items with gold != 0 only.",
        True,
        "table",
    ),
    "non0_f1": (
        "Weighted F1 (per-label F1 weighted by gold support, y_true = gold) of the sign labels pred > 0 "
        "against gold > 0, over the items with gold != 0 only.",
        True,
        "table",
    ),
    "zero_f1": (
        "Weighted F1 (per-label F1 weighted by gold support, y_true = gold) of the binary is-zero labels "
        "round(pred) == 0 against round(gold) == 0, rounding half to even, over all items.",
        True,
        "table",
    ),
    "acc5": ("Accuracy of round(clip(pred, -2, 2)) == round(clip(gold, -2, 2)), rounding half to even.", True, "mean"),
    "acc7": ("Accuracy of round(clip(pred, -3, 3)) == round(clip(gold, -3, 3)), rounding half to even.", True, "mean"),
}

#: This module's metrics (labledger.metrics.registry builds the registry from them).
METRICS: list[Metric] = [
    Metric(
        name=_name,
        definition=_definition,
        higher_is_better=_hib,
        needs="values",
        kinds=KINDS,
        prepare=_prep(_name),
        fn=globals()[_name],
        strategy=_strategy,
        undefined="nan" if _name in ("pearson", "spearman") else "",
    )
    for _name, (_definition, _hib, _strategy) in _DEFS.items()
]

__all__ = [
    "METRICS",
    "acc5",
    "acc7",
    "has0_acc",
    "has0_f1",
    "mae",
    "mean",
    "non0_acc",
    "non0_f1",
    "pearson",
    "regression_prepared",
    "rmse",
    "spearman",
    "zero_f1",
]
