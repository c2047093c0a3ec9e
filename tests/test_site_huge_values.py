"""Finite huge values (MLflow's ±1.797e308 for ±inf) leave a chart drawn, with a note (#43)."""

from __future__ import annotations

import sys

import labledger
from labledger.site import build_site

HUGE = sys.float_info.max


def test_a_chart_with_huge_values_keeps_a_finite_range_and_says_what_is_off_it(tmp_path, browser):
    with labledger.start_run("mlflow-like", ledger=tmp_path / "l") as run:
        for s in range(1, 21):
            run.log(s, loss=1.0 / s, grad=HUGE if s in (5, 12) else 0.1 * s, neg=-HUGE if s == 7 else float(s))
    build_site(labledger.open_ledger(tmp_path / "l"), tmp_path / "site")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((tmp_path / "site" / "run.html").as_uri() + f"#run={run.id}")
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    page.wait_for_function("document.querySelectorAll('figure.chart canvas').length >= 3", timeout=15000)
    ranges = page.evaluate(
        """() => Array.from(document.querySelectorAll('figure.chart')).map(f => [
            f.querySelector('.chart-title').textContent, f.chart.scales.y.min, f.chart.scales.y.max,
            f.querySelector('.off-chart').hidden ? '' : f.querySelector('.off-chart').textContent])"""
    )
    by = {title: (lo, hi, note) for title, lo, hi, note in ranges}
    assert by["grad"][0] < 0.1 and 2.0 < by["grad"][1] < 3.0, by  # the range of the plottable values
    assert by["neg"][0] < 1 and 20 < by["neg"][1] < 22, by
    assert by["grad"][2].startswith("2 value(s) beyond ±1e300 are off the chart") and by["neg"][2].startswith("1 value")
    assert by["loss"][2] == "" and 0 < by["loss"][1] - by["loss"][0] < 2  # an ordinary chart as before
    page.close()
    assert errors == []
