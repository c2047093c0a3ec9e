"""The fast paths of ``labledger eval`` (#19) equal the paths they replaced, and its start-up from the
columnar cache loads none of pandas, pyarrow.dataset or pyarrow.compute."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import special

import labledger
from labledger.inputs.arrow_buffers import _numbers, arrow_numpy
from labledger.inputs.result_entry import decode, encode, roundtrip
from labledger.inputs.results import ResultSet, read_results
from labledger.metrics import classification, stats
from labledger.metrics.analytic import ap_influence, auc_influence, influence, sum_sq
from labledger.metrics.classification import _sorted_groups, column_sort, prob_prepared
from labledger.metrics.kernels import whole
from labledger.metrics.prepared import MeanPrepared
from labledger.metrics.resample import _unique_codes

SRC = str(Path(labledger.__file__).resolve().parents[1])
FAST = settings(max_examples=60, deadline=None)


# ------------------------------------------------------------------------------------------------
# The normal and t quantiles and tails against scipy.special (what they were before)


@FAST
@given(st.floats(1e-12, 1 - 1e-12))
def test_norm_ppf_equals_scipy(q):
    assert stats.norm_ppf(q) == pytest.approx(float(special.ndtri(q)), rel=1e-12, abs=1e-12)


@FAST
@given(st.floats(-40, 40))
def test_norm_cdf_and_sf_equal_scipy(x):
    assert stats.norm_cdf(x) == pytest.approx(float(special.ndtr(x)), rel=1e-12, abs=1e-300)
    assert stats.norm_sf(x) == pytest.approx(float(special.ndtr(-x)), rel=1e-12, abs=1e-300)


@FAST
@given(st.floats(1e-12, 1 - 1e-12), st.floats(stats.T_EXPANSION_DF, 1e12))
def test_t_ppf_expansion_equals_scipy_at_large_df(q, df):
    assert stats.t_ppf(q, df) == pytest.approx(float(special.stdtrit(df, q)), rel=1e-12, abs=1e-12)


def test_quantile_edges_and_small_df():
    assert stats.norm_ppf(0.0) == -math.inf and stats.norm_ppf(1.0) == math.inf
    assert math.isnan(stats.norm_ppf(1.5)) and math.isnan(stats.norm_cdf(math.nan))
    assert stats.t_ppf(0.975, 10) == float(special.stdtrit(10, 0.975))  # below the expansion: scipy
    assert stats.t_sf(2.0, 7) == float(special.stdtr(7, -2.0))


# ------------------------------------------------------------------------------------------------
# Influence values: the group-level forms against the item-level ones they replaced


def _group_ids(starts, n):
    if starts is None:
        return np.arange(n)
    flags = np.zeros(n, dtype=np.int64)
    flags[starts] = 1
    return np.cumsum(flags) - 1


def _auc_influence_before(is_pos, order, starts, clustered):
    n = len(is_pos)
    y = is_pos[order]
    p = int(np.count_nonzero(y))
    q = n - p
    if p == 0 or q == 0:
        return np.full(n, math.nan)
    gid = _group_ids(starts, n)
    yf = y.astype(np.float64)
    pos_g = np.bincount(gid, weights=yf)
    neg_g = np.bincount(gid, weights=1.0 - yf)
    neg_below = np.cumsum(neg_g) - neg_g
    pos_above = p - np.cumsum(pos_g)
    v10 = (neg_below + 0.5 * neg_g) / q
    v01 = (pos_above + 0.5 * pos_g) / p
    auc = float((pos_g * v10).sum() / p)
    sp = 1.0 if clustered or p < 2 else math.sqrt(p / (p - 1))
    sq = 1.0 if clustered or q < 2 else math.sqrt(q / (q - 1))
    psi_sorted = np.where(y, (v10[gid] - auc) / p * sp, (v01[gid] - auc) / q * sq)
    out = np.empty(n)
    out[order] = psi_sorted
    return out


def _ap_influence_before(is_pos, order, starts, clustered):
    n = len(is_pos)
    y = is_pos[order]
    p = int(np.count_nonzero(y))
    if p == 0 or n == 0:
        return np.full(n, math.nan)
    gid = _group_ids(starts, n)
    yf = y.astype(np.float64)
    pos_g = np.bincount(gid, weights=yf)
    cnt_g = np.bincount(gid).astype(np.float64)
    k_c = np.cumsum(cnt_g)
    prec = np.cumsum(pos_g) / k_c
    ap = float((pos_g * prec).sum() / p)
    a = np.cumsum((pos_g / k_c)[::-1])[::-1]
    b = np.cumsum((pos_g * prec / k_c)[::-1])[::-1]
    psi_sorted = (yf * (prec[gid] - ap) + yf * a[gid] - b[gid]) / p
    if not clustered and n > 1:
        psi_sorted *= math.sqrt(n / (n - 1))
    out = np.empty(n)
    out[order] = psi_sorted
    return out


scores_and_labels = st.integers(0, 2**32 - 1).flatmap(
    lambda seed: st.tuples(st.just(seed), st.integers(1, 300), st.sampled_from([3, 20, 0]))
)


def _data(seed, n, levels):
    rng = np.random.default_rng(seed)
    score = rng.random(n) if levels == 0 else rng.integers(0, levels, n) / levels  # ties when levels > 0
    return score, rng.random(n) < 0.4


@FAST
@given(scores_and_labels, st.booleans())
def test_influence_values_equal_the_item_level_forms(case, clustered):
    score, y = _data(*case)
    asc = _sorted_groups(score, descending=False)
    desc = _sorted_groups(score, descending=True)
    np.testing.assert_allclose(
        auc_influence(y, *asc, clustered), _auc_influence_before(y, *asc, clustered), rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(
        ap_influence(y, *desc, clustered), _ap_influence_before(y, *desc, clustered), rtol=1e-12, atol=1e-15
    )


@FAST
@given(scores_and_labels, st.sampled_from(["roc_auc", "average_precision", "log_loss", "brier", "mae_of_mean"]))
def test_variance_by_group_equals_the_sum_of_the_items_squared_influence(case, name):
    """The unclustered variance summed by tie group (or in one pass for a mean) is sum_i psi_i^2 of
    the item-level influence values (what analytic intervals used before, #19)."""
    score, y = _data(*case)
    gold = y.astype(np.int64)
    if name == "mae_of_mean":  # a mean with a mask
        mask = np.random.default_rng(case[0]).random(len(score)) < 0.7
        prep = MeanPrepared(metric="m", params={}, n=len(score), n_used=int(mask.sum()), values=score, mask=mask)
    else:
        params = {"average": "binary", "pos_label": "p"} if name in ("roc_auc", "average_precision") else {}
        prep = prob_prepared(name, params, gold, np.column_stack([1.0 - score, score]), ("n", "p"), pos=1)
    psi = influence(prep, clustered=False)
    got = sum_sq(prep)
    if psi is None:
        assert got is None
    else:
        assert got == pytest.approx(float(psi @ psi), rel=1e-12, abs=1e-300)


# ------------------------------------------------------------------------------------------------
# One argsort shared by ROC-AUC and AP; the descending order as the reversed ascending one


@FAST
@given(scores_and_labels, st.sampled_from(["roc_auc", "average_precision"]), st.booleans())
def test_shared_sort_gives_the_same_values_and_influence(case, name, cache):
    score, y = _data(*case)
    probs = np.column_stack([1.0 - score, score])
    gold = y.astype(np.int64)
    params = {"average": "binary", "pos_label": "p"}
    alone = prob_prepared(name, params, gold, probs, ("n", "p"), pos=1)
    # the columns' sorts, made once for the task's metrics, share the ranked class flags between
    # ROC-AUC and AP too (#19): none of them sorts a column again, and none changes them
    sorts: dict[int, Any] = {c: column_sort(probs[:, c], gold == c) for c in (0, 1)} if cache else {}
    before = dict(sorts)
    made: list[Any] = []
    real = classification.column_sort
    classification.column_sort = lambda *a, **k: made.append(a) or real(*a, **k)
    try:
        first = prob_prepared("roc_auc", {"average": "macro"}, gold, probs, ("n", "p"), pos=None, sorts=sorts)
        other = "average_precision" if name == "roc_auc" else "roc_auc"
        first.value(), prob_prepared(other, params, gold, probs, ("n", "p"), pos=1, sorts=sorts).value()
        shared = prob_prepared(name, params, gold, probs, ("n", "p"), pos=1, sorts=sorts)
    finally:
        classification.column_sort = real
    assert sorts == before and (made == [] if cache else len(made) >= 3)
    a, b = alone.value(), shared.value()
    assert (math.isnan(a) and math.isnan(b)) or a == b
    if len(score) > 1 and alone.influence is not None:
        np.testing.assert_array_equal(shared.influence(False), alone.influence(False))
        np.testing.assert_array_equal(shared.influence(True), alone.influence(True))
    w = np.random.default_rng(1).poisson(1.0, (4, len(score))).astype(np.float64)
    np.testing.assert_allclose(shared.weighted(w), alone.weighted(w), rtol=1e-12, atol=1e-15)


@FAST
@given(st.lists(st.integers(0, 40), min_size=0, max_size=200))
def test_unique_codes_equals_numpy_unique(codes):
    code = np.array(codes, dtype=np.int64)
    for got, want in zip(_unique_codes(code, 41), np.unique(code, return_inverse=True, return_counts=True)):
        assert got.tolist() == want.reshape(-1).tolist()


def test_mean_value_is_the_exact_sum():
    from labledger.metrics import prepare

    rng = np.random.default_rng(3)
    score = rng.random(5000)
    gold = (rng.random(5000) < 0.5).astype(int)
    prep = prepare("log_loss", gold=gold, score=score)
    assert prep.value() == math.fsum(prep.values.tolist()) / 5000


# ------------------------------------------------------------------------------------------------
# Reading from the columnar cache


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=5), min_size=1, max_size=4), st.data())
def test_numbers_from_buffers_equal_to_numpy(chunks, data):
    col = pa.chunked_array([pa.array(c, pa.float64()) for c in chunks])
    start = data.draw(st.integers(0, len(col)))
    part = col.slice(start)
    got = _numbers(part, np.float64)  # a read-only view of the buffer: no copy of a cache entry's column
    assert got.tolist() == part.to_numpy().tolist() and not got.flags.writeable
    assert arrow_numpy(part).tolist() == got.tolist() and arrow_numpy(part).flags.writeable  # copied
    ints = pa.chunked_array([pa.array([int(v) for v in c], pa.int64()) for c in chunks]).slice(start)
    assert _numbers(ints, np.int64).tolist() == ints.to_pylist()


def test_ids_from_the_cache_are_converted_on_first_use(tmp_path):
    path = tmp_path / "r.jsonl"
    rows = [{"id": f"i{i}", "task": "t", "gold": "yes" if i % 3 else "no", "score": (i % 7) / 7} for i in range(50)]
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    rs = read_results(path, positive="yes", cache=False)
    back = decode(*roundtrip(encode(rs)), source=str(path))
    td = back["t"]
    assert "ids" not in td.__dict__ and td.n == 50  # n does not convert them
    assert td.ids.tolist() == rs["t"].ids.tolist() and "ids" in td.__dict__
    assert td.subset(np.array([3, 1])).ids.tolist() == ["i3", "i1"]


def test_eval_from_the_cache_loads_no_pandas_rich_or_pyarrow_modules_past_ipc(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    rng = np.random.default_rng(0)
    lines = [
        orjson.dumps({"id": f"b{i}", "task": "bin", "gold": "yes" if g else "no", "score": float(s)})
        for i, (g, s) in enumerate(zip(rng.random(400) < 0.3, rng.random(400)))
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setenv("LABLEDGER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LABLEDGER_CACHE_MIN_BYTES", "0")
    first = read_results(path, positive="yes", repeats=True)  # fills the cache, as eval's first read
    assert list((tmp_path / "cache").iterdir())
    env = {**os.environ, "PYTHONPATH": SRC}
    cmd = [sys.executable, "-X", "importtime", "-m", "labledger", "eval", str(path), "--positive", "yes", "--json"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert orjson.loads(res.stdout)["tasks"]["bin"]["n"] == first["bin"].n == 400
    mods = {ln.rsplit("|", 1)[1].strip() for ln in res.stderr.splitlines() if ln.startswith("import time:")}
    # it read the cache, an Arrow IPC file that pyarrow maps (#42: before, numpy alone read a file
    # of labledger's own layout), but no more of pyarrow than that (no compute, dataset, parquet
    # or json); and --json prints no table: no rich (#19)
    assert "labledger.analysis.evaluation" in mods and "labledger.inputs.result_entry" in mods
    assert "pyarrow.ipc" in mods
    heavy = {m for m in mods if m.split(".")[0] in ("pandas", "rich")}
    heavy |= {
        m for m in mods if m.startswith(("pyarrow.compute", "pyarrow.dataset", "pyarrow.parquet", "pyarrow.json"))
    }
    assert not heavy, heavy


def test_runs_and_show_json_load_no_rich(tmp_path):
    ledger = tmp_path / "ledger"
    with labledger.start_run("r", ledger=ledger) as run:
        run.log(1, loss=0.5)
    env = {**os.environ, "PYTHONPATH": SRC, "LABLEDGER_DIR": str(ledger)}
    for args in (["runs", "--json"], ["show", "r", "--json"]):
        res = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "labledger", *args], capture_output=True, text=True, env=env
        )
        assert res.returncode == 0, res.stderr[-2000:]
        mods = {ln.rsplit("|", 1)[1].strip() for ln in res.stderr.splitlines() if ln.startswith("import time:")}
        # (the command's module itself is imported through importlib, which -X importtime does not list)
        assert "labledger.store.ledger" in mods and not {m for m in mods if m.split(".")[0] == "rich"}


def test_reading_a_results_file_imports_no_pandas(tmp_path):
    rows = [{"id": f"c{i}", "task": "t", "gold": "ab"[i % 2], "probs": {"a": 0.3, "b": 0.7}} for i in range(30)]
    rows += [{"id": f"b{i}", "task": "u", "gold": "yes" if i % 3 else "no", "score": 0.4} for i in range(30)]
    for name, part in (("cls", rows[:30]), ("bin", rows[30:])):
        (tmp_path / f"{name}.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in part) + b"\n")
    code = (
        "import sys\n"
        "from labledger.inputs.results import read_results\n"
        f"a = read_results({str(tmp_path / 'cls.jsonl')!r}, cache=False)\n"
        f"b = read_results({str(tmp_path / 'bin.jsonl')!r}, positive='yes', cache=False)\n"
        "assert type(a['t'].extras).__name__ == 'LazyColumns'  # the Arrow reader read them\n"
        "print(a['t'].gold_index.tolist()[:4], int(b['u'].gold_index.sum()), 'pandas' in sys.modules)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["[0,", "1,", "0,", "1]", "20", "False"]


def test_a_first_read_into_the_columnar_cache_and_a_multi_task_file_import_no_pandas(tmp_path):
    """The first read of a file writes its cache entry (numeric columns and sort orders made into
    Arrow arrays) and a file of several tasks takes each task's rows by index: neither goes through
    ``pa.array`` of numpy values, which imports pandas where it is installed (~0.28 s, #19). The
    second read comes from the entry, the same values."""
    rows = [{"id": f"c{i}", "task": "t", "gold": "ab"[i % 2], "probs": {"a": 0.3, "b": 0.7}} for i in range(30)]
    rows += [
        {"id": f"b{i}", "task": "u", "gold": "yes" if i % 3 else "no", "score": 0.4, "group": i % 4} for i in range(30)
    ]
    (tmp_path / "both.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    code = (
        "import sys\n"
        "from labledger.inputs.results import read_results\n"
        f"a = read_results({str(tmp_path / 'both.jsonl')!r}, positive={{'u': 'yes'}})\n"
        f"b = read_results({str(tmp_path / 'both.jsonl')!r}, positive={{'u': 'yes'}})\n"
        "same = a['t'].probs.tolist() == b['t'].probs.tolist() and a['u'].group.tolist() == b['u'].group.tolist()\n"
        "print(int(b['u'].gold_index.sum()), same, 'pandas' in sys.modules)\n"
    )
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": SRC, "LABLEDGER_CACHE_DIR": str(cache), "LABLEDGER_CACHE_MIN_BYTES": "0"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["20", "True", "False"]
    assert list(cache.glob("results-*.arrow"))  # the entry was written (and read the second time)


# ------------------------------------------------------------------------------------------------
# Memory at scale (#19): the cache's columns are its memory map's pages, nothing is made twice


def _mapped_from(path: Path, address: int) -> bool:
    """Whether ``address`` lies in a memory map of the file ``path`` in this process (Linux)."""
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() == real:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= address < hi:
                    return True
    return False


def _cached_binary_rows(tmp_path: Path, monkeypatch: Any, n: int, *, seed: int) -> Path:
    """A binary results file of ``n`` random rows, with the columnar cache on (in ``tmp_path``) for it."""
    path = tmp_path / "r.jsonl"
    rng = np.random.default_rng(seed)
    rows = [
        {"id": f"i{i}", "task": "t", "gold": "yes" if rng.random() < 0.4 else "no", "score": float(rng.random())}
        for i in range(n)
    ]
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    monkeypatch.setenv("LABLEDGER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LABLEDGER_CACHE_MIN_BYTES", "0")
    return path


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps (Linux)")
def test_cached_columns_are_views_of_the_entry_not_copies(tmp_path, monkeypatch):
    path = _cached_binary_rows(tmp_path, monkeypatch, 3000, seed=3)
    first = read_results(path, positive="yes")  # parses the JSONL and fills the cache
    td = read_results(path, positive="yes")["t"]  # from the entry
    (entry,) = (tmp_path / "cache").iterdir()
    for name in ("score", "gold_index"):
        column = getattr(td, name)
        assert not column.flags.writeable and _mapped_from(entry, column.ctypes.data), name
        assert np.array_equal(column, getattr(first["t"], name))
    assert not _mapped_from(entry, td.probs.ctypes.data)  # built from the score: its own memory


def test_consecutive_lines_are_made_on_first_read(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    rows = [{"id": f"i{i}", "task": "t", "gold": "yes" if i % 3 else "no", "score": (i % 7) / 7} for i in range(40)]
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    monkeypatch.setenv("LABLEDGER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LABLEDGER_CACHE_MIN_BYTES", "0")
    rows_path = read_results(path, positive="yes", engine="rows")["t"]  # the row reader's own lines
    for td in (read_results(path, positive="yes")["t"], read_results(path, positive="yes")["t"]):  # JSONL, then cache
        assert "lines" not in vars(td) and td.n == 40  # n does not make them
        evaluated = labledger.evaluate(ResultSet({"t": td}), metrics=["accuracy", "roc_auc"])
        assert evaluated.tasks["t"].n == 40 and "lines" not in vars(td)  # nor does an evaluation
        assert td.subset(np.array([5, 2])).lines.tolist() == [6, 3]
        assert td.lines.tolist() == rows_path.lines.tolist() == list(range(1, 41))
    back = decode(*roundtrip(encode(read_results(path, positive="yes", cache=False))), source="x")
    assert "lines" not in vars(back["t"]) and back["t"].lines.tolist() == list(range(1, 41))


def test_a_reversed_ranking_is_shared_while_in_use():
    from labledger.metrics.analytic import Ranked

    scores = np.array([0.1, 0.4, 0.4, 0.8, 0.9])
    r = Ranked(np.array([False, True, False, True, True]), np.argsort(scores), np.array([0, 1, 3, 4]))
    first = r.reversed()
    assert r.reversed() is first  # not a second copy of its group sums while the first is held
    kept = (first.pos_g.copy(), first.starts.copy())
    del first
    again = r.reversed()  # none is kept past its use: made again, equal
    assert np.array_equal(again.pos_g, kept[0]) and np.array_equal(again.starts, kept[1])
    assert again.pos_g.tolist() == [1.0, 1.0, 1.0, 0.0] and again.starts.tolist() == [0, 1, 2, 4]


@FAST
@given(
    st.integers(2, 300),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0, 1]),
    st.sampled_from(["roc_auc", "average_precision", "log_loss", "brier", "ece", "ece-q"]),
)
@example(n=2, seed=8, pos=0, which="ece-q")  # a row of weights all 0: equal-mass bins failed on it
def test_a_binary_metric_from_the_score_equals_it_from_the_probs_bit_for_bit(n, seed, pos, which):
    """``binary_prepared`` reads a binary task's score, never its (n, 2) probs: every value and
    interval input is the one ``prob_prepared`` gives on the matrix, to the last bit (ties, and
    scores of exactly 0.5 and 0 and 1, included)."""
    from labledger.metrics.classification import binary_prepared

    rng = np.random.default_rng(seed)
    # off numpy's 2^-53 grid too (cubes, tiny values), where 1 - (1 - p) is not p
    score = rng.choice([0.0, 0.25, 0.5, 1.0, 1e-20, 3e-9, *rng.random(5)], size=n) if seed % 2 else rng.random(n) ** 3
    gold = (rng.random(n) < 0.4).astype(np.int64)
    gold = np.where(gold == 1, pos, 1 - pos)
    pred = np.where(score >= 0.5, pos, 1 - pos).astype(np.int64)  # the readers' rule (binary_task)
    probs = np.empty((n, 2))
    probs[:, pos] = score
    probs[:, 1 - pos] = 1.0 - score
    name, params = (
        ("ece", {"n_bins": 10, "strategy": "quantile"})
        if which == "ece-q"
        else (
            which,
            {"average": "binary"}
            if which in ("roc_auc", "average_precision")
            else {"n_bins": 15, "strategy": "uniform"}
            if which == "ece"
            else {},
        )
    )
    # the one from the sort its task's metrics share, the other from its own
    shared = {pos: column_sort(score, gold == pos)}
    fast = binary_prepared(name, params, gold, score, pos, pred, pos_label=pos, sorts=shared)
    slow = prob_prepared(name, params, gold, probs, ("a", "b"), pos=pos, pred=pred, sorts={})
    assert fast is not None
    a, b = fast.value(), slow.value()
    assert (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(slow, MeanPrepared):
        assert np.array_equal(fast.values, slow.values)
    w = rng.poisson(1.0, size=(4, n)).astype(np.float64)
    if hasattr(slow, "weighted"):  # the bootstrap's path
        assert np.array_equal(fast.weighted(w), slow.weighted(w), equal_nan=True)
        assert getattr(fast, "binned", None) is None or all(
            np.array_equal(whole(x), whole(y)) for x, y in zip(fast.binned, slow.binned)
        )
    if name in ("roc_auc", "average_precision"):
        assert binary_prepared(name, {"average": "macro"}, gold, score, pos, pred, pos_label=None) is None
        assert binary_prepared(name, params, gold, score, pos, pred, pos_label=1 - pos) is None


def test_a_binary_tasks_probs_are_made_only_when_read(tmp_path, monkeypatch):
    """Read from JSONL or from the cache, a binary task's (n, 2) probs are made from its score on
    first read; an evaluation of the default metrics never reads them; the sort orders the cache
    kept stay valid once they are made, and not once they are replaced."""
    from labledger.inputs.results import given_sorts

    path = _cached_binary_rows(tmp_path, monkeypatch, 600, seed=5)
    by_rows = read_results(path, positive="yes", engine="rows")["t"]
    for td in (read_results(path, positive="yes")["t"], read_results(path, positive="yes")["t"]):  # JSONL, cache
        assert "probs" not in vars(td)
        ev = labledger.evaluate(ResultSet({"t": td}))
        assert "probs" not in vars(td)
        part = td.subset(np.arange(0, td.n, 3))  # a slice of it: its matrix not made either
        assert "probs" not in vars(part) and "probs" not in vars(td)
        assert np.array_equal(part.probs, by_rows.probs[::3]) and "probs" not in vars(td)
        kept = given_sorts(td)
        assert kept and np.array_equal(td.probs, by_rows.probs)  # made now, as the row reader makes them
        assert given_sorts(td).keys() == kept.keys()  # the orders belong to these probs
        again = labledger.evaluate(ResultSet({"t": by_rows}))
        assert ev.to_dict()["tasks"] == again.to_dict()["tasks"]
        td.probs = td.probs.copy()  # replaced (calibrated, say): the kept orders are not theirs
        assert given_sorts(td) == {}


def test_equal_mass_ece_of_a_resample_without_items_is_nan_not_an_error():
    from labledger.metrics.classification import _ece_w

    f = _ece_w(np.array([0.9, 0.6]), np.array([True, False]), 10, "quantile")
    got = f(np.array([[1.0, 1.0], [0.0, 0.0], [2.0, 0.0]]))
    assert got[0] == pytest.approx(0.35) and math.isnan(got[1]) and got[2] == pytest.approx(0.1)


def test_a_copy_of_a_task_keeps_its_deferred_columns(tmp_path, monkeypatch):
    """``copy.copy`` of a task shares its dict of deferred columns: the original making one must
    not take it from the copy."""
    import copy

    path = _cached_binary_rows(tmp_path, monkeypatch, 50, seed=9)
    td = read_results(path, positive="yes", cache=False)["t"]
    twin = copy.copy(td)
    made = (td.ids.tolist(), td.lines.tolist(), td.probs.tolist())
    assert (twin.ids.tolist(), twin.lines.tolist(), twin.probs.tolist()) == made
