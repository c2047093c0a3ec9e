"""The exact kernels of #19: ``exact_sum`` is ``math.fsum`` bit for bit and ``stable_argsort`` is
``np.argsort(kind="stable")`` index for index, on random data with ties, signed zeros, wide ranges,
and the cases that go to the plain forms (NaN, inf, zeros only, subnormal remainders)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.metrics import kernels
from labledger.metrics.kernels import exact_sum, stable_argsort

FAST = settings(max_examples=40, deadline=None)
N = kernels.SMALL + 904  # just past the plain forms' size: the vector paths run


def _values(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "wide":  # magnitudes 1e-30 .. 1e30, both signs: many passes, cancellation
        return rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-30, 30, n)
    if kind == "cancel":  # big values that cancel, small ones that decide the sum
        big = rng.normal(0, 1e16, n // 2)
        return rng.permutation(np.r_[big, -big, rng.normal(0, 1, n - 2 * (n // 2))])
    if kind == "log_loss":
        return -np.log(np.clip(rng.random(n), 2.2e-16, 1 - 2.2e-16))
    if kind == "coarse":  # rounded values: many ties, signed zeros
        return np.round(rng.normal(0, 1, n), 1) * rng.choice([-1.0, 1.0], n) + 0.0 * rng.choice([-1.0, 1.0], n)
    return rng.random(n)


@FAST
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["wide", "cancel", "log_loss", "coarse", "unit"]))
def test_exact_sum_is_fsum(seed: int, kind: str) -> None:
    x = _values(np.random.default_rng(seed), kind, N)
    got, want = exact_sum(x), math.fsum(x.tolist())
    assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["wide", "cancel", "log_loss", "coarse", "unit"]),
    block=st.integers(1, 3 * N),
)
def test_exact_sum_by_blocks_is_fsum(seed: int, kind: str, block: int) -> None:
    """Summed a block of values at a time (#19), still math.fsum's float, whatever the blocks."""
    x = _values(np.random.default_rng(seed), kind, 3 * N)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "BLOCK", block)
        mp.setattr(kernels, "WHOLE", 0)
        got = exact_sum(x)
    want = math.fsum(x.tolist())
    assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)


@pytest.mark.parametrize(
    "x",
    [
        np.zeros(N),
        -np.zeros(N),
        np.r_[np.ones(N - 1), np.nan],
        np.r_[np.ones(N - 1), np.inf],
        np.r_[np.full(N - 1, 1e300), 1e300],  # near overflow: fsum itself
        np.r_[np.ones(N - 1), 1e-300],  # a remainder below 2^-960: fsum itself
        np.ones(10),  # small: fsum itself
    ],
)
def test_exact_sum_edges_are_fsum(x: np.ndarray) -> None:
    got, want = exact_sum(x), math.fsum(x.tolist())
    assert (got == want) or (math.isnan(got) and math.isnan(want))


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["unit", "coarse", "fine_ties", "ints", "few", "close", "signed"]),
)
def test_stable_argsort_is_the_stable_order(seed: int, kind: str) -> None:
    rng = np.random.default_rng(seed)
    if kind == "ints":
        x = rng.integers(-5, 5, N)
    elif kind == "coarse":  # few distinct values (the radix path), signed zeros among them
        x = _values(rng, "coarse", N)
    elif kind == "fine_ties":  # more than 2^16 distinct values and ties (the run path)
        x = np.r_[rng.random(N), rng.random(70_000)]
        x[rng.integers(0, len(x), 3_000)] = x[rng.integers(0, len(x), 3_000)]
    elif kind == "few":
        x = rng.choice([0.25, 0.5, np.inf, -np.inf], N)
    elif kind == "close":  # values apart in their last bits only: one high part, sorted by value
        x = 1.0 + rng.integers(0, 2 * N, N) * 2.0**-52
    elif kind == "signed":  # both signs over a wide range, both zeros, subnormals, infinities
        x = rng.normal(size=N) * 10.0 ** rng.integers(-300, 300, N).astype(float)
        x[rng.integers(0, N, 40)] = rng.choice([0.0, -0.0, 5e-324, -5e-324, np.inf, -np.inf], 40)
    else:
        x = rng.random(N)
    assert np.array_equal(stable_argsort(x), np.argsort(x, kind="stable"))
    wide = np.stack([-x, x], axis=1)  # a matrix's column: strided, sorted where it lies (#19)
    assert np.array_equal(stable_argsort(wide[:, 1]), np.argsort(x, kind="stable"))


def test_stable_argsort_sorts_floats_by_packed_keys_unless_most_are_ulps_apart() -> None:
    """Floats take the packed keys' sort, ties and rounded scores included (a run of equal values is
    in index order already); values within the dropped bits of each other are sorted again by
    value, and when they are most of the values, or a value is NaN, the default sort's path takes
    over. The stable order every time."""
    rng = np.random.default_rng(11)
    n = 3 * kernels.ELEMENT_BLOCK
    x = rng.random(n)
    x[:500] = x[500:1000]  # some ties
    coarse = np.round(x, 3)  # all tied
    near = x.copy()
    near[:300] = 0.5 + rng.integers(0, 50, 300) * 2.0**-52  # some a few ulps apart
    close = 1.0 + rng.integers(0, 50, n) * 2.0**-52  # all a few ulps apart
    for v in (x, coarse, near):
        assert kernels._packed_order(v) is not None
    assert kernels._packed_order(close) is None
    assert kernels._packed_order(np.r_[x, np.nan]) is None
    for v in (x, coarse, near, close):
        assert np.array_equal(stable_argsort(v), np.argsort(v, kind="stable"))


def test_stable_argsort_with_nan_and_small_inputs_is_the_stable_order() -> None:
    rng = np.random.default_rng(5)
    x = np.round(rng.random(N), 2)
    x[rng.integers(0, N, 50)] = np.nan
    assert np.array_equal(stable_argsort(x), np.argsort(x, kind="stable"))
    assert stable_argsort(np.array([3.0, 1.0, 3.0])).tolist() == [1, 0, 2]


def test_one_blas_thread_gives_one_threads_products_here_and_in_pools() -> None:
    """Inside ``one_blas_thread`` a product (and a Cholesky) has the bits of OpenBLAS on one thread,
    in this thread and in a pool's workers started inside; outside, the setting is back."""
    import hashlib
    import os
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    code = (
        "import hashlib, numpy as np\n"
        "z = np.random.default_rng(1).standard_normal((600, 400))\n"
        "c = z.T @ z / 600 + np.eye(400)\n"
        "print(hashlib.sha256((z @ c).tobytes() + np.linalg.cholesky(c).tobytes()).hexdigest())\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    want = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)

    def digest() -> str:
        z = np.random.default_rng(1).standard_normal((600, 400))
        c = z.T @ z / 600 + np.eye(400)
        return hashlib.sha256((z @ c).tobytes() + np.linalg.cholesky(c).tobytes()).hexdigest()

    from labledger.analysis import threads

    with threads.one_blas_thread():
        here = digest()
        with ThreadPoolExecutor(2, initializer=threads.pool_initializer()) as pool:
            there = pool.submit(digest).result()
    if not threads._local_threads():  # (no OpenBLAS with thread-local counts: nothing to check)
        pytest.skip("numpy's BLAS is not an OpenBLAS with openblas_set_num_threads_local")
    assert here == there == want.stdout.strip()
    assert threads.pool_initializer() is None


@pytest.mark.parametrize("name", ["brier", "roc_auc", "ece"])
def test_a_bootstraps_chunks_in_threads_draw_what_they_draw_one_after_another(name, monkeypatch) -> None:
    """The metrics run no threads: a bootstrap's chunks run through the caller's ``run``, the
    analysis's threads (:func:`labledger.analysis.threads.chunk_map`) or ``map``, the same draws."""
    from labledger.analysis import threads
    from labledger.metrics import prepare, resample

    monkeypatch.setattr(resample, "CHUNK_ELEMENTS", 1 << 12)  # several chunks
    monkeypatch.setattr(threads, "THREADS", 2)
    rng = np.random.default_rng(4)
    gold = rng.integers(0, 2, 600)
    score = np.round(rng.random(600), 2)
    prep = prepare(name, gold=gold, score=score, pos_label=1)
    seen: list[int] = []
    counted = lambda *a: seen.append(len(a[1])) or threads.chunk_map(*a)  # noqa: E731
    here = resample.bootstrap_samples(prep, resamples=200, seed=3)
    there = resample.bootstrap_samples(prep, resamples=200, seed=3, run=counted)
    assert here is not None and there is not None and seen and seen[0] > 1
    np.testing.assert_array_equal(here, there)
