"""The ledger on disk: an SQLite index and append-only run folders."""

from labledger.store.ledger import Ledger, RunInfo
from labledger.store.run import Run, start_run
from labledger.store.view import RunView

__all__ = ["Ledger", "Run", "RunInfo", "RunView", "start_run"]
