"""``wandb.errors``: W&B's error classes, each a :class:`labledger.errors.LedgerError`."""

from __future__ import annotations

from labledger.wandb._run import AuthenticationError, CommError, UnsupportedError, UsageError, WandbError

#: ``wandb.errors.Error``: the base of every labledger.wandb error.
Error = WandbError

__all__ = ["AuthenticationError", "CommError", "Error", "UnsupportedError", "UsageError"]
