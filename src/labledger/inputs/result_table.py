"""A checked :class:`~labledger.inputs.results.ResultSet` as one Arrow table, and back: the form
the columnar cache (:mod:`labledger.inputs.columnar`) keeps of a results file.

Only the task kinds the Arrow reader builds are encoded (classification, binary, regression);
:func:`result_set_to_table` returns ``None`` for anything else and the set is simply not cached.
Tasks are stored one after another (rows ``start .. start + n``); every column belongs to one task
(``t0.id``, ``t0.p1``, ...) and is null outside its rows, so a task's columns are a slice.
The per-task facts that are not columns (kind, labels, positive label, slice values, extra
field names) travel as JSON in the schema's metadata.

>>> from labledger.inputs.results import results_from_rows
>>> rs = results_from_rows([{"id": "a", "task": "t", "gold": "x", "probs": {"x": 0.8, "y": 0.2}}])
>>> back = result_set_from_table(result_set_to_table(rs), source="r.jsonl")
>>> back["t"].labels, back["t"].probs.tolist(), back.source
(('x', 'y'), [[0.8, 0.2]], 'r.jsonl')
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from labledger.inputs.results import (
    ProbTask,
    RegressionTask,
    ResultSet,
    TaskData,
    defer_binary_probs,
    defer_ids,
    defer_lines,
    deferred_first_line,
    deferred_ids,
    given_sorts,
    set_given_sorts,
)

_META = b"labledger.results"
#: A classification task of at most this many labels keeps each label's sort order in its entry
#: (the default metrics sort every column; past this the entry would grow by 8 bytes x n x labels).
MAX_SORTED_COLUMNS = 8


def sorted_columns(td: ProbTask) -> list[int]:
    """The probability columns of ``td`` whose ascending sort order its cache entry keeps (and the
    JSONL reader sorts beside its read): a binary task's P(positive), else every label's up to
    :data:`MAX_SORTED_COLUMNS` labels (#19).

    >>> t = ProbTask(task="t", ids=np.array(["a"]), lines=np.array([1]), kind="classification",
    ...              labels=("x", "y", "z"), probs=np.full((1, 3), 1 / 3), gold_index=np.array([0]), pred_index=np.array([0]))
    >>> sorted_columns(t)
    [0, 1, 2]
    """
    if td.kind == "binary":
        return [td.labels.index(td.positive)] if td.positive in td.labels else []
    return list(range(len(td.labels))) if len(td.labels) <= MAX_SORTED_COLUMNS else []


def _padded(arr: pa.Array | pa.ChunkedArray, start: int, total: int) -> pa.Array:
    arr = one_array(arr)
    after = total - start - len(arr)
    if start == 0 and after == 0:
        return arr
    return pa.concat_arrays([pa.nulls(start, arr.type), arr, pa.nulls(after, arr.type)])


def result_set_to_table(rs: ResultSet) -> pa.Table | None:
    """``rs`` as one table (see the module docstring), or ``None`` when a task is of a kind not encoded."""
    total = rs.n
    columns: dict[str, pa.Array] = {}
    tasks: list[dict[str, Any]] = []
    start = 0
    for t, (name, td) in enumerate(rs.tasks.items()):
        p = f"t{t}."
        info: dict[str, Any] = {"task": name, "kind": td.kind, "n": td.n, "start": start}
        arrow_ids = deferred_ids(td)
        if arrow_ids is not None:
            arrow_ids = one_array(arrow_ids)
        cols: dict[str, Any] = {"id": arrow_ids if arrow_ids is not None else pa.array(td.ids.tolist(), pa.string())}
        first = deferred_first_line(td)
        if first is not None:  # consecutive lines, not built: no column
            info["first_line"] = first
        elif td.n and np.array_equal(td.lines, np.arange(td.lines[0], td.lines[0] + td.n)):
            info["first_line"] = int(td.lines[0])  # consecutive lines: no column
        else:
            cols["line"] = numpy_arrow(td.lines, pa.int64())
        if td.group is not None:
            cols["group"] = numpy_arrow(td.group, pa.int64())
        if td.repeat is not None:
            cols["repeat"] = pa.array(td.repeat.tolist())
        if isinstance(td, ProbTask):
            # only what the readers do not derive: binary probs and both pred_index come back
            # from score / probs by the readers' own rules (binary_task, argmax), bit for bit
            info.update(labels=list(td.labels), positive=td.positive, has_score=td.score is not None)
            cols["gold_index"] = numpy_arrow(td.gold_index, pa.int64())
            if td.kind == "binary":
                cols["score"] = numpy_arrow(td.score, pa.float64())
            else:
                for j in range(len(td.labels)):
                    cols[f"p{j}"] = numpy_arrow(td.probs[:, j], pa.float64())
            # the ascending order of each column the metrics sort, kept like a database index; this
            # process's evaluation uses them too (#19)
            sorted_cols = sorted_columns(td)
            given = given_sorts(td)
            # a binary task's one sorted column is its score (its probs may not be made; the same values)
            score = td.score if td.kind == "binary" else None
            orders = {
                j: given[j] if j in given else np.argsort(score if score is not None else td.probs[:, j])
                for j in sorted_cols
            }
            for j, order in orders.items():
                cols[f"o{j}"] = numpy_arrow(order, pa.int64())
            info["sorted"] = {"columns": list(orders), "numpy": np.__version__}
            set_given_sorts(td, orders)
        elif isinstance(td, RegressionTask):
            cols["gold_value"] = numpy_arrow(td.gold_value, pa.float64())
            cols["pred_value"] = numpy_arrow(td.pred_value, pa.float64())
        else:
            return None
        slices = []
        for k, (sname, (codes, values)) in enumerate(td.slice_columns.items()):
            cols[f"s{k}"] = numpy_arrow(codes, pa.int32())
            slices.append([sname, values])
        info["slices"] = slices
        extras = list(td.extras)
        for k, ename in enumerate(extras):
            vals = td.extras[ename]
            arrow = getattr(td.extras, "_arrow", None)
            try:
                cols[f"x{k}"] = arrow[ename] if arrow is not None else pa.array(list(vals))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return None
        info["extras"] = extras
        info["columns"] = list(cols)
        for cname, arr in cols.items():
            columns[p + cname] = _padded(arr, start, total)
        tasks.append(info)
        start += td.n
    try:
        meta = orjson.dumps({"tasks": tasks, "repeat_field": rs.repeat_field})
    except TypeError:
        return None  # a slice value JSON cannot hold
    return pa.table(columns).replace_schema_metadata({_META: meta})


_PLAIN = {
    pa.float64(): np.float64,
    pa.int64(): np.int64,
    pa.int32(): np.int32,
    pa.int16(): np.int16,
    pa.int8(): np.int8,
    pa.uint8(): np.uint8,
    pa.uint32(): np.uint32,
}


def one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``column`` as one Arrow array: a chunked array of one chunk is that chunk, not a copy of it
    (``combine_chunks`` copies even a single chunk, pyarrow 26: every memory-mapped cache column was
    read into a second, anonymous copy, #19); of several chunks, their concatenation.

    >>> c = pa.chunked_array([[1, 2, 3]])
    >>> one_array(c).buffers()[1].address == c.chunk(0).buffers()[1].address, one_array(pa.chunked_array([[1], [2]])).to_pylist()
    (True, [1, 2])
    """
    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def numpy_arrow(values: Any, type_: pa.DataType) -> pa.Array:
    """``pa.array(values, type_)`` of numeric numpy values (``type_`` one of ``_PLAIN``'s): an Arrow
    array over one contiguous buffer of them, made without ``pa.array``, which imports pandas where
    it is installed for any numpy array or list (~0.28 s the first time: a first eval of a large
    file, which writes its cache entry, paid it, #19). A view of ``values`` when they are already
    contiguous and of that type: they must not change while the array is in use.

    >>> numpy_arrow(np.array([3, 1]), pa.int64()).to_pylist(), numpy_arrow(np.arange(6.0).reshape(3, 2)[:, 1], pa.float64()).to_pylist()
    ([3, 1], [1.0, 3.0, 5.0])
    """
    arr = np.ascontiguousarray(values, dtype=_PLAIN[type_])
    return pa.Array.from_buffers(type_, len(arr), [None, pa.py_buffer(arr)])


def arrow_numpy(column: pa.Array | pa.ChunkedArray, *, copy: bool = True) -> np.ndarray:
    """A numeric or boolean Arrow column without nulls as a writable numpy array, from its buffers;
    anything else through pyarrow's ``to_numpy``. (pyarrow's ``to_numpy`` imports pandas: ~0.3 s of
    every read's start-up, #19.) ``copy=False``: a numeric column of one chunk comes back as a
    read-only view of its buffer (a memory-mapped cache entry's pages, not a second copy of them).

    >>> arrow_numpy(pa.chunked_array([[1.5, 2.5], [3.5]])).tolist(), arrow_numpy(pa.array([True, False, True]).slice(1)).tolist()
    ([1.5, 2.5, 3.5], [False, True])
    >>> c = pa.chunked_array([[1, 2, 3]]).slice(1)
    >>> v = arrow_numpy(c, copy=False); v.tolist(), v.flags.writeable
    ([2, 3], False)
    >>> v.ctypes.data == c.chunk(0).buffers()[1].address + 8   # the column's own memory
    True
    """
    arr = one_array(column)
    if arr.null_count == 0:
        n, off = len(arr), arr.offset
        plain = _PLAIN.get(arr.type)
        if plain is not None:
            view = np.frombuffer(arr.buffers()[1], dtype=plain, count=n + off)[off:]
            if copy:
                return view.copy()
            view.flags.writeable = False  # never a write into the Arrow data
            return view
        if pa.types.is_boolean(arr.type):
            bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=(n + off + 7) // 8)
            return np.unpackbits(bits, count=n + off, bitorder="little")[off:].astype(bool)
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def _numbers(column: pa.ChunkedArray, dtype: Any) -> np.ndarray:
    """A numeric column as a numpy array of ``dtype`` (:func:`arrow_numpy`): a read-only view of the
    entry's buffer where the types agree (no copy of a memory-mapped column, #19), else a copy.

    >>> _numbers(pa.chunked_array([[1.5, 2.5], [3.5]]), np.float64).tolist()
    [1.5, 2.5, 3.5]
    """
    return np.asarray(arrow_numpy(column, copy=False), dtype=dtype)


def result_set_from_table(table: pa.Table, *, source: str) -> ResultSet | None:
    """The :class:`ResultSet` that :func:`result_set_to_table` encoded (``None`` if ``table`` is not one)."""
    from labledger.inputs.arrow import LazyColumns

    raw = (table.schema.metadata or {}).get(_META)
    if raw is None:
        return None
    out: dict[str, TaskData] = {}
    doc = orjson.loads(raw)
    for t, info in enumerate(doc["tasks"]):
        sub = table.slice(info["start"], info["n"])
        p = f"t{t}."

        def col(name: str, sub: pa.Table = sub, p: str = p) -> pa.ChunkedArray:
            return sub.column(p + name)

        def num(name: str, dtype: Any) -> np.ndarray:
            return _numbers(col(name), dtype)

        names = set(info["columns"])
        id_col = col("id")
        ids = np.empty(0, dtype=object)  # replaced below by the column, converted on first use
        first = info.get("first_line")
        common: dict[str, Any] = {
            "task": info["task"],
            "ids": ids,
            "lines": num("line", np.int64) if first is None else np.empty(0, np.int64),  # deferred below
            "group": num("group", np.int64) if "group" in names else None,
            "slice_columns": {
                sname: (num(f"s{k}", np.int32), values) for k, (sname, values) in enumerate(info["slices"])
            },
            "extras": LazyColumns({ename: col(f"x{k}") for k, ename in enumerate(info["extras"])}),
        }
        if "repeat" in names:
            rep = np.empty(info["n"], dtype=object)
            rep[:] = col("repeat").to_pylist()
            common["repeat"] = rep
        td: TaskData
        if info["kind"] == "regression":
            td = RegressionTask(
                **common, gold_value=num("gold_value", np.float64), pred_value=num("pred_value", np.float64)
            )
        elif info["kind"] == "binary":
            labels = tuple(info["labels"])
            score = num("score", np.float64)
            pj = labels.index(info["positive"])
            td = ProbTask(
                **common,
                kind="binary",
                labels=labels,
                probs=np.empty((0, 2)),  # made from the score when read (below)
                gold_index=num("gold_index", np.int64),
                pred_index=np.where(score >= 0.5, pj, 1 - pj).astype(np.int64, copy=False),
                score=score,
                positive=info["positive"],
            )
            defer_binary_probs(td, score, pj)
        else:
            labels = tuple(info["labels"])
            probs = np.empty((info["n"], len(labels)), dtype=np.float64)
            for j in range(len(labels)):
                probs[:, j] = num(f"p{j}", np.float64)
            positive = info["positive"]
            td = ProbTask(
                **common,
                kind="classification",
                labels=labels,
                probs=probs,
                gold_index=num("gold_index", np.int64),
                pred_index=probs.argmax(axis=1).astype(np.int64) if info["n"] else np.zeros(0, np.int64),
                score=probs[:, labels.index(positive)].copy() if info["has_score"] else None,
                positive=positive,
            )
        kept = info.get("sorted")
        if isinstance(td, ProbTask) and kept is not None and kept.get("numpy") == np.__version__:
            # np.argsort of this numpy (another one may order ties otherwise: then sort again)
            set_given_sorts(td, {int(j): num(f"o{j}", np.int64) for j in kept["columns"]})
        defer_ids(td, id_col)
        if first is not None:
            defer_lines(td, first, info["n"])
        out[info["task"]] = td
    return ResultSet(out, source=source, repeat_field=doc["repeat_field"])


__all__ = ["arrow_numpy", "numpy_arrow", "one_array", "result_set_from_table", "result_set_to_table", "sorted_columns"]
