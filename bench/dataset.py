#!/usr/bin/env python
"""The runs as an open dataset (issue 46, item 3): sync N runs to a real S3-protocol server (moto on
127.0.0.1, in its own process), then query the bucket with DuckDB, and check the answers against the ledger.

Each run is logged for real (``start_run``: 200 steps of 3 scalars, a result set of 100 rows, a
stored evaluation), then ``labledger sync --to s3://...`` (``sync_to_objects``) copies the runs and
writes their Parquet files; a second sync is timed too (nothing changed: no Parquet written). The
queries, each timed (wall, and CPU of this process: DuckDB and pyarrow run here):

* ``labledger query --from s3://...``'s path (``run_query``: pyarrow's S3 client, a dataset per kind);
* DuckDB's own httpfs, ``read_parquet('s3://.../kind=runs/**/*.parquet', hive_partitioning = 1)``,
  when the ``duckdb-extension-httpfs`` package is installed (the dev extra);
* ``Ledger.run_dicts(where=...)`` on the local index, the answer both must equal.

    python bench/dataset.py                 # 1,000 runs
    python bench/dataset.py --runs 200
    python bench/dataset.py --runs 200 --rtt-ms 20     # a store 20 ms away (a relay delays each way)
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import importlib.resources
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

WHERE = "config.lr < 1e-3 and config.opt = 'adam'"
SQL_RUNS = (
    "SELECT run FROM {src} WHERE num_fields['config.lr'] < 1e-3 AND text_fields['config.opt'] = 'adam' ORDER BY run"
)


def clock(fn):
    """(result, wall seconds, CPU seconds of this process) of ``fn()``."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def make_runs(root: Path, n: int) -> None:
    import labledger

    for i in range(n):
        cfg = {"lr": (1e-4, 3e-4, 1e-3, 3e-3)[i % 4], "opt": ("adam", "sgd")[(i // 4) % 2], "seed": i}
        with labledger.start_run(f"run-{i:04d}", config=cfg, ledger=root) as run:
            for step in range(1, 201):
                run.log(step, loss=1.0 / (step + i), acc=step / 200, lr=cfg["lr"])
            rows = [
                {
                    "id": k,
                    "task": "cls",
                    "gold": "ab"[k % 2],
                    "probs": {"a": 0.7 if (k + i) % 3 else 0.2, "b": 0.3 if (k + i) % 3 else 0.8},
                }
                for k in range(100)
            ]
            run.log_results("test", rows)
    book = labledger.open_ledger(root)
    for r in book.runs():
        ev = labledger.evaluate(book.run(r.id).results_path("test"), metrics=["accuracy"])
        book.save_evaluation(r.id, "test", ev.to_dict())
    book.close()


#: A TCP relay that holds each piece of data for half the round trip in each direction: an object
#: store at a network's distance (``--rtt-ms``), where moto on loopback answers in microseconds.
RELAY = """
import asyncio, sys
listen, target, half = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 2000

async def pipe(reader, writer):
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(1 << 16):
            due = loop.time() + half
            await asyncio.sleep(max(0.0, due - loop.time()))
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()

async def client(reader, writer):
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

async def main():
    server = await asyncio.start_server(client, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int) -> None:
    for _ in range(300):  # bounded: 30 s
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port} after 30 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--dir", default=None, help="where the ledger goes (default: a temporary folder, removed)")
    ap.add_argument("--rtt-ms", type=float, default=0.0, help="a network round trip to the store (a relay adds it)")
    args = ap.parse_args()
    import labledger
    from labledger.store.dataset_query import run_query
    from labledger.store.objects import sync_to_objects

    # moto in its own process, as an object store is: this process's CPU is labledger's alone
    port = moto_port = free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    children = [subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], **quiet)]
    wait_port(port)
    if args.rtt_ms:
        port = free_port()
        children.append(
            subprocess.Popen([sys.executable, "-c", RELAY, str(port), str(moto_port), str(args.rtt_ms)], **quiet)
        )
        wait_port(port)
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-dataset-"))
    try:
        import boto3

        boto3.client("s3").create_bucket(Bucket="runs")
        root = work / "ledger"
        _, t_make, _ = clock(lambda: make_runs(root, args.runs))
        url = "s3://runs/team"
        first, t1, c1 = clock(lambda: sync_to_objects(root, url))
        second, t2, c2 = clock(lambda: sync_to_objects(root, url))
        book = labledger.open_ledger(root)
        want = sorted(d["id"] for d in book.run_dicts(where=WHERE))
        _, t_idx, c_idx = clock(lambda: book.run_dicts(where=WHERE))
        book.close()
        ans, t_q, c_q = clock(lambda: run_query(SQL_RUNS.format(src="runs"), url))
        got = [r[0] for r in ans.rows]
        acc, t_acc, c_acc = clock(
            lambda: run_query(
                "SELECT avg(CASE WHEN probs['a'] >= probs['b'] THEN (gold = 'a')::INT ELSE (gold = 'b')::INT END) "
                "FROM results",
                url,
            )
        )
        print(
            f"{args.runs:,} runs logged in {t_make:.1f} s; store round trip +{args.rtt_ms:g} ms; load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores\n"
            f"sync to moto: {t1:.1f} s wall, {c1:.1f} s CPU ({first.datasets_written:,} runs' Parquet, "
            f"{first.dataset_bytes / 2**20:.1f} MiB; {first.chunks_sent:,} chunks)\n"
            f"sync again (nothing changed): {t2:.2f} s wall, {c2:.2f} s CPU ({second.datasets_written} Parquet written)\n"
            f"runs --where on the index: {t_idx:.3f} s wall, {c_idx:.3f} s CPU ({len(want)} runs)\n"
            f"labledger query --from s3:// (runs where ...): {t_q:.2f} s wall, {c_q:.2f} s CPU ({len(got)} runs; same as the index: {got == want})\n"
            f"labledger query --from s3:// (accuracy over {args.runs * 100:,} result rows): {t_acc:.2f} s wall, {c_acc:.2f} s CPU = {acc.rows[0][0]:.4f}"
        )
        try:
            import duckdb
            import duckdb_extension_httpfs
        except ImportError:
            print("DuckDB httpfs: not measured (pip install duckdb-extension-httpfs, in the dev extra)")
            return
        ext = (
            importlib.resources.files(duckdb_extension_httpfs)
            / "extensions"
            / f"v{duckdb.__version__}"
            / "httpfs.duckdb_extension"
        )
        con = duckdb.connect()
        con.execute(f"LOAD '{ext}'")
        con.execute(
            f"CREATE SECRET (TYPE s3, KEY_ID 'bench', SECRET 'bench', REGION 'us-east-1', "
            f"ENDPOINT '127.0.0.1:{port}', URL_STYLE 'path', USE_SSL false)"
        )
        src = "read_parquet('s3://runs/team/dataset/kind=runs/**/*.parquet', hive_partitioning = 1)"
        rows, t_h, c_h = clock(lambda: con.execute(SQL_RUNS.format(src=src)).fetchall())
        con.close()
        print(
            f"DuckDB httpfs read_parquet over the bucket: {t_h:.2f} s wall, {c_h:.2f} s CPU (same runs: {[r[0] for r in rows] == want})"
        )
    finally:
        for child in children:
            child.terminate()
            child.wait(timeout=30)
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
