"""The calibration report's joint ECE bootstrap of several variants, from the bins' sums.

The ECE of one variant is ``sum_b |G_b| / n`` with ``G_b`` the sum of ``correct - confidence`` over the
items of bin b; equal-mass bins also need each rank chunk's item count (where the resampled bin
edges fall). On a bootstrap resample every such sum is ``S* = sum_i w_i x_i`` (w the multinomial
counts of n draws with replacement), whose mean ``n mean(x)`` and covariance ``n Cov(x)`` across all
the variants' bins and chunks are known exactly from one pass over the items (joint bincounts of two
variants' cells). The draws here take ``S*`` from the normal law with those two moments: the
Gaussian approximation of the multinomial resample of the bin sums, which its CLT gives to
``O(1 / sqrt(items per bin))``, and then apply each ECE to the drawn sums exactly as to resampled
ones (the absolute values and, for equal-mass bins, the chunks placed by their resampled positions
and a chunk straddling a bin edge split in proportion).

What is exact and what is not: a resample's cell counts are a multinomial over the occupied cells
(exact), but the sum of confidences over a cell's drawn items is not a function of the counts (the
items of a cell differ), so no count table alone gives these ECEs exactly; the earlier form drew the
counts exactly and the confidence sums by their normal law given the counts, over the *joint* cells of
all variants. This form is normal in both and needs
``resamples x dims`` numbers, dims = 15 a variant for equal-width bins and 240 for equal-mass bins
(8 rank chunks a bin, a count and a sum each), whatever n. Its coverage is
measured against the item bootstrap in tests/test_ece_draws.py.

>>> import numpy as np
>>> from labledger.metrics import prepare
>>> rng = np.random.default_rng(0)
>>> gold = rng.integers(0, 2, 20_000)
>>> s = np.clip(0.3 + 0.4 * gold + rng.normal(0, 0.2, 20_000), 0, 1)
>>> preps = [prepare("ece", gold=gold, score=np.clip(s + d, 0, 1)) for d in (0.0, 0.05)]
>>> a, b = joint_ece_draws(preps, 200, rng)
>>> a.shape, bool(abs(a.mean() - preps[0].value()) < 0.01)
((200,), True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from labledger.metrics.kernels import by_blocks, element_spans
from labledger.metrics.prepared import Prepared, WeightsPrepared
from labledger.metrics.resample import quantile_ece_from_chunks

#: How the draws of :func:`joint_ece_draws` are made (stored in each interval's ``method``).
METHOD = "bin sums drawn from their joint normal law: the item resample's mean and covariance"
#: Rank chunks per equal-mass bin, at most (fewer when the variants' bins are many: see :func:`_per_bin`).
PER_BIN = 8
#: Bound on the dimensions of the joint normal law (its eigendecomposition is dims^3).
MAX_DIMS = 1024


def applies(preps: Sequence[Prepared], groups: np.ndarray | None) -> bool:
    """Whether :func:`joint_ece_draws` stands in for the bootstrap of ``preps``: two or more ECEs
    (variants) on the same items, no clusters, from :data:`labledger.metrics.resample.BINNED_FROM` items.

    >>> from labledger.metrics import prepare
    >>> p = prepare("ece", gold=[0, 1] * 10, score=[0.2, 0.7] * 10)
    >>> applies([p, p], None)
    False
    """
    from labledger.metrics.resample import binned_path

    return len(preps) > 1 and all(isinstance(p, WeightsPrepared) and binned_path(p, groups) for p in preps)


def _per_bin(preps: Sequence[WeightsPrepared]) -> int:
    quantile_bins = sum(int(p.params["n_bins"]) for p in preps if p.params.get("strategy") == "quantile")
    if not quantile_bins:
        return 1
    return max(1, min(PER_BIN, MAX_DIMS // (2 * quantile_bins)))


def _features(preps: Sequence[WeightsPrepared], per_bin: int) -> list[tuple[np.ndarray, int, np.ndarray, bool]]:
    """Each variant's (unit of every item, number of units, correct - confidence, equal-mass)."""
    out = []
    for p in preps:
        assert p.binned is not None  # (applies() checked it)
        cells, correct, conf = p.binned
        n_bins = int(p.params["n_bins"])
        quantile = p.params.get("strategy") == "quantile"
        if quantile:
            m = n_bins * per_bin
            unit = cells * m // max(len(cells), 1)
        else:
            m, unit = n_bins, cells
        out.append((unit.astype(np.int64), m, _gaps(correct, conf), quantile))
    return out


def moments(preps: Sequence[WeightsPrepared], per_bin: int) -> tuple[np.ndarray, np.ndarray, list[slice]]:
    """(mean, covariance, blocks) of the per-item feature vector x_i: for each variant its gap
    indicators ``(correct - conf) 1[unit = a]`` and, for equal-mass bins, first its count indicators
    ``1[unit = a]``; population moments (divided by n), from joint bincounts of two variants' units.

    >>> import numpy as np
    >>> from labledger.metrics import prepare
    >>> p = prepare("ece", gold=[0, 1] * 6000, score=[0.2, 0.7] * 6000, n_bins=2)
    >>> mean, cov, blocks = moments([p], 1)
    >>> mean.round(3).tolist(), cov.shape
    ([0.0, 0.25], (2, 2))
    """
    feats = _features(preps, per_bin)
    n = preps[0].n
    # per variant: (offset of its count block or None, offset of its gap block, units)
    layout, blocks, dims = [], [], 0
    for _, m, _, quantile in feats:
        c_off = dims if quantile else None
        dims += m if quantile else 0
        layout.append((c_off, dims, m))
        blocks.append(slice(dims - m if quantile else dims, dims + m))
        dims += m
    second = np.zeros((dims, dims))
    mean = np.zeros(dims)
    for j, (uj, mj, dj, _) in enumerate(feats):
        cj, gj, _ = layout[j]
        if cj is not None:
            mean[cj : cj + mj] = np.bincount(uj, minlength=mj) / n
        mean[gj : gj + mj] = np.bincount(uj, weights=dj, minlength=mj) / n
        for k in range(j, len(feats)):
            ul, ml, dl, _ = feats[k]
            cl, gl, _ = layout[k]
            if k == j:  # a variant with itself: its blocks are diagonal (the same sums, m cells not m^2)
                pairs = [(gj, gj, np.bincount(uj, weights=dj * dj, minlength=mj) / n)]
                if cj is not None:
                    counts = np.bincount(uj, minlength=mj) / n
                    gaps = mean[gj : gj + mj]
                    pairs += [(cj, cj, counts), (cj, gj, gaps)]
                for r0, c0, diag in pairs:
                    second[r0 : r0 + mj, c0 : c0 + mj] = np.diag(diag)
                    second[c0 : c0 + mj, r0 : r0 + mj] = np.diag(diag)
                continue
            code = uj * ml + ul

            def joint(weights: np.ndarray | None, mj: int = mj, ml: int = ml, code: np.ndarray = code) -> np.ndarray:
                return np.bincount(code, weights=weights, minlength=mj * ml).reshape(mj, ml) / n

            pairs = [(gj, gl, joint(dj * dl))]
            if cj is not None and cl is not None:
                pairs.append((cj, cl, joint(None)))
            if cj is not None:
                pairs.append((cj, gl, joint(dl)))
            if cl is not None:
                pairs.append((gj, cl, joint(dj)))
            for r0, c0, block in pairs:
                second[r0 : r0 + mj, c0 : c0 + ml] = block
                second[c0 : c0 + ml, r0 : r0 + mj] = block.T
    cov = second - np.outer(mean, mean)
    return mean, cov, blocks


def _root(cov: np.ndarray) -> np.ndarray:
    """A square root L of a covariance (L @ L.T = cov, up to a relative 1e-10 on the diagonal): Cholesky
    on the dimensions that vary (eigh where Cholesky fails), zero rows for the others."""
    var = np.diag(cov)
    keep = np.flatnonzero(var > 0)
    root = np.zeros_like(cov)
    if not len(keep):
        return root
    sub = cov[np.ix_(keep, keep)]
    try:
        part = np.linalg.cholesky(sub + np.eye(len(keep)) * (1e-10 * float(var[keep].mean())))
    except np.linalg.LinAlgError:  # (not positive definite even so: the eigendecomposition, clipped)
        vals, vecs = np.linalg.eigh(sub)
        part = vecs * np.sqrt(np.clip(vals, 0, None))
    root[np.ix_(keep, keep)] = part
    return root


def joint_ece_draws(preps: Sequence[Prepared], resamples: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Each variant's ECE on ``resamples`` joint draws of all the variants' bin sums (see the module).

    The draws are paired: a difference of two variants' draws is the difference on one resample. A
    variant whose bins, correctness and confidences equal an earlier one's gets that one's draws.
    """
    weights = [p for p in preps if isinstance(p, WeightsPrepared)]
    distinct: list[WeightsPrepared] = []
    same_as: list[int] = []
    for p in weights:
        found = next((i for i, q in enumerate(distinct) if _same(p, q)), None)
        same_as.append(len(distinct) if found is None else found)
        if found is None:
            distinct.append(p)
    n = distinct[0].n
    mean, cov, blocks = moments(distinct, _per_bin(distinct))
    sums = n * mean + rng.standard_normal((resamples, len(mean))) @ (_root(cov) * np.sqrt(n)).T
    out = []
    for p, block in zip(distinct, blocks):
        n_bins = int(p.params["n_bins"])
        drawn = sums[:, block]
        if p.params.get("strategy") == "quantile":
            m = drawn.shape[1] // 2
            out.append(quantile_ece_from_chunks(drawn[:, :m], drawn[:, m:], n_bins, n))
        else:
            out.append(np.abs(drawn).sum(axis=1) / n)
    return [out[i] for i in same_as]


def _same(p: WeightsPrepared, q: WeightsPrepared) -> bool:
    """Whether two ECEs have the same parameters and bin the same items alike (same draws)."""
    if p.params != q.params or p.binned is None or q.binned is None:
        return False
    return all(_equal(a, b) for a, b in zip(p.binned, q.binned))


def _gaps(correct: np.ndarray, conf: Any) -> np.ndarray:
    """``correct - conf`` with the confidences (an array or a
    :class:`~labledger.metrics.kernels.BlockColumn`) read a block at a time, never made whole here."""
    return by_blocks(len(correct), lambda a, b: correct[a:b] - conf[a:b])


def _equal(a: Any, b: Any) -> bool:
    """``np.array_equal`` of two columns (arrays or :class:`~labledger.metrics.kernels.BlockColumn`),
    a block at a time: neither is made whole."""
    return len(a) == len(b) and all(np.array_equal(a[s:e], b[s:e]) for s, e in element_spans(len(a)))


__all__ = ["METHOD", "applies", "joint_ece_draws", "moments"]
