"""`labledger serve` closes half-open connections and answers a stalled body 408 (#17).

A real `labledger serve` process on 127.0.0.1 with short limits; raw sockets play the slow client.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest
from server_process import free_port

import labledger

TOKEN = "t" * 32


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("timeouts")
    with labledger.start_run("r", ledger=root / "ledger") as run:
        run.log(1, loss=0.5)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "labledger",
            "serve",
            "--ledger",
            str(root / "ledger"),
            "--port",
            str(port),
            "--token",
            TOKEN,
            "--head-timeout",
            "1",
            "--body-timeout",
            "1",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/openapi.json", timeout=1.0).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the server did not start")
    yield port, url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """(closed by the server within ``seconds``, what it sent before closing)."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except TimeoutError:
        return False, got
    return True, got


@pytest.mark.parametrize("sent", [b"", b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1"], ids=["nothing", "half a head"])
def test_a_connection_without_a_complete_head_is_closed(served, sent):
    port, _ = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(sent)
        start = time.monotonic()
        closed, _ = _closed_within(sock, 10)
        assert closed and time.monotonic() - start < 8


def test_a_stalled_body_is_answered_408_and_nothing_is_stored(served):
    port, url = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            b"POST /upload?filename=slow.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n".encode()
            + b"Content-Length: 1000\r\n\r\n"
            + b"x" * 10
        )
        closed, got = _closed_within(sock, 10)
    assert got.startswith(b"HTTP/1.1 408"), got[:200]
    assert b'"ok":false' in got.replace(b" ", b"")
    names = [
        u["name"]
        for u in httpx.get(url + "/api/uploads", headers={"Authorization": f"Bearer {TOKEN}"}).json()["uploads"]
    ]
    assert "slow.txt" not in names


def test_a_normal_client_is_served_after_the_slow_ones(served):
    _, url = served
    with httpx.Client() as client:
        for _ in range(3):  # keep-alive: the head timer is re-armed after each response
            assert client.get(url + "/api/runs").status_code == 200
            time.sleep(0.2)


def test_a_request_head_past_the_limit_is_refused_and_closed(served):
    port, url = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (80 * 1024))
        closed, got = _closed_within(sock, 10)
    assert closed and got.split(b"\r\n", 1)[0] in (
        b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 431 Request Header Fields Too Large",
    )
    assert httpx.get(url + "/api/runs", headers={"X-Fine": "b" * 8000}).status_code == 200
