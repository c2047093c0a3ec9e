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
