"""Run.log's hot path (#19): the bytes it writes and the summary, fields and counters it keeps equal
the path it replaced (the record built with ``dict.update``, the last values kept per call, every
value filtered in Python at each fold), on random logs of any keys, values and fold boundaries."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labledger
from labledger.inputs.records import clean_scalars
from labledger.store.counters import scan_run
from labledger.store.fields import ScalarStats, _finite_min_max, run_fields
from labledger.store.jsonl import DUMP_OPTIONS

KEYS = ["loss", "lr", "acc", "grad_norm", "time", "ünï code", "val.loss"]

plain = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0.0, -0.0, 1, 1.0, math.nan, math.inf, -math.inf]),
)
other = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(width=32).map(np.float32),
    st.floats().map(np.float64),
    st.integers(-(2**31), 2**31).map(np.int64),
)
value = st.one_of(plain, plain, plain, other)
step = st.one_of(st.integers(-1000, 10**12), st.integers(0, 100).map(np.int64))


@st.composite
def logs(draw: Any) -> list[tuple[str, Any, dict[str, Any]]]:
    """Log calls (``("log", step, scalars)``) and folds (``("fold", None, {})``) in a random order."""
    same_keys = draw(st.booleans())  # the usual run: the same keys at every step
    fixed = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    ops: list[tuple[str, Any, dict[str, Any]]] = []
    for _ in range(draw(st.integers(1, 40))):
        if draw(st.integers(0, 6)) == 0:
            ops.append(("fold", None, {}))
            continue
        keys = fixed if same_keys else draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True))
        values = [draw(plain) if same_keys and draw(st.integers(0, 3)) else draw(value) for _ in keys]
        ops.append(("log", draw(step), dict(zip(keys, values))))
    return ops


def old_fold(low: dict[str, Any], high: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """ScalarStats.fold as it was (one comprehension per key, every value filtered in Python)."""
    keys = set().union(*records) - {"step", "time"}
    for k in keys:
        col = [v for r in records if (v := r.get(k)) is not None and v == v and type(v) is not bool]
        if not col:
            continue
        lo, hi = min(col), max(col)
        if math.isinf(lo) or math.isinf(hi):
            col = [x for x in col if not math.isinf(x)]
            if not col:
                continue
            lo, hi = min(col), max(col)
        if k not in low or lo < low[k]:
            low[k] = lo
        if k not in high or hi > high[k]:
            high[k] = hi


def same(a: Any, b: Any) -> bool:
    """Equal as JSON would keep them, telling -0.0 from 0.0, 1 from 1.0, and NaN equal to NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and (repr(a) == repr(b))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run that every example of the test below logs more to (starting a run costs ~0.1 s: a
    git call, fsyncs), with every call made so far: the reference is recomputed from all of them,
    so each example checks the run's whole history, folds at random points included."""
    run = labledger.start_run("hot", ledger=tmp_path_factory.mktemp("hot-path"))
    run.index_interval = run.sync_interval = 1e9  # folds only where the ops say (and when read)
    run._next_sync = 1e18
    yield {"run": run, "calls": []}
    run.finish()


@settings(max_examples=30, deadline=None)
@given(ops=logs())
def test_run_log_writes_the_same_bytes_and_keeps_the_same_summary_as_the_old_path(live, ops):
    run, calls = live["run"], live["calls"]
    for op, s, scalars in ops:
        if op == "fold":
            run._fold()
        else:
            run.log(s, **scalars)
            calls.append((int(s), clean_scalars(scalars)))
    summary, fields, counters = run._summary(), run._fields(), run._counters()

    lines = (run.dir / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == len(calls)
    records, last, last_step, low, high = [], {}, {}, {}, {}
    for line, (s, cleaned) in zip(lines, calls):
        rec = {"step": s, "time": orjson.loads(line)["time"]}
        rec.update(cleaned)  # the old path: update, so an explicit time= keeps the key's place
        assert line == orjson.dumps(rec, option=DUMP_OPTIONS)
        records.append(rec)
        last.update(cleaned)
        last_step.update(dict.fromkeys(cleaned, s))
    old_fold(low, high, records)
    last.pop("time", None)
    steps = max((s for s, _ in calls), default=None)

    assert same(summary["last"], last)
    assert summary["steps"] == steps and summary["scalar_records"] == len(calls)
    stats = ScalarStats()
    stats.low, stats.high = low, high
    assert same(fields, run_fields(run.config, {**summary, "last": last}, stats))
    assert counters.steps == steps and counters.records["scalars"] == len(calls)
    want = {k: [None if type(v) is float and not math.isfinite(v) else v, last_step[k]] for k, v in last.items()}
    assert same(counters.last, want)
    # the first and last numeric times (an explicit time=None does not count: Counters.add_scalars's rule)
    times = [r["time"] for r in records if isinstance(r["time"], (int, float)) and not isinstance(r["time"], bool)]
    if times:
        assert same(counters.first_time, times[0]) and same(counters.last_time, times[-1])
    scanned = scan_run(run.dir)  # what the writer keeps = what a scan of the files finds
    assert scanned.records["scalars"] == len(calls) and scanned.steps == steps
    assert orjson.dumps(scanned.last) == orjson.dumps(counters.last)


column = st.lists(st.one_of(plain, st.none(), st.booleans()), max_size=30)


@given(col=column)
def test_the_finite_min_max_of_a_column_equals_filtering_it_first(col):
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    old_fold(low, high, [{"k": v} for v in col])
    want = (low["k"], high["k"]) if "k" in low else None
    got = _finite_min_max(col)
    assert same(list(got) if got else got, list(want) if want else want)
    if not any(type(v) is bool for v in col):  # what Run.log stores: floats, ints and None
        got = _finite_min_max(col, numbers=True)
        assert same(list(got) if got else got, list(want) if want else want)


def test_a_key_logged_every_n_steps_keeps_its_last_value_step_and_range(tmp_path):
    with labledger.start_run("r", ledger=tmp_path) as run:
        for s in range(1, 2001):
            if s % 500 == 0:
                run.log(s, loss=1.0 / s, val_loss=float(s))
            else:
                run.log(s, loss=1.0 / s)
            if s % 300 == 0:
                run._fold()
        c = run._counters()
    assert c.last["val_loss"] == [2000.0, 2000] and c.last["loss"] == [1.0 / 2000, 2000]
    assert list(c.last) == ["loss", "val_loss"]
    fields = run._fields()
    assert fields["scalars.val_loss.min"] == 500.0 and fields["scalars.loss.max"] == 1.0


def test_an_ended_run_writes_nowhere_even_when_its_fd_number_is_reused(tmp_path):
    """Run.log on an ended run raises RunStateError from its refused write (#19: the fd is -1, not
    the closed file's number, which the next file opened may get)."""
    from labledger.errors import RunStateError

    run = labledger.start_run("r", ledger=tmp_path / "l")
    run.log(1, loss=0.5)
    run.finish()
    other = os.open(tmp_path / "other", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with pytest.raises(RunStateError, match="is finished"):
            run.log(2, loss=0.25)
    finally:
        os.close(other)
    assert (tmp_path / "other").read_bytes() == b""
    assert len((run.dir / "metrics.jsonl").read_bytes().splitlines()) == 1


def test_counters_times_skip_a_record_whose_time_is_not_a_number(tmp_path):
    # hypothesis found it: a first record logged with time=None left first_time unset, and the next
    # fold took its own first record's time; a last record with time=None made last_time None
    run = labledger.start_run("t", ledger=tmp_path)
    run.log(1, time=None)
    run.log(2, loss=1.0)
    run.log(3, loss=0.5)
    run._fold()
    run.log(4, time=None)
    times = [orjson.loads(line)["time"] for line in (run.dir / "metrics.jsonl").read_bytes().splitlines()]
    counters = run._counters()
    assert (counters.first_time, counters.last_time) == (times[1], times[2])
    assert (scan_run(run.dir).first_time, scan_run(run.dir).last_time) == (times[1], times[2])
    run.finish()
