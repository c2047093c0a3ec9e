"""Per-run counters in the index: records of each kind, steps, last values, first/last time.

A run keeps them as it logs and writes them to the index's ``runs.counters`` column (migration
``m007_run_counters``) with its summary, at most :data:`labledger.store.run.INDEX_INTERVAL` seconds
apart, so ``labledger show``, ``GET /api/runs/{run}`` and the run page answer without scanning the
run's files: their cost does not grow with the run's length.

The counters also remember where each record file ended (its size and modification time) when they
were taken. A reader brings them up to date by reading only what was appended since (the *tail*),
so the answer is exact even for a running run between two refreshes; a file that shrank or was
rewritten in place, or a run with no counters (logged by an older version, or by a process that
died before its first refresh), is scanned once from the start, and the counters of a run that no
longer logs are then stored for the next reader.

The JSON stored (``v`` is its version)::

    {"v": 1, "records": {"scalars": 3, "batches": 0, ...}, "files": {"metrics.jsonl": [size, mtime_ns]},
     "steps": 3, "last": {"loss": [0.2, 3]}, "first_time": 1764590000.1, "last_time": 1764590002.9}

``records`` counts complete lines as :func:`labledger.store.jsonl.count_lines` does; ``last`` maps
each scalar to its last logged value (``null`` for NaN) and the step it was logged at.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from labledger.store.compressed import open_record, record_state
from labledger.store.jsonl import RECORD_FILES

#: Counters format version (the ``v`` key of the stored JSON).
VERSION = 1
#: A tail up to this many bytes (all files together) is read to bring counters up to date; beyond
#: that a running run's counters are shown as its last refresh left them (at most a second old).
TAIL_LIMIT = 1 << 20


def is_time(t: Any) -> bool:
    """Whether a record's ``time`` counts as one for first/last time: a number, not a bool (the rule
    of :meth:`Counters.add_scalars` and of a live run's own counters).

    >>> is_time(1.5), is_time(None), is_time(True), is_time("12:00")
    (True, False, False, False)
    """
    return isinstance(t, (int, float)) and not isinstance(t, bool)


@dataclass
class Counters:
    """What ``show`` needs of a run's records, without reading them.

    >>> c = Counters()
    >>> c.add_scalars([{"step": 1, "time": 10.0, "loss": 0.9}, {"step": 2, "time": 11.0, "loss": None}])
    >>> c.records["scalars"], c.steps, c.last_scalars()["loss"]["step"], c.last_time
    (2, 2, 2, 11.0)
    """

    records: dict[str, int] = field(default_factory=dict)
    files: dict[str, list[int]] = field(default_factory=dict)
    steps: int | None = None
    last: dict[str, list[Any]] = field(default_factory=dict)
    first_time: float | None = None
    last_time: float | None = None

    # -- building -------------------------------------------------------------------------------
    def add_scalars(self, records: Iterable[Mapping[str, Any]], *, counted: bool = True) -> None:
        """Take scalar records (``step``, ``time`` and values) into account, in the order logged."""
        last = self.last
        n = 0
        steps = self.steps
        for rec in records:
            n += 1
            step = rec.get("step")
            t = rec.get("time")
            if is_time(t):
                if self.first_time is None:
                    self.first_time = t
                self.last_time = t
            if isinstance(step, int) and not isinstance(step, bool) and (steps is None or step > steps):
                steps = step
            for k, v in rec.items():
                if k != "step" and k != "time":
                    last[k] = [v, step]
        self.steps = steps
        if counted:
            self.records["scalars"] = self.records.get("scalars", 0) + n

    # -- reading --------------------------------------------------------------------------------
    def last_scalars(self) -> dict[str, dict[str, Any]]:
        """``{name: {"value", "step"}}`` as :meth:`labledger.RunView.last_scalars` gives it (NaN for null)."""
        return {k: {"value": math.nan if v is None else v, "step": s} for k, (v, s) in self.last.items()}

    def to_json(self) -> str:
        doc = {
            "v": VERSION,
            "records": self.records,
            "files": self.files,
            "steps": self.steps,
            "last": self.last,
            "first_time": self.first_time,
            "last_time": self.last_time,
        }
        return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()

    @classmethod
    def from_json(cls, text: str | bytes | None) -> Counters | None:
        """The counters stored in the index, or ``None`` (none stored, another version, unreadable)."""
        if not text:
            return None
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(doc, dict) or doc.get("v") != VERSION:
            return None
        return cls(
            records=dict(doc.get("records") or {}),
            files={k: list(v) for k, v in (doc.get("files") or {}).items()},
            steps=doc.get("steps"),
            last={k: list(v) for k, v in (doc.get("last") or {}).items()},
            first_time=doc.get("first_time"),
            last_time=doc.get("last_time"),
        )

    def copy(self) -> Counters:
        return Counters(
            records=dict(self.records),
            files={k: list(v) for k, v in self.files.items()},
            steps=self.steps,
            last={k: list(v) for k, v in self.last.items()},
            first_time=self.first_time,
            last_time=self.last_time,
        )


def file_state(path: Path) -> list[int] | None:
    """``[size, mtime_ns]`` of a record file, ``None`` when it does not exist (a compacted file:
    those of the JSONL it holds, so counters taken before compaction stay current)."""
    return record_state(path)


class _Damaged(Exception):
    """A damaged line in a tail: the counters are not brought up to date, the files are scanned."""


def _read_lines(
    path: Path, start: int, counters: Counters, kind: str, stats: Any = None, *, tail: bool = False
) -> int | None:
    """Count (and for scalars decode) the complete lines of ``path`` from byte ``start``; returns
    the offset after the last complete line (``None`` when the file does not exist).

    The lines counted are those :func:`labledger.store.jsonl.iter_lines` yields: blank lines are
    skipped, a valid last line without its newline counts, a torn one (a write in progress) does
    not and is read again next time. A whole-file scan warns of damaged scalar lines and a torn last
    line as the readers do; in a ``tail`` every line is checked and a damaged one raises
    :class:`_Damaged`. ``stats`` (a :class:`~labledger.store.fields.ScalarStats`) gets every
    scalar value folded in.
    """
    f = open_record(path)  # either form: a compacted file reads as its JSONL
    if f is None:
        return None
    decode = kind == "scalars" or tail
    scalars = kind == "scalars"
    n = 0
    pos = start
    lineno = 0
    batch: list[dict[str, Any]] = []
    with f:
        f.seek(start)
        for raw in f:
            lineno += 1
            if not raw.endswith(b"\n"):
                if not raw.strip():
                    pos += len(raw)
                    break
                try:
                    value = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    if not tail:  # torn: its writer is mid-write (or stopped); read again later
                        _warn(
                            f"{path}:{lineno}: torn last line skipped ({len(raw)} bytes; its writer stopped mid-write)",
                            True,
                        )
                    break
                pos += len(raw)
                n += 1
                if type(value) is dict:
                    if scalars:
                        batch.append(value)
                elif tail:
                    raise _Damaged
                break
            pos += len(raw)
            if not raw.strip():
                continue
            n += 1
            if decode:
                try:
                    value = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    if tail:
                        raise _Damaged from None
                    _warn(f"{path}:{lineno}: damaged line skipped (not valid JSON ({exc}))")
                    continue  # a damaged line counts as a line (count_lines) but has no values
                if type(value) is not dict:
                    if tail:
                        raise _Damaged
                    shown = "null" if value is None else type(value).__name__
                    _warn(f"{path}:{lineno}: damaged line skipped (must be a JSON object; got {shown})")
                    continue
                if scalars:
                    batch.append(value)
                    if len(batch) >= 4096:
                        _fold_scalars(counters, batch, stats)
                        batch = []
    if scalars:
        _fold_scalars(counters, batch, stats)
    counters.records[kind] = counters.records.get(kind, 0) + n
    return pos


def _warn(message: str, torn: bool = False) -> None:
    import warnings

    from labledger.errors import DamagedLineWarning, TornLineWarning

    warnings.warn(message, TornLineWarning if torn else DamagedLineWarning, stacklevel=4)


def _fold_scalars(counters: Counters, batch: list[dict[str, Any]], stats: Any) -> None:
    counters.add_scalars(batch, counted=False)
    if stats is not None and batch:
        stats.fold(batch)


def scan_run(run_dir: str | os.PathLike[str], *, stats: Any = None) -> Counters:
    """Counters of a run from its files, read whole (the fallback; also for crashed runs).

    ``stats`` (a :class:`~labledger.store.fields.ScalarStats`) gets every scalar value folded in,
    so the index's min/max come from the same single pass.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "metrics.jsonl").write_bytes(b'{"step": 1, "time": 5.0, "loss": 0.5}\\n{"step": 2, "loss": 0.25}\\n')
    >>> c = scan_run(d)
    >>> c.records["scalars"], c.records["batches"], c.last["loss"]
    (2, 0, [0.25, 2])
    """
    run_dir = Path(run_dir)
    counters = Counters()
    for kind, fname in RECORD_FILES.items():
        state = file_state(run_dir / fname)
        if state is None:
            if kind in ("scalars", "batches", "history", "checkpoints", "notes"):
                counters.records[kind] = 0
            continue
        end = _read_lines(run_dir / fname, 0, counters, kind, stats)
        if end is not None:
            counters.files[fname] = [end, state[1]]
    return counters


def tail_bytes(counters: Counters, run_dir: str | os.PathLike[str]) -> int | None:
    """Bytes appended to the run's record files since ``counters`` were taken, or ``None`` when a
    tail cannot bring them up to date: a file shrank, vanished or was rewritten (same size but
    another modification time, or a recorded end that is no longer the end of a line)."""
    run_dir = Path(run_dir)
    total = 0
    for fname in RECORD_FILES.values():
        path = run_dir / fname
        state = file_state(path)
        known = counters.files.get(fname)
        if state is None:
            if known is not None and known[0] > 0:
                return None
            continue
        start = 0 if known is None else known[0]
        if state[0] < start or (known is not None and state[0] == start and state[1] != known[1] and start > 0):
            return None
        if state[0] > start > 0 and not _at_line_end(path, start):
            return None
        total += state[0] - start
    return total


def _at_line_end(path: Path, offset: int) -> bool:
    try:
        f = open_record(path)
        if f is None:
            return False
        with f:
            f.seek(offset - 1)
            return f.read(1) == b"\n"
    except OSError:
        return False


def bring_up_to_date(counters: Counters, run_dir: str | os.PathLike[str]) -> Counters | None:
    """New counters: ``counters`` plus what was appended to the run's files since they were taken
    (check :func:`tail_bytes` first: only the tails are read), or ``None`` when a tail holds a
    damaged line (then the files are scanned whole, with the readers' warnings).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 0.5}\\n')
    >>> c = scan_run(d)
    >>> with open(d / "metrics.jsonl", "ab") as f:
    ...     _ = f.write(b'{"step": 2, "loss": 0.25}\\n')
    >>> tail_bytes(c, d), bring_up_to_date(c, d).last["loss"]
    (26, [0.25, 2])
    """
    run_dir = Path(run_dir)
    out = counters.copy()
    for kind, fname in RECORD_FILES.items():
        state = file_state(run_dir / fname)
        known = counters.files.get(fname)
        start = 0 if known is None else known[0]
        if state is None or state[0] <= start:
            continue
        try:
            end = _read_lines(run_dir / fname, start, out, kind, tail=True)
        except _Damaged:
            return None
        if end is not None:
            out.files[fname] = [end, state[1]]
    return out


def summary_of(counters: Counters) -> dict[str, Any]:
    """The index summary's counts and last values (``steps``, ``scalar_records``, ``batches``,
    ``history``, ``checkpoints``, ``last``) from counters.

    >>> summary_of(Counters(records={"scalars": 2}, steps=2, last={"loss": [0.25, 2]}))["last"]
    {'loss': 0.25}
    """
    rec = counters.records
    return {
        "scalar_records": rec.get("scalars", 0),
        "steps": counters.steps,
        "last": {k: v for k, (v, _) in counters.last.items()},
        "batches": rec.get("batches", 0),
        "history": rec.get("history", 0),
        "checkpoints": rec.get("checkpoints", 0),
    }
