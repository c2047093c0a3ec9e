#!/usr/bin/env python
"""Showing one run (issue 19): ``labledger show``, ``GET /api/runs/{run}`` and the index row, on a
long run and on a live one.

1. A finished run of ``--steps`` scalar records (default 2,000,000; ``--steps 14000000`` is the
   review's 14M-step run, 1.3 GB), its ``metrics.jsonl`` written directly (fast), with no counters
   in the index (as an older version left it). Cases: the first read (one scan, which stores the
   counters where the version keeps them), then ``show --json`` in a fresh process, the same
   in-process (``ledger.run(id)`` + ``counts()`` + ``last_scalars()``, what show and the API do), and
   ``GET /api/runs/{run}`` through the server's app in-process (Starlette's TestClient), ``--reps``
   times each, interleaved. Goal: < 50 ms.
2. Live: a writer process logs ``Run.log(step, loss=, lr=, wall=time.time())`` in a tight loop for
   ``--live`` seconds; once a second this process reads the index row (``ledger.runs(name=)``, what
   ``labledger runs`` and the run page's header show), ``GET /api/runs/live`` and ``show --json`` (a
   new process). Staleness = when the answer arrived minus the ``wall`` value of the newest step in
   it. Goal: the index row at most 1 s behind.

Wall and CPU time (this process's or the child's), load average before and after. Run it against
another tree with ``PYTHONPATH=OTHER/src python bench/show.py`` for a before/after comparison.

    python bench/show.py                       # 2M steps, 5 reps, 20 s live
    python bench/show.py --steps 14000000 --reps 3 --live 30
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]  # bench/logging.py

import argparse
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import orjson

GOAL_S = 0.05

WRITER = """
import sys, time, labledger
ledger, seconds = sys.argv[1], float(sys.argv[2])
run = labledger.start_run("live", ledger=ledger)
print(run.id, flush=True)
end = time.time() + seconds
step = 0
while True:
    now = time.time()
    if now >= end:
        break
    for _ in range(1000):
        step += 1
        run.log(step, loss=1.0 / step, lr=1e-3, wall=time.time())
run.finish()
print(step, flush=True)
"""


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(cmd: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd}: failed")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, out


def labledger_cmd() -> list[str]:
    script = Path(sys.executable).parent / "labledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "labledger"]


def build_long_run(ledger: Path, steps: int) -> str:
    import labledger

    with labledger.start_run("long", ledger=ledger) as run:
        run.log(1, loss=1.0, lr=1e-3, grad_norm=1.0)
    t0 = 1.7e9
    with open(run.dir / "metrics.jsonl", "wb") as f:
        chunk = 100_000
        for lo in range(1, steps + 1, chunk):
            hi = min(steps, lo + chunk - 1)
            f.write(
                "".join(
                    f'{{"step":{i},"time":{t0 + i * 1e-3!r},"loss":{1.0 / i!r},"lr":0.001,"grad_norm":{1.0 + i % 7}}}\n'
                    for i in range(lo, hi + 1)
                ).encode()
            )
    book = labledger.open_ledger(ledger)
    cols = {r[1] for r in book.db.execute("PRAGMA table_info(runs)")}
    if "counters" in cols:  # as an older version left it: no counters
        book.db.execute("UPDATE runs SET counters = NULL WHERE id = ?", (run.id,))
    book.close()
    return run.id


def show_in_process(ledger: Path, run_id: str) -> dict:
    import labledger

    book = labledger.open_ledger(ledger)
    view = book.run(run_id)
    out = {"counts": view.counts(), "last": view.last_scalars()}
    book.close()
    return out


def table(header: tuple[str, ...], rows: list[tuple], markdown: bool) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    if markdown:
        print("\n| " + " | ".join(header) + " |")
        print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for r in rows:
            print("| " + " | ".join(str(c) for c in r) + " |")
    print()


def long_run(a: argparse.Namespace, tmp: Path, env: dict[str, str]) -> None:
    from starlette.testclient import TestClient

    from labledger.server import create_app

    ledger = tmp / "long"
    t0 = time.perf_counter()
    run_id = build_long_run(ledger, a.steps)
    size = (ledger / "runs" / run_id / "metrics.jsonl").stat().st_size
    print(
        f"built a run of {a.steps:,} steps ({size / 2**20:,.0f} MiB metrics.jsonl) in {time.perf_counter() - t0:.1f} s"
    )
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), cpu_self()
    first = show_in_process(ledger, run_id)
    first_row = ("first read (no counters: one scan)", f"{time.perf_counter() - t0:.3f}", "", f"{cpu_self() - c0:.3f}")
    app = create_app(ledger, uploads_dir=tmp / "uploads", site_refresh=0.0)
    lab = labledger_cmd()
    res: dict[str, list[tuple[float, float]]] = {
        "show --json (CLI process)": [],
        "in-process": [],
        "GET /api/runs/{run}": [],
    }
    with TestClient(app) as client:
        for _ in range(a.reps):
            wall, cpu, out = child([*lab, "show", run_id, "--json", "--ledger", str(ledger)], env)
            assert orjson.loads(out)["counts"]["scalars"] == first["counts"]["scalars"]
            res["show --json (CLI process)"].append((wall, cpu))
            t0, c0 = time.perf_counter(), cpu_self()
            show_in_process(ledger, run_id)
            res["in-process"].append((time.perf_counter() - t0, cpu_self() - c0))
            t0, c0 = time.perf_counter(), cpu_self()
            r = client.get(f"/api/runs/{run_id}")
            assert r.status_code == 200 and r.json()["counts"]["scalars"] == first["counts"]["scalars"]
            res["GET /api/runs/{run}"].append((time.perf_counter() - t0, cpu_self() - c0))
    load1 = os.getloadavg()[0]
    print(f"{a.steps:,}-step run, {a.reps} reps interleaved; load average {load0:.2f} before, {load1:.2f} after")
    rows = [first_row]
    for name, vals in res.items():
        walls, cpus = [v[0] for v in vals], [v[1] for v in vals]
        rows.append((name, f"{min(walls):.3f}", f"{statistics.median(walls):.3f}", f"{statistics.median(cpus):.3f}"))
    table(("case", "wall best s", "wall median s", "CPU median s"), rows, a.markdown)


def live(a: argparse.Namespace, tmp: Path, env: dict[str, str]) -> None:
    from starlette.testclient import TestClient

    import labledger
    from labledger.server import create_app

    ledger = tmp / "live"
    labledger.open_ledger(ledger, create=True).close()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(ledger), str(a.live)], stdout=subprocess.PIPE, text=True, env=env
    )
    run_id = writer.stdout.readline().strip() if writer.stdout else ""
    load0 = os.getloadavg()[0]
    app = create_app(ledger, uploads_dir=tmp / "uploads", site_refresh=0.0)
    lab = labledger_cmd()
    polls: dict[str, list[tuple[float, float]]] = {
        "index row (runs --name)": [],
        "GET /api/runs/live": [],
        "show --json": [],
    }
    book = labledger.open_ledger(ledger)
    book.reap_on_read = False
    with TestClient(app) as client:
        end = time.time() + a.live - 0.5
        while time.time() < end:
            start = time.time()
            t0 = time.perf_counter()
            info = book.runs(name="live")[0]
            wall = (info.summary.get("last") or {}).get("wall")
            if wall is not None:
                polls["index row (runs --name)"].append((time.time() - wall, time.perf_counter() - t0))
            t0 = time.perf_counter()
            doc = client.get(f"/api/runs/{run_id}").json()
            if "wall" in doc["last"]:
                polls["GET /api/runs/live"].append(
                    (time.time() - doc["last"]["wall"]["value"], time.perf_counter() - t0)
                )
            t0 = time.perf_counter()
            _, _, out = child([*lab, "show", run_id, "--json", "--ledger", str(ledger)], env)
            last = orjson.loads(out)["last_scalars"]
            if "wall" in last:
                polls["show --json"].append((time.time() - last["wall"]["value"], time.perf_counter() - t0))
            time.sleep(max(0.0, 1.0 - (time.time() - start)))
    steps = int(writer.stdout.readline().strip() or 0) if writer.stdout else 0
    writer.wait()
    load1 = os.getloadavg()[0]
    size = (ledger / "runs" / run_id / "metrics.jsonl").stat().st_size
    print(
        f"live: the writer logged {steps:,} steps in {a.live:g} s ({steps / a.live:,.0f}/s, {size / 2**20:,.0f} MiB); "
        f"load average {load0:.2f} before, {load1:.2f} after"
    )
    rows = []
    for name, vals in polls.items():
        if not vals:
            rows.append((name, 0, "-", "-", "-", "-"))
            continue
        st, du = [v[0] for v in vals], [v[1] for v in vals]
        rows.append(
            (
                name,
                len(vals),
                f"{statistics.median(st):.3f}",
                f"{max(st):.3f}",
                f"{statistics.median(du):.3f}",
                f"{max(du):.3f}",
            )
        )
    table(("reader", "polls", "stale median s", "stale max s", "poll median s", "poll max s"), rows, a.markdown)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--live", type=float, default=20.0, help="seconds of live writing (0: skip)")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    import labledger

    print(
        f"labledger show benchmark, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores; labledger at {Path(labledger.__file__).parent}\n"
    )
    tmp = Path(tempfile.mkdtemp(prefix="labledger-show-"))
    env = {**os.environ, "COLUMNS": "150", "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        if a.steps:
            long_run(a, tmp, env)
        if a.live:
            live(a, tmp, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
