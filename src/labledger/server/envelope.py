"""One JSON shape for every answer of the server: ``{"ok": true, ...}`` on success and
``{"ok": false, "status": <HTTP status>, "error": "<message>"}`` for every failure.

Library errors map to statuses by kind: an unknown run or name is 404, a bad record or parameter
400, a run in the wrong state 409; anything unexpected is a 500 whose message says no more than
that (the traceback goes to the server's log, never to the client).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from labledger.errors import (
    LedgerError,
    LedgerNotFoundError,
    RecordError,
    RunNotFoundError,
    RunStateError,
    StorageError,
    UnknownNameError,
)

JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
#: Reason phrases for the statuses the server sends (the envelope's ``error`` when nothing better).
REASONS = {
    400: "bad request",
    401: "authentication required",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    408: "request timeout",
    409: "conflict",
    411: "length required",
    413: "payload too large",
    415: "unsupported media type",
    500: "internal server error",
    503: "service unavailable",
    507: "insufficient storage",
}


class ApiError(Exception):
    """An HTTP failure with its status and a message for the client (sent in the envelope)."""

    def __init__(self, status: int, message: str | None = None, *, headers: dict[str, str] | None = None):
        self.status = status
        self.message = message or REASONS.get(status, "error")
        self.headers = headers or {}
        super().__init__(self.message)


def _default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


def dumps(obj: Any) -> bytes:
    """JSON bytes (NaN and infinities become ``null``; paths and sets are converted)."""
    return orjson.dumps(obj, option=JSON_OPTIONS, default=_default)


class JSONResponse(Response):
    """A JSON response serialised with orjson."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        if isinstance(content, bytes):
            return content
        return dumps(content)


def ok(
    payload: dict[str, Any] | None = None, *, status: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    """``{"ok": true, **payload}``."""
    return JSONResponse({"ok": True, **(payload or {})}, status_code=status, headers=headers)


def envelope(status: int, message: str) -> dict[str, Any]:
    """The error document: ``{"ok": false, "status": status, "error": message}``.

    >>> envelope(404, "No run 'x'")
    {'ok': False, 'status': 404, 'error': "No run 'x'"}
    """
    return {"ok": False, "status": status, "error": message}


def error_response(
    status: int, message: str | None = None, *, headers: dict[str, str] | None = None, head: bool = False
) -> JSONResponse:
    """The envelope as a response (headers only for ``HEAD`` requests, with the same status)."""
    message = message or REASONS.get(status, "error")
    response = JSONResponse(envelope(status, message), status_code=status, headers=headers)
    if head:
        response.body = b""
        response.headers["content-length"] = "0"
    return response


def status_of(exc: LedgerError) -> int:
    """The HTTP status for a library error."""
    if isinstance(exc, (RunNotFoundError, UnknownNameError, LedgerNotFoundError)):
        return 404
    if isinstance(exc, RunStateError):
        return 409
    if isinstance(exc, RecordError):
        return 400
    from labledger.errors import IndexUnavailableError

    if isinstance(exc, IndexUnavailableError):
        return 503
    if isinstance(exc, StorageError):
        return 507
    return 400
