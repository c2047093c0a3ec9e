"""Append-only JSON Lines: one record per ``write(2)``, and readers that survive a torn last line.

Every record is serialised to one ``bytes`` object ending in a newline and handed to the kernel in a
single ``os.write`` on a file opened with ``O_APPEND``. Once ``append`` returns, the record is in the
OS page cache: a ``kill -9`` of the process cannot lose it (only a machine crash before ``fsync``
can). ``O_APPEND`` writes by several processes never interleave within a record on a local
filesystem, so DDP ranks or parallel sweeps can share a file.

A process killed in the middle of a write can leave a last line without its newline. Readers skip
that line with a warning naming the file and line; any other undecodable line is an error.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import RecordError, TornLineWarning

#: orjson options for every record the ledger writes.
DUMP_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


#: Where each kind of run record lives in a run folder (one append-only JSONL file per kind).
RECORD_FILES = {
    "scalars": "metrics.jsonl",
    "batches": "batches.jsonl",
    "history": "history.jsonl",
    "checkpoints": "checkpoints.jsonl",
    "notes": "notes.jsonl",
}


def dumps_line(record: Any) -> bytes:
    """One JSONL line (with its newline) for ``record``; raises ``TypeError`` for non-JSON values."""
    return orjson.dumps(record, option=DUMP_OPTIONS)


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd``: one syscall in practice; loops only on a short write."""
    written = os.write(fd, data)
    while written < len(data):  # only on signals / full disks; keeps the bytes contiguous otherwise
        written += os.write(fd, data[written:])


class Appender:
    """An append-only JSONL file. ``append`` returns once the line is in the kernel's hands."""

    __slots__ = ("fd", "path")

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def append(self, record: Any) -> None:
        write_all(self.fd, orjson.dumps(record, option=DUMP_OPTIONS))

    def append_bytes(self, line: bytes) -> None:
        write_all(self.fd, line)

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def iter_lines(path: str | os.PathLike[str], *, display: str | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` for each complete line (1-based, newline stripped).

    A last line with no newline is a torn write: it is skipped with a :class:`TornLineWarning`.
    Blank lines are skipped.
    """
    path = Path(path)
    name = display or str(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - only the open may raise FileNotFoundError
    except FileNotFoundError:
        return
    with f:
        for lineno, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                warnings.warn(
                    f"{name}:{lineno}: torn last line skipped ({len(raw)} bytes; its writer stopped mid-write)",
                    TornLineWarning,
                    stacklevel=3,
                )
                return
            if raw.strip():
                yield lineno, raw


def count_lines(path: str | os.PathLike[str]) -> int:
    """Number of complete records in a JSONL file (0 when it does not exist); nothing is decoded."""
    return sum(1 for _ in iter_lines(path))


def iter_decoded(path: str | os.PathLike[str], *, display: str | None = None) -> Iterator[tuple[int, bytes, Any]]:
    """``(line number, raw line without its newline, decoded value)`` for each complete line.

    A line that is not JSON raises :class:`RecordError` with file and line; a torn last line is
    skipped with a warning (see :func:`iter_lines`).
    """
    name = display or str(path)
    for lineno, raw in iter_lines(path, display=name):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RecordError(f"not valid JSON ({exc})", source=name, line=lineno) from None
        yield lineno, raw.rstrip(b"\r\n"), value


def read_jsonl(path: str | os.PathLike[str], *, display: str | None = None) -> Iterator[dict[str, Any]]:
    """Yield each record of a JSONL file; a bad line raises :class:`RecordError` with file and line."""
    for _, _, value in iter_decoded(path, display=display):
        yield value


def atomic_write(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: readers never see half."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        try:
            write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves neither half a file nor a temporary one
        raise


def write_json(path: str | os.PathLike[str], obj: Any, *, fsync: bool = True) -> None:
    """Atomically write one JSON document (indented, for people who open the folder)."""
    atomic_write(
        path,
        orjson.dumps(
            obj,
            option=orjson.OPT_INDENT_2
            | orjson.OPT_SERIALIZE_NUMPY
            | orjson.OPT_NON_STR_KEYS
            | orjson.OPT_APPEND_NEWLINE,
        ),
        fsync=fsync,
    )


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read one JSON document; a malformed file raises :class:`RecordError` naming it."""
    try:
        return orjson.loads(Path(path).read_bytes())
    except orjson.JSONDecodeError as exc:
        raise RecordError(f"not valid JSON ({exc})", source=str(path)) from None
