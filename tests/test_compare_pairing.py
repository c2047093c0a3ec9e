"""Pairing two result sets by an Arrow hash join (#19): the same pairs as the dict it replaced, on
random ids (strings, ints, both), and the same comparison whatever B's row order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.analysis.comparison import _pair, compare, paired_positions
from labledger.errors import ComparisonError
from labledger.inputs.results import results_from_rows

FAST = settings(max_examples=40, deadline=None)


def dict_pair(a, b):
    """The pairing that the hash join replaced (a dict of B's ids), kept here as the reference."""
    if len(a.ids) == len(b.ids) and bool(np.all(a.ids == b.ids)):
        return b
    pos = {v: i for i, v in enumerate(b.ids.tolist())}
    return b.subset(np.fromiter((pos[v] for v in a.ids.tolist()), dtype=np.int64, count=len(a.ids)))


def rows_of(ids: list, gold: list[str], probs: np.ndarray) -> list[dict]:
    return [
        {"id": i, "task": "t", "gold": g, "probs": {"x": float(p[0]), "y": float(p[1]), "z": float(p[2])}}
        for i, g, p in zip(ids, gold, probs)
    ]


@st.composite
def id_lists(draw):
    kind = draw(st.sampled_from(["str", "int", "mixed"]))
    n = draw(st.integers(1, 60))
    if kind == "str":
        ids = draw(st.lists(st.text("abc01", min_size=1, max_size=4), min_size=n, max_size=n, unique=True))
    elif kind == "int":
        ids = draw(st.lists(st.integers(-50, 10**6), min_size=n, max_size=n, unique=True))
    else:
        ids = [f"s{i}" if i % 2 else i for i in range(n)]
    return ids


@FAST
@given(ids=id_lists(), seed=st.integers(0, 2**32 - 1))
def test_pairing_equals_the_dict_join(ids: list, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = len(ids)
    gold = [("x", "y", "z")[k] for k in rng.integers(0, 3, n)]
    a = results_from_rows(rows_of(ids, gold, rng.dirichlet(np.ones(3), n)))["t"]
    perm = rng.permutation(n)
    b = results_from_rows(rows_of([ids[i] for i in perm], [gold[i] for i in perm], rng.dirichlet(np.ones(3), n)))["t"]
    a1, b1, paired1 = _pair(a, b, False)
    b0 = dict_pair(a, b)
    assert paired1
    assert b1.ids.tolist() == b0.ids.tolist() == a.ids.tolist()
    assert np.array_equal(b1.probs, b0.probs)
    where = paired_positions(a.ids, b.ids)
    assert where is not None and b.ids[where].tolist() == a.ids.tolist()


def test_different_item_sets_are_refused_with_examples() -> None:
    rng = np.random.default_rng(0)
    a = results_from_rows(rows_of(["a", "b", "c"], ["x", "y", "z"], rng.dirichlet(np.ones(3), 3)))["t"]
    b = results_from_rows(rows_of(["c", "a", "q"], ["z", "x", "y"], rng.dirichlet(np.ones(3), 3)))["t"]
    with pytest.raises(ComparisonError, match=r"1 only in A, e.g. 'b'; 1 only in B, e.g. 'q'"):
        _pair(a, b, False)
    assert _pair(a, b, True)[2] is False


def test_comparison_does_not_depend_on_the_row_order_of_b() -> None:
    rng = np.random.default_rng(1)
    n = 300
    ids = [f"i{k}" for k in range(n)]
    gold = [("x", "y", "z")[k] for k in rng.integers(0, 3, n)]
    pa, pb = rng.dirichlet(np.ones(3), n), rng.dirichlet(np.ones(3), n)
    perm = rng.permutation(n)
    rows_a, rows_b = rows_of(ids, gold, pa), rows_of(ids, gold, pb)
    shuffled = [rows_b[i] for i in perm]
    metrics = ["accuracy", "macro_f1", "log_loss", "brier"]
    one = compare(rows_a, rows_b, metrics=metrics, resamples=200).to_dict()
    two = compare(rows_a, shuffled, metrics=metrics, resamples=200).to_dict()
    for x, y in zip(one["tasks"]["t"]["metrics"], two["tasks"]["t"]["metrics"]):
        for field in ("diff", "ci_low", "ci_high", "p_value"):
            assert x[field] == pytest.approx(y[field], abs=1e-12, rel=1e-12)
