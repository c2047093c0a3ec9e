"""Atomic imports: runs built in a staging ledger appear all at once, or not at all."""

from __future__ import annotations

import pytest

import labledger
from labledger.store.run import Run


def _snapshot(root):
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "ledger.db" not in p.name)
    ledger = labledger.open_ledger(root)
    rows = ledger.db.execute("SELECT * FROM runs ORDER BY id").fetchall()
    ledger.close()
    return files, rows


def test_adopt_moves_runs_with_their_records(tmp_path):
    ledger = labledger.open_ledger(tmp_path, create=True)
    with ledger.staging() as stage:
        with Run(
            "imported", group="old", ledger=stage, started=1_000.0, extra_meta={"imported_from": {"path": "events.out"}}
        ) as run:
            run.log(1, loss=0.5, time=1_001.0)
            run.log_history({"epoch": 1, "loss": 0.5})
        assert ledger.runs() == []  # not visible before adopt
        ids = ledger.adopt(stage, source="events.out", sha256="ab" * 32, fmt="tensorboard")
    [info] = ledger.runs()
    assert info.id == ids[0] and info.started == 1_000.0 and info.group == "old"
    view = ledger.run(info.id)
    assert [r["time"] for r in view.scalars()] == [1_001.0]
    assert view.meta["imported_from"] == {"path": "events.out"}
    assert ledger.previous_import("ab" * 32)["run_id"] == info.id
    assert not any((tmp_path / ".staging").iterdir())


def test_failure_before_adopt_leaves_the_ledger_unchanged(tmp_path):
    with labledger.start_run("existing", ledger=tmp_path) as run:
        run.log(1, loss=1.0)
    before = _snapshot(tmp_path)
    ledger = labledger.open_ledger(tmp_path)
    with pytest.raises(labledger.RecordError), ledger.staging() as stage:
        with Run("half", ledger=stage) as r:
            r.log(1, loss=0.5)
            r.log_batch({"microbatch": "one"})  # a bad record part-way through
        ledger.adopt(stage)
    assert _snapshot(tmp_path) == before


def test_an_adoption_killed_between_its_commit_and_its_folders_is_finished_never_orphaned(tmp_path, monkeypatch):
    """The commit decides an adoption: its run folders move into runs/ after it, so a kill before the
    commit leaves no folder in runs/ without its row (what `verify` found when CI's kill -9 landed
    mid-adopt), and one after it leaves them in the staging folder, which the next import (or
    `verify --repair`) moves in before it removes the rest."""
    import os
    import shutil

    from labledger.store.ledger import Ledger
    from labledger.store.verify import verify_ledger

    ledger = labledger.open_ledger(tmp_path, create=True)
    at_commit: list = []

    def traced(sql):  # what runs/ holds when the commit is asked for (a kill -9 there)
        if sql.strip().upper() == "COMMIT":
            at_commit.append(sorted(p.name for p in (tmp_path / "runs").iterdir()))

    with ledger.staging() as stage:
        with Run("first", ledger=stage) as r:
            r.log(1, loss=0.5)
        ledger.db.set_trace_callback(traced)
        [first] = ledger.adopt(stage)
        ledger.db.set_trace_callback(None)
    assert at_commit == [[]] and ledger.run_dir(first).is_dir()  # no folder before its row

    kept: list = []
    with monkeypatch.context() as m:  # a kill right after the commit: nothing moved, the stage left
        m.setattr(Ledger, "finish_adopted", lambda self, path: [])
        m.setattr(shutil, "rmtree", lambda path, **kw: kept.append(path))
        with ledger.staging() as stage:
            with Run("committed", ledger=stage) as r:
                r.log(1, loss=0.25)
            [rid] = ledger.adopt(stage)
    [left] = kept
    assert not ledger.run_dir(rid).exists() and (left / "runs" / rid).is_dir()
    os.unlink(left / ".import.lock")  # its importer is gone
    report = verify_ledger(ledger, repair=True)
    assert ledger.run_dir(rid).is_dir() and not left.exists()
    assert any("runs moved in" in str(p.repaired) for p in report.problems)
    assert [v["loss"] for v in ledger.run(rid).scalars()] == [0.25] and len(ledger.runs()) == 2
    assert verify_ledger(ledger).ok


def test_a_run_start_killed_part_way_leaves_nothing_in_runs_and_the_next_start_settles_it(tmp_path):
    """A run's folder is made in .new-runs/ and renamed into runs/ after its row's commit: what a
    killed start left there (no live lock) is moved in when its row was committed, else removed, by
    the next start (or `verify --repair`); `verify` reports it until then."""
    from labledger.store.verify import verify_ledger

    with labledger.start_run("first", ledger=tmp_path) as run:
        run.log(1, loss=1.0)
    ledger = labledger.open_ledger(tmp_path)
    # renamed into runs/ (what stays is the lock that starts and settlings take in turn)
    assert [p.name for p in (tmp_path / ledger.NEW_RUNS).iterdir()] == [".settle.lock"]
    half = tmp_path / ledger.NEW_RUNS / "20260101-000000-000000000000"  # killed before its row
    half.mkdir()
    (half / "run.json").write_text("{}")
    ran = ledger.run_dir(run.id)
    committed = tmp_path / ledger.NEW_RUNS / run.id  # killed between its row and the rename
    ran.rename(committed)
    report = verify_ledger(ledger)
    assert (
        sorted(p.message for p in report.problems if "killed part-way" in p.message)
        == ["left by a run start killed part-way"] * 2
    )
    with labledger.start_run("second", ledger=tmp_path) as second:
        second.log(1, loss=0.5)
    assert ran.is_dir() and not half.exists() and not committed.exists()
    assert verify_ledger(labledger.open_ledger(tmp_path)).ok
    assert not [p for p in (tmp_path / ledger.NEW_RUNS).iterdir() if p.is_dir()]


def test_an_import_on_a_full_disk_names_the_ledger_and_changes_nothing(tmp_path, monkeypatch):
    """The scratch ledger cannot be made (its index, or its folder): the one-line error names the
    ledger the user gave, not the scratch folder, and the ledger is as it was."""
    import errno
    import sqlite3
    from pathlib import Path

    from labledger.errors import StorageError

    with labledger.start_run("existing", ledger=tmp_path) as run:
        run.log(1, loss=1.0)
    before = _snapshot(tmp_path)
    ledger = labledger.open_ledger(tmp_path)
    connect = sqlite3.connect

    def full(path, *args, **kwargs):
        if ".staging" in str(path):
            raise sqlite3.OperationalError("database or disk is full")
        return connect(path, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", full)
    with pytest.raises(StorageError) as caught, ledger.staging():
        pass
    assert str(caught.value) == (
        f"disk full: {tmp_path}: nothing was imported (the import's scratch ledger could not be made: "
        "database or disk is full); free space and try again"
    )
    monkeypatch.setattr(sqlite3, "connect", connect)
    mkdir = Path.mkdir

    def no_space(self, *args, **kwargs):
        if ".staging" in str(self):
            raise OSError(errno.ENOSPC, "No space left on device")
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", no_space)
    with pytest.raises(StorageError, match=rf"^disk full: {tmp_path}: nothing was imported \(No space left"):
        with ledger.staging():
            pass
    monkeypatch.setattr(Path, "mkdir", mkdir)
    ledger.close()
    assert _snapshot(tmp_path) == before
    staging = tmp_path / ".staging"
    assert not staging.exists() or not any(staging.iterdir())  # no scratch folder left
