"""Compare two result sets task by task: A - B for each metric with a CI and a p-value.

>>> gold = ["y", "n"] * 30
>>> rows = lambda p: [{"id": i, "task": "t", "gold": g, "pred": p(i, g)} for i, g in enumerate(gold)]
>>> c = compare(rows(lambda i, g: g), rows(lambda i, g: g if i % 4 else "?"), metrics=["exact_match"])
>>> c.metric("t", "exact_match").diff
0.25
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import numpy as np

from labledger.analysis.intervals import correct_of as _correct
from labledger.analysis.intervals import diff_interval, diff_notes, diff_ready, margin_test
from labledger.analysis.tasks import (
    TaskCache,
    align_labels,
    check_applicable,
    check_gold,
    check_item_hash,
    examples,
    find_metric,
    json_params,
    metric_seed,
    prepare_task,
    select_tasks,
    specs_for,
    task_params,
)
from labledger.errors import ComparisonError
from labledger.inputs.records import finite_or_none
from labledger.inputs.results import TOLERANCE, LabelTask, TaskData, deferred_ids, load
from labledger.metrics.kernels import one_blas_thread, pool_initializer
from labledger.metrics.prepared import Prepared
from labledger.metrics.registry import metric_key
from labledger.metrics.resample import mcnemar
from labledger.metrics.stats import adjust_p, clustered_mcnemar, family_note
from labledger.schema import ComparisonDoc, McNemar, MetricDiff, MetricId, TaskComparison
from labledger.schema.documents import MarginTest

T = TypeVar("T")


class Comparison:
    """The result of :func:`compare`: a typed :class:`~labledger.schema.ComparisonDoc` plus accessors."""

    def __init__(self, doc: ComparisonDoc | dict[str, Any]):
        from labledger.schema import decode

        self.doc: ComparisonDoc = doc if isinstance(doc, ComparisonDoc) else decode(doc, type=ComparisonDoc)

    @property
    def document(self) -> dict[str, Any]:
        """The document as builtins (kept for code written against the dict documents)."""
        return self.doc.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The comparison as one JSON-ready dict (what ``labledger compare --json`` prints)."""
        return self.doc.to_dict()

    def _repr_html_(self) -> str:
        """Notebook display (the document's tables, :mod:`labledger.schema.html`)."""
        return self.doc._repr_html_()

    def to_json(self) -> str:
        """The comparison as JSON text."""
        return self.doc.to_json()

    def metric(self, task: str, key: str | MetricId) -> MetricDiff:
        """The difference of metric ``key`` on ``task``."""
        found: MetricDiff = find_metric(self.doc.tasks[task].metrics, task, key)
        return found

    def __repr__(self) -> str:
        return f"Comparison({self.doc.a!r} vs {self.doc.b!r})"


def compare(
    a: Any,
    b: Any,
    *,
    metrics: Any = None,
    unpaired: bool = False,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
    task: str | Sequence[str] | None = None,
    positive: str | Mapping[str, str] | None = None,
    tolerance: float = TOLERANCE,
    adjust: str = "holm",
    margin: float | None = None,
    equivalence: float | None = None,
    alpha: float = 0.05,
) -> Comparison:
    """Compare two result sets task by task: A - B for each metric with a CI and a p-value.

    Same item ids: a paired bootstrap (and McNemar's test for accuracy / exact match). Different
    item sets raise :class:`~labledger.errors.ComparisonError` (counts and example ids) unless
    ``unpaired=True``, which resamples each side independently. ``adjust``: the p-values of every
    metric and task form one family, adjusted by Holm (default), ``bh`` or ``none`` (``p_adjusted``).
    With clusters (``group``), McNemar's test is the clustered one (Durkalski et al. 2003).

    ``margin``: a non-inferiority test of every compared metric (A no worse than B by ``margin``, in
    the metric's units, one-sided at ``alpha``); ``equivalence``: a TOST equivalence test (``|A - B| <
    equivalence``, two one-sided tests at ``alpha``). Each is in the task's ``margin_tests``
    (:func:`~labledger.analysis.intervals.margin_test`: the bounds of the ``1 - 2 alpha`` interval by
    the comparison's own procedure and seed); their one-sided p-values form a second family, adjusted
    by ``adjust`` (``margin_family``).

    >>> gold = ["y", "n"] * 30
    >>> rows = lambda p: [{"id": i, "task": "t", "gold": g, "pred": p(i, g)} for i, g in enumerate(gold)]
    >>> c = compare(rows(lambda i, g: g), rows(lambda i, g: g if i % 4 else "?"), metrics=["exact_match"])
    >>> c.metric("t", "exact_match").diff
    0.25
    """
    # the two sides read (and, below, prepared) side by side, numpy's BLAS on one thread in each:
    # the analytic SEs' products the same on every machine, no idle BLAS threads spinning
    with one_blas_thread(), ThreadPoolExecutor(2, initializer=pool_initializer()) as pool:
        return _compare(
            pool,
            a,
            b,
            metrics=metrics,
            unpaired=unpaired,
            ci=ci,
            resamples=resamples,
            seed=seed,
            task=task,
            positive=positive,
            tolerance=tolerance,
            adjust=adjust,
            margins=_margins(margin, equivalence, alpha),
            alpha=alpha,
        )


def _margins(margin: float | None, equivalence: float | None, alpha: float) -> list[tuple[str, float]]:
    """The margin tests asked for, checked before anything is read: ``[(test, margin), ...]``."""
    from labledger.errors import MetricInputError

    out = []
    for test, m in (("non-inferiority", margin), ("equivalence", equivalence)):
        if m is None:
            continue
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m <= 0:
            raise MetricInputError(f"the {test} margin must be a positive number; got {m!r}")
        out.append((test, float(m)))
    if out and not (0 < alpha < 0.5):
        raise MetricInputError(f"alpha must be strictly between 0 and 0.5; got {alpha}")
    return out


def _both(pool: ThreadPoolExecutor, fn: Callable[[Any], T], x: Any, y: Any) -> tuple[T, T]:
    """``(fn(x), fn(y))``, the first in a worker thread (numpy, Arrow and file reads release the GIL);
    an error of ``fn(x)`` is raised first, as when they run one after the other."""
    first = pool.submit(fn, x)
    try:
        second = fn(y)
    except BaseException:
        first.result()  # (A's error, if it has one, is the one to show)
        raise
    return first.result(), second


def _compare(
    pool: ThreadPoolExecutor,
    a: Any,
    b: Any,
    *,
    metrics: Any,
    unpaired: bool,
    ci: float,
    resamples: int,
    seed: int,
    task: str | Sequence[str] | None,
    positive: str | Mapping[str, str] | None,
    tolerance: float,
    adjust: str,
    margins: list[tuple[str, float]],
    alpha: float,
) -> Comparison:
    ra, rb = _both(pool, lambda src: load(src, tolerance=tolerance, positive=positive), a, b)
    if task is None:
        only_a, only_b = set(ra) - set(rb), set(rb) - set(ra)
        if only_a or only_b:
            raise ComparisonError(
                f"the tasks differ: only in A: {', '.join(sorted(only_a)) or 'none'}; only in B: "
                f"{', '.join(sorted(only_b)) or 'none'} (pass task= to compare one)"
            )
        tasks = list(ra)
    else:
        tasks = select_tasks(ra, task)
        select_tasks(rb, task)
    check_applicable(ra, metrics)
    doc = ComparisonDoc(a=ra.source, b=rb.source, ci=ci, resamples=resamples, seed=seed, tasks={})
    for name in tasks:
        ta, tb = ra[name], rb[name]
        if ta.kind != tb.kind:
            raise ComparisonError(f"task '{name}' is {ta.kind} in A but {tb.kind} in B")
        if isinstance(ta, LabelTask) and isinstance(tb, LabelTask):
            ta, tb = align_labels(ta, tb)
        ta, tb, paired = _pair(ta, tb, unpaired)
        groups = ta.group if ta.group is not None else tb.group
        entries: list[MetricDiff] = []
        tests: list[MarginTest] = []
        cache_a, cache_b = TaskCache(ta), TaskCache(tb)  # each column sorted once for every metric
        for spec in specs_for(ta, metrics):
            metric = spec.metric
            if ta.kind not in metric.kinds or metric.table:
                continue
            params = task_params(metric, dict(spec.params), ta)
            ready = partial(_prepared, metric, params, resamples=resamples, paired=paired, groups=groups)
            pa, pb = _both(pool, ready, (ta, cache_a), (tb, cache_b))
            key = metric_key(metric.name, params)
            s = metric_seed(seed, name, "compare", key)
            res = diff_interval(
                pa,
                pb,
                ci=ci,
                resamples=resamples,
                seed=s,
                paired=paired,
                groups=groups,
                groups_a=ta.group,
                groups_b=tb.group,
            )
            if paired and metric.name in ("accuracy", "exact_match"):
                if groups is None:
                    res.mcnemar = mcnemar(correct_a=_correct(pa), correct_b=_correct(pb))
                else:  # the item McNemar ignores clusters (type I error 30% in simulation): not reported
                    res.mcnemar = clustered_mcnemar(correct_a=_correct(pa), correct_b=_correct(pb), groups=groups)
            extra = diff_notes(pa, pb, res, groups if paired else None, ci, paired)
            entries.append(
                MetricDiff(
                    metric=metric.name,
                    key=key,
                    params=json_params(params),
                    definition=metric.describe(params),
                    higher_is_better=metric.higher_is_better,
                    a=finite_or_none(res.a),
                    b=finite_or_none(res.b),
                    diff=finite_or_none(res.diff),
                    ci_low=finite_or_none(res.low),
                    ci_high=finite_or_none(res.high),
                    p_value=res.p_value,
                    ci=ci,
                    resamples=res.resamples,
                    method=res.method,
                    n=res.n,
                    clusters=res.clusters,
                    mcnemar=None if res.mcnemar is None else McNemar(**res.mcnemar),
                    **extra,
                )
            )
            for test, m in margins:
                found = margin_test(
                    pa,
                    pb,
                    test=test,
                    margin=m,
                    alpha=alpha,
                    higher_is_better=metric.higher_is_better,
                    resamples=resamples,
                    seed=s,
                    paired=paired,
                    groups=groups,
                    groups_a=ta.group,
                    groups_b=tb.group,
                )
                tests.append(MarginTest(metric=metric.name, key=key, **found))
        doc.tasks[name] = TaskComparison(
            kind=ta.kind,
            paired=paired,
            n_a=ta.n,
            n_b=tb.n,
            n=ta.n if paired else None,
            metrics=entries,
            margin_tests=tests if margins else None,
        )
    _adjust_comparison(doc, adjust)
    return Comparison(doc)


def paired_positions(ids_a: np.ndarray, ids_b: np.ndarray) -> np.ndarray | None:
    """For each id of A, the position of the same id in B (ids unique within each side), or None
    when the two sides do not hold the same ids.

    A hash join in Arrow (``pyarrow.compute.index_in``), not a Python dict of a million ids; ids
    Arrow cannot type as one column (ints beside strings) fall back to a dict, which matches the
    same way (``1 == 1.0``, ``1 != "1"``).

    >>> paired_positions(np.array(["b", "c", "a"], dtype=object), np.array(["a", "b", "c"], dtype=object)).tolist()
    [1, 2, 0]
    >>> paired_positions(np.array(["a", "b"], dtype=object), np.array(["a", "z"], dtype=object)) is None
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(ids_a)
    if len(ids_b) != n:
        return None
    try:
        col_a, col_b = pa.array(ids_a), pa.array(ids_b)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        col_a = col_b = None
    if col_a is None or col_b is None or col_a.type != col_b.type:  # mixed id types: match as Python does
        pos = {v: i for i, v in enumerate(ids_b.tolist())}
        if len(pos) != n or any(v not in pos for v in ids_a.tolist()):
            return None
        return np.fromiter((pos[v] for v in ids_a.tolist()), dtype=np.int64, count=n)
    found = pc.index_in(col_a, value_set=col_b)
    if found.null_count:
        return None
    out = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)
    if n and int(np.bincount(out, minlength=n).max()) > 1:  # a repeated id: no one-to-one pairing
        return None
    return out


def _pair(a: TaskData, b: TaskData, unpaired: bool) -> tuple[TaskData, TaskData, bool]:
    """B's items in A's order when both hold the same ids (paired), else A and B as they are when
    ``unpaired``, else a :class:`ComparisonError` with counts and example ids."""
    same_order = _same_arrow_ids(a, b)
    if not same_order:
        ids_a, ids_b = a.ids, b.ids
        same_order = len(ids_a) == len(ids_b) and bool(np.all(ids_a == ids_b))
    if not same_order:
        where = paired_positions(ids_a, ids_b)
        if where is None:
            if unpaired:
                return a, b, False
            set_a, set_b = set(ids_a.tolist()), set(ids_b.tolist())
            only_a, only_b = set_a - set_b, set_b - set_a
            raise ComparisonError(
                f"task '{a.task}': the item sets differ (A has {len(set_a)} items, B has {len(set_b)}; "
                f"{len(only_a)} only in A, e.g. {examples(only_a)}; {len(only_b)} only in B, e.g. "
                f"{examples(only_b)}). A paired comparison needs the same ids; pass --unpaired (unpaired=True) "
                "to compare different item sets."
            )
        b = b.subset(where)
    if unpaired:
        return a, b, False
    same_gold = (
        isinstance(a, LabelTask)
        and isinstance(b, LabelTask)
        and a.labels == b.labels
        and np.array_equal(a.gold_index, b.gold_index)
    )
    if not same_gold:  # (label codes over the same labels: equal codes are equal gold, no strings compared)
        check_gold(a, b)
    check_item_hash(a, b)
    return a, b, True


def _prepared(
    metric: Any,
    params: dict[str, Any],
    side: tuple[TaskData, TaskCache],
    *,
    resamples: int,
    paired: bool,
    groups: np.ndarray | None,
) -> Prepared:
    """One side's prepared metric, with what the paired analytic interval reads of it computed
    (:func:`~labledger.analysis.intervals.diff_ready`): in the side's own thread."""
    prep = prepare_task(metric, params, side[0], side[1])
    return diff_ready(prep, resamples=resamples, paired=paired, groups=groups)


def _same_arrow_ids(a: TaskData, b: TaskData) -> bool:
    """Whether both sides' ids are still Arrow strings (:func:`~labledger.inputs.results.defer_ids`)
    and equal in order: compared in Arrow, without building a million Python strings a side."""
    from labledger.inputs.arrow_buffers import one_array

    ia, ib = deferred_ids(a), deferred_ids(b)
    if ia is None or ib is None or len(ia) != len(ib) or ia.type != ib.type:
        return False
    return bool(one_array(ia).equals(one_array(ib)))


def _adjust_comparison(doc: ComparisonDoc, adjust: str) -> None:
    """``p_adjusted`` on every compared metric (one family over tasks and metrics) and ``family``."""
    tested = [e for body in doc.tasks.values() for e in body.metrics if e.p_value is not None]
    for e, p in zip(tested, adjust_p([e.p_value for e in tested], adjust), strict=True):
        e.p_adjusted = p
    doc.adjust = adjust
    doc.family = family_note(len(tested), adjust) if tested else None
    margins = [t for body in doc.tasks.values() for t in body.margin_tests or () if t.p_value is not None]
    for t, p in zip(margins, adjust_p([t.p_value for t in margins], adjust), strict=True):
        t.p_adjusted = p
    doc.margin_family = family_note(len(margins), adjust) if margins else None


__all__ = ["Comparison", "compare", "paired_positions"]
