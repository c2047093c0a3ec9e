"""Bootstrap intervals, cluster resampling, paired tests and McNemar."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics as skm

from labledger.errors import MetricInputError
from labledger.metrics import prepare
from labledger.metrics.resample import (
    bootstrap,
    bootstrap_samples,
    draw_counts,
    mcnemar,
    paired_bootstrap,
    unpaired_bootstrap,
    weight_rows,
)


def test_weight_rows_are_bootstrap_counts():
    w = weight_rows(50, 400, np.random.default_rng(0))
    assert w.shape == (400, 50) and (w.sum(axis=1) == 50).all() and (w >= 0).all()
    assert w.mean() == pytest.approx(1.0) and w.var() == pytest.approx(1 - 1 / 50, rel=0.1)


def test_draw_counts_has_the_item_bootstrap_law():
    counts = np.array([30, 60, 10])
    draws = draw_counts(counts, 4000, np.random.default_rng(1))
    assert (draws.sum(axis=1) == 100).all()
    p = counts / 100
    assert draws.mean(axis=0) == pytest.approx(100 * p, rel=0.03)
    assert draws.var(axis=0) == pytest.approx(100 * p * (1 - p), rel=0.1)
    many = np.bincount(np.arange(2000) % 1000, minlength=1000)  # > 64 categories: the index path
    d2 = draw_counts(many, 50, np.random.default_rng(2))
    assert (d2.sum(axis=1) == 2000).all()


def test_count_table_path_equals_item_weights_on_the_same_draws():
    # the same resample draws, once as a count table (the fast path) and once as per-item weights
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 3, 300)
    pred = np.where(rng.random(300) < 0.6, gold, rng.integers(0, 3, 300))
    prep = prepare("f1", gold=gold, pred=pred, average="macro")
    w = weight_rows(300, 20, rng)
    via_tables = prep.from_tables(prep.tables(w))
    for b in range(20):
        assert via_tables[b] == pytest.approx(skm.f1_score(gold, pred, average="macro", sample_weight=w[b]), abs=1e-12)


def test_multinomial_cells_and_item_weights_give_the_same_distribution():
    rng = np.random.default_rng(4)
    gold = rng.integers(0, 2, 400)
    pred = np.where(rng.random(400) < 0.8, gold, 1 - gold)
    prep = prepare("f1", gold=gold, pred=pred, pos_label=1)
    fast = bootstrap_samples(prep, resamples=3000, seed=5)
    slow = prep.from_tables(prep.tables(weight_rows(400, 3000, np.random.default_rng(6))))
    assert np.quantile(fast, [0.025, 0.5, 0.975]) == pytest.approx(np.quantile(slow, [0.025, 0.5, 0.975]), abs=0.01)
    assert fast.std() == pytest.approx(slow.std(), rel=0.08)


@pytest.mark.parametrize(
    "metric, make",
    [
        ("accuracy", lambda rng, n: dict(gold=np.ones(n, int), pred=(rng.random(n) < 0.7).astype(int))),
        ("mae", lambda rng, n: dict(gold=np.zeros(n), pred=rng.exponential(1.0, n))),
        (
            "roc_auc",
            lambda rng, n: (lambda g: dict(gold=g, score=np.clip(0.3 * g + rng.random(n) * 0.7, 0, 1)))(
                rng.integers(0, 2, n)
            ),
        ),
    ],
)
def test_interval_covers_the_true_value_at_about_the_nominal_rate(metric, make):
    true = {"accuracy": 0.7, "mae": 1.0, "roc_auc": None}[metric]
    rng = np.random.default_rng(7)
    if true is None:  # the population AUC of the simulated scores, from a very large sample
        big = make(rng, 400_000)
        true = skm.roc_auc_score(big["gold"], big["score"])
    hits, sims = 0, 200
    for s in range(sims):
        iv = bootstrap(prepare(metric, **make(rng, 150)), resamples=300, seed=s)
        hits += iv.low <= true <= iv.high
    assert 0.88 <= hits / sims <= 0.995  # nominal 0.95 (percentile intervals run a little narrow at n=150)


def test_cluster_bootstrap_resamples_groups():
    # 40 documents of 10 identical items: the information is in 40 clusters, not 400 items
    rng = np.random.default_rng(8)
    doc_correct = rng.random(40) < 0.6
    gold = np.ones(400, int)
    pred = np.repeat(doc_correct, 10).astype(int)
    groups = np.repeat(np.arange(40), 10)
    items = bootstrap(prepare("accuracy", gold=gold, pred=pred), seed=1)
    clusters = bootstrap(prepare("accuracy", gold=gold, pred=pred), seed=1, groups=groups)
    per_doc = bootstrap(prepare("accuracy", gold=np.ones(40, int), pred=doc_correct.astype(int)), seed=1)
    width = lambda iv: iv.high - iv.low  # noqa: E731
    assert width(clusters) > 2.5 * width(items)
    assert width(clusters) == pytest.approx(width(per_doc), rel=0.2)
    assert clusters.clusters == 40 and "clusters" in clusters.method
    # every strategy honours the clusters
    for name, extra in (("mae", {}), ("pearson", {})):
        g = np.repeat(rng.normal(size=40), 10)
        p = g + np.repeat(rng.normal(size=40), 10)
        a = bootstrap(prepare(name, gold=g, pred=p, **extra), seed=2)
        b = bootstrap(prepare(name, gold=g, pred=p, **extra), seed=2, groups=groups)
        assert width(b) > 2 * width(a)


def test_groups_of_one_are_the_item_bootstrap():
    rng = np.random.default_rng(9)
    gold, pred = rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    a = bootstrap_samples(prepare("accuracy", gold=gold, pred=pred), resamples=3000, seed=1)
    b = bootstrap_samples(prepare("accuracy", gold=gold, pred=pred), resamples=3000, seed=1, groups=np.arange(300))
    assert a.std() == pytest.approx(b.std(), rel=0.08)


def test_seeds_make_intervals_reproducible():
    rng = np.random.default_rng(10)
    prep = prepare("roc_auc", gold=rng.integers(0, 2, 200), score=rng.random(200))
    assert bootstrap(prep, seed=3) == bootstrap(prep, seed=3)
    assert bootstrap(prep, seed=3).low != bootstrap(prep, seed=4).low


def test_no_resamples_and_empty_data():
    iv = bootstrap(prepare("accuracy", gold=[1, 0], pred=[1, 1]), resamples=0)
    assert iv.value == 0.5 and iv.low is None and iv.high is None
    assert bootstrap(prepare("mae", gold=[], pred=[])).low is None


def test_per_class_intervals():
    out = bootstrap(prepare("per_class", gold=["a", "b"] * 50, pred=["a", "a"] * 50), resamples=200)
    assert out["recall[a]"].value == 1.0 and out["recall[b]"].value == 0.0
    assert out["precision[a]"].low < 0.5 < out["precision[a]"].high


def test_paired_bootstrap():
    rng = np.random.default_rng(11)
    gold = rng.integers(0, 2, 500)
    a = np.where(rng.random(500) < 0.85, gold, 1 - gold)
    b = np.where(rng.random(500) < 0.75, gold, 1 - gold)
    pa, pb = prepare("f1", gold=gold, pred=a, pos_label=1), prepare("f1", gold=gold, pred=b, pos_label=1)
    r = paired_bootstrap(pa, pb, seed=1)
    assert r.diff == pytest.approx(pa.value() - pb.value())
    assert r.low < r.diff < r.high and r.low > 0 and r.p_value < 0.01
    swapped = paired_bootstrap(pb, pa, seed=1)
    assert swapped.diff == -r.diff and swapped.p_value == r.p_value
    same = paired_bootstrap(pa, prepare("f1", gold=gold, pred=a, pos_label=1), seed=1)
    assert same.diff == 0 and same.p_value == 1.0 and same.low == same.high == 0
    # pairing: a paired interval is narrower than an unpaired one on the same data
    un = unpaired_bootstrap(pa, pb, seed=1)
    assert un.diff == r.diff and (un.high - un.low) > (r.high - r.low)


def test_paired_p_value_is_calibrated_under_the_null():
    rng = np.random.default_rng(12)
    ps = []
    for s in range(120):
        gold = rng.integers(0, 2, 200)
        a = np.where(rng.random(200) < 0.8, gold, 1 - gold)
        b = np.where(rng.random(200) < 0.8, gold, 1 - gold)
        ps.append(
            paired_bootstrap(
                prepare("accuracy", gold=gold, pred=a), prepare("accuracy", gold=gold, pred=b), resamples=300, seed=s
            ).p_value
        )
    assert 0.01 <= np.mean(np.array(ps) < 0.05) <= 0.12


def test_paired_needs_the_same_items():
    with pytest.raises(MetricInputError, match="same items"):
        paired_bootstrap(prepare("accuracy", gold=[1, 0], pred=[1, 0]), prepare("accuracy", gold=[1], pred=[1]))


@pytest.mark.parametrize("b, c", [(0, 0), (3, 0), (5, 9), (12, 12), (7, 17), (30, 10), (100, 80)])
def test_mcnemar_against_scipy(b, c):
    a_right = np.array([1] * b + [0] * c + [1] * 20 + [0] * 5, bool)
    b_right = np.array([0] * b + [1] * c + [1] * 20 + [0] * 5, bool)
    res = mcnemar(correct_a=a_right, correct_b=b_right)
    assert (res["b"], res["c"]) == (b, c)
    if b + c == 0:
        assert res["p_value"] == 1.0
    elif b + c < 25:
        assert res["method"].startswith("exact")
        assert res["p_value"] == pytest.approx(scipy.stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
    else:
        stat = (abs(b - c) - 1) ** 2 / (b + c)
        assert res["statistic"] == pytest.approx(stat)
        assert res["p_value"] == pytest.approx(scipy.stats.chi2.sf(stat, 1), rel=1e-10)


def test_ci_level_is_checked():
    with pytest.raises(MetricInputError, match="ci must be"):
        bootstrap(prepare("accuracy", gold=[1], pred=[1]), ci=1.5)
    assert math.isclose(bootstrap(prepare("accuracy", gold=[1, 0] * 50, pred=[1, 1] * 50), ci=0.5).ci, 0.5)
