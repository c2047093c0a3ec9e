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
