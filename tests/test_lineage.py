"""Lineage (#15): runs linked by the checkpoints they started from, soups with weights, seed 001's table."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import labledger
from labledger.analysis.checkpoints import soup
from labledger.analysis.lineage import lineage, trajectory
from labledger.cli import main
from labledger.errors import LedgerError, RecordError
from labledger.store.migrations import migrate

torch = pytest.importorskip("torch")

# Seed 001 §4.1: stage, initial weights (None: the previous stage), steps, max length, lr backbone/head, T, CB
STAGES = [
    ("stage0", "ettin-reranker-150m", 8999, 1024, 3e-5, 1e-4, 0.5, 0.0),
    ("stage1", None, 41220, 1024, 2e-5, 1e-4, 0.5, 1.0),
    ("stage2", None, 7442, 1024, 1e-5, 5e-5, 0.5, 1.0),
    ("stage3", None, 8587, 7999, 5e-6, 2.5e-5, 0.5, 1.0),
]
LATER = [
    ("v3_stage1", "soup23", 650, 2560, 1e-5, 4e-5, 0.0, 1.0),
    ("v4_stage1", None, 400, 2560, 6e-6, 2.5e-5, 0.0, 0.0),
    ("v4_stage2", None, 200, 6144, 3e-6, 1.2e-5, 0.0, 0.0),
]


def _train(book: Path, tmp: Path, spec: tuple, init, seed: int) -> tuple[str, dict]:
    """A stage trained for a few steps; its checkpoint written as `<name>_best.pt` and logged."""
    name, _, steps, max_length, lr_b, lr_h, temp, cb = spec
    config = {
        "steps": steps,
        "max_length": max_length,
        "lr_backbone": lr_b,
        "lr_head": lr_h,
        "mix_temperature": temp,
        "class_balance": cb,
    }
    torch.manual_seed(seed)
    w = torch.randn(4, 3)
    with labledger.start_run(name, config=config, ledger=book, init=init) as run:
        for step in range(1, 4):
            w = w - 0.1 * torch.randn(4, 3)
            run.log(step, loss=1.0 / step)
        path = tmp / f"{name}_best.pt"
        torch.save({"w": w}, path)
        rec = run.log_checkpoint(path, step=3)
        run.set_summary(val_macro=0.6 + seed / 100)
    return run.id, rec


@pytest.fixture(scope="module")
def seed001(tmp_path_factory):
    """A ledger with seed 001's shape: S0-S3 chained, a base soup of S2+S3, V3 from it, V4 S1/S2, a final soup."""
    tmp = tmp_path_factory.mktemp("seed001")
    book = tmp / "ledger"
    ids: dict[str, str] = {}
    recs: dict[str, dict] = {}
    prev = None
    for i, spec in enumerate(STAGES):
        ids[spec[0]], recs[spec[0]] = _train(book, tmp, spec, spec[1] if prev is None else prev, i)
        prev = recs[spec[0]]
    base = soup(
        [recs["stage2"]["path"], recs["stage3"]["path"]], [0.5, 0.5], tmp / "soup23_best.pt", ledger=book, name="soup23"
    )
    ids["soup23"] = base.run_id
    prev = {"sha256": base.sha256}
    for i, spec in enumerate(LATER):
        ids[spec[0]], recs[spec[0]] = _train(book, tmp, spec, prev, 10 + i)
        prev = recs[spec[0]]
    final = soup(
        [tmp / "soup23_best.pt", recs["v3_stage1"]["path"], recs["v4_stage2"]["path"]],
        [0.08, 0.32, 0.60],
        tmp / "v4_soup.pt",
        ledger=book,
        name="v4_soup",
    )
    ids["v4_soup"] = final.run_id
    return {"book": book, "ids": ids, "recs": recs, "tmp": tmp, "final": final, "base": base}


def _edges(graph) -> set[tuple[str, str, float | None]]:
    """(source label, target label, weight) between runs: checkpoint hops folded into run -> run."""
    wrote = {e["target"]: e["source"] for e in graph.edges if e["kind"] == "wrote"}
    out = set()
    for e in graph.edges:
        if e["kind"] == "wrote":
            continue
        src = wrote.get(e["source"], e["source"])
        out.add((graph.nodes[src].get("name"), graph.nodes[e["target"]]["name"], e["weight"]))
    return out


def test_the_final_soup_has_the_whole_trajectory_with_its_edges_and_weights(seed001):
    graph = lineage(labledger.open_ledger(seed001["book"]), "v4_soup")
    assert _edges(graph) == {
        ("ettin-reranker-150m", "stage0", None),
        ("stage0", "stage1", None),
        ("stage1", "stage2", None),
        ("stage2", "stage3", None),
        ("stage2", "soup23", 0.5),
        ("stage3", "soup23", 0.5),
        ("soup23", "v3_stage1", None),
        ("v3_stage1", "v4_stage1", None),
        ("v4_stage1", "v4_stage2", None),
        ("soup23", "v4_soup", 0.08),
        ("v3_stage1", "v4_soup", 0.32),
        ("v4_stage2", "v4_soup", 0.6),
    }
    types = {n["name"]: n["type"] for n in graph.nodes.values() if "name" in n and n["type"] != "checkpoint"}
    assert types["soup23"] == types["v4_soup"] == "soup" and types["ettin-reranker-150m"] == "external"
    assert all(n["state"] == "ok" for n in graph.nodes.values() if n["type"] == "checkpoint")


def test_the_trajectory_table_is_seed_001s(seed001):
    book = labledger.open_ledger(seed001["book"])
    rows = trajectory(book, lineage(book, "v4_soup"))
    assert [r["stage"] for r in rows] == [
        "stage0",
        "stage1",
        "stage2",
        "stage3",
        "soup23",
        "v3_stage1",
        "v4_stage1",
        "v4_stage2",
        "v4_soup",
    ]
    by = {r["stage"]: r for r in rows}
    assert by["stage0"]["init"] == "ettin-reranker-150m"
    assert by["stage1"]["init"].startswith("stage0 (")
    assert by["soup23"]["init"].startswith("0.5 stage2 (") and " + 0.5 stage3 (" in by["soup23"]["init"]
    assert by["v4_soup"]["init"].split(" + ")[0].startswith("0.08 soup23")
    assert by["stage3"]["steps"] == 8587 and by["stage3"]["max length"] == 7999
    assert (by["v4_stage1"]["lr backbone"], by["v4_stage1"]["lr head"]) == (6e-6, 2.5e-5)
    assert (by["v3_stage1"]["mixture temperature"], by["v4_stage1"]["class balance"]) == (0.0, 0.0)
    assert by["stage1"]["checkpoint"].startswith("stage1_best.pt ")
    assert by["stage2"]["headline"] == "val_macro 0.62"
    assert "lr" not in by["stage0"]  # a column no run has is left out
    chosen = trajectory(book, lineage(book, "stage3"), columns=["steps", "lr_backbone"])
    assert list(chosen[0])[5:] == ["steps", "lr_backbone", "headline", "purpose"]


def test_lineage_down_from_the_first_stage_and_from_a_checkpoint_prefix(seed001):
    book = labledger.open_ledger(seed001["book"])
    down = lineage(book, "stage0")
    assert {n["name"] for n in down.runs()} >= {"stage1", "soup23", "v4_soup"}
    sha = seed001["recs"]["v3_stage1"]["sha256"]
    graph = lineage(book, sha[:12])
    assert graph.focus == f"ckpt:{sha}"
    names = {n["name"] for n in graph.runs()}
    assert "v3_stage1" in names and "stage0" in names and "v4_soup" in names
    # up from stage1 only: stage0 and what came after stage1, not the unrelated external model's other children
    up = lineage(book, "stage2")
    assert "stage3" in {n["name"] for n in up.runs()}


def test_mermaid_and_dot_carry_the_weights_and_escape_names(seed001, tmp_path):
    book = labledger.open_ledger(seed001["book"])
    text = lineage(book, "v4_soup").mermaid()
    assert text.startswith("flowchart TD")
    assert text.count('-- "0.08" -->') == 1 and text.count('-- "0.5" -->') == 2
    dot = lineage(book, "v4_soup").dot()
    assert dot.startswith("digraph lineage {") and '[label="0.32"]' in dot
    hostile = 'x"]; click n0 "javascript:alert(1)" <script>'
    with labledger.start_run(hostile, ledger=tmp_path / "h", init="org/m<b>") as run:
        pass
    g = lineage(labledger.open_ledger(tmp_path / "h"), run.id)
    m = g.mermaid()
    assert '"]; click' not in m and "<script>" not in m and "#lt;script#gt;" in m
    assert '\\"' in g.dot()


def test_a_checkpoint_changed_after_logging_is_reported(tmp_path):
    """The README example run twice: model.pt overwritten. A copy (the default) keeps the first
    run's record true; a reference (copy=False) is reported as a sha256 mismatch."""
    book = tmp_path / "ledger"
    model = tmp_path / "model.pt"
    ids = []
    for n, copy in ((1, True), (2, False), (3, False)):
        torch.save({"w": torch.full((3,), float(n))}, model)
        with labledger.start_run(f"train{n}", ledger=book) as run:
            run.log_checkpoint(model, step=n, copy=copy)
        ids.append(run.id)
    view = labledger.open_ledger(book)
    states = {i: [c["state"] for c in view.run(i).verified_checkpoints()] for i in ids}
    assert states == {ids[0]: ["ok"], ids[1]: ["changed"], ids[2]: ["ok"]}
    graph = lineage(view, ids[1])
    node = next(n for n in graph.nodes.values() if n["type"] == "checkpoint")
    assert node["state"] == "changed" and node["found_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert "CHANGED" in graph.mermaid()
    res = CliRunner().invoke(main, ["lineage", ids[1], "--ledger", str(book)])
    assert res.exit_code == 0, res.output
    assert "sha256 mismatch" in res.output and "changed" in res.output
    doc = orjson.loads(CliRunner().invoke(main, ["lineage", ids[1], "--ledger", str(book), "--json"]).output)
    assert doc["changed_checkpoints"] == [node["sha256"]]


def test_copies_of_the_same_name_keep_both_contents(tmp_path):
    model = tmp_path / "model.pt"
    with labledger.start_run("r", ledger=tmp_path / "l") as run:
        model.write_bytes(b"one")
        a = run.log_checkpoint(model, step=1)
        b = run.log_checkpoint(model, step=2)  # same content: the same copy
        model.write_bytes(b"two")
        c = run.log_checkpoint(model, step=3)
    assert a["path"] == b["path"] and Path(a["path"]).read_bytes() == b"one"
    assert Path(c["path"]).read_bytes() == b"two" and Path(c["path"]).name.startswith("model-")
    assert c["sha256"] == hashlib.sha256(b"two").hexdigest()


@pytest.mark.parametrize(
    ("source", "kind"),
    [("bert-base-uncased", "name"), ("ab" * 32, "sha256"), ({"sha256": "CD" * 32, "path": "x.pt"}, "sha256")],
)
def test_init_sources(tmp_path, source, kind):
    with labledger.start_run("r", ledger=tmp_path, init=source) as run:
        pass
    entries = labledger.open_ledger(tmp_path).run(run.id).meta["init"]
    assert [e["kind"] for e in entries] == [kind]
    db = sqlite3.connect(tmp_path / "ledger.db")
    assert db.execute("SELECT kind FROM run_inits WHERE run_id = ?", (run.id,)).fetchall() == [(kind,)]


def test_init_from_a_folder_hashes_its_weights_and_a_missing_path_is_an_error(tmp_path):
    folder = tmp_path / "checkpoint-500"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"w")
    (folder / "trainer_state.json").write_text("{}")
    with labledger.start_run("r", ledger=tmp_path / "l") as run:
        entries = run.set_init(folder)
        assert [Path(e["path"]).name for e in entries] == ["model.safetensors"]
        with pytest.raises(LedgerError, match="no such file"):
            run.set_init(tmp_path / "gone.pt")
        assert run.set_init(tmp_path / "gone.pt", missing_as_name=True)[0]["kind"] == "name"
        with pytest.raises(RecordError, match="init.sha256"):
            run.set_init({"sha256": "nothex"})


def test_the_migration_adds_the_index_table_and_an_import_keeps_the_link(tmp_path):
    db = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    migrate(db)
    assert db.execute("SELECT name FROM _migrations WHERE name = 'm006_run_inits'").fetchone()
    assert {r[1] for r in db.execute("PRAGMA table_info(run_inits)")} == {
        "run_id",
        "kind",
        "sha256",
        "name",
        "path",
        "size",
    }
    from labledger.importers import import_path

    one = tmp_path / "one"
    ck = tmp_path / "w.bin"
    ck.write_bytes(b"weights")
    with labledger.start_run("parent", ledger=one) as parent:
        rec = parent.log_checkpoint(ck, step=1)
    with labledger.start_run("child", ledger=one, init=rec) as child:
        pass
    two = tmp_path / "two"
    import_path(one / "runs" / parent.id, two)
    import_path(one / "runs" / child.id, two)
    book = labledger.open_ledger(two)
    graph = lineage(book, "child")
    assert _edges(graph) == {("parent", "child", None)}


def test_cli_formats_and_errors(seed001):
    book = str(seed001["book"])
    cases = [
        (["lineage", "v4_soup", "--format", "mermaid"], 0, ['-- "0.6" -->', "flowchart TD"]),
        (["lineage", "v4_soup", "--format", "dot"], 0, ["digraph lineage"]),
        (["lineage", "v4_soup", "--format", "table"], 0, ["trajectory (9 stages)", "stage0"]),
        (["lineage", "v4_soup"], 0, ["soup", "checkpoint", "wrote"]),
        (["lineage", "nosuchrun"], 1, ["Error:", "checkpoint sha256"]),
        (["lineage", "v4_soup", "--format", "svg"], 2, ["Invalid value"]),
    ]
    for args, code, expected in cases:
        res = CliRunner().invoke(main, [*args, "--ledger", book])
        assert res.exit_code == code, (args, res.output)
        for text in expected:
            assert text in res.output, (args, text, res.output)
    doc = orjson.loads(CliRunner().invoke(main, ["lineage", "stage1", "--json", "--ledger", book]).output)
    assert {"focus", "nodes", "edges", "trajectory", "changed_checkpoints"} <= set(doc)


def test_the_graph_of_many_runs_reads_the_ledgers_edges_once(tmp_path, monkeypatch):
    """The site's lineage page (and the hand-off report) draw every run at once: the index of the
    ledger's edges is read once, not once per run (which made a 10,000-run site quadratic), and the
    graph is the union of each run's own."""
    from labledger.analysis import lineage as lineage_module

    d = tmp_path / "L"
    ck = tmp_path / "w.pt"
    ck.write_bytes(b"w")
    with labledger.start_run("parent", ledger=d) as parent:
        rec = parent.log_checkpoint(ck, step=1)
    ids = [parent.id]
    for i in range(6):
        with labledger.start_run(f"child{i}", ledger=d, init=rec if i % 2 else None) as child:
            pass
        ids.append(child.id)
    made = []
    real = lineage_module._Index

    def counted(ledger):
        made.append(1)
        return real(ledger)

    monkeypatch.setattr(lineage_module, "_Index", counted)
    with labledger.open_ledger(d) as book:
        merged = lineage_module.lineage_of(book, ids)
        assert len(made) == 1
        one_by_one = [lineage(book, rid) for rid in ids]
    assert set(merged.nodes) == set().union(*(g.nodes for g in one_by_one))
    assert {(e["source"], e["target"]) for e in merged.edges} == {
        (e["source"], e["target"]) for g in one_by_one for e in g.edges
    }
