"""Evaluate result sets: metrics with definitions, bootstrap CIs, slices (comparisons: :mod:`.comparison`).

>>> rows = [{"id": i, "task": "t", "gold": "yes" if i % 3 else "no",
...          "probs": {"yes": 0.8, "no": 0.2} if i % 2 else {"yes": 0.3, "no": 0.7}} for i in range(60)]
>>> ev = evaluate(rows, metrics=["accuracy"], resamples=200)
>>> ev.value("t", "accuracy")
0.5
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from labledger.analysis.intervals import (
    BCA_BELOW,
    ITEM_RESAMPLE_BUDGET,
    MIN_RESAMPLES,
    analytic_interval,
    resamples_for,
    value_interval,
    value_notes,
)
from labledger.analysis.tasks import (
    DEFAULT_METRICS,
    HEADLINE,
    TaskCache,
    check_applicable,
    find_metric,
    json_params,
    labels_of,
    metric_seed,
    positive_of,
    prepare_task,
    select_tasks,
    specs_for,
    task_params,
)
from labledger.analysis.threads import THREADS, in_threads, one_blas_thread
from labledger.errors import MetricInputError, UnknownNameError
from labledger.inputs.records import finite_or_none
from labledger.inputs.results import (
    TOLERANCE,
    TaskData,
    load,
)
from labledger.machine import trim_heap
from labledger.metrics.analytic import normal_draws
from labledger.metrics.registry import Metric, MetricSpec, metric_key, parse_metric
from labledger.metrics.resample import Interval, check_ci, rng_for
from labledger.metrics.stats import quantiles
from labledger.schema import (
    ConfusionMatrix,
    EvaluationDoc,
    MetricId,
    MetricValue,
    PerClass,
    PerClassRow,
    SliceBody,
    Stat,
    SuiteMean,
    TaskEvaluation,
)
from labledger.schema.result import DocumentResult

_MISSING = "(missing)"


#: Metrics without a count-table, bin-cell or analytic form are recomputed on every resample: n x
#: resamples item-draws; past ITEM_RESAMPLE_BUDGET draws the number of resamples is reduced (never
#: below MIN_RESAMPLES), and the stored value says so (``resamples``, ``resamples_requested``).
#: The rules live in :mod:`labledger.analysis.intervals` (one builder for evaluate and compare).


def _value_entry(
    metric: Metric, params: dict[str, Any], iv: Any, *, extra: Mapping[str, Any] | None = None
) -> MetricValue:
    return MetricValue(
        metric=metric.name,
        key=metric_key(metric.name, params),
        params=json_params(params),
        definition=metric.describe(params),
        higher_is_better=metric.higher_is_better,
        value=finite_or_none(iv.value),
        ci_low=finite_or_none(iv.low),
        ci_high=finite_or_none(iv.high),
        ci=iv.ci,
        resamples=iv.resamples,
        method=iv.method,
        n=iv.n,
        clusters=iv.clusters,
        undefined_resamples=iv.undefined_resamples,
        **(extra or {}),
    )


# ------------------------------------------------------------------------------------------------
# evaluate


class Evaluation(DocumentResult[EvaluationDoc]):
    """The result of :func:`evaluate`: a typed :class:`~labledger.schema.EvaluationDoc` plus accessors
    (``to_dict()`` is what ``labledger eval --json`` prints).

    >>> ev = evaluate([{"id": 1, "task": "t", "gold": 1.0, "pred": 0.5}], metrics=["mae"], resamples=0)
    >>> ev.doc.tasks["t"].metrics[0].value, ev.metric("t", "mae").key
    (0.5, 'mae')
    """

    doc_type = EvaluationDoc

    @property
    def tasks(self) -> dict[str, TaskEvaluation]:
        return self.doc.tasks

    def metric(self, task: str, key: str | MetricId, *, slice: str | None = None) -> MetricValue:
        """The stored value of metric ``key`` (``f1[average=macro]``, a spec, or a bare name when unique)."""
        if task not in self.doc.tasks:
            raise UnknownNameError("task", task, list(self.doc.tasks))
        body = self.doc.tasks[task]
        entries = body.metrics
        if slice is not None:
            fld, _, val = slice.partition("=")
            slices = body.slices or {}
            if fld not in slices:
                raise UnknownNameError(f"slice field of task '{task}'", fld, list(slices))
            if val not in slices[fld]:
                raise UnknownNameError(f"value of slice field '{fld}'", val, list(slices[fld]))
            entries = slices[fld][val].metrics
        found: MetricValue = find_metric(entries, task, key)
        return found

    def value(self, task: str, key: str | MetricId, *, slice: str | None = None) -> float | None:
        """The value of metric ``key`` for ``task`` (optionally in slice ``field=value``)."""
        return self.metric(task, key, slice=slice).value

    def __repr__(self) -> str:
        return f"Evaluation({self.doc.source!r}, tasks={list(self.doc.tasks)})"


#: From this many items a task's metrics are computed in parallel threads (numpy releases the GIL in
#: its sorts, cumulative sums and gathers; each metric has its own seed, so the values do not depend
#: on the threads); smaller tasks take one thread (a thread costs more than their metrics).
PARALLEL_FROM = 100_000
#: ... and up to this many: two metrics' temporaries at once cost memory, so larger tasks take one
#: thread (the trade is measured in docs/performance.md).
PARALLEL_UPTO = 20_000_000
#: The relative cost of a metric in those threads, and of a column's sort ("sort": made before the
#: ROC-AUC and AP that read it, an order the reader made ranked), the others 1: from one profile at
#: 1M binary rows read from JSONL. Only the schedule depends on it, never a value.
THREAD_COST = {"average_precision": 11, "roc_auc": 6, "ece": 4, "log_loss": 4, "sort": 4, "accuracy": 3, "brier": 2}


#: From this many items, the C allocator's freed heap pages are handed back after each metric
#: (:func:`labledger.machine.trim_heap`): a command keeps some of them for its next arrays
#: (:func:`labledger.cli.base.process_settings`), and a metric's peak would otherwise come on top of
#: the last one's leftovers.
TRIM_FROM = 1 << 20


def _compute(
    td: TaskData,
    specs: list[MetricSpec],
    *,
    ci: float,
    resamples: int,
    seed: int,
    where: str,
    keep: set[str] | None = None,
    budget: float | None = ITEM_RESAMPLE_BUDGET,
) -> tuple[list[MetricValue], dict[str, Any], dict[str, np.ndarray]]:
    """Scalar metric entries, table sections (per_class, confusion_matrix) and kept samples."""
    cache = TaskCache(td)
    jobs: list[tuple[Metric, dict[str, Any], str]] = []
    seen: set[str] = set()
    for spec in specs:
        metric = spec.metric
        if td.kind not in metric.kinds:
            continue
        params = task_params(metric, dict(spec.params), td)
        key = metric_key(metric.name, params)
        if key in seen or (metric.name == "per_class" and where != ""):
            continue
        if metric.name == "confusion_matrix" and where != "":
            continue
        seen.add(key)
        jobs.append((metric, params, key))

    def one(job: tuple[Metric, dict[str, Any], str]) -> tuple[str, Any, np.ndarray | None]:
        metric, params, key = job
        try:
            return _compute_one(
                td,
                metric,
                params,
                key,
                cache,
                ci=ci,
                resamples=resamples,
                seed=seed,
                where=where,
                keep=keep,
                budget=budget,
            )
        finally:
            if td.n >= TRIM_FROM:
                trim_heap()

    if PARALLEL_FROM <= td.n <= PARALLEL_UPTO and THREADS > 1 and len(jobs) > 1:
        # each column's sort a job of its own, made before the metrics that read it; results, and a
        # first error, are taken in the jobs' own order (a failed sort fails again in its metrics)
        needs = [cache.columns(metric, params) for metric, params, _ in jobs]
        columns = sorted({j for found in needs for j in found})
        futures = in_threads(
            [partial(cache.sort, j) for j in columns] + [partial(one, job) for job in jobs],
            [THREAD_COST["sort"]] * len(columns) + [THREAD_COST.get(metric.name, 1) for metric, _, _ in jobs],
            [()] * len(columns) + [[columns.index(j) for j in found] for found in needs],
            min(THREADS, len(columns) + len(jobs)),
        )
        done = [f.result() for f in futures[len(columns) :]]
    else:
        done = [one(job) for job in jobs]
    entries: list[MetricValue] = []
    tables: dict[str, Any] = {}
    samples: dict[str, np.ndarray] = {}
    for (_, _, key), (section, out, draws) in zip(jobs, done):
        if section == "entry":
            entries.append(out)
        else:
            tables[section] = out
        if draws is not None:
            samples[key] = draws
    return entries, tables, samples


def _compute_one(
    td: TaskData,
    metric: Metric,
    params: dict[str, Any],
    key: str,
    cache: TaskCache,
    *,
    ci: float,
    resamples: int,
    seed: int,
    where: str,
    keep: set[str] | None,
    budget: float | None,
) -> tuple[str, Any, np.ndarray | None]:
    """One metric of :func:`_compute`: ``("entry", MetricValue, kept draws)``, or a table section
    ``("confusion_matrix" | "per_class", table, None)``."""
    prep = prepare_task(metric, params, td, cache)
    if metric.name == "confusion_matrix":
        counts = prep.value()
        k = len(labels_of(td))
        return (
            "confusion_matrix",
            ConfusionMatrix(
                labels=list(labels_of(td)),
                rows="gold",
                columns="pred",
                matrix=np.asarray(list(counts.values())).reshape(k, k).astype(int).tolist(),
                definition=metric.describe(params),
            ),
            None,
        )
    iv, draws, used = value_interval(
        prep, ci=ci, resamples=resamples, seed=metric_seed(seed, td.task, where, key), groups=td.group, budget=budget
    )
    if metric.name == "per_class" and isinstance(iv, dict):

        def stat(name: str, lab: str, iv: Any = iv) -> Stat:
            c = iv[f"{name}[{lab}]"]
            return Stat(value=finite_or_none(c.value), ci_low=finite_or_none(c.low), ci_high=finite_or_none(c.high))

        return (
            "per_class",
            PerClass(
                definition=metric.describe(params),
                params=json_params(params),
                ci=ci,
                resamples=resamples,
                method=iv[next(iter(iv))].method,
                labels=[
                    PerClassRow(
                        label=lab,
                        support=int(iv[f"support[{lab}]"].value),
                        precision=stat("precision", lab),
                        recall=stat("recall", lab),
                        f1=stat("f1", lab),
                    )
                    for lab in labels_of(td)
                ],
            ),
            None,
        )
    stats_extra = value_notes(prep, iv, td.group, ci, draws) if isinstance(iv, Interval) else {}
    entry = _value_entry(
        metric,
        params,
        iv,
        extra=stats_extra
        if used == resamples
        else {
            **stats_extra,
            "resamples_requested": resamples,
            "resamples_note": f"{used} resamples instead of {resamples}: this metric is recomputed on every "
            f"resampled item set (n={prep.n:,}), capped at {budget:.0e} item-draws; "
            f"evaluate(..., item_draw_budget=None) or `labledger eval --all-resamples` "
            f"computes them all",
        },
    )
    if keep is None or key not in keep:
        return "entry", entry, None
    if draws is None and isinstance(iv, Interval) and iv.resamples == 0 and resamples:
        # an analytic headline: normal draws stand in for its bootstrap ones in the suite mean
        found = normal_draws([prep], resamples, rng_for(metric_seed(seed, td.task, where, key)), td.group)
        draws = None if found is None else found[0]
    return "entry", entry, draws


# numpy's BLAS on one thread (and in the metric threads' pool): threaded dot products split their
# sums, so the values' last bits followed the machine's core count; the same document everywhere
@one_blas_thread()
def evaluate(
    source: Any,
    *,
    metrics: Any = None,
    by: str | Sequence[str] | None = None,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
    task: str | Sequence[str] | None = None,
    headline: Mapping[str, str] | None = None,
    positive: str | Mapping[str, str] | None = None,
    tolerance: float = TOLERANCE,
    item_draw_budget: float | None = ITEM_RESAMPLE_BUDGET,
    suite: bool = True,
) -> Evaluation:
    """Evaluate rows, a ``results.jsonl`` path or a :class:`~labledger.inputs.results.ResultSet`.

    ``metrics``: metric specs (``"f1:average=macro"``, ``"ndcg@10"``...) applied to every task they
    fit, or ``{task: [specs]}``; default: :data:`DEFAULT_METRICS` per task kind. ``by``: slice
    field(s), each evaluated separately. Every value gets a ``ci`` percentile bootstrap interval
    over ``resamples`` resamples (clusters when rows carry ``group``); ``resamples=0`` skips them.
    ``headline``: ``{task: spec}`` overriding :data:`HEADLINE` for the suite mean.
    ``item_draw_budget``: metrics recomputed on every resampled item set (ROC-AUC, AP, ECE,
    correlations) get fewer resamples past this many item-draws (never under 200), and say so in
    their stored value; None computes every resample. ``suite=False``: no suite mean over the
    tasks (they are alternative metrics of one benchmark, as a harness result set's are).

    >>> ev = evaluate([{"id": 1, "task": "r", "gold": 1.0, "pred": 0.5},
    ...                {"id": 2, "task": "r", "gold": -1.0, "pred": -1.5}], metrics=["mae"], resamples=0)
    >>> ev.value("r", "mae")
    0.5
    """
    check_ci(ci, resamples)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise MetricInputError(f"seed must be an integer; got {type(seed).__name__} {seed!r:.40}")
    rs = load(source, tolerance=tolerance, positive=positive)
    tasks = select_tasks(rs, task)
    check_applicable(rs, metrics)
    fields = [by] if isinstance(by, str) else list(by or [])
    if fields and not any(f in rs[t].slice_columns for t in tasks for f in fields):
        known = sorted({f for t in tasks for f in rs[t].slice_columns})
        raise UnknownNameError("slice field", fields[0], known)
    doc = EvaluationDoc(
        source=rs.source,
        n=sum(rs[t].n for t in tasks),
        ci=ci,
        resamples=resamples,
        seed=seed,
        by=fields,
        tasks={},
    )
    headline_samples: dict[str, tuple[MetricValue, np.ndarray | None]] = {}
    for name in tasks:
        td = rs[name]
        specs = specs_for(td, metrics)
        head_spec = parse_metric((headline or {}).get(name, HEADLINE[td.kind]))
        head_key = None
        if td.kind in head_spec.metric.kinds:
            head_key = metric_key(head_spec.name, task_params(head_spec.metric, dict(head_spec.params), td))
            keys = {
                metric_key(s.name, task_params(s.metric, dict(s.params), td))
                for s in specs
                if td.kind in s.metric.kinds
            }
            if head_key not in keys:
                specs = [*specs, head_spec]
        entries, tables, kept = _compute(
            td,
            specs,
            ci=ci,
            resamples=resamples,
            seed=seed,
            where="",
            budget=item_draw_budget,
            keep={head_key} if head_key else None,
        )
        body = TaskEvaluation(
            kind=td.kind,
            n=td.n,
            labels=list(labels_of(td)) or None,
            positive=positive_of(td),
            clusters=None if td.group is None else int(td.group.max()) + 1,
            headline=head_key,
            metrics=entries,
            per_class=tables.get("per_class"),
            confusion_matrix=tables.get("confusion_matrix"),
        )
        if head_key:
            entry = next((e for e in entries if e.key == head_key), None)
            if entry is not None:
                headline_samples[name] = (entry, kept.get(head_key))
        if fields:
            body.slices = _slices(td, specs, fields, ci=ci, resamples=resamples, seed=seed, budget=item_draw_budget)
        doc.tasks[name] = body
    doc.suite = _suite(headline_samples, ci) if suite and len(tasks) > 1 else None
    return Evaluation(doc)


def _slices(
    td: TaskData,
    specs: list[MetricSpec],
    fields: list[str],
    *,
    ci: float,
    resamples: int,
    seed: int,
    budget: float | None = ITEM_RESAMPLE_BUDGET,
) -> dict[str, dict[str, SliceBody]]:
    out: dict[str, dict[str, SliceBody]] = {}
    for fld in fields:
        if fld not in td.slice_columns:
            continue
        codes, values = td.slice_columns[fld]
        per: dict[str, SliceBody] = {}
        order = sorted(range(len(values)), key=lambda j: (values[j] is None, str(values[j])))
        for j in order:
            mask = codes == j
            if not mask.any():
                continue
            label = (
                _MISSING
                if values[j] is None
                else (str(values[j]).lower() if isinstance(values[j], bool) else str(values[j]))
            )
            sub = td.subset(mask)
            entries, _, _ = _compute(
                sub, specs, ci=ci, resamples=resamples, seed=seed, where=f"{fld}={label}", budget=budget
            )
            per[label] = SliceBody(n=sub.n, metrics=entries)
        out[fld] = per
    return out


def _suite(heads: dict[str, tuple[MetricValue, np.ndarray | None]], ci: float) -> SuiteMean:
    used = {t: e for t, (e, _) in heads.items() if e.higher_is_better and e.value is not None}
    excluded = sorted(set(heads) - set(used))
    if not used:
        return SuiteMean(metric="macro mean of task headline metrics", value=None, tasks={}, excluded=excluded)
    value = float(np.mean([e.value for e in used.values()]))
    low = high = None
    draws = [d for d in (heads[t][1] for t in used) if d is not None]
    if len(draws) == len(used) and len({len(d) for d in draws}) == 1:
        mean_draws = np.mean(np.stack(draws), axis=0)  # tasks are resampled independently
        mean_draws = mean_draws[np.isfinite(mean_draws)]
        if len(mean_draws):
            low, high = (float(x) for x in quantiles(mean_draws, [(1 - ci) / 2, (1 + ci) / 2]))
    return SuiteMean(
        metric="macro mean of task headline metrics",
        definition="Unweighted mean over tasks of each task's headline metric (tasks whose headline is "
        "lower-is-better are left out); CI from the mean of independent per-task bootstrap "
        "resamples.",
        value=value,
        ci_low=low,
        ci_high=high,
        ci=ci,
        n_tasks=len(used),
        tasks={t: e.key for t, e in used.items()},
        excluded=excluded,
    )


# ------------------------------------------------------------------------------------------------
# pairing two result sets (used by labledger.analysis.comparison)


def __getattr__(name: str) -> Any:
    # compare and Comparison moved to labledger.analysis.comparison (#11); old imports keep working
    if name in ("compare", "Comparison"):
        from labledger.analysis import comparison

        return getattr(comparison, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------------------------------------
# Inference beside the bootstrap (analytic intervals, few-cluster warnings, MDE): labledger.metrics.stats


__all__ = [
    "BCA_BELOW",
    "DEFAULT_METRICS",
    "HEADLINE",
    "ITEM_RESAMPLE_BUDGET",
    "MIN_RESAMPLES",
    "Evaluation",
    "analytic_interval",
    "evaluate",
    "find_metric",
    "prepare_task",
    "resamples_for",
    "task_params",
]
