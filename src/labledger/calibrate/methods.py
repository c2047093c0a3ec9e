"""Calibration methods: what each one does to a task's probabilities and decisions.

Every method works on a task's columns (:class:`TaskArrays`): the probability of each label, keyed
by label *name*, the gold label, and the raw decision. A method's parameters name labels, never
positions, so a recipe applies to a file whose labels come in another order.

- ``threshold`` (binary): predict ``positive`` when ``P(positive) >= tau``, else the other label.
- ``positive_threshold``: the same decision for tasks made of many yes/no questions per item (seed
  001's ACOS: one review, ~20 candidate aspects); the item of each row is named by ``item_field``
  (default ``group``), and the default objective is the per-item F1 of the "yes" set.
- ``prior_multiplier``: ``q = p * w`` with ``w`` keyed by label, renormalised; decision = argmax.
- ``option_damping``: ``q = p * alpha`` on the options of one kind (a regex ``pattern`` on the label,
  or a row ``field``), ``p`` elsewhere, renormalised; decision = argmax.
- ``temperature``: probabilities ``softmax(z / T)`` with ``z`` the row's ``logits`` when every row
  has them, else ``log p`` (the same result up to rounding); the decision is kept as it was.
- ``em_prior_shift``: Saerens et al. (2002): the label priors of the evaluated items are estimated
  by EM from the predictions alone, and the probabilities re-weighted by ``target / source``;
  transductive (one item's calibrated prediction depends on the other items it is applied with).

Decisions take the first label of highest value (sorted label order), as the raw argmax does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from labledger.errors import CalibrationError
from labledger.inputs.results import ProbTask, TaskData, canonical_codes, defer_ids, deferred_ids

METHODS = ("threshold", "positive_threshold", "prior_multiplier", "option_damping", "temperature", "em_prior_shift")
#: One line per method, for help texts and reports.
DESCRIPTIONS = {
    "threshold": "binary: predict the positive label when P(positive) >= tau",
    "positive_threshold": "yes/no questions grouped into items: 'yes' when P(yes) >= tau",
    "prior_multiplier": "multiply each label's probability by its multiplier, renormalise, argmax",
    "option_damping": "multiply the probability of options of one kind by alpha, renormalise, argmax",
    "temperature": "probabilities softmax(z / T), z = logits (or log-probabilities); the decision is kept",
    "em_prior_shift": "label priors re-estimated by EM on the evaluated items (Saerens et al. 2002); transductive",
}
#: Parameters each method takes (validated in :mod:`labledger.calibrate.recipe`).
PARAMS: dict[str, tuple[str, ...]] = {
    "threshold": ("positive", "tau"),
    "positive_threshold": ("positive", "tau", "item_field"),
    "prior_multiplier": ("weights",),
    "option_damping": ("alpha", "pattern", "field"),
    "temperature": ("T",),
    "em_prior_shift": ("source_prior", "max_iter", "tol"),
}
#: The parameter a fit searches for (the others are given).
FITTED = {
    "threshold": "tau",
    "positive_threshold": "tau",
    "prior_multiplier": "weights",
    "option_damping": "alpha",
    "temperature": "T",
    "em_prior_shift": "source_prior",
}
EM_MAX_ITER = 1000
EM_TOL = 1e-8


@dataclass
class Step:
    """One calibration step: a method and its parameters (labels by name)."""

    method: str
    params: dict[str, Any]

    def describe(self) -> str:
        """``threshold (tau=0.46, positive=NOT_SUPPORTED)``."""
        parts = []
        for k in PARAMS[self.method]:
            if k not in self.params:
                continue
            v = self.params[k]
            if isinstance(v, Mapping):
                v = "{" + ", ".join(f"{a}: {_short(b)}" for a, b in v.items()) + "}"
            parts.append(f"{k}={_short(v)}")
        return f"{self.method} ({', '.join(parts)})" if parts else self.method


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


@dataclass
class Scores:
    """A task's predictions at some stage: probabilities ``p`` (n, K), decisions ``pred`` (n,).

    ``z`` holds log-space scores whose softmax is ``p`` when a step works in log space (the
    logits, or after a temperature); ``changed`` says whether ``p`` differs from the raw one.
    """

    p: np.ndarray
    pred: np.ndarray
    z: np.ndarray | None = None
    changed: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def take(self, idx: np.ndarray) -> Scores:
        return Scores(
            self.p[idx], self.pred[idx], None if self.z is None else self.z[idx], self.changed, dict(self.info)
        )

    def logspace(self) -> np.ndarray:
        if self.z is not None:
            return self.z
        with np.errstate(divide="ignore"):
            return np.log(self.p)


@dataclass
class TaskArrays:
    """One task's columns for calibration, plus what its steps select (damping masks, item codes)."""

    task: str
    kind: Literal["classification", "binary"]
    labels: tuple[str, ...]
    positive: str | None
    ids: np.ndarray
    lines: np.ndarray
    gold: np.ndarray
    probs: np.ndarray
    pred: np.ndarray
    group: np.ndarray | None = None
    logits: np.ndarray | None = None
    masks: dict[tuple, np.ndarray] = field(default_factory=dict)
    items: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.gold)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # ids still in Arrow (as the reader left them) become an object array on first use:
            # a report of the file a recipe was fitted on never reads them
            if name == "ids" and "_ids_arrow" in self.__dict__:
                ids = np.empty(len(self.__dict__["_ids_arrow"]), dtype=object)
                ids[:] = self.__dict__.pop("_ids_arrow").to_pylist()
                self.__dict__["ids"] = ids
                return ids
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _deferred(self, arrow: Any) -> TaskArrays:
        """This task with its ids kept as the Arrow strings ``arrow`` until first read (None: as is)."""
        if arrow is not None:
            self.__dict__.pop("ids", None)
            self.__dict__["_ids_arrow"] = arrow
        return self

    def take(self, idx: np.ndarray) -> TaskArrays:
        """The same task restricted to items ``idx`` (indices or a boolean mask)."""
        idx = np.flatnonzero(idx) if np.asarray(idx).dtype == bool else np.asarray(idx, dtype=np.int64)
        arrow = self.__dict__.get("_ids_arrow")
        out = replace(
            self,
            ids=self.ids[idx] if arrow is None else _NO_IDS,
            lines=self.lines[idx],
            gold=self.gold[idx],
            probs=self.probs[idx],
            pred=self.pred[idx],
            group=None if self.group is None else canonical_codes(self.group[idx]),
            logits=None if self.logits is None else self.logits[idx],
            masks={k: v[idx] for k, v in self.masks.items()},
            items={k: canonical_codes(v[idx]) for k, v in self.items.items()},
        )
        return out._deferred(None if arrow is None else arrow.take(idx))

    def scores(self) -> Scores:
        """The raw predictions (logits kept as the log-space scores when present)."""
        return Scores(self.probs, self.pred, self.logits, False)

    def label_index(self, label: str, where: str) -> int:
        try:
            return self.labels.index(label)
        except ValueError:
            raise CalibrationError(
                f"{where}: label {label!r} is not a label of task '{self.task}' ({', '.join(map(repr, self.labels))})"
            ) from None

    def task_data(self, scores: Scores | None = None) -> ProbTask:
        """A :class:`~labledger.inputs.results.ProbTask` for the metric registry (calibrated when ``scores``)."""
        p = self.probs if scores is None else scores.p
        pred = self.pred if scores is None else scores.pred
        score = None
        if self.positive is not None and len(self.labels) == 2 and self.positive in self.labels:
            score = p[:, self.labels.index(self.positive)]
        arrow = self.__dict__.get("_ids_arrow")
        out = ProbTask(
            task=self.task,
            kind=self.kind,
            ids=self.ids if arrow is None else _NO_IDS,
            lines=self.lines,
            labels=self.labels,
            gold_index=self.gold,
            pred_index=pred,
            probs=p,
            score=score,
            positive=self.positive,
            group=self.group,
        )
        if arrow is not None:
            defer_ids(out, arrow)
        return out


#: The ids of a task whose ids are deferred (replaced by the Arrow array at once).
_NO_IDS = np.zeros(0, dtype=object)


# ------------------------------------------------------------------------------------------------
# Building TaskArrays from TaskData


def field_values(td: TaskData, name: str) -> list:
    """Per-row values of ``name``: a slice field, else a top-level field of the rows."""
    if name in td.slice_columns:
        return td.slices[name].tolist()
    if name == "group" and td.group is not None:
        return td.group.tolist()
    if name in td.extras:
        return list(td.extras[name])
    known = sorted(set(td.slice_columns) | set(td.extras) | ({"group"} if td.group is not None else set()))
    raise CalibrationError(
        f"task '{td.task}' has no field '{name}' (slice fields and row fields: {', '.join(known) or 'none'})"
    )


def value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def codes_of(values: list, what: str, task: str) -> np.ndarray:
    """Integer codes of per-row values (rows without a value are an error naming ``what``)."""
    table: dict[str, int] = {}
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if v is None:
            raise CalibrationError(
                f"task '{task}': row {i + 1} of the task has no '{what}' (each row must name its item)"
            )
        out[i] = table.setdefault(value_text(v), len(table))
    return out


def _logits(td: ProbTask) -> np.ndarray | None:
    if "logits" not in td.extras:
        return None
    values = td.extras["logits"]
    out = np.full((td.n, len(td.labels)), -np.inf)
    index = {lab: j for j, lab in enumerate(td.labels)}
    missing = 0
    for i, row in enumerate(values):
        if not isinstance(row, Mapping):
            missing += 1
            continue
        for k, v in row.items():
            j = index.get(str(k))
            if j is None or v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise CalibrationError(
                    f"line {int(td.lines[i])}: field 'logits' must map labels to finite numbers; got {v!r} for {k!r}"
                )
            out[i, j] = v
    if missing == td.n:
        return None
    if missing:
        first = next(i for i, row in enumerate(values) if not isinstance(row, Mapping))
        raise CalibrationError(
            f"line {int(td.lines[first])}: task '{td.task}' has 'logits' on some rows but not "
            f"this one; a temperature needs them on every row or on none"
        )
    bad = np.isneginf(out) & (td.probs > 0)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise CalibrationError(
            f"line {int(td.lines[i])}: field 'logits' has no value for label "
            f"{td.labels[j]!r}, which has probability {td.probs[i, j]:g}"
        )
    return out


def damping_mask(td: ProbTask, pattern: str | None, fld: str | None) -> np.ndarray:
    """(n, K) True where an option is of the damped kind (see :func:`option_damping`)."""
    if pattern is None and fld is None:
        raise CalibrationError(
            "option_damping needs 'pattern' (a regex on the option label) or 'field' "
            "(a row field naming the options), or both"
        )
    try:
        rx = re.compile(pattern) if pattern is not None else None
    except re.error as exc:
        raise CalibrationError(
            f"option_damping: 'pattern' {pattern!r} is not a valid regular expression ({exc})"
        ) from None
    n, k = td.n, len(td.labels)
    if fld is None:
        search = rx.search if rx is not None else None  # (pattern and field both None raised above)
        cols = np.array([search is not None and bool(search(lab)) for lab in td.labels], dtype=np.bool_)
        return np.broadcast_to(cols, (n, k)).copy()
    values = field_values(td, fld)
    index = {lab: j for j, lab in enumerate(td.labels)}
    mask = np.zeros((n, k), dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            continue
        if isinstance(v, Mapping):
            for lab, text in v.items():
                j = index.get(str(lab))
                if j is None or text is None:
                    continue
                mask[i, j] = bool(rx.search(value_text(text))) if rx is not None else bool(text)
        elif isinstance(v, (list, tuple)) and rx is None:
            for lab in v:
                j = index.get(value_text(lab))
                if j is not None:
                    mask[i, j] = True
        else:
            what = "map option labels to text" if rx is not None else "list option labels (or map them to true/false)"
            raise CalibrationError(f"line {int(td.lines[i])}: field '{fld}' must {what} for option_damping; got {v!r}")
    return mask


def prob_task(td: TaskData) -> ProbTask:
    """``td`` as a task with probabilities; raises :class:`CalibrationError` for any other kind."""
    if not isinstance(td, ProbTask):
        raise CalibrationError(
            f"task '{td.task}' is a {td.kind} task; calibration needs probabilities "
            f"(a classification task with 'probs' or a binary one with 'score')"
        )
    return td


def task_arrays(td: TaskData, steps: list[Step] | list[tuple[str, dict]]) -> TaskArrays:
    """The columns ``steps`` need from ``td`` (logits for a temperature, masks, item codes)."""
    td = prob_task(td)
    arrow = deferred_ids(td)
    arr = TaskArrays(
        task=td.task,
        kind=td.kind,
        labels=td.labels,
        positive=td.positive,
        ids=td.ids if arrow is None else _NO_IDS,
        lines=td.lines,
        gold=td.gold_index,
        probs=td.probs,
        pred=td.pred_index,
        group=td.group,
    )._deferred(arrow)
    for step in steps:
        method, params = (step.method, step.params) if isinstance(step, Step) else step
        if method == "temperature" and arr.logits is None:
            arr.logits = _logits(td)
        elif method == "option_damping":
            key = (params.get("pattern"), params.get("field"))
            if key not in arr.masks:
                arr.masks[key] = damping_mask(td, *key)
        elif method == "positive_threshold":
            name = params.get("item_field") or "group"
            if name not in arr.items:
                if name == "group" and td.group is None:
                    raise CalibrationError(
                        f"task '{td.task}': positive_threshold groups questions into items by "
                        f"'group', and the rows have none; set item_field to the field that "
                        f"names each row's item"
                    )
                vals = td.group if name == "group" else codes_of(field_values(td, name), name, td.task)
                arr.items[name] = canonical_codes(np.asarray(vals, dtype=np.int64))
    return arr


# ------------------------------------------------------------------------------------------------
# Applying steps


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax (``-inf`` entries give 0)."""
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    return e / e.sum(axis=1, keepdims=True)


def _reweighted(p: np.ndarray, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q = p * factors
    pred = q.argmax(axis=1).astype(np.int64, copy=False)
    total = q.sum(axis=1, keepdims=True)
    if (total <= 0).any():
        i = int(np.flatnonzero(total[:, 0] <= 0)[0])
        raise CalibrationError(f"item {i + 1}: every option has probability 0 after re-weighting")
    q /= total  # (in place: the same quotients, one (n, K) array fewer)
    return q, pred


def weight_vector(weights: Mapping[str, float], arr: TaskArrays, where: str) -> np.ndarray:
    """Multipliers in the task's label order; every label must have one."""
    missing = [lab for lab in arr.labels if lab not in weights]
    if missing:
        raise CalibrationError(
            f"{where}: no multiplier for label(s) {', '.join(map(repr, missing))} of task "
            f"'{arr.task}' (labels: {', '.join(map(repr, arr.labels))})"
        )
    return np.array([float(weights[lab]) for lab in arr.labels])


def binary_pair(arr: TaskArrays, positive: str, where: str) -> tuple[int, int]:
    """(index of ``positive``, index of the other label) of a two-label task."""
    if len(arr.labels) != 2:
        raise CalibrationError(
            f"{where}: a threshold needs a task with two labels; task '{arr.task}' has "
            f"{len(arr.labels)} ({', '.join(map(repr, arr.labels))})"
        )
    j = arr.label_index(positive, where)
    return j, 1 - j


def em_priors(
    p: np.ndarray, source: np.ndarray, *, max_iter: int = EM_MAX_ITER, tol: float = EM_TOL
) -> tuple[np.ndarray, int, bool]:
    """Saerens et al. (2002): the priors of the items behind posteriors ``p`` (trained under
    ``source``), by EM. Returns ``(priors, iterations, converged)``.

    >>> p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]])
    >>> pi, _, ok = em_priors(p, np.array([0.5, 0.5]))
    >>> ok, bool(pi[0] > 0.6)
    (True, True)
    """
    pi = source.astype(np.float64).copy()
    if len(p) == 0:
        return pi, 0, True
    for it in range(1, max_iter + 1):
        q = p * (pi / source)
        q /= q.sum(axis=1, keepdims=True)
        new = q.mean(axis=0)
        if np.abs(new - pi).max() < tol:
            return new, it, True
        pi = new
    return pi, max_iter, False


def apply_step(step: Step, s: Scores, arr: TaskArrays, where: str = "step") -> Scores:
    """The predictions after ``step``; see the module docs for what each method does."""
    m, prm = step.method, step.params
    if m in ("threshold", "positive_threshold"):
        j, other = binary_pair(arr, prm["positive"], where)
        pred = np.where(s.p[:, j] >= prm["tau"], j, other).astype(np.int64)
        return Scores(s.p, pred, s.z, s.changed, dict(s.info))
    if m == "prior_multiplier":
        p, pred = _reweighted(s.p, weight_vector(prm["weights"], arr, where)[None, :])
        return Scores(p, pred, None, True, dict(s.info))
    if m == "option_damping":
        mask = arr.masks[(prm.get("pattern"), prm.get("field"))]
        p, pred = _reweighted(s.p, np.where(mask, float(prm["alpha"]), 1.0))
        return Scores(p, pred, None, True, dict(s.info))
    if m == "temperature":
        z = s.logspace() / float(prm["T"])
        return Scores(softmax(z), s.pred, z, True, dict(s.info))
    if m == "em_prior_shift":
        source = (
            np.array([float(prm["source_prior"][lab]) for lab in arr.labels])
            if all(lab in prm["source_prior"] for lab in arr.labels)
            else None
        )
        if source is None:
            missing = [lab for lab in arr.labels if lab not in prm["source_prior"]]
            raise CalibrationError(
                f"{where}: source_prior has no value for label(s) {', '.join(map(repr, missing))} of task '{arr.task}'"
            )
        pi, iters, ok = em_priors(
            s.p, source, max_iter=int(prm.get("max_iter", EM_MAX_ITER)), tol=float(prm.get("tol", EM_TOL))
        )
        p, pred = _reweighted(s.p, (pi / source)[None, :])
        info = dict(s.info)
        info["em"] = {
            "target_prior": dict(zip(arr.labels, pi.tolist())),
            "iterations": iters,
            "converged": ok,
            "n": len(p),
        }
        return Scores(p, pred, None, True, info)
    raise CalibrationError(f"{where}: unknown method '{m}'")


def apply_steps(steps: list[Step], s: Scores, arr: TaskArrays, where: str = "task") -> Scores:
    """The predictions after every step in order."""
    for i, step in enumerate(steps):
        s = apply_step(step, s, arr, f"{where} step {i + 1} ({step.method})" if len(steps) > 1 else where)
    return s


__all__ = [
    "DESCRIPTIONS",
    "FITTED",
    "METHODS",
    "PARAMS",
    "Scores",
    "Step",
    "TaskArrays",
    "apply_step",
    "apply_steps",
    "binary_pair",
    "codes_of",
    "damping_mask",
    "em_priors",
    "field_values",
    "softmax",
    "task_arrays",
    "value_text",
    "weight_vector",
]
