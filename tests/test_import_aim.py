"""`labledger import --format aim`: Aim repositories written by real aim in the test (#14)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import labledger
from labledger.errors import ImportSourceError
from labledger.importers import detect_format, import_path
from labledger.importers.aim import context_key

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "tracker_scripts" / "aim_runs.py"


def _tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (logs and locks included)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_context_keys():
    assert context_key("loss", {}) == "loss"
    assert context_key("loss", {"subset": "val", "gpu": 0}) == "loss[gpu=0,subset=val]"


def test_not_an_aim_repository(tmp_path):
    (tmp_path / ".aim" / "meta" / "chunks").mkdir(parents=True)
    assert detect_format(tmp_path) == "aim"
    with pytest.raises(ImportSourceError, match=r"\.aim: an Aim repository without runs"):
        import_path(tmp_path, tmp_path / "ledger")


@pytest.mark.slow  # (importing aim takes seconds)
def test_an_old_repository_is_refused_untouched(tmp_path):
    pytest.importorskip("aim")
    (tmp_path / ".aim" / "meta" / "chunks" / "abc").mkdir(parents=True)
    (tmp_path / ".aim" / "meta" / "chunks" / "abc" / "CURRENT").write_text("x")
    with pytest.raises(ImportSourceError, match=r"written by an older Aim \(repository version 0\.0\)"):
        import_path(tmp_path / ".aim", tmp_path / "ledger")
    assert not (tmp_path / ".aim" / "run_metadata.sqlite").exists()


@pytest.fixture(scope="module")
def aim_repo(tmp_path_factory):
    pytest.importorskip("aim")
    d = tmp_path_factory.mktemp("aim")
    done = subprocess.run([sys.executable, str(SCRIPT), str(d)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return d


@pytest.mark.slow
def test_import_what_aim_wrote(aim_repo, tmp_path):
    hashes = json.loads((aim_repo / "hashes.json").read_text())
    before = _tree(aim_repo)
    assert detect_format(aim_repo) == "aim"
    result = import_path(aim_repo, tmp_path / "ledger")
    assert _tree(aim_repo) == before  # nothing written: no re-index, no WAL folded, no RocksDB LOG
    assert [r.name for r in result.runs] == ["first", "crashed"]
    book = labledger.open_ledger(tmp_path / "ledger")
    first, crashed = (book.run(i) for i in result.run_ids)
    assert (first.group, first.tags, first.status) == ("exp1", ["t1", "t2"], "finished")
    assert first.config == {"batch_size": 32, "hparams": {"lr": 0.1, "opt": {"name": "adam"}}}
    assert first.meta["aim"]["hash"] == hashes["first"]
    rows = list(first.scalars())
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4] and [r["epoch"] for r in rows] == [0, 0, 1, 1, 2]
    assert [r["loss[subset=train]"] for r in rows] == [1.0, 0.5, 1 / 3, 0.25, 0.2]
    assert [r["loss[subset=val]"] for r in rows] == [0.5, 1.5, 2.5, 3.5, 4.5]
    assert [r["acc"] for r in rows] == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert first.meta["started"] <= rows[0]["time"] <= rows[-1]["time"] <= first.meta["ended"]
    system = list(first.records("system"))
    assert len(system) >= 2 and {"cpu", "memory_percent", "time"} <= set(system[0])
    notes = [n["text"] for n in first.notes()]
    assert notes[0] == "from <Aim>" and any("1 aim.text sequence(s)" in n for n in notes)
    # the process ended without run.close(): read from the chunk's write-ahead log, imported as failed
    assert crashed.status == "failed" and "no end time" in crashed.meta["error"]
    assert [(r["step"], r["loss"]) for r in crashed.scalars()] == [(0, 2.0), (1, 1.0)]
    with pytest.raises(ImportSourceError, match="--again"):
        import_path(aim_repo, tmp_path / "ledger")


@pytest.mark.slow
def test_a_damaged_run_names_its_chunk_and_changes_nothing(aim_repo, tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(aim_repo, copy)
    hashes = json.loads((copy / "hashes.json").read_text())
    chunk = copy / ".aim" / "seqs" / "chunks" / hashes["first"]
    for f in chunk.iterdir():
        if f.name.startswith("MANIFEST"):
            f.write_bytes(b"garbage")
    with pytest.raises(ImportSourceError, match=rf"chunks/{hashes['first']}: cannot read this Aim run") as info:
        import_path(copy, tmp_path / "ledger")
    assert "\n" not in str(info.value)
    assert labledger.open_ledger(tmp_path / "ledger").runs() == []


@pytest.mark.slow
def test_cli_import_aim(aim_repo, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [
        sys.executable,
        "-m",
        "labledger",
        "import",
        str(aim_repo / ".aim"),
        "--format",
        "aim",
        "--ledger",
        str(tmp_path / "l"),
        "--json",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["format"] == "aim" and [r["counts"]["scalars"] for r in out["runs"]] == [5, 2]
