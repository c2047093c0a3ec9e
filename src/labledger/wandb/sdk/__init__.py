"""The parts of ``wandb.sdk`` that integrations import: ``wandb.sdk.lib.RunDisabled``,
``wandb.sdk.lib.config_util.ConfigError`` and ``wandb.sdk.wandb_run.Run``.

Classes are defined in :mod:`labledger.wandb._run` and only re-exported here, so that the same class
objects are seen whether this package is imported as ``labledger.wandb.sdk`` or, with labledger.wandb
standing in for ``wandb`` in ``sys.modules``, as ``wandb.sdk``.
"""

from labledger.wandb.sdk import lib, wandb_run

__all__ = ["lib", "wandb_run"]
