"""Arrow columns straight from a run's ``batches.jsonl``: the fast path of ``RunView.table("samples")``.

``pyarrow.json`` parses the file into nested columns (one row per microbatch, ``samples`` a list
of structs); the samples are then flattened with Arrow kernels (no Python dict per sample). The
result is exactly the table that :func:`labledger.store.flat.records_to_table` builds from the
dicts, column for column: same names, order, types and values (a hypothesis test checks it). The
fast path covers the records the ledger writes (scalar batch fields; sample fields that are
scalars or complete mappings of numbers, such as ``probabilities``); for anything else (a damaged
line, a nested ``input``, a label missing from some samples' probabilities, mixed types) it returns
``None`` and the caller builds the table from the dicts, which also reports damaged lines as before.

>>> import tempfile, pathlib, orjson
>>> p = pathlib.Path(tempfile.mkdtemp()) / "batches.jsonl"
>>> _ = p.write_bytes(orjson.dumps({"microbatch": 1, "loss": 0.5, "samples": [
...     {"gold": "a", "probabilities": {"a": 0.5, "b": 0.5}}]}) + b"\\n")
>>> samples_table(p.read_bytes()).column_names
['microbatch', 'loss', 'sample_index', 'gold', 'probabilities.a', 'probabilities.b']
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from labledger.inputs.arrow import safe_for_arrow
from labledger.inputs.arrow_buffers import arrow_numpy, numpy_arrow
from labledger.inputs.columnar import cached_table, content_key, store_table, wanted
from labledger.store.compressed import read_record_bytes, record_key, record_state
from labledger.store.flat import flat_record, sample_records


def _scalar(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_int64(t)
        or pa.types.is_float64(t)
        or pa.types.is_boolean(t)
        or pa.types.is_null(t)
    )


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_int64(t) or pa.types.is_float64(t))


def _first_columns(line: bytes) -> list[str] | None:
    """The columns the dict path gives the first sample of the first record, in its order."""
    try:
        first = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(first, dict):
        return None
    rec = next(sample_records(iter([first])), None)
    return None if rec is None else list(flat_record(rec))


def samples_table(data: bytes) -> pa.Table | None:
    """One row per sample of the batch records in ``data`` (the bytes of ``batches.jsonl``), or
    ``None`` when the file is outside the fast path's shape (see the module docstring)."""
    if not data or not safe_for_arrow(data):  # every line starts with "{": no blank line either
        return None
    end = data.find(b"\n")
    head = _first_columns(data if end < 0 else data[:end])
    if head is None:
        return None
    try:
        table = pj.read_json(pa.BufferReader(data))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if table.num_rows != n_lines or "samples" not in table.column_names:
        return None
    try:
        out = _flat(table.combine_chunks())
    except _Outside:
        return None
    if out is None or out.column_names != head:
        return None
    return out


class _Outside(Exception):
    """The records are outside the fast path's shape."""


def _flat(table: pa.Table) -> pa.Table | None:
    base_names = [c for c in table.column_names if c != "samples"]
    for c in base_names:
        if not _scalar(table.column(c).type):
            raise _Outside
    samples = table.column("samples").chunk(0) if table.column("samples").num_chunks else None
    if samples is None or not pa.types.is_list(samples.type) or not pa.types.is_struct(samples.type.value_type):
        raise _Outside
    flat = pc.list_flatten(samples)
    if flat.null_count:
        raise _Outside
    parents = pc.list_parent_indices(samples)
    # from the buffers: Arrow's to_numpy and pa.array of numpy values import pandas where it is
    # installed
    offsets = arrow_numpy(samples.offsets)
    par = arrow_numpy(parents)
    index = np.arange(len(par), dtype=np.int64) - offsets[par]
    columns: dict[str, Any] = {}
    # Arrow inferred the batch fields' types from every record; the dict path sees only records
    # with samples. They agree unless a record without samples is what made a column double
    # (the others' values may be integers): then the dict path decides.
    # (a record without samples: a null or an empty list; counted from the offsets and validity,
    # as a fill_null or an equal with a Python number makes a pa.scalar, which imports pandas)
    empty = np.diff(offsets) == 0
    if samples.null_count:
        empty |= ~arrow_numpy(samples.is_valid())
    some_empty = bool(empty.any())
    for c in base_names:
        col = table.column(c).chunk(0).take(parents)
        if some_empty and pa.types.is_floating(col.type):
            raise _Outside
        if col.null_count == len(col) and not pa.types.is_null(col.type):
            col = pa.nulls(len(col))  # null in every record with samples: the dict path's null column
        columns[c] = col
    columns["sample_index"] = numpy_arrow(index, pa.int64())
    base = set(base_names)
    struct_type = flat.type
    for i in range(struct_type.num_fields):
        f = struct_type.field(i)
        child = flat.field(i)
        name = f.name if f.name not in base else f"sample.{f.name}"
        if name in columns:
            raise _Outside
        if f.name in base and table.column(f.name).null_count:
            raise _Outside  # the dict path renames per record: a record lacking the batch field differs
        if _scalar(f.type):
            columns[name] = child
            continue
        if not pa.types.is_struct(f.type) or f.type.num_fields == 0 or child.null_count:
            raise _Outside  # a list or a nested value: the dict path writes it as JSON text
        for j in range(f.type.num_fields):
            g = f.type.field(j)
            value = child.field(j)
            if not _numeric(g.type) or value.null_count:
                raise _Outside
            sub = f"{name}.{g.name}"
            if sub in columns:
                raise _Outside
            columns[sub] = pc.cast(value, pa.float64())
    if not len(flat):
        return pa.table({})
    return pa.table(columns)


def file_table(
    path: Path,
    kind: str,
    slow: Callable[[], pa.Table],
    *,
    fast: Callable[[bytes], pa.Table | None] | None = None,
    cache: bool = True,
) -> pa.Table:
    """The table of record file ``path`` read as ``kind``: from the columnar cache when its entry
    matches the file's content, else from ``fast(bytes)`` (when given and it applies) or ``slow()``
    (the dict path), stored in the cache after (``cache=False``: a live run's file is not stored).

    A table built while damaged lines were skipped is not stored, so every later read reports them
    again (their warnings are passed on as they were raised).

    >>> import tempfile, pathlib, pyarrow as pa
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.jsonl"; _ = p.write_bytes(b'{"step": 1}\\n')
    >>> file_table(p, "table-scalars", lambda: pa.table({"step": [1]})).to_pydict()
    {'step': [1]}
    """
    state = record_state(path)  # either form: a compacted file is read as its JSONL
    if state is None or state[0] < 0:
        return slow()
    size = state[0]
    folder = wanted(size) if cache else None
    if folder is not None:
        hit = cached_table(path, kind, folder=folder, key=record_key(path))
        if hit is not None:
            return hit.replace_schema_metadata(None)
    if folder is None and fast is None:
        return slow()
    data = read_record_bytes(path)
    key = content_key(data)
    table = fast(data) if fast is not None else None
    if table is None:
        del data
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = slow()
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if caught or (folder is not None and record_key(path) != key):
            folder = None  # damaged lines, or the file changed while it was read
    if folder is not None:
        store_table(table, path, kind, key, folder=folder)
    return table


__all__ = ["file_table", "samples_table"]
