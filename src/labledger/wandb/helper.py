"""``wandb.helper``: ``parse_config``, which W&B suggests in place of ``config_include_keys``/``config_exclude_keys``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from labledger.wandb._run import config_input


def parse_config(params: Any, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> dict:
    """A config dict from a mapping, ``argparse.Namespace`` or object, keeping only ``include`` (when
    given) and dropping ``exclude``; raises :class:`UsageError` when both are given, as W&B does.

    >>> parse_config({"lr": 0.1, "seed": 3, "debug": True}, exclude=("debug",))
    {'lr': 0.1, 'seed': 3}
    """
    from labledger.wandb._run import UsageError

    if include is not None and exclude is not None:
        raise UsageError("wandb.helper.parse_config: give include or exclude, not both")
    values = config_input(params)
    if include is not None:
        keep = set(include)
        values = {k: v for k, v in values.items() if k in keep}
    if exclude is not None:
        drop = set(exclude)
        values = {k: v for k, v in values.items() if k not in drop}
    return values
