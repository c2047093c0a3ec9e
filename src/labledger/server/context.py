"""What every request handler shares: the ledger (one connection per worker thread), the uploads
folder, the live site, the runs opened through the API, and the token checks."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request

from labledger.server.envelope import ApiError
from labledger.server.lines import LineIndexes
from labledger.store.dialect import is_database_url
from labledger.store.ledger import Ledger
from labledger.store.run import Run

#: Fields of run.json served only to a reader with the token (a secret on a command line, home paths).
PRIVATE_META = frozenset({"argv", "cwd", "user", "host", "pid"})
#: Cookie that carries the token for browsers in ``--private`` mode (set by ``POST /login``).
TOKEN_COOKIE = "labledger_token"


def spool_dir(url: str) -> str:
    """The local folder of a team server whose run files live at ``url`` (``s3://...``).

    >>> spool_dir("s3://b/p").startswith(os.environ.get("LABLEDGER_SPOOL") or tempfile.gettempdir())
    True
    """
    tag = hashlib.sha256(url.encode()).hexdigest()[:12]
    return os.environ.get("LABLEDGER_SPOOL") or os.path.join(tempfile.gettempdir(), f"labledger-spool-{tag}")


@dataclass
class OpenRun:
    """A run started through ``POST /api/runs``: this server holds it (and its lock) until finish."""

    run: Run
    ledger: Ledger
    lock: threading.Lock = field(default_factory=threading.Lock)


class ServerContext:
    """Configuration and shared state of one server (see :func:`labledger.server.create_app`)."""

    def __init__(
        self,
        ledger: str | os.PathLike[str],
        *,
        artifacts: str | os.PathLike[str] | None,
        token: str | None,
        private: bool,
        max_upload: int,
        max_body: int,
    ):
        self.location = str(ledger) if is_database_url(str(ledger)) else Path(ledger)
        #: With ``artifacts="s3://bucket/prefix"``: where synced run files are kept (#18). The run
        #: folders on local disk are then the spool (live logs are appended there, and every file
        #: is shipped to the store as it arrives); in team mode that spool is ``$LABLEDGER_SPOOL``
        #: or a folder in the system's temporary directory.
        self.objects: Any = None
        if artifacts is not None and str(artifacts).startswith("s3://"):
            from labledger.store.objects import ObjectStore

            self.objects = ObjectStore(str(artifacts))
            artifacts = None
            if isinstance(self.location, str):
                artifacts = spool_dir(self.objects.url)
        self.artifacts = artifacts
        self.token = token or None
        self.private = private
        self.max_upload = max_upload
        self.max_body = max_body
        self.lines = LineIndexes()
        self.open_runs: dict[str, OpenRun] = {}
        self.open_runs_lock = threading.Lock()
        self._local = threading.local()
        self._ledgers: list[Ledger] = []
        self._ledgers_lock = threading.Lock()
        # Open (and create, migrate) the ledger once up front: a wrong path fails at start.
        self.root = self.ledger().root

    # -- the ledger -----------------------------------------------------------------------------
    def new_ledger(self) -> Ledger:
        book = Ledger(self.location, create=True, artifacts=self.artifacts)
        book.reap_on_read = False  # GETs change nothing; reap() runs on the server's own timer
        return book

    def reap(self) -> list[str]:
        """Mark runs whose process died as crashed (the server's background task, not a GET)."""
        return self.ledger().reap()

    def ledger(self) -> Ledger:
        """This thread's connection to the ledger (a ``Ledger`` is not shared between threads)."""
        book = getattr(self._local, "ledger", None)
        if book is None:
            book = self._local.ledger = self.new_ledger()
            with self._ledgers_lock:
                self._ledgers.append(book)
        return book

    def close(self) -> None:
        """Finish runs still open through the API (``killed``) and close every connection."""
        with self.open_runs_lock:
            runs = list(self.open_runs.values())
            self.open_runs.clear()
        for entry in runs:
            with entry.lock:
                try:
                    entry.run.finish("killed", error="the server stopped before the client finished the run")
                finally:
                    entry.ledger.close()
        with self._ledgers_lock:
            for book in self._ledgers:
                # closing at shutdown: nothing is left to report a failure to
                with contextlib.suppress(Exception):
                    book.close()
            self._ledgers.clear()

    # -- the open dataset (#46) -----------------------------------------------------------------
    def publish(self, run_id: str, tables: dict[str, Any] | None = None) -> int:
        """Write an ended run's files of the open dataset to this server's object store and return
        how many were written (0 without an object store, or for a run still running).

        ``tables``: the run's index rows as a sync sends them (default: read from the index). A run
        whose files cannot be made from its records (a record file that does not parse) is a 400
        naming it; a store that refuses the write raises its ``StorageError`` (a 507)."""
        if self.objects is None:
            return 0
        from labledger.errors import RecordError
        from labledger.store.dataset import StoreSink, publish_run

        try:
            return len(publish_run(self.ledger(), run_id, StoreSink(self.objects), tables))
        except RecordError as exc:
            raise ApiError(400, f"run {run_id}: its dataset files cannot be made: {exc}") from None

    def unpublish(self, run_id: str) -> None:
        """Remove a run's files of the open dataset from this server's object store (if it has one)."""
        if self.objects is not None:
            from labledger.store.dataset import StoreSink

            StoreSink(self.objects).drop_run(run_id)

    # -- tokens ---------------------------------------------------------------------------------
    def _presented(self, request: Request, *, cookie: bool) -> str | None:
        auth = request.headers.get("authorization")
        if auth is not None:
            scheme, _, value = auth.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise ApiError(
                    401,
                    "the Authorization header must be 'Bearer <token>'",
                    headers={"WWW-Authenticate": 'Bearer realm="labledger"'},
                )
            return value.strip()
        if cookie:
            return request.cookies.get(TOKEN_COOKIE)
        return None

    def token_matches(self, presented: str | None) -> bool:
        return (
            self.token is not None
            and presented is not None
            and hmac.compare_digest(presented.encode(), self.token.encode())
        )

    def require_write(self, request: Request) -> None:
        """Uploads and API writes: a ``Bearer`` token (never a cookie: no cross-site writes)."""
        if self.token is None:
            raise ApiError(
                403,
                "writes are disabled: this server was started without a token "
                "(labledger serve --token T, or $LABLEDGER_TOKEN)",
            )
        presented = self._presented(request, cookie=False)
        if presented is None:
            raise ApiError(
                401,
                "this needs a token: send 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": 'Bearer realm="labledger"'},
            )
        if not self.token_matches(presented):
            raise ApiError(403, "the token is not valid for this server")

    def holds_token(self, request: Request) -> bool:
        """Whether the request presents this server's token (header, or the login cookie)."""
        try:
            return self.token_matches(self._presented(request, cookie=True))
        except ApiError:
            return False

    def meta_for(self, request: Request, meta: dict[str, Any]) -> dict[str, Any]:
        """A run's ``run.json`` as this reader may see it: the process details that can carry
        secrets (``argv``, ``cwd``, ``user``, ``host``, ``pid``) only with the token."""
        if self.holds_token(request):
            return meta
        return {k: v for k, v in meta.items() if k not in PRIVATE_META}

    def require_read(self, request: Request) -> None:
        """Reads: public unless ``--private``; then the token (header, or the login cookie)."""
        if not self.private:
            return
        presented = self._presented(request, cookie=True)
        if presented is None:
            raise ApiError(
                401,
                "this server is private: send 'Authorization: Bearer <token>' (browsers: /login)",
                headers={"WWW-Authenticate": 'Bearer realm="labledger"'},
            )
        if not self.token_matches(presented):
            raise ApiError(403, "the token is not valid for this server")

    # -- runs opened through the API ------------------------------------------------------------
    def open_run(self, run_id: str) -> OpenRun:
        with self.open_runs_lock:
            entry = self.open_runs.get(run_id)
        if entry is None:
            raise ApiError(
                409,
                f"run {run_id} is not open in this server: only runs started with POST /api/runs "
                f"on this server take records through the API, until they finish",
            )
        return entry

    def redact(self, message: str) -> str:
        """``message`` without the server's own paths (the ledger folder is ``<ledger>`` to clients)."""
        root = self.root
        for form in sorted({str(root.resolve()), str(root.absolute())}, key=len, reverse=True):
            if len(form) > 1:
                message = message.replace(form, "<ledger>")
        return message

    def info(self) -> dict[str, Any]:
        return {
            "private": self.private,
            "writes": self.token is not None,
            "max_upload": self.max_upload,
            "team": isinstance(self.location, str),
        }
