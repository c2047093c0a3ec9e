"""``report``: raw against calibrated on the same items, with paired CIs, and whether it is honest.

For each task of the recipe the report decides which items to evaluate and what that means:

- the file the recipe was fitted on (same sha256), fitted on a split: the *other* items (held out);
- the same file, fitted on every item: every item, labelled "fitted on the evaluated items
  (optimistic)", with the cross-fitted figure beside it (the recipe's steps refitted on K - 1
  folds and applied to the held-out fold, pooled; the recipe's K, seed and grids), which the
  table shows as the honest number;
- another file: every item; a sketch of the fit items' (task, id, gold) hashes tells whether the
  fit items are among them (all: in-sample; some: partly), and then the cross-fitted figure is
  shown too;
- a hand-written recipe (no fit record): every item, provenance unknown, cross-fitted beside it.

Every metric comes from the registry on the same items raw, calibrated and cross-fitted, resampled
together (paired bootstrap, by cluster when rows have a ``group``): value CIs, differences with
their CIs and percentile-bootstrap p-values. Also ECE with equal-width and equal-mass bins, Brier
and log loss before and after, and reliability-diagram bins (top-label confidence, equal width).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from labledger.analysis.intervals import resamples_for, value_interval
from labledger.analysis.tasks import HEADLINE, metric_seed
from labledger.analysis.threads import chunk_map, one_blas_thread, pool_initializer
from labledger.calibrate.applying import check_tasks, reading_positive
from labledger.calibrate.ece_draws import METHOD as ECE_METHOD
from labledger.calibrate.ece_draws import applies as ece_applies
from labledger.calibrate.ece_draws import joint_ece_draws
from labledger.calibrate.fitting import crossfit_scores, load_results, split_mask
from labledger.calibrate.methods import Scores, TaskArrays, apply_steps, task_arrays
from labledger.calibrate.recipe import Recipe, TaskRecipe, item_hashes, load_recipe, sketch_overlap
from labledger.calibrate.search import Objective, objective_from_key, resolve_objective
from labledger.errors import CalibrationError, UnknownNameError
from labledger.inputs.records import finite_or_none
from labledger.metrics.analytic import analytic_interval, normal_draws, paired_analytic, use_analytic
from labledger.metrics.prepared import Prepared
from labledger.metrics.resample import draws_p_value, percentile_interval, resample_values, rng_for
from labledger.schema import SCHEMA_VERSION, CalibrationDoc, MetricId, decode, format_p
from labledger.schema.documents import CalibrationValue
from labledger.schema.result import DocumentResult
from labledger.schema.values import ci_label

OPTIMISTIC = "fitted on the evaluated items (optimistic)"
HONEST = "cross-fitted (honest)"
HELD_OUT = "held out"
VARIANTS = ("raw", "calibrated", "cross-fitted")


class CalibrationReport(DocumentResult[CalibrationDoc]):
    """The result of :func:`report`: a typed :class:`~labledger.schema.CalibrationDoc`, Markdown, accessors."""

    doc_type = CalibrationDoc

    def value(self, task: str, metric: str, variant: str = "calibrated") -> float | None:
        """The value of ``metric`` (a key, a spec or a bare name) for ``variant`` (raw, calibrated, cross-fitted)."""
        if task not in self.doc.tasks:
            raise UnknownNameError("task of the calibration report", task, list(self.doc.tasks))
        variants = (self.doc.tasks[task].slices or {}).get("variant", {})
        if variant not in variants:
            raise UnknownNameError(f"variant of task '{task}'", variant, list(variants))
        return variant_value(variants[variant].metrics, task, metric).value

    def to_markdown(self) -> str:
        return markdown(self.doc)

    def __repr__(self) -> str:
        return f"CalibrationReport({self.doc.source!r}, recipe {self.doc.recipe_id})"


def variant_value(entries: list[CalibrationValue], task: str, metric: str | MetricId) -> CalibrationValue:
    """The entry of ``metric`` among one variant's values: by key, then by identity (``ece`` needs
    its strategy when both ECEs are there). Raises :class:`UnknownNameError` listing the keys."""
    text = metric.key if isinstance(metric, MetricId) else metric
    found = [e for e in entries if e.key == text]
    if not found:
        want = MetricId.parse(metric)
        found = [e for e in entries if e.id == want] or [e for e in entries if e.id.covers(want)]
    if len(found) != 1:
        raise UnknownNameError(f"metric of task '{task}'", text, [e.key for e in entries])
    return found[0]


# ------------------------------------------------------------------------------------------------
# Which items, and how honest


def _provenance(td, t: TaskRecipe, sha: str | None, source: str) -> dict[str, Any]:
    fit = t.fit
    mask = np.ones(td.n, dtype=bool)
    if not fit:
        return {
            "mask": mask,
            "in_sample": "unknown",
            "fitted_on": "unknown (hand-written recipe, no fit record)",
            "status": "provenance unknown: if these parameters were chosen on these items, the calibrated "
            "figure is optimistic",
        }
    split = fit.get("split", "all")
    fitted_on = f"{fit.get('source', '?')} ({split}, n={fit.get('n', '?')})"
    left_out = ""
    if split != "all":
        try:
            in_split = split_mask(td, split)
        except CalibrationError:
            in_split = None  # this file has no such field (or no such items): nothing to leave out
        if in_split is not None:
            mask = ~in_split
            if not mask.any():
                raise CalibrationError(
                    f"task '{td.task}': every item of {source} has {split}, the split the "
                    f"recipe was fitted on; nothing is held out to report on"
                )
            left_out = f"; the {int(in_split.sum()):,} items with {split} are left out"
    if sha is not None and fit.get("sha256") == sha:
        if split != "all":
            return {
                "mask": mask,
                "in_sample": "no",
                "fitted_on": fitted_on,
                "status": f"{HELD_OUT} (fitted on {split} of this file, reported on the other items)",
            }
        return {"mask": mask, "in_sample": "yes", "fitted_on": fitted_on, "status": OPTIMISTIC}
    sketch = fit.get("ids_sketch")
    if not sketch:
        return {
            "mask": mask,
            "in_sample": "unknown",
            "fitted_on": fitted_on,
            "status": f"fit items unknown (no id sketch in the recipe){left_out}",
        }
    gold = np.asarray(td.labels, dtype=object)[td.gold_index[mask]]
    hits, size = sketch_overlap(sketch, item_hashes(td.task, td.ids[mask], gold))
    if hits == 0:
        return {
            "mask": mask,
            "in_sample": "no",
            "fitted_on": fitted_on,
            "status": f"{HELD_OUT} (none of a {size}-item sample of the fit items is among the evaluated "
            f"items{left_out})",
        }
    if hits == size:
        return {
            "mask": mask,
            "in_sample": "yes",
            "fitted_on": fitted_on,
            "status": f"{OPTIMISTIC}: all {size} sampled fit items are among them{left_out}",
        }
    return {
        "mask": mask,
        "in_sample": "partly",
        "fitted_on": fitted_on,
        "status": f"partly fitted on the evaluated items (optimistic): {hits} of {size} sampled fit items "
        f"(~{hits / size:.0%}) are among them{left_out}",
    }


# ------------------------------------------------------------------------------------------------
# Metrics


def _metric_specs(head: Objective, arr: TaskArrays, bins: int) -> list[str]:
    specs = [head.key]
    for s in (
        "accuracy",
        "log_loss",
        "brier",
        f"ece:n_bins={bins},strategy=uniform",
        f"ece:n_bins={bins},strategy=quantile",
    ):
        specs.append(s)
    return specs


def reliability(arr: TaskArrays, s: Scores, bins: int) -> list[dict[str, Any]]:
    """Equal-width bins of top-label confidence: ``low, high, count, confidence, accuracy``."""
    conf = s.p[np.arange(arr.n), s.pred]
    correct = (s.pred == arr.gold).astype(np.float64)
    b = np.minimum((conf * bins).astype(np.int64), bins - 1)
    count = np.bincount(b, minlength=bins)
    sconf = np.bincount(b, weights=conf, minlength=bins)
    sacc = np.bincount(b, weights=correct, minlength=bins)
    out = []
    for i in range(bins):
        c = int(count[i])
        out.append(
            {
                "low": i / bins,
                "high": (i + 1) / bins,
                "count": c,
                "confidence": float(sconf[i] / c) if c else None,
                "accuracy": float(sacc[i] / c) if c else None,
            }
        )
    return out


def _display(obj: Objective) -> str:
    """The name a metric is shown under (the two ECEs apart)."""
    if obj.metric.name == "ece":
        return f"ece ({obj.params['n_bins']} equal-{'width' if obj.params['strategy'] == 'uniform' else 'mass'} bins)"
    return obj.metric.name


def _same_scores(a: Scores, b: Scores) -> bool:
    """Whether two variants predict and score every item alike (then every metric of them is equal)."""
    return a is b or (np.array_equal(a.pred, b.pred) and np.array_equal(a.p, b.p))


def _prepared_value(obj: Objective, arr: TaskArrays, scores: Scores) -> Prepared:
    """``obj`` prepared on one variant, its value computed (and kept by the prepared metric)."""
    prep = obj.prepared(arr, scores)
    prep.value()
    return prep


def _objectives(specs: list[str], arr: TaskArrays, head: Objective, steps) -> list[Objective]:
    """The report's metrics, each once (the headline is often one of the others)."""
    out: list[Objective] = []
    for spec in specs:
        obj = (
            head
            if spec == head.key
            else resolve_objective(
                spec, arr, [s.method for s in steps], positive=head.positive, item_field=head.item_field
            )
        )
        if obj.key not in {o.key for o in out}:
            out.append(obj)
    return out


def _firsts(variants: dict[str, Scores]) -> dict[str, str]:
    """Each variant's first variant that scores every item alike (itself when none before it does):
    compared once for every metric (cross-fitted often equals calibrated at large n: prepared once)."""
    names = list(variants)
    return {v: next(u for u in names if _same_scores(variants[u], variants[v])) for v in names}


def _metric_entries(
    task: str,
    arr: TaskArrays,
    names: list[str],
    objs: list[Objective],
    preps: dict[str, list[Prepared]],
    head: Objective,
    pool: ThreadPoolExecutor,
    *,
    ci: float,
    resamples: int,
    seed: int,
) -> tuple[dict, list[dict], dict]:
    """Per-variant entries, difference entries and the headline's difference draws, from the prepared metrics (``preps[key]``: one per variant of ``names``), the
    metrics' intervals side by side in ``pool`` (each has its own generator: the same draws either way)."""
    per_variant: dict[str, list[dict]] = {v: [] for v in names}
    diffs: list[dict] = []
    head_draws: dict[str, np.ndarray] = {}
    one = partial(_one_metric, task, arr, names, head, ci=ci, resamples=resamples, seed=seed)
    for rows, drows, draws in pool.map(one, objs, [preps[o.key] for o in objs]):
        for v in names:
            per_variant[v].append(rows[v])
        diffs += drows
        head_draws.update(draws)
    return per_variant, diffs, head_draws


def _one_metric(
    task: str,
    arr: TaskArrays,
    names: list[str],
    head: Objective,
    obj: Objective,
    preps: list[Prepared],
    *,
    ci: float,
    resamples: int,
    seed: int,
) -> tuple[dict[str, dict], list[dict], dict[str, np.ndarray]]:
    """One metric's entry for each variant, its differences from raw, and (the headline) their draws."""
    per_variant: dict[str, dict] = {}
    diffs: list[dict] = []
    head_draws: dict[str, np.ndarray] = {}
    values = [float(p.value()) for p in preps]
    groups = None if obj.mode == "items" else arr.group
    draws = None
    rng = rng_for(metric_seed(seed, task, obj.key))
    analytic = bool(resamples and preps[0].n and obj.mode != "items" and all(use_analytic(p, groups) for p in preps))
    if analytic:  # joint normal draws (the suite mean's), intervals and tests from the analytic forms
        draws = normal_draws(preps, resamples, rng, groups)
        analytic = draws is not None
    used = resamples
    binned = bool(resamples and preps[0].n and draws is None and obj.mode != "items" and ece_applies(preps, groups))
    if binned:  # ECEs of the variants: their bins' sums by their joint normal law
        draws = joint_ece_draws(preps, resamples, rng)
    elif resamples and preps[0].n and draws is None:
        used = resamples_for(preps[0], resamples, groups) if obj.mode != "items" else resamples
        draws = resample_values(preps, used, rng, groups, run=chunk_map)
    unit = (
        "items (rows grouped by '" + str(obj.item_field) + "')"
        if obj.mode == "items"
        else ("clusters" if groups is not None else "items")
    )
    shape = f" ({ECE_METHOD})" if binned else ""
    for i, v in enumerate(names):
        lo = hi = None
        how = None
        if draws is not None and i == 0 and obj.mode != "items":
            # the raw value's CI is the evaluation's (same procedure and seed as ``evaluate``),
            # so a page showing both shows one interval for one number
            iv, _, _ = value_interval(
                preps[0], ci=ci, resamples=resamples, seed=metric_seed(seed, task, "", obj.key), groups=groups
            )
            if isinstance(iv, dict):  # a table metric: not a headline or probability metric of the report
                raise CalibrationError(f"task '{task}': metric {obj.key} has no single value")
            lo, hi, how = iv.low, iv.high, iv.method
        elif analytic:
            iv = analytic_interval(preps[i], ci=ci, groups=groups)
            lo, hi, how = iv.low, iv.high, iv.method
        elif draws is not None:
            lo, hi, _ = percentile_interval(draws[i], ci)
            how = f"percentile bootstrap over {unit}{shape}"
        per_variant[v] = {
            "metric": _display(obj),
            "key": obj.key,
            "params": dict(obj.params),
            "definition": obj.definition(),
            "higher_is_better": obj.higher_is_better,
            "value": finite_or_none(values[i]),
            "ci_low": finite_or_none(lo),
            "ci_high": finite_or_none(hi),
            "ci": ci,
            "resamples": 0 if analytic else used,
            "n": int(preps[i].n_used),
            "method": how,
        }
        if i == 0:
            continue
        diff = values[i] - values[0]
        lo = hi = p = None
        method = f"paired percentile bootstrap over {unit}{shape}; p-value: percentile bootstrap, two-sided"
        if draws is not None:
            d = draws[i] - draws[0]
            if analytic:
                res = paired_analytic(preps[i], preps[0], ci=ci, groups=groups)
                lo, hi, p, method = res.low, res.high, res.p_value, res.method
            else:
                lo, hi, _ = percentile_interval(d, ci)
                p = draws_p_value(d, diff)
            if obj.key == head.key:
                head_draws[v] = d
        diffs.append(
            {
                "metric": f"{_display(obj)} Δ ({v} − raw)",
                "key": f"{obj.key} Δ {v}",
                "base_metric": obj.key,
                "variant": v,
                "params": dict(obj.params),
                "definition": f"{v} minus raw on the same {arr.n:,} rows: {obj.definition()}",
                "higher_is_better": obj.higher_is_better,
                "raw": finite_or_none(values[0]),
                "calibrated": finite_or_none(values[i]),
                "value": finite_or_none(diff),
                "ci_low": finite_or_none(lo),
                "ci_high": finite_or_none(hi),
                "p_value": p,
                "ci": ci,
                "resamples": 0 if analytic else used,
                "n": int(preps[i].n_used),
                "method": method,
            }
        )
    return per_variant, diffs, head_draws


# ------------------------------------------------------------------------------------------------
# report


@one_blas_thread()  # the same draws on every machine, no idle BLAS threads spinning
def report(
    results: Any,
    recipe: Recipe | str | Any,
    *,
    task: str | list[str] | None = None,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
    bins: int = 15,
    crossfit: int = 5,
    display: str | None = None,
) -> CalibrationReport:
    """Raw vs calibrated for every task of ``recipe`` on ``results`` (path, rows or ResultSet).

    ``bins``: ECE bins (equal-width and equal-mass) and reliability bins; ``crossfit``: folds of
    the cross-fitted figure when the recipe does not record its own.

    >>> rows = [{"id": i, "task": "t", "gold": "yes" if i % 3 == 0 else "no", "split": "dev" if i < 30 else "test",
    ...          "probs": {"yes": 0.35 + 0.3 * (i % 3 == 0), "no": 0.65 - 0.3 * (i % 3 == 0)}} for i in range(60)]
    >>> from labledger.calibrate import fit
    >>> rec = fit(rows, method="threshold", positive="yes", fit_split="split=dev")
    >>> rep = report(rows, rec, resamples=0)
    >>> rep.document["tasks"]["t"]["in_sample"], rep.value("t", "accuracy", "calibrated")
    ('no', 1.0)
    """
    recipe = load_recipe(recipe)
    rs, source, sha = load_results(results, positive=reading_positive(recipe), display=display)
    check_tasks(rs, recipe, keep_other_tasks=True)
    names = list(recipe.tasks) if task is None else ([task] if isinstance(task, str) else list(task))
    for name in names:
        if name not in recipe.tasks:
            raise CalibrationError(
                f"recipe {recipe.id} does not calibrate task '{name}' (it has {', '.join(map(repr, recipe.tasks))})"
            )
    doc: dict[str, Any] = {
        "kind": "calibration",
        "schema_version": SCHEMA_VERSION,
        "source": source,
        "sha256": sha,
        "recipe_id": recipe.id,
        "ci": ci,
        "resamples": resamples,
        "seed": seed,
        "bins": bins,
        "tasks": {},
        "table": [],
        "raw": {},
        "calibrated": {},
    }
    heads: dict[str, dict[str, Any]] = {}
    for name in names:
        body, head_info = _task_report(
            rs[name],
            recipe.tasks[name],
            sha=sha,
            source=source,
            ci=ci,
            resamples=resamples,
            seed=seed,
            bins=bins,
            crossfit=crossfit,
        )
        doc["tasks"][name] = body
        heads[name] = head_info
    doc["n"] = sum(b["n"] for b in doc["tasks"].values())
    doc["mean"] = _mean(heads, ci)
    _flat_and_table(doc, heads)
    doc["recipe"] = recipe.to_dict()
    doc["definitions"] = {
        "raw": "the predictions as stored (argmax of probs; score >= 0.5 for a binary task)",
        "calibrated": "the recipe applied to the evaluated items",
        "cross-fitted": "the recipe's steps refitted on K - 1 folds and applied to the held-out fold, pooled "
        "(folds by group when rows have one): the honest estimate when the recipe was fitted on "
        "the evaluated items",
        "ece (uniform)": f"expected calibration error over {bins} equal-width confidence bins",
        "ece (quantile)": f"expected calibration error over {bins} equal-mass confidence bins",
        "reliability": f"{bins} equal-width bins of top-label confidence: mean confidence, accuracy and count",
    }
    return CalibrationReport(decode(doc, type=CalibrationDoc, source=source))


def _task_report(td, t: TaskRecipe, *, sha, source, ci, resamples, seed, bins, crossfit):
    prov = _provenance(td, t, sha, source)
    arr = task_arrays(td, t.steps)
    if arr.group is not None or not prov["mask"].all():  # (take renumbers clusters)
        arr = arr.take(prov["mask"])
    key = t.objective
    if key is None:
        key = (
            "set_f1"
            if "positive_threshold" in t.methods
            else ("log_loss" if t.methods == ["temperature"] else HEADLINE[arr.kind])
        )
    head = objective_from_key(key, arr, t.steps)
    raw = arr.scores()
    variants = {"raw": raw, "calibrated": apply_steps(t.steps, raw, arr, where=f"task '{td.task}'")}
    objs = _objectives(_metric_specs(head, arr, bins), arr, head, t.steps)
    cross = None
    with ThreadPoolExecutor(2, initializer=pool_initializer()) as pool:
        # the cross-fit (K refits) in one thread while the other prepares the raw and calibrated
        # metrics (their sorts; numpy releases the GIL), then the metrics' intervals side by side
        refit = None
        if prov["in_sample"] != "no":
            fit = t.fit or {}
            k = int(fit.get("crossfit_k", crossfit))
            kseed = int(fit.get("crossfit_seed", seed))
            grids = [None if (g or "").startswith("default") or not g else g for g in fit.get("grids", [])] or None
            refit = pool.submit(crossfit_scores, t.steps, arr, head, k=k, seed=kseed, grids=grids)
        first = _firsts(variants)
        jobs = {
            (o.key, v): pool.submit(_prepared_value, o, arr, variants[v])
            for v in dict.fromkeys(first.values())
            for o in objs
        }
        if refit is not None:
            try:
                variants["cross-fitted"], folds_by = refit.result()
                cross = {"k": k, "seed": kseed, "folds_by": folds_by}
            except CalibrationError as exc:
                cross = {"k": k, "error": f"not cross-fitted: {exc}"}
            if "cross-fitted" in variants:
                first = _firsts(variants)
                if first["cross-fitted"] == "cross-fitted":
                    jobs.update(
                        {
                            (o.key, "cross-fitted"): pool.submit(_prepared_value, o, arr, variants["cross-fitted"])
                            for o in objs
                        }
                    )
        preps = {o.key: [jobs[o.key, first[v]].result() for v in variants] for o in objs}
        per_variant, diffs, head_draws = _metric_entries(
            td.task, arr, list(variants), objs, preps, head, pool, ci=ci, resamples=resamples, seed=seed
        )
    honest = "cross-fitted" if "cross-fitted" in variants else "calibrated"
    body: dict[str, Any] = {
        "method": t.method,
        "steps": t.describe(),
        "transductive": t.transductive,
        "fitted_on": prov["fitted_on"],
        "in_sample": prov["in_sample"],
        "status": prov["status"],
        "n": arr.n,
        "clusters": None if arr.group is None else int(arr.group.max()) + 1 if arr.n else 0,
        "headline": head.key,
        "honest": honest,
        "metrics": diffs,
        "slices": {"variant": {v: {"n": arr.n, "metrics": per_variant[v]} for v in variants}},
        "reliability": {
            "bins": reliability(arr, variants["calibrated"], bins),
            "strategy": "uniform",
            "raw_bins": reliability(arr, raw, bins),
            "note": f"top-label confidence in {bins} equal-width bins: 'bins' calibrated, 'raw_bins' raw"
            + (", 'cross_fitted_bins' cross-fitted" if "cross-fitted" in variants else ""),
        },
    }
    if "cross-fitted" in variants:
        body["reliability"]["cross_fitted_bins"] = (
            [dict(b) for b in body["reliability"][{"calibrated": "bins", "raw": "raw_bins"}[same]]]
            if (same := first.get("cross-fitted")) in ("calibrated", "raw")
            else reliability(arr, variants["cross-fitted"], bins)
        )  # (the variant it scores every item alike: its bins, not counted again)
    if t.transductive:
        body["transductive_note"] = (
            "em_prior_shift re-estimates the label priors on the evaluated items "
            "(label-free): each item's calibrated prediction depends on the others"
        )
        body["em"] = variants["calibrated"].info.get("em")
    if cross is not None:
        body["crossfit"] = cross
    head_info = {
        "key": head.key,
        "higher": head.higher_is_better,
        "status": prov["status"],
        "in_sample": prov["in_sample"],
        "honest": honest,
        "draws": head_draws,
        "values": {v: next(e["value"] for e in per_variant[v] if e["key"] == head.key) for v in variants},
        "diffs": {e["variant"]: e for e in diffs if e["base_metric"] == head.key},
        "method": t.describe(),
        "cross": cross,
        "fitted_on": prov["fitted_on"],
        "n": arr.n,
        "others": {v: {e["metric"]: e["value"] for e in per_variant[v] if e["key"] != head.key} for v in variants},
    }
    return body, head_info


def _mean(heads: dict[str, dict[str, Any]], ci: float) -> dict[str, Any] | None:
    used = {t: h for t, h in heads.items() if h["higher"] and all(x is not None for x in h["values"].values())}
    if not used:
        return None
    out: dict[str, Any] = {
        "tasks": sorted(used),
        "excluded": sorted(set(heads) - set(used)),
        "definition": "unweighted mean over tasks of each task's headline metric; the honest "
        "figure is cross-fitted where a task was fitted on its evaluated items; "
        "CI from the mean of independent per-task paired bootstrap draws "
        "(lower-is-better headlines are left out)",
    }
    raw = float(np.mean([h["values"]["raw"] for h in used.values()]))
    for name, pick in (("honest", lambda h: h["honest"]), ("calibrated", lambda h: "calibrated")):
        vals = [h["values"][pick(h)] for h in used.values()]
        draws = [h["draws"].get(pick(h)) for h in used.values()]
        lo = hi = None
        if all(d is not None for d in draws) and draws and len({len(d) for d in draws}) == 1:
            lo, hi, _ = percentile_interval(np.mean(np.stack(draws), axis=0), ci)
        out[name] = {
            "raw": raw,
            "value": float(np.mean(vals)),
            "diff": float(np.mean(vals)) - raw,
            "ci_low": finite_or_none(lo),
            "ci_high": finite_or_none(hi),
        }
    out["any_in_sample"] = any(h["in_sample"] != "no" for h in used.values())
    return out


def _label(h: dict[str, Any], variant: str) -> str:
    if variant == "cross-fitted":
        c = h["cross"] or {}
        return f"{HONEST}, {c.get('k')} folds by {c.get('folds_by')}"
    return {"no": HELD_OUT, "yes": OPTIMISTIC, "partly": f"partly {OPTIMISTIC}", "unknown": "provenance unknown"}[
        h["in_sample"]
    ]


def _flat_and_table(doc: dict[str, Any], heads: dict[str, dict[str, Any]]) -> None:
    for task, h in heads.items():
        for variant in [v for v in ("calibrated", "cross-fitted") if v in h["values"]]:
            e = h["diffs"].get(variant, {})
            row = {
                "task": task,
                "method": h["method"],
                "metric": h["key"],
                "variant": variant,
                "fitted": _label(h, variant),
                "raw": h["values"]["raw"],
                "calibrated": h["values"][variant],
                "diff": e.get("value"),
                "ci_low": e.get("ci_low"),
                "ci_high": e.get("ci_high"),
                "p_value": e.get("p_value"),
                "n": e.get("n", h["n"]),
                "honest": variant == h["honest"],
            }
            doc["table"].append(row)
            tag = (
                "honest"
                if variant == h["honest"] and variant == "cross-fitted"
                else (
                    "optimistic"
                    if variant == "calibrated" and h["in_sample"] in ("yes", "partly")
                    else "held out"
                    if variant == "calibrated" and h["in_sample"] == "no"
                    else "provenance unknown"
                )
            )
            k = f"{task} · {h['key']} ({variant}, {tag})"
            doc["raw"][k] = h["values"]["raw"]
            doc["calibrated"][k] = h["values"][variant]
        honest = h["honest"]
        tags = {
            "yes": "cross-fitted" if honest == "cross-fitted" else "optimistic",
            "partly": "cross-fitted" if honest == "cross-fitted" else "optimistic",
            "no": "held out",
            "unknown": "cross-fitted" if honest == "cross-fitted" else "provenance unknown",
        }
        for name, raw_value in h["others"]["raw"].items():
            k = f"{task} · {name} ({tags[h['in_sample']]})"
            doc["raw"][k] = raw_value
            doc["calibrated"][k] = h["others"][honest][name]
    m = doc.get("mean")
    if m:
        doc["raw"]["mean of headlines (honest)"] = m["honest"]["raw"]
        doc["calibrated"]["mean of headlines (honest)"] = m["honest"]["value"]


# ------------------------------------------------------------------------------------------------
# Markdown


def _f(v: Any, signed: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _ci(lo: Any, hi: Any) -> str:
    return "–" if lo is None or hi is None else f"[{lo:+.4f}, {hi:+.4f}]"


def markdown(document: CalibrationDoc | dict[str, Any]) -> str:
    """The report as Markdown: the raw-vs-calibrated table, then the probability metrics."""
    doc = document if isinstance(document, CalibrationDoc) else decode(document, type=CalibrationDoc)
    level = ci_label(doc.ci)
    out = [
        f"# Calibration: {doc.source}",
        "",
        f"Recipe `{doc.recipe_id}`. Paired {level}s from {doc.resamples:,} bootstrap resamples "
        f"(seed {doc.seed}; clusters when rows have a group). Δ = calibrated − raw on the same items.",
        "",
        f"| task | method | metric | raw | calibrated | Δ | {level} of Δ | p | n | fitted |",
        "|---|---|---|---:|---:|---:|---|---:|---:|---|",
    ]
    shown = set()
    for r in doc.table:
        key = MetricId.parse(r.metric).short
        name = f"**{key}**" if r.honest else key
        task, method = (r.task, r.method) if r.task not in shown else ("", "")
        shown.add(r.task)
        out.append(
            f"| {task} | {method} | {name} | {_f(r.raw)} | {_f(r.calibrated)} | "
            f"{_f(r.diff, True)} | {_ci(r.ci_low, r.ci_high)} | {format_p(r.p_value)} | {r.n:,} | {r.fitted} |"
        )
    m = doc.mean
    if m and len(doc.tasks) > 1:
        h = m["honest"]
        out.append(
            f"| **mean** ({len(m['tasks'])} tasks) | | headline (honest) | {_f(h['raw'])} | {_f(h['value'])} | "
            f"{_f(h['diff'], True)} | {_ci(h['ci_low'], h['ci_high'])} | – | | |"
        )
        if m["any_in_sample"]:
            c = m["calibrated"]
            out.append(
                f"| mean ({len(m['tasks'])} tasks) | | headline (as fitted, optimistic where in-sample) | "
                f"{_f(c['raw'])} | {_f(c['value'])} | {_f(c['diff'], True)} | {_ci(c['ci_low'], c['ci_high'])} "
                f"| – | | |"
            )
    out += [
        "",
        "Bold: the honest figure of each task (held out, or cross-fitted when the recipe was fitted on the "
        "evaluated items).",
        "",
        f"## Probabilities (ECE over {doc.bins} equal-width and {doc.bins} equal-mass bins)",
        "",
        "| task | figure | log loss | Brier | ECE (equal-width) | ECE (equal-mass) |",
        "|---|---|---|---|---|---|",
    ]
    for task, body in doc.tasks.items():
        variants = (body.slices or {}).get("variant", {})
        for v, vbody in variants.items():
            ids = [(e.id, e.value) for e in vbody.metrics]

            def get(name: str, strategy: str | None = None, ids: list[tuple[MetricId, float | None]] = ids) -> str:
                for mid, x in ids:
                    if mid.name == name and (strategy is None or mid.param_dict.get("strategy") == strategy):
                        return _f(x)
                return "–"

            out.append(
                f"| {task} | {v} | {get('log_loss')} | {get('brier')} | {get('ece', 'uniform')} | "
                f"{get('ece', 'quantile')} |"
            )
    notes = [f"- {task}: {b.status}; fitted on {b.fitted_on}." for task, b in doc.tasks.items()]
    notes += [f"- {task}: {b.transductive_note}." for task, b in doc.tasks.items() if b.transductive]
    notes += [f"- {task}: {err}." for task, b in doc.tasks.items() if (err := (b.crossfit or {}).get("error"))]
    return "\n".join([*out, "", *notes, ""])


__all__ = ["HONEST", "OPTIMISTIC", "CalibrationReport", "markdown", "reliability", "report"]
