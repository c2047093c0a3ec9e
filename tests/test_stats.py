"""labledger.metrics.stats and its wiring: p-values consistent with intervals, clustered tests,
analytic intervals, few-cluster warnings, multiplicity, power, seeds, repeats, pos_label (#16)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import labledger
from labledger.analysis.benchmarks import Entry, version_table
from labledger.analysis.evaluation import compare, evaluate
from labledger.cli import main
from labledger.errors import MetricInputError, UnknownNameError
from labledger.metrics import f1, paired_bootstrap, prepare
from labledger.metrics import stats as S

INSPECT = ([0, 1, 0.5, 0, 1, 0], ["p1", "p1", "p2", "p2", "p3", "p3"])


# -- p-values -------------------------------------------------------------------------------------


def test_percentile_p_agrees_with_the_percentile_interval():
    rng = np.random.default_rng(0)
    agree = 0
    for j in range(200):
        gold = np.ones(200, dtype=int)
        a = (rng.random(200) < 0.8).astype(int)
        b = np.where(rng.random(200) < 0.85, a, 1 - a)
        r = paired_bootstrap(prepare("accuracy", gold=gold, pred=a), prepare("accuracy", gold=gold, pred=b), seed=j)
        agree += (r.p_value < 0.05) == (r.low > 0 or r.high < 0)
    assert agree >= 198  # disagreement only within 1/B of the boundary


def test_percentile_p_bounds():
    assert S.percentile_p_value([]) is None
    assert S.percentile_p_value([0.0] * 99) == 1.0
    assert S.percentile_p_value([1.0] * 999) == pytest.approx(0.002)


# -- clustered McNemar and the item McNemar --------------------------------------------------------


def test_clustered_mcnemar_reduces_to_uncorrected_mcnemar_with_one_item_per_cluster():
    rng = np.random.default_rng(1)
    a, b = rng.random(300) < 0.7, rng.random(300) < 0.6
    r = S.clustered_mcnemar(correct_a=a, correct_b=b, groups=np.arange(300))
    bb, cc = int((a & ~b).sum()), int((~a & b).sum())
    assert r["statistic"] == pytest.approx((bb - cc) ** 2 / (bb + cc))
    assert r["clusters"] == 300 and "Durkalski" in r["method"]


def test_no_discordance_gives_p_1():
    r = S.clustered_mcnemar(correct_a=[1, 0], correct_b=[1, 0], groups=[0, 1])
    assert r["p_value"] == 1.0 and r["statistic"] is None


def _rows(pred, groups=None):
    return [
        {"id": str(i), "task": "t", "gold": "y", "pred": p, **({"group": str(groups[i])} if groups is not None else {})}
        for i, p in enumerate(pred)
    ]


def test_compare_uses_the_clustered_mcnemar_when_rows_carry_group():
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(40), 5)
    pa = np.where(rng.random(200) < 0.8, "y", "n")
    pb = np.where(rng.random(200) < 0.7, "y", "n")
    doc = compare(_rows(pa, groups), _rows(pb, groups), metrics=["accuracy"], resamples=200).to_dict()
    mc = doc["tasks"]["t"]["metrics"][0]["mcnemar"]
    assert "clustered" in mc["method"] and mc["clusters"] == 40
    doc = compare(_rows(pa), _rows(pb), metrics=["accuracy"], resamples=200).to_dict()
    mc = doc["tasks"]["t"]["metrics"][0]["mcnemar"]
    assert "clustered" not in mc["method"] and "clusters" not in mc


def test_item_mcnemar_is_exact_below_25_discordant_pairs():
    from labledger.metrics import mcnemar

    assert mcnemar(correct_a=[1] * 10 + [0] * 30, correct_b=[0] * 10 + [0] * 30)["method"].startswith("exact")


# -- analytic intervals ---------------------------------------------------------------------------


def test_inspect_ai_cluster_se_vector():
    assert S.cluster_robust_se(*INSPECT) == pytest.approx(0.0833333, abs=1e-6)
    assert S.cluster_robust_se(*INSPECT, small_sample=False) == pytest.approx(0.0680414, abs=1e-6)
    r = S.mean_interval(INSPECT[0], groups=INSPECT[1])
    t = 4.302652729911275  # t_{0.975, 2}
    assert r["low"] == pytest.approx(5 / 12 - t * 1 / 12) and r["df"] == 2 and "CR1" in r["method"]


def test_clt_and_wilson_vectors():
    # lighteval tiny_mc: acc 0.6 over 5 -> binary SE 0.21909 (population form), lm-eval's n-1 form 0.24495
    r = S.mean_interval([1, 1, 1, 0, 0])
    assert r["method"] == "Wilson score interval" and r["se"] == pytest.approx(math.sqrt(0.24 / 5))
    r = S.mean_interval([0.5, 1.0, 0.25, 0.75])
    assert r["se"] == pytest.approx(np.std([0.5, 1.0, 0.25, 0.75], ddof=1) / 2)


def test_evaluate_stores_the_analytic_interval_and_the_warning():
    groups = np.repeat(np.arange(10), 10)
    pred = np.where(np.arange(100) % 4 == 0, "n", "y")
    doc = evaluate(_rows(pred, groups), metrics=["accuracy"], resamples=200).to_dict()
    e = doc["tasks"]["t"]["metrics"][0]
    assert e["analytic"]["method"].startswith("cluster-robust") and e["analytic"]["df"] == 9
    assert e["warning"].startswith("10 clusters: intervals are approximate; coverage in simulation")
    doc = evaluate(_rows(pred), metrics=["accuracy", "f1"], resamples=200).to_dict()
    by = {e["metric"]: e for e in doc["tasks"]["t"]["metrics"]}
    acc, f1e = by["accuracy"], by["f1"]
    assert acc["analytic"]["method"] == "Wilson score interval" and "warning" not in acc
    assert "analytic" not in f1e


def test_a_zero_width_interval_from_3_clusters_is_refused():
    # numbers.md's few_clusters.jsonl: 3 clusters of 10 items, each 7/10 correct
    pred = np.array((["y"] * 7 + ["n"] * 3) * 3)
    doc = evaluate(_rows(pred, np.repeat(np.arange(3), 10)), metrics=["accuracy"], resamples=200).to_dict()
    e = doc["tasks"]["t"]["metrics"][0]
    assert e["ci_low"] is None and e["ci_high"] is None and e["interval_note"] == "too few clusters"
    assert e["warning"].startswith("3 clusters")


def test_small_n_warning_without_clusters():
    note = S.coverage_note(20, clusters=False)
    assert note.startswith("20 items: intervals are approximate")
    assert S.coverage_note(30, clusters=False) is None and S.coverage_note(None, clusters=True) is None


# -- multiplicity ---------------------------------------------------------------------------------


def test_holm_and_bh_against_statsmodels_formulae():
    p = [0.001, 0.01, 0.02, 0.03, 0.2, 0.5]
    # Holm: max over i <= j of (m - i + 1) p_(i); BH: min over i >= j of m p_(i) / i
    assert S.adjust_p(p, "holm") == pytest.approx([0.006, 0.05, 0.08, 0.09, 0.4, 0.5])
    assert S.adjust_p(p, "bh") == pytest.approx([0.006, 0.03, 0.04, 0.045, 0.24, 0.5])
    assert S.adjust_p(p, "none") == p
    with pytest.raises(UnknownNameError):
        S.adjust_p(p, "bonf")


def _entries(pvals):
    out = []
    for i, _ in enumerate(pvals):
        for model, v in (("base", 0.5), ("new", 0.52)):
            out.append(
                Entry(model=model, suite="s", benchmark=f"b{i}", category="c", metric="accuracy", params={}, value=v)
            )
    return out


def test_version_table_marks_use_the_adjusted_p():
    pvals = {f"b{i}": p for i, p in enumerate([0.01, 0.02, 0.03, 0.04])}

    def test(a, b):
        return {"ci_low": 0.001, "ci_high": 0.04, "p_value": pvals[a.benchmark], "mde": 0.05}

    t = version_table(_entries(pvals), suite="s", models=["base", "new"], delta_from="base", paired_test=test)
    doc = t.to_dict()
    assert doc["family"] == "4 tests, Holm" and doc["adjust"] == "holm"
    assert [r["p_adjusted"] for r in doc["rows"]] == pytest.approx([0.04, 0.06, 0.06, 0.06])
    assert [r["significance"] for r in doc["rows"]] == ["significant"] + ["not significant"] * 3
    assert [r["p_value"] for r in doc["rows"]] == [0.01, 0.02, 0.03, 0.04]
    assert "n.s. (MDE 5.0 pp)" in t.to_markdown()
    t = version_table(
        _entries(pvals), suite="s", models=["base", "new"], delta_from="base", paired_test=test, adjust="none"
    )
    assert all(r["significance"] == "significant" for r in t.rows)


def test_compare_adjusts_over_its_family():
    rng = np.random.default_rng(3)
    pa = np.where(rng.random(200) < 0.8, "y", "n")
    pb = np.where(rng.random(200) < 0.75, "y", "n")
    doc = compare(_rows(pa), _rows(pb), metrics=["accuracy", "exact_match"], resamples=200, adjust="holm").to_dict()
    es = doc["tasks"]["t"]["metrics"]
    assert doc["family"] == "2 tests, Holm"
    assert all(e["p_adjusted"] >= e["p_value"] for e in es)
    assert all(e["mde"] > 0 and e["se"] > 0 for e in es)


# -- power ----------------------------------------------------------------------------------------


def test_miller_power_vectors():
    assert S.n_for_delta(0.1684, 0.03) == 1469
    assert S.n_for_delta(0.1684, 0.05) == 529
    assert S.mde(0.1684, 529) == pytest.approx(0.05, abs=1e-4)
    assert S.power_at(0.05, 0.1684, 529) == pytest.approx(0.8, abs=1e-3)


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["--omega2", "0.1684", "--delta", "0.03"], 0, "n = 1,469 items"),
        (["--omega2", "0.1684", "--delta", "0.05"], 0, "n = 529 items"),
        (["--baseline", "0.8", "--correlation", "0.6", "--n", "1000"], 0, "MDE = 0.0317 (3.2 pp)"),
        (["--omega2", "0.1684"], 2, "give exactly one of --delta"),
        (["--delta", "0.03"], 1, "omega^2 needs one of"),
    ],
)
def test_power_cli(args, code, expected):
    res = CliRunner().invoke(main, ["power", *args])
    assert res.exit_code == code, res.output
    assert expected in res.output


def test_power_from_two_result_sets(tmp_path):
    rng = np.random.default_rng(4)
    z = rng.standard_normal(500)
    a = np.where(z + rng.standard_normal(500) > -1, "y", "n")
    b = np.where(z + rng.standard_normal(500) > -0.8, "y", "n")
    for name, pred in (("a", a), ("b", b)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(pred)))
    res = CliRunner().invoke(
        main,
        [
            "power",
            "--results",
            str(tmp_path / "a.jsonl"),
            "--results-b",
            str(tmp_path / "b.jsonl"),
            "--delta",
            "0.03",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    d = (a == "y").astype(float) - (b == "y").astype(float)
    assert doc["omega2"] == pytest.approx(d.var(ddof=1))
    assert doc["n"] == S.n_for_delta(d.var(ddof=1), 0.03)


# -- seeds and repeats ----------------------------------------------------------------------------


def test_seed_intervals():
    r = S.seed_t_interval([0.70, 0.72, 0.71])
    assert r["low"] == pytest.approx(0.71 - 4.302652729911275 * 0.01 / math.sqrt(3))
    x = (np.random.default_rng(5).random((6, 300)) < 0.7).astype(float)
    r = S.seed_group_interval(x)
    assert r["n_seeds"] == 6 and r["n_items"] == 300 and r["low"] < x.mean() < r["high"]
    r = S.compare_seed_groups(x, x, paired=True)
    assert r["diff"] == 0 and r["p_value"] == pytest.approx(1.0)
    with pytest.raises(MetricInputError):
        S.compare_seed_groups(x, x[:, :10], paired=True)


def test_reduce_repeats_keeps_k_n_and_the_decomposition():
    items = ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    vals = [1, 1, 0, 0, 0, 0, 1, 1, 1]
    r = S.reduce_repeats(items, vals)
    assert r["values"].tolist() == pytest.approx([2 / 3, 0, 1]) and r["k"] == 3 and r["n"] == 3
    assert r["within"] == pytest.approx(np.mean([np.var([1, 1, 0], ddof=1), 0, 0]))
    assert r["between"] == pytest.approx(np.var([2 / 3, 0, 1], ddof=1))
    assert S.reduce_repeats(items, vals, how="max")["values"].tolist() == [1, 0, 1]


# -- pos_label ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "kw"),
    [
        ("f1", {"pred": [0, 1, 1, 0]}),
        ("precision", {"pred": [0, 1, 1, 0]}),
        ("recall", {"pred": [0, 1, 1, 0]}),
        ("average_precision", {"score": [0.1, 0.9, 0.8, 0.2]}),
        ("roc_auc", {"score": [0.1, 0.9, 0.8, 0.2]}),
        ("brier", {"score": [0.1, 0.9, 0.8, 0.2]}),
        ("log_loss", {"score": [0.1, 0.9, 0.8, 0.2]}),
    ],
)
def test_a_pos_label_that_is_not_a_label_is_refused(fn, kw):
    with pytest.raises(MetricInputError, match="pos_label 2 is not a label"):
        getattr(labledger.metrics, fn)(gold=[0, 1, 1, 0], pos_label=2, **kw)


def test_pos_label_absent_from_one_label_data_is_still_allowed():
    assert f1(gold=[0, 0], pred=[0, 0], pos_label=1, average="binary") == 0.0


# -- compare-groups: seeds ------------------------------------------------------------------------


def test_compare_groups_gives_two_level_seed_intervals(tmp_path):
    from labledger.analysis.groups import compare_groups

    rng = np.random.default_rng(8)
    difficulty = rng.standard_normal(150)
    for group, shift in (("base", 0.0), ("new", 0.6)):
        for s in range(4):
            right = 0.5 + shift + difficulty + rng.normal(0, 0.1) + rng.standard_normal(150) > 0
            rows = [{"id": f"i{i}", "task": "t", "gold": "y", "pred": "y" if r else "n"} for i, r in enumerate(right)]
            with labledger.start_run(f"{group}-s{s}", group=group, ledger=tmp_path) as run:
                run.log_results("test", rows)
            with labledger.start_run(f"{group}-rec{s}", group=f"rec-{group}", ledger=tmp_path) as run:
                run.log_history({"epoch": 1, "accuracy": float(right.mean())})
    res = compare_groups(labledger.open_ledger(tmp_path), baseline="base", groups=["new"], metrics=["accuracy"])
    by = {s["group"]: s for s in res.summary}
    iv = by["new"]["interval"]
    assert iv["n_seeds"] == 4 and iv["n_items"] == 150 and iv["method"].startswith("two-level bootstrap")
    assert iv["low"] < by["new"]["mean"] < iv["high"]
    d = by["new"]["diff_interval"]
    assert d["paired"] and d["low"] > 0 and d["diff"] == pytest.approx(by["new"]["diff"])
    # recorded values only: a t interval over seeds, labelled so
    led = labledger.open_ledger(tmp_path)
    res = compare_groups(led, baseline="rec-base", groups=["rec-new"], metrics=["accuracy"])
    by = {s["group"]: s for s in res.summary}
    assert by["rec-new"]["interval"]["method"] == "t interval over seeds (recorded values only)"
    assert by["rec-new"]["interval"]["n_seeds"] == 4
    assert by["rec-new"]["diff_interval"]["method"].startswith("Welch t interval")


# -- repeats --------------------------------------------------------------------------------------


def test_repeated_rows_are_reduced_per_item_before_the_interval(tmp_path):
    from labledger.analysis.repeats import evaluate_repeats

    rng = np.random.default_rng(9)
    p_item = rng.random(60)
    rows = [
        {"id": f"q{i}", "task": "t", "gold": "y", "pred": "y" if rng.random() < p_item[i] else "n", "epoch": e}
        for i in range(60)
        for e in range(4)
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    doc = evaluate_repeats(path, metrics=["exact_match"], resamples=300)
    m = doc["tasks"]["t"]["metrics"][0]
    assert doc["repeat_field"] == "epoch" and m["k"] == 4 and m["n"] == 60 and m["n_scores"] == 240
    per_item = np.array([np.mean([r["pred"] == "y" for r in rows if r["id"] == f"q{i}"]) for i in range(60)])
    assert m["value"] == pytest.approx(per_item.mean())
    assert m["between"] == pytest.approx(per_item.var(ddof=1)) and m["within"] > 0
    assert m["analytic"]["se"] == pytest.approx(per_item.std(ddof=1) / math.sqrt(60))  # n = 60 questions
    assert m["ci_low"] < m["value"] < m["ci_high"] and "per-item mean over repeats" in m["method"]
    best = evaluate_repeats(rows, metrics=["exact_match"], reduction="max", resamples=0)
    assert best["tasks"]["t"]["metrics"][0]["reduction"] == "max"


# -- the CLI shows them ---------------------------------------------------------------------------


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def grouped_files(tmp_path):
    rng = np.random.default_rng(12)
    groups = np.repeat(np.arange(3), 10)
    pred = np.array((["y"] * 7 + ["n"] * 3) * 3)
    a = _write(tmp_path / "few.jsonl", _rows(pred, groups))
    g40 = np.repeat(np.arange(40), 5)
    pa = np.where(rng.random(200) < 0.80, "y", "n")
    pb = np.where(rng.random(200) < 0.79, "y", "n")
    return a, _write(tmp_path / "a.jsonl", _rows(pa, g40)), _write(tmp_path / "b.jsonl", _rows(pb, g40))


@pytest.mark.parametrize(
    ("which", "extra", "expected"),
    [
        ("eval", [], ["too few clusters", "Warning: 3 clusters: intervals are approximate", "analytic 95% CI"]),
        ("compare", [], ["n.s. (MDE", "clustered McNemar (Durkalski et al. 2003)", "p (holm)", "1 test, Holm"]),
        ("compare", ["--adjust", "none"], ["n.s. (MDE", "no adjustment"]),
    ],
)
def test_cli_shows_the_new_statistics(grouped_files, which, extra, expected):
    few, a, b = grouped_files
    args = ["eval", few, "--metric", "accuracy"] if which == "eval" else ["compare", a, b, "--metric", "accuracy"]
    res = CliRunner().invoke(main, [*args, "--resamples", "200", *extra], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())  # the table may wrap a long temporary path, and a note with it
    for text in expected:
        assert text in shown, (text, res.output)


def test_the_distribution_functions_equal_scipy_stats():
    """metrics.stats takes its quantiles and tails from scipy.special (scipy.stats costs ~1.3 s to
    import); they are the functions scipy.stats' norm and t call."""
    from scipy import stats as st

    from labledger.metrics import stats as ls

    for q in (1e-9, 0.0005, 0.025, 0.3, 0.5, 0.8, 0.975, 0.9995):
        assert ls.norm_ppf(q) == pytest.approx(st.norm.ppf(q), rel=1e-14, abs=1e-300)
        for df in (1, 2.5, 4, 29, 1000):
            assert ls.t_ppf(q, df) == pytest.approx(st.t.ppf(q, df), rel=1e-12)
    for x in (-8.0, -1.96, 0.0, 0.7, 3.0, 12.0):
        assert ls.norm_cdf(x) == pytest.approx(st.norm.cdf(x), rel=1e-14, abs=1e-300)
        assert ls.norm_sf(x) == pytest.approx(st.norm.sf(x), rel=1e-14, abs=1e-300)
        for df in (1, 3, 30):
            assert ls.t_sf(x, df) == pytest.approx(st.t.sf(x, df), rel=1e-12, abs=1e-300)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=40),
    st.lists(st.floats(0, 1), min_size=1, max_size=4),
)
def test_quantiles_are_numpys_floats(values, qs):
    """The bootstrap intervals' quantiles (no numpy.ma import) are np.quantile's, bit for bit (but
    for the sign of a zero: 0.0 and -0.0 are equal values, which np.quantile's partition and a sort
    may place in either order)."""
    from labledger.metrics.stats import quantiles

    qs = [*qs, 0.025, 0.975, 0.0, 1.0]
    got, want = quantiles(np.array(values), qs) + 0.0, np.quantile(np.array(values), qs) + 0.0
    assert got.tobytes() == want.tobytes()
    with_nan = np.array([*values, math.nan])
    assert np.array_equal(quantiles(with_nan, qs), np.quantile(with_nan, qs), equal_nan=True)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 25), st.integers(1, 4), st.integers(0, 2**16))
def test_percentile_interval_of_columns_is_nanquantiles(rows, cols, seed):
    """Vector-valued bootstrap draws (per-class values): each column's quantiles of its non-NaN
    draws, np.nanquantile's floats, and no numpy.ma."""
    import warnings

    from labledger.metrics.resample import percentile_interval

    rng = np.random.default_rng(seed)
    draws = np.round(rng.normal(size=(rows, cols)), 1)
    draws[rng.random(draws.shape) < 0.2] = math.nan
    draws[rng.random(draws.shape) < 0.05] = math.inf
    lo, hi, _ = percentile_interval(draws, 0.9)
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        want_lo, want_hi = np.nanquantile(draws, [(1 - 0.9) / 2, (1 + 0.9) / 2], axis=0)
    assert np.array_equal(lo, want_lo, equal_nan=True) and np.array_equal(hi, want_hi, equal_nan=True)
