"""Binary threshold sweeps from one sort, gated threshold selection, and epoch selection.

An item is predicted positive when ``score >= threshold``. :func:`threshold_sweep` sorts the scores
once; every threshold's confusion counts (overall, per class and per gated slice) are then read off
that order with ``searchsorted`` on the positions of the positives, and ROC-AUC comes from the same
order (Mann-Whitney U with ties counted one half, in exact integers). No metric is recomputed per
threshold.

Thresholds
    ``"0.05:0.95:0.025"`` is the grid ``start + i * step`` for ``i = 0, 1, ...`` up to and including
    ``stop``, computed in decimal arithmetic and rounded once to the nearest double: the report says
    ``0.225`` where ``np.arange`` would give ``0.22499999999999998`` (seed 000), and the threshold in
    the report is exactly the value the scores were compared with. ``"0.3,0.5,0.7"`` is a list and
    ``"all"`` is every distinct score.

Gates
    ``METRIC[TARGET] OP NUMBER`` with ``OP`` one of ``>= > <= <``. ``METRIC`` is ``recall``,
    ``precision``, ``f1`` (of a class: the positive one unless ``TARGET`` names a class),
    ``accuracy``, ``balanced_accuracy`` or ``mcc``. ``TARGET`` is a class (``recall[single_symbol]``),
    a slice (``recall[length=long]``: the metric on the items whose ``slices["length"] == "long"``),
    or both (``recall[single_symbol,length=long]``); without brackets the metric is the overall one.
    Gates compare exact floats (no tolerance).

Bound gates
    ``lower(METRIC[TARGET]) OP NUMBER`` and ``upper(...)``: the gate reads the one-sided
    ``1 - gate_alpha`` Clopper-Pearson bound of a proportion (``recall``, ``precision``,
    ``accuracy``) instead of its point value: ``lower(recall[cross_boundary])>=0.97`` passes where the
    data show recall at least 0.97 with 95% confidence (a threshold whose true recall is below 0.97
    passes with probability at most ``gate_alpha``). The point value and whether it would pass the
    same comparison are reported beside the bound (see :class:`BoundGate`).

Selection
    Among the thresholds that pass every gate, the highest objective wins; ties (equal floats) go to
    the threshold closest to ``center`` (0.5 by default), then to the lowest threshold. When none
    passes, the best ungated threshold is selected by the same rule and the report says so
    (``recall_gate_passed: false``, ``fallback: true``).

Zero division gives 0.0, as scikit-learn's default does; ROC-AUC with one class absent is NaN
(``null`` in JSON).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, TypeAlias

import numpy as np

from labledger.errors import GateError, MetricInputError, UnknownMetricError
from labledger.metrics._inputs import binary_gold
from labledger.metrics.classification import binary_table_metric, roc_auc_sorted, tie_starts
from labledger.metrics.gates import (
    CLASS_METRICS,
    OBJECTIVES,
    Gate,
    check_labels,
    parse_gate,
    slice_mask,
)
from labledger.metrics.kernels import stable_argsort

__all__ = [
    "BOUND_METRICS",
    "OBJECTIVES",
    "BoundGate",
    "EpochSelection",
    "Gate",
    "SweepReport",
    "best_grid_point",
    "epoch_label",
    "evaluate_threshold",
    "parse_bound_gate",
    "parse_gate",
    "parse_thresholds",
    "proportion_bound",
    "select_epoch",
    "threshold_counts",
    "threshold_sweep",
]

#: A slice gate's (field, value): the key of its item mask.
SliceKey: TypeAlias = tuple[str | None, str | None]

#: Largest grid that ``parse_thresholds`` expands (guards against a typo like ``0:1:1e-9``).
MAX_GRID = 1_000_000

# ----------------------------------------------------------------------------------------------
# Parsing thresholds


def parse_thresholds(spec: str | Sequence[float] | np.ndarray) -> np.ndarray | str:
    """Thresholds from a grid spec, a list, or ``"all"``; returns a sorted float array or ``"all"``.

    >>> parse_thresholds("0.05:0.95:0.025").tolist()[6:9]
    [0.2, 0.225, 0.25]
    >>> parse_thresholds("0.7,0.5").tolist()
    [0.5, 0.7]
    >>> parse_thresholds("all")
    'all'
    """
    if isinstance(spec, str):
        text = spec.strip()
        if text.lower() == "all":
            return "all"
        if ":" in text:
            return _grid(text)
        parts = [p for p in text.split(",") if p.strip()]
        values = [_decimal(p, text) for p in parts]
        if not values:
            raise MetricInputError(f"Thresholds '{spec}': expected START:STOP:STEP, a list or 'all'.")
        return np.unique(np.array([float(v) for v in values], dtype=np.float64))
    arr = np.asarray(spec, dtype=np.float64).ravel()
    if arr.size == 0 or not np.isfinite(arr).all():
        raise MetricInputError("Thresholds must be a non-empty list of finite numbers.")
    return np.unique(arr)


def _decimal(text: str, spec: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        raise MetricInputError(
            f"Thresholds '{spec}': '{text.strip()}' is not a finite number; "
            "expected START:STOP:STEP (e.g. 0.05:0.95:0.025), a comma list, or 'all'."
        )
    return value


def _grid(spec: str) -> np.ndarray:
    parts = spec.split(":")
    if len(parts) != 3:
        raise MetricInputError(f"Thresholds '{spec}': a grid is START:STOP:STEP (e.g. 0.05:0.95:0.025).")
    start, stop, step = (_decimal(p, spec) for p in parts)
    if step <= 0:
        raise MetricInputError(f"Thresholds '{spec}': STEP must be > 0; got {step}.")
    if stop < start:
        raise MetricInputError(f"Thresholds '{spec}': STOP ({stop}) is below START ({start}).")
    count = int((stop - start) / step) + 1
    if count > MAX_GRID:
        raise MetricInputError(
            f"Thresholds '{spec}': {count:,} points; at most {MAX_GRID:,} (use 'all' for every score)."
        )
    return np.array([float(start + i * step) for i in range(count)], dtype=np.float64)


# ----------------------------------------------------------------------------------------------
# Bound gates: a gate on a one-sided confidence bound instead of the point value

#: Metrics a bound gate takes: proportions with an exact binomial bound (successes of trials).
BOUND_METRICS: dict[str, str] = {
    "recall": "TP of TP + FN (the class's items)",
    "precision": "TP of TP + FP (the items predicted as the class)",
    "accuracy": "TP + TN of n",
}
_BOUND_RE = re.compile(
    r"^\s*(?P<side>lower|upper)\s*\(\s*(?P<inner>[^()]*?)\s*\)\s*(?P<op>>=|<=|>|<)\s*"
    r"(?P<bound>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


@dataclass(frozen=True)
class BoundGate:
    """A gate on the one-sided ``1 - alpha`` Clopper-Pearson bound of a proportion, e.g.
    ``lower(recall[cross_boundary])>=0.97``: ``gate`` is the same comparison on the point value (its
    column is computed and reported beside), ``side`` which bound (``lower``: the value is at least
    the bound with confidence ``1 - alpha``; ``upper``: at most)."""

    text: str
    side: str
    gate: Gate
    alpha: float = 0.05

    @property
    def metric(self) -> str:
        return self.gate.metric

    @property
    def op(self) -> str:
        return self.gate.op

    @property
    def bound(self) -> float:
        return self.gate.bound

    @property
    def label(self) -> str | None:
        return self.gate.label

    @property
    def field(self) -> str | None:
        return self.gate.field

    @property
    def value(self) -> str | None:
        return self.gate.value

    @property
    def column(self) -> str:
        """The column of the trials that holds the bound, e.g. ``lower(cross_boundary_recall)``."""
        return f"{self.side}({self.gate.column})"

    def passes(self, values: np.ndarray) -> np.ndarray:
        """Element-wise: does each bound satisfy the comparison (NaN, no trials, never does)?"""
        return self.gate.passes(values)

    def __str__(self) -> str:
        return self.text


AnyGate: TypeAlias = Gate | BoundGate


def parse_bound_gate(text: str | Gate | BoundGate, alpha: float = 0.05) -> AnyGate:
    """A gate expression: a point gate (:func:`parse_gate`) or a bound gate ``lower(EXPR) OP NUMBER``
    / ``upper(EXPR) OP NUMBER`` on a proportion (:data:`BOUND_METRICS`) at one-sided level
    ``1 - alpha``.

    >>> g = parse_bound_gate("lower( recall[cross_boundary] ) >= 0.97")
    >>> g.text, g.column, g.gate.column
    ('lower(recall[cross_boundary])>=0.97', 'lower(cross_boundary_recall)', 'cross_boundary_recall')
    >>> parse_bound_gate("f1>0.5").text
    'f1>0.5'
    """
    if isinstance(text, (Gate, BoundGate)):
        return text
    if not (0 < alpha < 0.5):
        raise MetricInputError(f"gate_alpha must be strictly between 0 and 0.5; got {alpha}")
    m = _BOUND_RE.match(str(text))
    if m is None:
        if re.match(r"^\s*(lower|upper)\s*\(", str(text)):
            raise GateError(
                f"Gate '{text}' is malformed: a bound gate is lower(METRIC[TARGET]) OP NUMBER or "
                "upper(METRIC[TARGET]) OP NUMBER (e.g. lower(recall[cross_boundary])>=0.97)."
            )
        return parse_gate(text)
    gate = parse_gate(f"{m['inner']}{m['op']}{m['bound']}")
    if gate.metric not in BOUND_METRICS:
        raise GateError(
            f"Gate '{text}': {m['side']}() takes a proportion with an exact binomial bound "
            f"({', '.join(BOUND_METRICS)}); {gate.metric} has none (gate its point value instead)."
        )
    inner = gate.text[: len(gate.text) - len(m["op"]) - len(m["bound"])]
    return BoundGate(text=f"{m['side']}({inner}){m['op']}{m['bound']}", side=m["side"], gate=gate, alpha=alpha)


def proportion_bound(successes: Any, trials: Any, alpha: float, side: str) -> np.ndarray:
    """The one-sided ``1 - alpha`` Clopper-Pearson bound of ``successes / trials`` (element-wise):
    ``lower`` is the ``alpha`` quantile of Beta(k, m - k + 1) (0 when k = 0), ``upper`` the
    ``1 - alpha`` quantile of Beta(k + 1, m - k) (1 when k = m); NaN where there are no trials.
    Exact: the bound is beyond the true proportion with probability at most ``alpha``.

    >>> proportion_bound([97, 0, 5], [100, 10, 0], 0.05, "lower").round(4).tolist()
    [0.9243, 0.0, nan]
    >>> proportion_bound([100], [100], 0.05, "upper").tolist()
    [1.0]
    """
    from scipy.special import betaincinv

    k = np.asarray(successes, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    out = np.full(np.broadcast(k, m).shape, np.nan)
    ok = m > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        if side == "lower":
            out[ok] = np.where(k[ok] > 0, betaincinv(np.maximum(k[ok], 1), m[ok] - k[ok] + 1, alpha), 0.0)
        elif side == "upper":
            out[ok] = np.where(k[ok] < m[ok], betaincinv(k[ok] + 1, np.maximum(m[ok] - k[ok], 1), 1 - alpha), 1.0)
        else:
            raise MetricInputError(f"side must be 'lower' or 'upper'; got {side!r}")
    return out


def _point_gates(gates: Sequence[AnyGate]) -> tuple[Gate, ...]:
    """The point gates whose columns the sweep computes: each gate, or a bound gate's point form."""
    return tuple(g.gate if isinstance(g, BoundGate) else g for g in gates)


# ----------------------------------------------------------------------------------------------
# Counting from one sort


def _sort_once(
    score: np.ndarray, is_pos: np.ndarray, makers: Mapping[SliceKey, Any]
) -> tuple[np.ndarray, np.ndarray, dict[SliceKey, np.ndarray]]:
    """Sort the scores once; return them with the class flags and each slice mask in that order.

    Masks are made one at a time (``makers``: key -> callable) and only their sorted copies kept,
    so the peak memory is the order, the sorted scores and one byte per item per mask."""
    order = stable_argsort(score)
    y = is_pos[order]
    masks: dict[SliceKey, np.ndarray] = {}
    for key, make in makers.items():
        m = make()
        if m is not None:
            masks[key] = m[order]
        del m
    sorted_score = score[order]
    del order
    return sorted_score, y, masks


def _below(flags: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Number of True values in ``flags[:i]`` for each ``i`` in ``idx``."""
    positions = np.flatnonzero(flags)
    return np.searchsorted(positions, idx, side="left").astype(np.int64)


def _roc_auc_sorted(s: np.ndarray, y: np.ndarray) -> float:
    """ROC-AUC from sorted scores ``s`` and class flags ``y`` in the same order (the registry's kernel)."""
    return roc_auc_sorted(y, tie_starts(s))


def _distinct(s: np.ndarray) -> np.ndarray:
    if s.size == 0:
        return s.copy()
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


@dataclass
class _Counts:
    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray

    def flipped(self) -> _Counts:  # the negative class seen as the positive one
        return _Counts(tp=self.tn, fp=self.fn, fn=self.fp, tn=self.tp)


def _counts(idx: np.ndarray, n: int, n_pos: int, pos_below: np.ndarray) -> _Counts:
    tp = n_pos - pos_below
    predicted = n - idx.astype(np.int64)
    fp = predicted - tp
    fn = pos_below
    tn = (n - n_pos) - fp
    return _Counts(tp=tp, fp=fp, fn=fn, tn=tn)


def _metric(name: str, c: _Counts) -> np.ndarray:
    """``name`` at every threshold, by the registry's table function on the (T, 4) tables; the one
    0/0 it leaves undefined (no item at all, e.g. an empty slice) gives 0.0 here, like the others."""
    if name not in OBJECTIVES:
        raise UnknownMetricError(name, OBJECTIVES)
    tables = np.stack([c.tn, c.fp, c.fn, c.tp], axis=1)  # (gold, pred) over (negative, positive)
    v = binary_table_metric(name)(tables)
    return np.where(np.isnan(v), 0.0, v)


def threshold_counts(score: Any, is_pos: Any, thresholds: Any) -> dict[str, np.ndarray]:
    """Confusion counts ``tp``, ``fp``, ``fn``, ``tn`` of ``score >= t`` at every threshold ``t``.

    The one threshold sweep: the scores are sorted once and every threshold's counts read off that
    order with ``searchsorted`` (calibration's threshold grids use it too).

    >>> c = threshold_counts([0.2, 0.9, 0.4, 0.6], [False, True, True, False], [0.3, 0.5])
    >>> c["tp"].tolist(), c["fp"].tolist()
    ([2, 1], [1, 1])
    """
    s = np.asarray(score, dtype=np.float64)
    y_all = np.asarray(is_pos, dtype=bool)
    thr = np.asarray(thresholds, dtype=np.float64)
    order = stable_argsort(s)
    s_sorted, y = s[order], y_all[order]
    idx = np.searchsorted(s_sorted, thr, side="left")
    c = _counts(idx, int(s.size), int(np.count_nonzero(y)), _below(y, idx))
    return {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn}


def best_grid_point(values: Any, distance: Any, *, higher: bool = True) -> int | None:
    """The one rule for the best grid point: the best value (NaN is never best), ties (equal floats)
    to the smallest ``distance`` (rounded to 1e-12, so 0.3 and 0.7 are equally far from 0.5), then
    to the first. ``None`` when every value is NaN.

    >>> best_grid_point([0.8, 0.9, 0.9], [0.2, 0.2, 0.1]), best_grid_point([0.8, 0.9, 0.9], [0.2, 0.2, 0.2])
    (2, 1)
    """
    v = np.asarray(values, dtype=np.float64)
    ok = ~np.isnan(v)
    if not ok.any():
        return None
    target = v[ok].max() if higher else v[ok].min()
    tied = np.flatnonzero(ok & (v == target))
    dist = np.round(np.asarray(distance, dtype=np.float64)[tied], 12)
    return int(tied[np.argmin(dist)])  # argmin: the first of equal distances


# ----------------------------------------------------------------------------------------------
# Inputs


def _scores(score: Any, n: int, name: str = "score") -> np.ndarray:
    s = np.asarray(score, dtype=np.float64)
    if s.ndim != 1 or s.size != n:
        raise MetricInputError(f"{name} has {s.size} values; gold has {n}.")
    nan = np.isnan(s)
    if nan.any():
        raise MetricInputError(f"{name}[{int(np.flatnonzero(nan)[0])}] is NaN.")
    return s


# ----------------------------------------------------------------------------------------------
# The sweep


@dataclass
class SweepReport:
    """The result of :func:`threshold_sweep`; ``to_dict()`` has seed 000's keys."""

    n: int
    positive: str
    negative: str
    support: dict[str, int]
    objective: str
    gates: tuple[AnyGate, ...]
    center: float
    thresholds_spec: str
    thresholds: np.ndarray
    columns: dict[str, np.ndarray]
    counts: dict[str, np.ndarray]
    passed: np.ndarray
    selected: int
    gate_passed: bool
    definitions: dict[str, str]
    paired_test: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    #: With bound gates: which thresholds pass the same gates on the point values (reported beside).
    point_passed: np.ndarray | None = None

    @property
    def threshold(self) -> float:
        """The selected threshold."""
        return float(self.thresholds[self.selected])

    @property
    def selection_rule(self) -> str:
        return (
            f"highest {self.objective} among the thresholds passing every gate; when none "
            f"passes, highest {self.objective} over all thresholds (marked as a fallback)"
        )

    @property
    def tie_break(self) -> str:
        return (
            f"equal {self.objective} values (exact floats): the threshold closest to "
            f"{self.center:g} wins, then the lowest threshold"
        )

    def row(self, i: int) -> dict[str, Any]:
        """Trial ``i`` as a dict (threshold first, then every column)."""
        out: dict[str, Any] = {"threshold": float(self.thresholds[i])}
        for name, col in self.columns.items():
            out[name] = _clean(col[i])
        if self.gates:
            out["passed_gates"] = bool(self.passed[i])
        if self.point_passed is not None:
            out["passed_point_gates"] = bool(self.point_passed[i])
        return out

    @property
    def trials(self) -> list[dict[str, Any]]:
        return [self.row(i) for i in range(self.thresholds.size)]

    @property
    def selection(self) -> dict[str, Any]:
        i = self.selected
        out = self.row(i)
        out.pop("passed_gates", None)
        out.pop("passed_point_gates", None)
        out["recall_gate_passed"] = bool(self.gate_passed)
        out["gates"] = {g.text: _gate_verdict(g, self.columns, i) for g in self.gates}
        out["confusion"] = {k: int(v[i]) for k, v in self.counts.items()}
        objective = self.columns[self.objective]
        pool = np.flatnonzero(self.passed) if self.gate_passed else np.arange(self.thresholds.size)
        tied = pool[objective[pool] == objective[i]]
        out["tied_thresholds"] = [float(self.thresholds[j]) for j in tied]
        out["n_passing"] = int(np.count_nonzero(self.passed))
        if self.point_passed is not None:
            out["n_passing_point_gates"] = int(np.count_nonzero(self.point_passed))
        out["fallback"] = not self.gate_passed
        out["selected_by"] = (
            f"highest {self.objective} among {out['n_passing']} of {self.thresholds.size} thresholds passing every gate"
            if self.gate_passed and self.gates
            else f"highest {self.objective} over all {self.thresholds.size} thresholds"
            if not self.gates
            else f"fallback: highest {self.objective} over all {self.thresholds.size} thresholds, "
            "ungated, because no threshold passes every gate"
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data (NaN becomes None)."""
        out: dict[str, Any] = {
            "n": self.n,
            "positive": self.positive,
            "negative": self.negative,
            "support": dict(self.support),
            "decision": f"predict '{self.positive}' when score >= threshold (score = P({self.positive}))",
            "thresholds": self.thresholds_spec,
            "objective": self.objective,
            "gates": [g.text for g in self.gates],
            "selection_rule": self.selection_rule,
            "tie_break": self.tie_break,
            "definition": dict(self.definitions),
            "threshold_selection": self.selection,
            "threshold_trials": self.trials,
        }
        if self.paired_test is not None:
            out["paired_test"] = self.paired_test
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def _gate_verdict(g: AnyGate, columns: Mapping[str, np.ndarray], i: int) -> dict[str, Any]:
    """A gate's value and verdict at trial ``i``; a bound gate also has its point value and the
    point gate's verdict beside (``point``, ``point_passed``), its side and its level."""
    out: dict[str, Any] = {
        "value": _clean(columns[g.column][i]),
        "passed": bool(g.passes(columns[g.column][i : i + 1])[0]),
    }
    if isinstance(g, BoundGate):
        point = columns[g.gate.column][i : i + 1]
        out["point"] = _clean(point[0])
        out["point_passed"] = bool(g.gate.passes(point)[0])
        out["bound"] = f"one-sided {1 - g.alpha:.0%} {g.side} bound (Clopper-Pearson)"
    return out


def _clean(x: Any) -> Any:
    if isinstance(x, (np.floating, float)):
        return None if math.isnan(x) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def _definitions(
    positive: str, negative: str, objective: str, columns: Iterable[str], gates: Sequence[AnyGate]
) -> dict[str, str]:
    d = {
        "threshold": f"an item is predicted '{positive}' when score >= threshold, else '{negative}'",
        "accuracy": "(TP + TN) / n",
        "f1": f"F1 of the positive class '{positive}' = 2 TP / (2 TP + FP + FN); 0 when the "
        "denominator is 0 (scikit-learn f1_score(gold, pred, pos_label=positive))",
        "precision": f"TP / (TP + FP) for '{positive}'; 0 when nothing is predicted positive",
        "roc_auc": "area under the ROC curve of the score (Mann-Whitney U / (P * N), ties count one "
        "half; equals scikit-learn roc_auc_score); the same at every threshold",
        f"{negative}_recall": f"recall of '{negative}': share of gold '{negative}' items predicted "
        f"'{negative}' (score < threshold)",
        f"{positive}_recall": f"recall of '{positive}': share of gold '{positive}' items predicted "
        f"'{positive}' (score >= threshold)",
    }
    if objective not in d:
        d[objective] = OBJECTIVES[objective]
    for g in gates:
        point = g.gate if isinstance(g, BoundGate) else g
        cls = point.label or positive
        what = f"{point.metric} of class '{cls}'" if point.metric in CLASS_METRICS else point.metric
        where = f" on the items whose slice {point.field} == '{point.value}'" if point.field else ""
        if point.column not in d:
            d[point.column] = f"{what}{where}: {OBJECTIVES[point.metric]}"
        if isinstance(g, BoundGate) and g.column not in d:
            d[g.column] = (
                f"one-sided {1 - g.alpha:.0%} {g.side} confidence bound of {what}{where} (Clopper-Pearson, exact "
                f"binomial: {BOUND_METRICS[point.metric]}, items independent); null when there are no trials"
            )
    return {k: v for k, v in d.items() if k == "threshold" or k in columns}


def _evaluate(
    s: np.ndarray,
    y: np.ndarray,
    masks: dict[SliceKey, np.ndarray],
    thr: np.ndarray,
    gates: Sequence[AnyGate],
    objective: str,
    positive: str,
    negative: str,
    auc: float,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every column at every threshold from sorted scores ``s`` and flags in the same order."""
    n = int(s.size)
    idx = np.searchsorted(s, thr, side="left")  # items with score < threshold
    n_pos = int(np.count_nonzero(y))
    c = _counts(idx, n, n_pos, _below(y, idx))
    cols: dict[str, np.ndarray] = {
        "accuracy": _metric("accuracy", c),
        "f1": _metric("f1", c),
        "roc_auc": np.full(thr.size, auc),
        f"{negative}_recall": _metric("recall", c.flipped()),
        f"{positive}_recall": _metric("recall", c),
        "precision": _metric("precision", c),
    }
    if objective not in cols:
        cols[objective] = _metric(objective, c)
    slice_counts: dict[SliceKey, _Counts] = {}
    for g in gates:
        point = g.gate if isinstance(g, BoundGate) else g
        if g.column in cols:
            continue
        cc = c
        if point.field is not None:
            key = (point.field, point.value)
            if key not in masks:
                continue
            if key not in slice_counts:
                m = masks[key]
                m_pos = m & y
                slice_counts[key] = _counts(
                    _below(m, idx), int(np.count_nonzero(m)), int(np.count_nonzero(m_pos)), _below(m_pos, idx)
                )
                del m_pos
            cc = slice_counts[key]
        if point.label is not None and point.label != positive:
            cc = cc.flipped()
        if point.column not in cols:
            cols[point.column] = _metric(point.metric, cc)
        if isinstance(g, BoundGate):
            k, trials = _successes(point.metric, cc)
            cols[g.column] = proportion_bound(k, trials, g.alpha, g.side)
    counts = {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn}
    return cols, counts


def _successes(metric: str, c: _Counts) -> tuple[np.ndarray, np.ndarray]:
    """(successes, trials) of a proportion of :data:`BOUND_METRICS` at every threshold."""
    if metric == "recall":
        return c.tp, c.tp + c.fn
    if metric == "precision":
        return c.tp, c.tp + c.fp
    return c.tp + c.tn, c.tp + c.tn + c.fp + c.fn


def _prepare(
    gold: Any,
    score: Any,
    positive: Any,
    negative: Any,
    slices: Mapping[str, Any] | None,
    gates: Sequence[AnyGate],
    strict_slices: bool = True,
) -> tuple[np.ndarray, np.ndarray, dict[SliceKey, Any], Any, Any]:
    is_pos, positive, negative = binary_gold(gold, positive, negative=negative, only_two=True, name="positive")
    n = int(is_pos.size)
    s = _scores(score, n)
    labels = [str(negative), str(positive)]
    gates = _point_gates(gates)
    check_labels(gates, labels, slices)
    makers: dict[SliceKey, Any] = {}
    for g in gates:
        if g.field is not None and (g.field, g.value) not in makers:
            if strict_slices and g.field not in (slices or {}):
                slice_mask(g, slices, n, labels)  # raises naming the known fields
            makers[(g.field, g.value)] = functools.partial(slice_mask, g, slices, n, labels, strict_slices)
    return is_pos, s, makers, positive, negative


def threshold_sweep(
    *,
    gold: Any,
    score: Any,
    thresholds: Any = "0.05:0.95:0.025",
    positive: Any = None,
    negative: Any = None,
    slices: Mapping[str, Any] | None = None,
    gates: Iterable[str | AnyGate] = (),
    objective: str = "f1",
    center: float = 0.5,
    test_gold: Any = None,
    test_score: Any = None,
    test_slices: Mapping[str, Any] | None = None,
    gate_alpha: float = 0.05,
) -> SweepReport:
    """Sweep a decision threshold over binary scores and select one under gates.

    ``gold``: labels (two values); ``score``: P(positive) or any score where higher means positive;
    ``thresholds``: a spec for :func:`parse_thresholds` or a list; ``slices``: ``{field: values}``
    with one value per item, used by slice gates; ``gates``: expressions for :func:`parse_gate`;
    ``objective``: one of :data:`OBJECTIVES`; ``center``: the tie-break point. ``test_gold`` and
    ``test_score`` (and ``test_slices``): a second data set scored at the selected threshold.
    ``gate_alpha``: the one-sided level of bound gates (``lower(...)``, ``upper(...)``; 0.05: 95% bounds).

    >>> r = threshold_sweep(gold=["a", "b", "b", "a"], score=[0.1, 0.8, 0.6, 0.4],
    ...                     positive="b", thresholds="0.3:0.7:0.2", gates=["recall[a]>=1"])
    >>> r.threshold, r.to_dict()["threshold_selection"]["f1"]
    (0.5, 1.0)
    """
    parsed = tuple(parse_bound_gate(g, gate_alpha) for g in gates)
    if objective not in OBJECTIVES:
        raise UnknownMetricError(objective, OBJECTIVES)
    is_pos, s, makers, positive, negative = _prepare(gold, score, positive, negative, slices, parsed)
    n = int(s.size)
    if n == 0:
        raise MetricInputError("threshold_sweep needs at least one item.")
    spec = thresholds if isinstance(thresholds, str) else "list"
    thr = parse_thresholds(thresholds)
    n_pos = int(np.count_nonzero(is_pos))
    s_sorted, y, sorted_masks = _sort_once(s, is_pos, makers)
    if isinstance(thr, str):
        thr = _distinct(s_sorted)
    auc = _roc_auc_sorted(s_sorted, y)
    pos_name, neg_name = str(positive), str(negative)
    cols, counts = _evaluate(s_sorted, y, sorted_masks, thr, parsed, objective, pos_name, neg_name, auc)
    del s_sorted, y, sorted_masks
    passed = np.ones(thr.size, dtype=bool)
    for g in parsed:
        passed &= g.passes(cols[g.column])
    point_passed = None
    if any(isinstance(g, BoundGate) for g in parsed):
        point_passed = np.ones(thr.size, dtype=bool)
        for pg in _point_gates(parsed):
            point_passed &= pg.passes(cols[pg.column])
    gate_passed = bool(passed.any())
    pool = np.flatnonzero(passed) if gate_passed else np.arange(thr.size)
    selected = _select(cols[objective][pool], thr[pool], center)
    selected = int(pool[selected])
    report = SweepReport(
        n=n,
        positive=pos_name,
        negative=neg_name,
        support={neg_name: n - n_pos, pos_name: n_pos},
        objective=objective,
        gates=parsed,
        center=center,
        thresholds_spec=spec,
        thresholds=thr,
        columns=cols,
        counts=counts,
        passed=passed,
        selected=selected,
        gate_passed=gate_passed,
        definitions=_definitions(pos_name, neg_name, objective, ["threshold", *cols], parsed),
        point_passed=point_passed,
    )
    if not gate_passed:
        report.notes.append(
            "No threshold passes every gate; the selection is the best ungated "
            "threshold and must not be used as if it met the gates."
        )
    if test_gold is not None or test_score is not None:
        if test_gold is None or test_score is None:
            raise MetricInputError("A paired test needs both test_gold and test_score.")
        report.paired_test = evaluate_threshold(
            gold=test_gold,
            score=test_score,
            threshold=report.threshold,
            positive=positive,
            negative=negative,
            slices=test_slices,
            gates=parsed,
            objective=objective,
            gate_alpha=gate_alpha,
        )
    return report


def _select(values: np.ndarray, thr: np.ndarray, center: float) -> int:
    """Index of the highest value; ties: closest to center (to 1e-12), then lowest threshold
    (:func:`best_grid_point` on ascending thresholds; all NaN: every threshold is tied)."""
    dist = np.abs(thr - center)
    best = best_grid_point(values, dist)
    return int(np.argmin(np.round(dist, 12))) if best is None else best


def evaluate_threshold(
    *,
    gold: Any,
    score: Any,
    threshold: float,
    positive: Any = None,
    negative: Any = None,
    slices: Mapping[str, Any] | None = None,
    gates: Iterable[str | AnyGate] = (),
    objective: str = "f1",
    gate_alpha: float = 0.05,
) -> dict[str, Any]:
    """The sweep's columns at one threshold (e.g. the selected one applied to a paired test set).

    Slice gates whose field is missing from ``slices`` are skipped and listed under
    ``gates_not_evaluated``. With a bound gate, ``gates`` gives each gate's value and verdict (a
    bound gate's with its point value and the point verdict beside).

    >>> evaluate_threshold(gold=[0, 1, 1, 0], score=[0.2, 0.9, 0.4, 0.6], threshold=0.5)["accuracy"]
    0.5
    """
    parsed = tuple(parse_bound_gate(g, gate_alpha) for g in gates)
    is_pos, s, makers, positive, negative = _prepare(
        gold, score, positive, negative, slices, parsed, strict_slices=False
    )
    if s.size == 0:
        raise MetricInputError("evaluate_threshold needs at least one item.")
    s_sorted, y, masks = _sort_once(s, is_pos, makers)
    thr = np.array([float(threshold)])
    auc = _roc_auc_sorted(s_sorted, y)
    cols, counts = _evaluate(s_sorted, y, masks, thr, parsed, objective, str(positive), str(negative), auc)
    out: dict[str, Any] = {"threshold": float(threshold)}
    out.update({k: _clean(v[0]) for k, v in cols.items()})
    out["n"] = int(s.size)
    out["confusion"] = {k: int(v[0]) for k, v in counts.items()}
    evaluated = [g for g in parsed if g.column in cols]
    if parsed:
        out["recall_gate_passed"] = all(bool(g.passes(cols[g.column])[0]) for g in evaluated)
        missing = [g.text for g in parsed if g.column not in cols]
        if missing:
            out["gates_not_evaluated"] = missing
        if any(isinstance(g, BoundGate) for g in evaluated):
            out["gates"] = {g.text: _gate_verdict(g, cols, 0) for g in evaluated}
    return out


# ----------------------------------------------------------------------------------------------
# Epoch selection


@dataclass
class EpochSelection:
    """The epoch picked from a run's history by one metric."""

    entry: dict[str, Any]
    metric: str
    higher_is_better: bool
    value: float
    epoch: Any
    tied_epochs: list[Any]
    considered: int
    index: int  #: position of the selected entry in the history (0-based)

    @property
    def tie_break(self) -> str:
        """The selection rule in words."""
        best = "highest" if self.higher_is_better else "lowest"
        return f"{best} {self.metric}; ties (equal values) go to the earliest entry"

    @property
    def label(self) -> str:
        """The selected epoch as a person reads it: a whole number, with the history entry (1-based)
        when the recorded epoch is fractional (trainers log ``7.999530102790015`` for the end of
        epoch 8).

        >>> select_epoch([{"epoch": 7.999530102790015, "f1": 0.9}]).label
        '8 (history entry 1, epoch 7.9995)'
        >>> select_epoch([{"epoch": 3.0, "f1": 0.9}]).label
        '3'
        """
        return epoch_label(self.epoch, self.index)

    def to_dict(self) -> dict[str, Any]:
        return {
            "selected": dict(self.entry),
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "value": self.value,
            "epoch": self.epoch,
            "tied_epochs": list(self.tied_epochs),
            "considered": self.considered,
            "index": self.index,
            "tie_break": self.tie_break,
        }


def epoch_label(epoch: Any, index: int) -> str:
    """``epoch`` as a whole number when it is one (or within 0.01 of one, then with the 1-based
    history entry ``index + 1`` and the recorded value), else as recorded.

    >>> epoch_label(2, 1), epoch_label(2.0, 1), epoch_label(1.5, 3)
    ('2', '2', '1.5 (history entry 4)')
    """
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)) or not math.isfinite(epoch):
        return str(epoch)
    whole = round(epoch)
    if epoch == whole:
        return str(int(whole))
    if abs(epoch - whole) < 0.01:
        return f"{int(whole)} (history entry {index + 1}, epoch {epoch:.5g})"
    return f"{epoch:.5g} (history entry {index + 1})"


def select_epoch(
    history_entries: Iterable[Mapping[str, Any]],
    metric: str = "f1",
    higher_is_better: bool = True,
    epoch_key: str = "epoch",
) -> EpochSelection:
    """Pick the history entry with the best ``metric`` (seed 000's ``selected``).

    Entries without a finite numeric ``metric`` (e.g. training-loss lines) are skipped. Ties go to
    the earliest entry in the history, like a trainer that keeps the first best checkpoint.

    >>> h = [{"epoch": 1, "f1": 0.8}, {"epoch": 2, "f1": 0.9}, {"epoch": 3, "f1": 0.9}]
    >>> sel = select_epoch(h, metric="f1")
    >>> sel.epoch, sel.tied_epochs
    (2, [2, 3])
    """
    entries = [dict(e) for e in history_entries]
    usable: list[tuple[int, float]] = []
    seen_keys: set[str] = set()
    for i, e in enumerate(entries):
        seen_keys.update(k for k, v in e.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
        v = e.get(metric)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            usable.append((i, float(v)))
    if not usable:
        if not entries:
            raise MetricInputError("The history is empty; there is no epoch to select.")
        raise UnknownMetricError(metric, seen_keys or {"(no numeric fields)"})
    values = np.array([v for _, v in usable])
    best = values.max() if higher_is_better else values.min()
    tied = [usable[k][0] for k in np.flatnonzero(values == best)]
    chosen = entries[tied[0]]

    def label(i: int) -> Any:
        return entries[i].get(epoch_key, i + 1)

    return EpochSelection(
        entry=chosen,
        metric=metric,
        higher_is_better=higher_is_better,
        value=float(best),
        epoch=label(tied[0]),
        tied_epochs=[label(i) for i in tied],
        considered=len(usable),
        index=tied[0],
    )
