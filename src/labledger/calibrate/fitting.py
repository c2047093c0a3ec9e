"""``fit``: per-task recipes fitted on a split, on everything, or by cross-fitting, with provenance.

- ``fit_split="FIELD=VALUE"``: fitted on the items whose slice (or row) field has that value; the
  report of the same file then evaluates the other items (held out, the honest figure).
- ``crossfit=K``: the recipe's parameters are fitted on every item, and the items are also split
  into K folds (by ``group`` when rows have one, so that clusters never straddle folds; by item for
  ``positive_threshold``); each fold is calibrated by parameters fitted on the other K - 1 folds,
  and the pooled out-of-fold figure is recorded as ``values.crossfit``: the honest estimate.
- neither: fitted on every item; the recipe says so, and its report shows the cross-fitted figure
  beside the in-sample one, which is labelled optimistic.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from labledger.calibrate.methods import (
    METHODS,
    Scores,
    Step,
    TaskArrays,
    apply_steps,
    field_values,
    task_arrays,
    value_text,
)
from labledger.calibrate.recipe import Recipe, TaskRecipe, id_sketch, item_hashes
from labledger.calibrate.search import Objective, StepSpec, fit_step, resolve_objective
from labledger.errors import CalibrationError, RecordError, UnknownNameError
from labledger.inputs.records import finite_or_none
from labledger.inputs.results import TOLERANCE, ResultSet, TaskData, read_results, results_from_rows
from labledger.store.manifest import sha256_file

#: Methods whose grid is one list of values (the rest: prior_multiplier's LABEL=VALUES).
SCALAR_GRID = ("threshold", "positive_threshold", "option_damping", "temperature")


def load_results(
    results: Any, *, positive: Any = None, display: str | None = None, tolerance: float = TOLERANCE
) -> tuple[ResultSet, str, str | None]:
    """``(result set, how to name it, sha256 of the file or None)`` from a path, rows or a ResultSet."""
    if isinstance(results, ResultSet):
        return results, display or results.source, None
    if isinstance(results, (str, os.PathLike)):
        path = Path(results)
        name = display or str(results)
        with ThreadPoolExecutor(1) as pool:  # the file's sha256 while it is read (hashlib releases the GIL)
            digest = pool.submit(sha256_file, path)
            try:
                rs = read_results(path, positive=positive, display=name, tolerance=tolerance)
            except BaseException:
                _sha(digest, name)  # (a missing file: the same error as before)
                raise
            return rs, name, _sha(digest, name)
    rs = results_from_rows(results, positive=positive, tolerance=tolerance)
    return rs, display or rs.source, None


def _sha(digest: Future[Any], name: str) -> str:
    try:
        return str(digest.result()[0])
    except FileNotFoundError:
        raise RecordError("no such results file", source=name) from None


def parse_methods(method: str | Sequence[str]) -> list[str]:
    """``"temperature"``, ``"temperature,prior_multiplier"`` (a chain) or a list of names."""
    names = [m.strip() for m in (method.replace("+", ",").split(",") if isinstance(method, str) else method)]
    names = [m for m in names if m]
    if not names:
        raise CalibrationError("no calibration method given")
    for m in names:
        if m not in METHODS:
            raise UnknownNameError("calibration method", m, METHODS)
    return names


def assign_grids(methods: list[str], grid: Any) -> list[Any]:
    """One grid (or None) per step from ``grid``: None; a list aligned with a chain; or one spec
    (``LABEL=VALUES`` text or a dict for the prior_multiplier step, else the single step that
    takes a list of values)."""
    out: list[Any] = [None] * len(methods)
    if grid is None:
        return out
    if len(methods) > 1 and isinstance(grid, (list, tuple)) and len(grid) == len(methods):
        return list(grid)
    if len(methods) == 1:
        return [grid]
    labelled = isinstance(grid, Mapping) or (isinstance(grid, str) and "=" in grid)
    wanted = ("prior_multiplier",) if labelled else SCALAR_GRID
    steps = [i for i, m in enumerate(methods) if m in wanted]
    if len(steps) != 1:
        raise CalibrationError(
            f"grid {grid!r}: cannot tell which step of {'+'.join(methods)} it is for; "
            f"number it (N@SPEC on the command line, a list per step in Python)"
        )
    out[steps[0]] = grid
    return out


def grid_from_options(methods: list[str], options: Sequence[str]) -> list[Any]:
    """Grids per step from command-line ``--grid [N@]SPEC`` options (repeatable; ``LABEL=VALUES``
    for prior multipliers, several labels by repeating)."""
    out: list[Any] = [None] * len(methods)
    for opt in options:
        head, at, rest = opt.partition("@")
        if at and head.strip().isdigit():
            i = int(head) - 1
            if not 0 <= i < len(methods):
                raise CalibrationError(f"--grid {opt}: step {head} does not exist (the chain has {len(methods)})")
            spec = rest
        else:
            spec = opt
            labelled = "=" in spec
            cands = [j for j, m in enumerate(methods) if m in (("prior_multiplier",) if labelled else SCALAR_GRID)]
            if len(cands) != 1:
                raise CalibrationError(
                    f"--grid {opt}: no single step of {'+'.join(methods)} takes this grid; "
                    f"prefix the step number (e.g. --grid 2@{opt})"
                )
            i = cands[0]
        if methods[i] == "prior_multiplier":
            lab, eq, values = spec.partition("=")
            if not eq:
                raise CalibrationError(
                    f"--grid {opt}: a prior_multiplier grid is LABEL=VALUES (e.g. Neutral=0.5:2:0.05)"
                )
            out[i] = {**(out[i] or {}), lab.strip(): values.strip()}
        elif methods[i] == "em_prior_shift":
            raise CalibrationError(f"--grid {opt}: em_prior_shift has no grid (EM needs none)")
        else:
            if out[i] is not None:
                raise CalibrationError(f"--grid {opt}: step {i + 1} already has a grid ({out[i]})")
            out[i] = spec
    return out


def split_mask(td: TaskData, split: str) -> np.ndarray:
    """Items whose field ``FIELD`` (a slice field, else a row field) has value ``VALUE``."""
    fld, eq, value = split.partition("=")
    if not eq or not fld.strip():
        raise CalibrationError(f"fit split {split!r} must look like FIELD=VALUE (e.g. split=dev)")
    values = field_values(td, fld.strip())
    mask = np.fromiter(((v is not None and value_text(v) == value.strip()) for v in values), dtype=bool, count=td.n)
    if not mask.any():
        seen = sorted({value_text(v) for v in values if v is not None})
        raise CalibrationError(
            f"task '{td.task}': no item has {fld.strip()}={value.strip()} (values: "
            f"{', '.join(seen[:10]) or 'none'}{', ...' if len(seen) > 10 else ''})"
        )
    return mask


def fold_units(arr: TaskArrays, obj: Objective) -> tuple[np.ndarray, str]:
    """What folds are made of: items of positive_threshold, else groups (clusters), else rows."""
    if obj.mode == "items":
        return arr.items[str(obj.item_field)], f"item ('{obj.item_field}')"
    if arr.group is not None:
        return arr.group, "group"
    return np.arange(arr.n), "row"


def make_folds(units: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Fold of each row: the units (clusters) shuffled with ``seed`` and dealt round-robin."""
    n_units = int(units.max()) + 1 if len(units) else 0
    if k < 2:
        raise CalibrationError(f"crossfit needs K >= 2 folds; got {k}")
    if n_units < k:
        raise CalibrationError(f"crossfit with {k} folds needs at least {k} clusters or items; there are {n_units}")
    perm = np.random.default_rng(seed).permutation(n_units)
    fold_of_unit = np.empty(n_units, dtype=np.int64)
    fold_of_unit[perm] = np.arange(n_units) % k
    return fold_of_unit[units]


def step_specs(
    methods: list[str],
    grids: list[Any],
    arr: TaskArrays,
    *,
    positive: str | None,
    pattern: str | None,
    field: str | None,
    item_field: str | None,
    source_prior: Any,
) -> list[StepSpec]:
    specs = []
    for m, g in zip(methods, grids):
        given: dict[str, Any] = {}
        if m in ("threshold", "positive_threshold"):
            pos = positive or arr.positive or ("yes" if m == "positive_threshold" and "yes" in arr.labels else None)
            if pos is None:
                raise CalibrationError(
                    f"task '{arr.task}': {m} needs the positive label (positive=; --positive) "
                    f"among {', '.join(map(repr, arr.labels))}"
                )
            arr.label_index(pos, m)
            given["positive"] = pos
            if m == "positive_threshold":
                given["item_field"] = item_field or "group"
        elif m == "option_damping":
            if pattern is not None:
                given["pattern"] = pattern
            if field is not None:
                given["field"] = field
        elif m == "em_prior_shift" and isinstance(source_prior, Mapping):
            given["source_prior"] = {str(k): float(v) for k, v in source_prior.items()}
        specs.append(StepSpec(m, given, g, source_prior if isinstance(source_prior, str) else "gold"))
    return specs


def fit_chain(
    specs: list[StepSpec], arr: TaskArrays, obj: Objective, fold: np.ndarray | None, k: int
) -> tuple[list[list[Step]], list[str], list[str]]:
    """Steps fitted on every row (row 0: all items; row f + 1: outside fold f), grids, searches."""
    if len(specs) == 1:
        sf = fit_step(specs[0], arr.scores(), arr, obj, fold, k)
        return [[s] for s in sf.steps], [sf.grid], [sf.search]
    rows = [None] + ([fold != f for f in range(k)] if fold is not None else [])
    per_row, grids, search = [], [], []
    for r in rows:
        sub = arr if r is None else arr.take(r)
        s = sub.scores()
        chain = []
        for spec in specs:
            sf = fit_step(spec, s, sub, obj, None, 0)
            chain.append(sf.steps[0])
            s = apply_steps([sf.steps[0]], s, sub)
            if r is None:
                grids.append(sf.grid)
                search.append(sf.search)
        per_row.append(chain)
    return per_row, grids, search


def out_of_fold(per_row: list[list[Step]], arr: TaskArrays, fold: np.ndarray, k: int) -> Scores:
    """Each fold calibrated by the steps fitted without it, pooled (the honest predictions)."""
    p = np.empty_like(arr.probs)
    pred = np.empty_like(arr.pred)
    changed = False
    for f in range(k):
        idx = np.flatnonzero(fold == f)
        held = _applied_rows(arr, idx)
        st = apply_steps(per_row[f + 1], held.scores(), held)
        p[idx], pred[idx] = st.p, st.pred
        changed |= st.changed
    return Scores(p, pred, None, changed)


def _applied_rows(arr: TaskArrays, idx: np.ndarray) -> TaskArrays:
    """``arr.take(idx)`` of what applying a step reads (the scores and the damping masks): not the
    ids, lines, clusters or item codes, whose copies were most of an out-of-fold pass."""
    empty = np.zeros(0, dtype=np.int64)
    return replace(
        arr,
        ids=empty,
        lines=empty,
        gold=arr.gold[idx],
        probs=arr.probs[idx],
        pred=arr.pred[idx],
        group=None,
        logits=None if arr.logits is None else arr.logits[idx],
        masks={key: v[idx] for key, v in arr.masks.items()},
        items={},
    )


def crossfit_scores(
    steps: list[Step],
    arr: TaskArrays,
    obj: Objective,
    *,
    k: int,
    seed: int,
    grids: list[Any] | None = None,
    source_prior: str = "gold",
) -> tuple[Scores, str]:
    """Out-of-fold predictions for a recipe's steps refitted per fold on ``arr`` (its given
    parameters kept, its fitted one searched on ``grids``, default grids when None)."""
    from labledger.calibrate.methods import FITTED

    specs = []
    for i, st in enumerate(steps):
        given = {kk: v for kk, v in st.params.items() if kk != FITTED[st.method]}
        if st.method == "em_prior_shift":
            given = {kk: v for kk, v in given.items() if kk in ("max_iter", "tol")}
        grid = (grids or [None] * len(steps))[i] or None
        specs.append(StepSpec(st.method, given, grid, source_prior))
    units, folds_by = fold_units(arr, obj)
    fold = make_folds(units, k, seed)
    per_row, _, _ = fit_chain(specs, arr, obj, fold, k)
    return out_of_fold(per_row, arr, fold, k), folds_by


def fit_task(
    td: TaskData,
    methods: list[str],
    grids: list[Any],
    *,
    objective: str | None,
    positive: str | None,
    pattern: str | None,
    field: str | None,
    item_field: str | None,
    source_prior: Any,
    fit_split: str | None,
    crossfit: int | None,
    seed: int,
    source: str,
    sha256: str | None,
) -> TaskRecipe:
    """Fit one task's chain of methods; see :func:`fit`."""
    given = [(m, {"pattern": pattern, "field": field, "item_field": item_field or "group"}) for m in methods]
    arr_all = task_arrays(td, given)
    if fit_split is not None:
        arr = arr_all.take(split_mask(td, fit_split))
    else:
        arr = arr_all
    specs = step_specs(
        methods,
        grids,
        arr,
        positive=positive,
        pattern=pattern,
        field=field,
        item_field=item_field,
        source_prior=source_prior,
    )
    pt = next((s for s in specs if s.method == "positive_threshold"), None)
    if objective is not None and methods == ["temperature"]:
        raise CalibrationError(
            "a temperature is fitted by negative log-likelihood (log loss); objective= does not apply to it"
        )
    if objective is not None and methods == ["em_prior_shift"]:
        raise CalibrationError("em_prior_shift is not fitted to an objective (EM needs no labels); drop objective=")
    obj = resolve_objective(
        objective,
        arr,
        methods,
        positive=pt.given["positive"] if pt else None,
        item_field=pt.given["item_field"] if pt else None,
    )
    if obj.mode == "generic" and obj.metric.needs == "probs" and set(methods) <= {"threshold", "positive_threshold"}:
        raise CalibrationError(
            f"objective '{obj.key}' is computed from the probabilities, which a threshold does "
            f"not change; choose a decision metric (accuracy, f1, balanced_accuracy, ...)"
        )
    fold = folds_by = None
    if crossfit is not None:
        units, folds_by = fold_units(arr, obj)
        fold = make_folds(units, int(crossfit), seed)
    per_row, grid_texts, search = fit_chain(specs, arr, obj, fold, int(crossfit or 0))
    steps = per_row[0]
    values = {
        "raw": finite_or_none(obj.value(arr, arr.scores())),
        "in_sample": finite_or_none(obj.value(arr, apply_steps(steps, arr.scores(), arr))),
    }
    if fold is not None:
        values["crossfit"] = finite_or_none(obj.value(arr, out_of_fold(per_row, arr, fold, int(crossfit or 0))))
    gold_labels = np.asarray(arr.labels, dtype=object)[arr.gold]
    fit: dict[str, Any] = {
        "source": source,
        "split": fit_split or "all",
        "n": arr.n,
        "n_total": td.n,
        "labels": list(arr.labels),
        "objective_definition": obj.definition(),
        "grids": grid_texts,
        "search": search,
        "ids_sketch": id_sketch(item_hashes(td.task, arr.ids, gold_labels)),
    }
    if sha256 is not None:
        fit["sha256"] = sha256
    if arr_all.positive is not None:
        fit["positive"] = arr_all.positive
    if "temperature" in methods:
        fit["scale"] = "logits" if arr.logits is not None else "log-probabilities"
    if fold is not None:
        fit.update({"crossfit_k": int(crossfit or 0), "crossfit_seed": int(seed), "folds_by": folds_by})
    return TaskRecipe(steps, obj.key, fit, {k: v for k, v in values.items() if v is not None})


def fit(
    results: Any,
    *,
    method: str | Sequence[str],
    task: str | Sequence[str] | None = None,
    grid: Any = None,
    objective: str | None = None,
    positive: str | None = None,
    pattern: str | None = None,
    field: str | None = None,
    item_field: str | None = None,
    source_prior: Any = "gold",
    fit_split: str | None = None,
    crossfit: int | None = None,
    seed: int = 0,
    display: str | None = None,
    grids: Sequence[Any] | None = None,
) -> Recipe:
    """Fit a calibration recipe on ``results`` (a ``results.jsonl`` path, rows or a ResultSet).

    ``method``: one of :data:`~labledger.calibrate.methods.METHODS`, or a chain
    (``"temperature,prior_multiplier"``), fitted in order. ``task``: the task(s) to fit (default:
    the only task). ``grid``: the values searched (see :func:`assign_grids`; thresholds
    ``"0:1:0.01"``, alphas ``"0.02:2:0.02"``, multipliers ``{"Neutral": "0.5:2:0.05"}``, a
    temperature's bounds ``"0.05:20"``). ``objective``: a metric spec (default: the task's
    headline metric; per-item F1 for ``positive_threshold``; log loss for a temperature).
    ``positive``: the positive label of a threshold; ``pattern``/``field``: the options
    ``option_damping`` damps; ``item_field``: what groups ``positive_threshold`` rows into items;
    ``source_prior``: ``"gold"``, ``"mean_posterior"`` or ``{label: prior}`` for EM.
    ``fit_split="FIELD=VALUE"`` fits on those items only; ``crossfit=K`` also computes the
    out-of-fold figure (exclusive with ``fit_split``); ``seed`` shuffles the folds. ``grids``: one
    grid (or None) per step of the chain, instead of ``grid`` (see :func:`grid_from_options`).

    >>> rows = [{"id": i, "task": "t", "gold": "yes" if i % 3 == 0 else "no", "group": f"g{i // 4}",
    ...          "probs": {"yes": 0.3 + 0.4 * (i % 3 == 0), "no": 0.7 - 0.4 * (i % 3 == 0)}} for i in range(60)]
    >>> r = fit(rows, method="threshold", positive="yes", crossfit=5)
    >>> r.tasks["t"].steps[0].params["tau"], r.tasks["t"].values["crossfit"]
    (0.5, 1.0)
    """
    if fit_split is not None and crossfit is not None:
        raise CalibrationError(
            "fit_split and crossfit are exclusive: fit on a split and report on the rest, or cross-fit on everything"
        )
    methods = parse_methods(method)
    rs, source, sha = load_results(results, positive=positive, display=display)
    if task is None:
        if len(rs) != 1:
            raise CalibrationError(f"{source} has {len(rs)} tasks ({', '.join(rs)}); name the task(s) to fit")
        tasks = list(rs)
    else:
        tasks = [task] if isinstance(task, str) else list(task)
    if grids is not None:
        if grid is not None or len(grids) != len(methods):
            raise CalibrationError(f"grids= needs one entry per step ({len(methods)}), and no grid=")
        grids = list(grids)
    else:
        grids = assign_grids(methods, grid)
    out = {}
    for name in tasks:
        out[name] = fit_task(
            rs[name],
            methods,
            grids,
            objective=objective,
            positive=positive,
            pattern=pattern,
            field=field,
            item_field=item_field,
            source_prior=source_prior,
            fit_split=fit_split,
            crossfit=crossfit,
            seed=seed,
            source=source,
            sha256=sha,
        )
    return Recipe(out)


__all__ = [
    "assign_grids",
    "crossfit_scores",
    "fit",
    "fit_chain",
    "fit_task",
    "fold_units",
    "grid_from_options",
    "load_results",
    "make_folds",
    "out_of_fold",
    "parse_methods",
    "split_mask",
]
