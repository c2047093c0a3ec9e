"""``MetricId``: the one way a metric is named, parsed, printed and compared.

A metric's identity is its registry name plus its canonical parameters: ``None`` values dropped,
integral floats written as integers (``0.0`` -> ``0``), NaN as ``"nan"``, sorted by name. Every
spelling a user, a table or a stored document uses parses to the same value:

>>> MetricId.parse("f1:average=macro") == MetricId.parse("f1[average=macro]") == MetricId.parse("macro_f1")
True
>>> MetricId.parse("Macro-F1").key, MetricId.parse("ndcg@10").key, MetricId.parse("Acc.").key
('f1[average=macro]', 'ndcg[k=10]', 'accuracy')

This module knows syntax and aliases only; which names and parameters exist is the registry's
business (``labledger.metrics.registry.parse_metric`` checks a ``MetricId`` against it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from labledger.errors import MetricInputError

ParamValue = str | int | float | bool
Params = tuple[tuple[str, ParamValue], ...]

#: Short names that stand for a metric with parameters (``macro_f1`` -> ``f1[average=macro]``).
ALIASES: dict[str, tuple[str, dict[str, ParamValue]]] = {
    **{
        f"{avg}_{m}": (m, {"average": avg})
        for avg in ("macro", "micro", "weighted")
        for m in ("precision", "recall", "f1")
    },
    "binary_f1": ("f1", {"average": "binary"}),
    **{f"mean_{f}": ("field_mean", {"field": f}) for f in ("cost", "tokens_in", "tokens_out", "latency_ms")},
    **{f"total_{f}": ("field_total", {"field": f}) for f in ("cost", "tokens_in", "tokens_out", "latency_ms")},
}
#: Metric labels as people write them in benchmark tables (lower-cased) -> (metric, parameters).
LABELS: dict[str, tuple[str, dict[str, ParamValue]]] = {
    "acc": ("accuracy", {}),
    "acc.": ("accuracy", {}),
    "macro-f1": ("f1", {"average": "macro"}),
    "macro f1": ("f1", {"average": "macro"}),
    "f1 (macro)": ("f1", {"average": "macro"}),
    "micro-f1": ("f1", {"average": "micro"}),
    "weighted-f1": ("f1", {"average": "weighted"}),
    "f1 halluc.": ("f1", {"average": "binary", "pos_label": "hallucinated"}),
    "exact match": ("exact_match", {}),
    "em": ("exact_match", {}),
    "per-review f1": ("set_f1", {}),
    "set f1": ("set_f1", {}),
    "auc": ("roc_auc", {}),
    "roc-auc": ("roc_auc", {}),
}
#: In a benchmark table a bare "F1" is the binary F1 of the task's positive label.
TABLE_LABELS: dict[str, tuple[str, dict[str, ParamValue]]] = {"f1": ("f1", {"average": "binary"})}
#: Parameter values left out of :attr:`MetricId.short` (the table label): the registry's defaults
#: that do not change what a number means in practice.
QUIET: dict[str, ParamValue] = {"zero_division": 0}

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_AT = re.compile(r"^(?P<name>[a-z0-9_]+)@(?P<k>\d+)$")


def canonical_value(v: Any) -> ParamValue | None:
    """A parameter value in canonical form (``0.0`` -> ``0``, NaN -> ``"nan"``).

    >>> canonical_value(0.0), canonical_value(float("nan")), canonical_value("macro")
    (0, 'nan', 'macro')
    """
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return int(v) if v.is_integer() else v
    if isinstance(v, (int, str)):
        return v
    raise MetricInputError(f"metric parameter value {v!r} must be a string, a number or a boolean")


def _text(v: ParamValue) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def coerce(value: str) -> ParamValue | None:
    """A parameter value written in a spec (``none``, ``nan``, integers, floats, else the text).

    >>> coerce("10"), coerce("0.5"), coerce("none"), coerce("macro")
    (10, 0.5, None, 'macro')
    """
    low = value.lower()
    if low in ("none", "null"):
        return None
    if low == "nan":
        return "nan"
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    try:
        return canonical_value(float(value))
    except ValueError:
        return value


class MetricId:
    """A metric's identity: ``name`` and canonical ``params``; equal, hashed and sorted by :attr:`key`.

    >>> m = MetricId("f1", {"average": "macro", "pos_label": None, "zero_division": 0.0})
    >>> m.key, m.short, m.params
    ('f1[average=macro,zero_division=0]', 'f1[average=macro]', (('average', 'macro'), ('zero_division', 0)))
    >>> m.covers(MetricId.parse("macro_f1")), MetricId.parse("f1").covers(m)
    (True, False)
    """

    __slots__ = ("_key", "name", "params")

    name: str
    params: Params
    _key: str

    def __init__(self, name: str, params: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        items = params.items() if isinstance(params, Mapping) else params
        canon: dict[str, ParamValue] = {}
        for k, v in items:
            cv = canonical_value(v)
            if cv is not None:
                canon[str(k)] = cv
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "params", tuple(sorted(canon.items())))
        object.__setattr__(self, "_key", self._render(self.params))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("MetricId is immutable")

    def _render(self, params: Params) -> str:
        if not params:
            return self.name
        return self.name + "[" + ",".join(f"{k}={_text(v)}" for k, v in params) + "]"

    @property
    def key(self) -> str:
        """``name[p=v,...]`` with every canonical parameter: the stored ``key`` of a metric value."""
        return self._key

    @property
    def short(self) -> str:
        """The key without parameters at a quiet default (``zero_division=0``): for tables."""
        return self._render(tuple((k, v) for k, v in self.params if QUIET.get(k, object()) != v))

    @property
    def param_dict(self) -> dict[str, ParamValue]:
        """The parameters as a dict."""
        return dict(self.params)

    def covers(self, other: MetricId) -> bool:
        """True when ``other`` names this metric with a subset of its parameters, all equal
        (``f1[average=macro,zero_division=0]`` covers ``f1[average=macro]`` and ``macro_f1``)."""
        mine = dict(self.params)
        return self.name == other.name and all(k in mine and mine[k] == v for k, v in other.params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricId) and other._key == self._key

    def __lt__(self, other: MetricId) -> bool:
        return self._key < other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"MetricId({self._key!r})"

    def __str__(self) -> str:
        return self._key

    @classmethod
    def parse(cls, text: str | MetricId, *, table: bool = False) -> MetricId:
        """``name``, ``name@k``, ``name:p=v,q=w``, ``name[p=v,q=w]``, an alias (``macro_f1``) or a
        benchmark-table label (``Macro-F1``, ``Acc.``; with ``table=True`` a bare ``F1`` is binary).

        >>> MetricId.parse("recall@5").key, MetricId.parse("F1", table=True).key
        ('recall_at_k[k=5]', 'f1[average=binary]')
        """
        if isinstance(text, MetricId):
            return text
        raw = text.strip()
        for label in (raw.lower(), raw.strip("()").strip().lower()):
            for table_ in (TABLE_LABELS, LABELS) if table else (LABELS,):
                if label in table_:
                    name, extra = table_[label]
                    return cls(name, extra)
        body = raw
        params: dict[str, Any] = {}
        if body.endswith("]") and "[" in body:
            body, _, inner = body[:-1].partition("[")
        elif body.endswith(")") and "(" in body:  # the old benchmark rendering: f1(average=macro, ...)
            body, _, inner = body[:-1].partition("(")
        else:
            body, _, inner = body.partition(":")
        for part in filter(None, (p.strip() for p in inner.split(","))):
            k, eq, v = part.partition("=")
            if not eq or not k.strip():
                raise MetricInputError(f"metric parameter {part!r} in {text!r} must look like name=value")
            params[k.strip()] = coerce(v.strip())
        body = body.strip()
        at = _AT.match(body.replace(" ", "").lower())
        if at:
            body = at["name"]
            params.setdefault("k", int(at["k"]))
            if body == "recall":
                body = "recall_at_k"
        if body in ALIASES:
            name, extra = ALIASES[body]
            params = {**extra, **params}
            body = name
        if not body:
            raise MetricInputError(f"metric name missing in {text!r}")
        if not _NAME.match(body) and _NAME.match(body.lower()):
            body = body.lower()  # 'Accuracy' -> 'accuracy'; other names are kept for the registry to judge
        return cls(body, params)


def metric_id(name: str, params: Mapping[str, Any] | None = None) -> MetricId:
    """``MetricId(name, params)``, for call sites that hold a name and a parameter dict.

    >>> metric_id("ece", {"n_bins": 15, "strategy": "uniform", "pos_label": None}).key
    'ece[n_bins=15,strategy=uniform]'
    """
    return MetricId(name, params or {})


__all__ = ["ALIASES", "LABELS", "QUIET", "TABLE_LABELS", "MetricId", "canonical_value", "coerce", "metric_id"]
