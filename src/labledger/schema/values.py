"""The nested parts of documents: a metric value with its interval, a metric difference, tables.

Field names are those of the JSON written since the first release (``value``, ``ci_low``,
``ci_high``, ``ci``, ``key``, ``metric``, ``params``, ``definition``, ``diff``, ``p_value``...);
optional parts are left out of the JSON when unset (``omit_defaults``), as before.

>>> v = MetricValue(metric="accuracy", key="accuracy", params={}, definition="share correct", higher_is_better=True,
...                 value=0.5, ci_low=0.4, ci_high=0.6, ci=0.9, resamples=100, method="percentile", n=10,
...                 clusters=None, undefined_resamples=0)
>>> v.id.key, v.interval_label
('accuracy', '90% CI')
"""

from __future__ import annotations

from typing import Any

import msgspec

from labledger.schema.ids import MetricId


def ci_label(level: float | None) -> str:
    """The label of an interval at ``level``: ``95% CI``, ``90% CI``, ``99.5% CI`` (``CI`` when unknown).

    >>> ci_label(0.95), ci_label(0.9), ci_label(0.995), ci_label(None)
    ('95% CI', '90% CI', '99.5% CI', 'CI')
    """
    if level is None:
        return "CI"
    pct = round(level * 100, 6)
    return f"{pct:g}% CI"


class Compat:
    """``part["value"]`` reads field ``value`` (by its JSON name): code written against the dict
    documents keeps working. New code reads attributes."""

    __slots__ = ()

    def __getitem__(self, name: str) -> Any:
        fields = dict(zip(self.__struct_encode_fields__, self.__struct_fields__))  # type: ignore[attr-defined]
        if name not in fields:
            raise KeyError(name)
        return getattr(self, fields[name])

    def get(self, name: str, default: Any = None) -> Any:
        """``part.get("value")``, as on the dict documents."""
        try:
            value = self[name]
        except KeyError:
            return default
        return default if value is None else value

    def __contains__(self, name: str) -> bool:
        fields = dict(zip(self.__struct_encode_fields__, self.__struct_fields__))  # type: ignore[attr-defined]
        return name in fields and getattr(self, fields[name]) is not None


class Part(Compat, msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base of the nested parts: keyword construction, optional fields omitted when unset."""

    def to_dict(self) -> dict[str, Any]:
        """The part as JSON-ready builtins."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


class AnalyticInterval(Part, kw_only=True):
    """An analytic interval beside the bootstrap one, for metrics that are means of per-item values
    (:func:`labledger.metrics.stats.mean_interval`): Wilson, CLT with t on n-1 df, or the
    cluster-robust SE (CR1) with t on C-1 df. ``low``/``high`` are None when it cannot be formed."""

    method: str
    low: float | None = None
    high: float | None = None
    se: float | None = None
    df: int | None = None
    ci: float | None = None
    clusters: int | None = None


class MetricValue(Part, kw_only=True):
    """One metric's value on one task (or slice) with its bootstrap interval."""

    metric: str
    key: str
    params: dict[str, Any]
    definition: str
    higher_is_better: bool
    value: float | None
    ci_low: float | None
    ci_high: float | None
    ci: float
    resamples: int
    method: str | None
    n: int
    clusters: int | None
    undefined_resamples: int | None
    resamples_requested: int | None = None
    resamples_note: str | None = None
    analytic: AnalyticInterval | None = None
    warning: str | None = None
    interval_note: str | None = None

    @property
    def id(self) -> MetricId:
        """The metric's identity (name and canonical parameters)."""
        return MetricId(self.metric, self.params)

    @property
    def interval_label(self) -> str:
        """``95% CI`` at the stored level."""
        return ci_label(self.ci)


class McNemar(Part, kw_only=True):
    """McNemar's test on the discordant pairs of a paired accuracy / exact-match comparison;
    ``clusters`` is set when the rows carry clusters and the test is the clustered McNemar
    (Durkalski et al. 2003) instead of the item-level one."""

    b: int
    c: int
    method: str
    statistic: float | None
    p_value: float | None
    clusters: int | None = None


class MetricDiff(Part, kw_only=True):
    """A - B for one metric on one task: both values, the difference, its CI and a p-value.

    ``p_value`` is the two-sided percentile-bootstrap p (since #16; the shifted bootstrap before),
    so that p < 1 - ``ci`` exactly when the interval excludes 0, up to 1/B; ``p_adjusted`` is it
    adjusted over the comparison's family (``ComparisonDoc.adjust``). ``se`` is the bootstrap SD of
    the difference and ``mde`` the difference detectable with 80% power at alpha 0.05."""

    metric: str
    key: str
    params: dict[str, Any]
    definition: str
    higher_is_better: bool
    a: float | None
    b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    ci: float
    resamples: int
    method: str | None
    n: int | None
    clusters: int | None
    mcnemar: McNemar | None
    se: float | None = None
    mde: float | None = None
    p_adjusted: float | None = None
    analytic: AnalyticInterval | None = None
    warning: str | None = None
    interval_note: str | None = None

    @property
    def id(self) -> MetricId:
        """The metric's identity."""
        return MetricId(self.metric, self.params)


class Stat(Part, kw_only=True):
    """A value with its interval (per-class cells)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None


class PerClassRow(Part, kw_only=True):
    """Precision, recall and F1 of one label."""

    label: str
    support: int
    precision: Stat
    recall: Stat
    f1: Stat


class PerClass(Part, kw_only=True):
    """The ``per_class`` table of a task."""

    definition: str
    params: dict[str, Any]
    ci: float
    resamples: int
    method: str | None
    labels: list[PerClassRow]


class ConfusionMatrix(Part, kw_only=True):
    """Counts of (gold, predicted) label pairs: ``matrix[i][j]`` = gold ``labels[i]``, predicted ``labels[j]``."""

    labels: list[str]
    rows: str
    columns: str
    matrix: list[list[int]]
    definition: str | None = None


__all__ = [
    "AnalyticInterval",
    "ConfusionMatrix",
    "McNemar",
    "MetricDiff",
    "MetricValue",
    "Part",
    "PerClass",
    "PerClassRow",
    "Stat",
    "ci_label",
]
