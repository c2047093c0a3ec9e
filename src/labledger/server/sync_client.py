"""``sync_runs``: copy runs of a local ledger to a team server, incrementally and verifiably (#18).

For each run the client asks the server what it holds (one ``POST /api/sync/state`` per 200 runs),
compares chunk hashes (:mod:`labledger.store.manifest`) and sends only the bytes the server lacks:
an append-only record file from its first chunk that differs, any other file whole (or from where
an interrupted upload stopped). Every answer names the digest of what the server stored, which must
equal the local one. The run's index rows go last, so the server shows a run finished only once
every record is there. Record files of a live run are sent up to their last complete line.

Local state lives in ``<ledger>/.sync/``: ``origin`` (this ledger's id, which owns its runs on every
server) and a cache per server of the chunk hashes already computed and of the runs known synced,
so a sync with nothing to do reads only ``stat``s and the index.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote, urlsplit

import orjson

from labledger.errors import LedgerError, StorageError, SyncConflictError, SyncDigestError, SyncError
from labledger.server.client import connect
from labledger.store.jsonl import read_json, write_json
from labledger.store.ledger import Ledger
from labledger.store.manifest import (
    APPEND_ONLY,
    CHUNK,
    MUTABLE,
    complete_size,
    digest,
    hash_chunks,
    index_rows,
    range_hash,
    recorded_chunks,
    run_file_stats,
    run_signature,
)

BATCH = 200


class SyncCacheWarning(UserWarning):
    """The client's sync cache could not be saved (a full or read-only disk); nothing synced is affected."""


@dataclass
class SyncReport:
    """What one sync did (or, with ``dry_run``, would do)."""

    runs: int = 0
    runs_sent: list[str] = field(default_factory=list)
    files_sent: int = 0
    bytes_sent: int = 0
    pending: dict[str, dict[str, int]] = field(default_factory=dict)
    live: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "runs_sent": self.runs_sent,
            "files_sent": self.files_sent,
            "bytes_sent": self.bytes_sent,
            "pending": self.pending,
            "live": self.live,
        }


def ledger_origin(root: Path) -> str:
    """This ledger's sync id (made once, 32 hex digits), which owns its runs on every server."""
    path = root / ".sync" / "origin"
    try:
        value = path.read_text().strip()
        if value:
            return value
    except FileNotFoundError:
        pass
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(16)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(value + "\n")
    try:
        os.link(tmp, path)  # two first syncs at once: one wins, both read it
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()


def _check_url(to: str) -> str:
    parts = urlsplit(to)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SyncError(f"--to must be an http(s) URL of a labledger server; got {to!r}")
    return to.rstrip("/")


class _Cache:
    """Chunk hashes of local files by ``stat``, and the signature of each run known synced."""

    def __init__(self, path: Path):
        self.path = path
        try:
            doc = read_json(path)
        except (FileNotFoundError, LedgerError):
            doc = {}
        self.files: dict[str, Any] = doc.get("files", {}) if isinstance(doc, dict) else {}
        self.done: dict[str, str] = doc.get("done", {}) if isinstance(doc, dict) else {}
        self.dirty = False
        self.unsaved = False  # a save the disk refused (warned about once)

    def chunks(self, key: str, path: Path, size: int, append_only: bool) -> list[str]:
        st = path.stat()
        sk = [size, st.st_mtime_ns, st.st_ino]
        hit = self.files.get(key)
        if hit and hit["stat"] == sk:
            return list(hit["chunks"])
        kept: list[str] = []
        if hit and append_only and hit["stat"][2] == st.st_ino and hit["stat"][0] <= size:
            kept = list(hit["chunks"][: hit["stat"][0] // CHUNK])  # the file only grows: its full chunks stay
        with open(path, "rb") as f:  # the chunks after those kept, up to size (or the file's end)
            out = kept + hash_chunks(f.fileno(), len(kept) * CHUNK, min(size, os.fstat(f.fileno()).st_size))
        self.files[key] = {"stat": sk, "chunks": out}
        self.dirty = True
        return list(out)

    def known(self, key: str, st: os.stat_result, size: int) -> list[str] | None:
        """The cached chunk hashes of a file unchanged since they were computed (``None`` otherwise)."""
        hit = self.files.get(key)
        if hit and hit["stat"] == [size, st.st_mtime_ns, st.st_ino]:
            return list(hit["chunks"])
        return None

    def store(self, key: str, st: os.stat_result, size: int, chunks: list[str]) -> None:
        """Record ``chunks`` (of the first ``size`` bytes, hashed while sent) of the file whose ``stat`` is ``st``."""
        self.files[key] = {"stat": [size, st.st_mtime_ns, st.st_ino], "chunks": list(chunks)}
        self.dirty = True

    def save(self) -> None:
        """Write the cache when it changed. Best effort: it is only a cache, so a disk that refuses
        the write (full, read-only) is a warning, never a failed sync of runs that were sent and
        verified; the next sync hashes again what it held."""
        if self.dirty:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # not fsynced: a cache lost or torn in a crash is read as empty, and costs a re-hash
                write_json(self.path, {"files": self.files, "done": self.done}, fsync=False)
            except (OSError, StorageError) as exc:
                if self.unsaved:  # said once per sync
                    return
                self.unsaved = True
                warnings.warn(
                    f"the sync cache was not saved ({exc}); the runs were synced, and the next sync hashes "
                    f"their files again",
                    SyncCacheWarning,
                    stacklevel=2,
                )
                return
            self.dirty = False


class _Session:
    """The client's connection to one server: JSON calls over one kept-alive connection
    (:func:`labledger.server.client.connect`), and file bodies each on a connection of their own
    (:meth:`put_file`)."""

    def __init__(self, to: str, token: str | None, origin: str, timeout: float):
        self.to = to
        self.headers = {"X-Labledger-Origin": origin, "X-Labledger-Host": socket.gethostname()[:200]}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self._conn: Any = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connect(self) -> Any:
        """A new connection to the server (:func:`labledger.server.client.connect`)."""
        return connect(self.to, self.timeout)

    def call(self, method: str, path: str, *, json: Any = None, data: bytes | None = None) -> dict[str, Any]:
        """One request with a JSON answer (a JSON body, or the bytes ``data``); a kept-alive
        connection the server closed meanwhile is opened again once."""
        import http.client

        body = data if data is not None else orjson.dumps(json) if json is not None else b""
        kind = "application/octet-stream" if data is not None else "application/json"
        headers = {**self.headers, "Content-Type": kind, "Content-Length": str(len(body))}
        target = (urlsplit(self.to).path or "") + path
        for attempt in (0, 1):
            reused = self._conn is not None
            try:
                if self._conn is None:
                    self._conn = self._connect()
                self._conn.request(method, target, body=body, headers=headers)
                response = self._conn.getresponse()
                content = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if reused and attempt == 0 and isinstance(exc, (ConnectionError, http.client.RemoteDisconnected)):
                    continue  # closed while idle (keep-alive timeout): once more on a new connection
                raise SyncError(f"sync to {self.to} failed: {type(exc).__name__}: {exc}") from None
            if response.will_close:
                self.close()
            return self._answer(method, path, response.status, content)
        raise AssertionError("unreachable")  # pragma: no cover

    def _answer(self, method: str, path: str, status: int, body: bytes) -> dict[str, Any]:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if status >= 400 or not isinstance(doc, dict) or not doc.get("ok", True):
            message = (
                doc.get("error") if isinstance(doc, dict) and doc.get("error") else body[:200].decode(errors="replace")
            )
            if isinstance(message, dict):
                message = message.get("message", message)
            kind = SyncConflictError if status == 409 else SyncDigestError if status == 422 else SyncError
            raise kind(f"the server refused {method} {path.split('?')[0]} ({status}): {message}")
        return doc

    def put_file(
        self, path: str, f: BinaryIO, offset: int, size: int, headers: dict[str, str], hashes: list[str] | None
    ) -> dict[str, Any]:
        """PUT the bytes ``[offset, size)`` of the open file ``f``, zero-copy where it can.

        One connection of its own (``http.client``): the head is sent, then the file's bytes with
        ``socket.sendfile`` (``os.sendfile`` over plain http), so they are never copied into
        Python. With ``hashes``, the sha256 of each ``CHUNK`` is appended to it, computed by a
        worker thread that reads the range into a buffer of its own (:func:`hash_chunks`) while
        the main one sends it (both let go of the GIL; neither waits for the other chunk by chunk;
        both read the page cache).
        """
        import http.client
        from concurrent.futures import ThreadPoolExecutor

        target = (urlsplit(self.to).path or "") + path
        pool = ThreadPoolExecutor(1, thread_name_prefix="labledger-sync-hash") if hashes is not None else None
        conn: Any = None
        try:
            try:
                conn = self._connect()
                conn.putrequest("PUT", target, skip_accept_encoding=True)
                for name, value in {**self.headers, **headers}.items():
                    conn.putheader(name, value)
                conn.endheaders()
                job = pool.submit(hash_chunks, f.fileno(), offset, size) if pool is not None else None
                if size > offset and conn.sock.sendfile(f, offset, size - offset) != size - offset:
                    raise SyncError(f"{f.name}: the file shrank while it was being sent")
                if job is not None and hashes is not None:
                    hashes.extend(job.result())
                response = conn.getresponse()
                body = response.read()
            except (OSError, ValueError, http.client.HTTPException) as exc:  # ValueError: the file shrank
                raise SyncError(f"sync to {self.to} failed: {type(exc).__name__}: {exc}") from None
        finally:
            if conn is not None:
                conn.close()
            if pool is not None:
                pool.shutdown()
        return self._answer("PUT", path, response.status, body)


def _server_agrees(local: list[str], path: Path, server: dict[str, Any]) -> tuple[bool, int]:
    """Whether the server's copy is a prefix of the local file; and from which byte to send."""
    s_chunks: list[str] = server.get("chunks") or []
    s_size = int(server.get("size") or 0)
    full = s_size // CHUNK
    for i in range(min(full, len(local))):
        if s_chunks[i] != local[i]:
            return False, i * CHUNK
    if full > len(local):
        return False, len(local) * CHUNK
    if s_size % CHUNK:
        local_size = path.stat().st_size
        if local_size < s_size or range_hash(path, full * CHUNK, s_size) != s_chunks[full]:
            return False, full * CHUNK
    return True, full * CHUNK


def sync_runs(
    ledger: str | os.PathLike[str] | Ledger,
    to: str,
    *,
    token: str | None = None,
    runs: list[str] | None = None,
    dry_run: bool = False,
    repair: bool = False,
    timeout: float = 300.0,
    on_file: Callable[[str, str, int], None] | None = None,
    trust_cache: bool = False,
) -> SyncReport:
    """Copy ``runs`` (all by default) of a local ledger to the server at ``to``; see the module docstring.

    Raises :class:`SyncConflictError` for a run another ledger synced, one changed on the server, or
    a record file that no longer starts with what was sent, and :class:`SyncError` for anything
    else the server refused or a digest that differs. ``dry_run`` sends nothing and fills
    ``pending`` (``labledger sync --status``). ``trust_cache`` (the rounds of :func:`watch`) skips
    runs whose files and index rows have not changed since they were last synced without asking the
    server; otherwise the server is asked about every run, so damage on its side is found.

    >>> sync_runs(".labledger", "http://127.0.0.1:8765", token="...")   # doctest: +SKIP
    SyncReport(runs=3, runs_sent=['20260101-120000-0123456789ab'], files_sent=4, bytes_sent=81920, ...)
    """
    to = _check_url(to)
    book = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    try:
        origin = ledger_origin(book.root)
        infos = book.runs()  # marks runs whose process died crashed first: they sync as crashed
        if runs:
            wanted = {book.resolve(r) for r in runs}
            infos = [i for i in infos if i.id in wanted]
        cache = _Cache(book.root / ".sync" / f"cache-{hashlib.sha256(to.encode()).hexdigest()[:16]}.json")
        report = SyncReport(runs=len(infos))
        session = _Session(to, token, origin, timeout)
        sessions = _Sessions(session, lambda: _Session(to, token, origin, timeout))
        try:
            todo = []
            for info in infos:
                if info.status == "running":
                    report.live.append(info.id)
                rows = index_rows(book, info.id)
                rows_digest = hashlib.sha256(orjson.dumps(rows)).hexdigest()
                run_dir = book.run_dir(info.id)
                found = run_file_stats(run_dir)
                files = [rel for rel, _ in found]
                signature = run_signature(rows_digest, found)
                if trust_cache and cache.done.get(info.id) == signature and not dry_run:
                    continue
                todo.append((info.id, run_dir, files, rows, rows_digest, signature))
            for start in range(0, len(todo), BATCH):
                batch = todo[start : start + BATCH]
                answer = session.call("POST", "/api/sync/state", json={"runs": [t[0] for t in batch]})
                state = answer["runs"]
                limits = _batch_limits(answer.get("batch"))

                def one(
                    item: tuple[Any, ...],
                    sess: _Session,
                    state: dict[str, Any] = state,
                    limits: tuple[int, int, int] | None = limits,
                ) -> bool:
                    run_id, run_dir, files, rows, rows_digest, _ = item
                    return _sync_one(
                        sess,
                        cache,
                        run_id,
                        run_dir,
                        files,
                        rows,
                        rows_digest,
                        state.get(run_id),
                        origin=origin,
                        dry_run=dry_run,
                        repair=repair,
                        report=report,
                        on_file=on_file,
                        limits=limits,
                    )

                for item, sent in zip(batch, sessions.each(one, batch, dry_run), strict=True):
                    run_id, signature = item[0], item[5]
                    if sent:
                        report.runs_sent.append(run_id)
                    if not dry_run and cache.done.get(run_id) != signature:
                        cache.done[run_id] = signature
                        cache.dirty = True
                cache.save()
        finally:
            sessions.close()
            cache.save()
        return report
    finally:
        if not isinstance(ledger, Ledger):
            book.close()


def _sync_one(
    session: _Session,
    cache: _Cache,
    run_id: str,
    run_dir: Path,
    files: list[str],
    rows: dict[str, Any],
    rows_digest: str,
    server: dict[str, Any] | None,
    *,
    origin: str,
    dry_run: bool,
    repair: bool,
    report: SyncReport,
    on_file: Callable[[str, str, int], None] | None,
    limits: tuple[int, int, int] | None = None,
) -> bool:
    if server is not None and server.get("foreign"):
        raise SyncConflictError(f"run {run_id} exists on the server and was not synced there: refusing to merge")
    if server is not None and server.get("origin") != origin:
        raise SyncConflictError(
            f"run {run_id} on the server was synced from another ledger (host {server.get('host') or '?'}): "
            f"refusing to merge two copies of one run"
        )
    s_files = (server or {}).get("files", {})
    s_parts = (server or {}).get("parts", {})
    sent_any = False
    small: list[_Small] = []  # sent in batches, after the files that take the chunked PUT
    last: list[tuple[Path, str, int, int, list[str], list[str] | None, str, os.stat_result]] = []
    # records first, run.json last: what the server shows as finished has all its records
    order = sorted(files, key=lambda f: (f in MUTABLE, f not in APPEND_ONLY, f))
    for rel in order:
        path = run_dir / rel
        st = path.stat()
        size = st.st_size
        append_only = rel in APPEND_ONLY
        if rel.endswith(".jsonl"):
            size = complete_size(path, size)
        key = f"{run_id}/{rel}"
        have = s_files.get(rel)
        part = s_parts.get(rel) if have is None and not append_only else None
        offset = 0
        if have is None and part is None:
            # the server lacks the file: hashed while it is sent (one read), unless the cache knows it
            prefix: list[str] = []
            small_one = limits is not None and size <= limits[2]  # read and hashed as it is batched
            known = None if dry_run or small_one else _known(cache, key, run_dir, rel, st, size)
        else:
            local = _known(cache, key, run_dir, rel, st, size)
            if local is None:
                local = cache.chunks(key, path, size, append_only)
            if have is not None:
                if have.get("changed") and not repair:
                    raise SyncConflictError(
                        f"{rel} of run {run_id} was changed on the server since it was synced (damaged or edited "
                        f"there): refusing to overwrite it; `labledger verify` on the server names the damage, "
                        f"`labledger sync --repair` sends the local copy again"
                    )
                if have.get("size") == size and have.get("chunks") == local:
                    continue
                agrees, offset = _server_agrees(local, path, have)
                if not agrees:
                    if append_only and not repair:
                        raise SyncConflictError(
                            f"{rel} of run {run_id}: the server's copy differs from the local one at byte {offset} "
                            f"(the record file was rewritten on one side): refusing to merge"
                        )
                    if not append_only:
                        offset = 0
            elif part is not None:
                n = len(part.get("chunks") or [])
                if part.get("chunks") == local[:n] and n * CHUNK <= size:
                    offset = n * CHUNK  # an interrupted upload: continue where it stopped
            prefix, known = local[: offset // CHUNK], local
        # a small file goes in a batch: whole (its part file, if any, is replaced), or a record
        # file's new bytes from the chunk where they start
        start = offset if append_only else 0
        batched = limits is not None and size - start <= limits[2]
        if batched:
            offset, prefix = start, prefix[: start // CHUNK]
        if dry_run:
            entry = report.pending.setdefault(run_id, {"files": 0, "bytes": 0})
            entry["files"] += 1
            entry["bytes"] += size - offset
            continue
        if batched:
            small.append(_Small(rel, path, st, size, offset, prefix, key, append_only))
            continue
        if rel in MUTABLE:  # after the batches: still the last file of the run
            last.append((path, rel, offset, size, prefix, known, key, st))
            continue
        _send_large(session, cache, run_id, run_dir, path, rel, offset, size, prefix, known, key, st)
        sent_any = True
        _count(report, on_file, run_id, rel, size - offset)
    if small and limits is not None:
        for item, size in _send_batches(session, cache, run_id, small, limits):
            _count(report, on_file, run_id, item.rel, size - item.offset)
        sent_any = True
    for path, rel, offset, size, prefix, known, key, st in last:
        _send_large(session, cache, run_id, run_dir, path, rel, offset, size, prefix, known, key, st)
        sent_any = True
        _count(report, on_file, run_id, rel, size - offset)
    if (server or {}).get("index") != rows_digest:
        if dry_run:
            report.pending.setdefault(run_id, {"files": 0, "bytes": 0})
        else:
            session.call("POST", f"/api/sync/runs/{run_id}/index", json={"digest": rows_digest, "tables": rows})
            sent_any = True
    return sent_any


#: Runs synced at once, each on a connection of its own: a run's requests wait mostly for the
#: server's fsyncs, and the waits of several runs overlap (the file system commits its journal
#: once for the fsyncs that wait together), where one after the other they add up (#46).
WORKERS = 4
_COUNT = threading.Lock()


class _Sessions:
    """``WORKERS`` sessions to one server (the first is the one the state requests go on), made
    as they are needed, and :meth:`each` to sync runs on them at once."""

    def __init__(self, first: _Session, make: Callable[[], _Session]) -> None:
        self.free = [first]
        self.all = [first]
        self.make = make

    def each(self, fn: Callable[[Any, _Session], bool], items: list[Any], serial: bool) -> list[bool]:
        """``fn(item, session)`` for every item (it returns whether it sent anything); the results
        in order. One by one until an item sends something (a sync with nothing to send costs no
        threads), the rest in up to ``WORKERS`` threads (one by one with ``serial``). The first
        error stops the items not yet begun, and is raised once those under way have ended."""
        done: list[bool] = []
        for item in items:
            done.append(fn(item, self.all[0]))
            if done[-1] and not serial and WORKERS > 1:
                break
        rest = items[len(done) :]
        if len(rest) < 2:
            return done + [fn(item, self.all[0]) for item in rest]
        return done + self._threads(fn, rest)

    def _threads(self, fn: Callable[[Any, _Session], bool], items: list[Any]) -> list[bool]:
        from concurrent.futures import ThreadPoolExecutor

        lock = threading.Lock()

        def run(item: Any) -> bool:
            with lock:
                if not self.free:
                    new = self.make()
                    self.all.append(new)
                    self.free.append(new)
                sess = self.free.pop()
            try:
                return fn(item, sess)
            finally:
                with lock:
                    self.free.append(sess)

        pool = ThreadPoolExecutor(min(WORKERS, len(items)), thread_name_prefix="labledger-sync")
        try:
            futures = [pool.submit(run, item) for item in items]
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        for sess in self.all:
            sess.close()


def _count(
    report: SyncReport, on_file: Callable[[str, str, int], None] | None, run_id: str, rel: str, sent: int
) -> None:
    """Count a file sent (from the threads of :class:`_Sessions`: one at a time)."""
    with _COUNT:
        report.files_sent += 1
        report.bytes_sent += sent
        if on_file is not None:
            on_file(run_id, rel, sent)


def _send_large(
    session: _Session,
    cache: _Cache,
    run_id: str,
    run_dir: Path,
    path: Path,
    rel: str,
    offset: int,
    size: int,
    prefix: list[str],
    known: list[str] | None,
    key: str,
    st: os.stat_result,
) -> None:
    """One file by the chunked PUT (:func:`_send`), its chunk hashes kept in the cache."""
    sent = _send(session, path, _file_url(run_id, rel, offset, size), offset, size, prefix, known, (run_dir, rel))
    if sent is not known:  # hashed while sent, or again: what the cache held of it was wrong
        cache.store(key, st, size, sent)


def _batch_limits(doc: Any) -> tuple[int, int, int] | None:
    """``(files, bytes, bytes of one file)`` of the server's batches (#46), within the client's own
    limits; ``None`` for a server of an earlier version (every file then takes the chunked PUT)."""
    if not isinstance(doc, dict):
        return None
    try:
        files, size, one = int(doc["files"]), int(doc["bytes"]), int(doc["file"])
    except (KeyError, TypeError, ValueError):
        return None
    if files < 1 or size < 1 or one < 1:
        return None
    return min(files, BATCH_FILES), min(size, BATCH_BYTES), min(one, size, BATCH_FILE)


#: The most files, bytes, and bytes of one file, the client puts in one batch (the server may take fewer).
BATCH_FILES = 512
BATCH_BYTES = 8 * CHUNK
BATCH_FILE = CHUNK


@dataclass
class _Small:
    """A file (or a record file's new bytes ``[offset, size)``) that goes in a batch."""

    rel: str
    path: Path
    st: os.stat_result
    size: int
    offset: int
    prefix: list[str]
    key: str
    append_only: bool


def _read_small(item: _Small, most: int) -> tuple[bytes, int, os.stat_result | None]:
    """The bytes ``[offset, size)`` of a small file, read once (they are hashed and sent as read),
    the file's size, and its ``stat`` when it did not change since it was listed (``None``
    otherwise: not cached). A file replaced since it was listed (``run.json`` rewritten) is sent as
    it is now, up to ``most`` bytes; a record file up to the size listed (its last complete line)."""
    with open(item.path, "rb") as f:
        fd = f.fileno()
        st0 = os.fstat(fd)
        size = item.size if item.append_only else st0.st_size
        if item.append_only and (st0.st_ino != item.st.st_ino or st0.st_size < size):
            raise SyncError(
                f"{item.path}: the record file was replaced while it was sent; the next sync sends it again"
            )
        if size - item.offset > most:
            raise SyncError(f"{item.path}: the file grew while it was sent; the next sync sends it again")
        parts = []
        at = item.offset
        while at < size:
            data = os.pread(fd, size - at, at)
            if not data:
                raise SyncError(f"{item.path}: the file shrank while it was sent; the next sync sends it again")
            parts.append(data)
            at += len(data)
        st1 = os.fstat(fd)
    now = (st0.st_mtime_ns, st0.st_ino, st0.st_size)
    same = now == (st1.st_mtime_ns, st1.st_ino, st1.st_size) and now[:2] == (item.st.st_mtime_ns, item.st.st_ino)
    return parts[0] if len(parts) == 1 else b"".join(parts), size, st0 if same else None


def _send_batches(
    session: _Session, cache: _Cache, run_id: str, items: list[_Small], limits: tuple[int, int, int]
) -> list[tuple[_Small, int]]:
    """Send ``items`` (files of one run, in order) in batch requests of at most ``limits``' files
    and bytes. Each file is read once, hashed by chunk as read and named in the batch's head with
    its digest; the server checks every one before it writes any, and answers the digest of each
    copy it stored, which must be the local one. Returns each item with the size sent."""
    import struct

    out: list[tuple[_Small, int]] = []
    group: list[tuple[_Small, bytes, int, os.stat_result | None, list[str]]] = []
    fill = 0

    def flush() -> None:
        head = []
        for item, _data, size, _st, chunks in group:
            entry: dict[str, Any] = {"path": item.rel, "offset": item.offset, "size": size, "digest": digest(chunks)}
            if item.offset:
                entry["prefix"] = digest(item.prefix)
            head.append(entry)
        head_bytes = orjson.dumps({"files": head})
        body = b"".join([struct.pack(">I", len(head_bytes)), head_bytes, *(g[1] for g in group)])
        answer = session.call("POST", f"/api/sync/runs/{run_id}/batch", data=body)
        stored = {f.get("path"): f.get("digest") for f in answer.get("files") or [] if isinstance(f, dict)}
        for item, _, size, st, chunks in group:
            if stored.get(item.rel) != digest(chunks):
                raise SyncError(
                    f"{item.path}: the server stored digest {stored.get(item.rel)} but the local file's is "
                    f"{digest(chunks)}: the file was damaged on the way"
                )
            if st is not None:
                cache.store(item.key, st, size, chunks)
            out.append((item, size))
        group.clear()

    for item in items:
        data, size, st = _read_small(item, limits[2])
        if group and (len(group) >= limits[0] or fill + len(data) > limits[1]):
            flush()
            fill = 0
        chunks = item.prefix + [hashlib.sha256(data[i : i + CHUNK]).hexdigest() for i in range(0, len(data), CHUNK)]
        group.append((item, data, size, st, chunks))
        fill += len(data)
    if group:
        flush()
    return out


def _known(cache: _Cache, key: str, run_dir: Path, rel: str, st: os.stat_result, size: int) -> list[str] | None:
    """The chunk hashes of the first ``size`` bytes of a file unchanged since they were computed:
    by an earlier sync (the cache), or as the run stored it (a checkpoint's record,
    :func:`labledger.store.manifest.recorded_chunks`); ``None`` when it must be read to be hashed."""
    known = cache.known(key, st, size)
    if known is None and size == st.st_size:
        known = recorded_chunks(run_dir, rel, st)
    return known


def _recorded_sha256(run_dir: Path, rel: str) -> str | None:
    """The sha256 the run's ``checkpoints.jsonl`` records for its file ``rel`` (the last record of
    it), or ``None`` when it records none (a record file, a checkpoint outside the run)."""
    from labledger.store.verify import checkpoint_files

    target = os.path.realpath(run_dir / rel)
    found = None
    for _, rec, path in checkpoint_files(run_dir):
        if os.path.realpath(path) == target and isinstance(rec.get("sha256"), str):
            found = rec["sha256"]
    return found


def _file_url(run_id: str, rel: str, offset: int, size: int) -> str:
    return f"/api/sync/runs/{run_id}/files?path={quote(rel, safe='')}&offset={offset}&size={size}"


def _rehashed(path: Path, known: list[str], size: int, run_dir: Path, rel: str) -> list[str] | None:
    """After the server refused ``path``'s bytes sent by ``known`` hashes (422): the file's chunk
    hashes made again when its sha256 is still the one its run recorded for it, so the hashes were
    what was wrong (a chunk record or a sync cache entry edited or torn by hand, #18); the chunk
    record is rewritten with them. ``None`` when the bytes are not the run's (damaged or changed on
    this disk since it stored them) or the run records no sha256 for the file."""
    from labledger.store.manifest import record_chunks, sha256_and_chunks

    st = os.stat(path)
    if st.st_size != size:
        return None
    sha, _, fresh = sha256_and_chunks(path)
    if fresh == known or sha != _recorded_sha256(run_dir, rel):
        return None
    if recorded_chunks(run_dir, rel, st) is not None:
        record_chunks(run_dir, rel, fresh, st)
    return fresh


def _send(
    session: _Session,
    path: Path,
    url: str,
    offset: int,
    size: int,
    prefix: list[str],
    known: list[str] | None,
    heal: tuple[Path, str] | None = None,
) -> list[str]:
    """PUT the bytes ``[offset, size)`` of ``path``; return the file's chunk hashes (``prefix`` + sent).

    ``prefix`` holds the hashes of the chunks before ``offset`` (what the server has). With
    ``known`` (the file's hashes, computed before) the bytes are only sent, with their digest
    (``X-Digest``): the server hashes what it receives and keeps nothing whose digest is another
    (a file damaged on disk since it was hashed, or changed while sent). Otherwise each chunk is
    hashed as it goes, so the file is read once. Either way the digest the server computed of what
    it stored must equal the local one, and a file whose ``stat`` changed while it was sent fails
    (its bytes on the server may be a mix).

    ``heal``: ``(run folder, path in it)``. When the server refuses bytes sent by ``known`` and
    :func:`_rehashed` finds the file intact, it is sent once more by its new hashes (a wrong
    record no longer fails every sync); otherwise the refusal fails naming the file.
    """
    before = os.stat(path)
    hashed: list[str] = list(prefix)
    headers = {
        "Content-Length": str(size - offset),
        "Content-Type": "application/octet-stream",
        "X-Prefix-Digest": digest(prefix),
    }
    if known is not None:
        headers["X-Digest"] = digest(known)
    with open(path, "rb") as f:
        try:
            doc = session.put_file(url, f, offset, size, headers, None if known is not None else hashed)
        except SyncDigestError:
            fresh = _rehashed(path, known, size, *heal) if known is not None and heal is not None else None
            if fresh is not None:  # the hashes were wrong, not the file: sent once more by the right ones
                return _send(session, path, url, offset, size, fresh[: offset // CHUNK], fresh)
            raise SyncDigestError(
                f"{path}: its bytes are not the ones hashed when it was stored (changed or damaged on this disk; "
                f"`labledger verify` checks the run); the server kept nothing of them"
            ) from None
    local = known if known is not None else hashed
    after = os.stat(path)
    if known is None and (after.st_mtime_ns, after.st_ino) != (before.st_mtime_ns, before.st_ino):
        raise SyncError(f"{path}: the file changed while it was sent; the next sync sends it again")
    if doc.get("digest") != digest(local):
        raise SyncError(
            f"{path}: the server stored digest {doc.get('digest')} but the local file's is {digest(local)}: "
            f"the file changed while it was sent or was damaged on the way"
        )
    return local


def watch(
    ledger: str | os.PathLike[str],
    to: str,
    *,
    token: str | None = None,
    runs: list[str] | None = None,
    interval: float = 1.0,
    until_done: bool = True,
    on_round: Callable[[SyncReport | None, Exception | None], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Sync every ``interval`` seconds; a server that cannot be reached is retried, never fatal.

    With ``runs`` and ``until_done``, returns once each of them has ended and is fully synced.
    Conflicts stop the watch (they do not heal by waiting).
    """
    while True:
        report: SyncReport | None = None
        error: Exception | None = None
        try:
            report = sync_runs(ledger, to, token=token, runs=runs, trust_cache=True)
        except SyncConflictError:
            raise
        except (LedgerError, FileNotFoundError) as exc:  # a JSONL compacted at finish mid-round: next round
            error = exc
        if on_round is not None:
            on_round(report, error)
        if report is not None and runs and until_done and not report.live and not report.runs_sent:
            return
        if stop is not None and stop():
            return
        time.sleep(interval)
