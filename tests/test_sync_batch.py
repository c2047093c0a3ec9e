"""``labledger sync`` of many small files (#46): batches of files in one request, each checked by its
digest before any is written, fsynced together, then renamed into place.

Real servers (uvicorn in a child process on 127.0.0.1, stopped by the test), real ledgers in
tmp_path. The crash cases are made deterministic where they can be (a batch stopped between its
steps in this process) and real where they must be (``kill -9`` of a ``labledger sync``).
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from server_process import ServerProcess

import labledger
from labledger.server.sync_client import ledger_origin, sync_runs
from labledger.store.ledger import Ledger
from labledger.store.manifest import CHUNK, digest, run_files
from labledger.store.verify import verify_ledger

TOKEN = "sync-batch-token-0123456789"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _same_runs(local: Path, server_root: Path, run_ids: list[str]) -> None:
    """Every file of every run is on the server byte for byte."""
    for rid in run_ids:
        a, b = local / "runs" / rid, server_root / "runs" / rid
        files = run_files(a)
        assert files == run_files(b), rid
        for rel in files:
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), (rid, rel)


def _images_run(ledger: Path | Ledger, name: str, files: int, seed: int = 0, size: int = 1800) -> str:
    rng = random.Random(seed)
    with labledger.start_run(name, ledger=ledger) as run:
        run.log(1, loss=0.5)
        for k in range(files):
            run.log_file(f"images/step-{k // 16:04d}/img-{k % 16:02d}.png", rng.randbytes(size))
    return run.id


def _batch_body(files: list[tuple[str, bytes]], *, wrong: str | None = None) -> bytes:
    """A batch body of whole files; the file named ``wrong`` states the digest of other bytes."""
    head = []
    for rel, data in files:
        stated = data + b"!" if rel == wrong else data
        chunks = [hashlib.sha256(stated).hexdigest()] if stated else []
        head.append({"path": rel, "offset": 0, "size": len(data), "digest": digest(chunks)})
    h = orjson.dumps({"files": head})
    return struct.pack(">I", len(h)) + h + b"".join(d for _, d in files)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server, served as ``labledger serve`` serves (its protocol, raw bodies offered)."""
    tmp = tmp_path_factory.mktemp("sync-batch-server")
    root = tmp / "server"
    Ledger(root, create=True).close()
    proc = ServerProcess(root, uploads_dir=tmp / "uploads", token=TOKEN, serve_protocol=30.0).start()
    proc.root = root  # type: ignore[attr-defined]
    yield proc
    proc.stop()


def _spy_calls(monkeypatch) -> tuple[list[str], list[str]]:
    """Record the paths of the client's JSON/batch calls and of its chunked PUTs."""
    from labledger.server import sync_client as sc

    calls: list[str] = []
    puts: list[str] = []
    call, put = sc._Session.call, sc._Session.put_file

    def spy_call(self, method, path, **kw):
        calls.append(path)
        return call(self, method, path, **kw)

    def spy_put(self, path, *a, **kw):
        puts.append(path)
        return put(self, path, *a, **kw)

    monkeypatch.setattr(sc._Session, "call", spy_call)
    monkeypatch.setattr(sc._Session, "put_file", spy_put)
    return calls, puts


def test_a_batch_of_many_small_files_arrives_verified(tmp_path, server, monkeypatch):
    """1,100 small files of one run go in three requests (at most 512 files each), a checkpoint
    beside them by the chunked PUT; every file arrives byte for byte, the server's manifest holds
    each one's chunk hash, `verify` passes there, and a second sync sends nothing."""
    local = tmp_path / "local"
    rid = _images_run(local, "images", 1100)
    big = tmp_path / "big.pt"
    big.write_bytes(os.urandom(CHUNK + 5))
    with labledger.start_run("with-checkpoint", ledger=local) as run:
        run.log_file("a.txt", b"a")
        run.log_checkpoint(big, copy=True)
    calls, puts = _spy_calls(monkeypatch)
    report = sync_runs(local, server.url, token=TOKEN)
    batches = [c for c in calls if c.endswith("/batch")]
    assert [c for c in calls if c.endswith("/state")] == ["/api/sync/state"]  # one state request for both runs
    assert len([b for b in batches if rid in b]) == 3
    assert len(puts) == 1 and "checkpoints" in puts[0]
    ids = [rid, run.id]
    assert report.files_sent == sum(len(run_files(local / "runs" / i)) for i in ids)
    _same_runs(local, server.root, ids)
    doc = orjson.loads((server.root / "runs" / rid / ".sync.json").read_bytes())
    for rel in run_files(local / "runs" / rid):
        data = (local / "runs" / rid / rel).read_bytes()
        assert doc["files"][rel]["chunks"] == ([hashlib.sha256(data).hexdigest()] if data else []), rel
    assert not list((server.root / "runs" / rid / ".sync-parts").iterdir())  # every part renamed into place
    with Ledger(server.root) as book:
        assert verify_ledger(book, ids).ok
    calls.clear()
    again = sync_runs(local, server.url, token=TOKEN)
    assert (again.files_sent, again.bytes_sent) == (0, 0) and not [c for c in calls if c.endswith("/batch")]
    assert sync_runs(local, server.url, token=TOKEN, dry_run=True).pending == {}


def test_a_file_in_a_batch_whose_digest_differs_is_refused_and_nothing_is_kept(tmp_path, server):
    """One file of three states a digest its bytes do not have: the batch is refused (422 naming
    the file) and none of the three is on the server, not even as a part file; a batch that is
    cut short, or breaks a limit, is refused the same way. The right batch then stores all."""
    origin = ledger_origin(tmp_path / "l")
    rid = "20260101-000000-0123456789ab"
    url = f"{server.url}/api/sync/runs/{rid}/batch"
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Labledger-Origin": origin}
    files = [("a.txt", b"alpha\n"), ("files/b.bin", os.urandom(3000)), ("files/deep/c.bin", os.urandom(10))]
    run_dir = server.root / "runs" / rid

    def nothing_kept() -> None:
        for rel, _ in files:
            assert not (run_dir / rel).exists(), rel
        parts = run_dir / ".sync-parts"
        assert not parts.exists() or not list(parts.iterdir())
        state = httpx.post(server.url + "/api/sync/state", json={"runs": [rid]}, headers=headers).json()["runs"][rid]
        assert state is None or state["files"] == {}

    r = httpx.post(url, content=_batch_body(files, wrong="files/b.bin"), headers=headers)
    assert r.status_code == 422 and "files/b.bin" in r.json()["error"] and "nothing of the batch" in r.json()["error"]
    nothing_kept()
    body = _batch_body(files)
    # a client killed mid-body: the server sees the body end early and writes nothing
    head = (
        f"POST /api/sync/runs/{rid}/batch HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nX-Labledger-Origin: {origin}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head + body[: len(body) - 100])
        sock.shutdown(socket.SHUT_WR)
        sock.recv(4096)
    nothing_kept()
    h = orjson.loads(body[4 : 4 + struct.unpack(">I", body[:4])[0]])
    too_many = {"files": [{**h["files"][0], "path": f"f{i}"} for i in range(513)]}
    raw = orjson.dumps(too_many)
    r = httpx.post(url, content=struct.pack(">I", len(raw)) + raw + b"alpha\n" * 513, headers=headers)
    assert r.status_code == 400 and "512" in r.json()["error"]
    big = [("big.bin", os.urandom(CHUNK + 1))]
    assert httpx.post(url, content=_batch_body(big), headers=headers).status_code == 413
    wrong_origin = {**headers, "X-Labledger-Origin": "ef" * 16}
    assert httpx.post(url, content=body, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 400
    nothing_kept()
    r = httpx.post(url, content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert [f["path"] for f in r.json()["files"]] == [rel for rel, _ in files]
    for rel, data in files:
        assert (run_dir / rel).read_bytes() == data
    assert httpx.post(url, content=body, headers=wrong_origin).status_code == 409  # owned by the first origin
    assert not list((run_dir / ".sync-parts").iterdir())  # every part renamed, none left by the refusal


def _killed_after_record(tmp_path: Path, monkeypatch, *, files: int, renames: int):
    """A batch of a run of ``files`` files stopped where a kill -9 of the server can stop it: after
    the manifest records the files, ``renames`` of them renamed into place. Returns ``(local
    ledger, server root, the run's server folder, [(path, bytes)])``."""
    from labledger.server import sync as S

    local = tmp_path / "local"
    rid = _images_run(local, "crash", files)
    root = tmp_path / "server"
    Ledger(root, create=True).close()
    run_dir = root / "runs" / rid
    src = local / "runs" / rid
    sent = [(rel, (src / rel).read_bytes()) for rel in run_files(src)]
    body = bytearray(_batch_body(sent))
    real = os.replace
    done = []

    def killed(a, b):
        if len(done) == renames:
            raise KeyboardInterrupt("killed")
        done.append(b)
        return real(a, b)

    monkeypatch.setattr(S.os, "replace", killed)
    doc = S._owned(run_dir, ledger_origin(local), "h", create=True)
    with pytest.raises(KeyboardInterrupt):
        plans = S._verify_batch(run_dir, doc, S._batch_entries(body, 1 << 40), memoryview(body))
        S._commit_batch(run_dir, doc, S._write_batch(run_dir, plans))
    monkeypatch.setattr(S.os, "replace", real)
    assert len(done) == renames
    return local, root, run_dir, sent


def test_a_server_killed_between_a_batchs_record_and_its_renames_settles_it(tmp_path, server, monkeypatch):
    """The batch's steps stopped where a kill -9 of the server can stop them: after the manifest
    records the files and before (some of) the renames. The state request finishes the renames
    (the part files were fsynced and recorded), so nothing reads as changed on the server, and
    the next sync sends nothing. Stopped earlier (the record files appended in place, the
    manifest not yet written), the appended record files read as grown, not changed, and the
    whole files are sent again."""
    from labledger.server import sync as S

    local, root, run_dir, files = _killed_after_record(tmp_path, monkeypatch, files=40, renames=7)
    rid = run_dir.name
    src = local / "runs" / rid
    assert not (run_dir / files[-1][0]).exists()
    state = S.run_state(run_dir)
    assert all(not f["changed"] for f in state["files"].values()) and set(state["files"]) == {r for r, _ in files}
    assert S.settle(run_dir, S.read_manifest(run_dir))
    for rel, data in files:
        assert (run_dir / rel).read_bytes() == data
    assert S._scan_parts(run_dir) == ({}, {})  # every part file renamed into place
    # a batch's part file no manifest names (a batch a crash cut off before its manifest) goes once
    # it is old; a young one may be a batch waiting for the run's lock
    old, young = (run_dir / ".sync-parts" / f"files%2Fx{i}.bin~0123abcd.bpart" for i in range(2))
    old.write_bytes(b"x")
    young.write_bytes(b"y")
    os.utime(old, (time.time() - S.STALE_PART_S - 60,) * 2)
    assert not S.settle(run_dir, S.read_manifest(run_dir))
    assert not old.exists() and young.exists()
    young.unlink()

    # earlier: a record file appended in place, the manifest not written
    srv = ServerProcess(root, uploads_dir=tmp_path / "up", token=TOKEN).start()
    try:
        assert sync_runs(local, srv.url, token=TOKEN).files_sent == 0  # settled already: nothing to send
        with (src / "metrics.jsonl").open("ab") as f:
            f.write(b'{"step": 2, "loss": 0.25}\n')
        (src / "files" / "new.txt").write_bytes(b"new\n")
        srv.kill()
        # where a batch stops when killed before its manifest: a record file's new bytes written
        # in place, a new file's part written (here cut short)
        with (run_dir / "metrics.jsonl").open("ab") as f:
            f.write(b'{"step": 2, "loss": 0.25}\n')
        (run_dir / ".sync-parts" / "files%2Fnew.txt.part").write_bytes(b"ne")
        state = S.run_state(run_dir)
        assert not state["files"]["metrics.jsonl"]["changed"]  # it only grew
        srv = ServerProcess(root, port=srv.port, uploads_dir=tmp_path / "up", token=TOKEN).start()
        report = sync_runs(local, srv.url, token=TOKEN)
        assert report.files_sent == 1  # files/new.txt; metrics.jsonl is there already
        _same_runs(local, root, [rid])
        with Ledger(root) as book:
            assert verify_ledger(book, [rid]).ok
    finally:
        srv.stop()


def test_runs_synced_at_once_all_arrive_with_their_index_rows(tmp_path, server, monkeypatch):
    """The client syncs several runs at once (WORKERS connections); the server takes their batches
    and index rows at once too, each index write on its worker thread's own connection (two at
    once on one SQLite connection were a 500: a transaction within a transaction)."""
    from labledger.server import sync_client as sc

    monkeypatch.setattr(sc, "WORKERS", 4)
    local = tmp_path / "local"
    book = Ledger(local, create=True)
    ids = [_images_run(book, f"p{i}", 6, seed=i) for i in range(16)]
    book.close()
    calls, _ = _spy_calls(monkeypatch)
    report = sync_runs(local, server.url, token=TOKEN)
    assert sorted(report.runs_sent) == sorted(ids)
    assert len([c for c in calls if c.endswith("/index")]) == 16
    _same_runs(local, server.root, ids)
    with Ledger(server.root) as srv_book:
        assert {i.id for i in srv_book.runs()} >= set(ids)
        assert verify_ledger(srv_book, ids).ok


def test_an_older_server_without_batches_gets_every_file_by_the_chunked_put(tmp_path, server, monkeypatch):
    """A server of the previous version names no batch limits in its state answer: the client
    sends every file by the chunked PUT (the previous client's protocol, which the server still
    takes), and the copy is the same."""
    from labledger.server import sync_client as sc

    local = tmp_path / "local"
    rid = _images_run(local, "old", 30)
    calls, puts = _spy_calls(monkeypatch)
    real = sc._Session.call

    def old_server(self, method, path, **kw):
        answer = real(self, method, path, **kw)
        answer.pop("batch", None)
        return answer

    monkeypatch.setattr(sc._Session, "call", old_server)
    report = sync_runs(local, server.url, token=TOKEN)
    assert not [c for c in calls if c.endswith("/batch")]
    assert len(puts) == report.files_sent == len(run_files(local / "runs" / rid))
    _same_runs(local, server.root, [rid])


def test_a_live_record_file_goes_incrementally_in_a_batch(tmp_path, server, monkeypatch):
    """A record file past a chunk, growing: the next sync sends only its last chunk onwards, in a
    batch (appended in place on the server after the prefix it checks)."""
    local = tmp_path / "local"
    run = labledger.start_run("live", ledger=local)
    try:
        for i in range(1, 40_001):
            run.log(i, loss=1.0 / i, a=0.123456789)
        run.sync()
        first = sync_runs(local, server.url, token=TOKEN)
        size = (local / "runs" / run.id / "metrics.jsonl").stat().st_size
        assert size > CHUNK and first.bytes_sent >= size
        for i in range(40_001, 40_101):
            run.log(i, loss=1.0 / i, a=0.123456789)
        run.sync()
        calls, _ = _spy_calls(monkeypatch)
        second = sync_runs(local, server.url, token=TOKEN)
        assert 0 < second.bytes_sent <= CHUNK + 64 * 1024 and any(c.endswith("/batch") for c in calls)
    finally:
        run.finish()
    sync_runs(local, server.url, token=TOKEN)
    _same_runs(local, server.root, [run.id])


def test_a_state_request_does_not_wait_for_an_upload_under_way(tmp_path, server):
    """While a large file of a run is being uploaded (its part file on the server, the run's lock
    held by the upload), a state request about that run answers at once: the pass that finishes
    a crashed batch's renames does not wait for a write under way."""
    from urllib.parse import quote

    origin = ledger_origin(tmp_path / "l")
    rid = "20260101-000000-fedcba987654"
    rel = "checkpoints/big.bin"
    size = 8 * CHUNK
    head = (
        f"PUT /api/sync/runs/{rid}/files?path={quote(rel, safe='')}&offset=0&size={size} HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"X-Labledger-Origin: {origin}\r\nContent-Length: {size}\r\n\r\n"
    ).encode()
    part = server.root / "runs" / rid / ".sync-parts" / (quote(rel, safe="") + ".part")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head + os.urandom(5 * CHUNK))  # more than a group of the raw read: written
        deadline = time.monotonic() + 20
        while not (part.exists() and part.stat().st_size >= CHUNK) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert part.stat().st_size >= CHUNK
        t0 = time.monotonic()
        r = httpx.post(
            server.url + "/api/sync/state", json={"runs": [rid]}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert r.status_code == 200 and time.monotonic() - t0 < 5
        assert r.json()["runs"][rid]["parts"][rel]["size"] >= CHUNK


def _kill_mid_sync(local: Path, server_root: Path, url: str, seed: int, kill) -> list[str]:
    """Log two new runs of small files, start `labledger sync` of the ledger, and once the
    server holds the first of them, call ``kill`` at a random moment of the next 0.3 s."""
    rng = random.Random(seed)
    ids = [_images_run(local, f"s{seed}-{i}", 300, seed=seed * 10 + i) for i in range(2)]
    env = {**os.environ, "PYTHONPATH": SRC, "LABLEDGER_TOKEN": TOKEN}
    child = subprocess.Popen(
        [sys.executable, "-m", "labledger", "sync", "--to", url, "--ledger", str(local)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (server_root / "runs" / ids[0]).exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.002)
    time.sleep(rng.uniform(0, 0.3))
    kill(child)
    child.wait(timeout=60)
    return ids


@pytest.mark.slow
def test_a_server_started_after_a_kill_between_record_and_renames_finishes_them_at_start(tmp_path, monkeypatch):
    """The batch stopped after the manifest recorded its files and before the renames; the next
    server start puts them in place (no sync of the run needed)."""
    from labledger.server import sync as S

    _, root, run_dir, files = _killed_after_record(tmp_path, monkeypatch, files=24, renames=3)
    rid = run_dir.name
    assert S.unsettled(root / "runs") == [rid]
    srv = ServerProcess(root, uploads_dir=tmp_path / "up", token=TOKEN).start()
    try:
        deadline = time.monotonic() + 20
        while S.unsettled(root / "runs") and time.monotonic() < deadline:
            time.sleep(0.05)
        for rel, data in files:
            assert (run_dir / rel).read_bytes() == data
        assert S._scan_parts(run_dir) == ({}, {}) and S.unsettled(root / "runs") == []
    finally:
        srv.stop()


@pytest.mark.timeout(360)  # ten syncs started and killed: a minute quiet, more on a loaded machine
def test_sync_of_many_small_files_killed_at_random_moments_resumes_and_verifies(tmp_path, server):
    """kill -9 of `labledger sync` at ten random moments while it sends runs of small files in
    batches: the next sync completes, every file is the local one, and nothing is pending."""
    local = tmp_path / "local"
    ids: list[str] = []
    for seed in range(10):
        ids += _kill_mid_sync(local, server.root, server.url, seed, lambda child: child.send_signal(signal.SIGKILL))
    sync_runs(local, server.url, token=TOKEN)
    _same_runs(local, server.root, ids)
    assert sync_runs(local, server.url, token=TOKEN, dry_run=True).pending == {}
    with Ledger(server.root) as book:
        assert verify_ledger(book, ids).ok


@pytest.mark.slow
@pytest.mark.timeout(360)  # ten servers killed and started again: a minute quiet, more on a loaded machine
def test_a_server_killed_at_random_moments_of_batches_resumes_and_verifies(tmp_path):
    """kill -9 of the server at ten random moments while a sync sends runs of small files in
    batches; after each, the server starts again. Then one sync completes, with every file the
    local one, no file read as changed on the server, and nothing pending."""
    local = tmp_path / "local"
    root = tmp_path / "server"
    Ledger(root, create=True).close()
    srv = ServerProcess(root, uploads_dir=tmp_path / "up", token=TOKEN, serve_protocol=30.0).start()
    ids: list[str] = []
    try:
        for seed in range(10):
            ids += _kill_mid_sync(local, root, srv.url, seed, lambda _child: srv.kill())
            srv = ServerProcess(
                root, port=srv.port, uploads_dir=tmp_path / "up", token=TOKEN, serve_protocol=30.0
            ).start()
        sync_runs(local, srv.url, token=TOKEN)
        _same_runs(local, root, ids)
        assert sync_runs(local, srv.url, token=TOKEN, dry_run=True).pending == {}
        with Ledger(root) as book:
            assert verify_ledger(book, ids).ok
    finally:
        srv.stop()
