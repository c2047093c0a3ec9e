"""A tiny training script written against W&B (run by tests/test_wandb.py with real wandb and labledger.wandb)."""

import sys

import torch
import wandb


def main(out: str) -> str:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    run = wandb.init(
        project="tiny",
        name="mlp",
        config={"lr": 0.1, "epochs": 3, "model": {"hidden": 4}},
        dir=out,
        tags=["t1"],
        notes="a tiny loop",
        mode="offline",
    )
    cfg = wandb.config
    model = torch.nn.Sequential(torch.nn.Linear(2, cfg.model["hidden"]), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    x = torch.randn(32, 2)
    y = x[:, :1] * x[:, 1:]
    wandb.define_metric("epoch")
    wandb.define_metric("val/*", step_metric="epoch", summary="min")
    for epoch in range(cfg["epochs"]):
        for _ in range(4):
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            wandb.log({"train": {"loss": loss.item()}, "lr": opt.param_groups[0]["lr"]})
        wandb.log({"val/loss": loss.item() * 1.1, "epoch": epoch}, commit=False)
        wandb.log({"extra": float(epoch)})
    wandb.log({"final": 1.0}, step=20)
    wandb.log({"after": 2.0})
    wandb.summary["best"] = 0.5
    wandb.config.update({"done": True})
    run_id = run.id
    wandb.finish()
    return run_id


if __name__ == "__main__":
    print(main(sys.argv[1]))
