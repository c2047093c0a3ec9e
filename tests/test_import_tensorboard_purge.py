"""TensorBoard restarts (`SummaryWriter(purge_step=P)`): the import hides what TensorBoard hides (#43).

Event files written by the real `torch.utils.tensorboard.SummaryWriter`; every imported point is
compared with TensorBoard's own `EventAccumulator` (its default `purge_orphaned_data`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import labledger
from labledger.importers import import_path

pytest.importorskip("tensorboard")
writer_module = pytest.importorskip("torch.utils.tensorboard")


def _theirs(d: Path) -> list[tuple[int, float, str, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
    acc.Reload()
    return sorted((e.step, e.wall_time, tag, e.value) for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag))


def _mine(view) -> list[tuple[int, float, str, float]]:
    return sorted(
        (r["step"], r["time"], k, v) for r in view.scalars() for k, v in r.items() if k not in ("step", "time")
    )


def _import_one(src: Path, ledger: Path):
    result = import_path(src, ledger)
    (run_id,) = result.run_ids
    return labledger.open_ledger(ledger).run(run_id)


@pytest.mark.slow
def test_a_restart_with_purge_step_hides_the_points_tensorboard_hides(tmp_path):
    d = tmp_path / "run"
    w = writer_module.SummaryWriter(str(d))
    for s in range(20):
        w.add_scalar("loss", 1.0 / (s + 1), s)
        w.add_scalar("acc", s / 20, s)
    w.close()
    time.sleep(1.05)  # the restarted writer's file is named after a later second, so it is read after
    w = writer_module.SummaryWriter(str(d), purge_step=10)
    for s in range(10, 25):
        w.add_scalar("loss", 100.0 + s, s)
    w.close()
    assert len(list(d.glob("*tfevents*"))) == 2
    theirs = _theirs(d)
    assert [v for s, _, tag, v in theirs if tag == "loss" and s == 10] == [110.0]  # TensorBoard hid the old 10
    view = _import_one(d, tmp_path / "ledger")
    mine = _mine(view)
    assert mine == theirs
    assert [s for s, _, tag, _ in mine if tag == "acc"] == list(range(10))  # acc's steps 10-19 are hidden too
    assert [v for s, _, tag, v in mine if tag == "loss" and s >= 10] == [100.0 + s for s in range(10, 25)]
    (note,) = [n["text"] for n in view.notes() if n["text"].startswith("Restarts")]
    assert "20 scalar record(s) (20 values)" in note and "step 10" in note


@pytest.mark.slow
def test_a_restart_inside_one_file_and_files_without_one(tmp_path):
    """A START written in the middle of a file purges only what came before it; a run folder with
    no restart is imported whole, out-of-order steps included, as TensorBoard shows it."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    d = tmp_path / "one"
    w = writer_module.SummaryWriter(str(d))
    for s in range(8):
        w.add_scalar("loss", float(s), s)
    w._get_file_writer().add_event(
        Event(step=5, wall_time=time.time(), session_log=SessionLog(status=SessionLog.START))
    )
    for s in range(5, 9):
        w.add_scalar("loss", 10.0 + s, s)
    w.close()
    view = _import_one(d, tmp_path / "l1")
    assert _mine(view) == _theirs(d)
    assert [(s, v) for s, _, _, v in _mine(view)] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)] + [
        (s, 10.0 + s) for s in range(5, 9)
    ]
    assert not any("session_log" in n["text"] for n in view.notes())  # honoured, not "not imported"

    plain = tmp_path / "plain"
    w = writer_module.SummaryWriter(str(plain))
    for s in (0, 1, 2, 1, 3):  # steps out of order, no restart written: TensorBoard keeps them all
        w.add_scalar("loss", float(s), s)
    w.close()
    view = _import_one(plain, tmp_path / "l2")
    assert _mine(view) == _theirs(plain) and len(_mine(view)) == 5
    assert not any(n["text"].startswith("Restarts") for n in view.notes())
