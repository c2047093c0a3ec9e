"""Imports: seed-004 folders, seed-000 reports, results files, TensorBoard logs and MLflow stores,
written for real in the tests, read back record by record; duplicates, copies, broken sources."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import SEEDS
from import_sources import (
    SEED_HISTORY,
    T0,
    image_lines,
    is_close,
    report_doc,
    results_rows,
    seed_batches,
    snapshot,
    tree_hashes,
    write_jsonl,
    write_mlflow,
    write_seed_run,
    write_tensorboard,
)

import labledger
from labledger.errors import ImportSourceError, RecordError, UnknownNameError
from labledger.importers import FORMATS, detect_format, import_path

SEED_000 = next(SEEDS.glob("000_*.txt"), None)
needs_seed = pytest.mark.skipif(SEED_000 is None, reason="../shared/seeds is not beside the repo")


def _only_run(ledger_dir):
    ledger = labledger.open_ledger(ledger_dir)
    [info] = ledger.runs()
    return ledger, ledger.run(info.id)


# -- seed-004 run folder -----------------------------------------------------------------------------


def test_seed_run_every_file_accounted_for(tmp_path):
    src = write_seed_run(tmp_path / "run-a")
    before = tree_hashes(src)
    result = import_path(src, tmp_path / "ledger")
    assert tree_hashes(src) == before  # originals untouched
    [imported] = result.runs
    files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    assert sorted(imported.fields) == files
    ledger, view = _only_run(tmp_path / "ledger")
    assert view.name == "run-a" and view.status == "finished"
    # batches: record by record, exactly as in the file
    assert list(view.batches()) == seed_batches()
    # history: the log_history list, verbatim; the object's other keys in the config
    assert list(view.history()) == SEED_HISTORY
    assert view.config["training_history"] == {"global_step": 3, "best_metric": 0.6, "logging_steps": 1}
    assert view.config["task"] == "digit_step" and view.config["grad_accum"] == 2
    # full test: the files as the demo stores them, and one result row per image x state
    assert view.files() == ["full_test/images.jsonl", "full_test/summary.json"]
    assert view.file_path("full_test/images.jsonl").read_bytes() == (src / "full_test/images.jsonl").read_bytes()
    rows = list(view.results("full_test"))
    lines = image_lines()
    assert len(rows) == 10 * len(lines)
    for row in rows:
        line = next(x for x in lines if x["image_id"] == row["image_id"])
        s = row["current"]
        assert row["probs"] == line["probabilities"][s]
        assert row["gold"] == line["gold"][s] and row["prediction"] == line["predictions"][s]
        assert row["slices"] == {"current": str(s), "target": str(line["target"])}
        assert row["task"] == "digit_step" and row["id"] == f"img{row['image_id']}-cur{s}"
    [note] = [n["text"] for n in view.notes()]
    assert "all 180 counts of summary.cells agree" in note
    # times from the batches; the origin recorded
    assert view.meta["started"] == T0 + 1 and view.meta["ended"] == T0 + 6
    origin = view.meta["imported_from"]
    assert origin["format"] == "seed-run" and origin["mode"] == "reference"
    assert {f["path"]: f["sha256"] for f in origin["files"]} == {
        k.removeprefix(str(src) + "/"): v for k, v in before.items()
    }
    assert view.meta["host"] is None and view.meta["git"] is None  # not the importer's
    assert ledger.previous_import(result.sha256)["run_id"] == view.id


def test_seed_run_summary_that_disagrees_is_noted(tmp_path):
    src = write_seed_run(tmp_path / "run")
    doc = orjson.loads((src / "full_test/summary.json").read_bytes())
    doc["cells"]["0"]["3"]["errors"] += 2
    (src / "full_test/summary.json").write_bytes(orjson.dumps(doc))
    import_path(src, tmp_path / "ledger")
    _, view = _only_run(tmp_path / "ledger")
    [note] = [n["text"] for n in view.notes()]
    assert "disagrees" in note and "cells[0][3].errors" in note


def test_seed_run_copy_keeps_the_originals_in_the_run(tmp_path):
    src = write_seed_run(tmp_path / "run")
    import_path(src, tmp_path / "ledger", copy=True)
    _, view = _only_run(tmp_path / "ledger")
    for p in src.rglob("*"):
        if p.is_file():
            rel = p.relative_to(src).as_posix()
            assert view.file_path(f"source/{rel}").read_bytes() == p.read_bytes()
    assert view.meta["imported_from"]["mode"] == "copy"


def test_round_trip_of_a_demo_like_run_through_the_ledger_layout(tmp_path):
    """A ledger run folder (history.jsonl, metrics.jsonl) imports into an equal run."""
    d = tmp_path / "one"
    with labledger.start_run("orig", group="g", tags=("a", "b"), config={"lr": 0.1}, ledger=d) as run:
        for s in range(1, 5):
            run.log(s, loss=1.0 / s, lr=0.1 * s)
        for b in seed_batches(4):
            run.log_batch(b)
        run.log_history({"step": 4, "loss": 0.25})
        ck = tmp_path / "w.bin"
        ck.write_bytes(b"weights")
        run.log_checkpoint(ck, step=4, metrics={"loss": 0.25})
        run.log_results("val", results_rows())
        run.note("a note")
    src = d / "runs" / run.id
    import_path(src, tmp_path / "two", name="copy")
    _, view = _only_run(tmp_path / "two")
    orig = labledger.open_ledger(d).run(run.id)
    assert list(view.scalars()) == list(orig.scalars())
    assert list(view.batches()) == list(orig.batches())
    assert list(view.history()) == list(orig.history())
    assert view.config == orig.config
    assert [n["text"] for n in view.notes()] == ["a note"]
    keep = ("path", "sha256", "size", "step", "metrics")
    assert [{k: c[k] for k in keep} for c in view.checkpoints()] == [
        {k: c[k] for k in keep} for c in orig.checkpoints()
    ]
    assert list(view.results("val")) == list(orig.results("val"))
    for key in ("started", "ended", "status", "host", "user", "git", "packages", "tags", "group"):
        assert view.meta[key] == orig.meta[key], key
    assert view.name == "copy" and view.meta["imported_from"]["fields"]["run.json"]


# -- seed-000 report ---------------------------------------------------------------------------------


@needs_seed
def test_generated_report_has_the_shape_of_seed_000():
    real = json.loads(SEED_000.read_text())
    fake = report_doc("x.pt", "0" * 64)
    assert list(fake) == list(real)
    for key in ("selected", "threshold_selection", "paired_test", "non_regression"):
        assert set(fake[key]) == set(real[key])
    assert set(fake["threshold_trials"][0]) == set(real["threshold_trials"][0])
    assert set(fake["history"][0]) == set(real["history"][0])
    assert len(fake["threshold_trials"]) == len(real["threshold_trials"])


def _import_report(tmp_path, doc, **kw):
    path = tmp_path / "report.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    result = import_path(path, tmp_path / "ledger", **kw)
    ledger, view = _only_run(tmp_path / "ledger")
    return result, ledger, view


def test_report_every_field_accounted_for(tmp_path):
    doc = report_doc("research\\runs\\smoke\\head.pt", hashlib.sha256(b"gone").hexdigest())
    result, ledger, view = _import_report(tmp_path, doc)
    [imported] = result.runs
    assert set(imported.fields) == set(doc)
    assert view.meta["imported_from"]["fields"] == imported.fields
    assert view.name == doc["experiment"]
    generated = dt.datetime.fromisoformat(doc["generated_at"]).timestamp()
    assert view.meta["started"] == generated == view.meta["ended"]
    # history verbatim
    assert list(view.history()) == doc["history"]
    # config: the scalars, and the selected epoch for the site
    for key in (
        "experiment",
        "generated_at",
        "device",
        "cuda_device",
        "base_model_version",
        "adapter_model_version",
        "training_samples",
        "validation_samples",
        "track",
        "product_validation",
    ):
        assert view.config[key] == doc[key]
    assert view.config["selected_epoch"] == doc["selected"]["epoch"]
    assert "interpretation_limit" not in view.config
    # the report document: the original, verbatim, with the indexed values beside it
    stored = view.evaluation("report", kind="report")
    assert {k: v for k, v in stored.items() if k not in ("tasks", "imported_from")} == doc
    values = ledger.metric_values(view.id)
    paired_f1 = [v for v in values if v["metric"] == "f1" and v["params"]["split"] == "test"]
    assert [v["value"] for v in paired_f1] == [doc["paired_test"]["f1"]]
    assert paired_f1[0]["params"]["threshold"] == doc["threshold_selection"]["threshold"]
    sel = [v for v in values if v["params"]["section"] == "threshold_selection" and v["metric"] == "accuracy"]
    assert sel[0]["value"] == doc["threshold_selection"]["accuracy"] and sel[0]["n"] == 2400
    assert not [v for v in values if v["metric"] == "recall_gate_passed"]  # booleans stay in the document
    # notes: the limits attached to the result
    notes = [n["text"] for n in view.notes()]
    assert f"Interpretation limit: {doc['interpretation_limit']}" in notes
    assert "product_validation: false (as the report states it)" in notes
    assert any("exact_logit_max_abs = 0.0" in n for n in notes)
    # the checkpoint, absent here, is recorded by its stated hash
    [ck] = view.checkpoints()
    assert ck["sha256"] == doc["checkpoint_sha256"] and ck["reference"] is True and ck["size"] is None
    assert ck["path"] == doc["checkpoint"]
    row = ledger.db.execute("SELECT path, sha256, size FROM checkpoints WHERE run_id = ?", (view.id,)).fetchone()
    assert row == (doc["checkpoint"], doc["checkpoint_sha256"], -1)


def test_report_checkpoint_present_is_hashed(tmp_path):
    ck = tmp_path / "research" / "runs" / "smoke" / "head.pt"
    ck.parent.mkdir(parents=True)
    ck.write_bytes(b"real weights")
    doc = report_doc("research\\runs\\smoke\\head.pt", hashlib.sha256(b"real weights").hexdigest())
    _, _, view = _import_report(tmp_path, doc)
    [rec] = view.checkpoints()
    assert rec["sha256"] == doc["checkpoint_sha256"] and rec["size"] == len(b"real weights")
    assert "reference" not in rec and rec["path"] == str(ck.resolve())


def test_report_checkpoint_with_another_hash_is_said(tmp_path):
    ck = tmp_path / "head.pt"
    ck.write_bytes(b"changed since")
    doc = report_doc("head.pt", hashlib.sha256(b"the original").hexdigest())
    _, _, view = _import_report(tmp_path, doc)
    [rec] = view.checkpoints()
    assert rec["sha256"] == doc["checkpoint_sha256"] and rec["reference"] is True
    assert any("not the checkpoint the report describes" in n["text"] for n in view.notes())


@needs_seed
def test_real_seed_000_imports_with_every_field_accounted_for(tmp_path):
    result = import_path(SEED_000, tmp_path / "ledger", fmt="report")
    real = json.loads(SEED_000.read_text())
    assert set(result.runs[0].fields) == set(real)
    _, view = _only_run(tmp_path / "ledger")
    assert len(list(view.history())) == len(real["history"])
    assert view.config["selected_epoch"] == real["selected"]["epoch"]


# -- results.jsonl -------------------------------------------------------------------------------------


def test_results_file_becomes_a_stored_result_set(tmp_path):
    path = write_jsonl(tmp_path / "v5" / "results.jsonl", results_rows())
    result = import_path(path, tmp_path / "ledger")
    assert result.format == "results"
    ledger, view = _only_run(tmp_path / "ledger")
    assert view.name == "v5"
    assert view.results_path("results").read_bytes() == path.read_bytes()
    assert [e["name"] for e in ledger.evaluations(view.id)] == ["results"]


# -- TensorBoard -----------------------------------------------------------------------------------------


def test_tensorboard_scalars_match_tensorboards_own_reader(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = write_tensorboard(tmp_path / "tb" / "exp1")
    before = tree_hashes(logdir)
    result = import_path(tmp_path / "tb", tmp_path / "ledger")
    assert tree_hashes(logdir) == before
    assert result.format == "tensorboard"
    ledger = labledger.open_ledger(tmp_path / "ledger")
    views = {v.name: v for v in (ledger.run(i.id) for i in ledger.runs())}
    event_dirs = sorted({p.parent for p in logdir.rglob("*tfevents*")})
    assert len(views) == len(event_dirs)
    for d in event_dirs:
        rel = d.relative_to(tmp_path).as_posix()
        view = views[rel]
        assert view.group == "tb"
        acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
        acc.Reload()
        expected = sorted(
            (e.step, e.wall_time, tag if tag != "time" else "time_", e.value)
            for tag in acc.Tags()["scalars"]
            for e in acc.Scalars(tag)
        )
        got = sorted(
            (r["step"], r["time"], k, v) for r in view.scalars() for k, v in r.items() if k not in ("step", "time")
        )
        assert got == expected
        assert view.meta["started"] <= min(t for _, t, _, _ in got) <= view.meta["ended"]
    root = views["tb/exp1"]
    notes = " ".join(n["text"] for n in root.notes())
    assert "histo" in notes or "histograms" in notes
    assert "time -> time_" in notes
    [hp_run] = [v for v in views.values() if v.config]
    assert hp_run.config == {"lr": 0.1, "batch_size": 4, "optimizer": "adam"}


def test_tensorboard_torn_tail_is_noted_and_the_rest_imported(tmp_path):
    logdir = write_tensorboard(tmp_path / "tb", steps=4)
    [main_file] = list(logdir.glob("*tfevents*"))
    main_file.write_bytes(main_file.read_bytes() + b"\x10\x00\x00")
    import_path(main_file, tmp_path / "ledger")
    _, view = _only_run(tmp_path / "ledger")
    assert any("the last 3 bytes are not a complete record" in n["text"] for n in view.notes())
    assert [r["train/loss"] for r in view.scalars() if "train/loss" in r] == pytest.approx([1.0, 0.5, 1 / 3, 0.25])


# -- MLflow ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_mlflow_store_runs_params_metrics_tags(tmp_path, monkeypatch, kind):
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    if kind == "file":
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri, ids = write_mlflow(tmp_path / "store", kind=kind)
    store = tmp_path / "store" / ("mlflow.db" if kind == "sqlite" else "mlruns")
    before = tree_hashes(store)
    assert detect_format(tmp_path / "store") == "mlflow"
    result = import_path(tmp_path / "store", tmp_path / "ledger")
    assert tree_hashes(store) == before
    ledger = labledger.open_ledger(tmp_path / "ledger")
    views = {v.name: v for v in (ledger.run(i.id) for i in ledger.runs())}
    assert sorted(views) == ["baseline", "crashy"]  # the deleted run is not imported
    assert len(result.runs) == 2
    client = MlflowClient(tracking_uri=uri)
    for name, run_id in ids.items():
        if name == "trashed":
            continue
        view, mrun = views[name], client.get_run(run_id)
        # numbers as numbers, each giving MLflow's text back; the texts as MLflow has them in run.json
        assert {k: str(v) for k, v in view.config.items()} == mrun.data.params
        assert view.meta["mlflow"]["params"] == mrun.data.params
        assert view.group == client.get_experiment(mrun.info.experiment_id).name
        assert view.meta["mlflow"]["tags"] == mrun.data.tags
        assert view.meta["mlflow"]["run_id"] == run_id
        assert view.meta["started"] == mrun.info.start_time / 1000
        assert view.meta["ended"] == mrun.info.end_time / 1000
        expected = sorted(
            (m.step, m.timestamp, m.key if m.key != "step" else "step_", m.value)
            for key in mrun.data.metrics
            for m in client.get_metric_history(run_id, key)
        )
        got = sorted(
            (r["step"], round(r["time"] * 1000), k, v)
            for r in view.scalars()
            for k, v in r.items()
            if k not in ("step", "time")
        )
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g[:3] == e[:3] and is_close(g[3], e[3])
    base = views["baseline"]
    assert base.config["lr"] == 0.1 and base.config["batch_size"] == 32  # MLflow's "0.1" and "32"
    assert base.status == "finished" and views["crashy"].status == "failed"
    assert base.tags == ["team=vision"]
    notes = [n["text"] for n in base.notes()]
    assert "first try" in notes and any("step -> step_" in n for n in notes)
    assert any("1 deleted run(s)" in n for n in notes)
    assert math.isnan(next(r["loss"] for r in base.scalars() if r["step"] == 6))
    # one record per (step, timestamp): loss and acc logged together share a record
    assert {"loss", "acc"} <= set(next(r for r in base.scalars() if r["step"] == 2))


def test_mlflow_copy_brings_local_artifacts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_mlflow(tmp_path / "store")
    import_path(tmp_path / "store" / "mlflow.db", tmp_path / "ledger", copy=True, name="m")
    ledger = labledger.open_ledger(tmp_path / "ledger")
    views = {v.name: v for v in (ledger.run(i.id) for i in ledger.runs())}
    assert views["m/baseline"].file_path("artifacts/model.txt").read_text() == "weights"


# -- duplicates, detection, broken sources ---------------------------------------------------------------


def test_reimport_is_refused_unless_again(tmp_path):
    path = write_jsonl(tmp_path / "results.jsonl", results_rows())
    first = import_path(path, tmp_path / "ledger")
    moved = tmp_path / "elsewhere" / "renamed.jsonl"
    moved.parent.mkdir()
    shutil.copyfile(path, moved)  # same content, another path: still recognised
    with pytest.raises(ImportSourceError, match=f"as run {first.run_ids[0]}.*--again"):
        import_path(moved, tmp_path / "ledger")
    again = import_path(moved, tmp_path / "ledger", again=True)
    assert again.again and again.previous["run_id"] == first.run_ids[0]
    assert len(labledger.open_ledger(tmp_path / "ledger").runs()) == 2


@pytest.mark.parametrize(
    "make,expected",
    [
        (lambda p: write_seed_run(p / "x"), "seed-run"),
        (lambda p: write_jsonl(p / "r.jsonl", results_rows()), "results"),
        (
            lambda p: (p / "rep.json").write_bytes(orjson.dumps(report_doc("a.pt", "0" * 64))) and p / "rep.json",
            "report",
        ),
    ],
)
def test_detect_format(tmp_path, make, expected):
    assert detect_format(make(tmp_path)) == expected


def test_unknown_sources_are_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ImportSourceError, match="cannot tell its format"):
        detect_format(tmp_path / "notes.txt")
    write_seed_run(tmp_path / "run")
    with pytest.raises(ImportSourceError, match="part of a run folder; import the folder"):
        detect_format(tmp_path / "run" / "batches.jsonl")
    with pytest.raises(ImportSourceError, match="no such file"):
        import_path(tmp_path / "missing", tmp_path / "ledger")
    with pytest.raises(UnknownNameError, match="Did you mean 'mlflow'"):
        import_path(tmp_path / "notes.txt", tmp_path / "ledger", fmt="mlflo")
    assert set(FORMATS) == {
        "seed-run",
        "report",
        "results",
        "tensorboard",
        "mlflow",
        "lm-eval",
        "inspect",
        "lighteval",
        "helm",
        "wandb",
        "trackio",
        "aim",
    }


def test_each_format_names_its_module_and_an_import_loads_only_its_own(tmp_path):
    from labledger.importers import importer

    assert all(fmt == importer(fmt).FORMAT for fmt in FORMATS)
    results = tmp_path / "results.jsonl"
    results.write_text('{"id": "a", "task": "t", "gold": "yes", "probs": {"yes": 0.8, "no": 0.2}}\n')
    code = (
        "import sys; from labledger.importers import import_path; import_path(sys.argv[1], sys.argv[2], fmt='results');"
        "import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('labledger.importers.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(results), str(tmp_path / "ledger")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(labledger.__file__).resolve().parents[1])},
    )
    loaded = {m.rsplit(".", 1)[1] for m in json.loads(out.stdout)}
    assert (
        loaded & {"aim", "mlflow", "tensorboard", "trackio", "wandb_offline", "lm_eval", "inspect_log", "helm"} == set()
    )
    assert "results" in loaded


def _break_batch_json(src):
    lines = (src / "batches.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-5]
    (src / "batches.jsonl").write_text("\n".join(lines) + "\n")


def _break_batch_field(src):
    rows = seed_batches()
    rows[3]["samples"][1]["probabilities"]["0"] += 0.5
    write_jsonl(src / "batches.jsonl", rows)


def _break_image_probs(src):
    lines = image_lines()
    lines[1]["probabilities"][4] = {"-1": 0.7, "0": 0.7, "+1": 0.1}
    write_jsonl(src / "full_test/images.jsonl", lines)


def _break_cells(src):
    doc = orjson.loads((src / "full_test/summary.json").read_bytes())
    doc["cells"]["3"]["2"]["errors"] = -1
    (src / "full_test/summary.json").write_bytes(orjson.dumps(doc))


def _break_history(src):
    (src / "training_history.json").write_bytes(orjson.dumps({"log_history": [{"step": 1}, 5]}))


BROKEN = [
    (_break_batch_json, "batches.jsonl:3: not valid JSON", None),
    (_break_batch_field, "batches.jsonl:4: field 'samples[1].probabilities'", "samples[1].probabilities"),
    (_break_image_probs, "images.jsonl:2: field 'probs'", "probs"),
    (_break_cells, "summary.json: field 'cells.3.2.errors' must be an integer >= 0", "cells.3.2.errors"),
    (_break_history, "training_history.json: field 'log_history[1]' must be an object", "log_history[1]"),
]


@pytest.mark.parametrize("breaker,message,field", BROKEN, ids=[b[0].__name__ for b in BROKEN])
def test_broken_seed_run_fails_naming_file_line_field_and_changes_nothing(tmp_path, breaker, message, field):
    with labledger.start_run("existing", ledger=tmp_path / "ledger") as run:
        run.log(1, loss=1.0)
    import_path(write_jsonl(tmp_path / "ok.jsonl", results_rows()), tmp_path / "ledger")
    before = snapshot(tmp_path / "ledger")
    src = write_seed_run(tmp_path / "bad")
    breaker(src)
    with pytest.raises(RecordError) as info:
        import_path(src, tmp_path / "ledger")
    assert message in str(info.value)
    assert info.value.field == field
    assert snapshot(tmp_path / "ledger") == before
    assert not any((tmp_path / "ledger" / ".staging").iterdir())


@pytest.mark.parametrize(
    "doc_change,message",
    [
        (lambda d: d.update(checkpoint_sha256="xyz"), "field 'checkpoint_sha256' must be 64 hexadecimal digits"),
        (lambda d: d["threshold_trials"][7].update(threshold="0.2"), "field 'threshold_trials[7].threshold'"),
        (lambda d: d["history"].append(3), "field 'history[5]' must be an object"),
        (lambda d: d.update(generated_at="yesterday"), "field 'generated_at' must be an ISO 8601 time"),
    ],
)
def test_broken_report_fails_naming_field(tmp_path, doc_change, message):
    doc = report_doc("a.pt", "0" * 64)
    doc_change(doc)
    path = tmp_path / "report.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(RecordError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        import_path(path, tmp_path / "ledger")
    assert str(path) in str(info.value)
    assert labledger.open_ledger(tmp_path / "ledger").runs() == []


def test_report_that_is_not_json_names_the_line(tmp_path):
    path = tmp_path / "report.json"
    path.write_text('{\n  "experiment": "x",\n  "history": [1,,2]\n}\n')
    with pytest.raises(RecordError, match=r"report.json:3: not valid JSON"):
        import_path(path, tmp_path / "ledger", fmt="report")


def test_results_row_with_a_bad_field_names_file_line_field(tmp_path):
    rows = results_rows()
    rows[6]["probs"] = {"SUPPORTED": 0.9, "NOT_SUPPORTED": 0.9}
    path = write_jsonl(tmp_path / "results.jsonl", rows)
    with pytest.raises(RecordError, match=r"results.jsonl:7: field 'probs'"):
        import_path(path, tmp_path / "ledger")
    assert labledger.open_ledger(tmp_path / "ledger").runs() == []
