#!/usr/bin/env python
"""The index at scale (issue 46, item 4): ``labledger runs --where`` on 10,000 and 100,000 runs.

The ledger holds index rows (runs with their query fields, tags, one stored evaluation with
its metric value per run), written in one transaction as an import writes them, and an empty
folder per run: the query reads the index and never a run's files (only whether its folder is
there), so the files are left out (bench/runs.py builds them, with
1,000 steps each, and times the same query at 10,000 runs against MLflow). The data are those of
bench/runs.py: 12 config keys (lr in {1e-4, 3e-4, 1e-3, 3e-3}, opt in {adam, sgd}, ...), the
last/min/max of 5 scalars, eval.test.accuracy.

Each query is one process, cold (a fresh interpreter, imports included), 3 reps after a warm-up;
wall and CPU (user + sys of the child) are reported, and the ratio of 100,000 to 10,000 runs.

With ``--postgres`` the index is a PostgreSQL database (team mode): a throwaway server started as
the tests start it (tests/postgres_server.py: initdb and pg_ctl from Debian's packages, in a
temporary folder, on 127.0.0.1), one database per size, built afresh (then ``VACUUM ANALYZE``, what
autovacuum does within a minute of such a load) and stopped at the end; the run folders are under
``--dir``. The CPU column is the client's alone (the server's is not in it).

    python bench/index_scale.py                       # 10,000 and 100,000 runs (builds once)
    python bench/index_scale.py --runs 1000,10000     # other sizes
    python bench/index_scale.py --postgres            # the same on PostgreSQL
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson

WHERE = "config.lr < 1e-3 and config.opt = 'adam'"
SORT = "-eval.test.accuracy"
SCALARS = ("loss", "val_loss", "accuracy", "lr", "grad_norm")


def build(root: Path, n: int, url: str | None = None) -> float:
    """An index of ``n`` finished runs (in the PostgreSQL database ``url``, with the run folders
    under ``root``, when given); returns seconds."""
    import labledger
    from labledger.store.fields import ScalarStats, dumps_fields, run_fields

    t0 = time.perf_counter()
    ledger = labledger.open_ledger(url or root, create=True, artifacts=root if url else None)
    runs, tags, evals = [], [], []
    base = 1_790_000_000.0
    for i in range(n):
        cfg = {
            "lr": (1e-4, 3e-4, 1e-3, 3e-3)[i % 4],
            "opt": ("adam", "sgd")[(i // 4) % 2],
            "batch_size": (16, 32, 64)[i % 3],
            "hidden": (64, 128, 256, 512)[(i // 3) % 4],
            "layers": 1 + i % 5,
            "dropout": (0.0, 0.1, 0.2)[i % 3],
            "weight_decay": (0.0, 1e-4, 1e-2)[(i // 2) % 3],
            "warmup": (0, 100, 500)[i % 3],
            "seed": i,
            "epochs": 10 + i % 7,
            "scheduler": ("cosine", "linear", "constant")[i % 3],
            "model": f"mlp-{i % 11}",
        }
        rid = f"20261201-{i // 1000:06d}-{i:012x}"
        started = base + i * 60
        stats = ScalarStats()
        stats.low = dict.fromkeys(SCALARS, 0.1 + i % 97 / 1000)
        stats.high = dict.fromkeys(SCALARS, 2.0 + i % 89 / 1000)
        last = dict.fromkeys(SCALARS, 0.2 + i % 83 / 1000)
        summary = {
            "steps": 1000,
            "scalar_records": 1000,
            "batches": 0,
            "history": 0,
            "checkpoints": 0,
            "last": last,
            "headline": {},
        }
        acc = float(0.8 + 0.15 * ((i * 7919) % 1000) / 1000)
        runs.append(
            (
                rid,
                f"run-{i:06d}",
                f"sweep-{i % 10}",
                "finished",
                started,
                started + 50,
                "bench",
                orjson.dumps(summary).decode(),
                started + 50,
                dumps_fields(run_fields(cfg, summary, stats)),
                dumps_fields({"eval.test.test.accuracy": acc, "eval.test.accuracy": acc}),
            )
        )
        tags += [(rid, "sweep"), (rid, f"opt-{cfg['opt']}")]
        evals.append((rid, acc))
    with ledger.transaction() as db:
        db.executemany(
            "INSERT INTO runs (id, name, grp, status, started, ended, host, summary, updated, fields, eval_fields) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            runs,
        )
        db.executemany("INSERT INTO run_tags (run_id, tag) VALUES (?, ?)", tags)
        db.executemany(
            "INSERT INTO evaluations (run_id, name, kind, created, n_rows) VALUES (?, 'test', 'evaluation', 0, 1000)",
            [(rid,) for rid, _ in evals],
        )
        eval_ids = dict(db.execute("SELECT run_id, id FROM evaluations").fetchall())
        db.executemany(
            "INSERT INTO metric_values (eval_id, task, slice, metric, params, value, ci_low, ci_high, n) "
            "VALUES (?, 'test', '', 'accuracy', '{}', ?, ?, ?, 1000)",
            [(eval_ids[rid], acc, acc - 0.02, acc + 0.02) for rid, acc in evals],
        )
    ledger.close()
    if url:  # what autovacuum does within a minute of the load: statistics, and the visibility map
        import psycopg  # that lets an index-only scan skip the table

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    runs_dir = root / "runs"  # each run's folder, empty: `runs` marks a run whose folder is gone
    for rid, *_ in runs:
        (runs_dir / rid).mkdir(exist_ok=True)
    return time.perf_counter() - t0


def start_postgres() -> Any:
    """A throwaway PostgreSQL server, started as the tests start theirs (tests/postgres_server.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "tests"))
    from postgres_server import INSTALL_HINT, Cluster, find_bin

    bin_dir = find_bin()
    if bin_dir is None:
        raise SystemExit(INSTALL_HINT)
    return Cluster(bin_dir)


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    """Wall and CPU seconds (user + sys) of one child process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/labledger-bench-index")
    ap.add_argument("--runs", default="10000,100000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--postgres", action="store_true", help="the index in a throwaway PostgreSQL server")
    args = ap.parse_args()
    sizes = [int(s) for s in args.runs.split(",")]
    env = {**os.environ}
    exe = shutil.which("labledger") or "labledger"
    rows = []
    cluster = start_postgres() if args.postgres else None
    load0 = os.getloadavg()[0]
    try:
        for n in sizes:
            if cluster is not None:
                root = Path(args.dir) / f"postgres-{n}"
                shutil.rmtree(root, ignore_errors=True)
                ledger = cluster.new_database()
                print(f"building {n:,} runs in PostgreSQL (run folders under {root}) ...", flush=True)
                build(root, n, ledger)
                env["LABLEDGER_ARTIFACTS"] = str(root)
            else:
                root = Path(args.dir) / str(n)
                ledger = str(root / "ledger")
                if not (root / "built.json").exists():
                    shutil.rmtree(root, ignore_errors=True)
                    print(f"building {n:,} runs under {root} ...", flush=True)
                    secs = build(root / "ledger", n)
                    (root / "built.json").write_text(json.dumps({"seconds": secs}))
            cmd = [exe, "runs", "--ledger", ledger, "--where", WHERE, "--sort", SORT, "--json"]
            timed(cmd, env)  # warm the page cache
            reps = [timed(cmd, env) for _ in range(args.reps)]
            found = len(orjson.loads(reps[-1][2])["runs"])
            rows.append(
                (
                    n,
                    found,
                    statistics.median(r[0] for r in reps),
                    statistics.median(r[1] for r in reps),
                    min(r[0] for r in reps),
                )
            )
    finally:
        if cluster is not None:
            cluster.close()
    load1 = os.getloadavg()[0]
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f'labledger runs --where "{WHERE}" --sort {SORT} --json on {backend} (one process, imports included); load {load0:.1f} -> {load1:.1f}, {os.cpu_count()} cores'
    )
    print(f"{'runs':>8}  {'match':>6}  {'wall median s':>13}  {'CPU median s':>12}  {'wall best s':>11}")
    for n, found, wall, cpu, best in rows:
        print(f"{n:>8,}  {found:>6,}  {wall:>13.3f}  {cpu:>12.3f}  {best:>11.3f}")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(
            f"{b[0]:,} / {a[0]:,} runs: wall {b[2] / a[2]:.1f}x, CPU {b[3] / a[3]:.1f}x (for {b[0] / a[0]:.0f}x the runs)"
        )
    big = rows[-1]
    print(f"{'PASS' if big[2] <= 1.0 else 'FAIL'}: {big[0]:,} runs in {big[2]:.3f} s wall (goal <= 1 s)")


if __name__ == "__main__":
    main()
