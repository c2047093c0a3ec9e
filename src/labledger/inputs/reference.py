"""Read and validate ``results.jsonl``: one row per evaluated item, turned into columnar task data.

A row (see DESIGN.md) has ``id``, ``task``, ``gold`` and one of:

- ``probs``: a mapping label -> probability (classification / multiple choice; never read by
  position: columns are keyed by label name);
- ``score``: P(positive) of a binary task (the positive label comes from ``positive=``, a
  ``positive`` field in the rows, or a gold of ``true``/``false``/``0``/``1``);
- ``scores`` with a graded ``gold`` mapping doc -> relevance (ranking);
- ``pred``: a number with a numeric gold (regression), a list with a list gold (sets), anything
  else (exact match, e.g. a string or a JSON object).

Optional: ``slices`` (a mapping field -> value), ``group`` (the bootstrap cluster). Other fields
are allowed and kept. Every problem raises :class:`~labledger.errors.RecordError` naming the file,
the line and the field.

This module is the reference: one row checker (:func:`read_rows`, :func:`results_from_rows`) that
holds every rule. :func:`labledger.inputs.results.read_results` reads a file through an accelerator
when one applies (the columnar cache, ``pyarrow.json``), which returns the same result set or
declines; every error message comes from the row checker here, with its true line number.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, TypeAlias

import numpy as np
import orjson

from labledger.errors import RecordError, TornLineWarning, UnknownNameError

#: Default tolerance for ``|sum(probs) - 1|``.
TOLERANCE = 1e-3
#: The kinds of task a results file can hold, and the field that marks each.
KINDS = ("classification", "binary", "regression", "ranking", "sets", "match")
_KIND_FIELD = {
    "classification": "probs",
    "binary": "score",
    "ranking": "scores",
    "regression": "pred",
    "sets": "pred",
    "match": "pred",
}
CORE_FIELDS = frozenset(("id", "task", "gold", "probs", "score", "scores", "pred", "slices", "group", "positive"))
_NUM = (int, float)
#: Fields that carry a repeat index (inspect's epochs, best-of-k samples), in the order they are looked for.
REPEAT_FIELDS = ("epoch", "sample")


#: The fields of the other task kinds, and the value reading one gives (see ``_Task.__getattr__``).
_OTHER_KINDS_FIELDS: dict[str, Any] = {
    "labels": (),
    **dict.fromkeys(
        (
            "gold_index",
            "pred_index",
            "probs",
            "score",
            "positive",
            "gold_value",
            "pred_value",
            "gold_items",
            "pred_items",
            "gold_relevance",
            "scores",
        )
    ),
}


@dataclass(kw_only=True)
class _Task:
    """What every task kind has: ``ids`` (object array of str), ``lines`` (1-based source line of
    each item), ``group`` (int64 cluster codes; rows without a group are their own cluster) or
    ``None``, the slice columns and the extra row fields; ``repeat`` (object array) is each row's
    repeat index when the set's rows repeat ids by ``epoch``/``sample`` (see
    :attr:`ResultSet.repeat_field`), else ``None``."""

    task: str
    ids: np.ndarray
    lines: np.ndarray
    group: np.ndarray | None = None
    slice_columns: dict[str, tuple[np.ndarray, list[Any]]] = field(default_factory=dict)
    extras: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    repeat: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Number of items."""
        lines = self.__dict__.get("lines")
        return len(lines) if lines is not None else len(self.__dict__["_deferred"]["lines"])

    @property
    def slices(self) -> dict[str, np.ndarray]:
        """Slice values as object arrays, one per slice field (``None`` where a row lacks it)."""
        out = {}
        for name, (codes, values) in self.slice_columns.items():
            table = np.empty(len(values), dtype=object)
            table[:] = values
            out[name] = table[codes]
        return out

    def slice_codes(self, name: str) -> tuple[np.ndarray, list[Any]]:
        """``(codes, values)`` of slice field ``name``: ``values[codes[i]]`` is item i's value."""
        if name not in self.slice_columns:
            raise UnknownNameError(f"slice field of task '{self.task}'", name, self.slice_columns)
        return self.slice_columns[name]

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # The reading API before the split had one class with every kind's fields: reading a
            # field of another kind still gives its old default (``()`` or ``None``) at run time.
            # Type checkers do not see this, so typed code uses the fields of its task's class.
            deferred = self.__dict__.get("_deferred")
            make = deferred.get(name) if deferred else None
            if make is not None:
                # a column built on first use: ids read as Arrow become an object array, and
                # consecutive line numbers an array, only if something reads them; most evaluations
                # never do (see defer_ids, defer_lines). Stored before it is let go of, so a thread
                # reading it meanwhile builds the same values rather than missing it; let go of by
                # a new dict, not in place: a copy of the task (copy.copy) shares the old one.
                value = self.__dict__[name] = make()
                self.__dict__["_deferred"] = {k: v for k, v in deferred.items() if k != name}
                return value
            if name in _OTHER_KINDS_FIELDS:
                return _OTHER_KINDS_FIELDS[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _common(self, idx: np.ndarray) -> dict[str, Any]:
        return {
            "ids": self.ids[idx],
            "lines": self.lines[idx],
            "group": None if self.group is None else canonical_codes(self.group[idx]),
            "slice_columns": {k: (c[idx], v) for k, (c, v) in self.slice_columns.items()},
            "extras": {k: [v[i] for i in idx] for k, v in self.extras.items()},
            "repeat": None if self.repeat is None else self.repeat[idx],
        }


class DeferredIds:
    """A task's ids kept as an Arrow string array until first read (:func:`defer_ids`); the array
    itself may come from ``load`` when first needed (a cache entry opens its Arrow part only then),
    and with ``keep=False`` from ``load`` on each use, never held (ids kept packed)."""

    def __init__(self, arrow: Any = None, load: Callable[[], Any] | None = None, keep: bool = True):
        self._arrow, self._load, self._keep = arrow, load, keep

    @property
    def arrow(self) -> Any:
        """The Arrow string array of the ids."""
        if self._arrow is None and self._load is not None:
            if not self._keep:
                return self._load()
            self._arrow, self._load = self._load(), None
        return self._arrow

    def __call__(self) -> np.ndarray:
        arrow = self.arrow  # (once: with keep=False each read unpacks them again)
        out = np.empty(len(arrow), dtype=object)
        out[:] = arrow.to_pylist()  # faster than to_numpy for strings, and no pandas import
        return out


class LazyColumns(Mapping[str, list[Any]]):
    """Extra fields of a task kept as Arrow columns (``column(name)`` gives one) and converted to
    Python lists on first access; :meth:`arrow` gives a column as it is. Membership and iteration
    read the names only.

    >>> import pyarrow as pa
    >>> cols = {"note": pa.array(["a", None])}
    >>> lazy = LazyColumns(cols, cols.__getitem__)
    >>> "note" in lazy, "other" in lazy, lazy["note"], list(lazy)
    (True, False, ['a', None], ['note'])
    """

    def __init__(self, names: Iterable[str], column: Callable[[str], Any]):
        self._names = list(names)
        self._column = column
        self._done: dict[str, list[Any]] = {}

    def arrow(self, key: str) -> Any:
        """The Arrow column of field ``key``."""
        if key not in self._names:
            raise KeyError(key)
        return self._column(key)

    def __getitem__(self, key: str) -> list[Any]:
        if key not in self._done:
            self._done[key] = self.arrow(key).to_pylist()
        return self._done[key]

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class DeferredLines:
    """Consecutive line numbers ``first, first + 1, ...`` (``n`` of them), made on first read: :func:`defer_lines`."""

    def __init__(self, first: int, n: int):
        self.first, self.n = first, n

    def __len__(self) -> int:
        return self.n

    def __call__(self) -> np.ndarray:
        return np.arange(self.first, self.first + self.n, dtype=np.int64)


class DeferredBinaryProbs:
    """A binary task's (n, 2) ``probs`` made from its ``score`` on first read (the column of label
    ``pos`` is the score, the other ``1.0 - score``: :func:`binary_task`'s rule): evaluations read
    the score alone (:func:`labledger.metrics.classification.binary_prepared`), and the matrix is
    twice its size. ``made``: the matrix once made."""

    def __init__(self, score: np.ndarray, pos: int):
        self.score, self.pos = score, pos
        self.made: np.ndarray | None = None

    def __call__(self) -> np.ndarray:
        probs = np.empty((len(self.score), 2), dtype=np.float64)
        probs[:, self.pos] = self.score
        probs[:, 1 - self.pos] = 1.0 - self.score
        self.made = probs
        return probs


def defer_binary_probs(td: _Task, score: np.ndarray, pos: int) -> None:
    """Make ``td.probs`` the two-label matrix of ``score`` (P(label ``pos``)), built on first access.

    >>> td = results_from_rows([{"id": "a", "task": "t", "gold": "y", "score": 0.75}], positive="y")["t"]
    >>> defer_binary_probs(td, td.score, 1); "probs" in vars(td), td.probs.tolist(), "probs" in vars(td)
    (False, [[0.25, 0.75]], True)
    """
    _defer(td, "probs", DeferredBinaryProbs(score, pos))


def _probs_token(td: _Task) -> Any:
    """What ``td``'s probabilities are now, without making deferred ones: the array, or its maker."""
    if "probs" in td.__dict__:
        return td.__dict__["probs"]
    return td.__dict__.get("_deferred", {}).get("probs")


def _defer(td: _Task, name: str, make: Any) -> None:
    td.__dict__.pop(name, None)
    td.__dict__.setdefault("_deferred", {})[name] = make


def defer_ids(td: _Task, arrow: Any = None, *, load: Callable[[], Any] | None = None, keep: bool = True) -> None:
    """Make ``td.ids`` the object array of the Arrow strings ``arrow`` (or of what ``load()`` gives,
    called when they are first needed, and each time they are asked for again as Arrow with
    ``keep=False``), built on first access (an evaluation mostly never needs them);
    :func:`deferred_ids` gives them back as Arrow.

    >>> import pyarrow as pa
    >>> td = results_from_rows([{"id": "a", "task": "t", "gold": 1.0, "pred": 2.0}])["t"]
    >>> defer_ids(td, pa.array(["z"])); "ids" in vars(td), td.ids.tolist(), "ids" in vars(td)
    (False, ['z'], True)
    >>> defer_ids(td, load=lambda: pa.array(["y"])); deferred_ids(td).to_pylist(), td.ids.tolist()
    (['y'], ['y'])
    """
    _defer(td, "ids", DeferredIds(arrow, load, keep))


def defer_lines(td: _Task, first: int, n: int) -> None:
    """Make ``td.lines`` the ``n`` consecutive line numbers from ``first``, built on first access:
    only error messages and subsets read them.

    >>> td = results_from_rows([{"id": "a", "task": "t", "gold": 1.0, "pred": 2.0}])["t"]
    >>> defer_lines(td, 5, 3); "lines" in vars(td), td.n, td.lines.tolist(), "lines" in vars(td)
    (False, 3, [5, 6, 7], True)
    """
    _defer(td, "lines", DeferredLines(first, n))


def deferred_first_line(td: _Task) -> int | None:
    """The first line number while ``td``'s consecutive lines are still deferred (:func:`defer_lines`), else None."""
    found = td.__dict__.get("_deferred", {}).get("lines")
    return found.first if found is not None else None


def deferred_ids(td: _Task) -> Any:
    """The Arrow array of ``td``'s ids while they are still deferred (:func:`defer_ids`), else None."""
    found = td.__dict__.get("_deferred", {}).get("ids")
    return found.arrow if found is not None else None


def _given(td: _Task) -> tuple[Any, ...] | None:
    """What :func:`set_given_sorts` attached to ``td``, while its probabilities are the array the
    orders were made from; else None."""
    found = td.__dict__.get("_sorts_from")
    if found is None:
        return None
    then, now = found[0], _probs_token(td)
    if then is not now and not (isinstance(then, DeferredBinaryProbs) and then.made is not None and then.made is now):
        return None
    return found  # type: ignore[no-any-return]


def given_sorts(td: _Task) -> dict[int, np.ndarray]:
    """The ascending sort orders of ``td``'s probability columns that its reader already holds, by
    column (``np.argsort`` of ``td.probs[:, j]``: kept in the columnar cache entry beside the columns,
    like a database index, so that a later evaluation does not sort them again); empty when none.
    A subset or relabelled copy of the task has none, nor a task whose ``probs`` were replaced since
    (calibrated probabilities: the orders belong to the array they were made from). Users check
    them before use (:func:`labledger.metrics.classification.ascending_of`), but for those with
    :func:`given_ties`.

    >>> td = results_from_rows([{"id": "a", "task": "t", "gold": "x", "probs": {"x": 0.8, "y": 0.2}}])["t"]
    >>> given_sorts(td), set_given_sorts(td, {0: np.array([0])}), given_sorts(td)[0].tolist()
    ({}, None, [0])
    >>> td.probs = td.probs.copy(); given_sorts(td)
    {}
    """
    found = _given(td)
    orders: dict[int, np.ndarray] = {} if found is None else found[1]
    return orders


def given_ties(td: _Task) -> dict[int, np.ndarray | None]:
    """The tie starts (:func:`~labledger.metrics.classification.tie_starts`; None: no ties) of those
    :func:`given_sorts` that this process made from the column itself (the JSONL reader sorts them
    beside its checks), or read with their order from a columnar cache entry whose digest matched
    (its writer made both from the column): such an order needs no check, nor its ties another pass
    through it. An order given without them is checked on use.

    >>> td = results_from_rows([{"id": "a", "task": "t", "gold": "x", "probs": {"x": 0.8, "y": 0.2}}])["t"]
    >>> set_given_sorts(td, {0: np.array([0]), 1: np.array([0])}, ties={1: None}); given_ties(td)
    {1: None}
    """
    found = _given(td)
    ties: dict[int, np.ndarray | None] = {} if found is None else found[2]
    return ties


def set_given_sorts(
    td: _Task, sorts: Mapping[int, np.ndarray], ties: Mapping[int, np.ndarray | None] | None = None
) -> None:
    """Attach the ascending sort orders ``sorts`` of the columns of ``td.probs`` as it is now (see
    :func:`given_sorts`), and the tie starts of those made here from the columns (:func:`given_ties`)."""
    td.__dict__["_sorts_from"] = (_probs_token(td), dict(sorts), {j: t for j, t in (ties or {}).items() if j in sorts})


def _indices(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask) if np.asarray(mask).dtype == bool else np.asarray(mask, dtype=np.int64)


@dataclass(kw_only=True)
class LabelTask(_Task):
    """A task whose items have a gold and a predicted label: ``labels`` (sorted), ``gold_index``
    and ``pred_index`` (indices into ``labels``, of any signed integer type: the readers make them
    :func:`label_index_type`, int8 up to 128 labels). A ``match`` task is exactly this (strings
    compare as themselves, anything else as canonical JSON); classification and binary tasks are
    :class:`ProbTask`.
    """

    kind: Literal["classification", "binary", "match"] = "match"
    labels: tuple[str, ...]
    gold_index: np.ndarray
    pred_index: np.ndarray

    def label_index(self, label: str) -> int:
        """Column of ``label`` in ``labels`` (and in ``probs``)."""
        try:
            return self.labels.index(label)
        except ValueError:
            raise UnknownNameError(f"label of task '{self.task}'", label, self.labels) from None

    def subset(self, mask: np.ndarray) -> Self:
        """A new task with only the items where ``mask`` (bool or indices) selects."""
        idx = _indices(mask)
        return replace(self, **self._common(idx), gold_index=self.gold_index[idx], pred_index=self.pred_index[idx])


@dataclass(kw_only=True)
class ProbTask(LabelTask):
    """A classification or binary task: a :class:`LabelTask` with ``probs`` (n, K) float64 keyed by
    ``labels`` (columns by label *name*, never position), ``pred_index`` = argmax (ties go to the
    first label in sorted order; binary: positive when ``score >= 0.5``).

    ``positive`` is the positive label (always for binary; for classification when one is given)
    and ``score`` P(positive) (binary, and a two-label classification with a positive label).
    """

    kind: Literal["classification", "binary"] = "classification"
    probs: np.ndarray
    score: np.ndarray | None = None
    positive: str | None = None

    def column(self, label: str) -> np.ndarray:
        """P(``label``) for every item (the ``probs`` column keyed by that label's name)."""
        return self.probs[:, self.label_index(label)]

    def subset(self, mask: np.ndarray) -> Self:
        """A new task with only the items where ``mask`` (bool or indices) selects."""
        idx = _indices(mask)
        maker = self.__dict__.get("_deferred", {}).get("probs")
        lazy = isinstance(maker, DeferredBinaryProbs) and self.score is not None
        out = replace(
            self,
            **self._common(idx),
            gold_index=self.gold_index[idx],
            pred_index=self.pred_index[idx],
            probs=np.empty((0, 2)) if lazy else self.probs[idx],
            score=None if self.score is None else self.score[idx],
        )
        if lazy and out.score is not None:  # a binary task's matrix, still not made: neither is the subset's
            defer_binary_probs(out, out.score, maker.pos)
        return out


@dataclass(kw_only=True)
class RegressionTask(_Task):
    """A regression task: ``gold_value`` and ``pred_value`` (float64)."""

    gold_value: np.ndarray
    pred_value: np.ndarray
    kind: Literal["regression"] = field(default="regression", init=False)

    def subset(self, mask: np.ndarray) -> Self:
        """A new task with only the items where ``mask`` (bool or indices) selects."""
        idx = _indices(mask)
        return replace(self, **self._common(idx), gold_value=self.gold_value[idx], pred_value=self.pred_value[idx])


@dataclass(kw_only=True)
class SetTask(_Task):
    """A sets task: ``gold_items`` and ``pred_items`` (lists of frozensets of canonical JSON strings)."""

    gold_items: list[frozenset[str]]
    pred_items: list[frozenset[str]]
    kind: Literal["sets"] = field(default="sets", init=False)

    def subset(self, mask: np.ndarray) -> Self:
        """A new task with only the items where ``mask`` (bool or indices) selects."""
        idx = _indices(mask)
        return replace(
            self,
            **self._common(idx),
            gold_items=[self.gold_items[i] for i in idx],
            pred_items=[self.pred_items[i] for i in idx],
        )


@dataclass(kw_only=True)
class RankingTask(_Task):
    """A ranking task: ``gold_relevance`` and ``scores`` (lists of dicts doc -> number)."""

    gold_relevance: list[dict[str, float]]
    scores: list[dict[str, float]]
    kind: Literal["ranking"] = field(default="ranking", init=False)

    def subset(self, mask: np.ndarray) -> Self:
        """A new task with only the items where ``mask`` (bool or indices) selects."""
        idx = _indices(mask)
        return replace(
            self,
            **self._common(idx),
            gold_relevance=[self.gold_relevance[i] for i in idx],
            scores=[self.scores[i] for i in idx],
        )


#: One task's rows as numpy columns, one class per task kind (``kind`` tells them apart):
#: :class:`ProbTask` (classification, binary), :class:`LabelTask` (match), :class:`RegressionTask`,
#: :class:`SetTask`, :class:`RankingTask`.
TaskData: TypeAlias = LabelTask | RegressionTask | SetTask | RankingTask


class ResultSet(Mapping[str, TaskData]):
    """The tasks of one results file (or list of rows), in order of first appearance.

    ``repeat_field`` is ``epoch`` or ``sample`` when the rows repeat ids with that field (read with
    ``repeats=True``): every task then has its ``repeat`` column, and ids are unique per repeat.

    >>> rs = results_from_rows([{"id": 1, "task": "t", "gold": "a", "probs": {"a": 0.9, "b": 0.1}}])
    >>> rs["t"].labels, rs["t"].n
    (('a', 'b'), 1)
    """

    def __init__(self, tasks: dict[str, TaskData], *, source: str = "<rows>", repeat_field: str | None = None):
        self.tasks = tasks
        self.source = source
        self.repeat_field = repeat_field

    def __getitem__(self, task: str) -> TaskData:
        try:
            return self.tasks[task]
        except KeyError:
            raise UnknownNameError(f"task in {self.source}", task, self.tasks) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def n(self) -> int:
        """Total number of rows over all tasks."""
        return sum(t.n for t in self.tasks.values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}: {t.kind} n={t.n}" for k, t in self.tasks.items())
        return f"ResultSet({self.source!r}, {{{inner}}})"


# ------------------------------------------------------------------------------------------------
# Row-by-row checking (used for Python rows, for the ledger's log_results, and as the fallback)


def _label(v: Any) -> str | None:
    """A gold/pred label as a string: str as is, bool -> true/false, integral numbers -> digits."""
    t = type(v)
    if t is str:
        return str(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float and math.isfinite(v) and v.is_integer():
        return str(int(v))
    return None


def _canon(v: Any) -> str:
    """A canonical string for any JSON value (sorted-key JSON, so 1 and "1" differ)."""
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def _show(v: Any) -> str:
    try:
        text = orjson.dumps(v).decode()
    except TypeError:
        text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


class _TaskBuilder:
    __slots__ = (
        "extras",
        "first_line",
        "gold",
        "group",
        "ids",
        "kind",
        "lines",
        "n",
        "positive",
        "positive_line",
        "pred",
        "repeats",
        "slices",
        "task",
    )

    def __init__(self, task: str, kind: str, line: int):
        self.task, self.kind, self.first_line = task, kind, line
        self.ids: list[str] = []
        self.lines: list[int] = []
        self.gold: list[Any] = []
        self.pred: list[Any] = []
        self.group: list[Any] = []
        self.slices: dict[str, list[Any]] = {}
        self.extras: dict[str, list[Any]] = {}
        self.positive: str | None = None
        self.positive_line = 0
        self.n = 0
        self.repeats: dict[str, list[Any]] = {f: [] for f in REPEAT_FIELDS}


class _Checker:
    """Validates rows one at a time; keeps per-task columns when ``collect`` is true."""

    def __init__(self, source: str, tolerance: float, collect: bool, repeats: bool = False):
        self.source = source
        self.tol = float(tolerance)
        self.collect = collect
        self.tasks: dict[str, _TaskBuilder] = {}
        self.seen: dict[tuple[str, str], int] = {}
        # repeats: a duplicate id is kept until the end, where a repeat field may explain it
        self.repeats = repeats and collect
        self.first_duplicate: RecordError | None = None
        self.lacking: set[str] = set()

    def fail(self, msg: str, line: int, fld: str | None = None) -> RecordError:
        return RecordError(msg, source=self.source, line=line, field=fld)

    def check(self, row: Any, line: int) -> None:
        if not isinstance(row, dict):
            raise self.fail(f"a result row must be a JSON object; got {_show(row)}", line)
        try:
            rid = row["id"]
            task = row["task"]
            gold = row["gold"]
        except KeyError as exc:
            raise self.fail("is missing (every row needs 'id', 'task' and 'gold')", line, exc.args[0]) from None
        t = type(rid)
        if t is str:
            sid = rid
        elif t is int:
            sid = str(rid)
        else:
            raise self.fail(f"must be a string or an integer; got {_show(rid)}", line, "id")
        if type(task) is not str or not task:
            raise self.fail(f"must be a non-empty string; got {_show(task)}", line, "task")
        key = (task, sid)
        prev = self.seen.get(key)
        if prev is not None:
            err = self.fail(f"duplicate id {sid!r} in task '{task}' (also on line {prev})", line, "id")
            if not self.repeats:
                raise err
            if self.first_duplicate is None:
                self.first_duplicate = err
        else:
            self.seen[key] = line

        g: Any
        pred: Any
        if "probs" in row:
            kind = "classification"
            probs = row["probs"]
            if not isinstance(probs, dict) or not probs:
                raise self.fail(f"must map labels to numbers in [0, 1]; got {_show(probs)}", line, "probs")
            total = 0.0
            for k, p in probs.items():
                tp = type(p)
                if (tp is not float and tp is not int) or not (0.0 <= p <= 1.0):
                    raise self.fail(f"must map labels to numbers in [0, 1]; got {_show(p)} for {k!r}", line, "probs")
                total += p
            if abs(total - 1.0) > self.tol:
                raise self.fail(f"must sum to 1 (within {self.tol:g}); got {total:.6g}", line, "probs")
            g = _label(gold)
            if g is None or g not in probs:
                raise self.fail(
                    f"must be one of the labels of 'probs' ({', '.join(map(repr, sorted(probs)))}); got {_show(gold)}",
                    line,
                    "gold",
                )
            pred = probs
        elif "score" in row:
            kind = "binary"
            s = row["score"]
            ts = type(s)
            if (ts is not float and ts is not int) or not (0.0 <= s <= 1.0):
                raise self.fail(f"must be a number in [0, 1] (P(positive)); got {_show(s)}", line, "score")
            g = _label(gold)
            if g is None:
                raise self.fail(f"must be a label (string, integer or boolean); got {_show(gold)}", line, "gold")
            pred = float(s)
        elif "scores" in row:
            kind = "ranking"
            scores = row["scores"]
            if not isinstance(scores, dict):
                raise self.fail(f"must map document ids to numbers; got {_show(scores)}", line, "scores")
            for k, v in scores.items():
                if type(v) not in _NUM or not math.isfinite(v):
                    raise self.fail(
                        f"must map document ids to finite numbers; got {_show(v)} for {k!r}", line, "scores"
                    )
            if not isinstance(gold, dict):
                raise self.fail(
                    f"must map document ids to graded relevance (numbers >= 0) for a ranking row; got {_show(gold)}",
                    line,
                    "gold",
                )
            for k, v in gold.items():
                if type(v) not in _NUM or not (0 <= v < math.inf):
                    raise self.fail(
                        f"must map document ids to relevance numbers >= 0; got {_show(v)} for {k!r}", line, "gold"
                    )
            g, pred = gold, scores
        elif "pred" in row:
            pred = row["pred"]
            tg, tp = type(gold), type(pred)
            if tg in _NUM and tp in _NUM:
                kind = "regression"
                if not math.isfinite(gold):
                    raise self.fail(f"must be a finite number; got {_show(gold)}", line, "gold")
                if not math.isfinite(pred):
                    raise self.fail(f"must be a finite number; got {_show(pred)}", line, "pred")
            elif tg is list and tp is list:
                kind = "sets"
            elif tg is list or tp is list:
                raise self.fail(
                    f"and 'gold' must both be lists for a set task; got gold {_show(gold)}, pred {_show(pred)}",
                    line,
                    "pred",
                )
            else:
                kind = "match"
            g = gold
        else:
            raise self.fail("is missing: a row needs one of 'probs', 'score', 'scores' or 'pred'", line, "probs")

        b = self.tasks.get(task)
        if b is None:
            b = self.tasks[task] = _TaskBuilder(task, kind, line)
        elif b.kind != kind:
            raise self.fail(
                f"task '{task}' mixes kinds: line {b.first_line} is {b.kind} "
                f"('{_KIND_FIELD[b.kind]}'), this row is {kind} ('{_KIND_FIELD[kind]}')",
                line,
                _KIND_FIELD[kind],
            )
        b.n += 1

        positive = row.get("positive")
        if positive is not None:
            pl = _label(positive)
            if pl is None:
                raise self.fail(f"must be a label; got {_show(positive)}", line, "positive")
            if b.positive is None:
                b.positive, b.positive_line = pl, line
            elif b.positive != pl:
                raise self.fail(
                    f"is {pl!r} but line {b.positive_line} of task '{task}' says {b.positive!r}", line, "positive"
                )

        slices = row.get("slices")
        if slices is not None and not isinstance(slices, dict):
            raise self.fail(f"must map slice names to values; got {_show(slices)}", line, "slices")
        if slices:
            for k, v in slices.items():
                if v is not None and type(v) not in (str, int, float, bool):
                    raise self.fail(
                        f"values must be strings, numbers or booleans; got {_show(v)} for {k!r}", line, "slices"
                    )
        grp = row.get("group")
        if grp is not None and type(grp) not in (str, int):
            raise self.fail(f"must be a string or an integer (the bootstrap cluster); got {_show(grp)}", line, "group")

        if not self.collect:
            return
        i = len(b.ids)
        b.ids.append(sid)
        b.lines.append(line)
        b.gold.append(g)
        b.pred.append(pred)
        b.group.append(grp)
        _append_sparse(b.slices, slices.items() if slices else (), i)
        _append_sparse(b.extras, ((k, v) for k, v in row.items() if k not in CORE_FIELDS) if len(row) > 4 else (), i)
        if self.repeats:
            for f in REPEAT_FIELDS:
                if f in row:
                    b.repeats[f].append(row[f])
                else:
                    self.lacking.add(f)

    def repeat_field(self) -> str | None:
        """After the last row: the field that explains repeated ids (raises when none does)."""
        if self.first_duplicate is None:
            return None
        field_ = next((f for f in REPEAT_FIELDS if f not in self.lacking), None)
        if field_ is None:
            raise self.first_duplicate
        seen: dict[tuple[str, str, str], int] = {}
        for b in self.tasks.values():
            for sid, line, v in zip(b.ids, b.lines, b.repeats[field_]):
                key = (b.task, sid, _canon(v))
                prev = seen.get(key)
                if prev is not None:
                    raise self.fail(
                        f"duplicate id {sid!r} in task '{b.task}' with {field_} {_show(v)} (also on line {prev})",
                        line,
                        "id",
                    )
                seen[key] = line
        return field_


def _append_sparse(columns: dict[str, list[Any]], items: Iterable[tuple[str, Any]], i: int) -> None:
    """Append row ``i``'s values to sparse ``columns``: a new column starts with ``i`` Nones, a
    column the row lacks (or gives as null) gets a None."""
    for k, v in items:
        if v is None:
            continue
        col = columns.get(k)
        if col is None:
            col = columns[k] = [None] * i
        col.append(v)
    for col in columns.values():
        if len(col) == i:
            col.append(None)


# ------------------------------------------------------------------------------------------------
# Building TaskData from checked columns


def _positive_for(task: str, golds: set[str], given: str | None, source: str, line: int) -> str:
    if given is not None:
        return str(given)  # a plain str: a _Strict one reached the documents, which cannot encode it
    for neg, pos in (("false", "true"), ("0", "1")):
        if golds <= {neg, pos}:
            return pos
    raise RecordError(
        f"task '{task}' gives 'score' (P(positive)) but no positive label: pass positive= "
        f"or add a 'positive' field to the rows (gold labels: {', '.join(sorted(golds))})",
        source=source,
        line=line,
        field="score",
    )


def binary_positive(task: str, golds: set[str], given: str | None, source: str, line: int) -> str:
    """The positive label of a binary task (``score``: P(positive)) whose gold labels are ``golds``:
    ``given`` (the reader's ``positive``, else the rows' ``positive`` field), else ``true``/``1`` of
    gold labels false/true or 0/1. Raises :class:`RecordError` at the task's first ``line`` when
    there is none, or when gold holds labels other than it and one negative: both readers' rule.

    >>> binary_positive("t", {"no", "yes"}, "yes", "r.jsonl", 1), binary_positive("t", {"0", "1"}, None, "r.jsonl", 1)
    ('yes', '1')
    >>> binary_positive("t", {"no", "yes"}, "1", "r.jsonl", 3)
    Traceback (most recent call last):
    ...
    labledger.errors.RecordError: r.jsonl:3: field 'gold' task 't' gives 'score' (binary) but the positive label '1' is not a gold label (gold labels: no, yes)
    """
    pos = _positive_for(task, golds, given, source, line)
    if len(golds - {pos}) > 1:
        raise RecordError(
            f"task '{task}' gives 'score' (binary) but the positive label {pos!r} is not a gold label "
            f"(gold labels: {', '.join(sorted(golds))})"
            if pos not in golds
            else f"task '{task}' gives 'score' (binary) but gold has {len(golds)} labels ({', '.join(sorted(golds))})",
            source=source,
            line=line,
            field="gold",
        )
    return pos


def _negative_label(positive: str, golds: set[str]) -> str:
    others = sorted(golds - {positive})
    if others:
        return others[0]
    return {"true": "false", "1": "0"}.get(positive, f"not_{positive}")


def label_index_type(k: int) -> np.dtype[Any]:
    """The type the readers give the label indices of a task of ``k`` labels: the narrowest signed
    integer that holds ``k - 1``. A task's indices are its own gold and predicted columns, held
    through the whole evaluation. Whoever computes on them widens where the arithmetic could leave the type
    (:func:`~labledger.metrics.prepared.cell_codes`).

    >>> [label_index_type(k).name for k in (2, 128, 129, 40_000)]
    ['int8', 'int8', 'int16', 'int32']
    """
    for t in (np.int8, np.int16, np.int32):
        if k - 1 <= np.iinfo(t).max:
            return np.dtype(t)
    return np.dtype(np.int64)


def predicted_index(probs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Each row's predicted label of an (n, K) probability matrix: the argmax, ties to the first label
    (in sorted order), as :func:`label_index_type` (argmax of a block of rows at a time: no int64
    array of n), or into ``out`` (n, any integer type that holds them: the
    JSONL reader's task array, filled a block of rows at a time). The one rule of every reader
    (rows, JSONL, the columnar cache), so their tasks agree bit for bit.

    >>> predicted_index(np.array([[0.2, 0.8], [0.5, 0.5]])).tolist(), predicted_index(np.zeros((0, 2))).dtype
    ([1, 0], dtype('int8'))
    """
    from labledger.metrics.kernels import element_spans

    out = np.empty(len(probs), dtype=label_index_type(probs.shape[1])) if out is None else out
    for a, b in element_spans(len(probs)):
        out[a:b] = probs[a:b].argmax(axis=1)
    return out


def binary_predicted(score: np.ndarray, pos: int) -> np.ndarray:
    """A binary task's predicted indices from P(positive) (the positive label's index ``pos``):
    positive when ``score >= 0.5``, as :func:`label_index_type` of two labels. The one rule of
    every reader.

    >>> binary_predicted(np.array([0.2, 0.5, 0.9]), 1).tolist()
    [0, 1, 1]
    """
    return _binary_codes(score >= 0.5, pos)


def _binary_codes(positive: np.ndarray, pos: int) -> np.ndarray:
    scalar = label_index_type(2).type
    out: np.ndarray = np.where(positive, scalar(pos), scalar(1 - pos))  # (scalars of the type: np.where keeps it)
    return out


def binary_task(
    task: str,
    ids: np.ndarray,
    lines: np.ndarray,
    pos: str,
    golds: set[str],
    score: np.ndarray,
    gold_pos: np.ndarray,
) -> ProbTask:
    """A binary task from P(positive): the one binary label encoder of both readers (labels sorted;
    the negative label is the other gold label, else ``false``/``0`` for ``true``/``1``, else
    ``not_POSITIVE``; predicted positive when ``score >= 0.5``).

    >>> t = binary_task("t", np.empty(0, object), np.ones(2, np.int64), "yes", {"yes", "no"}, np.array([0.2, 0.9]), np.array([False, True]))
    >>> t.labels, t.gold_index.dtype, t.gold_index.tolist(), t.pred_index.tolist()
    (('no', 'yes'), dtype('int8'), [0, 1], [0, 1])
    """
    labels = tuple(sorted((pos, _negative_label(pos, golds))))
    index = labels.index(pos)
    td = ProbTask(
        task=task,
        ids=ids,
        lines=lines,
        kind="binary",
        labels=labels,
        probs=np.empty((0, 2)),  # made from the score when read (defer_binary_probs)
        gold_index=_binary_codes(gold_pos, index),
        pred_index=binary_predicted(score, index),
        score=score,
        positive=pos,
    )
    defer_binary_probs(td, score, index)
    return td


def set_positive_column(td: ProbTask, positive: str | None, source: str) -> None:
    """A classification task's ``positive`` (and, with two labels, ``score``) when one is given.

    A global ``positive=`` that is not a label of this task is skipped; one given for this very
    task (:class:`_Strict`) raises :class:`RecordError`.
    """
    if positive is None or (positive not in td.labels and not isinstance(positive, _Strict)):
        return
    if positive not in td.labels:
        raise RecordError(
            f"positive label {positive!r} is not a label of task '{td.task}' ({', '.join(td.labels)})",
            source=source,
            field="positive",
        )
    td.positive = str(positive)  # a plain str (see _positive_for)
    if len(td.labels) == 2:
        td.score = td.probs[:, td.labels.index(positive)].copy()


def canonical_codes(codes: np.ndarray) -> np.ndarray:
    """Renumber cluster codes 0, 1, 2, ... in order of first appearance (same partition)."""
    if len(codes) == 0:
        return codes.astype(np.int64)
    uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    return rank[inv.reshape(-1)]


def _group_codes(values: list[Any]) -> np.ndarray | None:
    if all(v is None for v in values):
        return None
    codes = np.empty(len(values), dtype=np.int64)
    table: dict[Any, int] = {}
    for i, v in enumerate(values):
        key = (type(v) is int, v) if v is not None else ("row", i)
        c = table.get(key)
        if c is None:
            c = table[key] = len(table)
        codes[i] = c
    return codes


def _encode(values: list[Any]) -> tuple[np.ndarray, list[Any]]:
    table: dict[Any, int] = {}
    order: list[Any] = []
    codes = np.empty(len(values), dtype=np.int32)
    for i, v in enumerate(values):
        key = (type(v), v)
        c = table.get(key)
        if c is None:
            c = table[key] = len(order)
            order.append(v)
        codes[i] = c
    return codes, order


def _build(b: _TaskBuilder, source: str, positive: str | None) -> TaskData:
    n = len(b.ids)
    ids = np.empty(n, dtype=object)
    ids[:] = b.ids
    codes = _group_codes(b.group)
    common: dict[str, Any] = {
        "task": b.task,
        "ids": ids,
        "lines": np.asarray(b.lines, dtype=np.int64),
        "group": None if codes is None else canonical_codes(codes),
        "slice_columns": {k: _encode(v) for k, v in b.slices.items()},
        "extras": b.extras,
    }
    if b.kind == "classification":
        labels = sorted({k for d in b.pred for k in d})
        index = {lab: j for j, lab in enumerate(labels)}
        probs = np.zeros((n, len(labels)), dtype=np.float64)
        first_keys = list(b.pred[0]) if n else []
        cols = [index[k] for k in first_keys]
        same = all(len(d) == len(first_keys) for d in b.pred) and all(list(d) == first_keys for d in b.pred)
        if same:
            probs[:, cols] = np.array([list(d.values()) for d in b.pred], dtype=np.float64).reshape(n, len(cols))
        else:
            for i, d in enumerate(b.pred):
                for k, p in d.items():
                    probs[i, index[k]] = p
        ptd = ProbTask(
            **common,
            kind="classification",
            labels=tuple(labels),
            probs=probs,
            gold_index=np.fromiter((index[g] for g in b.gold), dtype=label_index_type(len(labels)), count=n),
            pred_index=predicted_index(probs),
        )
        set_positive_column(ptd, positive, source)
        return ptd
    if b.kind == "binary":
        golds = set(b.gold)
        pos = binary_positive(b.task, golds, positive or b.positive, source, b.first_line)
        score = np.asarray(b.pred, dtype=np.float64)
        gold_pos = np.fromiter((g == pos for g in b.gold), dtype=bool, count=n)
        bt = binary_task(common["task"], common["ids"], common["lines"], pos, golds, score, gold_pos)
        bt.group, bt.slice_columns, bt.extras = common["group"], common["slice_columns"], common["extras"]
        return bt
    if b.kind == "regression":
        return RegressionTask(
            **common,
            gold_value=np.asarray(b.gold, dtype=np.float64),
            pred_value=np.asarray(b.pred, dtype=np.float64),
        )
    if b.kind == "sets":
        return SetTask(
            **common,
            gold_items=[frozenset(_canon(x) for x in g) for g in b.gold],
            pred_items=[frozenset(_canon(x) for x in p) for p in b.pred],
        )
    if b.kind == "ranking":
        return RankingTask(
            **common,
            gold_relevance=[{k: float(v) for k, v in g.items()} for g in b.gold],
            scores=[{k: float(v) for k, v in p.items()} for p in b.pred],
        )
    # match: strings compare as themselves; anything else as canonical JSON (so 1 != "1")
    if all(type(v) is str for v in b.gold) and all(type(v) is str for v in b.pred):
        gold, pred = b.gold, b.pred
    else:
        gold = [orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode() for v in b.gold]
        pred = [orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode() for v in b.pred]
    labels_m = sorted(set(gold) | set(pred))
    index_m = {lab: j for j, lab in enumerate(labels_m)}
    kind = label_index_type(len(labels_m))
    return LabelTask(
        **common,
        kind="match",
        labels=tuple(labels_m),
        gold_index=np.fromiter((index_m[g] for g in gold), dtype=kind, count=n),
        pred_index=np.fromiter((index_m[p] for p in pred), dtype=kind, count=n),
    )


class _Strict(str):
    """A positive label given for this very task (a mismatch is an error, not a skip)."""


def positive_for(positive: str | Mapping[str, str] | None, task: str) -> str | None:
    if positive is None or isinstance(positive, str):
        return positive
    p = positive.get(task)
    return None if p is None else _Strict(str(p))


def _finish(checker: _Checker, source: str, positive: str | Mapping[str, str] | None) -> ResultSet:
    repeat = checker.repeat_field() if checker.repeats else None
    tasks = {name: _build(b, source, positive_for(positive, name)) for name, b in checker.tasks.items()}
    if repeat is not None:
        for name, b in checker.tasks.items():
            values = np.empty(len(b.ids), dtype=object)
            values[:] = b.repeats[repeat]
            tasks[name].repeat = values
    return ResultSet(tasks, source=source, repeat_field=repeat)


# ------------------------------------------------------------------------------------------------
# Public entry points


def validate_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str = "<rows>",
    tolerance: float = TOLERANCE,
    lines: Iterable[int] | None = None,
) -> dict[str, dict[str, Any]]:
    """Check result rows; raise :class:`RecordError` (source, line, field) at the first bad one.

    ``lines`` gives each row's line number (default: 1, 2, ...). Returns ``{task: {"kind", "n"}}``.

    >>> validate_rows([{"id": "a", "task": "t", "gold": 1.0, "pred": 0.5}])
    {'t': {'kind': 'regression', 'n': 1}}
    """
    checker = _Checker(source, tolerance, collect=False)
    numbers = iter(lines) if lines is not None else None
    for i, row in enumerate(rows, 1):
        checker.check(row, next(numbers) if numbers is not None else i)
    return {name: {"kind": b.kind, "n": b.n} for name, b in checker.tasks.items()}


def results_from_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str = "<rows>",
    tolerance: float = TOLERANCE,
    positive: str | Mapping[str, str] | None = None,
    repeats: bool = False,
) -> ResultSet:
    """Validate rows (dicts) and return them as a :class:`ResultSet` of columnar tasks.

    ``repeats=True`` accepts ids repeated with an ``epoch``/``sample`` field (see :func:`labledger.inputs.results.read_results`).

    >>> rs = results_from_rows([{"id": "a", "task": "t", "gold": "yes", "score": 0.8},
    ...                         {"id": "b", "task": "t", "gold": "no", "score": 0.3}], positive="yes")
    >>> rs["t"].labels, rs["t"].pred_index.tolist()
    (('no', 'yes'), [1, 0])
    """
    checker = _Checker(source, tolerance, collect=True, repeats=repeats)
    for i, row in enumerate(rows, 1):
        checker.check(row, i)
    return _finish(checker, source, positive)


def iter_rows(path: str | os.PathLike[str], *, display: str | None = None) -> Iterator[tuple[int, Any]]:
    """``(line_number, row)`` for each non-blank line of a JSONL file.

    A non-JSON line raises :class:`RecordError`, except a last line with no newline (a torn
    write), which is skipped with a :class:`TornLineWarning`.
    """
    name = display or str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise RecordError("no such file", source=name) from None
    except IsADirectoryError:
        raise RecordError("is a folder, not a results file", source=name) from None
    yield from rows_in(data, name)


#: Longest line of a results file (a row with its inputs and outputs): a hostile file is refused
#: before it is parsed, so it cannot take gigabytes.
MAX_LINE_BYTES = 8 * 2**20
#: Longest ``id`` (ids are kept per row, hashed and compared in several places).
MAX_ID_CHARS = 4096


def rows_in(data: bytes, name: str) -> Iterator[tuple[int, Any]]:
    """``(line_number, row)`` for each non-blank line of a results file's content (see
    :func:`iter_rows`): the one parser behind reading a results file and storing one.

    A line longer than ``MAX_LINE_BYTES`` or an ``id`` longer than ``MAX_ID_CHARS`` is refused
    with file and line; so is a file that starts with a byte-order mark (one rule everywhere).
    """
    if data.startswith(b"\xef\xbb\xbf"):
        raise RecordError(
            "starts with a UTF-8 byte-order mark; save the file as UTF-8 without one", source=name, line=1
        )
    lines = data.split(b"\n")
    last = len(lines)
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            raise RecordError(
                f"the line is {len(raw):,} bytes; results lines may be at most {MAX_LINE_BYTES:,}",
                source=name,
                line=lineno,
            )
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if lineno == last:  # no newline after it
                warnings.warn(
                    f"{name}:{lineno}: torn last line left out ({len(raw)} bytes, not valid JSON)",
                    TornLineWarning,
                    stacklevel=3,
                )
                return
            raise RecordError(f"not valid JSON ({exc})", source=name, line=lineno) from None
        if type(row) is dict:
            rid = row.get("id")
            if type(rid) is str and len(rid) > MAX_ID_CHARS:
                raise RecordError(
                    f"is {len(rid):,} characters long; ids may be at most {MAX_ID_CHARS:,}",
                    source=name,
                    line=lineno,
                    field="id",
                )
        yield lineno, row


def read_rows(
    path: str | os.PathLike[str],
    *,
    tolerance: float = TOLERANCE,
    positive: str | Mapping[str, str] | None = None,
    display: str | None = None,
    repeats: bool = False,
) -> ResultSet:
    """The reference reader of a ``results.jsonl`` file: every row checked by the one row checker,
    in order, into a :class:`ResultSet` (arguments as :func:`labledger.inputs.results.read_results`,
    which returns the same result set, from an accelerator when one applies).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = p.write_text('{"id": 1, "task": "t", "gold": "a", "probs": {"a": 0.7, "b": 0.3}}\\n')
    >>> read_rows(p)["t"].probs.tolist()
    [[0.7, 0.3]]
    """
    name = display or str(path)
    checker = _Checker(name, tolerance, collect=True, repeats=repeats)
    n = 0
    for lineno, row in iter_rows(path, display=name):
        checker.check(row, lineno)
        n += 1
    if n == 0:
        raise RecordError("holds no result rows (the file is empty)", source=name)
    return _finish(checker, name, positive)


def rows_or_set(
    source: Any, *, tolerance: float = TOLERANCE, positive: str | Mapping[str, str] | None = None
) -> ResultSet | None:
    """A :class:`ResultSet` from a ResultSet or an iterable of rows; ``None`` for a path (read it with
    :func:`labledger.inputs.results.read_results`)."""
    if isinstance(source, ResultSet):
        return source
    if isinstance(source, (str, os.PathLike)):
        return None
    if isinstance(source, Mapping):
        raise RecordError("expected rows (a list of dicts), a results file or a ResultSet; got one dict")
    return results_from_rows(source, tolerance=tolerance, positive=positive)


__all__ = [
    "KINDS",
    "REPEAT_FIELDS",
    "TOLERANCE",
    "LabelTask",
    "ProbTask",
    "RankingTask",
    "RegressionTask",
    "ResultSet",
    "SetTask",
    "TaskData",
    "TornLineWarning",
    "iter_rows",
    "read_rows",
    "results_from_rows",
    "rows_or_set",
    "validate_rows",
]
