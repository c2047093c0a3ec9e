"""The static site's pages, served live: ``/`` is the catalog, ``/data/...js`` come from the ledger.

The server keeps a site of its own (in a temporary folder, or ``site_cache``) and refreshes it on
its own timer, never on a request (#17): a background thread looks at the ledger every
``min_interval`` seconds (sooner after a write through the API) and, when it changed (a run started, finished or logged, the index was
written) or at least every ``full_interval`` seconds, rebuilds with
:func:`labledger.site.build_site`. It builds into the folder that is *not* being served (two
generations, ``a/`` and ``b/``, each updated incrementally), and switches to it only once the build
is complete, so a page is always served from the last complete build: a build in progress, or one
that fails (its error is kept in :attr:`LiveSite.last_error`), changes nothing a reader sees. Only
one build runs at a time, and the thread waits at least as long as the last build took before the
next one, so the builder takes at most half of one core however large the ledger. Before the
first build has finished, a page waits for it (up to :data:`FIRST_BUILD_WAIT` seconds, then 503).
The builder starts with the server (``labledger serve``) or, for an app made without
``build_site_at_start``, when the first page is asked for.

The pages are the static site's own: they build the DOM with ``textContent`` from data files whose
JSON has ``<`` escaped, so a string from a run shows as text; the server adds a
Content-Security-Policy header that allows scripts from this server only.
"""

from __future__ import annotations

import mimetypes
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from labledger.errors import LedgerError
from labledger.server.context import TOKEN_COOKIE, ServerContext
from labledger.server.envelope import ApiError

_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")
#: Seconds a page waits for the server's first site build before answering 503.
FIRST_BUILD_WAIT = 60.0
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
}
_GENERATIONS = ("a", "b")


def _stat(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (path.name, st.st_size, st.st_mtime_ns)


def _tree_stats(folder: Path, depth: int = 3) -> list[Any]:
    """(name, size, mtime) of the files under ``folder`` (a running run's records, evals, files)."""
    out: list[Any] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                if depth > 1:
                    out.append((e.name, _tree_stats(Path(e.path), depth - 1)))
            else:
                st = e.stat(follow_symlinks=False)
                out.append((e.name, st.st_size, st.st_mtime_ns))
        except OSError:
            continue
    return out


class LiveSite:
    """A site kept up to date from the ledger by a background thread (see the module docstring)."""

    def __init__(
        self,
        ctx: ServerContext,
        cache_dir: str | Path | None = None,
        *,
        min_interval: float = 1.0,
        full_interval: float = 30.0,
    ):
        self.ctx = ctx
        self.own = cache_dir is None
        self._root = Path(cache_dir) if cache_dir is not None else None
        self._cleanup: weakref.finalize | None = None
        self.min_interval = min_interval
        self.full_interval = full_interval
        self.lock = threading.Lock()  # one build at a time
        self._start_lock = threading.Lock()
        self._current: Path | None = None
        self._signature: Any = None
        self._first = threading.Event()  # set once the first build has been tried
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.built_at: float | None = None  # time.monotonic() of the start of the build served
        self.build_seconds = 0.0
        self.builds = 0
        self.failures = 0
        self.last_error: str | None = None

    @property
    def root(self) -> Path:
        """The cache folder (a temporary one is made on first use and removed with the server)."""
        if self._root is None:
            with self._start_lock:
                if self._root is None:
                    path = Path(tempfile.mkdtemp(prefix="labledger-live-site-"))
                    self._cleanup = weakref.finalize(self, shutil.rmtree, path, True)
                    self._root = path
        return self._root

    @property
    def dir(self) -> Path | None:
        """The folder of the last complete build (None before the first one)."""
        return self._current

    # -- the builder ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the background builder (once; later calls do nothing)."""
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name="labledger-live-site", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            built = self.refresh()
            self._first.set()
            # rest at least as long as the build took (bounded duty; the first build, which imports
            # the builder and writes every file, does not count), then until min_interval is up or
            # the server wrote to the ledger (nudge)
            rest = self.build_seconds if built and self.builds > 1 else 0.0
            if rest and self._stop.wait(rest):
                break
            self._wake.wait(max(self.min_interval - rest, 0.05))
            self._wake.clear()

    def nudge(self) -> None:
        """Look at the ledger soon (the server wrote to it): called after every API write."""
        self._wake.set()

    def signature(self) -> Any:
        """What the builder compares between rounds: the index rows of every run, the index file's
        size and mtime, and the files of every running run."""
        book = self.ctx.ledger()
        parts: list[Any] = [_stat(book.root / name) for name in ("ledger.db", "ledger.db-wal")]
        for info in book.runs():
            parts.append((info.id, info.name, info.status, info.ended, tuple(info.tags), repr(info.summary)))
            if info.status == "running":
                parts.append(_tree_stats(book.run_dir(info.id)))
        return parts

    def refresh(self, *, force: bool = False) -> bool:
        """Build into the spare folder and serve it, if the ledger changed (or ``force``); True if
        a build completed. A failing build keeps the last complete one and sets ``last_error``."""
        from labledger.site import build_site

        with self.lock:
            started = time.monotonic()
            due = self.built_at is None or started - self.built_at >= self.full_interval
            try:
                signature = self.signature()
            except Exception as exc:  # noqa: BLE001 - a locked or vanished index: try again next round
                self._failed(exc, None)
                return False
            if not (force or due or self.last_error or signature != self._signature):
                return False
            spare = self.root / next(g for g in _GENERATIONS if self._current is None or self.root / g != self._current)
            try:
                build_site(self.ctx.ledger(), spare)
            except Exception as exc:  # noqa: BLE001 - the server stays up and serves the last build
                self._failed(exc, spare)
                return False
            finally:
                self.build_seconds = time.monotonic() - started
            self._current = spare
            self._signature = signature
            self.built_at = started
            self.builds += 1
            self.last_error = None
            return True

    def _failed(self, exc: BaseException, out: Path | None) -> None:
        shown = self.ctx.redact(str(exc))
        if out is not None:
            shown = shown.replace(str(out), "<site>")
        self.last_error = shown if isinstance(exc, LedgerError) else f"{type(exc).__name__}: {shown}"
        self.failures += 1

    def wait_first(self, timeout: float = FIRST_BUILD_WAIT) -> Path | None:
        """The folder to serve: the last complete build, waiting (without building) for the first."""
        if self._current is None:
            self.start()
            self._first.wait(timeout)
        return self._current

    def resolve(self, rel: str, folder: Path) -> Path:
        """The file for URL path ``rel`` inside ``folder`` (404 for anything else)."""
        parts = rel.split("/")
        if not parts or not all(_PART.match(p) and ".." not in p for p in parts):
            raise ApiError(404, "no such page")
        if not (parts[0] in ("static", "data", "images") or (len(parts) == 1 and parts[0].endswith(".html"))):
            raise ApiError(404, "no such page")
        return folder.joinpath(*parts)

    def close(self) -> None:
        """Stop the builder (waiting for a build in progress) and remove a temporary cache."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=60)
        if self._cleanup is not None:
            self._cleanup()


async def site_file(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    site: LiveSite = request.app.state.site
    ctx.require_read(request)
    rel = request.scope["path"].lstrip("/") or "index.html"
    site.resolve(rel, Path("."))  # 404 for a path outside the site before any waiting

    def work() -> tuple[Path, bytes]:
        folder = site.wait_first()
        if folder is None:
            why = f" (the last build failed: {site.last_error})" if site.last_error else ""
            raise ApiError(503, f"the site is being built from the ledger; reload in a moment{why}")
        path = site.resolve(rel, folder)
        try:
            return path, path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ApiError(404, f"no such page or data file: /{rel}") from None

    path, data = await run_in_threadpool(work)
    suffix = path.suffix.lower()
    media = _TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    headers = {
        "Cache-Control": "no-store" if rel.startswith("data/") or suffix == ".html" else "no-cache",
        "X-Labledger-Site-Build": str(site.builds),
    }
    if suffix == ".html":
        headers["Content-Security-Policy"] = PAGE_CSP
    return Response(data, media_type=media, headers=headers)


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>labledger · sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 28rem; margin: 4rem auto">
<h1>labledger</h1><p>This server is private. Enter its token to read it in this browser.</p>
<form method="post" action="login"><label>Token <input type="password" name="token" autocomplete="current-password"
required></label> <button type="submit">Sign in</button></form></body></html>
"""


async def login_page(request: Request) -> Response:
    return HTMLResponse(LOGIN_PAGE, headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"})


async def login(request: Request) -> Response:
    """``POST /login`` (form field ``token``): sets an HttpOnly cookie for reads in ``--private`` mode."""
    from labledger.server.api import read_body

    ctx: ServerContext = request.app.state.ctx
    body = await read_body(request, 4096)
    token = (parse_qs(body.decode("utf-8", "replace")).get("token") or [""])[0]
    if not ctx.token_matches(token):
        raise ApiError(403, "the token is not valid for this server")
    response = RedirectResponse("./", status_code=303)
    response.set_cookie(
        TOKEN_COOKIE, token, httponly=True, samesite="strict", path="/", secure=request.url.scheme == "https"
    )
    return response
