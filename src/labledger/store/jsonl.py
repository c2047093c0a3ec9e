"""Append-only JSON Lines: one record per ``write(2)``, and readers that survive a torn last line.

Every record is serialised to one ``bytes`` object ending in a newline and handed to the kernel in a
single ``os.write`` on a file opened with ``O_APPEND``. Once ``append`` returns, the record is in the
OS page cache: a ``kill -9`` of the process cannot lose it (only a machine crash before ``fsync``
can). ``O_APPEND`` writes by several processes never interleave within a record on a local
filesystem, so DDP ranks or parallel sweeps can share a file.

A write the disk refuses (``ENOSPC``, ``EDQUOT``, ``EIO``, ``EROFS``) raises
:class:`~labledger.errors.StorageError` ("disk full: FILE: the record was not stored") after
truncating the file back to its last complete record, so nothing is glued onto a half line and the
next write works once space is freed. (A file is not "repaired" with a newline when it is reopened:
with several writers on one file, its last line may be another process's write in progress.)

Readers of record files skip every damaged line (not JSON, not a JSON object, a torn last line)
with a :class:`~labledger.errors.DamagedLineWarning` naming the file and line, and read all the
others. A valid last line without its newline is a complete record, not a torn one.

Records carry no sequence number or checksum: a record is one ``write(2)`` of a whole line, so the
only damage a crash or a full disk can do is a missing or partial line, which the JSON parser
already detects; ``step``/``microbatch`` order the records; the results files, checkpoints and
sites carry sha256s that ``labledger verify`` checks. A CRC per line would cost the hot path a
hash and make the files no longer plain JSON Lines for ``jq``, for protection against silent bit
rot that a filesystem checksum covers better.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import DamagedLineWarning, RecordError, TornLineWarning
from labledger.store.compressed import compressed_path, open_record, read_record_bytes, restore_plain
from labledger.store.files import (
    DISK_ERRNOS as DISK_ERRNOS,
)
from labledger.store.files import (
    RECORD_FILES as RECORD_FILES,
)
from labledger.store.files import (
    atomic_open as atomic_open,
)
from labledger.store.files import (
    atomic_write as atomic_write,
)
from labledger.store.files import (
    disk_error as disk_error,
)
from labledger.store.files import (
    fsync_dir as fsync_dir,
)
from labledger.store.files import (
    fsync_files as fsync_files,
)
from labledger.store.files import (
    remove_stale_temps as remove_stale_temps,
)

#: orjson options for every record the ledger writes.
DUMP_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def dumps_line(record: Any) -> bytes:
    """One JSONL line (with its newline) for ``record``; raises ``TypeError`` for non-JSON values."""
    return orjson.dumps(record, option=DUMP_OPTIONS)


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def write_all(fd: int, data: bytes, written: int = 0) -> None:
    """Write ``data`` to ``fd``: one syscall in practice; loops only on a short write.

    When the disk refuses part of it, the bytes already written are cut off again (the file ends
    at its last complete record) and :class:`StorageError` is raised. ``written`` is how many
    leading bytes of ``data`` the caller's own ``os.write`` already wrote (``Run.log`` inlines the
    first write), so that they are completed, or cut off with the rest.
    """
    try:
        if not written:
            written = os.write(fd, data)
        while written < len(data):  # only on signals / full disks; keeps the bytes contiguous otherwise
            written += os.write(fd, data[written:])
    except OSError as exc:
        if written:
            with contextlib.suppress(OSError):  # shrinking needs no space; O_APPEND: ours is the tail
                os.ftruncate(fd, os.fstat(fd).st_size - written)
        if exc.errno in DISK_ERRNOS:
            raise disk_error(exc, _fd_path(fd)) from None
        raise


class Appender:
    """An append-only JSONL file. ``append`` returns once the line is in the kernel's hands."""

    __slots__ = ("fd", "path")

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if compressed_path(self.path).is_file():  # a compacted record file gets appended to again
            restore_plain(self.path)
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno in DISK_ERRNOS:
                raise disk_error(exc, self.path, "cannot open for appending") from None
            raise

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


def _warn(message: str, category: type[Warning] = DamagedLineWarning) -> None:
    warnings.warn(message, category, stacklevel=4)


def iter_lines(path: str | os.PathLike[str], *, display: str | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` for each complete line (1-based, newline stripped).

    A finished run's compacted file (``X.jsonl.zst``, :mod:`labledger.store.compressed`) is read in
    its place, with the JSONL's line numbers.

    A last line with no newline is yielded when it is valid JSON (a complete record whose newline
    is missing) and otherwise skipped as torn, with a :class:`TornLineWarning`. Blank lines are
    skipped.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"
    >>> _ = p.write_bytes(b'{"step": 1}\\n\\n{"step": 2}')
    >>> [n for n, _ in iter_lines(p)]
    [1, 3]
    """
    path = Path(path)
    try:
        f = open_record(path, display=display)
    except IsADirectoryError:
        raise RecordError("is a folder, not a record file", source=display or str(path)) from None
    if f is None:
        return
    name = display or str(getattr(f, "name", path))
    with f:
        for lineno, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                if raw.strip():
                    try:
                        orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        _warn(
                            f"{name}:{lineno}: torn last line skipped ({len(raw)} bytes; its writer stopped mid-write)",
                            TornLineWarning,
                        )
                        return
                    yield lineno, raw
                return
            if raw.strip():
                yield lineno, raw


def count_lines(path: str | os.PathLike[str]) -> int:
    """Number of complete records in a JSONL file (0 when it does not exist); nothing is decoded."""
    return sum(1 for _ in iter_lines(path))


def decode_line(raw: bytes, name: str, lineno: int, *, objects: bool = True) -> Any:
    """One decoded line; :class:`RecordError` with file and line if it is not JSON (or not an object).

    >>> decode_line(b'{"a": 1}', "f.jsonl", 1)
    {'a': 1}
    >>> decode_line(b'null', "f.jsonl", 2)
    Traceback (most recent call last):
    ...
    labledger.errors.RecordError: f.jsonl:2: must be a JSON object; got null
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RecordError(f"not valid JSON ({exc})", source=name, line=lineno) from None
    if objects and type(value) is not dict:
        shown = "null" if value is None else type(value).__name__
        raise RecordError(f"must be a JSON object; got {shown}", source=name, line=lineno)
    return value


def iter_decoded(
    path: str | os.PathLike[str], *, display: str | None = None, damaged: str = "warn", objects: bool = True
) -> Iterator[tuple[int, bytes, Any]]:
    """``(line number, raw line without its newline, decoded value)`` for each complete line.

    A damaged line (not JSON; with ``objects``, not a JSON object) is skipped with a
    :class:`DamagedLineWarning` naming file and line (``damaged="warn"``, for the ledger's own
    record files) or raises :class:`RecordError` (``damaged="raise"``, for a user's input file). A
    torn last line is always skipped with a warning (see :func:`iter_lines`).
    """
    name = display or str(path)
    for lineno, raw in iter_lines(path, display=name):
        try:
            value = decode_line(raw, name, lineno, objects=objects)
        except RecordError as exc:
            if damaged == "raise":
                raise
            _warn(f"{exc.source}:{exc.line}: damaged line skipped ({exc.detail})")
            continue
        yield lineno, raw.rstrip(b"\r\n"), value


def read_jsonl(
    path: str | os.PathLike[str], *, display: str | None = None, damaged: str = "warn"
) -> Iterator[dict[str, Any]]:
    """Yield each record (a JSON object) of a JSONL file; damaged lines are skipped with a warning.

    ``damaged="raise"`` raises :class:`RecordError` with file and line instead.
    """
    for _, _, value in iter_decoded(path, display=display, damaged=damaged):
        yield value


def damaged_lines(path: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """``(line number, problem)`` for every damaged line of a record file (used by ``labledger verify``).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"
    >>> _ = p.write_bytes(b'{"step": 1}\\n{"st\\n[1]\\n{"step": 2}\\n{"ste')
    >>> [n for n, _ in damaged_lines(p)]
    [2, 3, 5]
    """
    out: list[tuple[int, str]] = []
    try:
        data = read_record_bytes(path)
    except FileNotFoundError:
        return out
    lines = data.split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            decode_line(raw, str(path), lineno)
        except RecordError as exc:
            torn = lineno == len(lines)
            out.append((lineno, "torn last line (no newline; its writer stopped mid-write)" if torn else exc.detail))
    return out


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
