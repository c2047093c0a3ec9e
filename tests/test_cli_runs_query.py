"""``labledger runs --where --sort --columns``, and the table at 80 and 100 columns (ids never cut)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    d = tmp_path_factory.mktemp("runsq") / "ledger"
    ids = []
    for i, (lr, opt) in enumerate([(1e-4, "adam"), (1e-2, "sgd"), (5e-4, "adam"), (2e-4, "sgd")]):
        with labledger.start_run(
            f"digits-mlp-h{32 * (i + 1)}", group="digits-step", config={"lr": lr, "opt": opt}, ledger=d
        ) as run:
            for s in range(1, 4):
                run.log(s, loss=1.0 / s + i)
            run.set_summary(test_accuracy=0.9 + i / 100, val_accuracy=0.5)
        ids.append(run.id)
    return d, ids


CASES = [
    (["--where", "config.lr < 1e-3 and config.opt = 'adam'", "--sort", "-config.lr"], 0, ["h96", "h32"], ["h64"]),
    (
        ["--where", "config.opt = 'sgd' or name ~ 'h32$'", "--sort", "scalars.loss.min"],
        0,
        ["h32 ", "h64 ", "h128 "],
        ["h96"],
    ),
    (["--where", "lr << 3"], 2, ["invalid expression", "  lr << 3", "      ^"], []),
    (["--where", "lr < 3"], 2, ["unknown field 'lr'; did you mean 'config.lr'?"], []),
    (["--sort", "-nope"], 2, ["invalid sort: unknown field 'nope'"], []),
    (["--columns", "id,bogus"], 2, ["invalid columns: unknown field 'bogus'"], ["is null"]),
    (["--where", "config.lr > 1", "--json"], 0, ['"runs": []'], []),
]


@pytest.mark.parametrize("args,code,present,absent", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_runs_where_table(ledger, args, code, present, absent):
    d, _ = ledger
    res = CliRunner().invoke(main, ["runs", "--ledger", str(d), *args])
    assert res.exit_code == code, res.output
    for text in present:
        assert text in res.output
    for text in absent:
        assert text not in res.output
    if code == 0 and "--json" not in args:
        order = list(present)
        assert sorted(order, key=res.output.index) == order


@pytest.mark.parametrize("width", [80, 100])
def test_ids_are_never_cut(ledger, monkeypatch, width):
    d, ids = ledger
    res = CliRunner().invoke(main, ["runs", "--ledger", str(d)], env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    for rid in ids:
        assert rid in res.stdout
    assert "digits-mlp-h128" in res.stdout and "test_accuracy=0.93" in res.stdout
    assert "hidden to fit" in res.stderr


def test_columns_pick_fields_and_json_carries_them(ledger):
    d, ids = ledger
    res = CliRunner().invoke(
        main, ["runs", "--ledger", str(d), "--columns", "id,name,config.lr,scalars.loss.min", "--sort", "config.lr"]
    )
    assert res.exit_code == 0, res.output
    header = next(line for line in res.stdout.splitlines() if "config.lr" in line)
    assert header.split() == ["id", "name", "config.lr", "scalars.loss.min"]
    res = CliRunner().invoke(
        main, ["runs", "--ledger", str(d), "--columns", "id,config.opt", "--where", "config.opt = 'sgd'", "--json"]
    )
    doc = json.loads(res.stdout)
    assert [r["fields"]["config.opt"] for r in doc["runs"]] == ["sgd", "sgd"]
    assert {r["id"] for r in doc["runs"]} == {ids[1], ids[3]}
