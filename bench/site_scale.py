#!/usr/bin/env python
"""The site build at scale in runs (issue 47): a cold ``labledger site`` of N runs of 100 steps at
two or more ledger sizes (wall, CPU, peak RSS, each in a fresh process), the ratio of the largest to
the smallest, and the rebuild after one new run (files written, wall, CPU) at each size.

* Ledgers are bench/runs.py's (12 config keys, 5 scalars, one stored evaluation per run, ten
  groups, two tags), with 100 steps per run (``--steps``), built once under ``--dir`` and reused.
* Each build runs in a fresh subprocess (``--child-build``) that reports its wall time, its CPU
  time (user + system) and its peak RSS (``ru_maxrss``); ``--profile FILE`` writes a cProfile of
  the child's build.
* Rebuild: after the cold build, one new run (the Run API, 5 scalars x 100 steps) is added to the
  ledger and the site built again into the same folder (the "+1 run" row); the run is removed after.
  ``--rebuild-only`` keeps a site built before (brought up to date first, not timed as cold) and
  times the rebuild after one new run alone; ``--profile FILE`` then profiles that rebuild.

    python bench/site_scale.py --sizes 1000,4000            # ~10 minutes on 2 shared cores
    python bench/site_scale.py --sizes 4000 --profile /tmp/site.prof
    python bench/site_scale.py --sizes 10000 --rebuild-only --profile /tmp/rebuild.prof
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import json
import platform
import resource
import shutil
import subprocess
import time
from pathlib import Path


def _runs_module(steps: int):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_runs", os.path.join(_HERE, "runs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    mod.STEPS = steps
    return mod


def _child_build(ledger: str, out: str, profile: str | None) -> None:
    from labledger.site import build_site

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    w, c = time.perf_counter(), cpu()
    if profile:
        import cProfile

        prof = cProfile.Profile()
        result = prof.runcall(build_site, ledger, out)
        prof.dump_stats(profile)
    else:
        result = build_site(ledger, out)
    print(
        json.dumps(
            {
                "wall": time.perf_counter() - w,
                "cpu": cpu() - c,
                "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "written": len(result.written),
                "unchanged": result.unchanged,
                "rebuilt_runs": len(result.rebuilt_runs),
                "bytes": result.bytes_written,
            }
        )
    )


def build(ledger: Path, out: Path, profile: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child-build", str(ledger), str(out)]
    if profile:
        cmd += ["--profile", profile]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _site_runs():
    """bench/site_runs.py, loaded by its path (this folder is not on sys.path: bench/site.py would
    stand for the standard library's ``site``): its add_run and remove_run are the rebuild's."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_site_runs", os.path.join(_HERE, "site_runs.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,4000")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--dir", default="/tmp/labledger-bench-site-scale")
    ap.add_argument("--profile", help="write a cProfile of the largest cold build here")
    ap.add_argument("--no-rebuild", action="store_true")
    ap.add_argument("--rebuild-only", action="store_true", help="keep the site built before; time the +1 run rebuild")
    ap.add_argument("--child-build", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_build:
        _child_build(*args.child_build, args.profile)
        return
    root = Path(args.dir)
    runs_mod = _runs_module(args.steps)
    print(f"# bench/site_scale.py  Python {platform.python_version()}  load {os.getloadavg()[0]:.1f}", flush=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    lines = [
        "| runs | cold wall | cold CPU | peak RSS | +1 run: files, wall, CPU | load |",
        "|---|---|---|---|---|---|",
    ]
    cold_cpu = {}
    for n in sizes:
        ledger = root / f"ledger-{n}x{args.steps}"
        if not (ledger / "ledger.db").exists():
            t = runs_mod.build_labledger(ledger, n)
            print(f"ledger of {n} runs built in {t:.0f} s", flush=True)
        out = root / f"site-{n}"
        if not args.rebuild_only:
            shutil.rmtree(out, ignore_errors=True)
        load = os.getloadavg()[0]
        cold = build(ledger, out, args.profile if n == max(sizes) and not args.rebuild_only else None)
        cold_cpu[n] = cold["cpu"]
        print({"n": n, "cold" if not args.rebuild_only else "up to date": cold}, flush=True)
        plus_cell = "-"
        if not args.no_rebuild:
            rid = _site_runs().add_run(ledger, args.steps)
            try:
                load = os.getloadavg()[0]
                plus = build(ledger, out, args.profile if args.rebuild_only and n == max(sizes) else None)
            finally:
                _site_runs().remove_run(ledger, rid)
            print({"n": n, "+1 run": plus}, flush=True)
            plus_cell = f"{plus['written']} files, {plus['wall']:.2f} s, {plus['cpu']:.2f} s CPU"
        lines.append(
            f"| {n:,} | {cold['wall']:.1f} s | {cold['cpu']:.1f} s | {cold['peak_rss'] / 2**20:.0f} MiB "
            f"| {plus_cell} | {load:.1f} |"
        )
    small, big = min(sizes), max(sizes)
    if small != big:
        lines.append(
            f"\nCPU ratio {big:,}/{small:,} runs: {cold_cpu[big] / cold_cpu[small]:.2f}x (linear: {big / small:.0f}x)"
        )
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
