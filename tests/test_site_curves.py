"""The curve summaries are streamed (#47): read a block of records at a time, in file order, with
bounded memory, they are the buckets a stable sort of every record by step gives (the oracle below,
the builder's summaries before #47), for steps out of order, repeated steps, missing values, blocks
of any size, coarsening as the steps grow, and scalars read in several passes."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

from labledger.site import curves
from labledger.site.curves import FINE_BUCKETS, TOP_BUCKETS, read_curve, widths_for, write_curves
from labledger.site.output import SiteWriter, load_data_file


def oracle(records, name, width, started, ex_key):
    """The buckets of one level by sorting every record of ``name`` by step (stable)."""
    pts = [
        (r["step"], r[name], r.get("time", math.nan), r.get(ex_key, math.nan) if ex_key else math.nan)
        for r in records
        if name in r
    ]
    order = sorted(range(len(pts)), key=lambda i: pts[i][0])
    s = np.array([pts[i][0] for i in order], dtype=float)
    v = np.array([math.nan if pts[i][1] is None else pts[i][1] for i in order], dtype=float)
    v[~np.isfinite(v)] = np.nan
    t = np.array([pts[i][2] for i in order], dtype=float)
    e = np.array([pts[i][3] for i in order], dtype=float)
    b = np.floor(s / width).astype(np.int64)
    out = {"b": [], "n": [], "mean": [], "min": [], "max": [], "last": [], "minfirst": [], "rt": [], "ex": []}
    for bucket in dict.fromkeys(b.tolist()):
        idx = np.flatnonzero(b == bucket)
        vals = v[idx]
        fin = np.isfinite(vals)
        out["b"].append(bucket)
        out["n"].append(int(fin.sum()))
        out["mean"].append(float(vals[fin].mean()) if fin.any() else None)
        out["min"].append(float(vals[fin].min()) if fin.any() else None)
        out["max"].append(float(vals[fin].max()) if fin.any() else None)
        last = vals[-1]
        out["last"].append(None if not np.isfinite(last) else float(last))
        lo = int(np.flatnonzero(fin & (vals == vals[fin].min()))[0]) if fin.any() else 0
        hi = int(np.flatnonzero(fin & (vals == vals[fin].max()))[0]) if fin.any() else 0
        out["minfirst"].append(int(lo <= hi))
        out["rt"].append(round(float(t[idx[-1]] - started), 3))
        out["ex"].append(None if not np.isfinite(e[idx[-1]]) else float(e[idx[-1]]))
    return out


def same(level, want):
    assert level["b"] == want["b"] and level["n"] == want["n"]
    for got, exp in zip(level["mean"], want["mean"]):
        assert (got is None and exp is None) or math.isclose(got, exp, rel_tol=1e-12, abs_tol=1e-12)
    if "min" in level:
        for col in ("min", "max", "last", "minfirst"):
            assert level[col] == want[col], col
    else:  # one record per bucket: they are the mean
        assert all(n <= 1 for n in level["n"])
    assert level["rt"] == pytest.approx(want["rt"])
    if "ex" in level:
        assert level["ex"] == want["ex"]


def records_of(seed: int, steps: int, shuffle: bool):
    rng = np.random.default_rng(seed)
    order = np.arange(steps)
    if shuffle:  # a resumed run: a stretch of steps logged again, then a few out of order
        order = np.r_[order[: steps // 2], order[steps // 3 :]]
        swap = rng.choice(len(order), 40, replace=False)
        order[swap] = order[swap[::-1]]
    recs = []
    for i, step in enumerate(order.tolist()):
        rec = {"step": step, "time": 1000.0 + i * 0.01, "examples_seen": 32 * step}
        x = float(rng.normal())
        rec["loss"] = None if i % 97 == 0 else (math.inf if i % 211 == 0 else round(x, 2))
        if step % 3 == 0:
            rec["lr"] = 0.1 / (1 + step // 50)
        if step == 1234:
            rec["spike"] = 99.0
        recs.append(rec)
    return recs


@pytest.mark.parametrize(
    ("shuffle", "block", "fine", "pass_bytes"),
    [(False, 1 << 16, FINE_BUCKETS, curves.PASS_BYTES), (True, 1000, 64, curves.PASS_BYTES), (True, 777, 256, 1)],
)
def test_streamed_levels_are_the_sorted_buckets(tmp_path, monkeypatch, shuffle, block, fine, pass_bytes):
    monkeypatch.setattr(curves, "BLOCK_RECORDS", block)
    monkeypatch.setattr(curves, "FINE_BUCKETS", fine)
    monkeypatch.setattr(curves, "PASS_BYTES", pass_bytes)
    recs = records_of(1, 9000, shuffle)
    reads = []

    def read():
        reads.append(1)
        return iter(recs)

    w = SiteWriter(tmp_path / "site")
    found = write_curves(w, "r", read, 1000.0)
    assert found.names == ["examples_seen", "loss", "lr", "spike"] and found.records == len(recs)
    assert found.examples == "examples_seen"
    assert len(reads) == (1 if pass_bytes > 1 else 4)  # one scalar a reading when nothing fits
    for k, name in enumerate(found.names):
        doc = read_curve(tmp_path / "site", "r", k)
        pts = [r["step"] for r in recs if name in r]
        assert doc["name"] == name and doc["points"] == len(pts)
        assert (doc["first"], doc["last"]) == (min(pts), max(pts))
        assert doc["widths"] == widths_for(max(pts), min(pts)) or doc["widths"][-1] > 1
        for level, width in enumerate(doc["widths"]):
            if level == 0:
                got = doc["top"]
            else:
                parts = [
                    load_data_file(tmp_path / f"site/data/curves/r/{k}/{level}-{c}.js")[1]
                    for c in range(len(doc["chunks"][level]))
                ]
                got = {col: [x for p in parts for x in p[col]] for col in parts[0]}
            same(got, oracle(recs, name, width, 1000.0, "examples_seen"))


def test_fourteen_million_steps_stop_at_a_level_of_reasonable_size():
    assert widths_for(13_999_999) == [8192, 1024, 128]
    assert widths_for(199_999) == [128, 16, 1]
    assert widths_for(999) == [1]
    for last in (1e3, 1e5, 1e6, 1.4e7, 1e9):
        widths = widths_for(last)
        assert math.ceil((last + 1) / widths[0]) <= TOP_BUCKETS
        assert (last + 1) / widths[-1] <= FINE_BUCKETS or len(widths) == 1


def test_memory_is_bounded_by_the_finest_level(tmp_path):
    """Steps far apart coarsen the buckets as they come: the array never spans more than twice
    FINE_BUCKETS buckets, whatever the number of steps."""
    recs = [{"step": s * 1000, "time": 0.0, "x": float(s)} for s in range(600_000)]
    w = SiteWriter(pathlib.Path(tmp_path) / "site")
    seen = []
    original = curves._Scalar.add

    def add(self, *a):
        original(self, *a)
        seen.append(self.cols.shape[1])

    curves._Scalar.add = add  # type: ignore[method-assign]
    try:
        write_curves(w, "r", lambda: iter(recs), 0.0)
    finally:
        curves._Scalar.add = original  # type: ignore[method-assign]
    assert max(seen) <= 2 * FINE_BUCKETS + 2


def test_a_short_runs_scalars_are_in_its_curve_file_and_a_long_ones_have_files_of_their_own(tmp_path):
    """A scalar of one level goes in the run's curve file; one with finer levels gets its own file
    and chunks (the run's folder); a short run is one file and no folder (#47)."""
    recs = [{"step": s, "time": float(s), "loss": 1.0 / (1 + s)} for s in range(3000)]
    for s in range(0, 2000, 100):
        recs[s]["val"] = 2.0 / (1 + s)
    w = SiteWriter(tmp_path / "site")
    assert write_curves(w, "long", lambda: iter(recs), 0.0).names == ["loss", "val"]
    short = [{"step": s, "time": float(s), "loss": 1.0 / (1 + s), "lr": 0.1} for s in range(100)]
    assert write_curves(w, "short", lambda: iter(short), 0.0).names == ["loss", "lr"]
    assert w.written == [
        *(f"data/curves/long/0/1-{c}.js" for c in range(2)),
        "data/curves/long/0.js",
        "data/curves/long.js",
        "data/curves/short.js",
    ]
    key, file = load_data_file(tmp_path / "site/data/curves/long.js")
    assert key == "curves/long" and file["scalars"][0] == {"name": "loss", "own": True}
    assert file["scalars"][1]["name"] == "val" and file["scalars"][1]["widths"] == [1]
    assert not (tmp_path / "site/data/curves/short").exists()
    for run, data in (("long", recs), ("short", short)):
        for k, name in enumerate(["loss", "val"] if run == "long" else ["loss", "lr"]):
            doc = read_curve(tmp_path / "site", run, k)
            assert doc["name"] == name and doc["points"] == sum(name in r for r in data)
            same(doc["top"], oracle(data, name, doc["widths"][0], 0.0, None))


def test_the_curve_file_holds_at_most_inline_bytes_of_summaries(tmp_path, monkeypatch):
    """Scalars of one level go in the run's curve file while they fit INLINE_BYTES; the others get
    files of their own, and each scalar reads back the same either way."""
    recs = [{"step": s, "time": 0.0, "a": s * 0.5, "b": 1.0 / (1 + s), "c": float(s % 7)} for s in range(500)]
    whole = SiteWriter(tmp_path / "whole")
    write_curves(whole, "r", lambda: iter(recs), 0.0)
    assert whole.written == ["data/curves/r.js"]
    entries = load_data_file(tmp_path / "whole/data/curves/r.js")[1]["scalars"]
    sizes = [len(curves.dumps(e)) for e in entries]
    monkeypatch.setattr(curves, "INLINE_BYTES", sizes[0] + sizes[2])  # a and c fit; b does not
    split = SiteWriter(tmp_path / "split")
    write_curves(split, "r", lambda: iter(recs), 0.0)
    assert split.written == ["data/curves/r/1.js", "data/curves/r.js"]
    assert [e.get("own", False) for e in load_data_file(tmp_path / "split/data/curves/r.js")[1]["scalars"]] == [
        False,
        True,
        False,
    ]
    for k in range(3):
        assert read_curve(tmp_path / "split", "r", k) == read_curve(tmp_path / "whole", "r", k) == entries[k]


def test_the_run_page_of_200k_steps_draws_the_top_level_and_zoom_loads_a_finer_one(browser, tmp_path):
    """From ``file://``: the run page draws each scalar from its top level (no record in the page's
    data), and a zoom loads the chunks of the finest level that fits the visible range, only those."""
    import labledger
    from labledger.site import build_site

    steps = 200_000
    with labledger.start_run("long", ledger=tmp_path / "ledger") as run:
        for step in range(steps):
            run.log(step, loss=1.0 / (1 + step) + (9.0 if step == 150_001 else 0.0))
            if step < 2000 and step % 100 == 0:  # a scalar of one level: in the run's curve file
                run.log(step, val=2.0 / (1 + step))
    build_site(tmp_path / "ledger", tmp_path / "site")
    _, doc = load_data_file(tmp_path / f"site/data/curves/{run.id}/0.js")
    assert doc["widths"] == [128, 16, 1] and len(doc["chunks"][2]) == steps // 2000
    _, file = load_data_file(tmp_path / f"site/data/curves/{run.id}.js")
    assert file["scalars"][0] == {"name": "loss", "own": True} and file["scalars"][1]["points"] == 20
    assert (tmp_path / f"site/data/runs/{run.id}.js").stat().st_size < 20_000  # no records in it
    page = browser.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto((tmp_path / "site" / "run.html").as_uri() + f"#run={run.id}")
        chart = "document.querySelector('#curve-charts figure.chart')"
        page.wait_for_function(f"() => {chart}?.chart")
        val = "document.querySelectorAll('#curve-charts figure.chart')[1]"
        page.wait_for_function(f"() => {val}?.chart")
        assert page.evaluate(f"() => {val}.chart.data[0]") == list(range(0, 2000, 100))
        top = page.evaluate(f"() => {chart}.chart.data[0].length")
        assert top <= 2 * 2000 and page.evaluate(f"() => {chart}.curveLevel") == 0
        assert max(page.evaluate(f"() => {chart}.chart.data[1]")) > 9  # the spike, at the top level
        page.evaluate(f"() => {chart}.chart.setScale('x', {{min: 150000, max: 151000}})")
        page.wait_for_function(f"() => {chart}.curveLevel === 2")
        xs, ys = page.evaluate(f"() => [{chart}.chart.data[0], {chart}.chart.data[1]]")
        inside = [(x, y) for x, y in zip(xs, ys) if 150_000 <= x <= 151_000]
        assert [x for x, _ in inside] == list(range(150_000, 151_001))  # every step, exactly
        assert dict(inside)[150_001] == 9.0 + 1.0 / 150_002
        loaded = sorted(u.rsplit("/", 1)[1] for u in requests if f"/curves/{run.id}/0/" in u)
        # the range widened to whole top-level buckets (149,888-151,039): two chunks of 2,000 steps
        assert loaded == ["2-74.js", "2-75.js"]
        assert all(u.startswith("file://") for u in requests)
        curve_files = sorted(u.split("/data/curves/", 1)[1] for u in requests if "/data/curves/" in u)
        assert curve_files == [f"{run.id}.js", f"{run.id}/0.js", f"{run.id}/0/2-74.js", f"{run.id}/0/2-75.js"]
        page.dblclick("#curve-charts figure.chart .u-over")
        page.wait_for_function(f"() => {chart}.curveLevel === 0")
        assert errors == []
    finally:
        page.close()
