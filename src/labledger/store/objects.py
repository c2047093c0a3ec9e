"""Run files on S3-compatible object storage (#18): immutable chunk objects and a manifest per run.

``labledger sync --to s3://bucket/prefix`` copies runs here without a server. Object stores cannot
append, so a file is stored as its ``CHUNK``-byte chunks, each an immutable object named by its
sha256 (``<prefix>/chunks/<sha256>``, uploaded with S3's own ``ChecksumSHA256`` so the store checks
it on arrival), and a run is ``<prefix>/runs/<id>/manifest.json``: per file its size and chunk
hashes, plus the run's index rows. A live record file's full chunks never change, so each sync
uploads only its new chunks and its short last one; readers stitch the chunks back in order and
check each one's sha256 as they stream (:func:`read_file`), never holding a file in memory.

The short last chunk of a record file (its *tail*) is superseded as soon as the file grows, so it
is not shared: it is stored under the run, ``<prefix>/runs/<id>/tails/<sha256>``, named by the
file's ``"tail"`` in the manifest, and deleted once a manifest that no longer names it is written
(a chunk under ``chunks/`` may be named by any run's manifest, and is never deleted). A reader
that finds a tail gone (the file grew while it read) reads the newer manifest and goes on.

The client is boto3, configured as every AWS tool is: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``
(or ``~/.aws/credentials``, a profile, an instance role), ``AWS_DEFAULT_REGION`` and
``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``) for MinIO, Ceph or any S3-compatible store.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from labledger.errors import LedgerError, StorageError

CHUNK = 1 << 20


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> ``("bucket", "prefix")`` (prefix without slashes at its ends).

    >>> parse_s3_url("s3://lab-runs/team/a")
    ('lab-runs', 'team/a')
    >>> parse_s3_url("s3://lab-runs")
    ('lab-runs', '')
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise LedgerError(f"an object store must be given as s3://BUCKET[/PREFIX]; got {url!r}")
    return parts.netloc, parts.path.strip("/")


@dataclass
class ObjectStore:
    """One bucket and prefix, through boto3 (see the module docstring for the configuration)."""

    url: str
    client: Any = None

    def __post_init__(self) -> None:
        self.bucket, self.prefix = parse_s3_url(self.url)
        if self.client is None:
            try:
                self.client = s3_client_from_env()
            except ImportError:
                raise LedgerError('s3:// needs boto3: pip install "labledger[s3]"') from None

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def fail(self, what: str, exc: Exception) -> StorageError:
        """The error to raise when ``what`` failed with ``exc`` (names the store)."""
        return StorageError(f"{self.url}: {what} failed ({type(exc).__name__}: {exc})")

    def has(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self.fail(f"HEAD {key}", exc) from None
        return True

    def put_chunk(self, data: bytes, sha: str) -> None:
        """Upload one chunk as ``chunks/<sha256>`` (S3 checks ``ChecksumSHA256`` on arrival)."""
        self.put_bytes(self.key("chunks", sha), data, sha=sha, what=f"upload of chunk {sha[:12]}")

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            data: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            return data
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self.fail(f"GET {key}", exc) from None
        except BotoCoreError as exc:
            raise self.fail(f"GET {key}", exc) from None

    def put_json(self, key: str, doc: Any) -> str:
        """Upload ``doc`` as JSON (see :meth:`put_bytes`); its ETag."""
        return self.put_bytes(key, orjson.dumps(doc))

    def put_bytes(self, key: str, data: bytes, *, sha: str | None = None, what: str | None = None) -> str:
        """Upload ``data`` as the object ``key`` and return its ETag; S3 checks its ``ChecksumSHA256``
        on arrival (``sha``: the data's sha256 in hex when known). ``what`` names the upload in the error."""
        from botocore.exceptions import BotoCoreError, ClientError

        digest = bytes.fromhex(sha) if sha is not None else hashlib.sha256(data).digest()
        checksum = base64.b64encode(digest).decode()
        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ChecksumSHA256=checksum)
        except (BotoCoreError, ClientError) as exc:
            raise self.fail(what or f"upload of {key}", exc) from None
        return str(answer.get("ETag", ""))

    def manifest_etags(self) -> dict[str, str]:
        """The ETag of every run's ``manifest.json`` in the store, by run id (one listing of ``runs/``)."""
        from botocore.exceptions import BotoCoreError, ClientError

        prefix = self.key("runs") + "/"
        out: dict[str, str] = {}
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for obj in page.get("Contents", []):
                    run_id, _, name = obj["Key"][len(prefix) :].partition("/")
                    if name == "manifest.json":
                        out[run_id] = str(obj.get("ETag", ""))
        except (BotoCoreError, ClientError) as exc:
            raise self.fail(f"listing {prefix}", exc) from None
        return out

    def delete_keys(self, keys: list[str]) -> None:
        """Delete the objects ``keys`` (1,000 a request); a key that is not there is no error."""
        from botocore.exceptions import BotoCoreError, ClientError

        for i in range(0, len(keys), 1000):
            part = [{"Key": k} for k in keys[i : i + 1000]]
            try:
                answer = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": part, "Quiet": True})
            except (BotoCoreError, ClientError) as exc:
                raise self.fail(f"deleting {len(part)} object(s)", exc) from None
            errors = answer.get("Errors") or []
            if errors:
                e = errors[0]
                raise StorageError(f"{self.url}: deleting {e.get('Key')} failed ({e.get('Code')}: {e.get('Message')})")

    def put_tail(self, run_id: str, data: bytes, sha: str) -> str:
        """Upload the short last chunk of a record file under the run; return its key."""
        key = self.key("runs", run_id, "tails", sha)
        self.put_bytes(key, data, sha=sha, what=f"upload of the last chunk {sha[:12]} of run {run_id}")
        return key

    def drop_tails(self, keys: set[str]) -> None:
        """Delete superseded tails (after the manifest that no longer names them was written).

        Best effort: a tail that cannot be deleted now is only unused bytes, never a wrong read.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        for key in sorted(keys):  # one that fails is left behind: named by no manifest, read by no one
            with contextlib.suppress(BotoCoreError, ClientError):
                self.client.delete_object(Bucket=self.bucket, Key=key)

    def manifest(self, run_id: str) -> dict[str, Any] | None:
        data = self.get(self.key("runs", run_id, "manifest.json"))
        return None if data is None else orjson.loads(data)


def read_file(store: ObjectStore, run_id: str, rel: str) -> Iterator[bytes]:
    """The bytes of one stored run file, chunk by chunk in order, each checked against its sha256.

    A file stored as one object (a large one, uploaded in parts) is streamed from it in
    ``CHUNK``-byte pieces, each checked against the chunk hashes recorded for it. Raises
    :class:`StorageError` naming the file and chunk when a chunk is missing or damaged.
    """
    doc = store.manifest(run_id)
    if doc is None or rel not in doc.get("files", {}):
        raise StorageError(f"{store.url}: run {run_id} has no file {rel!r}")
    entry = doc["files"][rel]
    if entry.get("object"):
        yield from _read_object(store, run_id, rel, entry)
        return
    i = 0
    while i < len(entry["chunks"]):
        sha = entry["chunks"][i]
        tail = entry.get("tail") if i == len(entry["chunks"]) - 1 else None
        data = store.get(tail or store.key("chunks", sha))
        if data is None and tail:  # superseded while this was read: the newer manifest goes on
            newer = (store.manifest(run_id) or {}).get("files", {}).get(rel)
            if newer and newer.get("tail") != tail and newer["chunks"][:i] == entry["chunks"][:i]:
                entry = newer
                continue
        if data is None or hashlib.sha256(data).hexdigest() != sha:
            state = "missing" if data is None else "damaged (its sha256 differs)"
            raise StorageError(f"{store.url}: run {run_id} file {rel}: chunk {i} ({sha[:12]}) is {state}")
        yield data
        i += 1


def _read_object(store: ObjectStore, run_id: str, rel: str, entry: dict[str, Any]) -> Iterator[bytes]:
    from botocore.exceptions import BotoCoreError, ClientError

    key = entry["object"]
    try:
        body = store.client.get_object(Bucket=store.bucket, Key=key)["Body"]
    except (BotoCoreError, ClientError) as exc:
        raise StorageError(f"{store.url}: run {run_id} file {rel}: object {key} cannot be read ({exc})") from None
    chunks: list[str] = entry["chunks"]
    buf = bytearray()
    i = 0

    def check(data: bytes) -> bytes:
        if i >= len(chunks) or hashlib.sha256(data).hexdigest() != chunks[i]:
            raise StorageError(f"{store.url}: run {run_id} file {rel}: chunk {i} is damaged (its sha256 differs)")
        return data

    try:
        for piece in body.iter_chunks(CHUNK):
            buf += piece
            while len(buf) >= CHUNK:
                data = check(bytes(buf[:CHUNK]))
                del buf[:CHUNK]
                i += 1
                yield data
        if buf:
            data = check(bytes(buf))
            i += 1
            yield data
    finally:
        body.close()
    if i != len(chunks):
        raise StorageError(f"{store.url}: run {run_id} file {rel}: the object holds {i} of {len(chunks)} chunks")


def restore_run(store: ObjectStore, run_id: str, dest: Path) -> list[str]:
    """Write every file of a stored run under ``dest`` (streamed and checked); return their paths."""
    from labledger.store.manifest import check_run_path

    doc = store.manifest(run_id)
    if doc is None:
        raise StorageError(f"{store.url}: no run {run_id}")
    out = []
    for rel in sorted(doc["files"]):
        target = dest / check_run_path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as f:
            for data in read_file(store, run_id, rel):
                f.write(data)
        out.append(rel)
    return out


@dataclass
class ObjectSyncReport:
    """What :func:`sync_to_objects` did."""

    runs: int = 0
    runs_sent: int = 0
    chunks_sent: int = 0
    bytes_sent: int = 0
    #: Ended runs whose files of the open dataset (``dataset/``, #46) were written, and their bytes.
    datasets_written: int = 0
    dataset_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "runs_sent": self.runs_sent,
            "chunks_sent": self.chunks_sent,
            "bytes_sent": self.bytes_sent,
            "files_sent": self.chunks_sent,
            "datasets_written": self.datasets_written,
            "dataset_bytes": self.dataset_bytes,
        }


#: Runs that :func:`sync_to_objects` syncs at once. An object store answers each request after a
#: network round trip, so the runs' requests overlap; the ledger is read by one thread at a time.
SYNC_THREADS = 8


def sync_to_objects(ledger: Any, url: str, *, runs: list[str] | None = None, client: Any = None) -> ObjectSyncReport:
    """Copy runs of a local ledger to ``s3://bucket/prefix``: new chunks, then each run's manifest.

    An ended run also gets its files of the open dataset (``<prefix>/dataset/``, see
    :mod:`labledger.store.dataset`), written again only when its index rows or the sources of
    those files changed (the manifest keeps a digest of them, ``"dataset"``). Incremental (a chunk
    the run's manifest already names is not sent), idempotent, and safe while a run is written
    (record files up to their last complete line). The manifest is written last, so a reader never
    sees a file whose chunks are not all there. Up to :data:`SYNC_THREADS` runs are synced at once;
    a run that fails raises its error after the runs under way have finished, and no other run is
    started (every run synced stays synced: the next sync sends the rest).

    A run is skipped without reading anything of it from the store when its index rows and its
    files' ``stat`` are what they were at its last sync from this ledger and its manifest in the
    store is still the one written or read then (the ETags of one listing of ``runs/``; what was
    synced is kept in ``<ledger>/.sync/objects-<digest of url>.json``, a cache: lost, every run
    is compared again).

    >>> sync_to_objects(".labledger", "s3://lab-runs/team")   # doctest: +SKIP
    ObjectSyncReport(runs=3, runs_sent=1, chunks_sent=4, bytes_sent=2621440)
    """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from labledger.store.ledger import Ledger
    from labledger.store.manifest import index_rows, run_file_stats, run_signature

    store = ObjectStore(url, client=client)
    book = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    report = ObjectSyncReport()
    lock = threading.Lock()
    try:
        infos = book.runs()
        if runs:
            wanted = {book.resolve(r) for r in runs}
            infos = [i for i in infos if i.id in wanted]
        report.runs = len(infos)
        cache = _SyncedRuns(book.root / ".sync" / f"objects-{hashlib.sha256(store.url.encode()).hexdigest()[:16]}.json")
        etags = store.manifest_etags() if cache.done else {}
        pool = ThreadPoolExecutor(SYNC_THREADS)
        try:
            jobs = []
            for info in infos:
                index = index_rows(book, info.id)
                found = run_file_stats(book.run_dir(info.id))
                signature = run_signature(hashlib.sha256(orjson.dumps(index)).hexdigest(), found)
                if cache.done.get(info.id) == [signature, etags.get(info.id)]:
                    continue
                jobs.append((info.id, signature, pool.submit(_sync_run, store, book, lock, info, index)))
            for run_id, signature, job in jobs:
                part, etag = job.result()
                cache.done[run_id] = [signature, etag or etags.get(run_id)]
                report.runs_sent += part.runs_sent
                report.chunks_sent += part.chunks_sent
                report.bytes_sent += part.bytes_sent
                report.datasets_written += part.datasets_written
                report.dataset_bytes += part.dataset_bytes
        finally:  # after an error: the runs not started are not started, those under way finish
            pool.shutdown(cancel_futures=True)
            cache.save()
    finally:
        if not isinstance(ledger, Ledger):
            book.close()
    return report


class _SyncedRuns:
    """What :func:`sync_to_objects` synced from this ledger: per run, the signature of its index
    rows and files, and the ETag of its manifest in the store then. Only a cache: one that cannot
    be read is empty, and one that cannot be written is left as it was (the next sync compares
    every run with the store)."""

    def __init__(self, path: Path) -> None:
        from labledger.store.jsonl import read_json

        self.path = path
        try:
            doc = read_json(path)
        except (OSError, LedgerError):
            doc = None
        self.done: dict[str, list[Any]] = (
            doc["done"] if isinstance(doc, dict) and isinstance(doc.get("done"), dict) else {}
        )

    def save(self) -> None:
        from labledger.store.jsonl import write_json

        with contextlib.suppress(OSError, LedgerError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json(self.path, {"done": self.done}, fsync=False)


def _sync_run(store: ObjectStore, book: Any, lock: Any, info: Any, index: Any) -> tuple[ObjectSyncReport, str | None]:
    """One run of :func:`sync_to_objects` (``index``: its index rows; ``lock`` held while ``book``
    is read); what was sent, and the ETag of the manifest it wrote (``None``: it was unchanged)."""
    from labledger.store.dataset import StoreSink, dataset_files, dataset_stamp, source_files
    from labledger.store.manifest import APPEND_ONLY, complete_size, run_files

    report = ObjectSyncReport()
    run_dir = book.run_dir(info.id)
    old = store.manifest(info.id) or {"files": {}}
    known = shared_chunks(old)
    old_tails = tails(old)
    files: dict[str, Any] = {}
    for rel in run_files(run_dir):
        path = run_dir / rel
        size = path.stat().st_size
        if rel.endswith(".jsonl"):
            size = complete_size(path, size)
        chunks: list[Any] = []
        entry: dict[str, Any] = {"size": size, "chunks": chunks}
        with open(path, "rb") as f:
            left = size
            while left > 0:
                data = f.read(min(CHUNK, left))
                if not data:
                    break
                left -= len(data)
                sha = hashlib.sha256(data).hexdigest()
                chunks.append(sha)
                if rel in APPEND_ONLY and len(data) < CHUNK:  # a tail, superseded when the file grows
                    entry["tail"] = store.key("runs", info.id, "tails", sha)
                    if entry["tail"] in old_tails:
                        continue
                    store.put_tail(info.id, data, sha)
                elif sha in known:
                    continue
                else:
                    store.put_chunk(data, sha)
                    known.add(sha)
                report.chunks_sent += 1
                report.bytes_sent += len(data)
        files[rel] = entry
    doc: dict[str, Any] = {"run": info.id, "files": files, "index": index}
    if info.status != "running":  # the run's files of the open dataset (#46), when they changed
        made = dataset_stamp(index, {rel: files.get(rel, {}).get("chunks") for rel in source_files(run_dir)})
        written = old.get("dataset_files")
        if old.get("dataset") != made:
            with lock:
                parts = dataset_files(book, info.id, index)
            if parts:
                StoreSink(store).replace_run(info.id, parts, written)
            written = sorted(parts)
            report.dataset_bytes += sum(len(b) for b in parts.values())
            report.datasets_written += 1
        doc["dataset"], doc["dataset_files"] = made, written
    etag = None
    if doc != {k: old.get(k) for k in doc}:
        etag = store.put_json(store.key("runs", info.id, "manifest.json"), doc)
        store.drop_tails(old_tails - tails(doc))
        report.runs_sent += 1
    return report, etag


def shared_chunks(doc: dict[str, Any]) -> set[str]:
    """The chunks under ``chunks/`` that a run's manifest names (not its tails, not whole objects).

    >>> sorted(shared_chunks({"files": {"a": {"chunks": ["x", "y"], "tail": "runs/r/tails/y"}, "b": {"chunks": ["z"]}}}))
    ['x', 'z']
    """
    out: set[str] = set()
    for f in doc["files"].values():
        if not f.get("object"):
            out.update(f["chunks"][:-1] if f.get("tail") else f["chunks"])
    return out


def tails(doc: dict[str, Any]) -> set[str]:
    """The keys of the tails a run's manifest names.

    >>> tails({"files": {"a": {"chunks": ["x", "y"], "tail": "runs/r/tails/y"}, "b": {"chunks": ["z"]}}})
    {'runs/r/tails/y'}
    """
    return {f["tail"] for f in doc["files"].values() if f.get("tail")}


#: Files at least this large (and not record files) are stored as one object, uploaded in parts.
MULTIPART = 16 * CHUNK


def ship_file(
    store: ObjectStore,
    run_id: str,
    rel: str,
    path: Path,
    entry: dict[str, Any],
    *,
    whole: bool,
    owner: dict[str, Any] | None = None,
) -> None:
    """Copy one file of a server's run folder to the store, given its manifest ``entry`` (size and
    chunk hashes, already computed as it arrived), then record it in the run's manifest there.

    Record files (and small files) go as the chunks the store lacks, each an immutable object named
    by its sha256; with ``whole`` (a large file that is complete) the file goes as one object,
    uploaded in 8 MiB parts by boto3's transfer manager (never read whole into memory) and named by
    its digest. The run's manifest is written after the bytes, so a reader never sees a file whose
    chunks are not all stored. ``owner`` (``origin`` and ``host`` of the ledger that synced the
    run) goes into that manifest, so a server whose spool lost the run can take it back from the
    store still owned by the same ledger (:func:`stored_runs`).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    from labledger.store.manifest import digest

    doc = store.manifest(run_id) or {"run": run_id, "files": {}}
    for k in ("origin", "host"):
        if owner and owner.get(k) and not doc.get(k):
            doc[k] = owner[k]
    old = doc["files"].get(rel) or {}
    chunks: list[str] = list(entry["chunks"])
    record: dict[str, Any] = {"size": entry["size"], "chunks": chunks}
    short = bool(chunks) and entry["size"] % CHUNK != 0
    if not whole and short:  # a record file's short last chunk: stored under the run (see the module docstring)
        record["tail"] = store.key("runs", run_id, "tails", chunks[-1])
    if old == record or (old.get("object") and old.get("chunks") == chunks):
        return
    before = tails(doc)
    if whole and entry["size"] >= MULTIPART:
        from boto3.s3.transfer import TransferConfig

        key = store.key("objects", digest(chunks))
        config = TransferConfig(multipart_threshold=8 * CHUNK, multipart_chunksize=8 * CHUNK, max_concurrency=2)
        try:
            with open(path, "rb") as f:
                store.client.upload_fileobj(
                    f, store.bucket, key, Config=config, ExtraArgs={"ChecksumAlgorithm": "SHA256"}
                )
        except (BotoCoreError, ClientError, OSError) as exc:
            raise store.fail(f"upload of {rel} of run {run_id}", exc) from None
        record["object"] = key
    else:
        known = shared_chunks(doc)
        with open(path, "rb") as f:
            for i, sha in enumerate(chunks):
                tail = record.get("tail") if i == len(chunks) - 1 else None
                if (tail in before) if tail else (sha in known):
                    continue
                f.seek(i * CHUNK)
                data = f.read(min(CHUNK, entry["size"] - i * CHUNK))
                if hashlib.sha256(data).hexdigest() != sha:
                    raise StorageError(f"{path}: chunk {i} changed since it was received; not shipped")
                if tail:
                    store.put_tail(run_id, data, sha)
                else:
                    store.put_chunk(data, sha)
                    known.add(sha)
    doc["files"][rel] = record
    store.put_json(store.key("runs", run_id, "manifest.json"), doc)
    store.drop_tails(before - tails(doc))


def drop_file(store: ObjectStore, run_id: str, rel: str) -> None:
    """Take ``rel`` out of a run's manifest in the store (a record file superseded by its compacted
    ``.zst``), then delete the tail it alone named. Chunks under ``chunks/`` stay: any run may name them.

    >>> drop_file(ObjectStore("s3://lab-runs/team"), "20261201-101010-abc", "metrics.jsonl")  # doctest: +SKIP
    """
    doc = store.manifest(run_id)
    if not doc or rel not in doc["files"]:
        return
    before = tails(doc)
    del doc["files"][rel]
    store.put_json(store.key("runs", run_id, "manifest.json"), doc)
    store.drop_tails(before - tails(doc))


def stored_runs(store: ObjectStore) -> list[str]:
    """The ids of the runs that have a manifest in the store (``runs/<id>/manifest.json``).

    >>> stored_runs(ObjectStore("s3://lab-runs/team"))   # doctest: +SKIP
    ['20260101-120000-0123456789ab']
    """
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = store.key("runs") + "/"
    out: list[str] = []
    try:
        pages = store.client.get_paginator("list_objects_v2").paginate(
            Bucket=store.bucket, Prefix=prefix, Delimiter="/"
        )
        for page in pages:
            out += [p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
    except (BotoCoreError, ClientError) as exc:
        raise store.fail(f"listing {prefix}", exc) from None
    return sorted(out)


def s3_client_from_env() -> Any:
    """A boto3 S3 client from the standard AWS variables (``AWS_ENDPOINT_URL`` included)."""
    import boto3

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return boto3.client("s3", endpoint_url=endpoint) if endpoint else boto3.client("s3")
