"""The product-grid fast path of a prior-multiplier fit (#19): the same confusion tables as scoring
every grid point (``argmax_tables``), on random data with ties, folds and any label order."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.calibrate import search
from labledger.calibrate.search import _count_products, argmax_tables, product_argmax_tables

FAST = settings(max_examples=60, deadline=None)
#: Values whose products tie often (exact in binary), so ties between labels are exercised.
COARSE_P = [0.0, 0.125, 0.25, 0.375, 0.5, 0.75]
COARSE_W = [0.25, 0.5, 1.0, 2.0, 3.0, 4.0]


def product_grid(axes: dict[int, np.ndarray], k: int) -> np.ndarray:
    """(G, K) multiplier vectors in itertools.product order (the last axis fastest), others at 1."""
    names = list(axes)
    cands = np.ones((int(np.prod([len(v) for v in axes.values()])), k))
    for row, combo in enumerate(itertools.product(*(axes[m] for m in names))):
        for lab, v in zip(names, combo):
            cands[row, lab] = v
    return cands


@FAST
@given(seed=st.integers(0, 2**32 - 1), coarse=st.booleans(), folded=st.booleans(), direct=st.booleans())
def test_product_tables_equal_every_grid_point(seed: int, coarse: bool, folded: bool, direct: bool) -> None:
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 300)), int(rng.integers(2, 5))
    p = rng.choice(COARSE_P, size=(n, k)) if coarse else rng.dirichlet(np.ones(k), size=n)
    gold = rng.integers(0, k, n)
    n_folds = int(rng.integers(2, 5))
    fold = rng.integers(0, n_folds, n) if folded else None
    names = [int(x) for x in rng.permutation(k)[: int(rng.integers(1, k + 1))]]
    axes = {
        lab: rng.choice(COARSE_W, size=int(rng.integers(1, 5)))
        if coarse
        else rng.uniform(0.2, 3.0, int(rng.integers(1, 6)))
        for lab in names
    }
    cands = product_grid(axes, k)
    nf = n_folds if folded else 0
    want = argmax_tables(p, gold, lambda lab, a, b: cands[:, lab][:, None], len(cands), fold, nf)
    old = search.DIRECT_COUNT
    search.DIRECT_COUNT = 64 if direct else 0  # both ways of finding the cut points
    try:
        got = product_argmax_tables(p, gold, cands[:: len(axes[names[-1]])], names[-1], axes[names[-1]], fold, nf)
    finally:
        search.DIRECT_COUNT = old
    assert got.shape == want.shape
    assert np.array_equal(got, want)


@FAST
@given(seed=st.integers(0, 2**32 - 1), strict=st.booleans(), many=st.booleans())
def test_count_products_is_the_exact_count(seed: int, strict: bool, many: bool) -> None:
    rng = np.random.default_rng(seed)
    n = 200
    p = np.where(rng.random(n) < 0.5, rng.choice(COARSE_P, n), rng.random(n))
    bound = np.where(rng.random(n) < 0.5, rng.choice(COARSE_P, n), rng.random(n))
    w = np.sort(rng.uniform(0.1, 3.0, 80) if many else rng.choice(COARSE_W, int(rng.integers(1, 8))))
    prod = p[:, None] * w[None, :]
    want = (prod < bound[:, None]) if strict else (prod <= bound[:, None])
    assert np.array_equal(_count_products(p, w, bound, strict), want.sum(axis=1))


def test_fit_uses_the_product_path_and_finds_the_same_multipliers() -> None:
    """A prior-multiplier fit with cross-fitting picks, row by row, what scoring every point picks."""
    import labledger.calibrate as cal
    from labledger.calibrate.fitting import make_folds
    from labledger.calibrate.methods import task_arrays
    from labledger.calibrate.search import _table_values, resolve_objective
    from labledger.inputs.results import results_from_rows

    rng = np.random.default_rng(7)
    labels = ("a", "b", "c")
    gold = rng.integers(0, 3, 600)
    z = np.eye(3)[gold] * 1.2 + rng.normal(size=(600, 3))
    z[:, 1] -= 0.4
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    rows = [
        {"id": i, "task": "t", "gold": labels[g], "probs": dict(zip(labels, pr.tolist()))}
        for i, (g, pr) in enumerate(zip(gold.tolist(), probs))
    ]
    rec = cal.fit(rows, method="prior_multiplier", crossfit=4, seed=3)
    arr = task_arrays(results_from_rows(rows)["t"], [])
    obj = resolve_objective(None, arr, ["prior_multiplier"], positive=None, item_field=None)
    grid = np.array(search.DEFAULT_MULTIPLIERS)
    cands = product_grid({1: grid, 2: grid}, 3)
    fold = make_folds(np.arange(arr.n), 4, 3)
    values = _table_values(
        obj, arr, argmax_tables(arr.probs, arr.gold, lambda lab, a, b: cands[:, lab][:, None], len(cands), fold, 4)
    )
    lw = np.log(cands)
    distance = np.abs(lw - lw.mean(axis=1, keepdims=True)).sum(axis=1)
    best = search.best_index(values[0], True, distance, "test")
    weights = rec.tasks["t"].steps[0].params["weights"]
    assert [weights[lab] for lab in labels] == cands[best].tolist()
