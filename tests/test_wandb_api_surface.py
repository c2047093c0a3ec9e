"""labledger.wandb against the real wandb's API (#43): every public name of the installed ``wandb``
package, of ``wandb.Run`` and of ``wandb.plot`` either works or raises ``UnsupportedError`` saying what
to do instead; the calls real wandb accepts offline work and store what they are given."""

from __future__ import annotations

import glob
import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import labledger
import labledger.wandb as ours

real = pytest.importorskip("wandb")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_open_run():
    yield
    if ours.run is not None:
        ours.finish()


def _init(tmp_path, **kwargs):
    kwargs.setdefault("system_metrics", False)
    return ours.init(dir=str(tmp_path), **kwargs)


def _view(tmp_path, run_id):
    return labledger.open_ledger(tmp_path / ".labledger").run(run_id)


def _media(view):
    path = view.dir / "media.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _public(obj) -> list[str]:
    names = {n for n in dir(obj) if not n.startswith("_")}
    names |= {n for n in getattr(obj, "__all__", ()) if not n.startswith("_")}
    return sorted(names)


def _check_unsupported(exc: BaseException, name: str) -> None:
    text = str(exc)
    assert isinstance(exc, ours.UnsupportedError) and isinstance(exc, labledger.LedgerError), name
    assert "not supported by labledger.wandb: " in text and "\n" not in text, text
    assert len(text.split("not supported by labledger.wandb: ", 1)[1]) > 10, text  # says what to do


def _classify(owner, name: str, theirs, call_args=()) -> str:
    """'works' or 'unsupported' for ``owner.name``; fails the test on anything else (an AttributeError)."""
    try:
        mine = getattr(owner, name)
    except ours.UnsupportedError as exc:
        _check_unsupported(exc, name)
        return "unsupported"
    except AttributeError as exc:
        pytest.fail(f"{name}: real wandb has it, labledger.wandb raises AttributeError: {exc}")
    if getattr(mine, "unsupported", None) is True:  # marked by labledger.wandb._run.unsupported
        with pytest.raises(ours.UnsupportedError) as info:
            mine(*call_args)
        _check_unsupported(info.value, name)
        return "unsupported"
    # what works has the real thing's shape: a module for a module, a class for a class, a callable for a callable
    if isinstance(theirs, types.ModuleType):
        assert isinstance(mine, types.ModuleType), name
    elif inspect.isclass(theirs) and not isinstance(theirs, type(ours.AlertLevel)):
        assert inspect.isclass(mine), name
    elif callable(theirs):
        assert callable(mine), name
    return "works"


def test_every_public_name_of_the_real_wandb_package_works_or_raises_unsupported_error():
    assert real is not ours and real.__name__ == "wandb" and "labledger" not in real.__file__
    names = _public(real)
    assert len(names) >= 80  # wandb 0.31 has 92
    seen: dict[str, list[str]] = {"works": [], "unsupported": []}
    for name in names:
        seen[_classify(ours, name, getattr(real, name, None))].append(name)
    print(
        f"\nwandb {real.__version__}: {len(names)} public names, {len(seen['works'])} work, "
        f"{len(seen['unsupported'])} raise UnsupportedError: {', '.join(seen['unsupported'])}"
    )
    # the calls the issue names work (they crashed with AttributeError)
    assert {"require", "log_model", "mark_preempting", "plot", "plot_table", "sweep", "agent", "Run"} <= set(
        seen["works"]
    )
    assert {"Api", "keras", "apis", "use_model"} <= set(seen["unsupported"])


def test_unsupported_names_are_absent_to_probes():
    assert not hasattr(ours, "keras") and getattr(ours, "apis", None) is None  # an AttributeError too
    with pytest.raises(ours.UnsupportedError, match="labledger import"):
        _ = ours.tensorboard
    with pytest.raises(AttributeError, match="docs/wandb.md"):
        _ = ours.no_such_name  # a name W&B does not have either


def test_every_public_name_of_the_real_run_class_works_or_raises_unsupported_error(tmp_path):
    from wandb.sdk.wandb_run import Run as RealRun

    names = _public(RealRun)
    assert len(names) >= 40
    run = _init(tmp_path, project="surface")
    seen: dict[str, list[str]] = {"works": [], "unsupported": []}
    for name in names:
        theirs = inspect.getattr_static(RealRun, name)
        kind = _classify(run, name, None, call_args=("x",))
        seen[kind].append(name)
        if kind == "works":  # a property stays a value, a method stays a method
            assert callable(getattr(run, name)) == (not isinstance(theirs, property)), name
    print(
        f"\nwandb.Run: {len(names)} public names, {len(seen['works'])} work, "
        f"{len(seen['unsupported'])} raise UnsupportedError: {', '.join(seen['unsupported'])}"
    )
    assert {"log_code", "log_model", "mark_preempting", "resumed", "start_time", "sweep_id", "settings"} <= set(
        seen["works"]
    )
    assert {"disabled", "project_url"} <= set(seen["works"])


def test_every_public_name_of_the_real_wandb_plot_works_or_raises_unsupported_error():
    names = _public(real.plot)
    seen: dict[str, list[str]] = {"works": [], "unsupported": []}
    for name in names:
        seen[_classify(ours.plot, name, getattr(real.plot, name))].append(name)
    print(
        f"\nwandb.plot: {len(names)} public names, {len(seen['works'])} work, "
        f"{len(seen['unsupported'])} raise UnsupportedError: {', '.join(seen['unsupported'])}"
    )
    assert set(real.plot.__all__) <= set(seen["works"])  # every chart function works


# -- the calls the issue names -----------------------------------------------------------------------
def test_require_accepts_w_and_b_feature_flags_and_refuses_unknown_ones():
    assert ours.require("service") is None and ours.require(["core", "service@beta"]) is None
    assert ours.require() is None
    with pytest.raises(ours.UnsupportedError, match="remove the call"):
        ours.require("teleport")


def test_run_attributes_real_wandb_has_offline(tmp_path):
    run = _init(tmp_path, project="p", settings=ours.Settings(silent=True))
    view_meta = json.loads((Path(run.dir) / "run.json").read_text())
    assert run.resumed is False and run.disabled is False and run.starting_step == 0
    assert run.start_time == view_meta["started"] and run.sweep_id is None
    assert run.project_url is None and run.sweep_url is None  # as for a W&B offline run
    settings = run.settings
    assert settings.silent is True and settings.run_id == run.id and settings.project == "p"
    assert settings.mode == "offline" and settings.files_dir == run.dir
    ours.config.update({"lr": 0.5})
    static = run.config_static
    assert static.lr == 0.5 and static["lr"] == 0.5
    with pytest.raises(ours.Error, match="read-only"):
        static.lr = 1.0
    assert run.status().sync_items_pending == 0 and run.display() is False
    assert run.url in run.to_html() and run.sync_dir == run.dir
    assert isinstance(run, ours.Run)
    disabled = ours.init(mode="disabled", reinit="create_new")
    assert disabled.disabled is True and isinstance(disabled, ours.sdk.lib.RunDisabled)
    disabled.log_model(str(tmp_path / "missing.pt"))  # a disabled run accepts everything and writes nothing
    disabled.log_code()
    disabled.mark_preempting()
    disabled.finish()


def test_log_code_stores_the_code_files_as_an_artifact(tmp_path):
    code = tmp_path / "proj"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("print('train')\n")
    (code / "pkg" / "model.py").write_text("W = 1\n")
    (code / "requirements.txt").write_text("torch\n")
    (code / "notes.md").write_text("not code\n")
    (code / "wandb").mkdir()
    (code / "wandb" / "debug.py").write_text("# W&B's own folder, left out\n")
    (code / ".venv").mkdir()
    (code / ".venv" / "site.py").write_text("# a virtualenv, not walked\n")
    run = _init(tmp_path, project="p")
    art = run.log_code(str(code))
    assert art is not None and art.type == "code" and art.name.startswith("source-p-")
    only_model = run.log_code(str(code), name="just-model", include_fn=lambda path, root: path.endswith("model.py"))
    assert [name for name, _ in only_model.files] == ["pkg/model.py"]
    assert run.log_code(str(tmp_path / "proj" / "pkg"), exclude_fn=lambda path: True) is None  # nothing matched
    ours.finish()
    view = _view(tmp_path, run.id)
    arts = [m for m in _media(view) if m["kind"] == "artifact"]
    stored = sorted(f["path"].split("/v0/", 1)[1] for f in arts[0]["files"])
    assert stored == ["pkg/model.py", "requirements.txt", "train.py"] and arts[0]["type"] == "code"
    for f in arts[0]["files"]:
        rel = f["path"].split("/v0/", 1)[1]
        assert (view.dir / f["path"]).read_bytes() == (code / rel).read_bytes()
    assert arts[1]["name"] == "just-model"


def test_log_model_stores_the_file_as_a_model_artifact(tmp_path):
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"\x00weights")
    run = _init(tmp_path)
    ours.log_model(str(weights))
    run.log_model(str(weights), name="best", aliases=["best"])
    with pytest.raises(ours.UnsupportedError, match="download the file"):
        run.log_model("s3://bucket/model.pt")
    with pytest.raises(ours.Error, match="does not exist"):
        run.log_model(str(tmp_path / "missing.pt"))
    ours.finish()
    view = _view(tmp_path, run.id)
    first, second = _media(view)
    assert first["type"] == "model" and first["name"] == f"run-{run.id}-model.pt" and first["aliases"] == ["latest"]
    assert second["name"] == "best" and second["aliases"] == ["best"]
    assert (view.dir / first["files"][0]["path"]).read_bytes() == b"\x00weights"


def test_mark_preempting_notes_the_run(tmp_path):
    run = _init(tmp_path)
    ours.log({"x": 1.0})
    ours.mark_preempting()
    assert run.preempting is True
    ours.finish()
    notes = [n["text"] for n in _view(tmp_path, run.id).notes()]
    assert notes == ["wandb.mark_preempting at step 1: this run expected to be preempted"]


def test_pin_config_keys_and_write_logs_are_stored(tmp_path):
    run = _init(tmp_path)
    ours.pin_config_keys(["lr", "model"])
    run.write_logs("epoch 1 done")
    run.write_logs("epoch 2 done\n")
    ours.finish()
    run.write_logs("after finish: ignored, as in W&B")
    view = _view(tmp_path, run.id)
    assert _media(view)[0]["keys"] == ["lr", "model"]
    assert (view.dir / "files" / "output.log").read_text() == "epoch 1 done\nepoch 2 done\n"


# -- wandb.plot: the same tables real wandb builds, stored when logged ---------------------------------
def _same_chart(mine, theirs):
    assert mine.spec.spec_name == theirs.spec.spec_name
    assert mine.spec.fields == theirs.spec.fields and mine.spec.string_fields == theirs.spec.string_fields
    assert mine.table.columns == list(theirs.table.columns)
    assert len(mine.table.data) == len(theirs.table.data)
    for a, b in zip(mine.table.data, theirs.table.data, strict=True):
        assert (
            [x.item() if hasattr(x, "item") else x for x in b] == pytest.approx(a)
            if all(isinstance(v, (int, float)) for v in a)
            else [str(x) for x in a] == [str(x.item() if hasattr(x, "item") else x) for x in b]
        )


def test_plot_functions_build_the_tables_real_wandb_builds():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 40)
    probas = rng.dirichlet([1, 1, 1], 40)
    preds = probas.argmax(axis=1)
    names = ["cat", "dog", "fox"]
    table = [[i, i * i, "a" if i % 2 else "b"] for i in range(5)]
    cases = [
        ("line", lambda w: w.plot.line(w.Table(columns=["x", "y", "s"], data=table), "x", "y", stroke="s", title="t")),
        ("scatter", lambda w: w.plot.scatter(w.Table(columns=["x", "y", "s"], data=table), "x", "y")),
        ("bar", lambda w: w.plot.bar(w.Table(columns=["x", "y", "s"], data=table), "s", "y")),
        ("histogram", lambda w: w.plot.histogram(w.Table(columns=["x", "y", "s"], data=table), "y")),
        ("line_series", lambda w: w.plot.line_series([0, 1, 2], [[1, 2, 3], [3, 2, 1]], keys=["up", "down"])),
        ("cm preds", lambda w: w.plot.confusion_matrix(y_true=truth.tolist(), preds=preds.tolist(), class_names=names)),
        ("cm probs", lambda w: w.plot.confusion_matrix(probs=probas.tolist(), y_true=truth.tolist())),
        ("roc", lambda w: w.plot.roc_curve(truth, probas, labels=names)),
        ("pr", lambda w: w.plot.pr_curve(truth, probas, labels=names)),
    ]
    for label, make in cases:
        mine, theirs = make(ours), make(real)
        try:
            _same_chart(mine, theirs)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from None


def test_logged_charts_are_stored_with_their_table(tmp_path):
    run = _init(tmp_path)
    table = ours.Table(columns=["epoch", "acc"], data=[[0, 0.5], [1, 0.75]])
    ours.log({"acc_curve": ours.plot.line(table, "epoch", "acc", title="accuracy")})
    ours.log({"cm": ours.plot.confusion_matrix(y_true=[0, 1, 1, 0], preds=[0, 1, 0, 0], class_names=["no", "yes"])})
    ours.log({"custom": ours.plot_table("my/spec", table, {"x": "epoch"}), "viz": ours.visualize("v/x", table)})
    with pytest.raises(ours.Error, match="wandb.Table"):
        ours.plot.line([[0, 1]], "x", "y")
    ours.finish()
    view = _view(tmp_path, run.id)
    charts = {m["key"]: m for m in _media(view)}
    line = charts["acc_curve"]
    assert line["kind"] == "chart" and line["chart"] == "wandb/line/v0" and line["step"] == 0
    assert line["fields"] == {"x": "epoch", "y": "acc", "stroke": None} and line["string_fields"] == {
        "title": "accuracy"
    }
    assert line["table"] == "files/tables/acc_curve_table/0.jsonl" and line["rows"] == 2
    rows = [json.loads(x) for x in (view.dir / line["table"]).read_text().splitlines()]
    assert rows == [{"epoch": 0, "acc": 0.5}, {"epoch": 1, "acc": 0.75}]
    cm = [json.loads(x) for x in (view.dir / charts["cm"]["table"]).read_text().splitlines()]
    assert {(r["Actual"], r["Predicted"]): r["nPredictions"] for r in cm} == {
        ("no", "no"): 2.0,
        ("no", "yes"): 0.0,
        ("yes", "no"): 1.0,
        ("yes", "yes"): 1.0,
    }
    assert charts["custom"]["chart"] == "my/spec" and charts["viz"]["chart"] == "v/x"


def test_html_pages_are_stored_as_files(tmp_path):
    page = tmp_path / "report.html"
    page.write_text("<h1>from a file</h1>")
    run = _init(tmp_path)
    ours.log({"report": ours.Html(str(page)), "pages": [ours.Html("<p>a</p>"), ours.Html("<p>b</p>")]})
    with pytest.raises(ours.MediaError, match="HTML text"):
        ours.Html(42)
    ours.finish()
    view = _view(tmp_path, run.id)
    media = {m["key"]: m for m in _media(view)}
    assert media["report"]["kind"] == "html"
    assert (view.dir / media["report"]["files"][0]["path"]).read_text() == "<h1>from a file</h1>"
    assert [(view.dir / f["path"]).read_text() for f in media["pages"]["files"]] == ["<p>a</p>", "<p>b</p>"]


# -- values, config, messages --------------------------------------------------------------------------
def test_one_element_tensors_and_arrays_log_as_scalars(tmp_path):
    torch = pytest.importorskip("torch")
    run = _init(tmp_path)
    ours.log({"t0": torch.tensor(1.5), "t1": torch.tensor([2.5]), "t2": torch.tensor([[3.5]]), "n1": np.array([4.5])})
    ours.log({"loss": torch.tensor([0.25])}, step=3)
    ours.summary["best"] = torch.tensor([0.125])
    ours.log({"weights": torch.arange(10.0)})  # more than one value: a histogram, as before
    ours.finish()
    view = _view(tmp_path, run.id)
    rows = [{k: v for k, v in r.items() if k != "time"} for r in view.scalars()]
    assert rows == [{"step": 0, "t0": 1.5, "t1": 2.5, "t2": 3.5, "n1": 4.5}, {"step": 3, "loss": 0.25}]
    assert view.summary["headline"]["best"] == 0.125
    assert [m["kind"] for m in _media(view)] == ["histogram"]


def test_config_include_and_exclude_keys(tmp_path):
    config = {"lr": 0.1, "seed": 3, "data_dir": "/secret/path", "debug": True}
    run = _init(tmp_path, config=config, config_exclude_keys=["data_dir", "debug"])
    ours.finish()
    assert _view(tmp_path, run.id).config == {"lr": 0.1, "seed": 3}
    run = _init(tmp_path, config=config, config_include_keys=["lr"])
    ours.finish()
    assert _view(tmp_path, run.id).config == {"lr": 0.1}
    assert ours.helper.parse_config(config, include=("seed",)) == {"seed": 3}


def test_arguments_whose_data_is_not_mirrored_say_so(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="labledger.wandb"):
        run = _init(tmp_path, sync_tensorboard=True, anonymous="allow")
    assert [r.getMessage() for r in caplog.records] == [
        "labledger.wandb: wandb.init(sync_tensorboard=True): TensorBoard's logs are not copied into this run; "
        "import them as a run with `labledger import LOGDIR`"
    ]
    ours.finish()
    assert _view(tmp_path, run.id).meta["wandb"]["ignored_arguments"] == ["anonymous", "sync_tensorboard"]


def test_save_code_stores_the_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import labledger.wandb as wandb\nwandb.init(save_code=True, system_metrics=False)\nwandb.finish()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "LABLEDGER_DIR": str(tmp_path / "ledger")}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    (info,) = labledger.open_ledger(tmp_path / "ledger").runs()
    view = labledger.open_ledger(tmp_path / "ledger").run(info.id)
    assert (view.dir / "files" / "code" / "train.py").read_text() == script.read_text()


def test_warnings_print_as_one_line_without_a_source_path(tmp_path):
    code = (
        "import labledger.wandb as wandb\n"
        f"wandb.init(dir={str(tmp_path)!r}, system_metrics=False)\n"
        "wandb.log({'x': 1.0}, step=5)\n"
        "wandb.log({'x': 2.0}, step=2)\n"
        "wandb.save('no-such-file-*.txt')\n"
        "wandb.finish()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "labledger.wandb: step 2 < current step 5: data ignored (as W&B does)",
        "labledger.wandb: wandb.save: no file matches 'no-such-file-*.txt'; nothing stored",
    ]


# -- a script using those calls, unchanged, beside real wandb offline ---------------------------------
def _run_calls_script(out: Path, *, real_wandb: bool) -> dict:
    script = ROOT / "tests" / "wandb_scripts" / "offline_calls.py"
    env = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT / "src")}
    if real_wandb:
        cmd = [sys.executable, str(script), str(out)]
    else:
        shim = (
            "import runpy, sys, labledger.wandb as w; sys.modules['wandb'] = w; "
            f"sys.argv = ['offline_calls.py', {str(out)!r}]; runpy.run_path({str(script)!r}, run_name='__main__')"
        )
        cmd = [sys.executable, "-c", shim]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=100, cwd=out)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_script_using_the_offline_calls_runs_unchanged_beside_real_wandb(tmp_path):
    from labledger.wandb.records import read_wandb_file

    (tmp_path / "real").mkdir()
    (tmp_path / "ours").mkdir()
    theirs = _run_calls_script(tmp_path / "real", real_wandb=True)
    mine = _run_calls_script(tmp_path / "ours", real_wandb=False)
    theirs.pop("id"), mine.pop("id")
    assert mine == theirs  # resumed, disabled, sweep_id, project_url, start_time, settings, config without data_dir
    (wb_file,) = glob.glob(str(tmp_path / "real" / "wandb" / "offline-run-*" / "run-*.wandb"))
    (row,) = read_wandb_file(wb_file).history
    ledger = labledger.open_ledger(tmp_path / "ours" / ".labledger")
    (info,) = ledger.runs()
    view = ledger.run(info.id)
    assert [r["loss"] for r in view.scalars()] == [row["loss"]] == [0.25]  # the 1-element tensor, a scalar in both
    media = {m["key"]: m for m in _media(view)}
    for key in ("acc_curve", "cm"):  # the chart tables hold the rows real wandb stored
        (real_table,) = glob.glob(
            str(tmp_path / "real" / "wandb" / "offline-run-*" / "files" / "media" / "table" / f"{key}_table_*.json")
        )
        expected = json.loads(Path(real_table).read_text())
        rows = [json.loads(x) for x in (view.dir / media[key]["table"]).read_text().splitlines()]
        assert [list(r.values()) for r in rows] == expected["data"] and media[key]["columns"] == expected["columns"]
    assert [f["path"].rsplit("/", 1)[-1] for f in media["tiny-model"]["files"]] == ["model.pt"]
    assert media["tiny-model"]["type"] == "model"
    (code,) = [m for m in media.values() if m["kind"] == "artifact" and m["type"] == "code"]
    assert [f["path"].rsplit("/", 1)[-1] for f in code["files"]] == ["train.py"]
    assert [n["text"] for n in view.notes()] == ["wandb.mark_preempting at step 0: this run expected to be preempted"]
