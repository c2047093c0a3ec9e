"""Result rows given as columns, checked and encoded to ``results.jsonl`` without a dict per row (#13).

An importer that has built its result rows column by column (ids, gold, a probability matrix, the
harness's scores, extra fields shared between tasks) hands them over as :class:`ResultColumns`, one
block per task; :meth:`labledger.Run.log_result_columns` stores them. :func:`encode_columns` checks
each block vectorised (kinds, ids unique per task, probabilities in [0, 1] summing to 1, gold among
the labels, finite numbers) and serialises each column once with ``orjson`` (a list of strings or
numbers in one call, split at the separators), then joins the fragments row by row.

The bytes are exactly what :meth:`~labledger.Run.log_results` writes for :meth:`ResultColumns.rows`
(a property test checks it). Whatever the fast checks cannot vouch for (a kind they do not cover, a
value near a tolerance, a bad value, a type orjson refuses) makes :func:`encode_columns` return
``None``, and the caller stores the rows through the row checker instead: every error message, with
its line and field, comes from that one checker.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any, TypeAlias

import numpy as np
import orjson

from labledger.inputs.reference import TOLERANCE

__all__ = ["MISSING", "Column", "Probs", "ResultColumns", "encode_columns"]


class _Missing:
    """The marker of a row that lacks a field (the key is left out of that row)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: In a list column: this row has no such key.
MISSING: Any = _Missing()

#: orjson options of a stored result row (``labledger.store.jsonl.DUMP_OPTIONS`` without the newline).
_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
#: Row fields with a meaning to the row checker (see :mod:`labledger.inputs.results`).
_CORE = frozenset(("id", "task", "gold", "probs", "score", "scores", "pred", "slices", "group", "positive"))


@dataclass(frozen=True)
class Probs:
    """A probability column over fixed labels: row ``i`` is ``{labels[j]: matrix[i, j]}``.

    >>> Probs(("0", "1"), np.array([[0.25, 0.75]])).row(0)
    {'0': 0.25, '1': 0.75}
    """

    labels: tuple[str, ...]
    matrix: np.ndarray

    def row(self, i: int) -> dict[str, float]:
        """Row ``i`` as the dict a row-built result holds."""
        return dict(zip(self.labels, self.matrix[i].tolist()))


#: A column: a list of JSON values (``MISSING`` leaves the key out of that row), a numpy array
#: (1-D: one number per row; 2-D: one list per row) or :class:`Probs`.
Column: TypeAlias = Sequence[Any] | np.ndarray | Probs


@dataclass
class ResultColumns:
    """One task's result rows as columns: ``ids``, ``gold`` and ``fields`` (name -> column, in the
    order the keys appear in each row, after ``id``, ``task`` and ``gold``). A column object may be
    shared by several blocks (it is encoded once).

    >>> c = ResultColumns("acc", ["d0"], ["1"], {"probs": Probs(("0", "1"), np.array([[0.4, 0.6]]))})
    >>> c.rows()
    [{'id': 'd0', 'task': 'acc', 'gold': '1', 'probs': {'0': 0.4, '1': 0.6}}]
    """

    task: str
    ids: Sequence[Any]
    gold: Sequence[Any] | np.ndarray
    fields: dict[str, Column] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of rows."""
        return len(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """The rows, one dict each, as :meth:`~labledger.Run.log_results` would be given them."""
        cols = {k: _row_values(v) for k, v in self.fields.items()}
        gold = _row_values(self.gold)
        for i, rid in enumerate(self.ids):
            row = {"id": rid, "task": self.task, "gold": gold[i]}
            for k, values in cols.items():
                v = values[i]
                if v is not MISSING:
                    row[k] = v
            yield row

    def rows(self) -> list[dict[str, Any]]:
        """:meth:`iter_rows` as a list."""
        return list(self.iter_rows())


class _RowsOf:
    """Row ``i`` of a :class:`Probs` column, on demand."""

    def __init__(self, probs: Probs):
        self.probs = probs

    def __getitem__(self, i: int) -> dict[str, float]:
        return self.probs.row(i)


def _row_values(col: Column) -> Any:
    if isinstance(col, Probs):
        return _RowsOf(col)
    if isinstance(col, np.ndarray):
        return col.tolist()
    return col


# ------------------------------------------------------------------------------------------------
# Vectorised checks: True only when the row checker would accept every row (else the caller falls
# back to it, and its error is the one the user sees).


def _all_type(values: Sequence[Any] | np.ndarray, t: type) -> bool:
    return set(map(type, values)) <= {t}


def _finite_numbers(col: Column, n: int) -> bool:
    """Every value a finite int or float (not bool), as the row checker's regression rows need."""
    if isinstance(col, np.ndarray):
        return col.shape == (n,) and col.dtype.kind in "fiu" and bool(np.isfinite(col).all())
    if isinstance(col, Probs) or len(col) != n:
        return False
    if not set(map(type, col)) <= {int, float}:
        return False
    try:
        return bool(np.isfinite(np.asarray(col, dtype=np.float64)).all())
    except OverflowError:
        return False


def _kind_of(block: ResultColumns, tolerance: float) -> str | None:
    """The block's task kind when every row is sure to pass the row checker, else ``None``."""
    n = block.n
    f = block.fields
    if type(block.task) is not str or not block.task or not _all_type(block.ids, str):
        return None
    if len(block.gold) != n or any(k in ("id", "task", "gold") for k in f):
        return None
    for col in f.values():
        if len(col.matrix if isinstance(col, Probs) else col) != n:
            return None
    group = f.get("group")
    if group is not None and (
        isinstance(group, (Probs, np.ndarray))
        or not all(g is None or g is MISSING or type(g) is str or type(g) is int for g in group)
    ):
        return None
    core = [k for k in f if k in _CORE and k != "group"]
    if core == ["probs"]:
        probs = f["probs"]
        if not isinstance(probs, Probs) or not _all_type(block.gold, str):
            return None
        m, labels = probs.matrix, probs.labels
        if m.ndim != 2 or m.shape != (n, len(labels)) or not labels or m.dtype != np.float64:
            return None
        if not _all_type(labels, str) or len(set(labels)) != len(labels):
            return None
        if n and not (bool(((m >= 0.0) & (m <= 1.0)).all()) and np.abs(m.sum(axis=1) - 1.0).max() < tolerance * 0.999):
            return None
        if not set(block.gold) <= set(labels):
            return None
        return "classification"
    if core == ["pred"]:
        pred = f["pred"]
        if _finite_numbers(block.gold, n) and _finite_numbers(pred, n):
            return "regression"
        if isinstance(pred, (Probs, np.ndarray)) or isinstance(block.gold, np.ndarray):
            return None
        if _all_type(block.gold, str) and _all_type(pred, str):
            return "match"
    return None


def _checked(blocks: Sequence[ResultColumns], tolerance: float) -> bool:
    kinds: dict[str, str] = {}
    ids: dict[str, set[str]] = {}
    for b in blocks:
        kind = _kind_of(b, tolerance)
        if kind is None or kinds.setdefault(b.task, kind) != kind:
            return False
        seen = ids.setdefault(b.task, set())
        before = len(seen)
        seen.update(b.ids)
        if len(seen) != before + b.n:
            return False
    return True


# ------------------------------------------------------------------------------------------------
# Encoding: each column to one JSON fragment per row, in as few orjson calls as possible


#: A byte orjson never writes (it escapes control characters): where one row's fragment ends.
_CUT = b"\x00"


def _each(text: bytes, boundary: bytes, prefix: bytes, start: bytes, end: bytes) -> list[bytes]:
    """``prefix + start + item + end`` for each item of ``text`` (items joined by ``boundary``,
    which occurs nowhere else), in two passes over the bytes instead of two concatenations per item.

    >>> _each(b'a","b', b'","', b",x:", b'"', b'"')
    [b',x:"a"', b',x:"b"']
    """
    return (prefix + start + text.replace(boundary, end + _CUT + prefix + start) + end).split(_CUT)


def _split_numbers(values: Any) -> list[bytes]:
    """The JSON of each number (or bool) of a flat list or 1-D array, from one ``orjson.dumps``."""
    text = orjson.dumps(values, option=_OPTIONS)
    return text[1:-1].split(b",") if len(text) > 2 else []


def _as_exact(a: np.ndarray) -> np.ndarray | list[Any]:
    """``a`` as float64/int64/bool (whose orjson text is that of ``a.tolist()``), else the list."""
    if a.dtype.kind == "f":
        return a.astype(np.float64, copy=False)
    if a.dtype.kind == "i":
        return a.astype(np.int64, copy=False)
    if a.dtype.kind == "b":
        return a
    values: list[Any] = a.tolist()
    return values


def _by_template(prefix: bytes, inner: bytes, flat: list[bytes], k: int) -> list[bytes]:
    """``prefix + inner % (k items)`` per row, from the row-major ``flat`` fragments."""
    template = prefix.replace(b"%", b"%%") + inner
    return [template % t for t in zip(*(flat[j::k] for j in range(k)))]


def _probs_by_marks(col: Probs, prefix: bytes) -> list[bytes] | None:
    """The fragments of a probability column with every value in [0, 1] and labels without commas:
    each row written as ``[2.0,p0,3.0,p1,...]`` in one ``orjson.dumps`` of the matrix with a mark
    column before each label's (a mark is a number no probability can be, so its text is found
    only where it was put), then each mark replaced by its label's key."""
    m = col.matrix
    k = len(col.labels)
    keys = [orjson.dumps(lab) for lab in col.labels]
    if not k or any(b"," in key for key in keys) or not bool(((m >= 0.0) & (m <= 1.0)).all()):
        return None
    marks = np.arange(2.0, 2.0 + k)
    marked = np.empty((m.shape[0], 2 * k), dtype=np.float64)
    marked[:, 1::2] = m
    marked[:, 0::2] = marks
    text = orjson.dumps(marked, option=_OPTIONS)[1:-1].replace(b"],[", b"]" + _CUT + b"[")
    texts = _split_numbers(marks)  # b"2.0", b"3.0", ...
    text = text.replace(b"[" + texts[0] + b",", b"{" + keys[0] + b":")
    for mark, key in zip(texts[1:], keys[1:]):
        text = text.replace(b"," + mark + b",", b"," + key + b":")
    return (prefix + text.replace(b"]" + _CUT, b"}" + _CUT + prefix)[:-1] + b"}").split(_CUT)


def _fragments(col: Column, n: int, prefix: bytes) -> list[bytes] | None:
    """``prefix`` + the JSON of each row's value (``b""`` for ``MISSING``), or ``None`` when
    orjson refuses a value."""
    try:
        return _encode(col, n, prefix)
    except TypeError:
        return None


def _encode(col: Column, n: int, prefix: bytes) -> list[bytes]:
    if isinstance(col, Probs):
        marked = _probs_by_marks(col, prefix)
        if marked is not None:
            return marked
        k = len(col.labels)
        inner = b"{" + b",".join(orjson.dumps(lab).replace(b"%", b"%%") + b":%b" for lab in col.labels) + b"}"
        return _by_template(prefix, inner, _split_numbers(np.asarray(col.matrix, dtype=np.float64).ravel()), k)
    seq: Sequence[Any]
    if isinstance(col, np.ndarray):
        exact = _as_exact(col)
        if isinstance(exact, list):
            seq = exact
        elif exact.ndim == 1:
            return _each(orjson.dumps(exact, option=_OPTIONS)[1:-1], b",", prefix, b"", b"")
        elif exact.ndim == 2:
            if exact.shape[1] == 0:
                return [prefix + b"[]"] * n
            return _each(orjson.dumps(exact, option=_OPTIONS)[2:-2], b"],[", prefix, b"[", b"]")
        else:
            seq = exact.tolist()
    else:
        seq = col
    types = set(map(type, seq))
    if types == {str}:
        text = orjson.dumps(seq)
        if b"\\" not in text:  # no escapes: every quote delimits an item, so '","' separates two
            return _each(text[2:-2], b'","', prefix, b'"', b'"')
    elif types and types <= {int, float}:
        return _each(orjson.dumps(seq, option=_OPTIONS)[1:-1], b",", prefix, b"", b"")
    elif types == {list} and all(seq) and set(map(type, chain.from_iterable(seq))) == {str}:
        text = orjson.dumps(seq)  # [["a","b"],["c"]]: with no escapes, '"],["' only between two rows
        if b"\\" not in text:
            return _each(text[3:-3], b'"],["', prefix, b'["', b'"]')
    dumps = orjson.dumps
    return [b"" if v is MISSING else prefix + dumps(v, option=_OPTIONS) for v in seq]


def _encode_block(block: ResultColumns, cache: dict[tuple[int, str], list[bytes]]) -> bytes | None:
    n = block.n
    if n == 0:
        return b""
    ids = _fragments(block.ids, n, b'{"id":')
    gold = _fragments(block.gold, n, b',"task":' + orjson.dumps(block.task) + b',"gold":')
    if ids is None or gold is None:
        return None
    parts: list[Any] = [ids, gold]
    for key, col in block.fields.items():
        ck = (id(col), key)
        frags = cache.get(ck)
        if frags is None:
            frags = _fragments(col, n, b"," + orjson.dumps(key) + b":")
            if frags is None or len(frags) != n:
                return None
            cache[ck] = frags
        parts.append(frags)
    parts.append(repeat(b"}\n", n))
    return b"".join(map(b"".join, zip(*parts)))


def encode_columns(blocks: Sequence[ResultColumns], *, tolerance: float = TOLERANCE) -> bytes | None:
    """The ``results.jsonl`` bytes of ``blocks`` (one after another), or ``None`` when the fast
    checks cannot vouch for every row (then store ``[r for b in blocks for r in b.rows()]`` through
    the row checker, which names the bad row).

    >>> b = ResultColumns("mean", ["a", "b"], [1.0, 1.0], {"pred": [0.0, 1.0], "note": ["x", MISSING]})
    >>> encode_columns([b])
    b'{"id":"a","task":"mean","gold":1.0,"pred":0.0,"note":"x"}\\n{"id":"b","task":"mean","gold":1.0,"pred":1.0}\\n'
    """
    if not blocks or not _checked(blocks, tolerance):
        return None
    cache: dict[tuple[int, str], list[bytes]] = {}
    out = []
    for b in blocks:
        data = _encode_block(b, cache)
        if data is None:
            return None
        out.append(data)
    return b"".join(out)


def rows_of(blocks: Sequence[ResultColumns]) -> Iterator[Mapping[str, Any]]:
    """Every row of ``blocks`` in order (what the row path stores)."""
    for b in blocks:
        yield from b.iter_rows()
