"""Runs of equal values (ties) in sorted arrays, read a block at a time: where each tie group starts,
ends, and how many positives it holds. Rank metrics (ROC-AUC, average precision) and their
intervals (:mod:`labledger.metrics.analytic`) build on these.

>>> s = tie_starts(np.array([0.1, 0.4, 0.4, 0.8])); s.tolist()
[0, 1, 3]
>>> group_ends(s, 4, 0, 3).tolist()
[1.0, 3.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from labledger.metrics.kernels import index_dtype, spans

__all__ = ["differing", "group_ends", "group_positives", "reversed_starts", "tie_starts", "tie_starts_by"]


def tie_starts(sorted_values: np.ndarray) -> np.ndarray | None:
    """Start index of each run of equal values in a sorted array (``None``: no two are equal).

    >>> tie_starts(np.array([0.1, 0.4, 0.4, 0.8])).tolist(), tie_starts(np.array([0.1, 0.2]))
    ([0, 1, 3], None)
    """
    s = sorted_values
    return tie_starts_by(lambda a, b: s[a:b], len(s))


def differing(v: np.ndarray) -> np.ndarray:
    """Which neighbours of ``v`` differ (``v[1:] != v[:-1]``)."""
    out: np.ndarray = v[1:] != v[:-1]
    return out


def tie_starts_by(values: Callable[[int, int], np.ndarray], n: int, count: int | None = None) -> np.ndarray | None:
    """:func:`tie_starts` of ``n`` sorted values, read a block at a time as ``values(a, b)`` (a
    slice, or a gather through a sort order: the sorted values are never one array of n);
    ``count``: how many neighbours differ, when the caller has counted them.

    >>> x = np.array([0.4, 0.1, 0.4, 0.8]); o = np.argsort(x, kind="stable")
    >>> tie_starts_by(lambda a, b: np.take(x, o[a:b]), 4).tolist()
    [0, 1, 3]
    """
    if n < 2:
        return None
    if count is None:
        count = sum(int(np.count_nonzero(differing(values(a, b + 1)))) for a, b in spans(n - 1))
    if count == n - 1:
        return None  # no ties
    # written block by block: one array of n, not three; 4-byte positions where they fit
    out = np.empty(count + 1, dtype=index_dtype(n))
    out[0], at = 0, 1
    for a, b in spans(n - 1):  # each block with the next one's first value: its last neighbours
        found = np.flatnonzero(differing(values(a, b + 1)))
        found += a + 1
        out[at : at + len(found)] = found
        at += len(found)
    return out


def group_ends(starts: np.ndarray, n: int, a: int, b: int, dtype: Any = np.float64) -> np.ndarray:
    """The ends (one past the last item: the items at or before it) of the tie groups ``[a, b)`` of
    ``n`` sorted items whose groups start at ``starts`` (:func:`tie_starts`), as ``dtype`` (whole
    numbers: exact as floats). A block of groups at a time for the blockwise kernels.

    >>> s = np.array([0, 1, 3]); group_ends(s, 4, 0, 3).tolist(), group_ends(s, 4, 1, 2, np.int64).tolist()
    ([1.0, 3.0, 4.0], [3])
    """
    g = len(starts)
    out = np.empty(b - a, dtype=dtype)
    out[: b - a - (b == g)] = starts[a + 1 : b + 1]
    if b == g and b > a:
        out[-1] = n
    return out


def group_positives(y: np.ndarray, starts: np.ndarray, a: int, b: int, dtype: Any = np.float64) -> np.ndarray:
    """The positives (``y``: the class flags in sorted order) of each tie group ``[a, b)``, as ``dtype``.

    >>> group_positives(np.array([False, True, True, False]), np.array([0, 1, 3]), 1, 3).tolist()
    [2.0, 0.0]
    """
    if b <= a:
        return np.zeros(0, dtype=dtype)
    lo, hi = int(starts[a]), (int(starts[b]) if b < len(starts) else len(y))
    return np.add.reduceat(y[lo:hi].astype(dtype), starts[a:b] - lo)


def reversed_starts(starts: np.ndarray | None, n: int) -> np.ndarray | None:
    """The tie-group starts of a sorted array of ``n`` values read backwards, from the starts
    (:func:`tie_starts`) of the array itself: group ``[s, e)`` becomes ``[n - e, n - s)``.

    >>> s = np.array([0.1, 0.4, 0.4, 0.8])
    >>> reversed_starts(tie_starts(s), 4).tolist(), tie_starts(s[::-1]).tolist()
    ([0, 1, 3], [0, 1, 3])
    """
    if starts is None:
        return None
    # (n - ends)[::-1] with ends = starts[1:] + [n], written into one array (not three)
    out = np.empty(len(starts), dtype=starts.dtype)
    out[0] = 0
    np.subtract(n, starts[:0:-1], out=out[1:])
    return out
