"""The catalog's compact form: a table of N rows written once per column (#12).

At 10,000 runs the catalog as a list of objects was 7 MB of JavaScript whose parsing was most of
the page's time. Packed, each column of the table (a key of the entries, a query field) is one of

``{"c": v}``
    every row has the same value ``v`` (``steps`` of a sweep, ``status``, ``host``);
``{"v": [...]}``
    the values as a plain list (text that rarely repeats: ids, names);
``{"f": "<base64>", "int": 1?}``
    numbers (and nulls) as little-endian float64, base64; a null is a NaN (JSON has no NaN, so
    none is lost); ``int`` says every number was an integer (the Python reader gives ints back);
``{"d": [...], "i": "<base64>", "w": 1|2|4}``
    a table of the distinct values (any JSON: text, numbers, lists, objects) and one unsigned
    index per row of width ``w`` bytes; an index equal to ``len(d)`` means the row has no such key.

The page decodes it in ``LL.unpackTable`` (static/js/common.js); :func:`unpack_table` is the same
in Python (``load_data_file`` gives a packed catalog back in its list-of-objects form).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

#: A key a row does not have (distinct from a null value).
ABSENT: Any = object()


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(a.tobytes()).decode("ascii")


def _key(v: Any) -> Any:
    """What makes two values the same value of a column (1, 1.0 and True are three)."""
    if v is None or isinstance(v, (str, int, float)):
        return (type(v), v)
    if v is ABSENT:
        return ABSENT
    return (list, orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS))


def pack_column(values: Sequence[Any]) -> dict[str, Any]:
    """One column of a packed table (``ABSENT`` where a row has no such key).

    >>> pack_column([3, 3, 3])
    {'c': 3}
    >>> pack_column(["a", "b"])
    {'v': ['a', 'b']}
    >>> pack_column(["x", "y", "x", ABSENT])
    {'d': ['x', 'y'], 'i': 'AAEAAg==', 'w': 1}
    >>> unpack_column(pack_column([0.5, None, 2.0, 7.25, 1e-3]), 5)
    [0.5, None, 2.0, 7.25, 0.001]
    """
    types = set(map(type, values))
    if not types <= _SIMPLE:
        return _pack_any(values)
    # text, numbers and nulls only: the same column as _pack_any's, each step done in C (a
    # function call per value made the catalog of 10,000 runs a second of a rebuild)
    n = len(values)
    keys = list(zip(map(type, values), values))  # (_key of such a value)
    distinct = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    if len(distinct) == 1:
        return {"c": values[0]}
    # numbers within 2**53 (a NaN or an infinity compares false) and nulls; never a bool
    numeric = types <= _NUMERIC and all(v is None or -_LIMIT <= v <= _LIMIT for v in values)
    if numeric and len(distinct) > max(16, n // 8):
        floats = np.array([math.nan if v is None else v for v in values], dtype="<f8")
        out: dict[str, Any] = {"f": _b64(floats)}
        if types <= _INTEGER:
            out["int"] = 1
        return out
    if len(distinct) == n and types == {str}:
        return {"v": list(values)}
    table = [k[1] for k in distinct]
    width = 1 if len(table) < 255 else 2 if len(table) < 65535 else 4
    index = np.array(list(map(distinct.__getitem__, keys)), dtype=f"<u{width}")
    return {"d": table, "i": _b64(index), "w": width}


_SIMPLE = frozenset({str, int, float, bool, type(None)})
_NUMERIC = frozenset({int, float, type(None)})
_INTEGER = frozenset({int, type(None)})
_LIMIT = 2**53


def _pack_any(values: Sequence[Any]) -> dict[str, Any]:
    """:func:`pack_column` of any values (lists, objects, absent keys, subclasses of numbers)."""
    n = len(values)
    absent = any(v is ABSENT for v in values)
    keys = [_key(v) for v in values]
    distinct: dict[Any, int] = {}
    first: list[Any] = []
    for k, v in zip(keys, values):
        if v is not ABSENT and k not in distinct:
            distinct[k] = len(distinct)
            first.append(v)
    if not absent and len(distinct) == 1:
        return {"c": values[0]}
    numeric = not absent and all(v is None or (_is_number(v) and abs(v) <= 2**53) for v in values)
    if numeric and len(distinct) > max(16, n // 8):
        floats = np.array([math.nan if v is None or not math.isfinite(v) else float(v) for v in values], dtype="<f8")
        out: dict[str, Any] = {"f": _b64(floats)}
        if all(v is None or isinstance(v, int) for v in values):
            out["int"] = 1
        return out
    if not absent and len(distinct) == n and all(isinstance(v, str) for v in values):
        return {"v": list(values)}
    table = first
    width = 1 if len(table) < 255 else 2 if len(table) < 65535 else 4
    index = np.array([len(table) if v is ABSENT else distinct[k] for k, v in zip(keys, values)], dtype=f"<u{width}")
    return {"d": table, "i": _b64(index), "w": width}


def unpack_column(col: dict[str, Any], n: int) -> list[Any]:
    """The ``n`` values of a packed column (``ABSENT`` where a row has no such key).

    >>> unpack_column({"c": "x"}, 2)
    ['x', 'x']
    """
    if "c" in col:
        return [col["c"]] * n
    if "v" in col:
        return list(col["v"])
    if "f" in col:
        floats = np.frombuffer(base64.b64decode(col["f"]), dtype="<f8")
        cast = int if col.get("int") else float
        return [None if math.isnan(x) else cast(x) for x in floats.tolist()]
    table = col["d"]
    index = np.frombuffer(base64.b64decode(col["i"]), dtype=f"<u{col['w']}").tolist()
    return [table[i] if i < len(table) else ABSENT for i in index]


def pack_table(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Objects (the catalog's entries) as ``{"n", "keys", "cols"}``, one packed column per key.

    >>> packed = pack_table([{"id": "a", "steps": 10}, {"id": "b", "steps": 10, "error": "x"}])
    >>> packed["keys"], packed["cols"][1]
    (['id', 'steps', 'error'], {'c': 10})
    >>> unpack_table(packed) == [{"id": "a", "steps": 10}, {"id": "b", "steps": 10, "error": "x"}]
    True
    """
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return {"n": len(rows), "keys": keys, "cols": [pack_column([r.get(k, ABSENT) for r in rows]) for k in keys]}


def unpack_table(packed: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of :func:`pack_table`, keys in their first-seen order."""
    n = packed["n"]
    columns = [unpack_column(c, n) for c in packed["cols"]]
    out = []
    for i in range(n):
        out.append({k: col[i] for k, col in zip(packed["keys"], columns) if col[i] is not ABSENT})
    return out


def pack_catalog(catalog: dict[str, Any]) -> dict[str, Any]:
    """The catalog with its entries and query fields packed (``"packed": 1``).

    >>> cat = {"runs": [{"id": "a"}], "fields": {"names": ["config.lr"], "rows": [[0.1]]}}
    >>> unpack_catalog(pack_catalog(cat)) == cat
    True
    """
    fields = catalog.get("fields") or {"names": [], "rows": []}
    rows = fields["rows"]
    n = len(rows)
    packed = {k: v for k, v in catalog.items() if k not in ("runs", "fields")}
    packed["packed"] = 1
    packed["runs"] = pack_table(catalog.get("runs") or [])
    packed["fields"] = {
        "n": n,
        "names": fields["names"],
        "cols": [pack_column([r[j] for r in rows]) for j in range(len(fields["names"]))],
    }
    return packed


def unpack_catalog(packed: dict[str, Any]) -> dict[str, Any]:
    """The catalog of :func:`pack_catalog` in its list-of-objects form (a plain one is returned as is)."""
    if not packed.get("packed"):
        return packed
    out = {k: v for k, v in packed.items() if k not in ("runs", "fields", "packed")}
    out["runs"] = unpack_table(packed["runs"])
    f = packed["fields"]
    columns = [[None if v is ABSENT else v for v in unpack_column(c, f["n"])] for c in f["cols"]]
    out["fields"] = {
        "names": f["names"],
        "rows": [list(r) for r in zip(*columns)] if columns else [[] for _ in range(f["n"])],
    }
    return out


def join_catalog(head: dict[str, Any], chunks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The whole catalog in its list-of-objects form (:func:`labledger.site.packing.unpack_catalog`)
    from the head's payload and its chunks' payloads (oldest first): runs newest first, query fields
    named by the head's ``names``."""
    parts = [unpack_catalog(head), *(unpack_catalog(c) for c in reversed(chunks))]
    names = head.get("names", parts[0]["fields"]["names"])
    out = {k: v for k, v in parts[0].items() if k not in ("runs", "fields")}
    out["runs"] = [r for p in parts for r in p["runs"]]
    rows = []
    for p in parts:
        where = {n: j for j, n in enumerate(p["fields"]["names"])}
        rows += [[row[where[n]] if n in where else None for n in names] for row in p["fields"]["rows"]]
    out["fields"] = {"names": list(names), "rows": rows}
    return out
