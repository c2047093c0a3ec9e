"""The JSONL reader's fast checks (#19): hashed id distinctness and one newline count, against the
exact forms they stand in for."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labledger.errors import RecordError
from labledger.inputs.arrow import HASH_ID_BYTES, arrow_lines, safe_for_arrow, surely_distinct
from labledger.inputs.results import read_results

FAST = settings(max_examples=60, deadline=None)

ids_strategy = st.lists(st.text(min_size=0, max_size=24), min_size=0, max_size=40)


@FAST
@given(ids_strategy, st.integers(0, 5))
def test_surely_distinct_is_never_wrong_and_sees_distinct_ids(values, start):
    arr = pa.array(values, pa.string()).slice(min(start, len(values)))  # a slice: offsets not at 0
    part = values[min(start, len(values)) :]
    distinct = len(set(part)) == len(part)
    got = surely_distinct(arr)
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
