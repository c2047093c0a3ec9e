"""A W&B offline run with scalars, nested keys, an image, a table, a histogram and a summary (for importer tests)."""

import sys

import numpy as np
import wandb

out, fail = sys.argv[1], len(sys.argv) > 2
run = wandb.init(
    project="imp",
    name="media",
    config={"lr": 0.5, "opt": {"name": "sgd"}},
    dir=out,
    tags=["x"],
    notes="from W&B",
    mode="offline",
)
for i in range(3):
    wandb.log({"loss": 1.0 / (i + 1), "eval": {"acc": 0.5 + i / 10}, "step": i * 10})
wandb.log(
    {
        "img": wandb.Image(np.full((4, 5, 3), 200, dtype=np.uint8)),
        "tab": wandb.Table(columns=["a", "b"], data=[[1, "x"], [2, "y"]]),
        "hist": wandb.Histogram([1, 2, 3]),
    },
    step=5,
)
wandb.summary["best"] = 0.25
wandb.finish(exit_code=3 if fail else 0)
