"""The ``labledger`` command line. Commands live in one module per area and attach to ``main``."""

from labledger.cli.base import main

# Each module registers its commands on `main` when imported.
from labledger.cli import runs  # noqa: E402,F401

__all__ = ["main"]
from labledger.cli import demo  # noqa: E402,F401
from labledger.cli import checkpoints  # noqa: E402,F401
from labledger.cli import tables  # noqa: E402,F401
from labledger.cli import sweep  # noqa: E402,F401
from labledger.cli import site  # noqa: E402,F401
from labledger.cli import evaluation  # noqa: E402,F401
from labledger.cli import importing  # noqa: E402,F401
from labledger.cli import serve  # noqa: E402,F401
from labledger.cli import groups  # noqa: E402,F401
from labledger.cli import calibrate  # noqa: E402,F401
from labledger.cli import report  # noqa: E402,F401
