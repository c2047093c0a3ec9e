"""The one switch for labledger's accelerators.

Every rule (labels, positives, tolerances, ids) lives in one reference implementation. An
accelerator is a separate module behind it with one contract: it returns the same result as the
reference, or declines (``None``) and the reference answers. ``LABLEDGER_FAST=0`` turns every
accelerator off, so that the reference alone answers (the parity tests run both ways).

>>> import os
>>> os.environ[ENV] = "0"; enabled()
False
>>> del os.environ[ENV]; enabled()
True
"""

from __future__ import annotations

import os

#: The environment variable: ``0`` (or ``off``, ``false``, ``no``) turns the accelerators off.
ENV = "LABLEDGER_FAST"


def enabled() -> bool:
    """Whether accelerators may answer (``$LABLEDGER_FAST`` is not ``0``/``off``/``false``/``no``)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


__all__ = ["ENV", "enabled"]
