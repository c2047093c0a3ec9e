"""Fitting one step: grids evaluated for every fold in one pass, temperature by NLL, EM source priors.

A fit evaluates its objective on *rows* of items at once: row 0 is every fit item, and with K folds
row f + 1 is every item outside fold f (the training items of that fold). For a grid step the
whole grid is scored on every row from a single pass over the items:

- threshold steps: the metrics' threshold sweep (sort once, ``searchsorted``) gives every
  threshold's confusion counts, per fold;
- argmax steps (prior multipliers, option damping): each chunk of items is scored for every grid
  point with numpy broadcasting (a running max over labels), and one ``bincount`` of (fold, grid
  point, gold, prediction) gives every confusion table;
- the per-item F1 of ``positive_threshold``: the same counts per item, in blocks of items.

A training row's table is the table of all items minus the fold's. The objective is then read
off every table at once by the metric registry's own table function (``Prepared.from_tables``),
so the numbers are the registry's. Objectives that are not functions of a confusion table
(log loss, Brier, ECE, ...) are computed per grid point with ``Prepared.weighted`` on the row
weights (slower, same numbers).

Ties (equal objective values) go to the grid point nearest to "no change" (tau 0.5, multipliers
all equal, alpha 1; distances equal to 1e-12 are equal), then to the first one: the threshold
sweep's rule (:func:`labledger.metrics.sweep.best_grid_point`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from labledger.analysis.tasks import HEADLINE, prepare_task, task_params
from labledger.calibrate.methods import Scores, Step, TaskArrays, apply_step, binary_pair
from labledger.errors import CalibrationError, LedgerError
from labledger.metrics.prepared import MeanPrepared, Prepared, TablePrepared
from labledger.metrics.registry import Metric, metric_key, parse_metric
from labledger.metrics.sweep import best_grid_point, parse_thresholds, threshold_counts

#: Elements of one (grid points x items) block.
BLOCK = 1 << 21
#: Largest product grid searched exhaustively for prior multipliers (beyond: coordinate ascent).
MAX_PRODUCT = 20_000
#: Up to this many multipliers on the last axis, :func:`_count_products` counts them one by one.
DIRECT_COUNT = 64
#: Default grids.
DEFAULT_THRESHOLDS = "0:1:0.01"
DEFAULT_ALPHAS = "0.02:2:0.02"
DEFAULT_MULTIPLIERS = tuple(2.0 ** (i / 4) for i in range(-8, 9))
DEFAULT_TEMPERATURE = (0.05, 20.0)
EPS = float(np.finfo(np.float64).eps)


# ------------------------------------------------------------------------------------------------
# Objectives


@dataclass
class Objective:
    """What a fit maximises (or minimises): a registry metric on a task, or the per-item F1 of
    ``positive_threshold`` (``mode="items"``)."""

    key: str
    metric: Metric
    params: dict[str, Any]
    mode: str  # "table" | "items" | "generic"
    positive: str | None = None
    item_field: str | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.metric.higher_is_better

    def definition(self) -> str:
        text = self.metric.describe(self.params)
        if self.mode == "items":
            text += (
                f" Here an item is the rows sharing '{self.item_field}'; its gold set is the rows whose gold "
                f"is '{self.positive}', its predicted set the rows predicted '{self.positive}'."
            )
        return text

    def prepared(self, arr: TaskArrays, s: Scores) -> Prepared:
        """The objective bound to ``arr`` with predictions ``s`` (per item for ``mode="items"``)."""
        if self.mode == "items":
            values = item_f1(arr, s.pred, str(self.positive), str(self.item_field))
            return MeanPrepared(metric="set_f1", params={}, n=len(values), n_used=len(values), values=values)
        return prepare_task(self.metric, dict(self.params), arr.task_data(s))

    def value(self, arr: TaskArrays, s: Scores) -> float:
        return float(self.prepared(arr, s).value())


def item_f1(arr: TaskArrays, pred: np.ndarray, positive: str, item_field: str) -> np.ndarray:
    """Per-item F1 of the set of rows predicted ``positive`` against the rows whose gold is it."""
    j = arr.label_index(positive, "objective")
    items = arr.items[item_field]
    n_items = int(items.max()) + 1 if len(items) else 0
    g, p = arr.gold == j, pred == j
    tp = np.bincount(items, weights=(g & p).astype(np.float64), minlength=n_items)
    den = np.bincount(items, weights=g.astype(np.float64) + p, minlength=n_items)
    out = np.ones(n_items)
    np.divide(2 * tp, den, out=out, where=den > 0)
    return out


def resolve_objective(
    spec: str | None, arr: TaskArrays, methods: list[str], *, positive: str | None, item_field: str | None
) -> Objective:
    """The objective of a fit: ``spec`` (a metric spec) or the default for the methods and task."""
    decision = [m for m in methods if m not in ("temperature",)]
    if spec is None:
        if "positive_threshold" in methods:
            spec = "set_f1"
        elif not decision:
            spec = "log_loss"
        else:
            spec = HEADLINE[arr.kind]
    parsed = parse_metric(spec)
    metric = parsed.metric
    if metric.name == "set_f1":
        if "positive_threshold" not in methods:
            raise CalibrationError(
                "objective 'set_f1' (per-item F1) needs a positive_threshold step, which groups rows into items"
            )
        return Objective("set_f1", metric, {}, "items", positive=positive, item_field=item_field or "group")
    if arr.kind not in metric.kinds:
        raise CalibrationError(
            f"objective '{spec}' does not apply to task '{arr.task}' ({arr.kind}); it needs a "
            f"{' or '.join(metric.kinds)} task"
        )
    if metric.table:
        raise CalibrationError(
            f"objective '{spec}' is a table, not one number; use e.g. accuracy, f1:average=macro or log_loss"
        )
    params = task_params(metric, dict(parsed.params), arr.task_data())
    mode = "table" if metric.strategy == "table" and metric.needs == "labels" else "generic"
    return Objective(metric_key(metric.name, params), metric, params, mode)


def objective_from_key(key: str, arr: TaskArrays, steps: list[Step]) -> Objective:
    """The objective a recipe names (``set_f1`` takes its item field from the recipe's step)."""
    pt = next((s for s in steps if s.method == "positive_threshold"), None)
    return resolve_objective(
        key,
        arr,
        [s.method for s in steps],
        positive=pt.params["positive"] if pt else None,
        item_field=(pt.params.get("item_field") or "group") if pt else None,
    )


# ------------------------------------------------------------------------------------------------
# Rows of items (all, then each fold's training items) and selection


def _rows(per_fold: np.ndarray, folded: bool) -> np.ndarray:
    total = per_fold.sum(axis=0)
    if not folded:
        return total[None]
    return np.concatenate([total[None], total[None] - per_fold], axis=0)


def row_weights(fold: np.ndarray | None, n_folds: int, n: int) -> np.ndarray:
    """(R, n) 0/1 weights: row 0 every item, row f + 1 the items outside fold f."""
    if fold is None:
        return np.ones((1, n))
    return np.vstack([np.ones(n)] + [(fold != f).astype(np.float64) for f in range(n_folds)])


def best_index(values: np.ndarray, higher: bool, distance: np.ndarray, what: str) -> int:
    """The best grid point by :func:`~labledger.metrics.sweep.best_grid_point` (best value, then
    nearest to no change to 1e-12, then first); raises when the objective is nan everywhere."""
    best = best_grid_point(values, distance, higher=higher)
    if best is None:
        raise CalibrationError(f"{what}: the objective is undefined (nan) at every grid point")
    return best


# ------------------------------------------------------------------------------------------------
# Grids


def _values(spec: Any, what: str, *, low: float | None, high: float | None, positive: bool) -> np.ndarray | str:
    try:
        grid = parse_thresholds(spec)
    except LedgerError as exc:  # MetricInputError: reword for a grid
        raise CalibrationError(f"{what}: {exc}") from None
    if isinstance(grid, str):
        return grid
    if positive and (grid <= 0).any():
        raise CalibrationError(f"{what}: values must be > 0; got {grid[grid <= 0][0]:g}")
    if (low is not None and (grid < low).any()) or (high is not None and (grid > high).any()):
        raise CalibrationError(f"{what}: values must be in [{low:g}, {high:g}]")
    return grid


def threshold_grid(spec: Any, scores: np.ndarray) -> tuple[np.ndarray, str]:
    spec = DEFAULT_THRESHOLDS if spec is None else spec
    grid = _values(spec, "threshold grid", low=0.0, high=1.0, positive=False)
    if isinstance(grid, str):
        grid = np.unique(scores)
    return grid, spec if isinstance(spec, str) else ",".join(f"{v:g}" for v in grid)


def alpha_grid(spec: Any) -> tuple[np.ndarray, str]:
    spec = DEFAULT_ALPHAS if spec is None else spec
    grid = _values(spec, "alpha grid", low=None, high=None, positive=True)
    if isinstance(grid, str):
        raise CalibrationError("alpha grid: 'all' is only for thresholds; give START:STOP:STEP or a list")
    return grid, spec if isinstance(spec, str) else ",".join(f"{v:g}" for v in grid)


def multiplier_axes(spec: Any, labels: tuple[str, ...]) -> tuple[dict[str, np.ndarray], str]:
    """Per-label multiplier values (labels not named stay at 1)."""
    if spec is None:
        axes = {lab: np.array(DEFAULT_MULTIPLIERS) for lab in labels[1:]}
        return axes, f"default: labels other than {labels[0]!r} over 2^(i/4), i = -8..8 ({labels[0]!r} at 1)"
    if isinstance(spec, str):
        parts = [p for p in spec.replace(";", " ").split() if p]
        spec = {k: v for k, _, v in (p.partition("=") for p in parts)}
    if not isinstance(spec, dict) or not spec:
        raise CalibrationError(
            "prior_multiplier grid: give LABEL=VALUES for each label to search (e.g. Neutral=0.5:2:0.05)"
        )
    axes = {}
    for lab, values in spec.items():
        if lab not in labels:
            raise CalibrationError(
                f"prior_multiplier grid: {lab!r} is not a label of the task ({', '.join(map(repr, labels))})"
            )
        if values in ("", None):
            raise CalibrationError(f"prior_multiplier grid: give values for {lab!r} (LABEL=START:STOP:STEP)")
        grid = _values(values, f"prior_multiplier grid for {lab!r}", low=None, high=None, positive=True)
        if isinstance(grid, str):
            raise CalibrationError("prior_multiplier grid: 'all' is only for thresholds")
        axes[lab] = grid
    text = "; ".join(f"{lab}={v if isinstance(v, str) else ','.join(f'{x:g}' for x in v)}" for lab, v in spec.items())
    return axes, text


def temperature_bounds(spec: Any) -> tuple[tuple[float, float], str]:
    if spec is None:
        lo, hi = DEFAULT_TEMPERATURE
    else:
        parts = spec.split(":") if isinstance(spec, str) else list(spec)
        try:
            lo, hi = (float(x) for x in parts)
        except (TypeError, ValueError):
            raise CalibrationError(f"temperature grid: give the bounds LOW:HIGH (e.g. 0.05:20); got {spec!r}") from None
        if not (0 < lo < hi < math.inf):
            raise CalibrationError(f"temperature grid: need 0 < LOW < HIGH; got {lo:g}:{hi:g}")
    return (lo, hi), f"{lo:g}:{hi:g}"


# ------------------------------------------------------------------------------------------------
# One-pass tables


def threshold_tables(
    s_pos: np.ndarray, gold: np.ndarray, j: int, taus: np.ndarray, fold: np.ndarray | None, n_folds: int
) -> np.ndarray:
    """(R, G, 4) confusion tables (gold, pred) of ``s_pos >= tau`` for every tau and row.

    Each fold's counts come from the metrics' one threshold sweep
    (:func:`~labledger.metrics.sweep.threshold_counts`).
    """
    g = len(taus)
    o = 1 - j
    is_pos = gold == j
    fn = n_folds if fold is not None else 1
    t = np.zeros((fn, g, 2, 2), dtype=np.int64)
    for f in range(fn):
        keep = slice(None) if fold is None else fold == f
        c = threshold_counts(s_pos[keep], is_pos[keep], taus)
        t[f, :, j, j] = c["tp"]
        t[f, :, j, o] = c["fn"]
        t[f, :, o, j] = c["fp"]
        t[f, :, o, o] = c["tn"]
    return _rows(t.reshape(fn, g, 4), fold is not None)


def argmax_tables(
    p: np.ndarray, gold: np.ndarray, factors, n_grid: int, fold: np.ndarray | None, n_folds: int
) -> np.ndarray:
    """(R, G, K*K) confusion tables of ``argmax_k p_k * factor_k`` for every grid point and row.

    ``factors(k, a, b)`` gives label k's multipliers for items a:b as an array broadcastable to
    (G, b - a).
    """
    n, k = p.shape
    fn = n_folds if fold is not None else 1
    kk = k * k
    counts = np.zeros(fn * n_grid * kk, dtype=np.int64)
    chunk = max(1, BLOCK // max(n_grid, 1))
    gbase = (np.arange(n_grid, dtype=np.int64) * kk)[:, None]
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        best = p[a:b, 0][None, :] * factors(0, a, b)
        best = np.array(np.broadcast_to(best, (n_grid, b - a)))
        pred = np.zeros((n_grid, b - a), dtype=np.int64)
        for lab in range(1, k):
            sk = p[a:b, lab][None, :] * factors(lab, a, b)
            better = sk > best
            pred[better] = lab
            np.maximum(best, sk, out=best)
        cells = pred
        cells += gbase
        cells += np.multiply(gold[a:b], k, dtype=np.int64)[None, :]  # (int64: gold codes may be int8)
        if fold is not None:
            cells += (fold[a:b] * (n_grid * kk))[None, :]
        counts += np.bincount(cells.ravel(), minlength=fn * n_grid * kk)
    return _rows(counts.reshape(fn, n_grid, kk), fold is not None)


def _count_products(p: np.ndarray, w_sorted: np.ndarray, bound: np.ndarray, strict: bool) -> np.ndarray:
    """For each item i, how many t have ``p[i] * w_sorted[t] < bound[i]`` (``strict``) or ``<=`` it.

    The float products are the ones :func:`argmax_tables` compares: ``p * w`` rounded is
    non-decreasing in ``w`` for ``p >= 0``, so the count is a cut point. Up to
    :data:`DIRECT_COUNT` multipliers it is counted product by product; beyond, it is estimated by
    ``searchsorted`` of ``bound / p`` and then corrected with the exact products (a division
    rounds differently from a product), so the answer is exact either way.

    >>> _count_products(np.array([0.5, 0.0]), np.array([0.5, 1.0, 2.0]), np.array([0.5, 0.0]), strict=False).tolist()
    [2, 3]

    """
    g = len(w_sorted)
    if g <= DIRECT_COUNT:  # a few multipliers: count them one by one (the same products, no search)
        small = np.zeros(len(p), dtype=np.uint8)  # (a byte a count: faster than int64 += bool)
        x = np.empty(len(p))
        hit = np.empty(len(p), dtype=bool)
        for w in w_sorted.tolist():
            np.multiply(p, w, out=x)
            (np.less if strict else np.less_equal)(x, bound, out=hit)
            np.add(small, hit.view(np.uint8), out=small)
        return small.astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = bound / p
    est = np.searchsorted(w_sorted, ratio, side="left" if strict else "right")  # nan (0 / 0): g
    todo = np.arange(len(p))
    while len(todo):
        e, pt, bt = est[todo], p[todo], bound[todo]
        below = pt * w_sorted[np.maximum(e - 1, 0)]
        at = pt * w_sorted[np.minimum(e, g - 1)]
        if strict:
            down = (e > 0) & ~(below < bt)
            up = (e < g) & (at < bt)
        else:
            down = (e > 0) & ~(below <= bt)
            up = (e < g) & (at <= bt)
        est[todo[down]] -= 1
        est[todo[up]] += 1
        todo = todo[down | up]
    return est


def product_argmax_tables(
    p: np.ndarray,
    gold: np.ndarray,
    base: np.ndarray,
    last: int,
    w_last: np.ndarray,
    fold: np.ndarray | None,
    n_folds: int,
) -> np.ndarray:
    """:func:`argmax_tables` of a product grid, without scoring every grid point on every item.

    The grid is every combination of ``base`` (C, K) (label ``last``'s column unused) with each
    multiplier of ``w_last`` (G_L,) > 0 for label ``last``; grid point ``c * G_L + t`` is combination
    c with ``w_last[t]`` (the order of ``itertools.product`` with label ``last`` varying fastest).
    For each combination and item the decision is the first label of highest ``p_k * w_k``: label
    ``last`` exactly when ``p_last * w`` beats the labels before it (``>``) and ties or beats the
    labels after it (``>=``); since ``p_last * w`` grows with w, that holds on a suffix of the sorted
    multipliers, found by :func:`_count_products`; else the decision is the first argmax of the other
    labels. One ``bincount`` of (fold, combination, gold, other decision, cut point) then gives every
    grid point's table: the same products and comparisons as :func:`argmax_tables` (equal tables),
    with C x n instead of C x G_L x n scores.
    """
    n, k = p.shape
    n_comb, g_l = len(base), len(w_last)
    fn = n_folds if fold is not None else 1
    kk = k * k
    perm = np.argsort(w_last, kind="stable")
    w_sorted = np.ascontiguousarray(w_last[perm], dtype=np.float64)
    slots = g_l + 1
    per_comb = fn * kk * slots
    counts = np.zeros((n_comb, per_comb), dtype=np.int64)  # (combination, fold, gold, other decision, cut)
    # labels with one multiplier in every combination ('neg' at 1 in the default grid): their
    # products once a chunk, not once a combination (the same products)
    fixed = [lab for lab in range(k) if lab != last and n_comb and bool(np.all(base[:, lab] == base[0, lab]))]
    chunk = max(1, BLOCK // max(n_comb, 1))
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        p_last = np.ascontiguousarray(p[a:b, last])
        head = gold[a:b].astype(np.int64) * (k * slots)
        if fold is not None:
            head += fold[a:b].astype(np.int64) * (kk * slots)
        once = {lab: p[a:b, lab] * base[0, lab] for lab in fixed}
        for c in range(n_comb):
            before = after = best = None
            other = np.zeros(b - a, dtype=np.int64)
            for lab in range(k):
                if lab == last:
                    continue
                q = once[lab] if lab in once else p[a:b, lab] * base[c, lab]
                if lab < last:
                    before = q if before is None else np.maximum(before, q)
                else:
                    after = q if after is None else np.maximum(after, q)
                if best is None:
                    best = q.copy()
                    other[:] = lab
                else:
                    other[q > best] = lab
                    np.maximum(best, q, out=best)
            cut = None
            if before is not None:
                cut = _count_products(p_last, w_sorted, before, strict=False)
            if after is not None:
                upper = _count_products(p_last, w_sorted, after, strict=True)
                cut = upper if cut is None else np.maximum(cut, upper)
            cells = head + other * slots
            if cut is not None:
                cells += cut
            counts[c] += np.bincount(cells, minlength=per_comb)
    counts = counts.reshape(n_comb, fn, kk * slots).transpose(1, 0, 2)
    by_cut = counts.reshape(fn, n_comb, k, k, slots)  # (fold, combination, gold, other decision, cut)
    # sorted multiplier t: items whose cut is <= t decide `last`, the others their other decision
    won = np.cumsum(by_cut, axis=4)[..., :g_l].sum(axis=3)  # (fold, comb, gold, t)
    lost = by_cut.sum(axis=4, keepdims=True) - np.cumsum(by_cut, axis=4)  # cut > t
    tables = np.zeros((fn, n_comb, g_l, k, k), dtype=np.int64)
    tables[..., :] = np.moveaxis(lost[..., :g_l], 4, 2)  # (fold, comb, t, gold, other)
    tables[..., last] += np.moveaxis(won, 3, 2)
    out = np.empty_like(tables)
    out[:, :, perm] = tables  # back to the grid's own order of w_last
    return _rows(out.reshape(fn, n_comb * g_l, kk), fold is not None)


def item_f1_grid(
    s_pos: np.ndarray, y: np.ndarray, items: np.ndarray, taus: np.ndarray, fold_of_item: np.ndarray | None, n_folds: int
) -> np.ndarray:
    """(R, G) mean per-item F1 of ``{rows with s_pos >= tau}`` against ``{rows with y}``, per row."""
    g = len(taus)
    n_items = int(items.max()) + 1 if len(items) else 0
    fn = n_folds if fold_of_item is not None else 1
    idx = np.searchsorted(taus, s_pos, side="right")
    order = np.argsort(items, kind="stable")
    items_s, idx_s, y_s = items[order], idx[order], y[order].astype(np.float64)
    sums = np.zeros((fn, g))
    counts = np.zeros(fn)
    block = max(1, BLOCK // (g + 1))
    for i0 in range(0, n_items, block):
        i1 = min(n_items, i0 + block)
        a, b = np.searchsorted(items_s, [i0, i1])
        key = (items_s[a:b] - i0) * (g + 1) + idx_s[a:b]
        nb = i1 - i0
        ca = np.bincount(key, minlength=nb * (g + 1)).reshape(nb, g + 1)
        cp = np.bincount(key, weights=y_s[a:b], minlength=nb * (g + 1)).reshape(nb, g + 1)
        n_pred = ca.sum(axis=1)[:, None] - np.cumsum(ca, axis=1)[:, :g]
        n_gold = cp.sum(axis=1)[:, None]
        tp = n_gold - np.cumsum(cp, axis=1)[:, :g]
        den = n_gold + n_pred
        f1 = np.ones((nb, g))
        np.divide(2 * tp, den, out=f1, where=den > 0)
        fi = fold_of_item[i0:i1] if fold_of_item is not None else np.zeros(nb, dtype=np.int64)
        for f in range(fn):
            sel = fi == f
            sums[f] += f1[sel].sum(axis=0)
            counts[f] += np.count_nonzero(sel)
    total, n_all = sums.sum(axis=0), counts.sum()
    rows = [total / n_all]
    if fold_of_item is not None:
        rows += [(total - sums[f]) / (n_all - counts[f]) for f in range(fn)]
    return np.vstack(rows)


# ------------------------------------------------------------------------------------------------
# Fitting one step on every row


@dataclass
class StepSpec:
    """A step to fit: its method, the parameters given (positive, pattern, ...) and its grid."""

    method: str
    given: dict[str, Any]
    grid: Any = None
    source_prior: str = "gold"


@dataclass
class StepFit:
    """What fitting one step on R rows gave: a Step per row, and how it was searched."""

    steps: list[Step]
    grid: str
    search: str


def _generic_values(
    spec: StepSpec, s: Scores, arr: TaskArrays, obj: Objective, candidates: list[dict], weights: np.ndarray
) -> np.ndarray:
    out = np.empty((weights.shape[0], len(candidates)))
    for c, params in enumerate(candidates):
        st = apply_step(Step(spec.method, {**spec.given, **params}), s, arr)
        out[:, c] = obj.prepared(arr, st).weighted(weights)
    return out


def _how(obj: Objective, fast: str) -> str:
    if obj.mode == "generic":
        return "the objective computed at each grid point (not a confusion-table metric)"
    return f"every fold from one pass ({fast})"


def _pick(values: np.ndarray, obj: Objective, distance: np.ndarray, what: str) -> list[int]:
    return [best_index(values[r], obj.higher_is_better, distance, f"{what} (row {r})") for r in range(len(values))]


def fit_step(
    spec: StepSpec, s: Scores, arr: TaskArrays, obj: Objective, fold: np.ndarray | None, n_folds: int
) -> StepFit:
    """Fit ``spec`` on every row (all items; each fold's training items) from predictions ``s``."""
    m = spec.method
    weights = None

    def wts():
        nonlocal weights
        if weights is None:
            weights = row_weights(fold, n_folds, arr.n)
        return weights

    if m in ("threshold", "positive_threshold"):
        j, _ = binary_pair(arr, spec.given["positive"], f"{m} fit")
        s_pos = s.p[:, j]
        taus, text = threshold_grid(spec.grid, s_pos)
        if obj.mode == "table":
            tables = threshold_tables(s_pos, arr.gold, j, taus, fold, n_folds)
            values = _table_values(obj, arr, tables)
        elif obj.mode == "items":
            items = arr.items[str(obj.item_field)]
            fold_item = None
            if fold is not None:
                fold_item = np.zeros(int(items.max()) + 1, dtype=np.int64)
                fold_item[items] = fold
            values = item_f1_grid(
                s_pos,
                np.asarray(arr.gold == arr.label_index(str(obj.positive), "objective")),
                items,
                taus,
                fold_item,
                n_folds,
            )
        else:
            values = _generic_values(spec, s, arr, obj, [{"tau": float(t)} for t in taus], wts())
        best = _pick(values, obj, np.abs(taus - 0.5), m)
        steps = [Step(m, {**spec.given, "tau": float(taus[b])}) for b in best]
        return StepFit(steps, text, f"grid of {len(taus)} thresholds, " + _how(obj, "one sort + searchsorted per fold"))
    if m == "option_damping":
        alphas, text = alpha_grid(spec.grid)
        mask = arr.masks[(spec.given.get("pattern"), spec.given.get("field"))]
        if obj.mode == "table":

            def factors(k, a, b):
                return np.where(mask[a:b, k][None, :], alphas[:, None], 1.0)

            values = _table_values(obj, arr, argmax_tables(s.p, arr.gold, factors, len(alphas), fold, n_folds))
        else:
            values = _generic_values(spec, s, arr, obj, [{"alpha": float(a)} for a in alphas], wts())
        best = _pick(values, obj, np.abs(np.log(alphas)), m)
        return StepFit(
            [Step(m, {**spec.given, "alpha": float(alphas[b])}) for b in best],
            text,
            f"grid of {len(alphas)} alphas, " + _how(obj, "broadcast argmax + bincount"),
        )
    if m == "prior_multiplier":
        return _fit_multipliers(spec, s, arr, obj, fold, n_folds, wts)
    if m == "temperature":
        (lo, hi), text = temperature_bounds(spec.grid)
        z = s.logspace()
        rows = [None] if fold is None else [None] + [fold != f for f in range(n_folds)]
        temps = [
            fit_temperature(z if r is None else z[r], arr.gold if r is None else arr.gold[r], lo, hi) for r in rows
        ]
        return StepFit(
            [Step(m, {"T": t}) for t in temps],
            text,
            "negative log-likelihood, bounded 1-D search over log T (scipy minimize_scalar)",
        )
    if m == "em_prior_shift":
        given = spec.given.get("source_prior")
        em_rows: list[np.ndarray] = [np.ones(arr.n, dtype=bool)]
        if fold is not None:
            em_rows += [fold != f for f in range(n_folds)]
        out = []
        for r in em_rows:
            prior = given if isinstance(given, dict) else source_prior(arr, s, r, spec.source_prior)
            out.append(
                Step(
                    m,
                    {
                        "source_prior": prior,
                        "max_iter": int(spec.given.get("max_iter", 1000)),
                        "tol": float(spec.given.get("tol", 1e-8)),
                    },
                )
            )
        how = (
            "given"
            if isinstance(given, dict)
            else (
                "gold frequencies of the fit items (add-one)"
                if spec.source_prior == "gold"
                else "mean predicted probability on the fit items"
            )
        )
        return StepFit(
            out, "", f"source prior: {how}; target prior re-estimated by EM where applied (label-free, transductive)"
        )
    raise CalibrationError(f"unknown method '{m}'")


def _table_values(obj: Objective, arr: TaskArrays, tables: np.ndarray) -> np.ndarray:
    r, g, kk = tables.shape
    prep = obj.prepared(arr, arr.scores())
    if not isinstance(prep, TablePrepared):
        raise CalibrationError(f"objective {obj.key}: not a function of a confusion table")
    return np.asarray(prep.from_tables(tables.reshape(r * g, kk).astype(np.float64)), dtype=np.float64).reshape(r, g)


def _fit_multipliers(spec, s, arr, obj, fold, n_folds, wts) -> StepFit:
    axes, text = multiplier_axes(spec.grid, arr.labels)
    k = len(arr.labels)
    names = list(axes)
    size = math.prod(len(v) for v in axes.values())

    def evaluate(cands: np.ndarray, sub: TaskArrays, sub_s: Scores, f, nf) -> np.ndarray:
        if obj.mode == "table":

            def factors(lab, a, b):
                return cands[:, lab][:, None]

            return _table_values(obj, sub, argmax_tables(sub_s.p, sub.gold, factors, len(cands), f, nf))
        weights = row_weights(f, nf, sub.n)
        return _generic_values(spec, sub_s, sub, obj, [{"weights": _wdict(arr.labels, c)} for c in cands], weights)

    def distance(cands: np.ndarray) -> np.ndarray:
        lw = np.log(cands)
        return np.abs(lw - lw.mean(axis=1, keepdims=True)).sum(axis=1)

    if size <= MAX_PRODUCT:
        cands = np.ones((size, k))
        for row, combo in enumerate(itertools.product(*(axes[n] for n in names))):
            for lab, v in zip(names, combo):
                cands[row, arr.labels.index(lab)] = v
        if obj.mode == "table":  # the same tables as argmax_tables, without scoring each grid point
            last = arr.labels.index(names[-1])
            base = cands[:: len(axes[names[-1]])]
            tables = product_argmax_tables(s.p, arr.gold, base, last, axes[names[-1]], fold, n_folds)
            values = _table_values(obj, arr, tables)
        else:
            values = evaluate(cands, arr, s, fold, n_folds)
        best = _pick(values, obj, distance(cands), "prior_multiplier")
        steps = [Step("prior_multiplier", {"weights": _wdict(arr.labels, cands[b])}) for b in best]
        return StepFit(
            steps, text, f"product grid of {size:,} multiplier vectors, " + _how(obj, "broadcast argmax + bincount")
        )
    rows = (
        [np.ones(arr.n, dtype=bool)]
        if fold is None
        else [np.ones(arr.n, dtype=bool)] + [fold != f for f in range(n_folds)]
    )
    steps = []
    for r in rows:
        sub, sub_s = arr.take(r), s.take(np.flatnonzero(r))
        current = np.ones(k)
        for _round in range(20):
            moved = False
            for lab in names:
                j = arr.labels.index(lab)
                cands = np.repeat(current[None, :], len(axes[lab]) + 1, axis=0)
                cands[:-1, j] = axes[lab]  # the last candidate is the current point
                vals = evaluate(cands, sub, sub_s, None, 0)[0]
                b = best_index(vals[:-1], obj.higher_is_better, distance(cands[:-1]), "prior_multiplier")
                if vals[b] > vals[-1] if obj.higher_is_better else vals[b] < vals[-1]:
                    current = cands[b].copy()
                    moved = True
            if not moved:
                break
        steps.append(Step("prior_multiplier", {"weights": _wdict(arr.labels, current)}))
    return StepFit(
        steps,
        text,
        f"coordinate ascent over {len(names)} labels (product grid of {size:,} points is above {MAX_PRODUCT:,})",
    )


def _wdict(labels: tuple[str, ...], w: np.ndarray) -> dict[str, float]:
    return {lab: float(v) for lab, v in zip(labels, w)}


def nll(z: np.ndarray, gold: np.ndarray, t: float) -> float:
    """Mean negative log-likelihood of ``softmax(z / t)`` (log p clipped at log eps, as log_loss)."""
    zt = z / t
    m = zt.max(axis=1)
    lse = m + np.log(np.exp(zt - m[:, None]).sum(axis=1))
    lp = zt[np.arange(len(gold)), gold] - lse
    return float(-np.maximum(lp, math.log(EPS)).mean())


def fit_temperature(z: np.ndarray, gold: np.ndarray, lo: float, hi: float) -> float:
    """The T in [lo, hi] minimising the NLL of ``softmax(z / T)`` (bounded search over log T)."""
    from scipy.optimize import minimize_scalar

    if len(gold) == 0:
        raise CalibrationError("temperature: no items to fit on")
    res = minimize_scalar(
        lambda u: nll(z, gold, math.exp(u)),
        bounds=(math.log(lo), math.log(hi)),
        method="bounded",
        options={"xatol": 1e-7},
    )
    return float(math.exp(res.x))


def source_prior(arr: TaskArrays, s: Scores, rows: np.ndarray, how: str) -> dict[str, float]:
    """Label priors the probabilities reflect, from the fit items: add-one gold frequencies or the
    mean predicted probability."""
    if how == "gold":
        counts = np.bincount(arr.gold[rows], minlength=len(arr.labels)).astype(np.float64) + 1.0
        prior = counts / counts.sum()
    elif how == "mean_posterior":
        prior = s.p[rows].mean(axis=0)
        if (prior <= 0).any():
            raise CalibrationError(
                "em_prior_shift: a label has mean probability 0 on the fit items; use source_prior = gold"
            )
    else:
        raise CalibrationError(
            f"em_prior_shift: source_prior must be 'gold', 'mean_posterior' or a mapping label -> prior; got {how!r}"
        )
    return _wdict(arr.labels, prior)


__all__ = [
    "DEFAULT_ALPHAS",
    "DEFAULT_THRESHOLDS",
    "Objective",
    "StepFit",
    "StepSpec",
    "argmax_tables",
    "best_index",
    "fit_step",
    "fit_temperature",
    "item_f1",
    "item_f1_grid",
    "nll",
    "objective_from_key",
    "product_argmax_tables",
    "resolve_objective",
    "row_weights",
    "source_prior",
    "threshold_tables",
]
