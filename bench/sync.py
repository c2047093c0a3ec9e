#!/usr/bin/env python
"""``labledger sync`` (issue 18): a run with many scalar steps and microbatch records, a large
checkpoint, and a no-op sync of many synced runs, to a local ``labledger serve`` (SQLite index,
run files in a folder) on 127.0.0.1.

    python bench/sync.py                                  # the issue's sizes: 1M steps, 100k batches, 1 GiB
    python bench/sync.py --steps 200000 --batches 20000 --checkpoint-mib 256 --noop-runs 1000

Per row: wall time of the sync (timed inside the client's process) and CPU time of that whole
child process (its interpreter's start included), bytes sent, the
peak RSS of the client and of the server (the server's ``VmHWM`` is read after each row, so it is
the peak so far), and for the checkpoint the speed beside ``cp`` of the same file on the same disk.
Peers (``wandb sync`` of an offline run, MLflow's ``log_artifact``) are measured when their
packages are importable; otherwise the row says so. Nothing is asserted.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-token-0123456789abcdef0123"
MIB = 2**20
SERVER = """
import json, sys, uvicorn
from labledger.server import create_app
args = json.loads(sys.argv[1])
app = create_app(args["ledger"], uploads_dir=args["uploads"], token=args["token"], max_upload=args["max_upload"])
uvicorn.run(app, host="127.0.0.1", port=args["port"], log_level="warning")
"""


#: The client: ``sync_runs`` timed inside its process (the interpreter's start is not the sync's time).
CLIENT = """
import json, sys, time
from labledger.server.sync_client import sync_runs
t = time.perf_counter()
report = sync_runs(sys.argv[2], sys.argv[1], token=sys.argv[3])
print(json.dumps({**report.to_dict(), "elapsed": time.perf_counter() - t}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def child(cmd: list[str], env: dict[str, str]) -> dict:
    """Run ``cmd``; its wall time, CPU time and peak RSS (from wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise RuntimeError(f"{cmd[:4]} exited with {status}: {out[-500:]!r}")
    doc = json.loads(out)
    return {
        "wall": doc["elapsed"],
        "process": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss * 1024,
        "bytes": doc["bytes_sent"],
    }


def seed_big(ledger: Path, steps: int, batches: int) -> str:
    import labledger

    with labledger.start_run("big", ledger=ledger) as run:
        for i in range(1, steps + 1):
            run.log(i, loss=1.0 / i, lr=1e-3, grad_norm=0.5)
        for b in range(1, batches + 1):
            run.log_batch({"microbatch": b, "samples": [{"id": f"s{b}-{k}", "loss": 0.1 * k} for k in range(16)]})
    return run.id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--checkpoint-mib", type=int, default=1024)
    ap.add_argument("--noop-runs", type=int, default=1000)
    ap.add_argument("--log-calls", type=int, default=200_000, help="Run.log calls timed with and without sync=.")
    ap.add_argument("--tmp", default=None, help="Folder for the ledgers (default: a temporary one).")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="bench-sync-", dir=args.tmp))
    os.environ["LABLEDGER_TOKEN"] = TOKEN  # the sync= processes of section 4 read it
    env = {**os.environ, "LABLEDGER_TOKEN": TOKEN, "PYTHONPATH": os.pathsep.join(sys.path)}
    rows: list[dict] = []
    server_root = base / "server"
    port = free_port()
    from labledger.store.ledger import Ledger

    Ledger(server_root, create=True).close()
    srv = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SERVER,
            json.dumps(
                {
                    "ledger": str(server_root),
                    "uploads": str(base / "uploads"),
                    "token": TOKEN,
                    "port": port,
                    "max_upload": 1 << 40,
                }
            ),
        ],
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        sync = [sys.executable, "-c", CLIENT, url]
        # the ledger goes after the URL; the token last

        # 1. a run of many steps and microbatch records
        local = base / "local"
        t0 = time.perf_counter()
        seed_big(local, args.steps, args.batches)
        seeded = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in (local / "runs").rglob("*") if p.is_file())
        r = child([*sync, str(local), TOKEN], env)
        rows.append(
            {
                "what": f"run: {args.steps:,} steps + {args.batches:,} batches x16 ({size / MIB:.0f} MiB; logged in {seeded:.0f} s)",
                **r,
                "server_rss": vm_hwm(srv.pid),
            }
        )
        r = child([*sync, str(local), TOKEN], env)
        rows.append(
            {
                "what": "the same again (nothing to send)",
                **r,
                "server_rss": vm_hwm(srv.pid),
            }
        )

        # 2. a large checkpoint, beside cp
        import labledger

        ck = base / "ckpt.bin"
        with open(ck, "wb") as f:
            block = os.urandom(MIB)
            for _ in range(args.checkpoint_mib):
                f.write(block)
        t0 = time.perf_counter()
        subprocess.run(["cp", str(ck), str(base / "ckpt.copy")], check=True)
        subprocess.run(["sync"], check=False)
        cp = time.perf_counter() - t0
        (base / "ckpt.copy").unlink()
        ckl = base / "ckpt-ledger"
        with labledger.start_run("ckpt", ledger=ckl) as run:
            run.log_checkpoint(ck, copy=True)
        r = child([*sync, str(ckl), TOKEN], env)
        speed = args.checkpoint_mib / r["wall"]
        cp_speed = args.checkpoint_mib / cp
        rows.append(
            {
                "what": f"checkpoint {args.checkpoint_mib} MiB: {speed:.0f} MiB/s, {100 * speed / cp_speed:.0f}% of cp ({cp_speed:.0f} MiB/s)",
                **r,
                "server_rss": vm_hwm(srv.pid),
            }
        )

        # 3. a no-op sync of many synced runs
        many = base / "many"
        book = Ledger(many, create=True)
        for i in range(args.noop_runs):
            with labledger.start_run(f"r{i}", ledger=book) as run:
                run.log(1, loss=0.5)
        book.close()
        child([*sync, str(many), TOKEN], env)
        r = child([*sync, str(many), TOKEN], env)
        rows.append(
            {
                "what": f"no-op sync of {args.noop_runs:,} synced runs",
                **r,
                "server_rss": vm_hwm(srv.pid),
            }
        )

        # 4. the cost of Run.log with sync= (a separate process): no sync, server down, server up
        for label, target in (
            ("no sync", None),
            ("sync= to a server that is down", f"http://127.0.0.1:{free_port()}"),
            ("sync= to the server", url),
        ):
            t0, c0 = time.perf_counter(), time.process_time()
            with labledger.start_run("cost", ledger=base / f"cost-{len(rows)}", sync=target) as run:
                for i in range(1, args.log_calls + 1):
                    run.log(i, loss=1.0 / i, lr=1e-3)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if run.sync_process is not None:
                if target == url:
                    run.sync_process.wait(timeout=300)
                else:
                    run.sync_process.kill()
                    run.sync_process.wait()
            rows.append(
                {
                    "what": f"Run.log x{args.log_calls:,}, {label}: {1e6 * wall / args.log_calls:.2f} us per call",
                    "wall": wall,
                    "process": wall,
                    "cpu": cpu,
                    "rss": 0,
                    "bytes": 0,
                    "server_rss": vm_hwm(srv.pid),
                }
            )
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(base, ignore_errors=True)

    for peer in ("wandb", "mlflow"):
        try:
            __import__(peer)
        except ImportError:
            rows.append({"what": f"{peer}: not installed here (pip install {peer}); not measured"})
    load = os.getloadavg()
    print(f"labledger sync bench; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    print(f"{'what':<78} {'wall s':>8} {'cpu s':>7} {'sent MiB':>9} {'client MB':>10} {'server MB':>10}")
    for row in rows:
        if "wall" not in row:
            print(row["what"])
            continue
        print(
            f"{row['what']:<78} {row['wall']:>8.2f} {row['cpu']:>7.2f} {row['bytes'] / MIB:>9.1f} "
            f"{row['rss'] / 1e6:>10.0f} {row['server_rss'] / 1e6:>10.0f}"
        )


if __name__ == "__main__":
    main()
