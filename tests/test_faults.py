"""Faults and hostile input (#17): a full disk, a kill, a crafted file or a hostile name loses
nothing, breaks nothing and leaks nothing. One test (or more) per numbered failure of the issue.

Disk-full tests use a real 4 MiB tmpfs (the kernel's own ENOSPC, partial writes included, as in
the issue's reproduction); they need root or CAP_SYS_ADMIN, which CI has, and are skipped where a
tmpfs cannot be mounted. ``RLIMIT_FSIZE`` tests run everywhere: the kernel refuses writes past the
limit with EFBIG, a real short write and a real error without any privilege.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from conftest import make_batch

import labledger
from labledger.cli import main
from labledger.errors import DamagedLineWarning, RecordError, StorageError
from labledger.store.jsonl import iter_lines, read_jsonl

SRC = str(Path(labledger.__file__).resolve().parents[1])


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def labledger_proc(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """The real command in a subprocess (signals and exit codes as a user sees them)."""
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "labledger", *args], capture_output=True, text=True, timeout=timeout, env=env, **kw
    )


# -- a small disk ----------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.decode().strip()}); needs root / CAP_SYS_ADMIN")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` to the last byte; returns the filler file (delete it to free)."""
    filler = folder / f"filler-{uuid.uuid4().hex}"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def assert_every_line_valid(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "a partial line was left behind"
    return [orjson.loads(line) for line in data.splitlines()]


def test_disk_full_scalars_raise_storage_error_leave_no_partial_line_and_work_again(small_disk):
    ledger_dir = small_disk / "ledger"
    run = labledger.start_run("full", ledger=ledger_dir)
    run.sync_interval = 1e9  # the index is written at finish, after space is freed
    pad = "x" * 300
    for step in range(1, 50):
        run.log(step, loss=0.5, pad_len=len(pad))
    filler = fill(small_disk)
    last_ok = 49
    with pytest.raises(StorageError, match=r"disk full: .*metrics\.jsonl: the record was not stored"):
        for step in range(50, 100_000):
            run.log(step, loss=0.5, **{f"k{i}": 1.0 for i in range(40)})
            last_ok = step
    filler.unlink()
    for step in range(last_ok + 1, last_ok + 50):
        run.log(step, loss=0.25)
    run.finish()
    steps = [r["step"] for r in assert_every_line_valid(run.dir / "metrics.jsonl")]
    assert steps == list(range(1, last_ok + 50))
    assert cli("runs", "--ledger", str(ledger_dir)).exit_code == 0
    assert cli("show", run.id, "--ledger", str(ledger_dir)).exit_code == 0
    assert cli("verify", "--ledger", str(ledger_dir)).exit_code == 0


def test_disk_full_checkpoint_raises_storage_error_and_stores_nothing(small_disk, tmp_path):
    """A checkpoint copy the full disk refuses: one-line StorageError naming it, no partial copy,
    no chunk record, no checkpoint record; the run logs on once there is space."""
    src = tmp_path / "model.pt"
    src.write_bytes(os.urandom(1 << 20))
    with labledger.start_run("ck", ledger=small_disk / "ledger") as run:
        run.log(1, loss=0.5)
        filler = fill(small_disk)
        with pytest.raises(StorageError, match=r"disk full: .*model\.pt: the checkpoint copy was not stored"):
            run.log_checkpoint(src, step=1)
        filler.unlink()
        assert not (run.dir / "checkpoints").exists() or not list((run.dir / "checkpoints").iterdir())
        assert not (run.dir / ".chunks").exists()
        rec = run.log_checkpoint(src, step=2)
    assert [r["step"] for r in read_jsonl(run.dir / "checkpoints.jsonl")] == [2] and rec["step"] == 2
    assert (run.dir / ".chunks").is_dir()


def test_disk_full_reads_still_list_runs_and_mark_dead_ones_once_there_is_space(small_disk):
    # Listing the runs is how a user finds what to delete: the reap of a dead run (a write) must not
    # stop the read when the disk is full.
    ledger_dir = small_disk / "ledger"
    code = (
        "import os, labledger; run = labledger.start_run('dead', ledger=os.environ['L']); "
        "run.log(1, loss=0.5); os._exit(0)"
    )
    subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC, "L": str(ledger_dir)}, check=True
    )
    filler = fill(small_disk)
    listed = labledger_proc("runs", "--ledger", str(ledger_dir), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["status"] for r in orjson.loads(listed.stdout)["runs"]] == ["running"]
    assert labledger_proc("show", "dead", "--ledger", str(ledger_dir)).returncode == 0
    filler.unlink()
    assert labledger.open_ledger(ledger_dir).info("dead").status == "crashed"


def test_disk_full_a_closed_ledger_still_lists_and_a_refused_run_leaves_no_folder(small_disk):
    # A ledger whose last writer closed has no -wal/-shm files, and SQLite cannot create them on a
    # full disk: the index opens read-only instead, and writes are one-line StorageErrors.
    ledger_dir = small_disk / "ledger"
    with labledger.start_run("done", ledger=ledger_dir) as run:
        run.log(1, loss=0.5)
    assert not (ledger_dir / "ledger.db-wal").exists()
    filler = fill(small_disk)
    listed = labledger_proc("runs", "--ledger", str(ledger_dir), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["status"] for r in orjson.loads(listed.stdout)["runs"]] == ["finished"]
    shown = labledger_proc("show", "done", "--ledger", str(ledger_dir))
    assert shown.returncode == 0 and "finished" in shown.stdout, shown.stderr
    before = sorted(p.name for p in (ledger_dir / "runs").iterdir())
    with pytest.raises(StorageError, match="disk full"):
        labledger.start_run("refused", ledger=ledger_dir)
    assert sorted(p.name for p in (ledger_dir / "runs").iterdir()) == before
    filler.unlink()
    with labledger.start_run("after", ledger=ledger_dir) as run:
        run.log(1, loss=0.25)
    assert [r.name for r in labledger.open_ledger(ledger_dir).runs()] == ["after", "done"]


def test_disk_full_a_document_saved_into_a_run_is_one_line_and_stores_nothing(small_disk, tmp_path):
    """`compare --save` on a full disk: one line that says the disk is full, exit 1, and the run's
    evaluations as they were."""
    ledger_dir = small_disk / "ledger"
    rows = [{"id": str(i), "task": "t", "gold": "ab"[i % 2], "pred": "ab"[(i // 3) % 2]} for i in range(40)]
    with labledger.start_run("m", ledger=ledger_dir) as run:
        run.log_results("a", rows)
        run.log_results("b", rows[::-1])
    before = sorted(p.name for p in (run.dir / "evals").iterdir())
    filler = fill(small_disk)
    res = labledger_proc("compare", "m:a", "m:b", "--save", "m:a-vs-b", "--ledger", str(ledger_dir))
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("Error: disk full: ") and "the disk is full" in res.stderr
    assert sorted(p.name for p in (run.dir / "evals").iterdir()) == before
    filler.unlink()


def test_a_run_refused_for_its_config_leaves_no_folder(tmp_path):
    with labledger.start_run("first", ledger=tmp_path / "l"):
        pass
    with pytest.raises(RecordError, match="config"):
        labledger.start_run("bad", ledger=tmp_path / "l", config={"f": object()})
    assert len(list((tmp_path / "l" / "runs").iterdir())) == 1


def test_disk_full_batches_keep_every_record_saved_before_the_error(small_disk):
    ledger_dir = small_disk / "ledger"
    run = labledger.start_run("full", ledger=ledger_dir)
    run.sync_interval = 1e9
    filler = fill(small_disk)
    os.truncate(filler, os.path.getsize(filler) - 64 * 1024)  # room for a few records
    saved = 0
    with pytest.raises(StorageError, match=r"batches\.jsonl: the record was not stored"):
        for mb in range(1, 10_000):
            run.log_batch(make_batch(mb, n=16))
            saved = mb
    assert saved > 0
    filler.unlink()
    run.log_batch(make_batch(saved + 1, n=2))
    run.finish()
    records = assert_every_line_valid(run.dir / "batches.jsonl")
    assert [r["microbatch"] for r in records] == list(range(1, saved + 2))
    view = labledger.open_ledger(ledger_dir).run(run.id)
    assert len(list(view.batches())) == saved + 1


def test_disk_full_results_export_and_site_are_one_line_errors_with_no_partial_file(small_disk, tmp_path):
    ledger_dir = small_disk / "ledger"
    with labledger.start_run("r", ledger=ledger_dir) as run:
        for step in range(1, 200):
            run.log(step, loss=1.0 / step)
    rows = [
        {"id": str(i), "task": "t", "gold": "a", "probs": {"a": 0.6, "b": 0.4}, "pad": "y" * 200} for i in range(5000)
    ]
    results = tmp_path / "results.jsonl"
    results.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    filler = fill(small_disk)
    try:
        run2 = labledger.start_run("r2", ledger=ledger_dir)
    except StorageError:  # the index cannot even be opened on a disk this full: a clean error too
        run2 = None
    if run2 is not None:
        with pytest.raises(StorageError, match="disk full"):
            run2.log_results("test", results)
        assert not (run2.dir / "evals" / "test" / "results.jsonl").exists()
    out = small_disk / "export.jsonl"
    res = cli("export", run.id, "--what", "scalars", "--out", str(out), "--ledger", str(ledger_dir))
    assert res.exit_code == 1 and res.output.startswith("Error: ") and "disk" in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not out.exists() and not list(small_disk.glob(".export.jsonl*"))
    site = small_disk / "site"
    res = cli("site", str(site), "--ledger", str(ledger_dir))
    assert res.exit_code == 1 and res.output.startswith("Error: ") and "disk" in res.output, res.output
    filler.unlink()
    res = cli("site", str(site), "--ledger", str(ledger_dir))
    assert res.exit_code == 0, res.output
    assert cli("verify", "--site", str(site), "--ledger", str(ledger_dir)).exit_code == 0


def test_disk_full_cache_folder_gives_the_same_eval_and_one_warning_line(small_disk, tmp_path, monkeypatch):
    """A columnar cache folder on a full disk: the eval is the same as with the cache off, exit 0,
    one ``Warning:`` line naming the folder and the reason, and no temporary entry left there."""
    rows = [{"id": str(i), "task": "t", "gold": "ab"[i % 2], "score": (i % 97) / 97} for i in range(3000)]
    results = tmp_path / "results.jsonl"
    results.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    cache = small_disk / "cache"
    cache.mkdir()
    filler = fill(small_disk)
    args = ("eval", str(results), "--positive", "b", "--json")
    monkeypatch.setenv("LABLEDGER_CACHE_MIN_BYTES", "0")
    monkeypatch.setenv("LABLEDGER_CACHE_DIR", "off")
    off = labledger_proc(*args)
    monkeypatch.setenv("LABLEDGER_CACHE_DIR", str(cache))
    full = labledger_proc(*args)
    assert off.returncode == 0 and full.returncode == 0, full.stderr
    assert full.stdout == off.stdout
    warning = [line for line in full.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and warning[0].startswith(f"Warning: the columnar cache in {cache} could not be written")
    assert "No space left on device" in warning[0], warning
    assert list(cache.iterdir()) == []
    filler.unlink()  # space again: the entry is written, silently
    again = labledger_proc(*args)
    assert again.returncode == 0 and again.stdout == off.stdout and again.stderr == ""
    assert len(list(cache.iterdir())) == 1


def test_disk_full_eval_save_is_one_line_keeps_the_stored_evaluation_and_leaves_no_folder(small_disk, tmp_path):
    """``labledger eval --save`` on a full disk: a one-line error, exit 1; the evaluation stored before
    is unchanged (an overwrite is refused whole), and a new name leaves no empty folder behind; with
    space again the same command stores it."""
    ledger_dir = small_disk / "ledger"
    rows = [{"id": str(i), "task": "t", "gold": "ab"[i % 2], "score": (i % 97) / 97} for i in range(2000)]
    with labledger.start_run("r", ledger=ledger_dir) as run:
        run.log_results("test", rows)
    common = ("--positive", "b", "--metric", "accuracy", "--ledger", str(ledger_dir))
    assert labledger_proc("eval", f"{run.id}:test", *common, "--save", f"{run.id}:first").returncode == 0
    first = run.dir / "evals" / "first" / "evaluation.json"
    kept = first.read_bytes()
    filler = fill(small_disk)
    for name in ("first", "second"):
        res = labledger_proc("eval", f"{run.id}:test", *common, "--save", f"{run.id}:{name}")
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.returncode == 1 and len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert first.read_bytes() == kept
    assert not (run.dir / "evals" / "second").exists()
    filler.unlink()
    assert labledger_proc("eval", f"{run.id}:test", *common, "--save", f"{run.id}:second").returncode == 0
    assert {"first", "second"} <= {e.name for e in labledger.Ledger(ledger_dir).evaluations(run.id)}


_FSIZE_CHILD = r"""
import resource, signal, sys, labledger
from labledger.errors import StorageError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
run = labledger.start_run("f", ledger=sys.argv[1])
run.sync_interval = 1e9
limit = (run.dir / "metrics.jsonl").stat().st_size + 10_000
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
step = 0
try:
    while True:
        step += 1
        run.log(step, loss=0.5, a=1.0, b=2.0, c=3.0)
except StorageError as exc:
    print("ERR", step, exc)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
run.log(step, loss=0.25)
run.finish()
"""


def test_a_refused_short_write_is_cut_back_and_the_next_write_is_clean(tmp_path):
    """RLIMIT_FSIZE: the kernel writes part of the record and refuses the rest (EFBIG)."""
    res = subprocess.run(
        [sys.executable, "-c", _FSIZE_CHILD, str(tmp_path / "ledger")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "ERR" in res.stdout and "the record was not stored" in res.stdout and "File too large" in res.stdout
    [run_dir] = (tmp_path / "ledger" / "runs").iterdir()
    records = assert_every_line_valid(run_dir / "metrics.jsonl")
    steps = [r["step"] for r in records]
    assert steps == list(range(1, len(steps) + 1)) and records[-1]["loss"] == 0.25


# -- damaged lines anywhere --------------------------------------------------------------------------
@pytest.fixture
def damaged_run(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("alpha", ledger=d) as run:
        for s in range(1, 6):
            run.log(s, loss=1.0 / s)
        for mb in range(1, 4):
            run.log_batch(make_batch(mb, n=2))
    with labledger.start_run("beta", ledger=d) as other:
        other.log(1, loss=2.0)
    path = run.dir / "metrics.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:10] + lines[3]  # half a record glued to the next: what a full disk did
    del lines[3]
    lines.insert(1, b"null\n")
    path.write_bytes(b"".join(lines) + b'{"step": 9, "lo')
    return d, run, other


def test_damaged_lines_anywhere_are_skipped_and_reported_and_every_other_line_is_read(damaged_run):
    d, run, other = damaged_run
    view = labledger.open_ledger(d).run(run.id)
    with pytest.warns(DamagedLineWarning) as caught:
        steps = [r["step"] for r in view.scalars()]
    assert steps == [1, 2, 5]
    messages = [str(w.message) for w in caught]
    assert any("metrics.jsonl:2: damaged line skipped (must be a JSON object; got null)" in m for m in messages)
    assert any("metrics.jsonl:4: damaged line skipped (not valid JSON" in m for m in messages)
    assert any("metrics.jsonl:6: torn last line skipped" in m for m in messages)
    out = str(d.parent / "scalars.jsonl")
    for args in (["runs"], ["show", run.id], ["show", other.id], ["export", run.id, "--what", "scalars", "--out", out]):
        res = labledger_proc(*args, "--ledger", str(d))
        assert res.returncode == 0, (args, res.stderr)
        assert "Traceback" not in res.stderr


def test_warnings_print_as_one_clean_line(damaged_run):
    d, run, _ = damaged_run
    res = labledger_proc("show", run.id, "--ledger", str(d))
    warn_lines = [line for line in res.stderr.splitlines() if line]
    assert warn_lines and all(line.startswith("Warning: ") for line in warn_lines), res.stderr
    assert "TornLineWarning" not in res.stderr and "warnings.warn" not in res.stderr and ".py:" not in res.stderr


def test_verify_reports_every_damaged_line_and_repair_quarantines_without_losing_data(damaged_run):
    d, run, _ = damaged_run
    before = (run.dir / "metrics.jsonl").read_bytes()
    res = cli("verify", "--ledger", str(d))
    assert res.exit_code == 1
    for line in (2, 4, 6):
        assert f"metrics.jsonl:{line}: damaged line" in res.output
    res = cli("verify", "--repair", "--ledger", str(d))
    assert res.exit_code == 0, res.output
    assert "3 repaired" in res.output
    side = [orjson.loads(x) for x in (run.dir / "metrics.jsonl.damaged").read_bytes().splitlines()]
    assert [x["line"] for x in side] == [2, 4, 6]
    kept = (run.dir / "metrics.jsonl").read_bytes().splitlines()
    moved = [bytes.fromhex(x["raw_hex"]) for x in side]
    assert sorted(kept + moved) == sorted(before.split(b"\n"))  # nothing lost
    assert cli("verify", "--ledger", str(d)).exit_code == 0


def test_verify_finds_a_changed_result_set_and_a_changed_copied_checkpoint(tmp_path):
    d = tmp_path / "ledger"
    ck = tmp_path / "w.bin"
    ck.write_bytes(b"weights")
    with labledger.start_run("r", ledger=d) as run:
        run.log_results("test", [{"id": "a", "task": "t", "gold": "x", "probs": {"x": 0.6, "y": 0.4}}])
        run.log_checkpoint(ck, copy=True)
    assert cli("verify", "--ledger", str(d)).exit_code == 0
    (run.dir / "evals" / "test" / "results.jsonl").write_bytes(b'{"id": "b"}\n')
    (run.dir / "checkpoints" / "w.bin").write_bytes(b"tampered")
    res = cli("verify", "--json", "--ledger", str(d))
    assert res.exit_code == 1
    doc = json.loads(res.output)
    text = " ".join(p["message"] for p in doc["problems"])
    assert "meta.json records" in text and "the index records" in text and "not the recorded" in text


def test_a_complete_last_record_without_newline_is_read_not_called_torn(tmp_path):
    path = tmp_path / "batches.jsonl"
    path.write_bytes(b"".join(orjson.dumps(make_batch(mb, n=1)) + b"\n" for mb in range(1, 40)))
    with open(path, "ab") as f:
        f.write(orjson.dumps(make_batch(40, n=1)))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [n for n, _ in iter_lines(path)] == list(range(1, 41))
        assert len(list(read_jsonl(path))) == 40


# -- site ----------------------------------------------------------------------------------------
def test_a_crafted_site_manifest_cannot_delete_anything_outside_the_site(tmp_path):
    from labledger.site import build_site

    d = tmp_path / "ledger"
    with labledger.start_run("r", ledger=d) as run:
        run.log(1, loss=1.0)
    out = tmp_path / "site"
    build_site(d, out)
    victim_dir = tmp_path / "victims"
    victim_dir.mkdir()
    victim = victim_dir / "victim.txt"
    victim.write_text("mine")
    absolute = tmp_path / "absolute.txt"
    absolute.write_text("mine too")
    (out / "escape").symlink_to(victim_dir)
    manifest_path = out / ".labledger-site.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    for rel in ("../victims/victim.txt", str(absolute), "escape/victim.txt", "data/../../victims/victim.txt"):
        manifest["files"][rel] = {"sha256": None, "size": 4}
    manifest_path.write_bytes(orjson.dumps(manifest))
    build_site(d, out)
    assert victim.read_text() == "mine" and absolute.read_text() == "mine too" and victim_dir.is_dir()


def test_a_summary_json_with_a_wrong_analysis_type_does_not_stop_the_site(tmp_path):
    from labledger.site import build_site

    d = tmp_path / "ledger"
    with labledger.start_run("r", ledger=d) as run:
        run.log(1, loss=1.0)
        run.log_file("full_test/summary.json", orjson.dumps({"cells": {}, "analysis": []}))
    result = build_site(d, tmp_path / "site")
    assert run.id in result.runs


_SITE_KILL = [0.3, 0.6, 0.9, 1.2, 1.6, 2.0]


@pytest.mark.parametrize("delay", _SITE_KILL[:3])
def test_kill_9_during_site_then_the_same_command_succeeds_and_verify_is_clean(tmp_path, delay):
    d = tmp_path / "ledger"
    for i in range(3):
        with labledger.start_run(f"r{i}", ledger=d) as run:
            for s in range(1, 400):
                run.log(s, loss=1.0 / s)
            for mb in range(1, 60):
                run.log_batch(make_batch(mb, n=4))
    out = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "labledger", "site", str(out), "--ledger", str(d)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    res = labledger_proc("site", str(out), "--ledger", str(d))
    assert res.returncode == 0, res.stderr
    assert not (out / ".labledger-site.building").exists()
    assert not list(out.rglob("*.tmp"))
    res = labledger_proc("verify", "--site", str(out), "--ledger", str(d))
    assert res.returncode == 0, res.stdout + res.stderr


# -- imports ---------------------------------------------------------------------------------------
def _seed_run_folder(folder: Path, n: int = 40) -> Path:
    folder.mkdir(parents=True)
    (folder / "batches.jsonl").write_bytes(b"".join(orjson.dumps(make_batch(mb, n=2)) + b"\n" for mb in range(1, n)))
    return folder


def test_kill_9_during_import_leaves_staging_that_the_next_import_and_verify_remove(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("first", ledger=d) as run:
        run.log(1, loss=1.0)
    stale = d / ".staging" / "deadbeef0000"
    stale.mkdir(parents=True)
    (stale / ".import.lock").write_bytes(b"")
    (stale / "junk.bin").write_bytes(b"x" * 1000)
    res = cli("verify", "--ledger", str(d))
    assert res.exit_code == 1 and "interrupted import" in res.output
    src = _seed_run_folder(tmp_path / "src")
    res = cli("import", str(src), "--ledger", str(d))
    assert res.exit_code == 0, res.output
    assert not stale.exists()
    assert cli("verify", "--ledger", str(d)).exit_code == 0


def test_import_refuses_a_symlink_out_of_the_source(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0")
    src = _seed_run_folder(tmp_path / "src")
    (src / "notes.txt").symlink_to(secret)
    d = tmp_path / "ledger"
    res = cli("import", str(src), "--copy", "--ledger", str(d))
    assert res.exit_code == 1 and "a symlink out of the source folder" in res.output, res.output
    for path in d.rglob("*") if d.exists() else []:
        assert not path.is_file() or b"root:x:0:0" not in path.read_bytes()


# -- crafted input -----------------------------------------------------------------------------------
ROW = {"id": "a", "task": "t", "gold": "a", "probs": {"a": 0.7, "b": 0.3}}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"null\n" + orjson.dumps(ROW) + b"\n", "null.jsonl:1: a result row must be a JSON object"),
        (orjson.dumps(ROW) + b"\n\xff\xfe\n", "null.jsonl:2: not valid JSON"),
        (b"", "null.jsonl: holds no result rows"),
        (b"\xef\xbb\xbf" + orjson.dumps(ROW) + b"\n", "null.jsonl:1: starts with a UTF-8 byte-order mark"),
        (orjson.dumps(ROW).replace(b"0.7", b"NaN") + b"\n", "null.jsonl:1: not valid JSON"),
        (orjson.dumps({**ROW, "id": "x" * 5000}) + b"\n", "null.jsonl:1: field 'id' is 5,000 characters long"),
    ],
    ids=["null-first-line", "invalid-utf8", "empty", "bom", "nan", "huge-id"],
)
@pytest.mark.parametrize("command", ["eval", "calibrate-fit"])
def test_hostile_results_files_are_one_line_errors_never_a_crash(tmp_path, content, expected, command):
    path = tmp_path / "null.jsonl"
    path.write_bytes(content)
    args = (
        ["eval", str(path)]
        if command == "eval"
        else ["calibrate", "fit", str(path), "--method", "temperature", "--out", str(tmp_path / "r.toml")]
    )
    res = labledger_proc(*args, "--ledger", str(tmp_path / "l"), cwd=tmp_path)
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert res.stderr.startswith("Error: ") and expected in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("row", "field"),
    [({"suite": 5}, "suite"), ({"n": True}, "n"), ({"model": ["a"]}, "model"), ({"value": "nan"}, "value")],
)
def test_table_import_jsonl_follows_the_csv_rules(tmp_path, row, field):
    from labledger.analysis.benchmarks import import_records
    from labledger.errors import RecordError

    base = {"model": "m", "suite": "s", "benchmark": "b", "metric": "accuracy", "value": 0.5}
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps({**base, **row}) + b"\n")
    with pytest.raises(RecordError, match=rf"t\.jsonl:1: field '{field}'"):
        import_records(path)
    path.write_bytes(b"null\n")
    with pytest.raises(RecordError, match=r"t\.jsonl:1: must be a JSON object"):
        import_records(path)
    path.write_bytes(b"")
    with pytest.raises(RecordError, match="holds no records"):
        import_records(path)
    csv_path = tmp_path / "t.csv"
    csv_path.write_bytes(b"model,suite,benchmark,metric,value\nm,s,b,accuracy,\xff\n")
    with pytest.raises(RecordError, match=r"t\.csv:2: not valid UTF-8"):
        import_records(csv_path)


def test_float32_cross_entropy_is_accepted_as_torch_computes_it(tmp_path):
    torch = pytest.importorskip("torch")
    labels = ["a", "b", "c"]
    with labledger.start_run("f32", ledger=tmp_path / "l") as run:
        for mb, gap in enumerate([1.0, 30.0, 100.0, 200.0], 1):
            logits = torch.tensor([[0.0, gap, 0.0]])
            y = torch.tensor([0])
            p = logits.softmax(-1).tolist()[0]
            ce = torch.nn.functional.cross_entropy(logits, y, reduction="none").tolist()
            run.log_batch(
                {
                    "microbatch": mb,
                    "samples": [{"gold": "a", "probabilities": dict(zip(labels, p)), "cross_entropy": ce[0]}],
                }
            )
    with (
        pytest.raises(labledger.RecordError, match="cross_entropy"),
        labledger.start_run("bad", ledger=tmp_path / "l") as r,
    ):
        r.log_batch(
            {"microbatch": 1, "samples": [{"gold": "a", "probabilities": {"a": 0.0, "b": 1.0}, "cross_entropy": 5.0}]}
        )


# -- the CLI and the server --------------------------------------------------------------------------
def test_control_characters_in_run_names_and_tags_are_escaped(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("evil\x1b]0;pwned\x07\x1b[2J", tags=["t\x1b[31m"], group="g\x9b", ledger=d) as run:
        run.log(1, loss=1.0)
    for args in (["runs"], ["show", run.id]):
        res = labledger_proc(*args, "--ledger", str(d))
        assert res.returncode == 0, res.stderr
        assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\x9b" not in res.stdout
        assert "\\x1b" in res.stdout


def test_serve_refuses_a_missing_ledger_and_a_busy_port_in_one_line(tmp_path):
    res = labledger_proc("serve", "--ledger", str(tmp_path / "nope"), "--port", "0")
    assert res.returncode == 1 and res.stderr.startswith("Error: No ledger at") and "--create" in res.stderr
    assert not (tmp_path / "nope").exists()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        res = labledger_proc("serve", "--ledger", str(tmp_path / "l"), "--create", "--port", str(port))
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip() == f"Error: port {port} on 127.0.0.1 is already in use; pick another with --port"


def test_argv_secrets_are_redacted_and_process_details_need_the_token(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from labledger.server import create_app

    monkeypatch.setattr(sys, "argv", ["train.py", "--token", "s3cret-value", "HF_TOKEN=hf_abc", "--lr", "0.1"])
    d = tmp_path / "ledger"
    with labledger.start_run("r", ledger=d) as run:
        run.log(1, loss=1.0)
    meta = orjson.loads((run.dir / "run.json").read_bytes())
    assert meta["argv"] == ["train.py", "--token", "<redacted>", "HF_TOKEN=<redacted>", "--lr", "0.1"]
    token = "t" * 32
    client = TestClient(create_app(d, uploads_dir=str(tmp_path / "up"), token=token))
    anonymous = client.get(f"/api/runs/{run.id}").json()
    assert not {"argv", "cwd", "user", "host", "pid"} & set(anonymous["meta"])
    owner = client.get(f"/api/runs/{run.id}", headers={"Authorization": f"Bearer {token}"}).json()
    assert owner["meta"]["argv"][2] == "<redacted>" and "cwd" in owner["meta"]


@pytest.mark.parametrize("name", ["x\n", "a" * 251, "b\x00c", "..", "x/y"])
def test_upload_names_are_checked_before_anything_is_written(tmp_path, name):
    from urllib.parse import quote

    from starlette.testclient import TestClient

    from labledger.server import create_app

    token = "t" * 32
    up = tmp_path / "up"
    client = TestClient(create_app(tmp_path / "ledger", uploads_dir=str(up), token=token))
    res = client.post(
        f"/upload?filename={quote(name, safe='')}", content=b"data", headers={"Authorization": f"Bearer {token}"}
    )
    assert res.status_code == 400, res.text
    assert not [p for p in up.rglob("*") if p.is_file()] if up.exists() else True
    assert client.get("/api/uploads").status_code == 200


def test_push_on_a_name_clash_says_overwrite(tmp_path):
    from server_process import ServerProcess

    from labledger.errors import PushError
    from labledger.server.client import push_file

    f = tmp_path / "report.md"
    f.write_text("# hi\n")
    token = "t" * 32
    with ServerProcess(tmp_path / "ledger", uploads_dir=tmp_path / "up", token=token) as server:
        push_file(f, server.url, token=token)
        with pytest.raises(PushError, match="already exists on the server; pass --overwrite"):
            push_file(f, server.url, token=token)


# -- kill -9 in the middle of other multi-file writes ------------------------------------------------
def _kill_then_rerun(args: list[str], delay: float, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "labledger", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return labledger_proc(*args, cwd=cwd)


def test_calibrate_apply_removes_what_a_killed_apply_left_and_keeps_a_live_writers_temp(tmp_path):
    rows = [
        {"id": str(i), "task": "t", "gold": "a" if i % 3 else "b", "probs": {"a": 0.7, "b": 0.3}} for i in range(30)
    ]
    results = tmp_path / "results.jsonl"
    results.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    recipe, out = tmp_path / "recipe.toml", tmp_path / "calibrated.jsonl"
    assert cli("calibrate", "fit", str(results), "--method", "temperature", "--out", str(recipe)).exit_code == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale, live = tmp_path / f".calibrated.jsonl.{dead.pid}.tmp", tmp_path / f".calibrated.jsonl.{os.getppid()}.tmp"
    stale.write_bytes(b'{"id": "0", "half')
    live.write_bytes(b"being written")
    res = cli("calibrate", "apply", str(results), "--recipe", str(recipe), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert len(out.read_bytes().splitlines()) == len(rows)
    assert not stale.exists() and live.exists()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_removes_what_a_killed_export_left(tmp_path, fmt):
    d = tmp_path / "ledger"
    with labledger.start_run("r", ledger=d) as run:
        for step in range(5):
            run.log(step, loss=1.0 / (step + 1))
    out = tmp_path / f"scalars.{fmt}"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".{out.name}.{dead.pid}.tmp"
    stale.write_bytes(b"half an export")
    res = cli("export", run.id, "--what", "scalars", "--out", str(out), "--ledger", str(d))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 0 and not stale.exists()


@pytest.mark.slow  # ~30 s each on 2 shared cores (three commands, each started twice)
@pytest.mark.parametrize("delay", [0.8, 1.6])
def test_kill_9_during_calibrate_apply_table_import_and_soup_then_the_same_command_succeeds(tmp_path, delay):
    torch = pytest.importorskip("torch")
    d = tmp_path / "ledger"
    with labledger.start_run("r", ledger=d) as run:
        run.log(1, loss=1.0)
    rows = [
        {
            "id": str(i),
            "task": "t",
            "gold": "a" if i % 3 else "b",
            "probs": {"a": 0.6 + (i % 5) / 20, "b": 0.4 - (i % 5) / 20},
        }
        for i in range(20000)
    ]
    results = tmp_path / "results.jsonl"
    results.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    recipe = tmp_path / "recipe.toml"
    res = labledger_proc(
        "calibrate", "fit", str(results), "--method", "temperature", "--out", str(recipe), cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    out = tmp_path / "calibrated.jsonl"
    res = _kill_then_rerun(
        ["calibrate", "apply", str(results), "--recipe", str(recipe), "--out", str(out)], delay, tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert len(out.read_bytes().splitlines()) == len(rows) and not list(tmp_path.glob(".calibrated.jsonl*"))
    table = tmp_path / "table.csv"
    table.write_text(
        "model,suite,benchmark,metric,value\n"
        + "".join(f"m{i},s,b{j},accuracy,0.5\n" for i in range(20) for j in range(50))
    )
    res = _kill_then_rerun(["table", "import", str(table), "--ledger", str(d)], delay, tmp_path)
    assert res.returncode in (0, 1), res.stderr  # 1 only when the killed import had already finished
    assert "Traceback" not in res.stderr
    ckpts = []
    for i in range(2):
        path = tmp_path / f"c{i}.pt"
        torch.save({"w": torch.full((256, 256), float(i))}, path)
        ckpts.append(str(path))
    soup = tmp_path / "soup.pt"
    res = _kill_then_rerun(
        ["soup", *ckpts, "--weights", "0.5,0.5", "--out", str(soup), "--ledger", str(d)], delay, tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert torch.load(soup)["w"].mean().item() == pytest.approx(0.5)
    assert not list(tmp_path.glob(".soup.pt*"))
    res = labledger_proc("verify", "--ledger", str(d))
    assert res.returncode == 0, res.stdout + res.stderr


# -- import of a ledger run folder is an equal copy (16) ------------------------------------------
def test_importing_a_ledger_run_folder_keeps_headline_documents_and_files(tmp_path):
    from labledger.importers import import_path

    src_ledger = tmp_path / "a"
    rows = [
        {"id": str(i), "task": "t", "gold": "x" if i % 2 else "y", "probs": {"x": 0.7, "y": 0.3}} for i in range(20)
    ]
    with labledger.start_run("orig", ledger=src_ledger) as run:
        run.log(1, loss=1.0)
        results = run.log_results("test", rows)
        run.log_file("full_test/summary.json", orjson.dumps({"cells": {}, "analysis": {"errors": 1}}))
        run.set_summary(test_accuracy=0.5)
    book = labledger.open_ledger(src_ledger)
    doc = labledger.evaluate(results).to_dict()
    book.save_evaluation(run.id, "test", doc)
    dst = tmp_path / "b"
    result = import_path(run.dir, dst, fmt="seed-run")
    [new_id] = result.run_ids
    copy = labledger.open_ledger(dst)
    info = copy.info(new_id)
    assert info.summary["headline"] == {"test_accuracy": 0.5}
    assert [e["name"] for e in copy.evaluations(new_id)] == [e["name"] for e in book.evaluations(run.id)]
    assert len(copy.metric_values(new_id)) == len(book.metric_values(run.id)) > 0
    assert (copy.run_dir(new_id) / "files" / "full_test" / "summary.json").read_bytes() == (
        run.dir / "files" / "full_test" / "summary.json"
    ).read_bytes()


def test_a_get_never_marks_a_run_crashed_the_servers_timer_does(tmp_path):
    from starlette.testclient import TestClient

    from labledger.server import create_app

    d = tmp_path / "ledger"
    run = labledger.start_run("dies", ledger=d)
    run.log(1, loss=1.0)
    os.close(run._lock_fd)  # what the kernel does when the process dies: the lock is free, status 'running'
    book = labledger.open_ledger(d)
    app = create_app(d, uploads_dir=str(tmp_path / "up"))
    ctx = app.state.ctx
    client = TestClient(app)  # no lifespan: the timer does not run
    assert client.get("/api/runs").status_code == 200
    assert client.get(f"/api/runs/{run.id}").json()["run"]["status"] == "running"
    row = book.db.execute("SELECT status FROM runs WHERE id = ?", (run.id,)).fetchone()
    assert row[0] == "running"  # the GETs changed nothing
    assert ctx.reap() == [run.id]  # what the server's background task does every 5 s
    assert client.get(f"/api/runs/{run.id}").json()["run"]["status"] == "crashed"


def test_a_server_whose_disk_refuses_answers_507_saying_so():
    # a sync to a server with a full disk said "500: internal server error (the server's log has the
    # details)"; the client now reads why, and that nothing of the request was stored
    import asyncio
    import errno

    from labledger.server.app import on_unexpected
    from labledger.server.envelope import status_of

    class Req:
        method = "PUT"

        class url:
            path = "/api/sync/runs/r/files"

    resp = asyncio.run(on_unexpected(Req(), OSError(errno.ENOSPC, "No space left on device")))
    assert resp.status_code == 507 and b"No space left on device" in resp.body and b"nothing" in resp.body
    assert asyncio.run(on_unexpected(Req(), ValueError("a bug"))).status_code == 500
    assert status_of(StorageError("disk full: ledger.db: the index was not updated")) == 507
