"""Chunk manifests of run folders: what ``labledger sync`` compares, sends and verifies (#18).

A file is identified by its size and the sha256 of each of its ``CHUNK``-byte chunks (the last one
may be short). Two copies of a file agree when their chunk lists agree; a copy that is a prefix of
the other (an append-only record file still being written) agrees on every full chunk, and its
short last chunk is the hash of the other's bytes over the same range. The *digest* of a file is
the sha256 of its chunk hashes, so a single value names the whole content.

A synced run folder on a server keeps its manifest in ``.sync.json``: the origin (the local ledger
that owns the run), and per file the size, the chunk hashes and the ``stat`` seen after the last
write. A file whose ``stat`` changed since (a write that was cut off, bytes damaged on disk) is
hashed again, so a damaged chunk is seen by the next sync and by ``labledger verify``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, BinaryIO

from labledger.errors import LedgerError, RecordError
from labledger.store.index import RUN_TABLES
from labledger.store.jsonl import RECORD_FILES, read_json, write_json

#: Bytes per hashed chunk.
CHUNK = 1 << 20
#: The manifest of a synced run folder on the server.
MANIFEST = ".sync.json"
#: Files that only grow (sent from the first chunk that differs, appended in place on the server).
APPEND_ONLY = frozenset(RECORD_FILES.values())
#: Files a run rewrites while it lives (the owner may replace them).
MUTABLE = frozenset({"run.json"})


def sha256_file(path: str | os.PathLike[str]) -> tuple[str, int]:
    """Streamed ``(sha256 hex, size in bytes)`` of a file, ``CHUNK`` bytes at a time (the one
    whole-file hash of the store: runs, ``verify``, importers).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "wb").write(b"abc")
    >>> sha256_file(p) == (hashlib.sha256(b"abc").hexdigest(), 3)
    True
    """
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def chunk_hashes(path: str | os.PathLike[str], *, size: int | None = None) -> list[str]:
    """The sha256 of each ``CHUNK``-byte chunk of the first ``size`` bytes (all by default; at most
    the file's), streamed (:func:`hash_chunks`).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "wb").write(b"abc")
    >>> chunk_hashes(p) == [hashlib.sha256(b"abc").hexdigest()]
    True
    """
    with open(path, "rb") as f:
        have = os.fstat(f.fileno()).st_size
        return hash_chunks(f.fileno(), 0, have if size is None else min(size, have))


def hash_chunks(fd: int, start: int, end: int) -> list[str]:
    """The sha256 of each ``CHUNK`` of the bytes ``[start, end)`` of an open file (``start`` a chunk
    boundary), each read into one reused buffer (``preadv``) and hashed there while it is in the
    CPU's cache, not from a memory map whose pages fault in one by one. Raises ``ValueError`` when the file ends before ``end``.

    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     _ = f.write(b"abc"); f.flush()
    ...     hash_chunks(f.fileno(), 0, 3) == [hashlib.sha256(b"abc").hexdigest()]
    True
    """
    out = []
    view = memoryview(bytearray(min(CHUNK, max(end - start, 0))))
    for at in range(start, end, CHUNK):
        want = min(CHUNK, end - at)
        got = 0
        while got < want:
            n = os.preadv(fd, [view[got:want]], at + got)
            if n == 0:
                raise ValueError(f"the file ended at byte {at + got}, before {end}")
            got += n
        out.append(hashlib.sha256(view[:want]).hexdigest())
    return out


def sha256_and_chunks(path: str | os.PathLike[str], *, copy_to: BinaryIO | None = None) -> tuple[str, int, list[str]]:
    """``(sha256 hex, size, chunk hashes)`` of a file in one streamed read: the whole file's sha256
    in this thread and each ``CHUNK``'s in a second one (hashlib lets go of the GIL), so the wall
    time is one hash's, not two. At most ``AHEAD`` chunks wait for the second thread. With
    ``copy_to`` each chunk is also written there: the hashes are of the bytes written, and the
    copy costs no second read.

    >>> import tempfile, os, io
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "wb").write(b"abc")
    >>> sha256_and_chunks(p) == (hashlib.sha256(b"abc").hexdigest(), 3, chunk_hashes(p))
    True
    >>> out = io.BytesIO(); _ = sha256_and_chunks(p, copy_to=out); out.getvalue()
    b'abc'
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    whole = hashlib.sha256()
    size = 0
    out: list[str] = []
    waiting: list[Future[str]] = []
    with open(path, "rb") as f, ThreadPoolExecutor(1, thread_name_prefix="labledger-chunk-hash") as pool:
        while data := f.read(CHUNK):
            waiting.append(pool.submit(sha256_hex, data))
            if copy_to is not None:
                copy_to.write(data)
            whole.update(data)
            size += len(data)
            if len(waiting) > AHEAD:
                out.append(waiting.pop(0).result())
        out.extend(job.result() for job in waiting)
    return whole.hexdigest(), size, out


#: Chunks read ahead of the thread that hashes them one by one (:func:`sha256_and_chunks`).
AHEAD = 4


def sha256_hex(data: bytes | memoryview) -> str:
    """The sha256 of ``data`` in hex (a function to hand to a thread pool)."""
    return hashlib.sha256(data).hexdigest()


#: Where a run folder keeps the chunk hashes of files it wrote (:func:`record_chunks`); hidden, so
#: sync never copies it.
RECORDED = ".chunks"


def _record_path(run_dir: Path, rel: str) -> Path:
    from urllib.parse import quote

    return run_dir / RECORDED / (quote(rel, safe="") + ".json")


def record_key(st: os.stat_result) -> list[int]:
    """What a chunk record trusts: size, mtime, inode and ctime. Every write, ``touch``, ``chmod``
    or rename over the file changes its ctime, which no user call can set back."""
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def record_chunks(run_dir: Path, rel: str, chunks: list[str], st: os.stat_result | None = None) -> None:
    """Keep the chunk hashes of the run file ``rel``, computed as the run wrote it (``log_checkpoint``
    hashes each checkpoint it stores: :func:`sha256_and_chunks`), so that ``labledger sync``
    sends the file without reading it to hash it again (#18). The record holds the file's
    :func:`record_key` (``st``: its ``stat`` taken before it was read, for a file others may write;
    by default the ``stat`` now); a file changed since has another, and the record is not used
    (:func:`recorded_chunks`). Bytes damaged on disk without a ``stat`` change are caught by the
    server, which hashes what it receives and refuses bytes whose digest is not the one stated.
    Best effort: a record that cannot be written (a full disk) only costs a hash at sync."""
    path = _record_path(run_dir, rel)
    try:
        st = os.stat(run_dir / rel) if st is None else st
        path.parent.mkdir(exist_ok=True)
        write_json(path, {"stat": record_key(st), "chunk": CHUNK, "chunks": chunks}, fsync=False)
    except (OSError, LedgerError):  # a full disk (StorageError): the checkpoint is stored, only unrecorded here
        pass


def recorded_chunks(run_dir: Path, rel: str, st: os.stat_result) -> list[str] | None:
    """The chunk hashes :func:`record_chunks` kept for ``rel``, when the file's ``stat`` ``st`` is
    still the one they were recorded for; otherwise (no record, a changed file, a torn record)
    ``None``.

    >>> import tempfile
    >>> run_dir = Path(tempfile.mkdtemp()); _ = (run_dir / "w.bin").write_bytes(b"abc")
    >>> record_chunks(run_dir, "w.bin", chunk_hashes(run_dir / "w.bin"))
    >>> recorded_chunks(run_dir, "w.bin", (run_dir / "w.bin").stat()) == chunk_hashes(run_dir / "w.bin")
    True
    >>> _ = (run_dir / "w.bin").write_bytes(b"abd")
    >>> recorded_chunks(run_dir, "w.bin", (run_dir / "w.bin").stat()) is None
    True
    """
    try:
        doc = read_json(_record_path(run_dir, rel))
    except (OSError, LedgerError):
        return None
    if not isinstance(doc, dict) or doc.get("stat") != record_key(st) or doc.get("chunk") != CHUNK:
        return None
    chunks = doc.get("chunks")
    if (
        not isinstance(chunks, list)
        or len(chunks) != -(-st.st_size // CHUNK)
        or not all(isinstance(c, str) and len(c) == 64 for c in chunks)
    ):
        return None
    return chunks


def digest(chunks: list[str]) -> str:
    """The digest of a file from its chunk hashes (sha256 of the hex hashes, one per line).

    >>> digest([]) == hashlib.sha256(b"").hexdigest()
    True
    """
    return hashlib.sha256("".join(c + "\n" for c in chunks).encode()).hexdigest()


def range_hash(path: str | os.PathLike[str], start: int, end: int) -> str:
    """sha256 of the bytes ``[start, end)`` of a file (for comparing a short last chunk).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f")
    >>> _ = open(p, "wb").write(b"abcdef")
    >>> range_hash(p, 2, 4) == hashlib.sha256(b"cd").hexdigest()
    True
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            data = f.read(min(CHUNK, left))
            if not data:
                break
            h.update(data)
            left -= len(data)
    return h.hexdigest()


def check_run_path(rel: str) -> str:
    """A run-relative file path that sync may write: safe components, no hidden names, no ``..``.

    >>> check_run_path("evals/test/results.jsonl")
    'evals/test/results.jsonl'
    >>> check_run_path("../x")
    Traceback (most recent call last):
    ...
    labledger.errors.RecordError: field 'path' must be a relative path of names that do not start with '.'; got '../x'
    """
    parts = rel.split("/")
    if (
        not rel
        or len(rel) > 1000
        or any(not p or p.startswith(".") or "\\" in p or "\0" in p or len(p.encode()) > 250 for p in parts)
    ):
        raise RecordError(f"must be a relative path of names that do not start with '.'; got {rel!r}", field="path")
    return rel


def run_files(run_dir: Path) -> list[str]:
    """Every regular file of a run folder that sync copies (relative paths; hidden names are left out).

    >>> import tempfile, labledger
    >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
    ...     run.log(1, loss=0.5)
    >>> run_files(run.dir)
    ['batches.jsonl', 'config.json', 'metrics.jsonl', 'run.json']
    """
    return [rel for rel, _ in run_file_stats(run_dir)]


def run_file_stats(run_dir: Path) -> list[tuple[str, os.stat_result]]:
    """:func:`run_files` with each file's ``stat`` (one ``scandir`` pass; symlinks are left out)."""
    out: list[tuple[str, os.stat_result]] = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                walk(entry.path, prefix + entry.name + "/")
            elif entry.is_file(follow_symlinks=False):
                out.append((prefix + entry.name, entry.stat(follow_symlinks=False)))

    walk(str(run_dir), "")
    return out


def stat_key(st: os.stat_result) -> list[int]:
    """What says "this file has not changed since it was hashed": size, mtime and inode."""
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def run_signature(rows_digest: str, found: list[tuple[str, os.stat_result]]) -> str:
    """What says a run has not changed since it was last synced: a digest of its index rows'
    digest (``rows_digest``) and of its files' names and :func:`stat_key` (``found``:
    :func:`run_file_stats`)."""
    import orjson

    files = [rel for rel, _ in found]
    stats = [stat_key(st) for _, st in found]
    return hashlib.sha256(orjson.dumps([rows_digest, files, stats])).hexdigest()


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The ``.sync.json`` of a synced run folder, or ``None`` when the folder was never synced."""
    try:
        doc = read_json(run_dir / MANIFEST)
    except (FileNotFoundError, RecordError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("files"), dict) else None


def write_manifest(run_dir: Path, doc: dict[str, Any]) -> None:
    """Replace the manifest atomically."""
    write_json(run_dir / MANIFEST, doc)


def fresh_entry(path: Path | str, entry: dict[str, Any] | None) -> dict[str, Any]:
    """A file's manifest entry, hashed again when the file changed since ``entry`` was made.

    A record file compacted since (:func:`compacted_entry`) keeps ``entry``: its records are all
    there, in the other form. Any other file that is gone raises ``FileNotFoundError``.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        held = compacted_entry(path, entry)
        if held is None:
            raise
        return held
    if entry is not None and entry.get("stat") == stat_key(st):
        return entry
    chunks = chunk_hashes(path, size=st.st_size)
    return {"size": st.st_size, "chunks": chunks, "stat": stat_key(st)}


def check_manifest(run_dir: Path) -> list[str]:
    """Problems of a synced run folder: files whose bytes no longer match the manifest's chunks.

    >>> import tempfile
    >>> check_manifest(Path(tempfile.mkdtemp()))
    []
    """
    doc = read_manifest(run_dir)
    if doc is None:
        return []
    problems = []
    for rel, entry in sorted(doc["files"].items()):
        path = run_dir / rel
        if not path.is_file():
            if compacted_entry(path, entry) is None:
                problems.append(f"{path}: synced file is missing")
            continue
        chunks = chunk_hashes(path)
        want = entry.get("chunks") or []
        if chunks != want:
            bad = next((i for i, (a, b) in enumerate(zip(chunks, want)) if a != b), min(len(chunks), len(want)))
            problems.append(
                f"{path}: chunk {bad} (bytes {bad * CHUNK}..) does not match the sha256 recorded when it was synced"
            )
    return problems


def compacted_entry(path: Path | str, entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """``entry`` of a synced record file ``X.jsonl`` that was compacted where it is kept (``labledger
    compact`` turned it into ``X.jsonl.zst`` and removed it): when the compressed file's JSONL begins
    with exactly the bytes ``entry`` records (the sha256 of each chunk of its first ``size`` bytes),
    every record synced is still there and ``entry`` stands; otherwise (a file not compacted, or a
    compressed copy that holds other bytes) ``None``. Compaction knows nothing of sync: this is where
    sync notices it, as the server's upload of an ``X.jsonl.zst`` drops the plain file it replaces.

    >>> import tempfile
    >>> from labledger.store.compressed import compact_file
    >>> p = Path(tempfile.mkdtemp()) / "metrics.jsonl"; _ = p.write_bytes(b'{"step": 1}\\n' * 3)
    >>> entry = {"size": 36, "chunks": chunk_hashes(p), "stat": stat_key(p.stat())}
    >>> compact_file(p, min_bytes=0).action
    'compacted'
    >>> compacted_entry(p, entry) is entry, compacted_entry(p, {**entry, "size": 37})
    (True, None)
    """
    from labledger.store.compressed import compressed_path, open_record

    if entry is None or not str(path).endswith(".jsonl") or not compressed_path(path).is_file():
        return None
    size = int(entry.get("size") or 0)
    got: list[str] = []
    f = open_record(path)
    if f is None:  # pragma: no cover - removed between the two calls
        return None
    with f:
        left = size
        while left > 0:
            data = f.read(min(CHUNK, left))
            if not data:
                return None
            got.append(hashlib.sha256(data).hexdigest())
            left -= len(data)
    return entry if got == list(entry.get("chunks") or []) else None


def complete_size(path: Path | str, size: int) -> int:
    """``size`` cut back to just after the last newline (a live record file's last line may be torn).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "m.jsonl")
    >>> _ = open(p, "wb").write(b'{"a": 1}\\n{"a"')
    >>> complete_size(p, os.path.getsize(p))
    9
    """
    if size == 0:
        return 0
    with open(path, "rb") as f:
        end = size
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            block = f.read(end - start)
            i = block.rfind(b"\n")
            if i >= 0:
                return start + i + 1
            end = start
    return 0


#: The index tables whose rows of a run are synced (the same as :data:`labledger.store.index.RUN_TABLES`).
INDEX_TABLES = tuple(name for name, _ in RUN_TABLES)


def index_rows(book: Any, run_id: str) -> dict[str, Any]:
    """The run's rows of every index table, as ``{table: {"columns": [...], "rows": [[...]]}}``."""
    out: dict[str, Any] = {}

    def grab(table: str, where: str, params: tuple[Any, ...]) -> list[list[Any]]:
        cur = book.db.execute(f"SELECT * FROM {table} WHERE {where}", params)
        cols = [d[0] for d in cur.description]
        rows = [list(r) for r in cur.fetchall()]
        out[table] = {"columns": cols, "rows": rows}
        return rows

    for table in INDEX_TABLES:
        grab(table, "id = ?" if table == "runs" else "run_id = ?", (run_id,))
    evals = grab("evaluations", "run_id = ?", (run_id,))
    ids = [r[out["evaluations"]["columns"].index("id")] for r in evals]
    if ids:
        grab("metric_values", f"eval_id IN ({','.join('?' * len(ids))})", tuple(ids))
    else:
        out["metric_values"] = {"columns": [], "rows": []}
    # 'updated' and 'heartbeat' change without the run changing: not part of what is compared
    runs = out["runs"]
    for col in ("updated", "heartbeat"):
        if col in runs["columns"]:
            i = runs["columns"].index(col)
            runs["columns"].pop(i)
            for r in runs["rows"]:
                r.pop(i)
    return out
