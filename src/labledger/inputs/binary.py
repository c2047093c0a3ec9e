"""One binary task of a results file, as a threshold sweep reads it: gold labels, P(positive), slices.

A binary task is a task with a ``score`` (P(positive)), or ``probs`` over exactly two labels with
a known positive label (``positive=``, or a ``positive`` field in the rows).

>>> import tempfile, pathlib, orjson
>>> p = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
>>> rows = [{"id": "1", "task": "t", "gold": "yes", "score": 0.9}, {"id": "2", "task": "t", "gold": "no", "score": 0.2}]
>>> _ = p.write_bytes(b"\\n".join(orjson.dumps(r) for r in rows))
>>> bt = read_binary_task(p, positive="yes")
>>> bt.task, bt.positive, bt.negative, bt.gold.tolist(), bt.score.tolist()
('t', 'yes', 'no', ['yes', 'no'], [0.9, 0.2])
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from labledger.errors import MetricInputError, UnknownNameError
from labledger.inputs.results import ProbTask, read_results


@dataclass
class BinaryTask:
    """A binary task's gold labels (their names), scores P(positive), slice columns and labels."""

    task: str
    source: str
    gold: np.ndarray
    score: np.ndarray
    positive: str
    negative: str
    slices: dict[str, tuple[np.ndarray, list[object]]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of items."""
        return len(self.score)


def read_binary_task(
    path: str | os.PathLike[str],
    *,
    task: str | None = None,
    positive: str | None = None,
    shown: str | None = None,
    single_ok: bool = False,
) -> BinaryTask:
    """The binary task ``task`` (the only task when ``None``) of the results file at ``path``.

    ``shown``: how to name the file in messages; ``single_ok``: a file with one task stands for
    ``task`` even under another name (a paired test file). Raises
    :class:`~labledger.errors.MetricInputError` when the task is not binary or has no positive
    label, and :class:`~labledger.errors.UnknownNameError` for a ``positive`` that is not a label.
    """
    shown = os.fspath(path) if shown is None else shown
    rs = read_results(Path(path), positive=positive, display=os.fspath(path))
    if single_ok and task not in rs and len(rs) == 1:
        task = None
    if task is None:
        if len(rs) != 1:
            raise MetricInputError(f"{shown} holds {len(rs)} tasks ({', '.join(rs)}); pass --task.")
        task = next(iter(rs))
    td = rs[task]
    if not isinstance(td, ProbTask) or len(td.labels) != 2:
        labels = len(getattr(td, "labels", ()))
        raise MetricInputError(
            f"task '{task}' in {shown} is {td.kind} with {labels} labels; "
            "a sweep needs a binary task (a 'score', or 'probs' over two labels)."
        )
    if positive is not None and positive not in td.labels:
        raise UnknownNameError(f"label of task '{task}'", positive, td.labels)
    pos = td.positive or positive
    if td.score is None or pos is None:
        raise MetricInputError(
            f"task '{task}' in {shown}: --positive LABEL names the positive class (labels: {', '.join(td.labels)})."
        )
    if pos not in td.labels:
        raise UnknownNameError(f"label of task '{task}'", pos, td.labels)
    neg = next(lab for lab in td.labels if lab != pos)
    return BinaryTask(
        task=task,
        source=shown,
        gold=np.asarray(td.labels)[td.gold_index],
        score=td.score,
        positive=pos,
        negative=neg,
        slices=dict(td.slice_columns),
    )


__all__ = ["BinaryTask", "read_binary_task"]
