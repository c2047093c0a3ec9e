#!/usr/bin/env python
"""The catalog of 100,000 runs from ``file://`` (issue 47): first paint and every run loaded, in
headless Chromium, with a screenshot.

* The ledger is bench/index_scale.py's (index rows of ``--runs`` finished runs: 12 config keys, the
  last/min/max of 5 scalars, one stored evaluation, tags; empty run folders: the catalog reads the
  index only), built once under ``--dir`` and reused.
* The site is bench/site_runs.py's ``catalog_site``: the pages of one run and the catalog of every
  run, its head and chunks written by the builder's own ``catalog_files`` (the CPU time of composing
  them is reported).
* Times are bench/site_runs.py's ``open_times_of``: milliseconds from navigation start, median of
  ``--repeats`` fresh pages. "First paint" is when the page has drawn its table from the head and
  the newest runs (``LL.readyAt``); "every run loaded" is when the last chunk is in and the table
  redrawn (``LL.catalogLoadedAt``). Chromium CPU is the CPU time of all of Chromium's processes to
  that point (less exposed to the machine's load than the wall time: for the first paint it counts
  the chunks loaded behind it until it is read); "loaded" adds up the static files and the data
  files read by then (at the first paint: ``LL.readyKeys``); the load average is printed before
  and after.

    python bench/site_catalog.py                   # 100,000 runs (builds the ledger once: ~5 minutes)
    python bench/site_catalog.py --runs 10000
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import importlib.util
import json
import platform
import shutil
from pathlib import Path
from typing import Any


def _bench_module(name: str) -> Any:
    """bench/<name>.py, loaded by its path (this folder is not on sys.path: bench/site.py would stand
    for the standard library's ``site``)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(_HERE, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--dir", default="/tmp/labledger-bench-index", help="bench/index_scale.py's ledgers")
    ap.add_argument("--out", default="/tmp/labledger-bench-site-catalog")
    ap.add_argument("--chunk", type=int, default=None, help="runs per catalog chunk (default: the builder's)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    site_runs, index_scale = _bench_module("site_runs"), _bench_module("index_scale")
    n = args.runs
    load0 = os.getloadavg()
    print(f"# bench/site_catalog.py  Python {platform.python_version()}  load {load0[0]:.1f}", flush=True)
    root = Path(args.dir) / str(n)
    if not (root / "built.json").exists():
        shutil.rmtree(root, ignore_errors=True)
        print(f"building {n:,} runs under {root} ...", flush=True)
        secs = index_scale.build(root / "ledger", n)
        (root / "built.json").write_text(json.dumps({"seconds": secs}))
    out = Path(args.out) / f"site-{n}"
    shutil.rmtree(out, ignore_errors=True)
    written = site_runs.catalog_site(root / "ledger", out, args.chunk)
    print({"catalog written": written}, flush=True)
    loaded = "document.body.dataset.catalogLoaded === '1' && LL.catalogLoadedAt"
    query = "index.html#where=config.lr%20%3C%201e-3%20and%20config.opt%20%3D%20'adam'"
    lines = ["| page | runs | figure | goal |", "|---|---|---|---|"]
    for rel, wait, what in (
        ("index.html", None, "catalog, first paint (file://)"),
        ("index.html", loaded, "catalog, every run loaded"),
        (query, loaded, "catalog, query in the URL, every run loaded"),
    ):
        got = site_runs.open_times_of([out], rel, wait, args.repeats)[0]
        print({what: got}, flush=True)
        goal = "< 1 s" if wait is None else "-"
        lines.append(
            f"| {what} | {n:,} | {got['ms']:.0f} ms median (min {got['min_ms']:.0f}); Chromium CPU "
            f"{got['cpu_ms']:.0f} ms (script {got['script_ms']:.0f} ms); "
            f"{site_runs.fmt_bytes(got['bytes'])} loaded | {goal} |"
        )
    shots = screenshots(site_runs, out, Path(args.out), n)
    load1 = os.getloadavg()
    print(
        f"load before {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}, after {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}"
    )
    print(
        f"catalog of {n:,} runs: {written['files']} files, {site_runs.fmt_bytes(written['bytes'])} "
        f"(head {site_runs.fmt_bytes(written['head_bytes'])}), composed in {written['wall']:.1f} s wall / "
        f"{written['cpu']:.1f} s CPU"
    )
    print("screenshots: " + ", ".join(str(s) for s in shots))
    print("\n".join(lines))


def screenshots(site_runs: Any, site: Path, folder: Path, n: int) -> list[Path]:
    """The catalog with every run in, 1280 x 800 (tests/test_site_catalog.py takes one while the
    older runs load)."""
    from playwright.sync_api import sync_playwright

    shot = folder / f"catalog-{n}.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=site_runs.CHROMIUM, args=site_runs.ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto((site / "index.html").as_uri())
        page.wait_for_selector("body[data-catalog-loaded='1']", timeout=300_000)
        page.screenshot(path=str(shot))
        browser.close()
    return [shot]


if __name__ == "__main__":
    main()
