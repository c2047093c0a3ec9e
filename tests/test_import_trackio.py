"""`labledger import --format trackio`: Trackio projects written by real trackio in the test (#14)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import labledger
from labledger.errors import ImportSourceError, RecordError
from labledger.importers import detect_format, import_path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "tracker_scripts" / "trackio_runs.py"
SCHEMA = """
CREATE TABLE metrics (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, timestamp TEXT NOT NULL,
    run_name TEXT NOT NULL, step INTEGER NOT NULL, metrics TEXT NOT NULL);
CREATE TABLE configs (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, run_name TEXT NOT NULL,
    config TEXT NOT NULL, created_at TEXT NOT NULL, UNIQUE(run_id));
"""


def _project(path: Path, rows: list[tuple], config: str = '{"lr": 0.5, "_Group": "grp"}') -> Path:
    """A project file in Trackio's schema (the tables trackio 0.43's init_db makes)."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.execute(
        "INSERT INTO configs (run_id, run_name, config, created_at) VALUES ('r1', 'one', ?, ?)",
        (config, "2026-01-01T00:00:00+00:00"),
    )
    conn.executemany(
        "INSERT INTO metrics (run_id, timestamp, run_name, step, metrics) VALUES ('r1', ?, 'one', ?, ?)", rows
    )
    conn.commit()
    conn.close()
    return path


def test_import_a_project_file(tmp_path):
    db = _project(
        tmp_path / "p.db",
        [
            ("2026-01-01T00:00:01+00:00", 0, '{"loss": 2.0, "step": 1}'),
            ("2026-01-01T00:00:02+00:00", 3, '{"loss": "Infinity", "a": {"b": 1}}'),
        ],
    )
    before = sorted(os.listdir(tmp_path))
    assert detect_format(db) == "trackio" and detect_format(tmp_path) == "trackio"
    result = import_path(db, tmp_path / "ledger")
    assert sorted(os.listdir(tmp_path)) == sorted([*before, "ledger"])  # no -wal/-shm left beside it
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])  # ("Infinity" is stored as null)
    assert (view.name, view.group, view.config, view.status) == ("one", "grp", {"lr": 0.5}, "killed")
    assert view.meta["error"].endswith("its last metrics row is step 3 at 2026-01-01T00:00:02+00:00")
    rows = list(view.scalars())
    assert [r["step"] for r in rows] == [0, 3] and rows[0]["time"] == 1767225601.0
    assert rows[0]["loss"] == 2.0 and rows[0]["step_"] == 1 and math.isnan(rows[1]["loss"]) and rows[1]["a.b"] == 1
    assert view.meta["started"] == 1767225601.0 and view.meta["ended"] == 1767225602.0


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (("2026-01-01T00:00:01+00:00", 0, "{not json"), r"p\.db: .*metrics\[id=1\]\.metrics.*not valid JSON"),
        (("yesterday", 0, "{}"), r"metrics\[.*\]\.timestamp.*ISO timestamp"),
        (("2026-01-01T00:00:01+00:00", 0, "[1]"), r"metrics\[id=1\]\.metrics.*JSON object"),
        (("2026-01-01T00:00:01+00:00", "x", "{}"), r"metrics\[id=1\]\.step.*integer"),
    ],
)
def test_malformed_rows_name_file_row_and_field(tmp_path, row, match):
    db = _project(tmp_path / "p.db", [row])
    with pytest.raises(RecordError, match=match) as info:
        import_path(db, tmp_path / "ledger")
    assert "\n" not in str(info.value)
    assert labledger.open_ledger(tmp_path / "ledger").runs() == []


def test_not_a_trackio_file(tmp_path):
    (tmp_path / "x.db").write_bytes(b"SQLite format 3\x00" + b"\0" * 100)
    assert detect_format_safe(tmp_path / "x.db") != "trackio"
    with pytest.raises(ImportSourceError, match="no Trackio project files"):
        import_path(tmp_path / "x.db", tmp_path / "ledger", fmt="trackio")


def detect_format_safe(path: Path) -> str | None:
    try:
        return detect_format(path)
    except ImportSourceError:
        return None


@pytest.fixture(scope="module")
def trackio_dir(tmp_path_factory):
    pytest.importorskip("trackio")
    d = tmp_path_factory.mktemp("trackio")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRACKIO_DIR": str(d)}
    done = subprocess.run([sys.executable, str(SCRIPT), str(d)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return d


@pytest.mark.slow
def test_import_what_trackio_wrote(trackio_dir, tmp_path):
    theirs = json.loads((trackio_dir / "theirs.json").read_text())  # trackio's own reader (get_logs)
    result = import_path(trackio_dir, tmp_path / "ledger")
    assert result.format == "trackio" and [r.name for r in result.runs] == ["alpha", "beta"]
    book = labledger.open_ledger(tmp_path / "ledger")
    alpha, beta = (book.run(i) for i in result.run_ids)
    assert (alpha.group, beta.group) == ("g1", "proj")
    assert alpha.config == {"lr": 0.1, "opt": {"name": "adam"}} and beta.config["lr"] == 0.2
    for view in (alpha, beta):
        mine = list(view.scalars())
        rows = theirs[view.name]
        assert [r["step"] for r in mine] == [r["step"] for r in rows] == [0, 2, 4, 6, 8]
        for m, t in zip(mine, rows, strict=True):
            assert m["loss"] == t["loss"] and m["eval/acc"] == t["eval/acc"] and m["nested.a"] == t["nested"]["a"]
            assert m["time"] == pytest.approx(labledger_time(t["timestamp"]))
    assert math.isnan(list(alpha.scalars())[1]["nan"])
    (system,) = alpha.records("system")
    assert system["cpu_percent"] == 12.5 and system["mem.rss_mb"] == 100.0
    notes = [n["text"] for n in alpha.notes()]
    assert any("Trackio alert [warn]" in n and "loss spike: at step 2" in n for n in notes)
    assert any("1 str value(s)" in n for n in notes)
    assert alpha.counts()["system"] == 1 and "system" not in beta.counts()
    assert alpha.status == beta.status == "killed"  # trackio.finish writes no end: the file cannot prove one
    with pytest.raises(ImportSourceError, match="--again"):
        import_path(trackio_dir, tmp_path / "ledger")


def labledger_time(stamp: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(stamp).timestamp()


@pytest.mark.slow
def test_cli_import_trackio(trackio_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [
        sys.executable,
        "-m",
        "labledger",
        "import",
        str(trackio_dir / "proj.db"),
        "--format",
        "trackio",
        "--ledger",
        str(tmp_path / "l"),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(trackio, sha256" in done.stdout and "alpha [g1]: 5 scalars" in done.stdout


def test_a_project_file_missing_a_table_is_an_error_naming_it(tmp_path):
    """A file with Trackio's metrics table but not its configs table (a new user's hand-made or
    truncated file) is a one-line error, not sqlite3's traceback; the ledger is left empty."""
    db = tmp_path / "p.db"
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE metrics(id INTEGER PRIMARY KEY, timestamp TEXT, run_name TEXT, step INTEGER, metrics TEXT)"
    )
    conn.execute(
        "INSERT INTO metrics(timestamp, run_name, step, metrics) VALUES ('2026-01-01T00:00:00', 'r1', 0, '{}')"
    )
    conn.commit()
    conn.close()
    with pytest.raises(ImportSourceError, match=r"p\.db: not a Trackio project file \(no such table: configs\)"):
        import_path(db, tmp_path / "ledger", fmt="trackio")
    if (tmp_path / "ledger").exists():
        assert labledger.open_ledger(tmp_path / "ledger").runs() == []


KILLED = """
import os, sys, time
os.environ["TRACKIO_DIR"] = sys.argv[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import trackio
trackio.init(project="k", name="killed", auto_log_gpu=False, auto_log_cpu=False)
for s in range(100000):
    trackio.log({"loss": 1.0 / (s + 1)}, step=s)
    time.sleep(0.01)
"""


@pytest.mark.slow
def test_a_run_killed_mid_log_is_not_finished(tmp_path):
    """Real trackio killed (SIGKILL) mid-log: the import says the source has no end record, and
    holds exactly the rows trackio's own reader (``SQLiteStorage.get_logs``) reads back."""
    pytest.importorskip("trackio")
    import time

    d = tmp_path / "trackio"
    d.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRACKIO_DIR": str(d)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(d)], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.3)
            try:
                with sqlite3.connect(f"{(d / 'k.db').as_uri()}?mode=ro", uri=True) as conn:
                    if conn.execute("SELECT COUNT(*) FROM metrics").fetchone()[0] >= 5:
                        break
            except sqlite3.Error:
                continue
    finally:
        proc.kill()
        proc.wait(30)
    read = (
        "import json, sys; from trackio.sqlite_storage import SQLiteStorage as S; "
        "print(json.dumps([r['step'] for r in S.get_logs('k', run_id=S.get_run_records('k')[0]['id'])]))"
    )
    done = subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(steps) >= 5
    result = import_path(d, tmp_path / "ledger", fmt="trackio")
    view = labledger.open_ledger(tmp_path / "ledger").run(result.run_ids[0])
    assert [r["step"] for r in view.scalars()] == steps
    assert view.status == "killed"
    assert view.meta["error"].startswith("Trackio records no end of a run")
    assert f"its last metrics row is step {steps[-1]} at" in view.meta["error"]
    assert any(n["text"].startswith("The source has no end record") for n in view.notes())
