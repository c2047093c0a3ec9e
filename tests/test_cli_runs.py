"""`labledger runs`, `show`, `export`: tables of (arguments, exit code, expected output)."""

from __future__ import annotations

import csv
import json

import orjson
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import make_batch

import labledger
from labledger.cli import main


@pytest.fixture
def ledger(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("alpha", group="g1", tags=["x"], config={"lr": 0.1}, ledger=d) as run:
        for s in range(1, 6):
            run.log(s, loss=1.0 / s, lr=0.1)
        for mb in range(1, 4):
            run.log_batch(make_batch(mb, n=2))
        run.log_history({"step": 5, "loss": 0.3})
        ck = tmp_path / "ck.bin"
        ck.write_bytes(b"weights")
        run.log_checkpoint(ck, step=5)
        run.set_summary(test_accuracy=0.875)
    with pytest.raises(RuntimeError), labledger.start_run("beta", group="g2", ledger=d) as run2:
        run2.log(1, loss=2.0)
        raise RuntimeError("out of memory")
    return d, run.id, run2.id


CASES = [
    (["runs"], 0, ["alpha", "beta", "finished", "failed", "test_accuracy=0.875"]),
    (["runs", "--group", "g1"], 0, ["alpha"]),
    (["runs", "--tag", "x"], 0, ["alpha"]),
    (["runs", "--status", "failed"], 0, ["beta"]),
    (["runs", "--status", "bogus"], 2, ["Invalid value for '--status'"]),
    (["show", "alpha"], 0, ["alpha", "finished", "lr", "checkpoints", "records"]),
    (["show", "beta"], 0, ["failed", "RuntimeError: out of memory"]),
    (["show", "gamma"], 1, ["Error: No run 'gamma'"]),
    (["show"], 2, ["Missing argument 'RUN'"]),
    (["export", "alpha", "--what", "nope", "--out", "x.jsonl"], 2, ["unknown kind 'nope'"]),
    (["export", "alpha", "--what", "results", "--out", "x.jsonl"], 1, ["has result sets []"]),
]


@pytest.mark.parametrize("args,code,expected", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_cli_table(ledger, tmp_path, monkeypatch, args, code, expected):
    d, _, _ = ledger
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, [*args, "--ledger", str(d)] if len(args) > 1 or args == ["runs"] else args)
    assert res.exit_code == code, res.output
    for text in expected:
        assert text in res.output


def test_ledger_from_env_and_default(ledger, tmp_path, monkeypatch):
    d, _, _ = ledger
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["runs"], env={"LABLEDGER_DIR": str(d)})
    assert res.exit_code == 0 and "alpha" in res.output
    res = CliRunner().invoke(main, ["runs"], env={"LABLEDGER_DIR": ""})
    assert res.exit_code == 1 and "No ledger at .labledger" in res.output


def test_runs_json_is_one_document(ledger):
    d, rid, _ = ledger
    res = CliRunner().invoke(main, ["runs", "--json", "--ledger", str(d)])
    doc = json.loads(res.stdout)
    assert {r["name"] for r in doc["runs"]} == {"alpha", "beta"}
    alpha = next(r for r in doc["runs"] if r["id"] == rid)
    assert alpha["summary"]["steps"] == 5 and alpha["summary"]["headline"] == {"test_accuracy": 0.875}


def test_show_json(ledger):
    d, rid, _ = ledger
    res = CliRunner().invoke(main, ["show", rid[:-1], "--json", "--ledger", str(d)])
    doc = json.loads(res.stdout)
    assert doc["id"] == rid
    assert doc["counts"] == {"scalars": 5, "batches": 3, "history": 1, "checkpoints": 1, "notes": 0}
    assert doc["config"] == {"lr": 0.1}
    assert doc["last_scalars"]["loss"] == {"value": 0.2, "step": 5}
    assert len(doc["checkpoints"][0]["sha256"]) == 64


@pytest.mark.parametrize("what", ["scalars", "batches", "samples", "history", "checkpoints"])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_export_round_trip(ledger, tmp_path, what, fmt):
    d, rid, _ = ledger
    out = tmp_path / f"out.{fmt}"
    res = CliRunner().invoke(
        main, ["export", rid, "--what", what, "--format", fmt, "--out", str(out), "--ledger", str(d)]
    )
    assert res.exit_code == 0, res.output
    view = labledger.open_ledger(d).run(rid)
    expected = list(view.records(what))
    if fmt == "jsonl":
        got = [orjson.loads(line) for line in out.read_bytes().splitlines()]
        assert got == expected
    elif fmt == "parquet":
        assert pq.read_table(out).num_rows == len(expected)
    else:
        with open(out, newline="") as f:
            assert len(list(csv.DictReader(f))) == len(expected)


def test_python_m_entry_point(ledger):
    import subprocess
    import sys

    d, _, _ = ledger
    res = subprocess.run(
        [sys.executable, "-m", "labledger", "runs", "--ledger", str(d), "--json"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["runs"]) == 2


def test_a_ledger_that_cannot_be_created_is_one_line(tmp_path):
    """`--ledger` under a file (or anywhere mkdir fails): one line, exit 1, from the CLI and the API."""
    blocker = tmp_path / "entries.csv"
    blocker.write_text("model,suite,benchmark,metric,value\nbase,public,mmlu,accuracy,0.5\n")
    res = CliRunner().invoke(main, ["table", "import", str(blocker), "--ledger", str(blocker / "ledger")])
    assert res.exit_code == 1 and res.output.startswith("Error: cannot create a ledger at "), res.output
    assert len(res.output.splitlines()) == 1
    with pytest.raises(labledger.LedgerError, match="cannot create a ledger at .*: Not a directory"):
        labledger.start_run("x", ledger=blocker / "ledger")
