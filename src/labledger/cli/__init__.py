"""The ``labledger`` command line. Commands live in one module per area and attach to ``main``."""

# Each module registers its commands on `main` when imported.
from labledger.cli import runs  # noqa: F401
from labledger.cli.base import main

__all__ = ["main"]
from labledger.cli import (
    calibrate,  # noqa: F401
    checkpoints,  # noqa: F401
    demo,  # noqa: F401
    diff,  # noqa: F401
    evaluation,  # noqa: F401
    groups,  # noqa: F401
    importing,  # noqa: F401
    lineage,  # noqa: F401
    power,  # noqa: F401
    report,  # noqa: F401
    schema,  # noqa: F401
    serve,  # noqa: F401
    site,  # noqa: F401
    sweep,  # noqa: F401
    sync,  # noqa: F401
    tables,  # noqa: F401
    verify,  # noqa: F401
)
