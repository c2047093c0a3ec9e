"""labledger.wandb: the W&B API call by call, a real W&B script beside real wandb, and HF Trainer (#14)."""

from __future__ import annotations

import argparse
import glob
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import labledger
import labledger.wandb as wandb
from labledger.wandb.records import read_wandb_file

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "wandb_scripts" / "tiny_torch.py"


@pytest.fixture(autouse=True)
def _no_open_run():
    yield
    if wandb.run is not None:
        wandb.finish()


def _init(tmp_path, **kwargs):
    kwargs.setdefault("system_metrics", False)
    return wandb.init(dir=str(tmp_path), **kwargs)


def _view(tmp_path, run_id):
    return labledger.open_ledger(tmp_path / ".labledger").run(run_id)


def _media(view):
    path = view.dir / "media.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- init, config, run attributes ------------------------------------------------------------------
def test_init_maps_project_to_group_and_keeps_the_rest(tmp_path):
    run = _init(
        tmp_path, project="proj", name="r1", tags=["a", "b"], notes="hello", job_type="train", entity="me", id="abc"
    )
    assert wandb.run is run and run.name == "r1" and run.group == "proj"
    assert Path(run.dir).is_dir() and run.id == run.labledger_run.id
    wandb.finish()
    assert wandb.run is None
    view = _view(tmp_path, run.id)
    assert view.group == "proj" and view.tags == ["a", "b"] and view.status == "finished"
    assert view.meta["wandb"]["project"] == "proj" and view.meta["wandb"]["job_type"] == "train"
    assert view.meta["wandb"]["entity"] == "me" and view.meta["wandb"]["id"] == "abc"
    assert [n["text"] for n in view.notes()] == ["hello"]


def test_group_wins_over_project_and_name_defaults_to_project(tmp_path):
    run = _init(tmp_path, project="proj", group="sweep1")
    assert run.group == "sweep1" and run.name == "proj"
    wandb.finish()
    assert _view(tmp_path, run.id).meta["wandb"]["project"] == "proj"


def test_config_attribute_item_update_and_namespace(tmp_path):
    ns = argparse.Namespace(lr=0.1, layers=2)
    run = _init(tmp_path, config=ns)
    wandb.config.batch = 16
    wandb.config["opt"] = {"name": "adam"}
    wandb.config.update({"lr": 0.2}, allow_val_change=True)
    wandb.config.update(argparse.Namespace(seed=3))
    wandb.config.setdefaults({"lr": 9.0, "new": 1})
    assert wandb.config.lr == 0.2 and wandb.config["layers"] == 2 and "batch" in wandb.config
    assert wandb.config.get("missing", 5) == 5 and wandb.config.as_dict()["new"] == 1
    with pytest.raises(AttributeError):
        _ = wandb.config.missing
    wandb.finish()
    assert _view(tmp_path, run.id).config == {
        "lr": 0.2,
        "layers": 2,
        "batch": 16,
        "opt": {"name": "adam"},
        "seed": 3,
        "new": 1,
    }


def test_config_file_path_is_refused_with_what_to_do(tmp_path):
    with pytest.raises(wandb.UnsupportedError, match="yaml.safe_load"):
        _init(tmp_path, config="config.yaml")


# -- log: flattening, step, commit -----------------------------------------------------------------
def test_log_flattens_nested_dicts_and_counts_steps(tmp_path):
    run = _init(tmp_path)
    wandb.log({"train": {"loss": 1.0, "opt": {"lr": 0.1}}, "acc": np.float32(0.5)})
    wandb.log({"loss": 0.5})
    run.log({"loss": 0.25})
    wandb.finish()
    rows = [{k: v for k, v in r.items() if k != "time"} for r in _view(tmp_path, run.id).scalars()]
    assert rows == [
        {"step": 0, "train.loss": 1.0, "train.opt.lr": 0.1, "acc": 0.5},
        {"step": 1, "loss": 0.5},
        {"step": 2, "loss": 0.25},
    ]


def test_log_step_and_commit_semantics(tmp_path, caplog):
    run = _init(tmp_path)
    wandb.log({"a": 1.0}, commit=False)
    wandb.log({"b": 2.0})  # merged into step 0, committed
    wandb.log({"c": 3.0}, step=5)  # pending at step 5
    wandb.log({"d": 4.0}, step=5)  # same step: merged
    wandb.log({"e": 5.0}, step=7)  # step 5 committed, 7 pending
    with caplog.at_level("WARNING", logger="labledger.wandb"):
        wandb.log({"old": 1.0}, step=3)  # ignored, as W&B does
    assert [r.getMessage() for r in caplog.records] == [
        "labledger.wandb: step 3 < current step 7: data ignored (as W&B does)"
    ]
    wandb.log({"f": 6.0}, step=7, commit=True)
    wandb.log({"g": 7.0})
    assert run.step == 9
    wandb.finish()
    rows = [{k: v for k, v in r.items() if k != "time"} for r in _view(tmp_path, run.id).scalars()]
    assert rows == [
        {"step": 0, "a": 1.0, "b": 2.0},
        {"step": 5, "c": 3.0, "d": 4.0},
        {"step": 7, "e": 5.0, "f": 6.0},
        {"step": 8, "g": 7.0},
    ]


def test_log_before_init_and_after_finish_say_what_to_do(tmp_path):
    with pytest.raises(wandb.Error, match=r"call wandb.init\(\) before wandb.log"):
        wandb.log({"x": 1})
    run = _init(tmp_path)
    run.finish()
    with pytest.raises(labledger.LedgerError):
        run.log({"x": 1})


def test_strings_and_arrays_go_to_media_records(tmp_path):
    run = _init(tmp_path)
    wandb.log({"phase": "warmup", "weights": np.arange(100.0), "loss": 1.0})
    wandb.finish()
    view = _view(tmp_path, run.id)
    media = _media(view)
    assert [(m["kind"], m["key"], m["step"]) for m in media] == [("value", "phase", 0), ("histogram", "weights", 0)]
    assert media[0]["value"] == "warmup" and sum(media[1]["counts"]) == 100
    assert [r["loss"] for r in view.scalars()] == [1.0]


# -- summary, finish, context manager -------------------------------------------------------------------
def test_summary_last_values_and_explicit_sets(tmp_path):
    run = _init(tmp_path)
    wandb.log({"loss": 1.0})
    wandb.log({"loss": 0.5})
    wandb.summary["best"] = 0.4
    wandb.summary.update({"test": {"acc": 0.9}})
    assert wandb.summary["loss"] == 0.5 and dict(wandb.summary)["test.acc"] == 0.9
    assert run.summary.best == 0.4
    wandb.finish()
    view = _view(tmp_path, run.id)
    assert view.summary["headline"] == {"best": 0.4, "test.acc": 0.9}
    assert json.loads((view.dir / "files" / "wandb-summary.json").read_text()) == {
        "loss": 0.5,
        "best": 0.4,
        "test.acc": 0.9,
    }


def test_finish_exit_code_and_context_manager(tmp_path):
    run = _init(tmp_path)
    wandb.finish(exit_code=3)
    view = _view(tmp_path, run.id)
    assert view.status == "failed" and view.meta["error"] == "exit code 3"
    with wandb.init(dir=str(tmp_path), system_metrics=False) as ok:
        wandb.log({"x": 1.0})
    assert _view(tmp_path, ok.id).status == "finished" and wandb.run is None
    with pytest.raises(ZeroDivisionError), wandb.init(dir=str(tmp_path), system_metrics=False) as bad:
        wandb.log({"x": 1.0}, commit=False)
        _ = 1 / 0
    view = _view(tmp_path, bad.id)
    assert view.status == "failed" and "ZeroDivisionError" in view.meta["error"] and wandb.run is None
    assert [r["x"] for r in view.scalars()] == [1.0]  # the pending row was committed


def test_reinit_and_resume(tmp_path):
    first = _init(tmp_path)
    assert _init(tmp_path) is first  # reinit=None returns the active run
    second = _init(tmp_path, reinit=True)
    assert second is not first and first.finished and wandb.run is second
    third = _init(tmp_path, reinit="create_new")
    assert not second.finished and wandb.run is third
    second.finish()
    wandb.finish()
    with pytest.raises(wandb.UnsupportedError, match="append-only"):
        _init(tmp_path, resume="must")


def test_disabled_mode_writes_nothing(tmp_path):
    run = _init(tmp_path, mode="disabled", config={"a": 1})
    wandb.log({"x": 1.0})
    wandb.define_metric("x", summary="min")
    wandb.finish()
    assert run.finished and not (tmp_path / ".labledger").exists()


# -- media, tables, histograms ---------------------------------------------------------------------
def test_image_from_numpy_pil_and_torch_are_png_files(tmp_path):
    import torch
    from PIL import Image as PILImage

    run = _init(tmp_path)
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)
    rgb_float = np.ones((2, 2, 3)) * 0.5
    pil = PILImage.new("RGB", (5, 4), color=(10, 20, 30))
    chw = torch.zeros(3, 6, 7)
    wandb.log({"gray": wandb.Image(gray, caption="g"), "samples": [wandb.Image(rgb_float), wandb.Image(pil)]})
    wandb.log({"torch": wandb.Image(chw)})
    wandb.finish()
    view = _view(tmp_path, run.id)
    media = _media(view)
    assert [(m["key"], m["step"], len(m["files"])) for m in media] == [
        ("gray", 0, 1),
        ("samples", 0, 2),
        ("torch", 1, 1),
    ]
    decoded = {}
    for m in media:
        for f in m["files"]:
            data = (view.dir / f["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == f["sha256"]
            decoded[(m["key"], f["path"])] = np.asarray(PILImage.open(io.BytesIO(data)))
    arrays = list(decoded.values())
    assert np.array_equal(arrays[0], gray) and media[0]["files"][0]["caption"] == "g"
    assert arrays[1].shape == (2, 2, 3) and int(arrays[1][0, 0, 0]) == 128
    assert arrays[2].shape == (4, 5, 3) and tuple(arrays[2][0, 0]) == (10, 20, 30)
    assert arrays[3].shape == (6, 7, 3)


def test_table_of_result_rows_becomes_a_result_set(tmp_path):
    run = _init(tmp_path)
    table = wandb.Table(columns=["id", "task", "gold", "pred"])
    table.add_data("a", "reg", 1.0, 0.5)
    table.add_data("b", "reg", 2.0, 2.5)
    wandb.log({"preds": table})
    wandb.finish()
    view = _view(tmp_path, run.id)
    assert view.results_names() == ["preds-0"]
    assert [r["pred"] for r in view.results("preds-0")] == [0.5, 2.5]
    assert _media(view)[0] == {**_media(view)[0], "kind": "table", "results": "preds-0", "rows": 2}


def test_other_tables_become_record_files(tmp_path):
    run = _init(tmp_path)
    wandb.log({"samples": wandb.Table(columns=["prompt", "len"], data=[["hi", 2], ["there", 5]])})
    wandb.finish()
    view = _view(tmp_path, run.id)
    rec = _media(view)[0]
    lines = (view.dir / rec["path"]).read_text().splitlines()
    assert [json.loads(x) for x in lines] == [{"prompt": "hi", "len": 2}, {"prompt": "there", "len": 5}]
    assert rec["sha256"] == hashlib.sha256((view.dir / rec["path"]).read_bytes()).hexdigest()
    with pytest.raises(wandb.MediaError, match="2 values for 3 columns"):
        wandb.Table(columns=["a", "b", "c"], data=[[1, 2]])


def test_histogram(tmp_path):
    run = _init(tmp_path)
    wandb.log({"h": wandb.Histogram([0.0, 1.0, 1.0, 2.0], num_bins=2)})
    wandb.log({"n": wandb.Histogram(np_histogram=np.histogram([1, 2, 3], bins=3))})
    wandb.finish()
    media = _media(_view(tmp_path, run.id))
    assert media[0]["counts"] == [1, 3] and media[0]["bins"] == [0.0, 1.0, 2.0]
    assert media[1]["counts"] == [1, 1, 1] and media[1]["step"] == 1


# -- define_metric, save, artifacts, watch ---------------------------------------------------------
def test_define_metric_step_sync_and_summaries(tmp_path):
    run = _init(tmp_path)
    wandb.define_metric("epoch")
    wandb.define_metric("val/*", step_metric="epoch", summary="min,max,mean")
    wandb.define_metric("acc", summary="best", goal="maximize")
    for epoch, (loss, acc) in enumerate([(3.0, 0.1), (1.0, 0.7), (2.0, 0.4)]):
        wandb.log({"epoch": epoch})
        wandb.log({"val/loss": loss, "acc": acc})  # step_sync fills in the epoch
    with pytest.raises(wandb.Error, match="summary"):
        wandb.define_metric("x", summary="median")
    wandb.finish()
    view = _view(tmp_path, run.id)
    rows = [r for r in view.scalars() if "val/loss" in r]
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    assert view.summary["headline"] == {
        "val/loss.min": 1.0,
        "val/loss.max": 3.0,
        "val/loss.mean": 2.0,
        "acc.max": 0.7,
    }
    defs = json.loads((view.dir / "files" / "wandb-metrics.json").read_text())
    assert [d["name"] for d in defs] == ["epoch", "val/*", "acc"] and defs[1]["step_metric"] == "epoch"


def test_save_and_log_artifact_store_files_with_sha256(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "model.bin").write_bytes(b"weights")
    (src / "sub" / "cfg.json").write_text("{}")
    run = _init(tmp_path)
    stored = wandb.save(str(src / "*.bin"))
    art = wandb.Artifact("model", type="model", metadata={"n": 1})
    art.add_dir(str(src))
    run.log_artifact(art, aliases=["best"])
    wandb.log_artifact(str(src / "model.bin"), name="again")
    with pytest.raises(wandb.MediaError, match="add_file"):
        art.add_reference("s3://bucket/x")
    wandb.finish()
    view = _view(tmp_path, run.id)
    media = _media(view)
    assert [m["kind"] for m in media] == ["file", "artifact", "artifact"]
    assert Path(stored[0]).read_bytes() == b"weights"
    assert media[0]["sha256"] == hashlib.sha256(b"weights").hexdigest()
    assert [f["path"] for f in media[1]["files"]] == [
        "files/artifacts/model/v0/model.bin",
        "files/artifacts/model/v0/sub/cfg.json",
    ]
    for f in media[1]["files"] + media[2]["files"]:
        assert hashlib.sha256((view.dir / f["path"]).read_bytes()).hexdigest() == f["sha256"]
    assert media[1]["aliases"] == ["best"] and media[1]["metadata"] == {"n": 1}


def test_watch_is_a_no_op_with_one_note(tmp_path, monkeypatch, caplog):
    import labledger.wandb._run as wrun

    monkeypatch.setattr(wrun, "_watch_noted", False)
    _init(tmp_path)
    with caplog.at_level("WARNING", logger="labledger.wandb"):
        wandb.watch(object(), log="all")
        wandb.watch(object())  # the note is given once
        wandb.run.watch(object())
    assert len(caplog.records) == 1 and "no-op" in caplog.records[0].getMessage()


# -- the compatibility table in docs/wandb.md ------------------------------------------------------
def _table_rows():
    text = (ROOT / "docs" / "wandb.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \| (supported|mapped|not supported) \|", text, re.M)
    assert len(rows) > 30
    return rows


def test_every_supported_call_in_the_table_exists_and_every_unsupported_one_raises():
    for call, status in _table_rows():
        name = call.split("(")[0]
        parts = name.split(".")
        assert parts[0] == "wandb", call
        owner: object = wandb
        if len(parts) == 3 and parts[1] in ("run", "config", "summary"):
            owner = {"run": wandb.WandbRun, "config": wandb.Config, "summary": wandb.Summary}[parts[1]]
            attr = parts[2]
        elif len(parts) == 3 and parts[1] in ("Table", "Artifact", "plot"):
            owner = getattr(wandb, parts[1])
            attr = parts[2]
        else:
            assert len(parts) == 2, call
            attr = parts[1]
        if status == "not supported" and owner is wandb:
            with pytest.raises(wandb.UnsupportedError, match="not supported by labledger.wandb: "):
                getattr(wandb, attr)()
        elif status == "not supported":  # methods: called in test_unsupported_run_methods_say_what_to_do
            assert callable(getattr(owner, attr)), call
        else:
            assert hasattr(owner, attr), call


def test_unknown_names_raise_attribute_errors_that_point_to_the_docs():
    with pytest.raises(AttributeError, match="docs/wandb.md"):
        _ = wandb.no_such_call
    assert getattr(wandb, "define_metric", None) is not None  # HF Trainer's probe


def test_unsupported_run_methods_say_what_to_do(tmp_path):
    run = _init(tmp_path)
    with pytest.raises(wandb.UnsupportedError, match="gates"):
        run.alert(title="x", text="y")
    with pytest.raises(wandb.UnsupportedError, match="log_checkpoint"):
        run.use_artifact("model:latest")
    with pytest.raises(wandb.UnsupportedError, match="registry"):
        run.link_artifact(wandb.Artifact("m", type="model"), "org/registry/m")
    with pytest.raises(wandb.UnsupportedError, match="files/artifacts/"):
        run.use_model("m:latest")
    with pytest.raises(wandb.UnsupportedError, match="method 'random' or 'grid'"):
        wandb.sweep({"method": "bayes", "parameters": {"lr": {"min": 0.1, "max": 1.0}}})


def test_a_wandb_run_passes_labledger_verify(tmp_path):
    from labledger.store.verify import verify_ledger

    _init(tmp_path, config={"a": 1})
    wandb.log({"x": 1.0, "img": wandb.Image(np.zeros((2, 2)))})
    wandb.finish()
    report = verify_ledger(labledger.open_ledger(tmp_path / ".labledger"))
    assert report.ok, report


@pytest.mark.parametrize("fail", [False, True])
def test_runs_left_open_end_at_interpreter_exit(tmp_path, fail):
    code = (
        "import labledger.wandb as wandb\n"
        f"wandb.init(dir={str(tmp_path)!r}, system_metrics=False)\n"
        "wandb.log({'x': 1.0})\n"
        "wandb.log({'y': 2.0}, commit=False)\n" + ("raise SystemError('boom')\n" if fail else "")
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == (1 if fail else 0), done.stderr
    (info,) = labledger.open_ledger(tmp_path / ".labledger").runs()
    view = _view(tmp_path, info.id)
    assert [r.get("y") for r in view.scalars()] == [None, 2.0]
    assert view.status == ("failed" if fail else "finished")
    if fail:
        assert view.meta["error"] == "SystemError: boom"


# -- a real W&B script, unchanged, beside real wandb ---------------------------------------------------
def _run_script(out: Path, *, real: bool) -> None:
    env = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT / "src")}
    if real:
        cmd = [sys.executable, str(SCRIPT), str(out)]
    else:
        shim = (
            "import runpy, sys, labledger.wandb as w; sys.modules['wandb'] = w; "
            f"sys.argv = ['tiny_torch.py', {str(out)!r}]; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
        )
        cmd = [sys.executable, "-c", shim]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=out)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_real_wandb_script_gives_the_same_values_as_real_wandb_offline(tmp_path):
    pytest.importorskip("wandb.proto.wandb_internal_pb2")
    (tmp_path / "real").mkdir()
    (tmp_path / "ours").mkdir()
    _run_script(tmp_path / "real", real=True)
    _run_script(tmp_path / "ours", real=False)
    (wb_file,) = glob.glob(str(tmp_path / "real" / "wandb" / "offline-run-*" / "run-*.wandb"))
    theirs = read_wandb_file(wb_file)
    ledger = labledger.open_ledger(tmp_path / "ours" / ".labledger")
    (info,) = ledger.runs()
    view = ledger.run(info.id)
    ours = list(view.scalars())
    assert len(ours) == len(theirs.history) == 16
    for mine, row in zip(ours, theirs.history, strict=True):
        assert mine["step"] == row["_step"]
        keys = {k for k in row if not k.startswith("_")}
        assert keys == set(mine) - {"step", "time"}
        for k in keys:
            assert math.isclose(mine[k], row[k], rel_tol=1e-9), (mine["step"], k)
    assert view.config == theirs.config
    assert theirs.run["project"] == view.group == "tiny" and view.tags == theirs.run["tags"] == ["t1"]
    assert theirs.summary["best"] == view.summary["headline"]["best"]
    assert theirs.summary["val/loss"]["min"] == view.summary["headline"]["val/loss.min"]
    last = view.summary["last"]
    assert all(math.isclose(last[k], theirs.summary[k]) for k in ("train.loss", "lr", "epoch", "final", "after"))


# -- HF Trainer with report_to="wandb" -----------------------------------------------------------------
@pytest.mark.slow
def test_hf_trainer_reports_to_labledger_wandb(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WANDB_PROJECT", "hf")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LABLEDGER_DIR", str(tmp_path / "ledger"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = transformers.BertConfig(
        vocab_size=20,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = transformers.BertForSequenceClassification(config)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            ids = torch.tensor([1 + (i * 7 + j) % 19 for j in range(8)])
            return {"input_ids": ids, "attention_mask": torch.ones(8, dtype=torch.long), "labels": i % 2}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to="wandb",
        run_name="tiny-bert",
        per_device_train_batch_size=4,
        num_train_epochs=2,
        logging_steps=2,
        save_strategy="no",
        eval_strategy="epoch",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Data(), eval_dataset=Data())
    assert any(type(cb).__name__ == "WandbCallback" for cb in trainer.callback_handler.callbacks)
    trainer.train()
    assert wandb.run is not None  # Trainer leaves finishing to wandb.finish() or the interpreter's exit
    wandb.finish()
    ledger = labledger.open_ledger(tmp_path / "ledger")
    (info,) = ledger.runs()
    view = ledger.run(info.id)
    assert view.name == "tiny-bert" and view.group == "hf" and view.status == "finished"
    assert view.config["learning_rate"] == args.learning_rate and view.config["hidden_size"] == 16
    assert view.config["model/num_parameters"] == model.num_parameters()
    rows = list(view.scalars())
    losses = [r for r in rows if "train/loss" in r]
    assert [r["train/global_step"] for r in losses] == [2, 4, 6, 8]
    evals = [r for r in rows if "eval/loss" in r]
    assert [r["train/global_step"] for r in evals] == [4, 8]
    assert all(math.isfinite(r["train/loss"]) for r in losses)
    assert "train_loss" in view.summary["headline"]
    defs = json.loads((view.dir / "files" / "wandb-metrics.json").read_text())
    assert defs[1] == {**defs[1], "name": "*", "step_metric": "train/global_step", "step_sync": True}
