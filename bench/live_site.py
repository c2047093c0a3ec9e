#!/usr/bin/env python
"""The server's live site (#17): what its background builder costs per round, on a ledger of N runs.

    python bench/live_site.py                 # 100 runs of 200 steps; ~1 minute on 2 cores
    python bench/live_site.py --runs 400

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
    args = ap.parse_args()

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


if __name__ == "__main__":
    main()
