"""A columnar cache of record and result files: zstd Parquet keyed by the source's content.

A large JSONL file (a result set, a run's ``batches.jsonl``) that has been read once as Arrow
columns is kept as zstd Parquet in a cache folder, so the next read costs a Parquet read instead
of parsing and checking JSON again. The JSONL stays the source of truth: a cache entry is used only
when its recorded *content key* equals the source's now, and anything else is rebuilt from the
source.

- The content key is ``xxh3_128`` of the source's bytes and its size (an edit that keeps the size
  and the modification time is still seen).
- One entry per (source path, kind, parameters): a changed source overwrites its entry, so a live
  run's file does not fill the folder with stale copies.
- Entries are written to a temporary file in the cache folder and renamed into place: a crash
  mid-write leaves the old entry or none, never half of one; an unreadable entry (a torn or
  foreign file) is treated as missing and rebuilt. A *columns* entry also carries the ``xxh3_64``
  digest of its bytes, checked on every read: one whose bytes changed after it was written is
  rebuilt too, so what was computed from the source when the entry was made (a result set's sort
  orders and tie groups) is used as it is.
- Two layouts, both standard files that pyarrow (and so duckdb, polars...) reads: zstd Parquet
  (:func:`store_table`: record tables, which ``export`` copies as they are), and a *columns* entry
  (:func:`store_columns`: result sets), an uncompressed Arrow IPC file (``.arrow``) of one row whose
  columns each hold a whole array, read through a memory map: the numeric arrays are numpy views of
  the map, no decode and no copy. It is larger than Parquet and reads faster (docs/performance.md).
  A columns entry of the layout before #42 (``.cols``, a private format) is never read: the next
  read of its source rebuilds it as an Arrow file, and ``prune`` removes it.
- The folder: ``$LABLEDGER_CACHE_DIR``, else ``$XDG_CACHE_HOME/labledger/columnar``, else
  ``~/.cache/labledger/columnar``. ``LABLEDGER_CACHE_DIR=off`` (or empty) turns the cache off.
  Files under :data:`MIN_CACHE_BYTES` are not cached (they read fast anyway).
- The folder is bounded: after each write, the entries used least recently (a read of an entry
  marks it used) are removed until it holds at most :data:`MAX_CACHE_BYTES`
  (``$LABLEDGER_CACHE_MAX_BYTES``; 0: no bound), and a writer's leftover temporary file (one killed
  mid-write) once it is :data:`STALE_TEMPORARY_S` old. :func:`cache_info`, :func:`prune_cache`
  and :func:`clear_cache` (``labledger cache info/prune/clear``) show and free it.

>>> import tempfile, pathlib, pyarrow as pa
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> src = folder / "r.jsonl"; _ = src.write_bytes(b'{"a": 1}\\n')
>>> key = content_key(src.read_bytes())
>>> store_table(pa.table({"a": [1]}), src, "demo", key, folder=folder)
True
>>> cached_table(src, "demo", folder=folder).to_pydict()
{'a': [1]}
>>> _ = src.write_bytes(b'{"a": 2}\\n')   # same size, new content: the entry is stale
>>> cached_table(src, "demo", folder=folder) is None
True
>>> import numpy as np
>>> store_columns(src, "demo", content_key(src.read_bytes()), {"n": 2}, {"x": np.arange(3.0)}, {"s": pa.array(["a"])}, folder=folder)
True
>>> found = cached_columns(src, "demo", folder=folder)
>>> found.meta, found.arrays["x"].tolist(), found.arrow("s").to_pylist()
({'n': 2}, [0.0, 1.0, 2.0], ['a'])
>>> pa.ipc.open_file(entry_path(src, "demo", folder, "columns")).read_all().to_pydict()  # any Arrow reader
{'x': [[0.0, 1.0, 2.0]], 's': [['a']]}
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, NamedTuple

import orjson
import xxhash

if TYPE_CHECKING:
    from concurrent.futures import Future

    import numpy as np
    import pyarrow as pa

#: Environment variable naming the cache folder (``off`` or empty: no cache).
CACHE_DIR_ENV = "LABLEDGER_CACHE_DIR"
#: Sources smaller than this are read directly, never cached (``$LABLEDGER_CACHE_MIN_BYTES`` overrides it).
MIN_CACHE_BYTES = 4 * 2**20
MIN_BYTES_ENV = "LABLEDGER_CACHE_MIN_BYTES"
#: The most bytes of entries the cache folder keeps (``$LABLEDGER_CACHE_MAX_BYTES`` overrides it;
#: 0: no bound): past it, the entries used least recently are removed after each write.
MAX_CACHE_BYTES = 20 * 2**30
MAX_BYTES_ENV = "LABLEDGER_CACHE_MAX_BYTES"
#: A temporary entry file this old (seconds) is a writer's leftover (killed mid-write): pruned.
STALE_TEMPORARY_S = 3600
#: Bump when the layout of a cached table changes: older entries are then ignored.
FORMAT_VERSION = 1
_KEY = b"labledger.content_key"
_KIND = b"labledger.kind"
_FORMAT = b"labledger.format"
_SOURCE = b"labledger.source"
#: How an entry is stored: zstd Parquet, or a columns file (:func:`store_columns`).
Layout = Literal["parquet", "columns"]
_SUFFIX = {"parquet": ".parquet", "columns": ".arrow"}
#: The suffix of a columns entry as labledger wrote them before #42 (a file of its own layout): such
#: a file is never read, counts against the folder's bound until it goes, goes with ``prune``, and
#: goes when the entry of the same source is written again.
_LEGACY_SUFFIX = ".cols"


def cache_folder() -> Path | None:
    """The cache folder from the environment (see the module docstring), or ``None`` when off.

    >>> import os; os.environ[CACHE_DIR_ENV] = "off"; cache_folder() is None
    True
    >>> del os.environ[CACHE_DIR_ENV]
    """
    env = os.environ.get(CACHE_DIR_ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "labledger" / "columnar"


def min_cache_bytes() -> int:
    """The smallest source worth caching: ``$LABLEDGER_CACHE_MIN_BYTES``, else :data:`MIN_CACHE_BYTES`.

    >>> min_cache_bytes() == MIN_CACHE_BYTES or MIN_BYTES_ENV in os.environ
    True
    """
    return _env_bytes(MIN_BYTES_ENV, MIN_CACHE_BYTES)


def _env_bytes(name: str, default: int) -> int:
    """A whole number of bytes (at least 0) from the environment variable ``name``, else ``default``
    (also for a value that is not a whole number)."""
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


def max_cache_bytes() -> int:
    """The most bytes the cache folder keeps: ``$LABLEDGER_CACHE_MAX_BYTES``, else
    :data:`MAX_CACHE_BYTES` (0: no bound; a value that is not a whole number is ignored).

    >>> max_cache_bytes() == MAX_CACHE_BYTES or MAX_BYTES_ENV in os.environ
    True
    """
    return _env_bytes(MAX_BYTES_ENV, MAX_CACHE_BYTES)


class CacheFile(NamedTuple):
    """One file of the cache folder (:func:`cache_files`)."""

    path: Path
    #: Its size in bytes.
    bytes: int
    #: When it was last written or read (unix seconds: its modification time).
    used: float
    #: A temporary file of a write in progress, or left by a writer that was killed.
    temporary: bool


def cache_files(folder: Path | None = None) -> list[CacheFile]:
    """The entries and temporary files of the cache folder (default: :func:`cache_folder`), least
    recently used first; none when the cache is off or the folder does not exist yet."""
    folder = folder if folder is not None else cache_folder()
    found: list[CacheFile] = []
    if folder is None:
        return found
    suffixes = (*_SUFFIX.values(), _LEGACY_SUFFIX)
    try:
        scan = list(os.scandir(folder))
    except FileNotFoundError:
        return found
    for item in scan:
        if not item.name.endswith(suffixes):
            continue
        try:
            st = item.stat(follow_symlinks=False)
        except FileNotFoundError:  # removed meanwhile (another process pruning)
            continue
        if stat.S_ISREG(st.st_mode):
            found.append(CacheFile(Path(item.path), st.st_size, st.st_mtime, item.name.startswith(".tmp-")))
    found.sort(key=lambda f: (f.used, f.path.name))
    return found


def _remove(files: list[CacheFile]) -> list[CacheFile]:
    """Unlink ``files``; those it removed (one already gone, or that cannot be removed, is skipped)."""
    removed = []
    for f in files:
        try:
            f.path.unlink()
        except OSError:  # gone already, held open where that forbids removal (Windows), no permission
            continue
        removed.append(f)
    return removed


def _stale(f: CacheFile, now: float) -> bool:
    """Whether ``f`` is a temporary file a killed writer left (:data:`STALE_TEMPORARY_S` old or more);
    a younger one may be a write in progress."""
    return f.temporary and now - f.used >= STALE_TEMPORARY_S


def prune_cache(
    folder: Path | None = None,
    *,
    max_bytes: int | None = None,
    keep: Path | None = None,
    orphans: bool = False,
    now: float | None = None,
) -> list[CacheFile]:
    """Remove the entries of the cache folder used least recently until it holds at most
    ``max_bytes`` (default :func:`max_cache_bytes`; 0: no bound), and the temporary files at least
    :data:`STALE_TEMPORARY_S` old; never ``keep`` (the entry just written). ``orphans``: first the
    entries whose source file is gone (:func:`entry_source`; each entry's schema is read), and those
    of a layout no longer read (an older labledger's ``.cols`` files). What it removed.

    >>> import tempfile, pathlib, time
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for k, name in enumerate(["a.arrow", "b.arrow", "c.parquet"]):
    ...     _ = (d / name).write_bytes(b"x" * 100); os.utime(d / name, (k, 1000 + k))
    >>> [f.path.name for f in prune_cache(d, max_bytes=150)], [f.path.name for f in cache_files(d)]
    (['a.arrow', 'b.arrow'], ['c.parquet'])
    """
    folder = folder if folder is not None else cache_folder()
    bound = max_cache_bytes() if max_bytes is None else max_bytes
    now = time.time() if now is None else now
    files = cache_files(folder)
    stale = [f for f in files if _stale(f, now)]
    entries = [f for f in files if not f.temporary]
    if orphans:
        gone = [f for f in entries if f.path != keep and _orphan(f.path)]
        stale += gone
        entries = [f for f in entries if f not in gone]
    excess = sum(f.bytes for f in entries) - bound if bound > 0 else 0
    going = []
    for f in entries:  # least recently used first
        if excess <= 0:
            break
        if keep is not None and f.path == keep:
            continue
        going.append(f)
        excess -= f.bytes
    return _remove(stale + going)


def _orphan(entry: Path) -> bool:
    """Whether ``entry`` says which file it was made from and that file is gone, or is of a layout
    no longer read (:data:`_LEGACY_SUFFIX`)."""
    if entry.suffix == _LEGACY_SUFFIX:
        return True
    source = entry_source(entry)
    return source is not None and not os.path.exists(source)


def clear_cache(folder: Path | None = None, *, now: float | None = None) -> list[CacheFile]:
    """Remove every entry of the cache folder, and the temporary files at least
    :data:`STALE_TEMPORARY_S` old (a younger one may be a write in progress). What it removed."""
    now = time.time() if now is None else now
    files = cache_files(folder)
    return _remove([f for f in files if not f.temporary or _stale(f, now)])


def cache_info(folder: Path | None = None) -> dict[str, Any]:
    """The cache folder's state: where it is (``None``: off), its entries and their bytes, its
    bound, its temporary files, and when its least and most recently used entries were used.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "a.arrow").write_bytes(b"x" * 10)
    >>> info = cache_info(d); info["entries"], info["bytes"], info["temporaries"]
    (1, 10, 0)
    """
    folder = folder if folder is not None else cache_folder()
    files = cache_files(folder)
    entries = [f for f in files if not f.temporary]
    return {
        "folder": str(folder) if folder is not None else None,
        "on": folder is not None,
        "entries": len(entries),
        "bytes": sum(f.bytes for f in entries),
        "max_bytes": max_cache_bytes(),
        "min_source_bytes": min_cache_bytes(),
        "temporaries": len(files) - len(entries),
        "temporary_bytes": sum(f.bytes for f in files if f.temporary),
        "least_recent_use": min((f.used for f in entries), default=None),
        "most_recent_use": max((f.used for f in entries), default=None),
    }


def _used(entry: Path) -> None:
    """Mark ``entry`` used now (its modification time): the bound removes it last."""
    with contextlib.suppress(OSError):  # a folder shared read-only: the order stays as it was
        os.utime(entry)


def content_key(data: bytes | bytearray | memoryview | mmap.mmap) -> str:
    """The content key of a source's bytes: ``xxh3_128`` hex digest and size.

    >>> content_key(b"abc")
    'xxh3_128:06b05ab6733a618578af5f94892f3950:3'
    """
    return f"xxh3_128:{xxhash.xxh3_128_hexdigest(data)}:{len(data)}"


def hashed_key(h: xxhash.xxh3_128, size: int) -> str:
    """:func:`content_key` of ``size`` bytes fed to the ``xxh3_128`` hasher ``h`` in parts.

    >>> h = xxhash.xxh3_128(); h.update(b"ab"); h.update(b"c"); hashed_key(h, 3) == content_key(b"abc")
    True
    """
    return f"xxh3_128:{h.hexdigest()}:{size}"


#: Bytes of a file read at once while its key is computed (:func:`file_key`).
KEY_WINDOW = 8 * 2**20


def file_identity(st: os.stat_result) -> tuple[int, ...]:
    """What tells one state of a file from another without reading it: device, inode, size, and the
    modification and change times (ns)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _in_thread(work: Callable[[], Any], name: str, *, daemon: bool = False) -> Future[Any]:
    """``work()`` run in a new thread: its result, or its error, in the future returned."""
    from concurrent.futures import Future

    done: Future[Any] = Future()

    def run() -> None:
        try:
            done.set_result(work())
        except Exception as e:  # noqa: BLE001 - given to whoever asks for the result
            done.set_exception(e)

    threading.Thread(target=run, name=name, daemon=daemon).start()
    return done


#: Content keys being computed in threads (:func:`prefetch_key`), by the source's real path: the
#: identity of the file as it was when its hash began, and the key to come.
_PENDING: dict[str, tuple[tuple[int, ...], Future[str | None]]] = {}
_PENDING_LOCK = threading.Lock()


def prefetch_key(path: str | os.PathLike[str]) -> bool:
    """Start computing the :func:`file_key` of a source worth caching (the cache on, at least
    :func:`min_cache_bytes`) in a thread; whether one was started. The CLI calls it as soon as it knows
    its files, so that a file is hashed while the command's modules import (xxhash and the reads let
    go of the GIL). :func:`file_key` and
    :func:`take_prefetched` of the same file, unchanged since (the same :func:`file_identity`), take
    the result instead of hashing it again; a file changed since is hashed again.
    """
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or wanted(st.st_size) is None:
        return False
    identity = file_identity(st)
    with _PENDING_LOCK:
        _PENDING[os.path.realpath(path)] = (
            identity,
            _in_thread(lambda: _hashed(path, KEY_WINDOW, identity), "labledger-key", daemon=True),
        )
    return True


def take_prefetched(path: str | os.PathLike[str], identity: tuple[int, ...] | None = None) -> str | None:
    """The key :func:`prefetch_key` computed of ``path`` (waiting for it), when the file is still
    the one hashed (its :func:`file_identity` now, or the ``identity`` given: that of a file the caller
    has open); else ``None``. A key is taken once."""
    with _PENDING_LOCK:
        pending = _PENDING.pop(os.path.realpath(path), None)
    if pending is None:
        return None
    hashed, key = pending
    found = key.result() if key.exception() is None else None
    if identity is None:
        try:
            identity = file_identity(os.stat(path))
        except OSError:
            return None
    return found if identity == hashed else None


def prefetching(path: str | os.PathLike[str]) -> bool:
    """Whether :func:`prefetch_key` is hashing ``path`` (or has, and its key is not taken yet)."""
    with _PENDING_LOCK:
        return os.path.realpath(path) in _PENDING


def file_key(path: str | os.PathLike[str], *, window: int = KEY_WINDOW) -> str | None:
    """:func:`content_key` of a file, read and hashed ``window`` bytes at a time (never more than one
    window of the file held, where a whole-file map would hold every page of it); ``None`` if
    unreadable.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "f"; _ = p.write_bytes(b"abc" * 5000)
    >>> file_key(p) == file_key(p, window=4096) == content_key(b"abc" * 5000)
    True
    >>> file_key(p.parent / "missing") is None
    True
    """
    found = take_prefetched(path)
    return found if found is not None else _hashed(path, window)


def _hashed(path: str | os.PathLike[str], window: int, identity: tuple[int, ...] | None = None) -> str | None:
    """:func:`file_key` computed now (``None`` also when ``identity`` is given and the file opened is
    not that one, or when the file is cut shorter while it is read). The file is read into one
    buffer of ``window`` bytes, not mapped: a map of a file that another process cuts shorter while
    it is hashed (a harness rewriting its results file) kills the reader with SIGBUS on its next
    page; a read just ends early."""
    try:
        with open(path, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            if identity is not None and file_identity(st) != identity:
                return None
            size = st.st_size
            if size == 0:
                return content_key(b"")
            view = memoryview(bytearray(max(1, min(window, size))))
            h, got = xxhash.xxh3_128(), 0
            while got < size:
                k = f.readinto(view[: min(len(view), size - got)])
                if not k:
                    return None  # cut shorter since it was opened: no key for a file in the middle of a write
                h.update(view[:k])
                got += k
            return hashed_key(h, size)
    except (OSError, ValueError):
        return None


def entry_path(source: str | os.PathLike[str], kind: str, folder: Path, layout: Layout = "parquet") -> Path:
    """Where the cache entry of ``source`` (read as ``kind``, stored as ``layout``) lives in ``folder``.

    >>> p = entry_path("/data/r.jsonl", "results", Path("/c"))
    >>> p.name.startswith("results-"), p.suffix, entry_path("/data/r.jsonl", "results", Path("/c"), "columns").suffix
    (True, '.parquet', '.arrow')
    """
    where = os.path.realpath(source)
    return folder / f"{kind}-{xxhash.xxh3_64_hexdigest(f'{where}|{kind}'.encode())}{_SUFFIX[layout]}"


def wanted(size: int) -> Path | None:
    """The cache folder when a source of ``size`` bytes is worth caching, else ``None``.

    >>> wanted(0) is None
    True
    """
    if size < min_cache_bytes():
        return None
    return cache_folder()


def fresh_entry(
    source: str | os.PathLike[str], kind: str, *, folder: Path | None = None, key: str | None = None
) -> Path | None:
    """The cache entry of ``source`` when it matches the source's content now (a Parquet file that
    may be copied as it is), else ``None``.

    >>> import tempfile, pathlib, pyarrow as pa
    >>> d = pathlib.Path(tempfile.mkdtemp()); src = d / "r.jsonl"; _ = src.write_bytes(b"{}\\n")
    >>> _ = store_table(pa.table({"a": [1]}), src, "demo", content_key(b"{}\\n"), folder=d)
    >>> fresh_entry(src, "demo", folder=d) == entry_path(src, "demo", d)
    True
    """
    folder = folder if folder is not None else cache_folder()
    if folder is None:
        return None
    entry = entry_path(source, kind, folder)
    if not entry.is_file():
        return None
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(entry).metadata
    except (OSError, ValueError):  # a torn or foreign file: pyarrow raises ArrowInvalid (a ValueError)
        return None
    if not _matches(_stamp(meta), source, kind, key):
        return None
    _used(entry)
    return entry


def cached_table(
    source: str | os.PathLike[str],
    kind: str,
    *,
    folder: Path | None = None,
    key: str | None = None,
) -> pa.Table | None:
    """The cached table of ``source`` (a Parquet entry) when its entry matches the source's content
    now, else ``None`` (see the module docstring's example).

    ``key`` is the source's :func:`content_key` when the caller already has it. A stale entry, a
    torn one or one of another format is never returned.
    """
    folder = folder if folder is not None else cache_folder()
    if folder is None:
        return None
    entry = entry_path(source, kind, folder)
    if not entry.is_file():
        return None
    # one open of the entry, through the file reader: pq.read_table goes through pyarrow.dataset,
    # whose import loads pandas
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(entry) as f:
            if not _matches(_stamp(f.schema_arrow.metadata), source, kind, key):
                return None
            table = f.read()
    except (OSError, ValueError):  # a torn or foreign file: pyarrow raises ArrowInvalid (a ValueError)
        return None
    _used(entry)
    return table


#: What an entry says it is: its format, its kind and its source's content key.
Stamp = tuple[Any, Any, Any]


def _stamp(meta: Mapping[bytes, bytes] | None) -> Stamp:
    """The :data:`Stamp` in an entry's schema metadata (Parquet or Arrow IPC)."""
    found = meta or {}

    def text(name: bytes) -> str | None:
        value = found.get(name)
        return None if value is None else value.decode()

    return text(_FORMAT), text(_KIND), text(_KEY)


def _matches(stamp: Stamp, source: str | os.PathLike[str], kind: str, key: str | None) -> bool:
    """Whether an entry's :data:`Stamp` is this format's, ``kind`` and the source's content key now."""
    format_, entry_kind, entry_key = stamp
    if format_ != str(FORMAT_VERSION) or entry_kind != kind:
        return False
    key = key if key is not None else file_key(source)
    return key is not None and entry_key == key


def _write_entry(folder: Path, entry: Path, write: Callable[[BinaryIO], None]) -> bool:
    """Write an entry through ``write`` into a temporary file in ``folder``, renamed into place once
    whole; whether it was written. A folder that refuses it (a full disk, no permission) is said
    once per process (:func:`_warn_unwritable`); a table pyarrow cannot write is simply not cached."""
    import tempfile

    tmp: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=entry.suffix, dir=folder)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, entry)
        tmp = None
    except OSError as e:  # pyarrow's IO errors are OSErrors too
        _warn_unwritable(folder, e)
        return False
    except (ValueError, TypeError, NotImplementedError):
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    with contextlib.suppress(OSError):  # the folder's bound, kept by each writer
        prune_cache(folder, keep=entry)
    return True


def store_table(
    table: pa.Table,
    source: str | os.PathLike[str],
    kind: str,
    key: str,
    *,
    folder: Path | None = None,
) -> bool:
    """Write ``table`` as the Parquet cache entry of ``source`` (content ``key``), atomically;
    whether it was written (a cache that cannot be written is skipped: it is only a cache). A folder
    that refuses the write (a full disk, no permission) is said once per process, as a
    :class:`~labledger.errors.CacheWarning` (the CLI prints ``Warning: ...`` on stderr).

    >>> import tempfile, pathlib, warnings, pyarrow as pa
    >>> blocked = pathlib.Path(tempfile.mkdtemp()) / "a-file"; _ = blocked.write_text("")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     store_table(pa.table({"a": [1]}), blocked, "demo", "k", folder=blocked)  # not a folder
    ...     store_table(pa.table({"a": [1]}), blocked, "demo", "k", folder=blocked)
    False
    False
    >>> [str(w.message).split(" (")[0] for w in caught] == [f"the columnar cache in {blocked} could not be written"]
    True
    """
    folder = folder if folder is not None else cache_folder()
    if folder is None:
        return False
    meta = dict(table.schema.metadata or {})
    meta.update(
        {
            _KEY: key.encode(),
            _KIND: kind.encode(),
            _FORMAT: str(FORMAT_VERSION).encode(),
            _SOURCE: os.path.realpath(source).encode(),
        }
    )
    table = table.replace_schema_metadata(meta)

    def write(f: BinaryIO) -> None:
        import pyarrow.parquet as pq

        pq.write_table(table, f, compression="zstd")

    return _write_entry(folder, entry_path(source, kind, folder), write)


#: Schema metadata of a columns entry (:func:`store_columns`): its JSON ``meta``; field metadata of a
#: column that :attr:`Columns.arrays` gives as numpy (its dtype); the trailing batch's custom
#: metadata: the digest of the bytes before it.
_META = b"labledger.meta"
_ARRAY = b"labledger.numpy_dtype"
_DIGEST = b"labledger.digest"


class Columns(NamedTuple):
    """A columns entry as read (:func:`cached_columns`): its JSON ``meta``, its numeric ``arrays``
    (read-only views of the entry's memory map) and ``arrow(name)``, any of its columns as an Arrow
    array (also a view of the map)."""

    meta: Any
    arrays: dict[str, np.ndarray]
    arrow: Callable[[str], Any]


#: The columns entries being written in threads, by entry, while writes are deferred
#: (:func:`defer_writes`; ``None``: written by the caller).
_deferred: dict[Path, Future[bool]] | None = None


def defer_writes() -> None:
    """From now until :func:`wait_for_writes`, a columns entry (a result set's) is written in a
    thread, beside what follows the read, instead of before the read returns: the CLI's ``eval``,
    ``compare`` and ``calibrate`` evaluate while the entry goes to disk. A read of the same entry meanwhile waits for it."""
    global _deferred
    if _deferred is None:
        _deferred = {}


def wait_for_writes() -> None:
    """Wait for the entries :func:`defer_writes` left in threads and write them in the caller again
    from now on; an error of theirs that is not the cache's own (a folder that refuses the write is
    said as a :class:`~labledger.errors.CacheWarning`) is raised here, as if written here."""
    global _deferred
    pending, _deferred = _deferred or {}, None
    errors = [written.exception() for written in pending.values()]  # (each waited for)
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first


def _write_later(folder: Path, entry: Path, write: Callable[[BinaryIO], None]) -> bool:
    """:func:`_write_entry` in a thread when writes are deferred (True: under way), else now."""
    pending = _deferred
    if pending is None:
        return _write_entry(folder, entry, write)
    pending[entry] = _in_thread(lambda: _write_entry(folder, entry, write), "labledger-cache-write")
    return True


def store_columns(
    source: str | os.PathLike[str],
    kind: str,
    key: str,
    meta: Any,
    arrays: Mapping[str, np.ndarray],
    arrow: Mapping[str, Any] | None = None,
    *,
    folder: Path | None = None,
) -> bool:
    """Write a columns entry of ``source`` (content ``key``), atomically: ``meta`` (anything JSON
    holds), the numeric ``arrays`` (1-D, integer or floating) and the ``arrow`` columns (Arrow
    arrays, of one length or several). Whether it was written, as :func:`store_table`.

    The file is an uncompressed Arrow IPC file (``pyarrow.ipc.open_file`` reads it) of one row:
    each column is a ``large_list`` holding a whole array, so that arrays of any lengths share it;
    an array's field says its numpy dtype (``labledger.numpy_dtype``). The schema's metadata holds
    the format, kind, content key, source path and the JSON ``meta``. A second batch of no rows
    carries, in its custom metadata, the ``xxh3_64`` digest of every byte of the file before it and
    their count (``labledger.digest``: ``HEX:BYTES``). A torn file lacks Arrow's footer and is never
    read; a file whose bytes changed after it was written (a crash before they reached the disk, a
    bad sector, another program) fails its digest and is never read either.
    """
    folder = folder if folder is not None else cache_folder()
    if folder is None:
        return False
    import numpy as np

    entry = entry_path(source, kind, folder, "columns")

    def write(f: BinaryIO) -> None:
        import pyarrow as pa

        fields: list[pa.Field] = []
        columns: list[pa.Array] = []
        for name, given in arrays.items():
            arr = np.ascontiguousarray(given)
            if arr.ndim != 1 or arr.dtype.kind not in "iuf":
                raise TypeError(f"{name}: a columns entry holds 1-D numeric arrays")
            arr = arr.astype(arr.dtype.newbyteorder("="), copy=False)
            # Arrow over the array's own memory (no copy; pa.array of numpy values imports pandas)
            column = _one_row(
                pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr), [None, pa.py_buffer(arr)])
            )
            fields.append(pa.field(name, column.type, metadata={_ARRAY: arr.dtype.str.encode()}))
            columns.append(column)
        for name, values in (arrow or {}).items():
            if isinstance(values, pa.ChunkedArray):
                values = values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
            column = _one_row(values)
            fields.append(pa.field(name, column.type))
            columns.append(column)
        stamp = {_KEY: key, _KIND: kind, _FORMAT: str(FORMAT_VERSION), _SOURCE: os.path.realpath(source)}
        schema = pa.schema(fields, metadata={**{k: v.encode() for k, v in stamp.items()}, _META: orjson.dumps(meta)})
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        with pa.ipc.new_file(f, schema) as writer:
            writer.write_batch(batch)
            # the digest of what was written, read back once the batch is on its way to the disk
            end = f.tell()
            digest = xxhash.xxh3_64()
            _digest_written(f, end, digest)
            empty = pa.RecordBatch.from_arrays([_no_rows(column) for column in columns], schema=schema)
            writer.write_batch(empty, custom_metadata={_DIGEST: f"{digest.hexdigest()}:{end}".encode()})
        with contextlib.suppress(OSError):  # this entry as an older labledger wrote it (never read again)
            entry.with_suffix(_LEGACY_SUFFIX).unlink()

    return _write_later(folder, entry, write)


def _one_row(values: Any) -> Any:
    """``values`` (an Arrow array) as the one list of a one-row ``large_list`` array (no copy)."""
    import numpy as np
    import pyarrow as pa

    offsets = pa.py_buffer(np.array([0, len(values)], np.int64))
    return pa.Array.from_buffers(pa.large_list(values.type), 1, [None, offsets], children=[values])


def _no_rows(column: Any) -> Any:
    """A :func:`_one_row` column with no rows: of nulls, or over an empty slice of ``column``'s own
    values where they hold a dictionary (an Arrow file holds one dictionary per column). (Not a
    slice of the column: a string array sliced to nothing is written with all its offsets.)"""
    import numpy as np
    import pyarrow as pa

    if not _has_dictionary(column.type):
        return pa.nulls(0, column.type)
    offsets = pa.py_buffer(np.zeros(1, np.int64))
    return pa.Array.from_buffers(column.type, 0, [None, offsets], children=[column.values.slice(0, 0)])


def _has_dictionary(t: Any) -> bool:
    """Whether the Arrow type ``t`` is or holds a dictionary type."""
    import pyarrow as pa

    return bool(pa.types.is_dictionary(t)) or any(_has_dictionary(t.field(i).type) for i in range(t.num_fields))


def _digest_written(f: BinaryIO, end: int, digest: xxhash.xxh3_64) -> None:
    """Add the first ``end`` bytes written to the open entry ``f`` to ``digest``, read back through a
    map of the file (its temporary file is open for reading too): no copy in the process's heap."""
    f.flush()
    with mmap.mmap(f.fileno(), end, access=mmap.ACCESS_READ) as mapped:
        _digest_windows(mapped, end, digest)


#: Bytes of an entry hashed at a time for its digest, their mapped pages then let go.
DIGEST_WINDOW = 2**20


def _digest_windows(mapped: mmap.mmap, end: int, digest: xxhash.xxh3_64) -> None:
    """Add the first ``end`` bytes of ``mapped`` (a read-only map of an entry) to ``digest``
    :data:`DIGEST_WINDOW` bytes at a time, each window's pages let go once hashed: they stay in the
    page cache for the columns' own reads, but a large entry is never resident in the process at once."""
    dontneed = getattr(mmap, "MADV_DONTNEED", None)  # (none on Windows: the pages stay)
    view = memoryview(mapped)
    try:
        for at in range(0, end, DIGEST_WINDOW):
            digest.update(view[at : min(end, at + DIGEST_WINDOW)])
            if dontneed is not None:
                with contextlib.suppress(OSError):
                    mapped.madvise(dontneed, at, min(DIGEST_WINDOW, end - at))
    finally:
        view.release()


def entry_source(entry: Path) -> str | None:
    """The source file an entry was made from (its real path when written), or ``None`` when the
    entry does not say (written by an older labledger) or cannot be read."""
    import pyarrow as pa

    try:
        if entry.suffix == _SUFFIX["columns"]:
            with pa.memory_map(str(entry)) as f:
                meta = pa.ipc.open_file(f).schema.metadata
        else:
            import pyarrow.parquet as pq

            meta = pq.read_schema(entry).metadata
    except (OSError, ValueError):  # unreadable, or not such a file (pyarrow's ArrowInvalid)
        return None
    value = (meta or {}).get(_SOURCE)
    return value.decode() if isinstance(value, bytes) else None


def cached_columns(
    source: str | os.PathLike[str], kind: str, *, folder: Path | None = None, key: str | None = None
) -> Columns | None:
    """The columns entry of ``source`` (:func:`store_columns`) when it matches the source's content
    now, else ``None``: a stale, torn or foreign entry is never returned, nor one whose bytes fail
    the digest written with them (the hash leaves the GIL to other threads), nor one whose schema
    or columns lie outside the bytes the digest vouches for. pyarrow opens it from a memory map of
    the entry (only ever replaced by a rename, never written in place); the arrays are numpy views
    of that map, no decode and no copy."""
    folder = folder if folder is not None else cache_folder()
    if folder is None:
        return None
    entry = entry_path(source, kind, folder, "columns")
    writing = (_deferred or {}).get(entry)
    if writing is not None:
        writing.exception()  # an entry being written is read once whole
    try:
        with open(entry, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable, or empty (no map of 0 bytes)
        return None
    import numpy as np
    import pyarrow as pa

    whole = pa.py_buffer(mapped)
    try:
        reader = pa.ipc.open_file(whole)
        schema = reader.schema
        if not _matches(_stamp(schema.metadata), source, kind, key) or reader.num_record_batches != 2:
            return None
        digest, _, end = reader.get_batch_with_custom_metadata(1)[1][_DIGEST].decode().partition(":")
        vouched = int(end)
        if not 0 < vouched <= len(mapped):
            return None
        hashed = xxhash.xxh3_64()
        _digest_windows(mapped, vouched, hashed)
        if hashed.hexdigest() != digest:
            return None  # changed since it was written
        # the schema read (the footer's) is the one under the digest (the file's first message)
        if not pa.ipc.read_schema(whole.slice(8, vouched - 8)).equals(schema, check_metadata=True):
            return None
        batch = reader.get_batch(0)
        if batch.num_rows != 1:
            return None
        lo, hi = whole.address, whole.address + vouched
        values: dict[str, Any] = {}
        arrays: dict[str, np.ndarray] = {}
        for name, field, column in zip(schema.names, schema, batch.columns):
            if any(b is not None and b.size and not lo <= b.address <= hi - b.size for b in column.buffers()):
                return None  # a column outside the bytes under the digest
            if not pa.types.is_large_list(column.type) or column.offset:
                return None
            values[name] = flat = column.values  # (flatten() would import pyarrow.compute)
            if np.frombuffer(column.buffers()[1], np.int64, count=2).tolist() != [0, len(flat)]:
                return None  # not one list holding the whole array
            dtype = (field.metadata or {}).get(_ARRAY)
            if dtype is not None:  # a view of the map itself (kernels.release_pages lets its pages go)
                dt = np.dtype(dtype.decode())
                if pa.from_numpy_dtype(dt) != flat.type or flat.null_count:
                    return None
                data = flat.buffers()[1]
                at = data.address - lo + flat.offset * dt.itemsize if len(flat) else 0
                arrays[name] = np.frombuffer(mapped, dt, len(flat), at)
        meta = orjson.loads(schema.metadata[_META])
    except (OSError, ValueError, KeyError, IndexError, TypeError, pa.ArrowException):
        return None  # not an entry of this layout (pyarrow's ArrowInvalid is a ValueError, orjson's too)
    _used(entry)
    return Columns(meta, arrays, values.__getitem__)


#: Cache folders already warned about in this process (:func:`_warn_unwritable`).
_WARNED: set[str] = set()


def _warn_unwritable(folder: Path, error: OSError) -> None:
    """One :class:`~labledger.errors.CacheWarning` per folder: a cache entry could not be written."""
    if str(folder) in _WARNED:
        return
    _WARNED.add(str(folder))
    import warnings

    from labledger.errors import CacheWarning

    reason = error.strerror or str(error)
    warnings.warn(
        CacheWarning(
            f"the columnar cache in {folder} could not be written ({reason}): large results files are "
            f"parsed again on each read; free space there, or set {CACHE_DIR_ENV} to another folder ('off': no cache)"
        ),
        stacklevel=3,
    )


__all__ = [
    "CACHE_DIR_ENV",
    "MAX_BYTES_ENV",
    "MAX_CACHE_BYTES",
    "MIN_BYTES_ENV",
    "MIN_CACHE_BYTES",
    "STALE_TEMPORARY_S",
    "CacheFile",
    "Columns",
    "Layout",
    "cache_files",
    "cache_folder",
    "cache_info",
    "cached_columns",
    "cached_table",
    "clear_cache",
    "content_key",
    "entry_path",
    "entry_source",
    "file_identity",
    "file_key",
    "fresh_entry",
    "max_cache_bytes",
    "min_cache_bytes",
    "prefetch_key",
    "prefetching",
    "prune_cache",
    "store_columns",
    "store_table",
    "take_prefetched",
    "wanted",
]
