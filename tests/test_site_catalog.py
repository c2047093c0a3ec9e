"""The catalog in chunks and the rebuild that reads only what changed (#47).

The catalog is a head (``data/catalog.js``: the newest runs and what the first paint needs) and
chunks of older runs numbered from the oldest (``data/catalog/<k>.js``); the page draws the newest
runs first, then loads the chunks and says so until every run is in. A rebuild carries over every
run whose quick key (index row, stored documents, one stat of its folder) did not change, without
listing its folder; ``full=True`` lists every folder and checks every file of the site.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from test_site_browser import SHOTS, Tab

import labledger
from labledger.site import build, build_site, load_data_file
from labledger.site.packing import unpack_catalog

CHUNK = 3
RUNS = 10  # chunks 0, 1, 2 (9 runs) and one run in the head


def _ledger(root: Path, n: int = RUNS) -> tuple[Path, list[str]]:
    """``n`` runs (oldest first), run i with i + 1 steps, lr 10^-i, in two groups."""
    d = root / "L"
    ids = []
    for i in range(n):
        config = {"lr": 10.0**-i, "opt": ["adam", "sgd"][i % 2]}
        with labledger.start_run(f"run-{i:02d}", group=f"g{i % 2}", config=config, ledger=d) as run:
            for step in range(1, i + 2):
                run.log(step, loss=1.0 / (step + i))
        ids.append(run.id)
    return d, ids


def _data(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "data").rglob("*")) if p.is_file()}


def _written(result, out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in result.written}


@pytest.fixture(scope="module")
def chunked(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunked")
    d, ids = _ledger(root)
    out = root / "site"
    build_site(d, out, catalog_chunk=CHUNK)
    return {"ledger": d, "ids": ids, "out": out}


# -- the files (no browser) -------------------------------------------------------------------------
def test_chunks_hold_the_oldest_runs_and_read_back_as_the_one_file_catalog(chunked, tmp_path):
    out, ids = chunked["out"], chunked["ids"]
    assert sorted(p.name for p in (out / "data/catalog").iterdir()) == ["0.js", "1.js", "2.js"]
    key, oldest = load_data_file(out / "data/catalog/0.js")
    assert key == "catalog/0"
    whole = load_data_file(out / "data/catalog.js")[1]
    assert [r["id"] for r in whole["runs"]] == list(reversed(ids))  # the index's order, newest first
    assert whole["n"] == RUNS and whole["chunks"] == [CHUNK] * 3 and whole["chunk"] == CHUNK
    assert whole["statuses"] == ["finished"] and whole["groups"] == ["g0", "g1"]
    # the same catalog as one file (every run in the head)
    one = tmp_path / "one"
    build_site(chunked["ledger"], one)
    assert not (one / "data/catalog").exists()
    single = load_data_file(one / "data/catalog.js")[1]
    assert whole["runs"] == single["runs"] and whole["fields"] == single["fields"]
    # chunk 0 is the oldest runs, newest first within it
    assert [r["id"] for r in unpack_catalog(oldest)["runs"]] == [ids[2], ids[1], ids[0]]


def test_a_new_run_rewrites_the_head_only_until_it_fills_a_chunk(tmp_path):
    d, ids = _ledger(tmp_path, 7)  # chunks 0, 1; one run in the head
    out = tmp_path / "site"
    build_site(d, out, catalog_chunk=CHUNK)
    with labledger.start_run("new-1", ledger=d) as run:
        run.log(1, loss=0.5)
    got = build_site(d, out, catalog_chunk=CHUNK)
    catalog_files = {w for w in _written(got, out) if w.startswith("data/catalog")}
    assert catalog_files == {"data/catalog.js"}
    with labledger.start_run("new-2", ledger=d) as run:
        run.log(1, loss=0.5)
    got = build_site(d, out, catalog_chunk=CHUNK)
    catalog_files = {w for w in _written(got, out) if w.startswith("data/catalog")}
    assert catalog_files == {"data/catalog.js", "data/catalog/2.js"}  # the head's runs filled chunk 2
    cold = tmp_path / "cold"
    build_site(d, cold, catalog_chunk=CHUNK)
    assert _data(out) == _data(cold)


# -- what a rebuild reads ---------------------------------------------------------------------------
@pytest.fixture
def walks(monkeypatch):
    """The run folders each build lists (``build._walk``)."""
    seen: list[str] = []
    real = build._walk

    def walk(path):
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(build, "_walk", walk)
    return seen


def test_a_rebuild_lists_only_the_new_run_and_writes_what_a_cold_build_writes(tmp_path, walks):
    d, ids = _ledger(tmp_path, 5)
    out = tmp_path / "site"
    build_site(d, out, catalog_chunk=CHUNK)
    walks.clear()
    with labledger.start_run("new", ledger=d, config={"lr": 0.5}) as run:
        run.log(1, loss=0.5)
    got = build_site(d, out, catalog_chunk=CHUNK)
    assert walks == [run.id]  # no other run's folder is listed
    assert got.rebuilt_runs == [run.id] and sorted(got.skipped_runs) == sorted(ids)
    walks.clear()
    assert build_site(d, out, catalog_chunk=CHUNK).written == [] and walks == []
    cold = tmp_path / "cold"
    build_site(d, cold, catalog_chunk=CHUNK)
    assert _data(out) == _data(cold)


def test_a_run_changed_through_the_ledger_is_rebuilt(tmp_path, walks):
    d, ids = _ledger(tmp_path, 4)
    out = tmp_path / "site"
    build_site(d, out)
    walks.clear()
    with labledger.open_ledger(d) as book:  # the oldest run, finished long ago
        book.save_evaluation(ids[0], "later", {"temperature": 1.5}, kind="recipe")
    got = build_site(d, out)
    assert walks == [ids[0]] and got.rebuilt_runs == [ids[0]]
    walks.clear()
    assert build_site(d, out).written == [] and walks == []


def test_a_run_changed_by_hand_is_picked_up_by_its_folder_or_by_a_full_build(tmp_path, walks):
    d, ids = _ledger(tmp_path, 4)
    run_dir = d / "runs" / ids[1]
    (run_dir / "files").mkdir()
    (run_dir / "files" / "a.txt").write_text("a")
    out = tmp_path / "site"
    build_site(d, out)
    page = out / "data/runs" / f"{ids[1]}.js"
    # a file replaced at the top of the folder changes the folder's modification time: seen at once
    time.sleep(0.01)
    (run_dir / "config.tmp").write_text('{"lr": 42}')
    os.replace(run_dir / "config.tmp", run_dir / "config.json")
    walks.clear()
    got = build_site(d, out)
    assert walks == [ids[1]] and got.rebuilt_runs == [ids[1]] and b'"lr":42' in page.read_bytes()
    # one added inside a subfolder does not: a full build lists every folder and sees it
    (run_dir / "files" / "b.txt").write_text("b")
    assert build_site(d, out).rebuilt_runs == [] and b"b.txt" not in page.read_bytes()
    walks.clear()
    got = build_site(d, out, full=True)
    assert sorted(walks) == sorted(ids) and got.rebuilt_runs == [ids[1]] and b"b.txt" in page.read_bytes()


def test_a_removed_file_of_the_site_is_written_again_by_a_full_build(tmp_path):
    d, ids = _ledger(tmp_path, 7)
    out = tmp_path / "site"
    build_site(d, out, catalog_chunk=CHUNK)
    before = _data(out)
    gone = [out / "data/runs" / f"{ids[0]}.js", out / "data/catalog/0.js"]
    for path in gone:
        path.unlink()
    build_site(d, out, catalog_chunk=CHUNK)  # the manifest is trusted: nothing is looked at
    assert not any(p.exists() for p in gone)
    got = build_site(d, out, catalog_chunk=CHUNK, full=True)
    assert {"data/catalog/0.js", f"data/runs/{ids[0]}.js"} <= _written(got, out)
    assert _data(out) == before


# -- in Chromium ---------------------------------------------------------------------------------------
#: Holds the script tags of the catalog chunks named by window.HOLD until window.release() (an init
#: script: the page is as built, only its loads are held back).
HOLD = """
window.HELD = [];
const append = Node.prototype.appendChild;
Node.prototype.appendChild = function (child) {
  const m = child.tagName === "SCRIPT" && /data\\/catalog\\/(\\d+)\\.js$/.exec(child.src || "");
  if (m && !window.RELEASED && (window.HOLD || []).includes(Number(m[1]))) {
    window.HELD.push([this, child]);
    return child;
  }
  return append.call(this, child);
};
window.release = () => {
  window.RELEASED = true;
  window.HELD.forEach(([parent, child]) => append.call(parent, child));
};
"""


def _names(page) -> list[str]:
    return page.locator("table.runs tbody tr a.runlink").all_inner_texts()


def test_a_three_chunk_catalog_paints_the_newest_runs_then_every_run(browser, chunked):
    t = Tab(browser, chunked)
    try:
        t.page.add_init_script("window.HOLD = [0, 1];" + HOLD)
        page = t.open("index.html")
        # first paint: the head's run and the newest chunk (the head holds fewer than a screenful)
        assert _names(page) == [f"run-{i:02d}" for i in (9, 8, 7, 6)]
        assert page.locator("#catalog-loading").is_visible()
        assert "4 of 10 loaded" in page.locator("#catalog-loading").inner_text()
        assert page.locator(".controls .muted[aria-live]").inner_text() == "4 of 4 shown, of 10 runs (loading)"
        assert page.evaluate("document.body.dataset.catalogLoaded") is None
        page.screenshot(path=str(SHOTS / "catalog-chunks-loading-1280.png"))
        page.evaluate("window.release()")
        page.wait_for_selector("body[data-catalog-loaded='1']")
        assert _names(page) == [f"run-{i:02d}" for i in reversed(range(RUNS))]
        assert page.locator("#catalog-loading").is_hidden()
        assert page.locator(".controls .muted[aria-live]").inner_text() == "10 of 10 shown"
        t.check()
    finally:
        t.close()


def test_filters_sort_and_selection_cover_every_chunk(browser, chunked):
    ids = chunked["ids"]
    t = Tab(browser, chunked)
    try:
        page = t.open(f"index.html#sel={ids[0]},{ids[9]}&sort=steps")
        page.wait_for_selector("body[data-catalog-loaded='1']")
        assert _names(page) == [f"run-{i:02d}" for i in range(RUNS)]  # by steps, the oldest chunk first
        assert page.locator("#sel-count").inner_text().startswith("2 selected")  # run-00 came in later
        page.locator("#filter").fill("run-01")
        assert _names(page) == ["run-01"]
        page.locator("#filter").fill("")
        page.locator("#where").fill("config.lr < 1e-6 and config.opt = 'sgd'")
        page.locator("#where").press("Enter")
        assert _names(page) == ["run-07", "run-09"]
        assert page.locator(".controls .muted[aria-live]").inner_text() == "2 of 10 shown"
        t.check()
    finally:
        t.close()


def test_the_lineage_page_is_made_again_only_when_its_runs_or_checkpoint_files_change(tmp_path, monkeypatch):
    from labledger.site import lineage as lineage_module

    d = tmp_path / "L"
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"weights")
    with labledger.start_run("parent", ledger=d) as run:
        run.log(1, loss=0.5)
        rec = run.log_checkpoint(weights, step=1)
    with labledger.start_run("child", ledger=d, init=rec) as child:
        child.log(1, loss=0.4)
    out = tmp_path / "site"
    build_site(d, out)
    made: list[int] = []
    real = lineage_module.lineage_payload
    monkeypatch.setattr(lineage_module, "lineage_payload", lambda *a, **kw: made.append(1) or real(*a, **kw))
    assert build_site(d, out).written == [] and made == []
    Path(rec["path"]).write_bytes(b"changed by hand")  # the run's copy of the checkpoint, in place
    got = build_site(d, out)
    assert made == [1] and _written(got, out) == {"data/lineage.js"}
    nodes = load_data_file(out / "data/lineage.js")[1]["nodes"]
    assert [n["state"] for n in nodes if n["type"] == "checkpoint"] == ["changed"]


def test_the_shell_paths_are_the_shell_files():
    assert sorted(build.shell_paths()) == sorted(build.shell_files())
