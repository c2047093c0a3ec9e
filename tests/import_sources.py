"""Real sources to import, written by the tests: a seed-004 run folder, a seed-000-shaped report, a
results file, TensorBoard event files (``torch.utils.tensorboard.SummaryWriter``) and MLflow stores
(written by ``mlflow`` itself). Shared by test_import.py and test_cli_import.py."""

from __future__ import annotations

import hashlib
import math
import random
import sqlite3
from pathlib import Path

import orjson
from conftest import make_batch

LABELS = ("-1", "0", "+1")
T0 = 1_780_000_000.0


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _sign_action(target: int, current: int) -> str:
    return LABELS[(target > current) - (target < current) + 1]


def image_lines(n_images: int = 6, seed: int = 0) -> list[dict]:
    """``full_test/images.jsonl`` lines as seed 004 describes them (10 states per image)."""
    rng = random.Random(seed)
    lines = []
    for image_id in range(n_images):
        target = (image_id * 3) % 10
        probs, preds, gold, episodes = [], [], [], []
        for s in range(10):
            raw = [rng.random() + 0.05 for _ in LABELS]
            total = sum(raw)
            p = {lab: r / total for lab, r in zip(LABELS, raw)}
            probs.append(p)
            preds.append(max(p, key=p.get))
            gold.append(_sign_action(target, s))
            ok = rng.random() < 0.7
            episodes.append(
                {
                    "start": s,
                    "success": ok,
                    "termination": "reached_target" if ok else "loop",
                    "trace": [{"before": s, "action": preds[-1], "after": s}],
                    "extra_moves": rng.randrange(3) if ok else None,
                }
            )
        lines.append(
            {
                "image_id": 100 + image_id,
                "source": "mnist-test",
                "split": "test",
                "target": target,
                "image": f"images/{100 + image_id}.png",
                "gold": gold,
                "predictions": preds,
                "probabilities": probs,
                "episodes": episodes,
                "latency_ms": 1.5 + image_id,
            }
        )
    return lines


def summary_cells(lines: list[dict]) -> dict:
    cells: dict = {}
    for line in lines:
        row = cells.setdefault(str(line["target"]), {})
        for s in range(10):
            c = row.setdefault(str(s), {"images": 0, "errors": 0, "failed_episodes": 0})
            c["images"] += 1
            c["errors"] += int(line["predictions"][s] != line["gold"][s])
            c["failed_episodes"] += int(not line["episodes"][s]["success"])
    return cells


def seed_batches(n: int = 6) -> list[dict]:
    out = []
    for mb in range(1, n + 1):
        b = make_batch(mb, n=4, step=(mb - 1) // 2 + 1)
        b["time"] = T0 + mb
        out.append(b)
    return out


SEED_HISTORY = [
    {"step": 1, "loss": 1.1, "grad_norm": 0.5, "learning_rate": 0.001, "epoch": 0.25},
    {"step": 2, "loss": 0.9, "grad_norm": 0.4, "learning_rate": 0.0008, "epoch": 0.5},
    {"step": 3, "loss": 0.8, "grad_norm": 0.3, "learning_rate": 0.0005, "epoch": 0.75},
    {"step": 3, "eval_loss": 0.85, "eval_accuracy": 0.6, "epoch": 0.75},
]


def write_seed_run(root: Path, *, n_batches: int = 6, n_images: int = 6) -> Path:
    """A seed-004 run folder with every file the seed names, plus two extra files."""
    root.mkdir(parents=True)
    write_jsonl(root / "batches.jsonl", seed_batches(n_batches))
    (root / "training_history.json").write_bytes(
        orjson.dumps({"log_history": SEED_HISTORY, "global_step": 3, "best_metric": 0.6, "logging_steps": 1})
    )
    (root / "config.json").write_bytes(orjson.dumps({"task": "digit_step", "lr": 0.001, "grad_accum": 2}))
    lines = image_lines(n_images)
    write_jsonl(root / "full_test" / "images.jsonl", lines)
    (root / "full_test" / "summary.json").write_bytes(
        orjson.dumps({"cells": summary_cells(lines), "analysis": {"images": len(lines)}})
    )
    (root / "images").mkdir()
    (root / "images" / "100.png").write_bytes(b"\x89PNG fake")
    (root / "README.txt").write_text("what this run was\n")
    return root


def report_doc(checkpoint: str, sha256: str, *, epochs: int = 5, seed: int = 0) -> dict:
    """A report with the fields, nesting and numbers' shapes of seed 000."""
    rng = random.Random(seed)

    def scores(threshold: float) -> dict:
        return {
            "threshold": threshold,
            "accuracy": rng.uniform(0.8, 1),
            "f1": rng.uniform(0.8, 1),
            "roc_auc": 0.99,
            "single_symbol_recall": rng.uniform(0.6, 1),
            "cross_boundary_recall": rng.uniform(0.7, 1),
        }

    history = [{"epoch": e, "loss": 1.0 / e, **scores(0.5)} for e in range(1, epochs + 1)]
    trials = [scores(0.05 + 0.025 * i) for i in range(37)]
    chosen = dict(trials[26])
    return {
        "experiment": "P-TEST-BOUNDARY-SMOKE-001",
        "generated_at": "2026-07-23T19:10:12.626228+00:00",
        "device": "cpu",
        "cuda_device": None,
        "base_model_version": "base-0.6",
        "adapter_model_version": "adapter-0.6",
        "training_samples": 2400,
        "validation_samples": 2400,
        "selected": dict(history[-1]),
        "threshold_selection": {**chosen, "recall_gate_passed": True},
        "threshold_trials": trials,
        "paired_test": scores(chosen["threshold"]),
        "history": history,
        "non_regression": {"exact_logit_max_abs": 0.0, "family_logit_max_abs": 0.0},
        "checkpoint": checkpoint,
        "checkpoint_sha256": sha256,
        "interpretation_limit": "합성 배치 smoke이며 제품 gate가 아니다.",
        "track": "P_with_obligations",
        "product_validation": False,
    }


def results_rows(n: int = 20, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        p = rng.random()
        rows.append(
            {
                "id": f"item{i}",
                "task": "hover",
                "gold": rng.choice(["SUPPORTED", "NOT_SUPPORTED"]),
                "probs": {"SUPPORTED": p, "NOT_SUPPORTED": 1 - p},
                "slices": {"len": "long" if i % 2 else "short"},
                "group": f"doc{i // 3}",
            }
        )
    return rows


def write_tensorboard(logdir: Path, *, steps: int = 12) -> Path:
    """Scalars on two tags (one written every other step), add_scalars, hparams, a histogram, text."""
    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(logdir))
    for s in range(steps):
        w.add_scalar("train/loss", 1.0 / (s + 1), s)
        if s % 2 == 0:
            w.add_scalar("train/lr", 0.1 * 0.9**s, s)
    w.add_scalar("time", 7.0, 3)  # a tag that collides with the record's own field
    w.add_scalars("pair", {"a": 1.0, "b": 2.0}, 5)
    w.add_histogram("weights", np.arange(10), 1)
    w.add_text("note", "hello", 0)
    w.add_hparams({"lr": 0.1, "batch_size": 4, "optimizer": "adam"}, {"hp/accuracy": 0.9})
    w.close()
    return logdir


def write_mlflow(store: Path, *, kind: str = "sqlite", steps: int = 6) -> tuple[str, dict]:
    """Two experiments, three runs (one FAILED, one deleted) logged with the mlflow client API.

    Returns the tracking URI and ``{run name: run_id}``.
    """
    import mlflow
    from mlflow.tracking import MlflowClient

    store.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        uri = f"sqlite:///{store / 'mlflow.db'}"
    else:  # the caller sets MLFLOW_ALLOW_FILE_STORE=true (MLflow 3 refuses file stores otherwise)
        uri = (store / "mlruns").as_uri()
    client = MlflowClient(tracking_uri=uri)
    ids = {}
    exp_a = client.create_experiment("exp-a", artifact_location=(store / "artifacts").as_uri())
    exp_b = client.create_experiment("exp-b", artifact_location=(store / "artifacts").as_uri())
    r = client.create_run(
        exp_a,
        run_name="baseline",
        tags={"team": "vision", "mlflow.note.content": "first try"},
        start_time=int(T0 * 1000),
    )
    ids["baseline"] = r.info.run_id
    client.log_param(r.info.run_id, "lr", "0.1")
    client.log_param(r.info.run_id, "batch_size", "32")
    for s in range(steps):
        ts = int(T0 * 1000) + 1000 * s
        client.log_metric(r.info.run_id, "loss", 1.0 / (s + 1), timestamp=ts, step=s)
        client.log_metric(r.info.run_id, "acc", s / steps, timestamp=ts, step=s)
    client.log_metric(r.info.run_id, "loss", float("nan"), timestamp=int(T0 * 1000) + 99_000, step=steps)
    client.log_metric(r.info.run_id, "step", 5.0, timestamp=int(T0 * 1000) + 50, step=0)
    artifact = store / "model.txt"
    artifact.write_text("weights")
    client.log_artifact(r.info.run_id, str(artifact))
    client.set_terminated(r.info.run_id, "FINISHED", end_time=int(T0 * 1000) + 100_000)
    r2 = client.create_run(exp_b, run_name="crashy", start_time=int(T0 * 1000) + 5)
    ids["crashy"] = r2.info.run_id
    client.log_metric(r2.info.run_id, "loss", 3.0, timestamp=int(T0 * 1000) + 10, step=0)
    client.set_terminated(r2.info.run_id, "FAILED", end_time=int(T0 * 1000) + 20)
    r3 = client.create_run(exp_b, run_name="trashed")
    client.set_terminated(r3.info.run_id, "FINISHED")
    client.delete_run(r3.info.run_id)
    del mlflow
    return uri, ids


def tree_hashes(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` (or of ``path`` itself)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def snapshot(root: Path) -> tuple:
    """The ledger's file list (index files aside) and its index rows: equal before and after a
    failed import."""
    files = sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.startswith("ledger.db")
    )
    con = sqlite3.connect(root / "ledger.db")
    try:
        rows = tuple(
            tuple(con.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
            for t in ("runs", "run_tags", "checkpoints", "evaluations", "metric_values", "imports")
        )
    finally:
        con.close()
    return files, rows


def is_close(a: float, b: float, tol: float = 1e-9) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol * max(1.0, abs(a), abs(b))
