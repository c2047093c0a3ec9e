"""Seeded Monte Carlo designs for labledger's inference (reused from reviews/numbers.md, tasks 2 and 3).

Used by tests/test_stats_simulation.py (slow tests, small R) and bench/stats_coverage.py (the tables
in docs/metrics.md and :data:`labledger.metrics.stats.FEW_CLUSTER_COVERAGE`, larger R). Datasets are
drawn many at once (one array per design); each goes through labledger's own kernels
(``bootstrap``, ``paired_bootstrap``, ``clustered_mcnemar``, ``mean_interval``, ``adjust_p``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats as st

from labledger.metrics import mcnemar, paired_bootstrap, prepare
from labledger.metrics.resample import bootstrap_samples, interval
from labledger.metrics.stats import (
    adjust_p,
    bca_interval,
    clustered_mcnemar,
    compare_seed_groups,
    jackknife_values,
    mde,
    mean_interval,
    n_for_delta,
    power_at,
    refuse_degenerate,
    seed_group_interval,
)

#: numbers.md task 2: 3 classes, shares PI, P(correct | class) ACC; errors split evenly.
PI = np.array([0.5, 0.3, 0.2])
ACC = np.array([0.85, 0.70, 0.60])
TRUE_ACCURACY = float(PI @ ACC)  # 0.755


def _macro_f1() -> float:
    joint = PI[:, None] * (1 - ACC[:, None]) / 2 * (1 - np.eye(3)) + np.diag(PI * ACC)
    return float(np.mean(2 * np.diag(joint) / (joint.sum(axis=1) + joint.sum(axis=0))))


#: macro-F1 of that joint distribution (numbers.md: 0.71758)
TRUE_MACRO_F1 = _macro_f1()


def mc_se(p: float, r: int) -> float:
    """Monte Carlo standard error of a proportion estimated from ``r`` replications."""
    return math.sqrt(p * (1 - p) / r)


def _classes(rng: np.random.Generator, r: int, n: int) -> np.ndarray:
    return rng.choice(3, size=(r, n), p=PI)


def _preds(rng: np.random.Generator, gold: np.ndarray, correct: np.ndarray) -> np.ndarray:
    shift = rng.integers(1, 3, size=gold.shape)
    return np.where(correct, gold, (gold + shift) % 3)


def iid_classification(rng: np.random.Generator, r: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(gold, pred), each (r, n): iid items."""
    gold = _classes(rng, r, n)
    correct = rng.random((r, n)) < ACC[gold]
    return gold, _preds(rng, gold, correct)


def clustered_classification(
    rng: np.random.Generator, r: int, clusters: int, size: int = 10
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gold, pred, groups): clusters of ``size`` items sharing v_g ~ N(0, 1) on the probit scale,
    with a_c rescaled so that P(correct | class) is unchanged (population values as iid)."""
    n = clusters * size
    gold = _classes(rng, r, n)
    v = np.repeat(rng.standard_normal((r, clusters)), size, axis=1)
    a = st.norm.ppf(ACC) * math.sqrt(2.0)  # Var(v + e) = 2
    correct = a[gold] + v + rng.standard_normal((r, n)) > 0
    groups = np.repeat(np.arange(clusters), size)
    return gold, _preds(rng, gold, correct), groups


def coverage(
    metric: str,
    gold: np.ndarray,
    pred: np.ndarray,
    truth: float,
    groups: np.ndarray | None = None,
    resamples: int = 1000,
) -> dict[str, float]:
    """Share of datasets whose 95% percentile bootstrap interval (and, for accuracy, the analytic
    interval) contains ``truth``; a refused ("too few clusters") interval counts as not covering."""
    hit = hit_an = hit_bca = 0
    for j in range(gold.shape[0]):
        prep = prepare(metric, gold=gold[j], pred=pred[j])
        draws = bootstrap_samples(prep, resamples=resamples, seed=j, groups=groups)
        iv = interval(prep, prep.value(), draws, ci=0.95, resamples=resamples, groups=groups)
        refused = refuse_degenerate(iv.low, iv.high, iv.clusters)
        hit += iv.low is not None and not refused and iv.low <= truth <= iv.high
        if metric == "accuracy":
            an = mean_interval((gold[j] == pred[j]).astype(float), groups=groups)
            hit_an += an["low"] is not None and an["low"] <= truth <= an["high"]
        else:
            lo, hi = bca_interval(draws, iv.value, jackknife_values(prep, groups))
            hit_bca += lo is not None and not refused and lo <= truth <= hi
    r = gold.shape[0]
    out = {"bootstrap": hit / r, "r": r}
    out["analytic" if metric == "accuracy" else "bca"] = (hit_an if metric == "accuracy" else hit_bca) / r
    return out


def clustered_null_pairs(
    rng: np.random.Generator, r: int, clusters: int = 100, size: int = 10, rho: float = 0.6, pref: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numbers.md task 3's clustered null: (correct_a, correct_b, groups); equal marginal accuracy
    0.80, shared item difficulty, cluster difficulty and a cluster-level preference +d_g for A, -d_g
    for B with d_g ~ N(0, pref^2)."""
    n = clusters * size
    c = np.repeat(rng.standard_normal((r, clusters)), size, axis=1)
    d = np.repeat(rng.normal(0, pref, (r, clusters)), size, axis=1)
    z = rng.standard_normal((r, n))
    scale = math.sqrt(1 + 1 + pref**2)
    alpha = st.norm.ppf(0.8) * scale
    a = alpha + c + d + math.sqrt(rho) * z + math.sqrt(1 - rho) * rng.standard_normal((r, n)) > 0
    b = alpha + c - d + math.sqrt(rho) * z + math.sqrt(1 - rho) * rng.standard_normal((r, n)) > 0
    return a, b, np.repeat(np.arange(clusters), size)


def paired_rejections(
    a: np.ndarray, b: np.ndarray, groups: np.ndarray | None, resamples: int = 1000
) -> dict[str, float]:
    """Rejection rates at 5%: paired bootstrap p (cluster-aware when groups given), clustered McNemar,
    item McNemar, and whether the bootstrap p and interval agree."""
    rej = {"bootstrap": 0, "clustered_mcnemar": 0, "item_mcnemar": 0, "ci_excludes_0": 0, "agree": 0}
    gold = np.ones(a.shape[1], dtype=np.int64)
    for j in range(a.shape[0]):
        pa = prepare("accuracy", gold=gold, pred=a[j].astype(np.int64))
        pb = prepare("accuracy", gold=gold, pred=b[j].astype(np.int64))
        res = paired_bootstrap(pa, pb, resamples=resamples, seed=j, groups=groups)
        sig = res.p_value < 0.05
        excl = res.low > 0 or res.high < 0
        rej["bootstrap"] += sig
        rej["ci_excludes_0"] += excl
        rej["agree"] += sig == excl
        if groups is not None:
            rej["clustered_mcnemar"] += (
                clustered_mcnemar(correct_a=a[j], correct_b=b[j], groups=groups)["p_value"] < 0.05
            )
        rej["item_mcnemar"] += mcnemar(correct_a=a[j], correct_b=b[j])["p_value"] < 0.05
    return {k: v / a.shape[0] for k, v in rej.items()} | {"r": a.shape[0]}


def null_table_fwer(rng: np.random.Generator, r: int, benchmarks: int = 16, adjust: str = "holm") -> float:
    """Family-wise error of a version table of ``benchmarks`` independent null deltas (p ~ U(0, 1) under
    the null of each test, as a calibrated test gives): share of tables with any adjusted p < 0.05."""
    p = rng.random((r, benchmarks))
    any_false = 0
    for row in p:
        adj = adjust_p(row.tolist(), adjust)
        any_false += any(x < 0.05 for x in adj)
    return any_false / r


def null_table_fwer_bootstrap(
    rng: np.random.Generator, r: int, benchmarks: int = 16, n: int = 200, adjust: str = "holm"
) -> float:
    """The same, with each delta's p from labledger's paired bootstrap on simulated null pairs."""
    any_false = 0
    gold = np.ones(n, dtype=np.int64)
    for j in range(r):
        ps = []
        for k in range(benchmarks):
            z = rng.standard_normal(n)
            a = (0.84 + 0.77 * z + 0.64 * rng.standard_normal(n) > 0).astype(np.int64)
            b = (0.84 + 0.77 * z + 0.64 * rng.standard_normal(n) > 0).astype(np.int64)
            res = paired_bootstrap(
                prepare("accuracy", gold=gold, pred=a),
                prepare("accuracy", gold=gold, pred=b),
                resamples=400,
                seed=[j, k],
            )
            ps.append(res.p_value)
        any_false += any(x < 0.05 for x in adjust_p(ps, adjust))
    return any_false / r


def power_check(rng: np.random.Generator, r: int, n: int = 1000, rho: float = 0.6) -> dict[str, float]:
    """Power of the paired test for 0.82 vs 0.80 (numbers.md task 3), simulated with a paired z-test on
    the per-item differences, against :func:`power_at` with the population omega^2."""
    z = rng.standard_normal((r, n))
    pa, pb = 0.82, 0.80
    a = st.norm.ppf(pa) + math.sqrt(rho) * z + math.sqrt(1 - rho) * rng.standard_normal((r, n)) > 0
    b = st.norm.ppf(pb) + math.sqrt(rho) * z + math.sqrt(1 - rho) * rng.standard_normal((r, n)) > 0
    d = a.astype(float) - b.astype(float)
    zstat = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    simulated = float((np.abs(zstat) > st.norm.ppf(0.975)).mean())
    # population omega^2 from the bivariate normal: P(A right, B wrong) + P(A wrong, B right) - delta^2
    cov = [[1, rho], [rho, 1]]
    both = st.multivariate_normal(mean=[0, 0], cov=cov).cdf([st.norm.ppf(pa), st.norm.ppf(pb)])
    b_ = pa - both
    c_ = pb - both
    omega2 = b_ + c_ - (pa - pb) ** 2
    theory = power_at(pa - pb, omega2, n)
    need = n_for_delta(omega2, pa - pb)
    return {
        "simulated": simulated,
        "theory": theory,
        "omega2": omega2,
        "n_for_80": need,
        "mde_at_n": mde(omega2, n),
        "r": r,
    }


def power_at_planned_n(rng: np.random.Generator, r: int, rho: float = 0.6) -> dict[str, float]:
    """Simulated power at the n that :func:`n_for_delta` plans for 80%: should be ~0.80."""
    pa, pb = 0.82, 0.80
    info = power_check(np.random.default_rng(0), 10, n=100, rho=rho)
    n = info["n_for_80"]
    hits = 0
    for _ in range(0, r, 50):
        m = min(50, r - _)
        z = rng.standard_normal((m, n))
        a = st.norm.ppf(pa) + math.sqrt(rho) * z + math.sqrt(1 - rho) * rng.standard_normal((m, n)) > 0
        b = st.norm.ppf(pb) + math.sqrt(rho) * z + math.sqrt(1 - rho) * rng.standard_normal((m, n)) > 0
        d = a.astype(float) - b.astype(float)
        zstat = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
        hits += int((np.abs(zstat) > st.norm.ppf(0.975)).sum())
    return {"n": n, "simulated": hits / r, "planned": 0.8, "r": r}


def seed_coverage(
    rng: np.random.Generator,
    r: int,
    seeds: int = 10,
    items: int = 200,
    seed_sd: float = 0.15,
    resamples: int = 1000,
    fn: Callable = seed_group_interval,
) -> dict[str, float]:
    """Coverage of the two-level seed interval: score_{s,i} = 1[a + u_i + w_s + e > 0], u_i ~ N(0, 1)
    item difficulty shared by every seed, w_s ~ N(0, seed_sd^2) seed effect; the target is the
    population mean over items and seeds (computed by quadrature)."""
    a = 0.8
    # population mean: P(a + u + w + e > 0) with u, w, e independent normals
    truth = float(st.norm.cdf(a / math.sqrt(1 + 1 + seed_sd**2)))
    hit = 0
    for j in range(r):
        u = rng.standard_normal(items)
        w = rng.normal(0, seed_sd, seeds)
        x = (a + u[None, :] + w[:, None] + rng.standard_normal((seeds, items)) > 0).astype(float)
        iv = fn(x, resamples=resamples, seed=j)
        hit += iv["low"] <= truth <= iv["high"]
    return {"coverage": hit / r, "r": r, "truth": truth}


def seed_compare_null(rng: np.random.Generator, r: int, seeds: int = 10, items: int = 200) -> float:
    """Type I error of :func:`compare_seed_groups` (paired) when both groups are the same system."""
    rej = 0
    for j in range(r):
        u = rng.standard_normal(items)
        xs = []
        for _ in range(2):
            w = rng.normal(0, 0.15, seeds)
            xs.append((0.8 + u[None, :] + w[:, None] + rng.standard_normal((seeds, items)) > 0).astype(float))
        res = compare_seed_groups(xs[0], xs[1], paired=True, resamples=1000, seed=j)
        rej += res["low"] > 0 or res["high"] < 0
    return rej / r
