"""What W&B users expect to see (#43): images (single, lists, captions, masks), tables (images in
cells) and histograms logged with ``labledger.wandb`` are stored as files and shown on the run page:
an image panel per key with a step slider and captions, a sortable paged table, histograms over
steps; ``define_metric(step_metric=...)`` makes that metric the x axis of the run page's charts.
Checked in the payload (``data/runs/<run>.js``) and in Chromium on ``file://``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ARTIFACTS, CHROMIUM, sync_playwright

import labledger.wandb as wandb
from labledger.site import build_site, load_data_file, rundata
from labledger.store.ledger import Ledger
from labledger.store.view import RunView
from labledger.wandb.media import MediaError

STEPS = 4
SHOTS = ARTIFACTS / "screenshots"


def log_media_run(ledger, *, table_rows: int = 5) -> str:
    """A wandb run with images, masks, a table with images in cells, histograms and a step metric."""
    rng = np.random.default_rng(0)
    run = wandb.init(project="media", name="media-demo", ledger=ledger, config={"lr": 0.1}, system_metrics=False)
    wandb.define_metric("epoch")
    wandb.define_metric("val/*", step_metric="epoch")
    for s in range(STEPS):
        samples = [
            wandb.Image((rng.random((16, 16, 3)) * 255).astype(np.uint8), caption=f"sample {i} at step {s}")
            for i in range(3)
        ]
        mask = np.zeros((16, 16), dtype=np.uint8)
        mask[4:12, 4:12] = 1
        mask[0:3, :] = 2
        seg = wandb.Image(
            np.full((16, 16, 3), 200, dtype=np.uint8),
            caption=f"segmented {s}",
            masks={"predictions": {"mask_data": mask, "class_labels": {0: "background", 1: "cat", 2: "sky"}}},
        )
        table = wandb.Table(columns=["img", "pred", "score"])
        for i in range(table_rows):
            table.add_data(
                wandb.Image(np.full((8, 8), (i * 37) % 256, dtype=np.uint8), caption=f"row {i}"),
                f"class {i % 3}",
                round(float((i * 7919 + s) % 97) / 97, 4),
            )
        wandb.log(
            {
                "samples": samples,
                "single": wandb.Image(np.zeros((4, 4), dtype=np.uint8), caption=f"single {s}"),
                "seg": seg,
                "preds": table,
                "weights": wandb.Histogram(rng.normal(s, 1.0, 500), num_bins=32),
                "loss": 1.0 / (s + 1),
            },
            step=s,
        )
        wandb.log({"val/acc": 0.5 + s / 10, "epoch": 10 * s}, step=s)
    wandb.finish()
    return run.id


def test_images_in_table_cells_and_masks_are_stored_as_files(tmp_path):
    rid = log_media_run(tmp_path / "ledger", table_rows=3)
    run_dir = tmp_path / "ledger" / "runs" / rid
    recs = [json.loads(line) for line in (run_dir / "media.jsonl").read_text().splitlines()]
    table = next(r for r in recs if r["kind"] == "table" and r["step"] == 2)
    rows = [json.loads(line) for line in (run_dir / table["path"]).read_text().splitlines()]
    cell = rows[1]["img"]
    assert cell["_type"] == "image-file" and cell["caption"] == "row 1" and cell["shape"] == [8, 8]
    assert (run_dir / cell["path"]).is_file() and (run_dir / cell["path"]).read_bytes()[:4] == b"\x89PNG"
    seg = next(r for r in recs if r["kind"] == "image" and r["key"] == "seg" and r["step"] == 1)
    (mask,) = seg["files"][0]["masks"]
    assert mask["name"] == "predictions" and mask["class_labels"] == {"0": "background", "1": "cat", "2": "sky"}
    assert set(mask["colors"]) == {"1", "2"}  # class 0 is transparent
    from PIL import Image as PILImage

    ids = np.asarray(PILImage.open(run_dir / mask["path"]))
    assert ids.shape == (16, 16) and set(np.unique(ids).tolist()) == {0, 1, 2} and ids[5, 5] == 1
    overlay = np.asarray(PILImage.open(run_dir / mask["overlay"]))
    assert overlay.shape == (16, 16, 4) and overlay[5, 5, 3] > 0 and overlay[14, 14, 3] == 0


def test_a_bad_mask_says_what_is_wrong():
    with pytest.raises(MediaError, match="mask_data"):
        wandb.Image(np.zeros((4, 4)), masks={"m": {"class_labels": {}}})
    with pytest.raises(MediaError, match="0..255"):
        wandb.Image(np.zeros((4, 4)), masks={"m": {"mask_data": np.full((4, 4), 300)}})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("media-site")
    rid = log_media_run(root / "ledger", table_rows=45)
    out = root / "out"
    build = build_site(root / "ledger", out)
    assert build.warnings == []
    return {"root": root, "out": out, "id": rid}


def test_run_payload_media_section(site):
    rid, out = site["id"], site["out"]
    payload = load_data_file(out / f"data/runs/{rid}.js")[1]
    media = payload["media"]
    images = {m["key"]: m for m in media["images"]}
    assert list(images) == ["samples", "single", "seg"]
    samples = images["samples"]
    assert samples["steps"] == list(range(STEPS)) and samples["logged"] == STEPS
    assert [i["caption"] for i in samples["items"][2]] == [f"sample {i} at step 2" for i in range(3)]
    assert samples["items"][0][0]["ref"] == "media/samples/0-0.png" and samples["items"][0][0]["w"] == 16
    seg = images["seg"]["items"][3][0]
    assert seg["masks"][0]["labels"]["1"] == "cat" and seg["masks"][0]["overlay"].endswith(".overlay.png")
    (table,) = media["tables"]
    assert table["key"] == "preds" and [t["step"] for t in table["tables"]] == list(range(STEPS))
    last = table["tables"][-1]
    assert last["columns"] == ["img", "pred", "score"] and last["rows"] == 45 and len(last["data"]) == 45
    assert last["data"][0][0] == {"image": f"media/preds/{STEPS - 1}-{(STEPS - 1) * 45}.png", "caption": "row 0"}
    (hist,) = media["histograms"]
    assert hist["key"] == "weights" and hist["steps"] == list(range(STEPS))
    assert all(len(b) == 33 and len(c) == 32 and sum(c) == 500 for b, c in zip(hist["bins"], hist["counts"]))
    # every file the page shows is named for copying, and under the run's files/
    refs = set(media["files"])
    assert {i["ref"] for step in samples["items"] for i in step} <= refs
    assert seg["masks"][0]["overlay"] in refs and last["data"][0][0]["image"] in refs
    assert rundata.media_refs(payload) == media["files"]
    assert payload["step_metrics"] == {"val/acc": "epoch"}
    # the media carry no machine path (the site is mailed): files are relative, inside the site
    assert str(site["root"]) not in (out / f"data/runs/{rid}.js").read_text()
    assert not any(r.startswith("/") or ".." in r.split("/") for r in refs)
    assert "/tmp/" not in json.dumps(media) and str(site["root"]) not in json.dumps(media)


def test_media_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(rundata, "MAX_TABLE_ROWS", 7)
    monkeypatch.setattr(rundata, "MAX_MEDIA_STEPS", 3)
    monkeypatch.setattr(rundata, "MAX_IMAGES_PER_STEP", 2)
    monkeypatch.setattr(rundata, "MAX_TABLE_STEPS", 2)
    log_media_run(tmp_path / "ledger", table_rows=10)
    book = Ledger(tmp_path / "ledger")
    try:
        (info,) = book.runs()
        media = rundata.media_view(RunView(book, info))
    finally:
        book.close()
    assert media is not None
    samples = media["images"][0]
    assert samples["steps"] == [0, 2, 3] and samples["logged"] == STEPS  # evenly thinned, first and last kept
    assert [len(i) for i in samples["items"]] == [2, 2, 2] and samples["more"] == [1, 1, 1]
    tables = media["tables"][0]["tables"]
    assert [t["step"] for t in tables] == [2, 3] and tables[0]["rows"] == 10 and len(tables[0]["data"]) == 7


def _panel(page, key):
    return page.locator(f'.media-panel[data-key="{key}"]')


@pytest.mark.browser
@pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install playwright)")
@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)")
def test_run_page_media_in_chromium(browser, site):
    rid, out = site["id"], site["out"]
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    try:
        page.goto((out / "run.html").as_uri() + f"#run={rid}")
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        page.wait_for_timeout(200)
        # images: the last step first, with captions; the slider moves to the first step
        samples = _panel(page, "samples")
        captions = samples.locator("figure.media-image figcaption")
        assert captions.all_inner_texts() == [f"sample {i} at step {STEPS - 1}" for i in range(3)]
        assert samples.locator(".step-label").inner_text() == f"step {STEPS - 1} ({STEPS} of {STEPS})"
        slider = samples.locator("input.step-slider")
        slider.focus()
        page.keyboard.press("Home")
        assert captions.all_inner_texts() == [f"sample {i} at step 0" for i in range(3)]
        page.keyboard.press("ArrowRight")
        assert samples.locator(".step-label").inner_text() == f"step 1 (2 of {STEPS})"
        srcs = samples.locator("img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
        assert srcs == [f"images/{rid}/media/samples/1-{3 + i}.png" for i in range(3)]
        # masks: an overlay per mask, a legend with the class names, a box that hides it
        seg = _panel(page, "seg")
        assert seg.locator("img.media-mask").count() == 1
        assert "cat" in seg.locator(".mask-legend").inner_text() and "sky" in seg.locator(".mask-legend").inner_text()
        seg.locator(".mask-legend input[type=checkbox]").uncheck()
        assert seg.locator("img.media-mask").is_hidden()
        seg.locator(".mask-legend input[type=checkbox]").check()
        assert seg.locator("img.media-mask").is_visible()
        # the table: paged (45 rows, 20 a page), images in cells, sorted by a click on a column
        preds = _panel(page, "preds")
        assert "45 rows" in preds.inner_text()
        assert preds.locator("tbody tr").count() == 20 and "rows 1–20 of 45" in preds.locator(".pager").inner_text()
        assert preds.locator("tbody tr").first.locator("img").count() == 1
        preds.locator("th button", has_text="score").click()
        scores = [float(t) for t in preds.locator("tbody tr td:nth-child(3)").all_inner_texts()]
        assert scores == sorted(scores, reverse=True)
        preds.locator("th button", has_text="score").click()
        scores = [float(t) for t in preds.locator("tbody tr td:nth-child(3)").all_inner_texts()]
        assert scores == sorted(scores)
        preds.locator(".pager button", has_text="Next").click()
        assert "rows 21–40 of 45" in preds.locator(".pager").inner_text()
        # histograms: the selected step's bars; the heat strip picks a step
        weights = _panel(page, "weights")
        assert weights.locator("svg.hist-bars rect").count() == 32
        assert "500 values at step 3" in weights.locator(".hist-summary").inner_text()
        weights.locator("svg.hist-strip g.hist-col").first.click()
        assert "500 values at step 0" in weights.locator(".hist-summary").inner_text()
        assert weights.locator(".step-label").inner_text() == f"step 0 (1 of {STEPS})"
        # define_metric(step_metric="epoch"): val/acc is charted against epoch
        chart = page.locator("#curve-charts figure.chart", has_text="val/acc")
        assert "epoch" in chart.inner_text() and "optimizer step" not in chart.inner_text()
        assert "optimizer step" in page.locator("#curve-charts figure.chart", has_text="loss").inner_text()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#media").screenshot(path=str(SHOTS / "run-media-1280.png"))
        # the image files are in the site (images/<run>/...), and they load from file://
        assert (out / "images" / rid / "media/samples/1-3.png").is_file()
        assert errors == [], errors
        page.locator("#media").scroll_into_view_if_needed()
        loaded = page.evaluate(
            "() => Array.from(document.querySelectorAll('#media img')).every(i => i.complete && i.naturalWidth > 0)"
        )
        assert loaded
    finally:
        page.close()


@pytest.mark.browser
@pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install playwright)")
@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)")
def test_run_page_media_fits_a_phone(browser, site):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    try:
        page.goto((site["out"] / "run.html").as_uri() + f"#run={site['id']}")
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        page.wait_for_timeout(200)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"the run page is {overflow}px wider than a phone"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#media").screenshot(path=str(SHOTS / "run-media-390.png"))
        assert errors == [], errors
    finally:
        page.close()
