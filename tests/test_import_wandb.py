"""`labledger import --format wandb`: W&B offline runs written by real wandb in the test (#14)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import labledger
from labledger.errors import ImportSourceError
from labledger.importers import detect_format, import_path
from labledger.wandb.records import iter_chunks, read_wandb_file, regroup

pytest.importorskip("wandb.proto.wandb_internal_pb2")
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "wandb_scripts" / "media_run.py"


@pytest.fixture(scope="module")
def wandb_dirs(tmp_path_factory):
    """Two W&B offline runs written by real wandb: one finished, one finished with exit code 3."""
    out = {}
    for kind in ("ok", "fail"):
        d = tmp_path_factory.mktemp(kind)
        env = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
        args = [sys.executable, str(SCRIPT), str(d)] + (["fail"] if kind == "fail" else [])
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, cwd=d)
        assert done.returncode == 0, done.stderr[-2000:]
        out[kind] = d
    return out


@pytest.mark.slow
def test_reader_reads_what_wandb_wrote(wandb_dirs):
    (path,) = (wandb_dirs["ok"] / "wandb").glob("offline-run-*/run-*.wandb")
    data = read_wandb_file(path)
    assert data.run["project"] == "imp" and data.run["name"] == "media" and data.run["tags"] == ["x"]
    assert data.config == {"lr": 0.5, "opt": {"name": "sgd"}}
    assert [r["_step"] for r in data.history] == [0, 1, 2, 5]
    assert [r["loss"] for r in data.history[:3]] == [1.0, 0.5, 1 / 3]
    assert data.history[3]["img"]["_type"] == "image-file" and data.exit_code == 0
    assert data.summary["best"] == 0.25


@pytest.mark.slow
def test_import_wandb_offline_run(wandb_dirs, tmp_path):
    src = wandb_dirs["ok"]
    assert detect_format(src) == "wandb"
    result = import_path(src, tmp_path / "ledger")
    assert result.format == "wandb" and len(result.runs) == 1
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    assert view.name == "media" and view.group == "imp" and view.tags == ["x"] and view.status == "finished"
    assert view.config == {"lr": 0.5, "opt": {"name": "sgd"}}
    (path,) = (src / "wandb").glob("offline-run-*/run-*.wandb")
    theirs = read_wandb_file(path).history
    rows = list(view.scalars())
    assert [r["step"] for r in rows] == [0, 1, 2]
    for mine, row in zip(rows, theirs, strict=False):
        assert mine["time"] == row["_timestamp"] and mine["loss"] == row["loss"]
        assert mine["eval.acc"] == row["eval.acc"] and mine["step_"] == row["step"]  # `step` renamed
    assert view.summary["headline"]["best"] == 0.25
    files = view.files()
    (png,) = [f for f in files if f.endswith(".png")]
    assert png.startswith("media/img/5-")
    original = next((path.parent / "files" / "media" / "images").glob("*.png"))
    assert hashlib.sha256(view.file_path(png).read_bytes()).digest() == hashlib.sha256(original.read_bytes()).digest()
    table = [json.loads(x) for x in view.file_path("tables/tab/5.jsonl").read_text().splitlines()]
    assert table == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    notes = [n["text"] for n in view.notes()]
    assert notes[0] == "from W&B" and any("1 histogram value(s)" in n for n in notes)
    assert view.meta["imported_from"]["format"] == "wandb"
    with pytest.raises(ImportSourceError, match="--again"):
        import_path(src, tmp_path / "ledger")


@pytest.mark.slow
def test_import_failed_wandb_run_and_cli(wandb_dirs, tmp_path):
    src = wandb_dirs["fail"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "labledger", "import", str(src), "--format", "wandb", "--ledger", str(tmp_path / "l")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(wandb, sha256" in done.stdout
    (info,) = labledger.open_ledger(tmp_path / "l").runs()
    assert info.status == "failed" and info.error == "exit code 3"


def test_chunks_across_blocks_and_a_torn_tail():
    import struct

    from labledger.wandb.records import BLOCK, HEADER

    big = b"x" * (BLOCK + 100)  # spans two blocks: FIRST + LAST
    first_len = BLOCK - len(HEADER) - 7
    blob = HEADER + struct.pack("<IHB", 0, first_len, 2) + big[:first_len]
    rest = big[first_len:]
    blob += struct.pack("<IHB", 0, len(rest), 4) + rest
    blob += struct.pack("<IHB", 0, 50, 1) + b"torn"
    assert list(iter_chunks(blob)) == [big]
    with pytest.raises(ImportSourceError, match="not a W&B run file"):
        list(iter_chunks(b"nope"))


def test_regroup_keeps_plain_nested_keys():
    assert regroup({"eval.acc": 1.0}) == {"eval.acc": 1.0}
