"""A request body read straight from the socket, for ``labledger sync``'s file uploads (#18).

Under uvicorn a body comes to an ASGI app in the pieces the event loop read (256 KiB at most),
each copied twice on the way (into the protocol's buffer, then out as ``bytes``), with the loop
pausing and resuming the socket around every piece. For a large checkpoint that Python work, not
the bytes, was most of the server's CPU. ``labledger serve``'s protocol
(:func:`labledger.server.timeouts.head_timeout_protocol`) therefore offers a request with a
``Content-Length`` over plain HTTP the ASGI extension ``scope["extensions"]["labledger.raw_body"]``:
a :class:`RawBody` whose :meth:`RawBody.take` stops the event loop reading the connection and hands
back the body bytes already parsed and the socket's descriptor. The app then reads the rest itself,
in a worker thread, straight into its own buffer (:func:`read_exact`). The connection is closed
after the response, since the HTTP parser never saw those bytes.

An app that finds no extension (another server, Starlette's test client, TLS) streams the body
the ordinary way; both paths must give the same result.
"""

from __future__ import annotations

import os
import select
from typing import Any


class BodyStalled(Exception):
    """No byte of the body came for the body timeout (the caller answers 408)."""


class RawBody:
    """The ``labledger.raw_body`` extension of one request (see the module docstring).

    ``timeout`` is the seconds :func:`read_exact` waits for each piece of the body (the server's
    body timeout). ``length`` is the request's ``Content-Length``.
    """

    def __init__(self, protocol: Any, length: int, timeout: float) -> None:
        self._protocol = protocol
        self._cycle = protocol.cycle
        self.length = length
        self.timeout = timeout
        self.taken = False

    def take(self) -> tuple[bytes, int]:
        """Stop the event loop reading this connection; return the body bytes it already parsed
        (the first of the body) and the socket's file descriptor, from which the remaining
        ``length - len(first)`` bytes are to be read. Call it before any ``receive()``, from the
        event loop's thread; the connection closes after the response.
        """
        if self.taken:
            raise RuntimeError("the raw body was taken already")
        self.taken = True
        protocol, cycle = self._protocol, self._cycle
        protocol.flow.pause_reading()
        cycle.keep_alive = False
        first = bytes(cycle.body)
        cycle.body = bytearray()
        sock = protocol.transport.get_extra_info("socket")
        return first, sock.fileno()


def read_exact(sock_fd: int, view: memoryview, timeout: float) -> int:
    """Read from the non-blocking socket ``sock_fd`` into ``view`` until it is full or the peer
    closes; return the bytes read (fewer than ``len(view)`` only at the end of the stream).

    Waits at most ``timeout`` seconds for each piece (:class:`BodyStalled` after that); a reset
    connection counts as the end of the stream.

    >>> import socket
    >>> a, b = socket.socketpair()
    >>> a.setblocking(False)
    >>> b.sendall(b"abcdef"); b.close()
    >>> buf = bytearray(4)
    >>> read_exact(a.fileno(), memoryview(buf), 1.0), bytes(buf)
    (4, b'abcd')
    >>> read_exact(a.fileno(), memoryview(buf), 1.0)
    2
    """
    got = 0
    poller: Any = None
    while got < len(view):
        try:
            n = os.readv(sock_fd, [view[got:]])
        except BlockingIOError:
            if poller is None:
                poller = select.poll()
                poller.register(sock_fd, select.POLLIN)
            if not poller.poll(timeout * 1000):
                raise BodyStalled from None
            continue
        except ConnectionError:
            return got
        if n == 0:
            return got
        got += n
    return got


__all__ = ["BodyStalled", "RawBody", "read_exact"]
