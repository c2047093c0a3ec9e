"""``wandb.wandb_run.Run`` (the name Lightning's ``WandbLogger`` imports): the class of ``wandb.run``."""

from __future__ import annotations

from labledger.wandb._run import WandbRun

Run = WandbRun

__all__ = ["Run"]
