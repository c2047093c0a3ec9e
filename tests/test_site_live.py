"""A running run's page follows the run (#12): in ``labledger serve`` (a real server on 127.0.0.1,
stopped after) the page asks the API only for the scalar records logged since its last fetch (the
``since`` cursor) and redraws its curves; the static site says to rebuild and reload."""

from __future__ import annotations

import re
import time

import httpx
from server_process import ServerProcess

import labledger
from labledger.site import build_site


def test_since_is_a_cursor_over_the_records(tmp_path):
    """The API: ``since=N`` gives the records after the first N and ``next`` to pass the next time."""
    from starlette.testclient import TestClient

    from labledger.server import create_app

    with labledger.start_run("live", ledger=tmp_path / "ledger") as run:
        for step in range(5):
            run.log(step, loss=1.0 / (step + 1))
    client = TestClient(create_app(tmp_path / "ledger", uploads_dir=tmp_path / "up"))
    first = client.get(f"/api/runs/{run.id}/scalars?since=0&limit=3").json()
    assert [r["step"] for r in first["scalars"]] == [0, 1, 2] and first["next"] == 3
    rest = client.get(f"/api/runs/{run.id}/scalars?since={first['next']}").json()
    assert [r["step"] for r in rest["scalars"]] == [3, 4] and rest["next"] == 5
    assert client.get(f"/api/runs/{run.id}/scalars?since=5").json()["scalars"] == []
    both = client.get(f"/api/runs/{run.id}/scalars?since=1&offset=2")
    assert both.status_code == 400 and "not both" in both.json()["error"]


def test_a_running_runs_page_fetches_only_what_was_logged_since(browser, tmp_path):
    ledger = tmp_path / "ledger"
    run = labledger.start_run("live", ledger=ledger)
    for step in range(10):
        run.log(step, loss=1.0 / (step + 1), lr=0.1)
    run.sync()
    server = ServerProcess(ledger, uploads_dir=tmp_path / "up", site_refresh=0.2).start()
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        deadline = time.monotonic() + 60
        while f"{run.id}" not in httpx.get(server.url + "/data/catalog.js").text:
            assert time.monotonic() < deadline, "the live site never listed the run"
            time.sleep(0.2)
        page.goto(f"{server.url}/run.html#run={run.id}")
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        page.evaluate("() => { LL.liveIntervalMs = 200; }")
        logged = page.evaluate("() => LL.live.cursor")
        assert logged >= 10  # what the page's data holds
        fact = "(k) => document.querySelector(`[data-fact=${k}]`).textContent"
        assert page.evaluate(f"() => ({fact})('steps')") == "9"
        assert page.locator("#run-status").inner_text() == "running"
        # the user zooms into the loss chart; the lr chart stays whole
        page.wait_for_function(
            "() => document.querySelectorAll('#curve-charts figure.chart').length === 2"
            " && [...document.querySelectorAll('#curve-charts figure.chart')].every(f => f.chart)"
        )
        charts = "[...document.querySelectorAll('#curve-charts figure.chart')]"
        titles = page.evaluate(f"() => {charts}.map(f => f.querySelector('.chart-title').textContent)")
        zoomed = titles.index("loss")
        page.evaluate(f"() => {charts}[{zoomed}].chart.setScale('x', {{min: 2, max: 5}})")
        for step in range(10, 40):
            run.log(step, loss=1.0 / (step + 1), lr=0.1)
        run.sync()
        page.wait_for_function(f"() => LL.live.cursor >= 40 && LL.live.records === 40 - {logged}", timeout=30_000)
        scales = page.evaluate(
            f"() => {charts}.map(f => [f.chart.scales.x.min, f.chart.scales.x.max, f.chart.data[0].length])"
        )
        assert scales[zoomed] == [2, 5, 40]  # the new steps are in the chart, and the zoom is kept
        assert scales[1 - zoomed][1:] == [39, 40]  # the unzoomed chart grew with the data
        # the header follows too (#43: it stayed at the page load's steps)
        page.wait_for_function(f"() => ({fact})('steps') === '39'", timeout=30_000)
        assert page.evaluate(f"() => ({fact})('duration')") != "–"  # to now while running
        assert page.evaluate(f"() => ({fact})('ended')") == "–"
        run.finish()
        page.wait_for_function("() => !LL.live.running", timeout=30_000)
        assert "finished" in page.locator("#live-status").inner_text()
        assert page.locator("#run-status").inner_text() == "finished"
        assert page.evaluate(f"() => ({fact})('ended')") != "–"
        assert page.evaluate(f"() => ({fact})('steps')") == "39"
        # every fetch asked for what came after the last one, never for the run's data file again
        since = [int(m.group(1)) for u in requests if (m := re.search(r"/scalars\?since=(\d+)", u))]
        assert since[0] == logged and since == sorted(since) and since[-1] == 40
        assert sum(f"/data/runs/{run.id}.js" in u for u in requests) == 1
        assert page.locator("#curve-charts figure, #curve-charts .chart").count() >= 1
        assert errors == []
    finally:
        page.close()
        server.stop()
        if run.status == "running":
            run.finish()


def test_the_static_site_says_to_rebuild_for_a_running_run(browser, tmp_path):
    run = labledger.start_run("live", ledger=tmp_path / "ledger")
    run.log(0, loss=1.0)
    run.sync()
    build_site(tmp_path / "ledger", tmp_path / "site")
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto((tmp_path / "site" / "run.html").as_uri() + f"#run={run.id}")
        page.wait_for_selector("body[data-ready='1']")
        assert "rebuild the site and reload" in page.locator("#live-status").inner_text()
        page.wait_for_timeout(300)
        assert all(u.startswith("file://") for u in requests), requests  # no fetch from a file:// page
    finally:
        page.close()
        run.finish()
