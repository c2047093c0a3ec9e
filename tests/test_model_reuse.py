"""A model name of the benchmark ledger holds one run (or one imported table): reusing it for another
run is refused with one line naming both, unless --replace (issue #43, N7)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from import_sources import results_rows, write_jsonl

import labledger
from labledger.analysis.benchmarks import Entry, add_entries, read_entries, record_evaluation
from labledger.cli import main
from labledger.errors import LedgerError


def _rows(seed: int, tasks: tuple[str, ...]) -> list[dict]:
    out = []
    for task in tasks:
        out += [{**r, "id": f"{task}-{r['id']}", "task": task} for r in results_rows(40, seed=seed)]
    return out


@pytest.fixture
def ledger(tmp_path):
    """Run mlp-h32 with tasks digits and is_eight saved as model h32; run mlp-h128-ft with digits only."""
    d = tmp_path / "ledger"
    ids = {}
    for name, seed, tasks in (("mlp-h32", 0, ("digits", "is_eight")), ("mlp-h128-ft", 1, ("digits",))):
        with labledger.start_run(name, ledger=d) as run:
            run.log_results("test", write_jsonl(tmp_path / f"{name}.jsonl", _rows(seed, tasks)))
        ids[name] = run.id
    res = invoke(d, "eval", "mlp-h32:test", "--save", "mlp-h32:test", "--model", "h32", "--suite", "digits")
    assert res.exit_code == 0, res.output
    return d, ids


def invoke(d, *args):
    return CliRunner().invoke(
        main, [*args, "--resamples", "50", "--ledger", str(d)] if args[0] == "eval" else [*args, "--ledger", str(d)]
    )


def _column(d, model="h32"):
    return {e.benchmark: (e.run_id, e.value) for e in read_entries(labledger.open_ledger(d), models=[model])}


def test_reusing_a_model_name_for_another_run_is_refused(ledger):
    d, ids = ledger
    before = _column(d)
    assert {b: r for b, (r, _) in before.items()} == {"digits": ids["mlp-h32"], "is_eight": ids["mlp-h32"]}
    args = ("eval", "mlp-h128-ft:test", "--save", "mlp-h128-ft:test", "--model", "h32", "--suite", "digits")
    res = invoke(d, *args)
    assert res.exit_code == 1
    [line] = res.stderr.strip().splitlines()
    assert line == (
        f"Error: model 'h32' of suite 'digits' already holds the entries of run {ids['mlp-h32']} (mlp-h32) "
        f"(digits, is_eight); these are of run {ids['mlp-h128-ft']} (mlp-h128-ft): pass --replace to put them "
        "in its place, or choose another model name"
    )
    # nothing stored: the column is as it was and the evaluation was not saved
    assert _column(d) == before
    assert [e.kind for e in labledger.open_ledger(d).evaluations(ids["mlp-h128-ft"])] == ["results"]

    # another name is fine; the same run under its own name again is fine (a re-evaluation)
    assert invoke(d, *args[:4], "--model", "h128-ft", "--suite", "digits").exit_code == 0
    again = invoke(d, "eval", "mlp-h32:test", "--save", "mlp-h32:test", "--model", "h32", "--suite", "digits")
    assert again.exit_code == 0 and "replaced" not in again.stderr
    assert _column(d) == before

    # --replace means it: digits now comes from the other run, and both the command and the table say
    # that is_eight still comes from mlp-h32
    res = invoke(d, *args, "--replace")
    assert res.exit_code == 0, res.output
    assert (
        f"model 'h32' of suite 'digits': digits replaced (run {ids['mlp-h32']} (mlp-h32) before); is_eight still "
        f"from run {ids['mlp-h32']} (mlp-h32), so the column mixes two sources" in " ".join(res.stderr.split())
    )
    after = _column(d)
    assert after["digits"][0] == ids["mlp-h128-ft"] and after["is_eight"] == before["is_eight"]
    table = invoke(d, "table", "--suite", "digits", "--models", "h32", "--json")
    assert table.exit_code == 0
    assert (
        f"column 'h32' mixes entries of run {ids['mlp-h32']} (is_eight) and run {ids['mlp-h128-ft']} (digits)"
        in " ".join(table.stderr.split())
    )


def test_replace_only_with_model(ledger):
    d, _ = ledger
    res = invoke(d, "eval", "mlp-h32:test", "--save", "mlp-h32:other", "--replace")
    assert res.exit_code == 2 and "--replace applies with --model" in res.output


def test_table_import_refuses_a_name_held_by_a_run(ledger, tmp_path):
    d, ids = ledger
    csv = tmp_path / "paper.csv"
    csv.write_text(
        "model,suite,benchmark,metric,value\nh32,digits,digits,accuracy,0.9\nbase,digits,digits,accuracy,0.8\n"
    )
    res = invoke(d, "table", "import", str(csv))
    assert res.exit_code == 1
    [line] = res.stderr.strip().splitlines()
    assert f"model 'h32' of suite 'digits' already holds the entries of run {ids['mlp-h32']} (mlp-h32)" in line
    assert "these are of table paper.csv: pass --replace" in line
    assert read_entries(labledger.open_ledger(d), models=["base"]) == []  # all or nothing
    # a name only this file uses: imported, and importing the same file again replaces its own entries
    csv.write_text("model,suite,benchmark,metric,value\nbase,digits,digits,accuracy,0.8\n")
    assert invoke(d, "table", "import", str(csv)).exit_code == 0
    csv.write_text("model,suite,benchmark,metric,value\nbase,digits,digits,accuracy,0.85\n")
    res = invoke(d, "table", "import", str(csv), "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["added"] == 1
    assert [e.value for e in read_entries(labledger.open_ledger(d), models=["base"])] == [0.85]
    # another file for that name is refused; --replace takes it
    other = tmp_path / "other.csv"
    other.write_text("model,suite,benchmark,metric,value\nbase,digits,digits,accuracy,0.7\n")
    res = invoke(d, "table", "import", str(other))
    assert (
        res.exit_code == 1
        and "holds the entries of table paper.csv (digits); these are of table other.csv" in res.stderr
    )
    res = invoke(d, "table", "import", str(other), "--replace")
    assert res.exit_code == 0 and "digits replaced (table paper.csv before)" in " ".join(res.stderr.split())
    assert [e.value for e in read_entries(labledger.open_ledger(d), models=["base"])] == [0.7]


def test_api_refuses_with_replace_false_and_keeps_the_newest_by_default(tmp_path):
    d = tmp_path / "l"
    runs = []
    for seed in (0, 1):
        with labledger.start_run("m", ledger=d) as run:
            run.log_results("test", write_jsonl(tmp_path / f"{seed}.jsonl", results_rows(30, seed=seed)))
        runs.append(run.id)
    book = labledger.open_ledger(d)
    docs = [labledger.evaluate(book.run(r).results_path("test"), resamples=20).doc for r in runs]
    record_evaluation(book, runs[0], "test", docs[0], model="m", suite="s")
    with pytest.raises(LedgerError, match=f"holds the entries of run {runs[0]} \\(m\\).*these are of run {runs[1]}"):
        record_evaluation(book, runs[1], "test", docs[1], model="m", suite="s", replace=False)
    assert [e.kind for e in book.evaluations(runs[1])] == ["results"]
    told: list[str] = []
    record_evaluation(book, runs[1], "test", docs[1], model="m", suite="s", on_replace=told.append)
    assert [e.run_id for e in read_entries(book, models=["m"])] == [runs[1]]
    assert told == [f"model 'm' of suite 's': hover replaced (run {runs[0]} (m) before)"]
    # entries that name no origin are never counted as another run's
    add_entries(book, [Entry(model="m", suite="s", benchmark="extra", metric="accuracy", value=0.5)], replace=False)
