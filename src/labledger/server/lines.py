"""Pages of an append-only JSONL file by record number, without reading it from the start each time.

:class:`LineIndex` remembers the byte offset of every ``STRIDE``-th record and how far it has
scanned; a request for records ``offset .. offset+limit`` scans only what was appended since the
last request, seeks to the nearest remembered record and reads forward. Only complete lines count
(a torn last line, a writer's record in flight, is not a record yet). A file that shrank or was
replaced (new inode) is indexed again from the start.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import orjson

from labledger.errors import RecordError
from labledger.store.compressed import open_record, opened_state

#: Remember the offset of every STRIDE-th record.
STRIDE = 256


class LineIndex:
    """Record offsets of one JSONL file (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self._reset(None)

    def _reset(self, ino: int | None) -> None:
        self.ino = ino
        self.scanned = 0  # bytes scanned (always at a line boundary)
        self.records = 0  # complete non-blank lines before ``scanned``
        self.marks: list[int] = []  # marks[i] = byte offset of record i * STRIDE

    def _scan(self, f) -> None:
        f.seek(self.scanned)
        pos = self.scanned
        for raw in iter(f.readline, b""):
            if not raw.endswith(b"\n"):
                break  # a torn or in-flight last line: not a record yet
            if raw.strip():
                if self.records % STRIDE == 0:
                    self.marks.append(pos)
                self.records += 1
            pos += len(raw)
        self.scanned = pos

    def page(self, offset: int, limit: int) -> tuple[list[bytes], int]:
        """Raw JSON of records ``offset .. offset + limit - 1`` (validated) and the record count."""
        f = open_record(self.path)  # a finished run's file may be compacted
        if f is None:
            return [], 0
        with f, self.lock:
            ino, size = opened_state(f)
            if ino != self.ino or size < self.scanned:
                self._reset(ino)
            self._scan(f)
            total = self.records
            if offset >= total or limit <= 0:
                return [], total
            mark = offset // STRIDE
            f.seek(self.marks[mark])
            index = mark * STRIDE
            out: list[bytes] = []
            end_byte = self.scanned
            while index < offset + limit and f.tell() < end_byte:
                raw = f.readline()
                if not raw.strip():
                    continue
                if index >= offset:
                    line = raw.rstrip(b"\r\n")
                    try:
                        orjson.loads(line)
                    except orjson.JSONDecodeError as exc:
                        raise RecordError(f"not valid JSON ({exc})", source=str(self.path), line=None) from None
                    out.append(line)
                index += 1
            return out, total


class LineIndexes:
    """A bounded cache of :class:`LineIndex` per file (least recently used goes first)."""

    def __init__(self, size: int = 256):
        self.size = size
        self._items: OrderedDict[Path, LineIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: Path) -> LineIndex:
        with self._lock:
            index = self._items.get(path)
            if index is None:
                index = self._items[path] = LineIndex(path)
            self._items.move_to_end(path)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return index

    def page(self, path: Path, offset: int, limit: int) -> tuple[list[bytes], int]:
        return self.get(path).page(offset, limit)
