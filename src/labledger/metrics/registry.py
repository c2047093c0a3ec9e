"""The metric registry: every metric's name, one-sentence definition, direction, needs and parameters.

A metric's *identity* is its name plus its parameters (``f1[average=macro]`` and
``f1[average=binary,pos_label=yes]`` are different numbers), so every stored value carries both,
with the definition written out.

Each metric turns its inputs into a :class:`Prepared` object, which knows how to compute the
value under any set of item weights. That single code path gives the point value (unit weights),
``sample_weight`` support, and the bootstrap (:mod:`labledger.metrics.resample`), in one of three
vectorised shapes:

- ``table``: the value is a function of a count table (the confusion matrix, or a 2x2 table of
  derived labels); the bootstrap draws multinomial counts over the table's cells;
- ``mean``: the value is a (transformed) mean of per-item values; the bootstrap is ``W @ v``;
- ``weights``: anything else (ROC-AUC, AP, ECE, Pearson, Spearman); computed from a (B, n)
  matrix of integer resample weights, in chunks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labledger.errors import MetricInputError, UnknownMetricError
from labledger.schema.ids import ALIASES, MetricId


@dataclass
class Prepared:
    """A metric bound to its inputs, able to compute its value under any item weights.

    ``n`` is the number of items (the resampling unit unless clusters are given); ``n_used`` the
    number that count (e.g. ``non0_f1`` uses only items with non-zero truth). ``columns`` names
    the entries of a vector-valued metric (``per_class``); scalar metrics have ``columns=None``.
    """

    metric: str
    params: dict[str, Any]
    n: int
    n_used: int
    strategy: str
    cells: np.ndarray | None = None
    n_cells: int = 0
    from_tables: Callable[[np.ndarray], np.ndarray] | None = None
    values: np.ndarray | None = None
    mask: np.ndarray | None = None
    post: Callable[[np.ndarray], np.ndarray] | None = None
    from_weights: Callable[[np.ndarray], np.ndarray] | None = None
    columns: tuple[str, ...] | None = None
    point: Callable[[], float] | None = None  # a leaner exact path for the unweighted value
    parts: tuple[np.ndarray, np.ndarray, int] | None = None  # (gold codes, pred codes, K): cells, lazily

    def get_cells(self) -> np.ndarray:
        """Each item's cell in the count table (-1: the item does not count)."""
        if self.cells is None and self.parts is not None:
            g, p, k = self.parts
            self.cells = g.astype(np.int64) * k + p
        return self.cells

    def counts(self) -> np.ndarray:
        """The unweighted count table (n_cells,), without building ``cells`` for small tables."""
        if self.cells is None and self.parts is not None and self.parts[2] <= 4:
            g, p, k = self.parts
            pred_is = [p == j for j in range(k)]
            out = np.empty(k * k)
            for i in range(k):
                gi = g == i
                for j in range(k):
                    out[i * k + j] = np.count_nonzero(gi & pred_is[j])
            return out
        cells = self.get_cells()
        return np.bincount(cells[cells >= 0], minlength=self.n_cells).astype(np.float64)

    def tables(self, weights: np.ndarray) -> np.ndarray:
        """(B, n_cells) weighted counts of each cell for weight rows (B, n)."""
        w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        all_cells = self.get_cells()
        keep = all_cells >= 0
        cells = all_cells[keep]
        b = w.shape[0]
        flat = (cells[None, :] + self.n_cells * np.arange(b)[:, None]).ravel()
        out = np.bincount(flat, weights=w[:, keep].ravel(), minlength=b * self.n_cells)
        return out.reshape(b, self.n_cells)

    def weighted(self, weights: np.ndarray) -> np.ndarray:
        """The metric under each row of ``weights`` (B, n): shape (B,) or (B, len(columns))."""
        w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        if w.shape[1] != self.n:
            raise MetricInputError(f"{self.metric}: weights have {w.shape[1]} items, the data {self.n}")
        if self.strategy == "table":
            return self.from_tables(self.tables(w))
        if self.strategy == "mean":
            return self.mean_of(w @ self.masked_values(), w @ self.mask_float())
        return self.from_weights(w)

    def masked_values(self) -> np.ndarray:
        return self.values if self.mask is None else np.where(self.mask, self.values, 0.0)

    def mask_float(self) -> np.ndarray:
        return np.ones(self.n) if self.mask is None else self.mask.astype(np.float64)

    def mean_of(self, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)
        return self.post(m) if self.post is not None else m

    def value(self, sample_weight: Any = None) -> Any:
        """The point value (unit weights unless ``sample_weight``): a float, or a dict for tables."""
        if sample_weight is None:
            if self.strategy == "table":
                out = self.from_tables(self.counts()[None, :])[0]
            elif self.strategy == "mean":
                vals = self.values if self.mask is None else self.values[self.mask]
                out = self.mean_of(np.array([math.fsum(vals)]), np.array([float(len(vals))]))[0]
            elif self.point is not None:
                out = self.point()
            else:
                out = self.from_weights(np.ones((1, self.n)))[0]
        else:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (self.n,):
                raise MetricInputError(f"{self.metric}: sample_weight has shape {w.shape}, expected ({self.n},)")
            if not np.isfinite(w).all() or (w < 0).any():
                raise MetricInputError(f"{self.metric}: sample_weight must be finite and >= 0")
            out = self.weighted(w[None, :])[0]
        if self.columns is not None:
            return {c: float(v) for c, v in zip(self.columns, out)}
        return float(out)


@dataclass(frozen=True)
class Metric:
    """A registry entry. ``definition`` may name parameters as ``{average}`` etc."""

    name: str
    definition: str
    higher_is_better: bool
    needs: str
    kinds: tuple[str, ...]
    prepare: Callable[..., Prepared]
    fn: Callable[..., Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    choices: Mapping[str, tuple] = field(default_factory=dict)
    strategy: str = "table"
    table: bool = False
    undefined: str = ""

    def describe(self, params: Mapping[str, Any] | None = None) -> str:
        """The definition with parameter values filled in."""
        p = {**self.params, **(params or {})}
        text = self.definition
        for k, v in p.items():
            text = text.replace("{" + k + "}", _fmt(v))
        return text

    def resolve(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults filled in and every value checked; unknown parameters raise."""
        p = dict(self.params)
        for k, v in (params or {}).items():
            if k not in self.params:
                known = ", ".join(self.params) or "none"
                raise MetricInputError(f"metric '{self.name}' has no parameter '{k}' (parameters: {known})")
            p[k] = v
        for k, options in self.choices.items():
            if p.get(k) not in options:
                raise MetricInputError(
                    f"metric '{self.name}': {k} must be one of "
                    f"{', '.join(_fmt(o) for o in options)}; got {_fmt(p.get(k))}"
                )
        for k in ("k", "n_bins"):
            if k in p and (not isinstance(p[k], int) or isinstance(p[k], bool) or p[k] < 1):
                raise MetricInputError(f"metric '{self.name}': {k} must be an integer >= 1; got {_fmt(p[k])}")
        if "zero_division" in p:
            zd = p["zero_division"]
            if isinstance(zd, str) and zd.lower() == "nan":
                p["zero_division"] = zd = math.nan
            if not (isinstance(zd, (int, float)) and (math.isnan(zd) or zd in (0, 1))):
                raise MetricInputError(f"metric '{self.name}': zero_division must be 0, 1 or nan; got {_fmt(zd)}")
            p["zero_division"] = float(zd)
        return p

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "definition": self.definition,
            "higher_is_better": self.higher_is_better,
            "needs": self.needs,
            "kinds": list(self.kinds),
            "params": dict(self.params),
            "choices": {k: list(v) for k, v in self.choices.items()},
            "undefined": self.undefined,
        }


def _fmt(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


_REGISTRY: dict[str, Metric] = {}


def register(metric: Metric) -> Metric:
    """Add a metric to the registry (names are unique)."""
    if metric.name in _REGISTRY:
        raise ValueError(f"metric {metric.name!r} registered twice")
    _REGISTRY[metric.name] = metric
    return metric


def _load() -> None:
    # Import the metric modules so that they register themselves.
    from labledger.metrics import classification, ranking, regression  # noqa: F401


def get_metric(name: str) -> Metric:
    """The registry entry for ``name``; raises :class:`UnknownMetricError` naming the nearest ones.

    >>> get_metric("f1").higher_is_better
    True
    """
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise _unknown(name) from None


def _unknown(name: str) -> UnknownMetricError:
    known = sorted(list(_REGISTRY) + list(ALIASES))
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
    _load()
    out = sorted(_REGISTRY.values(), key=lambda m: m.name)
    return [m for m in out if kind is None or kind in m.kinds]


@dataclass(frozen=True)
class MetricSpec:
    """A metric with (possibly partial) parameters, as a user asked for it: ``f1:average=macro``."""

    metric: Metric
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return self.metric.name

    def with_params(self, **params: Any) -> MetricSpec:
        merged = {**dict(self.params), **params}
        return MetricSpec(self.metric, tuple(sorted(merged.items())))

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
    data = {}
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
                f"`{k}={_fmt(v)}`" + (f" ({' / '.join(_fmt(c) for c in m.choices[k])})" if k in m.choices else "")
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
    "Metric",
    "MetricSpec",
    "Prepared",
    "get_metric",
    "list_metrics",
    "metric_key",
    "metrics_markdown",
    "parse_metric",
    "prepare",
    "register",
]
