"""A W&B offline run with what a W&B user logs beyond scalars (for importer tests): define_metric
summaries, a nested summary, lists of images with captions, a wandb.plot chart, an artifact; and,
with ``resume ID N``, segment N of a run resumed under one id (each segment its own folder)."""

import sys

import numpy as np
import wandb

out = sys.argv[1]
resume = sys.argv[2:4] if len(sys.argv) > 3 else None
if resume:
    run_id, segment = resume[0], int(resume[1])
    run = wandb.init(
        project="res",
        name="resumed",
        id=run_id,
        resume="allow",
        dir=out,
        mode="offline",
        config={"lr": 0.1, "segment": segment},
    )
    for i in range(3):
        wandb.log({"loss": 1.0 / (10 * segment + i + 1)}, step=10 * segment + i)
    wandb.finish(exit_code=0)
    sys.exit(0)

run = wandb.init(project="full", name="full", config={"lr": 0.5, "layers": [2, 3]}, dir=out, mode="offline")
wandb.define_metric("acc", summary="max")
wandb.define_metric("val/loss", summary="min,last")
for i in range(4):
    wandb.log({"acc": [0.5, 0.7, 0.6, 0.65][i], "val/loss": [0.9, 0.4, 0.5, 0.6][i]})
imgs = [wandb.Image(np.full((4, 6, 3), 40 * k, dtype=np.uint8), caption=f"digit {k}") for k in range(3)]
wandb.log({"samples": imgs, "one": wandb.Image(np.zeros((3, 3), dtype=np.uint8), caption="single")})
table = wandb.Table(data=[[1, 2.0], [2, 3.5]], columns=["x", "y"])
wandb.log({"curve": wandb.plot.line(table, "x", "y", title="y by x")})
wandb.summary["nested"] = {"test": {"acc": 0.88, "n": 100}, "name": "best"}
art = wandb.Artifact("weights", type="model", description="the weights", metadata={"epochs": 4})
with open(f"{out}/w.bin", "wb") as fh:
    fh.write(b"\0" * 64)
art.add_file(f"{out}/w.bin")
run.log_artifact(art)
wandb.finish()
