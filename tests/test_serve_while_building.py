"""#46: ``labledger serve`` answers while it builds its site. Pages and the API answer from the index
at once, a run's page the build has not reached is built for its request (by the builder's own
``build_run``, in memory), a run logged during the build is in the catalog within 5 s, and once the
build is complete the catalog composed from the index is the one the build wrote."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
from starlette.testclient import TestClient

import labledger
from labledger.server import create_app
from labledger.server.pages import LiveSite, run_of
from labledger.site.output import load_data_file

#: A server whose site build takes SLOW seconds per run (in the builder's thread only: a run built
#: for a request is not slowed), as ``labledger serve`` starts it (the builder with the server).
SCRIPT = """
import json, sys, threading, time, uvicorn
import labledger.site.build as build
args = json.loads(sys.argv[1])
real = build.build_run

def slow(*a, **kw):
    if threading.current_thread().name == "labledger-live-site":
        time.sleep(args["slow"])
    return real(*a, **kw)

build.build_run = slow
from labledger.server import create_app
app = create_app(args["ledger"], uploads_dir=args["uploads"], build_site_at_start=True)
uvicorn.run(app, host="127.0.0.1", port=args["port"], log_level="warning", server_header=False)
"""
RUNS = 12
SLOW = 1.0  # s per run: the first build takes >= 12 s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ledger(path, n: int) -> list[str]:
    ids = []
    for i in range(n):
        with labledger.start_run(f"r{i}", ledger=path, config={"lr": 10.0**-i}) as run:
            for step in range(1, 21):
                run.log(step, loss=1.0 / step + i)
        ids.append(run.id)
    return ids  # oldest first


def _timed_get(client: httpx.Client, path: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = client.get(path)
    return response, time.monotonic() - started


def test_pages_and_the_api_answer_within_a_second_while_a_slow_build_runs(tmp_path):
    ledger = tmp_path / "ledger"
    ids = _ledger(ledger, RUNS)
    port = _free_port()
    args = {"ledger": str(ledger), "uploads": str(tmp_path / "up"), "port": port, "slow": SLOW}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, json.dumps(args)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
                try:
                    client.get("/openapi.json", timeout=1.0)
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, "the server did not start listening"
                    time.sleep(0.05)
            building_since = time.monotonic()
            for path in ("/", "/index.html", "/run.html", "/static/js/common.js", "/api/runs", "/data/catalog.js"):
                response, took = _timed_get(client, path)
                assert response.status_code == 200 and took < 1.0, (path, response.status_code, took)
                assert response.headers.get("x-labledger-site-build", "0") == "0", path  # the build is under way
            assert len(client.get("/api/runs").json()["runs"]) == RUNS
            _, catalog = load_data_file_bytes(client.get("/data/catalog.js").content, tmp_path)
            assert [r["name"] for r in catalog["runs"]] == [f"r{i}" for i in reversed(range(RUNS))]
            # the oldest run is built last: its page is built for this request
            oldest, took = _timed_get(client, f"/data/runs/{ids[0]}.js")
            assert oldest.status_code == 200 and took < 1.0 and oldest.headers["x-labledger-site-build"] == "0"
            assert ids[0] in oldest.text and "loss" in oldest.text
            # a file made from every run waits for the first build: 503, and when to ask again
            compare = client.get("/data/compare.js")
            assert compare.status_code == 503 and compare.headers["retry-after"].isdigit()
            assert client.head("/data/compare.js").status_code == 503
            # a run logged during the build is in the catalog within 5 s
            with labledger.start_run("logged-during-the-build", ledger=ledger) as run:
                run.log(1, loss=0.25)
            logged = time.monotonic()
            while "logged-during-the-build" not in client.get("/data/catalog.js").text:
                assert time.monotonic() - logged < 5.0, "the new run did not appear within 5 s"
                time.sleep(0.1)
            page = client.get(f"/data/runs/{run.id}.js")
            assert page.status_code == 200 and "logged-during-the-build" in page.text
            assert time.monotonic() - building_since < RUNS * SLOW, "the build ended before the checks did"
            assert client.get("/data/catalog.js").headers["x-labledger-site-build"] == "0"
        # a build under way stops after its current run when the server is stopped
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()


def load_data_file_bytes(data: bytes, tmp_path) -> tuple[str, dict]:
    path = tmp_path / "answered.js"
    path.write_bytes(data)
    return load_data_file(path)


def _until(ok, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, "the live site did not catch up"
        time.sleep(0.05)


def test_the_catalog_and_a_run_built_for_a_request_are_the_builds_own(tmp_path):
    """One builder: once the build is complete, the catalog composed from the index (its head and
    each chunk) is the bytes the build wrote, and every file of a run built for a request is the
    bytes the build wrote."""
    ledger = tmp_path / "ledger"
    ids = _ledger(ledger, 6)
    with labledger.start_run("tagged", ledger=ledger, group="g", tags=["t"]) as run:
        run.log(1, loss=0.5, acc=0.75)
    app = create_app(ledger, uploads_dir=tmp_path / "up", site_cache=tmp_path / "cache", site_refresh=3600)
    site: LiveSite = app.state.site
    site.catalog_chunk = 2  # 7 runs: chunks 0, 1, 2 and one run in the head
    with TestClient(app) as c:
        before = c.get(f"/data/runs/{ids[0]}.js")  # may come before the build: built for the request
        _until(lambda: site.builds == 1)
        assert before.status_code == 200
        built = sorted((site.dir / "data" / "catalog").iterdir())
        assert [p.name for p in built] == ["0.js", "1.js", "2.js"]
        assert c.get("/data/catalog.js").content == (site.dir / "data" / "catalog.js").read_bytes()
        for path in built:
            assert c.get(f"/data/catalog/{path.name}").content == path.read_bytes(), path.name
        assert c.get("/data/catalog/3.js").status_code == 404
        assert c.get("/data/compare.js").status_code == 200
        for rid in [*ids[:2], run.id]:
            files = site.run_files(rid)  # what a request gets for a run the build has not reached
            assert files is not None and f"data/runs/{rid}.js" in files and f"data/diff/{rid}.js" in files
            for rel, content in files.items():
                assert run_of(rel) == rid, rel
                built = (site.dir / rel).read_bytes()
                assert (content if isinstance(content, bytes) else content.read_bytes()) == built, rel
        assert site.run_files("no-such-run") is None
        assert c.get("/data/runs/no-such-run.js").status_code == 404
        assert c.get("/data/runs/x/../../ledger.db").status_code == 404
        # the site on disk is the build's alone: nothing a request built was written
        assert not (tmp_path / "cache" / "in-memory-never-written").exists()
