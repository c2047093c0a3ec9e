"""What the machine lends a labledger process: the cores it may run on."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on: its CPU affinity where the system keeps one (a container
    or ``taskset`` may allow fewer than the machine has), else the machine's count; at least 1.
    The one rule of every choice between one thread and several.

    >>> cores() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
