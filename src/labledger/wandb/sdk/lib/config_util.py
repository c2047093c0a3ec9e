"""``wandb.sdk.lib.config_util.ConfigError``, which HF Trainer's W&B callback imports and catches."""

from __future__ import annotations

from labledger.wandb._run import WandbError


class ConfigError(WandbError):
    """A config value cannot be set (never raised by labledger.wandb: new values win, as with allow_val_change)."""
