"""Uploads (issue 7): POST /upload?filename=NAME with the file as the body (seed 003's workflow),
GET/HEAD /uploads/NAME; names, sizes, tokens, atomic writes; faults with a real server killed or a
client gone mid-upload; `labledger push` and `labledger serve`'s refusals."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from click.testing import CliRunner
from server_process import ServerProcess
from starlette.testclient import TestClient

import labledger
from labledger.cli import main
from labledger.server import create_app

TOKEN = "upload-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def ledger(tmp_path):
    with labledger.start_run("r", ledger=tmp_path / "ledger") as run:
        run.log(1, loss=1.0)
    return tmp_path / "ledger"


@pytest.fixture
def client(tmp_path, ledger):
    app = create_app(ledger, uploads_dir=tmp_path / "area" / "uploads", token=TOKEN, max_upload=4096)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob(".upload-*"))


# -- the basics ---------------------------------------------------------------------------------
def test_upload_then_get_and_head_with_length_type_and_sha256_etag(client, tmp_path):
    data = "# AWDE 0617/0618 F1 异常排查\n\n| Run | F1 |\n| --- | ---: |\n".encode()
    r = client.post(
        "/upload?filename=AWDE_0617_0618_F1_INVESTIGATION.md",
        content=data,
        headers={**AUTH, "Content-Type": "text/markdown; charset=utf-8"},
    )
    assert r.status_code == 201, r.text
    doc = r.json()
    assert doc["ok"] and doc["sha256"] == sha(data) and doc["size"] == len(data) and not doc["replaced"]
    assert doc["content_type"] == "text/markdown; charset=utf-8"
    assert doc["url"] == "/uploads/AWDE_0617_0618_F1_INVESTIGATION.md" == r.headers["location"]
    head = client.head(doc["url"])
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(data))
    assert head.headers["content-type"] == "text/markdown; charset=utf-8"
    assert head.headers["etag"] == f'"{sha(data)}"'
    assert head.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in head.headers["content-security-policy"]
    got = client.get(doc["url"])
    assert got.status_code == 200 and got.content == data and got.headers["etag"] == head.headers["etag"]
    assert client.get(doc["url"], headers={"If-None-Match": head.headers["etag"]}).status_code == 304
    # the sidecar records it, the listing shows it
    meta = orjson.loads((tmp_path / "area/uploads/.meta/AWDE_0617_0618_F1_INVESTIGATION.md.json").read_bytes())
    assert meta["sha256"] == sha(data) and meta["content_type"] == "text/markdown; charset=utf-8"
    assert [u["name"] for u in client.get("/api/uploads").json()["uploads"]] == ["AWDE_0617_0618_F1_INVESTIGATION.md"]


@pytest.mark.parametrize(
    "name,declared,recorded",
    [
        ("report.md", None, "text/markdown; charset=utf-8"),
        ("report.md", "application/x-www-form-urlencoded", "text/markdown; charset=utf-8"),  # curl's default
        ("table.csv", None, "text/csv; charset=utf-8"),
        ("weights.bin", None, "application/octet-stream"),
        ("page.html", "text/html", "text/html"),
        ("data.json", "application/json", "application/json"),
    ],
)
def test_content_type_is_the_declared_one_or_a_guess_from_the_name(client, name, declared, recorded):
    headers = {**AUTH, **({"Content-Type": declared} if declared else {})}
    r = client.post(f"/upload?filename={name}", content=b"x,y\n1,2\n", headers=headers)
    assert r.status_code == 201 and r.json()["content_type"] == recorded
    assert client.head(f"/uploads/{name}").headers["content-type"] == recorded


def test_existing_name_is_kept_unless_overwrite(client):
    assert client.post("/upload?filename=a.txt", content=b"first", headers=AUTH).status_code == 201
    r = client.post("/upload?filename=a.txt", content=b"second", headers=AUTH)
    assert r.status_code == 409 and "overwrite=1" in r.json()["error"]
    assert client.get("/uploads/a.txt").content == b"first"
    r = client.post("/upload?filename=a.txt&overwrite=1", content=b"second", headers=AUTH)
    assert r.status_code == 200 and r.json()["replaced"] is True
    got = client.get("/uploads/a.txt")
    assert got.content == b"second" and got.headers["etag"] == f'"{sha(b"second")}"'
    assert client.post("/upload?filename=a.txt&overwrite=maybe", content=b"x", headers=AUTH).status_code == 400


def test_a_sidecar_lost_in_a_crash_is_rebuilt_from_the_file(client, tmp_path):
    client.post("/upload?filename=b.txt", content=b"payload", headers=AUTH).raise_for_status()
    (tmp_path / "area/uploads/.meta/b.txt.json").unlink()
    assert client.head("/uploads/b.txt").headers["etag"] == f'"{sha(b"payload")}"'
    # a file changed behind the server's back is hashed again, never served with a stale ETag
    (tmp_path / "area/uploads/b.txt").write_bytes(b"changed on disk")
    assert client.head("/uploads/b.txt").headers["etag"] == f'"{sha(b"changed on disk")}"'
    # ... and a read writes nothing (#17): the sidecar is repaired when a server starts on the folder
    assert not (tmp_path / "area/uploads/.meta/b.txt.json").exists()
    assert client.get("/uploads/b.txt").content == b"changed on disk"
    assert not (tmp_path / "area/uploads/.meta/b.txt.json").exists()
    from labledger.server.uploads import UploadStore

    again = UploadStore(tmp_path / "area/uploads", max_upload=1024)
    assert again.repaired == ["b.txt"]
    meta = orjson.loads((tmp_path / "area/uploads/.meta/b.txt.json").read_bytes())
    assert meta["sha256"] == sha(b"changed on disk") and meta["content_type"].startswith("text/plain")


# -- bad input: each gets its 4xx, and nothing is written outside the uploads folder ------------
BAD_NAMES = [
    "../x",
    "..",
    ".",
    "/etc/passwd",
    "a/b",
    "a\\b",
    ".hidden",
    "x/../../y",
    "",
    "x" * 256,
    "nul\x00byte",
    "sp ace.md",
    "semi;colon",
    "..%2fx",
    "%2e%2e%2fx",
    "C:\\windows\\x",
]
RAW_QUERIES = [
    "filename=%2e%2e%2fx",
    "filename=..%2F..%2Fetc%2Fpasswd",
    "filename=%2Fetc%2Fpasswd",
    "filename=%252e%252e%252fx",
    "filename=a%2Fb",
    "filename=%2E%2E",
    "filename=x&filename=../y",
    "",
]


def tree(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in root.rglob("*"):
        if skip in p.parents or p == skip:
            continue
        st = p.lstat()
        out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def test_path_traversal_and_bad_names_are_refused_and_nothing_is_written_anywhere(client, tmp_path):
    uploads = tmp_path / "area" / "uploads"
    before = tree(tmp_path, uploads)
    passwd = Path("/etc/passwd").stat().st_mtime_ns if Path("/etc/passwd").exists() else None
    statuses = {}
    for name in BAD_NAMES:
        r = client.post(f"/upload?filename={quote(name, safe='')}", content=b"pwned", headers=AUTH)
        statuses[repr(name)] = r.status_code
        assert r.json()["ok"] is False
    for query in RAW_QUERIES:
        r = client.post(f"/upload?{query}", content=b"pwned", headers=AUTH)
        statuses[query] = r.status_code
    assert set(statuses.values()) == {400}, statuses
    for path in (
        "/uploads/%2e%2e",
        "/uploads/..%2f..%2fetc%2fpasswd",
        "/uploads/%2e%2e%2fledger%2fledger.db",
        "/uploads/.meta",
        "/uploads/%2Emeta",
    ):
        r = client.get(path)
        assert 400 <= r.status_code < 500 and b"root:" not in r.content and b"SQLite" not in r.content, path
    assert tree(tmp_path, uploads) == before
    assert visible(uploads) == [] and temp_files(uploads) == []
    assert list((uploads / ".meta").iterdir()) == []
    if passwd is not None:
        assert Path("/etc/passwd").stat().st_mtime_ns == passwd


def test_empty_and_oversized_bodies(client, tmp_path):
    uploads = tmp_path / "area" / "uploads"
    assert client.post("/upload?filename=e.txt", content=b"", headers=AUTH).status_code == 400
    # declared too large: refused before a byte is read
    assert client.post("/upload?filename=big.bin", content=b"x" * 5000, headers=AUTH).status_code == 413

    def chunks():  # no Content-Length: the cap applies while the body streams
        for _ in range(10):
            yield b"y" * 1000

    r = client.post("/upload?filename=big2.bin", content=chunks(), headers=AUTH)
    assert r.status_code == 413 and "4096" in r.json()["error"]
    exactly = b"z" * 4096
    assert client.post("/upload?filename=cap.bin", content=exactly, headers=AUTH).status_code == 201
    assert visible(uploads) == ["cap.bin"] and temp_files(uploads) == []


@pytest.mark.parametrize(
    "headers,status",
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 403),
        ({"Authorization": "Basic eDp5"}, 401),
        ({"Authorization": "Bearer"}, 401),
        ({"Authorization": f"bearer {TOKEN}"}, 201),
    ],
)
def test_uploads_need_the_token(client, tmp_path, headers, status):
    r = client.post("/upload?filename=t.txt", content=b"x", headers=headers)
    assert r.status_code == status
    assert visible(tmp_path / "area" / "uploads") == (["t.txt"] if status == 201 else [])


def test_private_server_needs_the_token_for_reads_and_browsers_sign_in(tmp_path, ledger):
    app = create_app(ledger, uploads_dir=tmp_path / "u", token=TOKEN, private=True)
    with TestClient(app) as c:
        c.post("/upload?filename=p.txt", content=b"secret", headers=AUTH).raise_for_status()
        assert c.get("/uploads/p.txt").status_code == 401
        assert c.get("/uploads/p.txt", headers=AUTH).content == b"secret"
        assert (
            c.post(
                "/login", content=b"token=wrong", headers={"Content-Type": "application/x-www-form-urlencoded"}
            ).status_code
            == 403
        )
        r = c.post(
            "/login",
            content=f"token={TOKEN}".encode(),
            follow_redirects=False,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 303 and "httponly" in r.headers["set-cookie"].lower()
        assert c.get("/uploads/p.txt").content == b"secret"  # the cookie reads ...
        assert c.post("/upload?filename=q.txt", content=b"x").status_code == 401  # ... but never writes


def test_server_without_a_token_is_read_only(tmp_path, ledger):
    with TestClient(create_app(ledger, uploads_dir=tmp_path / "u")) as c:
        r = c.post("/upload?filename=a.txt", content=b"x", headers=AUTH)
        assert r.status_code == 403 and "without a token" in r.json()["error"]


# -- a real server: seed 003's curl workflow, faults, push ---------------------------------------
@pytest.fixture
def server(tmp_path, ledger):
    srv = ServerProcess(ledger, uploads_dir=tmp_path / "uploads", token=TOKEN, max_upload=64 * 2**20)
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_seed_003_curl_workflow(server, tmp_path):
    report = tmp_path / "AWDE_0617_0618_F1_INVESTIGATION.md"
    report.write_text("# AWDE 0617/0618 F1 异常排查\n结论：0617、0618 没有 F1 崩掉。\n", encoding="utf-8")
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "-X",
            "POST",
            "-H",
            "Content-Type: text/markdown; charset=utf-8",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--data-binary",
            f"@{report}",
            f"{server.url}/upload?filename={report.name}",
        ],
        capture_output=True,
        timeout=30,
    )
    doc = orjson.loads(out.stdout)
    assert doc["ok"] and doc["sha256"] == sha(report.read_bytes())
    head = subprocess.run(
        ["curl", "-sS", "-I", f"{server.url}/uploads/{report.name}"], capture_output=True, text=True, timeout=30
    ).stdout
    lines = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines()[1:] if ":" in line)}
    assert head.startswith("HTTP/1.1 200")
    assert lines["content-length"] == str(report.stat().st_size)
    assert lines["etag"] == f'"{sha(report.read_bytes())}"'
    assert lines["content-type"] == "text/markdown; charset=utf-8"


def partial_upload(srv: ServerProcess, name: str, total: int, sent: int) -> socket.socket:
    """Open a raw upload of ``total`` bytes and send only ``sent`` of them."""
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    sock.sendall(
        f"POST /upload?filename={name} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {total}\r\n\r\n".encode()
    )
    sock.sendall(b"p" * sent)
    return sock


def wait_for(predicate, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_client_that_dies_mid_upload_leaves_nothing(server, tmp_path):
    uploads = tmp_path / "uploads"
    sock = partial_upload(server, "half.bin", 4 * 2**20, 2**20)
    wait_for(lambda: temp_files(uploads), "the temporary file")
    assert visible(uploads) == []  # in flight: only a hidden temporary file
    sock.close()
    wait_for(lambda: not temp_files(uploads), "the temporary file to be removed")
    assert visible(uploads) == []
    # the server is fine and the name is free
    r = labledger.server.push_file(_file(tmp_path, "half.bin", 1000), server.url, token=TOKEN)
    assert r["verified"]


def _file(tmp_path: Path, name: str, size: int, seed: int = 0) -> Path:
    path = tmp_path / "src" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(hashlib.sha256(f"{seed}".encode()).digest() * (size // 32) + b"!" * (size % 32))
    return path


def test_server_killed_mid_upload_leaves_no_partial_file_and_a_restart_serves_every_acknowledged_one(tmp_path, ledger):
    uploads = tmp_path / "uploads"
    srv = ServerProcess(ledger, uploads_dir=uploads, token=TOKEN).start()
    acknowledged = {}
    try:
        for i in range(12):
            path = _file(tmp_path, f"ack-{i}.bin", 10_000 + 7919 * i, seed=i)
            doc = labledger.server.push_file(path, srv.url, token=TOKEN)
            acknowledged[path.name] = doc["sha256"]
        sock = partial_upload(srv, "torn.bin", 8 * 2**20, 3 * 2**20)
        wait_for(lambda: any(p.stat().st_size > 0 for p in uploads.glob(".upload-*")), "bytes on disk")
        srv.kill()
        sock.close()
    finally:
        srv.kill()
    assert "torn.bin" not in visible(uploads)
    assert sorted(visible(uploads)) == sorted(acknowledged)
    assert temp_files(uploads), "the killed server's temporary file should still be there (hidden)"
    with ServerProcess(ledger, uploads_dir=uploads, token=TOKEN) as again:
        assert temp_files(uploads) == []  # removed at start: its process is gone
        import httpx

        assert httpx.head(f"{again.url}/uploads/torn.bin").status_code == 404
        for name, digest in acknowledged.items():
            r = httpx.get(f"{again.url}/uploads/{name}")
            assert r.status_code == 200 and sha(r.content) == digest == r.headers["etag"].strip('"')


def test_push_verifies_the_sha256_and_reports_refusals(server, tmp_path):
    path = _file(tmp_path, "model-card.md", 3 * 2**20 + 17)
    runner = CliRunner()
    result = runner.invoke(main, ["push", str(path), "--to", server.url, "--token", TOKEN])
    assert result.exit_code == 0, result.output
    assert f"sha256   {sha(path.read_bytes())} (verified)" in result.output
    assert f"{server.url}/uploads/model-card.md" in result.output
    result = runner.invoke(main, ["push", str(path), "--to", server.url, "--token", TOKEN])
    assert result.exit_code == 1 and "409" in result.output and "overwrite" in result.output
    result = runner.invoke(
        main,
        ["push", str(path), "--to", server.url + "/upload", "--overwrite", "--json"],
        env={"LABLEDGER_TOKEN": TOKEN},
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["verified"] is True and doc["replaced"] is True and doc["size"] == path.stat().st_size
    result = runner.invoke(main, ["push", str(path), "--to", server.url, "--token", "wrong", "--name", "x.md"])
    assert result.exit_code == 1 and "403" in result.output
    result = runner.invoke(main, ["push", str(path), "--to", "ftp://example"])
    assert result.exit_code == 1 and "http(s) URL" in result.output


@pytest.mark.parametrize(
    "args,code,expected",
    [
        (["serve", "--host", "0.0.0.0"], 2, "without a token"),
        (["serve", "--host", "192.0.2.10", "--port", "9"], 2, "without a token"),
        (["serve", "--private"], 2, "--private needs a token"),
        (["serve", "--max-upload", "lots", "--token", "t"], 2, "is not a size"),
    ],
)
def test_serve_refuses_unsafe_settings(tmp_path, args, code, expected):
    result = CliRunner().invoke(main, [*args, "--ledger", str(tmp_path / "ledger")], env={"LABLEDGER_TOKEN": ""})
    assert result.exit_code == code, result.output
    assert expected in result.output


def test_serve_binds_loopback_by_default_and_refuses_foreign_host_headers(tmp_path, ledger):
    port = ServerProcess(ledger).port
    env = {**os.environ, "LABLEDGER_TOKEN": ""}
    proc = subprocess.Popen(
        ["labledger", "serve", "--ledger", str(ledger), "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        import httpx

        def up():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, "labledger serve to start", 30)
        assert httpx.get(f"http://127.0.0.1:{port}/api").json()["writes"] is False
        rebinding = httpx.get(f"http://127.0.0.1:{port}/api/runs", headers={"Host": f"evil.example:{port}"})
        assert rebinding.status_code == 400 and rebinding.json()["ok"] is False
        listening = (
            subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
            if shutil.which("ss")
            else ""
        )
        for line in listening.splitlines():  # State Recv-Q Send-Q Local:Port Peer:Port
            assert line.split()[3] == f"127.0.0.1:{port}", line
    finally:
        proc.terminate()
        proc.wait(timeout=20)
