"""Four processes logging to one ledger at once: every record there, none torn or interleaved."""

from __future__ import annotations

import multiprocessing as mp
import os

import orjson
from conftest import make_batch

import labledger
from labledger.store.jsonl import Appender, iter_lines

N = 5000


def _log_run(ledger_dir: str, worker: int) -> str:
    with labledger.start_run(f"worker-{worker}", group="parallel", ledger=ledger_dir) as run:
        for mb in range(1, N + 1):
            run.log_batch(make_batch(mb, n=2, text_len=20))
            if mb % 100 == 0:
                run.log(mb, loss=1.0 / mb)
    return run.id


def _append_shared(path: str, worker: int) -> None:
    # DDP-style: several processes append to the same file; each record is > 4 KiB.
    out = Appender(path)
    for i in range(N):
        rec = make_batch(i + 1, n=16, text_len=200)
        rec["writer"] = worker
        out.append(rec)
    out.close()


def test_four_processes_four_runs_one_ledger(tmp_path):
    ledger_dir = str(tmp_path / "ledger")
    labledger.open_ledger(ledger_dir, create=True).close()
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        ids = pool.starmap(_log_run, [(ledger_dir, w) for w in range(4)])
    ledger = labledger.open_ledger(ledger_dir)
    runs = ledger.runs(group="parallel")
    assert sorted(r.id for r in runs) == sorted(ids)
    total = 0
    for run_id in ids:
        info = ledger.info(run_id)
        assert info.status == "finished" and info.summary["batches"] == N
        mbs = [b["microbatch"] for b in ledger.run(run_id).batches()]
        assert mbs == list(range(1, N + 1))
        total += len(mbs)
    assert total == 4 * N


def test_four_processes_one_shared_file(tmp_path):
    path = str(tmp_path / "batches.jsonl")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append_shared, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    seen = {w: [] for w in range(4)}
    n_lines = 0
    for _, raw in iter_lines(path):
        rec = orjson.loads(raw)  # a torn or interleaved line would not parse
        assert len(raw) > 4096
        seen[rec["writer"]].append(rec["microbatch"])
        n_lines += 1
    assert n_lines == 4 * N
    for w in range(4):
        assert seen[w] == list(range(1, N + 1))
    assert os.path.getsize(path) == sum(len(r) for _, r in iter_lines(path))


def test_a_start_s_new_folder_is_never_settled_away_before_its_lock_is_held(tmp_path, monkeypatch):
    """A start makes its folder in ``.new-runs/`` and then locks it; another process's start settles
    what killed starts left there. Both are one at a time under the settle lock: a settling that
    comes between a start's ``mkdir`` and its lock waits for the lock, and never takes the live
    folder for a killed start's (four processes starting runs in one ledger: one run failed with
    FileNotFoundError on its own config.json, its folder removed under it). A second ledger object
    stands in for the other process (``flock`` locks are per open file, so threads contend as
    processes do)."""
    import threading

    from labledger.store import ledger as ledger_module

    root = tmp_path / "ledger"
    labledger.open_ledger(root, create=True).close()
    made, go = threading.Event(), threading.Event()
    real_open = os.open

    def slow_open(path, *args, **kwargs):
        if str(path).endswith("run-a/.lock"):  # the folder exists, its lock not yet held
            made.set()
            assert go.wait(10)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(ledger_module.os, "open", slow_open)
    a, b = labledger.open_ledger(root), labledger.open_ledger(root)
    started: list = []
    settled: list = []
    start = threading.Thread(target=lambda: started.append(a.start_folder("run-a")))
    settle = threading.Thread(target=lambda: settled.append(b.finish_started()))
    start.start()
    assert made.wait(10)
    settle.start()
    settle.join(0.5)
    assert settle.is_alive()  # waiting for the start to hold its folder's lock
    go.set()
    start.join(10)
    settle.join(10)
    assert not start.is_alive() and not settle.is_alive()
    folder, fd = started[0]
    assert folder.is_dir() and settled == [[]]  # the live folder kept, nothing settled
    assert ledger_module.lock_is_held(folder / ".lock") and b.left_started() == []
    os.close(fd)  # as a killed start: its folder is now left, and the next settling removes it
    assert b.left_started() == [folder] and b.finish_started() == [folder] and not folder.exists()
    a.close()
    b.close()
