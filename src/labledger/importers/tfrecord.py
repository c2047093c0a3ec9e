"""TFRecord framing and the scalar events of TensorBoard files, read as columns.

An event file is a sequence of records: ``length`` (uint64 LE), the masked CRC32C of those 8 bytes,
``length`` bytes of payload (an ``Event`` protobuf), the masked CRC32C of the payload. TensorBoard's
TensorFlow-free reader checks both CRCs in pure Python, two calls per record; here the records are
found with one pass over the offsets and every CRC is checked with numpy, all records of one length
at once. As in TensorBoard's reader, the file ends at the first record that is cut short or fails
a check.

The payloads written by ``add_scalar`` (PyTorch, tensorboardX, TF1 ``simple_value``) all have one
shape: ``wall_time``, ``step``, one summary value of a tag and a float. Such records are decoded
with numpy, byte for byte the way the protobuf decoder would read them (the framing of every field
is checked, the tag must be UTF-8); any other record is handed back for ``Event.FromString``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

_POLY = 0x82F63B78  # CRC32C (Castagnoli), reflected
#: Records longer than this are checked one at a time (a byte-position loop over a few long
#: records would cost more than it saves).
VECTOR_MAX = 512


def _table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    return t


TABLE = _table()
_TABLE_LIST = TABLE.tolist()


def _word_tables() -> tuple[np.ndarray, np.ndarray]:
    """Slice-by-4 CRC tables folded into two 65,536-entry tables (low and high half of a word)."""
    t = [TABLE]
    for _ in range(3):
        prev = t[-1]
        t.append((prev >> np.uint32(8)) ^ TABLE[prev & 0xFF])
    i = np.arange(65536, dtype=np.uint32)
    low = t[3][i & 0xFF] ^ t[2][i >> np.uint32(8)]
    high = t[1][i & 0xFF] ^ t[0][i >> np.uint32(8)]
    return low, high


_LOW, _HIGH = _word_tables()


def _state(data: bytes, crc: int) -> int:
    table = _TABLE_LIST
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def masked_crc32c(data: bytes) -> int:
    """The masked CRC32C of ``data``, as TFRecord stores it.

    >>> hex(masked_crc32c(b"123456789"))
    '0xc78ab0e5'
    """
    crc = _state(data, 0xFFFFFFFF) ^ 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc32c_rows(rows: np.ndarray) -> np.ndarray:
    """:func:`masked_crc32c` of each row of a 2-D uint8 array (all rows at once).

    The rows are read as little-endian 32-bit words (zeros in front up to a multiple of 4 bytes:
    from a zero state, leading zeros leave the CRC unchanged, and the initial 0xFFFFFFFF is added
    back as the state it gives after ``width`` zero bytes, the CRC being linear).

    >>> masked_crc32c_rows(np.frombuffer(b"123456789", dtype=np.uint8)[None, :]).tolist() == [
    ...     masked_crc32c(b"123456789")]
    True
    """
    m, width = rows.shape
    pad = -width % 4
    words = np.zeros((m, width + pad), dtype=np.uint8)
    words[:, pad:] = rows
    cols = np.ascontiguousarray(words.view("<u4").T)
    crc = np.zeros(m, dtype=np.uint32)
    x = np.empty_like(crc)
    half = np.empty_like(crc)
    for col in cols:
        np.bitwise_xor(crc, col, out=x)
        np.bitwise_and(x, 0xFFFF, out=half)
        np.take(_LOW, half, out=crc)
        np.right_shift(x, np.uint32(16), out=half)
        np.bitwise_xor(crc, _HIGH[half], out=crc)
    crc ^= np.uint32(_state(bytes(width), 0xFFFFFFFF) ^ 0xFFFFFFFF)
    masked = ((crc >> np.uint32(15)) | (crc << np.uint32(17))).astype(np.uint64) + 0xA282EAD8
    return (masked & 0xFFFFFFFF).astype(np.uint32)


def _gather(buf: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``buf[s : s + width]`` for each start, as a (len(starts), width) array."""
    if buf.size < width:
        return np.zeros((0, width), dtype=buf.dtype)
    return np.lib.stride_tricks.sliding_window_view(buf, width)[starts]


@dataclass
class Frames:
    """The whole records of one file: payload offsets and lengths, and the bytes that were read."""

    offsets: np.ndarray
    lengths: np.ndarray
    consumed: int


def frames(data: bytes) -> Frames:
    """The records of ``data`` up to the first one that is cut short or fails a CRC check.

    >>> import struct
    >>> def rec(p): h = struct.pack("<Q", len(p)); return (h + struct.pack("<I", masked_crc32c(h))
    ...     + p + struct.pack("<I", masked_crc32c(p)))
    >>> f = frames(rec(b"ab") + rec(b"xyz") + b"\\x01\\x02")
    >>> f.lengths.tolist(), f.consumed
    ([2, 3], 37)
    """
    size = len(data)
    offsets: list[int] = []
    unpack = struct.Struct("<Q").unpack_from
    append = offsets.append
    pos = 0
    try:  # the loop ends where a length cannot be read (a length past the end jumps there)
        while True:
            append(pos)
            pos += 16 + unpack(data, pos)[0]
    except (struct.error, OverflowError):
        offsets.pop()
    while offsets and offsets[-1] + 16 + unpack(data, offsets[-1])[0] > size:
        offsets.pop()  # cut short: its payload or CRC is past the end
    lengths = [unpack(data, offsets[-1])[0]] if offsets else []
    heads = np.array(offsets, dtype=np.int64)
    lens = np.append(np.diff(heads) - 16, lengths).astype(np.int64)
    if heads.size == 0:
        return Frames(heads, lens, 0)
    buf = np.frombuffer(data, dtype=np.uint8)
    bad = np.zeros(heads.size, dtype=bool)
    # The length's CRC: 8 bytes, every record at once.
    want = _gather(buf, heads + 8, 4).copy().view("<u4").ravel()
    bad |= masked_crc32c_rows(_gather(buf, heads, 8)) != want
    # The payload's CRC: records of one length together.
    want = _gather(buf, heads + 12 + lens, 4).copy().view("<u4").ravel()
    for n in np.unique(lens):
        idx = np.flatnonzero(lens == n)
        if n <= VECTOR_MAX and idx.size > 4:
            got = masked_crc32c_rows(_gather(buf, heads[idx] + 12, int(n)))
            bad[idx] |= got != want[idx]
        else:
            for i in idx.tolist():
                start = int(heads[i]) + 12
                bad[i] |= masked_crc32c(data[start : start + int(n)]) != int(want[i])
    first_bad = np.flatnonzero(bad)
    keep = int(first_bad[0]) if first_bad.size else heads.size
    heads, lens = heads[:keep], lens[:keep]
    consumed = int(heads[-1] + lens[-1] + 16) if keep else 0
    return Frames(heads + 12, lens, consumed)


@dataclass
class ScalarEvents:
    """The records decoded as ``add_scalar`` events (``index`` into the file's records), and the
    indices of the others (``rest``)."""

    index: np.ndarray
    wall_time: np.ndarray
    step: np.ndarray
    tag: np.ndarray  # index into tags
    value: np.ndarray  # float64 of the stored float32
    tags: list[str]
    rest: np.ndarray


def _varint(buf: np.ndarray, starts: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode one varint at each start: (value as int64, its length in bytes, ok)."""
    n = starts.size
    value = np.zeros(n, dtype=np.uint64)
    length = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    top = buf.size - 1
    for k in range(10):
        pos = np.minimum(starts + k, top)
        b = buf[pos].astype(np.uint64)
        live = ~done & (starts + k < limit)
        value[live] |= (b[live] & np.uint64(0x7F)) << np.uint64(7 * k)
        ends = live & (b < 0x80)
        length[ends] = k + 1
        done |= ends
        if done.all():
            break
    return value.view(np.int64), length, done


def scalar_events(data: bytes, fr: Frames) -> ScalarEvents:
    """Split the records into ``add_scalar``-shaped ones (decoded) and the rest (see the module)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    o, n = fr.offsets, fr.lengths
    end = o + n
    top = buf.size - 1

    def at(pos: np.ndarray) -> np.ndarray:
        return buf[np.minimum(pos, top)].astype(np.int64)

    ok = (n >= 20) & (at(o) == 0x09) & (at(o + 9) == 0x10)
    step, vlen, vok = _varint(buf, o + 10, end)
    ok &= vok
    p = o + 10 + vlen
    # summary (field 5, bytes) that runs to the end; one value (field 1) that fills it; the tag
    # (field 1) then simple_value (field 2, fixed32) that fill the value. Lengths < 128: one byte.
    ok &= (at(p) == 0x2A) & (at(p + 1) < 0x80) & (p + 2 + at(p + 1) == end)
    ok &= (at(p + 2) == 0x0A) & (at(p + 3) < 0x80) & (p + 4 + at(p + 3) == end)
    tag_len = at(p + 5)
    ok &= (at(p + 4) == 0x0A) & (tag_len < 0x80) & (p + 6 + tag_len + 5 == end)
    ok &= at(end - 5) == 0x15
    idx = np.flatnonzero(ok)
    o, p, tag_len, step = o[idx], p[idx], tag_len[idx], step[idx]
    wall = _gather(buf, o + 1, 8).copy().view("<f8").ravel()
    value = _gather(buf, o + n[idx] - 4, 4).copy().view("<f4").ravel().astype(np.float64)
    tag_ids, tags, keep = _tag_ids(buf, p + 6, tag_len)
    rest = np.sort(np.concatenate([np.flatnonzero(~ok), idx[~keep]]))
    return ScalarEvents(idx[keep], wall[keep], step[keep], tag_ids[keep], value[keep], tags, rest)


def _tag_ids(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
    """The tag at each (start, length) as an index into a list of names, and whether it was read.

    Tags of one length are hashed column by column and grouped by hash; each row is then compared
    with its group's first row, so a hash collision only sends the record to the protobuf path. A
    tag that is not UTF-8 is left to that path too (the decoder refuses it).
    """
    ids = np.zeros(starts.size, dtype=np.int64)
    keep = np.ones(starts.size, dtype=bool)
    names: dict[bytes, int] = {}
    for width in np.unique(lengths).tolist():
        sel = np.flatnonzero(lengths == width)
        rows = _gather(buf, starts[sel], width) if width else np.zeros((sel.size, 0), dtype=np.uint8)
        h = np.zeros(sel.size, dtype=np.uint64)
        for col in np.ascontiguousarray(rows.T):
            h = h * np.uint64(1099511628211) + col
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        same = (rows == rows[first[inverse]]).all(axis=1) if width else np.ones(sel.size, dtype=bool)
        group_id = np.empty(first.size, dtype=np.int64)
        for g, row in enumerate(first.tolist()):
            group_id[g] = names.setdefault(rows[row].tobytes(), len(names))
        ids[sel] = group_id[inverse.ravel()]
        keep[sel] &= same
    tags: list[str] = []
    for raw in names:
        try:
            tags.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            tags.append("")
            bad = names[raw]
            keep &= ids != bad
    return ids, tags, keep


#: Bytes read at a time by :func:`read_events` (a record longer than this is carried over whole).
CHUNK = 4 << 20


@dataclass
class EventFile:
    """One event file read window by window: its ``add_scalar`` records as columns, the payloads of
    the other records (by record index), how many whole records there were and where they ended."""

    size: int
    consumed: int
    records: int
    scalars: ScalarEvents
    payloads: dict[int, bytes]


def _header_ok(data: bytes | memoryview, pos: int) -> bool:
    """Whether the length at ``pos`` has its CRC (the record may still run past the window)."""
    return masked_crc32c(bytes(data[pos : pos + 8])) == struct.unpack_from("<I", data, pos + 8)[0]


class EventWindows:
    """The records of a binary file object, ``chunk`` bytes at a time: iterating yields, for each
    window that holds whole records, its :func:`scalar_events` (record indices counted from the
    file's start) and the payloads of its other records by index.

    A record that straddles two windows is carried over to the next; the file ends, as for the whole
    file, at the first record that is cut short or fails a check. Memory: one window and its columns.
    Once iterated, ``size`` is the file's size, ``consumed`` where its last whole record ends and
    ``records`` how many there were.
    """

    def __init__(self, f: object, chunk: int = CHUNK) -> None:
        self._read = f.read  # type: ignore[attr-defined]
        self.chunk = chunk
        self.size = self.consumed = self.records = 0

    def _skip_rest(self) -> None:
        self.size += sum(len(b) for b in iter(lambda: self._read(self.chunk), b""))

    def __iter__(self) -> Iterator[tuple[ScalarEvents, dict[int, bytes]]]:
        carry = b""
        while True:
            block = self._read(self.chunk)
            self.size += len(block)
            data = carry + block if carry else block
            if not data:
                return
            fr = frames(data)
            n = self.records
            if fr.offsets.size:
                sc = scalar_events(data, fr)
                payloads = {}
                for i in sc.rest.tolist():
                    o, m = int(fr.offsets[i]), int(fr.lengths[i])
                    payloads[n + i] = data[o : o + m]
                sc.index = sc.index + n
                sc.rest = sc.rest + n
                self.records += fr.offsets.size
                self.consumed += fr.consumed
                yield sc, payloads
                del sc, payloads
            left = len(data) - fr.consumed
            if not block:  # end of file: what is left is a torn record
                return
            if left >= 12 and not _header_ok(data, fr.consumed):
                self._skip_rest()
                return  # a damaged length: the file ends here
            if left >= 16 and left >= 16 + struct.unpack_from("<Q", data, fr.consumed)[0]:
                self._skip_rest()
                return  # a whole record that fails its payload check: the file ends here
            carry = data[fr.consumed :]
            del data, fr


def read_events(f: object, chunk: int = CHUNK) -> EventFile:
    """:class:`EventWindows` of ``f`` gathered into one :class:`EventFile` (what :func:`frames` and
    :func:`scalar_events` give for the whole file).

    >>> import io, struct
    >>> def rec(p): h = struct.pack("<Q", len(p)); return (h + struct.pack("<I", masked_crc32c(h))
    ...     + p + struct.pack("<I", masked_crc32c(p)))
    >>> ev = read_events(io.BytesIO(rec(b"ab") + rec(b"xyz") + b"\x01"), chunk=20)
    >>> ev.records, sorted(ev.payloads.values()), ev.consumed, ev.size
    (2, [b'ab', b'xyz'], 37, 38)
    """
    windows = EventWindows(f, chunk)
    parts: list[ScalarEvents] = []
    payloads: dict[int, bytes] = {}
    for sc, more in windows:
        parts.append(sc)
        payloads.update(more)
    return EventFile(windows.size, windows.consumed, windows.records, _concat(parts), payloads)


def _concat(parts: list[ScalarEvents]) -> ScalarEvents:
    """The windows' scalar events as one, their tags in one list (in order of first appearance)."""
    names: dict[str, int] = {}
    tag_cols = []
    for sc in parts:
        remap = np.array([names.setdefault(t, len(names)) for t in sc.tags] or [0], dtype=np.int64)
        tag_cols.append(remap[sc.tag] if sc.tag.size else sc.tag.astype(np.int64))

    def cat(name: str, dtype: type[np.generic]) -> np.ndarray:
        cols = [getattr(sc, name) for sc in parts]
        return np.concatenate(cols).astype(dtype, copy=False) if cols else np.zeros(0, dtype=dtype)

    tags = np.concatenate(tag_cols).astype(np.int64, copy=False) if tag_cols else np.zeros(0, dtype=np.int64)
    return ScalarEvents(
        cat("index", np.int64),
        cat("wall_time", np.float64),
        cat("step", np.int64),
        tags,
        cat("value", np.float64),
        list(names),
        cat("rest", np.int64),
    )
