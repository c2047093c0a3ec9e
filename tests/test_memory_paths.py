"""The memory-lean paths of the fifteenth #19 round against the plain numpy they replace: compact
group counts, gathers through 4-byte orders, pages of mapped columns let go, a macro mean's
influence values added into one total, and the one-column covariance."""

from __future__ import annotations

import mmap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.metrics import analytic, kernels
from labledger.metrics.analytic import GroupedInfluence, Ranked, auc_groups, auc_items, covariance, ovr_influence
from labledger.metrics.classification import checked_order, tie_starts


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(0, 300), min_size=1, max_size=5))
def test_small_counts_slice_to_the_counts(seed, sizes):
    """Counts of consecutive blocks, some far above a byte, read back exactly by any slice."""
    rng = np.random.default_rng(seed)
    blocks = [rng.choice([0, 1, 7, 254, 255, 256, 70_000, 2**40], size=k) for k in sizes]
    want = np.concatenate(blocks).astype(np.int64)
    got = kernels.SmallCounts.of(len(want), blocks)
    assert len(got) == len(want) and got.small.dtype == np.uint8
    assert got[0 : len(want)].tolist() == want.tolist()
    for _ in range(5):
        a, b = sorted(rng.integers(0, len(want) + 1, 2).tolist())
        assert got[a:b].tolist() == want[a:b].tolist()


def test_index_dtype_holds_every_position():
    assert kernels.index_dtype(0) == np.int32 and kernels.index_dtype(2**31 - 1) == np.int32
    assert kernels.index_dtype(2**31) == np.int64


def _rss_file_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile"))


def test_gather_through_a_mapped_order_is_take_and_lets_its_pages_go(tmp_path):
    """A gather through a 4-byte order held in a memory map: np.take's values, block by block, and
    with ``release`` the order's pages leave the process (read again, unchanged, on next use)."""
    n = 3 * kernels.ELEMENT_BLOCK + 11
    rng = np.random.default_rng(5)
    order = rng.permutation(n).astype(np.int32)
    big = np.tile(order, 64)  # 48 MiB, page-rounded and big enough to see in RssFile
    (tmp_path / "o.bin").write_bytes(big.tobytes())
    with open(tmp_path / "o.bin", "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    whole = np.frombuffer(mapped, dtype=np.int32)
    index = whole[:n]
    # a contiguous column, a boolean one, and a matrix's column (strided: indexed, never copied whole)
    for x in (rng.random(n), rng.random(n) < 0.3, rng.random((n, 3))[:, 1]):
        assert kernels.gather(x, index).tobytes() == np.take(x, order).tobytes()
        assert kernels.gather(x, index, release=True).tobytes() == np.take(x, order).tobytes()
    assert int(whole.sum(dtype=np.int64)) == int(big.sum(dtype=np.int64))  # every page read in
    held = _rss_file_kib()
    kernels.release_pages(whole)
    assert held - _rss_file_kib() > 40 * 1024  # the pages are no longer the process's
    assert whole.tobytes() == big.tobytes()  # and read again unchanged
    kernels.release_pages(np.arange(5))  # an array not mapped: nothing
    del whole, index


def test_a_sort_order_is_checked_through_a_strided_column():
    """A probability matrix's column is read through the order as a view (no contiguous copy): the
    same order and tie groups as the contiguous column's; a wrong order is refused."""
    rng = np.random.default_rng(2)
    probs = np.round(rng.dirichlet([1, 1, 1], size=5_000), 2)
    for j in range(3):
        col = probs[:, j]
        order = kernels.stable_argsort(np.ascontiguousarray(col)).astype(np.int32)
        strided, contiguous = checked_order(order, col), checked_order(order, np.ascontiguousarray(col))
        assert strided is not None and contiguous is not None
        assert strided[1].tolist() == contiguous[1].tolist() == tie_starts(col[order]).tolist()
        assert checked_order(order[::-1].copy(), col) is None


@pytest.mark.parametrize("absent", [False, True])
@pytest.mark.parametrize("metric", ["roc_auc", "average_precision"])
def test_a_macro_means_influence_added_into_its_total_is_the_stacked_mean(absent, metric):
    """Each class's DeLong (or AP delta-method) values spread, a block of groups at a time,
    straight into the running total: the floats of np.mean over the classes' own arrays stacked
    (classes with no positives left out), over many blocks."""
    rng = np.random.default_rng(11)
    n, k = 20_000, 4
    gold = rng.integers(0, k - 1 if absent else k, n)
    probs = np.round(rng.dirichlet(np.ones(k), size=n), 3)
    ranked = []
    for c in range(k):
        order = kernels.stable_argsort(probs[:, c])
        r = Ranked(gold == c, order, tie_starts(probs[order, c]))
        ranked.append(r if metric == "roc_auc" else r.reversed())
    groups_of, items_of = (auc_groups, auc_items) if metric == "roc_auc" else (analytic.ap_groups, analytic.ap_items)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "BLOCK", 97)  # many blocks of groups (~1,000 groups a class)
        mp.setattr(kernels, "WHOLE", 0)
        for clustered in (False, True):
            rows = [groups_of(r, clustered).per_item() for r in ranked]
            want = np.mean(np.stack([x for x in rows if np.isfinite(x).all()]), axis=0)
            fns = [
                GroupedInfluence(lambda cl, r=r: groups_of(r, cl), None, lambda cl, into, r=r: items_of(r, cl, into))
                for r in ranked
            ]
            assert ovr_influence(fns, clustered).tobytes() == want.tobytes()


def test_covariance_of_one_column_is_the_matrix_product():
    """One metric's variance without the (n, 1) copy: mat.T @ mat's float; with clusters, the
    same cluster sums as the column's."""
    rng = np.random.default_rng(4)
    for n in (1, 2, 9, 1_000, 100_003):
        x = rng.normal(size=n) * 10.0 ** rng.integers(-5, 5, n)
        mat = np.column_stack([x])
        assert covariance([x]).tobytes() == (mat.T @ mat).tobytes()
        groups = rng.integers(0, 7, n)
        sums = np.bincount(groups, weights=mat[:, 0])[:, None]
        c = int(groups.max()) + 1
        factor = c / (c - 1) if c > 1 else np.nan
        assert covariance([x], groups).tobytes() == np.asarray(factor * (sums.T @ sums)).tobytes()


def test_a_zero_one_mean_is_found_block_by_block():
    n = 2 * kernels.ELEMENT_BLOCK + 3
    x = np.zeros(n)
    x[::3] = 1.0
    assert analytic._ones(lambda a, b: x[a:b], n) == float(x.sum())
    x[-1] = 0.5
    assert analytic._ones(lambda a, b: x[a:b], n) is None
    assert analytic._ones(lambda a, b: x[a:b], 0) == 0.0


@pytest.mark.parametrize("metric", ["log_loss", "brier"])
def test_a_large_mean_made_a_block_at_a_time_is_the_kept_arrays_floats(monkeypatch, metric):
    """Past WHOLE items a binary log loss or Brier keeps no per-item values (BlockMean): the value,
    the analytic interval and its note are those of the values' array, bit for bit, and the array
    is never made for them; made on demand (a paired difference, clusters), it is that array."""
    from labledger.analysis.intervals import value_interval, value_notes
    from labledger.metrics import prepare
    from labledger.metrics.prepared import BlockMean

    rng = np.random.default_rng(3)
    n = 30_000
    gold, score = rng.integers(0, 2, n), np.round(rng.random(n), 3)

    def interval(p):
        iv, _, _ = value_interval(p, ci=0.95, resamples=1000, seed=0, groups=None)
        return iv, value_notes(p, iv, None, 0.95)

    want_p = prepare(metric, gold=gold, score=score, labels=[0, 1])
    assert not isinstance(want_p, BlockMean)
    want = interval(want_p)
    monkeypatch.setattr(kernels, "WHOLE", 1_000)
    got_p = prepare(metric, gold=gold, score=score, labels=[0, 1])
    assert isinstance(got_p, BlockMean)
    got = interval(got_p)
    assert not got_p.made()  # never an array of n for its value and interval
    assert got_p.value() == want_p.value() and repr(got) == repr(want)
    assert "analytic" in got[0].method
    assert got_p.values.tobytes() == want_p.values.tobytes() and got_p.made()


def test_a_binary_tasks_evaluation_with_block_means_is_the_same_document(monkeypatch):
    """A binary task's log loss and Brier as BlockMeans (past WHOLE items) give evaluate's very
    document, clusters included (their values then made whole)."""
    from labledger.analysis.evaluation import evaluate
    from labledger.inputs.results import ProbTask, ResultSet

    rng = np.random.default_rng(9)
    n = 20_000
    score = np.round(rng.random(n), 3)
    gold = (rng.random(n) < score).astype(np.int64)

    def doc(group):
        td = ProbTask(
            task="t",
            ids=np.array([f"i{i}" for i in range(n)], dtype=object),
            lines=np.arange(1, n + 1),
            group=group,
            slice_columns={},
            extras={},
            kind="binary",
            labels=("no", "yes"),
            probs=np.column_stack([1.0 - score, score]),
            gold_index=gold,
            pred_index=(score >= 0.5).astype(np.int64),
            score=score,
            positive="yes",
        )
        return evaluate(ResultSet({"t": td}, source="x"), resamples=200).to_dict()

    groups = rng.integers(0, 400, n)
    want = [doc(None), doc(groups)]
    monkeypatch.setattr(kernels, "WHOLE", 1_000)
    assert [doc(None), doc(groups)] == want


@pytest.mark.parametrize("kind", ["binary", "cls3"])
def test_eval_from_a_cache_entry_in_many_blocks_equals_eval_from_jsonl(tmp_path, monkeypatch, kind):
    """End to end with small blocks and analytic intervals: the entry's 4-byte orders (mapped, read
    through in blocks, their pages let go), the orders checked through the probability columns,
    the group counts, and a macro AUC's values added into one total give the documents of the
    JSONL read (each with the same blocks)."""
    import orjson

    from labledger.analysis.evaluation import evaluate
    from labledger.inputs import columnar
    from labledger.inputs.results import given_sorts, read_results

    monkeypatch.setenv(columnar.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(columnar.MIN_BYTES_ENV, "0")
    monkeypatch.setattr(kernels, "BLOCK", 97)
    monkeypatch.setattr(kernels, "WHOLE", 0)
    monkeypatch.setattr(analytic, "ANALYTIC_FROM", 100)
    rng = np.random.default_rng(7)
    rows = []
    for i in range(3_000):
        if kind == "binary":
            s = min(1.0, max(0.0, round(float(rng.normal(0.5, 0.3)), 2)))  # ties, and groups at 0 and 1
            rows.append({"id": f"r{i}", "task": "t", "gold": "yes" if rng.random() < s else "no", "score": s})
        else:
            w = np.round(rng.dirichlet([1, 1, 1]), 2)
            probs = dict(zip("abc", (w / w.sum()).tolist()))
            rows.append({"id": f"r{i}", "task": "t", "gold": "abc"[int(rng.integers(0, 3))], "probs": probs})
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    pos = "yes" if kind == "binary" else None

    def doc(rs):
        return orjson.dumps(evaluate(rs, resamples=200).to_dict())

    want = doc(read_results(path, positive=pos, cache=False))
    assert b"DeLong" in want  # the analytic intervals, from their blockwise kernels
    # the row reader sorts nothing beside its read: the metrics sort, in 8-byte positions
    assert doc(read_results(path, positive=pos, cache=False, engine="rows")) == want
    assert doc(read_results(path, positive=pos)) == want  # reads, sorts, stores
    cached = read_results(path, positive=pos)
    assert all(o.dtype == np.int32 and not o.flags.writeable for o in given_sorts(cached["t"]).values())
    assert doc(cached) == want


def test_a_zero_one_block_mean_gets_its_wilson_interval_without_its_values():
    """A BlockMean whose values are all 0 or 1 (Brier of hard 0/1 scores) takes the Wilson
    interval from a block-by-block count: the values' array is never made, and the interval is the
    kept array's, bit for bit (#19)."""
    from labledger.metrics.prepared import BlockMean, MeanPrepared

    rng = np.random.default_rng(4)
    n = 3 * kernels.ELEMENT_BLOCK + 5
    x = (rng.random(n) < 0.3).astype(np.float64)
    block = BlockMean(metric="brier", params={}, n=n, n_used=n, block=lambda a, b: x[a:b])
    kept = MeanPrepared(metric="brier", params={}, n=n, n_used=n, values=x)
    got, want = analytic.analytic_interval(block), analytic.analytic_interval(kept)
    assert not block.made()
    assert got.method == want.method == "analytic: Wilson score interval"
    assert got == want


@pytest.mark.parametrize("kind", ["binary", "classes"])
def test_a_one_task_files_gold_strings_are_let_go_before_its_arrays_are_made(tmp_path, monkeypatch, kind):
    """The JSONL reader lets go of a one-task file's gold strings once they are codes, before the
    task's arrays are made: when ``binary_task`` is called (or the classification task is made),
    Arrow holds nothing of the ``gold`` column (10M binary rows: 63 MiB less at the read's peak)."""
    import orjson
    import pyarrow as pa

    from labledger.inputs import arrow

    rng = np.random.default_rng(2)
    n = 20_000
    golds = [f"label-{'yes' if g else 'no'}-{'x' * 40}" for g in rng.random(n) < 0.5]  # ~2 MiB of strings
    if kind == "binary":
        rows = [
            {"id": i, "task": "t", "gold": g, "score": float(s)} for i, (g, s) in enumerate(zip(golds, rng.random(n)))
        ]
    else:
        labels = sorted(set(golds))
        rows = [
            {"id": i, "task": "t", "gold": g, "probs": {labels[0]: 0.25, labels[1]: 0.75}} for i, g in enumerate(golds)
        ]
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    gold_bytes = sum(len(g) for g in golds)
    held: list[int] = []
    target = "binary_task" if kind == "binary" else "set_positive_column"  # (the latter: just after it)
    made = getattr(arrow, target)

    def watched(*a, **k):
        held.append(pa.total_allocated_bytes())
        return made(*a, **k)

    monkeypatch.setattr(arrow, target, watched)
    grown = []
    for _ in range(3):  # Arrow's count is the process's: the least of three reads, whatever another thread held
        held.clear()
        before = pa.total_allocated_bytes()
        rs = arrow.read_arrow(path, "r.jsonl", 1e-6, "label-yes-" + "x" * 40 if kind == "binary" else None)
        assert rs is not None and held
        grown.append(held[0] - before)
    # what Arrow holds then: the ids and the score (or nothing: the matrix is numpy), not the golds
    assert min(grown) < gold_bytes / 2, (grown, gold_bytes)
