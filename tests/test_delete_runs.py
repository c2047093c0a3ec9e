"""Deleting runs (#43): ``labledger rm`` / ``Ledger.delete_run`` to a trash, ``restore``, ``gc``;
checkpoint files other runs use kept in place; a run folder removed by hand reported in one line by
the commands that read it and cleaned by ``verify --repair``. Real ledgers, real SQLite files."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from import_sources import results_rows, write_jsonl
from postgres_server import pg_url, postgres_cluster  # noqa: F401 (fixtures)

import labledger
from labledger.cli import main
from labledger.errors import RunStateError
from labledger.store import trash as trash_mod
from labledger.store.ledger import Ledger


def cli(*args: str, input: str | None = None):
    """The command in this process, its output laid out wide (temporary paths are long)."""
    return CliRunner(env={"COLUMNS": "400"}).invoke(main, [str(a) for a in args], input=input)


def index_dump(ledger_dir: Path) -> dict[str, list[tuple]]:
    """Every row of every index table (rowid order; the ``_migrations`` bookkeeping left out)."""
    with Ledger(ledger_dir) as book:
        tables = [
            r[0]
            for r in book.db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND name != '_migrations' ORDER BY name"
            )
        ]
        out = {}
        for t in tables:
            try:
                out[t] = book.db.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
            except sqlite3.OperationalError:  # a WITHOUT ROWID table (run_fields): by its key
                out[t] = sorted(book.db.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
        return out


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def run_rows(dump: dict[str, list[tuple]], run_id: str) -> int:
    """Rows anywhere in the index that name ``run_id`` (metric values through their evaluations)."""
    n = sum(1 for rows in dump.values() for row in rows if run_id in row)
    eval_ids = {row[0] for row in dump["evaluations"] if row[1] == run_id}
    return n + sum(1 for row in dump["metric_values"] if row[0] in eval_ids)


@pytest.fixture
def rich_ledger(tmp_path):
    """Two runs: ``full`` with every kind of index row (tags, group, config fields, a copied
    checkpoint, a result set, its evaluation with metric values, a benchmark entry, an init) and
    ``other`` beside it."""
    from labledger.analysis.benchmarks import record_evaluation

    d = tmp_path / "ledger"
    ck = tmp_path / "model.pt"
    ck.write_bytes(b"weights v1")
    with labledger.start_run("other", ledger=d, config={"lr": 0.5}) as other:
        other.log(1, loss=0.9)
    with labledger.start_run("full", ledger=d, group="g", tags=["keep", "x"], config={"lr": 0.1}) as run:
        run.set_init("bert-base-uncased")
        run.log(1, loss=0.5)
        run.log(2, loss=0.25)
        run.log_checkpoint(ck, step=2)
        run.log_results("test", write_jsonl(tmp_path / "r.jsonl", results_rows(40, seed=1)))
    book = labledger.open_ledger(d)
    view = book.run(run.id)
    ev = labledger.evaluate(view.results_path("test"), resamples=20)
    record_evaluation(book, run.id, "test", ev.doc, model="full", results_path=str(view.results_path("test")))
    book.close()
    return {"dir": d, "id": run.id, "other": other.id, "tmp": tmp_path}


def test_rm_and_restore_put_back_every_index_row_and_file_exactly(rich_ledger):
    d, run_id = rich_ledger["dir"], rich_ledger["id"]
    before = index_dump(d)
    folder = files_of(d / "runs" / run_id)
    assert run_rows(before, run_id) >= 8 and before["benchmark_entries"] and before["metric_values"]
    assert {"checkpoints", "run_inits", "run_tags", "evaluations", "run_fields"} <= {
        t for t, rows in before.items() if any(run_id in r for r in rows)
    }

    res = cli("rm", "full", "--yes", "--ledger", d)
    assert res.exit_code == 0, res.output
    assert f"Moved run {run_id} (full)" in res.output and f"labledger restore {run_id}" in res.output
    after = index_dump(d)
    assert run_rows(after, run_id) == 0  # run_fields and metric values too
    assert not after["benchmark_entries"]  # the version table's entry pointing at the run
    assert not (d / "runs" / run_id).exists()
    assert files_of(d / ".trash" / run_id / "run") == folder
    assert run_rows(after, rich_ledger["other"]) == run_rows(before, rich_ledger["other"])  # the other run untouched
    listed = json.loads(cli("runs", "--json", "--ledger", d).output)["runs"]
    assert [r["name"] for r in listed] == ["other"]
    shown = json.loads(cli("trash", "--json", "--ledger", d).output)["trash"]
    assert [(e["id"], e["name"], e["folder"], e["rows"]["metric_values"] > 0) for e in shown] == [
        (run_id, "full", True, True)
    ]

    res = cli("restore", run_id[:12], "--ledger", d)  # an id prefix of the trash
    assert res.exit_code == 0, res.output
    assert index_dump(d) == before  # every row as it was: same evaluation ids, same order
    assert files_of(d / "runs" / run_id) == folder
    assert not (d / ".trash" / run_id).exists()
    found = json.loads(cli("runs", "--where", "config.lr = 0.1", "--json", "--ledger", d).output)["runs"]
    assert [r["id"] for r in found] == [run_id]  # the query fields came back with the row
    table = cli("table", "--models", "full", "--json", "--ledger", d)
    assert table.exit_code == 0 and "full" in table.output


def test_rm_asks_first_and_refuses_without_a_terminal(rich_ledger, monkeypatch):
    d, run_id = rich_ledger["dir"], rich_ledger["id"]
    before = index_dump(d)
    res = cli("rm", "full", "--ledger", d)  # CliRunner's stdin is no terminal
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "Error: labledger rm asks before it removes anything and there is no terminal to ask on; pass --yes"
    ]
    monkeypatch.setattr("labledger.cli.trash._can_ask", lambda: True)
    res = cli("rm", "full", "--ledger", d, input="n\n")
    assert res.exit_code == 1 and run_id in res.output and "Move 1 run to the trash?" in res.output
    assert index_dump(d) == before and (d / "runs" / run_id).is_dir()
    res = cli("rm", "full", "--ledger", d, input="y\n")
    assert res.exit_code == 0 and not (d / "runs" / run_id).exists()


def test_a_running_run_is_refused_and_a_dead_one_may_go(tmp_path):
    d = tmp_path / "ledger"
    live = labledger.start_run("live", ledger=d)
    live.log(1, loss=1.0)
    try:
        res = cli("rm", "live", "--yes", "--ledger", d)
        assert res.exit_code == 1
        assert res.output.startswith(f"Error: run {live.id} (live) is running (pid {os.getpid()}")
        assert len(res.output.strip().splitlines()) == 1
        with labledger.open_ledger(d) as book, pytest.raises(RunStateError):
            book.delete_run(live.id)
        assert (d / "runs" / live.id / "run.json").is_file()
        os.close(live._lock_fd)  # the lock goes as it goes when the process dies
        live._lock_fd = None
        res = cli("rm", live.id, "--yes", "--ledger", d)
        assert res.exit_code == 0, res.output
        entry = json.loads(cli("trash", "--json", "--ledger", d).output)["trash"][0]
        assert entry["status"] == "crashed"
    finally:
        live.status = "crashed"  # as its dead process would leave it: nothing more is written
        live.ledger.close()


def test_checkpoints_other_runs_use_stay_until_no_run_uses_them(tmp_path):
    d = tmp_path / "ledger"
    ck = tmp_path / "model.pt"
    ck.write_bytes(b"parent weights")
    with labledger.start_run("parent", ledger=d) as parent:
        rec = parent.log_checkpoint(ck, step=1)
        other = tmp_path / "other.pt"
        other.write_bytes(b"not shared")
        parent.log_checkpoint(other, step=2)
    with labledger.start_run("child", ledger=d) as child:
        child.set_init(rec["path"])  # started from the parent's copy, by its path
    with labledger.start_run("by-hash", ledger=d) as by_hash:
        by_hash.set_init(rec["sha256"])  # lineage by sha256 only
    shared = Path(rec["path"])
    res = cli("rm", "parent", "--yes", "--ledger", d)
    assert res.exit_code == 0, res.output
    assert f"kept checkpoints/{shared.name} in its folder" in res.output
    assert shared.read_bytes() == b"parent weights"
    assert not (d / "runs" / parent.id / "checkpoints" / "other.pt").exists()
    marker = json.loads((d / "runs" / parent.id / ".deleted.json").read_text())
    assert sorted(marker["kept"][0]["used_by"]) == sorted([child.id, by_hash.id])
    verify = cli("verify", "--ledger", d)
    assert verify.exit_code == 0, verify.output  # the kept files are no stray run folder
    lineage = cli("lineage", "child", "--json", "--ledger", d)
    assert lineage.exit_code == 0, lineage.output

    res = cli("gc", "--yes", "--ledger", d)  # the trash entry goes; the file stays: two runs use it
    assert res.exit_code == 0 and shared.is_file() and not (d / ".trash" / parent.id).exists()
    assert cli("rm", "child", "by-hash", "--yes", "--ledger", d).exit_code == 0
    res = cli("gc", "--yes", "--ledger", d)
    assert res.exit_code == 0, res.output
    assert not shared.exists() and not (d / "runs" / parent.id).exists()
    assert cli("verify", "--ledger", d).exit_code == 0


def test_restore_over_the_kept_files_brings_the_whole_folder_back(tmp_path):
    d = tmp_path / "ledger"
    ck = tmp_path / "model.pt"
    ck.write_bytes(b"w")
    with labledger.start_run("parent", ledger=d) as parent:
        rec = parent.log_checkpoint(ck)
    with labledger.start_run("child", ledger=d) as child:
        child.set_init(rec["path"])
    folder = files_of(d / "runs" / parent.id)
    with labledger.open_ledger(d) as book:
        entry = book.delete_run("parent")
        assert entry.kept and (d / "runs" / parent.id / ".deleted.json").is_file()
        assert book.restore_run("parent") == parent.id
        assert [r.name for r in book.runs()] == ["child", "parent"]
        assert book.trash() == []
    assert files_of(d / "runs" / parent.id) == folder


def test_a_folder_removed_by_hand_is_one_line_everywhere_and_verify_repair_cleans_it(rich_ledger):
    d, run_id, tmp = rich_ledger["dir"], rich_ledger["id"], rich_ledger["tmp"]
    saved = tmp / "saved-run"
    shutil.copytree(d / "runs" / run_id, saved)
    shutil.rmtree(d / "runs" / run_id)
    line = (
        f"Error: run {run_id}: its folder {d / 'runs' / run_id} is gone (removed by hand?); "
        f"labledger verify --repair removes it from the index"
    )
    for args in (
        ("show", "full"),
        ("diff", "other", "full"),
        ("export", "full", "--what", "scalars", "--out", tmp / "x.jsonl"),
        ("eval", "full:test"),
    ):
        res = cli(*args, "--ledger", d)
        assert res.exit_code == 1, (args, res.output)
        assert res.output.strip().splitlines() == [line], args
    assert not (tmp / "x.jsonl").exists()
    res = cli("runs", "--ledger", d)
    assert res.exit_code == 0
    row = next(r for r in res.output.splitlines() if run_id in r)
    assert "missing" in row
    assert "Note: 1 run (" in res.output and "labledger verify --repair removes it from the index" in res.output
    docs = json.loads(cli("runs", "--json", "--ledger", d).stdout)["runs"]
    assert [doc.get("missing", False) for doc in docs] == [True, False]

    res = cli("verify", "--ledger", d)
    assert res.exit_code == 1 and "its folder is gone (removed by hand?)" in res.output
    res = cli("verify", "--repair", "--ledger", d)
    assert res.exit_code == 0, res.output
    assert "index rows moved to" in res.output
    assert run_rows(index_dump(d), run_id) == 0
    assert cli("verify", "--ledger", d).exit_code == 0
    res = cli("restore", "full", "--ledger", d)  # rows only: refused until the folder is back
    assert res.exit_code == 1 and "put the folder back at" in res.output
    shutil.copytree(saved, d / "runs" / run_id)
    assert cli("restore", "full", "--ledger", d).exit_code == 0
    res = cli("show", "full", "--json", "--ledger", d)
    assert res.exit_code == 0 and json.loads(res.stdout)["id"] == run_id


def test_a_failed_delete_leaves_the_run_as_it_was(rich_ledger, monkeypatch):
    d, run_id = rich_ledger["dir"], rich_ledger["id"]
    before = index_dump(d)
    folder = files_of(d / "runs" / run_id)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(trash_mod, "_delete_rows", fail)
    with labledger.open_ledger(d) as book, pytest.raises(OSError):
        book.delete_run(run_id)
    assert index_dump(d) == before and files_of(d / "runs" / run_id) == folder
    assert not (d / ".trash" / run_id).exists()


def test_an_rm_killed_before_its_commit_is_put_back(rich_ledger):
    """The state a kill between the folder's rename and the commit leaves (the index still has the
    run, its folder is in the trash): reported in one line, and settled back by verify --repair."""
    d, run_id = rich_ledger["dir"], rich_ledger["id"]
    before = index_dump(d)
    folder = files_of(d / "runs" / run_id)
    with labledger.open_ledger(d) as book:
        rows = trash_mod.snapshot_rows(book.db, "sqlite", run_id)
    entry = d / ".trash" / run_id
    entry.mkdir(parents=True)
    trash_mod._write_json(entry / "note.json", {"id": run_id, "name": "full", "folder": f"runs/{run_id}", "rows": rows})
    os.rename(d / "runs" / run_id, entry / "run")
    res = cli("show", "full", "--ledger", d)
    assert res.exit_code == 1 and "left by an interrupted labledger rm; labledger verify --repair puts it back" in (
        res.output
    )
    res = cli("verify", "--repair", "--ledger", d)
    assert res.exit_code == 0, res.output
    assert index_dump(d) == before and files_of(d / "runs" / run_id) == folder and not entry.exists()


def test_gc_older_than_removes_only_old_entries(tmp_path):
    d = tmp_path / "ledger"
    ids = {}
    for name in ("old", "new"):
        with labledger.start_run(name, ledger=d) as run:
            run.log(1, loss=1.0)
        ids[name] = run.id
    assert cli("rm", "old", "new", "--yes", "--ledger", d).exit_code == 0
    note_path = d / ".trash" / ids["old"] / "note.json"
    note = json.loads(note_path.read_text())
    note["deleted"] = time.time() - 40 * 86400
    note_path.write_text(json.dumps(note))
    res = cli("gc", "--older-than", "30d", "--ledger", d)
    assert res.exit_code == 1 and "pass --yes" in res.output and note_path.exists()
    res = cli("gc", "--older-than", "30d", "--yes", "--ledger", d)
    assert res.exit_code == 0, res.output
    assert [e["name"] for e in json.loads(cli("trash", "--json", "--ledger", d).output)["trash"]] == ["new"]
    assert cli("gc", "--older-than", "soon", "--yes", "--ledger", d).exit_code == 2


def test_a_deleted_runs_site_pages_are_removed_at_the_next_build(tmp_path):
    from labledger.site import build_site

    d = tmp_path / "ledger"
    ids = []
    for name in ("keep", "drop"):
        with labledger.start_run(name, ledger=d) as run:
            run.log(1, loss=1.0)
            run.log(2, loss=0.5)
        ids.append(run.id)
    out = tmp_path / "site"
    build_site(d, out)
    dropped = [p for p in out.rglob("*") if p.is_file() and ids[1] in p.as_posix()]
    assert dropped
    with labledger.open_ledger(d) as book:
        book.delete_run("drop")
    result = build_site(d, out)
    assert result.runs == [ids[0]]
    assert not [p for p in out.rglob("*") if ids[1] in p.as_posix()]
    assert {Path(p) for p in result.removed} >= set(dropped)
    assert ids[1] not in (out / "data" / "catalog.js").read_text()


# -- team mode: the index in PostgreSQL -------------------------------------------------------------
def pg_dump(book: Ledger) -> dict[str, list[tuple]]:
    """Every row of the run tables of a PostgreSQL index, without PostgreSQL's own ``rowid`` column
    (an identity the database numbers), in the order the rows were written."""
    out = {}
    for table in ("runs", "run_tags", "checkpoints", "run_inits", "evaluations", "metric_values", "benchmark_entries"):
        cols = [c for c in book.db.columns(table) if c != "rowid"]
        order = "id" if "id" in cols else "rowid"
        out[table] = book.db.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}").fetchall()
    out["run_fields"] = book.db.execute(
        "SELECT run_id, key, kind, num, str FROM run_fields ORDER BY run_id, key"
    ).fetchall()
    return out


@pytest.mark.slow
def test_team_mode_rm_and_restore_keep_every_row(pg_url, tmp_path):
    from labledger.analysis.benchmarks import record_evaluation

    ck = tmp_path / "model.pt"
    ck.write_bytes(b"weights")
    with labledger.open_ledger(pg_url, artifacts=tmp_path / "shared", create=True) as book:
        with labledger.start_run("keep", ledger=book) as other:
            other.log(1, loss=1.0)
        with labledger.start_run("full", tags=("a",), config={"lr": 0.1}, ledger=book) as run:
            run.set_init("bert-base-uncased")
            run.log(1, loss=0.5)
            run.log_checkpoint(ck, step=1)
            run.log_results("test", write_jsonl(tmp_path / "r.jsonl", results_rows(30, seed=2)))
        view = book.run(run.id)
        ev = labledger.evaluate(view.results_path("test"), resamples=20)
        record_evaluation(book, run.id, "test", ev.doc, model="full", results_path=str(view.results_path("test")))
        before = pg_dump(book)
        assert before["metric_values"] and before["benchmark_entries"] and before["run_fields"]
        entry = book.delete_run("full")
        assert entry.path == tmp_path / "shared" / ".trash" / run.id and entry.folder
        after = pg_dump(book)
        assert [r[0] for r in after["runs"]] == [other.id]
        assert not after["metric_values"] and not after["benchmark_entries"] and not after["evaluations"]
        assert {r[0] for r in after["run_fields"]} == {other.id}
        assert book.restore_run(run.id[:10]) == run.id
        assert pg_dump(book) == before
        assert [r.name for r in book.runs(where="config.lr = 0.1")] == ["full"]


# -- the server ------------------------------------------------------------------------------------
def test_the_server_deletes_a_run_with_the_token_and_refuses_a_running_one(tmp_path):
    from starlette.testclient import TestClient

    from labledger.server import create_app

    token = "delete-test-token-0123456789abcdef"
    auth = {"Authorization": f"Bearer {token}"}
    d = tmp_path / "ledger"
    with labledger.start_run("done", ledger=d) as run:
        run.log(1, loss=0.5)
    with labledger.start_run("gone", ledger=d) as gone:
        gone.log(1, loss=0.5)
    app = create_app(d, uploads_dir=tmp_path / "uploads", token=token, site_refresh=0.0)
    with TestClient(app) as c:
        assert c.delete(f"/api/runs/{run.id}").status_code == 401
        live = c.post("/api/runs", json={"name": "live"}, headers=auth).json()["run"]
        r = c.delete(f"/api/runs/{live['id']}", headers=auth)
        assert r.status_code == 409 and "running on this server" in r.json()["error"]
        r = c.delete("/api/runs/done", headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["run"] == {"id": run.id, "name": "done", "status": "finished"}
        assert r.json()["trash"] == f".trash/{run.id}"
        assert c.get(f"/api/runs/{run.id}", headers=auth).status_code == 404
        assert run.id not in [x["id"] for x in c.get("/api/runs", headers=auth).json()["runs"]]
        assert c.delete(f"/api/runs/{run.id}", headers=auth).status_code == 404
        shutil.rmtree(d / "runs" / gone.id)  # by hand: the API says so in one line
        r = c.get(f"/api/runs/{gone.id}", headers=auth)
        assert r.status_code == 400 and r.json()["error"].startswith(f"run {gone.id}: its folder")
        assert c.post(f"/api/runs/{live['id']}/finish", json={}, headers=auth).status_code == 200
    assert cli("restore", "done", "--ledger", d).exit_code == 0
    with labledger.open_ledger(d) as book:
        assert book.run("done").id == run.id


def test_a_folder_that_cannot_move_is_one_line_and_nothing_is_removed(rich_ledger, monkeypatch):
    d, run_id = rich_ledger["dir"], rich_ledger["id"]
    before = index_dump(d)
    rename = os.rename

    def cross_device(src, dst):
        if Path(src).name == run_id:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src))
        return rename(src, dst)

    monkeypatch.setattr(trash_mod.os, "rename", cross_device)
    res = cli("rm", run_id, "--yes", "--ledger", d)
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"Error: run {run_id}: cannot move its folder into {d / '.trash' / run_id} "
        f"({os.strerror(errno.EXDEV)}); nothing was removed"
    ]
    assert index_dump(d) == before and (d / "runs" / run_id / "run.json").is_file()
    assert not (d / ".trash" / run_id).exists()


def test_a_restore_killed_before_its_commit_goes_back_to_the_trash(tmp_path):
    """The state a kill between a restore's rename and its commit leaves (the folder back in runs/,
    its kept files set aside in the entry, no index row): verify sees a folder without a row, and
    verify --repair settles it as it was, still deleted and still restorable."""
    d = tmp_path / "ledger"
    ck = tmp_path / "model.pt"
    ck.write_bytes(b"w")
    with labledger.start_run("parent", ledger=d) as parent:
        rec = parent.log_checkpoint(ck)
    with labledger.start_run("child", ledger=d) as child:
        child.set_init(rec["path"])
    folder = files_of(d / "runs" / parent.id)
    with labledger.open_ledger(d) as book:
        book.delete_run("parent")
    entry, run_dir = d / ".trash" / parent.id, d / "runs" / parent.id
    kept = files_of(run_dir)
    os.rename(run_dir, entry / "kept-aside")
    os.rename(entry / "run", run_dir)
    res = cli("verify", "--ledger", d)
    assert res.exit_code == 1 and "a run folder with no row in the index" in res.output
    res = cli("verify", "--repair", "--ledger", d)
    assert res.exit_code == 0, res.output
    assert files_of(entry / "run") == folder and files_of(run_dir) == kept
    assert cli("restore", "parent", "--ledger", d).exit_code == 0
    assert files_of(run_dir) == folder and not entry.exists()


def test_rm_of_several_runs_says_which_went_when_a_later_one_fails(tmp_path, monkeypatch):
    d = tmp_path / "ledger"
    ids = []
    for name in ("first", "second"):
        with labledger.start_run(name, ledger=d) as run:
            run.log(1, loss=1.0)
        ids.append(run.id)
    rename = os.rename

    def refuse_second(src, dst):
        if Path(src).name == ids[1]:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), str(src))
        return rename(src, dst)

    monkeypatch.setattr(trash_mod.os, "rename", refuse_second)
    res = cli("rm", "first", "second", "--yes", "--ledger", d)
    assert res.exit_code == 1
    [line] = res.output.strip().splitlines()
    assert line.startswith(f"Error: run {ids[1]}: cannot move its folder") and line.endswith(
        f"nothing was removed (moved to the trash before it: {ids[0]})"
    )
    with labledger.open_ledger(d) as book:
        assert [r.id for r in book.runs()] == [ids[1]]
