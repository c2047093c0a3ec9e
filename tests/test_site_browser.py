"""The static site in a real browser (issue 6): Playwright driving Debian's headless Chromium on
``file://`` URLs. Every page renders without console errors at 1280x800 and at phone width;
catalog -> run -> batch -> sample; the loss curve links to its batch; keyboard navigation; the
cells grid opens an episode trace; strings from runs show as text and no script of theirs runs; the
Comparisons page shows significance marks and mean rows; a damaged run shows as unreadable.
Screenshots go to test-artifacts/screenshots/ (CI keeps that folder).
"""

from __future__ import annotations

import re

import pytest
from conftest import ARTIFACTS, CHROMIUM, make_batch, sync_playwright
from test_site_build import CHUNK, XSS, make_compare_ledger, make_site_ledger, results_rows, tiny_png

from labledger.site import build_site, load_data_file

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install playwright)"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)"),
]

SHOTS = ARTIFACTS / "screenshots"
VIEWPORTS = {
    "desktop": {"width": 1280, "height": 800},
    "wide": {"width": 1920, "height": 1080},
    "narrow": {"width": 900, "height": 800},
    "phone": {"width": 390, "height": 844},
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-site")
    ids = make_site_ledger(root / "ledger")
    out = root / "out"
    build_site(root / "ledger", out, chunk_records=CHUNK)
    SHOTS.mkdir(parents=True, exist_ok=True)
    return {"out": out, "ids": ids}


class Tab:
    """A page that records console errors, uncaught exceptions and dialogs (alert = a script ran)."""

    def __init__(self, browser, site, viewport="desktop"):
        self.site = site
        self.page = browser.new_page(viewport=VIEWPORTS[viewport])
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("dialog", self._dialog)

    def _dialog(self, d):
        self.dialogs.append(d.message)
        d.dismiss()

    def url(self, rel: str) -> str:
        return (self.site["out"] / rel.split("#")[0]).as_uri() + ("#" + rel.split("#", 1)[1] if "#" in rel else "")

    def open(self, rel: str):
        self.page.goto(self.url(rel))
        self.ready()
        return self.page

    def ready(self):
        self.page.wait_for_selector("body[data-ready='1']", timeout=15000)
        self.page.wait_for_timeout(150)  # charts draw on the next animation frame

    def check(self):
        assert self.errors == [], self.errors
        assert self.dialogs == [], f"a script from the data ran: {self.dialogs}"

    def close(self):
        self.page.close()


@pytest.fixture
def tab(browser, site):
    t = Tab(browser, site)
    yield t
    t.close()


def pages(site) -> dict[str, str]:
    a = site["ids"]["alpha"]
    return {
        "catalog": "index.html",
        "run": f"run.html#run={a}",
        "batches": f"batches.html#run={a}&mb=1&sample=1",
        "eval": f"eval.html#run={a}&name=full_test",
        "sweep": f"eval.html#run={a}&name=boundary",
        "test": f"test.html#run={a}&name=full_test&cell=3,7",
        "xss-run": f"run.html#run={site['ids']['xss']}",
    }


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
@pytest.mark.parametrize("name", ["catalog", "run", "batches", "eval", "sweep", "test", "xss-run"])
def test_every_page_renders_without_console_errors(browser, site, name, viewport):
    t = Tab(browser, site, viewport)
    try:
        page = t.open(pages(site)[name])
        assert page.locator("h1").count() == 1 and page.locator(".callout.error").count() == 0
        page.screenshot(path=str(SHOTS / f"{name}-{VIEWPORTS[viewport]['width']}.png"), full_page=True)
        # Nothing sticks out sideways: wide tables scroll inside their own box.
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} is {overflow}px wider than a {viewport} window"
        t.check()
    finally:
        t.close()


def test_catalog_run_batch_sample_click_through(tab, site):
    page = tab.open("index.html")
    page.get_by_role("link", name="alpha", exact=True).click()
    tab.ready()
    assert page.locator("h1").inner_text().startswith("alpha")
    page.locator("#browse-batches").click()
    tab.ready()
    page.wait_for_selector("#samples tbody tr")
    assert "Microbatch 1 (1 of 230)" in page.locator("#position").inner_text()
    page.locator('#samples tr[data-index="3"]').click()
    detail = page.locator("#sample-detail")
    detail.wait_for()
    assert "Sample 3 of microbatch 1" in detail.inner_text()
    chunk = load_data_file(site["out"] / f"data/batches/{site['ids']['alpha']}/0.js")[1]
    sample = chunk["batches"][0]["samples"][3]
    assert f"training_row\n{sample['training_row']}" in detail.inner_text().replace("\t", "\n")
    assert "sample=3" in page.url
    page.screenshot(path=str(SHOTS / "batches-sample-detail-1280.png"), full_page=True)
    tab.check()


def _click_chart(page, selector: str, fraction: float) -> str:
    over = page.locator(f"{selector} .u-over")
    over.wait_for()
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    x, y = box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    hint = page.locator(f"{selector} .pick-hint")
    page.wait_for_function("(el) => el.textContent.startsWith('Click:')", arg=hint.element_handle())
    hint = hint.inner_text()
    page.mouse.click(x, y)
    return hint


def test_loss_curve_point_opens_its_microbatch(tab, site):
    page = tab.open(f"run.html#run={site['ids']['alpha']}")
    hint = _click_chart(page, "#mbloss-chart", 0.62)
    mb = int(re.search(r"open microbatch (\d+)", hint).group(1))
    page.wait_for_url(re.compile(r"batches\.html"))
    tab.ready()
    page.wait_for_selector("#samples")
    assert page.locator("#position").inner_text().startswith(f"Microbatch {mb} (")
    assert f"mb={mb}" in page.url
    tab.check()


def test_step_curve_point_opens_the_microbatches_of_that_step(tab, site):
    page = tab.open(f"run.html#run={site['ids']['alpha']}")
    hint = _click_chart(page, "#curve-charts figure.chart:first-child", 0.4)
    step = int(re.search(r"optimizer step (\d+)", hint).group(1))
    page.wait_for_url(re.compile(r"batches\.html"))
    tab.ready()
    page.wait_for_selector("#samples")
    assert re.search(rf"· step {step}$", page.locator("#position").inner_text())
    # The first microbatch of that step: the one before it belongs to an earlier step.
    mb = int(re.search(r"Microbatch (\d+)", page.locator("#position").inner_text()).group(1))
    assert mb == (step - 1) * 8 + 1
    tab.check()


def test_keyboard_navigation_in_the_batch_browser(tab, site):
    page = tab.open(f"batches.html#run={site['ids']['alpha']}&mb={CHUNK - 1}")
    position = page.locator("#position")
    assert position.inner_text().startswith(f"Microbatch {CHUNK - 1} (")
    for key, expected in (("j", CHUNK), ("ArrowRight", CHUNK + 1), ("k", CHUNK), ("ArrowLeft", CHUNK - 1)):
        page.keyboard.press(key)
        page.wait_for_function(
            "(want) => document.getElementById('position').textContent.startsWith(want)", arg=f"Microbatch {expected} ("
        )
    page.keyboard.press("s")
    ce = [
        float(v)
        for v in page.locator("#samples tbody tr td:last-child .num").evaluate_all("els => els.map(e => e.title)")
    ]
    assert ce == sorted(ce, reverse=True) and page.locator("#sort").input_value() == "ce-desc"
    page.keyboard.press("ArrowDown")
    page.locator("#sample-detail").wait_for()
    page.keyboard.press("Escape")
    page.wait_for_selector("#sample-detail", state="detached")
    page.locator("#goto-step").fill("7")
    page.locator("#goto-step").press("Enter")
    page.wait_for_function("() => document.getElementById('position').textContent.endsWith('step 7')")
    tab.check()


def test_cells_grid_opens_items_and_episode_traces(tab, site):
    test = load_data_file(site["out"] / f"data/tests/{site['ids']['alpha']}/full_test.js")[1]
    cells = test["summary"]["cells"]
    target, current = next(
        (t, c)
        for t in sorted(cells)
        for c in sorted(cells[t])
        if cells[t][c]["errors"] or cells[t][c]["failed_episodes"]
    )
    page = tab.open(f"test.html#run={site['ids']['alpha']}&name=full_test")
    page.locator(f'button.cell[data-target="{target}"][data-current="{current}"]').click()
    detail = page.locator("#cell-detail")
    detail.wait_for()
    assert f"Target {target}, current {current}" in detail.inner_text()
    item = detail.locator("article.item").first
    assert item.locator("ol.trace li").count() >= 1
    assert f"cell={target}%2C{current}" in page.url or f"cell={target},{current}" in page.url
    assert (
        page.locator(f'button.cell[data-target="{target}"][data-current="{current}"]').get_attribute("aria-pressed")
        == "true"
    )
    page.screenshot(path=str(SHOTS / "test-cell-detail-1280.png"), full_page=True)
    # Heat map colours come from viridis (colour-blind safe): every cell has an rgb() background.
    colours = page.locator("button.cell").evaluate_all("els => els.map(e => e.style.background)")
    assert colours and all(c.startswith("rgb(") for c in colours)
    tab.check()


@pytest.mark.parametrize("name", ["catalog", "batches", "eval", "test", "xss-run"])
def test_strings_from_runs_show_as_text_and_never_run(tab, site, name):
    page = tab.open(pages(site)[name])
    if name == "test":
        page.locator("#only-bad").uncheck()
        page.locator("#cell-detail summary", has_text="All fields").first.click()
    if name == "eval":
        page.locator("summary", has_text="The first 60 rows as stored").click()
    text = page.locator("body").inner_text()
    expected = {"catalog": XSS, "batches": XSS, "eval": XSS[:1], "test": XSS[1:], "xss-run": XSS}[name]
    for s in expected:
        assert s in text, f"{s!r} does not show as text on {name}"
    # No element came from the data: no <img src=x>, no script but the site's own files.
    assert page.locator('img[src="x"]').count() == 0
    scripts = page.locator("script[src]").evaluate_all("els => els.map(e => e.getAttribute('src'))")
    assert all(s.startswith(("static/", "data/")) for s in scripts), scripts
    assert page.locator("script:not([src])").count() == 0
    page.wait_for_timeout(200)
    tab.check()


def test_temperature_widget_is_an_illustration_apart_from_measured_results(tab, site):
    page = tab.open(f"eval.html#run={site['ids']['alpha']}&name=full_test")
    box = page.locator("#temperature")
    box.locator("#t-slider").wait_for()
    assert "ILLUSTRATION — NOT A MEASURED RESULT" in box.inner_text()
    assert "illustration" in box.get_attribute("class")
    assert page.locator(".illustration .measured-tag").count() == 0

    def column(i):
        return box.locator("table tbody tr").evaluate_all(f"rows => rows.map(r => r.cells[{i}].textContent)")

    box.locator("#t-slider").evaluate("el => { el.value = 1; el.dispatchEvent(new Event('input')); }")
    assert box.locator("#t-value").inner_text() == "T = 2.000"
    at1, at2 = column(1), column(2)
    assert at1[0] != at2[0]  # mean -log p(gold) moves with T
    assert at1[3] == at2[3]  # accuracy never does
    box.screenshot(path=str(SHOTS / "eval-temperature-1280.png"))
    tab.check()


def test_sweep_document_draws_the_chosen_threshold_and_gates(tab, site):
    page = tab.open(f"eval.html#run={site['ids']['alpha']}&name=boundary")
    assert page.locator("figure.chart canvas").count() >= 1
    text = page.locator("main").inner_text()
    assert "recall[-1]>=0.5" in text and "Chosen threshold" in text
    tab.check()


def test_catalog_filter_and_sort(tab, site):
    page = tab.open("index.html")
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 2
    page.locator("#filter").fill("alpha")
    assert rows.count() == 1 and "alpha" in rows.first.inner_text()
    page.locator("#filter").fill("")
    page.locator("#f-group").select_option("g1")
    assert rows.count() == 1
    page.locator("#f-group").select_option("")
    page.get_by_role("button", name=re.compile("^Run")).click()
    names = page.locator("table.runs tbody tr a.runlink").all_inner_texts()
    assert names == sorted(names, key=str.lower) or names == sorted(names)
    tab.check()


# -- Comparisons page ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compare_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-compare")
    ids = make_compare_ledger(root / "ledger")
    build_site(root / "ledger", root / "out")
    SHOTS.mkdir(parents=True, exist_ok=True)
    return {"out": root / "out", "ids": ids}


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_compare_page_renders_marks_and_mean_rows(browser, compare_site, viewport):
    t = Tab(browser, compare_site, viewport)
    try:
        page = t.open("compare.html")
        assert page.locator("h1").inner_text() == "Comparisons" and page.locator(".callout.error").count() == 0
        page.screenshot(path=str(SHOTS / f"compare-{VIEWPORTS[viewport]['width']}.png"), full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"compare is {overflow}px wider than a {viewport} window"
        assert page.locator("table.version-table").count() == 3
        paired = page.locator("table.version-table").first
        marks = paired.locator(".sig-mark").all_inner_texts()
        assert marks == ["*", "n.s."]  # digit_step, same_items; the rest untested
        sig = paired.locator("tbody tr", has=page.locator(".sig-mark.sig"))
        assert "digit_step" in sig.inner_text()
        title = sig.locator("td.delta").get_attribute("title")
        assert "paired bootstrap 95% CI" in title and "p = " in title
        assert paired.locator("tr.mean").inner_text().startswith("Mean (4 benchmarks)")
        assert page.locator("tr.mean").count() == 3
        assert paired.locator("tr.cat").all_inner_texts() == ["Steps", "Other"]
        assert "no paired test" in page.locator(".table-warnings").first.inner_text()
        docs = page.locator("#documents table.comparison tbody tr")
        assert docs.count() == 1 and "paired (same items)" in docs.first.inner_text()
        groups = page.locator("#groups")
        assert "recorded values" in groups.inner_text() and "test_accuracy" in groups.inner_text()
        t.check()
    finally:
        t.close()


def test_compare_page_shows_xss_names_as_text(tab, compare_site):
    tab.site = compare_site
    page = tab.open("compare.html")
    text = page.locator("main").inner_text()
    for s in XSS:
        assert s in text, f"{s!r} does not show as text on the Comparisons page"
    xss_table = page.locator("table.version-table").nth(2)
    assert XSS[0] in xss_table.locator("thead").inner_text()  # a model named <script>...
    assert XSS[0] in xss_table.locator("tbody th .bench").first.inner_text()  # a benchmark named <script>...
    assert page.locator('img[src="x"]').count() == 0
    assert page.locator("script:not([src])").count() == 0
    page.wait_for_timeout(200)
    tab.check()


def test_catalog_links_to_the_comparisons_page(tab, compare_site):
    tab.site = compare_site
    page = tab.open("index.html")
    section = page.locator("#comparisons")
    assert "3 suites" in section.inner_text() and "1 document" in section.inner_text()
    section.locator("#compare-link").click()
    tab.ready()
    assert page.url.endswith("compare.html") and page.locator("table.version-table").count() == 3
    tab.check()


def test_a_damaged_line_leaves_the_run_readable(browser, tmp_path):
    # one damaged record is skipped with a warning naming file and line; the run is still built (#17)
    ids = make_site_ledger(tmp_path / "ledger", batches=20)
    metrics = tmp_path / "ledger" / "runs" / ids["alpha"] / "metrics.jsonl"
    lines = metrics.read_bytes().splitlines(keepends=True)
    lines[0] = b"{not json\n"
    metrics.write_bytes(b"".join(lines))
    result = build_site(tmp_path / "ledger", tmp_path / "out")
    assert any("metrics.jsonl:1" in w and ids["alpha"] in w for w in result.warnings)
    t = Tab(browser, {"out": tmp_path / "out"})
    try:
        page = t.open("index.html")
        row = page.locator("table.runs tbody tr", has_text="alpha")
        assert "could not be read" not in row.inner_text()
        assert page.locator("table.runs a.runlink").count() == 2  # both runs link
        page.screenshot(path=str(SHOTS / "catalog-damaged-line-1280.png"), full_page=True)
        t.check()
        page.goto(t.url(f"run.html#run={ids['alpha']}"))
        page.wait_for_selector("h1", timeout=15000)
        assert page.locator(".callout.error").count() == 0
    finally:
        t.close()


# ---------------------------------------------------------------- issue 11: what a new user saw
def _shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def ci90_site(tmp_path_factory):
    """Two runs with paired results, a 90% evaluation and a 90% comparison stored by the first."""
    import labledger

    root = tmp_path_factory.mktemp("browser-ci90")
    ledger = labledger.open_ledger(root / "ledger", create=True)
    base = results_rows(n=120, seed=5)
    better = [
        {**r, "probs": {str(r["gold"]): 0.9, **{k: 0.05 for k in r["probs"] if k != str(r["gold"])}}} for r in base
    ]
    ids, paths = {}, {}
    for name, rows in (("wide", better), ("narrow", base)):
        with labledger.start_run(name, ledger=ledger) as run:
            run.log_results("test", rows)
            ids[name] = run.id
        paths[name] = ledger.run(ids[name]).results_path("test")
    doc = labledger.evaluate(paths["wide"], ci=0.9, resamples=200)
    ledger.save_evaluation(ids["wide"], "test", doc.to_dict() if hasattr(doc, "to_dict") else doc)
    cmp = labledger.compare(paths["wide"], paths["narrow"], metrics=["accuracy"], ci=0.9, resamples=200)
    cmp = cmp.to_dict() if hasattr(cmp, "to_dict") else cmp
    cmp["names"] = {"a": "wide", "b": "narrow"}
    ledger.save_evaluation(ids["wide"], "compare-narrow", cmp, kind="comparison")
    ledger.close()
    # a file that claims to be a calibration but is not one (the store refuses to write such a
    # document; a hand-edited or foreign file can still be there)
    odd = root / "ledger" / "runs" / ids["wide"] / "evals" / "odd"
    odd.mkdir(parents=True)
    (odd / "calibration.json").write_text('{"kind": "calibration", "note": "not a calibration"}')
    out = root / "out"
    build_site(root / "ledger", out)
    SHOTS.mkdir(parents=True, exist_ok=True)
    return {"out": out, "ids": ids, "comparison": cmp}


def test_per_run_comparison_page_shows_a_b_differences_and_p(browser, ci90_site):
    t = Tab(browser, ci90_site)
    page = t.open(f"eval.html#run={ci90_site['ids']['wide']}&name=compare-narrow")
    table = page.locator("table.comparison")
    assert table.count() == 1
    heads = table.locator("thead th").all_inner_texts()
    assert heads[:7] == ["Task", "Metric", "a", "b", "Diff (a − b)", "90% CI of diff", "p (bootstrap)"]
    [m] = [m for task in ci90_site["comparison"]["tasks"].values() for m in task["metrics"]]
    cells = table.locator("tbody tr").first.locator("td").all_inner_texts()
    assert cells[1] == "accuracy"
    assert float(cells[2]) == pytest.approx(m["a"], abs=1e-4) and float(cells[3]) == pytest.approx(m["b"], abs=1e-4)
    assert float(cells[4].replace("−", "-")) == pytest.approx(m["diff"], abs=1e-4) and cells[4].startswith("+")
    assert re.fullmatch(r"\[[+−]\d\.\d{4}, [+−]\d\.\d{4}\]", cells[5]), cells[5]
    shown_p = "< 0.001" if m["p_value"] < 0.001 else f"{m['p_value']:#.2g}"
    # the p adjusted for the comparison's family of tests follows it when there is one (#16)
    assert cells[6].split(" (adj. ")[0] == shown_p
    assert "(b=" in cells[7]  # McNemar's b and c
    assert "–" not in cells[2:7]
    assert "95%" not in page.locator("main").inner_text()
    _shot(page, "eval-comparison-90")
    t.check()
    t.close()


def test_a_90_percent_evaluation_is_labelled_90_percent(browser, ci90_site):
    t = Tab(browser, ci90_site)
    page = t.open(f"eval.html#run={ci90_site['ids']['wide']}&name=test")
    first = page.locator("section.card").first
    assert first.locator("h2").inner_text().startswith("Evaluation")  # the evaluation leads the page
    heads = first.locator("table.data").first.locator("thead th").all_inner_texts()
    assert "90% CI" in heads and not any("95%" in h for h in heads)
    assert "95%" not in page.locator("main").inner_text()
    _shot(page, "eval-ci90")
    t.check()
    t.close()


def test_formats_shared_with_the_cli(tab, site):
    page = tab.open("index.html")
    got = page.evaluate(
        """() => [[null, 0.0509, 0.0012, 1, 0.0005, 0.001, 0.5].map(LL.fmt.p),
                   [0.9, 0.95, 0.975].map(LL.fmt.ciLabel),
                   LL.fmt.interval(0.0016713, -0.0002786, 0.0039)]"""
    )
    assert got[0] == ["–", "0.051", "0.0012", "1.0", "< 0.001", "0.0010", "0.50"]
    assert got[1] == ["90% CI", "95% CI", "97.5% CI"]
    assert got[2] == {"value": "0.001671", "ci": "[−0.000279, 0.003900]"}
    tab.check()


def test_eval_page_leads_with_the_evaluation_and_names_raw_and_calibrated(tab, site):
    page = tab.open(f"eval.html#run={site['ids']['alpha']}&name=full_test")
    kinds = page.locator("main > section.card h2").all_inner_texts()
    assert kinds[0].startswith("Evaluation"), kinds
    _shot(page, "eval-full-test")
    tab.check()


def test_batch_fields_are_rounded_with_exact_values_on_hover(tab, site):
    page = tab.open(f"batches.html#run={site['ids']['alpha']}&mb=1")
    facts = page.locator("#batch-fields .fact")
    texts = dict(zip(facts.locator(".fk").all_inner_texts(), facts.locator(".fv").all_inner_texts()))
    assert re.fullmatch(r"\d+\.\d{1,4}", texts["loss"]), texts["loss"]  # 4 significant digits
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", texts["time"]), texts["time"]
    exact = facts.filter(has_text="loss").locator(".fv .num").get_attribute("title")
    assert len(exact) > len(texts["loss"])
    _shot(page, "batches")
    tab.check()


def test_selected_marker_label_sits_above_the_plot(tab, site):
    page = tab.open(f"run.html#run={site['ids']['alpha']}")
    page.wait_for_selector("#validation figure.chart canvas", timeout=15000)
    page.wait_for_timeout(300)
    _shot(page, "run")
    # The plot area starts below the label's padding: uPlot's bbox top is at least 20 CSS px.
    top = page.evaluate(
        "() => { const f = document.querySelector('#validation figure.chart'); return f.chart ? f.chart.bbox.top / devicePixelRatio : null; }"
    )
    assert top is None or top >= 20
    tab.check()


def test_served_pages_do_not_say_no_server(browser, site):
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(site["out"]))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        t = Tab(browser, site)
        t.page.goto(f"http://127.0.0.1:{server.server_port}/index.html")
        t.ready()
        foot = t.page.locator("footer").inner_text()
        assert "no server" not in foot and "Served" in foot
        t.close()
        t = Tab(browser, site)
        assert "no server" in t.open("index.html").locator("footer").inner_text()  # from disk it says so
        t.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_document_without_its_kinds_fields_is_reported_and_shown_as_stored(browser, ci90_site):
    t = Tab(browser, ci90_site)
    page = t.open(f"eval.html#run={ci90_site['ids']['wide']}&name=odd")
    sec = page.locator("section.card").first
    assert "does not have the fields this page reads" in sec.locator(".callout.warn").inner_text()
    assert sec.locator("details[open] .jtree").count() == 1  # the document as stored, opened
    t.check()
    t.close()


# -- the batches page at phone width (#43) ---------------------------------------------------------
@pytest.fixture(scope="module")
def wide_batch_site(tmp_path_factory):
    """One microbatch whose samples are as wide as they come: an unbroken 300-character token as
    input, long label names, long field names and values, a nested JSON input, an image."""
    import labledger

    root = tmp_path_factory.mktemp("browser-batches-narrow")
    labels = ("a_very_long_label_name_for_the_first_class", "second-class-with-a-long-name", "c")
    with labledger.start_run("narrow", ledger=root / "ledger") as run:
        rec = make_batch(1, n=4, labels=labels)
        rec["samples"][0]["input"] = "token" * 60
        rec["samples"][1]["input"] = {"text": "x" * 300, "image": "images/1-1.png"}
        rec["samples"][2]["input"] = {"nested": {"list": list(range(40)), "key": "y" * 200}}
        rec["samples"][3]["a_field_name_that_is_longer_than_the_label_column"] = "z" * 120
        rec["a_batch_field_with_a_long_name"] = "w" * 150
        run.log_batch(rec)
        run.log_file("images/1-1.png", tiny_png(11))
    build_site(root / "ledger", root / "out")
    SHOTS.mkdir(parents=True, exist_ok=True)
    return {"out": root / "out", "ids": {"narrow": run.id}}


@pytest.mark.parametrize("sample", [None, 0, 1, 2, 3])
def test_batches_page_fits_a_phone(browser, wide_batch_site, sample):
    """At 390x844 nothing sticks out sideways (#43: the page broke at 390 px): no page overflow,
    every element of the batch within the window, the samples' caption across the card (not one
    word per line in the first column), with or without a sample's fields open."""
    t = Tab(browser, wide_batch_site, "phone")
    try:
        rid = wide_batch_site["ids"]["narrow"]
        page = t.open(f"batches.html#run={rid}&mb=1" + ("" if sample is None else f"&sample={sample}"))
        page.wait_for_selector("#samples tbody tr")
        if sample is not None:
            page.wait_for_selector("#sample-detail")
        page.screenshot(path=str(SHOTS / f"batches-narrow-{sample}-390.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
        past = page.evaluate(
            """() => [...document.querySelectorAll("main *")]
                .filter(e => !e.closest(".scroll") || e.closest("#samples"))
                .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                .map(e => e.tagName + "." + e.className)"""
        )
        assert past == []
        caption = page.locator("#samples caption").bounding_box()
        card = page.locator("#samples-section").bounding_box()
        assert caption["width"] >= 0.8 * card["width"] and caption["height"] < 80, (caption, card)
        t.check()
    finally:
        t.close()


# -- lineage (#15) -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lineage_site(tmp_path_factory):
    """s1 (from a hub model) -> s2 and s3 (from s1's checkpoint); a soup 0.25 s2 + 0.75 s3, named
    like an XSS attempt; s2's referenced checkpoint file changed after it was logged."""
    import labledger

    root = tmp_path_factory.mktemp("browser-lineage")
    book = root / "ledger"
    ids, recs = {}, {}
    with labledger.start_run("s1", ledger=book, init="hub/base-model", config={"steps": 10, "lr": 1e-4}) as run:
        (root / "s1.pt").write_bytes(b"s1")
        recs["s1"] = run.log_checkpoint(root / "s1.pt", step=10)
    ids["s1"] = run.id
    for name in ("s2", "s3"):
        with labledger.start_run(name, ledger=book, init=recs["s1"], config={"steps": 5}) as run:
            (root / f"{name}.pt").write_bytes(name.encode())
            recs[name] = run.log_checkpoint(root / f"{name}.pt", step=5, copy=name == "s3")
        ids[name] = run.id
    (root / "s2.pt").write_bytes(b"s2 overwritten")
    inputs = [
        {"path": recs["s2"]["path"], "sha256": recs["s2"]["sha256"], "weight": 0.25},
        {"path": recs["s3"]["path"], "sha256": recs["s3"]["sha256"], "weight": 0.75},
    ]
    with labledger.start_run(XSS[0], ledger=book, tags=("soup",), config={"soup": {"inputs": inputs}}) as run:
        (root / "soup.pt").write_bytes(b"soup")
        run.log_checkpoint(root / "soup.pt")
    ids["soup"] = run.id
    build_site(book, root / "out")
    SHOTS.mkdir(parents=True, exist_ok=True)
    return {"out": root / "out", "ids": ids}


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_lineage_page_draws_nodes_links_weights_and_the_path(browser, lineage_site, viewport):
    t = Tab(browser, lineage_site, viewport)
    ids = lineage_site["ids"]
    try:
        page = t.open(f"lineage.html#node=run:{ids['soup']}")
        page.screenshot(path=str(SHOTS / f"lineage-{VIEWPORTS[viewport]['width']}.png"), full_page=True)
        graph = page.locator("svg.lineage-graph")
        assert graph.locator(".node").count() == 9  # 4 runs + 4 checkpoints + 1 external
        assert graph.locator(".node-soup").count() == 1 and graph.locator(".node-external").count() == 1
        assert sorted(graph.locator("text.weight").all_text_contents()) == ["0.25", "0.75"]
        hrefs = [a.get_attribute("href") for a in graph.locator("a.node-link").all()]
        assert sorted(hrefs) == sorted(f"run.html#run={i}" for i in ids.values())
        # the path to the soup: every node upstream of it (all but the checkpoint the soup wrote)
        assert graph.locator(".node.on-path").count() == 8
        page.select_option("#lineage-select", f"run:{ids['s2']}")
        on = graph.locator(".node.on-path")
        assert on.count() == 4  # external, s1, s1's checkpoint, s2
        assert "s3" not in " ".join(on.all_text_contents())
        assert page.url.endswith(f"#node=run%3A{ids['s2']}") or page.url.endswith(f"#node=run:{ids['s2']}")
        assert graph.locator(".node.changed").count() == 1
        assert "sha256 mismatch" in page.locator(".callout.error").inner_text()
        table = page.locator("table.trajectory")
        assert table.locator("tbody tr").count() == 4
        assert "0.25 s2 (" in table.inner_text() and "hub/base-model" in table.inner_text()
        graph.locator(f'a.node-link[href="run.html#run={ids["s1"]}"]').click()
        t.ready()
        assert page.url.endswith(f"run.html#run={ids['s1']}")
        t.check()
    finally:
        t.close()


def test_catalog_links_to_the_lineage_page(tab, lineage_site):
    tab.site = lineage_site
    page = tab.open("index.html")
    page.locator("#lineage-link").click()
    page.wait_for_url("**/lineage.html", timeout=15000)
    tab.ready()
    assert page.url.endswith("lineage.html") and page.locator("svg.lineage-graph .node").count() == 9
    tab.check()


LONG_NAME = "fine-tune-of-the-large-model-with-a-very-long-descriptive-run-name"


@pytest.fixture(scope="module")
def long_lineage_site(tmp_path_factory):
    """Two runs of one long name, each with a headline and a checkpoint with a long file name; a
    fine-tune started from the first one's checkpoint."""
    import labledger

    root = tmp_path_factory.mktemp("browser-lineage-long")
    book = root / "ledger"
    ids, recs = [], []
    for i in range(2):
        with labledger.start_run(LONG_NAME, ledger=book) as run:
            run.set_summary(validation_macro_f1_over_every_language=0.8123 + i / 100)
            ckpt = root / f"checkpoint-epoch-0{i}-global-step-000123456-best-validation.safetensors"
            ckpt.write_bytes(bytes([i]))
            recs.append(run.log_checkpoint(ckpt, step=123456))
        ids.append(run.id)
    with labledger.start_run("ft", ledger=book, init=recs[0]) as run:
        run.set_summary(accuracy=0.5)
    ids.append(run.id)
    build_site(book, root / "out")
    SHOTS.mkdir(parents=True, exist_ok=True)
    return {"out": root / "out", "ids": ids}


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_lineage_labels_fit_their_nodes(browser, long_lineage_site, viewport):
    """Every line of every node lies inside its node's box (#43: labels ran past their boxes); a
    long name or file takes two lines, showing its start and its end; a cut line ends in "…" and
    keeps its tail (a headline's value); the node's hover title has everything whole; same-named
    runs differ by id."""
    t = Tab(browser, long_lineage_site, viewport)
    try:
        page = t.open("lineage.html")
        page.screenshot(path=str(SHOTS / f"lineage-long-{VIEWPORTS[viewport]['width']}.png"), full_page=True)
        nodes = page.evaluate(
            """() => [...document.querySelectorAll("svg.lineage-graph g.node")].map(g => {
                const rect = g.querySelector("rect").getBBox();
                const line = el => {
                    const b = el.getBBox();
                    return {text: el.textContent, full: el.dataset.full, box: [b.x, b.y, b.width, b.height]};
                };
                return {
                    title: g.querySelector("title").textContent,
                    rect: [rect.x, rect.y, rect.width, rect.height],
                    name: [...g.querySelectorAll("text.name")].map(el => el.textContent),
                    lines: [...g.querySelectorAll("text.line")].filter(el => el.textContent).map(line),
                };
            })"""
        )
        assert len(nodes) == 5  # 3 runs, 2 checkpoints
        cut = 0
        for node in nodes:
            x, y, w, hgt = node["rect"]
            assert len(node["lines"]) in (3, 4)
            for line in node["lines"]:
                lx, ly, lw, lh = line["box"]
                assert x + 4 <= lx and lx + lw <= x + w - 4, (line, node["rect"])
                assert y <= ly and ly + lh <= y + hgt, (line, node["rect"])
            tops = [line["box"][1] for line in node["lines"]]
            assert tops == sorted(tops) and len(set(tops)) == len(tops)  # stacked, never on each other
            first, second = node["name"]
            full = node["lines"][0]["full"]
            assert full in node["title"]
            if not second:
                assert first == full
            else:  # two lines: the start, then the rest or "…" and the end
                cut += 1
                assert full.startswith(first) and len(first) >= 20
                assert second == full[len(first) :] or (second[0] == "…" and full.endswith(second[1:]))
            for line in node["lines"][len(node["lines"]) - 2 :]:
                if line["text"] != line["full"]:
                    cut += 1
                    head, tail = line["text"].split("…")
                    assert line["full"].startswith(head) and line["full"].endswith(tail)
                    assert line["full"] in node["title"]
        assert cut >= 4  # the long names, the checkpoint files, the long headlines
        names = [n for n in nodes if n["lines"][0]["full"] == LONG_NAME]
        assert len(names) == 2
        assert {n["lines"][-1]["text"] for n in names} == {f"run · {i[-6:]}" for i in long_lineage_site["ids"][:2]}
        assert all(LONG_NAME in n["title"] and "validation_macro_f1_over_every_language" in n["title"] for n in names)
        # a headline is cut in its metric's name, never its value
        assert sorted(n["lines"][-2]["text"].split("…")[-1] for n in names) == [" 0.8123", " 0.8223"]
        files = [n["name"] for n in nodes if n["lines"][-2]["full"].startswith("sha256 ")]
        assert len(files) == 2 and all(f[1].endswith(".safetensors") for f in files), files
        assert {f[0][:19] for f in files} == {"checkpoint-epoch-00", "checkpoint-epoch-01"}
        ft = next(n for n in nodes if n["lines"][0]["full"] == "ft")
        assert [line["text"] for line in ft["lines"]][:2] == ["ft", "accuracy 0.5"]  # short lines whole
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1  # the graph and the table scroll inside their own boxes
        t.check()
    finally:
        t.close()


def test_lineage_page_shows_xss_run_names_as_text(tab, lineage_site):
    tab.site = lineage_site
    page = tab.open("lineage.html")
    assert XSS[0] in page.locator("svg.lineage-graph").inner_html().replace("&lt;", "<").replace("&gt;", ">")
    assert XSS[0] in page.locator("table.trajectory").inner_text()
    assert page.locator("svg script, main script").count() == 0
    page.wait_for_timeout(200)
    tab.check()
