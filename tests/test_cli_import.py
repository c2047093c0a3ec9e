"""`labledger import`: a table of (arguments, exit code, expected output), the JSON document, duplicates,
and broken sources that leave the ledger unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from import_sources import (
    report_doc,
    results_rows,
    seed_batches,
    snapshot,
    tree_hashes,
    write_jsonl,
    write_seed_run,
    write_tensorboard,
)

import labledger
from labledger.cli import main


@pytest.fixture
def sources(tmp_path):
    out = {"ledger": str(tmp_path / "ledger"), "seed": str(write_seed_run(tmp_path / "seed-run"))}
    out["results"] = str(write_jsonl(tmp_path / "v5" / "results.jsonl", results_rows()))
    report = tmp_path / "report.json"
    report.write_bytes(orjson.dumps(report_doc("head.pt", hashlib.sha256(b"x").hexdigest())))
    out["report"] = str(report)
    out["tb"] = str(write_tensorboard(tmp_path / "tb", steps=4))
    (tmp_path / "notes.txt").write_text("nothing to import")
    out["notes"] = str(tmp_path / "notes.txt")
    bad = write_seed_run(tmp_path / "bad-run")
    rows = seed_batches()
    rows[4]["samples"][2]["cross_entropy"] = 9.0
    write_jsonl(bad / "batches.jsonl", rows)
    out["bad"] = str(bad)
    return out


CASES = [
    (
        ["import", "{seed}"],
        0,
        [
            "Imported",
            "(seed-run,",
            "seed-run: 6 batches, 4 history, 60 results:full_test",
            "note: full_test/summary.json: all 180 counts of summary.cells agree",
        ],
    ),
    (["import", "{seed}", "--name", "renamed", "--group", "g", "--copy"], 0, ["renamed [g]", "originals copied"]),
    (["import", "{results}"], 0, ["(results,", "v5: 20 results:results"]),
    (["import", "{report}"], 0, ["(report,", "P-TEST-BOUNDARY-SMOKE-001", "Interpretation limit:"]),
    (["import", "{tb}"], 0, ["(tensorboard,", "tb [tb]"]),
    (["import", "{results}", "--format", "report"], 1, ["Error:", "not valid JSON"]),
    (["import", "{notes}"], 1, ["Error:", "cannot tell its format", "--format"]),
    (["import", "{bad}"], 1, ["Error:", "batches.jsonl:5: field 'samples[2].cross_entropy' must equal -log p(gold)"]),
    (["import", "{seed}", "--format", "csv"], 2, ["Invalid value for '--format'"]),
    (["import", "/no/such/path"], 2, ["does not exist"]),
    (["import"], 2, ["Missing argument 'PATH'"]),
]


def _fill(args, sources):
    return [a.format(**sources) for a in args]


@pytest.mark.parametrize("args,code,expected", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_import_table(sources, args, code, expected):
    res = CliRunner(env={"COLUMNS": "300"}).invoke(main, [*_fill(args, sources), "--ledger", sources["ledger"]])
    assert res.exit_code == code, res.output
    for text in expected:
        assert text in res.output


def test_json_is_one_document_and_matches_the_ledger(sources):
    res = CliRunner().invoke(main, ["import", sources["report"], "--ledger", sources["ledger"], "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["format"] == "report" and doc["mode"] == "reference" and doc["again"] is False
    [run] = doc["runs"]
    view = labledger.open_ledger(sources["ledger"]).run(run["id"])
    assert view.meta["imported_from"]["sha256"] == doc["sha256"]
    assert run["fields"] == view.meta["imported_from"]["fields"]
    assert set(run["fields"]) == set(json.loads(open(sources["report"]).read()))


def test_second_import_is_refused_then_allowed_with_again(sources):
    runner = CliRunner()
    first = runner.invoke(main, ["import", sources["seed"], "--ledger", sources["ledger"], "--json"])
    run_id = json.loads(first.stdout)["runs"][0]["id"]
    before = snapshot(labledger.open_ledger(sources["ledger"]).root)
    second = runner.invoke(main, ["import", sources["seed"], "--ledger", sources["ledger"]])
    assert second.exit_code == 1
    assert f"as run {run_id}" in second.stderr and "--again" in second.stderr
    assert snapshot(labledger.open_ledger(sources["ledger"]).root) == before
    third = runner.invoke(main, ["import", sources["seed"], "--ledger", sources["ledger"], "--again"])
    assert third.exit_code == 0, third.stderr
    assert f"imported again: the same content was imported before as run {run_id}" in third.stdout
    assert len(labledger.open_ledger(sources["ledger"]).runs()) == 2


def test_broken_source_leaves_ledger_and_source_unchanged(sources):
    runner = CliRunner()
    assert runner.invoke(main, ["import", sources["results"], "--ledger", sources["ledger"]]).exit_code == 0
    ledger_root = labledger.open_ledger(sources["ledger"]).root
    before, source_before = snapshot(ledger_root), tree_hashes(Path(sources["bad"]))
    res = runner.invoke(main, ["import", sources["bad"], "--ledger", sources["ledger"], "--copy"])
    assert res.exit_code == 1
    assert res.stderr.startswith("Error: ") and "batches.jsonl:5" in res.stderr
    assert snapshot(ledger_root) == before
    assert tree_hashes(Path(sources["bad"])) == source_before


def test_show_lists_an_imported_report(sources):
    runner = CliRunner(env={"COLUMNS": "300"})
    res = runner.invoke(main, ["import", sources["report"], "--ledger", sources["ledger"], "--json"])
    run_id = json.loads(res.output)["runs"][0]["id"]
    show = runner.invoke(main, ["show", run_id, "--ledger", sources["ledger"], "--json"])
    assert show.exit_code == 0, show.output
    doc = json.loads(show.output)
    assert doc["evaluations"][0]["name"] == "report"
    assert doc["checkpoints"][0]["reference"] is True
