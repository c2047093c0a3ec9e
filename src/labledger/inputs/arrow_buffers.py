"""Arrow arrays and numpy arrays over the same buffers, without pyarrow's conversions (which import
pandas where it is installed): :func:`numpy_arrow`, :func:`arrow_numpy`,
and :func:`one_array` of a chunked column without a copy; :func:`hand_back` of the allocators'
freed pages."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from labledger.machine import trim_heap

_PLAIN = {
    pa.float64(): np.float64,
    pa.int64(): np.int64,
    pa.int32(): np.int32,
    pa.int16(): np.int16,
    pa.int8(): np.int8,
    pa.uint8(): np.uint8,
    pa.uint32(): np.uint32,
}


def hand_back() -> None:
    """Hands the freed pages that the allocators keep for reuse back to the system: Arrow's pool
    (``release_unused``), and the C allocator's (glibc's ``malloc_trim``) that numpy and the scan
    threads' buffers use. A thread's arena keeps what it freed, so a scan in two threads kept its
    two buffers and their checks resident under the whole read after it. The JSONL reader calls it where it has let go of what it parsed; elsewhere a command
    keeps freed pages for its next arrays (:func:`labledger.cli.base.process_settings`). A few
    milliseconds; a no-op where there is nothing to hand back."""
    pa.default_memory_pool().release_unused()
    trim_heap()


def one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``column`` as one Arrow array: a chunked array of one chunk is that chunk, not a copy of it
    (``combine_chunks`` copies even a single chunk, pyarrow 26: every memory-mapped cache column was
    read into a second, anonymous copy); of several chunks, their concatenation.

    >>> c = pa.chunked_array([[1, 2, 3]])
    >>> one_array(c).buffers()[1].address == c.chunk(0).buffers()[1].address, one_array(pa.chunked_array([[1], [2]])).to_pylist()
    (True, [1, 2])
    """
    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def numpy_arrow(values: Any, type_: pa.DataType) -> pa.Array:
    """``pa.array(values, type_)`` of numeric numpy values (``type_`` one of ``_PLAIN``'s): an Arrow
    array over one contiguous buffer of them, made without ``pa.array``, which imports pandas where
    it is installed for any numpy array or list. A view of ``values`` when they are already
    contiguous and of that type: they must not change while the array is in use.

    >>> numpy_arrow(np.array([3, 1]), pa.int64()).to_pylist(), numpy_arrow(np.arange(6.0).reshape(3, 2)[:, 1], pa.float64()).to_pylist()
    ([3, 1], [1.0, 3.0, 5.0])
    """
    arr = np.ascontiguousarray(values, dtype=_PLAIN[type_])
    return pa.Array.from_buffers(type_, len(arr), [None, pa.py_buffer(arr)])


def arrow_numpy(column: pa.Array | pa.ChunkedArray, *, copy: bool = True) -> np.ndarray:
    """A numeric or boolean Arrow column without nulls as a writable numpy array, from its buffers;
    anything else through pyarrow's ``to_numpy`` (which imports pandas). ``copy=False``: a numeric
    column of one chunk comes back as a read-only view of its buffer (a memory-mapped cache entry's pages, not a second copy of them).

    >>> arrow_numpy(pa.chunked_array([[1.5, 2.5], [3.5]])).tolist(), arrow_numpy(pa.array([True, False, True]).slice(1)).tolist()
    ([1.5, 2.5, 3.5], [False, True])
    >>> c = pa.chunked_array([[1, 2, 3]]).slice(1)
    >>> v = arrow_numpy(c, copy=False); v.tolist(), v.flags.writeable
    ([2, 3], False)
    >>> v.ctypes.data == c.chunk(0).buffers()[1].address + 8   # the column's own memory
    True
    """
    arr = one_array(column)
    if arr.null_count == 0:
        n, off = len(arr), arr.offset
        plain = _PLAIN.get(arr.type)
        if plain is not None:
            view = np.frombuffer(arr.buffers()[1], dtype=plain, count=n + off)[off:]
            if copy:
                return view.copy()
            view.flags.writeable = False  # never a write into the Arrow data
            return view
        if pa.types.is_boolean(arr.type):
            bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=(n + off + 7) // 8)
            return np.unpackbits(bits, count=n + off, bitorder="little")[off:].astype(bool)
    return np.asarray(arr.to_numpy(zero_copy_only=False))


#: Packed strings are compressed by zstd at level 1 (chosen over lz4: docs/performance.md).
PACK_CODEC = "zstd"


class PackedStrings:
    """A string column kept compressed, added a chunk at a time and made whole again on each call of
    :meth:`arrow`: for a column a reader must keep but seldom reads (a results file's ids, which an
    evaluation never reads). Each chunk's characters
    and lengths (in the narrowest type that holds the longest) are compressed apart.

    >>> packed = PackedStrings(); packed.add(pa.array(["a", "bc"])); packed.add(pa.array(["", "déf"]).slice(1))
    >>> packed.n, packed.arrow().to_pylist(), packed.arrow().type
    (3, ['a', 'bc', 'déf'], DataType(string))
    """

    def __init__(self) -> None:
        self.n = 0
        #: (rows, lengths' dtype, packed lengths, characters' bytes, packed characters) of each chunk
        self._parts: list[tuple[int, np.dtype[Any], Any, int, Any]] = []

    def add(self, chunk: pa.Array) -> None:
        """Add the strings of ``chunk`` (a string array without nulls) after those added before."""
        if not pa.types.is_string(chunk.type) or chunk.null_count:
            raise ValueError("PackedStrings holds strings without nulls")
        m = len(chunk)
        if not m:
            return
        codec = pa.Codec(PACK_CODEC)
        _, off_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(off_buf, dtype=np.int32)[chunk.offset : chunk.offset + m + 1]
        lens = np.diff(offsets)
        lens = lens.astype(np.min_scalar_type(int(lens.max(initial=0))))
        lo, size = int(offsets[0]), int(offsets[-1] - offsets[0])
        # as bytes of their own size: the codec's buffer keeps the capacity of its bound, the size
        # of what it packed
        chars = codec.compress(data_buf.slice(lo, size), asbytes=True) if size else None
        self._parts.append((m, lens.dtype, codec.compress(lens, asbytes=True), size, chars))
        self.n += m

    def arrow(self) -> pa.Array:
        """The strings as one new Arrow array (``large_string`` past 2 GiB of characters)."""
        codec = pa.Codec(PACK_CODEC)
        total = sum(size for *_, size, _ in self._parts)
        wide = total >= 2**31
        offsets: np.ndarray = np.zeros(self.n + 1, dtype=np.int64 if wide else np.int32)
        chars = np.empty(total, dtype=np.uint8)
        row = at = 0
        for m, dtype, lens, size, packed in self._parts:
            made = np.frombuffer(codec.decompress(lens, decompressed_size=m * dtype.itemsize), dtype=dtype)
            part = offsets[row + 1 : row + m + 1]
            np.cumsum(made, dtype=offsets.dtype, out=part)
            part += at
            if size:
                chars[at : at + size] = np.frombuffer(codec.decompress(packed, decompressed_size=size), dtype=np.uint8)
            row, at = row + m, at + size
        kind = pa.large_string() if wide else pa.string()
        return pa.Array.from_buffers(kind, self.n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)])


def _numbers(column: pa.ChunkedArray, dtype: Any) -> np.ndarray:
    """A numeric column as a numpy array of ``dtype`` (:func:`arrow_numpy`): a read-only view of the
    entry's buffer where the types agree (no copy of a memory-mapped column), else a copy.

    >>> _numbers(pa.chunked_array([[1.5, 2.5], [3.5]]), np.float64).tolist()
    [1.5, 2.5, 3.5]
    """
    return np.asarray(arrow_numpy(column, copy=False), dtype=dtype)


__all__ = ["PackedStrings", "arrow_numpy", "numpy_arrow", "one_array"]
