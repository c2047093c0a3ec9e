"""Compressed record files of finished runs: zstd frames that end at line boundaries.

A finished run's large record files (``batches.jsonl``, ``metrics.jsonl``, ...) are *compacted*:
``X.jsonl`` becomes ``X.jsonl.zst``, a file in the `zstd seekable format
<https://github.com/facebook/zstd/blob/dev/contrib/seekable_format/zstd_seekable_compression_format.md>`_:
independent zstd frames (level 3, about :data:`FRAME_BYTES` of JSONL each, every frame ending at a
newline, each with its content size and checksum), then a skippable frame of labledger's (JSON: the
number of lines of each frame, and the sha256, content key, size and modification time of the
JSONL), then the seek table. ``zstdcat`` reads the file as it is; a seekable-format reader
(``pyzstd.SeekableZstdFile``, zstd's ``seekable_format`` library) seeks in it; labledger's readers
seek by frame, and line numbers stay the JSONL's (a frame knows how many lines come before it).
Files of the layout before the seekable format (its own index at the end) are read frame after
frame and rewritten by ``labledger compact --upgrade`` (:func:`upgrade_file`).

Which form is read: ``X.jsonl.zst`` when it exists, else ``X.jsonl``. The compressed file appears
only by an atomic rename, after it was written in full to a hidden temporary file, fsynced, and
decompressed again to the same sha256 as the JSONL; the JSONL is removed only after that. So a
crash at any moment leaves either the JSONL alone (the temporary file is ignored and removed by the
next compaction) or a verified ``X.jsonl.zst`` (with or without the JSONL it replaced, which is then
removed by the next compaction). A running run is never compacted (its ``.lock`` is held), and a
file that is appended to again is first turned back into plain JSONL (:func:`restore_plain`).

Damage: a frame that does not decompress (bit rot, a truncated copy) is read as blank lines, so the
other lines keep their numbers, with a :class:`~labledger.errors.DamagedLineWarning` naming the
file and its lines; a file whose index is unreadable is read frame after frame up to the damage.
``labledger verify`` checks every frame, the index and the sha256.

:func:`open_record` is the one way to open a record file in either form.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "metrics.jsonl"
>>> _ = p.write_bytes(b'{"step": 1}\\n{"step": 2}\\n')
>>> compact_file(p, min_bytes=0).after > 0, p.exists(), compressed_path(p).exists()
(True, False, True)
>>> with open_record(p) as f:
...     f.read()
b'{"step": 1}\\n{"step": 2}\\n'
"""

from __future__ import annotations

import bisect
import contextlib
import io
import os
import struct
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from labledger.errors import DamagedLineWarning, StorageError
from labledger.store.files import DISK_ERRNOS, RECORD_FILES, atomic_open, atomic_write, disk_error, fsync_dir

#: The compressed form of ``X.jsonl`` is ``X.jsonl`` + SUFFIX.
SUFFIX = ".zst"
#: JSONL bytes per frame (a frame ends at the first newline at or after this many bytes).
FRAME_BYTES = 1 << 20
#: zstd level (docs/performance.md has its size and speed).
LEVEL = 3
#: Record files smaller than this stay plain JSONL at finish (they are small; ``jq`` reads them).
COMPACT_MIN_BYTES = 1 << 20
#: Environment variable overriding COMPACT_MIN_BYTES at finish (``off``: never compact at finish).
COMPACT_ENV = "LABLEDGER_COMPACT_MIN_BYTES"
#: Bump when labledger's index frame changes (1: its own footer, before the seekable format).
INDEX_VERSION = 2

# The zstd seekable format (zstd's contrib/seekable_format): a skippable frame with this magic
# number ends the file, holding the seek table; its footer is <frames u32, descriptor u8, magic u32>.
_SEEK_TABLE_MAGIC = 0x184D2A5E
_SEEKABLE_MAGIC = 0x8F92EAB1
_FOOTER_LEN = 9
# labledger's own skippable frame (any of 0x184D2A50..5F is skippable), just before the seek table.
_OWN_MAGIC = 0x184D2A5D
# The footer of the layout before the seekable format (INDEX_VERSION 1).
_OLD_FOOTER = b"LLZIDX01"


def compact_min_bytes() -> int | None:
    """The smallest record file compacted at finish: ``$LABLEDGER_COMPACT_MIN_BYTES`` (``off``:
    none), else :data:`COMPACT_MIN_BYTES`.

    >>> compact_min_bytes() == COMPACT_MIN_BYTES or COMPACT_ENV in os.environ
    True
    """
    raw = os.environ.get(COMPACT_ENV)
    if raw is None:
        return COMPACT_MIN_BYTES
    if raw.strip().lower() in ("off", "none", "no", "false"):
        return None
    try:
        return max(0, int(raw))
    except ValueError:
        return COMPACT_MIN_BYTES


def compressed_path(path: str | os.PathLike[str]) -> Path:
    """Where the compressed form of record file ``path`` lives.

    >>> compressed_path("run/batches.jsonl").name
    'batches.jsonl.zst'
    """
    p = Path(path)
    return p.with_name(p.name + SUFFIX)


def plain_path(path: str | os.PathLike[str]) -> Path:
    """The JSONL name of a record file given either name.

    >>> plain_path("run/batches.jsonl.zst").name, plain_path("run/batches.jsonl").name
    ('batches.jsonl', 'batches.jsonl')
    """
    p = Path(path)
    return p.with_name(p.name[: -len(SUFFIX)]) if p.name.endswith(SUFFIX) else p


# -- the index ------------------------------------------------------------------------------------
@dataclass
class FrameIndex:
    """The index of a compressed record file: frames and what the JSONL was.

    ``frames`` holds ``[offset, compressed size, JSONL size, newlines]`` per frame.
    """

    frames: list[list[int]]
    size: int
    sha256: str
    key: str
    mtime_ns: int
    lines: int
    starts: list[int] = field(default_factory=list)  # JSONL offset of each frame
    first_lines: list[int] = field(default_factory=list)  # 1-based line number each frame starts at

    def __post_init__(self) -> None:
        pos, line = 0, 1
        self.starts, self.first_lines = [], []
        for _, _, rsize, nl in self.frames:
            self.starts.append(pos)
            self.first_lines.append(line)
            pos += rsize
            line += nl

    def to_bytes(self) -> bytes:
        """The file's tail: labledger's skippable frame (this index as JSON, its length last), then
        the seek table of the zstd seekable format. The seek table has an entry per data frame; the
        last entry's compressed size also covers labledger's frame (a skippable frame that any
        decompressor passes over), so the entries tile the file up to the seek table. A file with
        no data frame has one entry: labledger's frame, holding nothing."""
        doc = {
            "v": INDEX_VERSION,
            "newlines": [fr[3] for fr in self.frames],
            "size": self.size,
            "sha256": self.sha256,
            "key": self.key,
            "mtime_ns": self.mtime_ns,
            "lines": self.lines,
        }
        body = orjson.dumps(doc)
        payload = body + struct.pack("<I", len(body))
        ours = struct.pack("<II", _OWN_MAGIC, len(payload)) + payload
        entries = [[csize, rsize] for _, csize, rsize, _ in self.frames] or [[0, 0]]
        entries[-1][0] += len(ours)
        table = b"".join(struct.pack("<II", c, d) for c, d in entries)
        table += struct.pack("<IBI", len(entries), 0, _SEEKABLE_MAGIC)
        return ours + struct.pack("<II", _SEEK_TABLE_MAGIC, len(table)) + table

    def frame_at(self, pos: int) -> int:
        """The frame holding JSONL byte ``pos`` (the last frame when ``pos`` is at the end)."""
        return max(0, bisect.bisect_right(self.starts, pos) - 1)


def read_index(zpath: str | os.PathLike[str], f: IO[bytes] | None = None) -> FrameIndex | None:
    """The index of compressed file ``zpath``, or ``None`` when it is missing, inconsistent, or of
    the layout labledger wrote before the seekable format (:func:`is_old_layout`)."""
    own = f is None
    try:
        if f is None:
            f = open(zpath, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return None
    try:
        end = f.seek(0, os.SEEK_END)
        if end < _FOOTER_LEN + 8:
            return None
        f.seek(end - _FOOTER_LEN)
        n, descriptor, magic = struct.unpack("<IBI", f.read(_FOOTER_LEN))
        table_len = 8 + 8 * n + _FOOTER_LEN
        if magic != _SEEKABLE_MAGIC or descriptor != 0 or n == 0 or table_len > end:
            return None
        f.seek(end - table_len)
        table = f.read(table_len)
        if struct.unpack_from("<II", table) != (_SEEK_TABLE_MAGIC, table_len - 8):
            return None
        entries = [list(e) for e in struct.iter_unpack("<II", table[8 : 8 + 8 * n])]
        ours_end = end - table_len
        f.seek(ours_end - 4)
        (body_len,) = struct.unpack("<I", f.read(4))
        ours_len = 8 + body_len + 4
        if ours_len > ours_end:
            return None
        f.seek(ours_end - ours_len)
        head = f.read(8)
        if struct.unpack("<II", head) != (_OWN_MAGIC, body_len + 4):
            return None
        doc = orjson.loads(f.read(body_len))
        if not isinstance(doc, dict) or doc.get("v") != INDEX_VERSION:
            return None
        newlines = [int(x) for x in doc["newlines"]]
        entries[-1][0] -= ours_len  # the last entry covers labledger's frame too
        if newlines == [] and entries == [[0, 0]]:
            entries = []
        if len(newlines) != len(entries) or any(c <= 0 for c, _ in entries):
            return None
        frames, pos = [], 0
        for (csize, rsize), nl in zip(entries, newlines, strict=True):
            frames.append([pos, csize, rsize, nl])
            pos += csize
        index = FrameIndex(
            frames=frames,
            size=int(doc["size"]),
            sha256=str(doc["sha256"]),
            key=str(doc["key"]),
            mtime_ns=int(doc["mtime_ns"]),
            lines=int(doc["lines"]),
        )
    except (OSError, ValueError, KeyError, TypeError, struct.error, orjson.JSONDecodeError):
        return None
    finally:
        if own:
            f.close()
    if pos != ours_end - ours_len or sum(fr[2] for fr in index.frames) != index.size:
        return None
    return index


def is_old_layout(zpath: str | os.PathLike[str]) -> bool:
    """Whether compressed file ``zpath`` has the layout of labledger before the seekable format (an
    index of its own at the end): still zstd that ``zstdcat`` reads, read here frame after frame;
    ``labledger compact --upgrade`` rewrites it (:func:`upgrade_file`)."""
    try:
        with open(zpath, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            if end < len(_OLD_FOOTER):
                return False
            f.seek(end - len(_OLD_FOOTER))
            return f.read() == _OLD_FOOTER
    except OSError:
        return False


# -- reading --------------------------------------------------------------------------------------
def _warn(message: str) -> None:
    warnings.warn(message, DamagedLineWarning, stacklevel=5)


class _FrameReader(io.RawIOBase):
    """The JSONL bytes of a compressed record file, read frame by frame (seekable with an index)."""

    def __init__(self, zpath: Path, f: IO[bytes], index: FrameIndex | None, display: str):
        super().__init__()
        import zstandard

        self._zpath = zpath
        self._f = f
        self._index = index
        self._display = display
        self._dctx = zstandard.ZstdDecompressor()
        self._error = zstandard.ZstdError
        self._frame = -1
        self._buf = b""
        self._at = 0  # offset inside _buf
        self._pos = 0  # JSONL offset of _buf[_at]
        self._stream: Any = None
        self._done = False
        if index is None:
            if not is_old_layout(zpath):
                _warn(f"{display}: the index of the compressed file is unreadable; reading its frames in order")
            f.seek(0)
            self._stream = self._dctx.stream_reader(f, read_across_frames=True, closefd=False)
            self._line = 1

    @property
    def name(self) -> str:
        return str(self._zpath)

    # io.RawIOBase
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    @property
    def size(self) -> int:
        """The JSONL's size (-1 when the index is unreadable)."""
        return self._index.size if self._index is not None else -1

    @property
    def stored(self) -> Path:
        return self._zpath

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            if pos == 0:
                return self._pos
            pos += self._pos
        elif whence == os.SEEK_END:
            if self._index is None:
                raise io.UnsupportedOperation("seek from the end of a compressed record file without its index")
            pos += self._index.size
        if self._index is None:
            return self._seek_in_order(max(0, pos))
        pos = max(0, min(pos, self._index.size))
        k = self._index.frame_at(pos)
        if k != self._frame and self._index.frames:
            self._load(k)
        self._at = pos - (self._index.starts[k] if self._index.frames else 0)
        self._pos = pos
        return pos

    def readinto(self, b: Any) -> int:
        if self._at >= len(self._buf) and not self._next():
            return 0
        n = min(len(b), len(self._buf) - self._at)
        b[:n] = self._buf[self._at : self._at + n]
        self._at += n
        self._pos += n
        return n

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                if self._stream is not None:
                    self._stream.close()
            self._f.close()
        super().close()

    def _seek_in_order(self, pos: int) -> int:
        """Seek without an index: read forward (from the start again when going back)."""
        if pos < self._pos:
            self._stream.close()
            self._f.seek(0)
            self._stream = self._dctx.stream_reader(self._f, read_across_frames=True, closefd=False)
            self._line, self._buf, self._at, self._pos, self._done = 1, b"", 0, 0, False
        while self._pos < pos:
            if self._at >= len(self._buf) and not self._next():
                break
            n = min(pos - self._pos, len(self._buf) - self._at)
            self._at += n
            self._pos += n
        return self._pos

    # frames
    def _load(self, k: int) -> None:
        assert self._index is not None
        off, csize, rsize, nl = self._index.frames[k]
        self._f.seek(off)
        data = self._f.read(csize)
        try:
            out = self._dctx.decompress(data, max_output_size=rsize)
            if len(out) != rsize:
                raise self._error(f"{len(out)} bytes instead of {rsize}")
        except self._error as exc:
            first = self._index.first_lines[k]
            _warn(
                f"{self._display}:{first}-{first + max(nl - 1, 0)}: damaged compressed frame {k} skipped "
                f"({nl} line(s) unreadable: {exc})"
            )
            out = b" " * (rsize - nl) + b"\n" * nl  # blank lines: the later lines keep their numbers
        self._frame = k
        self._buf = out
        self._at = 0

    def _next(self) -> bool:
        if self._index is not None:
            k = self._frame + 1
            if k >= len(self._index.frames):
                return False
            self._load(k)
            return True
        if self._done:
            return False
        try:
            chunk = self._stream.read(FRAME_BYTES)
        except self._error as exc:
            _warn(f"{self._display}:{self._line}: compressed file damaged from here on; the rest skipped ({exc})")
            chunk = b""
        if not chunk:
            self._done = True
            return False
        self._line += chunk.count(b"\n")
        self._buf, self._at = chunk, 0
        return True


def _open_if_there(path: Path) -> IO[bytes] | None:
    """``path`` opened for reading, or ``None`` when it (or a folder above it) is not there."""
    try:
        return open(path, "rb")
    except (FileNotFoundError, NotADirectoryError):
        return None


def open_record(path: str | os.PathLike[str], *, display: str | None = None) -> IO[bytes] | None:
    """Open record file ``path`` (``X.jsonl``) for reading in whichever form it is stored: the
    compressed ``X.jsonl.zst`` when it exists, else the JSONL; ``None`` when neither exists.

    The file object reads the JSONL's bytes (``read``, ``readline``, iteration by line, and ``seek``
    / ``tell`` in JSONL offsets). Damaged frames are read as blank lines with a warning naming
    ``display`` (default: the compressed file's path) and the lines lost.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"
    >>> open_record(p) is None
    True
    >>> _ = p.write_bytes(b'{"step": 1}\\n')
    >>> with open_record(p) as f:
    ...     [line for line in f]
    [b'{"step": 1}\\n']
    """
    path = Path(path)
    zpath = compressed_path(path)
    # the compressed form first, then the JSONL, then the compressed form again: a finished run
    # compacted between the first two opens has its JSONL gone and its .zst in place (a reader
    # of a live page saw its record count drop to 0 in that gap)
    zf = _open_if_there(zpath)
    if zf is None:
        plain = _open_if_there(path)
        if plain is not None:
            return plain
        zf = _open_if_there(zpath)
        if zf is None:
            return None
    index = read_index(zpath, zf)
    raw = _FrameReader(zpath, zf, index, display or str(zpath))
    return io.BufferedReader(raw, buffer_size=1 << 16)


def opened_state(f: IO[bytes]) -> tuple[int, int]:
    """``(inode of the stored file, JSONL size)`` of a file :func:`open_record` returned (size -1:
    a compressed file whose index is unreadable)."""
    raw = getattr(f, "raw", None)
    if isinstance(raw, _FrameReader):
        return os.stat(raw.stored).st_ino, raw.size
    st = os.fstat(f.fileno())
    return st.st_ino, st.st_size


def is_compressed(path: str | os.PathLike[str]) -> bool:
    """Whether record file ``path`` is stored compressed (its ``.zst`` exists)."""
    return compressed_path(path).is_file()


def record_exists(path: str | os.PathLike[str]) -> bool:
    """Whether record file ``path`` exists in either form."""
    return compressed_path(path).is_file() or Path(path).is_file()


def record_state(path: str | os.PathLike[str]) -> list[int] | None:
    """``[JSONL size, modification time (ns)]`` of a record file in either form (the compressed
    file reports the JSONL it holds, so counters taken before compaction stay current); ``None``
    when it does not exist."""
    path = Path(path)
    zpath = compressed_path(path)
    try:
        st = os.stat(zpath)
    except FileNotFoundError:
        try:
            st = os.stat(path)
        except FileNotFoundError:  # compacted between the two looks (open_record), or missing
            try:
                st = os.stat(zpath)
            except FileNotFoundError:
                return None
        else:
            return [st.st_size, st.st_mtime_ns]
    index = read_index(zpath)
    if index is None:
        return [-1, st.st_mtime_ns]  # unknown: readers rescan
    return [index.size, index.mtime_ns]


def read_record_bytes(path: str | os.PathLike[str], *, display: str | None = None) -> bytes:
    """The JSONL bytes of record file ``path`` in either form (``FileNotFoundError`` when missing;
    a compressed file gives a ``bytearray``, decompressed into one buffer).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"; _ = p.write_bytes(b'{"a": 1}\\n')
    >>> _ = compact_file(p, min_bytes=0)
    >>> bytes(read_record_bytes(p))
    b'{"a": 1}\\n'
    """
    path = Path(path)
    zpath = compressed_path(path)
    if not zpath.is_file():
        try:
            return path.read_bytes()
        except FileNotFoundError:  # compacted between the two looks (open_record), or missing
            if not zpath.is_file():
                raise
    f = open_record(path, display=display)
    if f is None:  # pragma: no cover - removed between the two calls
        raise FileNotFoundError(str(path))
    with f:
        raw = getattr(f, "raw", None)
        if not isinstance(f, io.BufferedReader) or not isinstance(raw, _FrameReader) or raw.size < 0:
            return f.read()  # plain, or compressed without its index (read in order)
        size = raw.size
        out = bytearray(size)  # one buffer, filled frame by frame: no second copy of the JSONL
        view = memoryview(out)
        pos = 0
        while pos < size:
            n = f.readinto(view[pos:])
            if not n:
                break
            pos += n
        view.release()
        return bytes(out) if pos < size else out  # type: ignore[return-value]


def record_key(path: str | os.PathLike[str]) -> str | None:
    """The columnar cache's content key (:func:`labledger.inputs.columnar.content_key`) of the JSONL
    of record file ``path``: from the index of a compressed file (no decompression), else hashed."""
    from labledger.inputs.columnar import file_key

    zpath = compressed_path(path)
    if zpath.is_file():
        index = read_index(zpath)
        return index.key if index is not None else None
    return file_key(path)


# -- writing --------------------------------------------------------------------------------------
def _chunks(f: IO[bytes], frame_bytes: int) -> Iterator[bytes]:
    """The file's bytes in pieces of at least ``frame_bytes`` that end at a newline (the last one
    ends where the file does)."""
    rest = b""
    while True:
        block = f.read(frame_bytes)
        if not block:
            if rest:
                yield rest
            return
        data = rest + block
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        yield data[: cut + 1]
        rest = data[cut + 1 :]


@dataclass
class Compaction:
    """What :func:`compact_file` did (or, with ``dry_run``, would do) to one record file."""

    path: str
    action: str  # "compacted", "would compact", "skipped: ..."
    before: int = 0
    after: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "action": self.action, "before": self.before, "after": self.after}


def _no_step(step: str) -> None:
    return None


def write_compressed(
    src: IO[bytes],
    dest: IO[bytes],
    *,
    mtime_ns: int,
    frame_bytes: int = FRAME_BYTES,
    level: int = LEVEL,
    on_step: Callable[[str], None] = _no_step,
) -> FrameIndex:
    """Compress the JSONL read from ``src`` into ``dest`` (frames, then the index); return the index."""
    import hashlib  # here, not at the top: opening a ledger (`labledger runs`) loads no OpenSSL

    import xxhash
    import zstandard

    cctx = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
    sha = hashlib.sha256()
    xx = xxhash.xxh3_128()
    frames: list[list[int]] = []
    offset = size = lines = 0
    for chunk in _chunks(src, frame_bytes):
        sha.update(chunk)
        xx.update(chunk)
        comp = cctx.compress(chunk)
        dest.write(comp)
        nl = chunk.count(b"\n")
        frames.append([offset, len(comp), len(chunk), nl])
        offset += len(comp)
        size += len(chunk)
        lines += nl
        if len(frames) == 1:
            on_step("frame")
    index = FrameIndex(
        frames=frames,
        size=size,
        sha256=sha.hexdigest(),
        key=f"xxh3_128:{xx.hexdigest()}:{size}",
        mtime_ns=mtime_ns,
        lines=lines,
    )
    dest.write(index.to_bytes())
    return index


def _tmp_of(zpath: Path) -> Path:
    return zpath.with_name(f".{zpath.name}.{os.getpid()}.tmp")


def _remove_stale_tmps(zpath: Path) -> None:
    for stale in zpath.parent.glob(f".{zpath.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()


def _replace_verified(
    src: IO[bytes],
    zpath: Path,
    *,
    mtime_ns: int,
    what: str,
    kept: str,
    frame_bytes: int = FRAME_BYTES,
    on_step: Callable[[str], None] = _no_step,
    changed: Callable[[FrameIndex], bool] | None = None,
) -> FrameIndex | None:
    """Compress ``src`` into a hidden temporary file beside ``zpath`` (``frame``), fsync it
    (``written``), decompress it again to the sha256 of what was read (``verified``: else a
    :class:`~labledger.errors.StorageError`, ``what`` did not verify), and rename it to ``zpath``
    with the folder fsynced (``renamed``). ``None``, and nothing written, when ``changed(index)`` says
    the source changed meanwhile. Any failure removes the temporary file; its errors end in ``kept``
    (what was left as it was), a full disk's in one line."""
    _remove_stale_tmps(zpath)
    tmp = _tmp_of(zpath)
    try:
        with open(tmp, "wb") as dest:
            index = write_compressed(src, dest, mtime_ns=mtime_ns, frame_bytes=frame_bytes, on_step=on_step)
            dest.flush()
            os.fsync(dest.fileno())
        on_step("written")
        if changed is not None and changed(index):
            tmp.unlink(missing_ok=True)
            return None
        check = _verify_tmp(tmp, index)  # the file as on disk, decompressed, is what was read
        if check is not None:
            raise StorageError(f"{what} did not verify ({check}); {kept}")
        on_step("verified")
        os.replace(tmp, zpath)
        fsync_dir(zpath.parent)
        on_step("renamed")
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno in DISK_ERRNOS:
            raise disk_error(exc, zpath, f"the compressed file was not written; {kept}") from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return index


def compact_file(
    path: str | os.PathLike[str],
    *,
    min_bytes: int = COMPACT_MIN_BYTES,
    dry_run: bool = False,
    frame_bytes: int = FRAME_BYTES,
    on_step: Callable[[str], None] = _no_step,
) -> Compaction:
    """Replace record file ``path`` (``X.jsonl``) by its verified compressed form ``X.jsonl.zst``.

    Steps (each safe to crash after; ``on_step`` is called with each name, for tests): the JSONL
    is compressed into a hidden temporary file (``frame`` after the first frame) and fsynced
    (``written``); the temporary file is decompressed again and its sha256 compared with the
    JSONL's (``verified``); it is renamed to ``X.jsonl.zst`` and the folder fsynced (``renamed``:
    from here the compressed file is read); the JSONL is removed (``removed``). Idempotent: a file
    already compacted is skipped (a JSONL left beside a verified ``X.jsonl.zst`` by a crash is
    removed once its bytes are the compressed file's, or their beginning). Files under ``min_bytes``
    are left as they are.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "batches.jsonl"; _ = p.write_bytes(b'{"microbatch": 1}\\n' * 100)
    >>> compact_file(p, min_bytes=0, dry_run=True).action
    'would compact'
    >>> compact_file(p, min_bytes=0).action, compact_file(p, min_bytes=0).action
    ('compacted', 'skipped: already compacted')
    """

    path = Path(path)
    zpath = compressed_path(path)
    if zpath.is_file():
        index = read_index(zpath)
        if path.is_file() and index is not None:  # a crash after the rename: finish the job
            if dry_run:
                return Compaction(str(path), "would remove the JSONL already compacted", path.stat().st_size)
            if is_prefix(path, zpath):  # the same bytes (a crash after the rename), or their beginning
                path.unlink()
                fsync_dir(path.parent)
                return Compaction(str(path), "removed the JSONL already compacted", index.size, zpath.stat().st_size)
            return Compaction(str(path), "skipped: the JSONL differs from its compressed copy (run `labledger verify`)")
        if not dry_run:
            _remove_stale_tmps(zpath)
        return Compaction(str(path), "skipped: already compacted", 0, zpath.stat().st_size)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Compaction(str(path), "skipped: no such file")
    if st.st_size == 0:
        return Compaction(str(path), "skipped: empty")
    if st.st_size < min_bytes:
        return Compaction(str(path), f"skipped: under {min_bytes} bytes", st.st_size)
    if dry_run:
        return Compaction(str(path), "would compact", st.st_size)

    def changed(index: FrameIndex) -> bool:
        now = os.stat(path)
        return (now.st_size, now.st_mtime_ns) != (st.st_size, st.st_mtime_ns) or index.size != st.st_size

    with open(path, "rb") as src:
        written = _replace_verified(
            src,
            zpath,
            mtime_ns=st.st_mtime_ns,
            frame_bytes=frame_bytes,
            on_step=on_step,
            changed=changed,
            what=f"{path}: compaction",
            kept="the JSONL was kept",
        )
    if written is None:
        return Compaction(str(path), "skipped: the file changed while it was compacted")
    path.unlink()
    on_step("removed")
    fsync_dir(path.parent)
    return Compaction(str(path), "compacted", st.st_size, zpath.stat().st_size)


def upgrade_file(path: str | os.PathLike[str], *, dry_run: bool = False) -> Compaction:
    """Rewrite the compressed form of record file ``path`` from the layout before the zstd
    seekable format (:func:`is_old_layout`) into the current one, as :func:`compact_file` writes
    it: decompressed (every frame checked against its zstd checksum), compressed into a hidden
    temporary file, verified, fsynced and renamed over the old file. A file that does not
    decompress in full is left as it is (``labledger verify`` names its damage).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"; _ = p.write_bytes(b'{"a": 1}\\n')
    >>> _ = compact_file(p, min_bytes=0)
    >>> upgrade_file(p).action
    'skipped: current layout'
    """
    import zstandard

    path = Path(path)
    zpath = compressed_path(path)
    if not is_old_layout(zpath):
        return Compaction(str(path), "skipped: current layout" if zpath.is_file() else "skipped: not compressed")
    before = zpath.stat().st_size
    if dry_run:
        return Compaction(str(path), "would upgrade", before)
    try:
        with open(zpath, "rb") as old:
            stream = zstandard.ZstdDecompressor().stream_reader(old, read_across_frames=True, closefd=False)
            _replace_verified(
                stream,
                zpath,
                mtime_ns=os.stat(zpath).st_mtime_ns,
                what=f"{zpath}: the upgraded file",
                kept="the old file was kept",
            )
    except zstandard.ZstdError as exc:
        return Compaction(str(path), f"skipped: damaged ({exc}; run `labledger verify`)", before)
    return Compaction(str(path), "upgraded", before, zpath.stat().st_size)


def compact_run(
    run_dir: str | os.PathLike[str],
    *,
    min_bytes: int = COMPACT_MIN_BYTES,
    dry_run: bool = False,
    held: bool = False,
    frame_bytes: int = FRAME_BYTES,
    upgrade: bool = False,
) -> list[Compaction]:
    """Compact every record file of the run folder ``run_dir`` of at least ``min_bytes`` bytes (see
    :func:`compact_file`); ``upgrade``: also rewrite compressed files of the layout before the
    seekable format (:func:`upgrade_file`). A running run (its ``.lock`` held by the writer) is left
    alone; ``held``: the caller is that writer, finishing (:meth:`labledger.Run.finish`).

    >>> import tempfile, labledger
    >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
    ...     run.log(1, loss=0.5)
    >>> [c.action for c in compact_run(run.dir, min_bytes=0)]  # metrics.jsonl, and an empty batches.jsonl
    ['compacted', 'skipped: empty']
    """
    import fcntl

    run_dir = Path(run_dir)
    lock_fd = -1
    if not held:
        try:
            lock_fd = os.open(run_dir / ".lock", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
        else:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(lock_fd)
                return [Compaction(str(run_dir), "skipped: the run is running")]
    try:
        out = []
        for fname in RECORD_FILES.values():
            path = run_dir / fname
            if upgrade and is_old_layout(compressed_path(path)):
                out.append(upgrade_file(path, dry_run=dry_run))
            elif path.is_file() or compressed_path(path).is_file():
                out.append(compact_file(path, min_bytes=min_bytes, dry_run=dry_run, frame_bytes=frame_bytes))
        return out
    finally:
        if lock_fd >= 0:
            os.close(lock_fd)


def is_prefix(path: Path, zpath: Path) -> bool:
    """Whether the bytes of plain file ``path`` are the compressed file's JSONL or its beginning."""
    f = open_record(path)  # the compressed form: it exists
    if f is None:  # pragma: no cover - removed meanwhile
        return False
    with f, open(path, "rb") as plain:
        while block := plain.read(1 << 20):
            if f.read(len(block)) != block:
                return False
    return True


def _verify_tmp(tmp: Path, index: FrameIndex) -> str | None:
    """``None`` when ``tmp`` decompresses, frame by frame, to the sha256 recorded in ``index``."""
    problems = check_compressed(tmp, expect=index)
    return problems[0][1] if problems else None


def check_compressed(
    zpath: str | os.PathLike[str], *, expect: FrameIndex | None = None
) -> list[tuple[int | None, str]]:
    """Problems of a compressed record file: ``(first line or None, what)`` for an unreadable
    index, each frame that does not decompress to its size, and a content sha256 other than the
    index's (or ``expect``'s). Empty when it is sound.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"; _ = p.write_bytes(b'{"a": 1}\\n' * 10)
    >>> _ = compact_file(p, min_bytes=0)
    >>> check_compressed(compressed_path(p))
    []
    """
    import zstandard

    zpath = Path(zpath)
    index = read_index(zpath)
    if index is None and is_old_layout(zpath):
        return [(None, "written in labledger's layout before the zstd seekable format (`labledger compact --upgrade`)")]
    if index is None:
        return [(None, "the compressed file's index is missing or unreadable (a torn or truncated file)")]
    if expect is not None and (index.sha256, index.size) != (expect.sha256, expect.size):
        return [(None, "the index does not describe the JSONL compressed")]
    import hashlib

    dctx = zstandard.ZstdDecompressor()
    h = hashlib.sha256()
    out: list[tuple[int | None, str]] = []
    with open(zpath, "rb") as f:
        for k, (off, csize, rsize, nl) in enumerate(index.frames):
            f.seek(off)
            data = f.read(csize)
            first = index.first_lines[k]
            try:
                raw = dctx.decompress(data, max_output_size=rsize)
                if len(raw) != rsize or raw.count(b"\n") != nl:
                    raise zstandard.ZstdError(f"{len(raw)} bytes instead of {rsize}")
            except zstandard.ZstdError as exc:
                out.append(
                    (first, f"damaged compressed frame {k}: lines {first}-{first + max(nl - 1, 0)} unreadable ({exc})")
                )
                continue
            h.update(raw)
    if not out and h.hexdigest() != index.sha256:
        out.append((None, "the decompressed content's sha256 differs from the one recorded at compaction"))
    return out


def restore_plain(path: str | os.PathLike[str]) -> bool:
    """Turn compressed record file ``X.jsonl.zst`` back into ``X.jsonl`` (before appending to it):
    the JSONL is written whole to a temporary file, renamed into place, then the compressed file is
    removed. Returns whether there was anything to restore.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "notes.jsonl"; _ = p.write_bytes(b'{"text": "a"}\\n')
    >>> _ = compact_file(p, min_bytes=0)
    >>> restore_plain(p), p.read_bytes(), compressed_path(p).exists()
    (True, b'{"text": "a"}\\n', False)
    """

    path = Path(path)
    zpath = compressed_path(path)
    if not zpath.is_file():
        return False
    f = open_record(path)
    if f is None:  # pragma: no cover - removed meanwhile
        return False
    with f, atomic_open(path) as out:
        while block := f.read(1 << 20):
            out.write(block)
    zpath.unlink()
    fsync_dir(path.parent)
    return True


def write_record_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the content of record file ``path`` by ``data`` (JSONL), atomically, in the form it
    is stored in (``verify --repair`` of a compressed file writes it compressed again)."""

    path = Path(path)
    zpath = compressed_path(path)
    if not zpath.is_file():
        atomic_write(path, data)
        return
    with atomic_open(zpath) as out:
        write_compressed(io.BytesIO(data), out, mtime_ns=time.time_ns())


__all__ = [
    "COMPACT_ENV",
    "COMPACT_MIN_BYTES",
    "FRAME_BYTES",
    "SUFFIX",
    "Compaction",
    "FrameIndex",
    "check_compressed",
    "compact_file",
    "compact_min_bytes",
    "compact_run",
    "compressed_path",
    "is_compressed",
    "is_old_layout",
    "open_record",
    "opened_state",
    "plain_path",
    "read_index",
    "read_record_bytes",
    "record_exists",
    "record_key",
    "record_state",
    "restore_plain",
    "upgrade_file",
    "write_record_bytes",
]
