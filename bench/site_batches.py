#!/usr/bin/env python
"""The site's batch data (#19): bytes on disk beside the batch file, build time, and how long the
batch page takes to show its rows in headless Chromium opened from ``file://``.

Uses the run of bench/columnar.py (``--dir``: its ``ledger`` with the plain ``batches.jsonl`` and
``ledger-packed``, the same run compacted). This tree builds its site from the compacted run (what
a finished run is now); ``--baseline SRC`` (e.g. /work/main/src) builds from the plain run with that
tree (each build a fresh interpreter: wall, CPU, peak RSS). Then, for each site, ``--reps`` times
interleaved, a fresh page opens ``batches.html#run=ID&mb=K`` for the first, a middle and the last
microbatch and the time until the sample rows show is taken (``performance.now()`` of the page),
with the bytes of data files the page loaded. The script also checks what a page on ``file://`` may
use: ``fetch`` of a data file (Chromium refuses it), ``DecompressionStream("gzip")``.

    python bench/site_batches.py --dir /tmp/labledger-bench-columnar --baseline /work/main/src
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import json
import shutil
import statistics
import subprocess
import time
from pathlib import Path

SRC = str(Path(_HERE).parent / "src")

BUILD = r"""
import json, sys, time
t0 = time.perf_counter()
from labledger.site import build_site
t1 = time.perf_counter()
build_site(sys.argv[1], sys.argv[2])
t2 = time.perf_counter()
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({"op_s": t2 - t1, "hwm_kib": int(hwm[0].split()[1]) if hwm else -1}))
"""


def build(ledger: Path, out: Path, src: str) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", BUILD, str(ledger), str(out)],
        env={**os.environ, "PYTHONPATH": src},
        stdout=subprocess.PIPE,
    )
    text = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"site build with {src} failed")
    doc = json.loads(text.decode().strip().splitlines()[-1])
    return {
        "wall": time.perf_counter() - t0,
        "op": doc["op_s"],
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": doc["hwm_kib"] / 1024,
    }


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def open_times(browser, site: Path, run_id: str, mbs: list[int]) -> dict[int, tuple[float, int]]:
    """Per microbatch: (ms until the rows show, bytes of data files loaded), each in a fresh page."""
    out = {}
    for mb in mbs:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((site / "batches.html").as_uri() + f"#run={run_id}&mb={mb}")
        page.wait_for_selector("#samples tbody tr", timeout=60000)
        page.wait_for_function(
            f"document.querySelector('#position').innerText.indexOf('Microbatch {mb:,} ') >= 0 || "
            f"document.querySelector('#position').innerText.indexOf('Microbatch {mb} ') >= 0",
            timeout=60000,
        )
        ms = page.evaluate("performance.now()")
        loaded = page.evaluate("Array.from(document.scripts).map(s => s.src).filter(u => u.indexOf('/data/') >= 0)")
        prefix = site.as_uri() + "/"
        size = sum((site / u[len(prefix) :]).stat().st_size for u in loaded if u.startswith(prefix))
        if errors:
            raise SystemExit(f"{site}: page errors {errors}")
        out[mb] = (ms, size)
        page.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/labledger-bench-columnar")
    ap.add_argument("--baseline", help="another source tree, built from the plain run (e.g. /work/main/src)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    folder = Path(args.dir)
    sys.path.insert(0, SRC)
    import labledger
    from labledger.store.compressed import read_index

    book = labledger.open_ledger(folder / "ledger-packed")
    info = book.runs()[0]
    run_id = info.id
    n = info.summary.get("batches") or 0
    zst = book.run_dir(run_id) / "batches.jsonl.zst"
    jsonl_bytes = read_index(zst).size
    load0 = os.getloadavg()
    sites = {"this tree (compacted run)": (folder / "ledger-packed", folder / "site-this", SRC)}
    if args.baseline:
        sites["baseline (plain run)"] = (folder / "ledger", folder / "site-baseline", args.baseline)
    builds = {name: build(ledger, out, src) for name, (ledger, out, src) in sites.items()}
    load1 = os.getloadavg()
    from playwright.sync_api import sync_playwright

    mbs = [1, max(1, n // 2), max(1, n)]
    times: dict[str, dict[int, list[float]]] = {name: {mb: [] for mb in mbs} for name in sites}
    loaded: dict[str, dict[int, int]] = {name: {} for name in sites}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        probe = browser.new_page()
        probe.goto((sites["this tree (compacted run)"][1] / "index.html").as_uri())
        can = probe.evaluate(
            """async () => {
              let fetched;
              try { await fetch('data/catalog.js'); fetched = 'allowed'; } catch (e) { fetched = 'refused: ' + e.message; }
              return {fetch: fetched, decompression: typeof DecompressionStream, protocol: location.protocol};
            }"""
        )
        probe.close()
        for _ in range(args.reps):
            for name, (_, out, _) in sites.items():
                for mb, (ms, size) in open_times(browser, out, run_id, mbs).items():
                    times[name][mb].append(ms)
                    loaded[name][mb] = size
        browser.close()
    load2 = os.getloadavg()
    print(
        f"# bench/site_batches.py: run of {n:,} microbatches, batches.jsonl {jsonl_bytes / 2**20:,.1f} MiB; {args.reps} reps"
    )
    print(
        f"load average: before {load0[0]:.2f}, after the builds {load1[0]:.2f}, after the pages {load2[0]:.2f}; "
        f"{os.cpu_count()} CPUs; chromium on file://: fetch {can['fetch']}; DecompressionStream: {can['decompression']}\n"
    )
    print(
        "| site | data/batches MiB | x batches.jsonl | whole site MiB | build wall s | build CPU s | build peak RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (_, out, _) in sites.items():
        b = builds[name]
        data = tree_bytes(out / "data" / "batches")
        print(
            f"| {name} | {data / 2**20:,.1f} | {data / jsonl_bytes:.2f}x | {tree_bytes(out) / 2**20:,.1f} | "
            f"{b['wall']:.1f} | {b['cpu']:.1f} | {b['rss']:,.0f} |"
        )
    print("\n| site | microbatch | page shows its rows, ms (median) | data files loaded, KiB |")
    print("|---|---:|---:|---:|")
    for name in sites:
        for mb in mbs:
            print(f"| {name} | {mb:,} | {statistics.median(times[name][mb]):,.0f} | {loaded[name][mb] / 1024:,.0f} |")


if __name__ == "__main__":
    main()
