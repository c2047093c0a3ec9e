"""The calibration report's fast paths (#19) against the slow forms they replace, on random data
with ties: the out-of-fold pass without copying the task, ids kept in Arrow until read, and the
report of a file read from Arrow equal to the report of the same rows read as dicts."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labledger.calibrate as cal
from labledger.calibrate.fitting import make_folds, out_of_fold
from labledger.calibrate.methods import Scores, Step, apply_steps, task_arrays
from labledger.inputs.results import defer_ids, results_from_rows

FAST = settings(max_examples=25, deadline=None)
LABELS = ("a", "b", "c")


def _rows(rng: np.random.Generator, n: int, coarse: bool) -> list[dict]:
    probs = rng.dirichlet(np.ones(3), n)
    if coarse:  # few values: ties between labels and between items
        probs = np.round(probs * 4) / 4 + 0.05
        probs /= probs.sum(axis=1, keepdims=True)
    gold = rng.integers(0, 3, n)
    return [
        {
            "id": f"i{i}",
            "task": "t",
            "gold": LABELS[g],
            "probs": dict(zip(LABELS, map(float, p))),
            "logits": dict(zip(LABELS, map(float, np.log(p)))),
            "kind": {"a": "x", "b": "y", "c": "x"},
        }
        for i, (g, p) in enumerate(zip(gold.tolist(), probs))
    ]


def _slow_out_of_fold(per_row: list[list[Step]], arr, fold: np.ndarray, k: int) -> Scores:
    """The pass before #19: each fold's whole task copied (``take``), then the steps applied."""
    p, pred = np.empty_like(arr.probs), np.empty_like(arr.pred)
    for f in range(k):
        idx = np.flatnonzero(fold == f)
        held = arr.take(idx)
        st_ = apply_steps(per_row[f + 1], held.scores(), held)
        p[idx], pred[idx] = st_.p, st_.pred
    return Scores(p, pred)


CHAINS = [
    [("prior_multiplier", {"weights": {"a": 1.0, "b": 1.5, "c": 0.7}})],
    [("temperature", {"T": 1.7})],
    [("option_damping", {"alpha": 0.5, "pattern": "b"})],
    [("option_damping", {"alpha": 0.6, "field": "kind", "pattern": "x"})],
    [("em_prior_shift", {"source_prior": {"a": 0.2, "b": 0.5, "c": 0.3}})],
    [("temperature", {"T": 0.8}), ("prior_multiplier", {"weights": {"a": 2.0, "b": 1.0, "c": 1.0}})],
]


@FAST
@given(seed=st.integers(0, 2**32 - 1), chain=st.integers(0, len(CHAINS) - 1), coarse=st.booleans())
def test_out_of_fold_equals_the_pass_that_copies_each_fold(seed: int, chain: int, coarse: bool) -> None:
    rng = np.random.default_rng(seed)
    rows = _rows(rng, int(rng.integers(10, 80)), coarse)
    k = int(rng.integers(2, 5))
    arr = task_arrays(results_from_rows(rows)["t"], [Step(m, dict(p)) for m, p in CHAINS[chain]])
    fold = make_folds(np.arange(arr.n), k, seed % 97)
    per_row = [[Step(m, {**p}) for m, p in CHAINS[chain]] for _ in range(k + 1)]
    fast, slow = out_of_fold(per_row, arr, fold, k), _slow_out_of_fold(per_row, arr, fold, k)
    assert np.array_equal(fast.p, slow.p) and np.array_equal(fast.pred, slow.pred)


def test_ids_stay_in_arrow_until_read_and_read_back_the_same() -> None:
    rows = _rows(np.random.default_rng(1), 12, False)
    td = results_from_rows(rows)["t"]
    want = td.ids.copy()
    defer_ids(td, pa.array(want.tolist()))
    arr = task_arrays(td, [])
    assert "ids" not in vars(arr) and "ids" not in vars(td)
    sub = arr.take(np.array([5, 0, 7]))
    pt = sub.task_data()
    assert "ids" not in vars(sub) and "ids" not in vars(pt)
    assert pt.ids.tolist() == ["i5", "i0", "i7"] and sub.ids.tolist() == ["i5", "i0", "i7"]
    assert arr.ids.tolist() == want.tolist() and "ids" in vars(arr)
    assert arr.take(np.array([1])).ids.tolist() == ["i1"]  # (ids already read: taken as an array)
    with pytest.raises(AttributeError, match="no attribute 'idz'"):
        _ = arr.idz


def test_a_report_from_arrow_ids_equals_the_report_from_dict_rows(tmp_path) -> None:
    """The same file read through the columnar path (ids deferred) and as Python rows: one document."""
    rows = _rows(np.random.default_rng(2), 400, True)
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    rec = cal.fit(str(path), method="prior_multiplier", crossfit=3)
    from_file = cal.report(str(path), rec, resamples=50).to_dict()
    from_rows = cal.report(rows, rec, resamples=50, display=str(path)).to_dict()
    for doc in (from_file, from_rows):
        doc.pop("sha256")
    body_f, body_r = from_file["tasks"]["t"], from_rows["tasks"]["t"]
    assert body_f["slices"] == body_r["slices"] and body_f["metrics"] == body_r["metrics"]
    assert body_f["reliability"] == body_r["reliability"]


_REPORT_SCRIPT = r"""
import sys
import numpy as np
import labledger.calibrate as cal
rng = np.random.default_rng(5)
n = 20_000
gold = rng.integers(0, 3, n)
logits = rng.normal(0, 1, (n, 3)) + 1.5 * np.eye(3)[gold]
probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
rows = [{"id": i, "task": "t", "gold": "abc"[g], "probs": dict(zip("abc", map(float, p)))}
        for i, (g, p) in enumerate(zip(gold.tolist(), probs))]
rec = cal.fit(rows, method="prior_multiplier", crossfit=3)
doc = cal.report(rows, rec, resamples=200).to_dict()
doc["recipe"].pop("created")  # (the fit's time)
sys.stdout.write(repr(doc))
"""


def test_the_report_is_the_same_whatever_blas_thread_count() -> None:
    """The joint ECE draws (a Cholesky and a product of ~500 dimensions) ran on OpenBLAS's threads,
    whose number (the machine's cores) changed their last bits; the report now runs them on one."""
    from blas_threads import outputs_by_blas_threads

    docs = outputs_by_blas_threads(_REPORT_SCRIPT)
    assert docs[0] == docs[1] == docs[2]


def test_a_report_that_shares_equal_variants_equals_one_that_computes_each(monkeypatch) -> None:
    """Cross-fitted scores equal to the calibrated ones (at large n every fold picks the same
    weights) share their prepared metrics and reliability bins; computing each variant on its own
    gives the same document (#19)."""
    from labledger.calibrate import reporting

    def same_as_calibrated(steps, arr, head, **kw):  # (every fold fitted alike)
        return apply_steps(steps, arr.scores(), arr), "item"

    monkeypatch.setattr(reporting, "crossfit_scores", same_as_calibrated)
    rows = _rows(np.random.default_rng(11), 3000, False)
    rec = cal.fit(rows, method="prior_multiplier", crossfit=3)
    docs = []
    for same in (reporting._same_scores, lambda a, b: a is b):
        monkeypatch.setattr(reporting, "_same_scores", same)
        doc = cal.report(rows, rec, resamples=100).to_dict()
        doc["recipe"].pop("created", None)
        docs.append(doc)
    body = docs[0]["tasks"]["t"]
    assert body["slices"]["variant"]["cross-fitted"] == body["slices"]["variant"]["calibrated"]
    assert body["reliability"]["cross_fitted_bins"] == body["reliability"]["bins"]
    assert docs[0] == docs[1]
