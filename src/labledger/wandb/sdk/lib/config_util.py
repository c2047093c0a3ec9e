"""``wandb.sdk.lib.config_util.ConfigError``, which HF Trainer's W&B callback imports and catches."""

from __future__ import annotations

from labledger.wandb._run import ConfigError

__all__ = ["ConfigError"]
