"""The static site's pages, served live: ``/`` is the catalog, ``/data/...js`` come from the ledger.

The server keeps a site folder of its own (a temporary folder, or ``site_cache``) and brings it up
to date with :func:`labledger.site.build_site` when a page asks for an entry point of its data (the
catalog, a run's data file, a run's batch table of contents or loss curve), at most once per
``min_interval`` seconds. The build is incremental (a run whose files did not change is not read
again), so a new run shows on the next reload without a rebuild by hand, and a running run's curves
grow as it logs. Everything else (pages, scripts, batch chunks, images) is served from that folder.

The pages are the static site's own: they build the DOM with ``textContent`` from data files whose
JSON has ``<`` escaped, so a string from a run shows as text; the server adds a
Content-Security-Policy header that allows scripts from this server only.
"""

from __future__ import annotations

import mimetypes
import re
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from labledger.errors import LedgerError
from labledger.server.context import TOKEN_COOKIE, ServerContext
from labledger.server.envelope import ApiError

_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")
#: Data files that pages load first: asking for one brings the site up to date.
_ENTRY = re.compile(r"^data/(catalog\.js|runs/[^/]+\.js|batches/[^/]+/(toc|loss)\.js)$")
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


class LiveSite:
    """A site folder kept up to date from the ledger (see the module docstring)."""

    def __init__(self, ctx: ServerContext, cache_dir: str | Path | None = None, *, min_interval: float = 1.0):
        self.ctx = ctx
        self.own = cache_dir is None
        self._dir = Path(cache_dir) if cache_dir is not None else None
        self._cleanup: weakref.finalize | None = None
        self.min_interval = min_interval
        self.lock = threading.Lock()
        self.built_at: float | None = None
        self.builds = 0

    @property
    def dir(self) -> Path:
        """The site folder (a temporary one is made on first use and removed with the server)."""
        if self._dir is None:
            with self.lock:
                if self._dir is None:
                    path = Path(tempfile.mkdtemp(prefix="labledger-live-site-"))
                    self._cleanup = weakref.finalize(self, shutil.rmtree, path, True)
                    self._dir = path
        return self._dir

    def refresh(self, *, force: bool = False) -> None:
        """Rebuild what changed, unless a build started less than ``min_interval`` seconds ago."""
        from labledger.site import build_site

        asked = time.monotonic()
        out = self.dir
        with self.lock:
            if not force and self.built_at is not None and asked - self.built_at < self.min_interval:
                return
            started = time.monotonic()
            try:
                build_site(self.ctx.ledger(), out)
            except LedgerError as exc:
                raise ApiError(500, self.ctx.redact(f"the site could not be built from the ledger: {exc}")) from None
            except Exception as exc:  # noqa: BLE001 - a bug must not show the server's paths either
                shown = self.ctx.redact(str(exc)).replace(str(out), "<site>")
                raise ApiError(
                    500, f"the site could not be built from the ledger ({type(exc).__name__}: {shown})"
                ) from None
            self.built_at = started
            self.builds += 1

    def resolve(self, rel: str) -> Path:
        """The file for URL path ``rel`` inside the site folder (404 for anything else)."""
        parts = rel.split("/")
        if not parts or not all(_PART.match(p) and ".." not in p for p in parts):
            raise ApiError(404, "no such page")
        if not (parts[0] in ("static", "data", "images") or (len(parts) == 1 and parts[0].endswith(".html"))):
            raise ApiError(404, "no such page")
        return self.dir.joinpath(*parts)

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()


async def site_file(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    site: LiveSite = request.app.state.site
    ctx.require_read(request)
    rel = request.scope["path"].lstrip("/") or "index.html"
    path = site.resolve(rel)

    def work() -> bytes:
        if site.built_at is None or _ENTRY.match(rel) or rel == "index.html":
            site.refresh()
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ApiError(404, f"no such page or data file: /{rel}") from None

    data = await run_in_threadpool(work)
    suffix = path.suffix.lower()
    media = _TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    headers = {"Cache-Control": "no-store" if rel.startswith("data/") or suffix == ".html" else "no-cache"}
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
