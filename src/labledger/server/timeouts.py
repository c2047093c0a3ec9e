"""Time limits on what a client sends: a request's head, and each piece of its body.

``labledger serve`` runs under uvicorn, whose own keep-alive timeout only starts once a response
has been sent. A client that opens a connection and never finishes its request line and headers
(a half-open connection), or that starts a body and then stalls, would otherwise hold a connection
slot for ever (#17). Two limits close that gap:

- :func:`head_timeout_protocol`: uvicorn's HTTP protocol (httptools, or h11) with a timer from the moment a connection
  opens (and again after every response): a request whose head has not arrived within
  ``head_timeout`` seconds gets its connection closed.
- :class:`BodyTimeout`: ASGI middleware that waits at most ``body_timeout`` seconds for each piece
  of a request body; a stalled body is answered ``408`` (the one error envelope) and dropped.

The same protocol offers large bodies to the app straight from the socket
(:mod:`labledger.server.raw_body`, which ``labledger sync``'s uploads use), each piece under the
same ``body_timeout``.

A slow but moving upload is never cut off: the body limit is per piece, not per request.
"""

from __future__ import annotations

from typing import Any

#: Seconds a connection may take to send a complete request line and headers.
HEAD_TIMEOUT_S = 10.0
#: Seconds the server waits for each piece of a request body.
BODY_TIMEOUT_S = 30.0
#: Largest request head (request line + headers) in bytes.
MAX_HEAD_BYTES = 64 * 1024


def head_timeout_protocol(
    head_timeout: float = HEAD_TIMEOUT_S, max_head: int = MAX_HEAD_BYTES, body_timeout: float = BODY_TIMEOUT_S
) -> type:
    """uvicorn's HTTP protocol class, closing connections whose request head is not in within
    ``head_timeout`` seconds of the connection opening (or of the previous response).

    It is uvicorn's httptools protocol when httptools is installed (its C parser takes request
    bodies several times faster than h11, which ``labledger sync`` of a checkpoint feels), with a
    request head over ``max_head`` bytes answered 400, and a request with a ``Content-Length`` over
    plain HTTP given the ``labledger.raw_body`` extension (:mod:`labledger.server.raw_body`; its
    reads wait ``body_timeout`` seconds per piece); otherwise the h11 protocol (uvicorn's
    ``h11_max_incomplete_event_size`` bounds the head there).

    >>> head_timeout_protocol(2.5).head_timeout
    2.5
    """
    base: type[Any]
    raw = True
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = HttpToolsProtocol
    except ImportError:  # no httptools: h11 (its parser buffers the body itself: no raw bodies)
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol
        raw = False

    class HeadTimeoutProtocol(base):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._head_bytes = 0
            self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            self._head_timer = self.loop.call_later(head_timeout, self._head_timed_out)

        def _head_timed_out(self) -> None:
            # no request in progress: nothing (or only part of a head) arrived since the timer was armed
            if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting:
                self._head_bytes += len(data)
            super().data_received(data)
            # httptools: a head still incomplete after max_head bytes is refused (h11 bounds it itself)
            still = waiting and (self.cycle is None or self.cycle.response_complete)
            refuse = still and self._head_bytes > max_head and not self.transport.is_closing()
            if refuse and hasattr(self, "send_400_response"):
                self.send_400_response("Request head too large.")

        def on_headers_complete(self) -> None:
            self._head_bytes = 0
            before = self.cycle
            idle = before is None or before.response_complete
            super().on_headers_complete()
            if raw and idle and self.cycle is not before:
                self._offer_raw_body()

        def _offer_raw_body(self) -> None:
            length = None
            for name, value in self.scope["headers"]:
                if name == b"transfer-encoding":
                    return
                if name == b"content-length":
                    length = int(value) if value.isdigit() else None
            if not length or self.transport.get_extra_info("sslcontext") is not None:
                return
            from labledger.server.raw_body import RawBody

            extensions = self.scope.setdefault("extensions", {})
            extensions["labledger.raw_body"] = RawBody(self, length, body_timeout)

        def on_response_complete(self) -> None:
            self._head_timer.cancel()
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            timer = getattr(self, "_head_timer", None)
            if timer is not None:
                timer.cancel()
            super().connection_lost(exc)

    HeadTimeoutProtocol.head_timeout = head_timeout
    return HeadTimeoutProtocol


class BodyTimeout:
    """ASGI middleware: a request body that stalls for ``body_timeout`` seconds is answered 408.

    Only the body is timed: once its last piece arrived, later ``receive`` calls (a streaming
    response waiting for the client to disconnect) pass through untouched.
    """

    def __init__(self, app: Any, *, body_timeout: float = BODY_TIMEOUT_S) -> None:
        self.app = app
        self.body_timeout = body_timeout

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"body_done": False, "started": False}

        async def timed_receive() -> dict[str, Any]:
            if state["body_done"]:
                message: dict[str, Any] = await receive()
                return message
            import asyncio  # here: `labledger --help` reads this module's constants only

            try:
                message = await asyncio.wait_for(receive(), self.body_timeout)
            except TimeoutError:
                raise _BodyStalled from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                state["body_done"] = True
            return message

        async def watched_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except _BodyStalled:
            from labledger.server.envelope import error_response

            if not state["started"]:
                response = error_response(
                    408, f"the request body stalled for {self.body_timeout:g} s; the request was not processed"
                )
                await response(scope, receive, send)


class _BodyStalled(Exception):
    """Raised inside the app when a body piece did not arrive in time (never reaches a user)."""


__all__ = ["BODY_TIMEOUT_S", "HEAD_TIMEOUT_S", "MAX_HEAD_BYTES", "BodyTimeout", "head_timeout_protocol"]
