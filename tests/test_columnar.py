"""The columnar paths (#19): the cache of result sets and record tables, the Arrow samples reader,
repeats read in one pass. Each equals the slow path exactly; a stale or torn cache is never read."""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import orjson
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labledger
from labledger.cli import main
from labledger.errors import CacheWarning, DamagedLineWarning, RecordError
from labledger.inputs import columnar
from labledger.inputs.results import TOLERANCE, read_results
from labledger.store.flat import records_to_table, sample_records
from labledger.store.record_columns import samples_table

HYP = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, str(folder))
    monkeypatch.setenv(columnar.MIN_BYTES_ENV, "0")
    return folder


def write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def entries(folder):
    return sorted(p.name for p in folder.glob("*.*") if not p.name.startswith(".")) if folder.exists() else []


# ------------------------------------------------------------------------------------------------
# Result sets


@st.composite
def result_rows(draw):
    kind = draw(st.sampled_from(["cls", "bin", "reg"]))
    n = draw(st.integers(1, 20))
    epochs = draw(st.integers(0, 3))  # 0: no repeats
    rows = []
    for i in range(n):
        task = draw(st.sampled_from(["t1", "t2"]))
        for e in range(max(epochs, 1)):
            row = {"id": f"i{i}", "task": task}
            if epochs:
                row["epoch"] = e
            if kind == "cls":
                w = [x + 1 for x in draw(st.lists(st.integers(0, 9), min_size=3, max_size=3))]
                row["probs"] = {k: w[j] / sum(w) for j, k in enumerate("abc")}
                row["gold"] = draw(st.sampled_from("abc"))
            elif kind == "bin":
                row["score"] = draw(st.floats(0, 1))
                row["gold"] = draw(st.booleans())
            else:
                row["gold"] = draw(st.floats(-3, 3))
                row["pred"] = draw(st.floats(-3, 3))
            if draw(st.booleans()):
                row["slices"] = {"s": draw(st.sampled_from(["u", "v"]))}
            if draw(st.booleans()):
                row["group"] = draw(st.sampled_from(["g1", "g2"]))
            if draw(st.booleans()):
                row["note"] = draw(st.sampled_from(["x", "y"]))
            rows.append(row)
    return rows


def assert_same_set(a, b):
    assert list(a) == list(b) and a.repeat_field == b.repeat_field and a.source == b.source
    for task in a:
        x, y = a[task], b[task]
        assert type(x) is type(y) and x.kind == y.kind and x.labels == y.labels and x.positive == y.positive
        assert x.ids.tolist() == y.ids.tolist() and x.lines.tolist() == y.lines.tolist()
        for f in ("gold_index", "pred_index", "probs", "score", "gold_value", "pred_value", "group", "repeat"):
            u, v = getattr(x, f), getattr(y, f)
            assert (u is None) == (v is None), f
            if u is not None:
                assert u.dtype == v.dtype, f
                np.testing.assert_array_equal(u, v, err_msg=f)
        assert {k: (c.tolist(), v) for k, (c, v) in x.slice_columns.items()} == {
            k: (c.tolist(), v) for k, (c, v) in y.slice_columns.items()
        }
        assert {k: list(x.extras[k]) for k in x.extras} == {k: list(y.extras[k]) for k in y.extras}


@pytest.mark.accelerator
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=result_rows())
def test_cached_result_set_equals_the_direct_read(tmp_path, cache_dir, rows):
    path = write(tmp_path / "r.jsonl", rows)
    direct = read_results(path, cache=False, repeats=True)
    stored = read_results(path, repeats=True)  # reads and stores
    assert len(entries(cache_dir)) >= 1
    cached = read_results(path, repeats=True)  # from the cache
    rows_path = read_results(path, engine="rows", repeats=True)
    for other in (stored, cached, rows_path):
        assert_same_set(direct, other)


@pytest.mark.accelerator
@pytest.mark.parametrize("kind", ["binary", "cls3"])
def test_eval_from_the_entrys_sorted_columns_equals_eval_from_jsonl(tmp_path, cache_dir, kind):
    """The entry keeps each sorted column's ascending order (#19): the cache-filling read hands it to
    its own evaluation, a later read takes it from the entry; the documents equal the JSONL one."""
    from labledger.analysis.evaluation import evaluate
    from labledger.inputs.results import given_sorts
    from labledger.metrics.classification import checked_order

    rng = np.random.default_rng(3)
    rows = []
    for i in range(400):
        if kind == "binary":
            s = int(rng.integers(0, 21)) / 20  # ties
            rows.append({"id": f"r{i}", "task": "t", "gold": "yes" if rng.random() < s else "no", "score": s})
        else:
            w = rng.integers(1, 6, 3).astype(float)
            rows.append(
                {"id": f"r{i}", "task": "t", "gold": "abc"[i % 3], "probs": dict(zip("abc", (w / w.sum()).tolist()))}
            )
    path = write(tmp_path / "r.jsonl", rows)
    pos = "yes" if kind == "binary" else None

    def doc(rs):
        return orjson.dumps(evaluate(rs, resamples=200).to_dict())

    want = doc(read_results(path, positive=pos, cache=False))
    filled = read_results(path, positive=pos)  # reads, sorts, stores
    assert given_sorts(filled["t"])
    assert doc(filled) == want
    cached = read_results(path, positive=pos)
    orders = given_sorts(cached["t"])
    assert sorted(orders) == ([1] if kind == "binary" else [0, 1, 2])
    assert all(not o.flags.writeable for o in orders.values())  # views of the mapped entry
    assert all(o.dtype == np.int32 for o in orders.values())  # 4-byte positions (format 7)
    assert all(checked_order(o, cached["t"].probs[:, j]) is not None for j, o in orders.items())  # used
    assert doc(cached) == want


@pytest.mark.accelerator
def test_a_stale_result_cache_is_rebuilt_even_at_the_same_size_and_time(tmp_path, cache_dir):
    rows = [{"id": i, "task": "t", "gold": "a", "probs": {"a": 0.25, "b": 0.75}} for i in range(50)]
    path = write(tmp_path / "r.jsonl", rows)
    assert read_results(path)["t"].probs[0].tolist() == [0.25, 0.75]
    [entry] = entries(cache_dir)
    st_before = path.stat()
    data = path.read_bytes().replace(b'{"a":0.25,"b":0.75}', b'{"a":0.75,"b":0.25}', 1)
    path.write_bytes(data)
    os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))  # same size, same mtime
    assert path.stat().st_size == st_before.st_size
    assert read_results(path)["t"].probs[0].tolist() == [0.75, 0.25]
    assert entries(cache_dir) == [entry]  # the one entry of this file, rewritten
    assert read_results(path)["t"].probs[0].tolist() == [0.75, 0.25]


@pytest.mark.accelerator
def test_a_torn_or_foreign_cache_entry_is_never_read(tmp_path, cache_dir):
    rows = [{"id": i, "task": "t", "gold": "no", "score": i / 100} for i in range(100)]
    path = write(tmp_path / "r.jsonl", rows)
    want = read_results(path, positive="no", cache=False)
    read_results(path, positive="no")
    [entry] = cache_dir.glob("*.arrow")  # a result set's entry: an Arrow IPC file
    whole = entry.read_bytes()
    (cache_dir / ".tmp-crashed.arrow").write_bytes(whole[:100])  # a writer killed mid-write
    table = pa.ipc.open_file(entry).read_all()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:  # the same columns and stamp, no digest
        writer.write_table(table)
    for damaged in (
        whole[: len(whole) // 2],  # torn
        whole[:-1],  # torn in the last byte
        b"",
        b"not an entry at all",
        b"LBLCOLS2" + b"\0" * 40 + bytes(8) + (10).to_bytes(8, "little") + b"LBLCOLS2",  # the layout before #42
        sink.getvalue().to_pybytes(),  # an Arrow file of the entry's data that no digest vouches for
    ):
        entry.write_bytes(damaged)
        assert_same_set(want, read_results(path, positive="no"))
        assert entry.read_bytes() == whole  # rebuilt
        assert_same_set(want, read_results(path, positive="no"))  # and read back


def _places(whole: bytes) -> dict[str, int]:
    """Where the data of each column of an entry starts in its bytes, from pyarrow's own read."""
    buf = pa.py_buffer(whole)
    batch = pa.ipc.open_file(buf).get_batch(0)
    return {
        name: column.flatten().buffers()[-1].address - buf.address
        for name, column in zip(batch.schema.names, batch.columns)
    }


@pytest.mark.accelerator
def test_an_entry_whose_bytes_changed_after_it_was_written_is_never_read(tmp_path, cache_dir):
    """Every byte of a columns entry before its digest, data and schema alike, is under the digest
    written with it (#19), and the schema pyarrow reads from the footer must be the one under it:
    one flipped bit in a sort order, a probability, a tie start, the Arrow ids, the padding, the
    meta, the footer's copy of the schema or the digest itself is a miss, and the entry is rebuilt
    from the JSONL. Before, a changed order was caught by its check against the column, but a
    changed probability was read as it was."""
    from labledger.inputs import result_entry

    rng = np.random.default_rng(5)
    rows = []
    for i in range(300):
        w = np.round(rng.dirichlet([1, 1, 1]), 2)  # ties: the entry holds tie starts
        rows.append(
            {"id": f"r{i}", "task": "t", "gold": "abc"[i % 3], "probs": dict(zip("abc", (w / w.sum()).tolist()))}
        )
    path = write(tmp_path / "r.jsonl", rows)
    want = read_results(path, cache=False)
    read_results(path)
    [entry] = cache_dir.glob("*.arrow")
    whole = entry.read_bytes()
    kind = result_entry.entry_kind(TOLERANCE, None, False)
    header = columnar.cached_columns(path, kind, folder=cache_dir)
    assert {"t0.o0", "t0.g0", "t0.probs"} <= set(header.arrays)  # orders with their tie starts
    found = _places(whole)
    places = {name: found[name] + 5 for name in ("t0.o0", "t0.g0", "t0.probs", "t0.gold_index", "t0.id")}
    places |= {
        "padding": found["t0.gold_index"] + 300,  # (300 int8 values, padded to a multiple of 8)
        "meta": whole.index(b'"tasks"') + 2,  # the schema under the digest
        "footer's schema": whole.rindex(b'"tasks"') + 2,
        "footer's key": whole.rindex(b"xxh3_128:") + 12,
        "digest": whole.rindex(columnar._DIGEST) + len(columnar._DIGEST) + 10,
    }
    assert whole[found["t0.gold_index"] + 300] == 0
    for what, at in places.items():
        damaged = bytearray(whole)
        damaged[at] ^= 0x10
        entry.write_bytes(bytes(damaged))
        assert columnar.cached_columns(path, kind, folder=cache_dir) is None, what
        assert_same_set(want, read_results(path))  # from the JSONL
        assert entry.read_bytes() == whole, what  # and the entry rebuilt
    assert columnar.cached_columns(path, kind, folder=cache_dir) is not None


@pytest.mark.accelerator
def test_an_entry_is_a_standard_arrow_file_that_plain_pyarrow_reads(tmp_path, cache_dir):
    """A columns entry is an Arrow IPC file (#42): pyarrow alone, knowing nothing of labledger,
    reads every column (a one-row table of lists, one list per column) and the entry's meta."""
    rows = [{"id": f"r{i}", "task": "t", "gold": "ab"[i % 2], "probs": {"a": 0.25, "b": 0.75}} for i in range(40)]
    rows += [{"id": f"s{i}", "task": "u", "gold": "yes" if i % 3 else "no", "score": i / 30} for i in range(30)]
    path = write(tmp_path / "r.jsonl", rows)
    want = read_results(path, positive="yes", cache=False)
    read_results(path, positive="yes")
    [entry] = cache_dir.glob("*.arrow")
    table = pa.ipc.open_file(entry).read_all()  # (a path, as a user would give it)
    assert table.num_rows == 1
    col = {name: table.column(name).to_pylist()[0] for name in table.column_names}
    assert col["t0.id"] == [f"r{i}" for i in range(40)] and col["t1.id"] == [f"s{i}" for i in range(30)]
    assert col["t0.gold_index"] == want["t"].gold_index.tolist()
    assert col["t0.probs"] == want["t"].probs.reshape(-1).tolist()  # the (n, K) matrix row by row
    assert col["t1.score"] == want["u"].score.tolist()
    meta = table.schema.metadata
    assert orjson.loads(meta[b"labledger.meta"])["tasks"][1]["task"] == "u"
    assert meta[b"labledger.source"].decode() == os.path.realpath(path)
    assert table.schema.field("t1.score").metadata == {b"labledger.numpy_dtype": b"<f8"}
    with pa.memory_map(str(entry)) as f:  # memory-mapped: the values are the file's bytes
        values = pa.ipc.open_file(f).get_batch(0).column("t1.score").flatten()
        assert values.to_numpy(zero_copy_only=True).tolist() == want["u"].score.tolist()


@pytest.mark.accelerator
def test_an_entry_of_the_layout_before_42_is_rebuilt_and_removed(tmp_path, cache_dir):
    """The private ``LBLCOLS2`` file an older labledger wrote (``.cols``) is never read: the next
    read of its source parses the JSONL, writes the Arrow entry and removes the old file; ``prune``
    with orphans removes such a file too, and the bound counts it meanwhile."""
    rows = [{"id": i, "task": "t", "gold": "no", "score": i / 100} for i in range(100)]
    path = write(tmp_path / "r.jsonl", rows)
    want = read_results(path, positive="no", cache=False)
    read_results(path, positive="no")
    [entry] = cache_dir.glob("*.arrow")
    entry.unlink()
    old = entry.with_suffix(".cols")
    old.write_bytes(b"LBLCOLS2" + b"\0" * 64 + b"LBLCOLS2")
    assert [f.path for f in columnar.cache_files(cache_dir)] == [old]  # counted against the bound
    assert columnar.entry_source(old) is None
    assert_same_set(want, read_results(path, positive="no"))
    assert entries(cache_dir) == [entry.name] and not old.exists()
    other = cache_dir / "results-0000000000000000.cols"
    other.write_bytes(b"LBLCOLS2" + b"\0" * 64 + b"LBLCOLS2")
    assert [f.path for f in columnar.prune_cache(cache_dir, orphans=True, max_bytes=0)] == [other]
    assert entries(cache_dir) == [entry.name]


@pytest.mark.accelerator
def test_an_entrys_orders_come_with_the_tie_starts_of_their_columns(tmp_path, cache_dir):
    """A result set's entry keeps each sorted column's tie starts beside its order (entry format 10):
    read back, they are the column's own (kernels' tie_starts of its values in that order; None
    where no two tie), and an evaluation uses them as they are, neither checking the order nor
    walking it again (#19), with the JSONL read's documents."""
    from labledger.analysis.evaluation import evaluate
    from labledger.inputs.results import given_sorts, given_ties
    from labledger.metrics import classification
    from labledger.metrics.classification import tie_starts

    rng = np.random.default_rng(8)
    rows = []
    for i in range(2_000):
        p = rng.dirichlet([1, 1, 1])
        a = round(float(p[0]), 2)  # column a ties, b and c do not
        b = float(p[1] / (p[1] + p[2])) * (1 - a)
        rows.append({"id": i, "task": "t", "gold": "abc"[i % 3], "probs": {"a": a, "b": b, "c": 1 - a - b}})
    path = write(tmp_path / "r.jsonl", rows)
    want = orjson.dumps(evaluate(read_results(path, cache=False), resamples=100).to_dict())
    read_results(path)  # (fills the cache)
    rs = read_results(path)
    cached = rs["t"]
    orders, ties = given_sorts(cached), given_ties(cached)
    assert sorted(ties) == sorted(orders) == [0, 1, 2]
    for j, order in orders.items():
        values = cached.probs[order, j]
        assert (np.diff(values) >= 0).all()
        found = tie_starts(values)
        assert (ties[j] is None) == (found is None) == (j != 0)
        if found is not None:
            assert ties[j].tolist() == found.tolist() and ties[j].dtype == np.int32
    calls = []
    real = classification.checked_order
    try:
        classification.checked_order = lambda *a: calls.append(a) or real(*a)
        got = orjson.dumps(evaluate(rs, resamples=100).to_dict())
    finally:
        classification.checked_order = real
    assert got == want and calls == []


@pytest.mark.accelerator
def test_an_entry_of_another_layout_is_rewritten_in_place(tmp_path, cache_dir, monkeypatch):
    """A new version's entry layout is not part of the entry's name: the old entry is not read, and
    the new one replaces it in the same file (no orphan left in the folder)."""
    from labledger.inputs import result_entry

    rows = [{"id": i, "task": "t", "gold": "ab"[i % 2], "probs": {"a": 0.25, "b": 0.75}} for i in range(30)]
    path = write(tmp_path / "r.jsonl", rows)
    want = read_results(path, cache=False)
    read_results(path)
    [entry] = entries(cache_dir)
    kind = result_entry.entry_kind(TOLERANCE, None, False)
    assert columnar.cached_columns(path, kind, folder=cache_dir).meta["format"] == result_entry.ENTRY_FORMAT
    monkeypatch.setattr(result_entry, "ENTRY_FORMAT", result_entry.ENTRY_FORMAT + 1)  # a newer version
    decoded = []
    real_decode = result_entry.decode
    monkeypatch.setattr(result_entry, "decode", lambda *a, **k: decoded.append(real_decode(*a, **k)) or decoded[-1])
    assert_same_set(want, read_results(path))
    assert decoded == [None]  # the old layout was not read
    assert entries(cache_dir) == [entry]  # rewritten in place
    assert columnar.cached_columns(path, kind, folder=cache_dir).meta["format"] == result_entry.ENTRY_FORMAT
    assert_same_set(want, read_results(path))  # and read back
    assert decoded[-1] is not None


@pytest.mark.accelerator
def test_the_cache_is_keyed_by_the_reading_parameters_and_can_be_off(tmp_path, cache_dir, monkeypatch):
    rows = [{"id": i, "task": "t", "gold": ["x", "y"][i % 2], "score": 0.5 + i / 1000} for i in range(40)]
    path = write(tmp_path / "r.jsonl", rows)
    assert read_results(path, positive="x")["t"].positive == "x"
    assert read_results(path, positive="y")["t"].positive == "y"
    assert len(entries(cache_dir)) == 2
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, "off")
    other = write(tmp_path / "s.jsonl", rows)
    read_results(other, positive="x")
    assert len(entries(cache_dir)) == 2
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("the cache folder cannot be made here")
    with pytest.warns(CacheWarning, match="could not be written"):
        assert read_results(other, positive="x")["t"].n == 40  # an unwritable cache is skipped, said once


@pytest.mark.accelerator
def test_deferred_entries_are_written_in_threads_and_waited_for(tmp_path, cache_dir, monkeypatch):
    """Between defer_writes and wait_for_writes (the CLI's eval/compare/calibrate) a result set's entry
    is written in a thread: a read of it meanwhile waits and reads it whole, wait_for_writes leaves
    it on disk and writes in the caller again; an unwritable folder is still said once, and an error
    that is not the cache's own reaches the caller there. The CLI leaves its entry written."""
    rows = [{"id": i, "task": "t", "gold": ["x", "y"][i % 2], "score": 0.5 + i / 1000} for i in range(40)]
    path = write(tmp_path / "r.jsonl", rows)
    written = threading.Event()
    real = columnar._write_entry

    def slow(folder, entry, fill):
        written.wait(5)  # held until the reader has returned
        return real(folder, entry, fill)

    monkeypatch.setattr(columnar, "_write_entry", slow)
    columnar.defer_writes()
    try:
        first = read_results(path, positive="x")
        assert [t.name for t in threading.enumerate() if t.name == "labledger-cache-write"]  # under way
        assert entries(cache_dir) == []
        written.set()
        again = read_results(path, positive="x")  # waits for the write, then reads the entry
        assert entries(cache_dir) and not again["t"].score.flags.writeable  # mapped from the entry
        assert_same_set(first, again)
    finally:
        columnar.wait_for_writes()
    assert columnar._deferred is None  # writes in the caller again, none pending

    monkeypatch.setattr(columnar, "_write_entry", real)
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("the cache folder cannot be made here")
    columnar.defer_writes()
    with pytest.warns(CacheWarning, match="could not be written"):
        read_results(write(tmp_path / "s.jsonl", rows), positive="x")
        columnar.wait_for_writes()

    def broken(folder, entry, fill):
        raise RuntimeError("a bug in the writer")

    monkeypatch.setattr(columnar, "_write_entry", broken)
    columnar.defer_writes()
    read_results(write(tmp_path / "u.jsonl", rows), positive="x")
    with pytest.raises(RuntimeError, match="a bug in the writer"):
        columnar.wait_for_writes()

    monkeypatch.setattr(columnar, "_write_entry", real)
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, str(cache_dir))
    before = entries(cache_dir)
    result = CliRunner().invoke(main, ["eval", str(write(tmp_path / "v.jsonl", rows)), "--positive", "x", "--json"])
    assert result.exit_code == 0, result.output
    assert len(entries(cache_dir)) == len(before) + 1 and columnar._deferred is None


@pytest.mark.accelerator
def test_a_prefetched_key_is_used_once_and_never_for_a_changed_file(tmp_path, cache_dir, monkeypatch):
    """The CLI hashes its files in a thread while it starts (prefetch_key): the key is the file's, it
    is taken once, and a file changed since (even at the same size and mtime) is hashed again."""
    rows = [{"id": i, "task": "t", "gold": "a", "probs": {"a": 0.25, "b": 0.75}} for i in range(50)]
    path = write(tmp_path / "r.jsonl", rows)
    assert columnar.prefetch_key(path) and columnar.prefetching(path)
    assert columnar.file_key(path) == columnar.content_key(path.read_bytes())
    assert not columnar.prefetching(path)  # taken
    assert columnar.prefetch_key(path)
    assert read_results(path)["t"].probs[0].tolist() == [0.25, 0.75]  # the JSONL read takes it too
    assert not columnar.prefetching(path)
    [entry] = entries(cache_dir)  # stored under it
    assert columnar.prefetch_key(path)
    assert read_results(path)["t"].probs[0].tolist() == [0.25, 0.75]  # from the entry, by the prefetched key
    assert not columnar.prefetching(path)
    assert columnar.prefetch_key(path)
    st_before = path.stat()
    path.write_bytes(path.read_bytes().replace(b'{"a":0.25,"b":0.75}', b'{"a":0.75,"b":0.25}', 1))
    os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))  # same size, same mtime
    assert read_results(path)["t"].probs[0].tolist() == [0.75, 0.25]  # hashed again: the entry was stale
    assert entries(cache_dir) == [entry]
    assert not columnar.prefetch_key(tmp_path / "missing.jsonl") and not columnar.prefetch_key(tmp_path)
    monkeypatch.setenv(columnar.CACHE_DIR_ENV, "off")
    assert not columnar.prefetch_key(path)  # no cache: nothing to hash for


def test_a_file_cut_shorter_while_its_key_is_hashed_gives_no_key_and_no_signal(tmp_path):
    """A source rewritten by another process while its key is hashed (the CLI hashes it in a thread
    as it starts) gives no key. Through a memory map the reader died of SIGBUS at the first page past
    the new end (a test worker was lost to it): run in a process of its own, cut at the first window."""
    import subprocess
    import sys

    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"id": 1}\n' * 400_000)  # 4 MB: several windows of 64 KiB
    script = f"""
import xxhash
from labledger.inputs import columnar
real = xxhash.xxh3_128
class Cutting:
    def __init__(self): self.h, self.cut = real(), False
    def update(self, data):
        if not self.cut:
            self.cut = True
            with open({str(path)!r}, "r+b") as f:
                f.truncate(1000)  # another writer's rewrite, between this window's read and its hash
        self.h.update(data)
    def hexdigest(self): return self.h.hexdigest()
columnar.xxhash.xxh3_128 = Cutting
print(columnar.file_key({str(path)!r}, window=1 << 16))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "None"
    assert columnar.file_key(path) == columnar.content_key(path.read_bytes())  # the file as it is now


def test_small_files_are_not_cached_by_default(tmp_path, cache_dir, monkeypatch):
    monkeypatch.delenv(columnar.MIN_BYTES_ENV)
    path = write(tmp_path / "r.jsonl", [{"id": 1, "task": "t", "gold": 1.0, "pred": 0.5}])
    read_results(path)
    assert entries(cache_dir) == []


# ------------------------------------------------------------------------------------------------
# Repeats in the reader


def test_repeats_are_read_in_one_pass_by_both_engines(tmp_path):
    rows = [
        {"id": i, "task": "t", "gold": "y", "pred": "yn"[(i + e) % 2], "epoch": e} for i in range(5) for e in range(3)
    ]
    path = write(tmp_path / "r.jsonl", rows)
    for engine in ("auto", "rows"):
        rs = read_results(path, repeats=True, engine=engine)
        assert rs.repeat_field == "epoch" and rs["t"].repeat.tolist() == [r["epoch"] for r in rows]
        with pytest.raises(RecordError, match=r"r.jsonl:2: field 'id' duplicate id '0' in task 't' \(also on line 1\)"):
            read_results(path, engine=engine)  # without repeats=True: the error it always was
    bin_rows = [{**r, "score": 0.7, "gold": "y"} for r in rows for r in [{k: v for k, v in r.items() if k != "pred"}]]
    path = write(tmp_path / "b.jsonl", bin_rows)
    a, b = read_results(path, repeats=True, positive="y"), read_results(path, repeats=True, positive="y", engine="rows")
    assert_same_set(a, b)
    # unique ids with an epoch field: a plain set, the epoch an extra field
    plain = read_results(write(tmp_path / "p.jsonl", rows[::3]), repeats=True)
    assert plain.repeat_field is None and plain["t"].repeat is None


def test_a_repeat_that_does_not_explain_a_duplicate_names_its_line(tmp_path):
    rows = [{"id": 1, "task": "t", "gold": "y", "pred": "y", "epoch": 0}] * 2
    path = write(tmp_path / "r.jsonl", rows)
    for engine in ("auto", "rows"):
        with pytest.raises(RecordError, match=r"r.jsonl:2: field 'id' duplicate id '1' in task 't' with epoch 0"):
            read_results(path, repeats=True, engine=engine)
    rows = [
        {"id": 1, "task": "t", "gold": "y", "pred": "y", "epoch": 0},
        {"id": 1, "task": "t", "gold": "y", "pred": "n"},
    ]
    with pytest.raises(RecordError, match=r"r.jsonl:2: field 'id' duplicate id '1'"):
        read_results(write(path, rows), repeats=True)


def test_evaluate_repeats_of_a_set_equals_evaluate_repeats_of_the_rows(tmp_path):
    from labledger.analysis.repeats import evaluate_repeats

    rows = [
        {"id": i, "task": "t", "gold": "y", "pred": "yn"[(i * 7 + e) % 3 == 0], "epoch": e}
        for i in range(12)
        for e in range(2)
    ]
    path = write(tmp_path / "r.jsonl", rows)
    a = evaluate_repeats(rows, metrics=["exact_match"], resamples=20)
    b = evaluate_repeats(read_results(path, repeats=True), metrics=["exact_match"], resamples=20)
    assert a == b


# ------------------------------------------------------------------------------------------------
# Batch records: the Arrow samples reader and the table cache

LABELS = ("-1", "0", "+1")


@st.composite
def batch_records(draw):
    n = draw(st.integers(1, 6))
    shape = draw(st.sampled_from(["plain", "plain", "nested_input", "missing_label", "bool_gold", "extra_key"]))
    recs = []
    for k in range(1, n + 1):
        samples = []
        for i in range(draw(st.integers(0 if k > 1 else 1, 4))):
            w = [x + 1 for x in draw(st.lists(st.integers(0, 9), min_size=3, max_size=3))]
            s = {
                "id": f"s{k}-{i}",
                "input": draw(st.text(max_size=8)),
                "gold": draw(st.sampled_from(LABELS)),
                "probabilities": {lab: w[j] / sum(w) for j, lab in enumerate(LABELS)},
                "cross_entropy": draw(st.floats(0, 5)),
            }
            if shape == "nested_input" and draw(st.booleans()):
                s["input"] = {"text": s["input"], "n": i}
            if shape == "missing_label" and i == 1:
                del s["probabilities"]["0"]
            if shape == "bool_gold" and i == 0:
                s["gold"] = True
            if shape == "extra_key" and k == n:
                s["source"] = "late"
            samples.append(s)
        loss = draw(st.one_of(st.none(), st.floats(0, 3), st.integers(0, 3)))
        recs.append({"microbatch": k, "optimizer_step": k, "loss": loss, "time": 1.5e9 + k, "samples": samples})
    return recs


@HYP
@given(recs=batch_records())
def test_arrow_samples_table_equals_the_dict_path(tmp_path, recs):
    data = b"".join(orjson.dumps(r) + b"\n" for r in recs)
    slow = records_to_table(sample_records(iter(recs)))
    fast = samples_table(data)
    if fast is not None:
        assert fast.schema == slow.schema and fast.equals(slow)
    samples = [s for r in recs for s in r["samples"]]
    plain = all(isinstance(s["input"], str) and len(s["probabilities"]) == 3 and s["gold"] is not True for s in samples)
    if plain and not any("source" in s for s in samples) and all(r["samples"] for r in recs):
        assert fast is not None  # the shape the ledger writes is read by the fast path


@pytest.fixture
def finished_run(tmp_path):
    ledger = tmp_path / "ledger"
    with labledger.start_run("r", ledger=ledger) as run:
        for k in range(1, 21):
            run.log_batch(
                {
                    "microbatch": k,
                    "loss": 0.5,
                    "batch_size": 2,
                    "samples": [
                        {
                            "id": f"{k}-{i}",
                            "gold": "a",
                            "probabilities": {"a": 0.5, "b": 0.5},
                            "cross_entropy": 0.6931472,
                        }
                        for i in range(2)
                    ],
                }
            )
        run.log(step=1, loss=0.5)
    return labledger.open_ledger(ledger).run(run.id)


def test_run_tables_from_the_cache_equal_the_dict_path_and_go_stale(finished_run, cache_dir):
    view = finished_run
    for what in ("samples", "batches", "scalars"):
        want = records_to_table(view.records(what))
        assert view.table(what).equals(want)  # built (and stored)
        assert view.table(what).equals(want)  # from the cache
    assert len(entries(cache_dir)) == 3
    path = view.dir / "batches.jsonl"
    st0 = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"loss":0.5', b'"loss":0.7', 1))
    os.utime(path, ns=(st0.st_atime_ns, st0.st_mtime_ns))
    table = view.table("samples")
    assert table.column("loss").to_pylist()[:3] == [0.7, 0.7, 0.5] and table.equals(
        records_to_table(view.records("samples"))
    )
    assert view.dataframe("samples")["loss"].tolist()[:3] == [0.7, 0.7, 0.5]


def test_damaged_lines_are_reported_on_every_read_and_never_cached(finished_run, cache_dir):
    path = finished_run.dir / "batches.jsonl"
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[:3], b'{"microbatch": 99, "sampl', *lines[3:]]))
    for _ in range(2):
        with pytest.warns(DamagedLineWarning, match="batches.jsonl:4: damaged line skipped"):
            table = finished_run.table("samples")
        assert table.num_rows == 40
    assert not any(n.startswith("table-samples") for n in entries(cache_dir))


def test_a_live_runs_table_is_not_cached(tmp_path, cache_dir):
    with labledger.start_run("live", ledger=tmp_path / "l") as run:
        run.log_batch({"microbatch": 1, "samples": [{"gold": "a"}]})
        view = labledger.open_ledger(tmp_path / "l").run(run.id)
        assert view.status == "running" and view.table("samples").num_rows == 1
        assert entries(cache_dir) == []


def test_samples_table_refuses_what_it_cannot_read_exactly():
    assert samples_table(b"") is None
    assert samples_table(b'{"microbatch": 1}\n\n{"microbatch": 2}\n') is None  # blank line
    assert samples_table(b"[1]\n") is None
    assert samples_table(b'{"microbatch": 1, "samples": [{"a": [1, 2]}]}\n') is None  # a list: JSON text
    t = samples_table(b'{"microbatch": 1, "samples": [{"a": 1}, {"a": 2}]}\n')
    assert t is not None and t.to_pydict() == {"microbatch": [1, 1], "sample_index": [0, 1], "a": [1, 2]}
    assert isinstance(t, pa.Table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert samples_table(b'{"microbatch": 1, "samples": [{"a": 1}]}\n{"microbatch": 2, "sa') is None


def test_export_parquet_copies_the_fresh_cache_entry(finished_run, cache_dir, tmp_path):
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from labledger.cli import main

    view = finished_run
    want = records_to_table(view.records("samples"))
    args = ["export", view.id, "--what", "samples", "--format", "parquet", "--ledger", str(view.dir.parents[1])]
    for out in (tmp_path / "a.parquet", tmp_path / "b.parquet"):  # built and stored; then copied
        res = CliRunner().invoke(main, [*args, "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert pq.read_table(out).replace_schema_metadata(None).equals(want)
    assert view.cached_parquet("samples") is not None
    (view.dir / "batches.jsonl").write_bytes(b"")  # the run's file changed: the entry is stale
    assert view.cached_parquet("samples") is None


@pytest.mark.accelerator
def test_a_runs_samples_table_imports_no_pandas(finished_run, tmp_path):
    """The samples table from the batch file's Arrow columns (sample positions and index from the
    list offsets) imports no pandas: Arrow's to_numpy and pa.array of numpy values do where it is
    installed (~0.28 s, #19); its rows are the dict path's."""
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(labledger.__file__).resolve().parents[1])
    code = (
        "import sys, labledger\n"
        "t = labledger.open_ledger(sys.argv[1]).run(sys.argv[2]).table('samples')\n"
        "print(t.num_rows, t.column('sample_index').to_pylist()[:4], 'pandas' in sys.modules)\n"
    )
    ledger = tmp_path / "ledger"
    res = subprocess.run(
        [sys.executable, "-c", code, str(ledger), finished_run.id],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src, "LABLEDGER_CACHE_DIR": "off"},
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["40", "[0,", "1,", "0,", "1]", "False"]


def test_a_columns_entry_keeps_arrow_columns_of_any_type_and_length(tmp_path):
    """Any Arrow column an entry is given comes back equal, from the entry and from plain pyarrow:
    several chunks, a slice, a dictionary (an Arrow file holds one per column), nested types,
    nulls; numeric arrays of every width, empty ones too, as read-only numpy views."""
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"{}\n")
    key = columnar.content_key(b"{}\n")
    arrow = {
        "chunks": pa.chunked_array([["a", "b"], [None, "d"]]),
        "slice": pa.array(["x", "y", "z", "w"]).slice(1, 2),
        "dict": pa.array(["p", "q", "p", None]).dictionary_encode(),
        "nested": pa.array([{"k": [1, 2]}, None, {"k": []}]),
        "empty": pa.array([], pa.string()),
    }
    arrays = {
        "i8": np.array([-1, 2], np.int8),
        "u16": np.arange(5, dtype=np.uint16),
        "f4": np.linspace(0, 1, 7, dtype=np.float32),
        "i64": np.arange(10, dtype=np.int64)[::3],  # not contiguous
        "none": np.empty(0, np.float64),
    }
    assert columnar.store_columns(src, "demo", key, {"x": [1, None]}, arrays, arrow, folder=tmp_path / "c")
    found = columnar.cached_columns(src, "demo", folder=tmp_path / "c", key=key)
    assert found.meta == {"x": [1, None]}
    for name, want in arrays.items():
        got = found.arrays[name]
        assert got.dtype == want.dtype and got.tolist() == want.tolist() and not got.flags.writeable, name
    table = pa.ipc.open_file(columnar.entry_path(src, "demo", tmp_path / "c", "columns")).read_all()
    for name, want in arrow.items():
        plain = want.combine_chunks() if isinstance(want, pa.ChunkedArray) else want
        assert found.arrow(name).equals(plain), name
        assert table.column(name).to_pylist() == [plain.to_pylist()], name
    assert table.column("u16").to_pylist() == [list(range(5))]
