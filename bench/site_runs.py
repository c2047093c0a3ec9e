#!/usr/bin/env python
"""Many runs on the static site (issue 12): the catalog of 10,000 runs and the curves page of 20 runs
x 100,000 steps in headless Chromium (time to a useful page, bytes loaded), and the site rebuild
after one new run (files written, time) at two ledger sizes, to see whether it depends on N.

* Ledgers are bench/runs.py's (12 config keys, 5 scalars x 1,000 steps, one stored evaluation per
  run; real run folders, index rows written in one transaction), built once under ``--dir`` and
  reused.
* Catalog (``--catalog-runs``, 10,000): the catalog page reads only the catalog (``data/catalog.js``
  and its chunks) and the static files. On the 2 shared cores here a full site of 10,000 runs takes
  most of an hour, so this site holds the pages of one run and the catalog of every run, written
  with the builder's own functions (``run_basics`` and ``catalog_files``: the same entries and query
  fields a full build writes, minus per-run page counts that are zero in this ledger anyway).
* Curves: 20 runs of ``loss``, ``accuracy`` and ``examples_seen`` at 100,000 steps each (a spike in
  every run at a random step), written as run folders like bench/runs.py does, then a full site.
* Rebuild (``--rebuild-runs``, 200 and 1,000): full sites; one new run (the Run API, 5 scalars x
  1,000 steps) is added and the site rebuilt: the files written and the wall/CPU time of that
  build, at both sizes. The run is then removed again (so the ledger can be reused).

Times are milliseconds from navigation start (``performance.now()``), median of 5 fresh pages:
"ready" is when the page has built its DOM from its data (the catalog's table, the curves page's
chart drawn); "Chromium CPU" is the CPU time (user + system) all of Chromium's processes spent
from navigation to ready (less exposed to the machine's load than the wall time), "script" the
page's script execution (CDP ``ScriptDuration``). "Loaded" adds up the static files and the data files the page had read by then.
Nothing here is asserted: the script prints a table.

    python bench/site_runs.py                       # builds its ledgers once (minutes), then measures
    python bench/site_runs.py --catalog-runs 1000 --rebuild-runs 100,200   # smaller
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
from typing import Any

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


def open_times(out: Path, rel: str, wait: str | None, repeats: int = 5) -> dict:
    """Median time to a useful page over ``repeats`` fresh pages, with the renderer's main-thread
    busy time (CDP ``TaskDuration``, the page's CPU time) and its script time."""
    return open_times_of([out], rel, wait, repeats)[0]


def open_times_of(outs: list[Path], rel: str, wait: str | None, repeats: int = 5) -> list[dict]:
    """:func:`open_times` of several sites, interleaved (site 1, site 2, site 1, ...) so that the
    machine's load falls on each alike."""
    from playwright.sync_api import sync_playwright

    got: list[dict] = [{"times": [], "cpu": [], "script": [], "bytes": 0} for _ in outs]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(repeats):
            for out, g in zip(outs, got):
                g["bytes"] = _open_once(browser, out, rel, wait, g)
        browser.close()
    return [
        {
            "ms": statistics.median(g["times"]),
            "min_ms": min(g["times"]),
            "cpu_ms": statistics.median(g["cpu"]),
            "script_ms": statistics.median(g["script"]),
            "bytes": g["bytes"],
        }
        for g in got
    ]


def _chromium_cpu() -> float:
    """CPU seconds (user + system) of every Chromium process this script started."""
    import psutil

    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name():
                t = proc.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _open_once(browser: Any, out: Path, rel: str, wait: str | None, g: dict) -> int:
    """One fresh page of ``out``: its times go into ``g``; returns the bytes it loaded."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    cpu0 = _chromium_cpu()
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
    g["cpu"].append((_chromium_cpu() - cpu0) * 1000)
    g["times"].append(t)
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    g["script"].append(metrics["ScriptDuration"] * 1000)
    static = page.evaluate(
        'Array.from(document.querySelectorAll(\'script[src^="static/"], link[href^="static/"]\'))'
        ".map(e => e.getAttribute('src') || e.getAttribute('href'))"
    )
    keys = page.evaluate("Object.keys(window.LABLEDGER)" if wait else "LL.readyKeys")  # (read by then)
    loaded = sum((out / f).stat().st_size for f in static) + sum(
        (out / f"data/{k}.js").stat().st_size for k in keys if (out / f"data/{k}.js").exists()
    )
    if errors:
        raise RuntimeError(f"{rel}: {errors[:3]}")
    page.close()
    return loaded


def add_run(ledger: Path, steps: int = 1000) -> str:
    """A run of ``steps`` steps of 5 scalars added to ``ledger`` (the "+1 run" of a rebuild)."""
    import labledger

    with labledger.start_run("bench-new-run", config={"lr": 1e-3, "opt": "adam"}, ledger=ledger) as run:
        for step in range(1, steps + 1):
            run.log(step, loss=1 / step, val_loss=1.1 / step, accuracy=1 - 1 / step, lr=1e-3, grad_norm=1.0)
        return run.id


def remove_run(ledger: Path, run_id: str) -> None:
    """Remove the run :func:`add_run` added, for good (deleted, then the trash emptied)."""
    import labledger

    with labledger.open_ledger(ledger) as book:
        book.delete_run(run_id)
        book.purge_trash()


def curves_ledger(root: Path) -> tuple[Path, list[str]]:
    """20 run folders of 100,000 steps and their index rows (as bench/runs.py writes them)."""
    import numpy as np
    import orjson

    import labledger
    from labledger.store.fields import ScalarStats, dumps_fields, run_fields

    ledger_dir = root / "ledger"
    if (root / "done").exists():
        return ledger_dir, (root / "done").read_text().split()
    shutil.rmtree(root, ignore_errors=True)
    ledger = labledger.open_ledger(ledger_dir, create=True)
    ids, rows = [], []
    base = 1_790_000_000.0
    for i in range(CURVE_RUNS):
        rng = np.random.default_rng(i)
        rid = f"20261202-{i:06d}-{i * 2654435761 % 16**6:06x}"
        run_dir = ledger.run_dir(rid)
        run_dir.mkdir(parents=True)
        cfg = {"lr": [1e-3, 3e-4][i % 2], "seed": i}
        meta = {"id": rid, "name": f"long-{i:02d}", "group": "long", "tags": [], "status": "finished"}
        meta.update(started=base + i, ended=base + i + 3600, host="bench", error=None)
        (run_dir / "run.json").write_bytes(orjson.dumps(meta))
        (run_dir / "config.json").write_bytes(orjson.dumps(cfg))
        t = np.arange(CURVE_STEPS)
        loss = 2.0 / np.sqrt(1 + t) + rng.random(CURVE_STEPS) * 0.01
        loss[random.Random(i).randrange(CURVE_STEPS)] += 5.0
        acc = 1 - loss / 3
        with open(run_dir / "metrics.jsonl", "wb") as f:
            for step in range(CURVE_STEPS):
                rec = {"step": step, "time": base + i + step * 0.036, "loss": float(loss[step])}
                rec.update(accuracy=float(acc[step]), examples_seen=64 * step)
                f.write(orjson.dumps(rec) + b"\n")
        stats = ScalarStats()
        stats.low = {"loss": float(loss.min()), "accuracy": float(acc.min()), "examples_seen": 0}
        stats.high = {"loss": float(loss.max()), "accuracy": float(acc.max()), "examples_seen": 64 * (CURVE_STEPS - 1)}
        last = {"loss": float(loss[-1]), "accuracy": float(acc[-1]), "examples_seen": 64 * (CURVE_STEPS - 1)}
        summary = {"steps": CURVE_STEPS, "scalar_records": CURVE_STEPS, "last": last, "headline": {}}
        rows.append(
            (
                rid,
                meta["name"],
                "long",
                "finished",
                meta["started"],
                meta["ended"],
                "bench",
                orjson.dumps(summary).decode(),
                meta["ended"],
                dumps_fields(run_fields(cfg, summary, stats)),
            )
        )
        ids.append(rid)
    with ledger.transaction() as db:
        db.executemany(
            "INSERT INTO runs (id, name, grp, status, started, ended, host, summary, updated, fields) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    ledger.close()
    (root / "done").write_text(" ".join(ids))
    return ledger_dir, ids


def catalog_site(ledger_dir: Path, out: Path, chunk: int | None = None) -> dict:
    """A site with one run's pages and the catalog of every run (see the module docstring): its head
    and chunks as the builder writes them (``labledger.site.catalog.catalog_files``), ``chunk`` runs
    a chunk (default: the builder's)."""
    import labledger
    from labledger.site import build_site
    from labledger.site.catalog import CATALOG_CHUNK, catalog_files, catalog_query_fields
    from labledger.site.rundata import run_basics

    book = labledger.open_ledger(ledger_dir)
    try:
        infos = book.runs()
        build_site(book, out, runs=[infos[0].id])
        w, c = time.perf_counter(), cpu()
        entries = [
            {**run_basics(i), "batches": 0, "samples": 0, "evaluations": [], "tests": [], "history": 0} for i in infos
        ]
        fields = catalog_query_fields(book, entries)
        for e, row in zip(entries, fields["rows"]):
            e["checkpoints"] = 0
            e["scalars"] = [n[8:-5] for n, v in zip(fields["names"], row) if n.endswith(".last") and v is not None]
        comparisons = {"tables": [], "documents": 0, "groups": []}
        files = catalog_files(book, entries, comparisons, chunk=chunk or CATALOG_CHUNK).files()
        for rel, data in files.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        return {
            "wall": time.perf_counter() - w,
            "cpu": cpu() - c,
            "bytes": sum(map(len, files.values())),
            "head_bytes": len(files["data/catalog.js"]),
            "files": len(files),
        }
    finally:
        book.close()


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog-runs", type=int, default=10_000)
    ap.add_argument("--rebuild-runs", default="200,1000", help="ledger sizes for the rebuild (comma-separated)")
    ap.add_argument("--dir", default="/tmp/labledger-bench-site-runs")
    ap.add_argument("--no-curves", action="store_true")
    ap.add_argument("--against", help="another built catalog site (e.g. main's) to time alongside, interleaved")
    ap.add_argument("--against-label", default="main")
    args = ap.parse_args()
    root = Path(args.dir)
    runs_mod = _runs_module()
    print(f"# bench/site_runs.py  Python {platform.python_version()}  load {os.getloadavg()[0]:.1f}", flush=True)

    def ledger_of(n: int) -> Path:
        ledger = root / f"ledger-{n}"
        if not (ledger / "ledger.db").exists():
            t = runs_mod.build_labledger(ledger, n)
            print(f"ledger of {n} runs built in {t:.0f} s", flush=True)
        return ledger

    lines = ["| page / build | runs | figure | goal |", "|---|---|---|---|"]
    for n in [int(x) for x in args.rebuild_runs.split(",") if x]:
        ledger = ledger_of(n)
        out = root / f"site-{n}"
        if not (out / ".labledger-site.json").exists():
            cold = timed_build(ledger, out)
            files, size = site_size(out)
            print(f"site of {n} runs: cold build {cold['wall']:.0f} s, {files} files, {fmt_bytes(size)}", flush=True)
        timed_build(ledger, out)  # up to date (a new builder rebuilds once)
        same = timed_build(ledger, out)
        rid = add_run(ledger)
        try:
            plus = timed_build(ledger, out)
        finally:
            remove_run(ledger, rid)
            timed_build(ledger, out)
        print({"n": n, "no change": same, "+1 run": plus}, flush=True)
        lines.append(
            f"| rebuild after one new run | {n:,} | {plus['written']} files ({fmt_bytes(plus['bytes'])}), "
            f"{plus['wall']:.1f} s wall / {plus['cpu']:.1f} s CPU (no change: {same['wall']:.1f} s / "
            f"{same['cpu']:.1f} s CPU) | independent of N |"
        )
    if args.catalog_runs:
        n = args.catalog_runs
        out = root / f"catalog-{n}"
        shutil.rmtree(out, ignore_errors=True)
        written = catalog_site(ledger_of(n), out)
        print({"catalog written": written}, flush=True)
        sites = [out] + ([Path(args.against)] if args.against else [])
        query = "index.html#where=config.lr%20%3C%201e-3%20and%20config.opt%20%3D%20'adam'"
        for rel, what in (("index.html", "catalog ready (file://)"), (query, "catalog ready, query in the URL")):
            got = open_times_of(sites, rel, None)
            print({what: got}, flush=True)
            for site, c in zip(sites, got):
                label = what if site == out else f"{what}, {args.against_label}"
                lines.append(
                    f"| {label} | {n:,} | {c['ms']:.0f} ms median (min {c['min_ms']:.0f}); Chromium CPU "
                    f"{c['cpu_ms']:.0f} ms (script {c['script_ms']:.0f} ms); {fmt_bytes(c['bytes'])} loaded | < 1 s |"
                )
    if not args.no_curves:
        cl, ids = curves_ledger(root / "curves")
        out = root / "curves-site"
        if not (out / ".labledger-site.json").exists():
            cold = timed_build(cl, out)
            files, size = site_size(out)
            print(f"curves site: cold build {cold['wall']:.0f} s, {files} files, {fmt_bytes(size)}", flush=True)
        wait = "document.querySelector('figure.curves') && document.querySelector('figure.curves').drawnAt"
        curves = open_times(out, "curves.html#runs=" + ",".join(ids) + "&scalar=loss", wait)
        print({"curves": curves}, flush=True)
        lines.append(
            f"| curves page, chart drawn | {CURVE_RUNS} x {CURVE_STEPS:,} steps | {curves['ms']:.0f} ms, "
            f"{fmt_bytes(curves['bytes'])} loaded | < 1 s |"
        )
        g = open_times(out, "curves.html#runs=" + ",".join(ids) + "&scalar=loss&group=config.lr&band=ci", wait)
        lines.append(
            f"| curves page, grouped by config.lr (CI band) | {CURVE_RUNS} x {CURVE_STEPS:,} | {g['ms']:.0f} ms | < 1 s |"
        )
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
