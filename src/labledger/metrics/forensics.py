"""Metric forensics: which binary confusion matrices could have produced the recorded numbers?

Seed 003 lost its predictions, and its weighted F1 had been recorded with scikit-learn's arguments
swapped: ``f1_score(pred, truth, average="weighted")``. Per-class F1 is symmetric in the swap, but
the weights become the PREDICTED class counts instead of the true ones. Given the true class
counts (``support``), the recorded accuracy and the recorded weighted F1, every integer matrix

    tp = gold positive, predicted positive     fn = gold positive, predicted negative
    fp = gold negative, predicted positive     tn = gold negative, predicted negative

with ``tp + fn = POS`` and ``fp + tn = NEG`` is checked: for each number of correct predictions
``c = tp + tn`` whose accuracy ``c / n`` rounds to the recorded one, each split of ``c`` between the
classes. That is at most ``n + 1`` matrices per accepted ``c``: an O(n) enumeration, vectorised.

A recorded value ``r`` with ``d`` decimals accepts a computed value ``x`` when
``|x - r| <= 0.5 * 10**-d + 1e-9``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from labledger.errors import ForensicsError

__all__ = ["ConfusionCandidate", "Reconstruction", "reconstruct_confusion", "weighted_f1"]

#: Slack added to the rounding half-width, for float error in the recorded values.
EPSILON = 1e-9


@dataclass(frozen=True)
class ConfusionCandidate:
    """One binary confusion matrix consistent with the recorded numbers."""

    tp: int
    fn: int
    fp: int
    tn: int
    accuracy: float
    weighted_f1_swapped: float
    weighted_f1: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "fn": self.fn,
            "fp": self.fp,
            "tn": self.tn,
            "accuracy": self.accuracy,
            "weighted_f1_swapped": self.weighted_f1_swapped,
            "weighted_f1": self.weighted_f1,
        }


@dataclass
class Reconstruction:
    """All candidate matrices and the range of the correctly computed weighted F1 over them."""

    support: tuple[int, int]
    accuracy: float
    recorded_f1: float
    swapped: bool
    decimals: int
    accuracy_decimals: int
    candidates: list[ConfusionCandidate] = field(default_factory=list)

    @property
    def weighted_f1_min(self) -> float | None:
        return min((c.weighted_f1 for c in self.candidates), default=None)

    @property
    def weighted_f1_max(self) -> float | None:
        return max((c.weighted_f1 for c in self.candidates), default=None)

    @property
    def definition(self) -> str:
        kind = (
            "f1_score(pred, truth, average='weighted'): per-class F1 weighted by the PREDICTED "
            "class counts (arguments swapped)"
            if self.swapped
            else "f1_score(truth, pred, average='weighted'): per-class F1 weighted by the true counts"
        )
        return (
            f"recorded weighted F1 = {kind}; weighted_f1 = the correct f1_score(truth, pred, "
            f"average='weighted'); a recorded value with d decimals accepts |x - r| <= "
            f"0.5 * 10^-d + {EPSILON:g}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "support": {"positive": self.support[0], "negative": self.support[1]},
            "accuracy": self.accuracy,
            "accuracy_decimals": self.accuracy_decimals,
            "recorded_weighted_f1": self.recorded_f1,
            "decimals": self.decimals,
            "swapped": self.swapped,
            "definition": self.definition,
            "n_candidates": len(self.candidates),
            "weighted_f1_min": self.weighted_f1_min,
            "weighted_f1_max": self.weighted_f1_max,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def weighted_f1(*, tp: Any, fn: Any, fp: Any, tn: Any, swapped: bool = False) -> np.ndarray:
    """Weighted F1 of a binary confusion matrix (arrays allowed), as scikit-learn computes it.

    ``swapped=False``: ``f1_score(truth, pred, average="weighted")`` (weights: true counts);
    ``swapped=True``: ``f1_score(pred, truth, average="weighted")`` (weights: predicted counts).
    A class with F1's denominator 0 is absent from both and gets weight 0.

    >>> round(float(weighted_f1(tp=8, fn=2, fp=1, tn=9)), 4)
    0.8496
    >>> round(float(weighted_f1(tp=8, fn=2, fp=1, tn=9, swapped=True)), 4)
    0.8504
    """
    tp, fn, fp, tn = (np.asarray(x, dtype=np.float64) for x in (tp, fn, fp, tn))
    den_pos, den_neg = 2 * tp + fp + fn, 2 * tn + fn + fp
    f_pos = np.divide(2 * tp, den_pos, out=np.zeros(np.broadcast(tp, den_pos).shape), where=den_pos != 0)
    f_neg = np.divide(2 * tn, den_neg, out=np.zeros(np.broadcast(tn, den_neg).shape), where=den_neg != 0)
    if swapped:
        w_pos, w_neg = tp + fp, tn + fn
    else:
        w_pos, w_neg = tp + fn, tn + fp
    total = w_pos + w_neg
    return np.asarray(np.divide(w_pos * f_pos + w_neg * f_neg, total, out=np.zeros(f_pos.shape), where=total != 0))


def _decimals_of(value: float) -> int:
    exp = Decimal(repr(float(value))).as_tuple().exponent
    return max(0, -int(exp))


def reconstruct_confusion(
    *,
    support: tuple[int, int],
    accuracy: float,
    weighted_f1: float,
    swapped: bool = True,
    decimals: int = 4,
    accuracy_decimals: int | None = None,
) -> Reconstruction:
    """Every binary confusion matrix consistent with the recorded accuracy and weighted F1.

    ``support``: (true positives count, true negatives count), i.e. (POS, NEG); ``weighted_f1``:
    the recorded value, computed with the arguments swapped (``swapped=True``) or not;
    ``decimals``: the recorded F1's rounding; ``accuracy_decimals``: the accuracy's, by default the
    number of decimals written in ``accuracy`` (0.973333 -> 6).

    >>> r = reconstruct_confusion(support=(30, 20), accuracy=0.9, weighted_f1=0.9005, decimals=4)
    >>> [(c.tp, c.fn, c.fp, c.tn) for c in r.candidates]
    [(28, 2, 3, 17)]
    >>> round(r.weighted_f1_min, 4)
    0.8995
    """
    try:
        pos, neg = (int(x) for x in support)
    except (TypeError, ValueError):
        raise ForensicsError(f"support must be two counts (POS, NEG); got {support!r}.") from None
    if pos < 0 or neg < 0 or [pos, neg] != [float(x) for x in support]:
        raise ForensicsError(f"support must be two non-negative whole counts; got {support!r}.")
    n = pos + neg
    if n == 0:
        raise ForensicsError("support is (0, 0): there are no items to reconstruct.")
    for name, value in (("accuracy", accuracy), ("weighted F1", weighted_f1)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
            raise ForensicsError(f"The recorded {name} must be a number in [0, 1]; got {value!r}.")
    if not isinstance(decimals, int) or decimals < 0:
        raise ForensicsError(f"decimals must be a whole number >= 0; got {decimals!r}.")
    if accuracy_decimals is None:
        accuracy_decimals = _decimals_of(accuracy)
    elif not isinstance(accuracy_decimals, int) or accuracy_decimals < 0:
        raise ForensicsError(f"accuracy_decimals must be a whole number >= 0; got {accuracy_decimals!r}.")
    tol_acc = 0.5 * 10.0**-accuracy_decimals + EPSILON
    tol_f1 = 0.5 * 10.0**-decimals + EPSILON
    result = Reconstruction(
        support=(pos, neg),
        accuracy=float(accuracy),
        recorded_f1=float(weighted_f1),
        swapped=swapped,
        decimals=decimals,
        accuracy_decimals=accuracy_decimals,
    )
    lo = max(0, math.floor((accuracy - tol_acc) * n) - 1)
    hi = min(n, math.ceil((accuracy + tol_acc) * n) + 1)
    for correct in range(lo, hi + 1):
        acc = correct / n
        if abs(acc - accuracy) > tol_acc:
            continue
        tp = np.arange(max(0, correct - neg), min(pos, correct) + 1)
        tn = correct - tp
        fn, fp = pos - tp, neg - tn
        recorded_kind = _weighted(tp, fn, fp, tn, swapped)
        keep = np.abs(recorded_kind - weighted_f1) <= tol_f1
        correct_f1 = _weighted(tp, fn, fp, tn, False)
        swapped_f1 = _weighted(tp, fn, fp, tn, True)
        for i in np.flatnonzero(keep):
            result.candidates.append(
                ConfusionCandidate(
                    tp=int(tp[i]),
                    fn=int(fn[i]),
                    fp=int(fp[i]),
                    tn=int(tn[i]),
                    accuracy=acc,
                    weighted_f1_swapped=float(swapped_f1[i]),
                    weighted_f1=float(correct_f1[i]),
                )
            )
    return result


def _weighted(tp: Any, fn: Any, fp: Any, tn: Any, swapped: Any) -> Any:
    return weighted_f1(tp=tp, fn=fn, fp=fp, tn=tn, swapped=swapped)
