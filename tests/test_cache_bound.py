"""The columnar cache's folder is bounded and can be shown and freed (#19): after each write the
entries used least recently go until it holds at most ``$LABLEDGER_CACHE_MAX_BYTES``, a read marks
an entry used, a killed writer's temporary file goes once stale, and ``labledger cache
info/prune/clear`` (and their Python functions) show and free it. Real files, a real CLI."""

from __future__ import annotations

import os
import time

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from labledger.cli import main
from labledger.inputs import columnar
from labledger.inputs.results import read_results


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, str(folder))
    monkeypatch.setenv(columnar.MIN_BYTES_ENV, "0")
    monkeypatch.delenv(columnar.MAX_BYTES_ENV, raising=False)
    return folder


def _results(path, seed, n=400):
    rng = np.random.default_rng(seed)
    rows = [
        {"id": f"i{k}", "task": "t", "gold": "yes" if g else "no", "score": float(s)}
        for k, (g, s) in enumerate(zip(rng.random(n) < 0.4, np.round(rng.random(n), 3)))
    ]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _entries(folder):
    return [f for f in columnar.cache_files(folder) if not f.temporary]


def _eval(path):
    result = CliRunner().invoke(main, ["eval", str(path), "--positive", "yes", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return orjson.loads(result.output)


def test_each_write_keeps_the_folder_under_its_bound_least_recently_used_first(tmp_path, cache_dir, monkeypatch):
    """Three files read in turn into a cache bounded at two entries: the third write removes the
    entry used least recently. A read of the first (a cache hit) marks it used, so the second goes,
    not the first; the evaluation of a file whose entry went is the same document, read again."""
    files = [_results(tmp_path / f"r{k}.jsonl", k) for k in range(3)]
    first = _eval(files[0])
    (entry0,) = _entries(cache_dir)
    monkeypatch.setenv(columnar.MAX_BYTES_ENV, str(2 * entry0.bytes + entry0.bytes // 2))  # room for two
    _eval(files[1])
    (entry1,) = [f for f in _entries(cache_dir) if f.path != entry0.path]
    os.utime(entry0.path, (1000, 1000))  # the first used long ago, the second later
    os.utime(entry1.path, (2000, 2000))
    read_results(files[0], positive="yes", repeats=True)  # a hit, as eval reads it: the first is now the most recent
    assert _entries(cache_dir)[-1].path == entry0.path
    _eval(files[2])  # the write that passes the bound: the second goes
    kept = {f.path for f in _entries(cache_dir)}
    assert len(kept) == 2 and entry0.path in kept and entry1.path not in kept
    assert _eval(files[0]) == first  # from its entry
    monkeypatch.setenv(columnar.MAX_BYTES_ENV, "0")  # no bound
    _eval(files[1])  # read again from its JSONL, its entry written again
    assert len(_entries(cache_dir)) == 3


def test_prune_removes_stale_temporaries_and_never_the_entry_just_written(tmp_path):
    """A temporary file a killed writer left goes once STALE_TEMPORARY_S old, a younger one (a write
    in progress) stays; the entry just written stays even when it alone passes the bound."""
    folder = tmp_path / "c"
    folder.mkdir()
    now = time.time()
    old_tmp, young_tmp, entry = folder / ".tmp-a.arrow", folder / ".tmp-b.arrow", folder / "results-x.arrow"
    for p in (old_tmp, young_tmp, entry):
        p.write_bytes(b"x" * 100)
    os.utime(old_tmp, (now - columnar.STALE_TEMPORARY_S - 5,) * 2)
    removed = columnar.prune_cache(folder, max_bytes=10, keep=entry, now=now)
    assert [f.path for f in removed] == [old_tmp]
    assert sorted(f.path.name for f in columnar.cache_files(folder)) == [".tmp-b.arrow", "results-x.arrow"]
    assert [f.path for f in columnar.clear_cache(folder, now=now)] == [entry]  # the young temporary stays
    assert [f.path for f in columnar.clear_cache(folder, now=now + columnar.STALE_TEMPORARY_S + 5)] == [young_tmp]


def test_the_bound_from_the_environment(monkeypatch):
    monkeypatch.setenv(columnar.MAX_BYTES_ENV, "12345")
    assert columnar.max_cache_bytes() == 12345
    monkeypatch.setenv(columnar.MAX_BYTES_ENV, "lots")
    assert columnar.max_cache_bytes() == columnar.MAX_CACHE_BYTES
    monkeypatch.setenv(columnar.MAX_BYTES_ENV, "0")
    assert columnar.max_cache_bytes() == 0
    assert columnar.prune_cache(None, max_bytes=0) == []  # no folder (off): nothing to do


def test_cache_info_prune_and_clear_from_the_cli(tmp_path, cache_dir, monkeypatch):
    """``labledger cache info`` shows the folder, its entries and bound; ``prune --max-size`` frees
    the least recently used; ``clear`` frees the rest; each with ``--json``. A bad size is a usage
    error (exit 2) that removes nothing; with the cache off each says so."""
    runner = CliRunner()
    files = [_results(tmp_path / f"r{k}.jsonl", k) for k in range(2)]
    for f in files:
        _eval(f)
    info = orjson.loads(runner.invoke(main, ["cache", "info", "--json"]).output)
    assert info["folder"] == str(cache_dir) and info["on"] and info["entries"] == 2 and info["temporaries"] == 0
    assert info["bytes"] == sum(f.bytes for f in _entries(cache_dir))
    assert info["max_bytes"] == columnar.MAX_CACHE_BYTES
    shown = runner.invoke(main, ["cache", "info"]).output
    assert f"folder   {cache_dir}" in shown and "entries  2 (" in shown and "at most 20.0 GiB" in shown

    bad = runner.invoke(main, ["cache", "prune", "--max-size", "lots"])
    assert bad.exit_code == 2 and "'--max-size'" in bad.output and "is not a size" in bad.output
    assert len(_entries(cache_dir)) == 2

    one = min(f.bytes for f in _entries(cache_dir))
    pruned = runner.invoke(main, ["cache", "prune", "--max-size", str(one + 1), "--json"])
    doc = orjson.loads(pruned.output)
    assert pruned.exit_code == 0 and doc["removed_entries"] == 1 and doc["entries"] == 1
    cleared = runner.invoke(main, ["cache", "clear"])
    assert (
        cleared.exit_code == 0
        and cleared.output.startswith("removed 1 entry (")
        and "holds 0 (0 bytes)" in cleared.output
    )
    assert _entries(cache_dir) == []

    monkeypatch.setenv(columnar.CACHE_DIR_ENV, "off")
    for args in (["cache", "info"], ["cache", "prune"], ["cache", "clear"]):
        out = runner.invoke(main, args)
        assert out.exit_code == 0 and "the columnar cache is off" in out.output
    assert orjson.loads(runner.invoke(main, ["cache", "info", "--json"]).output)["on"] is False
    off = orjson.loads(runner.invoke(main, ["cache", "clear", "--json"]).output)
    assert off["on"] is False and off["folder"] is None and off["removed_entries"] == 0


def test_a_cache_folder_that_is_a_file_is_one_error_line(tmp_path, monkeypatch):
    """``LABLEDGER_CACHE_DIR`` naming a file: each command says so in one line, exit 1, no traceback."""
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, str(tmp_path / "file"))
    for args in (["cache", "info"], ["cache", "prune"], ["cache", "clear", "--json"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, result.output
        assert result.output.strip().splitlines() == [
            f"Error: the columnar cache folder {tmp_path / 'file'} cannot be used: Not a directory"
        ]


def test_entries_record_their_source_and_prune_removes_those_whose_source_is_gone(tmp_path, cache_dir):
    """Each entry records the file it was made from: ``cache info --entries`` lists them (the most
    recently used first), and ``cache prune`` removes the entries whose file is gone, whatever the
    bound; the write-time bound does not read entries. A record table's Parquet entry says it too."""
    import pyarrow as pa

    kept, gone = _results(tmp_path / "kept.jsonl", 1), _results(tmp_path / "gone.jsonl", 2)
    _eval(gone)
    _eval(kept)
    by_source = {columnar.entry_source(f.path): f.path for f in _entries(cache_dir)}
    assert set(by_source) == {str(kept.resolve()), str(gone.resolve())}
    assert columnar.store_table(pa.table({"a": [1]}), kept, "batches", "k", folder=cache_dir)
    assert columnar.entry_source(columnar.entry_path(kept, "batches", cache_dir)) == str(kept.resolve())
    gone.unlink()
    listed = CliRunner().invoke(main, ["cache", "info", "--entries"]).output.splitlines()
    assert any(line.endswith(f"{gone.resolve()}  (source gone)") for line in listed)
    doc = orjson.loads(CliRunner().invoke(main, ["cache", "info", "--entries", "--json"]).output)
    assert [f["source"] for f in doc["files"]][-1] == str(gone.resolve())  # the least recently used last
    assert columnar.prune_cache(cache_dir) == []  # the bound alone: nothing to remove
    pruned = orjson.loads(CliRunner().invoke(main, ["cache", "prune", "--json"]).output)
    assert pruned["removed_entries"] == 1 and by_source[str(gone.resolve())].exists() is False
    assert {columnar.entry_source(f.path) for f in _entries(cache_dir)} == {str(kept.resolve())}
