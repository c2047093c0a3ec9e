"""What :func:`~labledger.analysis.evaluation.evaluate` and :func:`~labledger.analysis.comparison.compare`
share: the default and headline metrics of each task kind, binding a metric to a task's data
(:func:`task_params`, :func:`prepare_task`), choosing tasks and metrics, and the checks that two
result sets hold the same items before they are paired.

>>> from labledger.inputs.results import results_from_rows
>>> rs = results_from_rows([{"id": i, "task": "t", "gold": "a" if i % 2 else "b", "pred": "a"} for i in range(4)])
>>> [str(spec) for spec in specs_for(rs["t"], None)][:2], HEADLINE[rs["t"].kind]
(['exact_match'], 'exact_match')
"""

from __future__ import annotations

import math
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from labledger.errors import ComparisonError, MetricInputError, UnknownNameError
from labledger.inputs.results import (
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
)
from labledger.metrics.classification import (
    ColumnSort,
    Sorts,
    binary_prepared,
    column_sort,
    label_prepared,
    prob_prepared,
    probs_column,
    ranked_columns,
    resolve_average,
)
from labledger.metrics.kernels import element_spans
from labledger.metrics.prepared import MeanPrepared, Prepared, cell_codes
from labledger.metrics.ranking import RankingArrays, exact_match_prepared, ranking_prepared, set_f1_values
from labledger.metrics.registry import Metric, MetricSpec, parse_metric
from labledger.metrics.regression import regression_prepared
from labledger.metrics.usage import field_prepared
from labledger.schema import MetricId

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


def metric_seed(seed: int, *parts: str) -> list[int]:
    """A reproducible seed for one (task, slice, metric): adding a metric never changes another's CI."""
    return [int(seed)] + [zlib.crc32(p.encode()) for p in parts]


def json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in params.items()}


# ------------------------------------------------------------------------------------------------
# Binding a metric to a task


def labels_of(td: TaskData) -> tuple[str, ...]:
    """The task's labels (none for a task without labels)."""
    return td.labels if isinstance(td, LabelTask) else ()


def positive_of(td: TaskData) -> str | None:
    """The task's positive label, when it has one."""
    return td.positive if isinstance(td, ProbTask) else None


def task_params(metric: Metric, params: Mapping[str, Any], td: TaskData) -> dict[str, Any]:
    """The metric's parameters resolved for ``td`` (``auto``/``None`` filled from the task)."""
    p = metric.resolve(params)
    labels = labels_of(td)
    if "pos_label" in p:
        if p["pos_label"] is not None:
            p["pos_label"] = str(p["pos_label"]) if not isinstance(p["pos_label"], str) else p["pos_label"]
            if p["pos_label"] not in labels:
                raise UnknownNameError(
                    f"label of task '{td.task}' (pos_label of {metric.name})", p["pos_label"], labels
                )
        elif "average" in p and p["average"] in ("auto", "binary"):
            p["pos_label"] = positive_of(td)
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


class TaskCache:
    """Per-task inputs shared by several metrics (the flattened ranking arrays, the count table, and
    each probability column's sort: ROC-AUC and average precision sort a column once), each made
    once. Safe to share between the threads that compute a task's metrics
    (:data:`labledger.analysis.evaluation.PARALLEL_FROM`), which make each column's sort in a job
    of its own before the metrics that read it start."""

    def __init__(self, td: TaskData):
        self.td = td
        self._ranking: RankingArrays | None = None
        # the orders the reader made or read from a cache entry with their ties (used as they are),
        # and any other given order (checked on use): each taken once, by its column's sort
        ties = given_ties(td)
        self._given = {j: (order, ties[j]) if j in ties else order for j, order in given_sorts(td).items()}
        self._sorts: dict[int, ColumnSort] = {}
        self._cells: tuple[np.ndarray | None, np.ndarray] | None = None
        self._lock = threading.Lock()

    def cells(self, td: LabelTask) -> tuple[np.ndarray | None, np.ndarray]:
        """``gold * K + pred`` of the cached task and its count table, built once for all its
        count-table metrics. Without clusters the table is all they read, so it is counted a
        block of items at a time and the per-item cells are not kept (``None``: a metric that needs
        them builds them from its gold and predicted codes): an array of n less for the whole
        evaluation. With clusters the resamples draw items, so the cells are
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

    def columns(self, metric: Metric, params: Mapping[str, Any]) -> tuple[int, ...]:
        """The probability columns whose sorts ``metric`` reads (:func:`~labledger.metrics.classification.ranked_columns`)."""
        td = self.td
        if not isinstance(td, ProbTask):
            return ()
        pos = td.labels.index(params["pos_label"]) if params.get("pos_label") is not None else None
        return ranked_columns(metric.name, params, len(td.labels), pos)

    def sort(self, j: int) -> ColumnSort:
        """Column ``j``'s sort (:func:`~labledger.metrics.classification.column_sort`: a given order
        as its reader gave it), made on the first call: one caller a column at a time (the
        evaluation's job for the column, before the metrics that read it start)."""
        found = self._sorts.get(j)
        if found is None:
            td = self.td
            assert isinstance(td, ProbTask)
            # (a binary task's P(positive) from its score: its probs may never be made)
            column = (
                td.score
                if td.kind == "binary" and td.score is not None and td.positive in td.labels[j : j + 1]
                else lambda: probs_column(td.probs, j)
            )
            found = self._sorts[j] = column_sort(column, td.gold_index == j, self._given.pop(j, None))
        return found

    def sorts(self, metric: Metric, params: Mapping[str, Any]) -> Sorts:
        """The sorts of the columns ``metric`` reads, by column (:meth:`sort`)."""
        return {j: self.sort(j) for j in self.columns(metric, params)}

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


def prepare_task(metric: Metric, params: dict[str, Any], td: TaskData, cache: TaskCache | None = None) -> Prepared:
    """A prepared metric (:mod:`labledger.metrics.prepared`) for ``metric`` on task data ``td``
    with resolved ``params``."""
    if td.kind not in metric.kinds:
        raise _not_for(metric, td)
    cache = cache or TaskCache(td)
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
        sorts = cache.sorts(metric, params)
        if td.kind == "binary" and td.score is not None and td.positive in td.labels:
            # from the score: the (n, 2) probs of a binary task are then never made
            found = binary_prepared(
                metric.name,
                params,
                td.gold_index,
                td.score,
                td.labels.index(td.positive),
                td.pred_index,
                pos_label=pos,
                sorts=sorts,
            )
            if found is not None:
                return found
        return prob_prepared(
            metric.name, params, td.gold_index, td.probs, td.labels, pos=pos, pred=td.pred_index, sorts=sorts
        )
    if metric.needs == "values":
        if not isinstance(td, RegressionTask):
            raise _not_for(metric, td)
        return regression_prepared(metric.name, params, td.gold_value, td.pred_value)
    if metric.needs == "ranking":
        if not isinstance(td, RankingTask):
            raise _not_for(metric, td)
        return ranking_prepared(metric.name, params, cache.ranking(td))
    if metric.needs == "fields":  # a numeric field of the rows (cost, tokens, latency)
        field = params.get("field")
        if field is not None and field not in td.extras:
            have = ", ".join(sorted(td.extras)) or "none"
            raise MetricInputError(f"task '{td.task}' has no field '{field}' in its rows (extra fields: {have})")
        return field_prepared(metric.name, params, td.extras[field] if field is not None else [])
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


def specs_for(td: TaskData, metrics: Any) -> list[MetricSpec]:
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


def check_applicable(rs: ResultSet, metrics: Any) -> None:
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


def select_tasks(rs: ResultSet, task: str | Sequence[str] | None) -> list[str]:
    if task is None:
        return list(rs)
    wanted = [task] if isinstance(task, str) else list(task)
    for t in wanted:
        rs[t]  # raises UnknownNameError with suggestions
    return wanted


def examples(ids: Iterable[str], k: int = 5) -> str:
    shown = sorted(ids)[:k]
    return ", ".join(repr(i) for i in shown) if shown else "none"


def align_labels(a: LabelTask, b: LabelTask) -> tuple[LabelTask, LabelTask]:
    """Both tasks re-expressed over the union of their labels (matched by name, never position)."""
    if a.labels == b.labels:
        return a, b
    if a.kind == "binary" and positive_of(a) != positive_of(b):
        raise ComparisonError(f"task '{a.task}': A's positive label is {positive_of(a)!r}, B's is {positive_of(b)!r}")
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


def check_item_hash(a: TaskData, b: TaskData, pair_on: str = "item") -> int:
    """Refuse pairs whose documents differ: rows may carry ``item_hash`` (a harness's document identity,
    e.g. lm-eval's ``doc_hash/prompt_hash``); where both sides have one for a paired id, they must match.

    ``pair_on="doc"`` pairs on the id even where the hashes differ (the same documents asked with
    another few-shot seed or shot count) and returns how many paired items differ; a hash in two
    parts (``doc/prompt``) must still agree on its first, the document's. The error names the part
    that differs and shows both hashes from where they part, not two equal-looking prefixes.

    >>> from labledger.inputs.results import results_from_rows
    >>> rows = lambda p: [{"id": 1, "task": "t", "gold": "a", "pred": "a", "item_hash": f"d1/{p}"}]
    >>> a, b = results_from_rows(rows("p1"))["t"], results_from_rows(rows("p2"))["t"]
    >>> check_item_hash(a, b, "doc")
    1
    """
    if pair_on not in ("item", "doc"):
        raise MetricInputError(f"pair_on must be 'item' or 'doc'; got {pair_on!r}")
    if "item_hash" not in a.extras or "item_hash" not in b.extras:
        return 0
    ha, hb = list(a.extras["item_hash"]), list(b.extras["item_hash"])
    diff = [i for i, (x, y) in enumerate(zip(ha, hb)) if x is not None and y is not None and x != y]
    if not diff:
        return 0
    if pair_on == "doc":
        docs = [i for i in diff if _doc_part(ha[i]) is not None and _doc_part(ha[i]) != _doc_part(hb[i])]
        if not docs:
            return len(diff)
        i = docs[0]
        raise ComparisonError(
            f"task '{a.task}': the documents differ between A and B for {len(docs)} paired items (e.g. id "
            f"{a.ids[i]!r}: {hash_difference(ha[i], hb[i])}); --pair-on doc pairs the same documents asked "
            "with other prompts, not other documents"
        )
    i = diff[0]
    raise ComparisonError(
        f"task '{a.task}': the documents differ between A and B for {len(diff)} paired items (e.g. id "
        f"{a.ids[i]!r}: {hash_difference(ha[i], hb[i])}); a changed prompt or document is a different item: pass "
        "--pair-on doc (pair_on='doc') to pair the same documents asked with other prompts"
    )


def _doc_part(h: Any) -> str | None:
    """The document part of a two-part ``doc/prompt`` item hash (lm-eval's), else ``None``."""
    if not isinstance(h, str):
        return None
    parts = h.split("/")
    return parts[0] if len(parts) == 2 else None


def hash_difference(x: Any, y: Any) -> str:
    """Where two item hashes differ, in words: the part (document or prompt) of a ``doc/prompt``
    hash, and both values from the first character that differs (a few shared characters before
    it), so that two hashes with a common prefix never look alike.

    >>> hash_difference("aa11/0123456789abcdef", "aa11/0123456789ab0000")
    "same document hash ('aa11'), the prompt hash differs: A '…89abcdef', B '…89ab0000'"
    >>> hash_difference("abcdef", "abcxyz")
    "item_hash A 'abcdef', B 'abcxyz'"
    """
    if isinstance(x, str) and isinstance(y, str):
        px, py = x.split("/"), y.split("/")
        if len(px) == 2 and len(py) == 2:
            if px[0] == py[0]:
                return (
                    f"same document hash ({_short(px[0][:12])}), the prompt hash differs: "
                    f"{_from_difference(px[1], py[1])}"
                )
            return f"the document hash differs: {_from_difference(px[0], py[0])}"
    return f"item_hash {_from_difference(x, y)}"


def _from_difference(x: Any, y: Any, width: int = 12, before: int = 4) -> str:
    """``A '…x', B '…y'``: both strings from a few characters before their first difference."""
    sx, sy = str(x), str(y)
    k = next((i for i, (p, q) in enumerate(zip(sx, sy)) if p != q), min(len(sx), len(sy)))
    start = max(0, k - before)
    lead = "…" if start else ""

    def cut(s: str) -> str:
        part = s[start : start + width]
        return repr(lead + part + ("…" if len(s) > start + width else ""))

    return f"A {cut(sx)}, B {cut(sy)}"


def check_gold(a: TaskData, b: TaskData) -> None:
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


__all__ = [
    "DEFAULT_METRICS",
    "HEADLINE",
    "TaskCache",
    "align_labels",
    "check_applicable",
    "check_gold",
    "check_item_hash",
    "examples",
    "find_metric",
    "hash_difference",
    "json_params",
    "labels_of",
    "metric_seed",
    "positive_of",
    "prepare_task",
    "select_tasks",
    "specs_for",
    "task_params",
]
