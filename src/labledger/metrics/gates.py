"""Gate expressions for threshold sweeps: parsing, and resolving classes and slices in the data.

``METRIC[TARGET] OP NUMBER``: ``recall[single_symbol]>=0.97`` (a class), ``recall[length=long]>=0.9``
(the items of a slice), ``f1[single_symbol,length=long]>0.8`` (both), ``accuracy>=0.95`` (overall).
See :mod:`labledger.metrics.sweep` for how gates select a threshold.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labledger.errors import GateError, MetricInputError

__all__ = ["OBJECTIVES", "Gate", "parse_gate"]

#: Metrics that can be the objective or a gate, with their one-line definitions.
OBJECTIVES: dict[str, str] = {
    "accuracy": "(TP + TN) / n",
    "balanced_accuracy": "mean of the two classes' recalls (of the one present if only one is)",
    "f1": "F1 of the class = 2 TP / (2 TP + FP + FN), 0 when the denominator is 0",
    "precision": "TP / (TP + FP) of the class, 0 when nothing is predicted as the class",
    "recall": "TP / (TP + FN) of the class, 0 when the class has no items",
    "mcc": "Matthews correlation coefficient (scikit-learn's formula), 0 when undefined",
}
CLASS_METRICS = ("recall", "precision", "f1")
_OPS = {">=": np.greater_equal, ">": np.greater, "<=": np.less_equal, "<": np.less}
_GATE_RE = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<target>[^\]]*)\])?\s*"
    r"(?P<op>>=|<=|>|<)\s*(?P<bound>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


@dataclass(frozen=True)
class Gate:
    """One selection constraint, e.g. ``recall[single_symbol] >= 0.97``."""

    text: str
    metric: str
    op: str
    bound: float
    label: str | None = None
    field: str | None = None
    value: str | None = None

    @property
    def column(self) -> str:
        """The column of the trials that holds the gated value."""
        return _column_name(self.metric, self.label, self.field, self.value)

    def passes(self, values: np.ndarray) -> np.ndarray:
        """Element-wise: does each value satisfy the gate (NaN never does)?"""
        return _OPS[self.op](np.asarray(values, dtype=np.float64), self.bound)

    def __str__(self) -> str:
        return self.text


def parse_gate(text: str | Gate) -> Gate:
    """Parse a gate expression (syntax only; classes and slices are checked against the data).

    >>> g = parse_gate("recall[length=long] >= 0.97")
    >>> (g.metric, g.field, g.value, g.op, g.bound, g.text)
    ('recall', 'length', 'long', '>=', 0.97, 'recall[length=long]>=0.97')
    """
    if isinstance(text, Gate):
        return text
    m = _GATE_RE.match(str(text))
    if not m:
        raise GateError(
            f"Gate '{text}' is malformed: expected METRIC[CLASS or FIELD=VALUE] OP NUMBER with OP one "
            "of >=, >, <=, < (e.g. recall[single_symbol]>=0.97 or recall[length=long]>=0.97)."
        )
    metric = m["metric"]
    if metric not in OBJECTIVES:
        close = difflib.get_close_matches(metric, OBJECTIVES, n=2, cutoff=0.5)
        hint = (" Did you mean " + " or ".join(f"'{c}'" for c in close) + "?") if close else ""
        raise GateError(f"Gate '{text}': unknown metric '{metric}'.{hint} Known: {', '.join(OBJECTIVES)}.")
    label = fld = value = None
    target = m["target"]
    if target is not None:
        parts = [p.strip() for p in target.split(",")]
        if not target.strip() or any(not p for p in parts) or len(parts) > 2:
            raise GateError(
                f"Gate '{text}': the brackets hold a class, FIELD=VALUE, or CLASS,FIELD=VALUE; got '[{{target}}]'."
            )
        for part in parts:
            if "=" in part:
                if fld is not None:
                    raise GateError(f"Gate '{text}': at most one FIELD=VALUE slice.")
                fld, _, value = (s.strip() for s in part.partition("="))
                if not fld or not value:
                    raise GateError(f"Gate '{text}': a slice is FIELD=VALUE; got '{part}'.")
            else:
                if label is not None:
                    raise GateError(f"Gate '{text}': at most one class.")
                label = part
    if label is not None and metric not in CLASS_METRICS:
        raise GateError(
            f"Gate '{text}': {metric} is not a per-class metric; only {', '.join(CLASS_METRICS)} take a class."
        )
    bound = float(m["bound"])
    canon = metric
    inner = ",".join(x for x in (label, f"{fld}={value}" if fld else None) if x)
    if target is not None:
        canon += f"[{inner}]"
    return Gate(
        text=f"{canon}{m['op']}{m['bound']}",
        metric=metric,
        op=m["op"],
        bound=bound,
        label=label,
        field=fld,
        value=value,
    )


def _column_name(metric: str, label: str | None, fld: str | None, value: str | None) -> str:
    if fld is None and label is not None and metric == "recall":
        return f"{label}_recall"
    if fld is None and label is None:
        return metric
    inner = ",".join(x for x in (label, f"{fld}={value}" if fld else None) if x)
    return f"{metric}[{inner}]"


def _py(x: Any) -> Any:
    """A numpy scalar as the Python value (for messages and labels)."""
    return x.item() if isinstance(x, np.generic) else x


def _slice_text(v: Any) -> str:
    """How a slice value is written in a gate: strings as they are, others as JSON (true, 3)."""
    if isinstance(v, str):
        return v
    v = _py(v)
    if v is None or isinstance(v, bool):
        return {None: "null", True: "true", False: "false"}[v]
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def slice_mask(
    gate: Gate, slices: Mapping[str, Any] | None, n: int, labels: Sequence[str], strict: bool = True
) -> np.ndarray | None:
    """Items whose slice ``gate.field`` is ``gate.value``.

    A slice column is an array of values (one per item) or a ``(codes, values)`` pair where
    ``values[codes[i]]`` is item i's value (what :meth:`labledger.inputs.results.TaskData.slice_codes`
    gives). Values match by their text: ``length=long``, ``bucket=3``, ``hard=true``.
    """
    known_fields = sorted(slices) if slices else []
    if slices is None or gate.field is None or gate.field not in slices:
        if not strict:
            return None
        raise GateError(
            f"Gate '{gate.text}': unknown slice field '{gate.field}'."
            + _suggest(str(gate.field), known_fields)
            + f" Known slice fields: {', '.join(repr(f) for f in known_fields) or 'none'};"
            f" classes: {', '.join(repr(x) for x in labels)}."
        )
    column = slices[gate.field]
    if isinstance(column, tuple) and len(column) == 2:
        codes, table = np.asarray(column[0]), list(column[1])
        if codes.shape != (n,):
            raise MetricInputError(f"slices['{gate.field}'] has {codes.size} codes; gold has {n}.")
        hit = np.array([_slice_text(v) == gate.value for v in table], dtype=bool)
        if codes.dtype.kind not in "iu" or (n and (codes.min() < 0 or codes.max() >= len(table))):
            raise MetricInputError(f"slices['{gate.field}'] codes must index its {len(table)} values.")
        mask = hit[codes]  # a lookup table: one pass, one byte per item

        def known() -> list[str]:
            return sorted({_slice_text(v) for v in table})
    else:
        values = np.asarray(column)
        if values.shape != (n,):
            raise MetricInputError(f"slices['{gate.field}'] has {values.size} values; gold has {n}.")
        if values.dtype.kind in "US":
            mask = values == gate.value
        elif values.dtype.kind == "O":
            mask = values == gate.value
            if not mask.any():  # non-string values (3, true): compare their text
                mask = np.array([_slice_text(v) == gate.value for v in values], dtype=bool)
        else:
            mask = np.array([_slice_text(v) for v in np.unique(values)], dtype=object)
            mask = np.isin(values, np.unique(values)[mask == gate.value])

        def known() -> list[str]:
            return sorted({_slice_text(v) for v in values.tolist()})

    if not mask.any() and strict:
        names = known()
        shown = ", ".join(repr(v) for v in names[:20]) + (" ..." if len(names) > 20 else "")
        raise GateError(
            f"Gate '{gate.text}': no item has {gate.field}={gate.value}."
            + _suggest(str(gate.value), names)
            + f" Known values: {shown}."
        )
    return np.asarray(mask, dtype=bool)


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=2, cutoff=0.5)
    return (" Did you mean " + " or ".join(f"'{c}'" for c in close) + "?") if close else ""


def check_labels(gates: Sequence[Gate], labels: Sequence[str], slices: Mapping[str, Any] | None) -> None:
    for g in gates:
        if g.label is not None and g.label not in labels:
            fields = ", ".join(repr(f) for f in sorted(slices or {})) or "none"
            raise GateError(
                f"Gate '{g.text}': unknown class '{g.label}'."
                + _suggest(g.label, labels)
                + f" Known classes: {', '.join(repr(x) for x in labels)};"
                f" slice fields: {fields}."
            )
