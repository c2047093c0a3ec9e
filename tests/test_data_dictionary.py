"""The data dictionary (#15): generated from the types, true of what a run really writes, never stale."""

from __future__ import annotations

import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import orjson
import pytest
from click.testing import CliRunner
from conftest import REPO

import labledger
from labledger.cli import main
from labledger.schema import records
from labledger.schema.dictionary import dictionary_markdown, dictionary_sections, field_rows
from labledger.site import build_site


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run that writes every record file labledger has (but media.jsonl: see its own test)."""
    root = tmp_path_factory.mktemp("dictionary")
    weights = root / "m.pt"
    weights.write_bytes(b"weights")
    with labledger.start_run("r", ledger=root / "led", config={"lr": 0.1}, system_metrics=True, init="bert") as run:
        run.log(1, loss=0.5, lr=1e-3)
        run.log_batch(
            {
                "microbatch": 1,
                "optimizer_step": 1,
                "examples_seen": 1,
                "batch_size": 1,
                "loss": 0.69,
                "forward_ms": 1.0,
                "samples": [
                    {
                        "input": "x",
                        "gold": "a",
                        "prediction": "a",
                        "probabilities": {"a": 0.5, "b": 0.5},
                        "cross_entropy": 0.6931472,
                        "id": 7,
                        "source": "train",
                    }
                ],
            }
        )
        run.log_history({"kind": "train", "step": 1, "epoch": 0.5, "loss": 0.6})
        run.log_checkpoint(weights, step=1, metrics={"loss": 0.5})
        run.log_checkpoint_reference("elsewhere.pt", "ab" * 32)
        run.log_results("test", [{"id": "1", "task": "t", "gold": "a", "probs": {"a": 0.6, "b": 0.4}}])
        run.note("hello")
    return run.dir


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _declared(struct: type[msgspec.Struct]) -> set[str]:
    return {r.name for r in field_rows(struct)}


@pytest.mark.parametrize(
    "rel",
    [p for p, t in records.RUN_FILES if not isinstance(t, str) and p != "media.jsonl"],
)
def test_every_record_a_run_writes_decodes_into_its_type(run_dir, rel):
    struct = dict(records.RUN_FILES)[rel]
    path = run_dir / rel.replace("<name>", "test")
    recs = _lines(path) if path.suffix == ".jsonl" else [orjson.loads(path.read_bytes())]
    assert recs, rel
    for rec in recs:
        msgspec.convert(rec, struct, strict=False)  # right types for every declared field
        extra = set(rec) - _declared(struct)
        if struct.EXTRA is None or struct in (records.RunMeta, records.ResultSetMeta, records.BatchRecord):
            assert not extra, f"{rel}: undocumented fields {sorted(extra)}"
    if struct is records.BatchRecord:
        for sample in recs[0]["samples"]:
            assert not set(sample) - _declared(records.SampleRecord)


def test_media_records_decode():
    rec = {"step": 1, "time": 1.0, "kind": "value", "key": "k", "value": "text"}
    assert msgspec.convert(rec, records.MediaRecord).key == "k"


def test_index_tables_are_documented_column_for_column(run_dir):
    db = sqlite3.connect(run_dir.parents[1] / "ledger.db")
    tables = {
        name
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not name.startswith(("_", "sqlite_"))
    }
    assert tables == set(records.INDEX_TABLES), "an index table is missing from records.INDEX_TABLES"
    for table, struct in records.INDEX_TABLES.items():
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        assert sorted(columns) == sorted(_declared(struct)), table


def test_every_field_of_every_file_table_and_document_has_a_meaning():
    missing = [f"{sec.title}.{r.name}" for sec in dictionary_sections() for r in sec.rows if not r.meaning]
    assert not missing, "give these fields a meaning (msgspec.Meta via schema.records.meaning)"


def test_the_docs_page_is_the_generated_dictionary():
    res = CliRunner().invoke(main, ["schema", "--markdown"])
    assert res.exit_code == 0
    page = (REPO / "docs" / "data-dictionary.md").read_text()
    assert page == res.output, "docs/data-dictionary.md is stale: labledger schema --markdown > docs/data-dictionary.md"
    assert "| `gpu_peak_allocated_mib` | float \\| null | MiB | the peak allocated GPU memory" in page
    assert "### `evaluation`" in page and "### `metric_values`" in page
    one = CliRunner().invoke(main, ["schema", "comparison", "--markdown"]).output
    assert "### `comparison`" in one and "metrics.jsonl" not in one
    assert dictionary_markdown("comparison") + "\n" == one


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.cells: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.sections.append(dict(attrs)["id"])
        self._in = tag

    def handle_data(self, data):
        if self._in == "code":
            self.cells.append(data)

    def handle_endtag(self, tag):
        self._in = None


def test_the_site_page_shows_the_same_tables(run_dir, tmp_path):
    build_site(run_dir.parents[1], tmp_path / "site")
    page = (tmp_path / "site" / "dictionary.html").read_text()
    parsed = _Tables()
    parsed.feed(page)
    assert parsed.sections == [s.anchor for s in dictionary_sections()]
    assert "microbatch" in parsed.cells and "cross_entropy" in parsed.cells
    assert "<script" not in page and 'href="dictionary.html"' in (tmp_path / "site" / "index.html").read_text()
