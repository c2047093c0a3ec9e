"""kill -9 at a random moment: the ledger opens, the run is crashed, nothing acknowledged is lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import labledger
from labledger.errors import DamagedLineWarning
from labledger.store.jsonl import TornLineWarning, read_jsonl

CHILD = textwrap.dedent("""
    import sys, math
    sys.path.insert(0, {tests!r})
    import labledger
    from conftest import make_batch
    run = labledger.start_run("victim", ledger={ledger!r})
    print("RUN", run.id, flush=True)
    step = 0
    while True:
        step += 1
        run.log(step, loss=1.0 / step, lr=1e-3, grad_norm=0.5)
        run.log_batch(make_batch(step, n=16, text_len=200))
        if step % 50 == 0:
            run.log_history({{"step": step, "loss": 0.5}})
        # acknowledged: both calls above have returned
        print(step, flush=True)
""")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_loses_nothing_acknowledged(tmp_path, seed):
    ledger_dir = tmp_path / "ledger"
    script = CHILD.format(tests=os.path.dirname(__file__), ledger=str(ledger_dir))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    first = proc.stdout.readline().split()
    assert first[0] == "RUN", first
    run_id = first[1]
    time.sleep(random.Random(seed).uniform(0.3, 1.5))
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    acknowledged = [int(x) for x in out.split()]
    assert acknowledged, "the child logged nothing before it was killed"
    last_ack = acknowledged[-1]

    ledger = labledger.open_ledger(ledger_dir)
    info = ledger.info(run_id)
    assert info.status == "crashed"
    assert "ended without finishing" in info.error
    view = ledger.run(run_id)
    steps = [r["step"] for r in view.scalars()]
    batches = [b["microbatch"] for b in view.batches()]
    # every acknowledged record is there, in order, with no gaps; at most one more was written
    assert steps[:last_ack] == list(range(1, last_ack + 1))
    assert batches[:last_ack] == list(range(1, last_ack + 1))
    assert len(steps) - last_ack in (0, 1) and len(batches) - last_ack in (0, 1)
    assert view.meta["status"] == "crashed"
    # the crashed run's summary was recomputed from its files
    assert info.summary["steps"] == len(steps)
    # the ledger still takes new runs
    with labledger.start_run("after", ledger=ledger_dir) as run:
        run.log(1, loss=0.1)
    assert ledger.info(run.id).status == "finished"


def test_torn_last_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path):
    ledger_dir = tmp_path / "ledger"
    with labledger.start_run("torn", ledger=ledger_dir) as run:
        for step in range(1, 4):
            run.log(step, loss=0.5)
    path = run.dir / "metrics.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"step": 4, "time": 17000000.0, "lo')  # a writer died mid-write
    view = labledger.open_ledger(ledger_dir).run(run.id)
    with pytest.warns(TornLineWarning, match=r"metrics\.jsonl:4: torn last line skipped"):
        steps = [r["step"] for r in view.scalars()]
    assert steps == [1, 2, 3]


def test_corrupt_middle_line_is_skipped_with_a_warning_and_the_rest_read(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.warns(DamagedLineWarning, match=r"x\.jsonl:2: damaged line skipped \(not valid JSON"):
        assert [r["a"] for r in read_jsonl(path)] == [1, 3]
    with pytest.raises(labledger.RecordError, match=r"x\.jsonl:2: not valid JSON"):
        list(read_jsonl(path, damaged="raise"))


def test_live_run_is_not_reaped(tmp_path):
    ledger_dir = tmp_path / "ledger"
    with labledger.start_run("alive", ledger=ledger_dir) as run:
        run.log(1, loss=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert labledger.open_ledger(ledger_dir).info(run.id).status == "running"
    assert labledger.open_ledger(ledger_dir).info(run.id).status == "finished"


def test_a_finish_whose_index_update_was_lost_is_not_called_a_crash(tmp_path):
    import subprocess
    import sys

    # the process writes run.json as finished, then dies before updating the index
    script = (
        "import labledger, os\n"
        f"run = labledger.start_run('almost', ledger={str(tmp_path)!r})\n"
        "run.log(1, loss=0.5)\n"
        "run.ledger.update_run = lambda *a, **k: os._exit(0)\n"
        "run.finish()\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    info = labledger.open_ledger(tmp_path).runs()[0]
    assert info.status == "finished" and info.error is None
