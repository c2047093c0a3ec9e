"""The calibration report's fast paths (#19): the joint ECE bin-cell bootstrap of several variants
equals its earlier implementation (einsum) to 1e-12, and the report's cached values equal fresh ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.metrics import kernels, prepare
from labledger.metrics.prepared import WeightsPrepared
from labledger.metrics.resample import (
    MAX_BIN_CELLS,
    _binned_codes,
    _chunks,
    _joint_cells,
    _resample_binned,
    _run_chunks,
    _scatter,
    draw_counts,
)

FAST = settings(max_examples=5, deadline=None)


# The implementation before #19's change (np.einsum for the cells' correlated noise), kept as the reference.
def _old_resample_binned(
    preps: Sequence[WeightsPrepared], resamples: int, rng: np.random.Generator
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
        found = _binned_codes(preps, per_bin)
        if found is None:
            return None
        codes, sizes = found
        code = np.zeros(n, dtype=np.int64)
        for c, size in zip(codes, sizes):
            code = code * size + c
        uniq, inv, counts = np.unique(code, return_inverse=True, return_counts=True)
        if len(uniq) <= min(MAX_BIN_CELLS, n // 8):  # else drawing cells costs as much as drawing items
            break
    else:
        return None
    n_cat = len(uniq)
    inv = inv.reshape(-1)
    k = len(preps)
    confs = [kernels.whole(p.binned[2]) for p in preps if p.binned is not None]
    cnt = counts.astype(np.float64)
    means = np.stack([np.bincount(inv, weights=c, minlength=n_cat) / cnt for c in confs], axis=1)
    cov = np.empty((n_cat, k, k))
    for i in range(k):
        ci = confs[i] - means[inv, i]
        for j in range(i, k):
            cj = confs[j] - means[inv, j]
            cov[:, i, j] = cov[:, j, i] = np.bincount(inv, weights=ci * cj, minlength=n_cat) / cnt
    vals, vecs = np.linalg.eigh(cov)
    root = vecs * np.sqrt(np.clip(vals, 0, None))[:, None, :]  # (cells, k, k): root @ root.T = cov
    first = np.zeros(n_cat, dtype=np.int64)
    first[inv[::-1]] = np.arange(n - 1, -1, -1)  # one item of each cell: its bin/chunk and correctness
    cell_of = [c[first] // 2 for c in codes]
    cell_ok = [(c[first] % 2).astype(np.float64) for c in codes]
    quantile = [p.params.get("strategy") == "quantile" for p in preps]
    n_bins = [int(p.params.get("n_bins", 1)) for p in preps]

    def work(size: int, gen: np.random.Generator) -> list[np.ndarray]:
        draws = draw_counts(counts, size, gen)  # (size, cells)
        z = gen.standard_normal((size, n_cat, k))
        noise = np.einsum("cij,bcj->bci", root, z) * np.sqrt(draws)[:, :, None]
        out = []
        for j in range(k):
            gaps = draws * cell_ok[j] - (draws * means[:, j] + noise[:, :, j])
            nb = n_bins[j]
            if not quantile[j]:
                gap = _scatter(gaps, cell_of[j], nb)
            else:
                m = sizes[j] // 2
                w = _scatter(draws, cell_of[j], m)
                d = _scatter(gaps, cell_of[j], m)
                before = np.cumsum(w, axis=1) - w
                b0 = np.minimum((before * nb / n).astype(np.int64), nb - 1)
                edge = np.ceil((b0 + 1) * n / nb)
                with np.errstate(invalid="ignore", divide="ignore"):
                    frac = np.where(w > 0, np.clip(edge - before, 0, w) / np.where(w > 0, w, 1), 1.0)
                b1 = np.minimum(b0 + 1, nb - 1)
                rows = nb * np.arange(size)[:, None]
                gap = np.bincount((b0 + rows).ravel(), weights=(frac * d).ravel(), minlength=size * nb)
                gap += np.bincount((b1 + rows).ravel(), weights=((1 - frac) * d).ravel(), minlength=size * nb)
                gap = gap.reshape(size, nb)
            out.append(np.abs(gap).sum(axis=1) / n)
        return out

    return _run_chunks(_chunks(resamples, n_cat * (k + 1)), rng, work, k)


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 3), strategy=st.sampled_from(["uniform", "quantile"]))
def test_joint_binned_draws_equal_the_einsum_version(seed: int, k: int, strategy: str) -> None:
    rng = np.random.default_rng(seed)
    n = 12_000
    gold = rng.integers(0, 2, n)
    base = np.clip(rng.normal(0.35 + 0.3 * gold, 0.2), 0.001, 0.999)
    preps = [
        prepare("ece", gold=gold, score=np.clip(base + rng.normal(0, 0.05 * j, n), 0, 1), n_bins=10, strategy=strategy)
        for j in range(k)
    ]
    got = _resample_binned(preps, 100, np.random.default_rng(seed + 1))
    want = _old_resample_binned(preps, 100, np.random.default_rng(seed + 1))
    assert (got is None) == (want is None)
    if got is not None:
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_report_values_equal_fresh_metric_values(tmp_path) -> None:
    """The report computes each variant's value once and reuses it: the same numbers as the registry."""
    import labledger.calibrate as cal
    from labledger.metrics import brier, log_loss

    rng = np.random.default_rng(0)
    labels = ("a", "b")
    gold = rng.integers(0, 2, 400)
    score = np.clip(rng.normal(0.35 + 0.3 * gold, 0.2), 0.01, 0.99)
    rows = [
        {"id": i, "task": "t", "gold": labels[g], "probs": {"a": 1 - s, "b": s}}
        for i, (g, s) in enumerate(zip(gold.tolist(), score.tolist()))
    ]
    rec = cal.fit(rows, method="threshold", positive="b", crossfit=3)
    rep = cal.report(rows, rec, resamples=50)
    assert rep.value("t", "log_loss", "raw") == log_loss(
        gold=[labels[g] for g in gold], probs=np.column_stack([1 - score, score]), labels=labels
    )
    assert rep.value("t", "brier", "raw") == brier(
        gold=[labels[g] for g in gold], probs=np.column_stack([1 - score, score]), labels=labels
    )


@FAST
@given(seed=st.integers(0, 2**32 - 1), block=st.integers(1, 50), strategy=st.sampled_from(["uniform", "quantile"]))
def test_joint_cells_by_blocks_equal_the_unique_codes_of_all_items(seed, block, strategy):
    """The joint ECE cells made a block of items at a time equal np.unique of the items' joint
    codes (#19): the cells, each item's cell, the counts."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    gold = (rng.random(n) < 0.4).astype(int)
    s1 = rng.random(n)
    preps = [
        prepare("ece", gold=gold, score=s, strategy=strategy, n_bins=5)
        for s in (s1, np.clip(s1 + rng.normal(0, 0.2, n), 0, 1))
    ]
    codes, sizes = _binned_codes(preps, 4)
    code = codes[0] * sizes[1] + codes[1]
    want = np.unique(code, return_inverse=True, return_counts=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "ELEMENT_BLOCK", block)  # (the blocks _codes_by_blocks takes)
        uniq, inv, counts, got_sizes = _joint_cells(preps, 4, n)
    assert got_sizes == sizes
    for got, expected in zip((uniq, inv, counts), want):
        assert got.tolist() == expected.reshape(-1).tolist()
