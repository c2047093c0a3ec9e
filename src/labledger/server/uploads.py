"""``POST /upload?filename=NAME`` and ``GET``/``HEAD /uploads/NAME``: a folder of published files.

The rules (issue 7, seed 003's workflow made safe):

* A name is one path component of letters, digits, ``.``, ``-`` and ``_`` that does not start with
  ``.`` and has no ``..`` (checked on the decoded name, so ``%2e%2e%2f`` is ``../`` and refused).
* The body streams into a hidden temporary file in the uploads folder while its sha256 is
  computed; past ``max_upload`` bytes the upload stops with 413 and the temporary file is removed.
  It is fsynced and then linked (``os.link``: fails if the name exists) or, with ``overwrite``,
  renamed into place, so a name is either absent or complete. A client (or server) that dies
  mid-upload leaves only a hidden ``.upload-*.part`` file, removed when its process is gone.
* Each file has a sidecar ``.meta/NAME.json`` with its size, sha256, content type and upload
  time. A sidecar that does not match the file (a crash between rename and sidecar, a file changed
  behind the server's back) is rewritten when the server starts (:meth:`UploadStore.repair_sidecars`);
  a read never writes (#17): it hashes the file itself and keeps the result in memory, so the ETag
  is always the sha256 of the bytes served.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mimetypes
import os
import re
import secrets
import stat as stat_mod
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from labledger.errors import RecordError
from labledger.server.envelope import ApiError
from labledger.store.jsonl import fsync_dir, read_json, write_all, write_json

_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}$")
_CONTENT_TYPE = re.compile(
    r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(\s*;\s*[A-Za-z0-9_.+-]+=(\"[^\"\\]*\"|[A-Za-z0-9_.+-]+))*$"
)
TEMP_PREFIX = ".upload-"
#: Longest upload name: 255 bytes (the file system's limit) less the sidecar's ".json".
MAX_NAME_BYTES = 250
META_DIR = ".meta"
CHUNK = 1 << 20
#: Content types that say nothing about the file (curl --data-binary sends the first by default).
UNSPECIFIED_TYPES = ("application/x-www-form-urlencoded", "")


def check_filename(name: str | None) -> str:
    """The upload name if it is safe (see the module docstring); raises ``ApiError(400)``.

    >>> check_filename("AWDE_0617_report.md")
    'AWDE_0617_report.md'
    >>> check_filename("../etc/passwd")
    Traceback (most recent call last):
    ...
    labledger.server.envelope.ApiError: filename '../etc/passwd' must be one name of letters, digits, '.', '-', '_' (no '/', no '..', not starting with '.'; at most 250 characters)
    """
    if name is None or name == "":
        raise ApiError(400, "the query parameter 'filename' is required (POST /upload?filename=NAME)")
    # fullmatch: `$` alone would let a trailing newline through. The limit leaves room for the
    # sidecar `.meta/NAME.json` within the file system's 255 bytes, so it is checked before any write.
    if not _NAME.fullmatch(name) or ".." in name or len(name.encode()) > MAX_NAME_BYTES:
        raise ApiError(
            400,
            f"filename {name!r} must be one name of letters, digits, '.', '-', '_' (no '/', no "
            f"'..', not starting with '.'; at most {MAX_NAME_BYTES} characters)",
        )
    return name


def content_type_for(name: str, declared: str | None) -> str:
    """The content type to record: the declared one, else a guess from the name, else octet-stream."""
    declared = (declared or "").strip()
    if declared.split(";")[0].strip().lower() not in UNSPECIFIED_TYPES:
        if len(declared) > 200 or not _CONTENT_TYPE.match(declared):
            raise ApiError(400, f"Content-Type {declared[:80]!r} is not a valid media type")
        return declared
    guessed = mimetypes.guess_type(name)[0]
    if guessed is None and name.lower().endswith((".md", ".markdown")):
        guessed = "text/markdown"
    if guessed and guessed.startswith("text/"):
        guessed += "; charset=utf-8"
    return guessed or "application/octet-stream"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Stored:
    """An upload as served: its path, the open file's stat and its metadata."""

    path: Path
    size: int
    sha256: str
    content_type: str
    uploaded: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.path.name,
            "size": self.size,
            "sha256": self.sha256,
            "content_type": self.content_type,
            "uploaded": self.uploaded,
        }


class TempUpload:
    """A hidden temporary file receiving one upload (hash and size counted as bytes arrive)."""

    def __init__(self, store: UploadStore):
        self.store = store
        self.path = store.root / f"{TEMP_PREFIX}{os.getpid()}-{store.instance}-{secrets.token_hex(6)}.part"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.hash.update(data)
        self.size += len(data)
        write_all(self.fd, data)

    def finish(self) -> None:
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1

    def discard(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class UploadStore:
    """The uploads folder: temp files, atomic commits, sidecars, cleanup (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], *, max_upload: int):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / META_DIR).mkdir(exist_ok=True)
        self.max_upload = max_upload
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        #: Marks this server's temporary files (a restarted server may get the same pid, e.g. 1).
        self.instance = secrets.token_hex(4)
        #: sha256s computed on reads where the sidecar did not match: (ino, mtime_ns, size) -> meta.
        self._hashed: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
        self.cleaned = self.clean_temp()
        self.repaired = self.repair_sidecars()

    def repair_sidecars(self) -> list[str]:
        """Rewrite every sidecar that is missing or does not match its file (at start, never on a read)."""
        repaired = []
        for p in sorted(self.root.iterdir()):
            if p.name.startswith(".") or not _NAME.match(p.name):
                continue
            try:
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat_mod.S_ISREG(st.st_mode):
                    continue
                meta = self._read_meta(p.name)
                if not self._matches(meta, st):
                    meta = self._hash(fd, p, st, meta)
                    with self._lock(p.name):
                        self._write_meta(self._stored(p, meta, st), st)
                    repaired.append(p.name)
            finally:
                os.close(fd)
        return repaired

    def clean_temp(self) -> list[str]:
        """Remove temporary files whose process is gone (a server killed mid-upload)."""
        removed = []
        for p in self.root.glob(f"{TEMP_PREFIX}*.part"):
            parts = p.name[len(TEMP_PREFIX) :].split("-")
            pid = int(parts[0]) if parts[0].isdigit() else -1
            mine = pid == os.getpid() and len(parts) > 1 and parts[1] == self.instance
            try:
                if mine or (
                    pid > 0 and pid != os.getpid() and _pid_alive(pid) and time.time() - p.stat().st_mtime < 24 * 3600
                ):
                    continue  # this server, or another live one sharing the folder, is receiving it
                p.unlink()
                removed.append(p.name)
            except FileNotFoundError:
                pass
        return removed

    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = threading.Lock()
            return lock

    def path(self, name: str) -> Path:
        return self.root / check_filename(name)

    def _meta_path(self, name: str) -> Path:
        return self.root / META_DIR / f"{name}.json"

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    def begin(self) -> TempUpload:
        return TempUpload(self)

    def commit(self, temp: TempUpload, name: str, content_type: str, *, overwrite: bool) -> tuple[Stored, bool]:
        """Make ``temp`` visible as ``name`` (atomically); returns the stored file and whether it replaced one."""
        target = self.path(name)
        temp.finish()
        with self._lock(name):
            replaced = False
            try:
                if overwrite:
                    replaced = target.exists()
                    os.replace(temp.path, target)
                else:
                    try:
                        os.link(temp.path, target)
                    except FileExistsError:
                        raise ApiError(
                            409, f"'{name}' already exists; add ?overwrite=1 (labledger push --overwrite) to replace it"
                        ) from None
                    except OSError as exc:  # a file system without hard links
                        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                            raise
                        if target.exists():
                            raise ApiError(
                                409,
                                f"'{name}' already exists; add ?overwrite=1 (labledger push --overwrite) to replace it",
                            ) from None
                        os.replace(temp.path, target)
                    else:
                        os.unlink(temp.path)
                st = target.stat()
                stored = Stored(
                    path=target,
                    size=st.st_size,
                    sha256=temp.hash.hexdigest(),
                    content_type=content_type,
                    uploaded=time.time(),
                )
                self._write_meta(stored, st)
                fsync_dir(self.root, strict=True)
            finally:
                temp.discard()
        return stored, replaced

    def _write_meta(self, stored: Stored, st: os.stat_result) -> None:
        write_json(
            self._meta_path(stored.path.name), {**stored.to_dict(), "ino": st.st_ino, "mtime_ns": st.st_mtime_ns}
        )

    def open(self, name: str) -> tuple[int, Stored]:
        """An open file descriptor of upload ``name`` and its metadata, consistent with each other.

        Raises ``ApiError(404)`` when there is no such upload.
        """
        path = self.path(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ApiError(404, f"no upload named '{name}'") from None
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise ApiError(404, f"no upload named '{name}'")
            meta = self._read_meta(name)
            if not self._matches(meta, st):
                key = (st.st_ino, st.st_mtime_ns, st.st_size)
                known = self._hashed.get(name)
                if known is not None and known[0] == key:
                    meta = known[1]
                else:
                    meta = self._hash(fd, path, st, meta)
                    self._hashed[name] = (key, meta)
            stored = self._stored(path, meta, st)
        except BaseException:
            os.close(fd)
            raise
        return fd, stored

    @staticmethod
    def _matches(meta: dict[str, Any] | None, st: os.stat_result) -> TypeGuard[dict[str, Any]]:
        return meta is not None and (meta.get("ino"), meta.get("mtime_ns"), meta.get("size")) == (
            st.st_ino,
            st.st_mtime_ns,
            st.st_size,
        )

    @staticmethod
    def _stored(path: Path, meta: dict[str, Any], st: os.stat_result) -> Stored:
        return Stored(
            path=path,
            size=st.st_size,
            sha256=meta["sha256"],
            content_type=meta.get("content_type") or content_type_for(path.name, None),
            uploaded=meta.get("uploaded") or st.st_mtime,
        )

    def _read_meta(self, name: str) -> dict[str, Any] | None:
        try:
            meta = read_json(self._meta_path(name))
        except (FileNotFoundError, RecordError):
            return None
        return meta if isinstance(meta, dict) and isinstance(meta.get("sha256"), str) else None

    @staticmethod
    def _hash(fd: int, path: Path, st: os.stat_result, old: dict[str, Any] | None) -> dict[str, Any]:
        """The metadata of the file open as ``fd`` (its sha256 computed), keeping the old content type."""
        h = hashlib.sha256()
        offset = 0
        while chunk := os.pread(fd, CHUNK, offset):
            h.update(chunk)
            offset += len(chunk)
        ctype = (old or {}).get("content_type") or content_type_for(path.name, None)
        stored = Stored(path=path, size=st.st_size, sha256=h.hexdigest(), content_type=ctype, uploaded=st.st_mtime)
        return {**stored.to_dict(), "ino": st.st_ino, "mtime_ns": st.st_mtime_ns}

    def list(self) -> list[dict[str, Any]]:
        """Every upload (name order) with its metadata."""
        out = []
        for p in sorted(self.root.iterdir()):
            if p.name.startswith(".") or not p.is_file() or not _NAME.match(p.name):
                continue
            try:
                fd, stored = self.open(p.name)
            except ApiError:
                continue
            os.close(fd)
            out.append(stored.to_dict())
        return out


# -- HTTP handlers -------------------------------------------------------------------------------
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
UPLOAD_CSP = "default-src 'none'; sandbox"


def _flag(request, name: str) -> bool:
    raw = (request.query_params.get(name) or "").lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ApiError(400, f"query parameter '{name}' must be 1 or 0; got {raw[:20]!r}")


async def upload(request):
    """``POST /upload?filename=NAME[&overwrite=1]`` with the file as the body (token required)."""
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect

    from labledger.server.envelope import ok

    ctx = request.app.state.ctx
    store: UploadStore = request.app.state.uploads
    ctx.require_write(request)
    name = check_filename(request.query_params.get("filename"))
    overwrite = _flag(request, "overwrite")
    ctype = content_type_for(name, request.headers.get("content-type"))
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "Content-Length must be a number of bytes")
        if int(declared) > store.max_upload:
            raise ApiError(413, f"the file is {int(declared)} bytes; this server takes at most {store.max_upload}")
        if int(declared) == 0:
            raise ApiError(400, "the body is empty: send the file's bytes as the request body")
    if not overwrite and store.exists(name):
        raise ApiError(409, f"'{name}' already exists; add ?overwrite=1 (labledger push --overwrite) to replace it")
    temp = store.begin()
    try:
        async for chunk in request.stream():
            if temp.size + len(chunk) > store.max_upload:
                raise ApiError(413, f"the file passed {store.max_upload} bytes, the most this server takes")
            if chunk:
                temp.write(chunk)
        if temp.size == 0:
            raise ApiError(400, "the body is empty: send the file's bytes as the request body")
        stored, replaced = await run_in_threadpool(lambda: store.commit(temp, name, ctype, overwrite=overwrite))
    except ClientDisconnect:
        temp.discard()
        raise ApiError(400, "the client disconnected before the file was complete; nothing was stored") from None
    except BaseException:
        temp.discard()
        raise
    url = f"/uploads/{name}"
    return ok(
        {**stored.to_dict(), "url": url, "replaced": replaced},
        status=200 if replaced else 201,
        headers={"Location": url, "ETag": f'"{stored.sha256}"'},
    )


def _etag_matches(header: str | None, sha: str) -> bool:
    if not header:
        return False
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or any(t.removeprefix("W/").strip('"') == sha for t in tags)


async def get_upload(request):
    """``GET``/``HEAD /uploads/NAME``: the bytes, with Content-Length, Content-Type and ETag = sha256."""
    from email.utils import formatdate

    import anyio
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response, StreamingResponse

    ctx = request.app.state.ctx
    store: UploadStore = request.app.state.uploads
    ctx.require_read(request)
    name = check_filename(request.path_params["name"])
    fd, stored = await run_in_threadpool(store.open, name)
    headers = {
        "ETag": f'"{stored.sha256}"',
        "X-Content-SHA256": stored.sha256,
        "Content-Length": str(stored.size),
        "Last-Modified": formatdate(stored.uploaded, usegmt=True),
        "Cache-Control": "no-cache",
        "Accept-Ranges": "none",
        "Content-Security-Policy": UPLOAD_CSP,
    }
    not_modified = request.method != "HEAD" and _etag_matches(request.headers.get("if-none-match"), stored.sha256)
    if request.method == "HEAD" or not_modified:
        os.close(fd)
        if not_modified:
            headers.pop("Content-Length")
        response = Response(status_code=304 if not_modified else 200, headers=headers, media_type=None)
        response.headers["content-type"] = stored.content_type
        return response

    f = os.fdopen(fd, "rb", buffering=0)  # closed by the generator, or by the GC if it never runs

    async def body():
        offset = 0
        try:
            while offset < stored.size:
                chunk = await anyio.to_thread.run_sync(os.pread, f.fileno(), min(CHUNK, stored.size - offset), offset)
                if not chunk:
                    break
                offset += len(chunk)
                yield chunk
        finally:
            f.close()

    return StreamingResponse(body(), headers=headers, media_type=stored.content_type)


async def list_uploads(request):
    """``GET /api/uploads``: every upload with its size, sha256 and content type."""
    from starlette.concurrency import run_in_threadpool

    from labledger.server.envelope import ok

    request.app.state.ctx.require_read(request)
    store: UploadStore = request.app.state.uploads
    return ok({"uploads": await run_in_threadpool(store.list)})
