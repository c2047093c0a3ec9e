"""The ledger on disk: an SQLite index and append-only run folders."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labledger.store.ledger import Ledger, RunInfo
    from labledger.store.run import Run, start_run
    from labledger.store.view import RunView

#: Where each name lives; a module loads on first use, so that reading the index (``labledger
#: runs``) does not import the writer's modules.
_MODULES = {
    "Ledger": "ledger",
    "RunInfo": "ledger",
    "Run": "run",
    "start_run": "run",
    "RunView": "view",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'labledger.store' has no attribute {name!r}")
    return getattr(importlib.import_module(f"labledger.store.{module}"), name)


__all__ = ["Ledger", "Run", "RunInfo", "RunView", "start_run"]
