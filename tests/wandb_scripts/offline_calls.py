"""A W&B script using the calls real wandb accepts offline that labledger.wandb once crashed on (#43).

Run by tests/test_wandb_api_surface.py with real wandb (offline) and with labledger.wandb standing in;
it prints one JSON line of what the script saw.
"""

import json
import os
import sys

import torch
import wandb

out = sys.argv[1]
wandb.require("core")
code = os.path.join(out, "code")
os.makedirs(code, exist_ok=True)
with open(os.path.join(code, "train.py"), "w") as f:
    f.write("print('train')\n")
weights = os.path.join(out, "model.pt")
torch.save({"w": torch.ones(2)}, weights)

run = wandb.init(
    project="calls",
    config={"lr": 0.1, "data_dir": "/private"},
    config_exclude_keys=["data_dir"],
    dir=out,
    mode="offline",
)
seen = {
    "resumed": run.resumed,
    "disabled": run.disabled,
    "sweep_id": run.sweep_id,
    "project_url": run.project_url,
    "start_time": isinstance(run.start_time, float),
    "settings_mode_offline": run.settings.mode == "offline" or run.offline,
    "config": dict(wandb.config.items()) if hasattr(wandb.config, "items") else dict(wandb.config),
}
run.log_code(code)
run.log_model(weights, name="tiny-model")
run.mark_preempting()
table = wandb.Table(columns=["epoch", "acc"], data=[[0, 0.5], [1, 0.75]])
wandb.log(
    {
        "loss": torch.tensor([0.25]),
        "acc_curve": wandb.plot.line(table, "epoch", "acc", title="accuracy"),
        "cm": wandb.plot.confusion_matrix(y_true=[0, 1, 1], preds=[0, 1, 0], class_names=["no", "yes"]),
    }
)
seen["id"] = run.id
wandb.finish()
print(json.dumps(seen))
