"""W&B import keeps what a W&B user logs beyond scalars, each value compared with wandb's own reader
(``wandb leet inspect``): define_metric and nested summaries, the environment record, lists of
images with captions (shown by the site's media panel as a ``labledger.wandb`` run's are),
artifacts named, ``_wandb.visualize`` out of the config, and a resumed run (one id, three folders)
as one run with its segments (#43)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_import_wandb import _history, _theirs

import labledger
from labledger.analysis.rundiff import run_sides
from labledger.importers import import_path
from labledger.site.rundata import media_refs, media_view, step_metrics

pytest.importorskip("wandb.proto.wandb_internal_pb2")
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "wandb_scripts" / "full_run.py"
ENV = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline"}


def _write(d: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(d), *args], env=ENV, capture_output=True, text=True, timeout=300, cwd=d
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """A run written by real wandb: define_metric summaries, a nested summary, image lists with
    captions, a wandb.plot chart, an artifact; its records as wandb's reader reads them."""
    d = tmp_path_factory.mktemp("full")
    _write(d)
    (path,) = (d / "wandb").glob("offline-run-*/run-*.wandb")
    theirs, said = _theirs(path)
    assert said == ""
    return d, path, theirs


def _summary(records: list[dict]) -> dict:
    """The run's summary as wandb's reader gives it: every summary update applied in order."""
    out: dict = {}
    for r in records:
        if r["type"] == "summary":
            out.update(r["summary"].get("update") or {})
    return out


@pytest.mark.slow
def test_summaries_environment_artifacts_and_config(full_run, tmp_path):
    src, path, theirs = full_run
    result = import_path(src / "wandb", tmp_path / "L")
    book = labledger.open_ledger(tmp_path / "L")
    view = book.run(result.run_ids[0])
    assert view.status == "finished"
    summary = _summary(theirs)
    # define_metric summaries and the nested summary, as W&B keeps them, and as headline numbers
    assert summary["acc"] == {"max": 0.7} and summary["val/loss"] == {"last": 0.6, "min": 0.4}
    stored = json.loads(view.file_path("wandb-summary.json").read_text())
    for key in ("acc", "val/loss", "nested"):
        assert stored[key] == summary[key]
    assert stored["nested"] == {"name": "best", "test": {"acc": 0.88, "n": 100}}
    headline = view.summary["headline"]
    assert headline["acc.max"] == summary["acc"]["max"] and headline["val/loss.min"] == summary["val/loss"]["min"]
    assert headline["val/loss.last"] == summary["val/loss"]["last"]
    assert headline["nested.test.acc"] == 0.88 and headline["nested.test.n"] == 100
    # the define_metric definitions, as the site reads them
    defs = json.loads(view.file_path("wandb-metrics.json").read_text())
    mine = {d["name"]: d["summary"] for d in defs}
    want = {r["metric"]["name"]: ",".join(sorted(r["metric"]["summary"])) for r in theirs if r["type"] == "metric"}
    assert {k: ",".join(sorted(v.split(","))) for k, v in mine.items()} == want
    # the environment record is the run's environment, as labledger's own runs record it
    env: dict = {}
    for r in theirs:
        if r["type"] == "environment":
            env.update(r["environment"])
    assert view.meta["host"] == env["host"] and view.meta["python"] == env["python"].split()[-1]
    assert view.meta["argv"] == [env["program"], *env["args"]] and view.meta["cwd"] == env["root"]
    assert view.meta["platform"] == env["os"]
    sides = run_sides(book, view)["environment"]  # what `labledger diff` and the site compare
    assert sides["host"] == env["host"] and sides["platform"] == env["os"] and sides["python"] == view.meta["python"]
    assert view.meta["wandb"]["environment"]["executable"] == env["executable"]
    # _wandb.visualize is W&B's own chart spec, not config
    config_keys = [k for r in theirs if r["type"] == "config" for k in r["config"]["update"]]
    assert "_wandb.visualize.curve" in config_keys
    assert view.config == {"lr": 0.5, "layers": [2, 3]}
    notes = [n["text"] for n in view.notes()]
    assert any("_wandb.visualize.curve" in n and n.startswith("Not in the config") for n in notes)
    # artifacts: named with name, type and digest, each file listed in run.json
    arts = [r["artifact"] for r in theirs if r["type"] == "artifact"]
    (note,) = [n for n in notes if n.startswith("W&B artifacts")]
    for a in arts:
        assert f"{a['name']} (type {a['type']}, digest {a['digest']}" in note
    (weights,) = [a for a in view.meta["wandb"]["artifacts"] if a["name"] == "weights"]
    (theirs_w,) = [a for a in arts if a["name"] == "weights"]
    assert weights["files"] == [
        {"path": c["path"], "size": int(c["size"]), "digest": c["digest"], "ref": None}
        for c in theirs_w["manifest"]["contents"]
    ]
    assert weights["metadata"] == {"epochs": 4} and weights["description"] == "the weights"
    fields = view.meta["imported_from"]["fields"]
    assert {"summary", "define_metric", "environment", "artifacts", "_wandb config"} <= set(fields)


@pytest.mark.slow
def test_image_lists_with_captions_are_media_the_site_shows(full_run, tmp_path):
    src, path, theirs = full_run
    result = import_path(src / "wandb", tmp_path / "L")
    view = labledger.open_ledger(tmp_path / "L").run(result.run_ids[0])
    (row,) = [h for h in _history(theirs) if "samples._type" in h]
    assert row["samples._type"] == "images/separated"
    media = media_view(view)
    assert media is not None
    shown = {m["key"]: m for m in media["images"]}
    samples = shown["samples"]
    assert samples["steps"] == [row["_step"]]
    assert [i["caption"] for i in samples["items"][0]] == row["samples.captions"]
    assert all((i["h"], i["w"]) == (row["samples.height"], row["samples.width"]) for i in samples["items"][0])
    for item, name in zip(samples["items"][0], row["samples.filenames"], strict=True):
        original = path.parent / "files" / name
        assert (
            hashlib.sha256(view.file_path(item["ref"]).read_bytes()).digest()
            == hashlib.sha256(original.read_bytes()).digest()
        )
    assert shown["one"]["items"][0][0]["caption"] == row["one.caption"] == "single"
    assert set(media_refs({"media": media})) >= {i["ref"] for i in samples["items"][0]}
    (table,) = media["tables"]
    assert table["key"] == "curve_table" and table["tables"][0]["columns"] == ["x", "y"]
    assert table["tables"][0]["data"] == [[1, 2.0], [2, 3.5]]
    # the same list logged by a native labledger.wandb run has the same shape on the site
    import labledger.wandb as lwandb

    native_dir = tmp_path / "native"
    run = lwandb.init(project="n", name="native", dir=str(native_dir), ledger=str(tmp_path / "N"))
    run.log(
        {"samples": [lwandb.Image(np.full((4, 6, 3), 40 * k, dtype=np.uint8), caption=f"digit {k}") for k in range(3)]},
        step=row["_step"],
    )
    run.finish()
    nview = labledger.open_ledger(tmp_path / "N").run(run.id)
    (nsamples,) = [m for m in media_view(nview)["images"] if m["key"] == "samples"]
    assert nsamples["steps"] == samples["steps"]
    assert [{k: v for k, v in i.items() if k != "ref"} for i in nsamples["items"][0]] == [
        {k: v for k, v in i.items() if k != "ref"} for i in samples["items"][0]
    ]
    assert step_metrics(view, ["acc"]) == {}  # no step_metric was defined


@pytest.mark.slow
def test_a_resumed_run_in_three_folders_is_one_run_with_its_segments(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    for segment in range(3):
        _write(d, "resid01", str(segment))
    files = sorted((d / "wandb").glob("offline-run-*/run-resid01.wandb"))
    assert len(files) == 3
    theirs = [_theirs(f)[0] for f in files]
    result = import_path(d / "wandb", tmp_path / "L")
    assert len(result.runs) == 1 and result.runs[0].counts["segments"] == 3
    view = labledger.open_ledger(tmp_path / "L").run(result.run_ids[0])
    want = [h for records in theirs for h in _history(records)]
    rows = list(view.scalars())
    assert [r["step"] for r in rows] == [h["_step"] for h in want] == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    assert all(r["loss"] == h["loss"] and r["time"] == h["_timestamp"] for r, h in zip(rows, want, strict=True))
    assert view.name == "resumed" and view.status == "finished"
    segments = view.meta["wandb"]["segments"]
    assert [s["file"] for s in segments] == [f.relative_to(d / "wandb").as_posix() for f in files]
    assert [(s["first_step"], s["last_step"], s["exit_code"]) for s in segments] == [
        (0, 2, 0),
        (10, 12, 0),
        (20, 22, 0),
    ]
    assert view.config == {"lr": 0.1, "segment": 2}  # the last segment's config wins, as W&B's resume updates it
    (note,) = [n["text"] for n in view.notes() if "was resumed" in n["text"]]
    assert note.startswith("W&B run resid01 was resumed: 3 segments")
    starts = [next(r["run"]["start_time"] for r in records if r["type"] == "run") for records in theirs]
    assert starts == sorted(starts)


@pytest.mark.slow
def test_a_resumed_segment_that_logs_steps_again_is_cut_at_the_last_step(tmp_path):
    """A segment resumed offline without its step (wandb cannot ask the server): its rows at or
    below the steps already logged are left out, with a note, never interleaved."""
    d = tmp_path / "src"
    d.mkdir()
    _write(d, "resid02", "1")  # steps 10-12
    _write(d, "resid02", "0")  # later, steps 0-2: all at or below 12
    result = import_path(d / "wandb", tmp_path / "L")
    view = labledger.open_ledger(tmp_path / "L").run(result.run_ids[0])
    assert [r["step"] for r in view.scalars()] == [10, 11, 12]
    (note,) = [n["text"] for n in view.notes() if "left out" in n["text"] and "resumed" in n["text"]]
    assert "3 history row(s) at steps up to 12 left out" in note
    assert view.meta["wandb"]["segments"][1]["left_out"] == 3
