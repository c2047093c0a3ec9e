"""Load (issue 7): 8 uploaders x 50 files and 4 API readers against a real uvicorn server on
127.0.0.1 while a run logs 10,000 batch records through the API; afterwards every byte and every
record is there, checked by sha256. Bounded in count and time; no timing is asserted."""

from __future__ import annotations

import hashlib
import random
import threading
import time

import httpx
import orjson
from conftest import make_batch
from server_process import ServerProcess

import labledger

TOKEN = "load-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
UPLOADERS, FILES_EACH = 8, 50
READERS = 4
RECORDS, PER_REQUEST = 10_000, 100
DEADLINE_S = 240


def payload(uploader: int, i: int) -> bytes:
    rng = random.Random(uploader * 1000 + i)
    return rng.randbytes(rng.randint(1, 96 * 1024))


def test_concurrent_uploads_readers_and_api_logging_lose_nothing(tmp_path):
    ledger = tmp_path / "ledger"
    labledger.open_ledger(ledger, create=True).close()
    errors: list[str] = []
    stored: dict[str, str] = {}
    stored_lock = threading.Lock()
    done = threading.Event()
    run_id: list[str] = []
    deadline = time.monotonic() + DEADLINE_S
    sent_records = [make_batch(mb, n=2) | {"time": 1_700_000_000.0 + mb} for mb in range(1, RECORDS + 1)]

    def uploader(k: int) -> None:
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as c:
            for i in range(FILES_EACH):
                if time.monotonic() > deadline:
                    errors.append(f"uploader {k}: out of time")
                    return
                data = payload(k, i)
                name = f"u{k}-{i:02d}.bin"
                r = c.post(f"/upload?filename={name}", content=data)
                if r.status_code != 201 or r.json()["sha256"] != hashlib.sha256(data).hexdigest():
                    errors.append(f"{name}: {r.status_code} {r.text[:200]}")
                    continue
                with stored_lock:
                    stored[name] = r.json()["sha256"]

    def logger() -> None:
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as c:
            r = c.post("/api/runs", json={"name": "under-load", "group": "load"})
            run_id.append(r.json()["run"]["id"])
            for start in range(0, RECORDS, PER_REQUEST):
                body = b"".join(orjson.dumps(rec) + b"\n" for rec in sent_records[start : start + PER_REQUEST])
                r = c.post(f"/api/runs/{run_id[0]}/batches", content=body)
                if r.status_code != 200 or r.json()["accepted"] != PER_REQUEST:
                    errors.append(f"batches {start}: {r.status_code} {r.text[:200]}")
                    return
            c.post(f"/api/runs/{run_id[0]}/finish", json={}).raise_for_status()

    def reader(k: int) -> None:
        rng = random.Random(k)
        last_total = 0
        requests = 0
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            while not done.is_set() and time.monotonic() < deadline and requests < 5000:
                requests += 1
                runs = c.get("/api/runs").json()
                if not runs["ok"]:
                    errors.append(f"reader {k}: {runs}")
                if not run_id:
                    continue
                page = c.get(
                    f"/api/runs/{run_id[0]}/batches?offset={rng.randrange(0, max(1, last_total))}&limit=50"
                ).json()
                if page["total"] < last_total:
                    errors.append(f"reader {k}: total went back from {last_total} to {page['total']}")
                last_total = page["total"]
                mbs = [b["microbatch"] for b in page["batches"]]
                if mbs != list(range(page["offset"] + 1, page["offset"] + 1 + len(mbs))):
                    errors.append(f"reader {k}: page at {page['offset']} holds {mbs[:3]}...")
                with stored_lock:
                    names = list(stored.items())
                if names:
                    name, digest = rng.choice(names)
                    r = c.get(f"/uploads/{name}")
                    if hashlib.sha256(r.content).hexdigest() != digest:
                        errors.append(f"reader {k}: {name} served other bytes")

    with ServerProcess(ledger, uploads_dir=tmp_path / "uploads", token=TOKEN, max_upload=2**20) as srv:
        writers = [threading.Thread(target=uploader, args=(k,)) for k in range(UPLOADERS)]
        writers.append(threading.Thread(target=logger))
        readers = [threading.Thread(target=reader, args=(k,)) for k in range(READERS)]
        for t in writers + readers:
            t.start()
        for t in writers:
            t.join(timeout=DEADLINE_S + 30)
        done.set()
        for t in readers:
            t.join(timeout=60)
        assert errors == []

        # every byte: each upload served whole, with its sha256 as ETag, and listed
        assert len(stored) == UPLOADERS * FILES_EACH
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            for k in range(UPLOADERS):
                for i in range(FILES_EACH):
                    name, data = f"u{k}-{i:02d}.bin", payload(k, i)
                    got = c.get(f"/uploads/{name}")
                    assert got.content == data and got.headers["etag"] == f'"{hashlib.sha256(data).hexdigest()}"'
            listing = c.get("/api/uploads").json()["uploads"]
            assert len(listing) == UPLOADERS * FILES_EACH
            api_total = c.get(f"/api/runs/{run_id[0]}/batches?limit=1").json()["total"]
        assert api_total == RECORDS
    assert not list((tmp_path / "uploads").glob(".upload-*"))

    # every record: the run's batches are exactly what was sent, in order
    view = labledger.open_ledger(ledger).run(run_id[0])
    assert view.status == "finished"
    digest = hashlib.sha256()
    for rec in view.batches():
        digest.update(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
    expected = hashlib.sha256()
    for rec in sent_records:
        expected.update(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
    assert digest.hexdigest() == expected.hexdigest()
    assert view.info.summary["batches"] == RECORDS
