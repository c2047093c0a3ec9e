"""Confusion-matrix reconstruction from recorded accuracy and (swapped) weighted F1 (seed 003)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, f1_score

from labledger.errors import ForensicsError
from labledger.metrics.forensics import reconstruct_confusion, weighted_f1


def _arrays(tp: int, fn: int, fp: int, tn: int) -> tuple[np.ndarray, np.ndarray]:
    truth = np.array([1] * (tp + fn) + [0] * (fp + tn))
    pred = np.array([1] * tp + [0] * fn + [1] * fp + [0] * tn)
    return truth, pred


@st.composite
def matrices(draw):
    pos = draw(st.integers(0, 300))
    neg = draw(st.integers(0 if pos else 1, 300))
    tp = draw(st.integers(0, pos))
    tn = draw(st.integers(0, neg))
    return tp, pos - tp, neg - tn, tn


@settings(max_examples=150, deadline=None)
@given(m=matrices(), swapped=st.booleans(), decimals=st.integers(2, 6), acc_decimals=st.sampled_from([None, 3, 4, 6]))
def test_true_matrix_is_always_a_candidate(m, swapped, decimals, acc_decimals):
    tp, fn, fp, tn = m
    truth, pred = _arrays(*m)
    acc = accuracy_score(truth, pred)
    recorded = f1_score(pred, truth, average="weighted") if swapped else f1_score(truth, pred, average="weighted")
    correct = f1_score(truth, pred, average="weighted")
    acc_recorded = round(acc, acc_decimals) if acc_decimals is not None else acc
    r = reconstruct_confusion(
        support=(tp + fn, fp + tn),
        accuracy=acc_recorded,
        weighted_f1=round(recorded, decimals),
        swapped=swapped,
        decimals=decimals,
        accuracy_decimals=acc_decimals,
    )
    found = [c for c in r.candidates if (c.tp, c.fn, c.fp, c.tn) == m]
    assert len(found) == 1
    assert abs(found[0].weighted_f1 - correct) <= 1e-12
    assert r.weighted_f1_min <= correct <= r.weighted_f1_max
    for c in r.candidates:  # every candidate honours the support and the recorded values
        assert c.tp + c.fn == tp + fn and c.fp + c.tn == fp + tn
        assert min(c.tp, c.fn, c.fp, c.tn) >= 0


@settings(max_examples=100, deadline=None)
@given(m=matrices())
def test_weighted_f1_matches_sklearn(m):
    truth, pred = _arrays(*m)
    tp, fn, fp, tn = m
    assert abs(weighted_f1(tp=tp, fn=fn, fp=fp, tn=tn) - f1_score(truth, pred, average="weighted")) <= 1e-15
    assert (
        abs(weighted_f1(tp=tp, fn=fn, fp=fp, tn=tn, swapped=True) - f1_score(pred, truth, average="weighted")) <= 1e-15
    )


def test_realistic_swapped_case():
    """A sentiment test set of 686 items (Has0-style: truth >= 0 is positive), 4 decimals."""
    true_m = (331, 48, 67, 240)  # tp, fn, fp, tn
    truth, pred = _arrays(*true_m)
    acc = round(accuracy_score(truth, pred), 4)
    recorded = round(f1_score(pred, truth, average="weighted"), 4)
    correct = f1_score(truth, pred, average="weighted")
    r = reconstruct_confusion(support=(379, 307), accuracy=acc, weighted_f1=recorded, decimals=4, accuracy_decimals=4)
    assert (acc, recorded) == (0.8324, 0.8330)
    # two very different matrices fit, yet they agree on the correct weighted F1 to 1e-5
    assert [(c.tp, c.fn, c.fp, c.tn) for c in r.candidates] == [(276, 103, 12, 295), true_m]
    assert r.weighted_f1_min <= correct <= r.weighted_f1_max
    assert (round(r.weighted_f1_min, 4), round(r.weighted_f1_max, 4)) == (0.8317, 0.8317)
    d = r.to_dict()
    assert d["n_candidates"] == len(r.candidates) and d["swapped"] is True
    assert "PREDICTED" in d["definition"]


SEED_003_HAS0 = [  # run, recorded Has0 accuracy, recorded swapped Has0_F1, the report's range
    ("comp_has0_l02_h128_lr8e5_b12_d12", 0.8324, 0.8278, (0.8369, 0.8370)),
    ("comp_has0_l02_h160_lr5e5_b8_d15", 0.8465, 0.8434, (0.8496, 0.8497)),
    ("has0_h128_lr8e5_b12_d12", 0.8311, 0.8267, (0.8354, 0.8355)),
    ("fd_router_h128_s025_lr8e5_b12_d12", 0.8395, 0.8359, (0.8430, 0.8430)),
    ("fd_router_h128_s050_lr8e5_b12_d12", 0.8343, 0.8303, (0.8383, 0.8383)),
    ("fd_router_h160_s025_lr5e5_b8_d15", 0.8431, 0.8397, (0.8465, 0.8465)),
    ("fd_router_h160_s050_lr5e5_b8_d15", 0.8371, 0.8333, (0.8408, 0.8409)),
]


@pytest.mark.parametrize("run, acc, f1, expected", SEED_003_HAS0)
def test_seed003_has0_ranges_under_an_assumed_support(run, acc, f1, expected):
    """Seed 003 gives no supports. Assuming a test set of 4,659 items of which 3,300 have
    truth >= 0 (an assumption, sized like a common sentiment benchmark), the reconstruction
    gives the same standard Has0_F1 ranges the report wrote."""
    r = reconstruct_confusion(support=(3300, 1359), accuracy=acc, weighted_f1=f1, decimals=4, accuracy_decimals=4)
    assert r.candidates
    assert (round(r.weighted_f1_min, 4), round(r.weighted_f1_max, 4)) == expected
    assert all(c.weighted_f1 > c.weighted_f1_swapped for c in r.candidates)


def test_not_swapped_candidates_reproduce_the_recorded_value():
    r = reconstruct_confusion(support=(50, 50), accuracy=0.8, weighted_f1=0.8, swapped=False, decimals=2)
    assert r.candidates
    assert all(abs(c.weighted_f1 - 0.8) <= 0.005 + 1e-9 for c in r.candidates)


def test_accuracy_decimals_inferred_from_the_value():
    r = reconstruct_confusion(support=(40, 35), accuracy=0.973333, weighted_f1=0.9733)
    assert r.accuracy_decimals == 6
    assert {(c.tp + c.tn) for c in r.candidates} == {73}


def test_no_candidate_is_an_empty_result_not_an_error():
    r = reconstruct_confusion(support=(10, 10), accuracy=0.5, weighted_f1=0.99, decimals=2)
    assert r.candidates == [] and r.weighted_f1_min is None
    assert r.to_dict()["n_candidates"] == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(support=(-1, 5), accuracy=0.5, weighted_f1=0.5), "non-negative"),
        (dict(support=(0, 0), accuracy=0.5, weighted_f1=0.5), "no items"),
        (dict(support=(2.5, 5), accuracy=0.5, weighted_f1=0.5), "whole counts"),
        (dict(support=("a", 5), accuracy=0.5, weighted_f1=0.5), "two counts"),
        (dict(support=(5,), accuracy=0.5, weighted_f1=0.5), "two counts"),
        (dict(support=(5, 5), accuracy=1.2, weighted_f1=0.5), r"accuracy must be a number in \[0, 1\]"),
        (dict(support=(5, 5), accuracy=0.5, weighted_f1=-0.1), "weighted F1 must be"),
        (dict(support=(5, 5), accuracy=float("nan"), weighted_f1=0.5), "accuracy must be"),
        (dict(support=(5, 5), accuracy=0.5, weighted_f1=0.5, decimals=-1), "decimals"),
        (dict(support=(5, 5), accuracy=0.5, weighted_f1=0.5, accuracy_decimals=-2), "accuracy_decimals"),
    ],
)
def test_impossible_inputs(kwargs, match):
    with pytest.raises(ForensicsError, match=match):
        reconstruct_confusion(**kwargs)
