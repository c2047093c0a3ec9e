"""Where a results file is: a path, or ``RUN:NAME`` (the results a run stored under a name).

Every command that reads results (``eval``, ``compare``, ``sweep``, ``calibrate``) resolves its
argument here, so they agree on what ``RUN:NAME`` means: an existing path wins, anything with a
``:`` names a run (by id or name) and one of its stored result sets.

What they show and store as the source (an evaluation's ``source``, a recipe's ``fit.source``, a
calibration report's) is :attr:`ResultsRef.shown`: for a run named by its name (``mlp-h128:val``,
``mlp-h128@2:val``) or an id prefix, ``<name>:<results> (run <id>)``, which keeps pointing at that
run once another of the same name is logged (``@2`` would not); a run given by its whole id is
shown as given. Documents written before hold the form that was typed (``mlp-h128@2:val``); they
are read as they are (the text is never resolved again: the sha256 beside it identifies the file).

>>> import tempfile, pathlib, labledger
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> with labledger.start_run("demo", ledger=d / "ledger") as run:
...     _ = run.log_results("val", [{"id": "1", "task": "t", "gold": "a", "pred": "a"}])
>>> ref = resolve_results("demo:val", d / "ledger")
>>> ref.name, ref.path.name, ref.shown == f"demo:val (run {run.id})"
('val', 'results.jsonl', True)
>>> resolve_results(f"{run.id}:val", d / "ledger").shown == f"{run.id}:val"
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from labledger.errors import RecordError


@dataclass(frozen=True)
class ResultsRef:
    """A resolved results argument: the file, how to show (and store) it, and the run and name it
    came from (``None`` for a plain file). ``shown`` names a run by its id (see the module's doc)."""

    path: Path
    shown: str
    run_id: str | None = None
    name: str | None = None
    run_name: str | None = None
    #: The argument as given (``mlp-h128@2:val``), when it named a run.
    typed: str | None = None

    @property
    def described(self) -> str:
        """The argument as given, with the file's path (which names the run's id) when it came from a run."""
        return self.shown if self.run_id is None else f"{self.typed or self.shown} ({self.path})"


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
    from labledger.store.ledger import Ledger, default_ledger_path  # not imported for a plain file

    run, _, name = text.partition(":")
    with Ledger(ledger if ledger is not None else default_ledger_path()) as book:
        view = book.run(run)
        shown = text if run == view.id else f"{view.name}:{name} (run {view.id})"
        return ResultsRef(view.results_path(name), shown, view.id, name, view.name, text)


def expand_results(ref: str, ledger: str | os.PathLike[str] | None = None) -> list[str]:
    """``RUN:PATTERN`` with a ``*`` or ``?`` in the pattern: ``RUN:NAME`` of each stored result set
    of the run whose name matches, in natural order (``val-2`` before ``val-10``); anything else as
    given. A pattern that matches nothing raises :class:`~labledger.errors.UnknownNameError`.

    >>> import tempfile, pathlib, labledger
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "ledger"
    >>> with labledger.start_run("r", ledger=d) as run:
    ...     for k in (10, 2, 1):
    ...         _ = run.log_results(f"val-{k}", [{"id": "1", "task": "t", "gold": "a", "pred": "a"}])
    >>> expand_results("r:val-*", d)
    ['r:val-1', 'r:val-2', 'r:val-10']
    """
    import fnmatch
    import re

    run, sep, pattern = ref.partition(":")
    if not sep or not any(c in pattern for c in "*?") or Path(ref).exists():
        return [ref]
    from labledger.errors import UnknownNameError
    from labledger.store.ledger import Ledger, default_ledger_path

    with Ledger(ledger if ledger is not None else default_ledger_path()) as book:
        names = book.run(run).results_names()
    found = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not found:
        raise UnknownNameError(f"result set of run {run} matching", pattern, names)
    found.sort(key=lambda n: [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"(\d+)", n)])
    return [f"{run}:{n}" for n in found]


__all__ = ["ResultsRef", "expand_results", "resolve_results"]
