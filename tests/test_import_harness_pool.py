"""Harness imports decoded and encoded by worker processes (#13): the same bytes, notes and errors as
the serial path, and a worker killed part-way ends the import with one line and nothing stored."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_import_harness_columns import GEN, MC, gen_doc, mc_doc, write

from labledger.errors import ImportSourceError, LedgerError, RecordError, UnknownNameError
from labledger.importers import import_path, lm_eval
from labledger.importers.harness import WORKERS_ENV, encode_tasks, import_workers, portable_error
from labledger.importers.source import Source
from labledger.store.jsonl import dumps_line
from labledger.store.ledger import Ledger

STAMP = "2026-01-01T00-00-00"


def lm_out(root: Path, **samples: list[dict]) -> Path:
    """An lm-eval output folder: one results file, one samples file per keyword (task name)."""
    root.mkdir(parents=True, exist_ok=True)
    configs = {t: GEN if t.startswith("gen") else MC for t in samples}
    results = {t: {"acc,none": 0.5, "exact_match,strict": 0.5} for t in samples}
    (root / f"results_{STAMP}.json").write_text(
        json.dumps({"results": results, "configs": configs, "n-shot": dict.fromkeys(samples, 0)})
    )
    for task, docs in samples.items():
        write(root / f"samples_{task}_{STAMP}.jsonl", docs)
    return root


def stored(ledger: Path) -> dict[str, tuple[bytes, dict]]:
    """Each stored result set's bytes and its meta.json without the creation time."""
    out = {}
    for f in sorted(ledger.rglob("evals/*/results.jsonl")):
        meta = json.loads((f.parent / "meta.json").read_text())
        meta.pop("created")
        out[f.parent.name] = (f.read_bytes(), meta)
    return out


def nothing_left(ledger: Path) -> None:
    with Ledger(ledger) as book:
        assert book.runs() == []
    assert list((ledger / ".staging").iterdir()) == []
    assert list((ledger / "runs").iterdir()) == []


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lm")
    return lm_out(
        d,
        mc=[mc_doc(i) for i in range(30)],
        gen=[gen_doc(i, f) for f in ("strict", "flexible") for i in range(10)],  # two filters, a metric left out
        odd=[mc_doc(i, k=2 + i % 2) for i in range(6)],  # choices vary in number: the row path
        mc4=[mc_doc(i, k=4) for i in range(12)],
    )


def test_the_pool_stores_the_serial_bytes_notes_and_counts(out, tmp_path, monkeypatch):
    results = {}
    for workers in ("0", "2"):
        monkeypatch.setenv(WORKERS_ENV, workers)
        (run,) = import_path(out, tmp_path / workers).runs
        results[workers] = (stored(tmp_path / workers), run.counts, run.fields, run.notes)
        assert not list((tmp_path / workers / ".staging").iterdir())
    assert results["0"] == results["2"]
    sets, counts, _, notes = results["2"]
    assert sorted(sets) == ["gen.flexible", "gen.strict", "mc", "mc4", "odd"]
    assert counts["results:mc"] == 60 and notes == [
        "gen.strict: not recomputable here, left out: bleu",
        "gen.flexible: not recomputable here, left out: bleu",
    ]


BAD_LINE = [mc_doc(0), mc_doc(1, target="x")]


@pytest.mark.parametrize(
    "files",
    [
        {"a": [mc_doc(i) for i in range(4)], "b": BAD_LINE},  # a row the row checker names (line and field)
        {"a": [mc_doc(i) for i in range(4)], "b": [mc_doc(0)], "c": ["not a document"]},
        {"a": [mc_doc(i) for i in range(4)], "b": [mc_doc(0), mc_doc(1), mc_doc(0)]},  # the row checker's error
    ],
    ids=["bad-target", "not-an-object", "same-id"],
)
def test_a_worker_task_error_is_the_serial_error_and_the_other_tasks_are_stored(files, tmp_path, monkeypatch):
    """A task that cannot be read is left out with its one-line error (#44), the same from a worker
    as from the serial path; the other tasks are stored, with the same bytes."""
    bad = next(t for t, docs in files.items() if docs == BAD_LINE or "not a document" in docs or len(docs) == 3)
    d = lm_out(tmp_path / "out", **files)
    results = []
    for workers in ("0", "2"):
        monkeypatch.setenv(WORKERS_ENV, workers)
        (run,) = import_path(d, tmp_path / workers).runs
        results.append((run.errors, run.counts, stored(tmp_path / workers)))
        assert not list((tmp_path / workers / ".staging").iterdir())
    assert results[0] == results[1]
    errors, counts, sets = results[0]
    (error,) = errors
    assert "\n" not in error and error.endswith(f"(task {bad}: not imported)")
    assert f"samples_{bad}_{STAMP}.jsonl:" in error or f"results '{bad}':" in error  # the file, or the set's row
    assert "field '" in error
    assert sorted(sets) == sorted(t for t in files if t != bad)


@pytest.mark.parametrize(
    "files",
    [
        {"a_b": [mc_doc(i) for i in range(4)], "a b": [mc_doc(i) for i in range(4)]},  # one set name twice
        {"a": BAD_LINE},  # the only task cannot be read
    ],
    ids=["same-set-name", "only-task"],
)
def test_a_worker_error_is_the_serial_error_and_nothing_is_stored(files, tmp_path, monkeypatch):
    d = lm_out(tmp_path / "out", **files)
    errors = []
    for workers in ("0", "2"):
        monkeypatch.setenv(WORKERS_ENV, workers)
        with pytest.raises(LedgerError) as info:
            import_path(d, tmp_path / workers)
        errors.append((type(info.value), re.sub(r"run \S+ already", "run ID already", str(info.value))))
        nothing_left(tmp_path / workers)
    assert errors[0] == errors[1]
    assert "\n" not in errors[0][1]


def test_a_task_missing_from_the_results_file_is_named_before_the_pool_is_asked(tmp_path, monkeypatch):
    d = lm_out(tmp_path / "out", a=[mc_doc(0)], b=[mc_doc(0)])
    write(d / f"samples_extra_{STAMP}.jsonl", [mc_doc(0)])
    monkeypatch.setenv(WORKERS_ENV, "2")
    with pytest.raises(RecordError, match=r"field 'results.extra' is missing \(samples_extra_"):
        import_path(d, tmp_path / "ledger")
    nothing_left(tmp_path / "ledger")


def test_encode_tasks_returns_the_error_of_the_failing_set(tmp_path):
    """What a worker runs, here in the test's process (coverage does not follow the workers)."""
    good = write(tmp_path / "good.jsonl", [mc_doc(i) for i in range(3)])
    args = (tmp_path / f"results_{STAMP}.json", "t", good, MC, {"acc,none": 0.5})
    sets = encode_tasks(lm_eval._task_rows, args, "lm-eval", "0.4", tmp_path / "part")
    assert [(s.name, s.rows, s.error) for s in sets] == [("t", 6, None)]
    assert sets[0].path == tmp_path / "part.0.jsonl" and sets[0].meta["metrics"]["acc"]["value"] == 0.5
    bad = write(tmp_path / "bad.jsonl", BAD_LINE)
    (failed,) = encode_tasks(lm_eval._task_rows, (*args[:2], bad, *args[3:]), "lm-eval", None, tmp_path / "p")
    assert failed.name is None and isinstance(failed.error, RecordError) and failed.error.line == 2

    def tasks_then_a_bad_one(path: Path) -> list:
        (t,) = lm_eval._task_rows(path, "t", path, GEN, {})
        (u,) = lm_eval._task_rows(path, "u", path, GEN, {})
        u.name = "bad name!"  # a name the run refuses: the set's own error, after the first set
        u.metrics[0].rows.ids = [object()] * len(u.metrics[0].rows.ids)
        return [t, u]

    odd = write(tmp_path / "odd.jsonl", [mc_doc(i, k=2 + i % 2) for i in range(4)])  # rows, not columns
    (rows,) = encode_tasks(lm_eval._task_rows, (*args[:2], odd, *args[3:]), "lm-eval", None, tmp_path / "o")
    serial = lm_eval._metric_rows(odd, MC)["none"]
    assert rows.path.read_bytes() == b"".join(dumps_line(r) for m in serial.values() for r in m.rows)
    gen = write(tmp_path / "gen.jsonl", [gen_doc(i, "none") for i in range(3)])
    first, second = encode_tasks(tasks_then_a_bad_one, (gen,), "lm-eval", None, tmp_path / "q")
    assert first.error is None and first.rows == 6  # exact_match and f1 rows
    assert second.name == "bad name!" and isinstance(second.error, RecordError) and "field 'id'" in str(second.error)


def test_import_workers_from_the_environment(monkeypatch):
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert import_workers([1 << 20] * 3) == 0  # 3 MiB: below the threshold
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    assert import_workers([8 << 20] * 5) == 3  # one per core
    for raw, expected in (("0", 0), ("1", 0), ("2", 2), ("9", 5), ("auto", 3)):
        monkeypatch.setenv(WORKERS_ENV, raw)
        assert import_workers([8 << 20] * 5) == expected
    monkeypatch.setenv(WORKERS_ENV, "many")
    with pytest.raises(ImportSourceError, match=r"LABLEDGER_IMPORT_WORKERS must be a number"):
        import_workers([1])


def test_an_error_that_cannot_travel_keeps_its_message():
    err = UnknownNameError("metric", "f1score", ["f1"])
    back = portable_error(err)
    assert type(back) is LedgerError and str(back) == str(err)
    assert portable_error(ImportSourceError("x")).args == ("x",)


def _workers(pid: int) -> list[int]:
    """The processes forked from ``pid`` (the same command line: not a ``git`` it runs)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    out = []
    for c in children:
        try:
            if Path(f"/proc/{c}/cmdline").read_bytes() == cmdline:
                out.append(int(c))
        except OSError:
            pass
    return out


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(), reason="Linux /proc")
def test_a_killed_worker_ends_the_import_with_one_line_and_nothing_stored(tmp_path):
    docs = [mc_doc(i) for i in range(20)]
    d = lm_out(tmp_path / "out", a=docs, b=docs, c=docs)
    fifo = d / f"samples_b_{STAMP}.jsonl"
    content = fifo.read_bytes()
    fifo.unlink()
    os.mkfifo(fifo)  # the parent hashes what is written once; the worker that opens it again waits
    writer = threading.Thread(target=fifo.write_bytes, args=(content,), daemon=True)
    writer.start()
    ledger = tmp_path / "ledger"
    env = {**os.environ, WORKERS_ENV: "2", "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "labledger", "import", str(d), "--format", "lm-eval", "--ledger", str(ledger)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        writer.join(60)
        deadline = time.monotonic() + 60
        while len(workers := _workers(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert workers, "no worker process started"
        time.sleep(0.2)  # the other files' sets are done; the worker on the FIFO waits for a writer
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith("Error: ") and "worker process" in err, err
    assert "nothing was imported" in err and "Traceback" not in err
    nothing_left(ledger)


def test_a_source_hashed_in_threads_has_the_serial_hash(tmp_path, monkeypatch):
    from labledger.importers import source

    for i in range(5):
        (tmp_path / f"f{i}.txt").write_bytes(os.urandom(1000) * (i + 1))
    serial = Source(tmp_path, "x").sha256()
    monkeypatch.setattr(source, "HASH_THREADS_MIN_BYTES", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert Source(tmp_path, "x").sha256() == serial
    gone = Source(tmp_path, "x")
    (tmp_path / "f1.txt").unlink()
    (tmp_path / "f3.txt").unlink()
    with pytest.raises(ImportSourceError, match=r"f1.txt: cannot read"):  # the first in path order
        gone.sha256()
