"""``wandb.sdk.lib``: ``RunDisabled`` (the class of a ``mode="disabled"`` run) and ``config_util``."""

from labledger.wandb._run import RunDisabled
from labledger.wandb.sdk.lib import config_util

__all__ = ["RunDisabled", "config_util"]
