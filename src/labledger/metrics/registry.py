"""The metric registry: every metric, by name, built in one place from the metric modules' lists.

The entries (:class:`~labledger.metrics.entry.Metric`) come from the explicit lists
``classification.METRICS``, ``ranking.METRICS``, ``regression.METRICS`` and ``usage.METRICS``, and the short names
from :data:`labledger.schema.ids.ALIASES`; :data:`REGISTRY` is the one object that holds them (nothing
registers itself on import). Each metric turns its inputs into a prepared object
(:mod:`labledger.metrics.prepared`), which computes its value under any item weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from labledger.errors import DuplicateMetricError, MetricInputError, UnknownMetricError
from labledger.metrics import classification, ranking, regression, usage
from labledger.metrics.entry import Metric, format_value
from labledger.metrics.prepared import MeanPrepared, Prepared, TablePrepared, WeightsPrepared
from labledger.schema.ids import ALIASES, MetricId


class MetricRegistry:
    """Metrics by name, and short names (aliases) that stand for a metric with parameters.

    >>> reg = MetricRegistry([get_metric("accuracy")])
    >>> reg.get("accuracy").name, len(reg)
    ('accuracy', 1)
    """

    def __init__(
        self, metrics: Iterable[Metric] = (), aliases: Mapping[str, tuple[str, dict[str, Any]]] | None = None
    ) -> None:
        self.metrics: dict[str, Metric] = {}
        #: Short names that stand for a metric with parameters (``macro_f1`` -> ``f1[average=macro]``).
        self.aliases: dict[str, tuple[str, dict[str, Any]]] = dict(aliases or {})
        for metric in metrics:
            self.register(metric)

    def __len__(self) -> int:
        return len(self.metrics)

    def register(self, metric: Metric) -> Metric:
        """Add a metric (names are unique: a second one raises :class:`DuplicateMetricError`)."""
        if metric.name in self.metrics:
            raise DuplicateMetricError(f"metric {metric.name!r} registered twice")
        self.metrics[metric.name] = metric
        return metric

    def get(self, name: str) -> Metric:
        """The entry for ``name``; raises :class:`UnknownMetricError` naming the nearest ones."""
        try:
            return self.metrics[name]
        except KeyError:
            raise _unknown(name, sorted(list(self.metrics) + list(self.aliases))) from None

    def sorted(self, kind: str | None = None) -> list[Metric]:
        """Every metric (for one task kind when ``kind`` is given), sorted by name."""
        out = sorted(self.metrics.values(), key=lambda m: m.name)
        return [m for m in out if kind is None or kind in m.kinds]


#: The registry of every metric labledger computes.
REGISTRY = MetricRegistry(
    [*classification.METRICS, *ranking.METRICS, *regression.METRICS, *usage.METRICS], aliases=ALIASES
)


def register(metric: Metric) -> Metric:
    """Add a metric to :data:`REGISTRY` (names are unique; a second one raises :class:`DuplicateMetricError`)."""
    return REGISTRY.register(metric)


#: The values a metric can take, where bounded: ``(low, high)``, ``None`` for no bound on that side.
#: An interval from a normal or t approximation is kept inside them (:func:`clip_to_range`).
RANGES: dict[str, tuple[float | None, float | None]] = {
    **dict.fromkeys(
        (
            "acc5", "acc7", "accuracy", "average_precision", "balanced_accuracy", "brier", "ece", "exact_match",
            "f1", "has0_acc", "has0_f1", "mrr", "ndcg", "non0_acc", "non0_f1", "precision", "recall",
            "recall_at_k", "roc_auc", "set_f1", "zero_f1",
        ),
        (0.0, 1.0),
    ),
    **dict.fromkeys(("cohen_kappa", "mcc", "pearson", "spearman"), (-1.0, 1.0)),
    **dict.fromkeys(("log_loss", "mae", "rmse"), (0.0, None)),
}  # fmt: skip


def clip_to_range(
    metric: str, low: float | None, high: float | None, *, difference: bool = False
) -> tuple[float | None, float | None, bool]:
    """``(low, high, clipped)``: an interval of metric ``metric`` (a registry spec) kept inside the
    values it can take (of a difference of two values with ``difference``: ``[lo - hi, hi - lo]``).

    >>> clip_to_range("accuracy", 0.91, 1.07), clip_to_range("accuracy", -1.2, 0.4, difference=True)
    ((0.91, 1.0, True), (-1.0, 0.4, True))
    >>> clip_to_range("mean", -3.0, 9.0)
    (-3.0, 9.0, False)
    """
    lo_b, hi_b = RANGES.get(parse_metric(metric).metric.name, (None, None))
    if difference:
        lo_b, hi_b = (
            (lo_b - hi_b if lo_b is not None and hi_b is not None else None),
            (hi_b - lo_b if lo_b is not None and hi_b is not None else None),
        )
    new_low = max(low, lo_b) if low is not None and lo_b is not None else low
    new_high = min(high, hi_b) if high is not None and hi_b is not None else high
    return new_low, new_high, (new_low, new_high) != (low, high)


def get_metric(name: str) -> Metric:
    """The registry entry for ``name``; raises :class:`UnknownMetricError` naming the nearest ones.

    >>> get_metric("f1").higher_is_better
    True
    """
    return REGISTRY.get(name)


def _unknown(name: str, known: list[str]) -> UnknownMetricError:
    exc = UnknownMetricError(name, known)
    if "Did you mean" not in str(exc):
        # difflib misses 'f1score' -> 'f1': also match names contained in the input (or the reverse)
        norm = name.lower().replace("-", "_").replace(" ", "_")
        close = [k for k in known if len(k) > 1 and (k in norm or norm in k)]
        close = sorted(close, key=lambda k: (-len(k), k))[:3]
        if close:
            exc.args = (f"Unknown metric '{name}'. Did you mean " + " or ".join(f"'{c}'" for c in close) + "?",)
    return exc


def list_metrics(kind: str | None = None) -> list[Metric]:
    """Every registered metric (for one task kind when ``kind`` is given), sorted by name."""
    return REGISTRY.sorted(kind)


@dataclass(frozen=True)
class MetricSpec:
    """A metric with (possibly partial) parameters, as a user asked for it: ``f1:average=macro``."""

    metric: Metric
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return self.metric.name

    def __str__(self) -> str:
        return metric_key(self.name, dict(self.params))


def metric_key(name: str, params: Mapping[str, Any]) -> str:
    """The key of a metric with parameters: ``MetricId(name, params).key`` (``f1[average=macro]``).

    >>> metric_key("f1", {"average": "macro", "pos_label": None})
    'f1[average=macro]'
    """
    return MetricId(name, params).key


def parse_metric(spec: str | MetricId | MetricSpec | Metric) -> MetricSpec:
    """The registry entry and parameters of a metric named any way :meth:`MetricId.parse` reads
    (``name``, ``name@k``, ``name:p=v``, ``name[p=v]``, an alias), checked against the registry.

    >>> str(parse_metric("f1:average=macro")), str(parse_metric("ndcg@10")), str(parse_metric("macro_f1"))
    ('f1[average=macro]', 'ndcg[k=10]', 'f1[average=macro]')
    """
    if isinstance(spec, MetricSpec):
        return spec
    if isinstance(spec, Metric):
        return MetricSpec(spec)
    if not isinstance(spec, (str, MetricId)):
        raise MetricInputError(
            f"a metric is a name ('ece', 'ece[n_bins=10,strategy=quantile]', 'ndcg@10'), a MetricSpec or a "
            f"Metric; got {type(spec).__name__} {spec!r:.80}"
        )
    mid = MetricId.parse(spec)
    metric = get_metric(mid.name)
    params = dict(mid.params)
    metric.resolve(params)
    return MetricSpec(metric, tuple(sorted(params.items())))


def prepare(name: str | MetricSpec, **inputs: Any) -> Prepared:
    """Bind a metric (by name or spec) to inputs: ``prepare("f1", gold=g, pred=p, average="macro")``.

    Keyword arguments that are parameters of the metric are taken as parameters, the rest as
    inputs. The result feeds :func:`labledger.metrics.resample.bootstrap` and friends.

    >>> prepare("accuracy", gold=["a", "b"], pred=["a", "a"]).value()
    0.5
    """
    spec = parse_metric(name)
    metric = spec.metric
    params = dict(spec.params)
    data: dict[str, Any] = {}
    for k, v in inputs.items():
        (params if k in metric.params else data)[k] = v
    return metric.prepare(**data, **metric.resolve(params))


def metrics_markdown() -> str:
    """The registry as a Markdown table (docs/metrics.md embeds it; a test keeps them equal)."""
    lines = [
        "| metric | task kinds | direction | parameters (defaults) | undefined (0/0) | definition |",
        "|---|---|---|---|---|---|",
    ]
    for m in list_metrics():
        params = (
            ", ".join(
                f"`{k}={format_value(v)}`"
                + (f" ({' / '.join(format_value(c) for c in m.choices[k])})" if k in m.choices else "")
                for k, v in m.params.items()
            )
            or "-"
        )
        direction = "higher is better" if m.higher_is_better else "lower is better"
        cell = m.definition.replace("|", "\\|")
        lines.append(f"| `{m.name}` | {', '.join(m.kinds)} | {direction} | {params} | {m.undefined or '-'} | {cell} |")
    lines.append("")
    lines.append(
        "Aliases: "
        + ", ".join(f"`{a}` = `{metric_key(b, p)}`" for a, (b, p) in sorted(ALIASES.items()))
        + "; `ndcg@K` and `recall@K` set `k`."
    )
    return "\n".join(lines) + "\n"


__all__ = [
    "ALIASES",
    "RANGES",
    "REGISTRY",
    "MeanPrepared",
    "Metric",
    "MetricRegistry",
    "MetricSpec",
    "Prepared",
    "TablePrepared",
    "WeightsPrepared",
    "clip_to_range",
    "get_metric",
    "list_metrics",
    "metric_key",
    "metrics_markdown",
    "parse_metric",
    "prepare",
    "register",
]
