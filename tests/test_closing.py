"""Every command closes what it opens: after it, ``ledger.db`` copied alone holds every commit.

The ``labledger`` program ends as Python ends (no ``os._exit``), and every ledger a command opens
is closed when the command ends (``ctx.call_on_close``), which checkpoints SQLite's WAL into
``ledger.db``. A user who backs up, copies or uploads ``ledger.db`` alone keeps what was committed.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import labledger

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _program(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``labledger ARGS`` as a user runs it: its own process, ended as the console script ends."""
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "120"}
    env.pop("LABLEDGER_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "labledger", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout
    )


def _copy_alone(ledger: Path, into: Path) -> sqlite3.Connection:
    """``ledger.db`` copied without its ``-wal`` and ``-shm`` files, opened as a backup would be."""
    into.mkdir()
    shutil.copy2(ledger / "ledger.db", into / "ledger.db")
    return sqlite3.connect(into / "ledger.db")


def test_table_import_leaves_every_entry_in_ledger_db(tmp_path):
    rows = ["model,suite,benchmark,category,metric,variant,value,n"]
    rows += [f"m{i % 5},public,bench{i},core,accuracy,raw,0.{50 + i},100" for i in range(40)]
    (tmp_path / "entries.csv").write_text("\n".join(rows) + "\n")
    done = _program("table", "import", "entries.csv", "--ledger", "T", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Added 40 entries" in done.stdout
    assert not (tmp_path / "T" / "ledger.db-wal").exists()  # the last connection closed checkpoints and removes it
    copy = _copy_alone(tmp_path / "T", tmp_path / "backup")
    assert copy.execute("SELECT count(*) FROM benchmark_entries").fetchone() == (40,)
    copy.close()


def test_a_read_command_that_reaps_a_dead_run_leaves_it_crashed_in_ledger_db(tmp_path):
    ledger = tmp_path / ".labledger"
    child = textwrap.dedent(f"""
        import os, signal, labledger
        run = labledger.start_run("victim", ledger={str(ledger)!r})
        run.log(1, loss=0.5)
        print(run.id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    run_id = proc.stdout.strip()
    done = _program("runs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "crashed" in done.stdout
    assert not (ledger / "ledger.db-wal").exists() and not (ledger / "ledger.db-shm").exists()
    copy = _copy_alone(ledger, tmp_path / "backup")
    assert copy.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone() == ("crashed",)
    copy.close()


def test_closing_checkpoints_while_another_connection_keeps_the_wal(tmp_path):
    """A run still logging keeps the WAL open; a command's commits still reach ``ledger.db``."""
    book = labledger.open_ledger(tmp_path / "L", create=True)
    keeper = sqlite3.connect(tmp_path / "L" / "ledger.db")  # another process's connection, say
    keeper.execute("SELECT count(*) FROM runs").fetchone()
    with labledger.start_run("r", ledger=book) as run:
        run.log(1, loss=0.25)
    book.close()
    book.close()  # twice is allowed
    assert (tmp_path / "L" / "ledger.db-wal").exists()  # kept by the other connection
    copy = _copy_alone(tmp_path / "L", tmp_path / "backup")
    assert copy.execute("SELECT name, status FROM runs").fetchall() == [("r", "finished")]
    copy.close()
    keeper.close()


def test_a_script_that_never_closes_its_ledger_still_leaves_every_commit_in_ledger_db(tmp_path):
    """The Python API: ledgers still open when the process exits are closed then (as files are
    flushed), so a script that forgets ``close()`` leaves nothing in the WAL alone, even when the
    ledger is still held where the interpreter's teardown never frees it (a daemon thread still at
    work); no warning is printed at exit."""
    script = textwrap.dedent(f"""
        import threading, time, labledger
        book = labledger.open_ledger({str(tmp_path / "L")!r}, create=True)
        with labledger.start_run("forgotten", ledger=book) as run:
            run.log(1, loss=0.5)
        def loader(held=book):
            while True:
                time.sleep(1)
        threading.Thread(target=loader, daemon=True).start()
        del book
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    copy = _copy_alone(tmp_path / "L", tmp_path / "backup")
    assert copy.execute("SELECT name, status FROM runs").fetchall() == [("forgotten", "finished")]
    copy.close()


def test_an_unclosed_ledger_says_so():
    """Like an unclosed file: a ``ResourceWarning`` when a ledger is freed without ``close()``
    (shown under ``python -W default`` and by pytest)."""
    import tempfile

    gc.collect()  # what earlier tests of this worker left to the collector says so before, not here
    with tempfile.TemporaryDirectory() as d:
        book = labledger.open_ledger(d, create=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del book
            gc.collect()
        assert [str(w.message).split(":")[0] for w in caught if w.category is ResourceWarning] == [
            f"unclosed Ledger({d!r})"
        ]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with labledger.open_ledger(d) as closed:
                closed.runs()
            del closed
            gc.collect()
        assert not [w for w in caught if w.category is ResourceWarning]


def test_the_program_ends_as_python_does(tmp_path):
    """No ``os._exit``: finalisers, atexit functions and threads still at work all run, the output
    is flushed whole, and the exit status is the command's (usage errors 2, errors 1)."""
    code = textwrap.dedent("""
        import atexit, os, sys, threading, time
        from labledger.cli import run
        class Held:  # freed at the interpreter's exit
            def __del__(self, write=os.write):
                write(1, b"finalised\\n")
        held = Held()
        atexit.register(lambda: print("atexit ran", flush=True))
        def late():
            time.sleep(0.3)
            print("thread done", flush=True)
        threading.Thread(target=late).start()
        sys.argv = ["labledger", *sys.argv[1:]]
        run(prog_name="labledger")
    """)
    env = {**os.environ, "PYTHONPATH": SRC, "LABLEDGER_DIR": str(tmp_path / "ledger")}

    def program(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60)

    done = program("--help")
    assert done.returncode == 0, done.stderr
    assert "Commands:" in done.stdout
    assert done.stdout.splitlines()[-3:] == ["thread done", "atexit ran", "finalised"]
    missing = program("eval", str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 1 and missing.stderr.startswith("Error: ") and "finalised" in missing.stdout
    assert program("eval", "--ci", "1.5", "x.jsonl").returncode == 2


def test_the_program_shows_warnings_as_one_line_and_importing_the_cli_changes_nothing(tmp_path):
    """The ``labledger`` program shows a warning as ``Warning: ...`` without a source path;
    importing ``labledger.cli`` (a test, a notebook driving ``main``) leaves the display as it was."""
    code = textwrap.dedent("""
        import sys, warnings, click
        before = warnings.showwarning
        from labledger.cli import main, run
        assert warnings.showwarning is before, "changed at import"
        @main.command("warn-twice")
        def warn_twice():
            warnings.warn("careful\\nnow")
        sys.argv = ["labledger", "warn-twice"]
        run(prog_name="labledger")
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["Warning: careful now"]


@pytest.mark.parametrize("command", [["runs"], ["runs", "--json"], ["show", "r"], ["lineage", "r"], ["site", "out"]])
def test_read_commands_leave_no_wal_behind(tmp_path, command):
    with labledger.start_run("r", ledger=tmp_path / ".labledger") as run:
        run.log(1, loss=0.5)
    done = _program(*command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / ".labledger").iterdir() if p.name.startswith("ledger.db")) == [
        "ledger.db"
    ]
