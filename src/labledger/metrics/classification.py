"""Classification metrics: pure functions over labels and probabilities (numpy, no I/O).

Arguments are keyword-only and named for what they are (``gold=``, ``pred=``, ``probs=``,
``score=``), so truth and prediction cannot be swapped by position (seed 003's bug).

Undefined values (0/0) follow one documented rule per metric, like scikit-learn's ``zero_division``:

- precision / recall / F1: a label whose denominator is 0 gets ``zero_division`` (default 0.0; 1.0
  or nan are allowed; nan values are left out of averages). F1 is ``2 tp / (2 tp + fp + fn)``,
  undefined only for a label with no gold and no predicted items.
- macro averages run over the labels that occur in gold or pred (scikit-learn's default), unless
  an explicit ``labels=`` list is given to the function, which is then used as is.
- MCC is 0 when a marginal is constant (scikit-learn); Cohen's kappa is nan when chance agreement
  is 1; balanced accuracy averages the recall of the labels present in gold.
- ROC-AUC and average precision are nan when a class has no positive (or no negative) item;
  multiclass one-vs-rest macro averages run over the classes where they are defined.
- log loss clips probabilities to [eps, 1 - eps] (eps = float64 machine epsilon), as scikit-learn.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics import kernels
from labledger.metrics._inputs import check_pos_label, encode, numbers, prob_matrix, same_length, score_inputs
from labledger.metrics.entry import Metric
from labledger.metrics.kernels import (
    BlockColumn,
    SmallCounts,
    by_blocks,
    cell_sums,
    release_pages,
    spans,
    stable_argsort,
    whole,
)
from labledger.metrics.prepared import (
    BlockMean,
    MeanPrepared,
    Prepared,
    Strategy,
    TablePrepared,
    WeightsFunction,
    WeightsPrepared,
)
from labledger.metrics.ties import differing, group_ends, group_positives, tie_starts_by
from labledger.metrics.ties import reversed_starts as reversed_starts
from labledger.metrics.ties import tie_starts as tie_starts

if TYPE_CHECKING:
    from labledger.metrics.analytic import GroupedInfluence, Ranked

EPS = float(np.finfo(np.float64).eps)
LABEL_KINDS = ("classification", "binary", "match")
PROB_KINDS = ("classification", "binary")


# ------------------------------------------------------------------------------------------------
# Batched functions of count tables: tables is (B, K*K), row-major (gold, pred).


def _parts(tables: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    t = np.asarray(tables, dtype=np.float64).reshape(-1, k, k)
    tp = np.diagonal(t, axis1=1, axis2=2)
    true_sum = t.sum(axis=2)
    pred_sum = t.sum(axis=1)
    return t, tp, true_sum, pred_sum


def _div(num: np.ndarray, den: np.ndarray, zd: float) -> np.ndarray:
    out = np.full(np.broadcast(num, den).shape, zd, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _accuracy_t(k: int) -> Callable[[np.ndarray], np.ndarray]:
    def fn(tables: np.ndarray) -> np.ndarray:
        t, tp, _, _ = _parts(tables, k)
        return _div(tp.sum(axis=1), t.sum(axis=(1, 2)), math.nan)

    return fn


def _balanced_t(k: int) -> Callable[[np.ndarray], np.ndarray]:
    def fn(tables: np.ndarray) -> np.ndarray:
        _, tp, true_sum, _ = _parts(tables, k)
        rec = _div(tp, true_sum, math.nan)
        present = true_sum > 0
        with np.errstate(invalid="ignore"):
            return np.where(present.any(axis=1), np.where(present, rec, 0).sum(axis=1) / present.sum(axis=1), math.nan)

    return fn


def _per_label(stat: str, tp: np.ndarray, true_sum: np.ndarray, pred_sum: np.ndarray, zd: float) -> np.ndarray:
    if stat == "precision":
        return _div(tp, pred_sum, zd)
    if stat == "recall":
        return _div(tp, true_sum, zd)
    return _div(2 * tp, true_sum + pred_sum, zd)


def _prf_t(
    k: int, stat: str, average: str, pos: int | None, zd: float, label_mask: np.ndarray | None
) -> Callable[[np.ndarray], np.ndarray]:
    def fn(tables: np.ndarray) -> np.ndarray:
        _, tp, true_sum, pred_sum = _parts(tables, k)
        if average == "binary":
            return _per_label(stat, tp[:, pos], true_sum[:, pos], pred_sum[:, pos], zd)
        if label_mask is not None:
            tp, true_sum, pred_sum = tp[:, label_mask], true_sum[:, label_mask], pred_sum[:, label_mask]
        if average == "micro":
            return _per_label(stat, tp.sum(axis=1), true_sum.sum(axis=1), pred_sum.sum(axis=1), zd)
        vals = _per_label(stat, tp, true_sum, pred_sum, zd)
        use = ~np.isnan(vals)  # zero_division=nan leaves undefined labels out of the average
        if label_mask is None:
            use &= (true_sum + pred_sum) > 0  # labels present in gold or pred
        v = np.where(use, vals, 0.0)
        mean = _div(v.sum(axis=1), use.sum(axis=1), math.nan)
        if average == "macro":
            return mean
        w = np.where(use, true_sum, 0.0)  # weighted by gold support; all-zero weights: plain mean
        sw = w.sum(axis=1)
        return np.where(sw > 0, _div((v * w).sum(axis=1), sw, math.nan), mean)

    return fn


def _mcc_t(k: int) -> Callable[[np.ndarray], np.ndarray]:
    def fn(tables: np.ndarray) -> np.ndarray:
        t, tp, true_sum, pred_sum = _parts(tables, k)
        n = t.sum(axis=(1, 2))
        correct = tp.sum(axis=1)
        cov_ytyp = correct * n - (true_sum * pred_sum).sum(axis=1)
        cov_ypyp = n * n - (pred_sum * pred_sum).sum(axis=1)
        cov_ytyt = n * n - (true_sum * true_sum).sum(axis=1)
        # a constant side has a zero variance term; with fractional weights it can come out as
        # rounding noise, so anything below 1e-12 of n^2 counts as zero (MCC is then 0)
        tiny = 1e-12 * n * n
        ok = (cov_ytyt > tiny) & (cov_ypyp > tiny)
        den = np.where(ok, cov_ytyt * cov_ypyp, 1.0)
        return np.where(ok, cov_ytyp / np.sqrt(den), 0.0)

    return fn


def _kappa_t(k: int) -> Callable[[np.ndarray], np.ndarray]:
    def fn(tables: np.ndarray) -> np.ndarray:
        t, tp, true_sum, pred_sum = _parts(tables, k)
        n = t.sum(axis=(1, 2))
        observed = n - tp.sum(axis=1)  # sum(w * C), w = 1 - I
        expected = _div(n * n - (true_sum * pred_sum).sum(axis=1), n, math.nan)  # sum(w * E)
        return 1.0 - _div(observed, expected, math.nan)

    return fn


def _per_class_t(k: int, zd: float) -> Callable[[np.ndarray], np.ndarray]:
    def fn(tables: np.ndarray) -> np.ndarray:
        _, tp, true_sum, pred_sum = _parts(tables, k)
        cols = [_per_label(s, tp, true_sum, pred_sum, zd) for s in ("precision", "recall", "f1")]
        cols.append(true_sum)
        return np.stack(cols, axis=2).reshape(len(tp), -1)  # label-major: label0 P,R,F,support, ...

    return fn


#: The count-table metrics a binary 2x2 table gives directly (the sweep's columns and gates).
BINARY_TABLE_METRICS = ("accuracy", "balanced_accuracy", "precision", "recall", "f1", "mcc")


def binary_table_metric(name: str, zero_division: float = 0.0) -> Callable[[np.ndarray], np.ndarray]:
    """The registry's table function of ``name`` on (B, 4) binary tables ``[tn, fp, fn, tp]``.

    The tables are row-major (gold, pred) over (negative, positive); precision, recall and F1 are
    those of the positive label, with ``zero_division`` for a 0/0.

    >>> binary_table_metric("f1")(np.array([[5, 1, 2, 2]])).tolist()
    [0.5714285714285714]
    """
    if name == "accuracy":
        return _accuracy_t(2)
    if name == "balanced_accuracy":
        return _balanced_t(2)
    if name in ("precision", "recall", "f1"):
        return _prf_t(2, name, "binary", 1, zero_division, None)
    if name == "mcc":
        return _mcc_t(2)
    raise MetricInputError(f"{name} is not a binary count-table metric ({', '.join(BINARY_TABLE_METRICS)})")


# ------------------------------------------------------------------------------------------------
# Building Prepared objects from encoded inputs


def label_prepared(
    name: str,
    params: dict[str, Any],
    gold: np.ndarray,
    pred: np.ndarray,
    labels: Sequence[Any],
    *,
    pos: int | None = None,
    label_mask: np.ndarray | None = None,
    cells: np.ndarray | None = None,
    cell_counts: np.ndarray | None = None,
) -> TablePrepared:
    """A :class:`Prepared` for a confusion-matrix metric over encoded ``gold``/``pred`` indices.

    ``cells``: ``gold * K + pred`` (int64) when the caller has it, and ``cell_counts`` its count
    table (``bincount(cells, minlength=K * K)``), shared by the count-table metrics of one task
    instead of each building its own.
    """
    k = len(labels)
    n = len(gold)

    def table(from_tables: Callable[[np.ndarray], np.ndarray], columns: tuple[str, ...] | None = None) -> TablePrepared:
        return TablePrepared(
            metric=name,
            params=params,
            n=n,
            n_used=n,
            parts=(gold, pred, k),
            cells=cells,
            cell_counts=cell_counts,
            n_cells=k * k,
            from_tables=from_tables,
            columns=columns,
        )

    if name == "accuracy":
        return table(_accuracy_t(k))
    if name == "balanced_accuracy":
        return table(_balanced_t(k))
    if name in ("precision", "recall", "f1"):
        avg = params["average"]
        if avg == "binary" and pos is None:
            raise MetricInputError(f"{name} with average='binary' needs pos_label= (the positive label)")
        return table(_prf_t(k, name, avg, pos, params["zero_division"], label_mask))
    if name == "mcc":
        return table(_mcc_t(k))
    if name == "cohen_kappa":
        return table(_kappa_t(k))
    if name == "per_class":
        cols = tuple(f"{s}[{lab}]" for lab in labels for s in ("precision", "recall", "f1", "support"))
        return table(_per_class_t(k, params["zero_division"]), cols)
    if name == "confusion_matrix":
        cols = tuple(f"{g}->{p}" for g in labels for p in labels)
        return table(lambda t: np.asarray(t, dtype=np.float64), cols)
    raise MetricInputError(f"{name} is not a label metric")


def resolve_average(params: dict[str, Any], pos_known: bool) -> dict[str, Any]:
    """``average='auto'`` becomes ``binary`` when a positive label is known, else ``macro``."""
    if params.get("average") == "auto":
        params = {**params, "average": "binary" if pos_known else "macro"}
    return params


def _checked(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return _BY_NAME[name].resolve(params)


def _raw_labels(name: str, gold: Any, pred: Any, labels: Any, params: dict[str, Any]) -> TablePrepared:
    params = _checked(name, params)
    same_length(gold=gold, pred=pred)
    pos_label = params.get("pos_label")
    params = resolve_average(params, pos_label is not None)
    (g, p), names = encode(gold, pred, labels=labels, extra=(pos_label,) if pos_label is not None else ())
    pos = None
    if pos_label is not None:
        if pos_label not in names:
            raise MetricInputError(f"pos_label {pos_label!r} is not one of the labels ({', '.join(map(repr, names))})")
        if labels is None:
            check_pos_label(pos_label, [names[i] for i in np.unique(np.concatenate([g, p]))])
        pos = names.index(pos_label)
    mask = None
    if labels is not None and params.get("average") in ("macro", "micro", "weighted"):
        mask = np.ones(len(names), dtype=bool)
    return label_prepared(name, params, g, p, names, pos=pos, label_mask=mask)


# ------------------------------------------------------------------------------------------------
# Probability metrics (strategy "weights" or "mean")


def ascending_groups(col: np.ndarray, dtype: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``col``'s stable ascending order (as ``dtype`` where given: 4-byte positions, as a cache entry
    keeps them) and its tie starts (:func:`tie_starts_by` through the order: the sorted values are
    never one array of n). A matrix's column is sorted where it lies (kernels.taken: as fast as a
    copy's sort).

    >>> order, starts = ascending_groups(np.array([0.4, 0.1, 0.4])); order.tolist(), starts.tolist()
    ([1, 0, 2], [0, 1])
    """
    order = stable_argsort(col)
    if dtype is not None:
        order = kernels.narrowed(order, dtype)  # (in place: the int64 order and its copy never both whole)
    return order, tie_starts_by(lambda a, b: kernels.taken(col, order[a:b]), len(order))


def _sorted_groups(
    score: np.ndarray, descending: bool, ascending: tuple[np.ndarray, np.ndarray | None] | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Sort order (any order among equal scores: ties are grouped) and tie-group starts (None: no ties).

    ``ascending``: an ascending sort order of ``score`` and its tie groups already at hand (one
    argsort serves ROC-AUC, average precision and the intervals of both); the descending order
    is its reverse, whose groups follow from the ascending ones (no second pass over the scores).
    """
    order, starts = ascending_groups(score) if ascending is None else ascending
    if descending:
        order = np.ascontiguousarray(order[::-1])
        starts = reversed_starts(starts, len(order))
    return order, starts


class ColumnSort(NamedTuple):
    """Column ``j`` of a task's probabilities (P(label ``j``)) in its stable ascending order: the
    order, its tie starts (None: no ties), and class ``j``'s flags (``gold == j``) ranked by it,
    which ROC-AUC and average precision read (:class:`~labledger.metrics.analytic.Ranked`).

    >>> s = column_sort(np.array([0.9, 0.1]), np.array([True, False]))
    >>> s.order.tolist(), s.starts, s.ranked.y.tolist()
    ([1, 0], None, [False, True])
    """

    order: np.ndarray
    starts: np.ndarray | None
    ranked: Ranked


#: The sorts that the metrics of one task share, by column: made once before they run, by whoever
#: runs them (:class:`labledger.analysis.tasks.TaskCache`), and only read here; a metric sorts a
#: column that is not in it itself (and keeps it to itself).
Sorts = Mapping[int, ColumnSort]


def ranked_columns(name: str, params: Mapping[str, Any], k: int, pos: int | None) -> tuple[int, ...]:
    """The columns of a ``k``-label task whose :class:`ColumnSort` the metric ``name`` reads from
    ``sorts`` (``pos``: the index of its ``pos_label``): a column of ROC-AUC's and average
    precision's; a two-label macro ROC-AUC needs the other column only where it does not rank the
    items in reverse (rare: it is then sorted by the metric).

    >>> ranked_columns("roc_auc", {"average": "macro"}, 3, None), ranked_columns("brier", {}, 3, None)
    ((0, 1, 2), ())
    """
    if name not in ("roc_auc", "average_precision"):
        return ()
    if params.get("average") == "binary":
        return () if pos is None else (pos,)
    return (1,) if name == "roc_auc" and k == 2 else tuple(range(k))


def ascending_of(
    col: np.ndarray | Callable[[], np.ndarray],
    given: tuple[np.ndarray, np.ndarray | None] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``col``'s stable ascending order and its tie starts. ``given``: an order with its tie starts
    (made from this very column, by this process or by the writer of a columnar cache entry whose
    digest vouches for them: :func:`labledger.inputs.results.given_ties`), used as it is; or an
    order alone, checked against ``col`` (:func:`checked_order`) and sorted anew if it fails. ``col``:
    the column, or a function that makes it (an order given with its ties reads none).

    >>> ascending_of(np.array([0.9, 0.1]), np.array([0, 1]))[0].tolist()
    [1, 0]
    """
    if isinstance(given, tuple):
        return given
    values = col() if callable(col) else col
    found = checked_order(given, values)
    return found if found is not None else ascending_groups(values)


def column_sort(
    col: np.ndarray | Callable[[], np.ndarray],
    is_pos: np.ndarray,
    given: tuple[np.ndarray, np.ndarray | None] | np.ndarray | None = None,
) -> ColumnSort:
    """The :class:`ColumnSort` of ``col`` (:func:`ascending_of`) and its class's flags ``is_pos``."""
    from labledger.metrics.analytic import Ranked

    order, starts = ascending_of(col, given)
    return ColumnSort(order, starts, Ranked(is_pos, order, starts))


def probs_column(probs: np.ndarray, c: int) -> np.ndarray:
    """Class ``c``'s probabilities, to sort or to check an order through: beyond one block a view (no
    copy of the column), else a copy, which np.take reads faster."""
    return probs[:, c] if len(probs) > kernels.WHOLE else np.ascontiguousarray(probs[:, c])


def _sort_of(sorts: Sorts | None, j: int, col: np.ndarray | Callable[[], np.ndarray], is_pos: np.ndarray) -> ColumnSort:
    """Column ``j``'s sort from ``sorts`` where it is there, else made here (not kept)."""
    found = None if sorts is None else sorts.get(j)
    return found if found is not None else column_sort(col, is_pos)


def checked_order(order: np.ndarray | None, col: np.ndarray) -> tuple[np.ndarray, np.ndarray | None] | None:
    """``(order, tie starts)`` when ``order`` is a permutation-sized index array that sorts ``col``
    ascending (a stale or foreign order gives None: the caller sorts). The sorted values are read a
    block at a time through the order, twice where some tie (to check and count, then to find the
    groups), never one array of n."""
    if order is None or len(order) != len(col) or order.dtype.kind not in "iu":
        return None
    n = len(col)
    if n and (int(order.min()) < 0 or int(order.max()) >= n):
        return None
    seen = np.zeros(n, dtype=bool)
    seen[order] = True  # n indices in [0, n) reach every item only when none repeats
    if not bool(seen.all()):
        return None  # an index repeats: not a permutation
    del seen
    count = 0
    for a, b in spans(n - 1) if n > 1 else []:
        s = kernels.taken(col, order[a : b + 1])
        if not bool((s[1:] >= s[:-1]).all()):
            return None
        count += int(np.count_nonzero(differing(s)))
    found = tie_starts_by(lambda a, b: kernels.taken(col, order[a:b]), n, count)
    release_pages(order)  # (a mapped order: read again from its file when it is next used)
    return order, found


#: A sort order and its tie groups (:func:`_sorted_groups`), or a function that makes them on
#: first use (a weights function's: an analytic interval never calls it).
SortGiven = tuple[np.ndarray, np.ndarray | None] | Callable[[], tuple[np.ndarray, np.ndarray | None]]


def _first_use(sorted_: SortGiven | None, score: np.ndarray, descending: bool) -> Callable[[], tuple[np.ndarray, Any]]:
    """``sorted_`` (or the sort of ``score``) made on the first call and kept: a bootstrap needs it,
    an analytic interval never does, and would otherwise hold a descending order and its groups
    from the metric's preparation to its end."""
    kept: list[tuple[np.ndarray, np.ndarray | None]] = []

    def get() -> tuple[np.ndarray, np.ndarray | None]:
        if not kept:
            found = sorted_() if callable(sorted_) else sorted_
            kept.append(found if found is not None else _sorted_groups(score, descending=descending))
        return kept[0]

    return get


def _auc_w(score: np.ndarray, is_pos: np.ndarray, sorted_: SortGiven | None = None) -> WeightsFunction:
    sort = _first_use(sorted_, score, descending=False)
    cache: dict[str, np.ndarray] = {}

    def fn(w: np.ndarray, exchangeable: bool = False) -> np.ndarray:
        order, starts = sort()
        if "pos_f" not in cache:  # built on first use: a point value alone never needs it
            cache["pos_f"] = is_pos[order].astype(np.float64)
        pos_f = cache["pos_f"]
        # exchangeable: w is a fresh bootstrap draw, whose columns may be taken in any order
        ws = w if exchangeable else np.take(w, order, axis=1)
        pw = ws * pos_f
        nw = np.subtract(ws, pw, out=ws)
        if starts is None:  # no tied scores: an item is either positive or negative
            below = np.cumsum(nw, axis=1)
            u = np.einsum("ij,ij->i", pw, below)
        else:
            pw = np.add.reduceat(pw, starts, axis=1)
            nw = np.add.reduceat(nw, starts, axis=1)
            below = np.cumsum(nw, axis=1)
            below -= 0.5 * nw
            u = np.einsum("ij,ij->i", pw, below)
        p, q = pw.sum(axis=1), nw.sum(axis=1)
        return _div(u, p * q, math.nan)

    return fn


def _reverse_ranking(a: np.ndarray, b: np.ndarray, order_b: np.ndarray) -> bool:
    """True when ``a`` orders the items exactly as ``-b`` does (same ties): e.g. a = 1 - b."""
    if len(b) < 2:
        return True
    a_s, b_s = a[order_b], b[order_b]
    db, da = np.diff(b_s), np.diff(a_s)
    return bool(np.all(da <= 0) and np.array_equal(db == 0, da == 0))


def roc_auc_sorted(y: np.ndarray, starts: np.ndarray | None, pos_g: SmallCounts | np.ndarray | None = None) -> float:
    """Unweighted ROC-AUC from mid-ranks (Mann-Whitney U, ties count one half) in exact integers.

    ``y``: the class flags (positive: True) in ascending score order; ``starts``: the tie groups of
    the sorted scores (:func:`tie_starts`). NaN when a class is absent. The one ROC-AUC kernel:
    the registry's ``roc_auc`` and the threshold sweep both use it. ``pos_g``: the positives per tie
    group when the caller has them (:class:`labledger.metrics.analytic.Ranked`).

    >>> s = np.array([0.1, 0.35, 0.4, 0.8]); y = np.array([False, True, False, True])
    >>> roc_auc_sorted(y, tie_starts(s))
    0.75
    """
    n, p = len(y), int(np.count_nonzero(y))
    q = n - p
    if p == 0 or q == 0:
        return math.nan
    # whole numbers, exact in any order: summed a block at a time (temporaries of a block, not of n)
    twice_rank_sum = 2 * p  # ranks 1..n without ties
    if starts is None:
        for a, b in spans(n):
            hits = np.flatnonzero(y[a:b])
            twice_rank_sum += 2 * (int(hits.sum(dtype=np.int64)) + a * len(hits))
    else:
        twice_rank_sum = 0
        g = len(starts)
        for a, b in spans(g):
            mid2 = group_ends(starts, n, a, b, np.int64)  # 2 x mid-rank of a group = start + 1 + end
            mid2 += starts[a:b]
            mid2 += 1
            mid2 *= (
                group_positives(y, starts, a, b, np.int64) if pos_g is None else pos_g[a:b].astype(np.int64, copy=False)
            )
            twice_rank_sum += int(mid2.sum(dtype=np.int64))
    u2 = twice_rank_sum - p * (p + 1)
    return (u2 / 2) / (p * q) if u2 % 2 == 0 else u2 / (2 * p * q)


def _auc_point(r: Ranked) -> Callable[[], float]:
    """Unweighted ROC-AUC from mid-ranks (Mann-Whitney U) in exact integer arithmetic."""
    return lambda: roc_auc_sorted(r.y, r.starts, r.pos_kept)


def _ap_point(ranked: Ranked) -> Callable[[], float]:
    """Unweighted average precision, on the descending reading of the ascending sort."""

    def fn() -> float:
        r = ranked.reversed()
        return ap_blocks(_blocks_of(r), r.groups, r.p)

    return fn


def _blocks_of(r: Ranked) -> Callable[[int, int], tuple[np.ndarray, np.ndarray]]:
    """Each block of ``r``'s tie groups' (positives, ends), for :func:`ap_blocks`."""
    return lambda a, b: (r.pos_of(a, b), r.ends_of(a, b))


def _ap_w(score: np.ndarray, is_pos: np.ndarray, sorted_: SortGiven | None = None) -> WeightsFunction:
    sort = _first_use(sorted_, score, descending=True)
    cache: dict[str, np.ndarray] = {}

    def fn(w: np.ndarray, exchangeable: bool = False) -> np.ndarray:
        order, starts = sort()
        if "pos_f" not in cache:  # built on first use: an analytic interval never needs it
            cache["pos_f"] = is_pos[order].astype(np.float64)
        pos_f = cache["pos_f"]
        ws = w if exchangeable else np.take(w, order, axis=1)
        tp = ws * pos_f
        if starts is not None:
            tp = np.add.reduceat(tp, starts, axis=1)
            ws = np.add.reduceat(ws, starts, axis=1)
        call = np.cumsum(ws, axis=1, out=ws)
        ctp = np.cumsum(tp, axis=1)
        prec = _div(ctp, call, 0.0)
        p = ctp[:, -1] if ctp.shape[1] else np.zeros(len(w))
        return _div(np.einsum("ij,ij->i", tp, prec), p, math.nan)

    return fn


def _ovr_w(
    make: Callable[..., WeightsFunction], probs: np.ndarray, flags: Sequence[np.ndarray], sorts: Sequence[ColumnSort]
) -> WeightsFunction:
    """The one-vs-rest macro mean of ``make``'s weights functions, each class ``c`` on its ``flags[c]``
    and its ascending sort (``sorts[c]``; ``make``'s own reading of it made on its first use)."""
    descending = make is _ap_w
    fns = [
        make(probs[:, c], flags[c], functools.partial(_sorted_groups, probs[:, c], descending, (s.order, s.starts)))
        for c, s in enumerate(sorts)
    ]

    def fn(w: np.ndarray, exchangeable: bool = False) -> np.ndarray:
        vals = np.stack([f(w) for f in fns], axis=1)
        ok = ~np.isnan(vals)
        return _div(np.where(ok, vals, 0).sum(axis=1), ok.sum(axis=1), math.nan)

    return fn


def ap_sorted(y: np.ndarray, starts: np.ndarray | None, tp: SmallCounts | np.ndarray | None = None) -> float:
    """Unweighted average precision from the class flags in descending score order (``starts``: tie
    groups; ``tp``: the positives per group when the caller has them, whole numbers of any type).

    >>> ap_sorted(np.array([True, False, True, False]), None)
    0.8333333333333333
    """
    n = len(y)

    def block(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        if starts is None:
            return y[a:b].astype(np.float64), np.arange(a + 1, b + 1, dtype=np.float64)
        return (group_positives(y, starts, a, b) if tp is None else tp[a:b].astype(np.float64)), group_ends(
            starts, n, a, b
        )

    return ap_blocks(block, n if starts is None else len(starts), int(np.count_nonzero(y)))


def ap_blocks(block: Callable[[int, int], tuple[np.ndarray, np.ndarray]], groups: int, p: int) -> float:
    """:func:`ap_sorted` from each block of ``groups`` tie groups' (positives, ends) in descending
    order (``p`` positives in all): for a :class:`~labledger.metrics.analytic.Ranked`, its blocks.

    >>> ap_blocks(lambda a, b: (np.array([1.0, 0.0, 1.0, 0.0])[a:b], np.arange(a + 1.0, b + 1.0)), 4, 2)
    0.8333333333333333
    """
    if p == 0:
        return math.nan
    # the running precision divided in place, a block of groups at a time (the same divisions: the
    # same bits; the running count carried, whole numbers: exact; one block is one pass)
    total, before = 0.0, 0.0
    for a, b in spans(groups):
        tp_b, ends = block(a, b)
        prec = np.cumsum(tp_b)
        prec += before
        prec /= ends
        total += np.dot(tp_b, prec)
        before += float(tp_b.sum())
    return float(total / p)


def _ovr_point(name: str, ranks: Sequence[Ranked]) -> Callable[[], float]:
    """The unweighted one-vs-rest macro mean from each class's ranked flags (classes where it is defined)."""

    def fn() -> float:
        vals = []
        for r in ranks:
            if name == "roc_auc":
                vals.append(roc_auc_sorted(r.y, r.starts, r.pos_kept))
            else:
                rr = r.reversed()
                vals.append(ap_blocks(_blocks_of(rr), rr.groups, rr.p))
        ok = [v for v in vals if not math.isnan(v)]
        return float(np.mean(ok)) if ok else math.nan

    return fn


def _auc_infl(ranked: Ranked) -> GroupedInfluence:
    """DeLong influence values of ROC-AUC (:func:`labledger.metrics.analytic.auc_groups`), on the one sort."""
    from labledger.metrics.analytic import GroupedInfluence, auc_groups, auc_items, auc_sum_sq

    return GroupedInfluence(
        lambda clustered: auc_groups(ranked, clustered),
        lambda: auc_sum_sq(ranked),
        lambda clustered, into: auc_items(ranked, clustered, into),
    )


def _ap_infl(ranked: Ranked) -> GroupedInfluence:
    """Delta-method influence values of average precision, on the one sort read descending."""
    from labledger.metrics.analytic import GroupedInfluence, ap_groups, ap_items, ap_sum_sq

    return GroupedInfluence(
        lambda clustered: ap_groups(ranked.reversed(), clustered),
        lambda: ap_sum_sq(ranked.reversed()),
        lambda clustered, into: ap_items(ranked.reversed(), clustered, into),
    )


def _ovr_infl(name: str, ranks: Sequence[Ranked]) -> Callable[[bool], np.ndarray]:
    """Influence values of a one-vs-rest macro mean (on the classes' shared sorts)."""
    from labledger.metrics.analytic import ovr_influence

    def fn(clustered: bool) -> np.ndarray:
        kernel = _auc_infl if name == "roc_auc" else _ap_infl
        # one class's influence function at a time: its group values go once its items' are summed
        return ovr_influence((kernel(r) for r in ranks), clustered)

    return fn


#: ECE's cells (:func:`_ece_binned`): each item's bin (or rank), whether it is correct, and its
#: confidence (equal-width bins: a :class:`~labledger.metrics.kernels.BlockColumn`, made a block at
#: a time wherever it is read).
Binned = tuple[np.ndarray, np.ndarray, np.ndarray | BlockColumn]


def _ece_point(binned: Binned, n_bins: int, strategy: str) -> Callable[[], float] | None:
    """The unweighted equal-width ECE from its bin cells (no sort); None for equal-mass bins."""
    if strategy != "uniform":
        return None
    bins, correct, conf = binned

    def fn() -> float:
        if not len(bins):
            return math.nan
        gap = cell_sums(bins, lambda a, b: correct[a:b] - conf[a:b], n_bins)
        return float(np.abs(gap).sum() / len(bins))

    return fn


def _ece_binned(conf: np.ndarray | BlockColumn, correct: np.ndarray, n_bins: int, strategy: str) -> Binned:
    """ECE as cells: (bin of each item, correct, confidence) for equal-width bins, ``conf`` kept as it
    is given (a :class:`~labledger.metrics.kernels.BlockColumn`: the bins and every later reader
    take it a block at a time); for equal-mass bins the item's rank in the stable confidence order
    (the resampler cuts the ranks into chunks), and the confidences as one array. ``correct`` is
    kept as the flags it is (as numbers, 0 and 1: an array of n floats less)."""
    if strategy != "uniform":
        conf = whole(conf)
        rank = np.empty(len(conf), dtype=np.int64)
        rank[stable_argsort(conf)] = np.arange(len(conf))
        return rank, correct, conf
    # each item's bin in the narrowest unsigned type that holds the last
    narrow = np.min_scalar_type(max(n_bins - 1, 0))
    bins = by_blocks(len(conf), lambda a, b: np.minimum((conf[a:b] * n_bins).astype(np.int64), n_bins - 1), narrow)
    return bins, correct, conf


def _ece_w(
    given: np.ndarray | BlockColumn, correct: np.ndarray, n_bins: int, strategy: str, cells: np.ndarray | None = None
) -> WeightsFunction:
    """``cells``: what :func:`_ece_binned` made of the confidences, when the caller has it: each item's
    bin (equal-width bins) or its rank in the stable confidence order (equal-mass bins: the order is
    its inverse permutation, not a second sort). ``given``: the confidences, made whole where
    they are first needed."""
    n = len(given)
    if strategy == "uniform":
        cache: dict[str, np.ndarray] = {}

        def fn(w: np.ndarray, exchangeable: bool = False) -> np.ndarray:
            if not cache:  # sorted on first use: the point value and the bin-cell bootstrap never need it
                conf = whole(given)
                bins = cells if cells is not None else np.minimum((conf * n_bins).astype(np.int64), n_bins - 1)
                cache["order"] = np.argsort(bins, kind="stable")
                b_sorted = bins[cache["order"]]
                cache["starts"] = (
                    np.flatnonzero(np.r_[True, b_sorted[1:] != b_sorted[:-1]]) if n else np.zeros(0, np.int64)
                )
                cache["d"] = correct[cache["order"]].astype(np.float64) - conf[cache["order"]]
            order, starts = cache["order"], cache["starts"]
            ws = w if exchangeable else np.take(w, order, axis=1)
            tot = np.add.reduceat(ws, starts, axis=1)
            gap = np.add.reduceat(ws * cache["d"], starts, axis=1)
            return _div(np.abs(gap).sum(axis=1), tot.sum(axis=1), math.nan)

        return fn
    conf = whole(given)
    if cells is None:
        order = stable_argsort(conf)
    else:
        order = np.empty(n, dtype=np.int64)
        order[cells] = np.arange(n)
    diff = correct[order].astype(np.float64) - conf[order]

    def fn_q(w: np.ndarray, exchangeable: bool = False) -> np.ndarray:
        ws = w if exchangeable else np.take(w, order, axis=1)
        total = ws.sum(axis=1, keepdims=True)
        before = np.cumsum(ws, axis=1) - ws
        with np.errstate(invalid="ignore", divide="ignore"):
            # clipped at 0 too: a row of weights that are all 0 (no item drawn) has no bins, and
            # its nan positions must not reach bincount (its ECE is nan, as with equal-width bins)
            bins = np.clip((before * n_bins / total).astype(np.int64), 0, n_bins - 1)
        b = ws.shape[0]
        flat = (bins + n_bins * np.arange(b)[:, None]).ravel()
        gap = np.bincount(flat, weights=(ws * diff).ravel(), minlength=b * n_bins).reshape(b, n_bins)
        return _div(np.abs(gap).sum(axis=1), total[:, 0], math.nan)

    return fn_q


def _ece(
    weights: Callable[..., WeightsPrepared], conf: np.ndarray | BlockColumn, correct: np.ndarray, params: dict[str, Any]
) -> WeightsPrepared:
    """ECE's :class:`WeightsPrepared` (``weights``: :func:`_weights_of`'s) from each item's confidence,
    the predicted label's probability (:func:`~labledger.metrics.kernels.column`: past WHOLE items
    made a block at a time where it is read), and whether the prediction is correct; equal-mass
    bins make the confidences whole once, for both their cells and the weights function."""
    n_bins, strategy = params["n_bins"], params["strategy"]
    binned = _ece_binned(conf, correct, n_bins, strategy)  # (one sort, or one pass for the bins)
    return weights(
        _ece_w(binned[2], correct, n_bins, strategy, binned[0]), _ece_point(binned, n_bins, strategy), binned=binned
    )


def _weights_of(name: str, params: dict[str, Any], n: int) -> Callable[..., WeightsPrepared]:
    """``weights(from_weights, point=, influence=, binned=)``: the metric's :class:`WeightsPrepared`
    over all ``n`` items (the probability metrics' common constructor)."""

    def weights(
        from_weights: WeightsFunction,
        point: Callable[[], float] | None = None,
        influence: Callable[[bool], np.ndarray] | None = None,
        binned: Binned | None = None,
    ) -> WeightsPrepared:
        return WeightsPrepared(
            metric=name,
            params=params,
            n=n,
            n_used=n,
            from_weights=from_weights,
            point=point,
            influence=influence,
            binned=binned,
        )

    return weights


def _squared_gaps(columns: Sequence[np.ndarray], gold: np.ndarray) -> np.ndarray:
    """Each item's ``sum_j (columns[j] - [gold = j])^2``, summed left to right a column at a time (the
    floats numpy's row sum gives for fewer than 8 labels, without a copy of the rows)."""
    v: np.ndarray = columns[0] - (gold == 0)
    v *= v
    for j in range(1, len(columns)):
        d = columns[j] - (gold == j)
        d *= d
        v += d
    return v


def _brier_two(p0: np.ndarray, p1: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Each item's two-label Brier score ``((p0 - [gold = 0])^2 + (p1 - [gold = 1])^2) / 2`` from
    the two probability columns, in one array of n."""
    v = _squared_gaps((p0, p1), gold)
    v *= 0.5
    return v


def binary_prepared(
    name: str,
    params: dict[str, Any],
    gold: np.ndarray,
    score: np.ndarray,
    pos: int,
    pred: np.ndarray,
    *,
    pos_label: int | None = None,
    sorts: Sorts | None = None,
) -> Prepared | None:
    """A binary task's probability metric from its ``score`` (P(label ``pos``) of two labels; the
    other label's is ``1.0 - score``) with the same values, bit for bit, as :func:`prob_prepared`
    on the task's (n, 2) ``probs``, which is then never made. ``pred``:
    the task's predicted label indices; ``pos_label``: the index of the metric's ``pos_label``.
    ``None`` for what needs the matrix (a macro average, the other label as positive): the caller
    uses :func:`prob_prepared`."""
    if name in ("roc_auc", "average_precision"):
        if params.get("average") != "binary" or pos_label != pos:
            return None
        is_pos = gold == pos
        return score_prepared(name, params, is_pos, score, sort=_sort_of(sorts, pos, score, is_pos))
    if name == "log_loss":  # probs[arange, gold]: the gold label's column
        return score_prepared(name, params, gold == pos, score)
    if name == "brier":

        def two(a: int, b: int) -> np.ndarray:
            s, other, g = score[a:b], 1.0 - score[a:b], gold[a:b]
            return _brier_two(s, other, g) if pos == 0 else _brier_two(other, s, g)

        return _mean_of_blocks(name, params, len(score), two)
    if name == "ece":  # probs[arange, pred]: the predicted label's column
        return score_prepared(name, params, gold == pos, score, pred == pos)
    return None


def _mean(name: str, params: dict[str, Any], values: np.ndarray) -> MeanPrepared:
    """A probability metric that is the mean of its per-item ``values`` (every item used)."""
    return MeanPrepared(metric=name, params=params, n=len(values), n_used=len(values), values=values)


def _mean_of_blocks(name: str, params: dict[str, Any], n: int, block: Callable[[int, int], np.ndarray]) -> MeanPrepared:
    """:func:`_mean` of the ``n`` values ``block(a, b)`` makes for ``[a, b)`` (an elementwise formula
    cheap enough to compute three times: a binary task's log loss and Brier): beyond
    :data:`~labledger.metrics.kernels.WHOLE` items a :class:`~labledger.metrics.prepared.BlockMean`,
    which makes them a block at a time and keeps none, else their array.

    >>> x = np.array([0.5, 0.25]); _mean_of_blocks("brier", {}, 2, lambda a, b: x[a:b]).value()
    0.375
    """
    if n > kernels.WHOLE:
        return BlockMean(metric=name, params=params, n=n, n_used=n, block=block)
    return _mean(name, params, by_blocks(n, block))


def _flagged_block(is_pos: np.ndarray, score: np.ndarray, a: int, b: int) -> np.ndarray:
    """Each of the items ``[a, b)``'s probability of the label its flag picks (``score`` = P(positive)
    where flagged, else ``1.0 - score``): ``np.where(is_pos, score, 1.0 - score)[a:b]``."""
    out: np.ndarray = np.where(is_pos[a:b], score[a:b], 1.0 - score[a:b])
    return out


def _picked(probs: np.ndarray, index: np.ndarray, a: int, b: int) -> np.ndarray:
    """``probs[np.arange(n), index][a:b]``: row i's value in column ``index[i]`` for the rows
    ``[a, b)`` (for :func:`~labledger.metrics.kernels.by_blocks`: no index array of n).

    >>> _picked(np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]]), np.array([1, 0, 1]), 1, 3).tolist()
    [0.6, 0.5]
    """
    k = probs.shape[1]
    if not probs.flags.c_contiguous:
        out: np.ndarray = probs[np.arange(a, b), index[a:b]]
        return out
    # one take from the flat matrix: row i's value sits at i * k + index[i] (not the
    # two-array index, which makes both index arrays and broadcasts them)
    flat = np.arange(a * k, b * k, k)
    flat += index[a:b]
    return np.take(probs.reshape(-1), flat)


def _neg_log_clipped(p: np.ndarray) -> np.ndarray:
    """``-log(clip(p, EPS, 1 - EPS))`` in ``p``'s own memory (a new array of the caller's): the same
    values as out of place, one array of n instead of three at once."""
    np.clip(p, EPS, 1 - EPS, out=p)
    np.log(p, out=p)
    np.negative(p, out=p)
    return p


def score_prepared(
    name: str,
    params: dict[str, Any],
    is_pos: np.ndarray,
    score: np.ndarray,
    pred_pos: np.ndarray | None = None,
    *,
    sort: ColumnSort | None = None,
) -> Prepared:
    """A :class:`Prepared` for a binary probability metric from P(positive) (no (n, 2) matrix);
    ``sort``: ``score``'s :class:`ColumnSort` with ``is_pos`` when the caller has it."""
    n = len(score)

    weights = _weights_of(name, params, n)

    if name in ("roc_auc", "average_precision"):
        order, starts, ranked = sort or column_sort(score, is_pos)
        if name == "roc_auc":
            return weights(_auc_w(score, is_pos, (order, starts)), _auc_point(ranked), _auc_infl(ranked))
        return weights(
            _ap_w(score, is_pos, functools.partial(_sorted_groups, score, True, (order, starts))),
            _ap_point(ranked),
            _ap_infl(ranked),
        )
    if name == "log_loss":
        return _mean_of_blocks(name, params, n, lambda a, b: _neg_log_clipped(_flagged_block(is_pos, score, a, b)))
    if name == "brier":  # the two-label form halved: (P(positive) - y)^2, squared in place

        def squares(a: int, b: int) -> np.ndarray:
            d: np.ndarray = score[a:b] - is_pos[a:b]
            d *= d
            return d

        return _mean_of_blocks(name, params, n, squares)
    if name == "ece":
        if pred_pos is None:
            pred_pos = score >= 0.5
        # the predicted label's probability (past WHOLE items a block at a time wherever it is read)
        return _ece(
            weights, kernels.column(n, functools.partial(_flagged_block, pred_pos, score)), pred_pos == is_pos, params
        )
    raise MetricInputError(f"{name} is not a probability metric")


def prob_prepared(
    name: str,
    params: dict[str, Any],
    gold: np.ndarray,
    probs: np.ndarray,
    labels: Sequence[Any],
    *,
    pos: int | None,
    pred: np.ndarray | None = None,
    sorts: Sorts | None = None,
) -> Prepared:
    """A :class:`Prepared` for a probability metric: ``gold`` indices, ``probs`` (n, K) keyed by ``labels``.

    ``sorts``: the columns' sorts that the caller shares between the metrics of one task
    (:func:`ranked_columns`), so that ROC-AUC and average precision sort a column once.
    """
    n, k = probs.shape

    weights = _weights_of(name, params, n)

    if name in ("roc_auc", "average_precision"):
        make = _auc_w if name == "roc_auc" else _ap_w
        if params["average"] == "binary":
            if pos is None:
                raise MetricInputError(f"{name} with average='binary' needs pos_label= (the positive label)")
            column = np.ascontiguousarray(probs[:, pos])
            is_pos = gold == pos
            return score_prepared(name, params, is_pos, column, sort=_sort_of(sorts, pos, column, is_pos))
        flags = [gold == c for c in range(k)]
        if name == "roc_auc" and k == 2:
            one = _sort_of(sorts, 1, probs[:, 1], flags[1])
            if _reverse_ranking(probs[:, 0], probs[:, 1], one.order):
                # P(label 0) ranks the items exactly in reverse: both one-vs-rest AUCs are equal (when
                # both are defined), so their macro mean is the AUC of label 1, computed once
                return weights(
                    _auc_w(probs[:, 1], flags[1], (one.order, one.starts)),
                    _auc_point(one.ranked),
                    _auc_infl(one.ranked),
                )
            sorts = {**(sorts or {}), 1: one}
        by_class = [_sort_of(sorts, c, functools.partial(probs_column, probs, c), flags[c]) for c in range(k)]
        ranks = [s.ranked for s in by_class]
        return weights(_ovr_w(make, probs, flags, by_class), _ovr_point(name, ranks), _ovr_infl(name, ranks))
    if name == "log_loss":  # (a block at a time, as a binary task's: no array of n)
        return _mean_of_blocks(name, params, n, lambda a, b: _neg_log_clipped(_picked(probs, gold, a, b)))
    if name == "brier":

        def sums(a: int, b: int) -> np.ndarray:
            # ((probs - onehot) ** 2).sum(axis=1) of a block of rows (p - False is p and the gold
            # column's p - True is p - 1.0, squared in place): no (n, K) temporaries. Under 8 labels
            # a column at a time, faster than a block's copy and the same floats (numpy sums a row of fewer than 8 values left to right); from 8,
            # numpy's pairwise row sums of the block's copy
            g = gold[a:b]
            if k >= 8:
                d = np.array(probs[a:b], dtype=np.float64)
                d[np.arange(b - a), g] -= 1.0
                np.square(d, out=d)
                return np.asarray(d.sum(axis=1))
            v = _squared_gaps([probs[a:b, j] for j in range(k)], g)
            if k < 3:  # (two labels: the same floats as _brier_two)
                v *= 0.5
            return v

        return _mean_of_blocks(name, params, n, sums)
    if name == "ece":
        if pred is None:
            pred = probs.argmax(axis=1)
        return _ece(weights, kernels.column(n, functools.partial(_picked, probs, pred)), pred == gold, params)
    raise MetricInputError(f"{name} is not a probability metric")


def _raw_probs(name: str, gold: Any, probs: Any, score: Any, labels: Any, params: dict[str, Any]) -> Prepared:
    params = _checked(name, params)
    if (probs is None) == (score is None):
        raise MetricInputError(f"{name} needs exactly one of probs= (items x labels) or score= (P(positive))")
    pos_label = params.get("pos_label")
    if score is not None:
        is_pos, s, pos_label = score_inputs(gold, score, pos_label)
        params = {**params, "pos_label": pos_label} if "pos_label" in params else params
        params = resolve_average(params, True)
        if params.get("average") == "macro":  # one-vs-rest over the two labels
            probs = np.column_stack([1.0 - s, s])
            return prob_prepared(name, params, is_pos.astype(np.int64), probs, ("negative", pos_label), pos=1)
        return score_prepared(name, params, is_pos, s)
    mat, names = prob_matrix(probs, labels)
    same_length(gold=gold, probs=mat)
    (g,), _ = encode(gold, labels=names)
    pos = None
    if pos_label is not None:
        if pos_label not in names:
            raise MetricInputError(f"pos_label {pos_label!r} is not one of the labels ({', '.join(map(repr, names))})")
        pos = names.index(pos_label)
    params = resolve_average(params, pos is not None)
    return prob_prepared(name, params, g, mat, names, pos=pos)


# ------------------------------------------------------------------------------------------------
# Public functions (keyword-only)

_ZD = 0.0


def accuracy(*, gold: Any, pred: Any, sample_weight: Any = None) -> float:
    """Fraction of items whose predicted label equals the gold label.

    >>> accuracy(gold=["a", "b", "b"], pred=["a", "b", "a"])
    0.6666666666666666
    """
    return float(_raw_labels("accuracy", gold, pred, None, {}).value(sample_weight))


def balanced_accuracy(*, gold: Any, pred: Any, sample_weight: Any = None) -> float:
    """Mean recall over the labels present in gold.

    >>> balanced_accuracy(gold=[0, 0, 0, 1], pred=[0, 0, 0, 0])
    0.5
    """
    return float(_raw_labels("balanced_accuracy", gold, pred, None, {}).value(sample_weight))


def precision(
    *,
    gold: Any,
    pred: Any,
    average: Any = "auto",
    pos_label: Any = None,
    labels: Any = None,
    zero_division: Any = _ZD,
    sample_weight: Any = None,
) -> float:
    """Precision ``tp / (tp + fp)``, per label then averaged (``average``: binary/macro/micro/weighted/auto).

    >>> precision(gold=[1, 0, 1], pred=[1, 1, 1], average="binary", pos_label=1)
    0.6666666666666666
    """
    params = {"average": average, "pos_label": pos_label, "zero_division": float(zero_division)}
    return float(_raw_labels("precision", gold, pred, labels, params).value(sample_weight))


def recall(
    *,
    gold: Any,
    pred: Any,
    average: Any = "auto",
    pos_label: Any = None,
    labels: Any = None,
    zero_division: Any = _ZD,
    sample_weight: Any = None,
) -> float:
    """Recall ``tp / (tp + fn)``, per label then averaged.

    >>> recall(gold=["x", "y", "y"], pred=["x", "x", "y"], average="macro")
    0.75
    """
    params = {"average": average, "pos_label": pos_label, "zero_division": float(zero_division)}
    return float(_raw_labels("recall", gold, pred, labels, params).value(sample_weight))


def f1(
    *,
    gold: Any,
    pred: Any,
    average: Any = "auto",
    pos_label: Any = None,
    labels: Any = None,
    zero_division: Any = _ZD,
    sample_weight: Any = None,
) -> float:
    """F1 ``2 tp / (2 tp + fp + fn)``, per label then averaged.

    >>> round(f1(gold=[1, 1, 0, 0], pred=[1, 0, 0, 0], average="weighted"), 4)
    0.7333
    """
    params = {"average": average, "pos_label": pos_label, "zero_division": float(zero_division)}
    return float(_raw_labels("f1", gold, pred, labels, params).value(sample_weight))


def per_class(
    *, gold: Any, pred: Any, labels: Any = None, zero_division: Any = _ZD, sample_weight: Any = None
) -> dict[str, float]:
    """Precision, recall, F1 and support of every label: ``{"recall[a]": ..., ...}``.

    >>> per_class(gold=["a", "b"], pred=["a", "a"])["recall[b]"]
    0.0
    """
    out: dict[str, float] = _raw_labels("per_class", gold, pred, labels, {"zero_division": float(zero_division)}).value(
        sample_weight
    )
    return out


def mcc(*, gold: Any, pred: Any, sample_weight: Any = None) -> float:
    """Matthews correlation coefficient (multiclass form; 0 when a marginal is constant).

    >>> mcc(gold=[1, 0, 1, 0], pred=[1, 0, 0, 0])
    0.5773502691896258
    """
    return float(_raw_labels("mcc", gold, pred, None, {}).value(sample_weight))


def cohen_kappa(*, gold: Any, pred: Any, sample_weight: Any = None) -> float:
    """Cohen's kappa ``(p_o - p_e) / (1 - p_e)`` (nan when chance agreement is 1).

    >>> cohen_kappa(gold=[1, 0, 1, 0], pred=[1, 0, 0, 0])
    0.5
    """
    return float(_raw_labels("cohen_kappa", gold, pred, None, {}).value(sample_weight))


def confusion_matrix(*, gold: Any, pred: Any, labels: Any = None, sample_weight: Any = None) -> np.ndarray:
    """K x K counts: row = gold label, column = predicted label (labels sorted unless given).

    >>> confusion_matrix(gold=["a", "b", "b"], pred=["a", "a", "b"]).tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    same_length(gold=gold, pred=pred)
    (g, p), names = encode(gold, pred, labels=labels)
    prep = label_prepared("confusion_matrix", {}, g, p, names)
    w = np.ones(len(g)) if sample_weight is None else numbers(sample_weight, "sample_weight")
    return np.asarray(prep.tables(w[None, :])[0].reshape(len(names), len(names)))


def roc_auc(
    *,
    gold: Any,
    score: Any = None,
    probs: Any = None,
    labels: Any = None,
    average: Any = "auto",
    pos_label: Any = None,
    sample_weight: Any = None,
) -> float:
    """Area under the ROC curve: binary from ``score`` = P(positive) (or ``probs`` with ``pos_label``),
    else the one-vs-rest macro mean over labels.

    >>> roc_auc(gold=[0, 0, 1, 1], score=[0.1, 0.4, 0.35, 0.8])
    0.75
    """
    params = {"average": average, "pos_label": pos_label}
    return float(_raw_probs("roc_auc", gold, probs, score, labels, params).value(sample_weight))


def average_precision(
    *,
    gold: Any,
    score: Any = None,
    probs: Any = None,
    labels: Any = None,
    average: Any = "auto",
    pos_label: Any = None,
    sample_weight: Any = None,
) -> float:
    """Average precision ``sum_n (R_n - R_(n-1)) P_n`` over score thresholds (binary or one-vs-rest macro).

    >>> round(average_precision(gold=[0, 0, 1, 1], score=[0.1, 0.4, 0.35, 0.8]), 4)
    0.8333
    """
    params = {"average": average, "pos_label": pos_label}
    return float(_raw_probs("average_precision", gold, probs, score, labels, params).value(sample_weight))


def log_loss(
    *,
    gold: Any,
    probs: Any = None,
    score: Any = None,
    labels: Any = None,
    pos_label: Any = None,
    sample_weight: Any = None,
) -> float:
    """Mean of ``-ln p(gold)`` (natural log; p clipped to [eps, 1 - eps]).

    >>> round(log_loss(gold=["a", "b"], probs=[{"a": 0.9, "b": 0.1}, {"a": 0.2, "b": 0.8}]), 6)
    0.164252
    """
    return float(_raw_probs("log_loss", gold, probs, score, labels, {"pos_label": pos_label}).value(sample_weight))


def brier(
    *,
    gold: Any,
    probs: Any = None,
    score: Any = None,
    labels: Any = None,
    pos_label: Any = None,
    sample_weight: Any = None,
) -> float:
    """Mean of ``sum_k (p_k - 1[gold = k])^2``, halved when there are two labels (= ``(p - y)^2``).

    >>> brier(gold=[1, 0], score=[0.8, 0.4])
    0.1
    """
    return float(_raw_probs("brier", gold, probs, score, labels, {"pos_label": pos_label}).value(sample_weight))


def ece(
    *,
    gold: Any,
    probs: Any = None,
    score: Any = None,
    labels: Any = None,
    pos_label: Any = None,
    n_bins: Any = 15,
    strategy: Any = "uniform",
    sample_weight: Any = None,
) -> float:
    """Expected calibration error of the top label: ``sum_b (n_b / n) |acc_b - conf_b|``.

    >>> round(ece(gold=[1, 0, 1, 1], score=[0.9, 0.2, 0.6, 0.7], n_bins=5), 4)
    0.25
    """
    params = {"pos_label": pos_label, "n_bins": n_bins, "strategy": strategy}
    return float(_raw_probs("ece", gold, probs, score, labels, params).value(sample_weight))


# ------------------------------------------------------------------------------------------------
# Registry entries (labledger.metrics.registry builds the registry from METRICS)

#: This module's metrics, in the order they are defined.
METRICS: list[Metric] = []
#: Short names that stand for a metric with parameters (``macro_f1`` -> ``f1[average=macro]``).

_AVG = ("auto", "binary", "macro", "micro", "weighted")
_PRF = {"average": "auto", "pos_label": None, "zero_division": 0.0}
_PRF_NOTE = (
    "average=binary scores the pos_label only; macro is the unweighted mean over labels present in gold "
    "or pred; micro pools the counts; weighted weights each label by its gold support; auto is binary "
    "when the task has a positive label, else macro; a 0/0 is zero_division"
)


def _label_prep(name: str) -> Callable[..., Prepared]:
    def prep(*, gold: Any, pred: Any, labels: Any = None, **params: Any) -> Prepared:
        return _raw_labels(name, gold, pred, labels, params)

    return prep


def _prob_prep(name: str) -> Callable[..., Prepared]:
    def prep(*, gold: Any, probs: Any = None, score: Any = None, labels: Any = None, **params: Any) -> Prepared:
        return _raw_probs(name, gold, probs, score, labels, params)

    return prep


def _reg(
    name: str,
    definition: str,
    hib: bool,
    fn: Callable[..., Any],
    *,
    needs: str = "labels",
    params: dict[str, Any] | None = None,
    choices: dict[str, tuple[Any, ...]] | None = None,
    strategy: Strategy = "table",
    table: bool = False,
    undefined: str = "",
) -> None:
    kinds = LABEL_KINDS if needs == "labels" else PROB_KINDS
    prep = _label_prep(name) if needs == "labels" else _prob_prep(name)
    METRICS.append(
        Metric(
            name=name,
            definition=definition,
            higher_is_better=hib,
            needs=needs,
            kinds=kinds,
            prepare=prep,
            fn=fn,
            params=params or {},
            choices=choices or {},
            strategy=strategy,
            table=table,
            undefined=undefined,
        )
    )


_reg(
    "accuracy",
    "Fraction of items whose predicted label (argmax of probs; score >= 0.5 for binary) equals the gold label.",
    True,
    accuracy,
)
_reg(
    "balanced_accuracy", "Unweighted mean of per-label recall over the labels present in gold.", True, balanced_accuracy
)
_reg(
    "precision",
    "Precision tp / (tp + fp) with average={average} (pos_label={pos_label}, "
    "zero_division={zero_division}): " + _PRF_NOTE + ".",
    True,
    precision,
    params=_PRF,
    choices={"average": _AVG},
    undefined="zero_division",
)
_reg(
    "recall",
    "Recall tp / (tp + fn) with average={average} (pos_label={pos_label}, "
    "zero_division={zero_division}): " + _PRF_NOTE + ".",
    True,
    recall,
    params=_PRF,
    choices={"average": _AVG},
    undefined="zero_division",
)
_reg(
    "f1",
    "F1 = 2 tp / (2 tp + fp + fn) with average={average} (pos_label={pos_label}, "
    "zero_division={zero_division}): " + _PRF_NOTE + ".",
    True,
    f1,
    params=_PRF,
    choices={"average": _AVG},
    undefined="zero_division",
)
_reg(
    "per_class",
    "Precision, recall, F1 and gold support of every label, one-vs-rest (zero_division={zero_division}).",
    True,
    per_class,
    params={"zero_division": 0.0},
    table=True,
    undefined="zero_division",
)
_reg(
    "mcc",
    "Matthews correlation coefficient, multiclass form (cov(gold, pred) over the confusion matrix); "
    "0 when gold or pred is constant.",
    True,
    mcc,
    undefined="0",
)
_reg(
    "cohen_kappa",
    "Cohen's kappa (p_o - p_e) / (1 - p_e) between gold and predicted labels; nan when p_e = 1.",
    True,
    cohen_kappa,
    undefined="nan",
)
_reg(
    "confusion_matrix",
    "Counts of items by (gold label, predicted label); rows are gold, columns predicted.",
    True,
    confusion_matrix,
    table=True,
)
_reg(
    "roc_auc",
    "Area under the ROC curve (ties count one half) with average={average}: binary uses "
    "P(pos_label={pos_label}); macro is the one-vs-rest mean over labels that have positive and negative items; "
    "auto is binary when the task has a positive label.",
    True,
    roc_auc,
    needs="probs",
    params={"average": "auto", "pos_label": None},
    choices={"average": ("auto", "binary", "macro")},
    strategy="weights",
    undefined="nan",
)
_reg(
    "average_precision",
    "Average precision sum_n (R_n - R_(n-1)) P_n over distinct score thresholds with "
    "average={average} (binary on P(pos_label={pos_label}), or the one-vs-rest macro mean).",
    True,
    average_precision,
    needs="probs",
    params={"average": "auto", "pos_label": None},
    choices={"average": ("auto", "binary", "macro")},
    strategy="weights",
    undefined="nan",
)
_reg(
    "log_loss",
    "Mean over items of -ln p(gold), with p clipped to [eps, 1 - eps] (eps = 2.2e-16).",
    False,
    log_loss,
    needs="probs",
    params={"pos_label": None},
    strategy="mean",
)
_reg(
    "brier",
    "Mean over items of sum_k (p_k - 1[gold = k])^2, halved when the task has two labels "
    "(so binary = mean (P(positive) - y)^2).",
    False,
    brier,
    needs="probs",
    params={"pos_label": None},
    strategy="mean",
)
_reg(
    "ece",
    "Expected calibration error of the top label: items binned by confidence (max probability) into "
    "n_bins={n_bins} bins (strategy={strategy}: uniform = equal-width bins on [0, 1]; quantile = equal-mass "
    "bins, item i of n in confidence order going to bin floor(n_bins * i / n)); sum over bins of "
    "(bin share) * |accuracy - mean confidence|.",
    False,
    ece,
    needs="probs",
    params={"pos_label": None, "n_bins": 15, "strategy": "uniform"},
    choices={"strategy": ("uniform", "quantile")},
    strategy="weights",
)

_BY_NAME = {m.name: m for m in METRICS}

__all__ = [
    "BINARY_TABLE_METRICS",
    "METRICS",
    "accuracy",
    "ap_blocks",
    "ap_sorted",
    "average_precision",
    "balanced_accuracy",
    "binary_prepared",
    "binary_table_metric",
    "brier",
    "cohen_kappa",
    "confusion_matrix",
    "ece",
    "f1",
    "label_prepared",
    "log_loss",
    "mcc",
    "per_class",
    "precision",
    "prob_prepared",
    "recall",
    "resolve_average",
    "roc_auc",
    "roc_auc_sorted",
    "tie_starts",
    "tie_starts_by",
]
