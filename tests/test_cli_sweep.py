"""`labledger sweep`, `select-epoch`, `forensics`: tables of (arguments, exit code, expected output)."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main
from labledger.metrics.sweep import threshold_sweep

NEG, POS = "single_symbol", "cross_boundary"
GATES = ["--gate", f"recall[{NEG}]>=0.9", "--gate", f"recall[{POS}]>=0.9"]
HISTORY = [  # seed 000's shape: one entry per epoch
    {"epoch": 1, "loss": 0.74, "threshold": 0.5, "accuracy": 0.7, "f1": 0.738},
    {"epoch": 2, "loss": 0.53, "threshold": 0.5, "accuracy": 0.79, "f1": 0.788},
    {"epoch": 3, "loss": 0.41, "threshold": 0.5, "accuracy": 0.85, "f1": 0.864},
    {"epoch": 4, "loss": 0.33, "threshold": 0.5, "accuracy": 0.88, "f1": 0.864},
]


def _rows(seed: int, n: int = 600, probs: bool = True) -> list[dict]:
    rng = np.random.default_rng(seed)
    gold = rng.random(n) < 0.5
    score = np.where(gold, rng.beta(6, 2, n), rng.beta(2, 6, n)).round(4)
    rows = []
    for i in range(n):
        row = {
            "id": f"x{i}",
            "task": "boundary",
            "gold": POS if gold[i] else NEG,
            "slices": {"length": "long" if i % 3 else "short"},
        }
        if probs:
            row["probs"] = {POS: float(score[i]), NEG: float(1 - score[i])}
        else:
            row["score"] = float(score[i])
            row["positive"] = POS
        rows.append(row)
    return rows


def _write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


@pytest.fixture
def files(tmp_path):
    val = _write(tmp_path / "val.jsonl", _rows(0))
    test = _write(tmp_path / "test.jsonl", _rows(1, probs=False))
    two = _write(tmp_path / "two.jsonl", _rows(2, 20) + [dict(r, task="other") for r in _rows(3, 20)])
    ledger = tmp_path / "ledger"
    with labledger.start_run("boundary-head", ledger=ledger) as run:
        for entry in HISTORY:
            run.log_history(entry)
        run.log_results("val", val)
    return {
        "val": str(val),
        "test": str(test),
        "two": str(two),
        "ledger": str(ledger),
        "run": run.id,
        "out": str(tmp_path / "report.json"),
    }


SWEEP_CASES = [
    (
        ["sweep", "{val}", "--positive", POS, *GATES],
        0,
        ["Threshold sweep", "Selected threshold", "single_symbol_recall", "(gate)", "pass"],
    ),
    (
        ["sweep", "{val}", "--positive", POS, "--gate", "recall[length=long]>=0.5"],
        0,
        ["recall[length=long]", "Selected threshold"],
    ),
    (["sweep", "{val}", "--positive", POS, *GATES, "--test", "{test}"], 0, ["Paired test", "n=600"]),
    (
        ["sweep", "{run}:val", "--positive", POS, *GATES, "--ledger", "{ledger}"],
        0,
        ["Selected threshold", "in {run}:val"],
    ),
    (["sweep", "{val}", "--positive", POS, "--thresholds", "all", "--max-rows", "10"], 0, ["Showing 10 of"]),
    (
        ["sweep", "{val}", "--positive", POS, "--thresholds", "0.3,0.5", "--select", "accuracy"],
        0,
        ["Selected threshold"],
    ),
    (
        ["sweep", "{val}", "--positive", POS, "--gate", f"recall[{POS}]>=0.999", "--gate", f"recall[{NEG}]>=0.999"],
        0,
        ["No threshold passes every gate", "Fallback", "fail"],
    ),
    (
        [
            "sweep",
            "{val}",
            "--positive",
            POS,
            "--gate",
            f"recall[{POS}]>=0.999",
            "--gate",
            f"recall[{NEG}]>=0.999",
            "--strict",
        ],
        3,
        ["Error: no threshold passes every gate", "--strict"],
    ),
    (
        ["sweep", "{val}", "--positive", POS, "--gate", "recall[singel_symbol]>=0.97"],
        1,
        ["Error: Gate 'recall[singel_symbol]>=0.97'", "Did you mean 'single_symbol'"],
    ),
    (
        ["sweep", "{val}", "--positive", POS, "--gate", "recall[x]=>0.97"],
        1,
        ["Error: Gate 'recall[x]=>0.97' is malformed"],
    ),
    (
        ["sweep", "{val}", "--positive", POS, "--gate", "recall[lenght=long]>=0.9"],
        1,
        ["unknown slice field 'lenght'", "Did you mean 'length'"],
    ),
    (
        ["sweep", "{val}", "--positive", POS, "--thresholds", "0.1:0.2"],
        2,
        ["Invalid value for '--thresholds'", "START:STOP:STEP"],
    ),
    (
        ["sweep", "{val}", "--positive", POS, "--thresholds", "abc"],
        2,
        ["Invalid value for '--thresholds'", "'abc' is not a finite number"],
    ),
    (["sweep", "{val}", "--positive", POS, "--select", "f1score"], 2, ["Invalid value for '--select'"]),
    (["sweep", "{val}"], 1, ["--positive LABEL names the positive class"]),
    (["sweep", "{val}", "--positive", "yes"], 1, ["Unknown label", "'yes'"]),
    (["sweep", "{two}", "--positive", POS], 1, ["holds 2 tasks (boundary, other); pass --task"]),
    (["sweep", "{two}", "--positive", POS, "--task", "other"], 0, ["task 'other'"]),
    (["sweep", "missing.jsonl", "--positive", POS], 1, ["Error: missing.jsonl: no such file"]),
    (["sweep", "nope:val", "--positive", POS, "--ledger", "{ledger}"], 1, ["Error: No run 'nope'"]),
    (["sweep"], 2, ["Missing argument 'RESULTS'"]),
]


def _fill(args, files):
    return [a.format(**files) for a in args]


@pytest.mark.parametrize("args,code,expected", SWEEP_CASES, ids=[" ".join(c[0][:1] + c[0][2:6]) for c in SWEEP_CASES])
def test_sweep_table(files, args, code, expected):
    res = CliRunner(env={"COLUMNS": "250"}).invoke(main, _fill(args, files))
    assert res.exit_code == code, res.output
    for text in expected:
        assert text.format(**files) in res.output, (text, res.output)


def test_sweep_json_equals_library_and_out_file(files):
    args = ["sweep", files["val"], "--positive", POS, *GATES, "--test", files["test"], "--json", "--out", files["out"]]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # exactly one JSON document on stdout
    assert json.loads(open(files["out"]).read()) == doc
    rows, test = _rows(0), _rows(1, probs=False)
    lib = threshold_sweep(
        gold=[r["gold"] for r in rows],
        score=[r["probs"][POS] for r in rows],
        positive=POS,
        negative=NEG,
        slices={"length": [r["slices"]["length"] for r in rows]},
        gates=[GATES[1], GATES[3]],
        test_gold=[r["gold"] for r in test],
        test_score=[r["score"] for r in test],
    ).to_dict()
    assert doc["source"] == files["val"] and doc["task"] == "boundary"
    assert doc["paired_test"].pop("source") == files["test"]
    for key in (
        "threshold_trials",
        "threshold_selection",
        "paired_test",
        "n",
        "positive",
        "negative",
        "objective",
        "gates",
        "tie_break",
        "selection_rule",
        "definition",
    ):
        assert doc[key] == lib[key], key
    assert doc["threshold_selection"]["recall_gate_passed"] is True


def test_sweep_strict_json_still_prints_the_report(files):
    args = [
        "sweep",
        files["val"],
        "--positive",
        POS,
        "--gate",
        f"recall[{POS}]>=0.999",
        "--gate",
        f"recall[{NEG}]>=0.999",
        "--strict",
        "--json",
    ]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 3
    doc = json.loads(res.stdout)
    assert doc["threshold_selection"]["recall_gate_passed"] is False
    assert doc["threshold_selection"]["fallback"] is True
    assert "no threshold passes" in res.stderr


EPOCH_CASES = [
    (["select-epoch", "{run}"], 0, ["Selected epoch 3: f1 0.8640 (tied: 3, 4)", "earliest"]),
    (
        ["select-epoch", "boundary-head", "--metric", "loss", "--lower-is-better"],
        0,
        ["Selected epoch 4: loss 0.3300", "lowest loss"],
    ),
    (["select-epoch", "{run}", "--metric", "f11"], 1, ["Error: Unknown metric 'f11'", "'f1'"]),
    (["select-epoch", "nope"], 1, ["Error: No run 'nope'"]),
    (["select-epoch"], 2, ["Missing argument 'RUN'"]),
]


@pytest.mark.parametrize("args,code,expected", EPOCH_CASES, ids=[" ".join(c[0]) for c in EPOCH_CASES])
def test_select_epoch_table(files, args, code, expected):
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, [*_fill(args, files), "--ledger", files["ledger"]])
    assert res.exit_code == code, res.output
    for text in expected:
        assert text in res.output, (text, res.output)


def test_select_epoch_json(files):
    res = CliRunner().invoke(main, ["select-epoch", files["run"], "--ledger", files["ledger"], "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["selected"] == HISTORY[2] and doc["tied_epochs"] == [3, 4]
    assert doc["run"] == files["run"] and doc["metric"] == "f1"


FORENSICS = ["forensics", "--support", "379,307", "--accuracy", "0.8324", "--weighted-f1", "0.8330"]
FORENSICS_CASES = [
    (FORENSICS, 0, ["276", "331", "0.831745", "0.8317 to 0.8317", "2 candidate(s)", "arguments swapped"]),
    ([*FORENSICS, "--not-swapped"], 0, ["arguments in order"]),
    (
        ["forensics", "--support", "10,10", "--accuracy", "0.5", "--weighted-f1", "0.99"],
        0,
        ["no confusion matrix", "try --not-swapped"],
    ),
    (
        ["forensics", "--support", "10", "--accuracy", "0.5", "--weighted-f1", "0.5"],
        2,
        ["Invalid value for '--support'", "POS,NEG"],
    ),
    (
        ["forensics", "--support", "10,10", "--accuracy", "abc", "--weighted-f1", "0.5"],
        2,
        ["Invalid value for '--accuracy'"],
    ),
    (
        ["forensics", "--support", "10,10", "--accuracy", "1.5", "--weighted-f1", "0.5"],
        1,
        ["Error: The recorded accuracy must be a number in [0, 1]"],
    ),
    (
        ["forensics", "--support", "-1,10", "--accuracy", "0.5", "--weighted-f1", "0.5"],
        1,
        ["Error: support must be two non-negative whole counts"],
    ),
    (["forensics", "--accuracy", "0.5", "--weighted-f1", "0.5"], 2, ["Missing option '--support'"]),
]


@pytest.mark.parametrize("args,code,expected", FORENSICS_CASES, ids=[" ".join(c[0][1:]) for c in FORENSICS_CASES])
def test_forensics_table(args, code, expected):
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, args)
    assert res.exit_code == code, res.output
    for text in expected:
        assert text in res.output, (text, res.output)


def test_forensics_json_and_written_decimals():
    res = CliRunner().invoke(main, [*FORENSICS, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["n_candidates"] == 2 and doc["decimals"] == 4 and doc["accuracy_decimals"] == 4
    assert [(c["tp"], c["fn"], c["fp"], c["tn"]) for c in doc["candidates"]] == [
        (276, 103, 12, 295),
        (331, 48, 67, 240),
    ]
    # "0.8330" has four decimals as written, though the float is 0.833
    assert doc["recorded_weighted_f1"] == 0.833
