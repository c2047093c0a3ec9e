"""Result rows written from columns (#13): ``Run.log_result_columns`` against ``Run.log_results`` on
the same rows, on random blocks (good and bad): the same bytes, the same meta, or the same error."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labledger
from labledger.errors import LedgerError, RecordError
from labledger.inputs.result_columns import MISSING, Probs, ResultColumns, encode_columns, rows_of
from labledger.inputs.results import validate_rows
from labledger.store.jsonl import dumps_line

TEXT = st.text(
    alphabet=st.sampled_from(["a", '"', ",", "\\", "%", "é", "\n", "}", "{", "\u2028", " ", "[", "]"]), max_size=6
)
NAMES = itertools.count()
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=4,
)


@st.composite
def extra_column(draw: st.DrawFn, n: int) -> object:
    kind = draw(st.sampled_from(["text", "json", "missing", "floats", "array", "matrix"]))
    if kind == "text":
        return draw(st.lists(TEXT, min_size=n, max_size=n))
    if kind == "json":
        return draw(st.lists(JSON, min_size=n, max_size=n))
    if kind == "missing":
        return draw(st.lists(TEXT | st.just(MISSING), min_size=n, max_size=n))
    if kind == "floats":
        return draw(st.lists(st.floats(allow_nan=False) | st.integers(-5, 5), min_size=n, max_size=n))
    if kind == "array":
        dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, np.int32, np.bool_]))
        values = draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n))
        return np.asarray(values).astype(dtype)
    k = draw(st.integers(0, 3))
    return np.asarray(draw(st.lists(st.floats(-50, 0), min_size=n * k, max_size=n * k))).reshape(n, k)


@st.composite
def block(draw: st.DrawFn, shared: dict[str, object]) -> ResultColumns:
    """A block of random rows; with ``bad``, one kind of fault the row checker refuses (or may)."""
    n = draw(st.integers(0, 6))
    bad = draw(st.sampled_from([None, None, "ids", "task", "gold", "probs", "numbers"]))
    names = st.sampled_from([f"d{i}" for i in range(9)] + ['q"', "é,"])
    ids = draw(st.lists(names, min_size=n, max_size=n, unique=bad != "ids"))
    task = draw(st.sampled_from(["acc", "acc_norm", "m"] + ([""] if bad == "task" else [])))
    kind = draw(st.sampled_from(["classification", "regression", "match"]))
    fields: dict[str, object] = {}
    if kind == "classification":
        k = draw(st.integers(1, 4))
        labels = tuple(str(i) for i in range(k))
        logits = np.asarray(draw(st.lists(st.floats(-30, 0), min_size=n * k, max_size=n * k))).reshape(n, k)
        m = np.exp(logits - logits.max(axis=1, keepdims=True)) if n else logits
        m = m / m.sum(axis=1, keepdims=True) if n else m
        if n and bad == "probs":
            m[draw(st.integers(0, n - 1)), 0] += draw(st.sampled_from([0.5, 1e-4, 0.000999, -2.0, math.nan]))
        gold = draw(st.lists(st.sampled_from([*labels, *(["x", 1] if bad == "gold" else [])]), min_size=n, max_size=n))
        fields["probs"] = Probs(labels, m)
        fields["loglik"] = logits
    elif kind == "regression":
        num = st.floats(-1e3, 1e3) | st.integers(-3, 3)
        if bad == "numbers":
            num |= st.sampled_from([math.inf, True, "1"])
        gold = draw(st.lists(num, min_size=n, max_size=n))
        fields["pred"] = draw(st.lists(num, min_size=n, max_size=n) | st.just(np.linspace(0, 1, n)))
        if draw(st.booleans()):
            gold = np.asarray([1.0] * n)
    else:
        gold = draw(st.lists(TEXT, min_size=n, max_size=n))
        fields["pred"] = draw(
            st.lists(TEXT | st.integers(0, 2), min_size=n, max_size=n)
            if bad
            else st.lists(TEXT, min_size=n, max_size=n)
        )
    for name in draw(st.lists(st.sampled_from(["item_hash", "prompt", "choices", "group", "x%y"]), unique=True)):
        if name in shared and len(shared[name]) == n and draw(st.booleans()):
            fields[name] = shared[name]  # the same column object in two blocks
        elif name == "group":
            fields[name] = draw(
                st.lists(st.none() | TEXT | st.integers(0, 3) | st.floats(0, 1), min_size=n, max_size=n)
            )
        else:
            fields[name] = shared[name] = draw(extra_column(n))
    return ResultColumns(task, ids, gold, fields)


def row_bytes(blocks: list[ResultColumns]) -> bytes | str:
    """What the row path stores (or its error message)."""
    rows = [dict(r) for r in rows_of(blocks)]
    try:
        validate_rows(rows, source="results 's'")
        return b"".join(dumps_line(r) for r in rows)
    except RecordError as exc:
        return str(exc)
    except TypeError:
        return "not JSON"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_encode_columns_writes_the_rows_bytes(data: st.DataObject) -> None:
    shared: dict[str, object] = {}
    blocks = data.draw(st.lists(block(shared), min_size=1, max_size=3))
    got = encode_columns(blocks)
    want = row_bytes(blocks)
    if got is not None:
        assert got == want  # when the fast path vouches for the rows, it writes exactly their bytes


@st.composite
def good_block(draw: st.DrawFn) -> ResultColumns:
    n = draw(st.integers(1, 6))
    k = draw(st.integers(2, 4))
    logits = np.asarray(draw(st.lists(st.floats(-30, 0), min_size=n * k, max_size=n * k))).reshape(n, k)
    m = np.exp(logits - logits.max(axis=1, keepdims=True))
    labels = tuple(str(i) for i in range(k))
    choices = [draw(st.lists(TEXT, min_size=k, max_size=k)) for _ in range(n)]
    return ResultColumns(
        draw(st.sampled_from(["acc", "acc_norm"])),
        [f"doc-{i}" for i in range(n)],
        draw(st.lists(st.sampled_from(labels), min_size=n, max_size=n)),
        {
            "probs": Probs(labels, m / m.sum(axis=1, keepdims=True)),
            "loglik": logits,
            "item_hash": draw(st.lists(TEXT, min_size=n, max_size=n)),
            "prompt": draw(st.lists(TEXT | st.just(MISSING), min_size=n, max_size=n)),
            "choices": choices,
            "harness_score": draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)),
        },
    )


@settings(max_examples=30, deadline=None)
@given(good_block())
def test_encode_columns_takes_the_fast_path_for_valid_choice_rows(b: ResultColumns) -> None:
    other = ResultColumns("mean", b.ids, [1.0] * b.n, {"pred": np.linspace(0, 1, b.n), "prompt": b.fields["prompt"]})
    got = encode_columns([b, other])
    assert got is not None
    assert got == row_bytes([b, other])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    led = tmp_path_factory.mktemp("ledger")
    with labledger.start_run("rows", ledger=led) as a, labledger.start_run("cols", ledger=led) as b:
        yield a, b


def stored(run: labledger.Run, name: str, call) -> tuple[bytes, dict] | str:
    try:
        path = call()
    except LedgerError as exc:
        return f"{type(exc).__name__}: {exc}"
    meta = json.loads((path.parent / "meta.json").read_text())
    meta.pop("created")
    return path.read_bytes(), meta


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_log_result_columns_is_log_results_on_the_rows(runs, data: st.DataObject) -> None:
    a, b = runs
    shared: dict[str, object] = {}
    blocks = data.draw(st.lists(block(shared), min_size=1, max_size=2) | st.lists(good_block(), min_size=1, max_size=2))
    name = f"set{next(NAMES)}"
    want = stored(a, name, lambda: a.log_results(name, list(rows_of(blocks)), harness={"name": "x"}))
    got = stored(b, name, lambda: b.log_result_columns(name, blocks, harness={"name": "x"}))
    assert got == want


def test_errors_name_the_row_line_and_field(runs) -> None:
    _, run = runs
    probs = Probs(("0", "1"), np.array([[0.5, 0.5], [0.9, 0.3]]))
    with pytest.raises(RecordError, match=r"results 'bad':2: field 'probs' must sum to 1"):
        run.log_result_columns("bad", [ResultColumns("acc", ["a", "b"], ["0", "1"], {"probs": probs})])
    dup = ResultColumns("acc", ["a"], [1.0], {"pred": [1.0]})
    with pytest.raises(RecordError, match=r"results 'dup':2: field 'id' duplicate id 'a' in task 'acc'"):
        run.log_result_columns("dup", [dup, dup])
    assert not (run.dir / "evals" / "bad").exists() or not any((run.dir / "evals" / "bad").iterdir())
    run.log_result_columns("ok", [dup])
    with pytest.raises(LedgerError, match="already has results 'ok'"):
        run.log_result_columns("ok", [dup])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(TEXT | st.sampled_from(["2.0", "[", "],[", "a,b"]), min_size=1, max_size=4, unique=True),
    st.data(),
)
def test_probability_and_list_columns_are_each_rows_json(labels: list[str], data: st.DataObject) -> None:
    from labledger.inputs.result_columns import _OPTIONS, _fragments

    k, n = len(labels), data.draw(st.integers(1, 4))
    edge = st.sampled_from([0.0, -0.0, 1.0, 5e-324, 0.1, 1 / 3, 0.5, 2.0, -1.0]) | st.floats(0, 1)
    m = np.asarray(data.draw(st.lists(edge, min_size=n * k, max_size=n * k))).reshape(n, k)
    lists = data.draw(st.lists(st.lists(TEXT, min_size=1, max_size=3), min_size=n, max_size=n))
    for col, values in ((Probs(tuple(labels), m), [dict(zip(labels, r)) for r in m.tolist()]), (lists, lists)):
        want = [b',"c":' + orjson.dumps(v, option=_OPTIONS) for v in values]
        assert _fragments(col, n, b',"c":') == want
