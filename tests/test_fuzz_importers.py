"""Fuzzing the TensorBoard, MLflow and report importers, each on its own (#17; the corpus and its
oracle: fuzz_importers.py). Every mutated file must import (exit 0) or fail with a one-line
``LedgerError`` (exit 1): no traceback, no signal, nothing over 30 s. A seeded sample runs in the
default suite (MLflow's behind slow too: creating its store costs seconds); the big corpus (minutes
of CPU) is marked ``scale``: ``pytest -m scale``, a CI step of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import labledger

HERE = Path(__file__).resolve().parent
SRC = str(Path(labledger.__file__).resolve().parents[1])


def fuzz(importer: str, cases: int, seed: int) -> dict:
    res = subprocess.run(
        [
            sys.executable,
            str(HERE / "fuzz_importers.py"),
            "--importer",
            importer,
            "--cases",
            str(cases),
            "--seed",
            str(seed),
        ],
        capture_output=True,
        text=True,
        timeout=60 + 35 * cases,
        env={**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1"},
    )
    assert res.returncode == 0, (
        f"the fuzz worker died (exit {res.returncode}: a signal if negative)\n{res.stderr[-3000:]}"
    )
    report = json.loads(res.stdout)
    assert set(report["counts"]) <= {"exit0", "exit1"}, report["failures"]
    assert sum(report["counts"].values()) == cases
    return report


@pytest.mark.parametrize(
    ("importer", "cases"),
    [
        ("tensorboard", 4),
        ("report", 4),
        # MLflow's client takes seconds of CPU to create the seed store (its schema migrations)
        pytest.param("mlflow", 2, marks=pytest.mark.slow),
    ],
)
def test_fuzz_sample_each_importer_fails_cleanly_or_imports(importer, cases):
    pytest.importorskip({"tensorboard": "tensorboard", "mlflow": "mlflow", "report": "orjson"}[importer])
    fuzz(importer, cases, seed=7)


@pytest.mark.scale
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("importer", "cases"), [("tensorboard", 300), ("report", 300), ("mlflow", 60)])
def test_fuzz_corpus_each_importer_fails_cleanly_or_imports(importer, cases):
    pytest.importorskip({"tensorboard": "tensorboard", "mlflow": "mlflow", "report": "orjson"}[importer])
    report = fuzz(importer, cases, seed=0)
    # the corpus reaches the error paths: a one-line error, or (TensorBoard: a record failing its
    # CRC ends the file, as in TensorBoard's reader) the damage skipped with a note
    assert report["counts"].get("exit1", 0) + report["noted"] > 0, report
