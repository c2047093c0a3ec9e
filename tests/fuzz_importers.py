"""A seeded fuzz corpus over the TensorBoard, MLflow and report importers (#17, #19).

Each importer gets its own real seed, written here with the peer's own writer: a TensorBoard event
file (TensorBoard's ``EventFileWriter``: simple-value and tensor scalars, a histogram, a text
summary), an MLflow SQLite store (MLflow's client: a run with params, tags and metrics), a report
JSON document (seed 000's fields). Each case is the seed with one mutation (byte flips, truncation,
inserted bytes, a long tail, an empty file; for JSON also hostile values) imported with
``import_path`` into a fresh ledger, which is what ``labledger import`` runs: the CLI exits 0 on a
return and 1 with the one-line message of a ``LedgerError``. Counted as failures: any other
exception (the CLI would print a traceback), a message over one line, a case over 30 s (SIGALRM).
A signal (segfault in a C reader) kills this process: the test reports it from the exit status.

    python tests/fuzz_importers.py --importer tensorboard --cases 40 --seed 0   # prints JSON counts
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_readers import mutate

from labledger.errors import LedgerError

LIMIT_S = 30


def tensorboard_seed(folder: Path) -> Path:
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    w = EventFileWriter(str(folder))
    for step in range(1, 13):
        ev = event_pb2.Event(step=step, wall_time=1_700_000_000.0 + step)
        ev.summary.value.add(tag="loss", simple_value=1.0 / step)
        w.add_event(ev)
        ev = event_pb2.Event(step=step, wall_time=1_700_000_000.5 + step)
        v = ev.summary.value.add(tag="acc", tensor=tensor_util.make_tensor_proto(np.float32(step / 13)))
        v.metadata.plugin_data.plugin_name = "scalars"
        w.add_event(ev)
    ev = event_pb2.Event(step=3, wall_time=1_700_000_100.0)
    ev.summary.value.add(tag="h", histo=summary_pb2.HistogramProto(min=0, max=1, num=2, sum=1, bucket=[1, 1]))
    w.add_event(ev)
    w.close()
    [path] = folder.glob("*tfevents*")
    return path


def mlflow_seed(folder: Path) -> Path:
    from mlflow.tracking import MlflowClient

    db = folder / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.create_experiment("fuzz", artifact_location=(folder / "artifacts").as_uri())
    run = client.create_run(exp, run_name="r1", start_time=1_700_000_000_000)
    client.log_param(run.info.run_id, "lr", "0.01")
    client.set_tag(run.info.run_id, "team", "x")
    for step in range(8):
        client.log_metric(run.info.run_id, "loss", 1.0 / (step + 1), timestamp=1_700_000_000_000 + step, step=step)
        client.log_metric(run.info.run_id, "acc", step / 8, timestamp=1_700_000_000_000 + step, step=step)
    client.set_terminated(run.info.run_id, "FINISHED", end_time=1_700_000_009_000)
    return db


def report_seed(folder: Path) -> Path:
    from import_sources import report_doc

    path = folder / "report.json"
    path.write_bytes(orjson.dumps(report_doc("runs/head.pt", "0" * 64), option=orjson.OPT_INDENT_2))
    return path


#: importer -> (seed writer, whether the seed is text: JSON-line mutations apply)
SEEDS = {"tensorboard": (tensorboard_seed, False), "mlflow": (mlflow_seed, False), "report": (report_seed, True)}


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def run(importer: str, cases: int, seed: int) -> dict[str, Any]:
    from labledger.importers import import_path

    os.environ.setdefault("MLFLOW_TRACKING_URI", "sqlite:///:memory:")
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    noted = 0
    failures: list[str] = []
    signal.signal(signal.SIGALRM, _alarm)
    slowest = 0.0
    with tempfile.TemporaryDirectory(prefix=f"labledger-fuzz-{importer}-") as tmp:
        seed_dir = Path(tmp) / "seed"
        seed_dir.mkdir()
        writer, text = SEEDS[importer]
        seed_path = writer(seed_dir)
        original = seed_path.read_bytes()
        for i in range(cases):
            data, how, _ = mutate(original, rng, lines=text)
            folder = Path(tmp) / f"c{i}"
            folder.mkdir()
            path = folder / seed_path.name
            path.write_bytes(data)
            started = time.monotonic()
            signal.alarm(LIMIT_S)
            outcome, detail = "exit0", ""
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    done = import_path(path if importer != "tensorboard" else folder, folder / "ledger", fmt=importer)
                noted += any(r.notes for r in done.runs)  # damage skipped and reported (a torn record)
            except Hang:
                outcome, detail = "hang", how
            except LedgerError as exc:
                outcome = "exit1" if "\n" not in str(exc) else "multiline_error"
                detail = f"{how}: {exc}"[:300]
            except Exception as exc:  # noqa: BLE001 - what the fuzz is here to find
                outcome, detail = "traceback", f"{how}: {type(exc).__name__}: {exc}"[:300]
            finally:
                signal.alarm(0)
            slowest = max(slowest, time.monotonic() - started)
            counts[outcome] += 1
            if outcome not in ("exit0", "exit1"):
                failures.append(f"case {i} ({how}): {outcome} {detail}")
            shutil.rmtree(folder, ignore_errors=True)
    return {
        "importer": importer,
        "cases": cases,
        "seed": seed,
        "counts": dict(counts),
        "noted": noted,
        "failures": failures[:30],
        "slowest_s": round(slowest, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--importer", choices=sorted(SEEDS), required=True)
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sys.stdout.buffer.write(orjson.dumps(run(args.importer, args.cases, args.seed)) + b"\n")


if __name__ == "__main__":
    main()
