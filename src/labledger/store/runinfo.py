"""A row of the run index as Python sees it (:class:`RunInfo`), and the index columns it is read
from (:data:`INDEX_COLUMNS`, which the query language selects too).

>>> INDEX_COLUMNS[:3]
('id', 'name', 'grp')
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["INDEX_COLUMNS", "RENAMED_COLUMNS", "RunInfo", "run_duration"]


@dataclass
class RunInfo:
    """One row of the run index.

    >>> RunInfo("a1", "baseline", None, [], "finished", 0.0, 2.5, None, None, None, None, None).duration
    2.5
    """

    id: str
    name: str
    group: str | None
    tags: list[str]
    status: str
    started: float
    ended: float | None
    host: str | None
    pid: int | None
    git_commit: str | None
    git_dirty: bool | None
    error: str | None
    summary: dict[str, Any] = field(default_factory=dict)
    #: The run's folder (``<ledger>/runs/<id>`` for the rows of :meth:`Ledger.runs`).
    dir: Path | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end (to now while running)."""
        return run_duration(self.started, self.ended, self.status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "group": self.group,
            "tags": self.tags,
            "status": self.status,
            "started": self.started,
            "ended": self.ended,
            "duration": self.duration,
            "host": self.host,
            "pid": self.pid,
            "git_commit": self.git_commit,
            "git_dirty": self.git_dirty,
            "error": self.error,
            "summary": self.summary,
            "dir": str(self.dir) if self.dir else None,
        }


#: RunInfo fields that are no column of ``runs`` (``tags`` are rows of ``run_tags``; ``dir`` is the
#: ledger's folder), and the fields whose column has another name.
_NOT_COLUMNS = ("tags", "dir")
RENAMED_COLUMNS = {"group": "grp"}
#: The columns of ``runs`` that a :class:`RunInfo` is read from, in its fields' order.
INDEX_COLUMNS = tuple(RENAMED_COLUMNS.get(f.name, f.name) for f in fields(RunInfo) if f.name not in _NOT_COLUMNS)


def run_duration(started: float, ended: float | None, status: str) -> float | None:
    """Seconds from ``started`` to ``ended``, or to now while the run is running (``None``: ended unknown)."""
    end = ended if ended is not None else (time.time() if status == "running" else None)
    return None if end is None else max(0.0, end - started)
