"""A real ``uvicorn`` server of a ledger in a subprocess on 127.0.0.1 and a free port, for the tests
that need sockets (load, faults, the browser, ``push``). Started and stopped by the test."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

SCRIPT = """
import json, sys, uvicorn
from labledger.server import create_app
args = json.loads(sys.argv[1])
port = args.pop("port")
serve_protocol = args.pop("serve_protocol", None)
app = create_app(args.pop("ledger"), **args)
extra = {}
if serve_protocol is not None:  # what `labledger serve` adds: timeouts and raw bodies (body_timeout s)
    from labledger.server.timeouts import BodyTimeout, head_timeout_protocol
    app.add_middleware(BodyTimeout, body_timeout=serve_protocol)
    extra["http"] = head_timeout_protocol(10.0, 64 * 1024, serve_protocol)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", server_header=False, **extra)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``labledger.server.create_app(ledger, **options)`` served by uvicorn in a child process.

    ``serve_protocol=SECONDS`` serves it as ``labledger serve`` does (its HTTP protocol, with raw
    request bodies, and the body timeout of that many seconds); otherwise plain uvicorn.
    """

    def __init__(self, ledger: str | Path, *, port: int | None = None, **options):
        self.ledger = str(ledger)
        self.options = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        args = json.dumps({"ledger": self.ledger, "port": self.port, **self.options})
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # the output goes to a file, not a pipe nobody reads (a full pipe would stop the server)
        self.log = tempfile.TemporaryFile()  # closed by stop() and kill()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, args], env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                out = self.log.read().decode(errors="replace")
                self.log.close()
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{out}")
            try:
                if httpx.get(self.url + "/openapi.json", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("the server did not start in time")

    def kill(self) -> None:
        """SIGKILL: the server dies wherever it is."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._close_log()

    def _close_log(self) -> None:
        log = getattr(self, "log", None)
        if log is not None and not log.closed:
            log.close()

    def stop(self) -> None:
        """SIGTERM (graceful shutdown), SIGKILL if it takes more than 20 s."""
        if self.proc is None or self.proc.poll() is not None:
            self._close_log()
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_log()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
