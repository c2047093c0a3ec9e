"""labledger's HTTP client: :func:`connect` (the one way labledger opens a connection to a server,
``http.client`` of the standard library: no third-party client to import, no certificate store
loaded for plain http), and ``push_file``.

``push_file`` uploads one file to a labledger server and checks the sha256 it stored: the file is
streamed (1 MiB at a time) with its Content-Length, hashed on the way, and the server's answer must
name the same sha256 and size; anything else raises :class:`~labledger.errors.PushError` (the
server's envelope message included).
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from labledger.errors import PushError

CHUNK = 1 << 20


def connect(url: str, timeout: float) -> Any:
    """A new ``http.client`` connection to the server of ``url`` (http or https): 10 s at most to
    connect, then ``timeout`` seconds for each read and write."""
    import http.client

    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = kind(parts.hostname or "", parts.port, timeout=min(10.0, timeout))
    conn.connect()
    conn.sock.settimeout(timeout)
    return conn


def upload_url(to: str, name: str, *, overwrite: bool = False) -> str:
    """The upload URL for a server base URL (or a URL that already ends in ``/upload``).

    >>> upload_url("http://127.0.0.1:8765", "report.md")
    'http://127.0.0.1:8765/upload?filename=report.md'
    >>> upload_url("https://lab.example/workspace/upload", "a b.md", overwrite=True)
    'https://lab.example/workspace/upload?filename=a%20b.md&overwrite=1'
    """
    parts = urlsplit(to)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PushError(f"--to must be an http(s) URL of a labledger server; got {to!r}")
    base = to.split("?", 1)[0].rstrip("/")
    if not base.endswith("/upload"):
        base += "/upload"
    return f"{base}?filename={quote(name, safe='')}" + ("&overwrite=1" if overwrite else "")


def _guess_type(name: str) -> str:
    if name.lower().endswith((".md", ".markdown")):
        return "text/markdown; charset=utf-8"
    guessed = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return guessed + ("; charset=utf-8" if guessed.startswith("text/") else "")


def push_file(
    path: str | os.PathLike[str],
    to: str,
    *,
    token: str | None = None,
    name: str | None = None,
    overwrite: bool = False,
    content_type: str | None = None,
    timeout: float = 300.0,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Upload ``path`` to the server at ``to``; return the server's record with ``verified: True``.

    ``on_progress(sent, total)`` is called as bytes go out. Raises :class:`PushError` when the
    server refuses the file (its message), the connection fails, or the stored sha256 or size
    differs from the file's.

    >>> push_file("report.md", "http://127.0.0.1:8765", token="...")   # doctest: +SKIP
    {'ok': True, 'name': 'report.md', 'size': 1234, 'sha256': '...', 'verified': True, ...}
    """
    import http.client

    src = Path(path)
    if not src.is_file():
        raise PushError(f"{src} does not exist or is not a file")
    name = name or src.name
    total = src.stat().st_size
    url = upload_url(to, name, overwrite=overwrite)
    digest = hashlib.sha256()
    headers = {"Content-Type": content_type or _guess_type(name), "Content-Length": str(total)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    parts = urlsplit(url)
    conn: Any = None
    try:
        conn = connect(url, timeout)
        conn.putrequest("POST", f"{parts.path or '/'}?{parts.query}", skip_accept_encoding=True)
        for key, value in headers.items():
            conn.putheader(key, value)
        conn.endheaders()
        sent = 0
        with open(src, "rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
                conn.send(chunk)
                sent += len(chunk)
                if on_progress is not None:
                    on_progress(sent, total)
        response = conn.getresponse()
        status, body = response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise PushError(f"upload of {src.name} to {url.split('?')[0]} failed: {type(exc).__name__}: {exc}") from None
    finally:
        if conn is not None:
            conn.close()
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if status not in (200, 201) or not isinstance(doc, dict) or not doc.get("ok"):
        message = (
            doc.get("error") if isinstance(doc, dict) and doc.get("error") else body[:200].decode(errors="replace")
        )
        if status == 409 and not overwrite:
            message = f"'{name}' already exists on the server; pass --overwrite to replace it"
        raise PushError(f"the server refused {name} ({status}): {message}")
    local = digest.hexdigest()
    if doc.get("sha256") != local or doc.get("size") != total:
        raise PushError(
            f"{name}: the server stored sha256 {doc.get('sha256')} ({doc.get('size')} bytes) but the "
            f"file is {local} ({total} bytes); it changed while uploading or was damaged on the way"
        )
    return {**doc, "verified": True, "local_sha256": local, "server": to}
