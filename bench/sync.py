#!/usr/bin/env python
"""``labledger sync`` (issue 18): a run with many scalar steps and microbatch records, a large
checkpoint, a no-op sync of many synced runs, and many small files (issue 46: one run of 1,098
files logged with ``log_file`` beside ``cp -r`` of its folder in the same minute, 1,000 runs of 10
small files each, then a no-op sync of those), to a local ``labledger serve`` (SQLite index, run
files in a folder) on 127.0.0.1.

    python bench/sync.py                                  # the issue's sizes: 1M steps, 100k batches, 1 GiB
    python bench/sync.py --quick                          # 100k steps, 10k batches, 256 MiB, 200 runs
    python bench/sync.py --only small --no-peers          # the small-files rows alone

Per row: wall time of the sync (timed inside the client's process; for the checkpoint, the whole
``labledger sync`` process, as cp is timed whole) and CPU time of that whole
child process (its interpreter's start included), bytes sent, the
peak RSS of the client and of the server (the server's ``VmHWM`` is read after each row, so it is
the peak so far), and for the checkpoint the speed beside ``cp`` of the same file on the same disk,
then two syncs at once of half the size each (what a two-stream upload could reach at most).
Peers: W&B's local processing (an offline run of ``--peer-steps`` steps written, and a checkpoint
staged as an Artifact; ``wandb sync`` itself needs W&B's server) and MLflow's ``log_artifact`` of
the same checkpoint to a local ``mlflow server --workers 1``; a missing package is a row saying
so. ``--quick`` runs it all in a few minutes. Nothing is asserted.

    python bench/sync.py --only checkpoint,floor --repeat 3 --no-peers   # the checkpoint beside cp and the floor, 3 times

Each repeat of the checkpoint section is followed by the verified-copy floor (``section_floor``:
loopback TCP and sha256, no HTTP, no disk) and a line with the goal's ratio (#46): the sync's
speed over the one-stream floor's, both from that repeat; the last line lists every repeat's.
``--only floor`` measures the floor alone.

The load average is printed beside every row: on a shared machine the wall times (and so the
percentage of ``cp``) follow it; the CPU columns are the comparable figures.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import contextlib
import json
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

TOKEN = "bench-token-0123456789abcdef0123"
MIB = 2**20
#: The server as ``labledger serve`` runs it (its HTTP protocol and body timeout; no live site).
SERVER = """
import json, sys, uvicorn
from labledger.server import create_app
from labledger.server.timeouts import BodyTimeout, head_timeout_protocol
args = json.loads(sys.argv[1])
app = create_app(args["ledger"], uploads_dir=args["uploads"], token=args["token"], max_upload=args["max_upload"])
app.add_middleware(BodyTimeout, body_timeout=30.0)
try:
    protocol = head_timeout_protocol(10.0, 64 * 1024, 30.0)
except TypeError:  # before raw request bodies (#18) the protocol took no body timeout
    protocol = head_timeout_protocol(10.0, 64 * 1024)
uvicorn.run(app, host="127.0.0.1", port=args["port"], log_level="warning", http=protocol)
"""


#: The client: ``sync_runs`` timed inside its process (the interpreter's start is not the sync's time).
CLIENT = """
import json, sys, time
from labledger.server.sync_client import sync_runs
t = time.perf_counter()
report = sync_runs(sys.argv[2], sys.argv[1], token=sys.argv[3])
print(json.dumps({**report.to_dict(), "elapsed": time.perf_counter() - t}))
"""


def checkpoint_file(path: Path, mib: int) -> Path:
    """A file of ``mib`` MiB of random bytes (one random MiB repeated): the checkpoint every row sends."""
    with open(path, "wb") as f:
        block = os.urandom(MIB)
        for _ in range(mib):
            f.write(block)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_cpu(pid: int, *, split: bool = False) -> Any:
    """CPU seconds (user + system) of a process and its children so far; with ``split``, (user, system)."""
    import psutil

    proc = psutil.Process(pid)
    user = system = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            user, system = user + t.user, system + t.system
        except psutil.Error:
            pass
    return (user, system) if split else user + system


def tree_hwm(pid: int) -> int:
    """The largest peak RSS among a process and its children (``mlflow server`` forks uvicorn)."""
    import psutil

    best = vm_hwm(pid)
    for p in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(OSError, psutil.Error):
            best = max(best, vm_hwm(p.pid))
    return best


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def child(cmd: list[str], env: dict[str, str]) -> dict:
    """Run ``cmd``; its wall time, CPU time and peak RSS (from wait4). ``wall`` is the time the
    child reports (``elapsed``) or, for a command that reports none (``labledger sync --json``),
    the whole process's."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise RuntimeError(f"{cmd[:4]} exited with {status}: {out[-500:]!r}")
    try:
        doc = json.loads(out)  # `labledger sync --json`: one indented document
    except ValueError:
        doc = json.loads(out.strip().splitlines()[-1])
    return {
        "wall": doc.get("elapsed", wall),
        "process": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "user": usage.ru_utime,
        "system": usage.ru_stime,
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


WANDB = """
import json, os, sys, time
import wandb
steps, batches, ckpt = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
t = time.perf_counter()
run = wandb.init(mode="offline", project="bench", dir=sys.argv[4], settings=wandb.Settings(console="off"))
for i in range(1, steps + 1):
    run.log({"loss": 1.0 / i, "lr": 1e-3, "grad_norm": 0.5}, step=i)
for b in range(1, batches + 1):
    run.log({"batch": {"microbatch": b, "samples": [{"id": f"s{b}-{k}", "loss": 0.1 * k} for k in range(16)]}})
if ckpt:
    art = wandb.Artifact("ckpt", type="model")
    art.add_file(ckpt)
    run.log_artifact(art)
run.finish()
print(json.dumps({"elapsed": time.perf_counter() - t, "bytes_sent": 0}))
"""

MLFLOW = """
import json, sys, time
import mlflow
mlflow.set_tracking_uri(sys.argv[1])
t = time.perf_counter()
with mlflow.start_run():
    mlflow.log_artifact(sys.argv[2])
print(json.dumps({"elapsed": time.perf_counter() - t, "bytes_sent": int(sys.argv[3])}))
"""


def wandb_rows(args: argparse.Namespace) -> list[dict]:
    """W&B's local processing of the run: an offline run written (what ``wandb sync`` later sends)."""
    try:
        import wandb
    except ImportError:
        return [{"what": "wandb: not installed here (pip install wandb); not measured"}]
    out = []
    base = Path(tempfile.mkdtemp(prefix="bench-sync-wandb-", dir=args.tmp))
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}
    try:
        steps, batches = args.peer_steps, args.peer_steps // 10
        r = child([sys.executable, "-c", WANDB, str(steps), str(batches), "", str(base / "run")], env)
        size = sum(p.stat().st_size for p in (base / "run").rglob("*") if p.is_file())
        r["bytes"] = size
        out.append(
            {
                "what": f"W&B {wandb.__version__} offline run written: {steps:,} steps + {batches:,} batches x16 (on disk)",
                **r,
            }
        )
        ck = checkpoint_file(base / "ckpt.bin", args.checkpoint_mib)
        r = child([sys.executable, "-c", WANDB, "0", "0", str(ck), str(base / "ck")], env)
        r["bytes"] = 0  # nothing is sent offline: the file is copied to W&B's staging folder
        out.append(
            {"what": f"W&B offline Artifact of the {args.checkpoint_mib} MiB checkpoint (staged as a copy)", **r}
        )
    except (RuntimeError, OSError, ValueError) as exc:  # a peer that fails is a row, not a crash
        out.append({"what": f"wandb: failed ({type(exc).__name__}: {str(exc)[:120]})"})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out.append({"what": "  (wandb sync itself needs W&B's GraphQL server; not measured against a local endpoint)"})
    return out


def mlflow_rows(args: argparse.Namespace) -> list[dict]:
    """MLflow's ``log_artifact`` of the checkpoint to a local ``mlflow server`` (proxied artifacts)."""
    mlflow = shutil.which(args.mlflow)
    if mlflow is None:
        return [{"what": f"mlflow: {args.mlflow} not found; not measured"}]
    base = Path(tempfile.mkdtemp(prefix="bench-sync-mlflow-", dir=args.tmp))
    port = free_port()
    srv = subprocess.Popen(
        [
            mlflow,
            "server",
            "--backend-store-uri",
            f"sqlite:///{base}/mlflow.db",
            "--artifacts-destination",
            str(base / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    out = []
    try:
        for _ in range(1200):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        ck = checkpoint_file(base / "ckpt.bin", args.checkpoint_mib)
        subprocess.run(["sync"], check=False)
        s0 = server_cpu(srv.pid)
        r = child([sys.executable, "-c", MLFLOW, url, str(ck), str(ck.stat().st_size)], dict(os.environ))
        r["server_cpu"] = server_cpu(srv.pid) - s0
        speed = args.checkpoint_mib / r["wall"]
        out.append(
            {
                "what": f"MLflow log_artifact {args.checkpoint_mib} MiB to mlflow server: {speed:.0f} MiB/s",
                **r,
                "server_rss": tree_hwm(srv.pid),
            }
        )
    except (RuntimeError, OSError, ValueError, httpx.HTTPError) as exc:
        out.append({"what": f"mlflow: failed ({type(exc).__name__}: {str(exc)[:120]})"})
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
        shutil.rmtree(base, ignore_errors=True)
    return out


def load1() -> float:
    return os.getloadavg()[0]


def section_run(args: argparse.Namespace, base: Path, sync: list[str], env: dict, srv: subprocess.Popen) -> list[dict]:
    """A run of many steps and microbatch records, synced, then synced again (nothing to send)."""
    local = base / "local"
    t0 = time.perf_counter()
    seed_big(local, args.steps, args.batches)
    seeded = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in (local / "runs").rglob("*") if p.is_file())
    rows = []
    s0, load = server_cpu(srv.pid), load1()
    r = child([*sync, str(local), TOKEN], env)
    r["server_cpu"] = server_cpu(srv.pid) - s0
    rows.append(
        {
            "what": f"run: {args.steps:,} steps + {args.batches:,} batches x16 ({size / MIB:.0f} MiB; logged in {seeded:.0f} s)",
            **r,
            "server_rss": vm_hwm(srv.pid),
            "load": load,
        }
    )
    load = load1()
    r = child([*sync, str(local), TOKEN], env)
    rows.append({"what": "the same again (nothing to send)", **r, "server_rss": vm_hwm(srv.pid), "load": load})
    return rows


def section_checkpoint(
    args: argparse.Namespace, base: Path, url: str, cli: list[str], cli_env: dict, srv: subprocess.Popen, n: int
) -> list[dict]:
    """A large checkpoint synced by ``labledger sync`` (the whole process timed), beside ``cp`` of
    the same file on the same disk followed by ``sync`` (a durable copy, as the server's is), and
    beside ``dd conv=fsync`` of it (the disk alone)."""
    import labledger

    ck = checkpoint_file(base / f"ckpt-{n}.bin", args.checkpoint_mib)
    subprocess.run(["sync"], check=False)
    load = load1()
    # cp twice, the faster kept: on this VM a copy into page-cache pages not touched for a while
    # runs at a third of the speed of the next one, and the goal is against cp at its speed
    cps = []
    for _ in range(2):
        t0 = time.perf_counter()
        cp_proc = subprocess.Popen(["cp", str(ck), str(base / "ckpt.copy")])
        _, _, cp_usage = os.wait4(cp_proc.pid, 0)
        subprocess.run(["sync"], check=False)
        cps.append((time.perf_counter() - t0, cp_usage.ru_utime + cp_usage.ru_stime))
        (base / "ckpt.copy").unlink()
        subprocess.run(["sync"], check=False)
    cp, cp_cpu = min(cps)
    ckl = base / f"ckpt-ledger-{n}"
    t0, c0 = time.perf_counter(), time.process_time()
    with labledger.start_run("ckpt", ledger=ckl) as run:
        run.log_checkpoint(ck, copy=True)
    logged, logged_cpu = time.perf_counter() - t0, time.process_time() - c0
    ck.unlink()
    subprocess.run(["sync"], check=False)  # the copy's writeback is not the sync's (cp's own was timed)
    stored = next((ckl / "runs").glob("*/checkpoints/*"))
    t0 = time.perf_counter()  # the disk alone: the same bytes written durably by one process (no network, no hash)
    subprocess.run(
        ["dd", f"if={stored}", f"of={base / 'ckpt.dd'}", "bs=256K", "conv=fsync", "status=none"], check=False
    )
    dd = time.perf_counter() - t0
    (base / "ckpt.dd").unlink(missing_ok=True)
    subprocess.run(["sync"], check=False)
    s0 = server_cpu(srv.pid, split=True)
    # the whole `labledger sync` process, as a user runs it (its start, imports and answers included)
    r = child([*cli, "sync", "--ledger", str(ckl), "--to", url, "--token", TOKEN, "--json"], cli_env)
    s1 = server_cpu(srv.pid, split=True)
    r["server_cpu"] = s1[0] + s1[1] - s0[0] - s0[1]
    speed = args.checkpoint_mib / r["wall"]
    cp_speed = args.checkpoint_mib / cp
    shutil.rmtree(ckl, ignore_errors=True)
    halves = two_halves(args, base, url, cli, cli_env, srv, n, cp_speed)
    return [
        {
            "checkpoint": True,
            "what": f"checkpoint {args.checkpoint_mib} MiB: {speed:.0f} MiB/s, {100 * speed / cp_speed:.0f}% of cp "
            f"(faster of 2: {cp_speed:.0f} MiB/s, {cp_cpu:.2f} s CPU; the other {args.checkpoint_mib / max(cps)[0]:.0f}; "
            f"dd+fsync {args.checkpoint_mib / dd:.0f} MiB/s); log_checkpoint {logged:.2f} s ({logged_cpu:.2f} CPU); "
            f"client u/s {r['user']:.2f}/{r['system']:.2f}, server u/s {s1[0] - s0[0]:.2f}/{s1[1] - s0[1]:.2f}",
            **r,
            "server_rss": vm_hwm(srv.pid),
            "load": load,
        },
        halves,
    ]


def two_halves(
    args: argparse.Namespace,
    base: Path,
    url: str,
    cli: list[str],
    cli_env: dict,
    srv: subprocess.Popen,
    n: int,
    cp_speed: float,
) -> dict:
    """The most a two-stream upload of the checkpoint could gain, measured with every real part:
    two ``labledger sync`` processes at once, each sending a checkpoint of half the size from a
    ledger of its own (two connections, the server's HTTP, hashing and disk write in both, both
    processes' starts), timed from the first start to the last exit, beside the same minutes' cp."""
    import labledger

    ledgers = []
    for half in range(2):
        ck = checkpoint_file(base / f"half-{n}-{half}.bin", args.checkpoint_mib // 2)
        ledger = base / f"half-ledger-{n}-{half}"
        with labledger.start_run("half", ledger=ledger) as run:
            run.log_checkpoint(ck, copy=True)
        ck.unlink()
        ledgers.append(ledger)
    subprocess.run(["sync"], check=False)
    load = load1()
    s0 = server_cpu(srv.pid, split=True)
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*cli, "sync", "--ledger", str(ledger), "--to", url, "--token", TOKEN, "--json"],
            env=cli_env,
            stdout=subprocess.DEVNULL,
        )
        for ledger in ledgers
    ]
    cpu = rss = 0.0
    for proc in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            raise RuntimeError(f"a half's sync exited with {status}")
        cpu += usage.ru_utime + usage.ru_stime
        rss = max(rss, usage.ru_maxrss * 1024)
    wall = time.perf_counter() - t0
    s1 = server_cpu(srv.pid, split=True)
    for ledger in ledgers:
        shutil.rmtree(ledger, ignore_errors=True)
    speed = args.checkpoint_mib / wall
    return {
        "what": f"two syncs at once of {args.checkpoint_mib // 2} MiB each (a 2-stream upload's bound): "
        f"{speed:.0f} MiB/s, {100 * speed / cp_speed:.0f}% of cp",
        "wall": wall,
        "cpu": cpu,
        "server_cpu": s1[0] + s1[1] - s0[0] - s0[1],
        "bytes": 2 * (args.checkpoint_mib // 2) * MIB,
        "rss": rss,
        "server_rss": vm_hwm(srv.pid),
        "load": load,
    }


#: The sender of a floor row: ``sendfile`` of bytes [a, b) of the file over one TCP connection.
FLOOR_SENDER = """
import os, socket, sys
port, path, a, b = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = socket.create_connection(("127.0.0.1", port))
fd = os.open(path, os.O_RDONLY)
while a < b:
    a += os.sendfile(s.fileno(), fd, a, b - a)
s.close()
"""

#: The floor rows: (TCP streams, hashing threads; 0 = the bytes are not hashed).
FLOOR_VARIANTS = ((1, 1), (1, 0), (2, 2))


def section_floor(args: argparse.Namespace, src: Path) -> list[dict]:
    """What a verified copy over loopback costs on this machine without anything of labledger's:
    sender processes ``sendfile`` the file ``src`` over TCP on 127.0.0.1 (one connection each, for
    a part of the file each), this process receives each connection into four 4 MiB buffers and
    sha256-hashes each 1 MiB in other threads (no HTTP, no disk write). Three variants
    (:data:`FLOOR_VARIANTS`), once each: one stream hashed in a second thread (the floor the
    checkpoint rows are compared with, :func:`ratio_rows`); one stream not hashed (the loopback
    transfer alone); two streams hashed by two threads (both cores hashing). The last row is
    sha256 alone over the file in this process (one core)."""
    import hashlib
    import mmap
    import threading
    from concurrent.futures import ThreadPoolExecutor

    size = src.stat().st_size

    def one(streams: int, hashers: int) -> dict:
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(streams)
        port = ls.getsockname()[1]
        part = -(-size // streams // MIB) * MIB
        ranges = [(i * part, min(size, (i + 1) * part)) for i in range(streams)]
        pool = ThreadPoolExecutor(max(hashers, 1))

        def work(view: memoryview) -> Any:
            return hashlib.sha256(view).digest() if hashers else None

        def receive(n: int) -> None:
            conn, _ = ls.accept()
            views = [memoryview(mmap.mmap(-1, 4 * MIB)) for _ in range(4)]
            jobs: list[list] = []
            got = turn = 0
            while got < n:
                if len(jobs) == len(views):
                    for job in jobs.pop(0):
                        job.result()
                view, fill = views[turn % len(views)], 0
                while fill < len(view) and got + fill < n:
                    k = conn.recv_into(view[fill : min(len(view), n - got)])
                    if not k:
                        break
                    fill += k
                jobs.append([pool.submit(work, view[k : min(k + MIB, fill)]) for k in range(0, fill, MIB)])
                got, turn = got + fill, turn + 1
            for batch in jobs:
                for job in batch:
                    job.result()
            conn.close()

        load = load1()
        t0, c0 = time.perf_counter(), time.process_time()
        threads = [threading.Thread(target=receive, args=(b - a,)) for a, b in ranges]
        for th in threads:
            th.start()
        senders = [
            subprocess.Popen([sys.executable, "-c", FLOOR_SENDER, str(port), str(src), str(a), str(b)])
            for a, b in ranges
        ]
        sent_cpu = 0.0
        for sender in senders:
            _, _, usage = os.wait4(sender.pid, 0)
            sent_cpu += usage.ru_utime + usage.ru_stime
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
        pool.shutdown()
        ls.close()
        how = f"sha256 per MiB in {hashers} thread(s)" if hashers else "not hashed"
        return {
            "what": f"floor: {args.checkpoint_mib} MiB over loopback TCP, {streams} stream(s), {how}, no HTTP/disk: "
            f"{args.checkpoint_mib / wall:.0f} MiB/s",
            "wall": wall,
            "cpu": time.process_time() - c0 + sent_cpu,
            "bytes": size,
            "rss": 0,  # a sender's ru_maxrss is the bench process it was forked from
            "load": load,
            "floor": (streams, hashers),
        }

    rows = [one(streams, hashers) for streams, hashers in FLOOR_VARIANTS]
    with open(src, "rb") as f:  # sha256 alone, one core (the file in the page cache)
        view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        load = load1()
        t0, c0 = time.perf_counter(), time.process_time()
        for k in range(0, size, MIB):
            hashlib.sha256(view[k : k + MIB]).digest()
        wall = time.perf_counter() - t0
        rows.append(
            {
                "what": f"sha256 alone, 1 MiB at a time, one core: {args.checkpoint_mib / wall:.0f} MiB/s",
                "wall": wall,
                "cpu": time.process_time() - c0,
                "bytes": size,
                "rss": 0,
                "load": load,
            }
        )
        view.release()
    return rows


def ratio_rows(args: argparse.Namespace, rows: list[dict], n: int) -> list[dict]:
    """The goal's figure for repeat ``n`` (#46): the speed of the checkpoint's ``labledger sync``
    (the whole process) over the one-stream hashed floor's, both measured in this repeat, and
    over the two-stream floor's. A line of text (no columns)."""
    sync = next((r for r in rows if r.get("checkpoint")), None)
    floors = {r["floor"]: r for r in rows if "floor" in r}
    one, two = floors.get((1, 1)), floors.get((2, 2))
    if sync is None or one is None:
        return []
    speed = args.checkpoint_mib / sync["wall"]
    text = (
        f"  repeat {n + 1}: sync / floor (1 stream hashed) = {speed:.0f} / {args.checkpoint_mib / one['wall']:.0f} "
        f"MiB/s = {100 * one['wall'] / sync['wall']:.0f}% (goal >= 80%)"
    )
    if two is not None:
        text += f"; / floor (2 streams hashed) = {100 * two['wall'] / sync['wall']:.0f}%"
    return [{"what": text, "ratio": one["wall"] / sync["wall"], "load": sync["load"]}]


def section_noop(args: argparse.Namespace, base: Path, sync: list[str], env: dict, srv: subprocess.Popen) -> list[dict]:
    """A no-op sync of many synced runs."""
    import labledger
    from labledger.store.ledger import Ledger

    many = base / "many"
    book = Ledger(many, create=True)
    for i in range(args.noop_runs):
        with labledger.start_run(f"r{i}", ledger=book) as run:
            run.log(1, loss=0.5)
    book.close()
    child([*sync, str(many), TOKEN], env)
    load = load1()
    r = child([*sync, str(many), TOKEN], env)
    return [{"what": f"no-op sync of {args.noop_runs:,} synced runs", **r, "server_rss": vm_hwm(srv.pid), "load": load}]


def seed_small_run(ledger: Any, name: str, files: int, size: int, rng: Any) -> str:
    """One run that logs a scalar and ``files`` files of about ``size`` bytes each with ``log_file``
    (the images a run logs: each a different random payload)."""
    import labledger

    with labledger.start_run(name, ledger=ledger) as run:
        run.log(1, loss=0.5)
        for k in range(files):
            run.log_file(
                f"images/step-{k // 16:04d}/img-{k % 16:02d}.png", rng.randbytes(size + rng.randrange(-200, 200))
            )
    return run.id


def copy_tree(src: Path, dst: Path) -> dict:
    """``cp -r`` of a folder: the faster of two (wall and CPU time; the other's wall too), and one
    with ``sync`` after it (a durable copy). Each copy goes to a folder of its own, removed by the
    caller after the sync it is compared with: files deleted just before make ext4's next inode
    allocations slower (it skips recently deleted inodes), which would cost the sync, not cp."""
    subprocess.run(["sync"], check=False)
    runs = []
    for n, then_sync in enumerate((False, False, True)):
        t0 = time.perf_counter()
        proc = subprocess.Popen(["cp", "-r", str(src), f"{dst}-{n}"])
        _, _, usage = os.wait4(proc.pid, 0)
        if then_sync:
            subprocess.run(["sync"], check=False)
        runs.append((time.perf_counter() - t0, usage.ru_utime + usage.ru_stime))
    fast, slow = sorted(runs[:2])
    return {"cp": fast[0], "cp_cpu": fast[1], "cp_other": slow[0], "cp_sync": runs[2][0]}


def section_small(
    args: argparse.Namespace, base: Path, sync: list[str], env: dict, srv: subprocess.Popen
) -> list[dict]:
    """Many small files (issue 46): one run of ``--small-files`` files (2 MB, logged with
    ``log_file``) beside ``cp -r`` of its folder on the same disk, measured in the same minute;
    then ``--small-runs`` runs of 10 small files each, then a no-op sync of those runs.
    Goals: the first <= 3x cp -r + 0.5 s, the second <= 60 s, the no-op <= 2 s."""
    import random

    from labledger.store.ledger import Ledger
    from labledger.store.manifest import run_files

    rng = random.Random(46)
    one = base / "small-one"
    # run.json, config.json, metrics.jsonl, batches.jsonl and the images: --small-files in all
    rid = seed_small_run(one, "images", args.small_files - 4, 2_000_000 // args.small_files, rng)
    folder = one / "runs" / rid
    n_files = len(run_files(folder))
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    rows = []
    load = load1()
    cp = copy_tree(folder, base / "small-cp")
    s0 = server_cpu(srv.pid)
    r = child([*sync, str(one), TOKEN], env)
    r["server_cpu"] = server_cpu(srv.pid) - s0
    for n in range(3):
        shutil.rmtree(f"{base / 'small-cp'}-{n}", ignore_errors=True)
    goal = 3 * cp["cp"] + 0.5
    rows.append(
        {
            "what": f"{n_files:,} small files in one run ({size / 1e6:.1f} MB): cp -r {cp['cp']:.2f} s "
            f"({cp['cp_cpu']:.2f} CPU; faster of 2, the other {cp['cp_other']:.2f}; cp -r + sync "
            f"{cp['cp_sync']:.2f} s); goal <= 3x cp -r + 0.5 = {goal:.2f} s",
            **r,
            "server_rss": vm_hwm(srv.pid),
            "load": load,
        }
    )
    many = base / "small-many"
    book = Ledger(many, create=True)
    for i in range(args.small_runs):
        seed_small_run(book, f"s{i}", 6, 1500, rng)  # run.json, config.json, metrics, batches + 6 files
    ids = [i.id for i in book.runs()]
    per_run = len(run_files(book.run_dir(ids[0])))
    book.close()
    load = load1()
    s0 = server_cpu(srv.pid)
    r = child([*sync, str(many), TOKEN], env)
    r["server_cpu"] = server_cpu(srv.pid) - s0
    rows.append(
        {
            "what": f"{args.small_runs:,} runs of {per_run} small files each; goal <= 60 s",
            **r,
            "server_rss": vm_hwm(srv.pid),
            "load": load,
        }
    )
    load = load1()
    r = child([*sync, str(many), TOKEN], env)
    rows.append(
        {
            "what": f"no-op sync of those {args.small_runs:,} runs; goal <= 2 s",
            **r,
            "server_rss": vm_hwm(srv.pid),
            "load": load,
        }
    )
    return rows


def section_log(args: argparse.Namespace, base: Path, url: str, srv: subprocess.Popen) -> list[dict]:
    """The cost of Run.log with sync= (a separate process): no sync, server down, server up."""
    import labledger

    rows = []
    for label, target in (
        ("no sync", None),
        ("sync= to a server that is down", f"http://127.0.0.1:{free_port()}"),
        ("sync= to the server", url),
    ):
        load = load1()
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
                "load": load,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--checkpoint-mib", type=int, default=1024)
    ap.add_argument("--noop-runs", type=int, default=1000)
    ap.add_argument("--small-files", type=int, default=1098, help="Files of the small-files run (2 MB in all).")
    ap.add_argument("--small-runs", type=int, default=1000, help="Runs of 10 small files each.")
    ap.add_argument("--log-calls", type=int, default=200_000, help="Run.log calls timed with and without sync=.")
    ap.add_argument("--tmp", default=None, help="Folder for the ledgers (default: a temporary one).")
    ap.add_argument("--quick", action="store_true", help="Smaller sizes (100k steps, 10k batches, 256 MiB, 200 runs).")
    ap.add_argument("--peer-steps", type=int, default=100_000, help="Scalar steps of the W&B offline run.")
    ap.add_argument("--mlflow", default="mlflow", help="The mlflow executable for `mlflow server`.")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument(
        "--only",
        default="run,checkpoint,noop,small,log",
        help="Sections, comma-separated: run, checkpoint (with the floor), floor, noop, small, log (default: all).",
    )
    ap.add_argument("--repeat", type=int, default=1, help="Times the checkpoint and floor sections run.")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.batches, args.checkpoint_mib = 100_000, 10_000, 256
        args.noop_runs, args.log_calls, args.peer_steps = 200, 50_000, 20_000
        args.small_runs = 200
    only = set(args.only.split(","))

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
        sync = [sys.executable, "-c", CLIENT, url]  # then the ledger, then the token
        if "run" in only:
            rows += section_run(args, base, sync, env, srv)
        cli, cli_env = [], {}
        if "checkpoint" in only:
            # the CLI with compiled bytecode, as an install has it (this machine may set
            # PYTHONDONTWRITEBYTECODE): the warm-up sync of an empty ledger fills the cache
            cli_env = {**env, "PYTHONPYCACHEPREFIX": str(base / "pycache")}
            cli_env.pop("PYTHONDONTWRITEBYTECODE", None)
            cli = [sys.executable, "-m", "labledger"]
            Ledger(base / "empty", create=True).close()
            child([*cli, "sync", "--ledger", str(base / "empty"), "--to", url, "--token", TOKEN, "--json"], cli_env)
        if "checkpoint" in only or "floor" in only:
            # each repeat: the checkpoint rows, then the floor's in the same minute, then their ratio
            src = checkpoint_file(base / "floor.bin", args.checkpoint_mib)
            ratios = []
            for n in range(args.repeat):
                got = section_checkpoint(args, base, url, cli, cli_env, srv, n) if "checkpoint" in only else []
                got += section_floor(args, src)
                ratio = ratio_rows(args, got, n)
                rows += got + ratio
                ratios += [r["ratio"] for r in ratio]
            if ratios:
                rows.append(
                    {
                        "what": "sync / floor (1 stream hashed), each repeat: "
                        + ", ".join(f"{100 * r:.0f}%" for r in ratios)
                        + f"; median {100 * statistics.median(ratios):.0f}% (goal >= 80%)"
                    }
                )
            src.unlink()
        if "noop" in only:
            rows += section_noop(args, base, sync, env, srv)
        if "small" in only:
            rows += section_small(args, base, sync, env, srv)
        if "log" in only:
            rows += section_log(args, base, url, srv)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(base, ignore_errors=True)

    if not args.no_peers:
        rows.extend(wandb_rows(args))
        rows.extend(mlflow_rows(args))
    load = os.getloadavg()
    print(f"labledger sync bench; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    print(
        f"{'what':<140} {'load':>5} {'wall s':>8} {'cpu s':>7} {'srv cpu':>7} {'sent MiB':>9} "
        f"{'client MB':>10} {'server MB':>10}"
    )
    for row in rows:
        if "wall" not in row:
            print(row["what"])
            continue
        scpu = f"{row['server_cpu']:>7.2f}" if "server_cpu" in row else f"{'':>7}"
        srss = f"{row['server_rss'] / 1e6:>10.0f}" if row.get("server_rss") else f"{'-':>10}"
        rload = f"{row['load']:>5.1f}" if "load" in row else f"{'':>5}"
        print(
            f"{row['what']:<140} {rload} {row['wall']:>8.2f} {row['cpu']:>7.2f} {scpu} {row['bytes'] / MIB:>9.1f} "
            f"{row['rss'] / 1e6:>10.0f} {srss}"
        )


if __name__ == "__main__":
    main()
