#!/usr/bin/env python
"""The server's live site (#17): what its background builder costs per round, on a ledger of N runs.

    python bench/live_site.py                 # 100 runs of 200 steps; ~1 minute on 2 cores
    python bench/live_site.py --runs 400
    python bench/live_site.py --cold-start /tmp/labledger-bench-site-scale/ledger-1000x100,...

With ``--cold-start LEDGER[,LEDGER...]`` (bench/site_scale.py's ledgers, copied first: a run is
logged into the copy) it measures instead ``labledger serve`` started cold on each (#46): seconds
from the process's start to listening, then the wall time of the first ``/``, ``data/catalog.js``,
``/api/runs`` and the oldest run's page (which the build, newest first, reaches last: built for the
request), and how long a run logged then takes to show in the catalog, all while the first site
build is under way (``X-Labledger-Site-Build: 0`` on every answer).

Rows: the first build (a cold folder), the check a round makes when nothing changed (the ledger's
signature: index rows, the index file, the files of running runs), a round after one run logged
(an incremental build into the spare folder), and the same again (the other folder catches up).
Wall and CPU time of this process, and the load average. Nothing is asserted.
"""

from __future__ import annotations

import os
import sys

# bench/ holds a logging.py: keep it from shadowing the standard library's `logging`.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import shutil
import tempfile
import time
from pathlib import Path


def measure(label: str, fn, rows: list[tuple[str, float, float, str]]) -> object:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    rows.append((label, time.perf_counter() - wall, time.process_time() - cpu, repr(out)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--cold-start", default=None, metavar="LEDGER[,LEDGER...]")
    args = ap.parse_args()
    if args.cold_start:
        cold_start([Path(p) for p in args.cold_start.split(",") if p])
        return

    import labledger
    from labledger.server.context import ServerContext
    from labledger.server.pages import LiveSite

    root = Path(tempfile.mkdtemp(prefix="labledger-bench-live-"))
    try:
        ledger = root / "ledger"
        for i in range(args.runs):
            with labledger.start_run(f"r{i}", ledger=ledger, config={"lr": 10.0**-i}) as run:
                for s in range(1, args.steps + 1):
                    run.log(s, loss=1.0 / s)
        live = labledger.start_run("live", ledger=ledger)
        ctx = ServerContext(str(ledger), artifacts=None, token=None, private=False, max_upload=2**20, max_body=2**20)
        site = LiveSite(ctx, root / "cache", min_interval=1.0)
        rows: list[tuple[str, float, float, str]] = []
        measure("first build (cold folder)", site.refresh, rows)
        measure("round, nothing changed (signature only)", site.refresh, rows)
        measure("signature alone", lambda: len(site.signature()), rows)
        live.log(1, loss=0.5)
        measure("round after one run logged (spare folder)", site.refresh, rows)
        live.log(2, loss=0.4)
        measure("round after it logged again (other folder)", site.refresh, rows)
        measure("round, nothing changed", site.refresh, rows)
        live.finish()
        site.close()
        ctx.close()
        load = os.getloadavg()
        print(f"live site rounds, {args.runs + 1} runs x {args.steps} steps; load average {load[0]:.2f} {load[1]:.2f}")
        print(f"{'round':<46} {'wall s':>8} {'CPU s':>8}  built")
        for label, wall, cpu, out in rows:
            print(f"{label:<46} {wall:8.3f} {cpu:8.3f}  {out}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def cold_start(ledgers: list[Path]) -> None:
    import signal
    import socket
    import subprocess

    import httpx

    import labledger

    rows = []
    for source in ledgers:
        root = Path(tempfile.mkdtemp(prefix="labledger-bench-cold-"))
        try:
            ledger = root / "ledger"
            subprocess.run(["cp", "-r", str(source), str(ledger)], check=True)
            (ledger / "uploads").mkdir(exist_ok=True)
            book = labledger.open_ledger(ledger)
            infos = book.runs()
            n, oldest = len(infos), infos[-1].id
            book.close()
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            cmd = [sys.executable, "-m", "labledger", "serve", "--ledger", str(ledger), "--port", str(port)]
            cmd += ["--uploads", str(root / "uploads"), "--log-level", "warning"]
            spawned = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            row: dict[str, object] = {"runs": n}
            try:
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60.0) as client:
                    while True:
                        if proc.poll() is not None or time.perf_counter() - spawned > 120:
                            raise RuntimeError("the server did not start")
                        try:
                            client.get("/openapi.json", timeout=1.0)
                            break
                        except httpx.HTTPError:
                            time.sleep(0.02)
                    row["listening"] = time.perf_counter() - spawned
                    builds = set()
                    for label, path in (
                        ("/", "/"),
                        ("catalog", "/data/catalog.js"),
                        ("/api/runs", "/api/runs"),
                        ("oldest run", f"/data/runs/{oldest}.js"),
                    ):
                        t = time.perf_counter()
                        r = client.get(path)
                        row[label] = time.perf_counter() - t
                        assert r.status_code == 200, (path, r.status_code)
                        if label != "/api/runs":
                            builds.add(r.headers.get("x-labledger-site-build"))
                        if label == "catalog":
                            row["catalog bytes"] = len(r.content)
                    with labledger.start_run("cold-start-probe", ledger=ledger) as run:
                        run.log(1, loss=0.5)
                    t = time.perf_counter()
                    while "cold-start-probe" not in client.get("/data/catalog.js").text:
                        if time.perf_counter() - t > 60:
                            raise RuntimeError("the new run did not show in a minute")
                        time.sleep(0.05)
                    row["new run shown"] = time.perf_counter() - t
                    builds.add(client.get("/").headers.get("x-labledger-site-build"))
                    row["site builds seen"] = ",".join(sorted(b or "?" for b in builds))
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=30)
            row["load"] = f"{os.getloadavg()[0]:.2f}"
            rows.append(row)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print("labledger serve, cold start (wall s; first requests while the first site build runs)")
    keys = ["runs", "listening", "/", "catalog", "/api/runs", "oldest run", "new run shown", "catalog bytes"]
    keys += ["site builds seen", "load"]
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(f"{row[k]:.3f}" if isinstance(row[k], float) else f"{row[k]}" for k in keys))


if __name__ == "__main__":
    main()
