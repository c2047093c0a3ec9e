"""Compare two result sets task by task: A - B for each metric with a CI and a p-value.

>>> gold = ["y", "n"] * 30
>>> rows = lambda p: [{"id": i, "task": "t", "gold": g, "pred": p(i, g)} for i, g in enumerate(gold)]
>>> c = compare(rows(lambda i, g: g), rows(lambda i, g: g if i % 4 else "?"), metrics=["exact_match"])
>>> c.metric("t", "exact_match").diff
0.25
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Literal, TypeVar

import msgspec
import numpy as np
import orjson

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
from labledger.analysis.threads import one_blas_thread, pool_initializer
from labledger.errors import ComparisonError, MetricInputError, UnknownNameError
from labledger.inputs.records import finite_or_none
from labledger.inputs.results import (
    TOLERANCE,
    LabelTask,
    RankingTask,
    RegressionTask,
    ResultSet,
    SetTask,
    TaskData,
    deferred_ids,
    load,
)
from labledger.metrics.prepared import MeanPrepared, Prepared, TablePrepared
from labledger.metrics.registry import metric_key
from labledger.metrics.resample import mcnemar
from labledger.metrics.stats import adjust_p, clustered_mcnemar, family_note
from labledger.schema import ComparisonDoc, McNemar, MetricDiff, MetricId, TaskComparison
from labledger.schema.documents import FlippedItem, ItemFlips, MarginTest
from labledger.schema.result import DocumentResult

T = TypeVar("T")


class Comparison(DocumentResult[ComparisonDoc]):
    """The result of :func:`compare`: a typed :class:`~labledger.schema.ComparisonDoc` plus accessors
    (``to_dict()`` is what ``labledger compare --json`` prints)."""

    doc_type = ComparisonDoc

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
    pair_on: str = "item",
    items: bool = False,
    cluster: str | None = None,
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

    ``pair_on``: ``"item"`` (default) pairs on the id and refuses ids whose rows' ``item_hash``
    differs (another prompt or document); ``"doc"`` pairs them on the id anyway when the document is
    the same (:func:`~labledger.analysis.tasks.check_item_hash`), and each task's ``prompts_differ``
    counts them. ``items=True``: each paired task's ``flips`` lists every discordant item
    (:func:`item_flips`: A right and B wrong, and the reverse; regression: by error difference),
    with ``cluster`` limiting the items and their counts to one group value.

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
            pair_on=pair_on,
            items=items,
            cluster=cluster,
        )


def _margins(margin: float | None, equivalence: float | None, alpha: float) -> list[tuple[str, float]]:
    """The margin tests asked for, checked before anything is read: ``[(test, margin), ...]``."""
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
    pair_on: str,
    items: bool,
    cluster: str | None,
) -> Comparison:
    if pair_on not in ("item", "doc"):
        raise MetricInputError(f"pair_on must be 'item' or 'doc'; got {pair_on!r}")
    if (items or cluster is not None) and unpaired:
        raise MetricInputError("the discordant items (items=True, --items) need a paired comparison, not unpaired")
    if cluster is not None and not items:
        raise MetricInputError("cluster= limits the listed items: pass items=True (--items) with it")
    if items:  # rows given as an iterator are read twice (their group values, for each item's cluster)
        a, b = (_rereadable(x) for x in (a, b))
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
    doc = ComparisonDoc(
        a=ra.source,
        b=rb.source,
        ci=ci,
        resamples=resamples,
        seed=seed,
        tasks={},
        pair_on="doc" if pair_on == "doc" else None,
    )
    # a metric whose A and B values equal, item by item, those of one compared before (a
    # harness's alias metrics: HELM's exact_match and prefix_exact_match on one-word answers) is
    # the same test: its result is that one's, and it counts once in the family
    firsts: dict[bytes, tuple[str, MetricDiff, list[MarginTest]]] = {}
    aliases: dict[int, str] = {}  # id(entry) -> the first's label
    for name in tasks:
        ta, tb = ra[name], rb[name]
        if ta.kind != tb.kind:
            raise ComparisonError(f"task '{name}' is {ta.kind} in A but {tb.kind} in B")
        if isinstance(ta, LabelTask) and isinstance(tb, LabelTask):
            ta, tb = align_labels(ta, tb)
        ta, tb, paired, differ = _pair_counted(ta, tb, unpaired, pair_on)
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
            fp = _same_test_key(key, pa, pb, groups, paired) if len(tasks) > 1 else None
            if fp is not None and fp in firsts:
                first_task, first, first_tests = firsts[fp]
                alias = msgspec.structs.replace(first)
                aliases[id(alias)] = first_task
                entries.append(alias)
                tests.extend(msgspec.structs.replace(t) for t in first_tests)
                continue
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
            mine: list[MarginTest] = []
            if fp is not None:
                firsts[fp] = (name, entries[-1], mine)
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
                mine.append(MarginTest(metric=metric.name, key=key, **found))
            tests.extend(mine)
        doc.tasks[name] = TaskComparison(
            kind=ta.kind,
            paired=paired,
            n_a=ta.n,
            n_b=tb.n,
            n=ta.n if paired else None,
            metrics=entries,
            margin_tests=tests if margins else None,
            prompts_differ=differ or None,
            flips=item_flips(ta, tb, sources=(a, b), cluster=cluster) if items else None,
        )
    _adjust_comparison(doc, adjust, aliases)
    return Comparison(doc)


def _same_test_key(key: str, pa: Prepared, pb: Prepared, groups: np.ndarray | None, paired: bool) -> bytes | None:
    """A digest of what a metric's test reads: its key, the per-item values (or count-table cells)
    of A and B, the clusters, and whether it is paired; two metrics with the same digest are one
    test. None for a prepared metric of another form (it is never merged with another).

    >>> from labledger.metrics.prepared import MeanPrepared
    >>> m = lambda v: MeanPrepared(metric="mean", params={}, n=len(v), n_used=len(v), values=np.array(v, dtype=float))
    >>> _same_test_key("mean", m([1, 0]), m([0, 0]), None, True) == _same_test_key("mean", m([1, 0]), m([0, 0]), None, True)
    True
    >>> _same_test_key("mean", m([1, 0]), m([0, 0]), None, True) == _same_test_key("mean", m([0, 1]), m([0, 0]), None, True)
    False
    """
    import hashlib

    h = hashlib.sha256(orjson.dumps([key, paired]))
    for p in (pa, pb):
        if isinstance(p, MeanPrepared):
            h.update(b"mean")
            h.update(np.ascontiguousarray(p.values, dtype=np.float64).tobytes())
            h.update(b"-" if p.mask is None else np.ascontiguousarray(p.mask, dtype=bool).tobytes())
        elif isinstance(p, TablePrepared):
            h.update(f"table{p.n_cells}".encode())
            h.update(np.ascontiguousarray(p.get_cells(), dtype=np.int64).tobytes())
        else:
            return None
    h.update(b"-" if groups is None else np.ascontiguousarray(groups, dtype=np.int64).tobytes())
    return h.digest()


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


def _pair(a: TaskData, b: TaskData, unpaired: bool, pair_on: str = "item") -> tuple[TaskData, TaskData, bool]:
    """B's items in A's order when both hold the same ids (paired), else A and B as they are when
    ``unpaired``, else a :class:`ComparisonError` with counts and example ids."""
    return _pair_counted(a, b, unpaired, pair_on)[:3]


def _pair_counted(a: TaskData, b: TaskData, unpaired: bool, pair_on: str) -> tuple[TaskData, TaskData, bool, int]:
    """:func:`_pair` and how many paired items' ``item_hash`` differ (accepted by ``pair_on="doc"``)."""
    same_order = _same_arrow_ids(a, b)
    if not same_order:
        ids_a, ids_b = a.ids, b.ids
        same_order = len(ids_a) == len(ids_b) and bool(np.all(ids_a == ids_b))
    if not same_order:
        where = paired_positions(ids_a, ids_b)
        if where is None:
            if unpaired:
                return a, b, False, 0
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
        return a, b, False, 0
    same_gold = (
        isinstance(a, LabelTask)
        and isinstance(b, LabelTask)
        and a.labels == b.labels
        and np.array_equal(a.gold_index, b.gold_index)
    )
    if not same_gold:  # (label codes over the same labels: equal codes are equal gold, no strings compared)
        check_gold(a, b)
    return a, b, True, check_item_hash(a, b, pair_on)


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


#: Extra row fields shown as an item's text, the first one a row has (``compare --items``).
PROMPT_FIELDS = ("prompt", "doc", "input")
#: Extra row fields holding a model's output text, the first one a row has.
OUTPUT_FIELDS = ("prediction", "output")


def item_flips(
    a: TaskData, b: TaskData, *, sources: tuple[Any, Any] | None = None, cluster: str | None = None
) -> ItemFlips | None:
    """The discordant items of a paired task (B's items in A's order, as :func:`compare` pairs them).

    Label, match and set tasks (``basis="correct"``): the items A has right and B wrong
    (``better="a"``) and the reverse, each in A's row order. Regression tasks (``basis="error"``):
    every item whose absolute errors differ, the one with the smaller error better, largest
    difference first; "flipped" is not defined for values, so this lists where the two differ most.
    Ranking tasks: ``None`` (no per-item right or wrong).

    ``sources``: the two sides as given to :func:`compare` (paths or lists of rows), read back at the
    items' lines for their group values (the loaded task keeps cluster codes only); without them, or
    for a :class:`~labledger.inputs.results.ResultSet`, ``cluster`` is ``None`` on every item.
    ``cluster``: only the items of that group value, counted and listed.

    >>> from labledger.inputs.results import results_from_rows
    >>> a = [{"id": i, "task": "t", "gold": "y", "pred": p} for i, p in enumerate("yyn")]
    >>> b = [{"id": i, "task": "t", "gold": "y", "pred": p} for i, p in enumerate("ynn")]
    >>> f = item_flips(results_from_rows(a)["t"], results_from_rows(b)["t"])
    >>> f.a_better, f.b_better, [(x.id, x.pred_a, x.pred_b) for x in f.items]
    (1, 0, [('1', 'y', 'n')])
    """
    if isinstance(a, RankingTask) or isinstance(b, RankingTask):
        return None
    scored = _discordant(a, b)
    if scored is None:
        return None
    basis, a_idx, b_idx, show, weight = scored
    values = _cluster_values(a, b, sources)
    if cluster is not None:
        keep = np.fromiter((str(v) == cluster for v in _check_cluster(a, values, cluster)), dtype=bool, count=a.n)
        a_idx, b_idx = a_idx[keep[a_idx]], b_idx[keep[b_idx]]
    at = np.concatenate([a_idx, b_idx]).astype(np.int64)
    better = np.array(["a"] * len(a_idx) + ["b"] * len(b_idx), dtype=object)
    if weight is not None:  # regression: the largest error difference first
        order = np.argsort(-weight[at], kind="stable")
        at, better = at[order], better[order]
    pos = at.tolist()
    extra_a, extra_b = a.extras, b.extras
    prompt = next((f for f in PROMPT_FIELDS if f in extra_a), None)
    prompt_b = next((f for f in PROMPT_FIELDS if f in extra_b), None)
    out_a = next((f for f in OUTPUT_FIELDS if f in extra_a), None)
    out_b = next((f for f in OUTPUT_FIELDS if f in extra_b), None)
    given = {  # each extra column read once (a lazy Arrow column becomes a list on first access)
        "prompt": extra_a[prompt] if prompt else None,
        "prompt_b": extra_b[prompt_b] if prompt_b else None,
        "target": extra_a.get("target"),
        "output_a": extra_a[out_a] if out_a else None,
        "output_b": extra_b[out_b] if out_b else None,
    }
    fields = show(at)
    fields.update({k: [c[i] for i in pos] for k, c in given.items() if c is not None})
    if "prompt_b" in fields and "prompt" in fields:  # B's prompt only where it differs from A's
        fields["prompt_b"] = [None if x == y else y for x, y in zip(fields["prompt"], fields["prompt_b"])]
    fields["id"] = [str(v) for v in a.ids[at].tolist()]
    fields["better"] = better.tolist()
    if values is not None:
        fields["cluster"] = [values[i] for i in pos]
    names = list(fields)
    listed = [FlippedItem(**dict(zip(names, row))) for row in zip(*fields.values())]
    return ItemFlips(basis=basis, a_better=len(a_idx), b_better=len(b_idx), cluster=cluster, items=listed)


#: ``(basis, A-better positions, B-better positions, positions -> their gold and predictions as
#: lists, the weight that orders the items or None)``
_Discordant = tuple[
    Literal["correct", "error"], np.ndarray, np.ndarray, Callable[[np.ndarray], dict[str, list[Any]]], np.ndarray | None
]


def _discordant(a: TaskData, b: TaskData) -> _Discordant | None:
    """The discordant items of a label, set or regression task (see :func:`item_flips`)."""
    if isinstance(a, LabelTask) and isinstance(b, LabelTask):
        right_a, right_b = a.gold_index == a.pred_index, b.gold_index == b.pred_index
        labels_a, labels_b = np.asarray(a.labels, dtype=object), np.asarray(b.labels, dtype=object)

        def show_label(at: np.ndarray) -> dict[str, list[Any]]:
            return {
                "gold": labels_a[a.gold_index[at]].tolist(),
                "pred_a": labels_a[a.pred_index[at]].tolist(),
                "pred_b": labels_b[b.pred_index[at]].tolist(),
            }

        return "correct", np.flatnonzero(right_a & ~right_b), np.flatnonzero(~right_a & right_b), show_label, None
    if isinstance(a, SetTask) and isinstance(b, SetTask):
        right_a = np.fromiter((g == p for g, p in zip(a.gold_items, a.pred_items)), dtype=bool, count=a.n)
        right_b = np.fromiter((g == p for g, p in zip(b.gold_items, b.pred_items)), dtype=bool, count=b.n)

        def show_set(at: np.ndarray) -> dict[str, list[Any]]:  # (the items are kept as canonical JSON text)
            def items(sets: list[frozenset[str]]) -> list[Any]:
                return [[orjson.loads(x) for x in sorted(sets[i])] for i in at.tolist()]

            return {"gold": items(a.gold_items), "pred_a": items(a.pred_items), "pred_b": items(b.pred_items)}

        return "correct", np.flatnonzero(right_a & ~right_b), np.flatnonzero(~right_a & right_b), show_set, None
    if isinstance(a, RegressionTask) and isinstance(b, RegressionTask):
        err_a = np.abs(np.asarray(a.pred_value, dtype=np.float64) - a.gold_value)
        err_b = np.abs(np.asarray(b.pred_value, dtype=np.float64) - b.gold_value)
        d = err_b - err_a  # > 0: A's error smaller (nan, from a missing value: neither)

        def show_value(at: np.ndarray) -> dict[str, list[Any]]:
            def finite(v: np.ndarray) -> list[Any]:
                return [x if math.isfinite(x) else None for x in np.asarray(v, dtype=np.float64)[at].tolist()]

            return {
                "gold": finite(a.gold_value),
                "pred_a": finite(a.pred_value),
                "pred_b": finite(b.pred_value),
                "error_a": finite(err_a),
                "error_b": finite(err_b),
            }

        return "error", np.flatnonzero(d > 0), np.flatnonzero(d < 0), show_value, np.abs(d)
    return None


def _rereadable(source: Any) -> Any:
    """``source`` as something :func:`item_flips` can read rows of again: an iterator of rows becomes
    a list; paths, lists and result sets are kept."""
    if isinstance(source, (str, os.PathLike, ResultSet, Sequence, Mapping)):
        return source
    return list(source)


def _cluster_values(a: TaskData, b: TaskData, sources: tuple[Any, Any] | None) -> list[Any] | None:
    """Each item's group value in A's order, read back from the side whose clusters the comparison
    used (A's, else B's); ``None`` when neither has clusters or the rows cannot be read again."""
    side, source = (a, sources[0] if sources else None) if a.group is not None else (b, sources[1] if sources else None)
    if side.group is None or source is None:
        return None
    codes = side.group
    if not len(codes):
        return []
    _, first = np.unique(codes, return_index=True)  # one item of each cluster
    lines = side.lines[first].tolist()
    found = _group_at(source, lines)
    if found is None:
        return None
    by_code = dict(zip(codes[first].tolist(), found))
    return [by_code[c] for c in codes.tolist()]


def _group_at(source: Any, lines: list[int]) -> list[Any] | None:
    """The ``group`` field of the rows at 1-based ``lines`` of ``source`` (a results file or a list of
    rows), or ``None`` for a source with no rows to read (a result set)."""
    if isinstance(source, (str, os.PathLike)):
        # the file the result set was read from, its lines numbered as the reader numbers them
        with open(source, "rb") as fh:
            raw = fh.read().split(b"\n")
        return [orjson.loads(raw[ln - 1]).get("group") for ln in lines]
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        return [source[ln - 1].get("group") if isinstance(source[ln - 1], Mapping) else None for ln in lines]
    return None


def _check_cluster(td: TaskData, values: list[Any] | None, cluster: str) -> list[Any]:
    """``values``, or an error when the task has no cluster ``cluster`` (naming the ones it has)."""
    if values is None:
        raise ComparisonError(
            f"task '{td.task}': no cluster values to filter by (the rows have no group field, or were given as "
            "a result set, whose group values are not kept)"
        )
    known = sorted({str(v) for v in values if v is not None})
    if cluster not in known:
        raise UnknownNameError(f"cluster of task '{td.task}'", cluster, known)
    return values


def _adjust_comparison(doc: ComparisonDoc, adjust: str, aliases: Mapping[int, str] | None = None) -> None:
    """``p_adjusted`` on every compared metric (one family over tasks and metrics) and ``family``.

    ``aliases``: the entries (by ``id``) that repeat, item by item, the values of a metric compared
    before them (named by its task); each takes that metric's result and adjusted p and is not a
    test of its own in the family, and ``family`` names them."""
    aliases = aliases or {}
    tested = [e for body in doc.tasks.values() for e in body.metrics if e.p_value is not None]
    own = [e for e in tested if id(e) not in aliases]
    adjusted = dict(zip((id(e) for e in own), adjust_p([e.p_value for e in own], adjust), strict=True))
    first_of = {(t, e.key): e for t, body in doc.tasks.items() for e in body.metrics if id(e) not in aliases}
    for body in doc.tasks.values():
        for e in body.metrics:
            if e.p_value is None:
                continue
            src = first_of[(aliases[id(e)], e.key)] if id(e) in aliases else e
            e.p_adjusted = adjusted[id(src)]
    doc.adjust = adjust
    doc.family = family_note(len(own), adjust) if tested else None
    same = [(t, e, aliases[id(e)]) for t, body in doc.tasks.items() for e in body.metrics if id(e) in aliases]
    if doc.family and same:
        names = ", ".join(f"{t} = {first}" for t, _, first in same[:8]) + (", ..." if len(same) > 8 else "")
        doc.family += (
            f" ({len(tested)} compared metrics: {len(same)} with the same values as another on every item, "
            f"A and B, counted as its one test: {names})"
        )
    margins = [t for body in doc.tasks.values() for t in body.margin_tests or () if t.p_value is not None]
    for t, p in zip(margins, adjust_p([t.p_value for t in margins], adjust), strict=True):
        t.p_adjusted = p
    doc.margin_family = family_note(len(margins), adjust) if margins else None


__all__ = ["Comparison", "compare", "item_flips", "paired_positions"]
