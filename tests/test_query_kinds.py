"""A query that no run could match because of a value's type is an error, a partial one a warning,
and the metric key `labledger eval` prints is a query field (#43)."""

from __future__ import annotations

import json
import warnings

import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main
from labledger.errors import QueryWarning
from labledger.store.query import QueryError


def _ledger(root):
    with labledger.start_run("text-lr", config={"lr": "0.01", "opt": "adam"}, ledger=root) as run:
        run.log(1, loss=1.0)
    with labledger.start_run("num-lr", config={"lr": 0.1, "opt": "sgd", "deep": True}, ledger=root) as run:
        run.log(1, loss=2.0)
    return str(root)


def test_a_comparison_no_run_can_match_is_an_error_naming_the_type(tmp_path):
    root = _ledger(tmp_path)
    r = CliRunner().invoke(main, ["runs", "--ledger", root, "--where", "config.opt < 3"])
    assert r.exit_code == 2
    assert r.output.splitlines() == [
        "Error: invalid expression: 'config.opt' holds text, never numbers: compare it with a quoted value",
        "  config.opt < 3",
        "  ^",
    ]
    book = labledger.open_ledger(root)
    with pytest.raises(QueryError, match="'scalars.loss.last' holds numbers, never text: compare it with a number"):
        book.runs(where="name = 'x' or scalars.loss.last = 'x'")
    with pytest.raises(QueryError, match="'config.deep' holds booleans, never numbers: compare it with true or false"):
        book.runs(where="config.deep = 1")
    assert [i.name for i in book.runs(where="config.opt in ('sgd', 1)")] == ["num-lr"]  # one kind is held


def test_a_comparison_some_runs_cannot_match_warns(tmp_path):
    book = labledger.open_ledger(_ledger(tmp_path))
    with pytest.warns(QueryWarning, match=r"'config.lr' holds text in 1 run\(s\) \(e.g. '0.01'\)"):
        assert [i.name for i in book.runs(where="config.lr < 0.5")] == ["num-lr"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [i.name for i in book.runs(where="config.opt = 'adam'")] == ["text-lr"]


def test_the_key_eval_prints_is_a_query_field_and_old_ledgers_get_it(tmp_path):
    root = tmp_path / "l"
    with labledger.start_run("m", ledger=root) as run:
        rows = [{"id": str(i), "task": "t", "gold": "ab"[i % 2], "pred": "ab"[(i // 3) % 2]} for i in range(30)]
        run.log_results("test", rows)
    r = CliRunner()
    ev = r.invoke(main, ["eval", "m:test", "--metric", "f1:average=macro", "--save", "m:ev", "--ledger", str(root)])
    assert ev.exit_code == 0 and "f1[average=macro]" in ev.output
    for key in ("f1[average=macro]", "f1[average=macro,zero_division=0]", "t.f1[average=macro]"):
        out = r.invoke(main, ["runs", "--ledger", str(root), "--where", f"eval.ev.{key} > 0", "--json"])
        assert out.exit_code == 0 and [x["name"] for x in json.loads(out.output)["runs"]] == ["m"], (key, out.output)
    # a ledger from before the short keys: its index lacks them until the migration recomputes them
    book = labledger.open_ledger(root)
    old = {
        k: v
        for k, v in json.loads(book.db.execute("SELECT eval_fields FROM runs").fetchone()[0]).items()
        if "zero_division" in k or "[" not in k
    }
    with book.db:
        book.db.execute("UPDATE runs SET eval_fields = ?", (json.dumps(old),))
        book.db.execute("DELETE FROM _migrations WHERE name = 'm009_eval_field_short_keys'")
    book.close()
    out = r.invoke(main, ["runs", "--ledger", str(root), "--where", "eval.ev.f1[average=macro] > 0", "--json"])
    assert out.exit_code == 0 and [x["name"] for x in json.loads(out.output)["runs"]] == ["m"], out.output
