"""Seeded Monte Carlo checks of coverage, type I error, multiplicity and power (#16).

Each test states its R and the Monte Carlo SE of what it measures (sqrt(p(1-p)/R)); the acceptance
windows are the issue's. The designs are in tests/stats_simulation.py (reviews/numbers.md, tasks 2
and 3); bench/stats_coverage.py runs them at R = 1,000 for docs/metrics.md.
"""

from __future__ import annotations

import numpy as np
import pytest
import stats_simulation as sim

from labledger.analysis.evaluation import evaluate
from labledger.metrics.stats import FEW_CLUSTER_COVERAGE

pytestmark = [pytest.mark.slow, pytest.mark.simulation]


@pytest.mark.parametrize("n", [100, 1000])
def test_item_intervals_cover(n):
    r = 800  # MC se at 0.95: 0.0077
    gold, pred = sim.iid_classification(np.random.default_rng(n), r, n)
    cov = sim.coverage("accuracy", gold, pred, sim.TRUE_ACCURACY)
    assert 0.93 <= cov["bootstrap"] <= 0.97, cov
    assert 0.93 <= cov["analytic"] <= 0.97, cov  # Wilson


def test_clustered_intervals_cover_at_100_clusters():
    r = 800  # MC se at 0.95: 0.0077
    gold, pred, groups = sim.clustered_classification(np.random.default_rng(100), r, 100)
    cov = sim.coverage("accuracy", gold, pred, sim.TRUE_ACCURACY, groups)
    assert 0.92 <= cov["bootstrap"] <= 0.97, cov
    assert 0.92 <= cov["analytic"] <= 0.97, cov  # cluster-robust CR1, t on C-1


@pytest.mark.parametrize("clusters", [3, 10])
def test_few_cluster_table_matches_a_fresh_simulation(clusters):
    """FEW_CLUSTER_COVERAGE (bench, R = 1000) against a fresh R = 600 (se <= 0.018): accuracy."""
    r = 600
    gold, pred, groups = sim.clustered_classification(np.random.default_rng(clusters), r, clusters)
    cov = sim.coverage("accuracy", gold, pred, sim.TRUE_ACCURACY, groups)["bootstrap"]
    lo, hi = FEW_CLUSTER_COVERAGE["clusters"][clusters]
    assert lo - 3 * sim.mc_se(cov, r) <= cov <= hi + 3 * sim.mc_se(cov, r), (cov, lo, hi)


def _clustered_rows(clusters):
    rng = np.random.default_rng(clusters)
    return [
        {"id": f"{g}-{i}", "task": "t", "gold": "y", "pred": "y" if rng.random() < 0.7 else "n", "group": str(g)}
        for g in range(clusters)
        for i in range(10)
    ]


def test_the_few_cluster_warning_fires_below_30():
    for clusters, warned in ((29, True), (10, True), (30, False), (100, False)):
        doc = evaluate(_clustered_rows(clusters), metrics=["accuracy"], resamples=100).to_dict()
        entry = doc["tasks"]["t"]["metrics"][0]
        assert ("warning" in entry) is warned, (clusters, entry.get("warning"))


def test_paired_tests_hold_their_level_under_the_clustered_null():
    r = 800  # MC se at 0.05: 0.0077
    a, b, groups = sim.clustered_null_pairs(np.random.default_rng(3), r)
    rej = sim.paired_rejections(a, b, groups)
    assert 0.03 <= rej["bootstrap"] <= 0.07, rej
    assert 0.03 <= rej["clustered_mcnemar"] <= 0.07, rej
    assert rej["item_mcnemar"] > 0.15, rej  # why the item McNemar is not reported on grouped rows
    assert rej["agree"] >= 0.99, rej  # p < 0.05 exactly when the 95% interval excludes 0, up to 1/B


def test_holm_controls_the_family_wise_error_of_a_16_benchmark_null_table():
    r = 20_000  # MC se at 0.05: 0.0015
    rng = np.random.default_rng(16)
    assert sim.null_table_fwer(rng, r, adjust="holm") <= 0.05 + 2 * sim.mc_se(0.05, r)
    assert sim.null_table_fwer(rng, r, adjust="none") == pytest.approx(1 - 0.95**16, abs=0.02)
    # with labledger's own paired-bootstrap p-values on null pairs (R = 100 tables, se 0.022)
    rb = 100
    assert sim.null_table_fwer_bootstrap(np.random.default_rng(17), rb, adjust="holm") <= 0.05 + 2 * sim.mc_se(0.05, rb)


def test_two_level_seed_interval_covers():
    r = 600  # MC se at 0.95: 0.0089
    for sd in (0.15, 0.5):
        cov = sim.seed_coverage(np.random.default_rng(int(sd * 100)), r, seed_sd=sd, resamples=500)
        assert 0.92 <= cov["coverage"] <= 0.97, (sd, cov)


def test_power_matches_the_formula():
    pw = sim.power_check(np.random.default_rng(5), 2000)  # MC se at 0.3: 0.010
    assert abs(pw["simulated"] - pw["theory"]) <= 0.03, pw
    planned = sim.power_at_planned_n(np.random.default_rng(6), 1000)  # MC se at 0.8: 0.013
    assert abs(planned["simulated"] - 0.8) <= 0.03, planned
