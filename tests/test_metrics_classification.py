"""Classification metrics against scikit-learn: random data (hypothesis) and the textbook edge cases."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from labledger import metrics as M
from labledger.errors import MetricInputError

TOL = 1e-12
#: Per-test settings (a loaded profile would change every other test module too).
FAST = settings(max_examples=60, deadline=None)


def close(a, b, tol=TOL):
    if isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and math.isnan(a)
    return abs(a - b) <= tol


@st.composite
def label_pairs(draw, max_k=4, min_n=1):
    k = draw(st.integers(1, max_k))
    n = draw(st.integers(min_n, 60))
    gold = draw(arrays(np.int64, n, elements=st.integers(0, k - 1)))
    pred = draw(arrays(np.int64, n, elements=st.integers(0, k - 1)))
    return gold, pred


@st.composite
def weighted_pairs(draw):
    gold, pred = draw(label_pairs())
    # multiples of 1/8 are exact in binary: no rounding noise on either side (with weights like 0.1,
    # scikit-learn's MCC of a constant gold comes out as nan from sqrt(-1e-17); ours is 0 as documented)
    w = draw(arrays(np.float64, len(gold), elements=st.integers(1, 40).map(lambda x: x / 8)))
    return gold, pred, w


def sk(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(fn(*args, **kwargs))


# ------------------------------------------------------------------------------------------------
# Random data against scikit-learn


@FAST
@given(label_pairs())
def test_accuracy_balanced_mcc_kappa(data):
    gold, pred = data
    assert close(M.accuracy(gold=gold, pred=pred), sk(skm.accuracy_score, gold, pred))
    assert close(M.balanced_accuracy(gold=gold, pred=pred), sk(skm.balanced_accuracy_score, gold, pred))
    assert close(M.mcc(gold=gold, pred=pred), sk(skm.matthews_corrcoef, gold, pred))
    assert close(M.cohen_kappa(gold=gold, pred=pred), sk(skm.cohen_kappa_score, gold, pred))


@pytest.mark.parametrize("average", ["macro", "micro", "weighted"])
@pytest.mark.parametrize("zero_division", [0.0, 1.0, math.nan])
@FAST
@given(data=label_pairs())
def test_precision_recall_f1_averages(data, average, zero_division):
    gold, pred = data
    for ours, theirs in ((M.precision, skm.precision_score), (M.recall, skm.recall_score), (M.f1, skm.f1_score)):
        a = ours(gold=gold, pred=pred, average=average, zero_division=zero_division)
        b = sk(theirs, gold, pred, average=average, zero_division=zero_division)
        assert close(a, b), (ours.__name__, a, b)


@FAST
@given(label_pairs(max_k=3))
def test_binary_average_with_pos_label(data):
    gold, pred = data
    present = set(np.asarray(gold).tolist()) | set(np.asarray(pred).tolist())
    for ours, theirs in ((M.precision, skm.precision_score), (M.recall, skm.recall_score), (M.f1, skm.f1_score)):
        if len(present) >= 2 and 1 not in present:  # a pos_label the data lacks is refused, as sklearn does (#16)
            with pytest.raises(MetricInputError, match="not a label of the data"):
                ours(gold=gold, pred=pred, average="binary", pos_label=1)
            continue
        a = ours(gold=gold, pred=pred, average="binary", pos_label=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b = float(theirs(gold, pred, average=None, labels=[1], zero_division=0.0)[0])
        assert close(a, b)


@FAST
@given(label_pairs(max_k=4))
def test_explicit_labels_average_over_exactly_those(data):
    gold, pred = data
    labels = [0, 1, 2, 3]
    for avg in ("macro", "weighted", "micro"):
        assert close(
            M.f1(gold=gold, pred=pred, labels=labels, average=avg),
            sk(skm.f1_score, gold, pred, labels=labels, average=avg),
        )


@FAST
@given(label_pairs())
def test_per_class_and_confusion_matrix(data):
    gold, pred = data
    labels = sorted(set(gold) | set(pred))
    p, r, f, s = skm.precision_recall_fscore_support(gold, pred, labels=labels, zero_division=0.0)
    table = M.per_class(gold=gold, pred=pred)
    for j, lab in enumerate(labels):
        assert close(table[f"precision[{lab}]"], p[j]) and close(table[f"recall[{lab}]"], r[j])
        assert close(table[f"f1[{lab}]"], f[j]) and table[f"support[{lab}]"] == s[j]
    np.testing.assert_array_equal(M.confusion_matrix(gold=gold, pred=pred), skm.confusion_matrix(gold, pred))


@FAST
@given(weighted_pairs())
def test_sample_weights_match_sklearn(data):
    gold, pred, w = data
    assert close(M.accuracy(gold=gold, pred=pred, sample_weight=w), sk(skm.accuracy_score, gold, pred, sample_weight=w))
    assert close(
        M.f1(gold=gold, pred=pred, average="macro", sample_weight=w),
        sk(skm.f1_score, gold, pred, average="macro", sample_weight=w),
        1e-10,
    )
    assert close(
        M.mcc(gold=gold, pred=pred, sample_weight=w), sk(skm.matthews_corrcoef, gold, pred, sample_weight=w), 1e-10
    )
    assert close(
        M.cohen_kappa(gold=gold, pred=pred, sample_weight=w),
        sk(skm.cohen_kappa_score, gold, pred, sample_weight=w),
        1e-10,
    )


@st.composite
def scored(draw, ties=True):
    n = draw(st.integers(2, 80))
    gold = draw(arrays(np.int64, n, elements=st.integers(0, 1)))
    if ties:
        score = draw(arrays(np.float64, n, elements=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])))
    else:
        score = draw(arrays(np.float64, n, elements=st.floats(0, 1)))
    return gold, score


@FAST
@given(scored(ties=True))
def test_binary_probability_metrics(data):
    gold, score = data
    assert close(M.brier(gold=gold, score=score), sk(skm.brier_score_loss, gold, score))
    assert close(
        M.log_loss(gold=gold, score=score),
        sk(skm.log_loss, gold, np.column_stack([1 - score, score]), labels=[0, 1]),
        1e-10,
    )
    if 0 < gold.sum() < len(gold):
        assert close(M.roc_auc(gold=gold, score=score), sk(skm.roc_auc_score, gold, score))
        assert close(M.average_precision(gold=gold, score=score), sk(skm.average_precision_score, gold, score))


@FAST
@given(scored(ties=False))
def test_roc_auc_and_ap_without_ties(data):
    gold, score = data
    if 0 < gold.sum() < len(gold):
        assert close(M.roc_auc(gold=gold, score=score), sk(skm.roc_auc_score, gold, score))
        assert close(M.average_precision(gold=gold, score=score), sk(skm.average_precision_score, gold, score))


@st.composite
def multiclass_probs(draw):
    k = draw(st.integers(3, 4))
    n = draw(st.integers(k * 2, 60))
    gold = np.concatenate([np.arange(k), draw(arrays(np.int64, n - k, elements=st.integers(0, k - 1)))])
    raw = draw(arrays(np.float64, (n, k), elements=st.integers(1, 8).map(float)))
    return gold, raw / raw.sum(axis=1, keepdims=True)


@FAST
@given(multiclass_probs())
def test_multiclass_probability_metrics(data):
    gold, probs = data
    labels = list(range(probs.shape[1]))
    assert close(
        M.roc_auc(gold=gold, probs=probs, labels=labels),
        sk(skm.roc_auc_score, gold, probs, multi_class="ovr", average="macro"),
    )
    assert close(
        M.average_precision(gold=gold, probs=probs, labels=labels),
        sk(skm.average_precision_score, np.eye(len(labels))[gold], probs, average="macro"),
    )
    assert close(M.log_loss(gold=gold, probs=probs, labels=labels), sk(skm.log_loss, gold, probs), 1e-10)
    assert close(M.brier(gold=gold, probs=probs, labels=labels), sk(skm.brier_score_loss, gold, probs), 1e-10)


def naive_ece(conf, correct, n_bins, strategy):
    n = len(conf)
    if strategy == "uniform":
        bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    else:
        order = np.argsort(conf, kind="stable")
        bins = np.empty(n, int)
        bins[order] = [min(n_bins * i // n, n_bins - 1) for i in range(n)]
    total = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            total += m.sum() / n * abs(correct[m].mean() - conf[m].mean())
    return total


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@FAST
@given(data=multiclass_probs(), n_bins=st.integers(1, 12))
def test_ece_against_a_direct_implementation(data, strategy, n_bins):
    gold, probs = data
    pred = probs.argmax(axis=1)
    conf = probs.max(axis=1)
    ours = M.ece(gold=gold, probs=probs, labels=list(range(probs.shape[1])), n_bins=n_bins, strategy=strategy)
    assert close(ours, naive_ece(conf, (pred == gold).astype(float), n_bins, strategy), 1e-12)


def test_labels_by_name_from_mappings():
    probs = [{"b": 0.7, "a": 0.3}, {"a": 0.9, "b": 0.1}, {"b": 0.2, "a": 0.8}]
    gold = ["b", "a", "b"]
    assert M.roc_auc(gold=gold, probs=probs) == M.roc_auc(
        gold=gold, probs=np.array([[0.3, 0.7], [0.9, 0.1], [0.8, 0.2]]), labels=["a", "b"]
    )
    assert M.roc_auc(gold=gold, probs=probs, pos_label="b") == 1.0


# ------------------------------------------------------------------------------------------------
# Edge cases


EDGE = [
    # name, gold, pred, metric kwargs, expected
    ("all correct", [0, 1, 1], [0, 1, 1], "f1", {"average": "macro"}, 1.0),
    ("all wrong", [0, 1, 1], [1, 0, 0], "f1", {"average": "macro"}, 0.0),
    ("one class present, all correct", [1, 1, 1], [1, 1, 1], "f1", {"average": "macro"}, 1.0),
    ("one class present: mcc", [1, 1, 1], [1, 1, 1], "mcc", {}, 0.0),
    ("one class present: balanced accuracy", [1, 1, 1], [1, 0, 1], "balanced_accuracy", {}, 2 / 3),
    (
        "no predicted positive: precision 0/0",
        [1, 0, 1],
        [0, 0, 0],
        "precision",
        {"average": "binary", "pos_label": 1},
        0.0,
    ),
    (
        "no predicted positive, zero_division=1",
        [1, 0, 1],
        [0, 0, 0],
        "precision",
        {"average": "binary", "pos_label": 1, "zero_division": 1},
        1.0,
    ),
    ("no gold positive: recall 0/0", [0, 0], [1, 0], "recall", {"average": "binary", "pos_label": 1}, 0.0),
    ("positive nowhere: f1 0/0", [0, 0], [0, 0], "f1", {"average": "binary", "pos_label": 1}, 0.0),
    (
        "positive nowhere, zero_division=nan",
        [0, 0],
        [0, 0],
        "f1",
        {"average": "binary", "pos_label": 1, "zero_division": math.nan},
        math.nan,
    ),
    ("kappa with one identical label", [1, 1], [1, 1], "cohen_kappa", {}, math.nan),
]


@pytest.mark.parametrize("name, gold, pred, metric, kwargs, expected", EDGE, ids=[e[0] for e in EDGE])
def test_edge_cases_match_sklearn(name, gold, pred, metric, kwargs, expected):
    ours = getattr(M, metric)(gold=gold, pred=pred, **kwargs)
    assert close(ours, expected)
    fn = {
        "f1": skm.f1_score,
        "precision": skm.precision_score,
        "recall": skm.recall_score,
        "mcc": skm.matthews_corrcoef,
        "balanced_accuracy": skm.balanced_accuracy_score,
        "cohen_kappa": skm.cohen_kappa_score,
    }[metric]
    theirs = sk(fn, gold, pred, **kwargs)
    assert close(ours, theirs)


def test_probability_metrics_undefined_with_one_class():
    assert math.isnan(M.roc_auc(gold=[1, 1], score=[0.2, 0.9]))
    assert math.isnan(M.average_precision(gold=[0, 0], score=[0.2, 0.9]))
    assert M.log_loss(gold=[1], score=[0.0]) == pytest.approx(-math.log(np.finfo(float).eps))


def test_seed_003_swapped_arguments_cannot_happen_by_position():
    truth = np.array([1] * 70 + [0] * 30)
    pred = np.array([1] * 60 + [0] * 10 + [1] * 5 + [0] * 25)
    right = M.f1(gold=truth, pred=pred, average="weighted")
    assert close(right, skm.f1_score(truth, pred, average="weighted"))
    assert not close(right, skm.f1_score(pred, truth, average="weighted"), 1e-6)  # what seed 003 recorded
    with pytest.raises(TypeError):
        M.f1(truth, pred)  # positional arguments are refused


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: M.f1(gold=[1, 2], pred=[1]), "differ in length"),
        (lambda: M.f1(gold=["a", "b"], pred=["a", "b"], average="binary"), "needs pos_label"),
        (lambda: M.f1(gold=["a", "b"], pred=["a", "b"], average="mean"), "average must be one of"),
        (lambda: M.f1(gold=["a"], pred=["a"], zero_division=0.5), "zero_division must be"),
        (lambda: M.roc_auc(gold=["a", "b"], score=[0.1, 0.2]), "give pos_label"),
        (lambda: M.roc_auc(gold=[0, 1], probs=[[0.5, 0.5], [0.5, 0.5]]), "needs labels"),
        (lambda: M.brier(gold=[0, 1], score=[0.5, 1.5]), "outside [0, 1]"),
        (lambda: M.ece(gold=[0, 1], score=[0.5, 0.5], n_bins=0), "n_bins must be"),
        (lambda: M.f1(gold=["a"], pred=["b"], labels=["a"]), "not in labels"),
    ],
)
def test_bad_inputs_raise_metric_input_error(call, message):
    with pytest.raises(MetricInputError, match=message.replace("[", r"\[")):
        call()


def test_big_input_matches_sklearn():
    rng = np.random.default_rng(3)
    n = 200_000
    gold = rng.integers(0, 2, n)
    score = np.clip(gold * 0.3 + rng.random(n) * 0.7, 0, 1).round(3)
    pred = (score >= 0.5).astype(int)
    assert close(M.roc_auc(gold=gold, score=score), skm.roc_auc_score(gold, score))
    assert close(M.f1(gold=gold, pred=pred, average="binary", pos_label=1), skm.f1_score(gold, pred))


@FAST
@given(scored(ties=True), st.booleans())
def test_two_label_one_vs_rest_auc(data, complementary):
    gold, score = data
    other = 1.0 - score if complementary else np.round(1.0 - score + 0.01 * (score > 0.5), 2)
    probs = np.column_stack([other, score])
    if 0 < gold.sum() < len(gold):
        expected = (skm.roc_auc_score(gold == 0, probs[:, 0]) + skm.roc_auc_score(gold == 1, probs[:, 1])) / 2
        assert close(M.roc_auc(gold=gold, probs=probs, labels=[0, 1], average="macro"), expected)


def test_mcc_of_constant_gold_is_zero_even_with_fractional_weights():
    # n^2 - sum(t^2) is 0 in exact arithmetic; with weights 0.1 it rounds to -1e-17 (scikit-learn: nan)
    assert M.mcc(gold=[0] * 30, pred=[0] + [1] * 29, sample_weight=[0.1] * 30) == 0.0
