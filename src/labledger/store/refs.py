"""Where a results file is: a path, or ``RUN:NAME`` (the results a run stored under a name).

Every command that reads results (``eval``, ``compare``, ``sweep``, ``calibrate``) resolves its
argument here, so they agree on what ``RUN:NAME`` means: an existing path wins, anything with a
``:`` names a run (by id or name) and one of its stored result sets.

>>> import tempfile, pathlib, labledger
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> with labledger.start_run("demo", ledger=d / "ledger") as run:
...     _ = run.log_results("val", [{"id": "1", "task": "t", "gold": "a", "pred": "a"}])
>>> ref = resolve_results("demo:val", d / "ledger")
>>> ref.name, ref.path.name, ref.shown
('val', 'results.jsonl', 'demo:val')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from labledger.errors import RecordError


@dataclass(frozen=True)
class ResultsRef:
    """A resolved results argument: the file, how to show it, and the run and name it came from
    (``None`` for a plain file)."""

    path: Path
    shown: str
    run_id: str | None = None
    name: str | None = None

    @property
    def described(self) -> str:
        """``shown``, with the file's path when it came from a run."""
        return self.shown if self.run_id is None else f"{self.shown} ({self.path})"


def resolve_results(ref: str | os.PathLike[str], ledger: str | os.PathLike[str] | None = None) -> ResultsRef:
    """Resolve a results file or ``RUN:NAME`` in the ledger at ``ledger`` (default: ``$LABLEDGER_DIR``,
    else ``./.labledger``).

    Raises :class:`~labledger.errors.RecordError` for a missing file,
    :class:`~labledger.errors.RunNotFoundError` for an unknown run and
    :class:`~labledger.errors.UnknownNameError` (naming the stored ones) for an unknown result set.
    """
    text = os.fspath(ref)
    path = Path(text)
    if path.exists() or ":" not in text:
        if not path.exists():
            raise RecordError("no such results file (or RUN:NAME of a run's stored results)", source=text)
        return ResultsRef(path, text)
    from labledger.store.ledger import Ledger, default_ledger_path  # not for a plain file: ~0.1 s of imports

    run, _, name = text.partition(":")
    with Ledger(ledger if ledger is not None else default_ledger_path()) as book:
        view = book.run(run)
        return ResultsRef(view.results_path(name), text, view.id, name)


__all__ = ["ResultsRef", "resolve_results"]
