"""The server's side of ``labledger sync`` (#18): state, streamed file writes, index rows.

* ``POST /api/sync/state`` ``{"origin": O, "runs": [ids]}``: per run what the server holds (its
  manifest's files with size and chunk hashes, the part files of interrupted uploads, the index
  digest), ``null`` for a run it lacks, ``{"foreign": true}`` for a run it has that sync did not make.
* ``PUT /api/sync/runs/{run}/files?path=REL&offset=N&size=TOTAL``: the bytes ``[N, TOTAL)`` of one
  file, streamed to disk and hashed chunk by chunk on the way (``N`` is a chunk boundary). Record
  files (append-only) are written in place; every other file goes to a part file that is renamed
  into place once complete, so a reader never sees half a checkpoint. ``X-Prefix-Digest`` is the
  digest of the client's first ``N / CHUNK`` chunks: a server copy that differs there is a conflict.
  ``X-Digest``, when the client knows the file's digest before sending (chunk hashes recorded as
  the run wrote it), is checked against what arrived: other bytes are refused (422) and not kept.
* ``POST /api/sync/runs/{run}/batch``: many small files in one request (#46). The body is a
  4-byte big-endian length, a JSON head ``{"files": [{"path", "offset", "size", "digest",
  "prefix"}]}``, then the bytes ``[offset, size)`` of each file in the head's order. At most
  ``BATCH_FILES`` files and ``BATCH_BYTES`` bytes, each file's part at most ``BATCH_FILE`` (the
  state answer names these limits; a larger file takes the chunked ``PUT``). The whole body is
  received and every file's digest checked before anything is written: one that differs refuses
  the batch (422) and nothing of it is kept. Whole files are written to part files of the batch's
  own and fsynced together (writeback started for all, then the ``fsync`` s, which wait for one
  journal commit), before the run's lock is taken; with the lock they are recorded in the
  manifest, then renamed into place and their folders fsynced once each. A record file sent from
  an offset (a live run's new lines) is checked and written in place with the lock held. A rename
  a crash cut off is finished by the next request for the run (:func:`settle`), so a killed
  server leaves no half batch and no false "changed on the server".
* ``POST /api/sync/runs/{run}/index``: the run's index rows (runs, tags, checkpoints, evaluations,
  metric values, benchmark entries), replaced in one transaction.

Every write needs the token and ``X-Labledger-Origin``: the ledger that first synced a run owns it
on this server; another origin is refused (409), never merged. A file larger than the server's
``max_upload`` is refused (413), and JSON bodies are capped by ``max_body``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from labledger.errors import LedgerError, RecordError
from labledger.server.envelope import ApiError, ok
from labledger.server.raw_body import BodyStalled, read_exact
from labledger.store.index import replace_run_rows
from labledger.store.jsonl import fsync_dir
from labledger.store.manifest import (
    APPEND_ONLY,
    CHUNK,
    check_run_path,
    chunk_hashes,
    digest,
    fresh_entry,
    range_hash,
    read_manifest,
    sha256_hex,
    stat_key,
    write_manifest,
)
from labledger.store.objects import drop_file, read_file, ship_file

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ORIGIN = re.compile(r"^[0-9a-f]{16,64}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
PARTS = ".sync-parts"
#: The most files one batch request carries.
BATCH_FILES = 512
#: The most file bytes one batch request carries.
BATCH_BYTES = 8 * CHUNK
#: The most bytes of one file (of its part sent) in a batch; a larger file takes the chunked PUT.
BATCH_FILE = CHUNK
#: The most bytes of a batch's JSON head.
BATCH_HEAD = 1 << 20
#: The ending of a batch's part files, ``<quoted path>~<batch tag>.bpart`` in ``PARTS``.
BATCH_PART = ".bpart"
#: Seconds after which a batch's part file that no manifest names is removed (a batch a crash or
#: a refusal left; one waiting for the run's lock is younger).
STALE_PART_S = 3600.0
_locks: dict[str, asyncio.Lock] = {}


def _lock(run_id: str) -> asyncio.Lock:
    lock = _locks.get(run_id)
    if lock is None:
        lock = _locks[run_id] = asyncio.Lock()
    return lock


def _run_id(value: str) -> str:
    if not _RUN_ID.fullmatch(value) or ".." in value:
        raise ApiError(400, f"run id {value[:80]!r} is not a valid run id")
    return value


def _origin(request: Request) -> tuple[str, str]:
    origin = request.headers.get("x-labledger-origin") or ""
    if not _ORIGIN.fullmatch(origin):
        raise ApiError(400, "sync writes need the header X-Labledger-Origin: the local ledger's id (16-64 hex digits)")
    host = (request.headers.get("x-labledger-host") or "")[:200]
    return origin, host


async def _json_body(request: Request) -> Any:
    limit = request.app.state.ctx.max_body
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, f"the request body passed {limit} bytes, the most this server takes")
    try:
        return orjson.loads(bytes(body))
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the body is not JSON ({exc})") from None


def _owned(run_dir: Path, origin: str, host: str, *, create: bool) -> dict[str, Any]:
    """The run folder's manifest when ``origin`` owns it (made when ``create`` and the run is new)."""
    doc = read_manifest(run_dir)
    if doc is None:
        if run_dir.exists():
            raise ApiError(
                409, f"run {run_dir.name} exists on this server and was not made by sync: refusing to merge into it"
            )
        if not create:
            raise ApiError(409, f"run {run_dir.name} has no files on this server yet: send its files first")
        doc = _create_run_dir(run_dir, {"origin": origin, "host": host, "files": {}, "index": None})
    if doc.get("origin") != origin:
        raise ApiError(
            409,
            f"run {run_dir.name} on this server was synced from another ledger (host {doc.get('host') or '?'}): "
            f"refusing to merge two copies of one run",
        )
    settle(run_dir, doc)
    return doc


def _create_run_dir(run_dir: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """Make ``run_dir`` with its manifest ``doc`` in one rename, and return the manifest it has.

    A folder made first and given its manifest after was, in between, a run "not made by sync" to
    a state request (which takes no lock) or to another server process: a second sync of the same
    run from the same ledger was refused. The folder is built under a hidden name beside it; when
    another creator's rename came first, its manifest is the one returned (the caller checks its
    origin)."""
    import secrets
    import shutil

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = run_dir.with_name(f".{run_dir.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
    tmp.mkdir()
    try:
        write_manifest(tmp, doc)
        os.rename(tmp, run_dir)  # fails when run_dir exists (and is not empty)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        found = read_manifest(run_dir)
        if found is None:
            raise ApiError(
                409, f"run {run_dir.name} exists on this server and was not made by sync: refusing to merge into it"
            ) from None
        return found
    fsync_dir(run_dir.parent, strict=True)  # the new run folder survives a crash before the answer
    return doc


def _part_path(run_dir: Path, rel: str) -> Path:
    return run_dir / PARTS / (quote(rel, safe="") + ".part")


def run_state(run_dir: Path, *, grown: list[str] | None = None) -> dict[str, Any] | None:
    """What the server holds of one run (see the module docstring). The record files that only
    grew since the manifest was written (an append a crash left unrecorded) are not changed; their
    paths are appended to ``grown``."""
    doc = read_manifest(run_dir)
    if doc is None:
        return {"foreign": True} if run_dir.exists() else None
    files: dict[str, Any] = {}
    base = str(run_dir) + "/"
    found, batched = _scan_parts(run_dir)
    for rel, entry in doc["files"].items():
        if any(stat_key(st) == entry.get("stat") for _, st in batched.get(rel, ())):
            # a batch's file recorded and not yet renamed into place (a crash, or the batch now)
            files[rel] = {"size": entry["size"], "chunks": entry["chunks"], "changed": False}
            continue
        try:
            now = fresh_entry(base + rel, entry)
        except FileNotFoundError:
            files[rel] = {"size": 0, "chunks": [], "changed": True}
            continue
        grew = now is not entry and rel in APPEND_ONLY and _extends(base + rel, now, entry)
        if grew and grown is not None:
            grown.append(rel)
        files[rel] = {"size": now["size"], "chunks": now["chunks"], "changed": now is not entry and not grew}
    parts: dict[str, Any] = {}
    for rel, (p, st) in found.items():
        size = st.st_size - st.st_size % CHUNK  # resume from a whole chunk
        parts[rel] = {"size": size, "chunks": chunk_hashes(p, size=size)}
    return {
        "origin": doc.get("origin"),
        "host": doc.get("host"),
        "index": doc.get("index"),
        "files": files,
        "parts": parts,
    }


def _scan_parts(
    run_dir: Path,
) -> tuple[dict[str, tuple[Path, os.stat_result]], dict[str, list[tuple[Path, os.stat_result]]]]:
    """The part files of a run folder by the run path they are for, with their ``stat``: those of
    the chunked PUT (one per path, resumable), and those of batches (one per path and batch)."""
    from urllib.parse import unquote

    put: dict[str, tuple[Path, os.stat_result]] = {}
    batched: dict[str, list[tuple[Path, os.stat_result]]] = {}
    try:
        it = os.scandir(run_dir / PARTS)
    except (FileNotFoundError, NotADirectoryError):
        return put, batched
    with it:
        for e in it:
            try:
                if e.name.endswith(".part"):
                    put[unquote(e.name[: -len(".part")])] = (Path(e.path), e.stat())
                elif e.name.endswith(BATCH_PART) and "~" in e.name:
                    rel = unquote(e.name.rsplit("~", 1)[0])
                    batched.setdefault(rel, []).append((Path(e.path), e.stat()))
            except FileNotFoundError:  # renamed or removed meanwhile
                continue
    return put, batched


def _part_files(run_dir: Path) -> dict[str, tuple[Path, os.stat_result]]:
    """The chunked PUT's part files of a run folder (:func:`_scan_parts`)."""
    return _scan_parts(run_dir)[0]


def _extends(path: str, now: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Whether the record file at ``path`` (its chunks ``now``) still begins with every byte its
    manifest ``entry`` records: it only grew since (an append a crash left unrecorded), it was not
    changed."""
    size = int(entry.get("size") or 0)
    chunks = list(entry.get("chunks") or [])
    full = size // CHUNK
    if now["size"] < size or now["chunks"][:full] != chunks[:full] or len(chunks) != -(-size // CHUNK):
        return False
    return not size % CHUNK or range_hash(path, full * CHUNK, size) == chunks[full]


def _record_grown(run_dir: Path) -> None:
    """Record in the manifest the record files that only grew since it was written (the bytes of
    an append a crash left unrecorded; :func:`_extends`). Called with the run's lock held."""
    doc = read_manifest(run_dir)
    if doc is None:
        return
    base = str(run_dir) + "/"
    changed = False
    for rel, entry in doc["files"].items():
        if rel not in APPEND_ONLY:
            continue
        try:
            now = fresh_entry(base + rel, entry)
        except FileNotFoundError:
            continue
        if now is not entry and _extends(base + rel, now, entry):
            doc["files"][rel] = now
            changed = True
    if changed:
        write_manifest(run_dir, doc)


def settle(run_dir: Path, doc: dict[str, Any]) -> bool:
    """Finish the renames of a batch that a crash cut off: every part file whose ``stat`` is the
    one the manifest records for its path (written, fsynced and recorded, not yet in place) is
    renamed into place. Returns whether there were any. Called with the run's lock held."""
    touched: set[Path] = set()
    now = time.time()
    for rel, found in _scan_parts(run_dir)[1].items():
        entry = doc["files"].get(rel)
        for part, st in found:
            if entry is not None and stat_key(st) == entry.get("stat"):
                final = run_dir / rel
                _make_parents(final, run_dir, touched)
                os.replace(part, final)
                touched.add(final.parent)
            elif now - st.st_mtime > STALE_PART_S:  # a batch a crash or a refusal left, long ago
                with contextlib.suppress(FileNotFoundError):
                    part.unlink()
    _fsync_dirs(touched)
    return bool(touched)


def unsettled(runs_dir: Path) -> list[str]:
    """The runs of ``runs_dir`` that hold a batch's part files (a crash cut off its renames, or a
    batch is under way): one ``scandir`` of the runs and one of each run's parts folder that exists."""
    out: list[str] = []
    try:
        it = os.scandir(runs_dir)
    except FileNotFoundError:
        return out
    with it:
        for e in it:
            if _RUN_ID.fullmatch(e.name) and _scan_parts(Path(e.path))[1]:
                out.append(e.name)
    return out


async def settle_at_start(runs_dir: Path) -> list[str]:
    """Finish, as the server starts, the renames of every batch a crash cut off (:func:`settle`,
    each run under its lock), so a run's recorded files are in place without waiting for the run's
    next sync. Returns the runs settled."""
    done = []
    for rid in await run_in_threadpool(unsettled, runs_dir):
        async with _lock(rid):
            doc = await run_in_threadpool(read_manifest, runs_dir / rid)
            if doc is not None and await run_in_threadpool(settle, runs_dir / rid, doc):
                done.append(rid)
    return done


def _make_parents(path: Path, run_dir: Path, touched: set[Path]) -> None:
    """Make the folders above ``path`` (inside ``run_dir``); each folder a new one was made in is
    added to ``touched`` (to be fsynced, so the new folder survives a crash)."""
    missing = []
    folder = path.parent
    while folder != run_dir and not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
        touched.add(folder.parent)


#: Files (or folders) fsynced one after the other, below a pool of threads: once the first fsync
#: committed the journal, the others of a batch have little left to wait for.
SERIAL_FSYNCS = 32


def _fsync_dirs(folders: set[Path]) -> None:
    """fsync ``folders`` from a pool of threads (the journal commits once for those that wait together)."""
    if len(folders) <= SERIAL_FSYNCS:
        for folder in folders:
            fsync_dir(folder, strict=True)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(16, len(folders)), thread_name_prefix="labledger-sync-fsync") as pool:
        list(pool.map(lambda f: fsync_dir(f, strict=True), folders))


def _fsync_fds(fds: list[int]) -> None:
    """fsync many written files: writeback started for every one first (``sync_file_range``), then
    the ``fsync`` s from a pool of threads, so the file system commits its journal once for many
    files, not once per file (a batch's fsync)."""
    if _SYNC_FILE_RANGE is not None and len(fds) > 1:
        for fd in fds:
            _SYNC_FILE_RANGE(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)
    if len(fds) <= SERIAL_FSYNCS:  # threads cost more than they save for a few files
        for fd in fds:
            os.fsync(fd)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(16, len(fds)), thread_name_prefix="labledger-sync-fsync") as pool:
        list(pool.map(os.fsync, fds))


def _ship_pending(store: Any, run_dir: Path) -> None:
    """Ship the files of a run whose upload to object storage failed (a StorageError if it fails again)."""
    doc = read_manifest(run_dir)
    if doc is None:
        return
    for rel, entry in doc["files"].items():
        if entry.get("unshipped"):
            ship_file(store, run_dir.name, rel, run_dir / rel, entry, whole=rel not in APPEND_ONLY, owner=doc)
            del entry["unshipped"]
            write_manifest(run_dir, doc)


def restore_spool(store: Any, runs_dir: Path) -> list[str]:
    """Copy back from object storage every synced run whose folder the spool lacks; return their ids.

    With ``serve --artifacts s3://...`` the store is where synced runs are kept and the run folders
    on the server's disk are its working copy (the spool): the run API and the live site read
    those, since record files are appended there while a run lives (an object store cannot append)
    and their readers need what only a local file gives (``stat`` for the site's rebuilds, byte
    offsets for paging results, memory maps for the columnar reads). Every byte of the spool was
    hashed as it arrived and shipped before the upload was answered. A spool that lost runs (a new
    disk, a fresh ``$TMPDIR`` in team mode, a second server on the same store) is filled again
    from the store at start: each file streamed and checked chunk by chunk, its folder renamed into
    place once complete, still owned by the ledger that synced it.

    >>> from labledger.store.objects import ObjectStore
    >>> restore_spool(ObjectStore("s3://lab-runs/team"), Path("/srv/spool/runs"))   # doctest: +SKIP
    ['20260101-120000-0123456789ab']
    """
    import shutil

    from labledger.store.objects import restore_run, stored_runs

    done = []
    for run_id in stored_runs(store):
        if not _RUN_ID.fullmatch(run_id) or (runs_dir / run_id).exists():
            continue
        doc = store.manifest(run_id) or {}
        if not doc.get("origin"):  # shipped before owners were recorded: not taken back unowned
            continue
        tmp = runs_dir / f".restoring-{run_id}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        restore_run(store, run_id, tmp)
        files = {}
        for rel, entry in doc["files"].items():
            st = (tmp / rel).stat()
            files[rel] = {"size": st.st_size, "chunks": list(entry["chunks"]), "stat": stat_key(st)}
        write_manifest(tmp, {"origin": doc["origin"], "host": doc.get("host"), "files": files, "index": None})
        os.replace(tmp, runs_dir / run_id)
        done.append(run_id)
    return done


async def state(request: Request) -> Response:
    """``POST /api/sync/state``."""
    ctx = request.app.state.ctx
    ctx.require_write(request)
    body = await _json_body(request)
    runs = body.get("runs") if isinstance(body, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs) or len(runs) > 10_000:
        raise ApiError(400, "the body must be {'runs': [run ids]} (at most 10,000)")
    root = ctx.root / "runs"

    stray = await run_in_threadpool(lambda: [rid for rid in runs if _scan_parts(root / _run_id(rid))[1]])
    for rid in stray:  # part files: a batch's renames a crash cut off are finished first
        lock = _lock(rid)
        if lock.locked():  # a write of the run is under way (it settled them as it began): not waited for
            continue
        async with lock:
            doc = await run_in_threadpool(read_manifest, root / rid)
            if doc is not None:
                await run_in_threadpool(settle, root / rid, doc)

    def collect() -> dict[str, Any]:
        if ctx.objects is not None:
            for rid in runs:
                _ship_pending(ctx.objects, root / _run_id(rid))
        return {rid: run_state(root / _run_id(rid), grown=grown.setdefault(rid, [])) for rid in runs}

    grown: dict[str, list[str]] = {}
    found = await run_in_threadpool(collect)
    for rid in [rid for rid, rels in grown.items() if rels]:
        lock = _lock(rid)
        if not lock.locked():  # appended in place and unrecorded, and no write under way: a crash's
            async with lock:
                await run_in_threadpool(_record_grown, root / rid)
    batch = {"files": BATCH_FILES, "bytes": BATCH_BYTES, "file": BATCH_FILE}
    return ok({"runs": found, "chunk": CHUNK, "max_upload": ctx.max_upload, "batch": batch})


async def put_file(request: Request) -> Response:
    """``PUT /api/sync/runs/{run}/files?path=REL&offset=N&size=TOTAL``."""
    ctx = request.app.state.ctx
    ctx.require_write(request)
    origin, host = _origin(request)
    run_id = _run_id(request.path_params["run"])
    try:
        rel = check_run_path(request.query_params.get("path") or "")
    except RecordError as exc:
        raise ApiError(400, str(exc)) from None
    try:
        offset = int(request.query_params.get("offset", "0"))
        total = int(request.query_params["size"])
    except (KeyError, ValueError):
        raise ApiError(400, "offset and size must be numbers of bytes (?offset=N&size=TOTAL)") from None
    if offset < 0 or offset % CHUNK or total < offset:
        raise ApiError(400, f"offset must be a multiple of {CHUNK} and at most size; got offset={offset} size={total}")
    if total > ctx.max_upload:
        raise ApiError(413, f"{rel} is {total} bytes; this server takes files of at most {ctx.max_upload} bytes")
    run_dir = ctx.root / "runs" / run_id
    async with _lock(run_id):
        doc = await run_in_threadpool(_owned, run_dir, origin, host, create=True)
        in_place = rel in APPEND_ONLY
        target = run_dir / rel if in_place else _part_path(run_dir, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        if in_place:
            entry = doc["files"].get(rel)
            have = await run_in_threadpool(fresh_entry, target, entry) if target.exists() else None
            kept = (have or {}).get("chunks", [])[: offset // CHUNK]
            have_size = have["size"] if have else 0
        else:
            have_size = target.stat().st_size if target.exists() else 0
            kept = await run_in_threadpool(lambda: chunk_hashes(target, size=offset)) if offset else []
        if have_size < offset or len(kept) != offset // CHUNK:
            raise ApiError(409, f"{rel}: the server has {have_size} bytes, fewer than offset {offset}: ask for state")
        prefix = request.headers.get("x-prefix-digest")
        if offset and prefix != digest(kept):
            raise ApiError(409, f"{rel}: the server's first {offset} bytes differ from the client's: refusing to merge")
        expect = request.headers.get("x-digest")
        if expect is not None and not _DIGEST.fullmatch(expect):
            raise ApiError(400, f"X-Digest must be 64 lowercase hex digits (the file's digest); got {expect[:80]!r}")
        refused, got = False, None
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        chunks = list(kept)
        written = offset
        complete = False
        flush = Writeback(fd, offset, path=target)
        try:
            os.ftruncate(fd, offset)
            raw = request.scope.get("extensions", {}).get("labledger.raw_body")
            try:
                if raw is not None and not raw.taken:
                    written = await _receive_raw(raw, flush, offset, total, chunks, rel)
                else:
                    written = await _receive_into(request, flush, offset, total, chunks, rel)
            except ClientDisconnect:  # the whole chunks that came are written and hashed
                written = offset + (len(chunks) - len(kept)) * CHUNK
            complete = written == total
            got = digest(chunks) if complete and expect is not None else None
            refused = got is not None and got != expect
        finally:
            await run_in_threadpool(flush.close)
        if refused:  # nothing of these bytes is kept: a part file goes, a record file is cut back
            os.ftruncate(fd, offset)
            chunks = list(kept)
        try:
            if complete and not refused:
                await run_in_threadpool(os.fsync, fd)  # mostly written back already (Writeback)
        finally:
            os.close(fd)
            if in_place:  # what was written is recorded even when the client went away
                st = target.stat()
                doc["files"][rel] = {"size": st.st_size, "chunks": chunks, "stat": stat_key(st)}
                await run_in_threadpool(write_manifest, run_dir, doc)
        if refused:
            if not in_place:
                target.unlink(missing_ok=True)
            raise ApiError(
                422,
                f"{rel}: the {total - offset} bytes received have the digest {got}, not {expect} as the client "
                f"stated (X-Digest): the client's copy changed since it was hashed, or is damaged; nothing of "
                f"it was kept",
            )
        if not complete:
            raise ApiError(400, f"{rel}: the body ended after {written - offset} of {total - offset} bytes")
        superseded = None
        if not in_place:
            final = run_dir / rel
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(target, final)
            if final.parent != run_dir:  # the rename must survive a crash (run_dir: the manifest's write)
                await run_in_threadpool(fsync_dir, final.parent, strict=True)
            st = final.stat()
            doc["files"][rel] = {"size": st.st_size, "chunks": chunks, "stat": stat_key(st)}
            superseded = await run_in_threadpool(_drop_superseded, run_dir, doc, rel)
            await run_in_threadpool(write_manifest, run_dir, doc)
        if ctx.objects is not None:  # the file goes on to object storage before the answer
            try:
                await run_in_threadpool(
                    lambda: ship_file(
                        ctx.objects, run_id, rel, run_dir / rel, doc["files"][rel], whole=not in_place, owner=doc
                    )
                )
            except LedgerError:  # the store is unreachable: shipped again at the next state request
                doc["files"][rel]["unshipped"] = True
                await run_in_threadpool(write_manifest, run_dir, doc)
                raise
            if superseded:
                await run_in_threadpool(drop_file, ctx.objects, run_id, superseded)
    return ok({"path": rel, "size": total, "digest": digest(chunks), "chunks": len(chunks)})


async def put_batch(request: Request) -> Response:
    """``POST /api/sync/runs/{run}/batch``: many small files of one run (see the module docstring)."""
    ctx = request.app.state.ctx
    ctx.require_write(request)
    origin, host = _origin(request)
    run_id = _run_id(request.path_params["run"])
    try:
        length = int(request.headers["content-length"])
    except (KeyError, ValueError):
        raise ApiError(400, "a batch needs a Content-Length") from None
    limit = 4 + BATCH_HEAD + BATCH_BYTES
    if length > limit:
        raise ApiError(413, f"the batch is {length} bytes; a batch carries at most {limit}")
    body = bytearray()
    try:
        async for piece in request.stream():
            body += piece
            if len(body) > length:
                raise ApiError(400, f"the batch body is longer than its Content-Length ({length})")
    except ClientDisconnect:  # the client went away: nothing of the batch is written
        raise ApiError(400, f"the batch body ended after {len(body)} of {length} bytes; nothing was kept") from None
    if len(body) != length:
        raise ApiError(400, f"the batch body ended after {len(body)} of {length} bytes; nothing was kept")
    entries = _batch_entries(body, ctx.max_upload)
    run_dir = ctx.root / "runs" / run_id
    view = memoryview(body)
    written = None
    if not any(e.offset for e in entries):
        # whole files only: verified, written and fsynced without the run's lock (their part files
        # are this batch's own), so the batches of one run wait for their fsyncs together
        async with _lock(run_id):
            await run_in_threadpool(_owned, run_dir, origin, host, create=True)
        plans = await run_in_threadpool(_verify_batch, run_dir, None, entries, view)
        written = await run_in_threadpool(_write_batch, run_dir, plans)
    try:
        async with _lock(run_id):
            doc = await run_in_threadpool(_owned, run_dir, origin, host, create=True)
            if written is None:  # a record file's new bytes: checked against the manifest, written in place
                plans = await run_in_threadpool(_verify_batch, run_dir, doc, entries, view)
                written = await run_in_threadpool(_write_batch, run_dir, plans)
            ready, written = written, None  # from here its part files are the manifest's (settle)
            answers, superseded = await run_in_threadpool(_commit_batch, run_dir, doc, ready)
            if ctx.objects is not None:  # each file goes on to object storage before the answer
                await run_in_threadpool(_ship_batch, ctx.objects, run_id, run_dir, doc, entries, superseded)
    finally:
        if written is not None:  # not committed (the owner check failed, the client went away)
            written.discard()
    return ok({"run": run_id, "files": answers})


class _BatchEntry:
    """One file of a batch: its run path, the byte range ``[offset, size)`` sent, where those
    bytes start in the body, the digest of the whole file and of its chunks before ``offset``."""

    __slots__ = ("at", "digest", "offset", "prefix", "rel", "size")

    def __init__(self, rel: str, offset: int, size: int, digest: str, prefix: str | None, at: int) -> None:
        self.rel, self.offset, self.size, self.digest, self.prefix, self.at = rel, offset, size, digest, prefix, at


def _batch_entries(body: bytearray, max_upload: int) -> list[_BatchEntry]:
    """The files of a batch body, checked (paths, ranges, digests, limits) before anything is written."""
    n = int.from_bytes(body[:4], "big") if len(body) >= 4 else -1
    if n < 0 or n > BATCH_HEAD or 4 + n > len(body):
        raise ApiError(400, f"a batch body starts with the 4-byte length of its JSON head (at most {BATCH_HEAD})")
    try:
        head = orjson.loads(bytes(body[4 : 4 + n]))
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the batch head is not JSON ({exc})") from None
    files = head.get("files") if isinstance(head, dict) else None
    if not isinstance(files, list) or not files or len(files) > BATCH_FILES:
        raise ApiError(400, f"the batch head must be {{'files': [...]}} with 1 to {BATCH_FILES} files")
    out: list[_BatchEntry] = []
    seen: set[str] = set()
    at = 4 + n
    for f in files:
        if not isinstance(f, dict):
            raise ApiError(400, "each file of a batch is {'path', 'offset', 'size', 'digest', 'prefix'}")
        try:
            path = f.get("path")
            rel = check_run_path(path if isinstance(path, str) else "")
        except RecordError as exc:
            raise ApiError(400, str(exc)) from None
        offset, size, want, prefix = f.get("offset", 0), f.get("size"), f.get("digest"), f.get("prefix")
        if not isinstance(offset, int) or not isinstance(size, int) or offset < 0 or offset % CHUNK or size < offset:
            raise ApiError(400, f"{rel}: offset must be a multiple of {CHUNK} and at most size (bytes)")
        if size - offset > BATCH_FILE:
            raise ApiError(413, f"{rel}: {size - offset} bytes; a file in a batch sends at most {BATCH_FILE}")
        if size > max_upload:
            raise ApiError(413, f"{rel} is {size} bytes; this server takes files of at most {max_upload} bytes")
        if not isinstance(want, str) or not _DIGEST.fullmatch(want):
            raise ApiError(400, f"{rel}: digest must be 64 lowercase hex digits (the file's digest)")
        if offset and (rel not in APPEND_ONLY or not isinstance(prefix, str) or not _DIGEST.fullmatch(prefix)):
            raise ApiError(400, f"{rel}: only a record file is sent from an offset, with the prefix's digest")
        if rel in seen:
            raise ApiError(400, f"{rel} is twice in the batch")
        seen.add(rel)
        out.append(_BatchEntry(rel, offset, size, want, prefix if offset else None, at))
        at += size - offset
    if at - 4 - n > BATCH_BYTES:
        raise ApiError(413, f"the batch carries {at - 4 - n} bytes of files; at most {BATCH_BYTES}")
    if at != len(body):
        raise ApiError(400, f"the batch head names {at - 4 - n} bytes of files; the body holds {len(body) - 4 - n}")
    return out


def _verify_batch(
    run_dir: Path, doc: dict[str, Any] | None, entries: list[_BatchEntry], body: memoryview
) -> list[tuple[_BatchEntry, memoryview, list[str]]]:
    """Each file of a batch with its bytes and its chunk hashes, once every file's digest was found
    to be the stated one (a 422 naming the first that is not; nothing is written). A record file
    sent from an offset is checked against the chunks the server has (``doc``: the run's manifest,
    read with the run's lock held)."""
    plans = []
    for e in entries:
        data = body[e.at : e.at + e.size - e.offset]
        new = [sha256_hex(data[i : i + CHUNK]) for i in range(0, len(data), CHUNK)]
        kept: list[str] = []
        if e.offset:  # a record file's new bytes, after the chunks the server has
            assert doc is not None
            target = run_dir / e.rel
            have = fresh_entry(target, doc["files"].get(e.rel)) if target.exists() else None
            kept = list((have or {}).get("chunks", [])[: e.offset // CHUNK])
            have_size = have["size"] if have else 0
            if have_size < e.offset or len(kept) != e.offset // CHUNK:
                raise ApiError(
                    409, f"{e.rel}: the server has {have_size} bytes, fewer than offset {e.offset}: ask for state"
                )
            if e.prefix != digest(kept):
                raise ApiError(
                    409, f"{e.rel}: the server's first {e.offset} bytes differ from the client's: refusing to merge"
                )
        got = digest(kept + new)
        if got != e.digest:
            raise ApiError(
                422,
                f"{e.rel}: the {len(data)} bytes received in the batch have the digest {got}, not {e.digest} as the "
                f"client stated: the client's copy changed since it was hashed, or is damaged; nothing of the "
                f"batch was kept",
            )
        plans.append((e, data, kept + new))
    return plans


class _Written:
    """A batch's files written and fsynced: per file its entry, its part file (``None``: written
    in place) and its manifest entry."""

    def __init__(self) -> None:
        self.files: list[tuple[_BatchEntry, Path | None, dict[str, Any]]] = []

    def discard(self) -> None:
        """Remove the part files (a batch that was not committed)."""
        for _, part, _ in self.files:
            if part is not None:
                with contextlib.suppress(OSError):
                    part.unlink()


def _write_batch(run_dir: Path, plans: list[tuple[_BatchEntry, memoryview, list[str]]]) -> _Written:
    """Write the verified files of a batch (each whole file to a part file of this batch's own, a
    record file's new bytes in place) and fsync them all: writeback started for every one, then
    the fsyncs, which wait together for one journal commit."""
    import secrets

    tag = secrets.token_hex(4)
    out = _Written()
    fds: list[int] = []
    try:
        (run_dir / PARTS).mkdir(exist_ok=True)
        for e, data, chunks in plans:
            part = None if e.offset else run_dir / PARTS / f"{quote(e.rel, safe='')}~{tag}{BATCH_PART}"
            if part is None:  # in place, as the chunked path writes record files
                fd = os.open(run_dir / e.rel, os.O_WRONLY | os.O_CLOEXEC)
            else:
                fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            fds.append(fd)
            out.files.append((e, part, {"size": e.size, "chunks": chunks}))
            _pwrite_all(fd, data, e.offset)
            if e.offset:
                os.ftruncate(fd, e.size)
        _fsync_fds(fds)
        for fd, (_, _, entry) in zip(fds, out.files, strict=True):
            st = os.fstat(fd)  # a rename keeps size, mtime and inode: the stat the file has once in place
            entry["size"], entry["stat"] = st.st_size, stat_key(st)
    except BaseException:
        out.discard()
        raise
    finally:
        for fd in fds:
            os.close(fd)
    return out


def _commit_batch(run_dir: Path, doc: dict[str, Any], written: _Written) -> tuple[list[dict[str, Any]], list[str]]:
    """Record a written batch in the manifest, then rename its part files into place and fsync
    their folders (with the run's lock held); returns the answer per file and the plain record
    files a compacted one superseded. Once the manifest is written the batch stands: renames a
    crash cuts off are finished by :func:`settle`."""
    for e, _, entry in written.files:
        doc["files"][e.rel] = entry
    write_manifest(run_dir, doc)
    touched: set[Path] = set()
    there: set[Path] = set()  # folders known to exist
    for e, part, _ in written.files:
        if part is not None:
            final = run_dir / e.rel
            if final.parent not in there:
                _make_parents(final, run_dir, touched)
                there.add(final.parent)
            os.replace(part, final)
            touched.add(final.parent)
    _fsync_dirs(touched)
    superseded = [plain for e, _, _ in written.files if (plain := _drop_superseded(run_dir, doc, e.rel))]
    if superseded:
        write_manifest(run_dir, doc)
    answers = [
        {"path": e.rel, "size": e.size, "digest": digest(entry["chunks"]), "chunks": len(entry["chunks"])}
        for e, _, entry in written.files
    ]
    return answers, superseded


def _ship_batch(
    store: Any, run_id: str, run_dir: Path, doc: dict[str, Any], entries: list[_BatchEntry], superseded: list[str]
) -> None:
    """Ship the files of a stored batch to object storage (files that fail are shipped again at the
    next state request, as the chunked path's)."""
    try:
        for e in entries:
            ship_file(
                store, run_id, e.rel, run_dir / e.rel, doc["files"][e.rel], whole=e.rel not in APPEND_ONLY, owner=doc
            )
    except LedgerError:  # the store is unreachable: what was not shipped goes at the next state request
        for e in entries:
            doc["files"][e.rel]["unshipped"] = True
        write_manifest(run_dir, doc)
        raise
    for plain in superseded:
        drop_file(store, run_id, plain)


def _drop_superseded(run_dir: Path, doc: dict[str, Any], rel: str) -> str | None:
    """When ``rel`` is a compacted record file (``X.jsonl.zst``, verified as it arrived), the run's
    plain ``X.jsonl`` that it replaces is removed and left out of the manifest, so the server holds
    each record once, as the client does: returns ``X.jsonl``. A plain file whose bytes are not the
    compressed file's (or their beginning) is kept, and ``verify`` reports it."""
    from labledger.store.compressed import is_prefix

    if not rel.endswith(".jsonl.zst"):
        return None
    plain = rel[: -len(".zst")]
    path = run_dir / plain
    if plain not in doc["files"] and not path.exists():
        return None
    if path.exists():
        if not is_prefix(path, run_dir / rel):
            return None
        path.unlink()
    doc["files"].pop(plain, None)
    return plain


#: Bytes written between two starts of their writeback to disk (:class:`Writeback`).
WRITEBACK_BYTES = 32 * CHUNK


def _sync_file_range() -> Any:
    """libc's ``sync_file_range`` (Linux), or ``None`` where there is none."""
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the final fsync writes the file
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    call.restype = ctypes.c_int
    return call


_SYNC_FILE_RANGE = _sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2


#: Alignment (file offset, length and memory) of the writes that bypass the page cache.
DIRECT_ALIGN = 4096


class Writeback:
    """Writes of one uploaded file, on their way to the disk while the body still arrives.

    Where the caller's buffer is page-aligned (``aligned``: the raw body's buffers) and the
    filesystem takes it, a write goes to the disk directly (``O_DIRECT``, from the buffer itself,
    every whole block of it). A buffered write into the page cache costs kernel CPU (on a VM its
    new page-cache pages can be memory the host took back, faulted in again) and leaves the pages
    dirty for the final ``fsync``; the direct write leaves the ``fsync`` little to do
    (docs/performance.md). Groups that
    waited for the writer go in one write (:meth:`write_many`).

    Any other write (the last bytes short of a block, a streamed body, a filesystem that refuses
    ``O_DIRECT``) is buffered, and every ``span`` bytes of those are handed to a thread of its
    own that starts their writeback (``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which may block
    while the disk's queue is full, never the thread that receives). The ``fsync`` that ends the
    upload stays the only guarantee.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f")
    >>> fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    >>> w = Writeback(fd, path=path)
    >>> w.write(memoryview(b"abc"), 0); w.close(); os.fsync(fd); os.close(fd)
    >>> open(path, "rb").read()
    b'abc'
    """

    def __init__(
        self, fd: int, start: int = 0, *, path: str | os.PathLike[str] | None = None, span: int = WRITEBACK_BYTES
    ) -> None:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self.fd = fd
        self.span = span
        self._start = self._end = start  # the buffered bytes written and not yet sent on
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="labledger-sync-writeback")
        self._direct = -1
        if path is not None and hasattr(os, "O_DIRECT"):
            with contextlib.suppress(OSError):  # a filesystem without O_DIRECT (tmpfs): buffered writes
                self._direct = os.open(path, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
        self._fd_direct = self._direct
        #: Bytes written around the page cache.
        self.direct_bytes = 0

    def write(self, data: memoryview, at: int, *, aligned: bool = False) -> None:
        """Write all of ``data`` at byte ``at``; ``aligned``: its memory starts on a page boundary.
        Safe from several threads at once, each writing its own range."""
        n = len(data)
        direct = self._direct
        if aligned and direct >= 0 and not at % DIRECT_ALIGN and n >= DIRECT_ALIGN:
            whole = n - n % DIRECT_ALIGN
            try:
                _pwrite_all(direct, data[:whole], at, piece=whole)
            except OSError as exc:  # EINVAL: not taken direct here; buffered from now on
                if exc.errno != errno.EINVAL:  # pragma: no cover - ENOSPC, EIO: the upload fails, as buffered
                    raise
                self._direct = -1  # closed by close(): another thread may be writing to it
            else:
                with self._lock:
                    self.direct_bytes += whole
                data, at, n = data[whole:], at + whole, n - whole
                if not n:
                    return
        _pwrite_all(self.fd, data, at)
        with self._lock:
            if self._end == self._start:  # nothing pending: a new span starts here
                self._start = self._end = at
            self._start = min(self._start, at)
            self._end = max(self._end, at + n)
            if self._end - self._start >= self.span:
                self._submit()

    def write_many(self, pieces: list[memoryview], at: int) -> None:
        """Write ``pieces`` one after the other from byte ``at``: page-aligned buffers, each but the
        last a whole number of blocks (the groups of :func:`_read_chunks`). Where they go direct
        they go in one ``pwritev``, so a disk slow to answer gets several writes at once (the
        block layer sends each 4 MiB as a request of its own) instead of one after the other."""
        done = 0  # bytes of the pieces already written
        last = pieces[-1]
        whole_last = len(last) - len(last) % DIRECT_ALIGN
        blocks = all(len(p) % DIRECT_ALIGN == 0 for p in pieces[:-1])
        if len(pieces) > 1 and self._direct >= 0 and not at % DIRECT_ALIGN and blocks:
            iov = [*pieces[:-1], last[:whole_last]] if whole_last else pieces[:-1]
            try:
                done = os.pwritev(self._direct, iov, at)
            except OSError as exc:  # EINVAL: not taken direct here; write() tries once more, then buffered
                if exc.errno != errno.EINVAL:  # pragma: no cover - ENOSPC, EIO: the upload fails, as buffered
                    raise
            with self._lock:
                self.direct_bytes += done
        for piece in pieces:  # what pwritev did not take (all of it, for one piece)
            if done >= len(piece):
                done -= len(piece)
            else:
                self.write(piece[done:], at + done, aligned=not done % DIRECT_ALIGN)
                done = 0
            at += len(piece)

    def _submit(self) -> None:
        if self._end > self._start and _SYNC_FILE_RANGE is not None:
            self._pool.submit(_SYNC_FILE_RANGE, self.fd, self._start, self._end - self._start, _SYNC_FILE_RANGE_WRITE)
        self._start = self._end

    def close(self) -> None:
        """Send on the last span and wait until every writeback was started (before ``fsync``)."""
        with self._lock:
            self._submit()
        self._pool.shutdown(wait=True)
        if self._fd_direct >= 0:
            os.close(self._fd_direct)
            self._fd_direct = -1


#: The most bytes given to one buffered ``pwrite``. A larger buffered write makes the kernel fill
#: the page cache with huge folios, which cost more kernel CPU than small ones (docs/performance.md).
WRITE_PIECE = 256 * 1024


def _pwrite_all(fd: int, data: memoryview, at: int, *, piece: int = WRITE_PIECE) -> None:
    done, n = 0, len(data)
    while done < n:
        done += os.pwrite(fd, data[done : done + piece], at + done)


def _write_chunk(flush: Writeback, pieces: list[memoryview], at: int) -> str:
    """Hash and write one chunk given as the body pieces it came in (in a worker thread: hashlib
    and ``pwrite`` let the event loop go on, and the pieces are never joined)."""
    h = hashlib.sha256()
    for piece in pieces:
        h.update(piece)
        flush.write(piece, at)
        at += len(piece)
    return h.hexdigest()


async def _receive_into(
    request: Request, flush: Writeback, offset: int, total: int, chunks: list[str], rel: str
) -> int:
    """Stream the body into ``flush``'s file from ``offset``, appending each ``CHUNK``'s sha256 to ``chunks``.

    The body's pieces are gathered up to one ``CHUNK``; a full chunk is hashed and written by a
    worker thread while the event loop gathers the next, so at most two chunks are held whatever
    the file's size. Returns the bytes the file holds after the last write.
    """
    pieces: list[memoryview] = []
    fill, at = 0, offset
    job: asyncio.Future[str] | None = None
    loop = asyncio.get_running_loop()
    try:
        async for data in request.stream():
            if at + fill + len(data) > total:
                raise ApiError(400, f"{rel}: the body is longer than size - offset = {total - offset} bytes")
            view = memoryview(data)
            while view:
                take = min(len(view), CHUNK - fill)
                pieces.append(view[:take])
                fill += take
                view = view[take:]
                if fill == CHUNK:
                    if job is not None:
                        chunks.append(await job)
                    job = loop.run_in_executor(None, _write_chunk, flush, pieces, at)
                    at += fill
                    pieces, fill = [], 0
    finally:
        if job is not None:
            chunks.append(await job)
    if fill:
        chunks.append(await run_in_threadpool(_write_chunk, flush, pieces, at))
        at += fill
    return at


async def _receive_raw(raw: Any, flush: Writeback, offset: int, total: int, chunks: list[str], rel: str) -> int:
    """:func:`_receive_into` with the body read straight from the socket (:mod:`labledger.server.raw_body`).

    A worker thread reads each ``CHUNK`` into one of two preallocated buffers while a second one
    hashes and writes the chunk before it (:func:`_read_chunks`): no copy in Python, no event-loop
    round per piece. A body that ends early leaves the whole chunks that came, written and
    hashed, like a disconnect on the other path.
    """
    if raw.length != total - offset:
        raise ApiError(400, f"{rel}: Content-Length is {raw.length} but size - offset = {total - offset} bytes")
    first, sock_fd = raw.take()
    try:
        return await run_in_threadpool(_read_chunks, sock_fd, first, flush, offset, total, chunks, raw.timeout)
    except BodyStalled:
        raise ApiError(408, f"the request body stalled for {raw.timeout:g} s; {rel} keeps its whole chunks") from None


#: Chunks received into one buffer, then hashed (one by one) and written together.
GROUP = 4
#: Groups being written while the next is received (each buffer is one group).
DEPTH = 3
#: Threads that hash the chunks received (the receiving thread only receives).
HASHERS = 1


def _read_chunks(
    sock_fd: int, first: bytes, flush: Writeback, offset: int, total: int, chunks: list[str], timeout: float
) -> int:
    """Receive ``[offset, total)`` from the socket, ``GROUP`` chunks at a time into one of
    ``DEPTH + 1`` page-aligned buffers. This thread only receives: each chunk is handed to a hashing
    thread as soon as it is in (``HASHERS``) and each full group to a writer thread (one write, to
    the disk directly where it can: :class:`Writeback`), and the next group is received into a free
    buffer (hashlib, ``pwrite`` and ``readv`` let go of the GIL). Hashing in this thread, while the
    bytes were in the CPU's cache, made the receive wait for it. A buffer is filled again only once
    its group is hashed and written, and the hashes are appended in the file's order. The whole
    chunks received before the body ended or stalled are kept. Returns the bytes the file holds."""
    import mmap
    import threading
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    size = GROUP * CHUNK
    views = [memoryview(mmap.mmap(-1, size)) for _ in range(DEPTH + 1)]  # freed with the last view
    at = offset
    head = memoryview(first)
    # oldest first; jobs[i] reads views[(turn - len(jobs) + i) % len(views)]
    jobs: deque[tuple[list[Future[str]], Future[None]]] = deque()
    turn = 0

    ready: deque[tuple[memoryview, int]] = deque()  # groups received and not yet taken by the writer
    ready_lock = threading.Lock()

    def write_ready() -> None:
        """Write every group received so far (one write while the disk keeps up, several at once
        once they wait: :meth:`Writeback.write_many`). Runs in the one writer thread, in order: when
        the job submitted with a group is done, that group is written."""
        with ready_lock:
            batch = list(ready)
            ready.clear()
        if batch:
            flush.write_many([view for view, _ in batch], batch[0][1])

    def done(job: tuple[list[Future[str]], Future[None]]) -> None:
        hashes, written = job
        written.result()
        chunks.extend(h.result() for h in hashes)

    writer = ThreadPoolExecutor(1, thread_name_prefix="labledger-sync-write")
    hasher = ThreadPoolExecutor(HASHERS, thread_name_prefix="labledger-sync-hash")
    try:
        ended = False
        while at < total and not ended:
            if len(jobs) == len(views):  # every buffer busy: wait for the oldest group
                done(jobs.popleft())
            view = views[turn]
            fill = 0
            hashes: list[Future[str]] = []
            try:
                while fill < size and at + fill < total:
                    want = min(CHUNK, total - at - fill)
                    take = min(len(head), want)
                    view[fill : fill + take] = head[:take]
                    head = head[take:]
                    if take < want:
                        take += read_exact(sock_fd, view[fill + take : fill + want], timeout)
                    if take < want:  # the client went away: a short chunk is not kept
                        ended = True
                        break
                    hashes.append(hasher.submit(sha256_hex, view[fill : fill + want]))
                    fill += want
            finally:  # also on BodyStalled: the whole chunks received are kept
                if fill:
                    with ready_lock:
                        ready.append((view[:fill], at))
                    jobs.append((hashes, writer.submit(write_ready)))
                    turn = (turn + 1) % len(views)
                    at += fill
    finally:
        try:
            while jobs:
                done(jobs.popleft())
        finally:
            writer.shutdown()
            hasher.shutdown()
    return at


async def get_file(request: Request) -> Response:
    """``GET /api/sync/runs/{run}/files?path=REL``: one synced file, streamed.

    With run files in object storage (``serve --artifacts s3://...``) it is read from there, chunk
    by chunk, each checked against its sha256 (a damaged chunk ends the response early, never
    passes as good bytes); otherwise from the server's run folder.
    """
    from starlette.responses import FileResponse, StreamingResponse

    from labledger.errors import StorageError

    ctx = request.app.state.ctx
    ctx.require_read(request)
    run_id = _run_id(request.path_params["run"])
    try:
        rel = check_run_path(request.query_params.get("path") or "")
    except RecordError as exc:
        raise ApiError(400, str(exc)) from None
    if ctx.objects is None:
        path = ctx.root / "runs" / run_id / rel
        if not path.is_file():
            raise ApiError(404, f"run {run_id} has no synced file {rel}")
        return FileResponse(path, media_type="application/octet-stream")
    pieces = read_file(ctx.objects, run_id, rel)
    try:
        first = await run_in_threadpool(next, pieces, b"")
    except StorageError as exc:
        raise ApiError(404 if "has no file" in str(exc) else 502, str(exc)) from None
    rest = pieces

    def body() -> Any:
        yield first
        yield from rest

    return StreamingResponse(body(), media_type="application/octet-stream")


async def put_index(request: Request) -> Response:
    """``POST /api/sync/runs/{run}/index``."""
    ctx = request.app.state.ctx
    ctx.require_write(request)
    origin, host = _origin(request)
    run_id = _run_id(request.path_params["run"])
    body = await _json_body(request)
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("tables"), dict)
        or not isinstance(body.get("digest"), str)
    ):
        raise ApiError(400, "the body must be {'digest': ..., 'tables': {...}}")
    run_dir = ctx.root / "runs" / run_id
    async with _lock(run_id):
        doc = await run_in_threadpool(_owned, run_dir, origin, host, create=False)
        try:
            # the worker thread's own connection: one made here is the event loop thread's, which
            # two index requests at once would share (a transaction within a transaction)
            await run_in_threadpool(lambda: replace_run_rows(ctx.ledger(), run_id, body["tables"]))
        except RecordError as exc:
            raise ApiError(400, str(exc)) from None
        if ctx.objects is not None:  # an ended run's files of the open dataset (#46), before the answer
            await run_in_threadpool(ctx.publish, run_id, body["tables"])
        doc["index"] = body["digest"]
        await run_in_threadpool(write_manifest, run_dir, doc)
    return ok({"run": run_id, "index": body["digest"]})
