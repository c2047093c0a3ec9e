"""Many runs on the site (issue 12): the multi-resolution summaries the builder writes, the catalog's
query fields, and in Chromium the catalog's query box (same results as ``Ledger.runs(where=)``,
errors with the position), selection, the curves page (series per run and per group, legend with
n, hover, zoom loading finer buckets), the hyperparameter view, the diff view (the same document
as ``labledger diff --no-compare``), hostile strings in config keys and values, and a 10,000-run
catalog opening without errors. One built site per module.
"""

from __future__ import annotations

import json
import math
from urllib.parse import quote

import numpy as np
import pytest
from test_site_browser import SHOTS, Tab
from test_site_build import XSS

import labledger
from labledger.analysis.rundiff import diff_runs
from labledger.site import build_site, load_data_file
from labledger.site.catalog import compose_catalog
from labledger.site.curves import TOP_BUCKETS, summarize, widths_for

HOSTILE_KEY = '<img src=x onerror=alert("k")>'
STEPS = 5000


# -- summaries (no browser) -----------------------------------------------------------------------
def test_levels_keep_every_spike_and_merge_exactly():
    rng = np.random.default_rng(0)
    steps = np.arange(1_000_000, dtype=float)
    values = rng.normal(size=steps.size)
    values[777_777] = 50.0  # one spike among a million steps
    widths = widths_for(steps[-1])
    assert widths == [512, 64, 8]  # a level of one step would span more than FINE_BUCKETS
    top = summarize(steps, values, np.zeros_like(steps), None, widths[0], 0.0)
    assert len(top["b"]) <= TOP_BUCKETS
    assert max(top["max"]) == 50.0 and top["b"][int(np.argmax(top["max"]))] == 777_777 // 512
    assert sum(top["n"]) == steps.size
    # the mean of a bucket is the mean of its values; min/max bound them
    i = 10
    chunk = values[i * 512 : (i + 1) * 512]
    assert math.isclose(top["mean"][i], chunk.mean()) and top["min"][i] == chunk.min() and top["max"][i] == chunk.max()


def test_missing_values_and_single_points():
    s = summarize(np.array([0.0, 1, 2]), np.array([np.nan, 2.0, 3.0]), np.array([1.0, 2, 3]), None, 1, 1.0)
    assert s["n"] == [0, 1, 1] and s["mean"] == [None, 2, 3] and "min" not in s
    assert s["rt"] == [0, 1, 2]


# -- a ledger of runs that differ ---------------------------------------------------------------
def make_runs_ledger(root):
    ledger = labledger.open_ledger(root, create=True)
    ids = {}
    for lr in (0.1, 0.01):
        for seed in (0, 1, 2):
            config = {"optim": {"lr": lr, "name": "adam" if lr < 0.05 else "sgd"}, "seed": seed, HOSTILE_KEY: XSS[0]}
            with labledger.start_run(f"lr{lr}", group="sweep", tags=("sweep",), config=config, ledger=ledger) as run:
                for step in range(STEPS):
                    loss = (1.0 + seed * 0.1) / (1 + step * lr) + (25.0 if (step == 4321 and seed == 0) else 0.0)
                    run.log(step, loss=loss, examples_seen=32 * step)
                run.set_summary(best=1.0 - lr - seed / 100)
                ids[f"lr{lr}-s{seed}"] = run.id
    ledger.close()
    return ids


@pytest.fixture(scope="module")
def runs_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs-site")
    ids = make_runs_ledger(root / "ledger")
    out = root / "out"
    build_site(root / "ledger", out)
    SHOTS.mkdir(parents=True, exist_ok=True)
    return {"out": out, "ids": ids, "ledger": root / "ledger"}


def test_catalog_has_the_query_fields_and_curve_files(runs_site):
    out, ids = runs_site["out"], runs_site["ids"]
    cat = load_data_file(out / "data/catalog.js")[1]
    names = cat["fields"]["names"]
    assert "config.optim.lr" in names and "scalars.loss.min" in names and f"config.{HOSTILE_KEY}" in names
    assert len(cat["fields"]["rows"]) == len(cat["runs"]) == 6
    run = next(r for r in cat["runs"] if r["id"] == ids["lr0.1-s0"])
    assert run["scalars"] == ["loss", "examples_seen"] and "host" in run
    key, doc = load_data_file(out / f"data/curves/{run['id']}/0.js")
    assert key == f"curves/{run['id']}/0" and doc["name"] == "loss" and doc["points"] == STEPS
    assert doc["widths"] == [4, 1] and doc["examples"] == "examples_seen"
    assert max(doc["top"]["max"]) > 25  # the spike survives the top level
    assert (out / f"data/curves/{run['id']}/0/1-0.js").exists()


# -- in Chromium --------------------------------------------------------------------------------
@pytest.fixture
def tab(browser, runs_site):
    t = Tab(browser, runs_site)
    yield t
    t.close()


QUERIES = [
    "config.optim.lr < 0.05",
    "config.optim.name = 'sgd' and config.seed in (0, 2)",
    "scalars.loss.min < 0.01 or summary.best > 0.95",
    "not (config.seed between 1 and 2) and name ~ '^lr0\\.1'",
    "has tag 'sweep' and config.seed != 1",
    "started > 0 and summary.best is not null and status = 'finished'",
]


@pytest.mark.parametrize("query", QUERIES)
def test_query_box_selects_what_the_index_selects(tab, runs_site, query):
    with labledger.open_ledger(runs_site["ledger"]) as book:
        expected = sorted(r.id for r in book.runs(where=query))
    page = tab.open("index.html#" + "where=" + quote(query))
    got = sorted(page.locator("table.runs tbody tr input.pick").evaluate_all("els => els.map(e => e.dataset.id)"))
    assert got == expected
    assert page.locator("#where-error").is_hidden()
    tab.check()


def test_tables_sort_in_natural_order_with_missing_values_last(tab):
    """Every table (paged and virtual) sorts with one rule: numbers by value, text in natural order,
    ties in their original order, missing values (null, NaN) last in both directions."""
    page = tab.open("index.html")
    order = page.evaluate(
        """() => {
        const rows = [{n: "run-10", v: 3}, {n: null, v: NaN}, {n: "run-2", v: null}, {n: "run-1", v: 3}, {n: "Run-3", v: 1}];
        const by = (key, dir) => LL.sortRows(rows, {key: key, label: key}, dir).map(r => r[key] === null ? "-" : String(r[key]));
        return [by("n", 1), by("n", -1), by("v", 1), by("v", -1)];
    }"""
    )
    assert order == [
        ["run-1", "run-2", "Run-3", "run-10", "-"],
        ["run-10", "Run-3", "run-2", "run-1", "-"],
        ["1", "3", "3", "NaN", "-"],
        ["3", "3", "1", "NaN", "-"],
    ]
    # a click on the catalog's Steps header sorts its virtual table, descending first, then ascending
    steps = "table.runs tbody tr td:nth-child({})"
    header = page.locator("table.runs thead th", has=page.locator("button.sort", has_text="Steps"))
    column = page.locator("table.runs thead th").evaluate_all(
        "ths => ths.findIndex(th => th.textContent.startsWith('Steps')) + 1"
    )
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "descending"
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "ascending"
    assert page.locator(steps.format(column)).count() == 6
    tab.check()


def test_query_errors_point_at_the_position_and_suggest(tab):
    page = tab.open("index.html")
    page.locator("#where").fill("config.lr << 3")
    page.locator("#where").press("Enter")
    err = page.locator("#where-error")
    assert err.is_visible()
    lines = err.inner_text().splitlines()
    assert lines[0].startswith("invalid expression: expected a value") and lines[2].index("^") == 2 + 11
    page.locator("#where").fill("config.lr < 3")
    page.locator("#where").press("Enter")
    assert "no run has the field 'config.lr'; did you mean" in err.inner_text()
    assert "'config.optim.lr'" in err.inner_text()
    assert page.locator("table.runs tbody tr input.pick").count() == 0
    assert "where=config.lr" in page.url  # the expression is kept in the URL
    tab.check()


def test_selection_opens_curves_hparams_and_diff(tab, runs_site):
    page = tab.open("index.html#where=config.seed%20%3D%200")
    picks = page.locator("table.runs tbody tr input.pick")
    assert picks.count() == 2
    picks.nth(0).check()
    assert page.locator("#open-diff").get_attribute("aria-disabled") == "true"
    picks.nth(1).check()
    assert page.locator("#sel-count").inner_text().startswith("2 selected")
    assert "sel=" in page.url
    page.locator("#open-diff").click()
    tab.ready()
    assert page.locator("h1").inner_text().startswith("Diff: lr")
    tab.check()


def test_curves_per_run_hover_and_zoom(tab, runs_site):
    ids = runs_site["ids"]
    sel = ",".join(ids.values())
    page = tab.open(f"curves.html#runs={sel}&scalar=loss&smooth=0.6")
    page.wait_for_function("() => document.querySelector('figure.curves').drawnAt")
    lines = page.evaluate("document.querySelector('figure.curves').lines")
    assert len(lines) == 6 and all(not line["group"] for line in lines)
    assert page.locator("#c-legend .lg").count() == 6
    page.locator("figure.curves .u-over").hover(position={"x": 200, "y": 100})
    rows = page.locator("#c-hover tbody tr")
    assert rows.count() == 6  # every run's value at that x
    assert all(r.strip() for r in rows.all_inner_texts())
    page.screenshot(path=str(SHOTS / "curves-runs-1280.png"), full_page=True)
    # zoom: drag across a narrow range; finer buckets load for it
    box = page.locator("figure.curves .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.80, box["y"] + 50)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.90, box["y"] + 50)
    page.mouse.up()
    page.wait_for_function("() => (document.querySelector('figure.curves').levels || []).some(l => l > 0)")
    assert "Zoomed" in page.locator("#c-status").inner_text()
    tab.check()


@pytest.mark.parametrize("band", ["minmax", "ci"])
def test_curves_grouped_by_a_config_key(tab, runs_site, band):
    sel = ",".join(runs_site["ids"].values())
    page = tab.open(f"curves.html#runs={sel}&scalar=loss&group=config.optim.lr&band={band}&log=1")
    page.wait_for_function("() => document.querySelector('figure.curves').drawnAt")
    lines = page.evaluate("document.querySelector('figure.curves').lines")
    assert sorted(line["label"] for line in lines) == ["config.optim.lr = 0.01 (n=3)", "config.optim.lr = 0.1 (n=3)"]
    legend = page.locator("#c-legend").inner_text()
    assert "(n=3)" in legend
    page.locator("figure.curves .u-over").hover(position={"x": 300, "y": 100})
    assert page.locator("#c-hover tbody tr").count() == 2
    page.screenshot(path=str(SHOTS / f"curves-group-{band}-1280.png"), full_page=True)
    tab.check()


def test_curves_x_axes(tab, runs_site):
    sel = ",".join(list(runs_site["ids"].values())[:2])
    for x in ("examples", "wall", "relative"):
        page = tab.open(f"curves.html#runs={sel}&scalar=loss&x={x}")
        page.wait_for_function("() => document.querySelector('figure.curves').drawnAt")
        assert len(page.evaluate("document.querySelector('figure.curves').lines")) == 2
    tab.check()


def test_hyperparameter_view(tab, runs_site):
    page = tab.open("hparams.html#where=has%20tag%20'sweep'")
    heads = page.locator("table.hparams thead th").all_inner_texts()
    assert any("optim.lr" in t for t in heads) and any("seed" in t for t in heads)
    assert not any(t.strip().startswith(HOSTILE_KEY) for t in heads)  # same in every run: hidden
    page.locator("#hp-differ").uncheck()
    heads = page.locator("table.hparams thead th").all_inner_texts()
    assert any(HOSTILE_KEY in t for t in heads)  # shown as text
    assert XSS[0] in page.locator("table.hparams").inner_text()
    page.get_by_role("button", name="summary.best").click()  # a number: descending first
    first = page.locator("table.hparams tbody tr").first.inner_text()
    assert first.startswith("lr0.01")  # best = 0.99 - seed/100: lr 0.01, seed 0
    page.locator("#hp-y").select_option("summary.best")
    page.locator("#hp-x").select_option("config.optim.lr")
    assert page.locator("#hp-scatter circle.pt").count() == 6
    page.screenshot(path=str(SHOTS / "hparams-1280.png"), full_page=True)
    assert page.locator('img[src="x"]').count() == 0
    tab.check()


def test_diff_view_is_the_cli_document(tab, runs_site):
    a, b = runs_site["ids"]["lr0.1-s0"], runs_site["ids"]["lr0.01-s1"]
    page = tab.open(f"diff.html#a={a}&b={b}")
    doc = page.evaluate("window.LABLEDGER['diff/doc']")
    with labledger.open_ledger(runs_site["ledger"]) as book:
        expected = diff_runs(book, a, b)  # no result sets here: no comparisons
    assert json.loads(json.dumps(doc)) == json.loads(json.dumps(expected))
    keys = page.locator("#diff-config tbody th").all_inner_texts()
    assert keys == ["optim.lr", "optim.name", "seed"]
    assert page.locator("#diff-scalars tbody tr").count() >= 1
    page.screenshot(path=str(SHOTS / "diff-1280.png"), full_page=True)
    tab.check()


def test_diff_view_shows_the_paired_comparisons_of_labledger_diff(browser, tmp_path):
    """Result sets of runs of one group are compared at build time as ``labledger diff`` does."""
    ledger, ids = tmp_path / "ledger", {}
    for name, group, flip in (("a", "g", 2), ("b", "g", 3), ("c", "other", 5)):
        with labledger.start_run(name, group=group, ledger=ledger) as run:
            run.log(1, loss=1.0 / flip)
            gold = [i % 2 for i in range(60)]
            run.log_results(
                "test",
                [{"id": f"x{i}", "task": "t", "gold": g, "pred": int(i % flip == 0)} for i, g in enumerate(gold)],
            )
            ids[name] = run.id
    out = tmp_path / "site"
    build_site(ledger, out)
    assert (out / f"data/diff/{ids['a']}.paired.js").exists()
    t = Tab(browser, {"out": out})
    try:
        page = t.open(f"diff.html#a={ids['b']}&b={ids['a']}")
        doc = page.evaluate("window.LABLEDGER['diff/doc']")
        with labledger.open_ledger(ledger) as book:
            expected = diff_runs(book, ids["b"], ids["a"])
        assert expected["comparisons"][0]["paired"] and expected["comparisons"][0]["metrics"]
        assert json.loads(json.dumps(doc)) == json.loads(json.dumps(expected))
        assert page.locator("#diff-comparisons tbody tr").count() == len(expected["comparisons"][0]["metrics"])
        page.screenshot(path=str(SHOTS / "diff-paired-1280.png"), full_page=True)
        # runs of different groups are not compared at build time: the page gives the command
        t.check()
    finally:
        t.close()
    t = Tab(browser, {"out": out})
    try:
        page = t.open(f"diff.html#a={ids['a']}&b={ids['c']}")
        assert "labledger diff" in page.locator("#comparisons-missing").inner_text()
        t.check()
    finally:
        t.close()
    again = build_site(ledger, out)  # the comparisons come from the manifest: nothing rewritten
    assert again.written == []


def test_ten_thousand_run_catalog_opens_without_errors(browser, tmp_path):
    """A catalog of 10,000 runs in 10 chunks (written as the builder writes it: the pages only read
    the catalog)."""
    out = tmp_path / "big"
    labledger.open_ledger(tmp_path / "empty-ledger", create=True).close()
    build_site(tmp_path / "empty-ledger", out)
    rng = np.random.default_rng(1)
    names = ["config.lr", "config.opt", "scalars.loss.last", "eval.test.accuracy"]
    runs, rows = [], []
    for i in range(10_000):
        runs.append(
            {
                "id": f"20261201-000000-{i:06x}",
                "name": f"run-{i}" if i % 97 else XSS[1],
                "group": f"g{i % 10}",
                "tags": ["t"],
                "status": "finished",
                "started": 1_700_000_000 + i,
                "ended": 1_700_000_100 + i,
                "duration": 100.0,
                "error": None,
                "steps": 1000,
                "headline": {},
                "last": {"loss": float(rng.random())},
                "scalars": ["loss"],
                "evaluations": [] if i % 50 else ["test"],
                "tests": [],
                "batches": 0 if i % 50 else 3,
                "samples": 0,
            }
        )
        rows.append(
            [10 ** -float(rng.integers(2, 6)), ["adam", "sgd"][i % 2], float(rng.random()), float(rng.random())]
        )
    from labledger.store.index import IndexFields

    found = {r["id"]: IndexFields("bench", None, dict(zip(names, row))) for r, row in zip(runs, rows)}
    runs.reverse()  # the catalog lists the newest first
    cat = compose_catalog(runs, found, ledger="big", comparisons={"tables": [], "documents": 0, "groups": []})
    for rel, data in cat.files().items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    assert len(cat.chunks) == 10
    t = Tab(browser, {"out": out})
    try:
        page = t.open("index.html")
        assert page.locator("table.runs tbody tr").count() < 100  # only what is on screen
        page.wait_for_selector("body[data-catalog-loaded='1']")
        page.locator("#where").fill("config.lr < 1e-3 and config.opt = 'adam'")
        page.locator("#where").press("Enter")
        expected = sum(1 for i, r in enumerate(rows) if r[0] < 1e-3 and r[1] == "adam")
        assert page.locator(".controls .muted[aria-live]").inner_text().startswith(f"{expected:,} of 10,000")
        page.locator(".vtable-box").evaluate("el => el.scrollTop = el.scrollHeight")
        page.wait_for_timeout(100)
        assert page.locator("table.runs tbody tr").count() < 100
        page.screenshot(path=str(SHOTS / "catalog-10000-1280.png"))
        t.check()
    finally:
        t.close()
    # every column (microbatches and pages too): the table fits, or (narrower than 1280 px here)
    # scrolls sideways inside its box with the checkbox and the run's name kept in view
    for viewport, fits in (("narrow", False), ("desktop", True), ("wide", True)):
        t = Tab(browser, {"out": out}, viewport)
        try:
            page = t.open("index.html")
            page.wait_for_selector("body[data-catalog-loaded='1']")
            box = page.locator(".vtable-box")
            assert box.evaluate("b => b.scrollWidth <= b.clientWidth") == fits
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            box.evaluate("b => b.scrollLeft = b.scrollWidth")
            page.wait_for_timeout(50)
            left = box.evaluate("b => b.getBoundingClientRect().left")
            name = page.locator("table.runs tbody tr td.runcol").first.bounding_box()
            pick = page.locator("table.runs tbody tr td.sel").first.bounding_box()
            assert abs(pick["x"] - left) < 3 and abs(name["x"] - (pick["x"] + pick["width"])) < 3
            last = page.locator("table.runs thead th").last.bounding_box()
            assert last["x"] + last["width"] <= box.evaluate("b => b.getBoundingClientRect().right") + 1
            page.screenshot(path=str(SHOTS / f"catalog-10000-{viewport}-scrolled.png"))
            t.check()
        finally:
            t.close()


@pytest.mark.parametrize("page_name", ["curves", "hparams", "diff"])
def test_new_pages_fit_a_phone(browser, runs_site, page_name):
    ids = list(runs_site["ids"].values())
    rel = {
        "curves": f"curves.html#runs={','.join(ids)}&group=config.seed",
        "hparams": f"hparams.html#runs={','.join(ids)}",
        "diff": f"diff.html#a={ids[0]}&b={ids[-1]}",
    }[page_name]
    t = Tab(browser, runs_site, "phone")
    try:
        page = t.open(rel)
        assert page.locator("h1").count() == 1 and page.locator(".callout.error").count() == 0
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{page_name} is {overflow}px wider than a phone"
        page.screenshot(path=str(SHOTS / f"{page_name}-390.png"), full_page=True)
        t.check()
    finally:
        t.close()
