"""System metrics on the site's run page (#14): the payload carries the run's system records
(thinned), the page draws one chart per metric, and a run without them shows no section."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import labledger
from labledger.site import build_site, load_data_file
from labledger.site.rundata import MAX_SYSTEM_POINTS, system_view

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("system-site")
    with labledger.start_run("sampled", ledger=root / "ledger", system_metrics=True) as run:
        run.log(0, loss=1.0)
        time.sleep(0.05)
    with labledger.start_run("plain", ledger=root / "ledger") as plain:
        plain.log(0, loss=1.0)
    build_site(root / "ledger", root / "out")
    return {"out": root / "out", "ledger": root / "ledger", "sampled": run.id, "plain": plain.id}


def test_the_run_payload_has_the_system_records(site):
    payload = load_data_file(site["out"] / f"data/runs/{site['sampled']}.js")[1]
    recs = list(labledger.open_ledger(site["ledger"]).run(site["sampled"]).records("system"))
    sys_ = payload["system"]
    assert sys_["samples"] == len(recs) >= 1 and sys_["x"][0] == 0.0
    assert sys_["series"]["rss_mb"] == [r["rss_mb"] for r in recs] and "cpu_percent" in sys_["series"]
    assert load_data_file(site["out"] / f"data/runs/{site['plain']}.js")[1]["system"] is None


def test_system_view_thins_long_runs_keeping_the_ends():
    recs = [{"time": 100.0 + i, "cpu_percent": float(i), "bad": float("inf")} for i in range(5 * MAX_SYSTEM_POINTS + 3)]
    view = system_view(recs)
    assert view["samples"] == len(recs) and view["shown"] <= MAX_SYSTEM_POINTS + 1
    assert view["x"][0] == 0.0 and view["x"][-1] == len(recs) - 1 and view["series"]["cpu_percent"][-1] == len(recs) - 1
    assert set(view["series"]["bad"]) == {None} and system_view([]) is None


@pytest.mark.browser
@pytest.mark.slow
def test_the_run_page_draws_the_system_charts(site, browser):
    errors: list[str] = []
    for run_id, expect in ((site["sampled"], True), (site["plain"], False)):
        page = browser.new_page()  # (a new page: only the hash would change)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto((site["out"] / "run.html").as_uri() + f"#run={run_id}")
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        page.wait_for_timeout(150)
        assert (page.locator("#system").count() == 1) is expect
        if expect:
            titles = page.locator("#system-charts .chart-title").all_text_contents()
            assert "rss_mb" in titles and "cpu_percent" in titles
            assert page.locator("#system-charts canvas").count() >= len(titles)  # uPlot drew them
            assert "samples (system.jsonl)" in page.locator("#system").inner_text()
    assert errors == []
