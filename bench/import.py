#!/usr/bin/env python
"""Import speed and memory (issue 8): ``labledger import`` of a TensorBoard log and of an MLflow store
of 1,000,000 scalar points each, side by side with reading the same data with the tools' own readers.

* TensorBoard: a log of 4 tags x 250,000 steps written by ``torch.utils.tensorboard.SummaryWriter``
  (one event per point, as ``add_scalar`` writes them). Read by labledger's importer (the file read
  as columns: framing and CRCs in numpy, ``add_scalar`` events decoded in numpy, one scalar record
  per event, staged and adopted into a fresh ledger) and by TensorBoard's ``EventAccumulator`` (``size_guidance={"scalars": 0}``, i.e.
  keep every point; ``Reload()`` then ``Scalars(tag)`` for every tag).
* MLflow: an SQLite store (``mlflow.db``) with one run of 4 metrics x 250,000 steps. The run, its
  params and each metric's first point are logged with MLflow's client; the other points are
  inserted into MLflow's own ``metrics`` table with ``sqlite3.executemany`` (``log_batch`` takes
  ~100 us per point here, ~2 minutes for 1M) and ``latest_metrics`` is set to the last points, so
  MLflow's client reads the store as if it had logged them. Read by labledger's importer (MLflow's
  client for experiments and runs, one ``SELECT`` per metric for the points, on a snapshot of the
  database) and by ``mlflow.search_runs`` + ``MlflowClient.get_metric_history``
  for every metric.

* W&B offline run, Trackio project, Aim repository (issue 14), 4 metrics x 250,000 steps each:
  W&B: ``wandb.init(mode="offline")`` + ``wandb.log`` of the 4 metrics per step; wandb ships no reader
  for its ``.wandb`` file (``wandb sync`` only uploads), so the other row is labledger's own decoder
  alone (``labledger.wandb.records.read_wandb_file``, W&B's protobuf classes), without the writes.
  Trackio: ``SQLiteStorage.bulk_log`` (what trackio's sender thread calls) in batches of 10,000
  rows; read by ``SQLiteStorage.get_logs`` (what its dashboard and API call). Aim: ``Run.track`` of
  the 4 metrics per step (~1 ms a point here, so this source takes minutes to write), then the run
  indexed with Aim's ``RepoIndexManager`` as ``aim up`` would, so that Aim's own reader
  (``Repo.iter_runs()``, ``run.metrics()``, ``metric.data.numpy()``) sees it.

Each reader runs in its own fresh subprocess; the times are the wall and CPU time of the read/import only
(imports of the libraries are done before the clock starts; MLflow's client creation is inside it,
for both). Memory: the process's peak RSS (``VmHWM``) and its rise over the RSS measured just
before the clock started. Every reader's point count is checked against the points written.

    python bench/import.py                  # 1M points each (~3-4 minutes on 2 cores)
    python bench/import.py --points 200000  # smaller
    python bench/import.py --markdown       # also print the table as Markdown (for RESULTS.md)
    python bench/import.py --only wandb,trackio,aim   # some sources only
    python bench/import.py --sources /tmp/srcs --reps 2   # keep the sources for the next run; best of 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

TAGS = ("loss", "learning_rate", "grad_norm", "accuracy")
T0_MS = 1_700_000_000_000


def value(tag_index: int, step: int) -> float:
    return (tag_index + 1) / (step + 1) + 1e-7 * step


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mib() -> float:
    """Peak RSS of this process image (``VmHWM``; ``ru_maxrss`` would keep the parent's peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def dir_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 2**20


# -- writing the sources -----------------------------------------------------------------------------


def write_tensorboard(logdir: Path, steps: int) -> float:
    from torch.utils.tensorboard import SummaryWriter

    t0 = time.perf_counter()
    w = SummaryWriter(str(logdir), max_queue=10_000, flush_secs=3600)
    for s in range(steps):
        for i, tag in enumerate(TAGS):
            w.add_scalar(f"train/{tag}", value(i, s), s, walltime=T0_MS / 1000 + s)
    w.close()
    return time.perf_counter() - t0


def write_mlflow(store: Path, steps: int) -> float:
    from mlflow.tracking import MlflowClient

    t0 = time.perf_counter()
    store.mkdir(parents=True)
    db = store / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.create_experiment("bench", artifact_location=(store / "artifacts").as_uri())
    run = client.create_run(exp, run_name="bench-run", start_time=T0_MS)
    run_id = run.info.run_id
    client.log_param(run_id, "lr", "0.001")
    for i, tag in enumerate(TAGS):
        client.log_metric(run_id, tag, value(i, 0), timestamp=T0_MS, step=0)
    client.set_terminated(run_id, "FINISHED", end_time=T0_MS + 1000 * steps)
    con = sqlite3.connect(db)
    with con:
        for i, tag in enumerate(TAGS):
            con.executemany(
                "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES (?, ?, ?, ?, ?, 0)",
                ((tag, value(i, s), T0_MS + 1000 * s, run_id, s) for s in range(1, steps)),
            )
            con.execute(
                "UPDATE latest_metrics SET value = ?, timestamp = ?, step = ? WHERE key = ? AND run_uuid = ?",
                (value(i, steps - 1), T0_MS + 1000 * (steps - 1), steps - 1, tag, run_id),
            )
    con.close()
    return time.perf_counter() - t0


def write_wandb(root: Path, steps: int) -> float:
    import wandb

    root.mkdir(parents=True)
    t0 = time.perf_counter()
    run = wandb.init(project="bench", name="bench-run", mode="offline", dir=str(root), config={"lr": 0.001})
    for s in range(steps):
        run.log({tag: value(i, s) for i, tag in enumerate(TAGS)}, step=s)
    run.finish()
    return time.perf_counter() - t0


def write_trackio(root: Path, steps: int) -> float:
    os.environ["TRACKIO_DIR"] = str(root)  # read once, when trackio is imported
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from trackio.sqlite_storage import SQLiteStorage

    t0 = time.perf_counter()
    for start in range(0, steps, 10_000):
        chunk = range(start, min(steps, start + 10_000))
        SQLiteStorage.bulk_log(
            "bench",
            "bench-run",
            [{tag: value(i, s) for i, tag in enumerate(TAGS)} for s in chunk],
            steps=list(chunk),
            timestamps=[f"2023-11-14T22:13:{s % 60:02d}.{s % 1000:03d}+00:00" for s in chunk],
            config={"lr": 0.001} if start == 0 else None,
            run_id="bench-run-id",
        )
    return time.perf_counter() - t0


def write_aim(root: Path, steps: int) -> float:
    import aim
    from aim.sdk.index_manager import RepoIndexManager

    root.mkdir(parents=True)
    t0 = time.perf_counter()
    run = aim.Run(
        repo=str(root),
        experiment="bench",
        system_tracking_interval=None,
        capture_terminal_logs=False,
        log_system_params=False,
    )
    run.name = "bench-run"
    run["hparams"] = {"lr": 0.001}
    for s in range(steps):
        run.track({tag: value(i, s) for i, tag in enumerate(TAGS)}, step=s)
    run.close()
    repo = aim.Repo(str(root))
    RepoIndexManager.get_index_manager(repo).index(run.hash)  # as `aim up` would, for Aim's own reader
    return time.perf_counter() - t0


# -- the readers (each in its own subprocess) ------------------------------------------------------


def child(case: str, source: str, out: str) -> dict:
    os.environ.setdefault("MLFLOW_TRACKING_URI", "sqlite:///:memory:")
    if case.startswith("labledger"):
        import labledger.importers

        if case == "labledger-tensorboard":
            from tensorboard.compat.proto import event_pb2  # noqa: F401
        elif case == "labledger-wandb":
            import wandb.proto.wandb_internal_pb2  # noqa: F401
        elif case == "labledger-aim":
            import aim
        elif case == "labledger-mlflow":
            from mlflow.tracking import MlflowClient
        from labledger.importers import import_path
    elif case == "tensorboard-eventaccumulator":
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    elif case == "wandb-records":
        from labledger.wandb.records import read_wandb_file
    elif case == "trackio-get-logs":
        os.environ["TRACKIO_DIR"] = source
        from trackio.sqlite_storage import SQLiteStorage
    elif case == "aim-repo":
        import aim
    else:
        import mlflow
        from mlflow.tracking import MlflowClient
    base = rss_mib()
    t0 = time.perf_counter()
    c0 = time.process_time()
    if case.startswith("labledger"):
        result = import_path(source, out)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        import labledger

        ledger = labledger.open_ledger(out)
        points = 0
        for rid in result.run_ids:
            for rec in ledger.run(rid).scalars():
                points += len(rec) - 2
        records = sum(r.counts.get("scalars", 0) for r in result.runs)
        stored = dir_mib(Path(out) / "runs")
    elif case == "tensorboard-eventaccumulator":
        acc = EventAccumulator(source, size_guidance={"scalars": 0})
        acc.Reload()
        series = {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        points = sum(len(s) for s in series.values())
        records, stored = None, None
    elif case == "wandb-records":
        files = sorted(Path(source).rglob("run-*.wandb"))
        histories = [read_wandb_file(f).history for f in files]
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        points = sum(1 for h in histories for row in h for k in row if not k.startswith("_"))
        records, stored = None, None
    elif case == "trackio-get-logs":
        logs = {
            r["id"]: SQLiteStorage.get_logs("bench", run_id=r["id"]) for r in SQLiteStorage.get_run_records("bench")
        }
        elapsed = time.perf_counter() - t0
        points = sum(len(row) - 2 for rows in logs.values() for row in rows)  # less step and timestamp
        records, stored = None, None
    elif case == "aim-repo":
        repo = aim.Repo(source)
        series = [m.data.numpy() for run in repo.iter_runs() for m in run.metrics()]
        elapsed = time.perf_counter() - t0
        points = sum(len(steps) for steps, _ in series)
        records, stored = None, None
    else:
        uri = f"sqlite:///{Path(source) / 'mlflow.db'}"
        client = MlflowClient(tracking_uri=uri)
        mlflow.set_tracking_uri(uri)
        exps = [e.experiment_id for e in client.search_experiments()]
        runs = mlflow.search_runs(experiment_ids=exps)
        history = {
            (rid, key): client.get_metric_history(rid, key)
            for rid in runs["run_id"]
            for key in (c[len("metrics.") :] for c in runs.columns if c.startswith("metrics."))
        }
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        points = sum(len(h) for h in history.values())
        records, stored = None, None
    return {
        "case": case,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "load": os.getloadavg()[0],
        "points": points,
        "records": records,
        "stored_mib": stored,
        "base_rss_mib": base,
        "peak_rss_mib": peak_mib(),
    }


def run_child(case: str, source: Path, out: Path) -> dict:
    cmd = [sys.executable, __file__, "--child", case, "--source", str(source), "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        return {"case": case, "error": (res.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


# -- main ----------------------------------------------------------------------------------------------

CASES = [
    ("TensorBoard log", "labledger import", "labledger-tensorboard", "tb"),
    ("TensorBoard log", "EventAccumulator (all scalars)", "tensorboard-eventaccumulator", "tb"),
    ("MLflow SQLite store", "labledger import", "labledger-mlflow", "mlflow"),
    ("MLflow SQLite store", "search_runs + get_metric_history", "mlflow-client", "mlflow"),
    ("W&B offline run", "labledger import", "labledger-wandb", "wandb"),
    ("W&B offline run", "read_wandb_file (decode only; wandb has no reader)", "wandb-records", "wandb"),
    ("Trackio project", "labledger import", "labledger-trackio", "trackio"),
    ("Trackio project", "SQLiteStorage.get_logs", "trackio-get-logs", "trackio"),
    ("Aim repository", "labledger import", "labledger-aim", "aim"),
    ("Aim repository", "Repo.iter_runs + metric.data.numpy", "aim-repo", "aim"),
]
WRITERS = {
    "tb": ("TensorBoard log", lambda d, n: write_tensorboard(d / "run1", n), "tb"),
    "mlflow": ("MLflow store", write_mlflow, "mlflow"),
    "wandb": ("W&B offline run", write_wandb, "wandb"),
    "trackio": ("Trackio project", write_trackio, "trackio"),
    "aim": ("Aim repository", write_aim, "aim"),
}


def table(rows: list[dict], points: int) -> list[list[str]]:
    head = [
        "source",
        "reader",
        "points read",
        "scalar records",
        "wall s",
        "CPU s",
        "peer / labledger CPU",
        "load",
        "points/s",
        "peak RSS (MiB)",
        "RSS rise (MiB)",
        "stored (MiB)",
    ]
    out = [head]
    peer_cpu = {
        r["source"]: r["cpu_seconds"] for r in rows if "error" not in r and not r["case"].startswith("labledger")
    }
    for r in rows:
        if "error" in r:
            out.append([r["source"], r["reader"], "failed: " + r["error"], *[""] * (len(head) - 3)])
            continue
        ok = "" if r["points"] == points else f" (expected {points:,})"
        out.append(
            [
                r["source"],
                r["reader"],
                f"{r['points']:,}{ok}",
                "-" if r["records"] is None else f"{r['records']:,}",
                f"{r['seconds']:.2f}",
                f"{r['cpu_seconds']:.2f}",
                f"{peer_cpu[r['source']] / r['cpu_seconds']:.1f}x"
                if r["case"].startswith("labledger") and r["source"] in peer_cpu
                else "",
                f"{r['load']:.1f}",
                f"{r['points'] / r['seconds']:,.0f}",
                f"{r['peak_rss_mib']:.0f}",
                f"{r['peak_rss_mib'] - r['base_rss_mib']:.0f}",
                "-" if r["stored_mib"] is None else f"{r['stored_mib']:.0f}",
            ]
        )
    return out


def print_table(rows: list[list[str]], markdown: bool) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))
    if markdown:
        print()
        for j, r in enumerate(rows):
            print("| " + " | ".join(r) + " |")
            if j == 0:
                print("|" + "|".join("---" for _ in r) + "|")


def versions() -> str:
    out = []
    for dist in (
        "labledger",
        "tensorboard",
        "mlflow-skinny",
        "sqlalchemy",
        "protobuf",
        "torch",
        "wandb",
        "trackio",
        "aim",
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out.append(f"{dist} {metadata.version(dist)}")
    return ", ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=1_000_000, help="scalar points per source (default 1M)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="also write the raw numbers here")
    ap.add_argument(
        "--only", default=",".join(WRITERS), help=f"sources, comma-separated (default: {','.join(WRITERS)})"
    )
    ap.add_argument("--sources", help="keep the written sources in this folder and reuse them on the next run")
    ap.add_argument("--reps", type=int, default=1, help="runs of each case, interleaved; the table keeps the best CPU")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--source", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.source, args.out)))
        return
    steps = args.points // len(TAGS)
    points = steps * len(TAGS)
    print(
        f"# import bench: {points:,} points per source ({len(TAGS)} tags x {steps:,} steps); "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    print(f"# {versions()}")
    tmp = Path(tempfile.mkdtemp(prefix="labledger-bench-import-"))
    keep = Path(args.sources) / str(points) if args.sources else tmp
    try:
        only = [w.strip() for w in args.only.split(",") if w.strip()]
        unknown = sorted(set(only) - set(WRITERS))
        if unknown:
            ap.error(f"unknown source(s) {unknown}; known: {', '.join(WRITERS)}")
        sources: dict[str, Path] = {}
        write_seconds: dict[str, float | None] = {}
        for key in only:
            label, write, _ = WRITERS[key]
            src = keep / key
            sources[key] = src / "run1" if key == "tb" else src
            if src.exists():  # kept from an earlier run (--sources)
                write_seconds[key] = None
                continue
            write_seconds[key] = write(src, steps)
            print(f"# wrote the {label} in {write_seconds[key]:.1f} s ({dir_mib(src):.0f} MiB)")
        best: dict[str, dict] = {}
        for _ in range(args.reps):
            for i, (source, reader, case, which) in enumerate(CASES):
                if which not in sources:
                    continue
                r = run_child(case, sources[which], tmp / f"ledger{i}")
                r.update(source=source, reader=reader)
                if case not in best or "error" in best[case] or r.get("cpu_seconds", 1e9) < best[case]["cpu_seconds"]:
                    best[case] = r
                shutil.rmtree(tmp / f"ledger{i}", ignore_errors=True)
        rows = [best[case] for _, _, case, which in CASES if which in sources]
        print(f"# load after: {os.getloadavg()[0]:.1f}")
        print_table(table(rows, points), args.markdown)
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {"points": points, "rows": rows, "write_seconds": write_seconds},
                    indent=2,
                )
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
