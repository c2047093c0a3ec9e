"""The static site's pages, served live: ``/`` is the catalog, ``/data/...js`` come from the ledger.

The server answers at once and builds its site in the background (#46). A page (``*.html``,
``static/``) is answered from the package (:func:`labledger.site.build.shell_files`, the bytes the
builder writes); the catalog, ``data/catalog.js`` and its chunks ``data/catalog/<k>.js``, is composed
from the index on request (every run of the index, with the details of each run whose pages are
built: :func:`labledger.site.catalog.catalog_files`, the builder's own catalog), so a run that starts
shows in the catalog within seconds (:data:`CATALOG_REUSE`), build or no build. A run's data files
(``data/runs/<id>.js``, its evaluations, tests, batches, curves, diff side, images) come from the
last complete build, else from the build in progress once it has written them, else they are built
for that request, in memory, by :func:`labledger.site.build.build_run` (what the builder does per
run), and kept a few seconds for the page's other requests. The files made from every run
(``data/compare.js``, ``data/lineage.js``, ``data/diff/<id>.paired.js``) answer 503 with
``Retry-After`` until the first build is complete (the page asks again, ``LL.load`` in common.js).

The site itself is kept by a background thread, on its own timer, never because of a request (#17):
it looks at the ledger every ``min_interval`` seconds (sooner after a write through the API) and,
when it changed (a run started, finished or logged, the index was written) or at least every
``full_interval`` seconds, rebuilds with :func:`labledger.site.build_site`, newest runs first (the
first build and then one at least every ``full_interval`` seconds is a full one: it lists every
run's folder and checks every file of the site, so a change made by hand is picked up). It
builds into the folder that is *not* being served (two generations, ``a/`` and ``b/``, each updated
incrementally) and switches to it only once the build is complete; a build that fails (its error is
kept in :attr:`LiveSite.last_error`) changes nothing a reader sees. Only one build runs at a time,
it gives way to requests being answered, and the thread waits at least as long as the last build
took before the next one, so the builder takes at most half of one core however large the ledger.
A GET writes nothing: a run built for a request lives in memory only.

The pages are the static site's own: they build the DOM with ``textContent`` from data files whose
JSON has ``<`` escaped, so a string from a run shows as text; the server adds a
Content-Security-Policy header that allows scripts from this server only.
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from labledger.errors import LedgerError
from labledger.server.context import TOKEN_COOKIE, ServerContext
from labledger.server.envelope import ApiError
from labledger.site.catalog import CATALOG_CHUNK, HEAD
from labledger.site.output import SiteWriter

_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")
#: A composed catalog is answered again, though the index or the builds changed, until it is this
#: many times as old as it took to compose (at most a third of a core answers it; a run built for a
#: request is in the next catalog at once).
CATALOG_REUSE = 2.0
#: Seconds the files of a run built for a request are kept for the page's other requests.
DEMAND_TTL = 5.0
#: Runs built for requests kept in memory at most (the least recently asked for goes first) ...
DEMAND_RUNS = 32
#: ... and their bytes at most.
DEMAND_BYTES = 64 * 2**20
#: Seconds the builder waits, after each run, while requests are being answered.
GIVE_WAY_S = 1.0
#: ``Retry-After`` of a file made from every run before the first build is complete.
RETRY_AFTER_S = 3
#: Data files a run's build writes (``data/<kind>/<run>...``; ``diff/<run>.paired.js`` is made from
#: every run, not by its own build).
_RUN_KINDS = ("runs", "evals", "tests", "batches", "curves", "diff")
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


class _Stopped(Exception):
    """Raised inside a build when the server stops (the build is resumed by the next one)."""


class MemoryWriter(SiteWriter):
    """A :class:`~labledger.site.output.SiteWriter` that keeps what it is given in memory (a run
    built for a request: nothing is written to disk): ``data`` maps a path in the site to its bytes,
    or to the file a copy would copy."""

    def __init__(self, nowhere: Path):
        super().__init__(nowhere)  # a folder that does not exist: no manifest, nothing kept
        self.data: dict[str, bytes | Path] = {}
        self.size = 0

    def begin(self) -> None:
        pass

    def write(self, rel: str, data: bytes) -> bool:
        self._produce(rel, {"size": len(data)})
        self.data[rel] = data
        self.written.append(rel)
        self.size += len(data)
        return True

    def copy(self, rel: str, src: Path) -> bool:
        self._produce(rel, {"size": 0})
        self.data[rel] = src
        self.written.append(rel)
        return True

    def forget_since(self, mark: int) -> None:
        for rel in self.produced_since(mark):
            got = self.data.pop(rel, None)
            if isinstance(got, bytes):
                self.size -= len(got)
        super().forget_since(mark)


def run_of(rel: str) -> str | None:
    """The run whose own build makes the site file ``rel`` (None for a file made from every run).

    >>> run_of("data/runs/abc.js"), run_of("data/evals/abc/test.js"), run_of("images/abc/a.png")
    ('abc', 'abc', 'abc')
    >>> run_of("data/curves/abc.js"), run_of("data/curves/abc/0.js")
    ('abc', 'abc')
    >>> run_of("data/compare.js"), run_of("data/diff/abc.paired.js"), run_of("index.html")
    (None, None, None)
    """
    parts = rel.split("/")
    if parts[0] == "images" and len(parts) > 2:
        return parts[1]
    if parts[0] != "data" or len(parts) < 3 or parts[1] not in _RUN_KINDS:
        return None
    if len(parts) > 3:
        return parts[2]
    name = parts[2]
    if not name.endswith(".js") or name.endswith(".paired.js") or parts[1] not in ("runs", "diff", "curves"):
        return None
    return name[: -len(".js")]


class LiveSite:
    """A site kept up to date from the ledger by a background thread, answered before it is built
    (see the module docstring)."""

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
        #: runs per catalog chunk, of the catalog composed and of the site built
        self.catalog_chunk = CATALOG_CHUNK
        self.lock = threading.Lock()  # one build at a time
        self._start_lock = threading.Lock()
        self._current: Path | None = None
        self._signature: Any = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.built_at: float | None = None  # time.monotonic() of the start of the build served
        self._full_at: float | None = None  # ... of the last full build (build_site's full=True)
        self.build_seconds = 0.0
        self.builds = 0
        self.failures = 0
        self.last_error: str | None = None
        # what requests are answered from before (and besides) the last complete build
        self._state = threading.Lock()
        self._shell: dict[str, bytes | Path] | None = None
        self._fingerprint: str | None = None
        self._fresh: dict[str, Path] = {}  # file of the build in progress -> its folder
        self._current_runs: set[str] = set()  # runs whose files the last complete build holds
        self._building_runs: set[str] = set()  # ... the build in progress has written
        self._entries: dict[str, dict[str, Any]] = {}  # run id -> catalog entry, as last built
        self._comparisons: dict[str, Any] = {}
        self._built_version = 0  # bumped as the builder adds entries
        self._demand_version = 0  # bumped as a request builds a run
        self._catalog_lock = threading.Lock()
        self._catalog: tuple[Any, int, int, float, dict[str, bytes], float] | None = None
        self._demand_lock = threading.Lock()
        self._demand: OrderedDict[str, tuple[float, dict[str, bytes | Path], int]] = OrderedDict()
        self._serving = 0  # requests composing or building now (the builder gives way)
        self.demand_builds = 0

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
        # the catalog before the build, for the first page (an index that cannot be read now is read
        # again by the first request)
        with contextlib.suppress(Exception):
            self.catalog(serving=False)
        while not self._stop.is_set():
            built = self.refresh()
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
            full = self._full_at is None or started - self._full_at >= self.full_interval
            try:
                signature = self.signature()
            except Exception as exc:  # noqa: BLE001 - a locked or vanished index: try again next round
                self._failed(exc, None)
                return False
            if not (force or due or self.last_error or signature != self._signature):
                return False
            spare = self.root / next(g for g in _GENERATIONS if self._current is None or self.root / g != self._current)
            with self._state:
                self._fresh = {}
                self._building_runs = set()
            try:
                result = build_site(
                    self.ctx.ledger(),
                    spare,
                    full=full,
                    catalog_chunk=self.catalog_chunk,
                    on_run=lambda info, pages: self._built(spare, info, pages),
                )
            except _Stopped:
                return False
            except Exception as exc:  # noqa: BLE001 - the server stays up and serves the last build
                self._failed(exc, spare)
                return False
            finally:
                self.build_seconds = time.monotonic() - started
            with self._state:
                self._current = spare
                self._current_runs = self._building_runs
                self._building_runs = set()
                self._fresh = {}
                self._comparisons = result.comparisons
                self._built_version += 1
            self._signature = signature
            self.built_at = started
            if full:
                self._full_at = started
            self.builds += 1
            self.last_error = None
            return True

    def _built(self, folder: Path, info: Any, pages: Any) -> None:
        """``build_site``'s ``on_run``: the run's files in ``folder`` are answered from now on; the
        builder then gives way to requests being answered (for at most :data:`GIVE_WAY_S`)."""
        with self._state:
            for rel in pages.outputs:
                self._fresh[rel] = folder
            self._building_runs.add(info.id)
            self._entries[info.id] = pages.catalog
            self._built_version += 1
        deadline = time.monotonic() + GIVE_WAY_S
        while self._serving and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.005)
        if self._stop.is_set():
            raise _Stopped

    def _failed(self, exc: BaseException, out: Path | None) -> None:
        shown = self.ctx.redact(str(exc))
        if out is not None:
            shown = shown.replace(str(out), "<site>")
        self.last_error = shown if isinstance(exc, LedgerError) else f"{type(exc).__name__}: {shown}"
        self.failures += 1
        with self._state:
            self._fresh = {}
            self._building_runs = set()

    # -- answering ----------------------------------------------------------------------------------
    def check(self, rel: str) -> None:
        """404 for a URL path ``rel`` that names no file of a site."""
        parts = rel.split("/")
        if not parts or not all(_PART.match(p) and ".." not in p for p in parts):
            raise ApiError(404, "no such page")
        if not (parts[0] in ("static", "data", "images") or (len(parts) == 1 and parts[0].endswith(".html"))):
            raise ApiError(404, "no such page")

    def resolve(self, rel: str, folder: Path) -> Path:
        """The file for URL path ``rel`` inside ``folder`` (404 for anything else)."""
        self.check(rel)
        return folder.joinpath(*rel.split("/"))

    def content(self, rel: str) -> bytes | Path:
        """What ``rel`` answers with: bytes, or the file that holds them (404, or 503 for a file
        made from every run before the first build is complete)."""
        self.check(rel)
        if not rel.startswith(("data/", "images/")):
            got = self.shell().get(rel)
            if got is None:
                raise ApiError(404, f"no such page or data file: /{rel}")
            return got
        if rel == HEAD or rel.startswith("data/catalog/"):
            got = self.catalog().get(rel)
            if got is None:
                raise ApiError(404, f"no such page or data file: /{rel}")
            return got
        current = self._current
        if current is not None:
            path = self.resolve(rel, current)
            if path.is_file():
                return path
        with self._state:
            folder = self._fresh.get(rel)
            run = run_of(rel)
            known = run is not None and (
                run in self._building_runs or (current is not None and run in self._current_runs)
            )
        if folder is not None:
            return self.resolve(rel, folder)
        if run is not None and not known:
            files = self.run_files(run)
            if files is not None and rel in files:
                return files[rel]
        if run is None and current is None:
            why = f" (the last build failed: {self.last_error})" if self.last_error else ""
            raise ApiError(
                503,
                f"the site is being built from the ledger; /{rel} is made from every run, ask again in a moment{why}",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        raise ApiError(404, f"no such page or data file: /{rel}")

    def shell(self) -> dict[str, bytes | Path]:
        """The site's pages and static files (made once)."""
        if self._shell is None:
            from labledger.site.build import shell_files

            with self._start_lock:
                if self._shell is None:
                    self._shell = shell_files()
        return self._shell

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            from labledger.site.build import builder_fingerprint

            self._fingerprint = builder_fingerprint()
        return self._fingerprint

    def _index_stamp(self, book: Any) -> Any:
        root = getattr(book, "root", None)
        if self.ctx.objects is not None or root is None:
            return None
        return tuple(_stat(Path(root) / name) for name in ("ledger.db", "ledger.db-wal"))

    def catalog(self, *, serving: bool = True) -> dict[str, bytes]:
        """The catalog's files (its head and chunks, by path in the site) from the index: every run,
        with the details of those built (by the builder or for a request). Composed again at once when a run was built for a request (its
        page reads its entry), else when the index or the builds changed and the last one is older
        than :data:`CATALOG_REUSE` times what it took; while one request composes it, the others get
        the one before. ``serving``: a request (the builder gives way to it)."""
        from labledger.site.catalog import catalog_files
        from labledger.site.rundata import run_basics
        from labledger.store.run import check_name

        book = self.ctx.ledger()
        stamp = self._index_stamp(book)

        def fresh(cached: tuple[Any, ...] | None) -> bool:
            if cached is None or cached[2] != self._demand_version:
                return False
            if stamp is not None and cached[0] == stamp and cached[1] == self._built_version:
                return True
            return time.monotonic() - cached[3] < CATALOG_REUSE * cached[5]

        cached = self._catalog
        if cached is not None and fresh(cached):
            return cached[4]
        if cached is not None and cached[2] == self._demand_version:
            if not self._catalog_lock.acquire(blocking=False):
                return cached[4]  # being composed: the one before, seconds old
        else:
            self._catalog_lock.acquire()
        try:
            cached = self._catalog
            if cached is not None and fresh(cached):
                return cached[4]
            built, demanded = self._built_version, self._demand_version
            self._serve(+1 if serving else 0)
            try:
                started = time.monotonic()
                entries = []
                with self._state:
                    known = dict(self._entries)
                    comparisons = self._comparisons
                for info in book.runs():
                    try:
                        check_name(info.id)
                    except LedgerError:
                        continue  # the builder leaves it out too
                    entry = known.get(info.id)
                    entries.append({**entry, **run_basics(info)} if entry is not None else run_basics(info))
                data = catalog_files(book, entries, comparisons, chunk=self.catalog_chunk).files()
            finally:
                self._serve(-1 if serving else 0)
            self._catalog = (stamp, built, demanded, started, data, time.monotonic() - started)
            return data
        finally:
            self._catalog_lock.release()

    def _serve(self, delta: int) -> None:
        """Count a request that starts (+1) or ends (-1) work the builder gives way to."""
        if delta:
            with self._state:
                self._serving += delta

    def run_files(self, run_id: str) -> dict[str, bytes | Path] | None:
        """The site files of one run, built for a request in memory (kept :data:`DEMAND_TTL`
        seconds); None when the index has no such run."""
        from labledger.site.build import SiteBuild, build_run

        with self._demand_lock:
            kept = self._demand.get(run_id)
            if kept is not None and time.monotonic() - kept[0] < DEMAND_TTL:
                self._demand.move_to_end(run_id)
                return kept[1]
            book = self.ctx.ledger()
            try:
                info = book.info(run_id)
            except LedgerError:
                return None
            if info.id != run_id:  # (a prefix or a name: not a file of the site)
                return None
            self._serve(+1)
            try:
                nowhere = self.root / "in-memory-never-written"
                writer = MemoryWriter(nowhere)
                result = SiteBuild(out=nowhere, index=nowhere / "index.html", runs=[])
                pages = build_run(writer, book, info, result, fingerprint=self.fingerprint())
            finally:
                self._serve(-1)
            if pages is None:
                return None
            self.demand_builds += 1
            with self._state:
                self._entries[run_id] = pages.catalog
            self._demand_version += 1
            self._demand[run_id] = (time.monotonic(), writer.data, writer.size)
            self._demand.move_to_end(run_id)
            total = sum(k[2] for k in self._demand.values())
            while len(self._demand) > 1 and (len(self._demand) > DEMAND_RUNS or total > DEMAND_BYTES):
                _, dropped = self._demand.popitem(last=False)
                total -= dropped[2]
            return writer.data

    def close(self) -> None:
        """Stop the builder (a build in progress stops after its current run) and remove a
        temporary cache."""
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
    site.check(rel)  # 404 for a path outside the site before any work
    site.start()

    def work() -> bytes:
        got = site.content(rel)
        if isinstance(got, bytes):
            return got
        try:
            return got.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ApiError(404, f"no such page or data file: /{rel}") from None

    data = await run_in_threadpool(work)
    name = rel.rsplit("/", 1)[-1]
    suffix = os.path.splitext(name)[1].lower()
    media = _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
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
