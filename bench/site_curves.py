#!/usr/bin/env python
"""A run of millions of steps on the static site (issue 47): its curve summaries built streamed
(wall, CPU, peak RSS of the build in a fresh process), the site's size, and the run page opened in
headless Chromium from ``file://`` (first chart, then a zoom that loads a finer level).

* The run is logged with ``Run.log`` (3 scalars a step, a spike at 3/4 of the run; the time it takes
  is printed) into ``--dir`` and reused by the next invocation with the same ``--steps``.
* The build runs in a fresh subprocess that reports wall, CPU (user + system) and ``ru_maxrss``.
* Browser: ``/usr/bin/chromium`` headless (``--no-sandbox --disable-gpu``), a fresh user data dir
  per page load, 3 loads: the time from navigation to the first chart drawn (``performance.now()``
  of ``figure.drawnAt``), then the first chart zoomed to 0.5% of the steps around the spike and
  the time until its finer level is drawn. Screenshots of the run page and of the curves page go to
  ``--shots``.

    python bench/site_curves.py --steps 14000000          # ~4 minutes to log, ~2 to build
    python bench/site_curves.py --steps 1000000 --no-browser
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
import tempfile
import time
from pathlib import Path


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def log_run(ledger: Path, steps: int) -> tuple[str, float, float]:
    """A run of ``steps`` steps of loss, lr and grad_norm; (its id, wall s, CPU s)."""
    import numpy as np

    import labledger

    rng = np.random.default_rng(0)
    w, c = time.perf_counter(), cpu()
    spike = steps * 3 // 4
    with labledger.start_run("long", group="scale", ledger=ledger) as run:
        block = 1 << 16
        for start in range(0, steps, block):
            s = np.arange(start, min(steps, start + block))
            loss = (2.0 / (1.0 + s / 1e5) + 0.05 * rng.standard_normal(len(s))).tolist()
            grad = np.abs(1.0 + 0.3 * rng.standard_normal(len(s))).tolist()
            lr = (1e-3 * np.minimum(1.0, s / 1e4)).tolist()
            log = run.log
            for i, step in enumerate(s.tolist()):
                log(step, loss=loss[i] + (25.0 if step == spike else 0.0), lr=lr[i], grad_norm=grad[i])
    return run.id, time.perf_counter() - w, cpu() - c


def _child_build(ledger: str, out: str) -> None:
    from labledger.site import build_site

    w, c = time.perf_counter(), cpu()
    result = build_site(ledger, out)
    print(
        json.dumps(
            {
                "wall": time.perf_counter() - w,
                "cpu": cpu() - c,
                "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "written": len(result.written),
                "bytes": result.bytes_written,
            }
        )
    )


def du(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def open_pages(out: Path, run_id: str, steps: int, shots: Path, loads: int) -> dict:
    from playwright.sync_api import sync_playwright

    spike = steps * 3 // 4
    x0, x1 = spike - steps // 400, spike + steps // 400
    first, zoom = [], []
    with sync_playwright() as p:
        for i in range(loads):
            with tempfile.TemporaryDirectory() as profile:
                ctx = p.chromium.launch_persistent_context(
                    profile,
                    executable_path="/usr/bin/chromium",
                    headless=True,
                    args=["--no-sandbox", "--disable-gpu"],
                    viewport={"width": 1280, "height": 900},
                )
                page = ctx.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto((out / "run.html").as_uri() + f"#run={run_id}")
                page.wait_for_function(
                    "() => document.querySelector('#curve-charts figure.chart')?.drawnAt", timeout=60_000
                )
                first.append(page.evaluate("document.querySelector('#curve-charts figure.chart').drawnAt") / 1000)
                t = page.evaluate(
                    f"""() => {{ const f = document.querySelector('#curve-charts figure.chart');
                       window.__zoomAt = performance.now(); f.chart.setScale('x', {{min: {x0}, max: {x1}}});
                       return f.curveLevel; }}"""
                )
                assert t == 0
                page.wait_for_function(
                    "() => document.querySelector('#curve-charts figure.chart').curveLevel > 0", timeout=60_000
                )
                zoom.append(page.evaluate("performance.now() - window.__zoomAt") / 1000)
                level = page.evaluate("document.querySelector('#curve-charts figure.chart').curveLevel")
                if i == 0:
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(shots / "run-page-zoomed.png"), full_page=False)
                    page.evaluate(
                        "() => document.querySelector('#curve-charts figure.chart').chart.setScale('x', {min: null, max: null})"
                    )
                    page.goto((out / "curves.html").as_uri() + f"#runs={run_id}&scalar=loss")
                    page.wait_for_function("() => document.querySelector('figure.curves')?.drawnAt", timeout=60_000)
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(shots / "curves-page.png"), full_page=False)
                assert not errors, errors
                ctx.close()
    return {"first_chart_s": first, "zoom_s": zoom, "zoom_level": level}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=14_000_000)
    ap.add_argument("--dir", default="/tmp/labledger-bench-site-curves")
    ap.add_argument("--shots", default="/tmp/labledger-bench-site-curves/shots")
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--child-build", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_build:
        _child_build(*args.child_build)
        return
    root = Path(args.dir)
    ledger = root / f"ledger-{args.steps}"
    print(f"# bench/site_curves.py  Python {platform.python_version()}  load {os.getloadavg()[0]:.1f}", flush=True)
    if not (ledger / "ledger.db").exists():
        shutil.rmtree(ledger, ignore_errors=True)
        rid, wall, c = log_run(ledger, args.steps)
        print(f"logged {args.steps:,} steps with Run.log in {wall:.1f} s ({c:.1f} s CPU)", flush=True)
    import labledger

    book = labledger.open_ledger(ledger)
    rid = book.runs()[0].id
    book.close()
    data = sum(p.stat().st_size for p in (ledger / "runs" / rid).iterdir() if p.name.startswith("metrics"))
    out = root / f"site-{args.steps}"
    shutil.rmtree(out, ignore_errors=True)
    load = os.getloadavg()[0]
    proc = subprocess.run(
        [sys.executable, __file__, "--child-build", str(ledger), str(out)], capture_output=True, text=True, check=True
    )
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    files, size = du(out)
    cfiles, csize = du(out / "data" / "curves" / rid)
    print(
        f"build: {built['wall']:.1f} s wall, {built['cpu']:.1f} s CPU, peak RSS {built['peak_rss'] / 2**20:.0f} MiB "
        f"(load {load:.1f}); metrics file {data / 1e6:.0f} MB"
    )
    print(f"site: {files} files, {size / 1e6:.1f} MB; the run's curves: {cfiles} files, {csize / 1e6:.1f} MB")
    print(f"run page data: {(out / 'data' / 'runs' / (rid + '.js')).stat().st_size / 1e3:.1f} kB")
    if not args.no_browser:
        shots = Path(args.shots)
        shots.mkdir(parents=True, exist_ok=True)
        seen = open_pages(out, rid, args.steps, shots, args.loads)
        print(
            "first chart (s, from navigation): "
            + ", ".join(f"{t:.2f}" for t in seen["first_chart_s"])
            + f"; zoom to a finer level (level {seen['zoom_level']}): "
            + ", ".join(f"{t:.2f}" for t in seen["zoom_s"])
            + f"; screenshots in {shots}"
        )
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
