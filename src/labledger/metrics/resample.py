"""Bootstrap confidence intervals and paired tests, vectorised (never a Python loop of metric calls).

Every resample is the classic bootstrap: n items drawn with replacement (or, when items carry a
cluster ``group``, G clusters drawn with replacement, each bringing all its items). Three exact,
equivalent ways to draw them, chosen by the metric's shape (see :mod:`labledger.metrics.registry`):

- ``table`` metrics: items are exchangeable within a cell of their count table (for a paired
  comparison, a cell of the joint (A cell, B cell) table), so a resample is a multinomial draw of n
  over the occupied cells: ``B x cells`` numbers instead of ``B x n``. Clusters: each cluster's
  cell counts, summed with multinomial cluster weights (a sparse product).
- ``mean`` metrics: ``W @ v`` with W the (B x n) resample counts; when v takes few distinct values
  (accuracy-like 0/1) the same multinomial trick over those values is used.
- ``weights`` metrics: W in chunks of (B_chunk x n) integer counts, passed to the metric.

Percentile intervals; paired p-values by the percentile bootstrap (one procedure with the interval):
``p = min(1, 2 min(1 + #{d* <= 0}, 1 + #{d* >= 0}) / (B + 1))`` with d* the resampled differences, so
p < 0.05 exactly when the 95% percentile interval excludes 0 (up to ties and 1/B); see
:func:`labledger.metrics.stats.percentile_p_value`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics.kernels import BlockColumn, by_blocks, cell_sums, element_spans
from labledger.metrics.prepared import MeanPrepared, Prepared, TablePrepared, WeightsPrepared
from labledger.metrics.stats import percentile_p_value, quantiles

#: Bound on the elements of one chunk of resample weights (keeps memory at ~100 MB per array).
CHUNK_ELEMENTS = 1 << 22
#: Mean metrics whose per-item values take at most this many distinct combinations use multinomial draws.
MAX_CATEGORIES = 4096
#: How the chunks of resamples run: ``map``, one after another, or a caller's ``map`` that runs them
#: in threads (:func:`labledger.analysis.threads.chunk_map`): each chunk has its own generator, so
#: the draws are the same.
Run = Callable[..., Iterable[Any]]
#: McNemar uses the exact binomial test when fewer items than this are discordant.
MCNEMAR_EXACT_BELOW = 25


@dataclass
class Interval:
    """A value with its bootstrap percentile interval."""

    value: float
    low: float | None
    high: float | None
    ci: float
    resamples: int
    method: str
    n: int
    clusters: int | None = None
    undefined_resamples: int = 0
    se: float | None = None  # analytic intervals: the standard error they are formed from

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PairedResult:
    """A difference A - B with its interval and a two-sided bootstrap p-value."""

    a: float
    b: float
    diff: float
    low: float | None
    high: float | None
    p_value: float | None
    ci: float
    resamples: int
    method: str
    n: int
    clusters: int | None = None
    mcnemar: dict[str, Any] | None = field(default=None)
    se: float | None = None  # standard deviation of the resampled differences (for the MDE)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------------
# Drawing resamples


def rng_for(seed: int | Sequence[int] | np.random.Generator | None) -> np.random.Generator:
    """A numpy Generator from a seed, a sequence of ints (mixed into one seed), or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


#: Above this many items, resample counts are drawn block by block (cache-sized bincounts).
_BLOCK = 1 << 16


def weight_rows(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """(size, n) float64 bootstrap counts: each row is n draws with replacement (sums to n).

    Small n: one bincount of n random indices per row (stays in cache). Large n: the row's total
    is first split over blocks of 65,536 items by a multinomial draw, then each block's share is
    drawn uniformly within it: the same multinomial law, faster at large n.
    """
    out = np.empty((size, n))
    if n == 0:
        return out
    if n <= 2 * _BLOCK:
        idx = rng.integers(0, n, size=(size, n), dtype=np.int32 if n < 2**31 else np.int64)
        for j in range(size):
            out[j] = np.bincount(idx[j], minlength=n)
        return out
    starts = np.arange(0, n, _BLOCK)
    sizes = np.minimum(_BLOCK, n - starts)
    totals = rng.multinomial(n, sizes / n, size=size)
    for j in range(size):
        for k, (s0, bs) in enumerate(zip(starts.tolist(), sizes.tolist())):
            out[j, s0 : s0 + bs] = np.bincount(rng.integers(0, bs, totals[j, k], dtype=np.int32), minlength=bs)
    return out


def draw_counts(counts: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """(size, O) multinomial resamples of ``counts.sum()`` items over O categories (occupied cells).

    The same law as drawing every item with replacement and counting the categories.
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros((size, len(counts)))
    if len(counts) * 8 <= total or len(counts) <= 64:
        return rng.multinomial(total, counts / total, size=size).astype(np.float64)
    cat = np.repeat(np.arange(len(counts)), counts)
    idx = cat[rng.integers(0, total, size=(size, total))]
    idx += (len(counts) * np.arange(size, dtype=idx.dtype))[:, None]
    return np.bincount(idx.ravel(), minlength=size * len(counts)).reshape(size, len(counts)).astype(np.float64)


def _chunks(total: int, per_row: int) -> list[int]:
    step = max(1, min(total, CHUNK_ELEMENTS // max(per_row, 1)))
    return [min(step, total - s) for s in range(0, total, step)]


def _run_chunks(sizes: list[int], rng: np.random.Generator, work: Any, n_out: int, run: Run = map) -> list[np.ndarray]:
    """``work(size, generator)`` of each chunk, through ``run`` (:data:`Run`), stacked.

    Each chunk gets its own generator seeded from ``rng``, so results do not depend on how they run.
    """
    if not sizes:
        return [np.zeros(0) for _ in range(n_out)]
    seeds = rng.integers(0, 2**63 - 1, size=len(sizes))
    gens = [np.random.default_rng(int(x)) for x in seeds]
    results = list(run(work, sizes, gens))
    return [np.concatenate([r[i] for r in results]) for i in range(n_out)]


def _small_int_categories(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """O(n) joint categories of non-negative small-range integer columns (count-table cells)."""
    if not columns or not all(c.dtype.kind in "iu" for c in columns) or not len(columns[0]):
        return None
    sizes = [int(c.max()) + 1 for c in columns]
    if min(int(c.min()) for c in columns) < 0 or math.prod(sizes) > 1 << 22:
        return None
    code = columns[0].astype(np.int64)
    for c, size in zip(columns[1:], sizes[1:]):
        code = code * size + c
    occupied = np.flatnonzero(np.bincount(code, minlength=math.prod(sizes)))
    if len(columns) > 1:
        if len(occupied) > 64:
            return None
        first = [int(np.argmax(code == v)) for v in occupied]  # first appearance, as the general path
        occupied = occupied[np.argsort(first, kind="stable")]
    lookup = np.full(math.prod(sizes), -1, dtype=np.int64)
    lookup[occupied] = np.arange(len(occupied))
    uniq = np.empty((len(occupied), len(columns)), dtype=np.int64)
    rest = occupied.copy()
    for j in range(len(columns) - 1, -1, -1):
        uniq[:, j] = rest % sizes[j]
        rest //= sizes[j]
    return lookup[code], uniq


def _joint_categories(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(inverse, unique rows) of the joint values of the columns, categories in order of first item.

    Ordering by first appearance (not by value) makes the draws of ``paired(A, B)`` and
    ``paired(B, A)`` the same, so swapping the sides mirrors the result exactly.
    """
    fast = _small_int_categories(columns)
    if fast is not None:
        return fast
    if len(columns) == 1 and columns[0].dtype.kind in "iu":
        uniq, first, inv = np.unique(columns[0], return_index=True, return_inverse=True)
        uniq = uniq[:, None]
    else:
        uniq, first, inv = np.unique(np.column_stack(columns), axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[inv.reshape(-1)], uniq[order]


def one_table_categories(cells: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(unique rows, counts) of one column of cell codes in ``[0, size)``: what
    :func:`_joint_categories` and a bincount of its inverse give for that column, from one bincount.

    >>> uniq, counts = one_table_categories(np.array([3, 0, 3, 3]), 4)
    >>> uniq.ravel().tolist(), counts.tolist()
    ([0, 3], [1, 3])
    """
    return _occupied_cells(np.bincount(cells, minlength=size))


def _occupied_cells(full: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the occupied cells as rows, their counts) of a count table ``full`` (one count per cell).

    >>> uniq, counts = _occupied_cells(np.array([1, 0, 0, 3]))
    >>> uniq.ravel().tolist(), counts.tolist()
    ([0, 3], [1, 3])
    """
    occupied = np.flatnonzero(full)
    return occupied[:, None], full[occupied]


def _table_cells(prep: TablePrepared) -> np.ndarray:
    cells = prep.get_cells()
    return np.where(cells >= 0, cells, prep.n_cells)


def _check_same(preps: Sequence[Prepared]) -> int:
    ns = {p.n for p in preps}
    if len(ns) != 1:
        raise MetricInputError(f"paired resampling needs the same items on both sides; got n = {sorted(ns)}")
    strategies = {p.strategy for p in preps}
    if len(strategies) != 1:
        raise MetricInputError("paired resampling needs the same metric on both sides")
    return ns.pop()


def resample_values(
    preps: Sequence[Prepared],
    resamples: int,
    rng: np.random.Generator,
    groups: np.ndarray | None = None,
    run: Run = map,
) -> list[np.ndarray]:
    """Each prepared metric's value on the same ``resamples`` bootstrap resamples (paired draws),
    drawn in chunks that ``run`` runs (:data:`Run`).

    Returns one array per metric: (resamples,) or (resamples, columns).
    """
    n = _check_same(preps)
    strategy = preps[0].strategy
    if groups is not None:
        groups = np.asarray(groups, dtype=np.int64)
        if groups.shape != (n,):
            raise MetricInputError(f"groups has shape {groups.shape}; expected ({n},)")
    if strategy == "table":
        return _resample_table([p for p in preps if isinstance(p, TablePrepared)], resamples, rng, groups, run)
    if strategy == "mean":
        return _resample_mean([p for p in preps if isinstance(p, MeanPrepared)], resamples, rng, groups, run)
    return _resample_weights([p for p in preps if isinstance(p, WeightsPrepared)], resamples, rng, groups, run)


def _scatter(draws: np.ndarray, cell_of_cat: np.ndarray, n_cells: int) -> np.ndarray:
    b = draws.shape[0]
    flat = (cell_of_cat[None, :] + (n_cells + 1) * np.arange(b)[:, None]).ravel()
    out = np.bincount(flat, weights=draws.ravel(), minlength=b * (n_cells + 1)).reshape(b, n_cells + 1)
    return out[:, :n_cells]


def _group_matrix(groups: np.ndarray, cat: np.ndarray, n_cat: int) -> Any:
    from scipy import sparse

    n_groups = int(groups.max()) + 1 if len(groups) else 0
    mat = sparse.csr_matrix((np.ones(len(groups)), (groups, cat)), shape=(n_groups, n_cat))
    mat.sum_duplicates()
    return mat, n_groups


def _resample_table(
    preps: Sequence[TablePrepared], resamples: int, rng: np.random.Generator, groups: np.ndarray | None, run: Run
) -> list[np.ndarray]:
    shared = preps[0].cell_counts if groups is None and len(preps) == 1 else None
    cells = [] if shared is not None else [_table_cells(p) for p in preps]
    if shared is not None:  # the task's count table, counted once for its metrics
        uniq, counts = _occupied_cells(shared)
        per_row = len(counts)
    elif groups is None and len(preps) == 1 and cells[0].dtype.kind in "iu" and preps[0].n_cells < 1 << 22:
        # one table, no clusters: the occupied cells in order of value with their counts (the
        # categories of _small_int_categories) from one bincount, without per-item codes
        uniq, counts = one_table_categories(cells[0], preps[0].n_cells + 1)
        per_row = len(counts)
    else:
        inv, uniq = _joint_categories(cells)
        n_cat = len(uniq)
        if groups is None:
            counts = np.bincount(inv, minlength=n_cat)
            per_row = n_cat
        else:
            gmat, n_groups = _group_matrix(groups, inv, n_cat)
            per_row = max(n_groups, n_cat)

    def work(size: int, gen: np.random.Generator) -> list[np.ndarray]:
        if groups is None:
            draws = draw_counts(counts, size, gen)
        else:
            draws = np.asarray((gmat.T @ weight_rows(n_groups, size, gen).T).T)
        return [p.from_tables(_scatter(draws, uniq[:, i], p.n_cells)) for i, p in enumerate(preps)]

    return _run_chunks(_chunks(resamples, per_row), rng, work, len(preps), run)


def _resample_mean(
    preps: Sequence[MeanPrepared], resamples: int, rng: np.random.Generator, groups: np.ndarray | None, run: Run
) -> list[np.ndarray]:
    vals = [p.masked_values() for p in preps]
    masks = [p.mask_float() for p in preps]
    if groups is not None:
        n_groups = int(groups.max()) + 1 if len(groups) else 0
        sums = [np.bincount(groups, weights=v, minlength=n_groups) for v in vals]
        cnts = [np.bincount(groups, weights=m, minlength=n_groups) for m in masks]

        def work_groups(size: int, gen: np.random.Generator) -> list[np.ndarray]:
            wg = weight_rows(n_groups, size, gen)
            return [p.mean_of(wg @ sums[i], wg @ cnts[i]) for i, p in enumerate(preps)]

        return _run_chunks(_chunks(resamples, n_groups), rng, work_groups, len(preps), run)
    columns = vals + [m for m, p in zip(masks, preps) if p.mask is not None]
    few = all(len(np.unique(c)) <= MAX_CATEGORIES for c in columns) if len(columns[0]) else True
    if few:
        inv, uniq = _joint_categories(columns)
        counts = np.bincount(inv, minlength=len(uniq))
        cat_vals = [np.bincount(inv, weights=v, minlength=len(uniq)) / np.maximum(counts, 1) for v in vals]
        cat_mask = [np.bincount(inv, weights=m, minlength=len(uniq)) / np.maximum(counts, 1) for m in masks]

        def work_cats(size: int, gen: np.random.Generator) -> list[np.ndarray]:
            draws = draw_counts(counts, size, gen)
            return [p.mean_of(draws @ cat_vals[i], draws @ cat_mask[i]) for i, p in enumerate(preps)]

        return _run_chunks(_chunks(resamples, len(uniq)), rng, work_cats, len(preps), run)
    n = preps[0].n

    def work_items(size: int, gen: np.random.Generator) -> list[np.ndarray]:
        w = weight_rows(n, size, gen)
        return [p.mean_of(w @ vals[i], w @ masks[i]) for i, p in enumerate(preps)]

    return _run_chunks(_chunks(resamples, n), rng, work_items, len(preps), run)


#: From this many items, binned metrics (equal-width ECE) resample bin cells instead of items.
BINNED_FROM = 10_000
#: Most occupied joint cells the binned path draws over (several variants' bins crossed).
MAX_BIN_CELLS = 1 << 16


def _cell_layout(preps: Sequence[WeightsPrepared], per_bin: int) -> list[tuple[int, int]] | None:
    """Each prep's (rank-chunk multiplier ``m``: equal-mass bins' ``n_bins x per_bin``, else 0; its
    number of cells: bin or chunk x correct), or None when one has no binned form. Found once for
    all blocks of items (the number of bins without ``n_bins`` is a pass over every item)."""
    layout = []
    for p in preps:
        if p.binned is None:
            return None
        all_cells = p.binned[0]
        n_bins = int(p.params["n_bins"]) if "n_bins" in p.params else int(all_cells.max(initial=0)) + 1
        m = n_bins * per_bin if p.params.get("strategy") == "quantile" else 0
        layout.append((m, 2 * m if m else 2 * n_bins))
    return layout


def _prep_code(p: WeightsPrepared, m: int, span: tuple[int, int] | None) -> np.ndarray:
    """One prep's cell of every item in ``span`` (all by default): bin x correct, or (``m``, equal-mass
    bins) rank chunk x correct; in place, whole numbers (exact): one array, not three."""
    all_cells, all_correct, _ = p.binned  # type: ignore[misc]  # (_cell_layout checked)
    lo, hi = span or (0, len(all_cells))
    c: np.ndarray = np.multiply(all_cells[lo:hi], m or 2, dtype=np.int64)  # (equal-width bins: a narrow type)
    if m:
        c //= max(len(all_cells), 1)
        c *= 2
    np.add(c, all_correct[lo:hi], out=c, casting="unsafe")  # correct: 0 or 1
    return c


def _binned_codes(preps: Sequence[WeightsPrepared], per_bin: int) -> tuple[list[np.ndarray], list[int]] | None:
    """Each prep's cell of every item and its number of cells, or None when one has no binned form."""
    layout = _cell_layout(preps, per_bin)
    if layout is None:
        return None
    return [_prep_code(p, m, None) for p, (m, _) in zip(preps, layout)], [size for _, size in layout]


def _joint_code(
    preps: Sequence[WeightsPrepared], layout: Sequence[tuple[int, int]], span: tuple[int, int] | None
) -> np.ndarray:
    """The joint cell of every item in ``span`` over the preps' cells, ``((c0 * s1 + c1) * s2 + c2)...``."""
    code = _prep_code(preps[0], layout[0][0], span)  # (0 * size + c is c)
    for p, (m, size) in zip(preps[1:], layout[1:]):
        code = code * size
        code += _prep_code(p, m, span)
    return code


def _joint_cells(
    preps: Sequence[WeightsPrepared], per_bin: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]] | None:
    """(occupied joint cells, each item's index among them, their counts, the preps' numbers of
    cells), or None when a prep has no binned form: :func:`_unique_codes` of the items' joint cells,
    made a block of items at a time when the cells are few (a bincount per block, then each block's
    indices), so that no code array of n is held beside the indices."""
    layout = _cell_layout(preps, per_bin)
    if layout is None:
        return None
    sizes = [size for _, size in layout]
    total = math.prod(sizes)
    if total > 1 << 22 or n == 0:
        return (*_unique_codes(_joint_code(preps, layout, None), total), sizes)
    return (*_codes_by_blocks(lambda a, b: _joint_code(preps, layout, (a, b)), n, total), sizes)


def _unique_codes(code: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(code, return_inverse=True, return_counts=True)`` of codes in ``[0, total)``: by one
    ``bincount`` when the range is small (O(n), no sort).

    >>> [a.tolist() for a in _unique_codes(np.array([4, 1, 4, 0]), 6)]
    [[0, 1, 4], [2, 1, 2, 0], [1, 1, 2]]
    """
    if total > 1 << 22 or not len(code):
        return np.unique(code, return_inverse=True, return_counts=True)
    return _codes_by_blocks(lambda a, b: code[a:b], len(code), total)


def _codes_by_blocks(
    code_of: Callable[[int, int], np.ndarray], n: int, total: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_unique_codes` of the codes ``code_of(a, b)`` of items ``[a, b)`` in ``[0, total)``, a
    block of items at a time: a bincount per block, then each block's index among the occupied codes
    (the codes may be made per block and never held whole)."""
    all_counts = np.zeros(total, dtype=np.int64)
    for a, b in element_spans(n):  # whole-number counts: the same whatever the blocks
        all_counts += np.bincount(code_of(a, b), minlength=total)
    uniq = np.flatnonzero(all_counts)
    # each item's index among the occupied codes in the narrowest unsigned type that holds it
    lookup = np.zeros(total, dtype=np.min_scalar_type(max(len(uniq) - 1, 0)))
    lookup[uniq] = np.arange(len(uniq))
    return uniq, by_blocks(n, lambda a, b: lookup[code_of(a, b)], lookup.dtype), all_counts[uniq]


def _part(values: np.ndarray | BlockColumn) -> Callable[[int, int], np.ndarray]:
    """``values[a:b]`` as a function of the block ``[a, b)`` (:func:`~labledger.metrics.kernels.cell_sums`)."""
    return lambda a, b: values[a:b]


def quantile_ece_from_chunks(w: np.ndarray, d: np.ndarray, n_bins: int, n: int) -> np.ndarray:
    """Equal-mass ECE of each resample from its drawn chunk counts ``w`` and gap sums ``d``
    (resamples x chunks, in score order): each chunk placed by its resampled position, a chunk
    straddling a bin edge split in proportion.

    >>> quantile_ece_from_chunks(np.array([[2.0, 2.0]]), np.array([[0.5, -0.5]]), 2, 4).tolist()
    [0.25]
    """
    size = w.shape[0]
    before = np.cumsum(w, axis=1) - w
    b0 = np.clip((before * n_bins / n).astype(np.int64), 0, n_bins - 1)
    edge = np.ceil((b0 + 1) * n / n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(w > 0, np.clip(edge - before, 0, w) / np.where(w > 0, w, 1), 1.0)
    b1 = np.minimum(b0 + 1, n_bins - 1)
    rows = n_bins * np.arange(size)[:, None]
    gap = np.bincount((b0 + rows).ravel(), weights=(frac * d).ravel(), minlength=size * n_bins)
    gap += np.bincount((b1 + rows).ravel(), weights=((1 - frac) * d).ravel(), minlength=size * n_bins)
    return np.asarray(np.abs(gap.reshape(size, n_bins)).sum(axis=1) / n)


def _resample_binned(
    preps: Sequence[WeightsPrepared], resamples: int, rng: np.random.Generator, run: Run = map
) -> list[np.ndarray] | None:
    """ECE of each prep on the same resamples, drawn over the joint (bin, correct) cells.

    A resample is a multinomial draw of n over the occupied cells (exact), and each cell's sum of
    confidences over its drawn items is drawn from its normal law given the count (the exact mean
    N* mean_c and covariance N* Cov_c across the preps): ``resamples x cells`` numbers, not
    ``resamples x n``. Equal-mass bins use rank chunks (8, 4 or 2 per bin) as cells; a resample
    places each chunk by its resampled position and splits a chunk that straddles a bin edge in
    proportion. None when the cells are too many (the item path is used).
    """
    n = preps[0].n
    for per_bin in (8, 4, 2):
        found = _joint_cells(preps, per_bin, n)
        if found is None:
            return None
        uniq, inv, counts, sizes = found
        if len(uniq) <= min(MAX_BIN_CELLS, n // 8):  # else drawing cells costs as much as drawing items
            break
    else:
        return None
    n_cat = len(uniq)
    inv = inv.reshape(-1)
    # each prep's cell (its bin/chunk and correctness) of each joint cell, read off the joint code's
    # digits (it was built as ((c0 * s1 + c1) * s2 + c2)...), not from one item of each cell: no
    # array of n
    digits, rest = [], uniq.astype(np.int64)
    for size in sizes[:0:-1]:
        digits.append(rest % size)
        rest = rest // size
    digits.append(rest)
    digits.reverse()
    cell_of = [c // 2 for c in digits]
    cell_ok = [(c % 2).astype(np.float64) for c in digits]
    k = len(preps)
    confs = [p.binned[2] for p in preps if p.binned is not None]
    cnt = counts.astype(np.float64)
    # the cells' sums of the items' values, a block of items at a time (bincount's floats)
    means = np.stack([cell_sums(inv, _part(c), n_cat) / cnt for c in confs], axis=1)

    def centred(i: int, a: int, b: int) -> np.ndarray:
        out: np.ndarray = confs[i][a:b] - means[inv[a:b], i]
        return out

    def product(i: int, j: int) -> Callable[[int, int], np.ndarray]:
        def values(a: int, b: int) -> np.ndarray:
            c = centred(i, a, b)
            out: np.ndarray = np.multiply(c, c, out=c) if i == j else centred(j, a, b) * c  # (diagonal: in place)
            return out

        return values

    cov = np.empty((n_cat, k, k))
    for i in range(k):
        for j in range(i + 1, k):
            cov[:, i, j] = cov[:, j, i] = cell_sums(inv, product(i, j), n_cat) / cnt
        cov[:, i, i] = cell_sums(inv, product(i, i), n_cat) / cnt
    vals, vecs = np.linalg.eigh(cov)
    root = vecs * np.sqrt(np.clip(vals, 0, None))[:, None, :]  # (cells, k, k): root @ root.T = cov
    quantile = [p.params.get("strategy") == "quantile" for p in preps]
    n_bins = [int(p.params.get("n_bins", 1)) for p in preps]

    def work(size: int, gen: np.random.Generator) -> list[np.ndarray]:
        draws = draw_counts(counts, size, gen)  # (size, cells)
        z = gen.standard_normal((size, n_cat, k))
        scale = np.sqrt(draws)
        noise = np.empty((size, n_cat, k))
        for i in range(k):  # root @ z per cell: k x k products of (size, cells) arrays (faster than einsum)
            acc = z[:, :, 0] * root[:, i, 0]
            for j in range(1, k):
                acc += z[:, :, j] * root[:, i, j]
            noise[:, :, i] = acc * scale
        out = []
        for j in range(k):
            gaps = draws * cell_ok[j] - (draws * means[:, j] + noise[:, :, j])
            nb = n_bins[j]
            if not quantile[j]:
                gap = _scatter(gaps, cell_of[j], nb)
            else:
                m = sizes[j] // 2
                out.append(
                    quantile_ece_from_chunks(_scatter(draws, cell_of[j], m), _scatter(gaps, cell_of[j], m), nb, n)
                )
                continue
            out.append(np.abs(gap).sum(axis=1) / n)
        return out

    return _run_chunks(_chunks(resamples, n_cat * (k + 1)), rng, work, k, run)


def _resample_weights(
    preps: Sequence[WeightsPrepared], resamples: int, rng: np.random.Generator, groups: np.ndarray | None, run: Run
) -> list[np.ndarray]:
    n = preps[0].n
    if groups is None and n >= BINNED_FROM:
        fast = _resample_binned(preps, resamples, rng, run)
        if fast is not None:
            return fast
    n_groups = int(groups.max()) + 1 if groups is not None and len(groups) else 0

    # A fresh draw for one metric on items (not clusters) is exchangeable: the metric may read its
    # columns in its own sorted order without gathering them (same law, one pass less).
    exchangeable = groups is None and len(preps) == 1

    def work(size: int, gen: np.random.Generator) -> list[np.ndarray]:
        w = weight_rows(n, size, gen) if groups is None else weight_rows(n_groups, size, gen)[:, groups]
        return [p.from_weights(w, exchangeable=exchangeable) for p in preps]

    return _run_chunks(_chunks(resamples, n), rng, work, len(preps), run)


# ------------------------------------------------------------------------------------------------
# Intervals and tests


def percentile_interval(samples: np.ndarray, ci: float) -> tuple[Any, Any, int]:
    """(low, high, number of non-finite resamples) of the central ``ci`` percentile interval."""
    samples = np.asarray(samples, dtype=np.float64)
    finite = np.isfinite(samples)
    bad = int((~finite).sum()) if samples.ndim == 1 else int((~finite).any(axis=tuple(range(1, samples.ndim))).sum())
    q = [(1 - ci) / 2, (1 + ci) / 2]
    if samples.ndim == 1:
        good = samples[finite]
        if len(good) == 0:
            return None, None, bad
        lo, hi = quantiles(good, q)
        return float(lo), float(hi), bad
    # each column's quantiles of its values that are not NaN: np.nanquantile(samples, q, axis=0)'s floats
    columns = samples.reshape(len(samples), -1)
    out = np.full((2, columns.shape[1]), np.nan)
    with np.errstate(invalid="ignore"):  # inf - inf in an interpolation is nan, as numpy's
        for j in range(columns.shape[1]):
            col = columns[:, j]
            col = col[~np.isnan(col)]
            if len(col):
                out[:, j] = quantiles(col, q)
    lo, hi = out.reshape((2, *samples.shape[1:]))
    return lo, hi, bad


def _method(prep: Prepared, groups: Any) -> str:
    how = {"table": "count-table multinomial", "mean": "item-value resample", "weights": "resample-weight matrix"}
    unit = "clusters" if groups is not None else "items"
    shape = how[prep.strategy]
    if binned_path(prep, groups):
        shape = "bin count-table multinomial, confidence sums by their normal law"
        if prep.params.get("strategy") == "quantile":
            shape = "rank-chunk count-table multinomial, confidence sums by their normal law"
    return f"percentile bootstrap over {unit} ({shape})"


def binned_path(prep: Prepared, groups: Any = None) -> bool:
    """Whether the bootstrap of ``prep`` draws bin cells (equal-width ECE from :data:`BINNED_FROM` items)."""
    return isinstance(prep, WeightsPrepared) and prep.binned is not None and groups is None and prep.n >= BINNED_FROM


def check_ci(ci: float, resamples: int) -> None:
    """Refuse an interval level outside (0, 1) or a negative number of resamples (one line, a
    :class:`MetricInputError`), before anything is read or computed.

    >>> check_ci(0.95, 0)
    >>> check_ci(1.5, 1000)
    Traceback (most recent call last):
    ...
    labledger.errors.MetricInputError: ci must be strictly between 0 and 1; got 1.5
    """
    if not (0 < ci < 1):
        raise MetricInputError(f"ci must be strictly between 0 and 1; got {ci}")
    if resamples < 0:
        raise MetricInputError(f"resamples must be >= 0; got {resamples}")


def _n_clusters(groups: Any) -> int | None:
    return None if groups is None else (int(np.max(groups)) + 1 if len(groups) else 0)


def bootstrap_samples(
    prep: Prepared, *, resamples: int = 1000, seed: Any = 0, groups: np.ndarray | None = None, run: Run = map
) -> np.ndarray | None:
    """The metric on each of ``resamples`` bootstrap resamples (None when there is nothing to draw;
    ``run``: :data:`Run`)."""
    if not resamples or not prep.n:
        return None
    return resample_values([prep], resamples, rng_for(seed), groups, run)[0]


def interval(
    prep: Prepared,
    value: Any,
    samples: np.ndarray | None,
    *,
    ci: float,
    resamples: int,
    groups: np.ndarray | None = None,
) -> Interval | dict[str, Interval]:
    """An :class:`Interval` (or one per column) from a value and its bootstrap samples."""
    method = _method(prep, groups)
    clusters = _n_clusters(groups)
    if prep.columns is not None:
        out = {}
        lo: Any
        hi: Any
        if samples is None:
            lo = hi = [None] * len(prep.columns)
        else:
            lo, hi, _ = percentile_interval(samples, ci)
        for j, col in enumerate(prep.columns):
            low = None if lo[j] is None or not np.isfinite(lo[j]) else float(lo[j])
            high = None if hi[j] is None or not np.isfinite(hi[j]) else float(hi[j])
            out[col] = Interval(
                value[col],
                low,
                high,
                ci,
                resamples,
                method,
                prep.n_used,
                clusters,
                0 if samples is None else int((~np.isfinite(samples[:, j])).sum()),
            )
        return out
    if samples is None:
        return Interval(value, None, None, ci, resamples, method, prep.n_used, clusters)
    lo, hi, bad = percentile_interval(samples, ci)
    return Interval(value, lo, hi, ci, resamples, method, prep.n_used, clusters, bad)


def bootstrap(
    prep: Prepared,
    *,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: Any = 0,
    groups: np.ndarray | None = None,
    run: Run = map,
) -> Interval | dict[str, Interval]:
    """The value of a prepared metric with its bootstrap percentile interval (``run``: :data:`Run`).

    Vector-valued metrics (``per_class``) give a dict column -> :class:`Interval`.

    >>> from labledger.metrics import prepare
    >>> iv = bootstrap(prepare("accuracy", gold=[0, 1] * 50, pred=[0, 1] * 40 + [1, 0] * 10), seed=1)
    >>> iv.value, iv.low < 0.8 < iv.high
    (0.8, True)
    """
    check_ci(ci, resamples)
    samples = bootstrap_samples(prep, resamples=resamples, seed=seed, groups=groups, run=run)
    return interval(prep, prep.value(), samples, ci=ci, resamples=resamples, groups=groups)


def draws_p_value(d: np.ndarray, observed: float) -> float | None:
    """The percentile-bootstrap p-value of the resampled differences (consistent with the interval)."""
    if not math.isfinite(observed):
        return None
    return percentile_p_value(d)


def _sd(d: np.ndarray) -> float | None:
    d = d[np.isfinite(d)]
    return float(np.std(d, ddof=1)) if len(d) > 1 else None


def paired_bootstrap(
    prep_a: Prepared,
    prep_b: Prepared,
    *,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: Any = 0,
    groups: np.ndarray | None = None,
    run: Run = map,
) -> PairedResult:
    """A - B on the same items: the difference, its percentile interval and a two-sided p-value.

    Both sides are resampled with the *same* draws (the same items, or clusters; ``run``: :data:`Run`).

    >>> from labledger.metrics import prepare
    >>> gold = [0, 1] * 100
    >>> a = prepare("accuracy", gold=gold, pred=gold)
    >>> b = prepare("accuracy", gold=gold, pred=[0, 0] * 100)
    >>> r = paired_bootstrap(a, b, seed=0)
    >>> r.diff, r.p_value < 0.01
    (0.5, True)
    """
    check_ci(ci, resamples)
    _check_same([prep_a, prep_b])
    if prep_a.columns is not None:
        raise MetricInputError("paired comparisons need a scalar metric")
    va, vb = prep_a.value(), prep_b.value()
    diff = va - vb
    method = "paired " + _method(prep_a, groups) + "; p-value: percentile bootstrap, two-sided"
    if not resamples or prep_a.n == 0:
        return PairedResult(va, vb, diff, None, None, None, ci, resamples, method, prep_a.n_used, _n_clusters(groups))
    sa, sb = resample_values([prep_a, prep_b], resamples, rng_for(seed), groups, run)
    d = sa - sb
    lo, hi, _ = percentile_interval(d, ci)
    return PairedResult(
        va,
        vb,
        diff,
        lo,
        hi,
        draws_p_value(d, diff),
        ci,
        resamples,
        method,
        prep_a.n_used,
        _n_clusters(groups),
        se=_sd(d),
    )


def unpaired_bootstrap(
    prep_a: Prepared,
    prep_b: Prepared,
    *,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: Any = 0,
    groups_a: np.ndarray | None = None,
    groups_b: np.ndarray | None = None,
    run: Run = map,
) -> PairedResult:
    """A - B on different item sets: each side resampled independently (``run``: :data:`Run`).

    >>> from labledger.metrics import prepare
    >>> r = unpaired_bootstrap(prepare("accuracy", gold=[1] * 50, pred=[1] * 45 + [0] * 5),
    ...                        prepare("accuracy", gold=[1] * 80, pred=[1] * 40 + [0] * 40))
    >>> round(r.diff, 2), r.low > 0
    (0.4, True)
    """
    check_ci(ci, resamples)
    va, vb = prep_a.value(), prep_b.value()
    diff = va - vb
    method = (
        "unpaired "
        + _method(prep_a, groups_a if groups_a is not None else groups_b)
        + " (each side resampled independently); p-value: percentile bootstrap, two-sided"
    )
    n = prep_a.n_used + prep_b.n_used
    if not resamples or not prep_a.n or not prep_b.n:
        return PairedResult(va, vb, diff, None, None, None, ci, resamples, method, n)
    ss = np.random.SeedSequence(list(seed) if isinstance(seed, (list, tuple)) else seed)
    ra, rb = (np.random.default_rng(s) for s in ss.spawn(2))
    sa = resample_values([prep_a], resamples, ra, groups_a, run)[0]
    sb = resample_values([prep_b], resamples, rb, groups_b, run)[0]
    d = sa - sb
    lo, hi, _ = percentile_interval(d, ci)
    return PairedResult(va, vb, diff, lo, hi, draws_p_value(d, diff), ci, resamples, method, n, se=_sd(d))


def mcnemar(*, correct_a: Any, correct_b: Any, exact_below: int = MCNEMAR_EXACT_BELOW) -> dict[str, Any]:
    """McNemar's test on paired correctness: exact binomial when fewer than ``exact_below`` items are
    discordant, else chi-square with continuity correction ``(|b - c| - 1)^2 / (b + c)``.

    ``b`` = A right and B wrong, ``c`` = A wrong and B right.

    >>> mcnemar(correct_a=[1, 1, 1, 0, 1], correct_b=[0, 0, 1, 0, 1])["p_value"]
    0.5
    """
    a = np.asarray(correct_a, dtype=bool)
    b_ = np.asarray(correct_b, dtype=bool)
    if a.shape != b_.shape or a.ndim != 1:
        raise MetricInputError(f"correct_a and correct_b must be 1-D and the same length; got {a.shape}, {b_.shape}")
    b = int((a & ~b_).sum())
    c = int((~a & b_).sum())
    m = b + c
    if m == 0:
        return {"b": b, "c": c, "method": "exact binomial", "statistic": None, "p_value": 1.0}
    if m < exact_below:
        tail = sum(math.comb(m, i) for i in range(min(b, c) + 1))
        exact = min(Fraction(1), Fraction(2 * tail, 2**m))
        return {
            "b": b,
            "c": c,
            "method": "exact binomial (two-sided, p = 0.5)",
            "statistic": None,
            "p_value": float(exact),
        }
    stat = (abs(b - c) - 1) ** 2 / m
    p = math.erfc(math.sqrt(stat / 2))  # chi-square with 1 degree of freedom, upper tail
    return {"b": b, "c": c, "method": "chi-square with continuity correction", "statistic": stat, "p_value": p}


__all__ = [
    "BINNED_FROM",
    "CHUNK_ELEMENTS",
    "MCNEMAR_EXACT_BELOW",
    "Interval",
    "PairedResult",
    "binned_path",
    "bootstrap",
    "bootstrap_samples",
    "check_ci",
    "draw_counts",
    "interval",
    "mcnemar",
    "paired_bootstrap",
    "percentile_interval",
    "resample_values",
    "rng_for",
    "unpaired_bootstrap",
    "weight_rows",
]
