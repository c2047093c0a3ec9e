"""MLflow 3 logged models (``mlflow.pyfunc.log_model(name=...)``: MLmodel, files, ``model_id``) and
nested runs (``mlflow.parentRunId``), written by real MLflow: the models are kept (named, hashed,
copied with ``--copy``), the nesting is lineage, and a numeric test on a text param says so (#43)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import labledger
from labledger.analysis.lineage import lineage, trajectory
from labledger.cli import main
from labledger.importers import import_path

pytest.importorskip("mlflow")

SCRIPT = """
import sys
from pathlib import Path

import mlflow

d = Path(sys.argv[1])
mlflow.set_tracking_uri(f"sqlite:///{d}/mlflow.db")
exp = mlflow.create_experiment("nest", artifact_location=(d / "artifacts").as_uri())
mlflow.set_experiment(experiment_id=exp)


class Scale(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input, params=None):
        return model_input


with mlflow.start_run(run_name="sweep"):
    mlflow.log_param("kind", "sweep")
    for lr in (0.01, 0.1):
        with mlflow.start_run(run_name=f"lr{lr}", nested=True):
            mlflow.log_param("lr", lr)
            mlflow.log_param("opt", "adam")
            mlflow.log_metric("loss", 1 - lr, step=1)
            mlflow.pyfunc.log_model(name="model", python_model=Scale(), params={"scale": lr})
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("mlflow")
    env = {**os.environ, "MLFLOW_TRACKING_URI": "", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(d)], cwd=d, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return d


def _client(store: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")


@pytest.mark.slow
def test_logged_models_are_kept_and_copied_with_copy(store, tmp_path):
    import mlflow

    client = _client(store)
    exp = client.get_experiment_by_name("nest")
    theirs = {m.source_run_id: m for m in client.search_logged_models(experiment_ids=[exp.experiment_id])}
    assert len(theirs) == 2
    import_path(store, tmp_path / "L", copy=True)
    book = labledger.open_ledger(tmp_path / "L")
    seen = 0
    for info in book.runs():
        view = book.run(info.id)
        model = theirs.get(view.meta["mlflow"]["run_id"])
        if model is None:
            assert "logged_models" not in view.meta["mlflow"]
            continue
        seen += 1
        (rec,) = view.meta["mlflow"]["logged_models"]
        assert (rec["model_id"], rec["name"], rec["params"]) == (model.model_id, model.name, model.params)
        assert rec["status"] == "READY" and rec["flavors"] == ["python_function"] and rec["copied"]
        # every file as MLflow's own artifact reader gives it, copied byte for byte
        got = Path(
            mlflow.artifacts.download_artifacts(
                artifact_uri=model.artifact_location, dst_path=str(tmp_path / model.model_id)
            )
        )
        files = sorted(p.relative_to(got).as_posix() for p in got.rglob("*") if p.is_file())
        assert [f["path"] for f in sorted(rec["files"], key=lambda f: f["path"])] == files
        assert "MLmodel" in files
        for f in rec["files"]:
            data = (got / f["path"]).read_bytes()
            assert f["sha256"] == hashlib.sha256(data).hexdigest() and f["size"] == len(data)
            assert view.file_path(f"models/{model.model_id}/{f['path']}").read_bytes() == data
        (note,) = [n["text"] for n in view.notes() if n["text"].startswith("MLflow logged models")]
        assert f"model ({model.model_id}, python_function, {len(files)} file(s), copied under files/models/" in note
        assert "logged_models" in view.meta["imported_from"]["fields"]
    assert seen == 2


@pytest.mark.slow
def test_logged_models_are_named_without_copy(store, tmp_path):
    import_path(store, tmp_path / "L")
    book = labledger.open_ledger(tmp_path / "L")
    (view,) = [book.run(i.id) for i in book.runs() if i.name.endswith("lr0.1")]
    (rec,) = view.meta["mlflow"]["logged_models"]
    assert not rec["copied"] and not any(f.startswith("models/") for f in view.files())
    (note,) = [n["text"] for n in view.notes() if n["text"].startswith("MLflow logged models")]
    assert f"at {rec['artifact_location']}" in note and rec["model_id"] in note


@pytest.mark.slow
def test_nested_runs_are_lineage_and_a_number_test_on_text_says_so(store, tmp_path):
    client = _client(store)
    import_path(store, tmp_path / "L")
    book = labledger.open_ledger(tmp_path / "L")
    by_mlflow = {book.run(i.id).meta["mlflow"]["run_id"]: i for i in book.runs()}
    parent = next(i for i in book.runs() if i.name.endswith("sweep"))
    graph = lineage(book, parent.id)
    edges = {(e["source"], e["target"], e["kind"]) for e in graph.edges}
    want = set()
    for mlflow_id, info in by_mlflow.items():
        theirs = client.get_run(mlflow_id).data.tags.get("mlflow.parentRunId")
        if theirs:
            want.add((f"run:{by_mlflow[theirs].id}", f"run:{info.id}", "parent"))
            assert book.run(info.id).meta["init"] == [{"kind": "run", "name": by_mlflow[theirs].id}]
    assert edges == want and len(want) == 2
    assert graph.order()[0] == f"run:{parent.id}"  # the parent first
    rows = trajectory(book, graph)
    assert [r["init"] for r in rows[1:]] == [f"nested in {parent.name}"] * 2
    child = next(i for i in book.runs() if i.name.endswith("lr0.1"))
    assert {n["run_id"] for n in lineage(book, child.id).runs()} == {parent.id, child.id}
    # params: numbers are numbers, text stays text, and a number test on text is an error that says so
    assert sorted(i.name.split("/")[-1] for i in book.runs(where="config.lr < 0.05")) == ["lr0.01"]
    r = CliRunner().invoke(main, ["runs", "--ledger", str(tmp_path / "L"), "--where", "config.opt < 0.05"])
    assert r.exit_code == 2 and "'config.opt' holds text, never numbers" in r.output
