"""Per-run counters in the index (#19): show / GET /api/runs/{run} answer without scanning the run."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main
from labledger.store.counters import Counters, scan_run
from labledger.store.jsonl import RECORD_FILES, count_lines, read_jsonl

SRC = str(Path(labledger.__file__).resolve().parents[1])


def full_scan(view) -> tuple[dict[str, int], dict[str, dict]]:
    """Counts and last values as show computed them before the counters: every line of every file."""
    counts = {k: count_lines(view.dir / f) for k, f in RECORD_FILES.items() if k not in ("system", "media")}
    last: dict[str, dict] = {}
    for rec in read_jsonl(view.dir / "metrics.jsonl"):
        step = rec.pop("step", None)
        rec.pop("time", None)
        for k, v in rec.items():
            last[k] = {"value": math.nan if v is None else v, "step": step}
    return counts, last


def same_last(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        va, vb = a[k]["value"], b[k]["value"]
        if a[k]["step"] != b[k]["step"] or not (va == vb or (math.isnan(va) and math.isnan(vb))):
            return False
    return True


def forget_counters(ledger_dir: Path, run_id: str) -> None:
    """The run as an older version left it: no counters in the index."""
    book = labledger.open_ledger(ledger_dir)
    book.db.execute("UPDATE runs SET counters = NULL WHERE id = ?", (run_id,))
    book.close()


def write_steps(path: Path, n: int) -> None:
    """``n`` scalar records straight into a run's metrics.jsonl (fast: no Run.log per step)."""
    t0 = 1.7e9
    lines = [f'{{"step":{i},"time":{t0 + i * 0.01},"loss":{1.0 / i!r},"lr":0.001}}\n' for i in range(1, n + 1)]
    lines[n // 2] = f'{{"step":{n // 2 + 1},"time":{t0},"val":null}}\n'  # a NaN, logged once
    path.write_text("".join(lines))


def finished_run(ledger_dir: Path, steps: int = 5) -> labledger.Run:
    with labledger.start_run("r", ledger=ledger_dir) as run:
        for step in range(1, steps + 1):
            run.log(step, loss=1.0 / step, acc=float("nan") if step == 2 else step / 10)
        run.log_history({"epoch": 1, "loss": 0.5})
        run.note("a note")
    return run


def test_a_finished_run_shows_its_counters_and_they_equal_a_full_scan(ledger_dir):
    run = finished_run(ledger_dir)
    book = labledger.open_ledger(ledger_dir)
    stored = book.run_counters(run.id)
    assert stored is not None and stored.records["scalars"] == 5 and stored.steps == 5
    view = book.run(run.id)
    counts, last = full_scan(view)
    assert view.counts() == counts == {"scalars": 5, "batches": 0, "history": 1, "checkpoints": 0, "notes": 1}
    assert same_last(view.last_scalars(), last)
    assert stored.to_json() == scan_run(view.dir).to_json()  # what the writer kept = what the files hold
    assert stored.first_time is not None and stored.last_time >= stored.first_time


def test_show_answers_from_the_stored_counters_not_the_files(ledger_dir):
    run = finished_run(ledger_dir)
    book = labledger.open_ledger(ledger_dir)
    c = book.run_counters(run.id)
    c.records["scalars"] = 12345  # only a reader of the index can see this number
    c.last["loss"] = [0.125, 99]
    book.db.execute("UPDATE runs SET counters = ? WHERE id = ?", (c.to_json(), run.id))
    res = CliRunner().invoke(main, ["show", run.id, "--json", "--ledger", str(ledger_dir)])
    assert res.exit_code == 0, res.output
    doc = orjson.loads(res.output)
    assert doc["counts"]["scalars"] == 12345
    assert doc["last_scalars"]["loss"] == {"value": 0.125, "step": 99}


def test_a_run_without_counters_is_scanned_once_and_then_answers_from_them(ledger_dir):
    run = finished_run(ledger_dir)
    write_steps(run.dir / "metrics.jsonl", 10_000)
    forget_counters(ledger_dir, run.id)
    book = labledger.open_ledger(ledger_dir)
    view = book.run(run.id)
    counts, last = full_scan(view)
    assert view.counts() == counts and counts["scalars"] == 10_000
    assert same_last(view.last_scalars(), last) and last["val"]["step"] == 5_001
    stored = book.run_counters(run.id)  # stored by that first read
    assert stored is not None and stored.records["scalars"] == 10_000 and stored.steps == 10_000


@pytest.mark.slow
def test_show_of_a_run_with_a_million_steps_answers_from_the_counters(ledger_dir):
    run = finished_run(ledger_dir)
    write_steps(run.dir / "metrics.jsonl", 1_000_000)
    forget_counters(ledger_dir, run.id)
    book = labledger.open_ledger(ledger_dir)
    first = book.run(run.id).counters()  # the one scan, stored
    stored = book.run_counters(run.id)
    assert stored is not None and stored.to_json() == first.to_json()
    view = book.run(run.id)
    counts, last = full_scan(view)
    assert view.counts() == counts and counts["scalars"] == 1_000_000
    assert same_last(view.last_scalars(), last)
    assert view.counters().steps == 1_000_000


def test_a_running_run_refreshes_the_index_within_its_interval_and_show_is_exact(ledger_dir):
    run = labledger.start_run("live", ledger=ledger_dir)
    try:
        run.log(1, loss=1.0)
        time.sleep(run.index_interval + 0.05)
        run.log(2, loss=0.5)  # the first log call past the interval refreshes the index row
        reader = labledger.open_ledger(ledger_dir)
        c = reader.run_counters(run.id)
        assert c is not None and c.records["scalars"] == 2 and c.last["loss"] == [0.5, 2]
        assert reader.info(run.id).summary["last"]["loss"] == 0.5
        for step in range(3, 8):  # not in the index yet: show reads the tail since the refresh
            run.log(step, loss=1.0 / step)
        view = reader.run(run.id)
        assert view.status == "running"
        assert view.counts()["scalars"] == 7
        assert view.last_scalars()["loss"] == {"value": 1.0 / 7, "step": 7}
        assert reader.run_counters(run.id).records["scalars"] == 2  # a reader never writes a live run's row
    finally:
        run.finish()


def test_a_crashed_run_gets_its_counters_from_one_scan(ledger_dir):
    code = (
        "import os, labledger\n"
        f"run = labledger.start_run('doomed', ledger={str(ledger_dir)!r})\n"
        "run.index_interval = 1e9; run.sync_interval = 1e9\n"
        "[run.log(s, loss=1.0 / s) for s in range(1, 101)]\n"
        "print(run.id, flush=True)\n"
        "os._exit(0)\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True)
    run_id = out.stdout.strip()
    book = labledger.open_ledger(ledger_dir)
    assert book.run_counters(run_id) is None or book.run_counters(run_id).records["scalars"] < 100
    view = book.run(run_id)  # reaps: marked crashed, counters from the scan stored
    assert view.status == "crashed"
    stored = book.run_counters(run_id)
    assert stored is not None and stored.records["scalars"] == 100 and stored.last["loss"] == [0.01, 100]
    counts, last = full_scan(view)
    assert view.counts() == counts and same_last(view.last_scalars(), last)


def test_records_appended_after_the_counters_are_read_from_the_tail(ledger_dir):
    run = finished_run(ledger_dir)
    with open(run.dir / "metrics.jsonl", "ab") as f:  # an import appending to a finished run
        f.write(b'{"step": 6, "time": 1.0, "loss": 0.01}\n')
    book = labledger.open_ledger(ledger_dir)
    view = book.run(run.id)
    assert view.counts()["scalars"] == 6 and view.last_scalars()["loss"] == {"value": 0.01, "step": 6}
    assert book.run_counters(run.id).records["scalars"] == 6  # kept for the next reader


def test_a_rewritten_file_is_scanned_again(ledger_dir):
    run = finished_run(ledger_dir)
    path = run.dir / "metrics.jsonl"
    path.write_bytes(b'{"step": 1, "loss": 0.75}\n')  # shorter than the counters remember
    view = labledger.open_ledger(ledger_dir).run(run.id)
    assert view.counts()["scalars"] == 1 and view.last_scalars() == {"loss": {"value": 0.75, "step": 1}}


def test_system_samples_are_counted_by_the_writer(ledger_dir):
    with labledger.start_run("sys", ledger=ledger_dir, system_metrics=True) as run:
        run.log(1, loss=1.0)
    book = labledger.open_ledger(ledger_dir)
    view = book.run(run.id)
    n = count_lines(view.dir / "system.jsonl")
    assert n >= 1 and book.run_counters(run.id).records["system"] == n == view.counts()["system"]


def test_counters_json_round_trips_and_refuses_other_versions():
    c = Counters(records={"scalars": 2}, files={"metrics.jsonl": [10, 5]}, steps=2, last={"x": [None, 2]})
    assert Counters.from_json(c.to_json()) == c
    assert Counters.from_json('{"v": 99}') is None and Counters.from_json(None) is None
    assert math.isnan(c.last_scalars()["x"]["value"])
