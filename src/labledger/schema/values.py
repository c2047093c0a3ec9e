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

from typing import Annotated, Any

import msgspec

from labledger.schema.ids import MetricId
from labledger.schema.records import meaning


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

    method: Annotated[
        str, meaning("the interval: Wilson score, CLT SE with t on n-1 df, or cluster-robust (CR1) with t on C-1 df")
    ]
    low: Annotated[float | None, meaning("lower end")] = None
    high: Annotated[float | None, meaning("upper end")] = None
    se: Annotated[float | None, meaning("the standard error")] = None
    df: Annotated[int | None, meaning("degrees of freedom of the t quantile")] = None
    ci: Annotated[float | None, meaning("the interval's confidence level")] = None
    clusters: Annotated[int | None, meaning("clusters of the cluster-robust SE")] = None


class MetricValue(Part, kw_only=True):
    """One metric's value on one task (or slice) with its bootstrap interval."""

    metric: Annotated[str, meaning("the metric's registry name (accuracy, f1, ece, ...)")]
    key: Annotated[str, meaning("the metric's identity: name and canonical parameters, e.g. f1[average=macro]")]
    params: Annotated[dict[str, Any], meaning("the metric's parameters (average=, k=, pos_label=, n_bins=)")]
    definition: Annotated[str, meaning("the metric's one-sentence definition")]
    higher_is_better: Annotated[bool, meaning("true when a larger value is better")]
    value: Annotated[float | None, meaning("the metric's value (null when undefined on these items)")]
    ci_low: Annotated[float | None, meaning("lower end of the interval")]
    ci_high: Annotated[float | None, meaning("upper end of the interval")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[
        int,
        meaning("bootstrap resamples drawn (0: none drawn; `method` names an analytic interval, else there is none)"),
    ]
    method: Annotated[str | None, meaning("how the interval was formed (percentile bootstrap, cluster bootstrap, ...)")]
    n: Annotated[int, meaning("items the value is computed on", "items")]
    clusters: Annotated[
        int | None,
        meaning("clusters (rows' group values) resampled together; null when items were resampled one by one"),
    ]
    undefined_resamples: Annotated[
        int | None, meaning("resamples on which the metric was undefined (left out of the interval)")
    ]
    resamples_requested: Annotated[int | None, meaning("resamples asked for, when fewer were drawn")] = None
    resamples_note: Annotated[str | None, meaning("why fewer resamples were drawn")] = None
    analytic: Annotated[
        AnalyticInterval | None, meaning("the analytic interval beside the bootstrap one (for per-item means)")
    ] = None
    warning: Annotated[str | None, meaning("the interval covers less than its level (few clusters or items)")] = None
    interval_note: Annotated[str | None, meaning("why ci_low/ci_high are empty")] = None

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

    b: Annotated[int, meaning("pairs right on A, wrong on B", "items")]
    c: Annotated[int, meaning("pairs wrong on A, right on B", "items")]
    method: Annotated[
        str,
        meaning(
            "exact binomial (few discordant pairs) or chi-square with continuity correction; the clustered test when clusters is set"
        ),
    ]
    statistic: Annotated[float | None, meaning("the chi-square statistic (null for the exact test)")]
    p_value: Annotated[float | None, meaning("two-sided p of H0: b = c")]
    clusters: Annotated[int | None, meaning("clusters of the clustered McNemar test")] = None


class MetricDiff(Part, kw_only=True):
    """A - B for one metric on one task: both values, the difference, its CI and a p-value.

    ``p_value`` is the two-sided percentile-bootstrap p (since #16; the shifted bootstrap before),
    so that p < 1 - ``ci`` exactly when the interval excludes 0, up to 1/B; ``p_adjusted`` is it
    adjusted over the comparison's family (``ComparisonDoc.adjust``). ``se`` is the bootstrap SD of
    the difference and ``mde`` the difference detectable with 80% power at alpha 0.05."""

    metric: Annotated[str, meaning("the metric's registry name (accuracy, f1, ece, ...)")]
    key: Annotated[str, meaning("the metric's identity: name and canonical parameters, e.g. f1[average=macro]")]
    params: Annotated[dict[str, Any], meaning("the metric's parameters (average=, k=, pos_label=, n_bins=)")]
    definition: Annotated[str, meaning("the metric's one-sentence definition")]
    higher_is_better: Annotated[bool, meaning("true when a larger value is better")]
    a: Annotated[float | None, meaning("the value on A")]
    b: Annotated[float | None, meaning("the value on B")]
    diff: Annotated[float | None, meaning("A - B")]
    ci_low: Annotated[float | None, meaning("lower end of the difference's interval")]
    ci_high: Annotated[float | None, meaning("upper end of the difference's interval")]
    p_value: Annotated[float | None, meaning("two-sided percentile-bootstrap p of H0: difference = 0")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[
        int,
        meaning("bootstrap resamples drawn (0: none drawn; `method` names an analytic interval, else there is none)"),
    ]
    method: Annotated[str | None, meaning("how the interval was formed (percentile bootstrap, cluster bootstrap, ...)")]
    n: Annotated[int | None, meaning("paired items (null when unpaired)", "items")]
    clusters: Annotated[
        int | None,
        meaning("clusters (rows' group values) resampled together; null when items were resampled one by one"),
    ]
    mcnemar: Annotated[McNemar | None, meaning("McNemar's test on the discordant pairs (accuracy, exact match)")]
    se: Annotated[float | None, meaning("bootstrap standard deviation of the difference")] = None
    mde: Annotated[float | None, meaning("difference detectable with 80% power at alpha 0.05")] = None
    p_adjusted: Annotated[float | None, meaning("p_value adjusted over the document's family of tests")] = None
    analytic: Annotated[
        AnalyticInterval | None, meaning("the analytic interval beside the bootstrap one (for per-item means)")
    ] = None
    warning: Annotated[str | None, meaning("the interval covers less than its level (few clusters or items)")] = None
    interval_note: Annotated[str | None, meaning("why ci_low/ci_high are empty")] = None

    @property
    def id(self) -> MetricId:
        """The metric's identity."""
        return MetricId(self.metric, self.params)


class Stat(Part, kw_only=True):
    """A value with its interval (per-class cells)."""

    value: Annotated[float | None, meaning("the value")]
    ci_low: Annotated[float | None, meaning("lower end of the interval")]
    ci_high: Annotated[float | None, meaning("upper end of the interval")]


class PerClassRow(Part, kw_only=True):
    """Precision, recall and F1 of one label."""

    label: Annotated[str, meaning("the label")]
    support: Annotated[int, meaning("items with this gold label", "items")]
    precision: Annotated[Stat, meaning("precision of the label")]
    recall: Annotated[Stat, meaning("recall of the label")]
    f1: Annotated[Stat, meaning("F1 of the label")]


class PerClass(Part, kw_only=True):
    """The ``per_class`` table of a task."""

    definition: Annotated[str, meaning("what the table holds")]
    params: Annotated[dict[str, Any], meaning("the metric's parameters (average=, k=, pos_label=, n_bins=)")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[
        int,
        meaning("bootstrap resamples drawn (0: none drawn; `method` names an analytic interval, else there is none)"),
    ]
    method: Annotated[str | None, meaning("how the interval was formed (percentile bootstrap, cluster bootstrap, ...)")]
    labels: Annotated[list[PerClassRow], meaning("one row per label")]


class ConfusionMatrix(Part, kw_only=True):
    """Counts of (gold, predicted) label pairs: ``matrix[i][j]`` = gold ``labels[i]``, predicted ``labels[j]``."""

    labels: Annotated[list[str], meaning("the labels, in the order of the tables")]
    rows: Annotated[str, meaning("what the rows are (gold)")]
    columns: Annotated[str, meaning("what the columns are (predicted)")]
    matrix: Annotated[list[list[int]], meaning("matrix[i][j]: items with gold labels[i] predicted labels[j]", "items")]
    definition: Annotated[str | None, meaning("how the predicted label is formed")] = None


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
