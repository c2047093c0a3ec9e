from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SEEDS = SHARED / "seeds"
#: Screenshots and other artefacts that CI keeps.
ARTIFACTS = Path(__import__("os").environ.get("LABLEDGER_TEST_ARTIFACTS", REPO / "test-artifacts"))


def make_batch(
    mb: int,
    *,
    n: int = 4,
    step: int | None = None,
    text_len: int = 40,
    labels=("-1", "0", "+1"),
    rng: random.Random | None = None,
) -> dict:
    """A valid microbatch record in the seed-004 schema, with n samples."""
    rng = rng or random.Random(mb)
    samples = []
    for i in range(n):
        raw = [rng.random() + 0.05 for _ in labels]
        total = sum(raw)
        probs = {lab: r / total for lab, r in zip(labels, raw)}
        gold = labels[rng.randrange(len(labels))]
        samples.append(
            {
                "input": {"text": "x" * text_len, "image": f"images/{mb}-{i}.png"},
                "gold": gold,
                "prediction": max(probs, key=probs.get),
                "probabilities": probs,
                "cross_entropy": -math.log(probs[gold]),
                "source": "test",
                "training_row": mb * n + i,
            }
        )
    return {
        "microbatch": mb,
        "optimizer_step": step if step is not None else (mb - 1) // 8 + 1,
        "examples_seen": mb * n,
        "batch_size": n,
        "loss": 0.5,
        "samples": samples,
        "forward_ms": 1.5,
        "gpu_allocated_mib": 0.0,
        "gpu_peak_allocated_mib": 0.0,
    }


@pytest.fixture
def ledger_dir(tmp_path):
    return tmp_path / "ledger"
