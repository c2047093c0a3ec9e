"""labledger: a local-first ledger for ML experiments.

Record every run down to each microbatch and sample, keep every prediction, compute metrics whose
definitions travel with their values, and publish it all as a static site.

>>> import tempfile, labledger
>>> d = tempfile.mkdtemp()
>>> with labledger.start_run("first", ledger=d) as run:
...     run.log(1, loss=0.7)
>>> [r.name for r in labledger.open_ledger(d).runs()]
['first']
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from labledger.errors import LedgerError, RecordError, RunNotFoundError

__version__ = "0.1.0"

if TYPE_CHECKING:
    from labledger import calibrate  # labledger.calibrate.fit / apply / report
    from labledger.analysis.evaluation import compare, evaluate
    from labledger.store import Ledger, Run, RunInfo, RunView, start_run

#: Names of labledger.store re-exported here, loaded on first use: `labledger --help` imports this
#: package and needs none of them.
_STORE_NAMES = ("Ledger", "Run", "RunInfo", "RunView", "start_run")


def __getattr__(name: str) -> Any:
    # calibrate, compare and evaluate load on first use (they pull in the metric kernels), so that
    # `import labledger` and the CLI's read commands start fast (issue 12); the store's names too.
    if name in _STORE_NAMES:
        from labledger import store

        return getattr(store, name)
    if name == "calibrate":
        import importlib

        return importlib.import_module("labledger.calibrate")
    if name in ("compare", "evaluate"):
        from labledger.analysis import evaluation

        return getattr(evaluation, name)
    raise AttributeError(f"module 'labledger' has no attribute {name!r}")


def open_ledger(
    path: str | os.PathLike[str] | None = None, *, create: bool = False, artifacts: str | os.PathLike[str] | None = None
) -> Ledger:
    """Open the ledger at ``path`` (else ``$LABLEDGER_DIR``, else ``./.labledger``).

    ``path`` may be a ``postgresql://user@host/db`` URL (team mode: the index in PostgreSQL); run
    files then live in ``artifacts`` (else ``$LABLEDGER_ARTIFACTS``), a folder every machine mounts.
    Raises :class:`labledger.errors.LedgerNotFoundError` when there is none, unless ``create``.
    """
    from labledger.store import Ledger

    return Ledger(path, create=create, artifacts=artifacts)


__all__ = [
    "Ledger",
    "LedgerError",
    "RecordError",
    "Run",
    "RunInfo",
    "RunNotFoundError",
    "RunView",
    "__version__",
    "calibrate",
    "compare",
    "evaluate",
    "open_ledger",
    "start_run",
]
