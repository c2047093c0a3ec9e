"""Threshold sweep, gates, selection and epoch selection (issue 3, seed 000)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    matthews_corrcoef,
    precision_score,
    recall_score,
    roc_auc_score,
)

from labledger.errors import GateError, MetricInputError, UnknownMetricError
from labledger.metrics.sweep import (
    evaluate_threshold,
    parse_gate,
    parse_thresholds,
    select_epoch,
    threshold_sweep,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:y_pred contains classes not in y_true", "ignore:A single label was found"
)

SEEDS = Path(__file__).parents[2] / "shared" / "seeds"
SEED_000 = SEEDS / "000_959264704a16aabd.txt"
NEG, POS = "single_symbol", "cross_boundary"
GATES = [f"recall[{NEG}]>=0.97", f"recall[{POS}]>=0.97"]


# ---------------------------------------------------------------------------------------------
# Seed 000: rebuild a validation set whose per-threshold counts are the seed's, then sweep it.


@pytest.fixture(scope="module")
def seed000() -> dict:
    if not SEED_000.exists():
        pytest.skip(f"seed file {SEED_000} is not available")
    return json.loads(SEED_000.read_text(encoding="utf-8"))


def _class_sizes(seed: dict) -> tuple[int, int]:
    """The (negatives, positives) split that makes every recall in the seed a whole count."""
    total = seed["validation_samples"]
    trials = seed["threshold_trials"]

    def whole(x: float) -> bool:
        return abs(x - round(x)) < 1e-6

    fits = [
        n
        for n in range(1, total)
        if all(
            whole(t[f"{NEG}_recall"] * n)
            and whole(t[f"{POS}_recall"] * (total - n))
            and abs(t["accuracy"] * total - (t[f"{NEG}_recall"] * n + t[f"{POS}_recall"] * (total - n))) < 1e-6
            for t in trials
        )
    ]
    assert len(fits) == 1, fits
    return fits[0], total - fits[0]


def _scores_for(above: list[int], grid: np.ndarray, size: int) -> np.ndarray:
    """``size`` scores such that exactly above[k] of them are >= grid[k] for every k.

    Half of each bin sits exactly on its threshold, to exercise score == threshold."""
    assert all(a >= b for a, b in itertools.pairwise(above)), "counts must fall as the threshold rises"
    edges = [*list(grid), 1.0]
    scores = [0.01] * (size - above[0])
    for k, t in enumerate(grid):
        count = above[k] - (above[k + 1] if k + 1 < len(above) else 0)
        mid = (t + edges[k + 1]) / 2 if k + 1 < len(grid) else 0.99
        scores += [t if j % 2 == 0 else mid for j in range(count)]
    return np.array(scores)


def _validation_from_seed(seed: dict, rng: np.random.Generator):
    n_neg, n_pos = _class_sizes(seed)
    trials = seed["threshold_trials"]
    grid = np.array([t["threshold"] for t in trials])
    neg_above = [n_neg - round(t[f"{NEG}_recall"] * n_neg) for t in trials]
    pos_above = [round(t[f"{POS}_recall"] * n_pos) for t in trials]
    score = np.concatenate(
        [_scores_for(neg_above, np.round(grid, 6), n_neg), _scores_for(pos_above, np.round(grid, 6), n_pos)]
    )
    gold = np.array([NEG] * n_neg + [POS] * n_pos, dtype=object)
    perm = rng.permutation(score.size)
    return gold[perm], score[perm]


def test_seed000_trials_and_selection(seed000):
    rng = np.random.default_rng(0)
    gold, score = _validation_from_seed(seed000, rng)
    report = threshold_sweep(
        gold=gold, score=score, positive=POS, negative=NEG, thresholds="0.05:0.95:0.025", gates=GATES, objective="f1"
    )
    d = report.to_dict()
    trials = seed000["threshold_trials"]
    assert len(d["threshold_trials"]) == len(trials) == 37
    for mine, theirs in zip(d["threshold_trials"], trials):
        assert mine["threshold"] == pytest.approx(theirs["threshold"], abs=1e-12)
        for key in ("accuracy", "f1", f"{NEG}_recall", f"{POS}_recall"):
            assert abs(mine[key] - theirs[key]) <= 1e-12, (mine["threshold"], key)
        assert mine["roc_auc"] == pytest.approx(roc_auc_score(gold == POS, score), abs=1e-12)
    # clean grid values, exactly the decimal grid (seed 000 printed 0.22499999999999998)
    assert d["threshold_trials"][7]["threshold"] == 0.225
    sel = d["threshold_selection"]
    expected = seed000["threshold_selection"]
    assert sel["threshold"] == expected["threshold"] == 0.7
    assert sel["recall_gate_passed"] is expected["recall_gate_passed"] is True
    for key in ("accuracy", "f1", f"{NEG}_recall", f"{POS}_recall"):
        assert abs(sel[key] - expected[key]) <= 1e-12
    assert sel["n_passing"] == 1 and sel["fallback"] is False
    assert d["n"] == seed000["validation_samples"]
    assert (d["positive"], d["negative"]) == (POS, NEG)
    assert d["gates"] == GATES and d["objective"] == "f1" and "closest to 0.5" in d["tie_break"]
    assert set(d["definition"]) >= {"accuracy", "f1", "roc_auc", f"{NEG}_recall", f"{POS}_recall"}


def test_seed000_paired_test(seed000):
    rng = np.random.default_rng(1)
    gold, score = _validation_from_seed(seed000, rng)
    paired = seed000["paired_test"]
    n_neg, n_pos = _class_sizes(seed000)
    t = paired["threshold"]
    neg_above = n_neg - round(paired[f"{NEG}_recall"] * n_neg)
    pos_above = round(paired[f"{POS}_recall"] * n_pos)
    test_score = np.concatenate(
        [
            np.where(np.arange(n_neg) < neg_above, t, t / 2),
            np.where(np.arange(n_pos) < pos_above, (1 + t) / 2, t - 0.01),
        ]
    )
    test_gold = np.array([NEG] * n_neg + [POS] * n_pos)
    report = threshold_sweep(
        gold=gold, score=score, positive=POS, negative=NEG, gates=GATES, test_gold=test_gold, test_score=test_score
    )
    got = report.to_dict()["paired_test"]
    assert got["threshold"] == 0.7
    for key in ("accuracy", "f1", f"{NEG}_recall", f"{POS}_recall"):
        assert abs(got[key] - paired[key]) <= 1e-12, key
    assert got["n"] == test_gold.size and got["recall_gate_passed"] is False  # 0.9692 < 0.97


def test_seed000_selected_epoch(seed000):
    sel = select_epoch(seed000["history"], metric="f1")
    assert sel.entry == seed000["selected"]
    assert sel.epoch == 20 and sel.tied_epochs == [20]
    low = select_epoch(seed000["history"], metric="loss", higher_is_better=False)
    assert low.epoch == 20 and "lowest loss" in low.tie_break


# ---------------------------------------------------------------------------------------------
# Against scikit-learn, threshold by threshold (random data with ties and slices)


def _sklearn_row(gold, score, t, pos, neg, slices):
    pred = np.where(score >= t, pos, neg)
    labels = [neg, pos]
    row = {
        "accuracy": accuracy_score(gold, pred),
        "f1": f1_score(gold, pred, pos_label=pos, labels=labels, zero_division=0.0),
        "precision": precision_score(gold, pred, pos_label=pos, labels=labels, zero_division=0.0),
        f"{pos}_recall": recall_score(gold, pred, pos_label=pos, labels=labels, zero_division=0.0),
        f"{neg}_recall": recall_score(gold, pred, pos_label=neg, labels=labels, zero_division=0.0),
        "balanced_accuracy": balanced_accuracy_score(gold, pred),
        "mcc": matthews_corrcoef(gold, pred),
    }
    for value in ("a", "b"):
        m = slices["part"] == value
        if m.any():
            row[f"recall[part={value}]"] = recall_score(
                gold[m], pred[m], pos_label=pos, labels=labels, zero_division=0.0
            )
            row[f"f1[{neg},part={value}]"] = f1_score(gold[m], pred[m], pos_label=neg, labels=labels, zero_division=0.0)
            row[f"accuracy[part={value}]"] = accuracy_score(gold[m], pred[m])
    return row


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(st.tuples(st.booleans(), st.integers(0, 8), st.sampled_from("ab")), min_size=2, max_size=40),
    grid=st.lists(st.integers(-1, 10), min_size=1, max_size=6),
)
def test_sweep_matches_sklearn_loop(data, grid):
    gold = np.array(["yes" if g else "no" for g, _, _ in data])
    score = np.array([s / 8 for _, s, _ in data])  # few distinct values: many ties
    part = np.array([p for _, _, p in data])
    thresholds = [t / 8 for t in grid]  # often exactly equal to scores
    gates = []
    for value in ("a", "b"):
        if (part == value).any():
            gates += [f"recall[part={value}]>=0", f"f1[no,part={value}]>=0", f"accuracy[part={value}]>=0"]
    gates += ["balanced_accuracy>=0", "mcc>=-1"]
    report = threshold_sweep(
        gold=gold, score=score, positive="yes", negative="no", thresholds=thresholds, slices={"part": part}, gates=gates
    )
    trials = report.to_dict()["threshold_trials"]
    assert [t["threshold"] for t in trials] == sorted(set(thresholds))
    both = len(set(gold)) == 2
    auc = roc_auc_score(gold == "yes", score) if both else None
    for trial in trials:
        expected = _sklearn_row(gold, score, trial["threshold"], "yes", "no", {"part": part})
        for key, value in expected.items():
            assert abs(trial[key] - value) <= 1e-12, (trial["threshold"], key, trial[key], value)
        if both:
            assert abs(trial["roc_auc"] - auc) <= 1e-12
        else:
            assert trial["roc_auc"] is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.floats(-5, 5, allow_nan=False)), min_size=2, max_size=60).filter(
        lambda d: len({g for g, _ in d}) == 2
    )
)
def test_all_thresholds_and_auc_match_sklearn(data):
    gold = np.array([int(g) for g, _ in data])
    score = np.array([round(s, 1) for _, s in data])
    report = threshold_sweep(gold=gold, score=score, thresholds="all")
    assert report.thresholds.tolist() == sorted(set(score.tolist()))
    assert abs(report.columns["roc_auc"][0] - roc_auc_score(gold, score)) <= 1e-12
    for i, t in enumerate(report.thresholds):
        pred = (score >= t).astype(int)
        assert report.columns["f1"][i] == f1_score(gold, pred, zero_division=0.0)
        assert report.columns["accuracy"][i] == accuracy_score(gold, pred)


def test_auc_large_with_and_without_ties():
    rng = np.random.default_rng(3)
    n = 300_000  # spans several internal blocks
    gold = rng.random(n) < 0.3
    for score in (rng.random(n), np.round(rng.random(n), 3)):
        r = threshold_sweep(gold=gold, score=score, thresholds="0.5")
        assert abs(r.columns["roc_auc"][0] - roc_auc_score(gold, score)) <= 1e-12


# ---------------------------------------------------------------------------------------------
# Edge cases


def test_threshold_above_every_score_and_all_correct():
    gold = np.array([0, 0, 1, 1])
    score = np.array([0.1, 0.2, 0.8, 0.9])
    r = threshold_sweep(gold=gold, score=score, thresholds=[0.5, 0.95])
    top = r.row(1)  # nothing predicted positive: zero division gives 0
    assert (top["precision"], top["f1"], top["1_recall"], top["0_recall"]) == (0.0, 0.0, 0.0, 1.0)
    assert r.row(0)["accuracy"] == 1.0 and r.row(0)["roc_auc"] == 1.0
    assert r.threshold == 0.5


def test_one_class_present_gives_null_auc():
    r = threshold_sweep(gold=["p", "p", "p"], score=[0.2, 0.6, 0.9], positive="p", negative="n", thresholds="0.5")
    d = r.to_dict()
    assert d["threshold_trials"][0]["roc_auc"] is None
    assert d["threshold_trials"][0]["p_recall"] == pytest.approx(2 / 3)
    assert d["support"] == {"n": 0, "p": 3}


def test_tie_break_closest_to_center_then_lowest():
    # f1 is the same at 0.3 and 0.6 and 0.4 (the plateau): 0.4 is closest to 0.5
    gold = np.array([0, 1, 1])
    score = np.array([0.1, 0.7, 0.8])
    r = threshold_sweep(gold=gold, score=score, thresholds="0.2,0.4,0.6,0.75")
    assert r.threshold == 0.4
    assert r.selection["tied_thresholds"] == [0.2, 0.4, 0.6]
    r = threshold_sweep(gold=gold, score=score, thresholds="0.3,0.7")  # equidistant: lowest
    assert r.threshold == 0.3
    r = threshold_sweep(gold=gold, score=score, thresholds="0.2,0.4,0.6", center=0.0)
    assert r.threshold == 0.2


def test_no_threshold_passes_falls_back_and_says_so():
    gold = np.array([0, 1, 0, 1])
    score = np.array([0.9, 0.1, 0.6, 0.4])
    r = threshold_sweep(gold=gold, score=score, thresholds="0.1:0.9:0.1", gates=["recall[1]>=0.99", "recall[0]>0.99"])
    d = r.to_dict()
    sel = d["threshold_selection"]
    assert sel["recall_gate_passed"] is False and sel["fallback"] is True
    assert sel["n_passing"] == 0 and "fallback" in sel["selected_by"]
    assert "No threshold passes" in d["notes"][0]
    assert all(t["passed_gates"] is False for t in d["threshold_trials"])


def test_objective_balanced_accuracy_and_gate_columns():
    rng = np.random.default_rng(5)
    gold = rng.random(500) < 0.2
    score = np.clip(gold * 0.3 + rng.random(500) * 0.7, 0, 1)
    length = np.where(rng.random(500) < 0.5, "long", "short")
    r = threshold_sweep(
        gold=gold,
        score=score,
        objective="balanced_accuracy",
        slices={"length": length},
        gates=["recall[length=long]>=0.8", "f1>0.3"],
    )
    d = r.to_dict()
    row = d["threshold_trials"][0]
    assert {"balanced_accuracy", "recall[length=long]", "passed_gates"} <= set(row)
    assert "recall[length=long]" in d["definition"] and "balanced_accuracy" in d["definition"]
    best = max(t["balanced_accuracy"] for t in d["threshold_trials"] if t["passed_gates"])
    assert d["threshold_selection"]["balanced_accuracy"] == best


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("0.05:0.95:0.025", 37),
        ("0:1:0.3", 4),
        (" 0.5 ", 1),
        ("0.7, 0.3,0.3", 2),
        ("1e-1:2e-1:5e-2", 3),
    ],
)
def test_parse_thresholds(spec, expected):
    values = parse_thresholds(spec)
    assert values.size == expected and np.all(np.diff(values) > 0)


def test_grid_values_are_the_decimal_grid():
    grid = parse_thresholds("0.05:0.95:0.025")
    assert grid.tolist() == [float(f"{0.05 + 0.025 * i:.3f}") for i in range(37)]
    assert grid[-1] == 0.95


@pytest.mark.parametrize(
    "spec", ["0.1:0.9", "a:b:c", "0.9:0.1:0.1", "0:1:0", "0:1:-0.1", "", "nan", "0:1:1e-9", "0.1;0.2"]
)
def test_bad_thresholds(spec):
    with pytest.raises(MetricInputError, match="Thresholds"):
        parse_thresholds(spec)


@pytest.mark.parametrize(
    "text, canon, column",
    [
        ("recall[single_symbol]>=0.97", "recall[single_symbol]>=0.97", "single_symbol_recall"),
        (" recall [ length = long ] > 0.9 ", "recall[length=long]>0.9", "recall[length=long]"),
        ("f1[a,length=long]<=1", "f1[a,length=long]<=1", "f1[a,length=long]"),
        ("accuracy<.5", "accuracy<.5", "accuracy"),
        ("precision[x]>=1e-1", "precision[x]>=1e-1", "precision[x]"),
    ],
)
def test_parse_gate(text, canon, column):
    g = parse_gate(text)
    assert (g.text, g.column) == (canon, column)


@pytest.mark.parametrize(
    "text, match",
    [
        ("recall[a]=>0.97", "malformed"),
        ("recall[a]>=", "malformed"),
        ("recall[a] 0.97", "malformed"),
        ("recal[a]>=0.9", "Did you mean 'recall'"),
        ("accuracy[a]>=0.9", "not a per-class metric"),
        ("recall[]>=0.9", "brackets"),
        ("recall[a,b]>=0.9", "at most one class"),
        ("recall[x=1,y=2]>=0.9", "at most one FIELD=VALUE"),
        ("recall[x=]>=0.9", "FIELD=VALUE"),
    ],
)
def test_bad_gate_syntax(text, match):
    with pytest.raises(GateError, match=match) as info:
        parse_gate(text)
    assert text in str(info.value)


@pytest.mark.parametrize(
    "gate, match",
    [
        ("recall[singel_symbol]>=0.97", r"unknown class 'singel_symbol'.*Did you mean 'single_symbol'"),
        ("recall[lenght=long]>=0.9", r"unknown slice field 'lenght'.*Did you mean 'length'"),
        ("recall[length=lonk]>=0.9", r"no item has length=lonk.*Known values: 'long', 'short'"),
        ("recall[color=red]>=0.9", r"Known slice fields: 'length'; classes: 'single_symbol'"),
    ],
)
def test_gate_names_checked_against_data(gate, match):
    with pytest.raises(GateError, match=match) as info:
        threshold_sweep(
            gold=[NEG, POS, POS],
            score=[0.1, 0.5, 0.9],
            positive=POS,
            slices={"length": ["long", "short", "long"]},
            gates=[gate],
        )
    assert gate.split(">")[0] in str(info.value)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(gold=["a", "b", "c"], score=[0.1, 0.2, 0.3], positive="a"), MetricInputError, r"gold\[2\] is 'c'"),
        (dict(gold=["a", "b"], score=[0.1, float("nan")], positive="a"), MetricInputError, r"score\[1\] is NaN"),
        (dict(gold=["a", "b"], score=[0.1], positive="a"), MetricInputError, "1 values; gold has 2"),
        (dict(gold=["a", "b"], score=[0.1, 0.2]), MetricInputError, "positive= is required"),
        (dict(gold=["a", "a"], score=[0.1, 0.2], positive="a"), MetricInputError, "negative="),
        (dict(gold=[0, 1], score=[0.1, 0.2], objective="f1score"), UnknownMetricError, "Known: .*f1"),
        (dict(gold=[], score=[], positive="a", negative="b"), MetricInputError, "at least one"),
    ],
)
def test_bad_inputs(kwargs, error, match):
    with pytest.raises(error, match=match):
        threshold_sweep(**kwargs)


def test_evaluate_threshold_skips_missing_slices():
    out = evaluate_threshold(
        gold=[0, 1, 1], score=[0.2, 0.7, 0.4], threshold=0.5, gates=["recall[length=long]>=0.5", "recall[1]>=0.5"]
    )
    assert out["gates_not_evaluated"] == ["recall[length=long]>=0.5"]
    assert out["recall_gate_passed"] is True and out["confusion"] == {"tp": 1, "fp": 0, "fn": 1, "tn": 1}


def test_select_epoch_ties_and_skips():
    history = [
        {"epoch": 1, "loss": 0.9},
        {"epoch": 1, "f1": 0.7},
        {"epoch": 2, "f1": 0.8},
        {"epoch": 3, "f1": math.nan},
        {"epoch": 4, "f1": 0.8},
        {"epoch": 5, "f1": 0.6},
    ]
    sel = select_epoch(history, metric="f1")
    assert (sel.epoch, sel.tied_epochs, sel.considered) == (2, [2, 4], 4)
    assert sel.to_dict()["selected"] == {"epoch": 2, "f1": 0.8}
    assert select_epoch(history, metric="f1", higher_is_better=False).epoch == 5
    assert select_epoch([{"acc": 0.5}, {"acc": 0.6}], metric="acc").epoch == 2  # 1-based position
    with pytest.raises(UnknownMetricError, match="Did you mean 'f1'"):
        select_epoch(history, metric="f11")
    with pytest.raises(MetricInputError, match="empty"):
        select_epoch([], metric="f1")


def test_slice_columns_as_codes_or_arrays_of_any_type():
    gold = np.array([0, 1, 1, 0, 1, 1])
    score = np.array([0.2, 0.8, 0.4, 0.6, 0.9, 0.3])
    codes, values = np.array([0, 1, 0, 1, 2, 2], dtype=np.int32), ["long", "short", 3]
    gates = ["recall[s=long]>=0", "recall[s=3]>=0"]
    as_codes = threshold_sweep(gold=gold, score=score, thresholds="0.5", gates=gates, slices={"s": (codes, values)})
    as_array = threshold_sweep(
        gold=gold, score=score, thresholds="0.5", gates=gates, slices={"s": np.array(values, dtype=object)[codes]}
    )
    assert as_codes.trials == as_array.trials
    assert (as_codes.row(0)["recall[s=long]"], as_codes.row(0)["recall[s=3]"]) == (0.0, 0.5)
    numeric = threshold_sweep(
        gold=gold, score=score, thresholds="0.5", gates=["recall[b=3]>=0"], slices={"b": np.array([1, 2, 1, 2, 3, 3])}
    )
    flags = threshold_sweep(
        gold=gold,
        score=score,
        thresholds="0.5",
        gates=["recall[hard=true]>=0"],
        slices={"hard": np.array([0, 0, 0, 0, 1, 1], dtype=bool)},
    )
    assert numeric.row(0)["recall[b=3]"] == flags.row(0)["recall[hard=true]"] == 0.5


def test_slice_codes_must_index_their_values():
    with pytest.raises(MetricInputError, match=r"codes must index its 2 values"):
        threshold_sweep(
            gold=[0, 1], score=[0.2, 0.7], gates=["recall[s=a]>=0"], slices={"s": (np.array([0, 2]), ["a", "b"])}
        )
