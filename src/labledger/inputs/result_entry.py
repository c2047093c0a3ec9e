"""A checked :class:`~labledger.inputs.results.ResultSet` as a columnar cache entry, and back: the
form the cache (:mod:`labledger.inputs.columnar`, a *columns* entry) keeps of a large results file.

The numeric columns (gold and predicted values, the probability matrix, the sort orders, line
numbers, groups, slice codes) come back as numpy views of the entry's memory map (an Arrow IPC
file: no decode, no copy). The ids, extra fields and repeat values stay Arrow columns, converted
when one is first read (the ids only by what needs them: a comparison's pairing, an error
message, a subset).

Only the task kinds the Arrow reader builds are encoded (classification, binary, regression);
:func:`encode` returns ``None`` for anything else and the set is simply not cached. Each task's
columns are named ``t0.gold_index``, ``t0.probs``, ``t0.o1``, ...; the per-task facts that are not columns (kind,
labels, positive label, slice values, extra field names) travel in the entry's JSON meta.

>>> from labledger.inputs.reference import results_from_rows
>>> rs = results_from_rows([{"id": "a", "task": "t", "gold": "x", "probs": {"x": 0.8, "y": 0.2}}])
>>> back = decode(*roundtrip(encode(rs)), source="r.jsonl")
>>> back["t"].labels, back["t"].probs.tolist(), back["t"].ids.tolist(), back.source
(('x', 'y'), [[0.8, 0.2]], ['a'], 'r.jsonl')
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson
import xxhash

from labledger.inputs.columnar import cached_columns, store_columns, wanted
from labledger.inputs.reference import (
    LazyColumns,
    ProbTask,
    RegressionTask,
    ResultSet,
    TaskData,
    binary_predicted,
    defer_binary_probs,
    defer_ids,
    defer_lines,
    deferred_first_line,
    deferred_ids,
    given_sorts,
    given_ties,
    label_index_type,
    set_given_sorts,
)
from labledger.metrics.kernels import index_dtype

#: The layout of a result set's entry, kept in its meta: an entry of another layout is never read,
#: and is rewritten in place (the same file: the layout is not part of the entry's name, so a new
#: version leaves no orphan behind). 2: each sorted probability column's ascending order; 3:
#: a columns entry (numeric arrays read by numpy alone); 4: a classification task's
#: probabilities as one (n, K) matrix; 5: the layout in the meta, not in the kind; 6: the sorted
#: columns' stable orders (:func:`~labledger.metrics.kernels.stable_argsort`: the same on every
#: machine; a bootstrap without clusters draws its weights in that order); 7: those orders as 4-byte
#: positions up to 2^31 - 1 items; 8: the gold
#: label indices as :func:`~labledger.inputs.results.label_index_type` (int8 up to 128 labels); 9: a classification task's predicted indices kept, not made again by
#: an argmax of the matrix on each read; 10: each kept order's tie-group starts beside it, used as
#: they are (the entry's digest vouches for both: a read neither checks an order against its
#: column nor walks it again for its ties).
ENTRY_FORMAT = 10
#: A classification task of at most this many labels keeps each label's sort order in its entry
#: (the default metrics sort every column; past this the entry would grow by 8 bytes x n x labels).
MAX_SORTED_COLUMNS = 8


def sorted_columns(td: ProbTask) -> list[int]:
    """The probability columns of ``td`` whose ascending sort order its cache entry keeps (and the
    JSONL reader sorts beside its read): a binary task's P(positive), else every label's up to
    :data:`MAX_SORTED_COLUMNS` labels.

    >>> t = ProbTask(task="t", ids=np.array(["a"]), lines=np.array([1]), kind="classification",
    ...              labels=("x", "y", "z"), probs=np.full((1, 3), 1 / 3), gold_index=np.array([0]), pred_index=np.array([0]))
    >>> sorted_columns(t)
    [0, 1, 2]
    """
    if td.kind == "binary":
        return [td.labels.index(td.positive)] if td.positive in td.labels else []
    return list(range(len(td.labels))) if len(td.labels) <= MAX_SORTED_COLUMNS else []


def sorted_column(td: ProbTask, j: int) -> np.ndarray:
    """Column ``j`` of ``td.probs`` as it is sorted: a binary task's score where it has one (the same
    values; its probs may not be made).

    >>> t = ProbTask(task="t", ids=np.array(["a"]), lines=np.array([1]), kind="classification",
    ...              labels=("x", "y"), probs=np.array([[0.25, 0.75]]), gold_index=np.array([0]), pred_index=np.array([1]))
    >>> sorted_column(t, 1).tolist()
    [0.75]
    """
    return td.score if td.kind == "binary" and td.score is not None else td.probs[:, j]


def entry_kind(tolerance: float, positive: Any, repeats: bool) -> str:
    """The cache kind of a result set read with these parameters (one entry per source and kind).

    >>> entry_kind(1e-6, None, False).startswith("results-"), entry_kind(1e-6, "yes", False) == entry_kind(1e-6, None, False)
    (True, False)
    """
    params = orjson.dumps([tolerance, positive, repeats], option=orjson.OPT_SORT_KEYS, default=str)
    return "results-" + xxhash.xxh3_64_hexdigest(params)


class Encoded(NamedTuple):
    """A result set as an entry holds it: JSON ``meta``, numeric ``arrays`` and ``arrow`` columns."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]
    arrow: dict[str, Any]


def encode(rs: ResultSet) -> Encoded | None:
    """``rs`` as an entry's parts (see the module docstring), or ``None`` when a task is of a kind
    not encoded or holds an extra field or slice value the entry cannot keep. Records each
    probability task's sort orders on it (:func:`~labledger.inputs.results.set_given_sorts`): this
    process's evaluation uses them too."""
    import pyarrow as pa

    arrays: dict[str, np.ndarray] = {}
    arrow: dict[str, Any] = {}
    tasks: list[dict[str, Any]] = []
    for t, (name, td) in enumerate(rs.tasks.items()):
        p = f"t{t}."
        info: dict[str, Any] = {"task": name, "kind": td.kind, "n": td.n}
        ids = deferred_ids(td)
        arrow[p + "id"] = ids if ids is not None else pa.array(td.ids.tolist(), pa.string())
        first = deferred_first_line(td)
        if first is not None:  # consecutive lines, not built: no column
            info["first_line"] = first
        elif td.n and np.array_equal(td.lines, np.arange(td.lines[0], td.lines[0] + td.n)):
            info["first_line"] = int(td.lines[0])  # consecutive lines: no column
        else:
            arrays[p + "line"] = np.asarray(td.lines, np.int64)
        if td.group is not None:
            arrays[p + "group"] = np.asarray(td.group, np.int64)
        if td.repeat is not None:
            try:
                arrow[p + "repeat"] = pa.array(td.repeat.tolist())
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return None
            info["repeat"] = True
        if isinstance(td, ProbTask):
            # binary probs and predictions come back from the score by the readers' own rule
            # (binary_task), bit for bit; a classification task's predictions, the argmax of its
            # rows, are kept (as the readers made them by predicted_index): one byte a row, not an
            # argmax on each read
            info.update(labels=list(td.labels), positive=td.positive, has_score=td.score is not None)
            index_type = label_index_type(len(td.labels))
            arrays[p + "gold_index"] = np.asarray(td.gold_index, index_type)
            if td.kind == "binary":
                arrays[p + "score"] = np.asarray(td.score, np.float64)
            else:  # the (n, K) matrix row by row: a read maps it as the matrix itself, no copy
                arrays[p + "probs"] = np.ascontiguousarray(td.probs, np.float64).reshape(-1)
                arrays[p + "pred_index"] = np.asarray(td.pred_index, index_type)
            # the ascending order of each column the metrics sort, kept like a database index, with
            # its tie groups' starts where some values tie (an order this process made, or checked)
            orders, ties = _sorted_with_ties(td)
            for j, order in orders.items():
                arrays[p + f"o{j}"] = np.asarray(order, index_dtype(td.n))
                if ties[j] is not None:
                    arrays[p + f"g{j}"] = np.asarray(ties[j], index_dtype(td.n))
            info["sorted"] = {"columns": list(orders), "tied": [j for j in orders if ties[j] is not None]}
            set_given_sorts(td, orders, ties)
        elif isinstance(td, RegressionTask):
            arrays[p + "gold_value"] = np.asarray(td.gold_value, np.float64)
            arrays[p + "pred_value"] = np.asarray(td.pred_value, np.float64)
        else:
            return None
        slices = []
        for k, (sname, (codes, values)) in enumerate(td.slice_columns.items()):
            arrays[p + f"s{k}"] = np.asarray(codes, np.int32)
            slices.append([sname, values])
        info["slices"] = slices
        extras = list(td.extras)
        for k, ename in enumerate(extras):
            try:
                arrow[p + f"x{k}"] = (
                    td.extras.arrow(ename) if isinstance(td.extras, LazyColumns) else pa.array(list(td.extras[ename]))
                )
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return None
        info["extras"] = extras
        tasks.append(info)
    meta = {"format": ENTRY_FORMAT, "tasks": tasks, "repeat_field": rs.repeat_field}
    try:
        orjson.dumps(meta)
    except TypeError:
        return None  # a slice value JSON cannot hold
    return Encoded(meta, arrays, arrow)


def decode(meta: Any, arrays: dict[str, np.ndarray], arrow: Callable[[str], Any], *, source: str) -> ResultSet | None:
    """The :class:`ResultSet` that :func:`encode` made the parts of (``arrow(name)``: an Arrow
    column, asked for only when read); ``None`` if they are not one."""
    out: dict[str, TaskData] = {}
    try:
        if meta["format"] != ENTRY_FORMAT:
            return None  # another version's layout: read the file again (and rewrite the entry)
        infos = meta["tasks"]
        repeat_field = meta["repeat_field"]
    except (KeyError, TypeError):
        return None
    for t, info in enumerate(infos):
        p = f"t{t}."

        def num(name: str, p: str = p) -> np.ndarray:
            return arrays[p + name]

        first = info.get("first_line")
        n = info["n"]
        extras = info["extras"]
        common: dict[str, Any] = {
            "task": info["task"],
            "ids": np.empty(0, dtype=object),  # deferred below: converted on first use
            "lines": num("line") if first is None else np.empty(0, np.int64),  # else deferred below
            "group": num("group") if p + "group" in arrays else None,
            "slice_columns": {sname: (num(f"s{k}"), values) for k, (sname, values) in enumerate(info["slices"])},
            "extras": LazyColumns(extras, partial(_extra_column, arrow, p, extras)),
        }
        if info.get("repeat"):
            rep = np.empty(n, dtype=object)
            rep[:] = arrow(p + "repeat").to_pylist()
            common["repeat"] = rep
        td: TaskData
        if info["kind"] == "regression":
            td = RegressionTask(**common, gold_value=num("gold_value"), pred_value=num("pred_value"))
        elif info["kind"] == "binary":
            labels = tuple(info["labels"])
            score = num("score")
            pj = labels.index(info["positive"])
            td = ProbTask(
                **common,
                kind="binary",
                labels=labels,
                probs=np.empty((0, 2)),  # made from the score when read (below)
                gold_index=num("gold_index"),
                pred_index=binary_predicted(score, pj),
                score=score,
                positive=info["positive"],
            )
            defer_binary_probs(td, score, pj)
        else:
            labels = tuple(info["labels"])
            probs = num("probs").reshape(n, len(labels))  # a read-only view of the entry's matrix
            positive = info["positive"]
            td = ProbTask(
                **common,
                kind="classification",
                labels=labels,
                probs=probs,
                gold_index=num("gold_index"),
                pred_index=num("pred_index"),
                score=probs[:, labels.index(positive)].copy() if info["has_score"] else None,
                positive=positive,
            )
        kept = info.get("sorted")
        if isinstance(td, ProbTask) and kept is not None:  # their stable orders and tie starts
            columns, tied = [int(j) for j in kept["columns"]], {int(j) for j in kept["tied"]}
            orders = {j: num(f"o{j}") for j in columns}
            set_given_sorts(td, orders, {j: num(f"g{j}") if j in tied else None for j in columns})
        defer_ids(td, load=partial(arrow, p + "id"))
        if first is not None:
            defer_lines(td, first, n)
        out[info["task"]] = td
    return ResultSet(out, source=source, repeat_field=repeat_field)


def _sorted_with_ties(td: ProbTask) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray | None]]:
    """The ascending order of each of ``td``'s :func:`sorted_columns` and its tie starts (None: no
    ties), by the evaluation's own rule (:func:`~labledger.metrics.classification.ascending_of`:
    an order the reader made with its ties as it is, any other given order checked against its
    column, else the column sorted)."""
    from labledger.metrics.classification import ascending_of

    given, made = given_sorts(td), given_ties(td)
    orders: dict[int, np.ndarray] = {}
    ties: dict[int, np.ndarray | None] = {}
    for j in sorted_columns(td):
        found = (given[j], made[j]) if j in made else given.get(j)
        orders[j], ties[j] = ascending_of(sorted_column(td, j), found)
    return orders, ties


def _extra_column(arrow: Callable[[str], Any], prefix: str, names: list[str], name: str) -> Any:
    """The Arrow column of a task's extra field ``name`` (stored as ``x{k}``, k its place in ``names``)."""
    return arrow(f"{prefix}x{names.index(name)}")


def roundtrip(encoded: Encoded | None) -> tuple[Any, dict[str, np.ndarray], Callable[[str], Any]]:
    """``encoded``'s parts as :func:`decode` takes them, without a file (tests and examples)."""
    if encoded is None:
        raise ValueError("nothing encoded")
    return encoded.meta, encoded.arrays, encoded.arrow.__getitem__


def store_result_set(
    rs: ResultSet, source: str | os.PathLike[str], kind: str, key: str, *, folder: Path | None = None
) -> bool:
    """Write ``rs`` as the cache entry of ``source`` (read as ``kind``; content ``key``, the key of
    the bytes it was read from); whether it was written (a set :func:`encode` cannot hold is not)."""
    encoded = encode(rs)
    if encoded is None:
        return False
    return store_columns(source, kind, key, encoded.meta, encoded.arrays, encoded.arrow, folder=folder)


def cached_result_set(path: Path, name: str, tolerance: float, positive: Any, repeats: bool) -> ResultSet | None:
    """The result set of the results file ``path`` (shown as ``name``) from its cache entry, when
    the cache is on, the file is worth caching and the entry matches its content now; else ``None``."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    folder = wanted(size)
    if folder is None:
        return None
    found = cached_columns(path, entry_kind(tolerance, positive, repeats), folder=folder)
    if found is None:
        return None
    try:
        return decode(found.meta, found.arrays, found.arrow, source=name)
    except (KeyError, IndexError, TypeError, ValueError):  # an entry of another shape: read the file
        return None


__all__ = [
    "ENTRY_FORMAT",
    "MAX_SORTED_COLUMNS",
    "Encoded",
    "cached_result_set",
    "decode",
    "encode",
    "entry_kind",
    "roundtrip",
    "sorted_columns",
    "store_result_set",
]
