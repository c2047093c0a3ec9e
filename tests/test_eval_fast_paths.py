"""The fast paths of ``eval`` (#19) against the exact forms they stand in for: the JSONL reader's
hashed id distinctness and single newline count, the one-table bootstrap categories and the count
cells shared by a task's metrics."""

from __future__ import annotations

import io
import itertools
import threading

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.errors import RecordError
from labledger.inputs import arrow
from labledger.inputs.arrow import HASH_ID_BYTES, Scan, arrow_lines, safe_for_arrow, scan_file, surely_distinct
from labledger.inputs.columnar import content_key
from labledger.inputs.results import label_index_type, read_results
from labledger.metrics.classification import label_prepared
from labledger.metrics.resample import _joint_categories, one_table_categories

FAST = settings(max_examples=40, deadline=None)

# short and long ids, a NUL and multi-byte letters, lengths on both sides of the 8-byte words
POOL = ["", "a", "b", "a\x00", "\x00a", "\xe9", "\U00010000", "abcdefgh", "abcdefgh1", "abcdefgh2", "b" * 17]
POOL += [f"id-{i}" for i in range(30)] + ["\xe9" * 9, "x" * 64, "x" * 63 + "y"]
ids_strategy = st.one_of(
    st.lists(st.sampled_from(POOL), max_size=40), st.lists(st.sampled_from(POOL), max_size=40, unique=True)
)


@FAST
@given(ids_strategy, st.integers(0, 5))
def test_surely_distinct_is_never_wrong_and_sees_distinct_ids(values, start):
    arr = pa.array(values, pa.string()).slice(min(start, len(values)))  # a slice: offsets not at 0
    part = values[min(start, len(values)) :]
    distinct = len(set(part)) == len(part)
    got = surely_distinct(arr)
    assert surely_distinct(arr, chunk=3) == got  # hashed in passes of 3 ids: the same hashes
    if got:
        assert distinct
    if distinct and all(len(v.encode()) <= HASH_ID_BYTES for v in part):
        assert got  # a 64-bit collision among 40 ids is not expected
    assert (len(pc.dictionary_encode(arr).dictionary) == len(arr)) == distinct  # the exact form agrees


def test_surely_distinct_edges():
    assert surely_distinct(pa.array([], pa.string())) and surely_distinct(pa.array(["a"]))
    assert not surely_distinct(pa.array(["", ""])) and surely_distinct(pa.array(["", "a"]))
    assert surely_distinct(pa.array(["a", "a\x00", "a\x00\x00"]))  # trailing NULs are not padding
    assert surely_distinct(pa.array(["abcdefgh1", "abcdefgh2"]))  # the second word decides
    assert not surely_distinct(pa.array(["x" * (HASH_ID_BYTES + 1), "y"]))  # too long: "maybe"
    assert not surely_distinct(pa.array([1, 2]))  # not strings
    assert not surely_distinct(pa.array(["a", None, "b"]))


lines_strategy = st.lists(
    st.sampled_from(['{"a": 1}', "null", "", '{"b": "\xe9"}', " {}", "{}"]), min_size=0, max_size=6
).flatmap(lambda ls: st.tuples(st.just(ls), st.booleans()))


@FAST
@given(lines_strategy)
def test_arrow_lines_equals_the_two_counts_it_replaced(case):
    lines, trailing = case
    data = "\n".join(lines).encode() + (b"\n" if trailing and lines else b"")
    want = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    got = arrow_lines(data)
    assert (got is not None) == safe_for_arrow(data)
    if got is not None:
        assert got == want
    with pytest.MonkeyPatch.context() as mp:  # windows of 3 bytes: cut at newlines, a long line whole
        mp.setattr(arrow, "SCAN_BYTES", 3)
        assert arrow_lines(data) == got


@FAST
@given(lines_strategy, st.integers(2, 24))
def test_scan_file_equals_arrow_lines_and_the_content_key_at_any_buffer_size(case, chunk):
    lines, trailing = case
    data = "\n".join(lines).encode() + (b"\n" if trailing and lines else b"")
    got = scan_file(io.BytesIO(data), chunk=chunk)
    want = arrow_lines(data)
    longest = max((len(line) + 1 for line in data.split(b"\n")), default=0)
    if want is not None and longest <= chunk:  # a line longer than the buffer leaves the fast path
        assert got == Scan(want, content_key(data))
    else:
        assert got == Scan(None, None)


def test_scan_file_checks_utf8_across_buffers_and_reads_short_reads_on():
    text = ('{"a": "\xe9\U00010000"}\n' * 7).encode()
    for chunk in range(26, 40):  # multi-byte letters on every side of a buffer's end
        assert scan_file(io.BytesIO(text), chunk=chunk) == Scan(7, content_key(text))
    assert scan_file(io.BytesIO(text[:-3] + b"\xff\n"), chunk=30) == Scan(None, None)

    class Trickle(io.RawIOBase):  # a stream that hands out 5 bytes per read
        def __init__(self, data):
            self.data = data

        def readinto(self, b):
            k = min(5, len(b))
            part, self.data = self.data[:k], self.data[k:]
            b[: len(part)] = part
            return len(part)

    assert scan_file(Trickle(text), chunk=64) == Scan(7, content_key(text))


def test_a_later_block_that_adds_a_field_is_parsed_whole_by_the_fast_path(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow, "BLOCK_BYTES", 1 << 10)  # many blocks of ~16 rows
    rows = [{"id": f"i{k}", "task": "t", "gold": "yes" if k % 3 else "no", "score": (k % 10) / 10} for k in range(400)]
    rows[350]["slices"] = {"lang": "fr"}  # unknown to the first block's schema
    rows[360]["score"] = 1  # an int in a float column
    _write(tmp_path / "r.jsonl", rows)
    fast = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes")
    slow = read_results(tmp_path / "r.jsonl", positive="yes", engine="rows", cache=False)
    assert fast is not None
    assert fast["t"].score.tolist() == slow["t"].score.tolist()
    assert fast["t"].slices["lang"].tolist() == slow["t"].slices["lang"].tolist()
    assert fast["t"].lines.tolist() == slow["t"].lines.tolist() == list(range(1, 401))


def test_a_line_longer_than_a_block_stays_on_the_fast_path(tmp_path, monkeypatch):
    monkeypatch.setattr(arrow, "BLOCK_BYTES", 1 << 10)
    monkeypatch.setattr(arrow, "WHOLE_BLOCK_BYTES", 1 << 14)
    rows = [{"id": f"i{k}", "task": "t", "gold": "yes" if k % 3 else "no", "score": (k % 10) / 10} for k in range(100)]
    rows[50]["note"] = "x" * 3000  # a line of three blocks
    _write(tmp_path / "r.jsonl", rows)
    fast = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes")
    slow = read_results(tmp_path / "r.jsonl", positive="yes", engine="rows", cache=False)
    assert fast is not None
    assert fast["t"].score.tolist() == slow["t"].score.tolist()
    assert fast["t"].extras["note"][50] == "x" * 3000
    rows[50]["note"] = "x" * 40000  # across two of the whole-file parse's block boundaries: the row reader's
    _write(tmp_path / "r.jsonl", rows)
    assert arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes") is None


@pytest.mark.parametrize("tasks", [1, 2])
def test_the_fast_readers_label_indices_are_of_the_row_readers_type(tmp_path, tasks):
    n = arrow.PACK_IDS_FROM + 10  # (the one-task path that sorts beside its check)
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), n)
    rows = [
        {
            "id": f"i{k}",
            "task": "bin" if k % tasks else "cls",
            "gold": ["a", "b", "c"][k % 3],
            "probs": dict(zip("abc", p[k].tolist())),
        }
        if k % tasks == 0
        else {"id": f"i{k}", "task": "bin", "gold": "yes" if k % 4 else "no", "score": float(p[k, 0])}
        for k in range(n)
    ]
    _write(tmp_path / "r.jsonl", rows)
    fast = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes")
    slow = read_results(tmp_path / "r.jsonl", positive="yes", engine="rows", cache=False)
    assert fast is not None and set(fast.tasks) == set(slow.tasks)
    for name, td in fast.tasks.items():
        for field in ("gold_index", "pred_index"):
            assert getattr(td, field).dtype == getattr(slow[name], field).dtype == label_index_type(len(td.labels))
            assert getattr(td, field).tolist() == getattr(slow[name], field).tolist()
    if tasks == 2:  # the binary task of the two
        bin_td = fast["bin"]
        assert bin_td.pred_index.tolist() == (bin_td.score >= 0.5).astype(int).tolist()


def test_a_file_rewritten_while_it_is_read_is_read_again_row_by_row(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    _write(path, [{"id": f"i{k}", "task": "t", "gold": "yes", "score": 0.5} for k in range(50)])
    parse = arrow._parse

    def rewritten_after_the_scan(f, n_lines):
        _write(path, [{"id": "new", "task": "t", "gold": "no", "score": 0.25}])  # in place: same inode
        return parse(f, n_lines)

    monkeypatch.setattr(arrow, "_parse", rewritten_after_the_scan)
    assert arrow.read_arrow(path, "r.jsonl", 1e-6, "yes") is None  # sizes differ: not this fast path
    rs = read_results(path, positive="yes", cache=False)  # the row reader reads what is there now
    assert rs["t"].ids.tolist() == ["new"] and rs["t"].score.tolist() == [0.25]


def _write(path, rows):
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")


def test_repeated_ids_across_tasks_are_allowed_and_within_a_task_refused(tmp_path):
    rows = [{"id": f"i{k}", "task": t, "gold": "yes", "score": 0.5} for t in ("a", "b") for k in range(5)]
    _write(tmp_path / "ok.jsonl", rows)
    rs = read_results(tmp_path / "ok.jsonl", positive="yes", cache=False)
    assert rs["a"].n == rs["b"].n == 5 and rs["b"].ids.tolist() == [f"i{k}" for k in range(5)]
    _write(tmp_path / "dup.jsonl", [*rows, {"id": "i3", "task": "a", "gold": "no", "score": 0.2}])
    with pytest.raises(RecordError, match=r"dup\.jsonl:11"):
        read_results(tmp_path / "dup.jsonl", positive="yes", cache=False)


@FAST
@given(st.lists(st.integers(0, 9), min_size=0, max_size=300))
def test_one_table_categories_equal_the_joint_categories(codes):
    cells = np.array(codes, dtype=np.int64)
    inv, uniq = _joint_categories([cells])
    want = np.bincount(inv, minlength=len(uniq))
    got_uniq, got_counts = one_table_categories(cells, 10)
    assert got_uniq.tolist() == uniq.tolist() and got_counts.tolist() == want.tolist()
    assert got_uniq.dtype == uniq.dtype and got_counts.dtype == want.dtype


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 200), st.integers(2, 4))
def test_shared_cells_give_the_same_values_and_tables(seed, n, k):
    rng = np.random.default_rng(seed)
    gold, pred = rng.integers(0, k, n), rng.integers(0, k, n)
    labels = [f"l{j}" for j in range(k)]
    cells = gold.astype(np.int64) * k + pred
    w = rng.integers(0, 3, (4, n)).astype(np.float64)
    for name, params in (
        ("accuracy", {}),
        ("f1", {"average": "macro", "zero_division": 0.0}),
        ("per_class", {"zero_division": 0.0}),
    ):
        a = label_prepared(name, params, gold, pred, labels)
        b = label_prepared(name, params, gold, pred, labels, cells=cells)
        assert a.value() == b.value()
        assert a.tables(w).tolist() == b.tables(w).tolist()


@st.composite
def prob_rows(draw):
    """A binary (score) or 3-class (probs) task whose scores repeat (tied), with or without clusters."""
    kind = draw(st.sampled_from(["bin", "cls"]))
    n = draw(st.integers(20, 200))
    seed = draw(st.integers(0, 2**16))
    grid = draw(st.sampled_from([5, 50, 0]))  # 0: continuous scores (no ties)
    rng = np.random.default_rng(seed)
    clusters = draw(st.booleans())
    rows = []
    for i in range(n):
        row: dict = {"id": i, "task": "t"}
        if kind == "bin":
            s = float(rng.random()) if not grid else int(rng.integers(0, grid + 1)) / grid
            row.update(gold="yes" if rng.random() < 0.4 + 0.3 * s else "no", score=s)
        else:
            w = rng.random(3) if not grid else rng.integers(1, grid + 1, 3).astype(float)
            row.update(gold="abc"[int(rng.integers(0, 3))], probs=dict(zip("abc", (w / w.sum()).tolist())))
        if clusters:
            row["group"] = f"g{i % 7}"
        rows.append(row)
    return rows


@settings(max_examples=6, deadline=None)
@given(prob_rows())
def test_metrics_computed_in_threads_equal_the_sequential_ones(rows):
    from labledger.analysis import evaluation as ev_mod

    before = (ev_mod.PARALLEL_FROM, ev_mod.THREADS)
    try:
        ev_mod.PARALLEL_FROM, ev_mod.THREADS = 10**12, 1
        seq = ev_mod.evaluate(rows, positive="yes", resamples=100).to_dict()
        ev_mod.PARALLEL_FROM, ev_mod.THREADS = 0, 2
        par = ev_mod.evaluate(rows, positive="yes", resamples=100).to_dict()
    finally:
        ev_mod.PARALLEL_FROM, ev_mod.THREADS = before
    assert orjson.dumps(par) == orjson.dumps(seq)  # every value, interval and note, bit for bit


@FAST
@given(st.integers(0, 2**16), st.integers(1, 300), st.sampled_from([0, 4, 1000]))
def test_brier_of_two_labels_by_columns_equals_the_row_sum(seed, n, grid):
    from labledger.metrics.classification import prob_prepared

    rng = np.random.default_rng(seed)
    p1 = rng.random(n) if not grid else rng.integers(0, grid + 1, n) / max(grid, 1)
    probs = np.column_stack([1.0 - p1, p1])
    gold = rng.integers(0, 2, n)
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), gold] = 1.0
    want = ((probs - onehot) ** 2).sum(axis=1) * 0.5  # the (n, 2) form it replaced
    got = prob_prepared("brier", {}, gold, probs, ["a", "b"], pos=None).values
    assert got.tobytes() == want.tobytes()


@FAST
@given(st.integers(0, 2**16), st.integers(1, 300), st.integers(3, 9), st.sampled_from([7, 64, 1 << 16]))
def test_brier_of_many_labels_by_blocks_equals_the_row_sum(seed, n, k, block):
    """K >= 3 labels: the Brier rows a block at a time (any block size) are the (n, K) form's bits."""
    import labledger.metrics.kernels as kernels
    from labledger.metrics.classification import prob_prepared

    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k), n)
    gold = rng.integers(0, k, n)
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), gold] = 1.0
    want = ((probs - onehot) ** 2).sum(axis=1)  # the form it replaced
    before = kernels.ELEMENT_BLOCK
    try:
        kernels.ELEMENT_BLOCK = block
        got = prob_prepared("brier", {}, gold, probs, [f"l{j}" for j in range(k)], pos=None).values
    finally:
        kernels.ELEMENT_BLOCK = before
    assert got.tobytes() == want.tobytes()


@FAST
@given(st.integers(0, 2**16), st.integers(1, 400), st.sampled_from([3, 64, 1 << 16]))
def test_exact_sums_and_count_tables_by_blocks_do_not_depend_on_the_blocks(seed, n, block):
    """exact_sum is math.fsum and the task's count table is bincount of gold * K + pred, with any
    ELEMENT_BLOCK; without clusters no per-item cells are kept, with clusters they are."""
    import math

    import labledger.metrics.kernels as kernels
    from labledger.analysis.tasks import TaskCache
    from labledger.inputs.results import results_from_rows

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    rows = [
        {"id": i, "task": "t", "gold": "abc"[int(g)], "pred": "abc"[int(p)]}
        for i, (g, p) in enumerate(rng.integers(0, 3, (n, 2)))
    ]
    before = kernels.ELEMENT_BLOCK
    try:
        kernels.ELEMENT_BLOCK = block
        assert kernels.exact_sum(x) == math.fsum(x.tolist())
        td = results_from_rows(rows)["t"]
        cells, counts = TaskCache(td).cells(td)
        clustered = results_from_rows([{**r, "group": r["id"] % 5} for r in rows])["t"]
        shared, counts_c = TaskCache(clustered).cells(clustered)
    finally:
        kernels.ELEMENT_BLOCK = before
    k = len(td.labels)
    want = np.bincount(td.gold_index.astype(np.int64) * k + td.pred_index, minlength=k * k)
    assert cells is None and counts.tolist() == want.tolist()
    assert (
        shared is not None
        and shared.tolist() == (clustered.gold_index.astype(np.int64) * k + clustered.pred_index).tolist()
    )
    assert counts_c.tolist() == np.bincount(shared, minlength=k * k).tolist()


@FAST
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), max_size=30), st.integers(0, 2**16))
def test_descending_tie_groups_from_the_ascending_ones(values, seed):
    from labledger.metrics.classification import _sorted_groups, reversed_starts, tie_starts

    x = np.asarray(values + np.random.default_rng(seed).random(len(values) % 3).tolist())
    asc = _sorted_groups(x, descending=False)
    order, starts = _sorted_groups(x, descending=True, ascending=asc)
    want = tie_starts(x[order])  # the groups of the descending order, found from its values
    assert (starts is None) == (want is None) and (want is None or starts.tolist() == want.tolist())
    assert reversed_starts(None, len(x)) is None


@FAST
@given(lines_strategy, st.integers(1, 7))
def test_newline_scan_in_chunks_equals_the_two_counts(case, chunk):
    lines, trailing = case
    data = "\n".join(lines).encode() + (b"\n" if trailing and lines else b"")
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    head = data[:end]
    want = head.count(b"\n") if head.count(b"\n{") == head.count(b"\n") else None
    got = scan_file(io.BytesIO(data), chunk=chunk + 12, key=False).lines  # every line (<= 12 bytes) fits
    if want is None or not data.startswith(b"{"):
        assert got is None
    else:  # buffers of 13..19 bytes: the same answer as the two counts, and the line after the last newline
        assert got == want + 1


def _doc(rs):
    from labledger.analysis.evaluation import evaluate

    return orjson.dumps(evaluate(rs, resamples=100).to_dict())


@settings(max_examples=8, deadline=None)
@given(prob_rows())
def test_the_cache_entrys_sorted_columns_give_the_same_document(rows):
    """A result set read back from its cache entry carries each sorted column's ascending order
    (the stable one), and evaluating it gives the document of the set sorted afresh, bit for bit."""
    from labledger.inputs.result_entry import decode, encode, roundtrip
    from labledger.inputs.results import given_sorts, results_from_rows

    fresh = results_from_rows(rows, positive="yes")
    back = decode(*roundtrip(encode(results_from_rows(rows, positive="yes"))), source="<rows>")
    td = back["t"]
    orders = given_sorts(td)
    cols = [td.labels.index(td.positive)] if td.kind == "binary" else list(range(len(td.labels)))
    assert sorted(orders) == cols
    for j, order in orders.items():
        assert order.tolist() == np.argsort(td.probs[:, j], kind="stable").tolist()
    assert _doc(back) == _doc(fresh)


@FAST
@given(prob_rows(), st.integers(0, 2**16))
def test_a_stale_or_foreign_order_is_not_used(rows, seed):
    """An order that does not sort its column (shuffled, a repeated index, short) is refused: the
    column is sorted again and every value equals the fresh one."""
    from labledger.inputs.results import ResultSet, results_from_rows, set_given_sorts
    from labledger.metrics.classification import checked_order, tie_starts

    fresh = results_from_rows(rows, positive="yes")
    td = results_from_rows(rows, positive="yes")["t"]
    n = td.n
    rng = np.random.default_rng(seed)
    bad = [rng.permutation(n), np.zeros(n, np.int64), np.arange(n - 1), np.argsort(td.probs[:, 0])]
    bad[3][[0, -1]] = bad[3][[-1, 0]]  # two ends swapped
    for order in bad:
        col = td.probs[:, 0]
        found = checked_order(order, col)
        if found is not None:  # a true sort order, with the tie groups of the sorted values
            assert np.array_equal(np.take(col, found[0]), np.sort(col))
            want = tie_starts(np.sort(col))
            assert (found[1] is None and want is None) or found[1].tolist() == want.tolist()
    set_given_sorts(td, {j: bad[j % len(bad)] for j in range(len(td.labels))})
    assert _doc(ResultSet({"t": td})) == _doc(fresh)


@FAST
@given(st.integers(0, 300), st.integers(1, 6), st.integers(0, 2**16))
def test_a_checked_order_gives_the_tie_starts_of_its_sort_across_blocks(n, levels, seed):
    """A true order's check finds the groups of its sorted values in its one pass, over many blocks
    (every one with or without ties), as the sort itself does."""
    from labledger.metrics import kernels
    from labledger.metrics.classification import ascending_groups, checked_order

    rng = np.random.default_rng(seed)
    col = np.round(rng.random(n), levels)  # ties from few levels, none from many
    order = np.argsort(col, kind="stable").astype(np.int32)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "WHOLE", 8)
        mp.setattr(kernels, "BLOCK", 7)
        found = checked_order(order, col)
        want = ascending_groups(col)
    assert found is not None and found[0] is order
    assert (found[1] is None and want[1] is None) or found[1].tolist() == want[1].tolist()
    if found[1] is not None:
        assert found[1].dtype == np.int32 and len(found[1]) == len(want[1])


@pytest.mark.parametrize(
    ("rid", "refused"),
    [
        ("a" * 4096, False),
        ("a" * 4097, True),
        ("\xe9" * 4096, False),  # 8,192 bytes, 4,096 characters: the byte bound sends it to the exact count
        ("\xe9" * 4097, True),
        ("\U00010000" * 1100, False),
    ],
)
def test_the_id_length_bound_by_bytes_refuses_what_the_character_count_refuses(tmp_path, rid, refused):
    from labledger.inputs.results import MAX_ID_CHARS

    assert MAX_ID_CHARS == 4096
    rows = [{"id": f"r{i}", "task": "t", "gold": "yes", "score": 0.5} for i in range(20)]
    rows[7]["id"] = rid
    path = tmp_path / "r.jsonl"
    _write(path, rows)
    if refused:
        with pytest.raises(RecordError, match=r"r\.jsonl:8"):
            read_results(path, positive="yes", cache=False)
    else:
        assert read_results(path, positive="yes", cache=False)["t"].ids[7] == rid


def test_sorted_columns_are_kept_up_to_eight_labels_and_follow_the_probs_array():
    from labledger.inputs.result_entry import MAX_SORTED_COLUMNS, decode, encode, roundtrip
    from labledger.inputs.results import given_sorts, results_from_rows

    rng = np.random.default_rng(0)
    for k in (MAX_SORTED_COLUMNS, MAX_SORTED_COLUMNS + 1):
        labels = [f"l{j}" for j in range(k)]
        rows = []
        for i in range(30):
            w = rng.random(k)
            rows.append(
                {"id": i, "task": "t", "gold": labels[i % k], "probs": dict(zip(labels, (w / w.sum()).tolist()))}
            )
        encoded = encode(results_from_rows(rows))
        kept = [c for c in encoded.arrays if c.startswith("t0.o")]
        assert len(kept) == (k if k <= MAX_SORTED_COLUMNS else 0)
        back = decode(*roundtrip(encoded), source="<rows>")["t"]
        assert len(given_sorts(back)) == len(kept)
        back.probs = back.probs[:, ::-1].copy()  # replaced (as calibrate apply does): the orders are not its
        assert given_sorts(back) == {}


_EVAL_SCRIPT = r"""
import sys, tempfile, os
import numpy as np
from labledger.analysis.evaluation import evaluate
rng = np.random.default_rng(11)
n = 300_000
gold = rng.integers(0, 2, n)
score = np.clip(rng.normal(0.4 + 0.2 * gold, 0.2), 0, 1).round(6)
path = os.path.join(tempfile.gettempdir(), "labledger-blas-eval-%d.jsonl" % os.getppid())  # one name: it is in the doc
with open(path, "w") as f:
    for i, (g, s) in enumerate(zip(gold.tolist(), score.tolist())):
        f.write('{"id": "%d", "task": "t", "gold": "%s", "score": %r}\n' % (i, "ny"[g], s))
doc = evaluate(path, positive="y", resamples=200).to_dict()
os.unlink(path)
sys.stdout.write(repr(doc))
"""


def test_eval_is_the_same_whatever_blas_thread_count() -> None:
    """Threaded dot products (the analytic intervals' variances) split their sums, so the
    document's last bits followed the machine's core count; evaluate runs them on one (#19)."""
    from blas_threads import outputs_by_blas_threads

    docs = outputs_by_blas_threads(_EVAL_SCRIPT)
    assert docs[0] == docs[1] == docs[2]


def test_a_one_task_score_is_sorted_beside_the_read_and_evaluates_the_same(tmp_path, monkeypatch):
    """The JSONL reader sorts a one-task file's score in a second thread while it checks the ids
    (#19): the task then holds the stable order of its score, as a columnar cache entry does, and the
    evaluation is the same document as without it; a file of two tasks starts no sort."""
    from labledger.analysis.evaluation import evaluate
    from labledger.inputs.results import given_sorts

    rng = np.random.default_rng(5)
    rows = [
        {"id": f"i{k}", "task": "t", "gold": "yes" if g else "no", "score": float(s)}
        for k, (g, s) in enumerate(zip(rng.random(300) < 0.4, np.round(rng.random(300), 2)))
    ]
    _write(tmp_path / "r.jsonl", rows)
    without = evaluate(arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes")).to_json()
    monkeypatch.setattr(arrow, "SORT_BESIDE_FROM", 10)
    rs = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes")
    td = rs["t"]
    assert given_sorts(td)[td.labels.index("yes")].tolist() == np.argsort(td.score, kind="stable").tolist()
    assert evaluate(rs).to_json() == without
    _write(tmp_path / "two.jsonl", [{**r, "task": "t" if k % 2 else "u"} for k, r in enumerate(rows)])
    two = arrow.read_arrow(tmp_path / "two.jsonl", "two.jsonl", 1e-6, "yes")
    assert all(given_sorts(t) == {} for t in two.tasks.values())


@pytest.mark.parametrize("form", ["classes", "binary probs"])
def test_a_one_task_files_probs_are_sorted_beside_the_read_and_evaluate_the_same(tmp_path, monkeypatch, form):
    """Each label's column of a one-task file's ``probs`` is sorted beside the read too (#19): the
    task holds the stable order of every column the columnar cache entry keeps (a binary task's P(positive),
    else every label's) with its tie starts, which the metrics use without checking or finding them
    again; the documents are the same as without."""
    from labledger.analysis.evaluation import evaluate
    from labledger.inputs.results import given_sorts, given_ties
    from labledger.metrics import classification
    from labledger.metrics.classification import tie_starts

    rng = np.random.default_rng(7)
    labels = ["a", "b", "c"] if form == "classes" else ["no", "yes"]
    w = np.round(rng.random((300, len(labels))), 1) + 0.1
    p = w / w.sum(axis=1, keepdims=True)
    rows = [
        {
            "id": f"i{k}",
            "task": "t",
            "gold": labels[int(rng.integers(0, len(labels)))],
            "probs": dict(zip(labels, p[k].tolist())),
        }
        for k in range(300)
    ]
    _write(tmp_path / "r.jsonl", rows)
    positive = "yes" if form == "binary probs" else None
    without = evaluate(arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, positive)).to_json()
    monkeypatch.setattr(arrow, "SORT_BESIDE_FROM", 10)
    rs = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, positive)
    td = rs["t"]
    given = given_sorts(td)
    kept = [td.labels.index(td.positive)] if td.kind == "binary" else list(range(len(labels)))
    assert sorted(given) == kept
    ties = given_ties(td)
    assert sorted(ties) == kept
    for j in kept:
        assert given[j].tolist() == np.argsort(td.probs[:, j], kind="stable").tolist()
        # the tie starts found beside the sort: those the metrics would find (some tie: rounded probs)
        assert ties[j] is not None and ties[j].tolist() == tie_starts(np.sort(td.probs[:, j], kind="stable")).tolist()

    def no_check(order, col):
        raise AssertionError("an order made by the read is checked again")

    monkeypatch.setattr(classification, "checked_order", no_check)  # made here with its ties: used as it is
    assert evaluate(rs).to_json() == without
    # a first read into the columnar cache keeps them (the entry's encoding attaches the orders again)
    monkeypatch.setenv("LABLEDGER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LABLEDGER_CACHE_MIN_BYTES", "0")
    first = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, positive, cache=True)
    assert list((tmp_path / "cache").iterdir()) and sorted(given_ties(first["t"])) == kept
    assert evaluate(first).to_json() == without


def test_no_sort_beside_a_read_while_another_read_is_in_progress(tmp_path, monkeypatch):
    """compare's two reads side by side do not also sort beside themselves (the parses take the
    cores): while another read is counted, a one-task file's score is not sorted during its read."""
    from labledger.inputs.results import given_sorts

    rng = np.random.default_rng(3)
    rows = [
        {"id": k, "task": "t", "gold": "yes" if rng.random() < 0.5 else "no", "score": float(rng.random())}
        for k in range(200)
    ]
    _write(tmp_path / "r.jsonl", rows)
    monkeypatch.setattr(arrow, "SORT_BESIDE_FROM", 10)
    assert given_sorts(arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes")["t"]) != {}
    with arrow._reading():  # another read in progress
        td = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes")["t"]
    assert given_sorts(td) == {} and arrow._READS == [0]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(2, 5), st.integers(0, 2**16), st.booleans())
def test_accuracys_analytic_note_from_its_table_is_the_per_item_one(n, k, seed, shared_counts):
    """Accuracy's analytic note (Wilson) from the count table's diagonal equals the one of its
    per-item correctness, field for field (the cells are then never made at 10M rows)."""
    from labledger.analysis.intervals import correct_of, interval_notes, value_notes
    from labledger.metrics.prepared import cell_codes
    from labledger.metrics.resample import Interval

    rng = np.random.default_rng(seed)
    gold, pred = rng.integers(0, k, n), rng.integers(0, k, n)
    gold[: n // 3] = pred[: n // 3]  # some agreement, sometimes all
    counts = np.bincount(cell_codes(gold, pred, k), minlength=k * k) if shared_counts else None  # the task cache's
    prep = label_prepared("accuracy", {}, gold, pred, [f"l{j}" for j in range(k)], cell_counts=counts)
    iv = Interval(prep.value(), 0.1, 0.9, 0.95, 1000, "percentile bootstrap", n, None, 0, None)
    fast = value_notes(prep, iv, None, 0.95)
    slow = interval_notes(iv, groups=None, ci=0.95, analytic_values=correct_of(prep).astype(np.float64))
    assert fast == slow


def _classes(n, labels, rng, decimals=2):
    w = np.round(rng.random((n, len(labels))), decimals) + 0.05
    p = w / w.sum(axis=1, keepdims=True)
    return [dict(zip(labels, row.tolist())) for row in p]


def _small_blocks(monkeypatch, threads):
    """Parse blocks of ~16 rows and checks of 5 rows; the matrix filled in two threads or one."""
    from labledger.metrics import kernels

    monkeypatch.setattr(arrow, "COPY_BESIDE_FROM", 0 if threads else 10**9)
    monkeypatch.setattr(arrow, "BLOCK_BYTES", 1 << 10)
    monkeypatch.setattr(kernels, "ELEMENT_BLOCK", 5)


@pytest.mark.parametrize("threads", [False, True])
def test_probs_in_many_parse_blocks_fill_the_matrix_as_the_row_reader_reads_it(tmp_path, monkeypatch, threads):
    """The ``probs`` column is never combined into one array: each parse block's rows are copied
    into the task's matrix, a few rows at a time with their checks and predictions, and the block
    let go of (#19). One task and two tasks of other labels, in blocks of ~8 rows and checks of 5
    rows, in one thread and in two (the golds' codes made beside them): the same tasks as the row
    reader's, bit for bit."""
    _small_blocks(monkeypatch, threads)
    monkeypatch.setattr(arrow, "RELEASE_BYTES", 1)  # hand the freed pages back after every block
    rng = np.random.default_rng(12)
    one = [
        {"id": f"i{k}", "task": "t", "gold": str(rng.choice(["a", "b", "c"])), "probs": p}
        for k, p in enumerate(_classes(300, ["a", "b", "c"], rng))
    ]
    two = one[:150] + [
        {"id": f"j{k}", "task": "u", "gold": str(rng.choice(["x", "y"])), "probs": p}
        for k, p in enumerate(_classes(150, ["x", "y"], rng))
    ]
    rng.shuffle(two)
    for name, rows in (("one", one), ("two", two)):
        path = tmp_path / f"{name}.jsonl"
        _write(path, rows)
        fast = arrow.read_arrow(path, path.name, 1e-6, None)
        slow = read_results(path, engine="rows", cache=False)
        assert fast is not None and list(fast.tasks) == list(slow.tasks)
        for task, td in fast.tasks.items():
            assert td.labels == slow[task].labels
            assert np.array_equal(td.probs, slow[task].probs)
            assert np.array_equal(td.gold_index, slow[task].gold_index)
            assert np.array_equal(td.pred_index, slow[task].pred_index)
            assert td.lines.tolist() == slow[task].lines.tolist()


@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize(
    ("field", "bad", "message"),
    [
        ("probs", {"a": 0.6, "b": 0.6, "c": 0.0}, "field 'probs' must sum to 1"),
        ("probs", {"a": 1.5, "b": -0.5, "c": 0.0}, "field 'probs' must map labels to numbers in [0, 1]"),
        ("gold", "z", "field 'gold' must be one of the labels of 'probs'"),
    ],
)
def test_a_bad_row_in_a_later_block_is_the_row_readers_error(tmp_path, monkeypatch, field, bad, message, threads):
    """The checks of the blockwise fill (each row in [0, 1], summing to 1) and of the golds' codes
    made beside it (each a label of ``probs``) refuse a bad row in any block, in one thread or two:
    the fast read gives up, no copy left running, and the row reader names its line."""
    _small_blocks(monkeypatch, threads)
    rng = np.random.default_rng(4)
    rows = [
        {"id": f"i{k}", "task": "t", "gold": "a", "probs": p} for k, p in enumerate(_classes(200, list("abc"), rng))
    ]
    rows[173][field] = bad
    _write(tmp_path / "r.jsonl", rows)
    alive = threading.active_count()
    assert arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, None) is None
    assert threading.active_count() == alive
    with pytest.raises(RecordError) as err:
        read_results(tmp_path / "r.jsonl", cache=False)
    assert f"r.jsonl:174: {message}" in str(err.value)


def test_a_duplicate_id_found_beside_the_sorts_stops_them_and_falls_back(tmp_path, monkeypatch):
    """A one-task file's ids are checked while its columns are sorted (#19): a repeated id makes
    the read fall back to the row reader, which names the line, and no sorting thread is left."""
    import threading

    monkeypatch.setattr(arrow, "SORT_BESIDE_FROM", 10)
    rng = np.random.default_rng(8)
    rows = [
        {"id": f"i{k}", "task": "t", "gold": "a", "probs": p} for k, p in enumerate(_classes(400, list("abc"), rng))
    ]
    rows[301]["id"] = "i7"
    _write(tmp_path / "r.jsonl", rows)
    assert arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, None) is None
    assert not [t for t in threading.enumerate() if t.name.startswith("labledger-read")]
    with pytest.raises(RecordError, match="i7"):
        read_results(tmp_path / "r.jsonl", cache=False)


def test_a_one_task_files_repeats_are_read_beside_its_sorts(tmp_path, monkeypatch):
    """A one-task file whose ids repeat by ``sample`` (best-of-k) keeps its repeat values when its
    ids are checked beside its sorts: the same as the row reader's, with the sorts given."""
    from labledger.inputs.results import given_sorts

    monkeypatch.setattr(arrow, "SORT_BESIDE_FROM", 10)
    rng = np.random.default_rng(9)
    rows = [
        {
            "id": f"i{k // 2}",
            "sample": k % 2,
            "task": "t",
            "gold": "yes" if rng.random() < 0.4 else "no",
            "score": float(s),
        }
        for k, s in enumerate(np.round(rng.random(300), 2))
    ]
    _write(tmp_path / "r.jsonl", rows)
    fast = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes", repeats=True)
    slow = read_results(tmp_path / "r.jsonl", positive="yes", engine="rows", cache=False, repeats=True)
    assert fast is not None and fast.repeat_field == slow.repeat_field == "sample"
    assert fast["t"].repeat.tolist() == slow["t"].repeat.tolist()
    assert given_sorts(fast["t"]) != {}


@pytest.mark.parametrize("gold", ["str", "int", "bool"])
def test_task_and_gold_encoded_across_parse_blocks_as_the_row_reader_reads_them(tmp_path, monkeypatch, gold):
    """``task`` and ``gold`` are dictionary-encoded in their parse blocks, never combined first
    (#19): label strings, integers and booleans over many blocks, in a two-task file, give the row
    reader's tasks, gold codes and labels."""
    monkeypatch.setattr(arrow, "BLOCK_BYTES", 1 << 10)
    rng = np.random.default_rng(21)
    values = {"str": ["no", "yes"], "int": [0, 1], "bool": [False, True]}[gold]
    rows = [
        {"id": f"i{k}", "task": "t" if k % 3 else "u", "gold": values[int(g)], "score": float(s)}
        for k, (g, s) in enumerate(zip(rng.random(400) < 0.4, np.round(rng.random(400), 2)))
    ]
    _write(tmp_path / "r.jsonl", rows)
    positive = {"str": "yes", "int": "1", "bool": "true"}[gold]
    fast = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, positive)
    slow = read_results(tmp_path / "r.jsonl", positive=positive, engine="rows", cache=False)
    assert fast is not None and list(fast.tasks) == list(slow.tasks)
    for task, td in fast.tasks.items():
        assert td.labels == slow[task].labels and td.positive == slow[task].positive
        assert np.array_equal(td.gold_index, slow[task].gold_index)
        assert np.array_equal(td.score, slow[task].score)
        assert td.lines.tolist() == slow[task].lines.tolist()


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1}\n{"b": 22}\n{"c": 333}\n{"d": 4}\n',  # newline-terminated
        b'{"a": 1}\n{"b": 22}\n{"c": 333}\n{"d": 4}',  # the last line without its newline
        b'{"a": 1}\n{"b": "' + b"x" * 200 + b'"}\n{"c": 3}\n',  # a long line across the middle
        b'{"a": 1}\n{"b": 2}\nnull\n{"d": 4}\n',  # a bad line in the second half
        b'{"a": "\xff"}\n{"b": 2}\n{"c": 3}\n{"d": 4}\n',  # invalid UTF-8 in the first half
        b'{"a": 1}\n\n{"c": 3}\n{"d": 4}\n',  # a blank line
    ],
)
def test_a_large_file_is_scanned_in_two_halves_as_in_one_pass(tmp_path, monkeypatch, text):
    """Without a key, a file of at least SCAN_PARTS_BYTES is scanned in two halves at once (#19),
    split at a line's start: the same lines (or the same refusal) as the one-pass scan, from the
    file's position on."""
    monkeypatch.setattr(arrow, "SCAN_PARTS_BYTES", 1)
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"garbage-before\n" + text)
    whole = scan_file(io.BytesIO(text), chunk=64, key=False)
    with open(path, "rb") as f:
        f.seek(len(b"garbage-before\n"))
        halves = arrow._halves(f)
        assert halves is not None and halves[0].end == halves[1].at  # two ranges that meet
        assert text[halves[1].at - len(b"garbage-before\n") - 1 : halves[1].at - len(b"garbage-before\n")] == b"\n"
        assert scan_file(f, chunk=64, key=False) == whole


def test_chunks_encoded_with_dictionaries_of_their_own_are_unified(monkeypatch):
    """Where ``dictionary_encode`` of a chunked column gives each chunk its own dictionary (pyarrow
    gives them one today), ``_encoded`` unifies them: the codes index one dictionary."""
    chunks = [
        pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["b", "a"])),
        pa.DictionaryArray.from_arrays(pa.array([0, 0, 1], pa.int32()), pa.array(["c", "a"])),
    ]
    monkeypatch.setattr(pc, "dictionary_encode", lambda column: pa.chunked_array(chunks))
    codes, values = arrow._encoded(pa.chunked_array([["b", "a"], ["c", "c", "a"]]))
    assert [values[c] for c in codes] == ["b", "a", "c", "c", "a"]


@FAST
@given(ids_strategy, st.lists(st.integers(0, 40), max_size=4), st.integers(0, 3))
def test_packed_strings_and_their_check_give_back_the_ids_and_the_verdict_of_surely_distinct(values, cuts, start):
    """A one-task file's ids are packed chunk by chunk as they are hashed (#19): the packed strings
    are the ids again, in order, and the verdict is surely_distinct's of them all, whatever the
    chunks (an id hashes alike in a chunk of short ids and in one of long ids)."""
    from labledger.inputs.arrow_buffers import PackedStrings

    whole = pa.array(["pad"] * start + values, pa.string()).slice(start)  # (offsets not at 0)
    bounds = sorted({0, len(values), *(min(c, len(values)) for c in cuts)})
    chunks = [whole.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    packed, distinct = arrow._packed_checked(list(chunks))
    assert packed.n == len(values) and packed.arrow().to_pylist() == values
    assert distinct == surely_distinct(whole)
    again = PackedStrings()
    for chunk in chunks:
        again.add(chunk)
    assert again.arrow().equals(packed.arrow())


def test_a_repeated_id_in_chunks_of_other_widths_is_found_and_nulls_are_not_packed():
    packed, distinct = arrow._packed_checked([pa.array(["a", "bbbbbbbbbbbb"]), pa.array(["a"])])
    assert not distinct and packed.arrow().to_pylist() == ["a", "bbbbbbbbbbbb", "a"]
    assert arrow._packed_checked([pa.array(["a", "b"]), pa.array(["c"])])[1]
    from labledger.inputs.arrow_buffers import PackedStrings

    with pytest.raises(ValueError):
        PackedStrings().add(pa.array(["a", None]))


@pytest.mark.parametrize("ids", ["distinct", "repeated by sample", "a duplicate"])
def test_a_large_one_task_files_ids_are_kept_packed_and_read_as_the_row_reader_reads_them(tmp_path, monkeypatch, ids):
    """From PACK_IDS_FROM rows a one-task file's ids are packed as they are checked, beside the
    task's read (#19): the ids, the repeat values and a duplicate's error are the row reader's, the
    ids are made from their packed form each time they are asked for as Arrow (not kept), and no
    reading thread is left."""
    from labledger.inputs.results import deferred_ids

    monkeypatch.setattr(arrow, "PACK_IDS_FROM", 10)
    monkeypatch.setattr(arrow, "BLOCK_BYTES", 1 << 10)  # many parse blocks: many chunks of ids
    rng = np.random.default_rng(31)
    rows = [
        {"id": f"item-{k}-\xe9", "task": "t", "gold": "yes" if g else "no", "score": float(s)}
        for k, (g, s) in enumerate(zip(rng.random(400) < 0.4, np.round(rng.random(400), 2)))
    ]
    if ids == "repeated by sample":
        rows = [{**r, "id": f"item-{k // 2}", "sample": k % 2} for k, r in enumerate(rows)]
    if ids == "a duplicate":
        rows[377]["id"] = rows[12]["id"]
    _write(tmp_path / "r.jsonl", rows)
    fast = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, "yes", repeats=True)
    assert not [t for t in threading.enumerate() if t.name.startswith("labledger-read")]
    if ids == "a duplicate":
        assert fast is None
        with pytest.raises(RecordError, match=r"r\.jsonl:378"):
            read_results(tmp_path / "r.jsonl", positive="yes", cache=False, repeats=True)
        return
    slow = read_results(tmp_path / "r.jsonl", positive="yes", engine="rows", cache=False, repeats=True)
    assert fast is not None and fast.repeat_field == slow.repeat_field
    td = fast["t"]
    first, second = deferred_ids(td), deferred_ids(td)
    assert first.to_pylist() == second.to_pylist() == slow["t"].ids.tolist() and first is not second
    assert td._deferred["ids"]._arrow is None  # packed, not kept whole
    assert td.ids.tolist() == slow["t"].ids.tolist()
    if ids == "repeated by sample":
        assert td.repeat.tolist() == slow["t"].repeat.tolist()


@pytest.mark.parametrize("spread", ["a later block holds over 127 values", "the blocks together hold over 127"])
def test_task_and_gold_past_the_8_bit_codes_of_a_block_are_read_as_the_row_reader_reads_them(
    tmp_path, monkeypatch, spread
):
    """``task`` and ``gold`` are coded with 8-bit codes as each block is parsed (#19); a block with
    more than 127 values leaves the column as strings, and blocks whose values together pass 127
    are coded again as strings: either way the tasks, labels and codes are the row reader's."""
    monkeypatch.setattr(arrow, "BLOCK_BYTES", 1 << 14)  # blocks of ~170 rows
    rng = np.random.default_rng(41)
    if spread == "a later block holds over 127 values":
        tasks = [0] * 400 + [k % 150 for k in range(600)]  # 150 tasks (300 labels) in each later block
    else:
        tasks = [30 * (k // 400) + k % 30 for k in range(2000)]  # 30 tasks at a time, 150 in all
    rows = [
        {"id": f"i{k}", "task": f"t{t}", "gold": f"{'y' if g else 'n'}{t}", "positive": f"y{t}", "score": float(s)}
        for k, (t, g, s) in enumerate(zip(tasks, rng.random(len(tasks)) < 0.4, np.round(rng.random(len(tasks)), 2)))
    ]
    _write(tmp_path / "r.jsonl", rows)
    with open(tmp_path / "r.jsonl", "rb") as f:
        table = arrow._parse(f, len(rows))
    coded = pa.types.is_dictionary(table.column("task").type)
    assert coded == (spread == "the blocks together hold over 127")  # (the path this case is for)
    fast = arrow.read_arrow(tmp_path / "r.jsonl", "r.jsonl", 1e-6, None)
    slow = read_results(tmp_path / "r.jsonl", engine="rows", cache=False)
    assert fast is not None and list(fast.tasks) == list(slow.tasks) and len(fast.tasks) == 150
    for task, td in fast.tasks.items():
        assert td.labels == slow[task].labels and td.positive == slow[task].positive
        assert np.array_equal(td.gold_index, slow[task].gold_index)
        assert np.array_equal(td.score, slow[task].score)
        assert td.lines.tolist() == slow[task].lines.tolist()


@FAST
@given(st.integers(0, 2**16), st.integers(0, 3000), st.sampled_from([1, 7, 1 << 10]))
def test_an_order_narrowed_in_place_equals_its_copy(seed, n, block):
    """A sort order is made 4-byte positions over its own memory, a block at a time, the rest of its
    pages handed back (#19): the same positions as ``astype``; a view of other memory is copied."""
    import labledger.metrics.kernels as kernels

    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    want = order.astype(np.int32)
    before = (kernels.WHOLE, kernels.ELEMENT_BLOCK)
    try:
        kernels.WHOLE, kernels.ELEMENT_BLOCK = 0, block
        assert np.array_equal(kernels.narrowed(order.copy(), np.int32), want)
        shared = np.concatenate([order, order])[:n]  # a view of a larger array: not its own memory
        got = kernels.narrowed(shared, np.int32)
        assert np.array_equal(got, want) and np.array_equal(shared, order)  # (copied, left as it was)
    finally:
        kernels.WHOLE, kernels.ELEMENT_BLOCK = before


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("labels", [2, 3])
def test_ece_confidences_made_once_equal_those_made_a_block_at_a_time(monkeypatch, labels, strategy):
    """Up to kernels.WHOLE items ECE's confidences are one array made once (kernels.column); past it
    a BlockColumn that every reader makes a block at a time (#19): the same documents, bit for bit,
    from a binary score and from a matrix, with and without clusters."""
    from labledger.analysis.evaluation import evaluate
    from labledger.inputs.results import results_from_rows
    from labledger.metrics import kernels

    rng = np.random.default_rng(labels)
    names = [f"c{j}" for j in range(labels)]
    rows = []
    for i in range(5_000):
        p = rng.dirichlet(np.ones(labels)).round(3)
        p[-1] = 1.0 - p[:-1].sum()
        row = {"id": i, "task": "t", "gold": names[int(rng.integers(labels))], "probs": dict(zip(names, p.tolist()))}
        rows.append({**row, "group": i // 4} if i % 3 else row)
    rs = results_from_rows(rows, positive="c1" if labels == 2 else None)
    metric = [f"ece:strategy={strategy}"]

    def doc() -> bytes:
        return orjson.dumps(evaluate(rs, metrics=metric, resamples=300).to_dict())

    want = doc()
    assert strategy in want.decode()
    monkeypatch.setattr(kernels, "WHOLE", 0)
    monkeypatch.setattr(kernels, "ELEMENT_BLOCK", 97)
    assert doc() == want


def test_picked_values_from_a_flat_take_equal_the_two_array_index():
    """``_picked``'s one take from a C-ordered matrix's flat values (#19) gives the two-array index's
    floats; a matrix that is not C-ordered (a transposed or sliced view) is indexed as before."""
    from labledger.metrics.classification import _picked

    rng = np.random.default_rng(3)
    for k in (1, 2, 3, 7):
        probs = rng.random((1_000, k))
        index = rng.integers(0, k, 1_000).astype(label_index_type(k))
        for matrix in (probs, np.asfortranarray(probs), np.repeat(probs, 2, axis=1)[:, ::2]):
            for a, b in ((0, 1_000), (17, 400), (999, 1_000), (5, 5)):
                want = matrix[np.arange(a, b), index[a:b]]
                assert _picked(matrix, index, a, b).tobytes() == want.tobytes()
