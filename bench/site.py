#!/usr/bin/env python
"""The static site at scale (issue 6): build time, output size and peak memory for runs of 1k, 10k
and 100k microbatches of 16 samples; incremental rebuilds; time to first render of the run page and
the batch page in headless Chromium; and, where they can be loaded, TensorBoard's and MLflow's UI
for the same scalars (time until the loss curve shows).

    python bench/site.py                     # 1k, 10k, 100k (about 10 minutes on 2 cores)
    python bench/site.py --sizes 1000,10000  # smaller
    python bench/site.py --markdown          # also print the tables as Markdown (for RESULTS.md)
    python bench/site.py --peers /work/bench-venv/bin/python   # the Python that has mlflow/tensorboard
    python bench/site.py --no-peers --no-browser

Each ledger is written with the real Run API (``Run.log_batch`` for every microbatch, ``Run.log``
for every optimizer step, 8 microbatches per step, 256 real PNG images referenced by the samples).
Each build runs in a fresh subprocess, which reports its wall time and peak RSS. Render times are
milliseconds from navigation start (``performance.now()``) in a fresh page, median of 3: "ready" is
when the page has built its DOM from its data (the "(loaded)" figure adds up the static files and
the data files it had read by then); "first curve drawn" and "microbatch-loss chart drawn" are when
the chart library drew those charts. For the peers, the servers are started first and the time is
from navigation to the first loss line in the page's SVG (polled every 50 ms). Nothing here is
asserted: the script prints tables.
"""

from __future__ import annotations

import os
import sys

# bench/ holds a logging.py: keep it from shadowing the standard library's `logging`.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import json
import math
import platform
import random
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

LABELS = ("-1", "0", "+1")
SAMPLES = 16
ACCUM = 8
IMAGES = 256
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HERE = Path(__file__).resolve().parent


# ------------------------------------------------------------------------------ the ledger
def _png(seed: int) -> bytes:
    import struct
    import zlib

    rng = random.Random(seed)
    raw = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(28)) for _ in range(28))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _sample_pool(n: int = 2048, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    pool = []
    for i in range(n):
        z = [rng.gauss(0, 1.5) for _ in LABELS]
        m = max(z)
        e = [math.exp(v - m) for v in z]
        s = sum(e)
        probs = {lab: v / s for lab, v in zip(LABELS, e)}
        gold = LABELS[rng.randrange(3)]
        current = rng.randrange(10)
        pool.append(
            {
                "source": "bench",
                "image_id": i % IMAGES,
                "current": current,
                "training_row": i,
                "input": {
                    "image": f"images/{i % IMAGES}.png",
                    "state": f"The current number is {current}. Move it toward the digit in the image.",
                },
                "gold": gold,
                "prediction": max(probs, key=probs.get),
                "probabilities": probs,
                "cross_entropy": -math.log(probs[gold]),
            }
        )
    return pool


def make_ledger(root: Path, microbatches: int, seed: int = 0) -> tuple[str, float]:
    """One run of ``microbatches`` microbatch records (16 samples each); returns (run id, seconds)."""
    import labledger

    rng = random.Random(seed)
    pool = _sample_pool(seed=seed)
    t0 = time.perf_counter()
    with labledger.start_run(
        f"bench-{microbatches}",
        group="bench",
        tags=("bench",),
        config={"microbatches": microbatches, "samples": SAMPLES, "accum": ACCUM},
        ledger=root,
    ) as run:
        for i in range(IMAGES):
            run.log_file(f"images/{i}.png", _png(i))
        step_losses = []
        for mb in range(1, microbatches + 1):
            samples = [pool[rng.randrange(len(pool))] for _ in range(SAMPLES)]
            loss = sum(s["cross_entropy"] for s in samples) / SAMPLES
            step = (mb - 1) // ACCUM + 1
            run.log_batch(
                {
                    "microbatch": mb,
                    "optimizer_step": step,
                    "examples_seen": mb * SAMPLES,
                    "batch_size": SAMPLES,
                    "loss": loss,
                    "samples": samples,
                    "forward_ms": 1.0,
                    "gpu_allocated_mib": 0.0,
                    "gpu_peak_allocated_mib": 0.0,
                }
            )
            step_losses.append(loss)
            if mb % ACCUM == 0:
                run.log(
                    step,
                    loss=sum(step_losses) / len(step_losses),
                    lr=1e-3 / math.sqrt(step),
                    grad_norm=1.0 + rng.random(),
                )
                step_losses = []
                if step % 100 == 0:
                    run.log_history({"kind": "train", "step": step, "epoch": step / 1000, "loss": loss})
        run.note("bench run")
    return run.id, time.perf_counter() - t0


def _du(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


# ------------------------------------------------------------------------------ builds
def _child_build(ledger: str, out: str) -> None:
    from labledger.site import build_site

    t0 = time.perf_counter()
    result = build_site(ledger, out)
    elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "elapsed_s": elapsed,
                "peak_rss": peak,
                "written": len(result.written),
                "unchanged": result.unchanged,
                "rebuilt_runs": len(result.rebuilt_runs),
            }
        )
    )


def build(ledger: Path, out: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child-build", str(ledger), str(out)], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ browser
def render_times(out: Path, run_id: str, microbatches: int, repeats: int = 3) -> dict:
    from playwright.sync_api import sync_playwright

    pages = {
        "run": f"run.html#run={run_id}",
        "batches": f"batches.html#run={run_id}&mb={microbatches // 2}",
        "catalog": "index.html",
    }
    res: dict = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for name, rel in pages.items():
            times, curve, extra, loaded = [], [], [], 0
            for _ in range(repeats):
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                errors = []
                page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                page.goto(
                    (out / rel.split("#")[0]).as_uri() + "#" + rel.split("#")[1] if "#" in rel else (out / rel).as_uri()
                )
                page.wait_for_selector("body[data-ready='1']", timeout=120000)
                times.append(page.evaluate("LL.readyAt"))
                # What the page had loaded when it became useful: its static files and the data
                # files whose payloads are in window.LABLEDGER (each key is data/<key>.js).
                static = page.evaluate(
                    'Array.from(document.querySelectorAll(\'script[src^="static/"], '
                    "link[href^=\"static/\"]')).map(e => e.getAttribute('src') || e.getAttribute('href'))"
                )
                keys = page.evaluate("LL.readyKeys")
                loaded = sum((out / f).stat().st_size for f in static) + sum(
                    (out / f"data/{k}.js").stat().st_size for k in keys
                )
                if name == "run":  # charts draw on the next frame; the microbatch loss loads after that
                    page.wait_for_function(
                        "() => document.querySelector('#curve-charts figure.chart') &&"
                        " document.querySelector('#curve-charts figure.chart').drawnAt",
                        timeout=120000,
                    )
                    curve.append(page.evaluate("document.querySelector('#curve-charts figure.chart').drawnAt"))
                    page.wait_for_function(
                        "() => document.getElementById('mbloss-chart') &&"
                        " document.getElementById('mbloss-chart').drawnAt",
                        timeout=120000,
                    )
                    extra.append(page.evaluate("document.getElementById('mbloss-chart').drawnAt"))
                if errors:
                    raise RuntimeError(f"{name}: console errors {errors[:3]}")
                page.close()
            res[name] = {"ms": statistics.median(times), "bytes": loaded}
            if extra:
                res["run_curve"] = {"ms": statistics.median(curve)}
                res["run_mbloss"] = {"ms": statistics.median(extra)}
        browser.close()
    return res


# ------------------------------------------------------------------------------ peers
PEER_WRITE = r"""
import json, math, os, sys, time
kind, src, dest = sys.argv[1], sys.argv[2], sys.argv[3]
steps = [json.loads(l) for l in open(src)]
t0 = time.perf_counter()
if kind == "tensorboard":
    from torch.utils.tensorboard import SummaryWriter
    w = SummaryWriter(dest)
    for r in steps:
        for k in ("loss", "lr", "grad_norm"):
            w.add_scalar(k, r[k], r["step"])
    w.close()
    print(json.dumps({"write_s": time.perf_counter() - t0}))
else:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    import mlflow
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    mlflow.set_tracking_uri("file://" + dest)
    client = MlflowClient()
    exp = client.create_experiment("bench")
    run = client.create_run(exp)
    batch = []
    for r in steps:
        for k in ("loss", "lr", "grad_norm"):
            batch.append(Metric(k, r[k], int(r["time"] * 1000), r["step"]))
        if len(batch) >= 900:
            client.log_batch(run.info.run_id, metrics=batch); batch = []
    if batch:
        client.log_batch(run.info.run_id, metrics=batch)
    client.set_terminated(run.info.run_id)
    print(json.dumps({"write_s": time.perf_counter() - t0, "experiment": exp, "run": run.info.run_id}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, seconds: float = 120) -> None:
    import urllib.request

    end = time.time() + seconds
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer in {seconds:.0f} s")


def peer_times(peer_python: str, ledger: Path, run_id: str, work: Path) -> dict:
    """Time until each peer's UI shows the loss curve of the same scalars (or why it could not)."""
    from playwright.sync_api import sync_playwright

    import labledger

    view = labledger.open_ledger(ledger).run(run_id)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "steps.jsonl"
    with open(src, "w") as f:
        for r in view.scalars():
            f.write(json.dumps(r) + "\n")
    script = work / "peer_write.py"
    script.write_text(PEER_WRITE)
    out: dict = {}
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true", "NO_PROXY": "*", "MLFLOW_TRACKING_INSECURE_TLS": "true"}
    for kind in ("tensorboard", "mlflow"):
        dest = work / kind
        shutil.rmtree(dest, ignore_errors=True)
        try:
            w = subprocess.run(
                [peer_python, str(script), kind, str(src), str(dest)],
                capture_output=True,
                text=True,
                timeout=900,
                env=env,
            )
            if w.returncode != 0:
                out[kind] = {"error": (w.stderr.strip().splitlines() or ["?"])[-1][:160]}
                continue
            info = json.loads(w.stdout.strip().splitlines()[-1])
            port = _free_port()
            bindir = Path(peer_python).parent
            if kind == "tensorboard":
                cmd = [str(bindir / "tensorboard"), "--logdir", str(dest), "--port", str(port), "--host", "127.0.0.1"]
                # The SCALARS dashboard draws SVG (the TIME SERIES one draws on a canvas that a
                # script cannot inspect); only the loss tag is shown.
                url = f"http://127.0.0.1:{port}/#scalars&tagFilter=%5Eloss%24"
                ready_js = (
                    "() => { const walk = (root) => Array.from(root.querySelectorAll('*')).some(el =>"
                    " (el.tagName === 'path' && el.classList.contains('line')"
                    " && (el.getAttribute('d') || '').length > 200) || (el.shadowRoot && walk(el.shadowRoot)));"
                    " return walk(document); }"
                )
            else:
                cmd = [
                    str(bindir / "mlflow"),
                    "ui",
                    "--backend-store-uri",
                    f"file://{dest}",
                    "--port",
                    str(port),
                    "--host",
                    "127.0.0.1",
                    "--workers",
                    "1",
                ]
                url = f"http://127.0.0.1:{port}/#/experiments/{info['experiment']}/runs/{info['run']}/model-metrics"
                ready_js = (
                    "() => Array.from(document.querySelectorAll('.js-plotly-plot path.js-line'))"
                    ".some(p => (p.getAttribute('d') || '').length > 50)"
                )
            server = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True
            )
            try:
                _wait_http(f"http://127.0.0.1:{port}/")
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                    times = []
                    for _ in range(3):
                        page = browser.new_page(viewport={"width": 1280, "height": 800})
                        page.goto(url)
                        page.wait_for_function(ready_js, timeout=120000, polling=50)
                        times.append(page.evaluate("performance.now()"))
                        page.screenshot(path=str(work / f"{kind}.png"))
                        page.close()
                    browser.close()
                out[kind] = {"ms": statistics.median(times), "write_s": info["write_s"], "url": url.split("#")[0]}
            finally:
                os.killpg(server.pid, 15)
                server.wait(timeout=30)
        except Exception as exc:  # noqa: BLE001 - a peer failing is a result, not a crash
            out[kind] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    return out


# ------------------------------------------------------------------------------ main
def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--peers", default="/work/bench-venv/bin/python", help="Python with mlflow and tensorboard")
    ap.add_argument("--peer-size", type=int, default=None, help="size whose scalars the peers load (default: largest)")
    ap.add_argument("--keep", default=None, help="keep the ledgers and sites in this folder")
    ap.add_argument("--child-build", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_build:
        _child_build(*args.child_build)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="labledger-bench-site-"))
    work.mkdir(parents=True, exist_ok=True)
    browser_ok = not args.no_browser and Path(CHROMIUM).exists()
    results = []
    try:
        for n in sizes:
            root = work / f"ledger-{n}"
            if root.exists():
                shutil.rmtree(root)
            run_id, gen_s = make_ledger(root, n)
            # a finished run's records are compacted (batches.jsonl.zst): the bytes on disk either way
            plain = root / "runs" / run_id / "batches.jsonl"
            from labledger.store.compressed import compressed_path

            src_bytes = (plain if plain.exists() else compressed_path(plain)).stat().st_size
            out = work / f"site-{n}"
            if out.exists():
                shutil.rmtree(out)
            cold = build(root, out)
            size, files = _du(out)
            again = build(root, out)
            import labledger

            with labledger.start_run("one-more", ledger=root) as extra:
                extra.log(1, loss=0.5)
            newrun = build(root, out)
            row = {
                "microbatches": n,
                "samples": n * SAMPLES,
                "gen_s": gen_s,
                "source_bytes": src_bytes,
                "cold": cold,
                "site_bytes": size,
                "site_files": files,
                "again": again,
                "newrun": newrun,
                "run_id": run_id,
                "out": out,
                "ledger": root,
            }
            if browser_ok:
                row["render"] = render_times(out, run_id, n)
            results.append(row)
            print(
                f"{n:>7} microbatches: ledger {gen_s:.1f} s, build {cold['elapsed_s']:.1f} s "
                f"(peak {fmt_bytes(cold['peak_rss'])}), site {fmt_bytes(size)} in {files} files",
                flush=True,
            )
        peers = None
        if not args.no_peers and browser_ok:
            if Path(args.peers).exists():
                target = next((r for r in results if r["microbatches"] == args.peer_size), results[-1])
                peers = {
                    "size": target["microbatches"],
                    **peer_times(args.peers, target["ledger"], target["run_id"], work / "peers"),
                }
            else:
                peers = {
                    "size": None,
                    "tensorboard": {"error": f"{args.peers} not found"},
                    "mlflow": {"error": f"{args.peers} not found"},
                }
        report(results, peers, args.markdown)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(results: list[dict], peers: dict | None, markdown: bool) -> None:
    import labledger

    print()
    print(
        f"labledger {labledger.__version__}, Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}"
    )
    print()
    rows = []
    for r in results:
        rows.append(
            [
                f"{r['microbatches']:,}",
                f"{r['samples']:,}",
                fmt_bytes(r["source_bytes"]),
                f"{r['cold']['elapsed_s']:.1f} s",
                fmt_bytes(r["cold"]["peak_rss"]),
                fmt_bytes(r["site_bytes"]),
                f"{r['site_files']:,}",
                f"{r['again']['elapsed_s']:.2f} s ({r['again']['written']} written)",
                f"{r['newrun']['elapsed_s']:.2f} s ({r['newrun']['written']} written)",
            ]
        )
    print(
        table(
            [
                "microbatches",
                "samples",
                "batches on disk",
                "build (cold)",
                "peak RSS",
                "site size",
                "files",
                "rebuild, no change",
                "rebuild, +1 run",
            ],
            rows,
            markdown,
        )
    )
    if any("render" in r for r in results):
        print()
        rows = []
        for r in results:
            if "render" not in r:
                continue
            rd = r["render"]
            rows.append(
                [
                    f"{r['microbatches']:,}",
                    f"{rd['catalog']['ms']:.0f} ms ({fmt_bytes(rd['catalog']['bytes'])})",
                    f"{rd['run']['ms']:.0f} ms ({fmt_bytes(rd['run']['bytes'])})",
                    f"{rd['run_curve']['ms']:.0f} ms",
                    f"{rd['run_mbloss']['ms']:.0f} ms",
                    f"{rd['batches']['ms']:.0f} ms ({fmt_bytes(rd['batches']['bytes'])})",
                ]
            )
        print(
            table(
                [
                    "microbatches",
                    "catalog ready (loaded)",
                    "run page ready (loaded)",
                    "first curve drawn",
                    "microbatch-loss chart drawn",
                    "batch page ready (loaded)",
                ],
                rows,
                markdown,
            )
        )
    if peers:
        print()
        n = peers.get("size")
        rows = []
        ours = next((r for r in results if r["microbatches"] == n), None)
        if ours and "render" in ours:
            rows.append(
                [
                    "labledger site (file://)",
                    f"{ours['render']['run_curve']['ms']:.0f} ms",
                    f"static build {ours['cold']['elapsed_s']:.1f} s (whole site, all microbatches)",
                ]
            )
        for kind, label in (
            ("tensorboard", "TensorBoard (scalars dashboard)"),
            ("mlflow", "MLflow UI (run's metrics)"),
        ):
            v = peers.get(kind) or {}
            if "ms" in v:
                rows.append([label, f"{v['ms']:.0f} ms", f"writing the scalars {v['write_s']:.1f} s + a server"])
            else:
                rows.append([label, "n/a", v.get("error", "not run")])
        steps = f" ({n // ACCUM:,} optimizer steps x 3 scalars)" if n else ""
        print(f"Time until the loss curve shows, same run{steps}:")
        print(table(["UI", "loss curve shown", "what it takes"], rows, markdown))


if __name__ == "__main__":
    main()
