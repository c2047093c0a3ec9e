"""``compare``'s fast paths (#19): ids still in Arrow compared in Arrow, the two sides read and
prepared in two threads, each column sorted once for all metrics: the same document as the plain
path (rows in memory, one side after the other), and A's error first when both sides fail."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.analysis.comparison import _same_arrow_ids, compare
from labledger.errors import LedgerError
from labledger.inputs.results import defer_ids, deferred_ids, read_results, results_from_rows


def _rows(rng: np.random.Generator, n: int, ids: list[str], digits: int) -> list[dict]:
    gold = rng.integers(0, 3, n)
    probs = rng.dirichlet(np.ones(3), n).round(digits)
    probs[np.arange(n), gold] += 0.3
    probs /= probs.sum(axis=1, keepdims=True)
    return [
        {"id": i, "task": "t", "gold": "xyz"[g], "probs": dict(zip("xyz", map(float, p)))}
        for i, g, p in zip(ids, gold.tolist(), probs)
    ]


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(40, 120), digits=st.sampled_from([1, 3, 8]))
def test_files_compare_as_rows_do(tmp_path_factory, seed, n, digits):
    tmp = tmp_path_factory.mktemp("c")
    rng = np.random.default_rng(seed)
    ids = [f"q{i}" for i in range(n)]
    ra = _rows(rng, n, ids, digits)
    rb = [dict(r, probs=p["probs"]) for r, p in zip(ra, _rows(rng, n, ids, digits))]  # same gold
    fa, fb = _write(tmp / "a.jsonl", ra), _write(tmp / "b.jsonl", rb)
    order = rng.permutation(n)
    fb_shuffled = _write(tmp / "b2.jsonl", [rb[i] for i in order])
    want = compare(ra, rb, resamples=200).to_dict()
    for other in (fb, fb_shuffled):
        got = compare(fa, other, resamples=200).to_dict()
        for key in ("a", "b"):
            got.pop(key), want.pop(key, None)
        assert got == want


@pytest.mark.accelerator
def test_arrow_ids_are_compared_in_arrow_only_when_both_are_deferred(tmp_path):
    rows = _rows(np.random.default_rng(0), 30, [f"i{j}" for j in range(30)], 3)
    a = read_results(_write(tmp_path / "a.jsonl", rows))["t"]
    b = read_results(_write(tmp_path / "b.jsonl", rows))["t"]
    assert deferred_ids(a) is not None and _same_arrow_ids(a, b)
    assert deferred_ids(a) is not None  # (not materialised by the check)
    c = results_from_rows(rows)["t"]
    assert not _same_arrow_ids(a, c)  # (ids in Python: the element-wise check decides)
    defer_ids(c, pa.chunked_array([[f"i{j}" for j in range(15)], [f"i{j}" for j in range(15, 30)]]))
    assert _same_arrow_ids(a, c) and _same_arrow_ids(c, a)
    defer_ids(c, pa.array([f"i{j}" for j in range(29)] + ["other"]))
    assert not _same_arrow_ids(a, c)
    defer_ids(c, pa.array(range(30)))
    assert not _same_arrow_ids(a, c)


def test_when_both_sides_fail_a_error_is_raised(tmp_path):
    with pytest.raises(LedgerError, match="a_missing"):
        compare(str(tmp_path / "a_missing.jsonl"), str(tmp_path / "b_missing.jsonl"))
    rows = _rows(np.random.default_rng(1), 20, [f"i{j}" for j in range(20)], 3)
    with pytest.raises(LedgerError, match="b_missing"):
        compare(rows, str(tmp_path / "b_missing.jsonl"))


@settings(max_examples=200, deadline=None)
@given(x=st.floats(-10, 60), df=st.floats(1e5, 1e9))
def test_t_tail_expansion_equals_scipy(x, df):
    """The large-df t tail (no scipy import) against scipy's: 4e-16 absolute, 1e-12 relative while
    x^4 <= 1e-3 df."""
    from scipy import special as sp

    from labledger.metrics.stats import t_sf

    got, want = t_sf(x, df), float(sp.stdtr(df, -x))
    assert abs(got - want) <= 4e-16
    if x**4 <= 1e-3 * df:
        assert abs(got - want) <= 1e-12 * want


def test_a_paired_t_test_at_1e5_items_imports_no_scipy_special():
    """A paired analytic test of a mean at 1e5+ items (t on n-1 df) needs no scipy (0.3 s of start-up)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np; from labledger.metrics import prepare; "
        "from labledger.metrics.analytic import paired_analytic; "
        "rng = np.random.default_rng(0); g = rng.integers(0, 2, 100_001); "
        "a, b = (prepare('brier', gold=g, score=rng.random(100_001)) for _ in range(2)); "
        "r = paired_analytic(a, b); print(0 < r.p_value < 1, 'scipy.special' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]


_COMPARE_SCRIPT = r"""
import sys
import numpy as np
from labledger.analysis.comparison import compare
rng = np.random.default_rng(7)
n = 60_000
gold = rng.integers(0, 3, n)
def rows(shift):
    logits = rng.normal(0, 1, (n, 3)) + shift * np.eye(3)[gold]
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return [{"id": i, "task": "t", "gold": "abc"[g], "probs": dict(zip("abc", map(float, p)))}
            for i, (g, p) in enumerate(zip(gold.tolist(), probs))]
sys.stdout.write(repr(compare(rows(1.5), rows(1.2), resamples=200).to_dict()))
"""


def test_compare_is_the_same_whatever_blas_thread_count() -> None:
    """The analytic SEs' dot products ran on OpenBLAS's threads, whose number (the machine's cores)
    changed their last bits; compare now runs them on one (#19)."""
    from blas_threads import outputs_by_blas_threads

    docs = outputs_by_blas_threads(_COMPARE_SCRIPT)
    assert docs[0] == docs[1] == docs[2]
