"""Group comparisons (seed 003) and version-table significance from stored predictions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.metrics import f1_score

import labledger
from labledger.analysis.groups import compare_groups
from labledger.cli import main

# Seed 003's per-run tables: (run, Has0_F1, Non0_F1) as each run recorded them.
SEED_003 = {
    "0617-main": [
        ("comp_has0_l02_h128_lr8e5_b12_d12", 0.8278, 0.8797),
        ("comp_has0_l02_h160_lr5e5_b8_d15", 0.8434, 0.8869),
        ("has0_h128_lr8e5_b12_d12", 0.8267, 0.8743),
        ("has0_h160_lr5e5_b8_d15", 0.8434, 0.8869),
    ],
    "0617-fd-router": [
        ("fd_router_h128_s025_lr8e5_b12_d12", 0.8359, 0.8776),
        ("fd_router_h128_s050_lr8e5_b12_d12", 0.8303, 0.8762),
        ("fd_router_h160_s025_lr5e5_b8_d15", 0.8397, 0.8820),
        ("fd_router_h160_s050_lr5e5_b8_d15", 0.8333, 0.8764),
    ],
    "0618-fd-query-boost": [
        ("fdqboost_h128_a15_lr8e5_b12_d12", 0.8439, 0.8843),
        ("fdqboost_h128_a20_lr8e5_b12_d12", 0.8403, 0.8790),
        ("fdqboost_h160_a15_lr5e5_b8_d15", 0.8437, 0.8833),
        ("fdqboost_h160_a20_lr5e5_b8_d15", 0.8416, 0.8820),
    ],
}
# ... and the group means the seed's authors computed by hand.
SEED_003_MEANS = {
    "0617-main": (0.8353, 0.8820),
    "0617-fd-router": (0.8348, 0.8780),
    "0618-fd-query-boost": (0.8424, 0.8821),
}


def test_group_means_from_recorded_values(tmp_path):
    for group, runs in SEED_003.items():
        for name, has0, non0 in runs:
            with labledger.start_run(name, group=group, ledger=tmp_path) as run:
                run.log_history({"epoch": 4, "Has0_F1_score": has0, "Non0_F1_score": non0})
    res = compare_groups(
        labledger.open_ledger(tmp_path),
        baseline="0617-main",
        groups=["0617-fd-router", "0618-fd-query-boost"],
        metrics=["has0_f1", "non0_f1"],
    )
    by = {(s["group"], s["metric"]): s for s in res.summary}
    for group, (has0, non0) in SEED_003_MEANS.items():
        assert round(by[(group, "has0_f1")]["mean"], 4) == has0
        assert round(by[(group, "non0_f1")]["mean"], 4) == non0
        assert by[(group, "has0_f1")]["runs"] == 4
        assert by[(group, "has0_f1")]["sources"] == ["recorded (history)"]
    assert by[("0618-fd-query-boost", "has0_f1")]["diff"] == pytest.approx(0.842375 - 0.835325)
    assert by[("0617-main", "has0_f1")]["diff"] is None
    res = CliRunner().invoke(
        main,
        [
            "compare-groups",
            "--baseline",
            "0617-main",
            "--group",
            "0617-fd-router",
            "--metric",
            "has0_f1",
            "--ledger",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 0 and "0.8353" in res.output and "(rec.)" in res.output


def _regression_rows(rng, n=400, noise=0.6):
    truth = np.round(rng.normal(0, 1.5, n) * 3) / 3
    pred = truth + rng.normal(0, noise, n)
    return (
        truth,
        pred,
        [
            {"id": f"s{i}", "task": "mosi", "gold": float(t), "pred": float(p)}
            for i, (t, p) in enumerate(zip(truth, pred))
        ],
    )


def test_predictions_use_the_registry_definition_not_the_swapped_one(tmp_path):
    rng = np.random.default_rng(3)
    expected = {}
    for group in ("base", "new"):
        vals = []
        for k in range(3):
            truth, pred, rows = _regression_rows(rng, noise=0.6 if group == "base" else 0.4)
            with labledger.start_run(f"{group}-{k}", group=group, ledger=tmp_path) as run:
                run.log_results("test", rows)
                # the run also recorded a Has0_F1 computed with y_true and y_pred swapped (seed 003's bug)
                run.log_history({"Has0_F1_score": f1_score(pred >= 0, truth >= 0, average="weighted")})
            vals.append(f1_score(truth >= 0, pred >= 0, average="weighted"))
        expected[group] = float(np.mean(vals))
    res = compare_groups(labledger.open_ledger(tmp_path), baseline="base", groups=["new"], metrics=["has0_f1"])
    by = {s["group"]: s for s in res.summary}
    assert by["base"]["mean"] == pytest.approx(expected["base"], abs=1e-12)
    assert by["new"]["mean"] == pytest.approx(expected["new"], abs=1e-12)
    assert by["new"]["sources"] == ["predictions (test)"]


def test_version_table_marks_significance_from_stored_predictions(tmp_path):
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 2000)
    ledger_dir = tmp_path / "ledger"
    paths = {}
    for model, acc in (("base", 0.70), ("v2", 0.80), ("v2b", 0.705)):
        correct = rng.random(2000) < acc
        pred = np.where(correct, gold, 1 - gold)
        rows = [
            {
                "id": f"i{i}",
                "task": "hover",
                "gold": ["no", "yes"][g],
                "probs": {"yes": 0.9 if p else 0.1, "no": 0.1 if p else 0.9},
            }
            for i, (g, p) in enumerate(zip(gold, pred))
        ]
        with labledger.start_run(model, ledger=ledger_dir) as run:
            paths[model] = run.log_results("public", rows)
        res = CliRunner().invoke(
            main,
            [
                "eval",
                f"{run.id}:public",
                "--metric",
                "accuracy",
                "--resamples",
                "200",
                "--save",
                f"{run.id}:public-eval",
                "--model",
                model,
                "--suite",
                "public",
                "--ledger",
                str(ledger_dir),
            ],
        )
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        main,
        [
            "table",
            "--suite",
            "public",
            "--models",
            "base,v2",
            "--delta-from",
            "base",
            "--ledger",
            str(ledger_dir),
            "--json",
        ],
    )
    doc = json.loads(res.stdout)
    [row] = doc["rows"]
    assert row["significance"] == "significant" and row["delta_ci"][0] > 0
    assert row["n"]["base"] == 2000
    res = CliRunner().invoke(
        main,
        [
            "table",
            "--suite",
            "public",
            "--models",
            "base,v2b",
            "--delta-from",
            "base",
            "--ledger",
            str(ledger_dir),
            "--format",
            "md",
        ],
    )
    assert res.exit_code == 0 and "n.s." in res.output


def test_metrics_with_parameters_are_found_in_predictions(tmp_path):
    from sklearn.metrics import f1_score, recall_score

    rng = np.random.default_rng(11)
    expected = {}
    for group in ("a", "b"):
        gold = rng.integers(0, 3, 300)
        pred = np.where(rng.random(300) < 0.7, gold, rng.integers(0, 3, 300))
        labels = ["neg", "neu", "pos"]
        rows = [
            {
                "id": f"{group}{i}",
                "task": "t",
                "gold": labels[g],
                "probs": {lab: (0.8 if j == p else 0.1) for j, lab in enumerate(labels)},
            }
            for i, (g, p) in enumerate(zip(gold, pred))
        ]
        with labledger.start_run(f"{group}-0", group=group, ledger=tmp_path) as run:
            run.log_results("test", rows)
            run.log(1, f1=0.123)  # a recorded value that must not be used instead
        expected[group] = (f1_score(gold, pred, average="macro"), recall_score(gold, pred, average="macro"))
    res = compare_groups(
        labledger.open_ledger(tmp_path),
        baseline="a",
        groups=["b"],
        metrics=["f1:average=macro", "recall:average=macro"],
    )
    by = {(s["group"], s["metric"]): s for s in res.summary}
    for group, (f1, rec) in expected.items():
        assert by[(group, "f1:average=macro")]["mean"] == pytest.approx(f1, abs=1e-12)
        assert by[(group, "recall:average=macro")]["mean"] == pytest.approx(rec, abs=1e-12)
        assert by[(group, "f1:average=macro")]["sources"] == ["predictions (test)"]
    assert res.warnings == []


def test_unfinished_runs_are_left_out_unless_asked(tmp_path):
    import os
    import subprocess
    import sys

    for group, value in (("base", 0.9), ("new", 0.9)):
        with labledger.start_run(f"{group}-ok", group=group, ledger=tmp_path) as run:
            run.log_history({"acc": value})
    script = (
        "import labledger, os\n"
        f"run = labledger.start_run('new-crashed', group='new', ledger={str(tmp_path)!r})\n"
        "run.log_history({'acc': 0.10})\nos._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, env={**os.environ})
    ledger = labledger.open_ledger(tmp_path)
    res = compare_groups(ledger, baseline="base", groups=["new"], metrics=["acc"])
    new = next(s for s in res.summary if s["group"] == "new")
    assert new["runs"] == 1 and new["mean"] == pytest.approx(0.9)
    res = compare_groups(ledger, baseline="base", groups=["new"], metrics=["acc"], include_unfinished=True)
    new = next(s for s in res.summary if s["group"] == "new")
    assert new["runs"] == 2 and new["mean"] == pytest.approx(0.5)
    assert any("which is crashed" in w for w in res.warnings)
