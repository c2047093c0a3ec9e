"""The items that flipped on the site's Comparisons page (#44): a stored comparison with ``flips`` keeps the
counts whole and its items (texts cut) in data/compare.js, and in a real browser (Playwright, headless
Chromium) the page lists them, filters them by cluster, and shows prompts as text, never as markup."""

from __future__ import annotations

import pytest
from conftest import ARTIFACTS, CHROMIUM, sync_playwright

import labledger
from labledger.analysis.comparison import compare
from labledger.site import build_site, load_data_file
from labledger.site.comparisons import FLIP_TEXT

XSS_PROMPT = "<img src=x onerror=alert(1)> what is 2+2?"


def _rows(model: int) -> list[dict]:
    rows = []
    for i in range(90):
        gold = "yes" if i % 2 else "no"
        right = (i % 3 != 0) if model == 0 else (i % 5 != 0)
        prompt = XSS_PROMPT if i == 5 else f"question {i} " + "x" * (400 if i == 3 else 0)
        rows.append(
            {
                "id": f"q{i}",
                "task": "qa",
                "gold": gold,
                "pred": gold if right else ("no" if gold == "yes" else "yes"),
                "group": f"topic{i % 4}",
                "prompt": prompt,
            }
        )
    return rows


@pytest.fixture(scope="module")
def flips_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("flips-site")
    ledger_dir = root / "ledger"
    with labledger.start_run("flips", ledger=ledger_dir) as run:
        pass
    cmp = compare(_rows(0), _rows(1), metrics=["accuracy"], resamples=0, items=True)
    book = labledger.open_ledger(ledger_dir)
    book.save_evaluation(run.id, "a-vs-b", cmp.to_dict(), kind="comparison")
    book.close()
    build_site(ledger_dir, root / "out")
    return {"out": root / "out", "flips": cmp.doc.tasks["qa"].flips}


def test_the_page_data_keeps_counts_and_cut_texts(flips_site) -> None:
    _, data = load_data_file(flips_site["out"] / "data" / "compare.js")
    (doc,) = data["comparisons"]
    (task,) = doc["tasks"]
    f, expect = task["flips"], flips_site["flips"]
    assert (f["a_better"], f["b_better"]) == (expect.a_better, expect.b_better) and expect.a_better > 0
    assert f["listed"] == f["shown"] == len(expect.items) == len(f["items"])
    assert [x["id"] for x in f["items"]] == [x.id for x in expect.items]
    long = next(x for x in f["items"] if x["id"] == "q3")
    assert len(long["prompt"]) == FLIP_TEXT and long["prompt"].endswith("…")


@pytest.mark.browser
@pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install playwright)")
@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)")
def test_the_page_lists_filters_and_shows_prompts_as_text(browser, flips_site) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto((flips_site["out"] / "compare.html").as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        f = flips_site["flips"]
        box = page.locator("div.flips").first
        head = box.locator("h4").inner_text()
        assert f"{f.a_better} A right & B wrong, {f.b_better} A wrong & B right" in head
        rows = box.locator("table.flips tbody tr")
        assert rows.count() == min(20, len(f.items))  # a page of 20
        first = f.items[0]
        assert rows.first.locator("td").nth(1).inner_text() == first.id
        box.locator("select").select_option("topic1")
        in_topic = [x for x in f.items if x.cluster == "topic1"]
        assert rows.count() == min(20, len(in_topic)) > 0
        assert all("topic1" in t for t in rows.all_inner_texts())
        assert XSS_PROMPT in box.inner_text()  # q5 flipped: its prompt shows as text
        (ARTIFACTS / "screenshots").mkdir(parents=True, exist_ok=True)
        box.screenshot(path=str(ARTIFACTS / "screenshots" / "compare-flips.png"))
        assert page.locator('img[src="x"]').count() == 0
        page.wait_for_timeout(200)
        assert errors == [] and dialogs == [], (errors, dialogs)
    finally:
        page.close()
