"""One kernel per quantity (#11): the sweep, calibration and the registry share their arithmetic,
the registry is an explicit object, tasks are one class per kind, and the library resolves
``RUN:NAME`` and reads binary tasks (what the CLI used to do itself)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import confusion_matrix as sk_confusion
from sklearn.metrics import roc_auc_score

import labledger
from labledger.calibrate.search import best_index, threshold_tables
from labledger.cli import main
from labledger.errors import (
    CalibrationError,
    DuplicateMetricError,
    MetricInputError,
    RecordError,
    RunNotFoundError,
    UnknownNameError,
)
from labledger.inputs.binary import read_binary_task
from labledger.inputs.results import (
    LabelTask,
    ProbTask,
    RankingTask,
    RegressionTask,
    SetTask,
    results_from_rows,
)
from labledger.metrics import classification as C
from labledger.metrics.prepared import MeanPrepared, TablePrepared, WeightsPrepared
from labledger.metrics.registry import REGISTRY, MetricRegistry, get_metric, list_metrics, prepare
from labledger.metrics.sweep import best_grid_point, epoch_label, select_epoch, threshold_counts, threshold_sweep
from labledger.store.refs import resolve_results


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


BINARY_ROWS = [
    {"id": str(i), "task": "t", "gold": "yes" if i % 3 else "no", "score": round((i * 37 % 100) / 100, 2)}
    for i in range(30)
]


# ------------------------------------------------------------------------------------------------
# The registry


def test_the_registry_is_built_from_the_modules_lists():
    names = {m.name for m in (*C.METRICS, *__import__("labledger.metrics.ranking").metrics.ranking.METRICS)}
    assert names <= set(REGISTRY.metrics)
    assert len(REGISTRY) == len(list_metrics()) == 33  # with the harnesses' per-item "mean" and the field metrics
    assert get_metric("f1") is REGISTRY.get("f1")


def test_a_second_metric_of_one_name_is_refused():
    reg = MetricRegistry([get_metric("accuracy")])
    with pytest.raises(DuplicateMetricError, match="'accuracy' registered twice"):
        reg.register(get_metric("accuracy"))
    with pytest.raises(labledger.LedgerError):
        MetricRegistry([get_metric("f1"), get_metric("f1")])


@pytest.mark.parametrize(
    ("name", "inputs", "cls"),
    [
        ("accuracy", {"gold": [0, 1], "pred": [0, 0]}, TablePrepared),
        ("mae", {"gold": [0.0, 1.0], "pred": [0.5, 1.0]}, MeanPrepared),
        ("roc_auc", {"gold": [0, 1, 1], "score": [0.2, 0.6, 0.4]}, WeightsPrepared),
        ("non0_f1", {"gold": [1.0, -1.0, 0.0], "pred": [1.0, 1.0, 0.0]}, TablePrepared),
    ],
)
def test_each_strategy_is_its_own_class(name, inputs, cls):
    prep = prepare(name, **inputs)
    assert isinstance(prep, cls) and prep.strategy == cls.__dataclass_fields__["strategy"].default


# ------------------------------------------------------------------------------------------------
# One count-table kernel, one ROC-AUC


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 20)), min_size=1, max_size=60),
    st.sampled_from(C.BINARY_TABLE_METRICS),
)
def test_sweep_columns_are_the_registry_values(items, name):
    gold = np.array([g for g, _ in items])
    score = np.array([s / 20 for _, s in items])
    report = threshold_sweep(gold=gold, score=score, thresholds="0:1:0.25", objective=name)
    for t, value in zip(report.thresholds, report.columns[name], strict=True):
        pred = score >= t
        if name in ("precision", "recall", "f1"):
            expected = prepare(name, gold=gold, pred=pred, average="binary", pos_label=True).value()
        else:
            expected = prepare(name, gold=gold, pred=pred).value()
        assert value == (0.0 if np.isnan(expected) else expected)  # bit for bit


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 9)), min_size=2, max_size=80))
def test_one_roc_auc(items):
    gold = np.array([g for g, _ in items])
    score = np.array([s / 9 for _, s in items])
    order = np.argsort(score, kind="stable")
    ours = C.roc_auc_sorted(gold[order], C.tie_starts(score[order]))
    if gold.all() or not gold.any():
        assert np.isnan(ours)
        return
    assert ours == C.roc_auc(gold=gold, score=score)
    assert ours == threshold_sweep(gold=gold, score=score).columns["roc_auc"][0]
    assert ours == pytest.approx(roc_auc_score(gold, score), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10)), min_size=1, max_size=50))
def test_threshold_counts_match_a_confusion_matrix(items):
    gold = np.array([g for g, _ in items])
    score = np.array([s / 10 for _, s in items])
    taus = np.array([0.0, 0.3, 0.5, 0.95, 1.0])
    c = threshold_counts(score, gold, taus)
    for i, t in enumerate(taus):
        tn, fp, fn, tp = sk_confusion(gold, score >= t, labels=[False, True]).ravel()
        assert (c["tn"][i], c["fp"][i], c["fn"][i], c["tp"][i]) == (tn, fp, fn, tp)


def test_calibration_threshold_tables_per_fold():
    rng = np.random.default_rng(0)
    s = rng.random(40)
    gold = rng.integers(0, 2, 40)
    fold = rng.integers(0, 3, 40)
    taus = np.array([0.2, 0.5, 0.8])
    tables = threshold_tables(s, gold, 1, taus, fold, 3)
    assert tables.shape == (4, 3, 4)
    for g, t in enumerate(taus):
        assert tables[0, g].tolist() == sk_confusion(gold, (s >= t).astype(int), labels=[0, 1]).ravel().tolist()
        out = fold != 0  # row 1: the items outside fold 0
        expected = sk_confusion(gold[out], (s[out] >= t).astype(int), labels=[0, 1]).ravel().tolist()
        assert tables[1, g].tolist() == expected


# ------------------------------------------------------------------------------------------------
# One best-grid-point rule


@pytest.mark.parametrize(
    ("values", "distance", "higher", "best"),
    [
        ([0.1, 0.9, 0.9], [0.0, 0.2, 0.1], True, 2),  # the tie nearest to no change
        ([0.9, 0.9], [0.2, 0.19999999999999996], True, 0),  # 0.3 and 0.7 are as far from 0.5: the first
        ([np.nan, 0.2, 0.1], [0.0, 0.5, 0.5], False, 2),  # NaN is never best; lower is better
        ([np.nan, np.nan], [0.0, 0.1], True, None),
    ],
)
def test_best_grid_point(values, distance, higher, best):
    assert best_grid_point(values, distance, higher=higher) == best


def test_calibration_uses_the_same_rule():
    assert best_index(np.array([0.9, 0.9]), True, np.array([0.2, 0.19999999999999996]), "x") == 0
    with pytest.raises(CalibrationError, match="undefined"):
        best_index(np.array([np.nan]), True, np.array([0.0]), "threshold")


def test_sweep_ties_go_to_the_centre_then_the_lowest():
    # every threshold in [0.3, 0.7] gives the same F1: 0.3 and 0.7 are equally close to 0.5
    r = threshold_sweep(gold=[0, 1], score=[0.1, 0.9], thresholds="0.3,0.7", center=0.5)
    assert r.threshold == 0.3


# ------------------------------------------------------------------------------------------------
# Tasks, one class per kind


def test_one_class_per_task_kind():
    rs = results_from_rows(
        [
            {"id": "1", "task": "c", "gold": "a", "probs": {"a": 0.6, "b": 0.4}},
            {"id": "1", "task": "b", "gold": "yes", "score": 0.7, "positive": "yes"},
            {"id": "1", "task": "r", "gold": 1.0, "pred": 0.5},
            {"id": "1", "task": "s", "gold": [1, 2], "pred": [2]},
            {"id": "1", "task": "k", "gold": {"d1": 1}, "scores": {"d1": 0.3}},
            {"id": "1", "task": "m", "gold": "x", "pred": "x"},
        ]
    )
    kinds = {name: (type(td), td.kind) for name, td in rs.items()}
    assert kinds == {
        "c": (ProbTask, "classification"),
        "b": (ProbTask, "binary"),
        "r": (RegressionTask, "regression"),
        "s": (SetTask, "sets"),
        "k": (RankingTask, "ranking"),
        "m": (LabelTask, "match"),
    }
    # the reading API before the split: another kind's field reads as its old default
    assert rs["r"].labels == () and rs["r"].probs is None and rs["m"].score is None
    with pytest.raises(AttributeError):
        _ = rs["r"].no_such_field
    sub = rs["b"].subset(np.array([True]))
    assert isinstance(sub, ProbTask) and sub.positive == "yes" and sub.score.tolist() == [0.7]


# ------------------------------------------------------------------------------------------------
# Library logic that was in the CLI


def test_resolve_results_of_a_file_and_of_a_run(tmp_path):
    path = _write(tmp_path / "val.jsonl", BINARY_ROWS)
    ref = resolve_results(path)
    assert (ref.path, ref.run_id, ref.described) == (path, None, str(path))
    with labledger.start_run("model-a", ledger=tmp_path / "ledger") as run:
        run.log_results("val", path)
    ref = resolve_results("model-a:val", tmp_path / "ledger")
    assert ref.name == "val" and ref.run_id is not None and ref.path.read_bytes() == path.read_bytes()
    assert ref.described == f"model-a:val ({ref.path})"


@pytest.mark.parametrize(
    ("ref", "error", "message"),
    [
        ("missing.jsonl", RecordError, "no such results file"),
        ("nope:val", RunNotFoundError, "nope"),
        ("model-a:test", UnknownNameError, "Known: val"),
    ],
)
def test_resolve_results_errors(tmp_path, ref, error, message):
    with labledger.start_run("model-a", ledger=tmp_path / "ledger") as run:
        run.log_results("val", BINARY_ROWS)
    with pytest.raises(error, match=message):
        resolve_results(ref if ":" in ref else tmp_path / ref, tmp_path / "ledger")


def test_read_binary_task(tmp_path):
    path = _write(tmp_path / "r.jsonl", BINARY_ROWS)
    bt = read_binary_task(path, positive="yes")
    assert (bt.task, bt.positive, bt.negative, bt.n) == ("t", "yes", "no", 30)
    assert bt.gold.tolist() == [r["gold"] for r in BINARY_ROWS]
    assert bt.score.tolist() == [r["score"] for r in BINARY_ROWS]


@pytest.mark.parametrize(
    ("rows", "kwargs", "message"),
    [
        (
            [{"id": "1", "task": "t", "gold": "a", "probs": {"a": 0.6, "b": 0.4}}],
            {"positive": "maybe"},
            "Unknown label of task 't' 'maybe'",
        ),
        (
            [{"id": "1", "task": "t", "gold": 1.0, "pred": 0.5}],
            {},
            "task 't' in .* is regression with 0 labels",
        ),
        (
            [{"id": "1", "task": "t", "gold": "a", "probs": {"a": 0.6, "b": 0.4}}],
            {},
            "--positive LABEL names the positive class",
        ),
        (
            [*BINARY_ROWS, {"id": "x", "task": "u", "gold": "no", "score": 0.1}],
            {"positive": "yes"},
            "holds 2 tasks",
        ),
    ],
)
def test_read_binary_task_errors(tmp_path, rows, kwargs, message):
    path = _write(tmp_path / "r.jsonl", rows)
    with pytest.raises((MetricInputError, UnknownNameError), match=message):
        read_binary_task(path, **kwargs)


def test_sweep_reads_a_run_results_through_the_library(tmp_path):
    path = _write(tmp_path / "val.jsonl", BINARY_ROWS)
    with labledger.start_run("model-a", ledger=tmp_path / "ledger") as run:
        run.log_results("val", path)
    args = ["sweep", "model-a:val", "--positive", "yes", "--ledger", str(tmp_path / "ledger"), "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    direct = threshold_sweep(
        gold=[r["gold"] for r in BINARY_ROWS], score=[r["score"] for r in BINARY_ROWS], positive="yes", negative="no"
    )
    assert doc["threshold_selection"]["threshold"] == direct.threshold
    assert doc["source"].startswith("model-a:val (")


# ------------------------------------------------------------------------------------------------
# Epochs as a person reads them


@pytest.mark.parametrize(
    ("epoch", "index", "label"),
    [
        (3, 2, "3"),
        (8.0, 7, "8"),
        (7.999530102790015, 11, "8 (history entry 12, epoch 7.9995)"),
        (1.5, 0, "1.5 (history entry 1)"),
        ("final", 4, "final"),
    ],
)
def test_epoch_label(epoch, index, label):
    assert epoch_label(epoch, index) == label


def test_select_epoch_prints_a_whole_epoch(tmp_path):
    history = [{"epoch": e + 0.999530102790015, "f1": f} for e, f in enumerate([0.5, 0.9, 0.7])]
    with labledger.start_run("fractional", ledger=tmp_path / "ledger") as run:
        for entry in history:
            run.log_history(entry)
    res = CliRunner().invoke(main, ["select-epoch", "fractional", "--ledger", str(tmp_path / "ledger")])
    assert res.exit_code == 0, res.output
    assert "Selected epoch 2 (history entry 2, epoch 1.9995): f1 0.9000." in res.stdout
    assert "7.99" not in res.stdout and "1.999530102790015" not in res.stdout
    assert select_epoch(history).index == 1
