"""``labledger diff A B``: runs that differ in nested config, environment, data, scalars and evaluations."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

import labledger
from labledger.analysis.rundiff import diff_runs
from labledger.cli import main
from labledger.store.jsonl import read_json, write_json


def rows(flip: int) -> list[dict]:
    return [
        {"id": f"x{i}", "task": "t", "gold": "a" if i % 2 else "b", "pred": "a" if i % flip else "b"} for i in range(40)
    ]


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    d = tmp_path_factory.mktemp("diff") / "ledger"
    ids = []
    for h, flip in ((32, 3), (128, 2)):
        with labledger.start_run(
            f"mlp-h{h}",
            config={
                "model": {"hidden": h, "act": "relu"},
                "optim": {"lr": 1e-3},
                "mixture": {"web": 0.5, "code": 0.5},
                "<script>": "x</td>",
            },
            ledger=d,
        ) as run:
            for s in range(1, 4):
                run.log(s, loss=1.0 / s / h)
            run.log_results("test", rows(flip))
        ids.append(run.id)
    first = read_json(d / "runs" / ids[0] / "run.json")
    first["git"] = {"commit": "000aaa", "dirty": False}
    write_json(d / "runs" / ids[0] / "run.json", first)
    meta = read_json(d / "runs" / ids[1] / "run.json")
    meta["git"] = {"commit": "abc123", "dirty": True}
    meta["packages"] = {**(meta.get("packages") or {}), "torch": "9.9.9"}
    write_json(d / "runs" / ids[1] / "run.json", meta)
    return d, ids


def test_only_what_differs(two):
    d, ids = two
    doc = diff_runs(labledger.open_ledger(d), ids[0], ids[1], resamples=200)
    assert [(c["key"], c["a"], c["b"], c.get("delta")) for c in doc["config"]] == [("model.hidden", 32, 128, 96)]
    env = {c["key"]: (c["a"], c["b"]) for c in doc["environment"]}
    assert env["git.commit"][1] == "abc123" and env["git.dirty"][1] is True
    assert env["packages.torch"][1] == "9.9.9"
    assert "python" not in env and "host" not in env
    assert doc["data"] == []  # same mixture and row count (a result set's sha256 covers its predictions: not data)
    keys = {c["key"] for c in doc["scalars"]}
    assert {"loss.last", "loss.min", "loss.max"} <= keys
    (cmp,) = doc["comparisons"]
    assert cmp["paired"] is True and cmp["results"] == "test"
    acc = cmp["metrics"][0]
    assert acc["diff"] == pytest.approx(acc["b"] - acc["a"])
    # each row states its paired n and how its interval was formed, as compare's document does
    direct = labledger.compare(
        str(labledger.open_ledger(d).run(ids[1]).results_path("test")),
        str(labledger.open_ledger(d).run(ids[0]).results_path("test")),
        resamples=200,
    )
    want = {m.key: (m.n, m.method) for t in direct.doc.tasks.values() for m in t.metrics}
    assert {m["metric"]: (m["n"], m["method"]) for m in cmp["metrics"]} == want
    assert all(m["n"] == len(rows(2)) for m in cmp["metrics"])


def test_cli_diff_text_and_json(two):
    d, ids = two
    res = CliRunner().invoke(main, ["diff", "mlp-h32", "mlp-h128", "--ledger", str(d), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    for text in ("model.hidden", "B - A", "git.commit", "abc123", "packages.torch", "B - A on the same items"):
        assert text in res.output
    assert "model.act" not in res.output and "optim.lr" not in res.output  # equal values are left out
    res = CliRunner().invoke(main, ["diff", ids[0], ids[0], "--ledger", str(d), "--json", "--no-compare"])
    doc = json.loads(res.stdout)
    assert all(doc[s] == [] for s in ("config", "environment", "data", "scalars", "evaluations"))
    res = CliRunner().invoke(main, ["diff", ids[0], "nope", "--ledger", str(d)])
    assert res.exit_code == 1 and "No run 'nope'" in res.output


def test_show_and_diff_read_at_80_columns(tmp_path):
    """Checkpoint paths and hashes stay on their rows in `show`, and `diff` keeps one row per metric
    with its method said once under the table (#43: 438 and 582 lines before)."""
    d = tmp_path / "l"
    ckpt = tmp_path / "weights.bin"
    ckpt.write_bytes(b"w" * 4096)
    ids = []
    for h, flip in ((32, 2), (128, 5)):
        with labledger.start_run(f"mlp-h{h}", config={"hidden": h}, ledger=d) as run:
            for step in (1, 2, 3):
                run.log(step, loss=1.0 / step / h)
                run.log_checkpoint(ckpt, step=step)
            run.log_results("test", rows(flip))
        ids.append(run.id)
    r = CliRunner()
    for run_id in ids:
        ev = r.invoke(
            main,
            ["eval", f"{run_id}:test", "--metric", "f1:average=macro", "--save", f"{run_id}:ev", "--ledger", str(d)],
        )
        assert ev.exit_code == 0, ev.output
    show = r.invoke(main, ["show", ids[0], "--ledger", str(d)], env={"COLUMNS": "80"})
    lines = show.output.splitlines()
    assert show.exit_code == 0 and max(map(len, lines)) <= 80
    found = [line for line in lines if "weights.bin" in line]
    assert len(found) == 3 and all(re.search(r"│ [0-9a-f]{16} │$", row) for row in found), found
    diff = r.invoke(main, ["diff", ids[0], ids[1], "--ledger", str(d)], env={"COLUMNS": "80"})
    lines = diff.output.splitlines()
    assert diff.exit_code == 0 and max(map(len, lines)) <= 80 and len(lines) < 60, diff.output
    assert any("ev.f1[average=macro]" in line for line in lines)
    assert not any("zero_division" in line for line in lines)  # the key eval prints, once
    assert any(line.startswith("95% CI") for line in lines) and not any(
        "│" in line and "bootstrap" in line for line in lines
    )
