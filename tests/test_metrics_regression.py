"""Regression metrics against scikit-learn/scipy, and the seed-003 sentiment family against its own code."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics as skm
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from labledger import metrics as M
from labledger.errors import MetricInputError

TOL = 1e-12
#: Per-test settings (a loaded profile would change every other test module too).
FAST = settings(max_examples=60, deadline=None)

# Values on a half-step grid make ties, zeros and .5 rounding cases common.
values = st.one_of(st.integers(-6, 6).map(lambda x: x / 2), st.floats(-3.5, 3.5))


@st.composite
def pairs(draw, min_n=1):
    n = draw(st.integers(min_n, 50))
    gold = draw(arrays(np.float64, n, elements=values))
    pred = draw(arrays(np.float64, n, elements=values))
    return gold, pred


def close(a, b, tol=TOL):
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= tol * max(1.0, abs(b))


def mosi_reference(truth, pred):
    """The evaluation code the seed-003 users run (argument order fixed: y_true first)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = {}
        non_zero = truth != 0
        if non_zero.any():
            out["non0_acc"] = skm.accuracy_score(truth[non_zero] > 0, pred[non_zero] > 0)
            out["non0_f1"] = skm.f1_score(truth[non_zero] > 0, pred[non_zero] > 0, average="weighted")
        out["has0_acc"] = skm.accuracy_score(truth >= 0, pred >= 0)
        out["has0_f1"] = skm.f1_score(truth >= 0, pred >= 0, average="weighted")
        out["zero_f1"] = skm.f1_score(np.round(truth) == 0, np.round(pred) == 0, average="weighted")
        out["acc5"] = np.mean(np.round(np.clip(pred, -2, 2)) == np.round(np.clip(truth, -2, 2)))
        out["acc7"] = np.mean(np.round(np.clip(pred, -3, 3)) == np.round(np.clip(truth, -3, 3)))
        return {k: float(v) for k, v in out.items()}


@FAST
@given(pairs())
def test_sentiment_family_matches_reference_code(data):
    gold, pred = data
    ref = mosi_reference(gold, pred)
    for name, expected in ref.items():
        assert close(getattr(M, name)(gold=gold, pred=pred), expected), name
    if "non0_acc" not in ref:
        assert math.isnan(M.non0_acc(gold=gold, pred=pred)) and math.isnan(M.non0_f1(gold=gold, pred=pred))


@FAST
@given(pairs())
def test_errors_match_sklearn(data):
    gold, pred = data
    assert close(M.mae(gold=gold, pred=pred), skm.mean_absolute_error(gold, pred))
    assert close(M.rmse(gold=gold, pred=pred), skm.root_mean_squared_error(gold, pred))


@FAST
@given(pairs(min_n=2))
def test_correlations_match_scipy(data):
    gold, pred = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(scipy.stats.pearsonr(gold, pred)[0]) if np.ptp(gold) > 0 and np.ptp(pred) > 0 else math.nan
        s = float(scipy.stats.spearmanr(gold, pred)[0])
    assert close(M.pearson(gold=gold, pred=pred), p, 1e-9)
    assert close(M.spearman(gold=gold, pred=pred), s, 1e-9)


@FAST
@given(pairs(min_n=2), st.integers(0, 2**31))
def test_weighted_values_equal_repeated_rows(data, seed):
    gold, pred = data
    w = np.random.default_rng(seed).integers(0, 4, len(gold))
    if w.sum() == 0:
        w[0] = 1
    rg, rp = np.repeat(gold, w), np.repeat(pred, w)
    for name in ("mae", "rmse", "pearson", "spearman", "has0_f1", "non0_f1", "zero_f1", "acc7"):
        fn = getattr(M, name)
        assert close(fn(gold=gold, pred=pred, sample_weight=w), fn(gold=rg, pred=rp), 1e-9), name


EDGE = [
    ("constant gold: correlations undefined", [1.0, 1.0, 1.0], [0.1, 0.5, 0.2], "pearson", math.nan),
    ("constant gold: spearman undefined", [1.0, 1.0, 1.0], [0.1, 0.5, 0.2], "spearman", math.nan),
    ("perfect", [-1.0, 0.0, 2.0], [-1.0, 0.0, 2.0], "mae", 0.0),
    ("round half to even: 0.5 -> 0", [0.5, 2.5], [0.0, 2.0], "acc7", 1.0),
    ("zero counts as non-negative", [0.0, -1.0], [0.0, -0.5], "has0_acc", 1.0),
    ("non0 ignores zero truth", [0.0, 1.0, -1.0], [-5.0, 0.3, -0.2], "non0_acc", 1.0),
    ("non0 with all-zero truth", [0.0, 0.0], [1.0, -1.0], "non0_f1", math.nan),
    ("pred 0 is not positive for non0", [1.0, -1.0], [0.0, -1.0], "non0_acc", 0.5),
    ("all wrong sign", [1.0, 2.0, -1.0], [-1.0, -2.0, 1.0], "has0_f1", 0.0),
    ("clip before rounding", [5.0, -9.0], [2.6, -2.51], "acc5", 1.0),
]


@pytest.mark.parametrize("name, gold, pred, metric, expected", EDGE, ids=[e[0] for e in EDGE])
def test_edge_cases(name, gold, pred, metric, expected):
    assert close(getattr(M, metric)(gold=gold, pred=pred), expected)


def test_zero_f1_definition_is_weighted_f1_of_is_zero():
    gold = np.array([0.2, 1.4, -2.0, 0.4, -0.3])
    pred = np.array([0.4, 0.2, -1.6, 1.2, 0.1])
    expected = skm.f1_score(np.round(gold) == 0, np.round(pred) == 0, average="weighted")
    assert close(M.zero_f1(gold=gold, pred=pred), expected)
    assert "weighted f1" in M.get_metric("zero_f1").definition.lower()


@pytest.mark.parametrize(
    "gold, pred, message",
    [
        ([1.0, math.nan], [1.0, 2.0], "NaN"),
        ([1.0, 2.0], [1.0], "differ in length"),
        (["a"], [1.0], "must be numbers"),
    ],
)
def test_bad_inputs(gold, pred, message):
    with pytest.raises(MetricInputError, match=message):
        M.mae(gold=gold, pred=pred)


def test_pearson_of_tiny_or_huge_deviations_is_not_a_false_constant():
    # hypothesis found it: the squares of 2.4e-169 underflow to 0, which read as "pred is constant"
    gold, pred = np.array([0.0, 0.5]), np.array([0.0, 4.85281502e-169])
    assert M.pearson(gold=gold, pred=pred) == 1.0 == scipy.stats.pearsonr(gold, pred)[0]
    big = np.array([1e300, -1e300, 3e299])
    assert close(M.pearson(gold=big, pred=big[::-1]), float(scipy.stats.pearsonr(big, big[::-1])[0]), 1e-12)


def test_a_weight_of_zero_is_an_item_that_is_not_there():
    """Frequency weights: an item of weight 0 changes nothing, even one whose scale would swamp the
    others' (found by hypothesis: a weighted Pearson of values near 1e-232 beside a 0.5 of weight 0
    gave nan where the repeated rows give 1)."""
    gold = np.array([0.0, 0.0, 0.0, 0.0, 0.5, 0.0])
    pred = np.array([0.0, 0.0, 0.0, 0.0, 1.35193201e-232, 0.5])
    w = np.array([3, 2, 2, 1, 1, 0])
    for name in ("pearson", "spearman", "mae", "rmse"):
        fn = getattr(M, name)
        assert close(
            fn(gold=gold, pred=pred, sample_weight=w), fn(gold=np.repeat(gold, w), pred=np.repeat(pred, w)), 1e-9
        )
