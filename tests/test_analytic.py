"""Analytic intervals and the bin-cell bootstrap (#19): fast paths against slow ones and references.

DeLong is checked against a reference written here from the paper (DeLong, DeLong & Clarke-Pearson
1988: the structural components V10/V01 from the O(P x Q) kernel psi(X, Y) = 1[X > Y] + 1/2 1[X = Y],
Var = S10/m + S01/n, and the covariance of two AUCs on the same items); the other analytic forms
against the bootstrap at large n, within Monte Carlo error.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.analysis.comparison import compare
from labledger.analysis.evaluation import evaluate
from labledger.metrics import analytic, classification, kernels, prepare
from labledger.metrics import resample as rs
from labledger.metrics.analytic import analytic_interval, covariance, influence, paired_analytic
from labledger.metrics.classification import reversed_starts, tie_starts


def _delong_reference(y: np.ndarray, scores: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(AUCs, their covariance matrix) by DeLong et al. (1988), from the pairwise kernel."""
    pos, neg = np.flatnonzero(y), np.flatnonzero(~y)
    m, n = len(pos), len(neg)
    v10, v01, aucs = [], [], []
    for s in scores:
        x, z = s[pos][:, None], s[neg][None, :]
        kern = (x > z) + 0.5 * (x == z)
        aucs.append(kern.mean())
        v10.append(kern.mean(axis=1))
        v01.append(kern.mean(axis=0))
    s10 = np.cov(np.stack(v10), ddof=1).reshape(len(scores), len(scores))
    s01 = np.cov(np.stack(v01), ddof=1).reshape(len(scores), len(scores))
    return np.array(aucs), s10 / m + s01 / n


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(6, 80), st.sampled_from([1, 2, 6]))
def test_delong_equals_the_reference_to_1e12(seed, n, digits):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    y[:4] = [True, False, True, False]  # DeLong's S10/S01 need two of each
    sa = rng.random(n).round(digits)  # few digits: many ties
    sb = np.clip(sa + rng.normal(0, 0.2, n), 0, 1).round(digits)
    aucs, cov = _delong_reference(y, [sa, sb])
    pa, pb = (prepare("roc_auc", gold=y.astype(int), score=s) for s in (sa, sb))
    assert abs(pa.value() - aucs[0]) < 1e-12
    assert abs(analytic_interval(pa).se ** 2 - cov[0, 0]) < 1e-12
    d = paired_analytic(pa, pb)
    assert abs(d.se**2 - (cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])) < 1e-12


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 60), st.integers(2, 4), st.sampled_from([1, 2, 8]))
def test_point_fast_paths_equal_the_weight_path(seed, n, k, digits):
    """One-vs-rest ROC-AUC/AP, binary AP and equal-width ECE point values (no weight matrix) against
    the weighted path with unit weights."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, k, n)
    probs = rng.dirichlet(np.ones(k), n).round(digits)
    preps = [prepare(m, gold=gold, probs=probs, labels=list(range(k))) for m in ("roc_auc", "average_precision", "ece")]
    preps.append(prepare("average_precision", gold=(gold == 0).astype(int), score=probs[:, 0]))
    for p in preps:
        fast, slow = p.value(), float(p.from_weights(np.ones((1, n)))[0])
        assert (math.isnan(fast) and math.isnan(slow)) or abs(fast - slow) < 1e-12, (p.metric, fast, slow)


def test_influence_values_sum_to_zero_and_clusters_of_one_give_the_item_variance():
    rng = np.random.default_rng(0)
    n = 400
    y = rng.random(n) < 0.3
    s = np.clip(rng.normal(0.3 + 0.3 * y, 0.2), 0, 1).round(2)
    for m in ("roc_auc", "average_precision", "log_loss", "brier"):
        p = prepare(m, gold=y.astype(int), score=s)
        psi = influence(p, clustered=True)
        assert abs(psi.sum()) < 1e-12, m
        one_each = covariance([psi], np.arange(n))[0, 0]
        assert one_each == pytest.approx(covariance([influence(p)])[0, 0], rel=0.01), m


@pytest.mark.parametrize("metric", ["roc_auc", "average_precision", "log_loss", "brier", "rmse_like"])
def test_analytic_se_matches_the_bootstrap_at_large_n(metric):
    """Within Monte Carlo error: B = 400 resamples estimate an SD to ~3.5% (1/sqrt(2B)); 4 of those."""
    rng = np.random.default_rng(1)
    n = 5000
    y = rng.random(n) < 0.3
    s = np.clip(rng.normal(0.3 + 0.3 * y, 0.2), 0, 1)
    if metric == "rmse_like":
        p = prepare("rmse", gold=rng.normal(size=n), pred=rng.normal(size=n))
    else:
        p = prepare(metric, gold=y.astype(int), score=s)
    draws = rs.bootstrap_samples(p, resamples=400, seed=2)
    assert analytic_interval(p).se == pytest.approx(float(np.std(draws, ddof=1)), rel=0.14)


@pytest.mark.slow  # ~3 s; the binary forms are covered fast above
def test_one_vs_rest_analytic_se_matches_the_bootstrap():
    rng = np.random.default_rng(3)
    n, k = 6000, 3
    g = rng.integers(0, k, n)
    probs = rng.dirichlet(np.ones(k), n)
    probs[np.arange(n), g] += 0.5
    probs /= probs.sum(axis=1, keepdims=True)
    for m in ("roc_auc", "average_precision"):
        p = prepare(m, gold=g, probs=probs, labels=[0, 1, 2])
        draws = rs.bootstrap_samples(p, resamples=400, seed=4)
        assert analytic_interval(p).se == pytest.approx(float(np.std(draws, ddof=1)), rel=0.14), m


@pytest.mark.parametrize("strategy", ["uniform", pytest.param("quantile", marks=pytest.mark.slow)])
def test_bin_cell_bootstrap_matches_the_item_bootstrap(strategy, monkeypatch):
    rng = np.random.default_rng(5)
    n = 12_000
    y = rng.random(n) < 0.4
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.25), 0, 1)
    s2 = np.clip(s + rng.normal(0, 0.05, n), 0, 1)
    pa = prepare("ece", gold=y.astype(int), score=s, strategy=strategy)
    pb = prepare("ece", gold=y.astype(int), score=s2, strategy=strategy)
    assert rs.binned_path(pa)
    fast_a, fast_b = rs.resample_values([pa, pb], 400, rs.rng_for(1))
    monkeypatch.setattr(rs, "BINNED_FROM", 10**9)
    assert not rs.binned_path(pa)
    slow_a, slow_b = rs.resample_values([pa, pb], 400, rs.rng_for(1))
    for fast, slow in ((fast_a, slow_a), (fast_a - fast_b, slow_a - slow_b)):
        sd = float(np.std(slow, ddof=1))
        assert abs(np.mean(fast) - np.mean(slow)) < 4 * sd / math.sqrt(400) * math.sqrt(2)
        assert float(np.std(fast, ddof=1)) == pytest.approx(sd, rel=0.14)


@pytest.fixture
def low_threshold(monkeypatch):
    """Analytic intervals from 200 items, so that documents can be checked on small data."""
    monkeypatch.setattr(analytic, "ANALYTIC_FROM", 200)
    monkeypatch.setattr(analytic, "ANALYTIC_MIN_CLUSTERS", 20)


def _rows(n, shift=0.0, seed=0, groups=False):
    rng = np.random.default_rng(seed)
    gold = rng.random(n) < 0.4
    score = np.clip(rng.normal(0.35 + 0.3 * gold + shift, 0.2), 0, 1)
    return [
        {
            "id": i,
            "task": "t",
            "gold": "y" if g else "n",
            "score": float(p),
            **({"group": str(i // 10)} if groups else {}),
        }
        for i, (g, p) in enumerate(zip(gold.tolist(), score.tolist()))
    ]


def test_evaluate_stores_the_method_of_each_interval(low_threshold):
    doc = evaluate(_rows(400), positive="y", resamples=200).to_dict()
    by = {e["metric"]: e for e in doc["tasks"]["t"]["metrics"]}
    assert by["roc_auc"]["method"] == "analytic: DeLong SE, normal" and by["roc_auc"]["resamples"] == 0
    assert by["log_loss"]["method"].startswith("analytic: CLT SE")
    assert by["average_precision"]["method"].startswith("analytic: delta-method")
    assert by["accuracy"]["method"].startswith("percentile bootstrap over items (count-table")
    assert by["roc_auc"]["ci_low"] < by["roc_auc"]["value"] < by["roc_auc"]["ci_high"]
    small = evaluate(_rows(150), positive="y", resamples=200).to_dict()
    assert all("bootstrap" in e["method"] for e in small["tasks"]["t"]["metrics"])


def test_clusters_use_the_cluster_robust_form_or_the_cluster_bootstrap(low_threshold):
    many = evaluate(_rows(400, groups=True), positive="y", resamples=200).to_dict()
    auc = next(e for e in many["tasks"]["t"]["metrics"] if e["metric"] == "roc_auc")
    assert auc["method"].startswith("analytic: cluster-robust (CR1") and auc["clusters"] == 40
    few = evaluate(_rows(300, groups=True)[:150], positive="y", resamples=100).to_dict()  # 15 clusters
    auc = next(e for e in few["tasks"]["t"]["metrics"] if e["metric"] == "roc_auc")
    assert "over clusters" in auc["method"]


def test_compare_uses_paired_analytic_tests(low_threshold):
    c = compare(_rows(600), _rows(600, shift=0.0, seed=0), positive="y", resamples=200)
    same = c.metric("t", "roc_auc")
    assert same.diff == 0 and same.p_value == 1.0 and same.method.startswith("analytic, paired: DeLong")
    a, b = _rows(600), _rows(600, seed=0)
    rng = np.random.default_rng(9)
    for r in b:  # another model: the same gold, noisier scores
        r["score"] = float(np.clip(r["score"] + rng.normal(0, 0.25), 0, 1))
    d = compare(a, b, positive="y", resamples=400).metric("t", "roc_auc")
    assert d.diff > 0 and d.p_value < 0.05 and d.ci_low > 0 and d.se is not None


def _ranked_case(rng: np.random.Generator, n: int, digits: int):
    """Class flags and scores of ``n`` items (``digits`` places: tied; 0: continuous), with the
    scores' stable ascending order and its tie groups."""
    y = rng.random(n) < rng.uniform(0.05, 0.95)
    score = rng.random(n) if digits == 0 else np.round(rng.random(n), digits)
    order = kernels.stable_argsort(score)
    return y, score, order, tie_starts(score[order])


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 400),
    digits=st.sampled_from([1, 2, 6]),
    block=st.integers(1, 9),
)
def test_blockwise_variances_equal_the_whole_arrays(seed, n, digits, block):
    """ROC-AUC's and AP's unclustered sum_i psi_i^2 and the group sums, a block of groups at a time
    (#19): the very same floats in one block, within a few ulps in many (tied and untied scores)."""
    y, score, order, starts = _ranked_case(np.random.default_rng(seed), n, digits)
    whole = analytic.Ranked(y, order, starts)
    assert analytic.auc_sum_sq(whole) == analytic.auc_groups(whole, False).sum_sq() or not y.any() or y.all()
    back = whole.reversed()
    assert analytic.ap_sum_sq(back) == analytic.ap_groups(back, False).sum_sq() or not y.any()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "BLOCK", block)
        mp.setattr(kernels, "WHOLE", 0)
        blocked = analytic.Ranked(y, order, starts)
        assert blocked.pos_g.tolist() == whole.pos_g.tolist()
        assert _tie_starts_list(score[order]) == _tie_starts_list(score[order], whole=True)
        auc = classification.roc_auc_sorted(y[order], starts)  # whole numbers: exact in blocks too
        assert auc == classification.roc_auc_sorted(y[order], starts, blocked.pos_g) or math.isnan(auc)
        ap = classification.ap_sorted(y[order][::-1], reversed_starts(starts, n))
        with pytest.MonkeyPatch.context() as one:
            one.setattr(kernels, "BLOCK", 1 << 20)
            assert auc == classification.roc_auc_sorted(y[order], starts) or math.isnan(auc)
            assert ap == pytest.approx(
                classification.ap_sorted(y[order][::-1], reversed_starts(starts, n)), rel=1e-12, nan_ok=True
            )
        if y.any() and not y.all():
            want = analytic.auc_groups(whole, False).sum_sq()
            assert analytic.auc_sum_sq(blocked) == pytest.approx(want, rel=1e-12)
        if y.any():
            rev = analytic.Ranked(y, order[::-1], reversed_starts(starts, n))
            want = analytic.ap_groups(back, False).sum_sq()
            assert analytic.ap_sum_sq(rev) == pytest.approx(want, rel=1e-12, abs=1e-300)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 300),
    digits=st.sampled_from([1, 2, 0]),
    block=st.integers(1, 9),
)
def test_the_reversed_reading_equals_a_ranked_of_the_reversed_order(seed, n, digits, block):
    """A Ranked read in reverse (no copies: blocks mirrored from the ascending one's sums and starts)
    gives, block by block and whole, the very floats of a Ranked built on the reversed order, and
    AP's value and variance from it are the same floats (#19); without ties (digits 0) the group
    sums are the flags as floats, made on use and never kept."""
    y, score, order, starts = _ranked_case(np.random.default_rng(seed), n, digits)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "BLOCK", block)
        mp.setattr(kernels, "WHOLE", 0)
        r = analytic.Ranked(y, order, starts)
        assert (r.pos_kept is None) == (starts is None)
        mirror, built = r.reversed(), analytic.Ranked(y, order[::-1], reversed_starts(starts, n))
        assert isinstance(mirror, analytic.Reversed) and mirror.groups == built.groups
        for a, b in kernels.spans(built.groups):
            assert mirror.pos_of(a, b).tobytes() == built.pos_of(a, b).tobytes()
            assert mirror.ends_of(a, b).tobytes() == built.ends_of(a, b).tobytes()
            assert mirror.negatives_of(a, b).tobytes() == built.negatives_of(a, b).tobytes()
        assert analytic.ap_sum_sq(mirror) == analytic.ap_sum_sq(built) or not y.any()
        blocks = classification._blocks_of
        want = classification.ap_sorted(built.y, built.starts, built.pos_kept)
        got = classification.ap_blocks(blocks(mirror), mirror.groups, mirror.p)
        assert got == want or (math.isnan(got) and math.isnan(want))
        assert mirror.pos_g.tobytes() == built.pos_g.tobytes()
        assert (mirror.starts is None and built.starts is None) or mirror.starts.tolist() == built.starts.tolist()
        for clustered in (False, True):  # per-item values, spread a block of groups at a time
            got_i = analytic.ap_groups(mirror, clustered).per_item()
            assert got_i.tobytes() == analytic.ap_groups(built, clustered).per_item().tobytes()
            # ... and made a block at a time without the groups' whole arrays: the same floats (one
            # block: None, the caller's whole arrays; but AUC's untied items, made in fewer arrays)
            one = len(kernels.spans(r.groups)) == 1
            got_b = analytic.ap_items(mirror, clustered)
            assert got_b is None if one else got_b.tobytes() == got_i.tobytes()
            got_a, want_auc = analytic.auc_items(r, clustered), analytic.auc_groups(r, clustered).per_item()
            untied = r.starts is None and y.any() and not y.all()
            assert got_a is None if one and not untied else got_a.tobytes() == want_auc.tobytes()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), digits=st.sampled_from([2, 3, 0]), parts=st.sampled_from([2, 7, 40]))
def test_influence_values_made_a_block_at_a_time_are_the_whole_arrays_floats(seed, digits, parts):
    """ROC-AUC's and AP's per-item influence values a block of groups at a time, centred on a value
    summed as np.sum sums the whole array (numpy's pairwise halvings, leaves of a block): the very
    floats of the whole group arrays, over many blocks and leaves, tied or not (#19)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5_000, 20_000))
    y, score, order, starts = _ranked_case(rng, n, digits)
    groups = n if starts is None else len(starts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "BLOCK", -(-groups // parts))  # that many blocks of groups
        mp.setattr(kernels, "WHOLE", 0)
        r = analytic.Ranked(y, order, starts)
        for clustered in (False, True):
            assert analytic.auc_items(r, clustered).tobytes() == analytic.auc_groups(r, clustered).per_item().tobytes()
            back = r.reversed()
            assert (
                analytic.ap_items(back, clustered).tobytes() == analytic.ap_groups(back, clustered).per_item().tobytes()
            )


def test_block_values_spread_to_their_items_are_the_same_floats():
    """Each block's influence values are spread to its items in turn: the same floats as the
    groups' per-item values, into a new array or added into a running total (a macro mean's), and
    no thread is started (metrics are pure functions; parallelism is the evaluation's)."""
    rng = np.random.default_rng(11)
    y, score, order, starts = _ranked_case(rng, 12_000, 2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "BLOCK", -(-len(starts) // 9))
        mp.setattr(kernels, "WHOLE", 0)
        r = analytic.Ranked(y, order, starts)
        alive = threading.active_count()
        for clustered in (False, True):
            want = analytic.auc_groups(r, clustered).per_item()
            assert analytic.auc_items(r, clustered).tobytes() == want.tobytes()
            total = np.linspace(-1.0, 1.0, len(y))
            into = total.copy()
            assert analytic.auc_items(r, clustered, into) is into
            assert into.tobytes() == (total + want).tobytes()
            back = r.reversed()
            assert (
                analytic.ap_items(back, clustered).tobytes() == analytic.ap_groups(back, clustered).per_item().tobytes()
            )
        assert threading.active_count() == alive


def test_pairwise_sum_is_numpys_sum_bit_for_bit():
    """np.sum of a whole array, from ranges of it asked for in order (any leaf size)."""
    rng = np.random.default_rng(8)
    for n in (0, 1, 7, 128, 129, 1000, 65_537, 300_001):
        x = rng.normal(size=n) * 10.0 ** rng.integers(-6, 6, n)
        asked = []

        def values(a, b, x=x, asked=asked):
            asked.append((a, b))
            return x[a:b]

        for leaf in (1, 130, 4096, None):
            asked.clear()
            assert kernels.pairwise_sum(values, n, leaf) == np.sum(x)
            assert [a for a, _ in asked] == [0, *[b for _, b in asked[:-1]]][: len(asked)]  # in order


def test_cell_sums_are_bincounts_bit_for_bit():
    """The cells' sums a block at a time (ECE's bins, the bin-cell bootstrap's cells) are bincount's
    floats, for narrow and wide cell types."""
    rng = np.random.default_rng(3)
    n = 3 * kernels.ELEMENT_BLOCK + 17
    values = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n)
    for dtype in (np.uint8, np.uint16, np.int64):
        cells = rng.integers(0, 40, n).astype(dtype)
        got = kernels.cell_sums(cells, lambda a, b: values[a:b], 45)
        assert got.tobytes() == np.bincount(cells, weights=values, minlength=45).tobytes()


def _tie_starts_list(values: np.ndarray, whole: bool = False) -> list[int] | None:
    """tie_starts (written block by block) as a list, or (``whole``) from one pass of numpy."""
    if whole:
        if len(values) < 2 or np.count_nonzero(values[1:] != values[:-1]) == len(values) - 1:
            return None
        return [0, *(np.flatnonzero(values[1:] != values[:-1]) + 1).tolist()]
    found = tie_starts(values)
    return None if found is None else found.tolist()


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 3_000), clustered=st.booleans())
def test_untied_items_in_one_block_are_the_groups_per_item_values(seed, n, clustered):
    """Items no two of which tie, in one block, make their DeLong values in fewer arrays (#19): the
    very floats of auc_groups(...).per_item(), alone or added into a running total; tied scores,
    or a class with no positives or no negatives, keep the groups' path (None)."""
    rng = np.random.default_rng(seed)
    y, score, order, starts = _ranked_case(rng, n, 0)
    r = analytic.Ranked(y, order, starts)
    if starts is not None or not y.any() or y.all():
        assert analytic.auc_items(r, clustered) is None
        return
    want = analytic.auc_groups(r, clustered).per_item()
    assert analytic.auc_items(r, clustered).tobytes() == want.tobytes()
    total = rng.normal(size=n)
    expected = total + want
    assert analytic.auc_items(r, clustered, total) is total
    assert total.tobytes() == expected.tobytes()
    tied = analytic.Ranked(y, order, np.arange(0, n, 2))  # a tie in every pair: the groups' path
    assert analytic.auc_items(tied, clustered) is None
