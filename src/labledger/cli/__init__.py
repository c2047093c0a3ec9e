"""The ``labledger`` command line. Commands live in one module per area and attach to ``main``.

A command's module is imported only when that command runs (``--help`` imports them all), so
``labledger runs`` starts without numpy, pyarrow or the metric registry (#19). A new command: define
it in its module with ``@main.command(...)`` and add its name and module to ``COMMANDS``.
"""

from labledger.cli.base import main

#: Every command of ``labledger`` -> the module of ``labledger.cli`` that defines it.
COMMANDS = {
    "calibrate": "calibrate",
    "compare": "evaluation",
    "compare-groups": "groups",
    "demo": "demo",
    "diff": "diff",
    "eval": "evaluation",
    "export": "runs",
    "forensics": "sweep",
    "hash": "checkpoints",
    "import": "importing",
    "lineage": "lineage",
    "logit-diff": "checkpoints",
    "mixture": "checkpoints",
    "power": "power",
    "push": "serve",
    "report": "report",
    "runs": "runs",
    "schema": "schema",
    "select-epoch": "sweep",
    "serve": "serve",
    "show": "runs",
    "site": "site",
    "soup": "checkpoints",
    "sweep": "sweep",
    "sync": "sync",
    "table": "tables",
    "verify": "verify",
}
main.lazy.update(COMMANDS)

__all__ = ["COMMANDS", "main"]
