#!/usr/bin/env python
"""Many runs on the static site (issue 12): the catalog of 10,000 runs and the curves page of 20 runs
x 100,000 steps in headless Chromium (time to a useful page, bytes loaded), and the site rebuild
after one new run (files written, time) at two ledger sizes, to see whether it depends on N.

* The 10,000-run ledger is bench/runs.py's (12 config keys, 5 scalars x 1,000 steps, one stored
  evaluation per run; real run folders, index rows written in one transaction), built once under
  ``--dir`` and reused. The site is built from it once (cold; its time and size are printed).
* The curves ledger: 20 runs logged with the real Run API, ``loss`` and ``accuracy`` at 100,000
  steps each (a spike in every run at a random step), ``examples_seen`` too.
* Rebuild: one new run (the Run API, 5 scalars x 1,000 steps) is added, the site is rebuilt; the
  files written and the wall/CPU time of that build. The run is then removed from the index again
  (so the ledger can be reused).

Times are milliseconds from navigation start (``performance.now()``), median of 3 fresh pages:
"ready" is when the page has built its DOM from its data (the catalog's table, the curves page's
chart drawn). "Loaded" adds up the static files and the data files the page had read by then.
Nothing here is asserted: the script prints a table.

    python bench/site_runs.py                       # 10,000 runs (builds for several minutes once)
    python bench/site_runs.py --runs 1000,10000     # rebuild at two sizes
    python bench/site_runs.py --markdown
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import platform
import random
import resource
import shutil
import statistics
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
CURVE_RUNS = 20
CURVE_STEPS = 100_000


def _runs_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_runs", os.path.join(_HERE, "runs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_build(ledger: Path, out: Path) -> dict:
    from labledger.site import build_site

    w, c = time.perf_counter(), cpu()
    res = build_site(ledger, out)
    return {"wall": time.perf_counter() - w, "cpu": cpu() - c, "written": len(res.written), "bytes": res.bytes_written}


def site_size(out: Path) -> tuple[int, int]:
    files = [p for p in out.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def open_times(out: Path, rel: str, wait: str | None, repeats: int = 3) -> dict:
    from playwright.sync_api import sync_playwright

    times, loaded = [], 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            base, _, frag = rel.partition("#")
            page.goto((out / base).as_uri() + ("#" + frag if frag else ""))
            page.wait_for_selector("body[data-ready='1']", timeout=300_000)
            t = page.evaluate("LL.readyAt")
            if wait:
                page.wait_for_function(f"() => {wait}", timeout=300_000)
                t = max(t, page.evaluate(wait))
            times.append(t)
            static = page.evaluate(
                "Array.from(document.querySelectorAll('script[src^=\"static/\"], link[href^=\"static/\"]'))"
                ".map(e => e.getAttribute('src') || e.getAttribute('href'))"
            )
            keys = page.evaluate("Object.keys(window.LABLEDGER)")
            loaded = sum((out / f).stat().st_size for f in static) + sum(
                (out / f"data/{k}.js").stat().st_size for k in keys if (out / f"data/{k}.js").exists()
            )
            if errors:
                raise RuntimeError(f"{rel}: {errors[:3]}")
            page.close()
        browser.close()
    return {"ms": statistics.median(times), "bytes": loaded}


def add_run(ledger: Path) -> str:
    import labledger

    with labledger.start_run("bench-new-run", config={"lr": 1e-3, "opt": "adam"}, ledger=ledger) as run:
        for step in range(1, 1001):
            run.log(step, loss=1 / step, val_loss=1.1 / step, accuracy=1 - 1 / step, lr=1e-3, grad_norm=1.0)
        return run.id


def remove_run(ledger: Path, run_id: str) -> None:
    import labledger

    book = labledger.open_ledger(ledger)
    try:
        with book.transaction() as db:
            for table in ("run_tags", "evaluations"):
                db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        shutil.rmtree(book.run_dir(run_id), ignore_errors=True)
    finally:
        book.close()


def curves_ledger(root: Path) -> tuple[Path, list[str]]:
    import labledger

    ledger = root / "ledger"
    if (root / "done").exists():
        return ledger, (root / "done").read_text().split()
    shutil.rmtree(root, ignore_errors=True)
    ids = []
    for i in range(CURVE_RUNS):
        rng = random.Random(i)
        spike = rng.randrange(CURVE_STEPS)
        with labledger.start_run(
            f"long-{i:02d}", group="long", config={"lr": [1e-3, 3e-4][i % 2], "seed": i}, ledger=ledger
        ) as run:
            for step in range(CURVE_STEPS):
                loss = 2.0 / (1 + step) ** 0.5 + rng.random() * 0.01 + (5.0 if step == spike else 0.0)
                run.log(step, loss=loss, accuracy=1 - loss / 3, examples_seen=64 * step)
            ids.append(run.id)
    (root / "done").write_text(" ".join(ids))
    return ledger, ids


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="10000", help="catalog sizes (comma-separated); the largest is opened")
    ap.add_argument("--dir", default="/tmp/labledger-bench-site-runs")
    ap.add_argument("--no-curves", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    root = Path(args.dir)
    sizes = [int(s) for s in args.runs.split(",")]
    runs_mod = _runs_module()
    print(f"# bench/site_runs.py  {platform.python_version()}  load {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for n in sizes:
        ledger = root / f"ledger-{n}"
        if not (ledger / "ledger.db").exists():
            t = runs_mod.build_labledger(ledger, n)
            print(f"ledger of {n} runs built in {t:.0f} s", flush=True)
        out = root / f"site-{n}"
        if not (out / ".labledger-site.json").exists():
            cold = timed_build(ledger, out)
            files, size = site_size(out)
            print(f"site of {n} runs: cold build {cold['wall']:.1f} s, {files} files, {fmt_bytes(size)}", flush=True)
        timed_build(ledger, out)  # up to date (a new builder rebuilds once)
        same = timed_build(ledger, out)
        rid = add_run(ledger)
        try:
            plus = timed_build(ledger, out)
        finally:
            remove_run(ledger, rid)
            timed_build(ledger, out)
        row = {"n": n, "same": same, "plus": plus}
        if n == max(sizes):
            row["catalog"] = open_times(out, "index.html", None)
        rows.append(row)
        print(row, flush=True)
    curves = None
    if not args.no_curves:
        cl, ids = curves_ledger(root / "curves")
        out = root / "curves-site"
        if not (out / ".labledger-site.json").exists():
            cold = timed_build(cl, out)
            files, size = site_size(out)
            print(f"curves site: cold build {cold['wall']:.1f} s, {files} files, {fmt_bytes(size)}", flush=True)
        curves = open_times(
            out, "curves.html#runs=" + ",".join(ids) + "&scalar=loss", "document.querySelector('figure.curves').drawnAt"
        )
        print({"curves": curves}, flush=True)
    lines = ["| page / build | runs | figure | goal |", "|---|---|---|---|"]
    for r in rows:
        if "catalog" in r:
            c = r["catalog"]
            lines.append(f"| catalog ready (file://) | {r['n']:,} | {c['ms']:.0f} ms, {fmt_bytes(c['bytes'])} loaded | < 1 s |")
    if curves:
        lines.append(
            f"| curves page, chart drawn | {CURVE_RUNS} x {CURVE_STEPS:,} steps | {curves['ms']:.0f} ms, "
            f"{fmt_bytes(curves['bytes'])} loaded | < 1 s |"
        )
    for r in rows:
        p, s = r["plus"], r["same"]
        lines.append(
            f"| rebuild after one new run | {r['n']:,} | {p['written']} files ({fmt_bytes(p['bytes'])}), "
            f"{p['wall']:.2f} s wall / {p['cpu']:.2f} s CPU (no change: {s['wall']:.2f} s) | independent of N |"
        )
    print("\n".join(lines) if args.markdown else "\n".join(lines))


if __name__ == "__main__":
    main()
