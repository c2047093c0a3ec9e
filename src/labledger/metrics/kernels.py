"""Two exact kernels in a few vector passes: ``math.fsum``'s value and a stable sort's order.

- :func:`exact_sum` is ``math.fsum(x)`` bit for bit (the correctly rounded sum), from a few numpy
  passes instead of one Python float a item: each pass splits every value at a power of two
  (``q = (sigma + x) - sigma``, exact; Rump, Ogita and Oishi's ExtractVector) into a high part whose
  total is exact in float64 in any order and an exact remainder, until the remainders are all zero;
  ``math.fsum`` of the few exact totals is then the correctly rounded sum of the values.
- :func:`stable_argsort` is ``np.argsort(x, kind="stable")`` by a sort of numbers, not of an
  index: each float's bits, mapped so that they sort as the floats do, keep their high part and
  take the item's index as their low bits; one (vectorised) sort of those keys is the order, but for
  runs of keys whose high parts are equal (values closer than the lost bits, and equal values),
  sorted again by value. An array of floats sorts so faster than by ``np.argsort``. Other
  arrays: the default (unstable, vectorised) sort, with the runs of equal values put back in index
  order (or, when the values are few, by a radix sort of their ranks).

>>> import numpy as np
>>> x = np.array([1e16, 1.0, -1e16, 1e-30])
>>> exact_sum(x), math.fsum(x.tolist()), float(np.sum(x))
(1.0, 1.0, 1e-30)
>>> stable_argsort(np.array([2.0, 1.0, 2.0, 1.0])).tolist()
[1, 3, 0, 2]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from labledger.machine import drop_pages, whole_pages

#: Below this many values the plain forms are as fast.
SMALL = 4096
#: Largest magnitude :func:`exact_sum` splits (beyond, ``2 n max|x|`` could overflow: math.fsum).
_HUGE = 2.0**960
#: Smallest power of two it splits at (below, the split would reach subnormals: math.fsum).
_TINY_EXP = -960


#: Items or tie groups per block of the blockwise kernels (ROC-AUC's and AP's points and variances,
#: tie groups, group sums) beyond :data:`WHOLE`: their temporaries are arrays of this many values
#: instead of n. Many blocks sum their blocks' sums (AP's value and the variances of ROC-AUC, AP and
#: the means: within a few ulps of one pass). The size is measured (docs/performance.md).
BLOCK = 1 << 18
#: Up to this many items or groups, the blockwise kernels take them as one block, computed exactly as
#: in one pass (whole arrays).
WHOLE = 1 << 20
#: Items per block where the blocks cannot change a value (an elementwise formula, :func:`exact_sum`'s
#: exact parts, whole-number counts): temporaries small enough to stay in the CPU's cache and be
#: reused by the allocator, where a block of :data:`BLOCK` takes fresh pages each time.
ELEMENT_BLOCK = 1 << 16


def spans(n: int, block: int | None = None) -> list[tuple[int, int]]:
    """``[a, b)`` ranges of consecutive blocks of ``block`` items covering ``n`` (one, empty, for 0);
    by default one block up to :data:`WHOLE` items, else blocks of :data:`BLOCK` (both read at
    each call).

    >>> spans(0), len(spans(WHOLE)), len(spans(WHOLE + 1)), spans(5, 2)
    ([(0, 0)], 1, 5, [(0, 2), (2, 4), (4, 5)])
    """
    size = (max(n, 1) if n <= WHOLE else BLOCK) if block is None else block
    return [(a, min(a + size, n)) for a in range(0, n, size)] or [(0, 0)]


def index_dtype(n: int) -> np.dtype[Any]:
    """The narrowest signed integer dtype that holds every position ``0 .. n`` of ``n`` items (int32
    up to 2^31 - 1 items, else int64).

    >>> index_dtype(10), index_dtype(2**31)
    (dtype('int32'), dtype('int64'))
    """
    return np.dtype(np.int32 if n <= np.iinfo(np.int32).max else np.int64)


def narrowed(order: np.ndarray, dtype: Any) -> np.ndarray:
    """``order.astype(dtype)`` for int64 positions that fit the narrower ``dtype`` (an argsort's
    order kept as 4-byte positions), written over the front of ``order``'s own memory a block at a
    time (a position's narrow copy never lands on one not yet read) and the rest of its pages handed
    back (:func:`labledger.machine.drop_pages`): never the two arrays at once. ``order`` is spent: it must not be read again. A copy as
    ``astype`` makes it when the two types are one, or ``order`` is small or not its own array.

    >>> o = np.arange(5, dtype=np.int64)[::-1].copy(); narrowed(o, np.int32).tolist()
    [4, 3, 2, 1, 0]
    """
    dtype = np.dtype(dtype)
    if (
        order.dtype != np.int64
        or dtype.itemsize >= order.dtype.itemsize
        or dtype.kind not in "iu"
        or len(order) < WHOLE
        or not (order.flags.c_contiguous and order.flags.writeable and _whole_memory(order))
    ):
        return order.astype(dtype, copy=False)
    n = len(order)
    out: np.ndarray = order.view(dtype)[:n]
    for a, b in element_spans(n):
        out[a:b] = order[a:b]  # (a block's narrow copy is made first: numpy sees the two overlap)
    drop_pages(order.ctypes.data + out.nbytes, order.nbytes - out.nbytes)
    return out


def _whole_memory(a: np.ndarray) -> bool:
    """Whether ``a`` spans the whole of the memory it views (itself, or views of one array of the
    same size: a sort's keys read as positions), so that no other array's data lies in it."""
    base = a
    while base.base is not None:
        base = base.base
        if not isinstance(base, np.ndarray) or base.nbytes != a.nbytes:
            return False
    return bool(base.flags.owndata)


def taken(col: np.ndarray, index: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``col[index]`` (into ``out`` when given): by ``np.take`` for a contiguous column (faster than
    indexing), by indexing for a strided one (a column of a probability matrix: ``np.take`` would
    copy the whole column first, at every call).

    >>> p = np.array([[0.2, 0.8], [0.6, 0.4]]); taken(p[:, 1], np.array([1, 0])).tolist()
    [0.4, 0.8]
    """
    if col.flags.c_contiguous:
        found: np.ndarray = np.take(col, index, out=out)
        return found
    if out is None:
        return col[index]  # type: ignore[no-any-return]
    out[...] = col[index]
    return out


def gather(x: np.ndarray, index: np.ndarray, release: bool = False) -> np.ndarray:
    """``np.take(x, index)`` (1-D) into a new array, :data:`ELEMENT_BLOCK` indices at a time: the
    same values, and an index of 4-byte positions (:func:`index_dtype`) is never copied whole into
    numpy's own index type, as ``np.take`` of it would. ``release``: a
    memory-mapped index's pages are let go as they are read (:func:`release_pages`).

    >>> gather(np.array([0.5, 0.25, 1.0]), np.array([2, 0], np.int32)).tolist()
    [1.0, 0.5]
    """
    if index.dtype == np.intp and not release:
        return taken(x, index)
    out = np.empty(len(index), dtype=x.dtype)
    for a, b in element_spans(len(index)):
        taken(x, index[a:b], out=out[a:b])
        if release:
            release_pages(index[a:b])
    return out


def release_pages(a: np.ndarray) -> None:
    """Let the kernel drop the resident pages of ``a`` when it is a view of a read-only memory map
    (a columnar cache entry's column, :func:`labledger.inputs.columnar.cached_columns`): they are
    read again from the file, unchanged, if ``a`` is used again; the process stops holding them
    (a sort order read whole once). Nothing for any other array.

    >>> release_pages(np.arange(3))  # not mapped: nothing to do
    """
    import mmap

    base = a.base
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    if not isinstance(base, mmap.mmap) or not a.flags.c_contiguous or not a.nbytes:
        return
    try:
        origin = np.frombuffer(base, dtype=np.uint8, count=1).__array_interface__["data"][0]
        start = a.__array_interface__["data"][0] - origin
        lo, hi = whole_pages(start, a.nbytes)  # (the mapping starts on a page: offsets round as addresses)
        if hi > lo:
            base.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
    except (ValueError, OSError, AttributeError):  # closed, or no madvise (Windows): the pages stay
        return


class SmallCounts:
    """Whole numbers ``>= 0``, one byte each: those of 255 or more are kept apart (their places and
    values), so that a few large counts among many small ones (the positives per tie group of
    scores that are mostly distinct but clipped at 0 and 1) take a byte each, not eight. Sliced, they are the exact counts as int64.

    >>> c = SmallCounts.of(5, [np.array([3, 0, 300]), np.array([1, 70000])])
    >>> c[1:5].tolist(), len(c)
    ([0, 300, 1, 70000], 5)
    """

    CAP = 255

    def __init__(self, small: np.ndarray, big_at: np.ndarray, big: np.ndarray) -> None:
        self.small, self.big_at, self.big = small, big_at, big

    @classmethod
    def of(cls, n: int, blocks: Iterable[np.ndarray]) -> SmallCounts:
        """The ``n`` counts of consecutive blocks (integer arrays)."""
        small = np.empty(n, dtype=np.uint8)
        at, values, start = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], 0
        for v in blocks:
            np.minimum(v, cls.CAP, out=small[start : start + len(v)], casting="unsafe")
            large = np.flatnonzero(v >= cls.CAP)
            at.append(large + start)
            values.append(v[large].astype(np.int64))
            start += len(v)
        return cls(small, np.concatenate(at), np.concatenate(values))

    def __len__(self) -> int:
        return len(self.small)

    def __getitem__(self, where: slice) -> np.ndarray:
        a, b, step = where.indices(len(self))
        if step != 1:
            raise IndexError("SmallCounts: contiguous slices only")
        out = self.small[a:b].astype(np.int64)
        i, j = np.searchsorted(self.big_at, [a, b])
        out[self.big_at[i:j] - a] = self.big[i:j]
        return out


def element_spans(n: int) -> list[tuple[int, int]]:
    """:func:`spans` of :data:`ELEMENT_BLOCK` items, for work whose values do not depend on the blocks.

    >>> element_spans(ELEMENT_BLOCK + 1)[-1] == (ELEMENT_BLOCK, ELEMENT_BLOCK + 1)
    True
    """
    return spans(n, ELEMENT_BLOCK)


#: numpy's pairwise summation sums at most this many values in one run (its ``PW_BLOCKSIZE``).
PAIRWISE_RUN = 128


def pairwise_sum(values: Callable[[int, int], np.ndarray], n: int, leaf: int | None = None) -> float:
    """``np.sum`` of the ``n`` values ``values(a, b)`` gives for ``[a, b)``, bit for bit, with no
    array of n: numpy sums a contiguous array by halving it (at ``n // 2`` less its remainder by
    8) down to runs of :data:`PAIRWISE_RUN`; this halves the same way down to ranges of at most
    ``leaf`` (:data:`BLOCK`) values, which ``np.sum`` itself sums (the same halvings below), and
    adds the halves as numpy does. ``values`` is called on consecutive ranges, left to right (a
    caller may carry a running count from one range to the next).

    >>> x = np.random.default_rng(0).random(1000)
    >>> bool(pairwise_sum(lambda a, b: x[a:b], 1000, leaf=130) == np.sum(x))
    True
    """
    size = max(PAIRWISE_RUN, BLOCK if leaf is None else leaf)

    def node(a: int, m: int) -> float:
        if m <= size:
            return np.sum(values(a, a + m))  # type: ignore[no-any-return]
        half = m // 2
        half -= half % 8
        return node(a, half) + node(a + half, m - half)

    return node(0, n) if n else 0.0


def cell_sums(cells: np.ndarray, values: Callable[[int, int], np.ndarray], size: int) -> np.ndarray:
    """``np.bincount(cells, weights=v, minlength=size)`` of the values ``v[a:b] = values(a, b)``, bit
    for bit, a block of items at a time: bincount adds each item's value to its cell in item order,
    as ``np.add.at`` does from one block to the next, so the sums are the same floats, and neither
    the values nor an ``intp`` copy of narrow ``cells`` (bincount's own) is ever an array of n.

    >>> c, v = np.array([1, 0, 1], np.uint8), np.array([0.1, 0.2, 0.7])
    >>> cell_sums(c, lambda a, b: v[a:b], 2).tolist() == np.bincount(c, weights=v, minlength=2).tolist()
    True
    """
    out = np.zeros(size, dtype=np.float64)
    for a, b in element_spans(len(cells)):
        np.add.at(out, cells[a:b], values(a, b))
    return out


def by_blocks(n: int, fill: Callable[[int, int], np.ndarray], dtype: Any = np.float64) -> np.ndarray:
    """An array of ``n`` values whose items ``[a, b)`` are ``fill(a, b)`` (a new array, elementwise:
    the same values whatever the blocks), :data:`ELEMENT_BLOCK` items at a time: the formula's
    temporaries are a block's, not n's.

    >>> x = np.arange(5.0); by_blocks(5, lambda a, b: 1.0 - x[a:b]).tolist()
    [1.0, 0.0, -1.0, -2.0, -3.0]
    """
    parts = element_spans(n)
    if len(parts) == 1:  # one block: the formula's own array, not a copy of it
        return np.asarray(fill(0, n), dtype=dtype)
    out = np.empty(n, dtype=dtype)
    for a, b in parts:
        out[a:b] = fill(a, b)
    return out


class BlockColumn:
    """A column of ``n`` values that is never held whole: ``col[a:b]`` makes the values of items
    ``[a, b)`` (``fill(a, b)``, a new array, elementwise: the same values whatever the blocks), for
    readers that go a block at a time; :func:`whole` makes all ``n`` for a reader that needs them
    at once. ECE's confidences are one (never made whole on the binned path).

    >>> x = np.arange(4.0); col = BlockColumn(4, lambda a, b: 1.0 - x[a:b])
    >>> len(col), col[1:3].tolist(), whole(col).tolist()
    (4, [0.0, -1.0], [1.0, 0.0, -1.0, -2.0])
    """

    def __init__(self, n: int, fill: Callable[[int, int], np.ndarray]) -> None:
        self._n, self._fill = n, fill

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, span: slice) -> np.ndarray:
        a, b, step = span.indices(self._n)
        if step != 1:
            raise ValueError("a BlockColumn is read by contiguous spans")
        return self._fill(a, max(a, b))


def column(n: int, fill: Callable[[int, int], np.ndarray]) -> np.ndarray | BlockColumn:
    """The ``n`` values ``fill(a, b)`` makes for ``[a, b)``: up to :data:`WHOLE` items one array, made
    once for every reader (rather than once per reader a block at a time), past it a :class:`BlockColumn`, never held whole.

    >>> x = np.arange(3.0); column(3, lambda a, b: 2 * x[a:b]).tolist()
    [0.0, 2.0, 4.0]
    >>> isinstance(column(WHOLE + 1, lambda a, b: np.zeros(b - a)), BlockColumn)
    True
    """
    return by_blocks(n, fill) if n <= WHOLE else BlockColumn(n, fill)


def whole(col: np.ndarray | BlockColumn) -> np.ndarray:
    """``col`` as an array of all its values (a :class:`BlockColumn`'s made by :func:`by_blocks`)."""
    if isinstance(col, BlockColumn):
        return by_blocks(len(col), col._fill)
    return col


def exact_sum(x: np.ndarray) -> float:
    """``math.fsum(x)`` of a 1-D float64 array, the same float, in a few vector passes.

    Every pass takes sigma = 2^k >= 2 n max|r| (r: what is left of the values); the high parts
    ``q = fl(fl(sigma + r) - sigma)`` are multiples of 2^(k-53) of total at most sigma, so their sum
    is exact whatever the order, and ``r - q`` is exact and at most 2^(k-53): each pass takes ~53 -
    log2(2n) bits off every value. Non-finite values, zeros only and extreme magnitudes go to
    ``math.fsum`` itself.

    >>> exact_sum(np.array([0.1] * 10)) == math.fsum([0.1] * 10)
    True
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    if len(x) < SMALL:
        return math.fsum(x.data)
    return exact_sum_of(lambda a, b: x[a:b], len(x))


def exact_sum_of(values: Callable[[int, int], np.ndarray], n: int) -> float:
    """:func:`exact_sum` of the ``n`` values ``values(a, b)`` gives for ``[a, b)`` (float64), asked
    for a block of :data:`ELEMENT_BLOCK` at a time: the same float, and never an array of n.

    >>> x = np.random.default_rng(1).random(10_000); exact_sum_of(lambda a, b: x[a:b], len(x)) == exact_sum(x)
    True
    """
    # fsum of exact parts is the correctly rounded sum of everything, however the values are split:
    # a block of values at a time, so the passes' copies are a block's, not n's
    return math.fsum(
        part for a, b in element_spans(n) for part in _exact_parts(np.ascontiguousarray(values(a, b), dtype=np.float64))
    )


def _exact_parts(x: np.ndarray) -> list[float] | memoryview:
    """Floats whose exact sum is the exact sum of ``x`` (:func:`exact_sum`'s passes; the values
    themselves where the passes do not apply)."""
    n = len(x)
    top = float(np.max(np.abs(x))) if n else 0.0
    if not (0.0 < top < _HUGE):  # nan, inf, all zeros (fsum's sign of zero), or near overflow
        return x.data
    totals = []
    rest = x.copy()
    high = np.empty_like(x)
    while top > 0.0:
        k = math.frexp(2.0 * n * top)[1]  # 2^k > 2 n top
        if k < _TINY_EXP:
            return x.data
        sigma = math.ldexp(1.0, k)
        np.add(rest, sigma, out=high)
        high -= sigma
        totals.append(float(np.sum(high)))
        rest -= high
        top = max(float(rest.max()), -float(rest.min()))
    return totals


#: The sign bit of a float64's bits, and all of them.
_SIGN, _ALL = np.uint64(1 << 63), np.uint64((1 << 64) - 1)


def _packed_order(x: np.ndarray) -> np.ndarray | None:
    """``np.argsort(x, kind="stable")`` of float64 ``x`` (``n < 2**32`` values) by one sort of
    64-bit keys. A key is the value's bits mapped to an unsigned number that orders as the floats do
    (-0.0 made 0.0 first; a negative's bits flipped, a positive's sign bit set), its low ``b`` bits
    (``2**b >= n``) replaced by the item's index. Keys whose high parts differ order as their values;
    a run of keys with one high part (equal values, or values within the dropped bits) is then sorted
    by value, ties by index; a run of equal values alone is in index order already. None (the caller
    sorts as usual) when some value is NaN, or when such runs hold most values.

    >>> x = np.array([0.5, -0.0, 2.0, 0.0, -1.0, 0.5, np.inf])
    >>> _packed_order(x).tolist() == np.argsort(x, kind="stable").tolist()
    True
    """
    n = len(x)
    lo = float(np.min(x)) if n else 0.0
    if math.isnan(lo) or math.isnan(float(np.max(x))):
        return None
    b = max(1, (n - 1).bit_length())
    low = np.uint64((1 << b) - 1)
    keys = np.add(x, 0.0)  # a copy, with -0.0 + 0.0 = 0.0: the two zeros one value, as they compare
    k = keys.view(np.uint64)
    for a, e in spans(n):  # an order-keeping map of the bits, then the index in the low bits
        part = k[a:e]
        if lo < 0:
            part ^= (part >> np.uint64(63)) * _ALL | _SIGN
        part &= ~low
        part |= np.arange(a, e, dtype=np.uint64)
    k.sort()
    # neighbours of one high part whose values differ: equal values (ties) are in index order already
    unsorted = []
    for a, e in spans(n - 1):
        pair = np.flatnonzero((k[a + 1 : e + 1] ^ k[a:e]) <= low)
        pair += a
        if len(pair):
            first, second = (k[pair] & low).astype(np.intp), (k[pair + 1] & low).astype(np.intp)
            unsorted.append(pair[taken(x, first) != taken(x, second)])
    found = np.concatenate(unsorted) if unsorted else np.zeros(0, dtype=np.int64)
    if len(found):  # each run of their high parts (found in the sorted keys): sorted by value, then index
        high = np.unique(k[found] & ~low)
        begin, end = np.searchsorted(k, high, "left"), np.searchsorted(k, high | low, "right")
        size = end - begin
        if int(size.sum()) > n // 2:
            return None  # most values within the dropped bits of each other: the default sort's path
        at = np.repeat(begin - np.cumsum(size) + size, size) + np.arange(int(size.sum()))
        run = k[at]
        index = (run & low).astype(np.intp)
        k[at] = run[_argsort_runs(x[index])]  # by value alone: runs of other high parts never mix
    order: np.ndarray = k.view(np.int64)
    order &= np.int64(low)
    return order


def stable_argsort(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` of a 1-D numeric array, the same order, faster:
    floats by packed keys (:func:`_packed_order`), else (or when they are mostly tied) the default
    (unstable, vectorised) sort, then each run of equal values in index order. NaNs (which compare
    unequal to each other) go to the stable sort itself.

    >>> stable_argsort(np.array([0.0, -0.0, 0.0])).tolist()
    [0, 1, 2]
    """
    x = np.asarray(x)
    n = len(x)
    if x.ndim != 1 or n < SMALL or x.dtype.kind not in "fiub":
        return np.argsort(x, kind="stable")
    if x.dtype == np.float64 and n < 1 << 32:
        found = _packed_order(x)
        if found is not None:
            return found
    return _argsort_runs(x)


def _argsort_runs(x: np.ndarray) -> np.ndarray:
    """:func:`stable_argsort` by the default sort and then each run of equal values in index order."""
    n = len(x)
    if n < SMALL:
        return np.argsort(x, kind="stable")
    order = np.argsort(x)
    s = taken(x, order)
    if x.dtype.kind == "f" and math.isnan(s[-1]):  # (NaNs sort last)
        return np.argsort(x, kind="stable")
    tied = s[1:] == s[:-1]
    if not tied.any():
        return order
    distinct = n - int(np.count_nonzero(tied))
    if distinct <= 1 << 16:  # few values (rounded probabilities): their ranks, by the 16-bit radix sort
        code = np.empty(n, dtype=np.uint16)
        code[order] = np.r_[0, np.cumsum(~tied)]
        return np.argsort(code, kind="stable")
    edge = np.flatnonzero(np.diff(np.r_[False, tied, False].astype(np.int8)))
    first, last = edge[::2], edge[1::2]  # runs of equal values: sorted positions first..last
    length = last - first + 1
    pos = np.repeat(first - np.cumsum(np.r_[0, length[:-1]]), length) + np.arange(int(length.sum()))
    run = np.repeat(first.astype(np.int64), length)
    key = np.sort(run * n + order[pos])  # by run, then by index within the run
    order[pos] = key - run * n
    return order


__all__ = [
    "BlockColumn",
    "SmallCounts",
    "by_blocks",
    "cell_sums",
    "column",
    "element_spans",
    "exact_sum",
    "exact_sum_of",
    "gather",
    "index_dtype",
    "narrowed",
    "pairwise_sum",
    "release_pages",
    "spans",
    "stable_argsort",
    "whole",
]
