"""Analytic intervals whose cost does not grow with n x resamples: influence values.

Every interval here comes from one per-item *influence value* psi_i (the metric's first-order change
when item i is weighted up), so that ``Var(metric) ~ sum_i psi_i^2``; a paired difference uses
``psi_A - psi_B`` on the same items, and clusters sum psi within each cluster (cluster-robust, CR1:
``C/(C-1) sum_c (sum_{i in c} psi_i)^2``). One O(n) pass after one sort per metric:

- means of per-item values (log loss, Brier, MAE, exact match...): ``psi_i = (x_i - mean) / n``,
  scaled by ``sqrt(n/(n-1))`` (the CLT SE with the n-1 variance); t on n-1 df; a 0/1 mean's own
  interval is the Wilson score interval; a transformed mean (RMSE = sqrt of the MSE) by the delta
  method;
- ROC-AUC: DeLong, DeLong & Clarke-Pearson (1988): positives ``(V10_i - AUC) / P``, negatives
  ``(V01_j - AUC) / Q`` with the structural components V10/V01 (ties count one half), scaled by
  ``sqrt(P/(P-1))`` and ``sqrt(Q/(Q-1))``: exactly DeLong's ``S10/P + S01/Q`` (and, paired, his
  covariance of two AUCs on the same items); the one-vs-rest macro mean averages the classes' psi;
- average precision: the delta method on ``AP = E[Y G(S)/F(S)] / P(Y=1)`` (G, F the survival
  functions of the positives' and all scores), giving
  ``psi_i = (1/P) [y_i (prec_i - AP) + sum_{j pos, s_j <= s_i} (y_i - prec_j) / K_j]``.

These are the standard large-sample forms; :data:`ANALYTIC_FROM` says from how many items they
replace the bootstrap (``bench/analytic_coverage.py`` measures their coverage).

>>> import numpy as np
>>> from labledger.metrics import prepare
>>> p = prepare("roc_auc", gold=[0, 0, 1, 1, 0, 1], score=[0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
>>> iv = analytic_interval(p)
>>> round(iv.value, 4), iv.method
(0.8889, 'analytic: DeLong SE, normal')
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics.kernels import SmallCounts, element_spans, gather, pairwise_sum, spans
from labledger.metrics.prepared import BlockMean, MeanPrepared, Prepared, WeightsPrepared
from labledger.metrics.stats import norm_ppf, norm_sf, t_ppf, t_sf
from labledger.metrics.ties import group_ends, group_positives, reversed_starts

#: From this many items (no clusters) analytic intervals replace the bootstrap for the metrics that
#: have one (means, ROC-AUC, AP): below it the bootstrap is cheap (docs/performance.md), and from it
#: bench/analytic_coverage.py measures DeLong / CLT / the AP delta method at nominal coverage
#: (0.94-0.96 with R = 1,000 from n = 1,000: see bench/RESULTS.md).
ANALYTIC_FROM = 10_000
#: With clusters, the cluster-robust (CR1) analytic form needs this many clusters (coverage 0.92-0.97
#: at 100 clusters in tests/test_stats_simulation.py); fewer: the cluster bootstrap.
ANALYTIC_MIN_CLUSTERS = 100

#: A function returning per-item influence values; its argument says whether clusters will be summed
#: (then the per-stratum n/(n-1) factors are left out: CR1 brings its own C/(C-1)).
InfluenceFunction = Callable[[bool], np.ndarray]


# ------------------------------------------------------------------------------------------------
# Influence values of the metrics


def _group_sums(y: np.ndarray, starts: np.ndarray) -> SmallCounts:
    """Positives per tie group, from the class flags ``y`` in sorted order, a byte each but for the
    few of 255 or more (:class:`~labledger.metrics.kernels.SmallCounts`; read as floats a block at
    a time, :meth:`Ranked.pos_of`). Summed block by block, so the flags are never all converted at
    once.

    >>> _group_sums(np.array([True, False, True, True]), np.array([0, 1]))[0:2].tolist()
    [1, 2]
    """
    return SmallCounts.of(len(starts), (group_positives(y, starts, a, b, np.int64) for a, b in spans(len(starts))))


def _group_block(r: Ranked, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(pos_g, neg_g, ends)`` of ``r``'s tie groups ``[a, b)``: the values :attr:`Ranked.pos_g`,
    :meth:`Ranked.neg_g` and :attr:`Ranked.ends` hold for them (whole numbers: the same values),
    made for those groups alone."""
    ends, pos = r.ends_of(a, b), r.pos_of(a, b)
    return pos, r.negatives_of(a, b, ends.copy(), pos), ends


def _group_blocks(r: Ranked) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`_group_block` of consecutive blocks of :data:`~labledger.metrics.kernels.BLOCK` groups, in order."""
    for a, b in spans(r.groups):
        yield _group_block(r, a, b)


def _spread(
    out: np.ndarray, r: Ranked, a: int, b: int, if_pos: np.ndarray, if_neg: np.ndarray, add: bool = False
) -> None:
    """Put the values of ``r``'s tie groups ``[a, b)`` (a positive's ``if_pos``, a negative's
    ``if_neg``, one per group) at their items in ``out`` (the items' order), or add them to what
    ``out`` holds there (``add``): each spread over its group by ``np.repeat`` rather than gathered
    item by item, for a block of groups at a time."""
    lo, hi = r.first_item(a), r.first_item(b)
    sizes = r.sizes_of(a, b)
    if sizes is not None:
        if_pos, if_neg = np.repeat(if_pos, sizes), np.repeat(if_neg, sizes)
    at = r.order[lo:hi]
    if add:  # (each item once in a block: a gather, an addition and a scatter)
        out[at] += np.where(r.y[lo:hi], if_pos, if_neg)
    else:
        out[at] = np.where(r.y[lo:hi], if_pos, if_neg)


def _spread_blocks(
    out: np.ndarray, r: Ranked, blocks: Iterable[tuple[int, int, np.ndarray, np.ndarray]], add: bool
) -> None:
    """:func:`_spread` of each ``(a, b, if_pos, if_neg)`` that ``blocks`` makes, in order."""
    for a, b, if_pos, if_neg in blocks:
        _spread(out, r, a, b, if_pos, if_neg, add)


class Ranked:
    """A score's class flags in one sort order (``order``; ``starts``: its tie groups), summed per
    group: what ROC-AUC's and average precision's values, influence values and variances read. Built
    once per column and class and shared by both metrics (each gathered and summed them again).

    >>> r = Ranked(np.array([False, True, True]), np.array([0, 2, 1]), np.array([0, 1]))
    >>> r.y.tolist(), r.p, r.pos_g.tolist(), r.sizes_of(0, r.groups).tolist()
    ([False, True, True], 2, [0.0, 2.0], [1, 2])
    >>> r.reversed().pos_g.tolist(), r.reversed().starts.tolist(), r.reversed().ends_of(0, 2).tolist()
    ([2.0, 0.0], [0, 2], [2.0, 3.0])
    """

    def __init__(self, is_pos: np.ndarray, order: np.ndarray, starts: np.ndarray | None) -> None:
        self.order, self._starts, self.n = order, starts, len(order)
        # a mapped order is read once here, again only for the items' values: its pages let go
        self.y = gather(is_pos, order, release=True)
        # without ties a group is an item, and its positives its flag; with ties the group sums are
        # kept as small whole numbers (:func:`_group_sums`); either is made into floats on each use
        # (a block, or the whole for a reader of whole arrays), not kept
        self._pos_g = None if starts is None else _group_sums(self.y, starts)
        self.p = int(np.count_nonzero(self.y))
        self._reversed: weakref.ref[Ranked] | None = None

    @property
    def starts(self) -> np.ndarray | None:
        """Each tie group's first position (None: no ties)."""
        return self._starts

    @property
    def pos_g(self) -> np.ndarray:
        """The positives per tie group, as floats (a new array)."""
        return self.pos_of(0, self.groups)

    @property
    def pos_kept(self) -> SmallCounts | None:
        """The positives per tie group as kept (sliced: int64), when there are ties; else None (a
        reader with the flags needs nothing more)."""
        return self._pos_g

    # Only the flags and their group sums are kept (the task's metrics share them); the rest is
    # derived on each use, a pass or two, so that a large task holds no more than it did.

    @property
    def groups(self) -> int:
        """The number of tie groups (no ties: ``n``)."""
        return self.n if self.starts is None else len(self.starts)

    def pos_of(self, a: int, b: int) -> np.ndarray:
        """:attr:`pos_g` of the groups ``[a, b)`` (contiguous)."""
        return (self.y if self._pos_g is None else self._pos_g)[a:b].astype(np.float64)

    def first_item(self, g: int) -> int:
        """The sorted position of group ``g``'s first item (``n`` for the group after the last)."""
        starts = self.starts
        return g if starts is None else (int(starts[g]) if g < len(starts) else self.n)

    def sizes_of(self, a: int, b: int) -> np.ndarray | None:
        """:attr:`sizes` of the groups ``[a, b)`` (None: no ties)."""
        starts = self.starts
        if starts is None:
            return None
        out = group_ends(starts, self.n, a, b, np.int64)
        out -= starts[a:b]
        return out

    @property
    def ends(self) -> np.ndarray:
        """Each group's end (one past its last item; no ties: ``1 .. n``), as floats: the items at or
        before it (whole numbers, exact)."""
        return self.ends_of(0, self.groups)

    def ends_of(self, a: int, b: int) -> np.ndarray:
        """:attr:`ends` of the groups ``[a, b)`` alone (written as floats at once)."""
        if self.starts is None:
            return np.arange(a + 1, b + 1, dtype=np.float64)
        return group_ends(self.starts, self.n, a, b)

    def neg_g(self, pos_g: np.ndarray | None = None) -> np.ndarray:
        """The negatives per group: its size less its positives, computed in one array of floats
        (the sizes are whole numbers, exact as floats: the same values as ``sizes - pos_g``);
        ``pos_g``: :attr:`pos_g` when the caller has it (not decoded again)."""
        return self.negatives_of(0, self.groups, None, pos_g)

    def negatives_of(self, a: int, b: int, ends: np.ndarray | None = None, pos: np.ndarray | None = None) -> np.ndarray:
        """:meth:`neg_g` of the groups ``[a, b)`` alone, from their :meth:`ends_of` and
        :meth:`pos_of` when the caller has them (``ends`` consumed: the negatives are written over
        them)."""
        pos = self.pos_of(a, b) if pos is None else pos
        if self.starts is None:
            return 1.0 - pos
        if ends is None:
            ends = self.ends_of(a, b)
        ends -= self.starts[a:b]  # each group's size
        ends -= pos
        return ends

    def reversed(self) -> Ranked:
        """The same in the reverse order (descending for an ascending sort): :class:`Reversed`, which
        reads this one's group sums and starts backwards. While one reversal is in use (average
        precision's influence values), the next call gives it again instead of a second one (with
        whole arrays it made); none is kept past its use."""
        found = self._reversed() if self._reversed is not None else None
        if found is None:
            found = Reversed(self)
            self._reversed = weakref.ref(found)
        return found


class Reversed(Ranked):
    """A :class:`Ranked` read in reverse (``of``: the one read), with no copy of its arrays: the flags
    and the order are views, and a block of groups (:meth:`pos_of`, :meth:`ends_of`,
    :meth:`negatives_of`) is made from the mirrored block of ``of``'s group sums and starts, the
    same whole numbers. It keeps no group sums (:attr:`pos_kept` is None: a reader makes them from
    the flags, or reads :attr:`pos_g`, made from the mirrored blocks); the whole reversed starts are
    made only for a reader of whole arrays, and kept: average precision's value and unclustered
    variance read blocks.

    >>> r = Ranked(np.array([True, False, True, False, False]), np.arange(5), np.array([0, 2, 3]))
    >>> v = Reversed(r); w = Ranked(r.y[::-1].copy(), np.arange(5), np.array([0, 2, 3]))  # reversed by hand
    >>> [v.pos_of(1, 3).tolist(), v.ends_of(0, 3).tolist(), v.negatives_of(0, 3).tolist()]
    [[1.0, 1.0], [2.0, 3.0, 5.0], [2.0, 0.0, 1.0]]
    >>> [w.pos_g[1:3].tolist(), w.ends_of(0, 3).tolist(), w.negatives_of(0, 3).tolist()]
    [[1.0, 1.0], [2.0, 3.0, 5.0], [2.0, 0.0, 1.0]]
    """

    def __init__(self, of: Ranked) -> None:  # (Ranked.__init__ would sum the groups)
        self.of, self.n, self.p = of, of.n, of.p
        self.y, self.order = of.y[::-1], of.order[::-1]
        self._reversed = weakref.ref(of)
        self._starts: np.ndarray | None = None  # the reversed starts, made on a whole reader's first ask

    @property
    def pos_kept(self) -> SmallCounts | None:
        return None

    @property
    def starts(self) -> np.ndarray | None:

        if self._starts is None and self.of.starts is not None:
            self._starts = reversed_starts(self.of.starts, self.n)
        return self._starts

    @property
    def groups(self) -> int:
        return self.of.groups

    def _mirror(self, a: int, b: int) -> tuple[int, int]:
        """The groups of ``of`` that are this one's ``[a, b)``, backwards."""
        g = self.of.groups
        return g - b, g - a

    def pos_of(self, a: int, b: int) -> np.ndarray:
        lo, hi = self._mirror(a, b)
        out: np.ndarray = np.ascontiguousarray(self.of.pos_of(lo, hi)[::-1])
        return out

    def first_item(self, g: int) -> int:
        # a group's first item here is n less the first item there of the group after it
        return self.n - self.of.first_item(self.of.groups - g)

    def sizes_of(self, a: int, b: int) -> np.ndarray | None:
        lo, hi = self._mirror(a, b)
        found = self.of.sizes_of(lo, hi)
        return None if found is None else found[::-1]

    def ends_of(self, a: int, b: int) -> np.ndarray:
        # a group's end here is n less its start there
        starts = self.of.starts
        if starts is None:
            return np.arange(a + 1, b + 1, dtype=np.float64)
        lo, hi = self._mirror(a, b)
        out: np.ndarray = np.subtract(self.n, starts[lo:hi][::-1], dtype=np.float64)
        return out

    def negatives_of(self, a: int, b: int, ends: np.ndarray | None = None, pos: np.ndarray | None = None) -> np.ndarray:
        pos = self.pos_of(a, b) if pos is None else pos
        if self.of.starts is None:
            return 1.0 - pos
        if ends is None:
            ends = self.ends_of(a, b)
        lo, hi = self._mirror(a, b)
        ends -= self.n  # a group's start here is n less its end there: its size is end - start
        ends += self.of.ends_of(lo, hi)[::-1]
        ends -= pos
        return ends


class GroupInfluence:
    """Influence values by tie group and class (``if_pos``/``if_neg`` for a group's positives and
    negatives, ``None``: the metric is undefined here): the items' values (:meth:`per_item`) and,
    without clusters, the variance ``sum_i psi_i^2`` summed by group (:meth:`sum_sq`) without them."""

    def __init__(self, ranked: Ranked, parts: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.ranked, self.parts = ranked, parts

    def per_item(self) -> np.ndarray:
        r = self.ranked
        if self.parts is None:
            return np.full(r.n, math.nan)
        out = np.empty(r.n)
        for a, b in spans(r.groups):
            _spread(out, r, a, b, self.parts[0][a:b], self.parts[1][a:b])
        return out

    def sum_sq(self) -> float:
        """``sum_i psi_i^2`` over the items, as ``sum_g (pos_g if_pos_g^2 + neg_g if_neg_g^2)``
        (nan when undefined)."""
        r = self.ranked
        if self.parts is None:
            return math.nan
        if_pos, if_neg = self.parts
        pos_g = r.pos_g
        return float(np.dot(pos_g, if_pos * if_pos) + np.dot(r.neg_g(pos_g), if_neg * if_neg))


def _delong_scales(p: int, q: int, clustered: bool) -> tuple[float, float]:
    """The factors DeLong's positives' and negatives' components are scaled by: ``sqrt(m / (m - 1))``
    for each side's n-1 variance, none with clusters (their sums carry it) or a side of one item."""
    sp = 1.0 if clustered or p < 2 else math.sqrt(p / (p - 1))
    sq = 1.0 if clustered or q < 2 else math.sqrt(q / (q - 1))
    return sp, sq


def auc_groups(r: Ranked, clustered: bool) -> GroupInfluence:
    """DeLong's influence values of ROC-AUC by group, from the ascending :class:`Ranked`."""
    p = r.p
    q = r.n - p
    if p == 0 or q == 0:
        return GroupInfluence(r, None)
    pos_g = r.pos_g
    v10, v01 = _auc_v(pos_g, r.neg_g(pos_g), r.ends, 0.0, p, q)
    auc = float((pos_g * v10).sum() / p)
    sp, sq = _delong_scales(p, q, clustered)
    return GroupInfluence(r, (_centred(v10, auc, p, sp), _centred(v01, auc, q, sq)))


def _auc_v(
    pos: np.ndarray, neg: np.ndarray, ends: np.ndarray, before: float, p: int, q: int
) -> tuple[np.ndarray, np.ndarray]:
    """DeLong's structural components V10 (for a positive: the share of negatives it outranks) and
    V01 (for a negative: the share of positives that outrank it) of consecutive groups: ``pos``,
    ``neg`` their positives and negatives, ``ends`` their ends (consumed: it becomes V10),
    ``before`` the positives in the groups before them. In place where the values allow, so a large
    task holds a few arrays of its groups at once, not one per step."""
    pos_upto = np.cumsum(pos)
    pos_upto += before  # whole numbers: exact
    # whole numbers, exact: the negatives up to a group are the items up to it less the positives
    v10 = ends
    v10 -= pos_upto
    v10 -= neg  # the negatives below each group
    v10 += neg * 0.5
    v10 /= q
    v01 = np.subtract(p, pos_upto, out=pos_upto)  # the positives above each group
    v01 += pos * 0.5
    v01 /= p
    return v10, v01


def _centred(v: np.ndarray, auc: float, count: int, scale: float) -> np.ndarray:
    """DeLong's influence values from a class's structural components, in place: ``(v - auc) / count * scale``."""
    v -= auc
    v /= count
    v *= scale
    return v


def auc_items(r: Ranked, clustered: bool, into: np.ndarray | None = None) -> np.ndarray | None:
    """``auc_groups(r, clustered).per_item()``, the same floats, a block of groups at a time: the AUC
    to centre on from the groups' products summed as ``np.sum`` of the whole array would
    (:func:`~labledger.metrics.kernels.pairwise_sum`), then each block's values spread to its items;
    no array of n but the answer. Tied
    groups in one block give None: their whole arrays cost no more, and one pass less; untied items
    in one block are :func:`_untied_items`. ``into``: an array of n the values are added to (and
    which is returned) instead of a new one, when they are defined (a macro mean's running total:
    :meth:`GroupedInfluence.add_to`).

    >>> r = Ranked(np.array([False, True, False, True]), np.arange(4), np.array([0, 1, 3]))
    >>> auc_items(r, False) is None  # one block (tests/test_analytic.py checks many, bit for bit)
    True
    """
    p, q = r.p, r.n - r.p
    if len(spans(r.groups)) == 1:
        return _untied_items(r, clustered, into) if r.starts is None and p and q else None
    if p == 0 or q == 0:
        return np.full(r.n, math.nan)

    carried = [0.0]  # the positives in the groups before (whole numbers: exact)

    def components(a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positives, V10, V01) of the groups ``[a, b)``, which follow those asked for before."""
        pos, neg, ends = _group_block(r, a, b)
        v10, v01 = _auc_v(pos, neg, ends, carried[0], p, q)
        carried[0] += float(pos.sum())
        return pos, v10, v01

    def products(a: int, b: int) -> np.ndarray:
        pos, v10, _ = components(a, b)
        v10 *= pos  # (the product commutes: pos * v10, the same floats)
        return v10

    auc = float(pairwise_sum(products, r.groups) / p)
    sp, sq = _delong_scales(p, q, clustered)
    out = np.empty(r.n) if into is None else into
    carried[0] = 0.0

    def values() -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        for a, b in spans(r.groups):
            _, v10, v01 = components(a, b)
            yield a, b, _centred(v10, auc, p, sp), _centred(v01, auc, q, sq)

    _spread_blocks(out, r, values(), into is not None)
    return out


def _untied_items(r: Ranked, clustered: bool, into: np.ndarray | None) -> np.ndarray:
    """``auc_groups(r, clustered).per_item()`` (added to ``into`` when given) of items no two of
    which tie, with positives and negatives, the same floats in half the arrays: each item is its
    own group, so a positive's V10 is its negatives below, ``(i + 1) - c_i``, over q, and a
    negative's V01 its positives above, ``p - c_i``, over p (``c_i``: the positives up to sorted
    position i; whole numbers, exact as :func:`_auc_v` makes them), and only the value an item's
    flag picks is centred and spread.

    >>> r = Ranked(np.array([False, True, False, True, True]), np.array([3, 0, 4, 1, 2]), None)
    >>> _untied_items(r, False, None).tobytes() == auc_groups(r, False).per_item().tobytes()
    True
    """
    n, p = r.n, r.p
    q = n - p
    upto = np.cumsum(r.y, dtype=np.float64)
    v10 = np.arange(1, n + 1, dtype=np.float64)
    v10 -= upto
    v10 /= q
    v01 = np.subtract(p, upto, out=upto)
    v01 /= p
    # np.sum of pos * v10 as auc_groups sums it (a negative's product is 0.0 either way)
    auc = float(np.multiply(v10, r.y).sum() / p)
    sp, sq = _delong_scales(p, q, clustered)
    values = np.where(r.y, _centred(v10, auc, p, sp), _centred(v01, auc, q, sq))
    del v10, v01
    out = np.empty(n)
    out[r.order] = values  # (a scatter and an addition: faster than a gather, an addition and a scatter)
    if into is None:
        return out
    into += out
    return into


def ap_items(r: Ranked, clustered: bool, into: np.ndarray | None = None) -> np.ndarray | None:
    """``ap_groups(r, clustered).per_item()`` (``r`` descending), the same floats, a block of groups
    at a time: AP from the running precision's products summed as ``np.sum`` of the whole array
    would (:func:`~labledger.metrics.kernels.pairwise_sum`), then backwards (the sums over the groups
    at or below each score carried from block to block: the same additions in the same order) each
    block's values spread to its items. None when the groups are one block; ``into``: as for
    :func:`auc_items`.

    >>> r = Ranked(np.array([True, False, True, True]), np.arange(4), np.array([0, 1, 3]))
    >>> ap_items(r, True) is None  # one block
    True
    """
    n, p = r.n, r.p
    parts = spans(r.groups)
    if len(parts) == 1:
        return None
    if p == 0 or n == 0:
        return np.full(n, math.nan)
    befores, before = [], 0.0
    for a, b in parts:  # the positives before each block (whole numbers: exact)
        befores.append(before)
        before += float(r.pos_of(a, b).sum())
    carried = [0.0]

    def products(a: int, b: int) -> np.ndarray:
        pos, _, prec = _ap_precision(r, a, b, carried[0])
        carried[0] += float(pos.sum())
        prec *= pos  # (pos * prec, the same floats)
        return prec

    ap = float(pairwise_sum(products, r.groups) / p)
    out = np.empty(n) if into is None else into
    scale = math.sqrt(n / (n - 1)) if not clustered and n > 1 else 1.0
    blocks = ((a, b, if_pos, if_neg) for a, b, _, if_pos, if_neg in _ap_backwards(r, parts, befores, ap, scale))
    _spread_blocks(out, r, blocks, into is not None)
    return out


def _ap_precision(r: Ranked, a: int, b: int, before: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positives, ends, running precision) of the descending groups ``[a, b)``, ``before`` the
    positives in the groups above them."""
    pos, ends = r.pos_of(a, b), r.ends_of(a, b)
    prec = np.cumsum(pos)
    prec += before  # whole numbers: exact
    prec /= ends
    return pos, ends, prec


def _ap_backwards(
    r: Ranked, parts: list[tuple[int, int]], befores: list[float], ap: float, scale: float
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """AP's influence values by block of groups, the last block first: ``(a, b, positives, a
    positive's value, a negative's value)``. The sums over the groups at or below each score are
    carried into the next block as the first term of its running sum: the same additions in the same
    order as one pass. ``befores``: the positives above each block; ``ap``: the value to centre on."""
    carry_a = carry_b = 0.0
    for k in range(len(parts) - 1, -1, -1):
        a, b = parts[k]
        pos, ends, prec = _ap_precision(r, a, b, befores[k])
        step = np.divide(pos, ends)
        above = _suffix_sums(step, carry_a)
        np.multiply(pos, prec, out=step)
        step /= ends
        weighted = _suffix_sums(step, carry_b)
        del step
        if len(above):
            carry_a, carry_b = float(above[0]), float(weighted[0])
        yield a, b, pos, *_ap_values(prec, above, weighted, ap, r.p, scale)


def ap_groups(r: Ranked, clustered: bool) -> GroupInfluence:
    """Delta-method influence values of average precision by group, from the descending :class:`Ranked`."""
    n, p = r.n, r.p
    if p == 0 or n == 0:
        return GroupInfluence(r, None)
    pos_g = r.pos_g
    k_c = r.ends  # the items at or above each score (whole numbers: its running count, exactly)
    prec = np.cumsum(pos_g)
    prec /= k_c
    ap = float((pos_g * prec).sum() / p)
    step = np.divide(pos_g, k_c)
    a = np.cumsum(step[::-1])[::-1]  # groups at or below each score
    np.multiply(pos_g, prec, out=step)
    step /= k_c
    del k_c
    b = np.cumsum(step[::-1])[::-1]
    del step
    return GroupInfluence(r, _ap_values(prec, a, b, ap, p, math.sqrt(n / (n - 1)) if not clustered and n > 1 else 1.0))


def _ap_values(
    prec: np.ndarray, a: np.ndarray, b: np.ndarray, ap: float, p: int, scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """AP's influence values of a group's positives and negatives, in the memory of ``prec`` and
    ``b``: the same operations in the same order as ``((prec - ap) + a - b) / p * scale`` and
    ``(0 - b) / p * scale`` (x * 1.0 is x)."""
    if_pos = prec
    if_pos -= ap
    if_pos += a
    if_pos -= b
    if_pos /= p
    if_neg = np.subtract(0.0, b, out=b)
    if_neg /= p
    if_pos *= scale
    if_neg *= scale
    return if_pos, if_neg


def auc_sum_sq(r: Ranked) -> float:
    """``sum_i psi_i^2`` of ROC-AUC's unclustered DeLong values (:func:`auc_groups` then
    :meth:`GroupInfluence.sum_sq`), block by block: two passes over :data:`~labledger.metrics.kernels.BLOCK` groups at a
    time (the AUC to centre on, then the squares), no array of n made. Up to one block of groups it is that computation itself (the same
    float); more blocks sum their block sums (within a few ulps).

    >>> r = Ranked(np.array([False, True, False, True]), np.arange(4), None)
    >>> auc_sum_sq(r) == auc_groups(r, False).sum_sq()
    True
    """
    p, q = r.p, r.n - r.p
    if p == 0 or q == 0:
        return math.nan
    if len(spans(r.groups)) == 1:  # one block: the whole arrays, one pass
        return auc_groups(r, False).sum_sq()

    def each() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, float]]:
        before = 0.0
        for pos, neg, ends in _group_blocks(r):  # made again in each pass (_auc_v consumes ends)
            yield pos, neg, ends, before
            before += float(pos.sum())  # whole numbers: exact

    total = 0.0
    for pos, neg, ends, before in each():
        v10, _ = _auc_v(pos, neg, ends, before, p, q)
        total += (pos * v10).sum()
    auc = float(total / p)
    sp, sq = _delong_scales(p, q, False)
    on_pos = on_neg = 0.0
    for pos, neg, ends, before in each():
        v10, v01 = _auc_v(pos, neg, ends, before, p, q)
        v10, v01 = _centred(v10, auc, p, sp), _centred(v01, auc, q, sq)
        on_pos += np.dot(pos, v10 * v10)
        on_neg += np.dot(neg, v01 * v01)
    return float(on_pos + on_neg)


def ap_sum_sq(r: Ranked) -> float:
    """``sum_i psi_i^2`` of average precision's unclustered delta-method values (:func:`ap_groups` on
    the descending :class:`Ranked` ``r``, then :meth:`GroupInfluence.sum_sq`), block by block: the
    running precision forwards, then the sums over the groups at or below each score backwards
    (each carried into the next block as the first term of its running sum: the same additions in
    the same order as one pass), no array of n made. Up to one block of groups it is that
    computation itself (the same float); more blocks sum their block sums (within a few ulps).

    >>> r = Ranked(np.array([True, False, True, False]), np.arange(4), None)
    >>> ap_sum_sq(r) == ap_groups(r, False).sum_sq()
    True
    """
    n, p = r.n, r.p
    if p == 0 or n == 0:
        return math.nan
    parts = spans(r.groups)
    if len(parts) == 1:  # one block: the whole arrays, one pass
        return ap_groups(r, False).sum_sq()
    befores, total, before = [], 0.0, 0.0
    for a, b in parts:
        befores.append(before)
        pos, _, prec = _ap_precision(r, a, b, before)
        total += (pos * prec).sum()
        before += float(pos.sum())
    ap = float(total / p)
    on_pos = on_neg = 0.0
    for a, b, pos, if_pos, if_neg in _ap_backwards(r, parts, befores, ap, math.sqrt(n / (n - 1)) if n > 1 else 1.0):
        on_pos += np.dot(pos, if_pos * if_pos)
        on_neg += np.dot(r.negatives_of(a, b), if_neg * if_neg)
    return float(on_pos + on_neg)


def _suffix_sums(step: np.ndarray, carry: float) -> np.ndarray:
    """``cumsum(step[::-1])[::-1]`` with ``carry`` (the sum of the groups after these) as its first
    term: the running sum over the groups at or below each score, continued across blocks by the
    same additions in the same order as one pass (the first block's carry is 0.0: ``0.0 + x == x``)."""
    out = np.empty(len(step) + 1)
    out[0] = carry
    out[1:] = step[::-1]
    np.cumsum(out, out=out)
    return out[:0:-1]


def auc_influence(is_pos: np.ndarray, order: np.ndarray, starts: np.ndarray | None, clustered: bool) -> np.ndarray:
    """DeLong's per-item influence values of ROC-AUC (``order``: ascending score order, ``starts``: tie
    groups of the sorted scores); nan everywhere when a class is absent.

    >>> import numpy as np
    >>> y = np.array([False, True, False, True]); order = np.arange(4)
    >>> auc_influence(y, order, None, True).round(3).tolist()
    [0.125, -0.125, -0.125, 0.125]
    """
    return auc_groups(Ranked(is_pos, order, starts), clustered).per_item()


def ap_influence(is_pos: np.ndarray, order: np.ndarray, starts: np.ndarray | None, clustered: bool) -> np.ndarray:
    """Delta-method influence values of average precision (``order``: descending score order).

    >>> import numpy as np
    >>> y = np.array([True, False, True, False]); order = np.arange(4)
    >>> abs(float(ap_influence(y, order, None, True).sum())) < 1e-12
    True
    """
    return ap_groups(Ranked(is_pos, order, starts), clustered).per_item()


class GroupedInfluence:
    """A metric's influence function (``psi = f(clustered)``, per item) built on its
    :class:`GroupInfluence`, computed once by whether clusters are summed; :meth:`sum_sq` gives the
    unclustered variance by group."""

    def __init__(
        self,
        make: Callable[[bool], GroupInfluence],
        blockwise: Callable[[], float] | None = None,
        items: Callable[[bool, np.ndarray | None], np.ndarray | None] | None = None,
    ) -> None:
        self._make = make
        self._blockwise = blockwise
        #: the items' values a block of groups at a time (:func:`auc_items`, :func:`ap_items`): the
        #: floats of the groups' per_item without the whole group arrays
        self._items = items
        self._done: dict[bool, GroupInfluence] = {}
        self._items_made: set[bool] = set()

    def groups(self, clustered: bool) -> GroupInfluence:
        if clustered not in self._done:
            self._done[clustered] = self._make(clustered)
        return self._done[clustered]

    def __call__(self, clustered: bool) -> np.ndarray:
        return self._values(clustered, None)

    def _values(self, clustered: bool, into: np.ndarray | None) -> np.ndarray:
        found = None if self._items is None or clustered in self._done else self._items(clustered, into)
        if found is None:  # (the groups are one block: made whole, and kept)
            return self.groups(clustered).per_item()
        self._items_made.add(clustered)
        return found

    def add_to(self, clustered: bool, total: np.ndarray) -> bool:
        """Add the items' values to ``total`` when they are all finite (whether they were): made a
        block of groups at a time straight into it where they can be, no array of n of their own
        (a macro mean's running total); the same sums as ``total +=
        self(clustered)``."""
        x = self._values(clustered, total)
        if x is total:
            return True
        if not np.isfinite(x).all():
            return False
        total += x
        return True

    def sum_sq(self) -> float:
        """The unclustered ``sum_i psi_i^2``: from the groups' values once the unclustered items'
        values were asked for (as when they were made from the groups), else by ``blockwise``
        (:func:`auc_sum_sq`, :func:`ap_sum_sq`), which makes no array of n."""
        if False in self._done or False in self._items_made or self._blockwise is None:
            return self.groups(False).sum_sq()
        return self._blockwise()


def ovr_influence(fns: Iterable[InfluenceFunction], clustered: bool) -> np.ndarray:
    """Influence values of a one-vs-rest macro mean: the mean of the defined classes' values (those
    with no nan), each class's added as it is made into one running total: the same additions in
    the same order as ``np.mean`` over the classes stacked (the same floats), with two arrays of n
    at once instead of 2K. ``fns``
    may be a generator: each class's function (and what it holds) is then let go once used.

    >>> ovr_influence([lambda c: np.array([1.0, 2.0]), lambda c: np.array([np.nan, 0.0]), lambda c: np.array([3.0, 1.0])], False).tolist()
    [2.0, 1.5]
    """
    total: np.ndarray | None = None
    count = n = 0
    for f in fns:
        if total is not None and isinstance(f, GroupedInfluence):  # added straight into the total
            count += f.add_to(clustered, total)
            continue
        x = f(clustered)
        n = len(x)
        if not np.isfinite(x).all():
            continue
        if total is None:  # the first class's own new array is the total (a shared one is copied)
            total = x if x.flags.owndata and x.flags.writeable else x.copy()
        else:
            total += x
        count += 1
        del x
    if total is None:
        return np.full(n, math.nan)
    total /= count
    return total


def _mean_and_slope(prep: MeanPrepared, used: np.ndarray) -> tuple[float, float] | None:
    """The mean of the values used and the slope of the metric's ``post`` there (1 without one: the
    delta method's factor); None when ``post`` is not finite around the mean."""
    return _slope_at(prep, float(used.mean()))


def _slope_at(prep: MeanPrepared, m: float) -> tuple[float, float] | None:
    """``(m, the slope of post at m)`` (:func:`_mean_and_slope` of a mean ``m``)."""
    if prep.post is None:
        return m, 1.0
    h = 1e-6 * max(1.0, abs(m))
    lo, hi = prep.post(np.array([m - h, m + h]))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    return m, float((hi - lo) / (2 * h))


def _mean_influence(prep: MeanPrepared, clustered: bool) -> np.ndarray | None:
    keep = np.ones(prep.n, dtype=bool) if prep.mask is None else np.asarray(prep.mask, dtype=bool)
    m_used = int(keep.sum())
    if m_used == 0:
        return None
    x = prep.values
    found = _mean_and_slope(prep, x[keep])
    if found is None:
        return None
    m, slope = found
    psi = np.where(keep, (x - m) / m_used, 0.0)
    if prep.post is not None:
        psi = psi * slope
    if not clustered and m_used > 1:
        psi = psi * math.sqrt(m_used / (m_used - 1))
    return psi


def influence(prep: Prepared, clustered: bool = False) -> np.ndarray | None:
    """Per-item influence values of a prepared metric, or None when it has no analytic form here.

    >>> from labledger.metrics import prepare
    >>> influence(prepare("log_loss", gold=[0, 1], score=[0.5, 0.5])).tolist()
    [0.0, 0.0]
    """
    if prep.columns is not None:
        return None
    if clustered not in prep._influence:  # once a metric: its value CI, paired tests and draws share them
        psi = None
        if isinstance(prep, MeanPrepared):
            psi = _mean_influence(prep, clustered)
        elif isinstance(prep, WeightsPrepared) and prep.influence is not None:
            psi = prep.influence(clustered)
            psi = psi if np.isfinite(psi).all() else None
        if psi is not None:
            psi.flags.writeable = False
        prep._influence[clustered] = psi
    found: np.ndarray | None = prep._influence[clustered]
    return found


def _mean_sum_sq(prep: MeanPrepared) -> float | None:
    """``sum_i psi_i^2`` of :func:`_mean_influence` (no clusters) without the values item by item;
    a :class:`~labledger.metrics.prepared.BlockMean`'s values made a block at a time, twice (the
    mean as ``np.mean`` sums them, then the squares), never all at once."""
    values, m_used, x = _used_blocks(prep)
    if m_used == 0:
        return None
    found = _mean_and_slope(prep, x) if x is not None else _slope_at(prep, float(pairwise_sum(values, m_used) / m_used))
    if found is None:
        return None
    m, slope = found
    # the squared deviations summed a block at a time (no array of n beside the values)
    ss = float(sum(np.dot(d, d) for d in (values(a, b) - m for a, b in spans(m_used))))
    factor = 1.0 / m_used
    if prep.post is not None:
        factor *= slope
    if m_used > 1:
        ss *= m_used / (m_used - 1)
    return ss * factor * factor


def sum_sq(prep: Prepared) -> float | None:
    """The unclustered variance of a prepared metric, ``sum_i psi_i^2`` of its :func:`influence`
    values, summed the cheapest way it has (by tie group for ROC-AUC and AP, one pass for a mean);
    None when it has no analytic form here.

    >>> from labledger.metrics import prepare
    >>> sum_sq(prepare("log_loss", gold=[0, 1], score=[0.5, 0.5]))
    0.0
    """
    if prep.columns is not None:
        return None
    if isinstance(prep, MeanPrepared):
        found = _mean_sum_sq(prep)
    elif isinstance(prep, WeightsPrepared) and isinstance(prep.influence, GroupedInfluence):
        found = prep.influence.sum_sq()
    else:
        psi = influence(prep, clustered=False)
        return None if psi is None else float(covariance([psi])[0, 0])
    return found if found is not None and math.isfinite(found) else None


def has_analytic(prep: Prepared) -> bool:
    """Whether :func:`influence` gives the metric an analytic interval (means, ROC-AUC, AP)."""
    if prep.columns is not None:
        return False
    return isinstance(prep, MeanPrepared) or (isinstance(prep, WeightsPrepared) and prep.influence is not None)


def use_analytic(prep: Prepared, groups: np.ndarray | None = None) -> bool:
    """Whether :func:`labledger.analysis.intervals` gives ``prep`` its analytic interval instead of
    the bootstrap: it has one, and there are >= :data:`ANALYTIC_FROM` items (and, with clusters,
    >= :data:`ANALYTIC_MIN_CLUSTERS` clusters).

    >>> from labledger.metrics import prepare
    >>> use_analytic(prepare("log_loss", gold=[0, 1] * 10, score=[0.3] * 20))
    False
    """
    if prep.n_used < ANALYTIC_FROM or not has_analytic(prep):
        return False
    return not (groups is not None and len(groups) and int(np.max(groups)) + 1 < ANALYTIC_MIN_CLUSTERS)


# ------------------------------------------------------------------------------------------------
# Variances, intervals and tests


def covariance(psis: Sequence[np.ndarray], groups: np.ndarray | None = None) -> np.ndarray:
    """(k, k) covariance of k metrics on the same items from their influence values (CR1 with clusters).

    >>> import numpy as np
    >>> covariance([np.array([0.5, -0.5])]).tolist()
    [[0.5]]
    """
    if groups is not None:
        codes = np.asarray(groups, dtype=np.int64)
        c = int(codes.max()) + 1 if len(codes) else 0
        sums = np.stack([np.bincount(codes, weights=x, minlength=c) for x in psis], axis=1)
        factor = c / (c - 1) if c > 1 else math.nan
        return np.asarray(factor * (sums.T @ sums))
    if len(psis) == 1:  # mat.T @ mat of one column is its dot product (numpy's matmul calls dot: the
        # same float), without the (n, 1) copy of the values
        x = np.ascontiguousarray(psis[0], dtype=np.float64)
        return np.array([[np.dot(x, x)]])
    mat = np.column_stack(psis)
    return np.asarray(mat.T @ mat)


def _quantile(ci: float, df: int | None) -> float:
    if df is None:
        return float(norm_ppf((1 + ci) / 2))
    return float(t_ppf((1 + ci) / 2, max(df, 1)))


def interval_kind(prep: Prepared) -> tuple[str, bool]:
    """(how the SE is formed, whether a t reference applies)."""
    if isinstance(prep, MeanPrepared):
        how = "CLT SE (n-1 variance)" if prep.post is None else "delta method on the CLT SE of the mean"
        return how, True
    if prep.metric == "roc_auc":
        return "DeLong SE" + (" (one-vs-rest mean)" if prep.params.get("average") == "macro" else ""), False
    return "delta-method (influence-function) SE", False


def t_df(prep: Prepared, groups: np.ndarray | None, t_ref: bool) -> int | None:
    """Degrees of freedom of the t reference: clusters - 1 with ``groups``, else n - 1 where a t
    reference applies (``t_ref``), else ``None`` (a normal reference)."""
    if groups is not None:
        return int(np.max(groups))  # C - 1
    return prep.n_used - 1 if t_ref else None


def describe(prep: Prepared, groups: np.ndarray | None = None, *, paired: bool = False) -> str:
    """The ``method`` text of an analytic interval (what is stored with each value)."""
    how, t_ref = interval_kind(prep)
    if groups is not None:
        how = "cluster-robust (CR1: C/(C-1)) " + how + ", t on C-1 df"
    elif t_ref:
        how += ", t on n-1 df"
    else:
        how += ", normal"
    if paired:
        return f"analytic, paired: {how} of the per-item difference; p-value: the same reference, two-sided"
    return "analytic: " + how


def _used_blocks(prep: MeanPrepared) -> tuple[Callable[[int, int], np.ndarray], int, np.ndarray | None]:
    """The values of the items that count: ``(values(a, b)`` of items ``[a, b)``, their number, their
    array)``; a :class:`~labledger.metrics.prepared.BlockMean` not made has no array (its values are
    made a block at a time, never all at once)."""
    if isinstance(prep, BlockMean) and not prep.made():
        return prep.block, prep.n, None
    x = prep.values if prep.mask is None else prep.values[np.asarray(prep.mask, dtype=bool)]
    return (lambda a, b: x[a:b]), len(x), x


def _ones(values: Callable[[int, int], np.ndarray], n: int) -> float | None:
    """How many of the ``n`` values (``values(a, b)``: those of ``[a, b)``) are 1 when every one is 0
    or 1 (the sum of the values, exact in any order), else None; read a block at a time (no flag
    arrays of n) up to the first that is neither.

    >>> x, y = np.array([0.0, 1.0, 1.0]), np.array([0.0, 0.5])
    >>> _ones(lambda a, b: x[a:b], 3), _ones(lambda a, b: y[a:b], 2)
    (2.0, None)
    """
    ones = 0
    for a, b in element_spans(n):
        v = values(a, b)
        if not bool(np.all((v == 0) | (v == 1))):
            return None
        ones += int(np.count_nonzero(v))
    return float(ones)


def analytic_interval(prep: Prepared, *, ci: float = 0.95, groups: np.ndarray | None = None) -> Any:
    """The metric's value with its analytic interval, as a :class:`labledger.metrics.resample.Interval`
    (``resamples`` 0, ``method`` naming the form); None when it has no analytic form.

    A plain 0/1 mean without clusters gets the Wilson score interval.

    >>> from labledger.metrics import prepare
    >>> analytic_interval(prepare("exact_match", gold=[1, 2, 3, 4], pred=[1, 2, 3, 0])).method
    'analytic: Wilson score interval'
    """
    from labledger.metrics.resample import Interval
    from labledger.metrics.stats import wilson_interval

    if groups is None:
        found = sum_sq(prep)
        if found is None:
            return None
        var = found
    else:
        psi = influence(prep, clustered=True)
        if psi is None:
            return None
        var = float(covariance([psi], groups)[0, 0])
    value = prep.value()
    clusters = None if groups is None else int(np.max(groups)) + 1 if len(groups) else 0
    se = math.sqrt(var) if math.isfinite(var) and var >= 0 else math.nan
    if groups is None and isinstance(prep, MeanPrepared) and prep.post is None:
        values, m_used, _ = _used_blocks(prep)
        ones = _ones(values, m_used)
        if ones is not None:
            lo, hi = wilson_interval(ones, m_used, ci)
            return Interval(value, lo, hi, ci, 0, "analytic: Wilson score interval", prep.n_used, None, 0, se)
    _, t_ref = interval_kind(prep)
    z = _quantile(ci, t_df(prep, groups, t_ref))
    if not math.isfinite(se) or not math.isfinite(value):
        return Interval(value, None, None, ci, 0, describe(prep, groups), prep.n_used, clusters, 0, None)
    lo, hi = value - z * se, value + z * se
    if prep.metric in ("roc_auc", "average_precision"):  # bounded: never an interval outside [0, 1]
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return Interval(value, lo, hi, ci, 0, describe(prep, groups), prep.n_used, clusters, 0, se)


def paired_analytic(prep_a: Prepared, prep_b: Prepared, *, ci: float = 0.95, groups: np.ndarray | None = None) -> Any:
    """A - B on the same items with its analytic interval and two-sided p-value, as a
    :class:`labledger.metrics.resample.PairedResult`; None when the metric has no analytic form.

    >>> from labledger.metrics import prepare
    >>> g = [0, 1] * 50
    >>> a = prepare("brier", gold=g, score=[0.2, 0.8] * 50)
    >>> b = prepare("brier", gold=g, score=[0.4, 0.6] * 50)
    >>> r = paired_analytic(a, b)
    >>> round(r.diff, 2), r.p_value < 0.001
    (-0.12, True)
    """
    from labledger.metrics.resample import PairedResult

    if prep_a.n != prep_b.n:
        raise MetricInputError(f"paired intervals need the same items on both sides; got n = {prep_a.n}, {prep_b.n}")
    clustered = groups is not None
    pa, pb = influence(prep_a, clustered), influence(prep_b, clustered)
    if pa is None or pb is None:
        return None
    va, vb = prep_a.value(), prep_b.value()
    diff = va - vb
    clusters = None if groups is None else int(np.max(groups)) + 1 if len(groups) else 0
    var = float(covariance([pa - pb], groups)[0, 0])
    method = describe(prep_a, groups, paired=True)
    if not (math.isfinite(var) and math.isfinite(diff)):
        return PairedResult(va, vb, diff, None, None, None, ci, 0, method, prep_a.n_used, clusters)
    se = math.sqrt(max(var, 0.0))
    _, t_ref = interval_kind(prep_a)
    df = t_df(prep_a, groups, t_ref)
    z = _quantile(ci, df)
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
    else:
        stat = abs(diff) / se
        p = float(2 * (norm_sf(stat) if df is None else t_sf(stat, max(df, 1))))
    return PairedResult(
        va, vb, diff, diff - z * se, diff + z * se, min(1.0, p), ci, 0, method, prep_a.n_used, clusters, se=se
    )


def normal_draws(
    preps: Sequence[Prepared], resamples: int, rng: np.random.Generator, groups: np.ndarray | None = None
) -> list[np.ndarray] | None:
    """Joint normal draws (value + N(0, covariance)) standing in for the paired bootstrap draws of
    several metrics on the same items; None unless every one has influence values.

    At large n the bootstrap distribution of these metrics is this normal one to O(n^-1/2): a
    caller that needs draws (a suite mean, the differences of several variants) keeps its code.
    """
    psis = [influence(p, clustered=groups is not None) for p in preps]
    if any(x is None for x in psis):
        return None
    cov = covariance([x for x in psis if x is not None], groups)
    if not np.isfinite(cov).all():
        return None
    vals, vecs = np.linalg.eigh(cov)
    root = vecs * np.sqrt(np.clip(vals, 0, None))
    z = rng.standard_normal((resamples, len(preps))) @ root.T
    return [float(p.value()) + z[:, j] for j, p in enumerate(preps)]


__all__ = [
    "ANALYTIC_FROM",
    "ANALYTIC_MIN_CLUSTERS",
    "GroupInfluence",
    "GroupedInfluence",
    "Ranked",
    "analytic_interval",
    "ap_groups",
    "ap_influence",
    "auc_groups",
    "auc_influence",
    "covariance",
    "describe",
    "has_analytic",
    "influence",
    "normal_draws",
    "ovr_influence",
    "paired_analytic",
    "sum_sq",
    "use_analytic",
]
