"""The columnar fast path of :func:`labledger.inputs.results.read_results` (``pyarrow.json``).

It handles files whose tasks are classification (``probs``), binary (``score``) or regression
(numeric ``gold``/``pred``) and whose columns have one type each. Whenever the file falls outside
that shape, or any check fails, it returns ``None`` and the caller re-reads the file row by row,
which raises the precise error (file, line, field). It is several times faster than parsing
each line with orjson (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa
import xxhash

from labledger.errors import RecordError
from labledger.inputs.arrow_buffers import PackedStrings, arrow_numpy, hand_back, numpy_arrow, one_array
from labledger.inputs.columnar import (
    file_identity,
    hashed_key,
    prefetching,
    take_prefetched,
    wanted,
)
from labledger.inputs.reference import (
    CORE_FIELDS,
    MAX_ID_CHARS,
    REPEAT_FIELDS,
    LazyColumns,
    ProbTask,
    RegressionTask,
    ResultSet,
    TaskData,
    binary_positive,
    binary_task,
    canonical_codes,
    defer_ids,
    defer_lines,
    label_index_type,
    positive_for,
    predicted_index,
    set_given_sorts,
    set_positive_column,
)
from labledger.inputs.result_entry import entry_kind, sorted_column, sorted_columns, store_result_set
from labledger.machine import cores
from labledger.metrics.kernels import element_spans, index_dtype

# pyarrow.compute and pyarrow.json are imported inside the JSONL reader's functions: a read from the
# columnar cache needs neither, and does not wait for their import


class _Fallback(Exception):
    """The file is outside the fast path's shape: read it row by row."""


def _is_num(t: pa.DataType) -> bool:
    return bool(pa.types.is_int64(t) or pa.types.is_float64(t))


def _strings(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` holds strings: plain, or coded as they were parsed (:func:`_coded`)."""
    return bool(pa.types.is_string(t) or (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type)))


def _labels(arr: pa.Array) -> pa.Array:
    """Gold values as label strings (the same rule as the row checker's)."""
    import pyarrow.compute as pc

    t = arr.type
    if _strings(t):
        return arr
    if pa.types.is_int64(t):
        return pc.cast(arr, pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    raise _Fallback


def _numbers(arr: pa.Array) -> np.ndarray:
    """A numeric column without nulls as float64: a read-only view of a float64 column's buffer
    (as from the columnar cache), else a copy."""
    if not _is_num(arr.type) or arr.null_count:
        raise _Fallback
    return np.asarray(arrow_numpy(arr, copy=False), dtype=np.float64)


def _take(arr: Any, idx: pa.Array | None) -> Any:
    """``arr.take(idx)``; ``arr`` itself when ``idx`` is None (a file of one task: every row, in order)."""
    return arr if idx is None else arr.take(idx)


def _chunks(table: pa.Table, name: str, idx: pa.Array | None = None) -> list[pa.Array] | None:
    """The chunks of the table's column ``name`` (its rows at ``idx``) as a list of their own, which
    a reader may empty as it goes (each chunk then freed once nothing else holds it); ``None``
    without the column."""
    if name not in table.column_names:
        return None
    return list(_take(table.column(name), idx).chunks)


def _missing(chunks: list[pa.Array] | None, n: int) -> int:
    """How many of ``n`` rows have no value in ``chunks`` (:func:`_chunks`; ``None``: no row has):
    from the chunks' null counts, no array of n flags (the reader asks whether all or none do)."""
    return n if chunks is None else sum(c.null_count for c in chunks)


def _encoded(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """``pc.dictionary_encode(column)`` as numpy codes (one array; a view for a column of one
    chunk) and the values that occur, each once. A chunked column is encoded as it lies, never
    combined into one array first (no copy of its strings); its
    chunks' codes index one dictionary (unified where pyarrow gave them several). A column coded as
    it was parsed (:func:`_coded`) keeps its codes, whose dictionaries may hold values of rows that
    are not its own (another task's): those are left out.

    >>> codes, values = _encoded(pa.chunked_array([["b", "a"], ["a", "c"]]))
    >>> [values[c] for c in codes]
    ['b', 'a', 'a', 'c']
    >>> _encoded(pa.array(["x", "y", "z"]).dictionary_encode().take([2, 0]))[1]
    ['x', 'z']
    """
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(column)
    if isinstance(enc, pa.ChunkedArray):
        if not enc.num_chunks:
            return np.zeros(0, np.int32), []
        if any(not c.dictionary.equals(enc.chunk(0).dictionary) for c in enc.chunks[1:]):
            enc = _unified(enc)
            if not pa.types.is_dictionary(enc.type):
                return _encoded(enc)
        indices = pa.chunked_array([c.indices for c in enc.chunks], enc.type.index_type)
        codes, values = arrow_numpy(indices, copy=False), enc.chunk(0).dictionary.to_pylist()
    else:
        codes, values = arrow_numpy(enc.indices, copy=False), enc.dictionary.to_pylist()
    if pa.types.is_dictionary(column.type) and len(values):  # (coded: only the values that occur)
        used = np.bincount(codes, minlength=len(values)) > 0
        if not used.all():
            lut = (np.cumsum(used) - 1).astype(codes.dtype)
            codes, values = lut[codes], [v for v, u in zip(values, used.tolist()) if u]
    return codes, values


def _unified(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary-encoded column with one dictionary for all its chunks, or, where their values
    together pass its codes (:func:`_coded`'s 8 bits), its values again.

    >>> c = pa.chunked_array([pa.array(["a"]).dictionary_encode(), pa.array(["b"]).dictionary_encode()])
    >>> _unified(c).chunk(1).dictionary.to_pylist()
    ['a', 'b']
    """
    import pyarrow.compute as pc

    try:
        return column.unify_dictionaries()
    except pa.ArrowInvalid:
        return pc.cast(column, column.type.value_type)


def _missing_in(table: pa.Table, name: str, idx: pa.Array | None) -> int:
    """How many rows (at ``idx``) of the table have no value in its column ``name``."""
    return _missing(_chunks(table, name, idx), table.num_rows if idx is None else len(idx))


def safe_for_arrow(data: bytes) -> bool:
    """Whether ``pyarrow.json`` may read ``data``: every line starts with ``{`` and it is valid UTF-8.

    pyarrow 23 dies with a segmentation fault on a file whose first line is ``null`` or that holds
    invalid UTF-8 after a first object, and reads ``true`` as a row; such files go to the row
    reader instead, which reports the line.

    >>> safe_for_arrow(b'{"a": 1}\\n{"a": 2}\\n'), safe_for_arrow(b'null\\n{"a": 1}\\n'), safe_for_arrow(b'{"a": 1}\\n\\xff\\n')
    (True, False, False)
    """
    return arrow_lines(data) is not None


def arrow_lines(data: bytes) -> int | None:
    """The number of lines of ``data`` when :func:`safe_for_arrow` holds, else ``None``: the check
    :func:`scan_file` makes of a file (:func:`_part_lines`), of bytes in memory, a window of whole
    lines at a time without a copy.

    >>> arrow_lines(b'{"a": 1}\\n{"a": 2}'), arrow_lines(b'{"a": 1}\\n\\n')
    (2, None)
    """
    view, n = memoryview(data), len(data)
    lines, at, starts_line = 0, 0, True
    while at < n:
        end = min(at + SCAN_BYTES, n)
        if end < n:  # whole lines only: cut after the window's last newline (or the line's own end)
            end = data.rfind(b"\n", at, end) + 1 or (data.find(b"\n", end) + 1 or n)
        found = _part_lines(view[at:end], starts_line)
        if found is None:
            return None
        lines, at, starts_line = lines + found, end, data[end - 1] == 10
    return None if n == 0 else lines + (0 if starts_line else 1)


def _part_lines(part: memoryview, starts_line: bool) -> int | None:
    """The newlines in ``part`` (whole lines, but for an unfinished last one) when every line that
    begins in it begins with ``{`` (``starts_line``: its first byte begins one) and it is valid
    UTF-8, else ``None``: the check of :func:`scan_file` and :func:`arrow_lines`."""
    arr = np.frombuffer(part, dtype=np.uint8)
    at = np.flatnonzero(arr == 10)
    if (starts_line and arr[0] != 123) or not _utf8(part):
        return None
    follows = at[:-1] + 1 if len(at) and at[-1] == len(arr) - 1 else at + 1
    return len(at) if bool((arr[follows] == 123).all()) else None


#: Bytes of the file read at once by :func:`scan_file` (one buffer, reused for the whole file).
SCAN_BYTES = 1 << 24
#: From this size, a file scanned without its key is scanned in two halves at once, one a core;
#: smaller files are scanned in one pass (the threshold is measured: docs/performance.md).
SCAN_PARTS_BYTES = 256 << 20
#: Bytes per block of the streaming JSON parse. The parser reads up to 32 blocks ahead of the rows it
#: has handed over (Arrow's background reader), so the block is what the read-ahead holds: a
#: trade of the read's peak memory against its time (docs/performance.md).
BLOCK_BYTES = 2 << 20
#: Bytes per block of the whole-file parse that follows a failed streaming parse (a later block adds
#: a field, or a line is longer than :data:`BLOCK_BYTES`): lines up to this long stay on the fast path.
WHOLE_BLOCK_BYTES = 16 << 20


class Scan(NamedTuple):
    """What one pass over a results file found (:func:`scan_file`)."""

    #: The number of lines when :func:`safe_for_arrow` holds for the file's bytes, else ``None``.
    lines: int | None
    #: The :func:`~labledger.inputs.columnar.content_key` of the bytes read (``None`` with ``lines``,
    #: or when not asked for).
    key: str | None


def scan_file(f: io.BufferedIOBase | io.RawIOBase, *, chunk: int = SCAN_BYTES, key: bool = True) -> Scan:
    """The lines of an open file when :func:`safe_for_arrow` holds for its bytes (every line starts
    with ``{``, valid UTF-8), and (``key``) their :func:`~labledger.inputs.columnar.content_key`,
    in one pass through one reused buffer of ``chunk`` bytes: the file's bytes are never all in
    memory. Each
    buffer is cut after its last newline and the rest carried to the next, so UTF-8 is checked
    whole characters at a time. It stops at the first line that fails (or is longer than
    ``chunk``): ``Scan(None, None)``.

    >>> import io
    >>> from labledger.inputs.columnar import content_key
    >>> scan_file(io.BytesIO(b'{"a": 1}\\n{"a": 2}'), chunk=10) == Scan(2, content_key(b'{"a": 1}\\n{"a": 2}'))
    True
    >>> [scan_file(io.BytesIO(b), chunk=10).lines for b in (b'{"a": 1}\\n\\n', b'{"a": "\\xff"}\\n', b"", b'{"a": 12345}')]
    [None, None, None, None]
    """
    if not key:
        halves = _halves(f)
        if halves is not None:
            return _scan_parts(halves, chunk)
    buf = bytearray(max(2, chunk))
    view = memoryview(buf)
    h = xxhash.xxh3_128()
    size = lines = carried = 0
    starts_line = True  # the next byte begins a line
    while True:
        got = f.readinto(view[carried:]) or 0
        filled = carried + got
        if got and filled < len(buf):  # a short read: read on until the end or a full buffer
            carried = filled
            continue
        if filled == 0:
            break
        end = filled if not got else buf.rfind(b"\n", 0, filled) + 1  # at the end, all that is left
        if end == 0:
            return Scan(None, None)  # a line longer than the buffer
        found = _part_lines(view[:end], starts_line)
        if found is None:
            return Scan(None, None)
        if key:
            h.update(view[:end])
        size, lines = size + end, lines + found
        starts_line = buf[end - 1] == 10
        carried = filled - end
        buf[:carried] = buf[end:filled]
        if not got:
            break
    if size == 0:
        return Scan(None, None)
    return Scan(lines + (0 if starts_line else 1), hashed_key(h, size) if key else None)


class _Range(io.RawIOBase):
    """Bytes ``[start, end)`` of the open file descriptor ``fd``, read by position (``os.preadv``):
    ranges of one file read in threads at once share no file position."""

    def __init__(self, fd: int, start: int, end: int) -> None:
        super().__init__()
        self.fd, self.at, self.end = fd, start, end

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.end - self.at)
        if n <= 0:
            return 0
        got = os.preadv(self.fd, [memoryview(b)[:n]], self.at)
        self.at += got
        return got


def _halves(f: io.BufferedIOBase | io.RawIOBase) -> list[_Range] | None:
    """The rest of the open file ``f`` (from its position) as two ranges that meet at a line's
    start, when it is worth scanning them at once: at least :data:`SCAN_PARTS_BYTES`, two cores,
    an ``os.preadv`` (not on Windows); else ``None``."""
    if not hasattr(os, "preadv") or cores() < 2:
        return None
    try:
        fd = f.fileno()
        start, size = f.tell(), os.fstat(fd).st_size
    except (OSError, io.UnsupportedOperation):  # not a file (a stream in memory)
        return None
    if size - start < SCAN_PARTS_BYTES:
        return None
    at, mid = start + (size - start) // 2 - 1, size  # the line after the middle byte begins the second half
    while at < size:
        window = os.pread(fd, min(1 << 20, size - at), at)
        if not window:
            break
        found = window.find(b"\n")
        if found >= 0:
            mid = at + found + 1
            break
        at += len(window)
    return [_Range(fd, start, mid), _Range(fd, mid, size)] if start < mid < size else None


def _scan_parts(parts: list[_Range], chunk: int) -> Scan:
    """:func:`scan_file` (no key) of consecutive ranges of a file that each begin a line, in a
    thread each: their lines summed, ``Scan(None, None)`` when one fails."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(parts), thread_name_prefix="labledger-scan") as pool:
        found = list(pool.map(lambda part: scan_file(part, chunk=chunk, key=False), parts))
    if any(s.lines is None for s in found):
        return Scan(None, None)
    return Scan(sum(s.lines or 0 for s in found), None)


def _utf8(data: memoryview) -> bool:
    """Whether ``data`` is valid UTF-8: Arrow's validation of one string over the bytes (no copy)."""
    one = pa.StringArray.from_buffers(1, pa.py_buffer(np.array([0, len(data)], dtype=np.int32)), pa.py_buffer(data))
    try:
        one.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def read_arrow(
    path: Path, name: str, tolerance: float, positive: Any, *, repeats: bool = False, cache: bool = False
) -> ResultSet | None:
    """The file as a :class:`ResultSet`, or ``None`` when it must be read row by row.

    ``cache``: store the checked columns of a large file in the columnar cache
    (:mod:`labledger.inputs.result_entry`), from which :func:`~labledger.inputs.results.read_results`
    reads them while the file's content is unchanged.
    """
    try:
        size = path.stat().st_size
    except OSError:
        return None
    folder = wanted(size) if cache else None
    with _reading():
        try:
            with open(path, "rb") as f:
                before = os.fstat(f.fileno())
                # the key from the CLI's hash of the file while it started, where there is one
                prefetched = folder is not None and prefetching(path)
                scan = scan_file(f, key=folder is not None and not prefetched)
                hand_back()  # the scan threads' buffers, kept by the C allocator's arenas
                parsed = _parse(f, scan.lines)
                after = os.fstat(f.fileno())
        except OSError:
            return None
        if parsed is None or _changed(before, after):  # rewritten while read: the row reader reads it again
            return None
        if prefetched:
            scan = scan._replace(key=take_prefetched(path, file_identity(before)))
        handed = [parsed]  # its only reference, so that its blocks are freed as they are combined
        del parsed
        rs = _result_set(handed, name, tolerance, positive, repeats)
    if rs is not None and folder is not None and scan.key is not None:
        # under the key of the bytes scanned, which are the bytes parsed
        store_result_set(rs, path, entry_kind(tolerance, positive, repeats), scan.key, folder=folder)
    # the parse's blocks and checks are freed by now, but Arrow's allocator keeps their pages for
    # reuse: handed back, they are not resident under the metrics that follow
    hand_back()
    return rs


#: JSONL reads in progress in this process (``compare`` reads its two files side by side): a read
#: sorts its scores beside itself (:func:`_checked_and_sorted`) only while it is the only one, since the
#: other reads' parses already take the cores.
_READS = [0]
_READS_LOCK = threading.Lock()


def _core_free() -> bool:
    """Whether a read may take a second core for work beside it: two cores or more, and no other
    read in progress (:data:`_READS`), whose parse already takes them."""
    return cores() > 1 and _READS[0] == 1


@contextlib.contextmanager
def _reading() -> Iterator[None]:
    """Counts a read in :data:`_READS` while inside."""
    with _READS_LOCK:
        _READS[0] += 1
    try:
        yield
    finally:
        with _READS_LOCK:
            _READS[0] -= 1


#: Bytes of parsed data let go of between two hand-backs of Arrow's freed pages to the system
#: (:class:`_PagesBack`; Arrow's allocator keeps them for reuse until told: a task's matrix and the
#: parse's blocks it was copied from were otherwise both resident).
RELEASE_BYTES = 64 << 20


class _PagesBack:
    """Counts the bytes of Arrow data a reader has passed (parsed, or copied and let go of) and hands
    the allocator's freed pages back to the system every :data:`RELEASE_BYTES` of them (from any
    thread)."""

    def __init__(self) -> None:
        self.passed = 0
        self._lock = threading.Lock()

    def add(self, nbytes: int) -> None:
        with self._lock:
            self.passed += nbytes
            due = self.passed >= RELEASE_BYTES
            if due:
                self.passed = 0
        if due:
            hand_back()


def _changed(before: os.stat_result, after: os.stat_result) -> bool:
    """Whether the open file was written between two ``fstat`` of it (its inode is its own)."""
    return (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns)


def _parse(f: BinaryIO, n_lines: int | None) -> pa.Table | None:
    """The table of the open file ``f`` (already scanned: ``n_lines`` from :func:`scan_file`), or
    ``None`` when it is outside the fast path.

    The streaming reader converts each block as it is parsed, so its peak is the table and a few
    blocks, not the file's bytes beside the table; it takes the first block's schema, so a later block that adds a field or
    changes a type makes it fail, and the whole file is then parsed at once. The file is opened
    again through ``/proc/self/fd`` where there is one: the same file that was scanned, even when
    another has been renamed over its name since.
    """
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.json as pj

    if n_lines is None:
        return None
    fd = Path(f"/proc/self/fd/{f.fileno()}")
    source = str(fd) if fd.exists() else f.name
    pool = pa.system_memory_pool()
    try:
        try:
            # the parse's arrays in the C allocator's pool, not in Arrow's default (mimalloc): mimalloc
            # keeps a page freed by another thread for the thread that made it, and the parser's
            # threads sit idle once the parse is done, so what the reader let go of (probabilities
            # copied into a task's matrix, gold strings once coded) stayed resident to the end;
            # glibc's are handed back by hand_back
            reader = pj.open_json(source, read_options=pj.ReadOptions(block_size=BLOCK_BYTES), memory_pool=pool)
            pages = _PagesBack()  # the parser's freed pages, handed back as it goes
            plain: set[str] = set()
            # each block coded in a thread of its own as it comes (in this one, which takes the
            # blocks from the parser, the parser waited for it)
            with ThreadPoolExecutor(1, thread_name_prefix="labledger-read") as coder:
                coding = []
                for batch in reader:
                    pages.add(batch.nbytes)
                    coding.append(coder.submit(_coded, batch, plain))
                    del batch
                batches = [done.result() for done in coding]
                del coding
            batches = _uncoded(batches, plain) if plain else batches
            table = pa.Table.from_batches(batches) if batches else reader.schema.empty_table()
            del batches
        except pa.ArrowInvalid:  # the first block's schema does not hold for the whole file, or a long line
            table = pj.read_json(source, read_options=pj.ReadOptions(block_size=WHOLE_BLOCK_BYTES), memory_pool=pool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return table if table.num_rows == n_lines else None  # blank lines: line numbers would not match rows


#: String columns coded as they are parsed, a block at a time (:func:`_coded`): a results file's
#: task and gold, a few values on every row, held as codes rather than strings.
_CODED = ("task", "gold")


def _coded(batch: pa.RecordBatch, plain: set[str]) -> pa.RecordBatch:
    """``batch`` with each string column of :data:`_CODED` not in ``plain`` dictionary-encoded with
    8-bit codes (the parse's blocks are then let go of before the whole table is held); a column
    with more than 127 values in one block is added to ``plain`` instead (:func:`_uncoded`)."""
    import pyarrow.compute as pc

    for name in _CODED:
        i = batch.schema.get_field_index(name)
        if i < 0 or name in plain or not pa.types.is_string(batch.schema.field(i).type):
            continue
        enc = pc.dictionary_encode(batch.column(i))
        if len(enc.dictionary) > 127:
            plain.add(name)
            continue
        batch = batch.set_column(i, name, pa.DictionaryArray.from_arrays(enc.indices.cast(pa.int8()), enc.dictionary))
    return batch


def _uncoded(batches: list[pa.RecordBatch], plain: set[str]) -> list[pa.RecordBatch]:
    """The ``batches`` with their columns named in ``plain`` strings again where :func:`_coded` coded
    them in earlier blocks: one type for each column of the table."""
    import pyarrow.compute as pc

    out = []
    for batch in batches:
        for name in plain:
            i = batch.schema.get_field_index(name)
            if i >= 0 and pa.types.is_dictionary(batch.schema.field(i).type):
                batch = batch.set_column(i, name, pc.cast(batch.column(i), pa.string()))
        out.append(batch)
    return out


def _result_set(handed: list[pa.Table], name: str, tolerance: float, positive: Any, repeats: bool) -> ResultSet | None:
    """The result set of a parsed table (``handed``: a list of it alone, emptied here, so that this
    holds its only reference and its blocks are freed as they are combined), or ``None`` when it is
    outside the fast path."""
    import pyarrow.compute as pc

    first = handed[0]
    ids = first.column("id") if "id" in first.column_names else None
    # a character is >= 1 byte: the characters are counted only when some id has more bytes than the limit
    if ids is not None and pa.types.is_string(ids.type) and first.num_rows and _longest_bytes(ids) > MAX_ID_CHARS:
        longest = pc.max(pc.utf8_length(ids)).as_py()
        if longest is not None and longest > MAX_ID_CHARS:
            return None  # the row reader refuses it with its line
    del ids, first
    try:
        _combine(handed)
        return _read_table(handed, name, tolerance, positive, repeats)
    except _Fallback:
        return None


def _longest_bytes(column: pa.ChunkedArray) -> int:
    """The most bytes of one string of a string column (nulls count 0), from its offsets: an upper
    bound of ``pc.max(pc.utf8_length(column))`` that reads no string data, a block of offsets at a
    time (no array of their lengths).

    >>> _longest_bytes(pa.chunked_array([["ab", "\\xe9"], [None, "abcd"]])), _longest_bytes(pa.chunked_array([], pa.string()))
    (4, 0)
    """
    longest = 0
    for chunk in column.chunks:
        if len(chunk):
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset : chunk.offset + len(chunk) + 1]
            for a, b in element_spans(len(chunk)):
                longest = max(longest, int(np.diff(offsets[a : b + 1]).max()))
    return longest


#: Columns :func:`_combine` leaves in their parse blocks: each is read a block at a time.
_CHUNKED = frozenset(("probs", "task", "gold", "id"))


def _combine(handed: list[pa.Table]) -> None:
    """Replace the table that ``handed`` holds alone by its ``combine_chunks()``, one column at a
    time, each column's chunks let go of once it is copied: the peak holds the table and one column,
    not the table twice. (A caller's reference would keep every chunk to the end.) The columns of :data:`_CHUNKED` stay in their chunks: ``probs`` is copied into
    the task's matrix (and let go of) as it is read (:func:`_classification`), ``task`` and
    ``gold`` are encoded as they lie (:func:`_encoded`), a one-task file's ``id`` chunks are packed
    as they are checked (:func:`_packed_checked`)."""
    table = handed.pop()
    names = table.column_names
    done: list[pa.Array | pa.ChunkedArray] = []
    for name in names:
        hand_back()  # the parse's and the last column's freed pages, handed back first
        done.append(table.column(name) if name in _CHUNKED else one_array(table.column(name)))
        table = table.drop_columns([name])
    del table
    hand_back()
    handed.append(pa.Table.from_arrays(done, names=names))


def _distinct(values: np.ndarray) -> bool:
    """Whether no value repeats (found by a sort, which is faster than numpy's ``unique``)."""
    return _no_repeats(np.sort(values))


#: Longest id (bytes) that :func:`surely_distinct` hashes; longer ids take the dictionary path.
HASH_ID_BYTES = 64


#: Ids hashed per pass of :func:`surely_distinct` (bounds its temporaries at ~50 MB).
HASH_CHUNK = 1 << 20
#: Masks keeping the first 0..8 bytes of a little-endian 8-byte word.
_KEEP = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [2**64 - 1], dtype=np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64, in place (wrapping arithmetic); returns ``x``."""
    t = x >> np.uint64(30)
    x ^= t
    x *= np.uint64(0xBF58476D1CE4E5B9)
    np.right_shift(x, np.uint64(27), out=t)
    x ^= t
    x *= np.uint64(0x94D049BB133111EB)
    np.right_shift(x, np.uint64(31), out=t)
    x ^= t
    return x


def surely_distinct(ids: pa.Array, *, chunk: int = HASH_CHUNK) -> bool:
    """True when no two strings of ``ids`` are equal, found from a 64-bit hash of each string's
    bytes and length formed in numpy over the Arrow buffers (:func:`_hashed`), then one sort (faster
    than ``pc.dictionary_encode``). False means "maybe not": two equal
    hashes (a repeated id, or rarely a collision), ids over :data:`HASH_ID_BYTES` bytes, or another
    layout; the caller then decides exactly. ``chunk``: ids hashed per pass.

    >>> import pyarrow as pa
    >>> surely_distinct(pa.array(["a", "b", "a\\x00"])), surely_distinct(pa.array(["x", "y", "x"]))
    (True, False)
    """
    if not pa.types.is_string(ids.type) or ids.null_count or len(ids) < 2:
        return len(ids) < 2
    h = np.empty(len(ids), dtype=np.uint64)
    return _hashed(ids, h, _longest_bytes(pa.chunked_array([ids])), chunk=chunk) and _no_repeats(h)


def _no_repeats(h: np.ndarray) -> bool:
    """Whether no two of the hashes ``h`` are equal (sorts ``h`` in place)."""
    h.sort()
    return not bool((h[1:] == h[:-1]).any())


def _hashed(ids: pa.Array, out: np.ndarray, width: int, *, chunk: int = HASH_CHUNK) -> bool:
    """Write the 64-bit hash of each string of ``ids`` (strings without nulls) into ``out``, one per
    id; ``width``: the most bytes of any id hashed with them (the same for every chunk of a column,
    so that equal ids hash alike in any chunk: :func:`_longest_bytes` of the column). False (``out``
    unspecified) when they are not hashed here: ``width`` over :data:`HASH_ID_BYTES` or 0 (every id
    empty)."""
    n = len(ids)
    if width > HASH_ID_BYTES or width == 0:
        return False
    if n == 0:
        return True
    _, off_buf, data_buf = ids.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int32)[ids.offset : ids.offset + n + 1]
    step = max(1, chunk)
    passes = [(a, min(a + step, n)) for a in range(0, n, step)]
    # (a chunk of only empty ids has no characters' buffer)
    raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    for a, b in passes:
        lo, hi = int(offsets[a]), int(offsets[b])
        # this pass's ids' bytes, padded so that every 8-byte read below stays in bounds (a copy of
        # a pass's bytes, not of every id's)
        padded = np.zeros(hi - lo + width + 16, dtype=np.uint8)
        padded[: hi - lo] = raw[lo:hi]
        # row o of this (no-copy) view is the 8 bytes from byte o: one gather reads a word of every id
        windows = np.lib.stride_tricks.as_strided(padded, shape=(len(padded) - 7, 8), strides=(1, 1))
        lens = np.diff(offsets[a : b + 1])
        hc = out[a:b]
        hc[:] = lens
        hc += np.uint64(0x9E3779B97F4A7C15)
        _mix(hc)
        starts = offsets[a:b] - lo
        for w in range(0, width, 8):  # one 8-byte word of every id at a time
            word = windows[starts + w].view("<u8").ravel()
            word &= _KEEP[np.clip(lens - w, 0, 8)]  # only the id's own bytes
            hc ^= word
            _mix(hc)
    return True


#: From this many rows, a one-task file's ids are kept packed (:class:`PackedStrings`), each chunk
#: packed as its ids are hashed for their check and then let go of (:func:`_packed_checked`).
PACK_IDS_FROM = 100_000


def _packed_checked(chunks: list[pa.Array]) -> tuple[PackedStrings, bool]:
    """The ids of ``chunks`` (string arrays without nulls, in row order; the list is emptied, each
    chunk let go of once packed) packed, and whether they are surely distinct (:func:`surely_distinct`
    of them all): each chunk is hashed, then packed, then let go of, so that the ids are never
    whole beside their hashes.

    >>> packed, distinct = _packed_checked([pa.array(["a", "b"]), pa.array(["c", "a"])])
    >>> packed.arrow().to_pylist(), distinct
    (['a', 'b', 'c', 'a'], False)
    """
    n = sum(len(c) for c in chunks)
    width = _longest_bytes(pa.chunked_array(chunks, pa.string()))
    h = np.empty(n, dtype=np.uint64)
    hashed, row, packed, pages = n >= 2, 0, PackedStrings(), _PagesBack()
    while chunks:
        chunk = chunks.pop(0)
        m, size = len(chunk), chunk.nbytes
        hashed = hashed and _hashed(chunk, h[row : row + m], width)
        packed.add(chunk)
        row += m
        del chunk
        pages.add(size)  # (the parse's pages of the ids let go of, handed back as they go)
    distinct = n < 2 or (hashed and _no_repeats(h))
    return packed, distinct


def _packing(chunks: list[pa.Array]) -> Callable[[], tuple[PackedStrings, bool]]:
    """:func:`_packed_checked` of ``chunks`` started in a thread of its own where a core is free for
    it (two cores or more, no other read in progress), else when asked for: the function returned
    gives its result (and raises what it raised) once its thread has stopped. Its net memory only falls as it goes (each id's
    hash is 8 bytes, its string ~11 and more), so it may start under the read's other work."""
    if not _core_free():
        return lambda: _packed_checked(chunks)
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="labledger-read")
    found = pool.submit(_packed_checked, chunks)

    def result() -> tuple[PackedStrings, bool]:
        try:
            return found.result()
        finally:
            pool.shutdown(wait=True)  # (its thread stopped before the read goes on)

    return result


def _repeat_field(
    table: pa.Table, task_codes: np.ndarray | None, ids: pa.Array | PackedStrings, repeats: bool, distinct: bool = False
) -> str | None:
    """The repeat field when some id repeats within a task (the row reader's rule, vectorised):
    ``None`` when ids are unique; raises ``_Fallback`` when they are not and no field explains them
    (the row reader then raises the duplicate id with its line). ``task_codes``: each row's task
    (``None``: one task). ``distinct``: the ids are known to be surely distinct already
    (:func:`_packed_checked`); packed ids are made whole only when they may not be."""
    import pyarrow.compute as pc

    n = table.num_rows
    if distinct or (isinstance(ids, pa.Array) and surely_distinct(ids)):
        return None  # every id distinct in the whole file
    if isinstance(ids, PackedStrings):
        ids = ids.arrow()
    enc = pc.dictionary_encode(ids)
    if len(enc.dictionary) == n:
        return None  # every id distinct in the whole file
    id_codes = arrow_numpy(enc.indices, copy=False).astype(np.int64)
    pair = id_codes if task_codes is None else task_codes.astype(np.int64) * len(enc.dictionary) + id_codes
    if _distinct(pair):
        return None
    if not repeats:
        raise _Fallback
    for f in REPEAT_FIELDS:
        if f not in table.column_names:
            continue
        col = table.column(f).chunk(0) if table.column(f).num_chunks else pa.array([], pa.int64())
        if col.null_count or not (_is_num(col.type) or pa.types.is_string(col.type)):
            raise _Fallback  # a null or a nested repeat index: the row reader judges it
        rep = arrow_numpy(pc.dictionary_encode(col).indices, copy=False).astype(np.int64)
        order = np.lexsort((rep, pair))
        same = (pair[order][1:] == pair[order][:-1]) & (rep[order][1:] == rep[order][:-1])
        if same.any():
            raise _Fallback
        return f
    raise _Fallback


#: From this many rows, a one-task file's sorted columns (its ``score``, or each label's
#: probabilities) are sorted in threads while the ids are checked (numpy's sort lets go of the GIL):
#: the ascending orders that ROC-AUC and AP read (and the columnar cache entry keeps), made beside
#: the reader's one-threaded work instead of after it.
SORT_BESIDE_FROM = 100_000
#: From this many rows, a classification task's matrix is filled (copied, checked, predicted) in
#: :data:`COPY_THREADS` threads, while no other read is in progress.
COPY_BESIDE_FROM = 100_000
COPY_THREADS = 2
#: Threads that share a one-task file's sorts and its ids' check: with two, a 3-class file's three
#: sorts and the check keep both cores busy to the end, and at most two of them hold their
#: temporaries at once.
SORT_THREADS = 2


def _checked_and_sorted(
    check: Callable[[], str | None], td: TaskData
) -> tuple[str | None, dict[int, tuple[np.ndarray, np.ndarray | None]]]:
    """``check()`` (the ids' check, :func:`_repeat_field`) and the ascending orders of the task's
    columns that its cache entry keeps sorted (:func:`~labledger.inputs.result_entry.sorted_columns`,
    kept as 4-byte positions where they fit, as the entry keeps them) and their tie starts, by
    column, made in :data:`SORT_THREADS` threads; the check alone (no orders) for few rows, one
    core, another read in progress, or a task of no sorted columns. What ``check`` raises is raised
    once the sorts already running have stopped."""
    columns = {j: sorted_column(td, j) for j in sorted_columns(td)} if isinstance(td, ProbTask) else {}
    if not columns or td.n < SORT_BESIDE_FROM or not _core_free():
        return check(), {}

    from concurrent.futures import ThreadPoolExecutor

    from labledger.metrics.classification import ascending_groups

    def order_of(col: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        # its tie starts found here, where the order is made, not in the metrics' one thread
        return ascending_groups(col, index_dtype(len(col)))

    pool = ThreadPoolExecutor(SORT_THREADS, thread_name_prefix="labledger-read")
    try:
        checked = pool.submit(check)  # first: it overlaps the sorts, not the last of them
        orders = {j: pool.submit(order_of, col) for j, col in columns.items()}
        repeat = checked.result()
        return repeat, {j: f.result() for j, f in orders.items()}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _read_table(handed: list[pa.Table], name: str, tolerance: float, positive: Any, repeats: bool = False) -> ResultSet:
    """The result set of the parsed table ``handed`` holds alone (taken from it: the columns read
    into a task's arrays are let go of as they are read)."""
    import pyarrow.compute as pc

    table = handed.pop()
    cols = set(table.column_names)
    if not {"id", "task", "gold"} <= cols or "scores" in cols:
        raise _Fallback
    task_col = table.column("task")
    if not _strings(task_col.type) or task_col.null_count:
        raise _Fallback
    id_col = table.column("id")  # (in the parse's chunks: _combine)
    if pa.types.is_int64(id_col.type):
        id_col = pc.cast(id_col, pa.string())
    if not pa.types.is_string(id_col.type) or id_col.null_count:
        raise _Fallback
    table = table.drop_columns(["id"])  # (id_col holds them alone)
    codes, names = _encoded(task_col)
    if any(not t for t in names):
        raise _Fallback
    del task_col
    table = table.drop_columns(["task"])  # its strings, now codes
    tasks: dict[str, TaskData] = {}
    # the row reader's errors of whole tasks, in its order (the tasks'), raised once all else is read
    refusals: list[RecordError] = []
    if len(names) == 1:  # one task: its rows are the table's, in order (no argsort, no index arrays)
        del codes
        task = names[0]
        probs = _chunks(table, "probs")  # emptied as the task's matrix is filled
        table = table.drop_columns(["probs"]) if probs is not None else table
        golds = [table.column("gold")]  # let go of once read into the task's codes
        table = table.drop_columns(["gold"])
        id_chunks = list(id_col.chunks)  # (held by this list alone: emptied as they are packed)
        del id_col
        # from PACK_IDS_FROM rows the ids are packed as they are hashed for their check, beside the
        # task's read (_binary is one thread: a core was idle), and kept packed
        packing = _packing(id_chunks) if table.num_rows >= PACK_IDS_FROM else None
        try:
            td = _read_task(
                table,
                task,
                None,
                None,
                None,
                tolerance,
                positive_for(positive, task),
                name,
                refusals,
                golds,
                probs=probs,
            )
        except BaseException:
            if packing is not None:  # (its thread stopped before the read's error goes on)
                with contextlib.suppress(Exception):
                    packing()
            raise
        del probs, golds
        hand_back()  # the parse's pages of the columns read, handed back

        # the ids' check beside the sorts of the columns the metrics sort (after the task is read:
        # the parse's columns are let go of before the sorts' temporaries are made)
        def check() -> str | None:
            if packing is None:
                ids = one_array(pa.chunked_array(id_chunks, pa.string()))
                defer_ids(td, ids)
                return _repeat_field(table, None, ids, repeats)
            packed, distinct = packing()
            defer_ids(td, load=packed.arrow, keep=False)
            return _repeat_field(table, None, packed, repeats, distinct)

        if refusals:  # the task is refused once the rows' checks pass: its columns are not sorted
            check()
            raise refusals[0]
        repeat, given = _checked_and_sorted(check, td)
        if repeat is not None:
            _set_repeat(td, table, None, repeat)
        if given:  # the ascending orders, as the columnar cache entry keeps them, and their ties
            set_given_sorts(td, {j: order for j, (order, _) in given.items()}, {j: t for j, (_, t) in given.items()})
        hand_back()  # the check's and the sorts' temporaries, let go of: not resident under the next
        tasks[task] = td
        return ResultSet(tasks, source=name, repeat_field=repeat)
    ids = one_array(id_col)
    del id_col
    gold = table.column("gold")
    gold = _unified(gold) if pa.types.is_dictionary(gold.type) else gold  # (taken by task below)
    repeat = _repeat_field(table, codes, ids, repeats)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for t, task in enumerate(names):
        idx_np = order[bounds[t] : bounds[t + 1]]
        idx = numpy_arrow(idx_np, pa.int64())
        td = _read_task(
            table,
            task,
            idx_np,
            idx,
            _take(ids, idx),
            tolerance,
            positive_for(positive, task),
            name,
            refusals,
            [_take(gold, idx)],
            repeat,
            probs=_chunks(table, "probs", idx),
        )
        tasks[task] = td
    if refusals:
        raise refusals[0]
    return ResultSet(tasks, source=name, repeat_field=repeat)


def _read_task(
    table: pa.Table,
    task: str,
    idx_np: np.ndarray | None,
    idx: pa.Array | None,
    ids: pa.Array | None,
    tol: float,
    positive: str | None,
    source: str,
    refusals: list[RecordError],
    golds: list[Any],
    repeat: str | None = None,
    *,
    probs: list[pa.Array] | None,
) -> TaskData:
    """One task's rows: those at ``idx_np`` (``idx``, the same as Arrow), or with both ``None``
    every row of the table in order, whose line numbers are then made only if read. ``probs``: these
    rows' ``probs`` as chunks (:func:`_chunks`), which the task's matrix empties; ``None`` without the
    column. ``golds``: a list of these rows' ``gold`` column alone, emptied where it is read (the
    caller's only reference: the gold strings are let go of before the task's arrays are made). A
    task the rows refuse as a whole (a binary score without a positive label) adds the row reader's
    error to ``refusals``. ``ids``: these rows' ids, deferred (:func:`defer_ids`); ``None``: the
    caller defers them."""
    n = table.num_rows if idx_np is None else len(idx_np)
    id_arr = np.empty(0, dtype=object)  # ids become an object array on first use (defer_ids)
    # every row in order: the first line only (what _binary's messages read) until defer_lines
    lines = np.ones(min(n, 1), dtype=np.int64) if idx_np is None else idx_np.astype(np.int64) + 1
    no_probs, no_score, no_pred = _missing(probs, n), _missing_in(table, "score", idx), _missing_in(table, "pred", idx)
    if golds[0].null_count:
        raise _Fallback
    td: TaskData
    if no_probs == 0:
        td = _classification(task, id_arr, lines, probs, golds, tol, positive)
    elif no_probs == n and no_score == 0:
        td = _binary(task, id_arr, lines, table, idx, golds, positive, source, refusals)
    elif no_probs == n and no_score == n and no_pred == 0:
        td = RegressionTask(
            task=task,
            ids=id_arr,
            lines=lines,
            gold_value=_numbers(golds.pop()),
            pred_value=_numbers(_take(table.column("pred").chunk(0), idx)),
        )
        if not (np.isfinite(td.gold_value).all() and np.isfinite(td.pred_value).all()):
            raise _Fallback
    else:
        raise _Fallback
    if idx_np is None:  # the table's rows in order: lines 1..n, made only if read
        defer_lines(td, 1, n)
    if "positive" in table.column_names and td.kind != "binary":
        pos = _take(table.column("positive").chunk(0), idx)
        if pos.null_count != n:
            raise _Fallback  # rare: let the row checker judge it
    _slices_group_extras(td, table, idx)
    if repeat is not None:
        _set_repeat(td, table, idx, repeat)
    if ids is not None:
        defer_ids(td, ids)
    return td


def _set_repeat(td: TaskData, table: pa.Table, idx: pa.Array | None, repeat: str) -> None:
    """The task's ``repeat`` values: its rows' of the table's column ``repeat``."""
    td.repeat = np.empty(td.n, dtype=object)
    td.repeat[:] = _take(table.column(repeat).chunk(0), idx).to_pylist()


def _classification(
    task: str,
    ids: np.ndarray,
    lines: np.ndarray,
    probs: list[pa.Array] | None,
    golds: list[Any],
    tol: float,
    positive: str | None,
) -> ProbTask:
    """A classification task of these rows. ``probs``: the chunks of their ``probs`` (structs), in
    row order, each let go of as it is copied into the task's matrix (the caller holds the list
    alone: the parse's blocks are freed as the matrix fills, and the checks read it a block of
    rows at a time, never through temporaries of the matrix's size). ``golds``: their gold
    column, alone in a list (:func:`_read_task`)."""

    if not probs or not pa.types.is_struct(probs[0].type):
        raise _Fallback
    n = sum(len(c) for c in probs)
    kind = probs[0].type
    fields: dict[str, int] = {}
    for i in range(kind.num_fields):
        f = kind.field(i)
        nulls = sum(c.field(i).null_count for c in probs)
        if nulls == n:
            continue  # a label of another task
        if nulls or not _is_num(f.type):
            raise _Fallback
        fields[f.name] = i
    if not fields:
        raise _Fallback
    labels = sorted(fields)
    mat = np.empty((n, len(labels)), dtype=np.float64)
    pred = np.empty(n, dtype=label_index_type(len(labels)))
    starts = np.cumsum([0] + [len(c) for c in probs[:-1]]).tolist()
    jobs = list(zip(starts, probs))[::-1]  # taken from the end: the first chunk first
    probs.clear()  # (the jobs hold the chunks alone: each is let go of once copied)
    pages = _PagesBack()  # the freed chunks' pages, handed back as the matrix grows
    failed = threading.Event()

    def copy_chunks() -> None:
        """Copy chunks into the matrix until none is left, each a block of rows at a time with its
        checks, and predict its rows from the block while it is in the CPU's cache."""
        while not failed.is_set():
            try:
                row, chunk = jobs.pop()  # (atomic: the threads never take one chunk twice)
            except IndexError:
                return
            m = len(chunk)
            columns = [arrow_numpy(chunk.field(fields[lab]), copy=False) for lab in labels]
            pages.add(chunk.nbytes)
            del chunk
            for a, b in element_spans(m) if m else []:
                block = mat[row + a : row + b]
                for j, col in enumerate(columns):
                    block[:, j] = col[a:b]
                if not (block.min() >= 0 and block.max() <= 1):  # (a NaN fails both)
                    failed.set()
                    return
                if np.abs(block.sum(axis=1) - 1.0).max() > tol:
                    failed.set()
                    return
                predicted_index(block, out=pred[row + a : row + b])
            del columns

    def gold_index() -> np.ndarray:
        # pc.index_in(gold, value_set=labels), through the gold values' dictionary: building an
        # Arrow array from a Python list would import pandas
        gold_codes, gold_values = _encoded(_labels(golds.pop()))
        lut = np.array([labels.index(v) if v in fields else -1 for v in gold_values], dtype=pred.dtype)
        found = lut[gold_codes] if len(lut) else np.zeros(0, pred.dtype)
        del gold_codes  # (not held while the task's other arrays are made)
        if (found < 0).any():
            failed.set()
        return found

    if n >= COPY_BESIDE_FROM and _core_free():
        # the copies, checks and predictions in two threads, the golds' codes beside them: all lose
        # the GIL, and each thread's first touch of its fresh pages is the kernel's work in parallel
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="labledger-read") as pool:
            copies = [pool.submit(copy_chunks) for _ in range(COPY_THREADS)]
            try:
                gold_idx = gold_index()
            finally:
                for done in copies:
                    done.result()
    else:
        copy_chunks()
        gold_idx = gold_index()
    if failed.is_set():
        raise _Fallback
    td = ProbTask(
        task=task,
        ids=ids,
        lines=lines,
        kind="classification",
        labels=tuple(labels),
        probs=mat,
        gold_index=gold_idx,
        pred_index=pred,
    )
    try:
        set_positive_column(td, positive, "")
    except RecordError:
        raise _Fallback from None  # the row checker raises it, with the file's name
    return td


def _binary(
    task: str,
    ids: np.ndarray,
    lines: np.ndarray,
    table: pa.Table,
    idx: pa.Array | None,
    gold_column: list[Any],
    positive: str | None,
    source: str,
    refusals: list[RecordError],
) -> ProbTask:
    """A binary task of these rows from their ``score``; ``gold_column``: their gold column, alone in
    a list (:func:`_read_task`)."""
    import pyarrow.compute as pc

    score = _numbers(_take(table.column("score").chunk(0), idx))
    if not (np.isfinite(score).all() and (score >= 0).all() and (score <= 1).all()):
        raise _Fallback
    gold_codes, gold_values = _encoded(_labels(gold_column.pop()))
    hand_back()  # the gold strings, let go of: not resident under the task's arrays
    golds = set(gold_values)
    row_pos = None
    if "positive" in table.column_names:
        pos_col = _take(table.column("positive").chunk(0), idx)
        if pos_col.null_count not in (0, len(pos_col)):
            raise _Fallback
        if pos_col.null_count == 0:
            vals = set(_labels(pc.unique(pos_col)).to_pylist())
            if len(vals) != 1:
                raise _Fallback
            row_pos = vals.pop()
    try:
        pos = binary_positive(task, golds, positive or row_pos, source, int(lines[0]) if len(lines) else 0)
    except RecordError as e:
        # the row reader's error once every other check of the file has passed (then it is the one
        # the row reader raises first), without reading the rows again; a stand-in positive until then
        refusals.append(e)
        pos = min(golds)
    # equal to pc.equal(g, pos), from the codes: a Python scalar argument would import pandas
    gold_pos = gold_codes == (gold_values.index(pos) if pos in golds else -1)
    del gold_codes  # (not held while the task's other arrays are made)
    return binary_task(task, ids, lines, pos, golds, score, gold_pos)


def _scalar_type(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_int64(t)
        or pa.types.is_float64(t)
        or pa.types.is_boolean(t)
        or pa.types.is_null(t)
    )


def _slices_group_extras(td: TaskData, table: pa.Table, idx: pa.Array | None) -> None:
    import pyarrow.compute as pc

    n = td.n
    if "slices" in table.column_names:
        sl = _take(table.column("slices").chunk(0), idx)
        if not pa.types.is_struct(sl.type):
            if sl.null_count != n:
                raise _Fallback
        else:
            for i in range(sl.type.num_fields):
                f = sl.type.field(i)
                child = sl.field(i)
                if sl.null_count:
                    child = pc.if_else(sl.is_valid(), child, pa.scalar(None, child.type))
                if child.null_count == n:
                    continue
                if not _scalar_type(f.type) or pa.types.is_null(f.type):
                    raise _Fallback
                enc = pc.dictionary_encode(child, null_encoding="encode")
                codes = arrow_numpy(enc.indices).astype(np.int32)
                td.slice_columns[f.name] = (codes, enc.dictionary.to_pylist())
    if "group" in table.column_names:
        grp = _take(table.column("group").chunk(0), idx)
        if grp.null_count != n:
            if not (pa.types.is_string(grp.type) or pa.types.is_int64(grp.type)):
                raise _Fallback
            enc = pc.dictionary_encode(grp)
            valid = arrow_numpy(grp.is_valid())
            if valid.all():
                codes = arrow_numpy(enc.indices, copy=False).astype(np.int64)
            else:  # the valid rows' codes from the indices without their nulls (fill_null of a
                # Python -1 makes a pa.scalar, which imports pandas); each missing
                # group a cluster of its own
                codes = np.empty(n, dtype=np.int64)
                codes[valid] = arrow_numpy(enc.indices.drop_null())
                missing = np.flatnonzero(~valid)
                codes[missing] = len(enc.dictionary) + np.arange(len(missing))
            td.group = canonical_codes(codes)
    extras = {}
    for name in table.column_names:
        if name in CORE_FIELDS:
            continue
        col = _take(table.column(name).chunk(0), idx)
        if col.null_count != n:
            extras[name] = col
    td.extras = LazyColumns(extras, extras.__getitem__)
