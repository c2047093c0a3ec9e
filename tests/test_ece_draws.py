"""The calibration report's joint ECE draws (#19): the bin sums' moments against the brute-force
feature matrix, the draws against the item bootstrap, the report's method text, and coverage."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.calibrate import ece_draws
from labledger.metrics import prepare
from labledger.metrics import resample as rs
from labledger.metrics.kernels import whole


def _preps(rng: np.random.Generator, n: int, k: int, strategies: list[str], n_bins: int = 10, digits: int = 8):
    gold = rng.integers(0, 2, n)
    base = np.clip(rng.normal(0.35 + 0.3 * gold, 0.2), 0, 1)
    return [
        prepare(
            "ece",
            gold=gold,
            score=np.clip(base + rng.normal(0, 0.05 * j, n), 0, 1).round(digits),
            n_bins=n_bins,
            strategy=strategies[j % len(strategies)],
        )
        for j in range(k)
    ]


def _features(preps, per_bin: int) -> np.ndarray:
    """Each item's feature vector, written out: per variant its count indicators (equal-mass only)
    then its gap indicators."""
    cols = []
    for p in preps:
        cells, correct, conf = p.binned
        nb = p.params["n_bins"]
        if p.params["strategy"] == "quantile":
            m = nb * per_bin
            unit = cells * m // len(cells)
            cols.append(np.eye(m)[unit])
        else:
            m, unit = nb, cells
        cols.append(np.eye(m)[unit] * (correct - whole(conf))[:, None])
    return np.hstack(cols)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(20, 300),
    k=st.integers(1, 3),
    mix=st.sampled_from([["uniform"], ["quantile"], ["quantile", "uniform"]]),
    digits=st.sampled_from([1, 2, 8]),
)
def test_moments_equal_the_feature_matrix(seed, n, k, mix, digits):
    preps = _preps(np.random.default_rng(seed), n, k, mix, n_bins=4, digits=digits)
    mean, cov, blocks = ece_draws.moments(preps, 2)
    x = _features(preps, 2)
    np.testing.assert_allclose(mean, x.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(cov, np.cov(x, rowvar=False, ddof=0), atol=1e-12)
    assert sum(b.stop - b.start for b in blocks) == x.shape[1]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), strategy=st.sampled_from(["uniform", "quantile"]))
def test_equal_variants_get_equal_draws_and_a_unit_of_one_item_is_its_point(seed, strategy):
    rng = np.random.default_rng(seed)
    a, b = _preps(rng, 2000, 2, [strategy])
    twin = prepare("ece", gold=a.binned[1].astype(int), score=whole(a.binned[2]), n_bins=10, strategy=strategy)
    da, db, dt = ece_draws.joint_ece_draws([a, b, twin], 50, np.random.default_rng(seed))
    assert np.array_equal(da, dt) and not np.array_equal(da, db)
    assert ece_draws._same(a, twin) and not ece_draws._same(a, b)


def test_a_singular_covariance_gets_a_root_and_an_indefinite_one_the_clipped_eigh():
    cov = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    root = ece_draws._root(cov)
    np.testing.assert_allclose(root @ root.T, cov, atol=1e-9)
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])  # indefinite: Cholesky fails, the clipped eigh stands in
    root = ece_draws._root(bad)
    assert np.isfinite(root).all() and root.shape == (2, 2)
    assert not ece_draws._root(np.zeros((2, 2))).any()


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_draws_match_the_item_bootstrap(strategy, monkeypatch):
    """Mean within 4 MC se and SD within 14% (B = 400) of the item bootstrap, values and differences."""
    rng = np.random.default_rng(5)
    n = 12_000
    y = rng.random(n) < 0.4
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.25), 0, 1)
    s2 = np.clip(s + rng.normal(0, 0.05, n), 0, 1)
    pa = prepare("ece", gold=y.astype(int), score=s, strategy=strategy)
    pb = prepare("ece", gold=y.astype(int), score=s2, strategy=strategy)
    assert ece_draws.applies([pa, pb], None) and not ece_draws.applies([pa], None)
    fast_a, fast_b = ece_draws.joint_ece_draws([pa, pb], 400, rs.rng_for(1))
    monkeypatch.setattr(rs, "BINNED_FROM", 10**9)
    assert not ece_draws.applies([pa, pb], None)
    slow_a, slow_b = rs.resample_values([pa, pb], 400, rs.rng_for(1))
    for fast, slow in ((fast_a, slow_a), (fast_a - fast_b, slow_a - slow_b)):
        sd = float(np.std(slow, ddof=1))
        assert abs(np.mean(fast) - np.mean(slow)) < 4 * sd / math.sqrt(400) * math.sqrt(2)
        assert float(np.std(fast, ddof=1)) == pytest.approx(sd, rel=0.14)


def test_the_report_states_the_method_of_its_ece_draws(monkeypatch):
    import labledger.calibrate as cal

    monkeypatch.setattr(rs, "BINNED_FROM", 100)
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 400)
    score = np.clip(rng.normal(0.35 + 0.3 * gold, 0.2), 0.01, 0.99)
    rows = [
        {"id": i, "task": "t", "gold": "ab"[g], "probs": {"a": 1 - s, "b": s}}
        for i, (g, s) in enumerate(zip(gold.tolist(), score.tolist()))
    ]
    rec = cal.fit(rows, method="threshold", positive="b", crossfit=3)
    doc = cal.report(rows, rec, resamples=100).to_dict()["tasks"]["t"]
    eces = [e for e in doc["metrics"] if e["base_metric"].startswith("ece")]
    assert len(eces) == 4 and all(ece_draws.METHOD in e["method"] for e in eces)
    assert all(e["ci_low"] <= e["value"] <= e["ci_high"] for e in eces)
    raw = [e for e in doc["slices"]["variant"]["raw"]["metrics"] if e["key"].startswith("ece")]
    assert all(ece_draws.METHOD not in e["method"] for e in raw)  # the evaluation's own interval


def ece_coverage(r: int, n: int, resamples: int, seed: int = 19) -> dict[tuple[str, str], float]:
    """Coverage of the joint draws' 95% percentile intervals on this design (see the test below)."""
    rng = np.random.default_rng(seed)
    hits = {(s, what): 0 for s in ("uniform", "quantile") for what in ("a", "diff")}
    for _ in range(r):
        s = rng.uniform(0.6, 1.0, n)
        y = (rng.random(n) < s - 0.2).astype(int)
        for strategy in ("uniform", "quantile"):
            pa = prepare("ece", gold=y, score=s, strategy=strategy)
            pb = prepare("ece", gold=y, score=0.75 * s + 0.15, strategy=strategy)
            da, db = ece_draws.joint_ece_draws([pa, pb], resamples, rng)
            lo, hi = np.quantile(da, [0.025, 0.975])
            hits[strategy, "a"] += bool(lo <= 0.2 <= hi)
            lo, hi = np.quantile(db - da, [0.025, 0.975])
            hits[strategy, "diff"] += bool(lo <= -0.05 <= hi)
    return {k: v / r for k, v in hits.items()}


@pytest.mark.slow  # ~40 s on a quiet core
@pytest.mark.simulation
def test_the_draws_cover_the_true_ece_and_difference():
    """Top-label confidence s ~ U(0.6, 1), correct ~ Bernoulli(s - 0.2): every bin's gap is -0.2 on
    average, so ECE = 0.2 with any bins; variant B lowers the confidence to 0.75 s + 0.15 on the same
    items: gap -0.2 + 0.25 (s - 0.6), in [-0.2, -0.1], ECE 0.15, difference -0.05. Every bin's gap is
    many SEs from 0 (where |gap| has no bias; near 0 the ECE itself is biased upward, whatever
    resamples it). R = 200 datasets of 10,000 items (MC se at 0.95: 0.015); nominal 95% percentile
    intervals (500 draws) of ECE A and of B - A."""
    cover = ece_coverage(200, 10_000, 500)
    assert all(0.91 <= c <= 0.985 for c in cover.values()), cover


def test_variants_that_score_alike_are_prepared_once_with_the_same_entries(monkeypatch):
    """A cross-fitted variant equal to the calibrated one (as at 1M items, where every fold picks the
    same multiplier): one prepared metric for both gives the entries that preparing each gives."""
    import labledger.calibrate as cal
    from labledger.calibrate import reporting
    from labledger.calibrate.methods import Scores, apply_steps, task_arrays
    from labledger.calibrate.search import objective_from_key
    from labledger.inputs.results import results_from_rows

    rng = np.random.default_rng(3)
    gold = rng.integers(0, 3, 600)
    probs = rng.dirichlet(np.ones(3), 600)
    probs[np.arange(600), gold] += 0.4
    probs /= probs.sum(axis=1, keepdims=True)
    rows = [
        {"id": i, "task": "t", "gold": "abc"[g], "probs": dict(zip("abc", map(float, p)))}
        for i, (g, p) in enumerate(zip(gold.tolist(), probs))
    ]
    steps = cal.fit(rows, method="prior_multiplier").tasks["t"].steps
    arr = task_arrays(results_from_rows(rows)["t"], steps)
    head = objective_from_key("accuracy", arr, steps)
    raw = arr.scores()
    calibrated = apply_steps(steps, raw, arr)
    variants = {
        "raw": raw,
        "calibrated": calibrated,
        "cross-fitted": Scores(calibrated.p.copy(), calibrated.pred.copy()),
    }
    specs = reporting._metric_specs(head, arr, 15)

    def entries():
        objs = reporting._objectives(specs, arr, head, steps)
        first = reporting._firsts(variants)
        made = {(o.key, u): o.prepared(arr, variants[u]) for o in objs for u in set(first.values())}
        preps = {o.key: [made[o.key, first[v]] for v in variants] for o in objs}
        with ThreadPoolExecutor(2) as pool:
            return reporting._metric_entries(
                "t", arr, list(variants), objs, preps, head, pool, ci=0.95, resamples=100, seed=0
            )

    assert reporting._same_scores(variants["calibrated"], variants["cross-fitted"])
    assert not reporting._same_scores(raw, calibrated)
    fast = entries()
    monkeypatch.setattr(reporting, "_same_scores", lambda a, b: a is b)
    slow = entries()
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert all(np.array_equal(fast[2][v], slow[2][v]) for v in slow[2])


def test_the_report_reads_and_hashes_a_file_side_by_side_with_the_same_errors(tmp_path):
    from labledger.calibrate.fitting import load_results
    from labledger.errors import LedgerError, RecordError
    from labledger.store.manifest import sha256_file

    with pytest.raises(RecordError, match="no such results file"):
        load_results(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "task": "t", "gold": "a", "pred": "a"}\n{"id": 2, "task": \n')
    with pytest.raises(LedgerError) as err:
        load_results(bad)
    assert "no such results file" not in str(err.value)
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": 1, "task": "t", "gold": "a", "pred": "a"}\n')
    rs, name, sha = load_results(good)
    assert sha == sha256_file(good)[0] and name == str(good) and rs["t"].n == 1
