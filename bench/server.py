#!/usr/bin/env python
"""The server (issue 7): requests per second and p50/p99 latency of ``GET /api/runs`` and of 1 MB
uploads on ``labledger serve``, side by side with ``mlflow server`` on the same machine (listing
runs with ``POST /api/2.0/mlflow/runs/search``; 1 MB artifacts through its proxied artifact store,
``PUT /api/2.0/mlflow-artifacts/artifacts/...``). Both are seeded with the same runs.

    python bench/server.py                      # 200 runs; ~2-3 minutes on 2 cores
    python bench/server.py --runs 1000 --requests 200
    python bench/server.py --no-mlflow          # labledger only
    python bench/server.py --mlflow /work/bench-venv/bin/mlflow --markdown --write-results

Everything runs on 127.0.0.1 (free ports), in a temporary folder removed at the end. Each
measurement is bounded in count (``--requests``/``--uploads``) and time (``--max-seconds``).
Clients are Python threads with one keep-alive ``httpx.Client`` each, on the same machine as the
server (the two compete for the CPUs, as they would on a laptop). Nothing is asserted.
"""

from __future__ import annotations

import os
import sys

# bench/ holds a logging.py: keep it from shadowing the standard library's `logging`.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import contextlib
import json
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

TOKEN = "bench-token-0123456789abcdef0123"
MIB = 2**20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up in {timeout:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# -- seeding -------------------------------------------------------------------------------------
def seed_labledger(ledger: Path, n: int, steps: int) -> None:
    import labledger

    book = labledger.open_ledger(ledger, create=True)
    for i in range(n):
        with labledger.start_run(
            f"run-{i:04d}",
            group=f"g{i % 10}",
            tags=("bench", f"t{i % 3}"),
            config={"lr": 1e-3 * (1 + i % 5), "hidden": 64 * (1 + i % 4)},
            ledger=book,
        ) as run:
            for step in range(1, steps + 1):
                run.log(step, loss=1.0 / step, lr=1e-3)
    book.close()


def seed_mlflow(url: str, n: int, steps: int) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        for i in range(n):
            now = int(time.time() * 1000)
            r = c.post(
                "/api/2.0/mlflow/runs/create",
                json={
                    "experiment_id": "0",
                    "run_name": f"run-{i:04d}",
                    "start_time": now,
                    "tags": [{"key": "group", "value": f"g{i % 10}"}, {"key": "bench", "value": "1"}],
                },
            )
            r.raise_for_status()
            run_id = r.json()["run"]["info"]["run_id"]
            metrics = [
                {"key": k, "value": v, "timestamp": now, "step": s}
                for s in range(1, steps + 1)
                for k, v in (("loss", 1.0 / s), ("lr", 1e-3))
            ]
            params = [
                {"key": "lr", "value": str(1e-3 * (1 + i % 5))},
                {"key": "hidden", "value": str(64 * (1 + i % 4))},
            ]
            for start in range(0, len(metrics), 1000):
                c.post(
                    "/api/2.0/mlflow/runs/log-batch",
                    json={
                        "run_id": run_id,
                        "metrics": metrics[start : start + 1000],
                        "params": params if start == 0 else [],
                    },
                ).raise_for_status()
            c.post(
                "/api/2.0/mlflow/runs/update", json={"run_id": run_id, "status": "FINISHED", "end_time": now + 1}
            ).raise_for_status()


# -- measuring -----------------------------------------------------------------------------------
def measure(base: str, request, *, clients: int, total: int, max_seconds: float) -> dict:
    """Send ``total`` requests from ``clients`` threads (bounded by ``max_seconds``)."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(total))
    deadline = time.monotonic() + max_seconds

    def worker() -> None:
        with httpx.Client(base_url=base, timeout=120) as c:
            request(c, -1)  # warm the connection
            while time.monotonic() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                t0 = time.perf_counter()
                try:
                    request(c, i)
                except Exception as exc:  # noqa: BLE001 - counted and shown, never fatal
                    with lock:
                        errors.append(str(exc)[:120])
                    continue
                dt = time.perf_counter() - t0
                with lock:
                    latencies.append(dt)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    latencies.sort()
    n = len(latencies)
    return {
        "clients": clients,
        "requests": n,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": wall,
        "rps": n / wall if wall else 0.0,
        "p50_ms": 1000 * latencies[n // 2] if n else None,
        "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))] if n else None,
        "mean_ms": 1000 * statistics.fmean(latencies) if n else None,
    }


def labledger_list(expected: int):
    def request(c: httpx.Client, i: int) -> None:
        r = c.get("/api/runs")
        r.raise_for_status()
        if r.json()["total"] != expected:
            raise RuntimeError(f"listed {r.json()['total']} runs, expected {expected}")

    return request


def mlflow_list(expected: int):
    def request(c: httpx.Client, i: int) -> None:
        r = c.post("/api/2.0/mlflow/runs/search", json={"experiment_ids": ["0"], "max_results": 1000})
        r.raise_for_status()
        got = len(r.json().get("runs", []))
        if got != expected:
            raise RuntimeError(f"listed {got} runs, expected {expected}")

    return request


def labledger_upload(payload: bytes, tag: str):
    def request(c: httpx.Client, i: int) -> None:
        r = c.post(
            f"/upload?filename=bench-{tag}-{i}.bin",
            content=payload,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/octet-stream"},
        )
        if i >= 0:
            r.raise_for_status()

    return request


def mlflow_upload(payload: bytes, tag: str):
    def request(c: httpx.Client, i: int) -> None:
        r = c.put(
            f"/api/2.0/mlflow-artifacts/artifacts/bench/{tag}-{i}.bin",
            content=payload,
            headers={"Content-Type": "application/octet-stream"},
        )
        r.raise_for_status()

    return request


# -- the run -------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="runs seeded into each server")
    ap.add_argument("--steps", type=int, default=20, help="scalar steps per run")
    ap.add_argument("--requests", type=int, default=300, help="list requests per measurement")
    ap.add_argument("--uploads", type=int, default=200, help="1 MB uploads per measurement")
    ap.add_argument("--clients", default="1,8", help="concurrent clients for listing")
    ap.add_argument("--upload-clients", default="1,4", help="concurrent clients for uploads")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="time bound of each measurement")
    ap.add_argument("--mlflow", default="/work/bench-venv/bin/mlflow", help="the mlflow executable")
    ap.add_argument("--mlflow-workers", default="1,4", help="mlflow server --workers values to measure")
    ap.add_argument("--no-mlflow", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument(
        "--write-results", action="store_true", help="replace the '## Server (issue 7)' section of bench/RESULTS.md"
    )
    ap.add_argument("--json", default=None, help="also save the raw numbers here")
    args = ap.parse_args()
    clients = [int(x) for x in args.clients.split(",")]
    upload_clients = [int(x) for x in args.upload_clients.split(",")]
    payload = os.urandom(MIB)
    rows: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="labledger-bench-server-"))
    procs: list[subprocess.Popen] = []
    versions = {"python": platform.python_version()}
    try:
        # labledger
        t0 = time.perf_counter()
        seed_labledger(tmp / "ledger", args.runs, args.steps)
        print(f"seeded labledger with {args.runs} runs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        port = free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "labledger",
                "serve",
                "--ledger",
                str(tmp / "ledger"),
                "--port",
                str(port),
                "--uploads",
                str(tmp / "uploads"),
                "--max-upload",
                "8MB",
                "--log-level",
                "warning",
            ],
            env={**os.environ, "LABLEDGER_TOKEN": TOKEN},
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        wait_up(base + "/api", proc)
        import starlette
        import uvicorn

        from labledger import __version__

        versions.update(labledger=__version__, starlette=starlette.__version__, uvicorn=uvicorn.__version__)
        for c in clients:
            rows.append(
                {
                    "server": "labledger serve",
                    "what": f"list {args.runs} runs (GET /api/runs)",
                    **measure(
                        base, labledger_list(args.runs), clients=c, total=args.requests, max_seconds=args.max_seconds
                    ),
                }
            )
        for c in upload_clients:
            rows.append(
                {
                    "server": "labledger serve",
                    "what": "upload 1 MiB (POST /upload)",
                    **measure(
                        base,
                        labledger_upload(payload, f"c{c}"),
                        clients=c,
                        total=args.uploads,
                        max_seconds=args.max_seconds,
                    ),
                }
            )
        stop(proc)

        # mlflow
        mlflow = shutil.which(args.mlflow) or args.mlflow
        if args.no_mlflow:
            pass
        elif not os.path.exists(mlflow):
            rows.append({"server": "mlflow server", "what": f"skipped: {args.mlflow} not found"})
        else:
            versions["mlflow"] = (
                subprocess.run([mlflow, "--version"], capture_output=True, text=True, timeout=120)
                .stdout.strip()
                .split()[-1]
            )
            for workers in [int(w) for w in args.mlflow_workers.split(",")]:
                home = tmp / f"mlflow-{workers}"
                home.mkdir()
                port = free_port()
                proc = subprocess.Popen(
                    [
                        mlflow,
                        "server",
                        "--backend-store-uri",
                        f"sqlite:///{home}/mlflow.db",
                        "--artifacts-destination",
                        str(home / "artifacts"),
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--workers",
                        str(workers),
                    ],
                    cwd=home,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                procs.append(proc)
                base = f"http://127.0.0.1:{port}"
                wait_up(base + "/health", proc)
                t0 = time.perf_counter()
                seed_mlflow(base, args.runs, args.steps)
                print(
                    f"seeded mlflow ({workers} workers) with {args.runs} runs in {time.perf_counter() - t0:.1f} s",
                    file=sys.stderr,
                )
                name = f"mlflow server --workers {workers}"
                for c in clients:
                    rows.append(
                        {
                            "server": name,
                            "what": f"list {args.runs} runs (POST runs/search)",
                            **measure(
                                base,
                                mlflow_list(args.runs),
                                clients=c,
                                total=args.requests,
                                max_seconds=args.max_seconds,
                            ),
                        }
                    )
                for c in upload_clients:
                    rows.append(
                        {
                            "server": name,
                            "what": "upload 1 MiB (PUT mlflow-artifacts)",
                            **measure(
                                base,
                                mlflow_upload(payload, f"c{c}"),
                                clients=c,
                                total=args.uploads,
                                max_seconds=args.max_seconds,
                            ),
                        }
                    )
                stop(proc)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)

    fs_type = (
        subprocess.run(["stat", "-f", "-c", "%T", tempfile.gettempdir()], capture_output=True, text=True).stdout.strip()
        or "unknown"
    )
    table = render(rows)
    print(table)
    meta = (
        f"`python bench/server.py` ({time.strftime('%Y-%m-%d')}; {os.cpu_count()} CPUs shared by clients and "
        f"server; Python {versions['python']}, labledger {versions.get('labledger')}, Starlette "
        f"{versions.get('starlette')}, uvicorn {versions.get('uvicorn')}"
        + (f", MLflow {versions['mlflow']} from the bench venv" if "mlflow" in versions else "")
        + "). "
        f"Both servers seeded with the same {args.runs} runs ({args.steps} steps of 2 scalars, 2 params/config "
        f"values, tags); loopback, keep-alive clients in threads on the same machine; {args.requests} list "
        f"requests and {args.uploads} uploads per row, each row bounded to {args.max_seconds:.0f} s. "
        f"`labledger serve` is one uvicorn process; MLflow is measured with 1 worker and with its default 4. "
        f"A labledger upload streams to a hidden temporary file while hashing, fsyncs it, links it into place, "
        f"writes its sidecar and fsyncs the folder before answering (file system here: {fs_type})."
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "versions": versions, "rows": rows}, indent=2))
    if args.write_results:
        write_results(meta, table)


def render(rows: list[dict]) -> str:
    lines = [
        "| server | request | clients | requests | errors | req/s | p50 | p99 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "rps" not in r:
            lines.append(f"| {r['server']} | {r['what']} | | | | | | |")
            continue
        ms = lambda v: "—" if v is None else f"{v:.1f} ms"  # noqa: E731
        lines.append(
            f"| {r['server']} | {r['what']} | {r['clients']} | {r['requests']} | {r['errors']} | "
            f"{r['rps']:.1f} | {ms(r['p50_ms'])} | {ms(r['p99_ms'])} |"
        )
    return "\n".join(lines)


def write_results(meta: str, table: str) -> None:
    path = Path(__file__).resolve().parent / "RESULTS.md"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    section = f"## Server (issue 7)\n\n{meta}\n\n{table}\n"
    pattern = re.compile(r"^## Server \(issue 7\)\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda m: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


if __name__ == "__main__":
    main()
