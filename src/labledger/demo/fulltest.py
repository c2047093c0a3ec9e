"""The full test: every held-out image in every current state; episodes replayed from the cache.

:func:`run_full_test` predicts (timing each image's 10-state forward), replays an episode from every
start state, and builds the seed-004 summary. :func:`log_full_test` stores it in a run:
``results("full_test")`` (one row per image x state, with probabilities and logits, for later
evaluation), ``files/full_test/images.jsonl`` (one line per image) and
``files/full_test/summary.json`` (``cells[target][current]``, analysis, latency).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import torch
from torch import nn

from labledger.demo.model import encode_inputs, log_softmax64
from labledger.demo.task import (
    ACTIONS,
    RESULTS_NAME,
    SOURCE,
    STATES,
    TASK_NAME,
    TERMINATIONS,
    DigitsData,
    gold_index,
    image_ref,
    replay_episode,
)


@dataclass
class FullTestResult:
    """Predictions for ``image_ids`` x every state, and the episodes replayed from them."""

    image_ids: np.ndarray  # (n,)
    targets: np.ndarray  # (n,) the digit of each image
    logits: np.ndarray  # (n, 10, 3) float32, in ACTIONS order
    probabilities: np.ndarray  # (n, 10, 3) float64 softmax of the logits
    predictions: list[list[str]]  # [image][state] -> action label
    episodes: list[list[dict]]  # [image][start] -> episode (see task.replay_episode)
    latency_ms: np.ndarray  # (n,) wall time of each image's 10-state forward
    max_steps: int
    device: str

    def summary(self) -> dict[str, Any]:
        """``{"cells", "analysis", "latency"}`` (see :func:`summarize`)."""
        return summarize(self)


@torch.inference_mode()
def run_full_test(
    model: nn.Module,
    data: DigitsData,
    image_ids: np.ndarray,
    *,
    device: str = "cpu",
    max_steps: int = 20,
    warmup: int = 5,
) -> FullTestResult:
    """Predict every state of every image (one timed forward of 10 rows per image), replay episodes.

    The latency of an image is the wall time of the model's forward on its 10 state rows
    (input encoding included, ``warmup`` untimed forwards first).
    """
    ids = np.asarray(image_ids, dtype=np.int64)
    images = data.images[ids]
    targets = data.targets[ids]
    k = len(STATES)
    currents = np.arange(k)
    model.eval()
    for i in range(min(warmup, len(ids))):
        model(encode_inputs(np.repeat(images[i : i + 1], k, axis=0), currents, device=device))
    logits = np.zeros((len(ids), k, len(ACTIONS)), dtype=np.float32)
    latency = np.zeros(len(ids))
    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    for i in range(len(ids)):
        t0 = time.perf_counter()
        out = model(encode_inputs(np.repeat(images[i : i + 1], k, axis=0), currents, device=device))
        if sync is not None:
            sync()
        latency[i] = (time.perf_counter() - t0) * 1000.0
        logits[i] = out.float().cpu().numpy()
    probs = np.exp(log_softmax64(logits))
    labels = np.asarray(ACTIONS)
    predictions = labels[probs.argmax(axis=2)].tolist()
    episodes = [
        [replay_episode(row, target=t, start=s, max_steps=max_steps) for s in STATES]
        for row, t in zip(predictions, targets.tolist())
    ]
    return FullTestResult(
        image_ids=ids,
        targets=targets,
        logits=logits,
        probabilities=probs,
        predictions=predictions,
        episodes=episodes,
        latency_ms=latency,
        max_steps=max_steps,
        device=device,
    )


def summarize(result: FullTestResult) -> dict[str, Any]:
    """The seed-004 summary of a full test.

    ``cells[target][current]`` (string keys) = ``{"images", "errors", "failed_episodes"}``: the
    number of images of that digit, the wrong actions predicted in that current state, and the
    failed episodes that started there (errors and failed episodes are different measures).
    ``analysis`` has the overall action accuracy, episode success rate, mean extra moves of the
    successful episodes and the count of each termination reason; ``latency`` the ms per image.
    """
    n, k = len(result.image_ids), len(STATES)
    gold = gold_index(np.repeat(result.targets, k), np.tile(np.arange(k), n)).reshape(n, k)
    pred = result.probabilities.argmax(axis=2)
    wrong = pred != gold
    failed = np.array([[not ep["success"] for ep in eps] for eps in result.episodes], dtype=bool).reshape(n, k)
    cells: dict[str, dict[str, dict[str, int]]] = {}
    for digit in range(10):
        mask = result.targets == digit
        cells[str(digit)] = {
            str(s): {
                "images": int(mask.sum()),
                "errors": int(wrong[mask, s].sum()),
                "failed_episodes": int(failed[mask, s].sum()),
            }
            for s in STATES
        }
    extra = [ep["extra_moves"] for eps in result.episodes for ep in eps if ep["success"]]
    terminations = Counter(ep["termination"] for eps in result.episodes for ep in eps)
    per_action = {}
    for a_idx, action in enumerate(ACTIONS):
        m = gold == a_idx
        per_action[action] = {"rows": int(m.sum()), "accuracy": float((pred[m] == a_idx).mean()) if m.any() else None}
    lat = result.latency_ms
    return {
        "task": TASK_NAME,
        "source": SOURCE,
        "images": n,
        "states": k,
        "cells": cells,
        "analysis": {
            "action_accuracy": float(1.0 - wrong.mean()),
            "action_errors": int(wrong.sum()),
            "predictions": int(wrong.size),
            "accuracy_by_gold_action": per_action,
            "episodes": int(failed.size),
            "episode_success_rate": float(1.0 - failed.mean()),
            "failed_episodes": int(failed.sum()),
            "mean_extra_moves": float(np.mean(extra)) if extra else None,
            "terminations": {t: int(terminations.get(t, 0)) for t in TERMINATIONS},
            "max_steps": result.max_steps,
            "note": "Episodes replay the cached per-state predictions; the model is not called "
            "again along each trajectory.",
        },
        "latency": {
            "unit": "ms per image (one forward of its 10 current states)",
            "device": result.device,
            "threads": torch.get_num_threads(),
            "images": n,
            "mean_ms": float(lat.mean()) if n else None,
            "p50_ms": float(np.percentile(lat, 50)) if n else None,
            "p95_ms": float(np.percentile(lat, 95)) if n else None,
            "max_ms": float(lat.max()) if n else None,
        },
    }


def results_rows(result: FullTestResult) -> list[dict[str, Any]]:
    """One results row per (image, current state), in the ledger's ``results.jsonl`` schema.

    Rows keep the logits beside the probabilities, so a temperature (or any recalibration) can be
    computed later from what is stored.
    """
    a0, a1, a2 = ACTIONS
    rows = []
    probs = result.probabilities.tolist()
    logits = result.logits.astype(np.float64).tolist()
    for i, (image_id, target) in enumerate(zip(result.image_ids.tolist(), result.targets.tolist())):
        for s in STATES:
            p, z = probs[i][s], logits[i][s]
            rows.append(
                {
                    "id": f"img{image_id}-cur{s}",
                    "task": TASK_NAME,
                    "gold": ACTIONS[int(np.sign(target - s)) + 1],
                    "probs": {a0: p[0], a1: p[1], a2: p[2]},
                    "slices": {"current": str(s), "target": str(target)},
                    "group": f"img{image_id}",
                    "image_id": image_id,
                    "current": s,
                    "target_digit": target,
                    "prediction": result.predictions[i][s],
                    "logits": {a0: z[0], a1: z[1], a2: z[2]},
                }
            )
    return rows


def images_jsonl(result: FullTestResult) -> bytes:
    """``full_test/images.jsonl``: one line per image, as in seed 004.

    ``predictions[s]`` and ``probabilities[s]`` are the results for current = s; ``episodes[s]``
    the episode replayed from start = s (success, termination, trace, extra moves).
    """
    lines = []
    probs = result.probabilities.tolist()
    for i, (image_id, target) in enumerate(zip(result.image_ids.tolist(), result.targets.tolist())):
        lines.append(
            orjson.dumps(
                {
                    "image_id": image_id,
                    "source": SOURCE,
                    "split": "test",
                    "target": target,
                    "image": image_ref(image_id),
                    "gold": [ACTIONS[int(np.sign(target - s)) + 1] for s in STATES],
                    "predictions": result.predictions[i],
                    "probabilities": [dict(zip(ACTIONS, probs[i][s])) for s in STATES],
                    "episodes": result.episodes[i],
                    "latency_ms": float(result.latency_ms[i]),
                }
            )
        )
    return b"\n".join(lines) + b"\n"


def log_full_test(run: Any, result: FullTestResult, *, name: str = RESULTS_NAME) -> dict[str, Any]:
    """Store a full test in ``run``; returns its summary."""
    summary = result.summary()
    run.log_results(name, results_rows(result))
    run.log_file(f"{name}/images.jsonl", images_jsonl(result))
    run.log_file(f"{name}/summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return summary
