#!/usr/bin/env python
"""Many runs at once (issue 12): a query over 10,000 runs, labledger against MLflow.

The data: 10,000 runs, 12 config keys (``lr`` in {1e-4, 3e-4, 1e-3, 3e-3}, ``opt`` in {adam, sgd},
batch_size, hidden, layers, dropout, weight_decay, warmup, seed, epochs, scheduler, model), 5
scalars x 1,000 steps each (loss, val_loss, accuracy, lr, grad_norm), and one stored evaluation
per run (``test``: accuracy, with a CI). Built once under ``--dir`` (default /tmp/labledger-bench-runs)
and reused; ``--rebuild`` starts again.

* labledger: each run is a real run folder (run.json, config.json, metrics.jsonl with the 1,000
  steps, evals/test/evaluation.json); the index rows (runs with their query fields, tags,
  evaluations, metric values) go in with ``executemany`` in one transaction, the batch path that
  an import takes, instead of 10,000 ``start_run`` calls.
* MLflow (its default SQLite store): one run is logged with the client (``create_run``,
  ``log_batch`` of params, metrics and tags, ``set_terminated``) as the template; the other 9,999
  get the same rows in the same tables (runs, params, tags, latest_metrics, metrics) with
  ``executemany``. Only the last point of each metric goes into MLflow's ``metrics`` history table
  (50M history rows would take ~12 GB, see reviews/perf.md section 1); ``search_runs`` reads
  ``latest_metrics``, never the history.

The query, one process each, cold (a fresh interpreter, imports included), interleaved, 3 reps
(``--compare-src /work/main/src`` adds the same ``labledger`` command run with another checkout's
code, on the ledger under ``--compare-dir``, interleaved with the others, and checks both print
the same runs):

* ``labledger runs --where "config.lr < 1e-3 and config.opt = 'adam'" --sort -eval.test.accuracy --json``
* ``mlflow.search_runs(filter_string="params.opt = 'adam'", order_by=["metrics.`test.accuracy` DESC"])``
  then ``df[df["params.lr"].astype(float) < 1e-3]``: MLflow 3.17 keeps params as strings and its
  filter has no ``<``, ``IN`` or ``OR`` on params, so lr < 1e-3 is done in pandas, as its users do

Wall time, CPU time (user + sys of the child) and peak RSS of each process; the ratio is of
medians. Both must return the same runs with the same best run.

    python bench/runs.py                 # build once (several minutes), then the query
    python bench/runs.py --runs 1000     # smaller
    python bench/runs.py --markdown      # also print the table as Markdown (for RESULTS.md)
"""

from __future__ import annotations

import os
import sys

# bench/ holds a logging.py: keep it from shadowing the standard library's `logging`.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import json
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import orjson

WHERE = "config.lr < 1e-3 and config.opt = 'adam'"
SORT = "-eval.test.accuracy"
MLFLOW_FILTER = "params.opt = 'adam'"
MLFLOW_ORDER = ["metrics.`test.accuracy` DESC"]
SCALARS = ("loss", "val_loss", "accuracy", "lr", "grad_norm")
STEPS = 1000


def configs(n: int) -> list[dict]:
    rng = random.Random(12)
    out = []
    for i in range(n):
        out.append(
            {
                "lr": [1e-4, 3e-4, 1e-3, 3e-3][i % 4],
                "opt": ["adam", "sgd"][(i // 4) % 2],
                "batch_size": rng.choice([32, 64, 128]),
                "hidden": rng.choice([128, 256, 512]),
                "layers": rng.choice([2, 4, 6]),
                "dropout": rng.choice([0.0, 0.1, 0.3]),
                "weight_decay": rng.choice([0.0, 1e-4]),
                "warmup": rng.choice([0, 100, 500]),
                "seed": i % 5,
                "epochs": rng.choice([5, 10]),
                "scheduler": rng.choice(["cosine", "linear"]),
                "model": rng.choice(["mlp", "cnn"]),
            }
        )
    return out


def series(i: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(i)
    t = np.arange(1, STEPS + 1)
    loss = 2.0 / np.sqrt(t) + rng.normal(0, 0.01, STEPS)
    return {
        "loss": loss,
        "val_loss": loss + 0.05,
        "accuracy": 1 - loss / 3,
        "lr": np.full(STEPS, 1e-3),
        "grad_norm": np.abs(rng.normal(1, 0.2, STEPS)),
    }


def build_labledger(root: Path, n: int) -> float:
    """The ledger of ``n`` runs; returns seconds."""
    import labledger
    from labledger.store.fields import ScalarStats, dumps_fields, run_fields

    t0 = time.perf_counter()
    ledger = labledger.open_ledger(root, create=True)
    cfgs = configs(n)
    base = 1_790_000_000.0
    runs, tags, evals, values = [], [], [], []
    for i, cfg in enumerate(cfgs):
        rid = f"20261201-{i:06d}-{i * 2654435761 % 16**6:06x}"
        started = base + i * 60
        run_dir = ledger.run_dir(rid)
        (run_dir / "evals" / "test").mkdir(parents=True)
        meta = {
            "id": rid,
            "name": f"run-{i:05d}",
            "group": f"sweep-{i % 10}",
            "tags": ["sweep", f"opt-{cfg['opt']}"],
            "status": "finished",
            "started": started,
            "ended": started + 50,
            "host": "bench",
            "error": None,
        }
        (run_dir / "run.json").write_bytes(orjson.dumps(meta))
        (run_dir / "config.json").write_bytes(orjson.dumps(cfg))
        s = series(i)
        cols = np.column_stack([s[k] for k in SCALARS])
        lines = [
            orjson.dumps({"step": step + 1, "time": started + step * 0.05, **dict(zip(SCALARS, row.tolist()))})
            for step, row in enumerate(cols)
        ]
        (run_dir / "metrics.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        acc = float(0.8 + 0.15 * ((i * 7919) % 1000) / 1000)
        doc = {
            "kind": "evaluation",
            "n": 1000,
            "tasks": {
                "test": {
                    "metrics": [
                        {
                            "metric": "accuracy",
                            "params": {},
                            "value": acc,
                            "ci_low": acc - 0.02,
                            "ci_high": acc + 0.02,
                            "n": 1000,
                        }
                    ]
                }
            },
        }
        (run_dir / "evals" / "test" / "evaluation.json").write_bytes(orjson.dumps(doc))
        stats = ScalarStats()
        stats.low = {k: float(s[k].min()) for k in SCALARS}
        stats.high = {k: float(s[k].max()) for k in SCALARS}
        last = {k: float(s[k][-1]) for k in SCALARS}
        summary = {
            "steps": STEPS,
            "scalar_records": STEPS,
            "batches": 0,
            "history": 0,
            "checkpoints": 0,
            "last": last,
            "headline": {},
        }
        fields = dumps_fields(run_fields(cfg, summary, stats))
        eval_fields = dumps_fields({"eval.test.test.accuracy": acc, "eval.test.accuracy": acc})
        runs.append(
            (
                rid,
                meta["name"],
                meta["group"],
                "finished",
                started,
                started + 50,
                "bench",
                None,
                None,
                None,
                None,
                orjson.dumps(summary).decode(),
                started + 50,
                fields,
                eval_fields,
            )
        )
        tags += [(rid, t) for t in meta["tags"]]
        evals.append((rid, "test", "evaluation", started + 50, 1000))
        values.append(("test", "", "accuracy", "{}", acc, acc - 0.02, acc + 0.02, 1000, None))
    with ledger.transaction() as db:
        db.executemany(
            "INSERT INTO runs (id, name, grp, status, started, ended, host, pid, git_commit, git_dirty, error, "
            "summary, updated, fields, eval_fields) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            runs,
        )
        db.executemany("INSERT INTO run_tags (run_id, tag) VALUES (?, ?)", tags)
        for ev, val in zip(evals, values):
            eid = db.execute(
                "INSERT INTO evaluations (run_id, name, kind, created, n_rows) VALUES (?, ?, ?, ?, ?)", ev
            ).lastrowid
            db.execute(
                "INSERT INTO metric_values (eval_id, task, slice, metric, params, value, ci_low, ci_high, n, "
                "definition) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (eid, *val),
            )
    ledger.close()
    return time.perf_counter() - t0


def build_mlflow(root: Path, n: int) -> tuple[float, str]:
    """MLflow's SQLite store with the same runs; returns (seconds, experiment id)."""
    import mlflow
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    t0 = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    exp = client.create_experiment("bench", artifact_location=str(root / "artifacts"))
    cfgs = configs(n)
    accs = [float(0.8 + 0.15 * ((i * 7919) % 1000) / 1000) for i in range(n)]
    now = int(time.time() * 1000)

    def metrics_of(i: int) -> list[tuple[str, float]]:
        s = series(i)
        return [(k, float(s[k][-1])) for k in SCALARS] + [("test.accuracy", accs[i])]

    template = client.create_run(exp, run_name="run-00000", tags={"sweep": "1", "group": "sweep-0"})
    client.log_batch(
        template.info.run_id,
        metrics=[Metric(k, v, now, STEPS) for k, v in metrics_of(0)],
        params=[Param(k, str(v)) for k, v in cfgs[0].items()],
        tags=[RunTag("opt", cfgs[0]["opt"])],
    )
    client.set_terminated(template.info.run_id)
    db = sqlite3.connect(root / "mlflow.db")
    run_cols = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    row = dict(zip(run_cols, db.execute("SELECT * FROM runs WHERE run_uuid = ?", (template.info.run_id,)).fetchone()))
    tag_rows = db.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (template.info.run_id,)).fetchall()
    runs, params, tags, latest, hist = [], [], [], [], []
    for i in range(1, n):
        rid = uuid.uuid4().hex
        r = dict(row, run_uuid=rid, name=f"run-{i:05d}", start_time=now + i, end_time=now + i + 50)
        runs.append(tuple(r[c] for c in run_cols))
        params += [(k, str(v), rid) for k, v in cfgs[i].items()]
        for k, v in tag_rows:
            value = {"mlflow.runName": f"run-{i:05d}", "group": f"sweep-{i % 10}", "opt": cfgs[i]["opt"]}.get(k, v)
            tags.append((k, value, rid))
        for k, v in metrics_of(i):
            latest.append((k, v, now, STEPS, 0, rid))
            hist.append((k, v, now, STEPS, 0, rid))
    with db:
        db.executemany(f"INSERT INTO runs ({', '.join(run_cols)}) VALUES ({', '.join('?' * len(run_cols))})", runs)
        db.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)", params)
        db.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", tags)
        db.executemany(
            "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) VALUES (?, ?, ?, ?, ?, ?)",
            latest,
        )
        db.executemany(
            "INSERT INTO metrics (key, value, timestamp, step, is_nan, run_uuid) VALUES (?, ?, ?, ?, ?, ?)", hist
        )
    db.close()
    return time.perf_counter() - t0, exp


MLFLOW_QUERY = """
import sys, json, time, mlflow
t0 = time.perf_counter()
mlflow.set_tracking_uri(sys.argv[1])
df = mlflow.search_runs(experiment_ids=[sys.argv[2]], filter_string=sys.argv[3], order_by=json.loads(sys.argv[4]),
                        max_results=100000)
df = df[df["params.lr"].astype(float) < 1e-3]  # params are strings: no '<' (nor IN, nor OR) in search
names = list(df["tags.mlflow.runName"])
print(json.dumps({"op_s": time.perf_counter() - t0, "n": len(names), "first": names[0] if names else None}))
"""


LABLEDGER_QUERY = """
import sys, json, time
import orjson
import labledger
t0 = time.perf_counter()
book = labledger.open_ledger(sys.argv[1])
runs = book.run_dicts(where=sys.argv[2], sort=sys.argv[3])  # what `labledger runs --json` prints
out = orjson.dumps({"runs": runs}, option=orjson.OPT_INDENT_2)
print(json.dumps({"op_s": time.perf_counter() - t0, "n": len(runs), "first": runs[0]["name"] if runs else None}))
"""


def run_child(cmd: list[str], env: dict[str, str]) -> dict:
    """Wall, CPU (user + sys) and peak RSS of one process, measured by GNU time (its own child,
    so that the RSS is the command's, not a fork of this script), and the command's stdout."""
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".time") as stats:
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["/usr/bin/time", "-f", "%U %S %M", "-o", stats.name, *cmd], env=env, capture_output=True, check=False
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:4])} ... exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
        user, system, rss_kib = stats.read().split()[-3:]
    return {"wall": wall, "cpu": float(user) + float(system), "rss_mib": int(rss_kib) / 1024, "out": proc.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/labledger-bench-runs")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--compare-src",
        metavar="SRC",
        help="also time `labledger runs` with PYTHONPATH=SRC (another checkout's src/, e.g. main's), interleaved",
    )
    ap.add_argument(
        "--compare-dir",
        metavar="DIR",
        help="the --dir whose ledger --compare-src queries (default: --dir; a ledger its code made and migrated)",
    )
    args = ap.parse_args()
    base = Path(args.dir) / str(args.runs)
    if args.rebuild and base.exists():
        shutil.rmtree(base)
    ledger_dir, mlflow_dir = base / "labledger", base / "mlflow"
    built = base / "built.json"
    if not built.exists():
        shutil.rmtree(base, ignore_errors=True)
        print(f"building {args.runs:,} runs under {base} ...", flush=True)
        t_l = build_labledger(ledger_dir, args.runs)
        t_m, exp = build_mlflow(mlflow_dir, args.runs)
        built.write_text(json.dumps({"labledger_s": t_l, "mlflow_s": t_m, "experiment": exp}))
    info = json.loads(built.read_text())
    # Compiled bytecode as an install has it, for both tools (this machine sets
    # PYTHONDONTWRITEBYTECODE; a user's site-packages has .pyc files): the warm-up runs fill it.
    pycache = Path(tempfile.mkdtemp(prefix="bench-runs-pycache-"))
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(pycache / "this")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    labledger_cmd = [
        shutil.which("labledger") or "labledger",
        "runs",
        "--ledger",
        str(ledger_dir),
        "--where",
        WHERE,
        "--sort",
        SORT,
        "--json",
    ]
    uri = f"sqlite:///{mlflow_dir / 'mlflow.db'}"
    mlflow_cmd = [sys.executable, "-c", MLFLOW_QUERY, uri, info["experiment"], MLFLOW_FILTER, json.dumps(MLFLOW_ORDER)]
    op_cmd = [sys.executable, "-c", LABLEDGER_QUERY, str(ledger_dir), WHERE, SORT]
    results: dict[str, list[dict]] = {"labledger": [], "mlflow": [], "op": [], "compare": []}
    compare_cmd, compare_env = None, None
    if args.compare_src:
        other = Path(args.compare_dir or args.dir) / str(args.runs) / "labledger"
        compare_cmd = [*labledger_cmd[:3], str(other), *labledger_cmd[4:]]
        compare_env = {**env, "PYTHONPATH": args.compare_src, "PYTHONPYCACHEPREFIX": str(pycache / "compare")}
    load0 = os.getloadavg()[0]
    run_child(labledger_cmd, env)  # warm the page cache for both, once
    run_child(mlflow_cmd, env)
    if compare_cmd is not None:
        run_child(compare_cmd, compare_env)
    for _ in range(args.reps):
        results["labledger"].append(run_child(labledger_cmd, env))
        if compare_cmd is not None:
            results["compare"].append(run_child(compare_cmd, compare_env))
        results["mlflow"].append(run_child(mlflow_cmd, env))
        results["op"].append(run_child(op_cmd, env))
    load1 = os.getloadavg()[0]
    ours = orjson.loads(results["labledger"][-1]["out"])["runs"]
    theirs = json.loads(results["mlflow"][-1]["out"])
    same = len(ours) == theirs["n"] and (ours[0]["name"] if ours else None) == theirs["first"]
    if compare_cmd is not None:

        def strip(docs: list[dict]) -> list[dict]:
            return [{k: v for k, v in d.items() if k != "dir"} for d in docs]  # the ledgers' folders differ

        same = same and strip(orjson.loads(results["compare"][-1]["out"])["runs"]) == strip(ours)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    rows = []
    cases = [
        ("labledger", f'labledger runs --where "{WHERE}" --sort {SORT} --json'),
        (
            "mlflow",
            f'mlflow.search_runs(filter_string="{MLFLOW_FILTER}", order_by={MLFLOW_ORDER}) + lr filter in pandas',
        ),
    ]
    if compare_cmd is not None:
        cases.append(("compare", f"the same labledger command, PYTHONPATH={args.compare_src}"))
    for name, what in cases:
        rows.append(
            (
                what,
                min(r["wall"] for r in results[name]),
                med(name, "wall"),
                med(name, "cpu"),
                med(name, "rss_mib"),
            )
        )
    print(
        f"\n{args.runs:,} runs ({len(ours)} match; same runs and best run in all: {same}); "
        f"built in {info['labledger_s']:.0f} s (labledger) / {info['mlflow_s']:.0f} s (MLflow, bulk rows); "
        f"load {load0:.1f} -> {load1:.1f}; {platform.python_version()}, {os.cpu_count()} cores; "
        f"MLflow operation alone {theirs['op_s']:.2f} s"
    )
    ops_l = sorted(json.loads(r["out"])["op_s"] for r in results["op"])
    ops_m = sorted(json.loads(r["out"])["op_s"] for r in results["mlflow"])
    print(
        f"the operation alone, in the process after imports (median): labledger Ledger.run_dicts(where=, sort=) + "
        f"JSON {statistics.median(ops_l):.3f} s, MLflow search_runs + pandas filter {statistics.median(ops_m):.3f} s "
        f"({statistics.median(ops_m) / statistics.median(ops_l):.0f}x)"
    )
    header = ("query (one process, imports included)", "wall best s", "wall median s", "CPU median s", "peak RSS MiB")
    widths = [max(len(header[0]), *(len(r[0]) for r in rows)), 12, 14, 13, 13]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for r in rows:
        print(
            r[0].ljust(widths[0]),
            *(f"{v:{w}.3f}" if i < 3 else f"{v:{w}.0f}" for i, (v, w) in enumerate(zip(r[1:], widths[1:]))),
        )
    ratio_wall = rows[1][2] / rows[0][2]
    ratio_cpu = rows[1][3] / rows[0][3]
    ratio_rss = rows[1][4] / rows[0][4]
    print(f"MLflow / labledger: wall {ratio_wall:.1f}x, CPU {ratio_cpu:.1f}x, peak RSS {ratio_rss:.1f}x")
    if compare_cmd is not None:
        print(
            f"{args.compare_src} / this labledger: wall {rows[2][2] / rows[0][2]:.2f}x, "
            f"CPU {rows[2][3] / rows[0][3]:.2f}x (medians)"
        )
    goal = "PASS" if rows[0][2] <= 0.3 and ratio_wall >= 10 else "FAIL"
    print(f"{goal}: labledger {rows[0][2]:.3f} s (goal <= 0.3 s), {ratio_wall:.1f}x faster than MLflow (goal >= 10x)")
    if args.markdown:
        print("\n| " + " | ".join(header) + " |\n|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| `{r[0]}` | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.0f} |")


if __name__ == "__main__":
    main()
