"""System metrics: start_run(system_metrics=True) samples on a thread into system.jsonl (#14)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import labledger
from labledger.store.system import SystemSampler

ROOT = Path(__file__).resolve().parents[1]


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "labledger-system-metrics"]


def test_off_by_default(tmp_path):
    with labledger.start_run("r", ledger=tmp_path) as run:
        run.log(0, loss=1.0)
    assert not (run.dir / "system.jsonl").exists() and not _threads()


@pytest.mark.slow
def test_samples_once_a_second_and_stops_with_the_run(tmp_path):
    with labledger.start_run("r", ledger=tmp_path, system_metrics=True) as run:
        for step in range(3):
            run.log(step, loss=1.0 / (step + 1))
            time.sleep(0.6)
        assert _threads() == ["labledger-system-metrics"]
    assert not _threads()  # the thread ended with the run
    recs = list(labledger.open_ledger(tmp_path).run(run.id).records("system"))
    assert 2 <= len(recs) <= 3  # t=0, t=1 (and t=~2 under load), not more
    for rec in recs:
        assert rec["rss_mb"] > 1 and 0 <= rec["mem_used_percent"] <= 100 and rec["cpu_percent"] >= 0
        assert rec["mem_available_mb"] > 0
    assert recs[1]["time"] - recs[0]["time"] >= 0.9
    size = (run.dir / "system.jsonl").stat().st_size
    time.sleep(1.2)
    assert (run.dir / "system.jsonl").stat().st_size == size  # nothing written after finish


def test_a_busy_process_shows_cpu(tmp_path):
    sampler = SystemSampler(tmp_path, interval=60)
    time.sleep(0.05)  # let the thread write its first sample
    wall0, cpu0 = time.monotonic(), time.process_time()
    sampler._last_wall, sampler._last_cpu = wall0, cpu0
    while time.process_time() < cpu0 + 0.3:
        pass
    rec = sampler.sample()
    expected = 100 * (time.process_time() - cpu0) / (time.monotonic() - wall0)  # shared cores: not 100
    sampler.stop()
    assert abs(rec["cpu_percent"] - expected) < 0.2 * expected


def test_wandb_runs_turn_it_on(tmp_path):
    import labledger.wandb as wandb

    run = wandb.init(dir=str(tmp_path))
    wandb.log({"x": 1.0})
    wandb.finish()
    assert (Path(run.dir) / "system.jsonl").read_text().count("\n") >= 1 and not _threads()


@pytest.mark.slow
def test_kill_9_loses_at_most_the_sample_in_flight(tmp_path):
    code = (
        "import time, labledger\n"
        f"run = labledger.start_run('k', ledger={str(tmp_path)!r}, system_metrics=True)\n"
        "print(run.dir, flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        run_dir = Path(proc.stdout.readline().strip())
        path = run_dir / "system.jsonl"
        deadline = time.time() + 30
        while time.time() < deadline and (not path.exists() or path.read_text().count("\n") < 2):
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every written sample is a whole line: nothing torn
    assert len(lines) - 1 >= 2 and all(json.loads(x)["rss_mb"] > 0 for x in lines[:-1])
    view = labledger.open_ledger(tmp_path).run(run_dir.name)
    assert view.status == "crashed" and len(list(view.records("system"))) == len(lines) - 1
