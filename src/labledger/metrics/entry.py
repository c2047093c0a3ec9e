"""A registry entry: one metric's name, one-sentence definition, direction, needs and parameters.

A metric's *identity* is its name plus its parameters (``f1[average=macro]`` and
``f1[average=binary,pos_label=yes]`` are different numbers), so every stored value carries both,
with the definition written out.

>>> from labledger.metrics import get_metric
>>> get_metric("f1").describe({"average": "macro"}).startswith("F1 = 2 tp / (2 tp + fp + fn) with average=macro")
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labledger.errors import MetricInputError
from labledger.metrics.prepared import Prepared, Strategy


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
    choices: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    strategy: Strategy = "table"
    table: bool = False
    undefined: str = ""

    def describe(self, params: Mapping[str, Any] | None = None) -> str:
        """The definition with parameter values filled in."""
        p = {**self.params, **(params or {})}
        text = self.definition
        for k, v in p.items():
            text = text.replace("{" + k + "}", format_value(v))
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
                    f"{', '.join(format_value(o) for o in options)}; got {format_value(p.get(k))}"
                )
        for k in ("k", "n_bins"):
            if k in p and (not isinstance(p[k], int) or isinstance(p[k], bool) or p[k] < 1):
                raise MetricInputError(f"metric '{self.name}': {k} must be an integer >= 1; got {format_value(p[k])}")
        if "zero_division" in p:
            zd = p["zero_division"]
            if isinstance(zd, str) and zd.lower() == "nan":
                p["zero_division"] = zd = math.nan
            if not (isinstance(zd, (int, float)) and (math.isnan(zd) or zd in (0, 1))):
                raise MetricInputError(
                    f"metric '{self.name}': zero_division must be 0, 1 or nan; got {format_value(zd)}"
                )
            p["zero_division"] = float(zd)
        return p

    def to_dict(self) -> dict[str, Any]:
        """The entry as plain JSON values."""
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


def format_value(v: Any) -> str:
    """A parameter value as written in a metric key: ``none``, ``nan``, ``1`` for 1.0."""
    if v is None:
        return "none"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


__all__ = ["Metric"]
