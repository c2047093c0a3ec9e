"""Evaluate result sets: metrics with definitions, bootstrap CIs, slices (comparisons: :mod:`.comparison`).

>>> rows = [{"id": i, "task": "t", "gold": "yes" if i % 3 else "no",
...          "probs": {"yes": 0.8, "no": 0.2} if i % 2 else {"yes": 0.3, "no": 0.7}} for i in range(60)]
>>> ev = evaluate(rows, metrics=["accuracy"], resamples=200)
>>> ev.value("t", "accuracy")
0.5
"""

from __future__ import annotations

import math
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from labledger.analysis.intervals import (
    BCA_BELOW,
    ITEM_RESAMPLE_BUDGET,
    MIN_RESAMPLES,
    analytic_interval,
    correct_of,
    item_values,
    resamples_for,
    value_interval,
    value_notes,
)
from labledger.errors import ComparisonError, MetricInputError, UnknownNameError
from labledger.inputs.records import finite_or_none
from labledger.inputs.results import (
    TOLERANCE,
    LabelTask,
    ProbTask,
    RankingTask,
    RegressionTask,
    ResultSet,
    SetTask,
    TaskData,
    given_sorts,
    given_ties,
    label_index_type,
    load,
)
from labledger.machine import trim_heap
from labledger.metrics.analytic import normal_draws
from labledger.metrics.classification import SortCache, binary_prepared, label_prepared, prob_prepared, resolve_average
from labledger.metrics.kernels import element_spans, one_blas_thread, pool_initializer
from labledger.metrics.prepared import MeanPrepared, Prepared, cell_codes
from labledger.metrics.ranking import RankingArrays, exact_match_prepared, ranking_prepared, set_f1_values
from labledger.metrics.registry import Metric, MetricSpec, metric_key, parse_metric
from labledger.metrics.regression import regression_prepared
from labledger.metrics.resample import THREADS, Interval, check_ci, rng_for
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

#: Metrics computed when none are asked for, by task kind.
DEFAULT_METRICS: dict[str, tuple[str, ...]] = {
    "classification": (
        "accuracy",
        "balanced_accuracy",
        "f1",
        "roc_auc",
        "log_loss",
        "brier",
        "ece",
        "per_class",
        "confusion_matrix",
    ),
    "binary": (
        "accuracy",
        "f1",
        "precision",
        "recall",
        "roc_auc",
        "average_precision",
        "log_loss",
        "brier",
        "ece",
        "per_class",
        "confusion_matrix",
    ),
    "regression": (
        "mae",
        "rmse",
        "pearson",
        "spearman",
        "has0_acc",
        "has0_f1",
        "non0_acc",
        "non0_f1",
        "zero_f1",
        "acc5",
        "acc7",
    ),
    "ranking": ("ndcg@10", "mrr", "recall@10"),
    "sets": ("set_f1", "exact_match"),
    "match": ("exact_match",),
}
#: The headline metric of each task kind (the suite mean averages headlines); override per task.
HEADLINE: dict[str, str] = {
    "classification": "accuracy",
    "binary": "f1",
    "regression": "pearson",
    "ranking": "ndcg@10",
    "sets": "set_f1",
    "match": "exact_match",
}
_MISSING = "(missing)"


def _seed(seed: int, *parts: str) -> list[int]:
    """A reproducible seed for one (task, slice, metric): adding a metric never changes another's CI."""
    return [int(seed)] + [zlib.crc32(p.encode()) for p in parts]


def _json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in params.items()}


_num = finite_or_none


# ------------------------------------------------------------------------------------------------
# Binding a metric to a task


def _labels_of(td: TaskData) -> tuple[str, ...]:
    """The task's labels (none for a task without labels)."""
    return td.labels if isinstance(td, LabelTask) else ()


def _positive_of(td: TaskData) -> str | None:
    """The task's positive label, when it has one."""
    return td.positive if isinstance(td, ProbTask) else None


def task_params(metric: Metric, params: Mapping[str, Any], td: TaskData) -> dict[str, Any]:
    """The metric's parameters resolved for ``td`` (``auto``/``None`` filled from the task)."""
    p = metric.resolve(params)
    labels = _labels_of(td)
    if "pos_label" in p:
        if p["pos_label"] is not None:
            p["pos_label"] = str(p["pos_label"]) if not isinstance(p["pos_label"], str) else p["pos_label"]
            if p["pos_label"] not in labels:
                raise UnknownNameError(
                    f"label of task '{td.task}' (pos_label of {metric.name})", p["pos_label"], labels
                )
        elif "average" in p and p["average"] in ("auto", "binary"):
            p["pos_label"] = _positive_of(td)
        p = resolve_average(p, p["pos_label"] is not None)
        if p.get("average") == "binary" and p["pos_label"] is None:
            raise MetricInputError(
                f"{metric.name}[average=binary] on task '{td.task}' needs pos_label (labels: {', '.join(labels)})"
            )
        if p.get("average") != "binary" and metric.name in (
            "precision",
            "recall",
            "f1",
            "roc_auc",
            "average_precision",
        ):
            p["pos_label"] = None
        if metric.name in ("log_loss", "brier", "ece"):
            p.pop("pos_label")
    return p


class _TaskCache:
    """Per-task inputs shared by several metrics (the flattened ranking arrays, and each probability
    column's ascending sort order: ROC-AUC and average precision sort a column once, #19). Safe to
    share between the threads that compute a task's metrics (:data:`PARALLEL_FROM`)."""

    def __init__(self, td: TaskData):
        self.td = td
        self._ranking: RankingArrays | None = None
        # the orders the reader made or read from a cache entry with their ties (used as they are),
        # and any other given order (checked on use)
        self.sorts: dict[int, tuple[np.ndarray, np.ndarray | None]] = SortCache(given_sorts(td), given_ties(td))
        self._cells: tuple[np.ndarray | None, np.ndarray] | None = None
        self._lock = threading.Lock()

    def cells(self, td: LabelTask) -> tuple[np.ndarray | None, np.ndarray]:
        """``gold * K + pred`` of the cached task and its count table, built once for all its
        count-table metrics (#19). Without clusters the table is all they read, so it is counted a
        block of items at a time and the per-item cells are not kept (``None``: a metric that needs
        them builds them from its gold and predicted codes): an array of n less for the whole
        evaluation (76 MiB at 10M rows). With clusters the resamples draw items, so the cells are
        made once and shared."""
        with self._lock:
            if self._cells is None:
                k, gold, pred = len(td.labels), td.gold_index, td.pred_index
                if td.group is None:
                    counts = np.zeros(k * k, dtype=np.int64)
                    for a, b in element_spans(td.n):  # whole numbers: the same counts
                        counts += np.bincount(cell_codes(gold[a:b], pred[a:b], k), minlength=k * k)
                    self._cells = None, counts
                else:
                    cells = cell_codes(gold, pred, k)
                    self._cells = cells, np.bincount(cells, minlength=k * k)
            return self._cells

    def ranking(self, td: RankingTask) -> RankingArrays:
        """The flattened ranking arrays of ``td`` (the cached task), built once."""
        with self._lock:
            if self._ranking is None:
                self._ranking = RankingArrays(td.gold_relevance, td.scores)
            return self._ranking


def _not_for(metric: Metric, td: TaskData) -> MetricInputError:
    return MetricInputError(
        f"metric '{metric.name}' does not apply to task '{td.task}' ({td.kind}); "
        f"it needs a {' or '.join(metric.kinds)} task"
    )


def prepare_task(metric: Metric, params: dict[str, Any], td: TaskData, cache: _TaskCache | None = None) -> Prepared:
    """A prepared metric (:mod:`labledger.metrics.prepared`) for ``metric`` on task data ``td``
    with resolved ``params``."""
    if td.kind not in metric.kinds:
        raise _not_for(metric, td)
    cache = cache or _TaskCache(td)
    if metric.needs in ("labels", "probs"):
        if not isinstance(td, LabelTask):
            raise _not_for(metric, td)
        pos = td.labels.index(params["pos_label"]) if params.get("pos_label") is not None else None
        if metric.needs == "labels":
            cells, counts = cache.cells(td)
            return label_prepared(
                metric.name, params, td.gold_index, td.pred_index, td.labels, pos=pos, cells=cells, cell_counts=counts
            )
        if not isinstance(td, ProbTask):
            raise _not_for(metric, td)
        if td.kind == "binary" and td.score is not None and td.positive in td.labels:
            # from the score: the (n, 2) probs of a binary task are then never made (#19)
            found = binary_prepared(
                metric.name,
                params,
                td.gold_index,
                td.score,
                td.labels.index(td.positive),
                td.pred_index,
                pos_label=pos,
                sorts=cache.sorts,
            )
            if found is not None:
                return found
        return prob_prepared(
            metric.name, params, td.gold_index, td.probs, td.labels, pos=pos, pred=td.pred_index, sorts=cache.sorts
        )
    if metric.needs == "values":
        if not isinstance(td, RegressionTask):
            raise _not_for(metric, td)
        return regression_prepared(metric.name, params, td.gold_value, td.pred_value)
    if metric.needs == "ranking":
        if not isinstance(td, RankingTask):
            raise _not_for(metric, td)
        return ranking_prepared(metric.name, params, cache.ranking(td))
    if metric.name == "set_f1" and isinstance(td, SetTask):
        return MeanPrepared(
            metric="set_f1",
            params=params,
            n=td.n,
            n_used=td.n,
            values=set_f1_values(td.gold_items, td.pred_items),
        )
    if metric.name == "exact_match":
        if isinstance(td, SetTask):
            hits = np.fromiter((g == p for g, p in zip(td.gold_items, td.pred_items)), dtype=np.float64, count=td.n)
            return exact_match_prepared(params, hits)
        if isinstance(td, LabelTask):
            return exact_match_prepared(params, (td.gold_index == td.pred_index).astype(np.float64))
    raise MetricInputError(f"metric '{metric.name}' cannot be bound to task '{td.task}'")


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
        params=_json_params(params),
        definition=metric.describe(params),
        higher_is_better=metric.higher_is_better,
        value=_num(iv.value),
        ci_low=_num(iv.low),
        ci_high=_num(iv.high),
        ci=iv.ci,
        resamples=iv.resamples,
        method=iv.method,
        n=iv.n,
        clusters=iv.clusters,
        undefined_resamples=iv.undefined_resamples,
        **(extra or {}),
    )


def find_metric(entries: Sequence[Any], task: str, key: str | MetricId) -> Any:
    """The one entry named ``key``: its exact key, else its bare metric name when unique, else the
    one entry whose identity covers the asked one (``f1[average=macro]`` finds
    ``f1[average=macro,zero_division=0]``). Raises :class:`UnknownNameError` listing the keys."""
    text = key.key if isinstance(key, MetricId) else key
    found = [e for e in entries if e.key == text] or [e for e in entries if e.metric == text]
    if not found:
        try:
            want = MetricId.parse(key)
        except MetricInputError:
            want = None
        if want is not None:
            found = [e for e in entries if e.id == want] or [e for e in entries if e.id.covers(want)]
    if len(found) != 1:
        raise UnknownNameError(f"metric of task '{task}'", text, [e.key for e in entries])
    return found[0]


# ------------------------------------------------------------------------------------------------
# evaluate


class Evaluation:
    """The result of :func:`evaluate`: a typed :class:`~labledger.schema.EvaluationDoc` plus accessors.

    >>> ev = evaluate([{"id": 1, "task": "t", "gold": 1.0, "pred": 0.5}], metrics=["mae"], resamples=0)
    >>> ev.doc.tasks["t"].metrics[0].value, ev.metric("t", "mae").key
    (0.5, 'mae')
    """

    def __init__(self, doc: EvaluationDoc | dict[str, Any]):
        from labledger.schema import decode

        self.doc: EvaluationDoc = doc if isinstance(doc, EvaluationDoc) else decode(doc, type=EvaluationDoc)

    @property
    def document(self) -> dict[str, Any]:
        """The document as builtins (kept for code written against the dict documents)."""
        return self.doc.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The evaluation as one JSON-ready dict (what ``labledger eval --json`` prints)."""
        return self.doc.to_dict()

    def _repr_html_(self) -> str:
        """Notebook display (the document's tables, :mod:`labledger.schema.html`)."""
        return self.doc._repr_html_()

    def to_json(self) -> str:
        """The evaluation as JSON text."""
        return self.doc.to_json()

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


def _specs_for(td: TaskData, metrics: Any) -> list[MetricSpec]:
    if metrics is None:
        return [parse_metric(m) for m in DEFAULT_METRICS[td.kind]]
    if isinstance(metrics, Mapping):
        chosen = metrics.get(td.task)
        if chosen is None:
            return [parse_metric(m) for m in DEFAULT_METRICS[td.kind]]
        metrics = chosen
    return _parse_specs(metrics)


def _parse_specs(metrics: Any) -> list[MetricSpec]:
    """One spec or a list of them, parsed."""
    return [parse_metric(m) for m in ([metrics] if isinstance(metrics, (str, MetricSpec, Metric)) else metrics)]


def _check_applicable(rs: ResultSet, metrics: Any) -> None:
    if metrics is None or isinstance(metrics, Mapping):
        return
    specs = _parse_specs(metrics)
    kinds = {td.kind for td in rs.values()}
    for spec in specs:
        if not kinds & set(spec.metric.kinds):
            raise MetricInputError(
                f"metric '{spec}' applies to {' or '.join(spec.metric.kinds)} tasks; "
                f"the tasks here are {', '.join(sorted(kinds))}"
            )


#: From this many items a task's metrics are computed in parallel threads (numpy releases the GIL in
#: its sorts, cumulative sums and gathers; each metric has its own seed, so the values do not depend
#: on the threads, #19); smaller tasks take one thread (a thread costs more than their metrics).
PARALLEL_FROM = 100_000
#: ... and up to this many: two metrics' temporaries at once cost memory (10M binary rows peak at
#: 2.0 GiB in threads against 1.8 GiB in one, 3-class rows at 2.7 GiB either way, and take 3.4-4.0 s
#: against 5.4-6.5 s, since ROC-AUC and AP compute in place and share their ranked flags), so
#: larger tasks take one thread.
PARALLEL_UPTO = 20_000_000
#: The relative cost of a metric in those threads (the order they are started in; the others 1):
#: from one profile at 1M binary rows (#19). Only the schedule depends on it, never a value.
THREAD_COST = {"average_precision": 15, "roc_auc": 12, "ece": 6, "log_loss": 4, "brier": 4, "accuracy": 2}
#: Metrics that share their score columns' sorts and ranked flags (the task's SortCache): the first
#: of them to start builds those under a lock, and a second one started beside it would wait idle,
#: so only the costliest starts among the first; the others start after the metrics that share
#: nothing (1M binary rows from the cache: ROC-AUC's thread waited ~35 ms of ~120 for AP's, #19).
SHARE_SORTS = frozenset(("average_precision", "roc_auc"))


def thread_order(names: Sequence[str]) -> list[int]:
    """The order in which the metrics ``names`` start in the threads: costliest first, then those
    that share sorts with one started already (:data:`SHARE_SORTS`) after the rest.

    >>> thread_order(["accuracy", "roc_auc", "average_precision", "ece"])
    [2, 3, 0, 1]
    >>> thread_order(["accuracy", "roc_auc", "ece"])
    [1, 2, 0]
    """
    by_cost = sorted(range(len(names)), key=lambda i: -THREAD_COST.get(names[i], 1))
    sharing = [i for i in by_cost if names[i] in SHARE_SORTS]
    later = set(sharing[1:])
    return [i for i in by_cost if i not in later] + sharing[1:]


#: From this many items, the C allocator's freed heap pages are handed back after each metric
#: (:func:`labledger.machine.trim_heap`): a command keeps up to 128 MiB of them for its next arrays
#: (:func:`labledger.cli.base.process_settings`), and a metric's peak then came on top of the last
#: one's leftovers (10M 3-class rows: the evaluation's peak 0.83-0.84 GiB, against 0.87-0.90, and no
#: slower, #19).
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
    cache = _TaskCache(td)
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
        from concurrent.futures import ThreadPoolExecutor

        # the costliest first (a long metric started last would leave the other thread idle);
        # results, and a first error, are taken in the jobs' own order
        first = thread_order([metric.name for metric, _, _ in jobs])
        with ThreadPoolExecutor(min(THREADS, len(jobs)), initializer=pool_initializer()) as pool:
            futures = {i: pool.submit(one, jobs[i]) for i in first}
            done = [futures[i].result() for i in range(len(jobs))]
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
    cache: _TaskCache,
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
        k = len(_labels_of(td))
        return (
            "confusion_matrix",
            ConfusionMatrix(
                labels=list(_labels_of(td)),
                rows="gold",
                columns="pred",
                matrix=np.asarray(list(counts.values())).reshape(k, k).astype(int).tolist(),
                definition=metric.describe(params),
            ),
            None,
        )
    iv, draws, used = value_interval(
        prep, ci=ci, resamples=resamples, seed=_seed(seed, td.task, where, key), groups=td.group, budget=budget
    )
    if metric.name == "per_class" and isinstance(iv, dict):

        def stat(name: str, lab: str, iv: Any = iv) -> Stat:
            c = iv[f"{name}[{lab}]"]
            return Stat(value=_num(c.value), ci_low=_num(c.low), ci_high=_num(c.high))

        return (
            "per_class",
            PerClass(
                definition=metric.describe(params),
                params=_json_params(params),
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
                    for lab in _labels_of(td)
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
        found = normal_draws([prep], resamples, rng_for(_seed(seed, td.task, where, key)), td.group)
        draws = None if found is None else found[0]
    return "entry", entry, draws


# numpy's BLAS on one thread (and in the metric threads' pool): threaded dot products split their
# sums, so the values' last bits followed the machine's core count; the same document everywhere (#19)
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
) -> Evaluation:
    """Evaluate rows, a ``results.jsonl`` path or a :class:`~labledger.inputs.results.ResultSet`.

    ``metrics``: metric specs (``"f1:average=macro"``, ``"ndcg@10"``...) applied to every task they
    fit, or ``{task: [specs]}``; default: :data:`DEFAULT_METRICS` per task kind. ``by``: slice
    field(s), each evaluated separately. Every value gets a ``ci`` percentile bootstrap interval
    over ``resamples`` resamples (clusters when rows carry ``group``); ``resamples=0`` skips them.
    ``headline``: ``{task: spec}`` overriding :data:`HEADLINE` for the suite mean.
    ``item_draw_budget``: metrics recomputed on every resampled item set (ROC-AUC, AP, ECE,
    correlations) get fewer resamples past this many item-draws (never under 200), and say so in
    their stored value; None computes every resample.

    >>> ev = evaluate([{"id": 1, "task": "r", "gold": 1.0, "pred": 0.5},
    ...                {"id": 2, "task": "r", "gold": -1.0, "pred": -1.5}], metrics=["mae"], resamples=0)
    >>> ev.value("r", "mae")
    0.5
    """
    check_ci(ci, resamples)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise MetricInputError(f"seed must be an integer; got {type(seed).__name__} {seed!r:.40}")
    rs = load(source, tolerance=tolerance, positive=positive)
    tasks = _select_tasks(rs, task)
    _check_applicable(rs, metrics)
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
        specs = _specs_for(td, metrics)
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
            labels=list(_labels_of(td)) or None,
            positive=_positive_of(td),
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
    doc.suite = _suite(headline_samples, ci) if len(tasks) > 1 else None
    return Evaluation(doc)


def _select_tasks(rs: ResultSet, task: str | Sequence[str] | None) -> list[str]:
    if task is None:
        return list(rs)
    wanted = [task] if isinstance(task, str) else list(task)
    for t in wanted:
        rs[t]  # raises UnknownNameError with suggestions
    return wanted


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


def _examples(ids: Iterable[str], k: int = 5) -> str:
    shown = sorted(ids)[:k]
    return ", ".join(repr(i) for i in shown) if shown else "none"


def _align_labels(a: LabelTask, b: LabelTask) -> tuple[LabelTask, LabelTask]:
    """Both tasks re-expressed over the union of their labels (matched by name, never position)."""
    if a.labels == b.labels:
        return a, b
    if a.kind == "binary" and _positive_of(a) != _positive_of(b):
        raise ComparisonError(f"task '{a.task}': A's positive label is {_positive_of(a)!r}, B's is {_positive_of(b)!r}")
    union = tuple(sorted(set(a.labels) | set(b.labels)))
    return _relabel(a, union), _relabel(b, union)


def _relabel(td: LabelTask, labels: tuple[str, ...]) -> LabelTask:
    index = np.array([labels.index(lab) for lab in td.labels], dtype=label_index_type(len(labels)))
    new = td.subset(np.arange(td.n))
    new.labels = labels
    new.gold_index = index[td.gold_index]
    new.pred_index = index[td.pred_index]
    if isinstance(td, ProbTask) and isinstance(new, ProbTask):
        probs = np.zeros((td.n, len(labels)))
        probs[:, index] = td.probs
        new.probs = probs
    return new


def _check_item_hash(a: TaskData, b: TaskData) -> None:
    """Refuse pairs whose documents differ: rows may carry ``item_hash`` (a harness's document identity,
    e.g. lm-eval's doc_hash/prompt_hash); where both sides have one for a paired id, they must match."""
    if "item_hash" not in a.extras or "item_hash" not in b.extras:
        return
    ha, hb = list(a.extras["item_hash"]), list(b.extras["item_hash"])
    diff = [i for i, (x, y) in enumerate(zip(ha, hb)) if x is not None and y is not None and x != y]
    if diff:
        i = diff[0]
        raise ComparisonError(
            f"task '{a.task}': the documents differ between A and B for {len(diff)} paired items (e.g. id "
            f"{a.ids[i]!r}: item_hash A {_short(ha[i])}, B {_short(hb[i])}); a changed prompt or document is a "
            "different item, so these cannot be paired"
        )


def _check_gold(a: TaskData, b: TaskData) -> None:
    ga: Any
    gb: Any
    if isinstance(a, LabelTask) and isinstance(b, LabelTask):
        ga = np.asarray(a.labels, dtype=object)[a.gold_index] if a.n else np.zeros(0, object)
        gb = np.asarray(b.labels, dtype=object)[b.gold_index] if b.n else np.zeros(0, object)
        diff = np.flatnonzero(ga != gb)
    elif isinstance(a, RegressionTask) and isinstance(b, RegressionTask):
        diff = np.flatnonzero(a.gold_value != b.gold_value)
        ga, gb = a.gold_value, b.gold_value
    elif isinstance(a, SetTask) and isinstance(b, SetTask):
        diff = np.flatnonzero([x != y for x, y in zip(a.gold_items, b.gold_items)])
        ga, gb = a.gold_items, b.gold_items
    elif isinstance(a, RankingTask) and isinstance(b, RankingTask):
        diff = np.flatnonzero([x != y for x, y in zip(a.gold_relevance, b.gold_relevance)])
        ga, gb = a.gold_relevance, b.gold_relevance
    else:
        raise ComparisonError(f"task '{a.task}' is {a.kind} in A but {b.kind} in B")
    if len(diff):
        i = int(diff[0])
        raise ComparisonError(
            f"task '{a.task}': gold differs between A and B for {len(diff)} items (e.g. id "
            f"{a.ids[i]!r}: A {_short(ga[i])}, B {_short(gb[i])}); these are not the same data"
        )


def _short(v: Any) -> str:
    text = repr(sorted(v) if isinstance(v, frozenset) else v)
    return text if len(text) < 60 else text[:57] + "..."


def __getattr__(name: str) -> Any:
    # compare and Comparison moved to labledger.analysis.comparison (#11); old imports keep working
    if name in ("compare", "Comparison"):
        from labledger.analysis import comparison

        return getattr(comparison, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------------------------------------
# Inference beside the bootstrap (analytic intervals, few-cluster warnings, MDE): labledger.metrics.stats

_item_values = item_values  # the names the sibling modules import
_correct = correct_of


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
