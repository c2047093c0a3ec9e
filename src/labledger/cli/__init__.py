"""The ``labledger`` command line. Commands live in one module per area and attach to ``main``."""

from labledger.cli.base import main

# Each module registers its commands on `main` when imported.
from labledger.cli import runs  # noqa: E402,F401

__all__ = ["main"]
