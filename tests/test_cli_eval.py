"""`labledger eval` and `labledger compare`: tables of (arguments, exit code, expected output)."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main

LABELS = ("SUPPORTED", "NOT_SUPPORTED")


def _rows(seed: int, n: int = 120, flip: float = 0.0, start: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(start, start + n):
        gold = LABELS[i % 2]
        p = float(np.clip(rng.normal(0.75, 0.15), 0.01, 0.99))
        if rng.random() < flip:
            p = 1 - p
        other = LABELS[1 - i % 2]
        rows.append(
            {
                "id": f"h{i}",
                "task": "hover",
                "gold": gold,
                "probs": {gold: round(p, 4), other: round(1 - p, 4)},
                "slices": {"current": ["-1", "0", "+1"][i % 3]},
            }
        )
    return rows


def _write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return str(path)


@pytest.fixture
def env(tmp_path):
    a = _write(tmp_path / "a.jsonl", _rows(0))
    b = _write(tmp_path / "b.jsonl", _rows(0, flip=0.3))
    other = _write(tmp_path / "other.jsonl", _rows(0, start=6))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "task": "t", "gold": "maybe", "probs": {"yes": 0.5, "no": 0.5}}\n')
    ledger = tmp_path / "ledger"
    with labledger.start_run("hover-model", ledger=ledger) as run:
        run.log_results("test", a)
    return {"a": a, "b": b, "other": other, "bad": str(bad), "ledger": str(ledger), "run": run.id}


CASES = [
    (
        ["eval", "{a}"],
        0,
        [
            "task 'hover' (classification, n=120)",
            "accuracy *",
            "95% CI",
            "per label",
            "confusion matrix",
            "1,000 bootstrap resamples",
        ],
    ),
    (
        ["eval", "{a}", "--metric", "accuracy", "--metric", "f1:average=macro", "--by", "current"],
        0,
        [
            "task 'hover' by current (95% CI)",
            " metric             current   n   value            95% CI",
            " accuracy           +1       40  0.9250  [0.8500, 1.0000]",
            "                    -1       40  0.9250  [0.8250, 1.0000]",
            " f1[average=macro]  +1       40  0.9246  [0.7998, 0.9750]",
        ],
    ),
    (
        ["eval", "{a}", "--metric", "accuracy", "--definitions", "--resamples", "0"],
        0,
        ["Fraction of items whose predicted label"],
    ),
    (
        ["eval", "{a}", "--metric", "recall:average=binary,pos_label=SUPPORTED", "--ci", "0.9"],
        0,
        ["recall[average=binary,pos_label=SUPPORTED]", "90% CI"],
    ),
    (
        ["eval", "{run}:test", "--metric", "accuracy", "--ledger", "{ledger}"],
        0,
        ["Results: {run}:test", "task 'hover'"],
    ),
    (["eval", "{a}", "--metric", "f1score"], 1, ["Error: Unknown metric 'f1score'. Did you mean 'f1'?"]),
    (["eval", "{a}", "--metric", "mae"], 1, ["Error: metric 'mae' applies to regression tasks"]),
    (["eval", "{a}", "--by", "curent"], 1, ["Error: Unknown slice field 'curent'. Did you mean 'current'?"]),
    (["eval", "{bad}"], 1, ["Error: ", "bad.jsonl:1: field 'gold' must be one of the labels"]),
    (["eval", "missing.jsonl"], 1, ["Error: missing.jsonl: no such results file"]),
    (["eval", "{run}:nope", "--ledger", "{ledger}"], 1, ["Error: Unknown result set"]),
    (["eval", "{a}", "--ci", "1.5"], 2, ["Invalid value for '--ci'"]),
    (["eval", "{a}", "--save", "nocolon"], 2, ["expected RUN:NAME"]),
    (
        ["compare", "{a}", "{b}", "--metric", "accuracy", "--metric", "macro_f1"],
        0,
        ["paired, n=120", "A - B", "McNemar p", "(b="],
    ),
    (
        ["compare", "{a}", "{other}", "--metric", "accuracy"],
        1,
        ["Error: task 'hover': the item sets differ", "6 only in A", "'h0', 'h1', 'h2', 'h3', 'h4'", "--unpaired"],
    ),
    (["compare", "{a}", "{other}", "--metric", "accuracy", "--unpaired"], 0, ["unpaired, n_A=120, n_B=120"]),
    (["compare", "{a}", "{b}", "--metric", "acuracy"], 1, ["Did you mean 'accuracy'"]),
]


@pytest.mark.parametrize("args, code, expected", CASES, ids=[" ".join(c[0][:4]) for c in CASES])
def test_cli_table(env, args, code, expected):
    args = [a.format(**env) for a in args]
    result = CliRunner().invoke(main, args)
    out = result.output
    assert result.exit_code == code, out
    for text in expected:
        assert text.format(**env) in out, out


def test_eval_json_is_one_document(env):
    result = CliRunner().invoke(main, ["eval", env["a"], "--metric", "accuracy", "--by", "current", "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    entry = doc["tasks"]["hover"]["metrics"][0]
    assert entry["metric"] == "accuracy" and entry["definition"] and entry["ci_low"] <= entry["value"]
    assert set(doc["tasks"]["hover"]["slices"]["current"]) == {"-1", "0", "+1"}


def test_eval_save_stores_the_evaluation(env):
    result = CliRunner().invoke(
        main,
        [
            "eval",
            f"{env['run']}:test",
            "--metric",
            "accuracy",
            "--metric",
            "macro_f1",
            "--save",
            f"{env['run']}:test-eval",
            "--ledger",
            env["ledger"],
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Saved evaluation" in result.output
    ledger = labledger.open_ledger(env["ledger"])
    doc = ledger.run(env["run"]).evaluation("test-eval")
    assert doc["tasks"]["hover"]["metrics"][0]["metric"] == "accuracy"
    values = {v["metric"]: v for v in ledger.metric_values(env["run"])}
    assert values["f1"]["params"] == {"average": "macro", "pos_label": None, "zero_division": 0.0}
    assert values["accuracy"]["ci_low"] <= values["accuracy"]["value"] <= values["accuracy"]["ci_high"]


def test_compare_json(env):
    result = CliRunner().invoke(main, ["compare", env["a"], env["b"], "--metric", "accuracy", "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    entry = doc["tasks"]["hover"]["metrics"][0]
    assert doc["kind"] == "comparison" and entry["mcnemar"]["method"]
    assert entry["diff"] == pytest.approx(entry["a"] - entry["b"])


def test_eval_reduces_repeat_rows_per_item_instead_of_refusing_duplicate_ids(tmp_path):
    """Rows with an 'epoch' field and repeated ids: n counts questions, K the attempts (#16)."""
    rows = [
        {"id": i, "task": "t", "gold": "y", "pred": "y" if (i * 7 + e * 3) % 5 else "n", "epoch": e}
        for i in range(40)
        for e in range(3)
    ]
    path = tmp_path / "repeats.jsonl"
    _write(path, rows)
    res = CliRunner().invoke(main, ["eval", str(path), "--json", "--resamples", "200"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    [m] = doc["tasks"]["t"]["metrics"]
    assert doc["kind"] == "repeats" and doc["repeat_field"] == "epoch"
    assert (m["metric"], m["n"], m["k"], m["reduction"]) == ("accuracy", 40, 3, "mean")
    correct = np.array([[r["pred"] == "y" for r in rows if r["id"] == i] for i in range(40)], dtype=float)
    assert m["value"] == pytest.approx(correct.mean())
    best = json.loads(CliRunner().invoke(main, ["eval", str(path), "--json", "--repeats", "max"]).output)
    assert best["tasks"]["t"]["metrics"][0]["value"] == pytest.approx(correct.max(axis=1).mean())
    shown = CliRunner().invoke(main, ["eval", str(path), "--resamples", "100"])
    assert shown.exit_code == 0 and "repeats by 'epoch'" in shown.output and "n items" in shown.output
    # without a repeat field, a duplicate id is still an error naming the line
    _write(path, [{k: v for k, v in r.items() if k != "epoch"} for r in rows])
    bad = CliRunner().invoke(main, ["eval", str(path)])
    assert bad.exit_code == 1 and "duplicate id" in bad.output
