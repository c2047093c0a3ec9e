"""Records as flat rows and Arrow tables: the reference that ``RunView.table`` uses and that the
fast path of :mod:`labledger.store.record_columns` must equal, column for column.

>>> rows = list(sample_records(iter([{"microbatch": 1, "samples": [{"gold": "a", "probabilities": {"a": 1.0}}]}])))
>>> flat_record(rows[0])
{'microbatch': 1, 'sample_index': 0, 'gold': 'a', 'probabilities.a': 1.0}
>>> records_to_table(rows).column_names
['microbatch', 'sample_index', 'gold', 'probabilities.a']
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["flat_record", "records_to_table", "sample_records"]


def sample_records(batches: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One record per sample, with its batch's fields (``microbatch``, ``optimizer_step``, ...)."""
    for b in batches:
        base = {k: v for k, v in b.items() if k != "samples"}
        for i, s in enumerate(b.get("samples") or ()):
            rec = {**base, "sample_index": i}
            for k, v in s.items():
                rec[k if k not in base else f"sample.{k}"] = v
            yield rec


def flat_record(rec: dict[str, Any]) -> dict[str, Any]:
    """One record as a flat row: a mapping of numbers becomes a column per key (``probabilities.a``),
    any other mapping or list its JSON text."""
    out: dict[str, Any] = {}
    for k, v in rec.items():
        if isinstance(v, dict):
            if v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v.values()):
                for kk, vv in v.items():
                    out[f"{k}.{kk}"] = float(vv)
            else:
                out[k] = orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()
        elif isinstance(v, list):
            out[k] = orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()
        else:
            out[k] = v
    return out


def records_to_table(records: Any) -> pa.Table:
    """Flatten records (see :meth:`RunView.table`) into an Arrow table with a unified schema."""
    import pyarrow as pa  # loaded here: reading the index must not wait for Arrow (issue 12)

    rows = [flat_record(r) for r in records]
    if not rows:
        return pa.table({})
    columns: dict[str, None] = {}
    for r in rows:
        for k in r:
            columns.setdefault(k, None)
    data = {}
    for col in columns:
        values = [r.get(col) for r in rows]
        try:
            data[col] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            data[col] = pa.array(
                [None if v is None else (v if isinstance(v, str) else orjson.dumps(v).decode()) for v in values],
                type=pa.string(),
            )
    return pa.table(data)
