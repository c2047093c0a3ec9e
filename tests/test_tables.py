"""The benchmark ledger and version tables, from seed 001's own table."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import SEEDS

import labledger
from labledger.analysis.benchmarks import Entry, add_entries, import_markdown, read_entries, version_table
from labledger.cli import main
from labledger.errors import RecordError

SEED_001 = SEEDS / "001_90666e8fb933fee6.txt"
COLUMNS = ["Base=base", "V3 Raw=v3", "V4 Raw=v4", "V5 Raw=v5", "V5 Calibrated=v5:calibrated"]
needs_seed = pytest.mark.skipif(not SEED_001.exists(), reason="../shared/seeds is not beside the repo")


@needs_seed
def test_seed_001_mean_row_is_reproduced(tmp_path):
    res = import_markdown(
        SEED_001,
        suite="public",
        columns=dict(c.split("=") for c in COLUMNS),
        category_suites={"미공개 일반화 평가": "heldout"},
    )
    public = [e for e in res.entries if e.suite == "public"]
    assert len({e.benchmark for e in public}) == 16
    assert {e.benchmark for e in res.entries if e.suite == "heldout"} == {"All Heldout", "JevAlt-en", "Fast-Decisions"}
    table = version_table(
        res.entries,
        suite="public",
        models=["base", "v3", "v4", "v5"],
        variants=["raw", "calibrated"],
        delta_from="base",
    )
    means = table.mean["values"]
    stated = {"base": 62.70, "v3": 66.74, "v4": 68.21, "v5": 68.84, "v5 (calibrated)": 69.83}
    for col, value in stated.items():
        # each cell was rounded to 0.01 points before the seed's authors averaged unrounded values:
        # the recomputed mean agrees within two roundings (0.01 points)
        assert means[col] * 100 == pytest.approx(value, abs=0.01 + 1e-9), col
    assert round(means["v3"] * 100, 2) == 66.74 and round(means["v5 (calibrated)"] * 100, 2) == 69.83
    assert table.mean["n"] == 16
    # the importer checked the stated mean row itself
    assert len(res.aggregates) == 5 and all(a["consistent"] for a in res.aggregates)
    # metric names became registry metrics with parameters
    clinc = next(e for e in public if e.benchmark == "CLINC150+OOS" and e.model == "base")
    assert (clinc.metric, clinc.params) == ("f1", {"average": "macro"})
    toolret = next(e for e in public if e.benchmark == "ToolRet" and e.model == "base")
    assert (toolret.metric, toolret.params) == ("ndcg", {"k": 10})
    # delta column and categories kept together
    home = next(r for r in table.rows if r["benchmark"] == "Home Appliance")
    assert home["delta"] == pytest.approx(0.9432 - 0.4659)
    md = table.to_markdown()
    assert "Mean (16 benchmarks)" in md and "| +47.73 |" in md


@needs_seed
def test_cli_import_and_table(tmp_path):
    ledger = tmp_path / "ledger"
    runner = CliRunner()
    args = [
        "table",
        "import",
        str(SEED_001),
        "--suite",
        "public",
        "--ledger",
        str(ledger),
        "--category-suite",
        "미공개 일반화 평가=heldout",
    ]
    for c in COLUMNS:
        args += ["--column", c]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "Added 92 entries" in res.output and "consistent" in res.output
    res = runner.invoke(
        main,
        [
            "table",
            "--suite",
            "public",
            "--models",
            "base,v3,v4,v5",
            "--delta-from",
            "base",
            "--ledger",
            str(ledger),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["columns"] == ["base", "v3", "v4", "v5"]
    assert [round(doc["mean"]["values"][m] * 100, 2) for m in ("v3", "v4", "v5")] == [66.74, 68.21, 68.84]
    for fmt, needle in (
        ("md", "| Mean (16 benchmarks) |"),
        ("csv", "Mean (16 benchmarks)"),
        ("html", '<table class="version-table">'),
    ):
        res = runner.invoke(
            main, ["table", "--suite", "public", "--models", "base,v5", "--format", fmt, "--ledger", str(ledger)]
        )
        assert res.exit_code == 0 and needle in res.output
    res = runner.invoke(main, ["table", "--suite", "heldout", "--models", "base,v5", "--ledger", str(ledger)])
    assert res.exit_code == 0 and "JevAlt-en" in res.output
    res = runner.invoke(main, ["table", "--suite", "nope", "--ledger", str(ledger)])
    assert res.exit_code == 1 and "no benchmark entries" in res.output


def test_warnings_for_different_metrics_and_n(tmp_path):
    ledger = labledger.open_ledger(tmp_path, create=True)
    add_entries(
        ledger,
        [
            Entry(model="a", suite="s", benchmark="b1", metric="accuracy", value=0.5, n=100),
            Entry(model="b", suite="s", benchmark="b1", metric="f1", params={"average": "macro"}, value=0.6, n=90),
            Entry(model="a", suite="s", benchmark="b2", metric="accuracy", value=0.7),
        ],
    )
    table = version_table(read_entries(ledger, suite="s"), suite="s", models=["a", "b"])
    text = " ".join(table.warnings)
    assert "different metrics" in text and "different n" in text and "'b2' is missing for b" in text
    assert table.mean["n"] == 1


def test_entries_are_the_schema_documents_read_back_typed(tmp_path):
    from labledger.schema import BenchmarkEntry, decode

    assert Entry is BenchmarkEntry  # one type: the analysis code has no copy of it
    ledger = labledger.open_ledger(tmp_path, create=True)
    e = BenchmarkEntry(model="a", suite="s", benchmark="b", metric="f1", params={"average": "macro"}, value=0.5)
    add_entries(ledger, [e])
    (back,) = read_entries(ledger, suite="s")
    assert type(back) is BenchmarkEntry and back == e and back.metric_id == "f1[average=macro]"
    assert decode(back.to_json()) == e and back.to_dict()["kind"] == "benchmark_entry"


def test_csv_import_errors_name_line_and_field(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("model,suite,benchmark,metric,value\nm,s,b,accuracy,0.5\nm,s,b2,accuracy,high\n")
    res = CliRunner().invoke(main, ["table", "import", str(p), "--ledger", str(tmp_path / "l")])
    assert res.exit_code == 1 and "t.csv:3: field 'value'" in res.output
    # nothing was stored: the import is all or nothing
    assert not (tmp_path / "l").exists() or read_entries(labledger.open_ledger(tmp_path / "l")) == []
    p.write_text("model,suite,benchmark,value\nm,s,b,0.5\n")
    with pytest.raises(RecordError, match="t.csv:2: field 'metric' is missing"):
        from labledger.analysis.benchmarks import import_records

        import_records(p)


def test_a_moved_ledger_keeps_its_paired_deltas(tmp_path):
    """The index keeps a saved evaluation's predictions relative to the ledger's folder, so a ledger
    copied elsewhere (the original deleted) still pairs the items of a delta."""
    import shutil

    from import_sources import results_rows, write_jsonl

    from labledger.analysis.benchmarks import record_evaluation

    ledger = tmp_path / "first"
    for name, seed in (("base", 0), ("tuned", 1)):
        with labledger.start_run(name, ledger=ledger) as run:
            run.log_results("test", write_jsonl(tmp_path / f"{name}.jsonl", results_rows(80, seed=seed)))
        book = labledger.open_ledger(ledger)
        view = book.run(run.id)
        ev = labledger.evaluate(view.results_path("test"), resamples=50)
        record_evaluation(book, run.id, "test", ev.doc, model=name, results_path=str(view.results_path("test")))
    stored = {r[0] for r in labledger.open_ledger(ledger).db.execute("SELECT results_path FROM benchmark_entries")}
    assert stored and all(p.startswith("runs/") for p in stored)
    moved = tmp_path / "moved"
    shutil.copytree(ledger, moved)
    shutil.rmtree(ledger)
    args = ["table", "--models", "base,tuned", "--delta-from", "base", "--json", "--ledger", str(moved)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    entries = read_entries(labledger.open_ledger(moved))
    assert all(e.results_path and e.results_path.startswith(str(moved)) for e in entries)
