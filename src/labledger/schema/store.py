"""Typed rows the store's index returns: stored documents and indexed metric values.

>>> StoredEvaluation(name="test", kind="evaluation", created=0.0, n=10, path="x").to_dict()["kind"]
'evaluation'
"""

from __future__ import annotations

from typing import Any

from labledger.schema.ids import MetricId
from labledger.schema.values import Part


class StoredEvaluation(Part, kw_only=True, omit_defaults=False):
    """One stored document of a run (``evals/<name>/<kind>.json``)."""

    name: str
    kind: str
    created: float
    n: int | None
    path: str


class StoredMetricValue(Part, kw_only=True, omit_defaults=False):
    """One indexed scalar of a stored evaluation (task, slice ``field=value`` or ``""``)."""

    evaluation: str
    task: str
    slice: str
    metric: str
    params: dict[str, Any]
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None
    definition: str | None

    @property
    def id(self) -> MetricId:
        """The metric's identity."""
        return MetricId(self.metric, self.params)


__all__ = ["StoredEvaluation", "StoredMetricValue"]
