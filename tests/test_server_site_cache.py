"""#17 (13): a page request changes nothing; the server's live site is rebuilt by its own timer
(or after an API write), into the folder not being served, so pages always come from the last
complete build, a failing build takes nothing down, and builds are spaced."""

from __future__ import annotations

import threading
import time

import pytest
from starlette.testclient import TestClient

import labledger
from labledger.server import create_app
from labledger.server.pages import LiveSite

TOKEN = "site-cache-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _until(ok, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, "the live site did not catch up"
        time.sleep(0.05)


@pytest.fixture
def ledger(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("first", ledger=d) as run:
        run.log(1, loss=1.0)
    return d


def _app(ledger, tmp_path, **kw):
    return create_app(ledger, uploads_dir=tmp_path / "uploads", token=TOKEN, site_cache=tmp_path / "cache", **kw)


def test_get_requests_never_rebuild_the_site(ledger, tmp_path):
    """A GET builds no site: the catalog comes from the index, a run the build has not reached is
    built for its request in memory (#46), and the site on disk changes only by the timer."""
    app = _app(ledger, tmp_path, site_refresh=3600)  # the timer does not come round during the test
    site: LiveSite = app.state.site
    with TestClient(app) as c:
        assert c.get("/").status_code == 200
        _until(lambda: site.builds == 1)
        with labledger.start_run("second", ledger=ledger) as run:
            run.log(1, loss=0.5)
        served = sorted(p.relative_to(site.dir) for p in site.dir.rglob("*"))
        for path in ("/", "/index.html", "/data/catalog.js", f"/data/runs/{run.id}.js", "/run.html"):
            assert c.get(path).status_code == 200, path
        assert site.builds == 1 and "second" in c.get("/data/catalog.js").text
        assert sorted(p.relative_to(site.dir) for p in site.dir.rglob("*")) == served
        assert not (site.dir / "data" / "runs" / f"{run.id}.js").exists()
        site.nudge()  # what the timer (or an API write) does
        _until(lambda: site.builds == 2)
        response = c.get(f"/data/runs/{run.id}.js")
        assert response.status_code == 200 and (site.dir / "data" / "runs" / f"{run.id}.js").is_file()
        assert response.headers["x-labledger-site-build"] == "2"


def test_an_api_write_brings_the_pages_up_to_date_without_a_get_building(ledger, tmp_path):
    app = _app(ledger, tmp_path, site_refresh=3600)
    with TestClient(app) as c:
        c.get("/")
        made = c.post("/api/runs", json={"name": "over-http"}, headers=AUTH).json()["run"]
        _until(lambda: "over-http" in c.get("/data/catalog.js").text)
        assert c.post(f"/api/runs/{made['id']}/finish", headers=AUTH).status_code == 200


def test_a_failing_build_keeps_serving_the_last_complete_one_and_recovers(ledger, tmp_path):
    app = _app(ledger, tmp_path, site_refresh=3600)
    site: LiveSite = app.state.site
    with TestClient(app) as c:
        assert c.get("/").status_code == 200
        _until(lambda: site.builds == 1)
        served = site.dir
        spare = tmp_path / "cache" / ("b" if served.name == "a" else "a")
        spare.mkdir(exist_ok=True)
        (spare / "not-a-site.txt").write_text("the next build cannot go here")  # build_site refuses it
        with labledger.start_run("second", ledger=ledger) as run:
            run.log(1, loss=0.5)
        site.nudge()
        _until(lambda: site.failures >= 1)
        assert "not empty" in site.last_error and str(spare) not in site.last_error
        for path in ("/", "/data/catalog.js", "/run.html"):
            assert c.get(path).status_code == 200, path
        # the catalog comes from the index and the run's page is built for its request (#46)
        assert site.dir == served and "second" in c.get("/data/catalog.js").text
        assert c.get(f"/data/runs/{run.id}.js").status_code == 200
        assert not (served / "data" / "runs" / f"{run.id}.js").exists()
        (spare / "not-a-site.txt").unlink()
        site.nudge()  # a failed build is tried again on the next round
        _until(lambda: site.builds == 2)
        assert site.last_error is None and site.dir == spare
        assert (spare / "data" / "runs" / f"{run.id}.js").is_file()


def test_pages_read_while_a_run_logs_are_always_complete(ledger, tmp_path):
    app = _app(ledger, tmp_path, site_refresh=0.05)
    site: LiveSite = app.state.site
    statuses: list[int] = []
    with TestClient(app) as c:
        c.get("/")
        _until(lambda: site.builds == 1)
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                r = c.get("/data/catalog.js")
                statuses.append(r.status_code)
                assert r.text.rstrip().endswith(";"), "a partial data file was served"

        reader = threading.Thread(target=read)
        reader.start()
        try:
            started = time.monotonic()
            with labledger.start_run("live", ledger=ledger) as run:
                for step in range(1, 200):
                    run.log(step, loss=1.0 / step)
                    time.sleep(0.005)
            _until(lambda: site.builds >= 2)
            elapsed = time.monotonic() - started
        finally:
            stop.set()
            reader.join()
    assert statuses and set(statuses) == {200}
    # spaced: at most one build per min_interval (or per the last build's duration, if longer)
    assert site.builds <= 2 + elapsed / 0.05
