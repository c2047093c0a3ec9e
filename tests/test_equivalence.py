"""Non-inferiority and equivalence (TOST) tests of compare (#45, item 2).

The bounds are the ends of the 1 - 2 alpha interval by compare's own procedure and seed; the
simulations (marked slow) measure the type I error at the margin and the power away from it, with R
replications and the Monte Carlo SE sqrt(p (1 - p) / R) stated in each test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from stats_simulation import mc_se

from labledger.analysis.comparison import compare
from labledger.analysis.intervals import diff_interval, margin_test
from labledger.errors import MetricInputError
from labledger.metrics import prepare
from labledger.metrics.stats import t_sf

ALPHA = 0.05


def _paired(rng, n, q_a, q_b, both=0.5):
    """gold (all 1) and 0/1 predictions of A and B on ``n`` items: A right and B wrong with
    probability ``q_a``, the reverse with ``q_b``, else both right (``both``) or both wrong; the
    true difference of accuracies is ``q_a - q_b``."""
    u = rng.random(n)
    same = (rng.random(n) < both).astype(int)
    a, b = same.copy(), same.copy()
    a[u < q_a], b[u < q_a] = 1, 0
    other = (u >= q_a) & (u < q_a + q_b)
    a[other], b[other] = 0, 1
    return np.ones(n, dtype=int), a, b


def _test(gold, a, b, test, margin, *, groups=None, seed=0, resamples=500, metric="accuracy", higher=True):
    pa, pb = prepare(metric, gold=gold, pred=a), prepare(metric, gold=gold, pred=b)
    return margin_test(
        pa,
        pb,
        test=test,
        margin=margin,
        alpha=ALPHA,
        higher_is_better=higher,
        resamples=resamples,
        seed=seed,
        paired=True,
        groups=groups,
    )


# -- the bounds are compare's interval at 1 - 2 alpha --------------------------------------------


def test_bounds_are_the_comparisons_own_interval_at_one_minus_two_alpha():
    gold, a, b = _paired(np.random.default_rng(0), 300, 0.06, 0.09)
    pa, pb = prepare("accuracy", gold=gold, pred=a), prepare("accuracy", gold=gold, pred=b)
    got = margin_test(
        pa, pb, test="equivalence", margin=0.1, alpha=ALPHA, higher_is_better=True, resamples=800, seed=7, paired=True
    )
    ref = diff_interval(pa, pb, ci=0.9, resamples=800, seed=7, paired=True)
    assert (got["low"], got["high"], got["diff"], got["level"]) == (ref.low, ref.high, ref.diff, 0.9)
    assert got["resamples"] == 800 and got["n"] == 300 and "percentile bootstrap" in got["method"]
    # the 90% interval sits inside the 95% one
    wide = diff_interval(pa, pb, ci=0.95, resamples=800, seed=7, paired=True)
    assert wide.low <= got["low"] <= got["high"] <= wide.high


def test_non_inferiority_decides_by_the_lower_bound_and_mirrors_for_lower_is_better():
    gold, a, b = _paired(np.random.default_rng(1), 400, 0.05, 0.07)
    t = _test(gold, a, b, "non-inferiority", 0.05)
    assert t["passed"] is (t["low"] > -0.05)
    assert (t["p_value"] < ALPHA) is t["passed"]
    assert "H0: A - B <= -0.05" in t["hypothesis"]
    # a lower-is-better metric: H0 is A - B >= margin, decided by the upper bound
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 400)
    s_a = np.clip(y * 0.6 + 0.2 + rng.normal(0, 0.2, 400), 0.01, 0.99)
    s_b = np.clip(s_a + rng.normal(0.01, 0.05, 400), 0.01, 0.99)
    pa, pb = prepare("brier", gold=y, score=s_a), prepare("brier", gold=y, score=s_b)
    lower = margin_test(
        pa,
        pb,
        test="non-inferiority",
        margin=0.02,
        alpha=ALPHA,
        higher_is_better=False,
        resamples=500,
        seed=0,
        paired=True,
    )
    assert "H0: A - B >= 0.02" in lower["hypothesis"]
    assert lower["passed"] is (lower["high"] < 0.02)
    far = margin_test(
        pb,
        pa,
        test="non-inferiority",
        margin=1e-4,
        alpha=ALPHA,
        higher_is_better=False,
        resamples=500,
        seed=0,
        paired=True,
    )
    assert far["passed"] is False and far["p_value"] > 0.5


def test_a_bound_on_the_margin_up_to_float_rounding_keeps_h0():
    # every resampled difference is a multiple of 1/120: the 95% quantile can be 6/120 = 0.05 exactly,
    # or 0.049999999999999996 after subtraction; neither rejects H0: A - B >= 0.05
    gold, a, b = np.ones(120, dtype=int), np.ones(120, dtype=int), np.ones(120, dtype=int)
    a[:3] = 0
    b[3:12] = 0  # A - B = 6/120 = 0.05 exactly in value
    t = _test(gold, a, b, "equivalence", 0.05, resamples=1000)
    assert t["passed"] is False and t["p_value"] >= ALPHA


def test_analytic_path_bounds_and_p_value_agree_at_large_n():
    """From 10,000 items a mean's paired difference is analytic (t on n - 1 df): the one-sided p is
    P(T >= (diff + M) / se), and it is below alpha exactly when the lower bound is above -M."""
    rng = np.random.default_rng(3)
    n = 12_000
    y = rng.integers(0, 2, n)
    s_a = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.15, n), 0.001, 0.999)
    s_b = np.clip(s_a + rng.normal(0.004, 0.03, n), 0.001, 0.999)
    pa, pb = prepare("log_loss", gold=y, score=s_a), prepare("log_loss", gold=y, score=s_b)
    for margin in (0.002, 0.005, 0.02):
        t = margin_test(
            pa,
            pb,
            test="non-inferiority",
            margin=margin,
            alpha=ALPHA,
            higher_is_better=False,
            resamples=1000,
            seed=0,
            paired=True,
        )
        assert t["resamples"] == 0 and t["method"].startswith("analytic, paired")
        ref = diff_interval(pa, pb, ci=0.9, resamples=1000, seed=0, paired=True)
        assert t["p_value"] == pytest.approx(t_sf((margin - ref.diff) / ref.se, n - 1), rel=1e-9)
        assert t["passed"] is (t["high"] < margin) is (t["p_value"] < ALPHA)


def test_too_few_clusters_leave_the_test_undecided():
    gold = np.ones(30, dtype=int)
    a = np.ones(30, dtype=int)
    groups = np.repeat(np.arange(3), 10)
    t = _test(gold, a, a.copy(), "non-inferiority", 0.01, groups=groups)
    assert t["passed"] is None and t["p_value"] is None and t["note"] == "too few clusters"


def test_bad_margins_and_levels_are_refused_before_reading():
    for kwargs in ({"margin": -0.01}, {"margin": 0}, {"equivalence": math.nan}, {"margin": 0.01, "alpha": 0.5}):
        with pytest.raises(MetricInputError):
            compare("no-such-a.jsonl", "no-such-b.jsonl", **kwargs)


def test_compare_adds_margin_tests_and_adjusts_them_as_one_family():
    gold = ["y", "n"] * 60
    rows = lambda miss: [  # noqa: E731
        {"id": i, "task": "t", "gold": g, "pred": g if i % miss else "?"} for i, g in enumerate(gold)
    ]
    doc = compare(rows(10), rows(12), margin=0.1, equivalence=0.1, resamples=400).doc
    tests = doc.tasks["t"].margin_tests
    assert [t.test for t in tests] == ["non-inferiority", "equivalence"]
    assert doc.margin_family == "2 tests, Holm"
    ps = sorted(t.p_value for t in tests)
    assert sorted(t.p_adjusted for t in tests) == pytest.approx([min(1, 2 * ps[0]), max(2 * ps[0], ps[1])])
    entry = doc.tasks["t"].metrics[0]
    assert tests[0].diff == entry.diff and tests[0].n == entry.n == 120
    assert compare(rows(10), rows(12), resamples=100).doc.tasks["t"].margin_tests is None


# -- the CLI on real predictions -----------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_results(tmp_path_factory):
    """results.jsonl of a logistic regression on scikit-learn's digits (test split), and of the
    same model with its coefficients rounded to one decimal (a "quantized" copy)."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x / 16.0, y, test_size=0.5, random_state=0)
    full = LogisticRegression(max_iter=2000).fit(x_tr, y_tr)
    quant = LogisticRegression(max_iter=2000).fit(x_tr, y_tr)
    quant.coef_ = np.round(quant.coef_, 1)
    root = tmp_path_factory.mktemp("digits")
    paths = {}
    for name, model in (("full", full), ("quant", quant)):
        probs = model.predict_proba(x_te)
        path = root / f"{name}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "id": f"d{i}",
                        "task": "digits",
                        "gold": str(int(g)),
                        "probs": {str(int(c)): float(p) for c, p in zip(model.classes_, row)},
                    }
                )
                + "\n"
                for i, (g, row) in enumerate(zip(y_te, probs))
            )
        )
        paths[name] = path
    return paths


def _labledger(*args):
    return subprocess.run(
        [sys.executable, "-m", "labledger", *args], capture_output=True, text=True, env=None, check=False
    )


def test_cli_compare_margin_on_digits(digits_results):
    q, f = str(digits_results["quant"]), str(digits_results["full"])
    res = _labledger("compare", q, f, "--metric", "accuracy", "--margin", "0.02", "--equivalence", "0.02", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    body = doc["tasks"]["digits"]
    entry, (ni, eq) = body["metrics"][0], body["margin_tests"]
    assert body["n"] == 899 and ni["n"] == 899
    assert ni["test"] == "non-inferiority" and eq["test"] == "equivalence"
    assert ni["diff"] == entry["diff"] and abs(entry["diff"]) < 0.02
    # the decision is the bound against the margin, the interval the comparison's procedure at 90%
    assert ni["passed"] is (ni["low"] > -0.02) and eq["passed"] is (eq["low"] > -0.02 and eq["high"] < 0.02)
    assert entry["ci_low"] <= ni["low"] <= ni["high"] <= entry["ci_high"]
    assert doc["margin_family"] == "2 tests, Holm"
    table = _labledger("compare", q, f, "--metric", "accuracy", "--margin", "0.02")
    assert table.returncode == 0, table.stderr
    out = " ".join(table.stdout.split())
    assert "margin tests (A against B)" in out and "lower 95% bound" in out
    assert ("non-inferior" if ni["passed"] else "not shown non-inferior") in out
    assert "H0: A - B <= -0.02" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--margin", "-0.01"], "--margin"),
        (["--equivalence", "0"], "--equivalence"),
        (["--margin", "0.01", "--alpha", "0.6"], "--alpha"),
    ],
)
def test_cli_bad_margin_is_a_usage_error(digits_results, args, message):
    res = _labledger("compare", str(digits_results["quant"]), str(digits_results["full"]), *args)
    assert res.returncode == 2 and message in res.stderr


# -- type I error at the margin and power away from it (simulation) ------------------------------


def _rate(r, n, q_a, q_b, test, margin, *, seed, groups=None, spread=0.0, use_groups=True):
    """The share of ``r`` simulated data sets on which the test rejects H0 (``passed``). With
    ``groups``: each cluster's difference of discordance shares is ``q_a - q_b + u``, ``u`` uniform
    on (-spread, spread), their sum fixed (no clipping, so the true difference stays ``q_a - q_b``)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for k in range(r):
        if groups is None:
            gold, a, b = _paired(rng, n, q_a, q_b)
        else:
            clusters = int(groups.max()) + 1
            u = np.repeat(rng.uniform(-spread, spread, clusters), n // clusters)
            qa, qb = q_a + u / 2, q_b - u / 2
            draw = rng.random(n)
            same = (rng.random(n) < 0.5).astype(int)
            a, b = same.copy(), same.copy()
            a[draw < qa], b[draw < qa] = 1, 0
            other = (draw >= qa) & (draw < qa + qb)
            a[other], b[other] = 0, 1
            gold = np.ones(n, dtype=int)
        t = _test(gold, a, b, test, margin, groups=groups if use_groups else None, seed=k, resamples=400)
        hits += bool(t["passed"])
    return hits / r


@pytest.mark.slow
def test_non_inferiority_type_i_error_at_the_margin_and_power():
    r = 1000  # MC se at 0.05: 0.0069
    at_margin = _rate(r, 200, 0.05, 0.10, "non-inferiority", 0.05, seed=11)  # true A - B = -0.05
    assert at_margin <= ALPHA + 3 * mc_se(ALPHA, r), at_margin
    assert at_margin >= 0.02, at_margin  # not a test that never rejects
    power = _rate(400, 400, 0.08, 0.08, "non-inferiority", 0.05, seed=12)  # true A - B = 0, n = 400
    assert power >= 0.65, power  # normal approximation: 0.80


@pytest.mark.slow
def test_equivalence_type_i_error_at_the_margin_and_power():
    r = 1000  # MC se at 0.05: 0.0069
    at_margin = _rate(r, 400, 0.10, 0.05, "equivalence", 0.05, seed=21)  # true A - B = +0.05
    assert at_margin <= ALPHA + 3 * mc_se(ALPHA, r), at_margin
    power = _rate(400, 600, 0.075, 0.075, "equivalence", 0.05, seed=22)  # true A - B = 0, n = 600
    assert power >= 0.75, power  # normal approximation: 0.89


@pytest.mark.slow
def test_clustered_non_inferiority_holds_its_level_only_with_clusters():
    """Discordance that varies by cluster: the cluster bootstrap keeps the level at the margin; the
    same test on items (clusters ignored) rejects far more often (so this check can fail)."""
    r = 600  # MC se at 0.05: 0.0089
    groups = np.repeat(np.arange(60), 15)
    kw = dict(groups=groups, spread=0.3, seed=31)
    clustered = _rate(r, 900, 0.2, 0.25, "non-inferiority", 0.05, **kw)  # true A - B = -0.05
    items = _rate(r, 900, 0.2, 0.25, "non-inferiority", 0.05, use_groups=False, **kw)
    assert clustered <= ALPHA + 3 * mc_se(ALPHA, r), clustered
    assert items > ALPHA + 3 * mc_se(ALPHA, r), items


# -- diff says which p is adjusted, as compare does ----------------------------------------------


def test_diff_prints_the_unadjusted_p_beside_the_ci_and_the_adjusted_one_labelled(tmp_path):
    from click.testing import CliRunner

    import labledger
    from labledger.cli import main

    for flip in (2, 3):
        with labledger.start_run(f"r{flip}", ledger=tmp_path) as run:
            run.log_results(
                "test",
                [{"id": f"x{i}", "task": "t", "gold": i % 2, "pred": int(i % flip == 0)} for i in range(60)],
            )
    res = CliRunner().invoke(main, ["diff", "r2", "r3", "--ledger", str(tmp_path), "--json", "--resamples", "200"])
    assert res.exit_code == 0, res.output
    (cmp,) = json.loads(res.output)["comparisons"]
    assert cmp["adjust"] == "holm" and cmp["family"].endswith("Holm")
    rows = cmp["metrics"]
    assert len(rows) > 1 and all(r["p_adjusted"] >= r["p"] for r in rows)
    table = CliRunner().invoke(main, ["diff", "r2", "r3", "--ledger", str(tmp_path), "--resamples", "200"])
    text = " ".join(table.output.split())
    assert "p (holm)" in text and "95% CI and p per comparison (unadjusted)" in text


def test_unpaired_bounds_and_p_use_the_unpaired_bootstraps_draws():
    rng = np.random.default_rng(5)
    pa = prepare("accuracy", gold=np.ones(150, dtype=int), pred=(rng.random(150) < 0.8).astype(int))
    pb = prepare("accuracy", gold=np.ones(200, dtype=int), pred=(rng.random(200) < 0.78).astype(int))
    kw = dict(resamples=600, seed=3, paired=False)
    t = margin_test(pa, pb, test="non-inferiority", margin=0.05, alpha=ALPHA, higher_is_better=True, **kw)
    ref = diff_interval(pa, pb, ci=0.9, **kw)
    assert (t["low"], t["high"]) == (ref.low, ref.high) and t["method"].startswith("unpaired")
    assert (t["p_value"] < ALPHA) is t["passed"]


def test_no_resamples_leave_every_margin_test_undecided():
    gold = ["y", "n"] * 30
    rows = [{"id": i, "task": "t", "gold": g, "pred": g} for i, g in enumerate(gold)]
    doc = compare(rows, rows, margin=0.1, resamples=0).doc
    (t,) = doc.tasks["t"].margin_tests
    assert t.passed is None and t.p_value is None and t.note.startswith("no interval")
    assert doc.margin_family is None


def test_clustered_analytic_bounds_use_the_cluster_robust_se_on_c_minus_1_df():
    rng = np.random.default_rng(9)
    clusters, size = 120, 100
    groups = np.repeat(np.arange(clusters), size)
    y = rng.integers(0, 2, clusters * size)
    shift = np.repeat(rng.normal(0, 0.1, clusters), size)
    s_a = np.clip(0.3 + 0.4 * y + shift + rng.normal(0, 0.1, y.size), 0.001, 0.999)
    s_b = np.clip(s_a + np.repeat(rng.normal(0.003, 0.02, clusters), size), 0.001, 0.999)
    pa, pb = prepare("brier", gold=y, score=s_a), prepare("brier", gold=y, score=s_b)
    kw = dict(resamples=1000, seed=0, paired=True, groups=groups)
    t = margin_test(pa, pb, test="equivalence", margin=0.01, alpha=ALPHA, higher_is_better=False, **kw)
    ref = diff_interval(pa, pb, ci=0.9, **kw)
    assert "cluster-robust" in t["method"] and t["clusters"] == clusters and t["resamples"] == 0
    assert (t["low"], t["high"]) == (ref.low, ref.high)
    p_low, p_high = (t_sf((0.01 + s * ref.diff) / ref.se, clusters - 1) for s in (1, -1))
    assert t["p_value"] == pytest.approx(max(p_low, p_high), rel=1e-9)
