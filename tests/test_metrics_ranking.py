"""Ranking and set metrics: nDCG against scikit-learn, MRR/recall@k against direct definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sklearn.metrics as skm
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from labledger import metrics as M
from labledger.errors import MetricInputError

#: Per-test settings (a loaded profile would change every other test module too).
FAST = settings(max_examples=60, deadline=None)


@st.composite
def rankings(draw):
    n_items = draw(st.integers(1, 8))
    n_docs = draw(st.integers(2, 7))  # scikit-learn refuses one document
    rel = draw(arrays(np.int64, (n_items, n_docs), elements=st.integers(0, 3)))
    score = draw(arrays(np.float64, (n_items, n_docs), elements=st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])))
    return rel, score


def as_dicts(rel, score):
    gold = [{f"d{j}": int(rel[i, j]) for j in range(rel.shape[1]) if rel[i, j] > 0} for i in range(len(rel))]
    scores = [{f"d{j}": float(score[i, j]) for j in range(score.shape[1])} for i in range(len(score))]
    return gold, scores


def pessimistic_order(rel_row, score_row):
    # higher score first; among ties, non-relevant documents first
    return sorted(range(len(score_row)), key=lambda j: (-score_row[j], rel_row[j] > 0))


@FAST
@given(rankings(), st.integers(1, 8))
def test_ndcg_matches_sklearn(data, k):
    rel, score = data
    gold, scores = as_dicts(rel, score)
    assert abs(M.ndcg(gold=gold, scores=scores, k=k) - skm.ndcg_score(rel, score, k=k)) <= 1e-12


@FAST
@given(rankings(), st.integers(1, 8))
def test_mrr_and_recall_at_k_match_their_definitions(data, k):
    rel, score = data
    gold, scores = as_dicts(rel, score)
    rr, rec = [], []
    for i in range(len(rel)):
        order = pessimistic_order(rel[i], score[i])
        first = next((pos for pos, j in enumerate(order) if rel[i, j] > 0), None)
        rr.append(0.0 if first is None else 1.0 / (first + 1))
        n_rel = int((rel[i] > 0).sum())
        rec.append(0.0 if n_rel == 0 else sum(rel[i, j] > 0 for j in order[:k]) / n_rel)
    assert M.mrr(gold=gold, scores=scores) == pytest.approx(np.mean(rr), abs=1e-12)
    assert M.recall_at_k(gold=gold, scores=scores, k=k) == pytest.approx(np.mean(rec), abs=1e-12)


def test_documents_not_retrieved_count_in_ideal_and_recall():
    gold = [{"a": 1, "z": 1}]  # 'z' was never scored
    scores = [{"a": 0.9, "b": 0.5}]
    assert M.recall_at_k(gold=gold, scores=scores, k=10) == 0.5
    assert M.ndcg(gold=gold, scores=scores, k=10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert M.mrr(gold=gold, scores=scores) == 1.0


@pytest.mark.parametrize(
    "gold, scores, metric, kwargs, expected",
    [
        ([{}], [{"a": 1.0}], "ndcg", {"k": 5}, 0.0),  # no relevant document
        ([{}], [{"a": 1.0}], "mrr", {}, 0.0),
        ([{"a": 1}], [{}], "recall_at_k", {"k": 3}, 0.0),  # nothing retrieved
        ([{"a": 1}], [{"a": 0.5, "b": 0.5}], "mrr", {}, 0.5),  # tie broken against the relevant one
        ([{"a": 1}], [{"a": 0.5, "b": 0.5}], "recall_at_k", {"k": 1}, 0.0),
        ([{"a": 2, "b": 1}], [{"a": 0.9, "b": 0.1}], "ndcg", {"k": 2}, 1.0),
    ],
)
def test_ranking_edge_cases(gold, scores, metric, kwargs, expected):
    assert getattr(M, metric)(gold=gold, scores=scores, **kwargs) == pytest.approx(expected)


@FAST
@given(
    st.lists(
        st.tuples(st.lists(st.integers(0, 5), max_size=4), st.lists(st.integers(0, 5), max_size=4)),
        min_size=1,
        max_size=20,
    )
)
def test_set_f1_and_exact_match(pairs):
    gold = [g for g, _ in pairs]
    pred = [p for _, p in pairs]
    expected = []
    for g, p in pairs:
        g, p = set(g), set(p)
        expected.append(1.0 if not g and not p else 2 * len(g & p) / (len(g) + len(p)))
    assert M.set_f1(gold=gold, pred=pred) == pytest.approx(np.mean(expected), abs=1e-12)
    assert M.exact_match(gold=gold, pred=pred) == pytest.approx(np.mean([set(g) == set(p) for g, p in pairs]))


def test_acos_per_review_f1_with_tuples():
    gold = [[["food", "quality", "great", "pos"], ["staff", "service", "rude", "neg"]], []]
    pred = [[["food", "quality", "great", "pos"]], [["x", "y", "z", "pos"]]]
    assert M.set_f1(gold=gold, pred=pred) == pytest.approx((2 * 1 / 3 + 0.0) / 2)


def test_exact_match_is_exact():
    assert M.exact_match(gold=["Paris", "1", 1], pred=["paris", "1", "1"]) == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: M.ndcg(gold=[{"a": 1}], scores=[{"a": 1.0}], k=0), "k must be"),
        (lambda: M.ndcg(gold=[{"a": -1}], scores=[{"a": 1.0}]), ">= 0"),
        (lambda: M.mrr(gold=[{"a": 1}], scores=[{"a": math.nan}]), "NaN"),
        (lambda: M.mrr(gold=[{"a": 1}], scores=[]), "differ in length"),
    ],
)
def test_bad_ranking_inputs(call, message):
    with pytest.raises(MetricInputError, match=message):
        call()
