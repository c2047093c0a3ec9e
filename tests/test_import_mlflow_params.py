"""MLflow params arrive as text: numbers are imported as numbers, the text kept, so a number test
such as ``config.lr < 0.05`` finds them (#43)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import labledger
from labledger.importers import import_path

pytest.importorskip("mlflow")
ROOT = Path(__file__).resolve().parents[1]


def _store(path: Path, params: dict[str, dict[str, object]]) -> str:
    """An MLflow SQLite store written by MLflow's own client: one finished run per entry, its params
    logged as MLflow logs a Python value (``str(value)``)."""
    from mlflow.tracking import MlflowClient

    path.mkdir()
    uri = f"sqlite:///{path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("e", artifact_location=(path / "artifacts").as_uri())
    for name, values in params.items():
        r = client.create_run(exp, run_name=name)
        for k, v in values.items():
            client.log_param(r.info.run_id, k, v)
        client.set_terminated(r.info.run_id, "FINISHED")
    return uri


@pytest.mark.slow
def test_numeric_params_are_numbers_and_their_text_is_kept(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    uri = _store(
        tmp_path / "store",
        {
            "small": {"lr": 0.01, "layers": 4, "opt": "adam", "wd": "0.010"},
            "big": {"lr": 0.1, "layers": 8, "opt": "sgd", "wd": "0.100"},
        },
    )
    import_path(tmp_path / "store", tmp_path / "ledger")
    book = labledger.open_ledger(tmp_path / "ledger")
    client = MlflowClient(tracking_uri=uri)
    for info in book.runs():
        view = book.run(info.id)
        theirs = client.get_run(view.meta["mlflow"]["run_id"]).data.params  # MLflow's reader: all text
        assert view.meta["mlflow"]["params"] == theirs
        assert {k: str(v) for k, v in view.config.items()} == theirs
        assert isinstance(view.config["lr"], float) and isinstance(view.config["layers"], int)
        assert view.config["opt"] in ("adam", "sgd") and view.config["wd"] in (
            "0.010",
            "0.100",
        )  # not how Python writes a number: text
    assert [r.name for r in book.runs(where="config.lr < 0.05")] == ["small"]
    assert [r.name for r in book.runs(where="config.layers >= 8")] == ["big"]
    assert [r.name for r in book.runs(where="config.wd = '0.010'")] == ["small"]  # text compares with text

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [
        sys.executable,
        "-m",
        "labledger",
        "runs",
        "--ledger",
        str(tmp_path / "ledger"),
        "--where",
        "config.lr < 0.05",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "small" in done.stdout and "big" not in done.stdout, done.stderr
