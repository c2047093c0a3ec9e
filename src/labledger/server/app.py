"""``create_app``: the ASGI application behind ``labledger serve`` (Starlette; run it with uvicorn)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from labledger.errors import LedgerError
from labledger.server import api, pages, sync, uploads
from labledger.server.context import ServerContext
from labledger.server.envelope import REASONS, ApiError, JSONResponse, error_response, ok, status_of
from labledger.server.openapi import openapi_document

log = logging.getLogger("labledger.server")
#: Default cap of an upload (100 MiB).
MAX_UPLOAD = 100 * 2**20
#: Default cap of a JSON request body to the API (64 MiB).
MAX_BODY = 64 * 2**20
#: Seconds between the server's crash detection rounds (runs whose process died become "crashed").
REAP_INTERVAL = 5.0
API_CSP = "default-src 'none'; frame-ancestors 'none'"


def _version() -> str:
    from labledger import __version__

    return __version__


async def api_root(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    ctx.require_read(request)
    return ok(
        {
            "server": "labledger",
            "version": _version(),
            **ctx.info(),
            "links": {
                "runs": "/api/runs",
                "table": "/api/table",
                "uploads": "/api/uploads",
                "openapi": "/openapi.json",
                "site": "/",
            },
        }
    )


async def favicon(request: Request) -> Response:
    return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(_version()))


# -- failures: one envelope ------------------------------------------------------------------------
async def on_http_exception(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    if status == 404:
        message = f"no such resource: {request.method} {request.url.path}"
    elif status == 405:
        allowed = _allowed_methods(request) or (exc.headers or {}).get("Allow", "")
        exc.headers = {**(exc.headers or {}), "Allow": allowed}
        message = f"method {request.method} is not allowed on {request.url.path}" + (
            f" (allowed: {allowed})" if allowed else ""
        )
    else:
        message = exc.detail if isinstance(exc.detail, str) and exc.detail else REASONS.get(status, "error")
    headers = dict(exc.headers) if exc.headers is not None else None
    return error_response(status, message, headers=headers, head=request.method == "HEAD")


def _allowed_methods(request: Request) -> str:
    """Every method some route takes at this path (Starlette's 405 names only the first route's)."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches({**request.scope, "method": "\0"})
        if match == Match.PARTIAL and getattr(route, "methods", None):
            methods |= route.methods
    return ", ".join(sorted(methods))


async def on_api_error(request: Request, exc: ApiError) -> Response:
    return error_response(exc.status, exc.message, headers=exc.headers, head=request.method == "HEAD")


async def on_ledger_error(request: Request, exc: LedgerError) -> Response:
    return error_response(status_of(exc), request.app.state.ctx.redact(str(exc)), head=request.method == "HEAD")


async def on_unexpected(request: Request, exc: Exception) -> Response:
    from labledger.store.jsonl import DISK_ERRNOS

    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:  # the server's disk: full, failing, read-only
        log.error("the disk refused a write answering %s %s: %s", request.method, request.url.path, exc)
        return error_response(
            507,
            f"the server's disk refused the write ({exc.strerror}): nothing of this request was stored; "
            f"free space on the server and try again",
            head=request.method == "HEAD",
        )
    log.error("unexpected error answering %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(
        500, "internal server error (the server's log has the details)", head=request.method == "HEAD"
    )


class Guard:
    """ASGI middleware: refuse unexpected ``Host`` headers (DNS rebinding against a loopback server)
    and add security headers to every response."""

    def __init__(self, app, *, allowed_hosts: list[str] | None, on_write: Any = None):
        self.app = app
        self.allowed = {h.lower() for h in allowed_hosts} if allowed_hosts else None
        self.on_write = on_write  # called after every request that may write (the live site's nudge)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.allowed is not None:
            host = ""
            for k, v in scope.get("headers", ()):
                if k == b"host":
                    host = v.decode("latin-1").lower()
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if host not in self.allowed and name not in self.allowed:
                response = error_response(400, f"host {host[:80]!r} is not served here")
                return await response(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {k.lower() for k, _ in headers}
                extra = [
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                    (b"content-security-policy", API_CSP.encode()),
                ]
                headers += [(k, v) for k, v in extra if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            if self.on_write is not None and scope.get("method") not in ("GET", "HEAD", "OPTIONS"):
                self.on_write()


def create_app(
    ledger_path_or_url: str | os.PathLike[str],
    *,
    uploads_dir: str | os.PathLike[str],
    token: str | None = None,
    private: bool = False,
    max_upload: int = MAX_UPLOAD,
    artifacts: str | os.PathLike[str] | None = None,
    site_cache: str | os.PathLike[str] | None = None,
    site_refresh: float = 1.0,
    max_body: int = MAX_BODY,
    allowed_hosts: list[str] | None = None,
    build_site_at_start: bool = False,
) -> Starlette:
    """The server of one ledger (a folder, or ``postgresql://...`` with ``artifacts``) as an ASGI app.

    ``token`` is needed for uploads and API writes (``Authorization: Bearer <token>``); without one
    the server is read-only. With ``private`` every read needs it too. ``allowed_hosts`` (e.g.
    ``["127.0.0.1:8765", "localhost:8765"]``) refuses requests naming any other ``Host``.
    The live site's builder starts with the server when ``build_site_at_start`` (``labledger
    serve``), else with the first page request; either way it rebuilds on its own timer, never
    because of a request, and pages answer while it builds (:mod:`labledger.server.pages`).

    >>> import tempfile, labledger
    >>> from starlette.testclient import TestClient
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("r", ledger=d) as run:
    ...     run.log(1, loss=0.5)
    >>> client = TestClient(create_app(d, uploads_dir=d + "/uploads"))
    >>> client.get("/api/runs").json()["runs"][0]["name"]
    'r'
    """
    if private and not token:
        raise LedgerError("a private server needs a token (--token or $LABLEDGER_TOKEN)")
    if max_upload <= 0:
        raise LedgerError(f"max_upload must be a positive number of bytes; got {max_upload}")
    ctx = ServerContext(
        ledger_path_or_url, artifacts=artifacts, token=token, private=private, max_upload=max_upload, max_body=max_body
    )
    store = uploads.UploadStore(Path(uploads_dir), max_upload=max_upload)
    site = pages.LiveSite(ctx, None if site_cache is None else Path(site_cache), min_interval=site_refresh)

    routes = [
        Route("/api", api_root, methods=["GET"]),
        Route("/api/runs", api.list_runs, methods=["GET"]),
        Route("/api/runs", api.start_run, methods=["POST"]),
        Route("/api/runs/{run}", api.get_run, methods=["GET"]),
        Route("/api/runs/{run}", api.delete_run, methods=["DELETE"]),
        Route("/api/runs/{run}/evals", api.list_evals, methods=["GET"]),
        Route("/api/runs/{run}/evals/{name}", api.get_eval, methods=["GET"]),
        Route("/api/runs/{run}/evals/{name}/results", api.eval_results, methods=["GET"]),
        Route("/api/runs/{run}/scalars", api.post_scalars, methods=["POST"]),
        Route("/api/runs/{run}/batches", api.post_batches, methods=["POST"]),
        Route("/api/runs/{run}/history", api.post_history, methods=["POST"]),
        Route("/api/runs/{run}/notes", api.post_note, methods=["POST"]),
        Route("/api/runs/{run}/finish", api.finish_run, methods=["POST"]),
        Route("/api/runs/{run}/{kind}", api.run_records, methods=["GET"]),
        Route("/api/table", api.get_table, methods=["GET"]),
        Route("/api/sync/state", sync.state, methods=["POST"]),
        Route("/api/sync/runs/{run}/files", sync.put_file, methods=["PUT"]),
        Route("/api/sync/runs/{run}/files", sync.get_file, methods=["GET"]),
        Route("/api/sync/runs/{run}/index", sync.put_index, methods=["POST"]),
        Route("/api/sync/runs/{run}/batch", sync.put_batch, methods=["POST"]),
        Route("/api/uploads", uploads.list_uploads, methods=["GET"]),
        Route("/upload", uploads.upload, methods=["POST"]),
        Route("/uploads/{name}", uploads.get_upload, methods=["GET", "HEAD"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        Route("/login", pages.login_page, methods=["GET"]),
        Route("/login", pages.login, methods=["POST"]),
        Route("/", pages.site_file, methods=["GET", "HEAD"]),
        Route("/{page}.html", pages.site_file, methods=["GET", "HEAD"], name="page"),
        Route("/static/{path:path}", pages.site_file, methods=["GET", "HEAD"], name="static"),
        Route("/data/{path:path}", pages.site_file, methods=["GET", "HEAD"], name="data"),
        Route("/images/{path:path}", pages.site_file, methods=["GET", "HEAD"], name="images"),
    ]

    async def reaper() -> None:
        """Crash detection on the server's own timer: a GET never marks a run crashed (#17)."""
        while True:
            with contextlib.suppress(Exception):  # a locked index or a vanished folder: next round
                await run_in_threadpool(ctx.reap)
            await asyncio.sleep(REAP_INTERVAL)

    async def restore() -> None:
        """A spool that lost synced runs takes them back from object storage (#18)."""
        try:
            await run_in_threadpool(sync.restore_spool, ctx.objects, ctx.root / "runs")
        except (LedgerError, OSError) as exc:  # the store unreachable, a sync racing it: the runs stay as they are
            log.warning("could not restore synced runs from %s: %s", ctx.objects.url, exc)

    async def settle() -> None:
        """Batches whose renames a crash cut off are finished as the server starts, in the
        background (a sync state request of such a run settles it first too) (#46)."""
        try:
            settled = await sync.settle_at_start(ctx.root / "runs")
        except (LedgerError, OSError) as exc:  # a damaged manifest: that run's next sync settles or resends it
            log.warning("could not finish interrupted sync batches: %s", exc)
            return
        if settled:
            log.info("finished the renames of interrupted sync batches of %d run(s)", len(settled))

    @asynccontextmanager
    async def lifespan(app: Starlette):
        settling = asyncio.create_task(settle())
        task = asyncio.create_task(reaper())
        restoring = asyncio.create_task(restore()) if ctx.objects is not None else None
        if build_site_at_start:
            # the pages are made before the server answers, so the first one answers at once, and the
            # builder makes the catalog before it builds (#46); the site is built in the background,
            # on its own timer, never because of a request (#17)
            await run_in_threadpool(site.shell)
            site.start()
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await settling
            if restoring is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await restoring
            await run_in_threadpool(site.close)
            ctx.close()

    # each handler takes its own exception class (Starlette types them all as taking Exception)
    handlers: dict[Any, Any] = {
        HTTPException: on_http_exception,
        ApiError: on_api_error,
        LedgerError: on_ledger_error,
        Exception: on_unexpected,
    }
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers=handlers,
    )
    app.add_middleware(Guard, allowed_hosts=allowed_hosts, on_write=site.nudge)
    app.state.ctx = ctx
    app.state.uploads = store
    app.state.site = site
    return app
