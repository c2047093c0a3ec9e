"""Read a ``results.jsonl`` file (or rows) into a :class:`ResultSet`: the reference reader of
:mod:`labledger.inputs.reference`, behind its accelerators.

:func:`read_results` asks each accelerator in turn, and each returns the result set the reference
would, or declines: the columnar cache (:mod:`labledger.inputs.result_entry`, a file read before and
unchanged since), then the ``pyarrow.json`` reader (:mod:`labledger.inputs.arrow`, for the shapes
it handles); else, and for every error, the reference row checker (:func:`~labledger.inputs.reference.read_rows`).
``LABLEDGER_FAST=0`` (:mod:`labledger.accelerators`) leaves the accelerators out. The task classes and
helpers the reference defines are re-exported here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from labledger import accelerators
from labledger.inputs.reference import KINDS as KINDS
from labledger.inputs.reference import MAX_ID_CHARS as MAX_ID_CHARS
from labledger.inputs.reference import REPEAT_FIELDS as REPEAT_FIELDS
from labledger.inputs.reference import TOLERANCE as TOLERANCE
from labledger.inputs.reference import LabelTask as LabelTask
from labledger.inputs.reference import LazyColumns as LazyColumns
from labledger.inputs.reference import ProbTask as ProbTask
from labledger.inputs.reference import RankingTask as RankingTask
from labledger.inputs.reference import RegressionTask as RegressionTask
from labledger.inputs.reference import ResultSet as ResultSet
from labledger.inputs.reference import SetTask as SetTask
from labledger.inputs.reference import TaskData as TaskData
from labledger.inputs.reference import TornLineWarning as TornLineWarning
from labledger.inputs.reference import canonical_codes as canonical_codes
from labledger.inputs.reference import defer_ids as defer_ids
from labledger.inputs.reference import deferred_ids as deferred_ids
from labledger.inputs.reference import given_sorts as given_sorts
from labledger.inputs.reference import given_ties as given_ties
from labledger.inputs.reference import iter_rows as iter_rows
from labledger.inputs.reference import label_index_type as label_index_type
from labledger.inputs.reference import read_rows, rows_or_set
from labledger.inputs.reference import results_from_rows as results_from_rows
from labledger.inputs.reference import rows_in as rows_in
from labledger.inputs.reference import set_given_sorts as set_given_sorts
from labledger.inputs.reference import validate_rows as validate_rows


def read_results(
    path: str | os.PathLike[str],
    *,
    tolerance: float = TOLERANCE,
    positive: str | Mapping[str, str] | None = None,
    display: str | None = None,
    engine: str = "auto",
    repeats: bool = False,
    cache: bool | None = None,
) -> ResultSet:
    """Read and validate a ``results.jsonl`` file into a :class:`ResultSet`.

    ``positive`` names the positive label of binary tasks (one label, or ``{task: label}``).
    ``engine``: ``"auto"`` or ``"arrow"`` (an accelerator when one applies, else row by row) or
    ``"rows"`` (the reference row checker only); both give the same data and the same errors.

    ``repeats=True``: rows may repeat an id within a task when every row has an ``epoch`` (or else
    a ``sample``) field and ids are unique per repeat; the set's ``repeat_field`` names it and each
    task's ``repeat`` holds the values (without it, a repeated id is an error).

    ``cache``: keep the checked columns of a large file (>= 4 MiB) in the columnar cache
    (:mod:`labledger.inputs.columnar`) and read them from there while the file is unchanged;
    ``None`` (the default) caches when a cache folder is configured, ``False`` never.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    >>> _ = p.write_text('{"id": 1, "task": "t", "gold": "a", "probs": {"a": 0.7, "b": 0.3}}\\n')
    >>> read_results(p)["t"].probs.tolist()
    [[0.7, 0.3]]
    """
    name = display or str(path)
    if engine not in ("auto", "arrow", "rows"):
        raise ValueError(f"engine must be auto, arrow or rows; got {engine!r}")
    if engine != "rows" and accelerators.enabled():
        if cache is not False:  # from the columnar cache before pyarrow is imported
            from labledger.inputs.result_entry import cached_result_set

            found = cached_result_set(Path(path), name, tolerance, positive, repeats)
            if found is not None:
                return found
        from labledger.inputs.arrow import read_arrow

        result = read_arrow(Path(path), name, tolerance, positive, repeats=repeats, cache=cache is not False)
        if result is not None:
            return result
    return read_rows(path, tolerance=tolerance, positive=positive, display=name, repeats=repeats)


def load(source: Any, *, tolerance: float = TOLERANCE, positive: str | Mapping[str, str] | None = None) -> ResultSet:
    """A :class:`ResultSet` from a ResultSet, a path, or an iterable of rows."""
    found = rows_or_set(source, tolerance=tolerance, positive=positive)
    if found is not None:
        return found
    return read_results(source, tolerance=tolerance, positive=positive)


__all__ = [
    "KINDS",
    "MAX_ID_CHARS",
    "REPEAT_FIELDS",
    "TOLERANCE",
    "LabelTask",
    "LazyColumns",
    "ProbTask",
    "RankingTask",
    "RegressionTask",
    "ResultSet",
    "SetTask",
    "TaskData",
    "TornLineWarning",
    "canonical_codes",
    "defer_ids",
    "deferred_ids",
    "given_sorts",
    "given_ties",
    "iter_rows",
    "label_index_type",
    "load",
    "read_results",
    "results_from_rows",
    "rows_in",
    "set_given_sorts",
    "validate_rows",
]
