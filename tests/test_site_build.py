"""The static site builder (issue 6): files laid out as seed 004 says, every string escaped, batches
chunked and complete, and incremental rebuilds that rewrite only what changed.

The ledger is made with the real Run API (``make_site_ledger``, also used by the browser tests).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import make_batch

import labledger
from labledger.cli import main
from labledger.errors import RunNotFoundError, SiteError
from labledger.site import build_site, load_data_file
from labledger.site.curves import read_curve
from labledger.site.output import MANIFEST

XSS = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
ACTIONS = ("-1", "0", "+1")
#: Small chunks so that a few hundred microbatches make several chunk files.
CHUNK = 50


def tiny_png(seed: int, size: int = 8) -> bytes:
    """An 8-bit grayscale PNG (a real image file for the site to copy and show)."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, size=(size, size), dtype=np.uint8)
    raw = b"".join(b"\x00" + bytes(r) for r in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _softmax(z: list[float]) -> list[float]:
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e]


def results_rows(n: int = 60, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        gold = ACTIONS[i % 3]
        z = rng.normal(size=3).tolist()
        z[ACTIONS.index(gold)] += 1.5
        p = _softmax(z)
        rows.append(
            {
                "id": XSS[0] if i == 0 else f"item-{i}",
                "task": "digit_step",
                "gold": gold,
                "probs": dict(zip(ACTIONS, p)),
                "logits": dict(zip(ACTIONS, z)),
                "slices": {"current": str(i % 4)},
                "group": f"img{i // 2}",
            }
        )
    return rows


def full_test_files(n_images: int = 20) -> tuple[bytes, bytes]:
    """``full_test/summary.json`` and ``images.jsonl`` in the seed-004 shape."""
    lines, cells = [], {}
    for image_id in range(n_images):
        target = image_id % 10
        preds, golds, probs, episodes = [], [], [], []
        for s in range(10):
            gold = ACTIONS[(target > s) - (target < s) + 1]
            pred = gold if (image_id + s) % 7 else ACTIONS[(ACTIONS.index(gold) + 1) % 3]
            golds.append(gold)
            preds.append(pred)
            probs.append(
                {"+1": 0.2, "-1": 0.1, "0": 0.7}
                if pred == "0"
                else ({"0": 0.1, "+1": 0.8, "-1": 0.1} if pred == "+1" else {"-1": 0.8, "+1": 0.1, "0": 0.1})
            )
        for s in range(10):
            trace, cur = [], s
            ok = True
            for _ in range(12):
                if cur == target:
                    break
                a = preds[cur]
                nxt = cur + {"-1": -1, "0": 0, "+1": 1}[a]
                trace.append({"before": cur, "action": a, "after": nxt})
                if nxt == cur or not 0 <= nxt <= 9:
                    ok = False
                    break
                cur = nxt
            ok = ok and cur == target
            episodes.append(
                {
                    "start": s,
                    "success": ok,
                    "termination": "reached_target" if ok else "stalled",
                    "steps": len(trace),
                    "shortest": abs(target - s),
                    "extra_moves": len(trace) - abs(target - s) if ok else None,
                    "trace": trace,
                }
            )
            cell = cells.setdefault(str(target), {}).setdefault(
                str(s), {"images": 0, "errors": 0, "failed_episodes": 0}
            )
            cell["images"] += 1
            cell["errors"] += int(preds[s] != golds[s])
            cell["failed_episodes"] += int(not ok)
        lines.append(
            json.dumps(
                {
                    "image_id": image_id,
                    "target": target,
                    "image": f"images/{image_id}.png",
                    "gold": golds,
                    "predictions": preds,
                    "probabilities": probs,
                    "episodes": episodes,
                    "note": XSS[1],
                }
            )
        )
    summary = {
        "task": "digit_step",
        "images": n_images,
        "cells": cells,
        "analysis": {"action_accuracy": 0.9, "note": XSS[0]},
        "latency": {"mean_ms": 0.1},
    }
    return json.dumps(summary).encode(), ("\n".join(lines) + "\n").encode()


SWEEP_DOC = {
    "n": 60,
    "positive": "+1",
    "objective": "f1",
    "gates": ["recall[-1]>=0.5"],
    "threshold_selection": {"threshold": 0.5, "accuracy": 0.8, "f1": 0.7, "recall_gate_passed": True},
    "threshold_trials": [{"threshold": t / 10, "accuracy": 0.5 + t / 40, "f1": 0.4 + t / 30} for t in range(1, 10)],
    "definition": {"f1": "F1 of '+1'", "note": XSS[0]},
}


def make_site_ledger(root: Path, *, batches: int = 230, with_second: bool = True) -> dict[str, str]:
    """A ledger with one full run (batches with images, scalars, history, checkpoints, results, a
    saved sweep, a full test) and one minimal run whose name and group are XSS strings."""
    ledger = labledger.open_ledger(root, create=True)
    ids = {}
    with labledger.start_run(
        "alpha", group="g1", tags=("demo", XSS[1]), config={"lr": 0.01, "comment": XSS[0]}, notes=XSS[0], ledger=ledger
    ) as run:
        for mb in range(1, batches + 1):
            rec = make_batch(mb, n=4)
            rec["loss"] = sum(s["cross_entropy"] for s in rec["samples"]) / 4
            if mb == 1:
                rec["samples"][0]["input"] = XSS[0]
                rec["samples"][1]["input"] = {"text": XSS[1], "image": "images/1-1.png"}
                rec["samples"][2]["input"]["text"] = "line one\nline two \u2028 and <b>bold</b>"
            run.log_batch(rec)
            if mb % 8 == 0:
                step = mb // 8
                run.log(step, loss=rec["loss"], lr=0.01 / step, grad_norm=1.0 + (step % 3))
        for mb in (1, 2, 3):
            for i in range(4):
                run.log_file(f"images/{mb}-{i}.png", tiny_png(mb * 10 + i))
        for epoch in (1, 2, 3):
            run.log_history({"kind": "train", "step": epoch * 9, "epoch": epoch - 0.5, "loss": 1.0 / epoch})
            run.log_history(
                {
                    "kind": "eval",
                    "step": epoch * 9,
                    "epoch": float(epoch),
                    "epoch_index": epoch,
                    "eval_loss": [0.9, 0.5, 0.6][epoch - 1],
                    "eval_accuracy": [0.6, 0.8, 0.7][epoch - 1],
                }
            )
            ckpt = root.parent / f"ckpt-{epoch}.bin"
            ckpt.write_bytes(bytes([epoch]) * 100)
            run.log_checkpoint(ckpt, step=epoch * 9, metrics={"epoch": epoch})
        run.log_results("full_test", results_rows())
        summary, lines = full_test_files()
        run.log_file("full_test/summary.json", summary)
        run.log_file("full_test/images.jsonl", lines)
        for image_id in range(20):
            run.log_file(f"images/{image_id}.png", tiny_png(1000 + image_id))
        run.note(XSS[1])
        run.set_summary(test_accuracy=0.9, episode_success=0.75)
        ids["alpha"] = run.id
    ledger.save_evaluation(ids["alpha"], "boundary", SWEEP_DOC, kind="sweep")
    if with_second:
        with labledger.start_run(XSS[0], group=XSS[1], tags=(XSS[0],), ledger=ledger) as run:
            run.log(1, loss=1.0)
            run.log(2, loss=0.5)
            ids["xss"] = run.id
    ledger.close()
    return ids


def data(out: Path, rel: str):
    return load_data_file(out / rel)[1]


def snapshot(out: Path) -> dict[str, tuple[int, str]]:
    """(mtime_ns, sha256) of every file in the site."""
    return {
        p.relative_to(out).as_posix(): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in out.rglob("*")
        if p.is_file() and p.name != MANIFEST
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    ids = make_site_ledger(root / "ledger")
    out = root / "out"
    result = build_site(root / "ledger", out, chunk_records=CHUNK)
    return {"ledger": root / "ledger", "out": out, "ids": ids, "result": result}


def test_layout_follows_seed_004(site):
    out, a, x = site["out"], site["ids"]["alpha"], site["ids"]["xss"]
    for page in ("index.html", "run.html", "batches.html", "eval.html", "test.html", "compare.html"):
        assert (out / page).is_file()
    for rel in (
        "static/js/common.js",
        "static/css/site.css",
        "static/vendor/uplot/uPlot.iife.min.js",
        "static/vendor/uplot/LICENSE",
        "data/catalog.js",
        "data/compare.js",
        f"data/runs/{a}.js",
        f"data/runs/{x}.js",
        f"data/batches/{a}/toc.js",
        f"data/batches/{a}/loss.js",
        f"data/batches/{a}/0.js",
        f"data/evals/{a}/full_test.js",
        f"data/evals/{a}/full_test.logits.js",
        f"data/evals/{a}/boundary.js",
        f"data/tests/{a}/full_test.js",
        f"images/{a}/images/1-1.png",
    ):
        assert (out / rel).is_file(), rel
    assert site["result"].index == out / "index.html"
    key, catalog = load_data_file(out / "data/catalog.js")
    assert key == "catalog"
    assert {r["id"] for r in catalog["runs"]} == {a, x}
    alpha = next(r for r in catalog["runs"] if r["id"] == a)
    assert (alpha["batches"], alpha["samples"], alpha["steps"]) == (230, 920, 28)
    assert alpha["evaluations"] == ["boundary", "full_test"] and alpha["tests"] == ["full_test"]
    assert alpha["headline"] == {"test_accuracy": 0.9, "episode_success": 0.75}
    assert not (out / f"data/batches/{x}").exists()  # no batches, no batch files


def test_no_page_loads_anything_from_the_network(site):
    for page in site["out"].glob("*.html"):
        html = page.read_text()
        assert "http://" not in html and "https://" not in html.replace("https://github.com", "")
        assert "fetch(" not in html
    for js in (site["out"] / "static/js").glob("*.js"):
        text = js.read_text()
        if js.name == "run.js":  # a running run's page served by `labledger serve` asks that server's API (#12)
            assert text.count("fetch(") == 1 and "/^https?:$/.test(location.protocol)" in text
            assert 'base = "api/runs/" + encodeURIComponent(run.id)' in text  # relative: the same origin
            text = text.replace("fetch(", "")
        if js.name == "common.js":  # under `labledger serve` only: the status of a data file it answered 503 (#46)
            assert text.count("fetch(") == 1 and "/^https?:$/.test(location.protocol)" in text
            assert "fetch(src, {" in text  # the same relative src a <script> would load: the same origin
            text = text.replace("fetch(", "")
        assert "fetch(" not in text and "XMLHttpRequest" not in text
        assert not re.search(r"innerHTML\s*=|outerHTML\s*=|insertAdjacentHTML|document\.write", text), js
        text = text.replace('"http://www.w3.org/2000/svg"', "")  # the SVG namespace, not a URL to load
        assert "http://" not in text and "https://" not in text


def test_batches_are_chunked_completely_and_in_order(site):
    out, a = site["out"], site["ids"]["alpha"]
    toc = data(out, f"data/batches/{a}/toc.js")
    assert toc["count"] == 230 and len(toc["chunks"]) == math.ceil(230 / CHUNK)
    ledger = labledger.open_ledger(site["ledger"])
    logged = list(ledger.run(a).batches())
    shipped = []
    for i, (first, last, min_step, max_step, n) in enumerate(toc["chunks"]):
        chunk = data(out, f"data/batches/{a}/{i}.js")
        assert chunk["index"] == i and len(chunk["batches"]) == n
        assert (chunk["batches"][0]["microbatch"], chunk["batches"][-1]["microbatch"]) == (first, last)
        steps = [b["optimizer_step"] for b in chunk["batches"]]
        assert (min(steps), max(steps)) == (min_step, max_step)
        shipped += chunk["batches"]
    assert shipped == logged  # every record, every field, exactly as logged
    loss = data(out, f"data/batches/{a}/loss.js")
    assert loss["contiguous"] and loss["first"] == 1 and len(loss["loss"]) == 230
    assert loss["loss"] == pytest.approx([b["loss"] for b in logged], rel=1e-12)


def test_chunk_lists_only_images_that_exist_and_copies_them(site):
    out, a = site["out"], site["ids"]["alpha"]
    chunk = data(out, f"data/batches/{a}/0.js")
    # images/1-0.png is stored but its sample's input was replaced by a string: not referenced.
    assert chunk["images"] == sorted(f"images/{mb}-{i}.png" for mb in (1, 2, 3) for i in range(4) if (mb, i) != (1, 0))
    assert not (out / f"images/{a}/images/1-0.png").exists()
    src = site["ledger"] / "runs" / a / "files" / "images" / "2-3.png"
    assert (out / f"images/{a}/images/2-3.png").read_bytes() == src.read_bytes()
    assert not (out / f"images/{a}/images/9-0.png").exists()  # referenced, never stored


def test_every_string_is_escaped_in_data_files_and_absent_from_pages(site):
    out = site["out"]
    for path in (out / "data").rglob("*.js"):
        raw = path.read_bytes()
        assert b"<" not in raw, path
        assert "\u2028".encode() not in raw and "\u2029".encode() not in raw, path
        assert raw.startswith(b"(window.LABLEDGER=window.LABLEDGER||{})[") and raw.endswith(b";\n")
    for page in out.glob("*.html"):
        assert "alert(1)" not in page.read_text()
    catalog = data(out, "data/catalog.js")
    xss_run = next(r for r in catalog["runs"] if r["id"] == site["ids"]["xss"])
    assert (xss_run["name"], xss_run["group"], xss_run["tags"]) == (XSS[0], XSS[1], [XSS[0]])
    first = data(out, f"data/batches/{site['ids']['alpha']}/0.js")["batches"][0]["samples"]
    assert first[0]["input"] == XSS[0] and first[1]["input"]["text"] == XSS[1]
    assert "\u2028" in first[2]["input"]["text"]


def test_run_page_data(site):
    out, a = site["out"], site["ids"]["alpha"]
    run = data(out, f"data/runs/{a}.js")
    # the page draws each scalar from its summaries (data/curves/<run>.js), not from the records
    assert set(run["scalars"]) == {"loss", "lr", "grad_norm"} and run["cursor"] == {"scalars": 28}
    grad = read_curve(out, a, run["scalars"].index("grad_norm"))
    assert grad["widths"] == [1] and grad["top"]["b"] == list(range(1, 29)) and grad["top"]["n"] == [1] * 28
    assert run["config"]["comment"] == XSS[0]
    assert [n["text"] for n in run["notes"]] == [XSS[0], XSS[1]]
    val = run["validation"]
    assert val["metrics"][:2] == ["eval_loss", "eval_accuracy"] and val["epoch_key"] == "epoch_index"
    # The default selection is the best eval_accuracy (epoch 2), as labledger's select_epoch picks it.
    assert val["selected"]["metric"] == "eval_accuracy" and val["selected"]["position"] == 1
    assert [c.get("selected", False) for c in run["checkpoints"]] == [False, True, False]
    assert all(len(c["sha256"]) == 64 for c in run["checkpoints"])
    assert run["batches"]["count"] == 230 and run["files"]["count"] == 34


def test_evaluation_page_data(site):
    out, a = site["out"], site["ids"]["alpha"]
    ev = data(out, f"data/evals/{a}/full_test.js")
    rows = ev["rows"]
    assert rows["n"] == 60 and len(rows["shown"]) == 60 and rows["shown"][0]["id"] == XSS[0]
    task = rows["tasks"]["digit_step"]
    assert task["labels"] == ["-1", "0", "+1"] and task["confusion"]["labels"] == ["-1", "0", "+1"]
    assert sum(map(sum, task["confusion"]["matrix"])) == 60
    # one shape for every confusion matrix on the site, the evaluation engine's own
    assert set(task["confusion"]) == {"labels", "rows", "columns", "matrix"}
    assert (task["confusion"]["rows"], task["confusion"]["columns"]) == ("gold", "pred")
    ce = [w["cross_entropy"] for w in task["worst"]]
    assert ce == sorted(ce, reverse=True) and len(ce) == 60
    expected = max(-math.log(r["probs"][r["gold"]]) for r in results_rows())
    assert ce[0] == pytest.approx(expected)
    assert sum(b["count"] for b in task["reliability"]["bins"]) == 60
    engine = ev["documents"][0]
    assert engine["origin"].startswith("computed at build time") and "tasks" in engine["doc"]
    logits = data(out, f"data/evals/{a}/full_test.logits.js")["tasks"]["digit_step"]
    assert logits["labels"] == ["-1", "0", "+1"] and logits["source"] == "logits" and logits["shown"] == 60
    sweep = data(out, f"data/evals/{a}/boundary.js")
    assert sweep["rows"] is None and sweep["documents"][0]["kind"] == "sweep"
    assert sweep["documents"][0]["doc"]["threshold_trials"] == SWEEP_DOC["threshold_trials"]


def test_test_breakdown_is_split_by_target(site):
    out, a = site["out"], site["ids"]["alpha"]
    test = data(out, f"data/tests/{a}/full_test.js")
    assert test["images"] == 20 and set(test["summary"]["cells"]) == {str(d) for d in range(10)}
    assert test["part_of_target"] == {str(d): f"t-{d}" for d in range(10)}
    part = data(out, f"data/tests/{a}/full_test/t-3.js")
    assert [it["image_id"] for it in part["items"]] == [3, 13]
    assert part["images"] == ["images/13.png", "images/3.png"]


def test_rebuild_without_changes_writes_nothing(site, tmp_path):
    out = tmp_path / "out"
    build_site(site["ledger"], out, chunk_records=CHUNK)
    before = snapshot(out)
    again = build_site(site["ledger"], out, chunk_records=CHUNK)
    assert again.written == [] and again.removed == []
    assert sorted(again.skipped_runs) == sorted(site["ids"].values())
    assert snapshot(out) == before


def test_rebuild_after_a_new_run_rewrites_only_what_changed(tmp_path):
    ledger_dir = tmp_path / "ledger"
    make_site_ledger(ledger_dir, batches=120)
    out = tmp_path / "out"
    build_site(ledger_dir, out, chunk_records=CHUNK)
    before = snapshot(out)
    with labledger.start_run("beta", ledger=ledger_dir) as run:
        for mb in range(1, 61):
            run.log_batch(make_batch(mb))
        run.log(1, loss=0.3)
    result = build_site(ledger_dir, out, chunk_records=CHUNK)
    after = snapshot(out)
    written = {p.relative_to(out).as_posix() for p in result.written}
    assert result.rebuilt_runs == [run.id]
    assert written == {
        "data/catalog.js",
        "data/lineage.js",  # a new run is a new node of the lineage graph (#15)
        f"data/runs/{run.id}.js",
        f"data/batches/{run.id}/toc.js",
        f"data/batches/{run.id}/loss.js",
        f"data/batches/{run.id}/0.js",
        f"data/batches/{run.id}/1.js",
        f"data/curves/{run.id}.js",  # its one scalar's summaries (#12), in its curve file (#47)
        f"data/diff/{run.id}.js",  # what the diff view compares (#12)
    }
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == written  # nothing else was touched, not even rewritten with the same bytes


def test_appended_batches_rewrite_only_the_last_chunk(tmp_path):
    ledger_dir = tmp_path / "ledger"
    run = labledger.start_run("live", ledger=ledger_dir)
    for mb in range(1, 121):
        run.log_batch(make_batch(mb))
    run.sync()
    out = tmp_path / "out"
    build_site(ledger_dir, out, chunk_records=CHUNK)
    before = snapshot(out)
    for mb in range(121, 131):
        run.log_batch(make_batch(mb))
    run.sync()
    result = build_site(ledger_dir, out, chunk_records=CHUNK)
    run.finish()
    written = {p.relative_to(out).as_posix() for p in result.written}
    assert written == {
        "data/catalog.js",
        f"data/runs/{run.id}.js",
        f"data/batches/{run.id}/toc.js",
        f"data/batches/{run.id}/loss.js",
        f"data/batches/{run.id}/2.js",
    }
    after = snapshot(out)
    assert after[f"data/batches/{run.id}/0.js"] == before[f"data/batches/{run.id}/0.js"]
    assert data(out, f"data/batches/{run.id}/toc.js")["count"] == 130


def test_runs_left_out_are_removed_and_selection(site, tmp_path):
    out = tmp_path / "out"
    a, x = site["ids"]["alpha"], site["ids"]["xss"]
    build_site(site["ledger"], out)
    result = build_site(site["ledger"], out, runs=["alpha"])
    assert result.runs == [a]
    removed = {p.relative_to(out).as_posix() for p in result.removed}
    assert f"data/runs/{x}.js" in removed and not (out / f"data/runs/{x}.js").exists()
    assert f"data/curves/{x}.js" in removed and not (out / f"data/curves/{x}.js").exists()
    assert (out / f"data/runs/{a}.js").exists()
    assert [r["id"] for r in data(out, "data/catalog.js")["runs"]] == [a]
    assert build_site(site["ledger"], tmp_path / "g", group=XSS[1]).runs == [x]
    with pytest.raises(RunNotFoundError):
        build_site(site["ledger"], tmp_path / "h", runs=["no-such-run"])
    with pytest.raises(SiteError, match="not in group"):
        build_site(site["ledger"], tmp_path / "i", runs=[a], group=XSS[1])


def test_refuses_to_write_into_a_folder_that_is_not_a_site(site, tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(SiteError, match="not empty"):
        build_site(site["ledger"], tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    "args, code, expected",
    [
        (["site", "{out}", "--ledger", "{ledger}"], 0, "Site:"),
        (["site", "{out}", "--ledger", "{ledger}", "--runs", "alpha"], 0, "Runs:    1 "),
        (["site", "{out}", "--ledger", "{ledger}", "--runs", "nope"], 1, "Error: No run 'nope'"),
        (["site", "{out}", "--ledger", "{missing}"], 1, "Error: No ledger at"),
        (["site"], 2, "Missing argument 'OUT'"),
    ],
)
def test_cli(site, tmp_path, args, code, expected):
    fill = {"out": str(tmp_path / "out"), "ledger": str(site["ledger"]), "missing": str(tmp_path / "none")}
    result = CliRunner().invoke(main, [a.format(**fill) for a in args])
    assert result.exit_code == code, result.output
    assert expected in result.output


def test_cli_json(site, tmp_path):
    result = CliRunner().invoke(main, ["site", str(tmp_path / "out"), "--ledger", str(site["ledger"]), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["index"].endswith("index.html") and sorted(doc["runs"]) == sorted(site["ids"].values())
    assert doc["n_written"] == len(doc["written"]) > 0


def test_a_run_whose_folder_is_gone_is_left_out_with_a_warning(tmp_path):
    ledger_dir = tmp_path / "ledger"
    ids = make_site_ledger(ledger_dir, batches=10)
    shutil.rmtree(ledger_dir / "runs" / ids["xss"])
    result = build_site(ledger_dir, tmp_path / "out")
    assert result.runs == [ids["alpha"]]
    assert any(ids["xss"] in w and "missing" in w for w in result.warnings)


# -- Comparisons page (data/compare.js) ---------------------------------------------------------
def _improved(rows: list[dict]) -> list[dict]:
    """The same items with the gold label's logit raised: a clearly better model."""
    out = []
    for r in rows:
        z = dict(r["logits"])
        z[r["gold"]] += 4.0
        p = _softmax([z[a] for a in ACTIONS])
        out.append({**r, "logits": z, "probs": dict(zip(ACTIONS, p))})
    return out


def _accuracy(rows: list[dict]) -> float:
    return sum(max(r["probs"], key=r["probs"].get) == r["gold"] for r in rows) / len(rows)


def make_compare_ledger(root: Path) -> dict[str, str]:
    """Two runs of one group whose results are paired (same items), benchmark entries pointing at
    those results (one clearly better, one identical), a stored comparison document, a seed-001-like
    imported table with categories, a calibrated variant and a gap, and XSS names."""
    from labledger.analysis.benchmarks import Entry, add_entries
    from labledger.analysis.evaluation import compare

    ledger = labledger.open_ledger(root, create=True)
    base_rows = results_rows(n=200, seed=3)
    ids, paths = {}, {}
    for name, rows, _acc in (("old", base_rows, None), ("new", _improved(base_rows), None)):
        with labledger.start_run(name, group="ablation", ledger=ledger) as run:
            run.log(1, loss=1.0)
            run.log_results("test", rows)
            run.log_results("same", [{**r, "task": "same_items"} for r in base_rows])
            run.set_summary(test_accuracy=_accuracy(rows), episode_success=0.5 if name == "old" else 0.7)
            ids[name] = run.id
        view = ledger.run(ids[name])
        paths[name] = {"test": str(view.results_path("test")), "same": str(view.results_path("same"))}
    entries = []
    for name in ("old", "new"):
        rows = base_rows if name == "old" else _improved(base_rows)
        entries.append(
            Entry(
                model=name,
                suite="paired",
                benchmark="digit_step",
                metric="accuracy",
                value=_accuracy(rows),
                category="Steps",
                n=len(rows),
                run_id=ids[name],
                results_path=paths[name]["test"],
            )
        )
    # identical predictions on both sides: the delta is 0 and its CI includes 0 (n.s.)
    entries += [
        Entry(
            model=m,
            suite="paired",
            benchmark="same_items",
            metric="accuracy",
            value=_accuracy(base_rows),
            category="Steps",
            n=len(base_rows),
            results_path=paths[m]["same"],
        )
        for m in ("old", "new")
    ]
    # predictions stored, but not of this benchmark's task: no mark, and a warning says why
    entries += [
        Entry(
            model=m,
            suite="paired",
            benchmark="other_task",
            metric="accuracy",
            value=0.5,
            category="Other",
            results_path=paths[m]["test"],
        )
        for m in ("old", "new")
    ]
    # no stored predictions: a delta without a mark
    entries += [
        Entry(model=m, suite="paired", benchmark="recorded_only", metric="accuracy", value=v, category="Other")
        for m, v in (("old", 0.5), ("new", 0.6))
    ]
    # seed 001 shape: categories, five columns with a calibrated variant, one value missing
    table = {
        "Home Appliance": ("Public Core", [0.4659, 0.8068, 0.9432], 0.9432),
        "CLINC150+OOS": ("Public Core", [0.8839, 0.8979, 0.9083], 0.9083),
        "VAST": ("Public Transfer", [0.8010, 0.8196, 0.8095], 0.7899),
        "HoVer": ("Public Transfer", [None, 0.69, 0.71], 0.71),
    }
    for bench, (cat, raw, cal) in table.items():
        for model, v in zip(("base", "v3", "v5"), raw):
            if v is not None:
                entries.append(
                    Entry(
                        model=model,
                        suite="public",
                        benchmark=bench,
                        metric="accuracy",
                        value=v,
                        category=cat,
                        source="seed-001.md",
                    )
                )
        entries.append(
            Entry(
                model="v5",
                suite="public",
                benchmark=bench,
                metric="accuracy",
                value=cal,
                category=cat,
                variant="calibrated",
                source="seed-001.md",
            )
        )
    entries += [
        Entry(model=XSS[0], suite="xss", benchmark=XSS[0], metric="accuracy", value=0.5, category=XSS[1]),
        Entry(model="plain", suite="xss", benchmark=XSS[0], metric="accuracy", value=0.7, category=XSS[1]),
    ]
    add_entries(ledger, entries)
    doc = compare(paths["new"]["test"], paths["old"]["test"], metrics=["accuracy"], resamples=300).to_dict()
    doc["names"] = {"a": "new", "b": XSS[0]}
    ledger.save_evaluation(ids["new"], "compare-old", doc, kind="comparison")
    ledger.close()
    return ids


@pytest.fixture(scope="module")
def compare_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    ids = make_compare_ledger(root / "ledger")
    result = build_site(root / "ledger", root / "out")
    return {"ledger": root / "ledger", "out": root / "out", "ids": ids, "result": result}


def test_compare_data_has_a_version_table_per_suite(compare_site):
    out = compare_site["out"]
    assert (out / "compare.html").is_file()
    key, doc = load_data_file(out / "data/compare.js")
    assert key == "compare"
    tables = {t["suite"]: t for t in doc["tables"]}
    assert list(tables) == ["paired", "public", "xss"]  # entry order

    paired = tables["paired"]
    assert paired["columns"] == ["old", "new"] and paired["delta"] == {"from": "old", "to": "new"}
    rows = {r["benchmark"]: r for r in paired["rows"]}
    assert rows["digit_step"]["significance"] == "significant"
    lo, hi = rows["digit_step"]["delta_ci"]
    assert 0 < lo <= rows["digit_step"]["delta"] <= hi
    assert rows["same_items"]["significance"] == "not significant" and rows["same_items"]["delta"] == 0
    assert "significance" not in rows["recorded_only"] and rows["recorded_only"]["delta"] == pytest.approx(0.1)
    assert "significance" not in rows["other_task"]
    assert any("'other_task': no paired test" in w for w in paired["warnings"])
    assert [r["category"] for r in paired["rows"]] == ["Steps", "Steps", "Other", "Other"]
    assert paired["mean"]["n"] == 4
    assert paired["mean"]["values"]["old"] == pytest.approx(sum(r["values"]["old"] for r in paired["rows"]) / 4)
    assert "paired 95% bootstrap CI" in paired["definition"]

    public = tables["public"]
    assert public["columns"] == ["base", "v3", "v5", "v5 (calibrated)"]
    assert public["delta"] == {"from": "base", "to": "v5 (calibrated)"}
    assert [r["category"] for r in public["rows"]] == ["Public Core"] * 2 + ["Public Transfer"] * 2
    assert public["mean"]["n"] == 3  # HoVer has no base value: left out of the mean, with a warning
    assert any("HoVer" in w and "base" in w for w in public["warnings"])
    assert not any("no entries for" in w for w in public["warnings"])  # base has no calibrated variant: expected
    assert all("significance" not in r for r in public["rows"])  # imported: no predictions, no mark


def test_eval_page_carries_the_comparison_view_of_the_compare_page(compare_site):
    out, ids = compare_site["out"], compare_site["ids"]
    [c] = data(out, "data/compare.js")["comparisons"]
    ev = data(out, f"data/evals/{ids['new']}/compare-old.js")
    [entry] = [d for d in ev["documents"] if d["kind"] == "comparison"]
    assert entry["comparison"] == c  # one reduced shape for both pages
    assert data(out, "data/compare.js")["tables"][0]["ci"] == 0.95  # the level behind the marks


def test_evaluation_documents_lead_and_calibration_follows(tmp_path):
    from labledger.site.evaluations import eval_payload

    ledger = labledger.open_ledger(tmp_path / "ledger", create=True)
    with labledger.start_run("r", ledger=ledger) as run:
        rid = run.id
    folder = ledger.run_dir(rid) / "evals" / "t"
    folder.mkdir(parents=True)
    for kind in ("calibration", "recipe", "sweep", "evaluation"):  # the files as a folder holds them
        (folder / f"{kind}.json").write_text(json.dumps({"kind": kind, "tasks": {}}))
    payload, _ = eval_payload(ledger.run(rid), "t")
    assert [d["kind"] for d in payload["documents"]] == ["evaluation", "sweep", "calibration", "recipe"]
    ledger.close()


def test_compare_data_has_stored_comparisons_and_group_summaries(compare_site):
    out, ids = compare_site["out"], compare_site["ids"]
    doc = data(out, "data/compare.js")
    [c] = doc["comparisons"]
    assert c["run"] == ids["new"] and c["name"] == "compare-old" and c["names"] == {"a": "new", "b": XSS[0]}
    [task] = c["tasks"]
    assert task["paired"] is True and task["n"] == 200
    [m] = task["metrics"]
    assert m["metric"] == "accuracy" and m["ci_low"] <= m["diff"] <= m["ci_high"] and m["mcnemar"]["p_value"] < 0.05
    [g] = doc["groups"]
    assert g["group"] == "ablation" and [r["id"] for r in g["runs"]] == [ids["old"], ids["new"]]
    acc = next(x for x in g["metrics"] if x["key"] == "test_accuracy")
    values = [v for _, v in acc["values"]]
    assert acc["n"] == 2 and acc["mean"] == pytest.approx(np.mean(values))
    assert acc["std"] == pytest.approx(np.std(values, ddof=1))
    assert (acc["min"], acc["max"]) == (min(values), max(values))
    assert "recorded values" in doc["group_definition"]
    catalog = data(out, "data/catalog.js")
    assert catalog["comparisons"] == {"tables": ["paired", "public", "xss"], "documents": 1, "groups": ["ablation"]}
    # XSS names reach the data file escaped
    raw = (out / "data/compare.js").read_bytes()
    assert b"<script>" not in raw and b"\\u003cscript>alert(1)\\u003c/script>" in raw


def test_compare_data_is_rewritten_only_when_it_changes(compare_site, tmp_path):
    out = tmp_path / "out"
    build_site(compare_site["ledger"], out)
    again = build_site(compare_site["ledger"], out)
    assert again.written == []
    with labledger.start_run("loner", group="solo", ledger=compare_site["ledger"]) as run:
        run.log(1, loss=0.1)
    result = build_site(compare_site["ledger"], out)
    written = {p.relative_to(out).as_posix() for p in result.written}
    assert "data/compare.js" not in written  # a one-run group adds nothing to compare
    with labledger.start_run("third", group="ablation", ledger=compare_site["ledger"]) as run:
        run.set_summary(test_accuracy=0.25)
    result = build_site(compare_site["ledger"], out)
    assert "data/compare.js" in {p.relative_to(out).as_posix() for p in result.written}
    [g] = data(out, "data/compare.js")["groups"]
    assert len(g["runs"]) == 3


# -- a damaged run folder does not stop the build -----------------------------------------------
@pytest.mark.parametrize("damage", ["corrupt-metrics-line", "corrupt-history-line", "missing-run-json"])
def test_a_damaged_run_is_left_out_and_the_others_are_built(tmp_path, damage):
    ledger_dir = tmp_path / "ledger"
    ids = make_site_ledger(ledger_dir, batches=60)
    out = tmp_path / "out"
    build_site(ledger_dir, out, chunk_records=CHUNK)  # a good build first: the run's old pages go away
    run_dir = ledger_dir / "runs" / ids["alpha"]
    if damage == "missing-run-json":
        (run_dir / "run.json").unlink()
    else:
        path = run_dir / ("metrics.jsonl" if damage == "corrupt-metrics-line" else "history.jsonl")
        lines = path.read_bytes().splitlines(keepends=True)
        assert len(lines) >= 3
        lines[1] = b'{"step": 2, "loss": \n'  # a damaged line in the middle, not a torn last line
        path.write_bytes(b"".join(lines))
    # a file removed from the folder changes the folder's modification time, which a rebuild sees; a
    # file edited in place by hand is seen by a full build, which lists every run's folder
    result = build_site(ledger_dir, out, chunk_records=CHUNK, full=damage != "missing-run-json")
    if damage != "missing-run-json":
        # one damaged line is skipped with a warning naming file and line; the rest of the run is built (#17)
        assert sorted(result.runs) == sorted([ids["alpha"], ids["xss"]])
        [warning] = [w for w in result.warnings if ids["alpha"] in w]
        assert f"{path.name}:2: damaged line skipped" in warning
        assert (out / f"data/runs/{ids['alpha']}.js").is_file()
        return
    assert result.runs == [ids["xss"]]
    [warning] = [w for w in result.warnings if ids["alpha"] in w]
    assert "alpha" in warning
    if damage != "missing-run-json":
        assert path.name in warning and ":2" in warning
    catalog = data(out, "data/catalog.js")
    entry = next(r for r in catalog["runs"] if r["id"] == ids["alpha"])
    assert entry["unreadable"] and (
        path.name in entry["unreadable"] if damage != "missing-run-json" else "run.json" in entry["unreadable"]
    )
    assert not (out / f"data/runs/{ids['alpha']}.js").exists()
    assert not (out / f"data/batches/{ids['alpha']}").exists()
    assert (out / f"data/runs/{ids['xss']}.js").is_file()
    manifest = json.loads((out / MANIFEST).read_bytes())
    assert all(ids["alpha"] not in rel for rel in manifest["files"])
    assert ids["alpha"] not in manifest["runs"]


def test_a_change_to_what_pages_are_computed_with_rebuilds_them(tmp_path, monkeypatch):
    """The builder's fingerprint covers labledger's code, not only the site package: a changed
    evaluation (analysis/), metric or reader gives another fingerprint, so a rebuild remakes every
    page instead of keeping what the earlier code computed."""
    import shutil

    from labledger.site import build as B

    copy = tmp_path / "labledger"
    shutil.copytree(B.PACKAGE.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(B, "PACKAGE", copy / "site")
    before = B.builder_fingerprint()
    assert B.builder_fingerprint() == before
    target = copy / "analysis" / "harness.py"
    target.write_text(target.read_text() + "\n# changed\n")
    assert B.builder_fingerprint() != before


def test_a_static_file_copied_on_a_full_disk_names_the_site_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    import errno
    import shutil

    from labledger.errors import StorageError
    from labledger.site.output import SiteWriter

    src = tmp_path / "asset.js"
    src.write_text("x = 1;\n")
    writer = SiteWriter(tmp_path / "site")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", full)
    with pytest.raises(StorageError, match=r"^disk full: .*/site/static/asset\.js: the file was not written"):
        writer.copy("static/asset.js", src)
    assert [p.name for p in (tmp_path / "site" / "static").iterdir()] == []
