"""Run files on S3-compatible object storage (#18), against a real S3-protocol server: ``moto`` in
server mode on 127.0.0.1 (tests/moto_s3.py's fixture, started per module), spoken to by boto3 over HTTP
with the endpoint and credentials from the standard AWS variables."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from moto_s3 import s3  # noqa: F401 (fixture)
from postgres_server import pg_url, postgres_cluster  # noqa: F401 (fixtures)

import labledger
from labledger.cli import main
from labledger.errors import StorageError
from labledger.store.manifest import CHUNK, run_files
from labledger.store.objects import ObjectStore, read_file, restore_run, sync_to_objects

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_runs_go_to_object_storage_as_chunks_and_come_back_byte_for_byte(tmp_path, s3):
    local = tmp_path / "local"
    ck = tmp_path / "ck.pt"
    ck.write_bytes(os.urandom(3 * CHUNK + 17))
    with labledger.start_run("r", ledger=local) as run:
        for i in range(1, 2001):
            run.log(i, loss=1.0 / i)
        run.log_checkpoint(ck, copy=True)
    url = "s3://runs/team/a"
    first = sync_to_objects(local, url)
    assert first.runs_sent == 1 and first.chunks_sent >= 4
    again = sync_to_objects(local, url)
    assert (again.chunks_sent, again.runs_sent) == (0, 0)
    dest = tmp_path / "restored"
    files = restore_run(ObjectStore(url), run.id, dest)
    assert files == sorted(run_files(local / "runs" / run.id))
    for rel in files:
        assert _sha(dest / rel) == _sha(local / "runs" / run.id / rel)


def test_a_live_log_ships_as_new_immutable_chunks_and_damage_is_caught_on_read(tmp_path, s3):
    local = tmp_path / "local"
    script = textwrap.dedent(f"""
        import sys, labledger
        run = labledger.start_run("live", ledger={str(local)!r})
        print(run.id, flush=True)
        for i in range(1, 40001):
            run.log(i, loss=1.0 / i, a=0.123456789, b=1234.56789)
        print("half", flush=True)
        sys.stdin.readline()
        for i in range(40001, 60001):
            run.log(i, loss=1.0 / i, a=0.123456789, b=1234.56789)
        run.finish()
        print("done", flush=True)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        # the JSONL's tail is what is shipped incrementally: not compacted at finish (#19)
        env={**os.environ, "PYTHONPATH": SRC, "LABLEDGER_COMPACT_MIN_BYTES": "off"},
    )
    run_id = proc.stdout.readline().strip()
    assert proc.stdout.readline().strip() == "half"
    url = "s3://runs/team/live"
    first = sync_to_objects(local, url)
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"
    proc.wait(timeout=30)
    second = sync_to_objects(local, url)
    size = (local / "runs" / run_id / "metrics.jsonl").stat().st_size
    assert second.bytes_sent < size - (first.bytes_sent - 2 * CHUNK)  # the full chunks were not sent again
    store = ObjectStore(url)
    stitched = b"".join(read_file(store, run_id, "metrics.jsonl"))
    assert stitched == (local / "runs" / run_id / "metrics.jsonl").read_bytes()
    # damage one chunk object in the store: reading names the file and the chunk
    sha = store.manifest(run_id)["files"]["metrics.jsonl"]["chunks"][1]
    store.client.put_object(Bucket="runs", Key=store.key("chunks", sha), Body=b"not the bytes")
    with pytest.raises(StorageError, match=r"metrics\.jsonl: chunk 1 .* damaged"):
        b"".join(read_file(store, run_id, "metrics.jsonl"))


def test_a_superseded_last_chunk_is_deleted_once_the_manifest_no_longer_names_it(tmp_path, s3):
    """A live record file's short last chunk (its tail) is replaced when the file grows: the old one
    is deleted after the new manifest is written, both by ``sync --to s3://`` and by a server that
    keeps its runs in object storage, and what is stored still reads back byte for byte."""
    from server_process import ServerProcess

    from labledger.server.sync_client import sync_runs
    from labledger.store.ledger import Ledger
    from labledger.store.objects import tails

    root = tmp_path / "server"
    Ledger(root, create=True).close()
    served = "s3://runs/tails-served"
    srv = ServerProcess(root, uploads_dir=tmp_path / "up", token=TOKEN, artifacts=served).start()
    stores = [ObjectStore("s3://runs/tails-direct"), ObjectStore(served)]
    local = tmp_path / "local"

    def stored_tails(store: ObjectStore, run_id: str) -> set[str]:
        listed = store.client.list_objects_v2(Bucket="runs", Prefix=store.key("runs", run_id, "tails") + "/")
        return {o["Key"] for o in listed.get("Contents", [])}

    def sync_both(run_id: str) -> list[str]:
        sync_to_objects(local, stores[0].url)
        sync_runs(local, srv.url, token=TOKEN)
        out = []
        for store in stores:
            doc = store.manifest(run_id)
            assert stored_tails(store, run_id) == tails(doc)  # exactly the tails the manifest names
            assert (
                b"".join(read_file(store, run_id, "metrics.jsonl"))
                == (local / "runs" / run_id / "metrics.jsonl").read_bytes()
            )
            out.append(doc["files"]["metrics.jsonl"]["tail"])
        return out

    try:
        run = labledger.start_run("t", ledger=local)
        for i in range(1, 16001):  # metrics.jsonl: one full chunk and a tail
            run.log(i, loss=1.0 / i)
        first = sync_both(run.id)
        reading = read_file(stores[0], run.id, "metrics.jsonl")
        head = next(reading)  # a reader that has the old manifest and its first chunk
        for i in range(16001, 16101):
            run.log(i, loss=1.0 / i)
        second = sync_both(run.id)
        assert all(a != b for a, b in zip(first, second))  # the first tails are gone (checked above)
        # the reader finds its tail gone and goes on with the newer manifest
        assert b"".join([head, *reading]) == (local / "runs" / run.id / "metrics.jsonl").read_bytes()
        run.finish()  # metrics.jsonl (> 1 MiB) is compacted into metrics.jsonl.zst
        assert not (local / "runs" / run.id / "metrics.jsonl").exists()
        sync_to_objects(local, stores[0].url)
        sync_runs(local, srv.url, token=TOKEN)
        for store in stores:  # both hold the compacted file only: the plain one and its tail are gone
            _stored_equals_local(store, local, [run.id])
            assert stored_tails(store, run.id) == tails(store.manifest(run.id))
        assert not (root / "runs" / run.id / "metrics.jsonl").exists()
    finally:
        srv.stop()


def test_the_cli_syncs_to_s3(tmp_path, s3):
    local = tmp_path / "local"
    with labledger.start_run("r", ledger=local) as run:
        run.log(1, loss=0.5)
    out = CliRunner().invoke(main, ["sync", "--to", "s3://runs/cli", "--ledger", str(local)])
    assert out.exit_code == 0, out.output
    assert "Synced 1 run(s) to s3://runs/cli" in out.output
    out = CliRunner().invoke(main, ["sync", "--to", "s3://runs/cli", "--ledger", str(local), "--watch"])
    assert out.exit_code == 2
    out = CliRunner().invoke(main, ["sync", "--to", "s3://no-such-bucket/x", "--ledger", str(local)])
    assert out.exit_code == 1 and "s3://no-such-bucket/x" in out.output and "Traceback" not in out.output


TOKEN = "s3-serve-token-0123456789"


def _stored_equals_local(store: ObjectStore, local: Path, run_ids: list[str]) -> None:
    """Every file of every run is in the store byte for byte (stitched from its chunks or its object)."""
    for rid in run_ids:
        folder = local / "runs" / rid
        files = run_files(folder)
        assert sorted(store.manifest(rid)["files"]) == sorted(files), rid
        for rel in files:
            got = hashlib.sha256(b"".join(read_file(store, rid, rel))).hexdigest()
            assert got == _sha(folder / rel), (rid, rel)


def test_serve_keeps_synced_runs_in_object_storage_and_streams_them_back_checked(tmp_path, s3):
    import httpx
    from server_process import ServerProcess

    from labledger.server.sync_client import sync_runs
    from labledger.store.ledger import Ledger

    root = tmp_path / "server"
    Ledger(root, create=True).close()
    url = "s3://runs/served"
    srv = ServerProcess(root, uploads_dir=tmp_path / "up", token=TOKEN, artifacts=url).start()
    try:
        local = tmp_path / "local"
        ck = tmp_path / "ck.pt"
        ck.write_bytes(os.urandom(16 * CHUNK + 5))  # large: one object, uploaded in parts
        with labledger.start_run("r", ledger=local) as run:
            for i in range(1, 3001):
                run.log(i, loss=1.0 / i)
            run.log_checkpoint(ck, copy=True)
        first = sync_runs(local, srv.url, token=TOKEN)
        assert first.files_sent >= 4
        store = ObjectStore(url)
        _stored_equals_local(store, local, [run.id])
        entries = store.manifest(run.id)["files"]
        big = next(rel for rel in entries if rel.startswith("checkpoints/"))
        assert entries[big].get("object") and not entries["metrics.jsonl"].get("object")
        got = httpx.get(f"{srv.url}/api/sync/runs/{run.id}/files", params={"path": big}, timeout=60)
        assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == _sha(ck)
        assert sync_runs(local, srv.url, token=TOKEN).bytes_sent == 0
        # a spool that lost the run (a new disk, a second server) takes it back from the store at
        # start, byte for byte and still owned by this ledger: the next sync sends no file again
        srv.stop()
        shutil.rmtree(root / "runs" / run.id)
        srv = ServerProcess(root, port=srv.port, uploads_dir=tmp_path / "up", token=TOKEN, artifacts=url).start()
        deadline = time.monotonic() + 30
        while not (root / "runs" / run.id / ".sync.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for rel in run_files(local / "runs" / run.id):
            assert _sha(root / "runs" / run.id / rel) == _sha(local / "runs" / run.id / rel), rel
        assert httpx.get(f"{srv.url}/api/runs/{run.id}", timeout=30).json()["run"]["name"] == "r"
        assert sync_runs(local, srv.url, token=TOKEN).bytes_sent == 0
        # damage the object in the store: a read is refused naming the file and chunk, never served as good
        store.client.put_object(Bucket="runs", Key=entries[big]["object"], Body=b"not the bytes")
        bad = httpx.get(f"{srv.url}/api/sync/runs/{run.id}/files", params={"path": big}, timeout=60)
        assert bad.status_code == 502 and f"{big}: chunk 0 is damaged" in bad.json()["error"]
    finally:
        srv.stop()


@pytest.mark.slow
def test_two_machines_watch_into_a_postgres_server_with_runs_in_object_storage(tmp_path, s3, pg_url, monkeypatch):
    from server_process import ServerProcess

    from labledger.server.sync_client import sync_runs
    from labledger.store.ledger import Ledger

    monkeypatch.setenv("LABLEDGER_SPOOL", str(tmp_path / "spool"))
    url = "s3://runs/team-pg"
    srv = ServerProcess(pg_url, artifacts=url, uploads_dir=tmp_path / "up", token=TOKEN).start()
    env = {**os.environ, "PYTHONPATH": SRC, "LABLEDGER_TOKEN": TOKEN}
    script = textwrap.dedent("""
        import sys, labledger
        for r in range(2):
            with labledger.start_run(f"m-{r}", ledger=sys.argv[1]) as run:
                for i in range(1, 3001):
                    run.log(i, loss=1.0 / i)
                    if i == 1500:
                        print("half", flush=True)
    """)
    machines = [tmp_path / "m1", tmp_path / "m2"]
    try:
        watch = []
        for m in machines:  # logging and --watch at once, two folders, two processes
            log = subprocess.Popen([sys.executable, "-c", script, str(m)], env=env, stdout=subprocess.PIPE, text=True)
            assert log.stdout.readline().strip() == "half"
            w = [sys.executable, "-m", "labledger", "sync", "--to", srv.url, "--watch", "--interval", "0.2"]
            watch.append((log, subprocess.Popen([*w, "--ledger", str(m)], env=env)))
        for log, _ in watch:
            assert log.wait(timeout=60) == 0
        deadline = time.monotonic() + 60
        store = ObjectStore(url)
        while True:
            try:
                for m in machines:
                    with Ledger(m) as book:
                        _stored_equals_local(store, m, [i.id for i in book.runs()])
                break
            except (AssertionError, TypeError, StorageError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        for _, w in watch:
            w.terminate()
            w.wait(timeout=30)
        with Ledger(pg_url, artifacts=tmp_path / "spool") as book:
            assert len(book.runs()) == 4
        for m in machines:
            assert sync_runs(m, srv.url, token=TOKEN).bytes_sent == 0
    finally:
        srv.stop()


def test_a_store_that_fails_is_shipped_to_at_the_next_sync(tmp_path, s3):
    import boto3
    from server_process import ServerProcess

    from labledger.errors import SyncError
    from labledger.server.sync_client import sync_runs
    from labledger.store.ledger import Ledger

    root = tmp_path / "server"
    Ledger(root, create=True).close()
    url = "s3://later-bucket/p"  # not there yet: every upload fails
    srv = ServerProcess(root, uploads_dir=tmp_path / "up", token=TOKEN, artifacts=url).start()
    try:
        local = tmp_path / "local"
        with labledger.start_run("r", ledger=local) as run:
            run.log(1, loss=0.5)
        with pytest.raises(SyncError, match="later-bucket"):
            sync_runs(local, srv.url, token=TOKEN)
        boto3.client("s3").create_bucket(Bucket="later-bucket")
        sync_runs(local, srv.url, token=TOKEN)
        sync_runs(local, srv.url, token=TOKEN)
        _stored_equals_local(ObjectStore(url), local, [run.id])
    finally:
        srv.stop()


def test_a_direct_sync_of_many_runs_that_fails_raises_the_stores_error_and_the_next_one_sends_them_all(tmp_path, s3):
    import boto3

    from labledger.store import objects

    local = tmp_path / "local"
    ids = []
    for i in range(objects.SYNC_THREADS * 2 + 1):  # more runs than run at once
        with labledger.start_run(f"r{i}", ledger=local) as run:
            run.log(1, loss=0.5 + i)
        ids.append(run.id)
    url = "s3://direct-later/p"  # not there yet: every upload fails
    with pytest.raises(StorageError, match="direct-later"):
        sync_to_objects(local, url)
    boto3.client("s3").create_bucket(Bucket="direct-later")
    report = sync_to_objects(local, url)
    assert (report.runs, report.runs_sent, report.datasets_written) == (len(ids), len(ids), len(ids))
    _stored_equals_local(ObjectStore(url), local, ids)
    assert sync_to_objects(local, url).runs_sent == 0


def test_a_run_unchanged_since_its_last_sync_is_skipped_unless_its_manifest_in_the_store_changed(
    tmp_path, s3, monkeypatch
):
    from labledger.store import objects

    local = tmp_path / "local"
    ids = []
    for i in range(3):
        with labledger.start_run(f"r{i}", ledger=local) as run:
            run.log(1, loss=0.5 + i)
        ids.append(run.id)
    url = "s3://runs/skip"
    assert sync_to_objects(local, url).runs_sent == 3
    store = ObjectStore(url)
    asked: list[str] = []
    real = objects.ObjectStore.manifest

    def counted(self, run_id):
        asked.append(run_id)
        return real(self, run_id)

    monkeypatch.setattr(objects.ObjectStore, "manifest", counted)
    # nothing changed: one listing of runs/, no run's manifest read, nothing sent
    assert sync_to_objects(local, url).runs_sent == 0 and asked == []
    # a manifest replaced in the store (another writer, damage): that run is compared and written again
    key = store.key("runs", ids[1], "manifest.json")
    store.put_json(key, {"run": ids[1], "files": {}})
    assert sync_to_objects(local, url).runs_sent == 1 and asked == [ids[1]]
    _stored_equals_local(store, local, ids)
    # a run logged to again is compared; the cache lost: every run is compared, nothing sent
    asked.clear()
    book = labledger.open_ledger(local)
    book.run(ids[2]).dir.joinpath("notes.md").write_text("seen\n")
    book.close()
    assert sync_to_objects(local, url).runs_sent == 1 and asked == [ids[2]]
    for cache in (local / ".sync").glob("objects-*.json"):
        cache.unlink()
    asked.clear()
    assert sync_to_objects(local, url).runs_sent == 0 and sorted(asked) == sorted(ids)
    _stored_equals_local(store, local, ids)
