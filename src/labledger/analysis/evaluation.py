"""Evaluate result sets and compare two of them: metrics with definitions, bootstrap CIs, slices.

>>> rows = [{"id": i, "task": "t", "gold": "yes" if i % 3 else "no",
...          "probs": {"yes": 0.8, "no": 0.2} if i % 2 else {"yes": 0.3, "no": 0.7}} for i in range(60)]
>>> ev = evaluate(rows, metrics=["accuracy"], resamples=200)
>>> ev.value("t", "accuracy")
0.5
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from labledger.errors import ComparisonError, MetricInputError, UnknownNameError
from labledger.inputs.results import TOLERANCE, ResultSet, TaskData, load
from labledger.metrics.classification import label_prepared, prob_prepared, resolve_average
from labledger.metrics.ranking import RankingArrays, exact_match_prepared, ranking_prepared, set_f1_values
from labledger.metrics.registry import Metric, MetricSpec, Prepared, metric_key, parse_metric
from labledger.metrics.regression import regression_prepared
from labledger.metrics.resample import bootstrap_samples, interval, mcnemar, paired_bootstrap, unpaired_bootstrap
from labledger.metrics.stats import (
    MIN_CLUSTERS,
    bca_interval,
    clustered_mcnemar,
    coverage_note,
    jackknife_values,
    mde_from_se,
    mean_interval,
    refuse_degenerate,
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


def _num(x: Any) -> Any:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ------------------------------------------------------------------------------------------------
# Binding a metric to a task


def task_params(metric: Metric, params: Mapping[str, Any], td: TaskData) -> dict[str, Any]:
    """The metric's parameters resolved for ``td`` (``auto``/``None`` filled from the task)."""
    p = metric.resolve(params)
    if "pos_label" in p:
        if p["pos_label"] is not None:
            p["pos_label"] = str(p["pos_label"]) if not isinstance(p["pos_label"], str) else p["pos_label"]
            if p["pos_label"] not in td.labels:
                raise UnknownNameError(
                    f"label of task '{td.task}' (pos_label of {metric.name})", p["pos_label"], td.labels
                )
        elif "average" in p and p["average"] in ("auto", "binary"):
            p["pos_label"] = td.positive
        p = resolve_average(p, p["pos_label"] is not None)
        if p.get("average") == "binary" and p["pos_label"] is None:
            raise MetricInputError(
                f"{metric.name}[average=binary] on task '{td.task}' needs pos_label (labels: {', '.join(td.labels)})"
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
    """Per-task inputs shared by several metrics (the flattened ranking arrays)."""

    def __init__(self, td: TaskData):
        self.td = td
        self._ranking: RankingArrays | None = None

    @property
    def ranking(self) -> RankingArrays:
        if self._ranking is None:
            self._ranking = RankingArrays(self.td.gold_relevance, self.td.scores)
        return self._ranking


def prepare_task(metric: Metric, params: dict[str, Any], td: TaskData, cache: _TaskCache | None = None) -> Prepared:
    """A :class:`Prepared` for ``metric`` on task data ``td`` with resolved ``params``."""
    if td.kind not in metric.kinds:
        raise MetricInputError(
            f"metric '{metric.name}' does not apply to task '{td.task}' ({td.kind}); "
            f"it needs a {' or '.join(metric.kinds)} task"
        )
    cache = cache or _TaskCache(td)
    pos = td.labels.index(params["pos_label"]) if params.get("pos_label") is not None else None
    if metric.needs == "labels":
        return label_prepared(metric.name, params, td.gold_index, td.pred_index, td.labels, pos=pos)
    if metric.needs == "probs":
        return prob_prepared(metric.name, params, td.gold_index, td.probs, td.labels, pos=pos, pred=td.pred_index)
    if metric.needs == "values":
        return regression_prepared(metric.name, params, td.gold_value, td.pred_value)
    if metric.needs == "ranking":
        return ranking_prepared(metric.name, params, cache.ranking)
    if metric.name == "set_f1":
        return Prepared(
            metric="set_f1",
            params=params,
            n=td.n,
            n_used=td.n,
            strategy="mean",
            values=set_f1_values(td.gold_items, td.pred_items),
        )
    if metric.name == "exact_match":
        if td.kind == "sets":
            hits = np.fromiter((g == p for g, p in zip(td.gold_items, td.pred_items)), dtype=np.float64, count=td.n)
        else:
            hits = (td.gold_index == td.pred_index).astype(np.float64)
        return exact_match_prepared(params, hits)
    raise MetricInputError(f"metric '{metric.name}' cannot be bound to task '{td.task}'")


#: Metrics without a count-table or mean form (ROC-AUC, AP, ECE, Pearson, Spearman...) are recomputed on
#: every resample: n x resamples item-draws. Past this many draws the number of resamples is reduced
#: (never below MIN_RESAMPLES), and the stored value says so (``resamples``, ``resamples_requested``).
#: At 1M items that is 200 resamples: seconds instead of a minute. None: no cap.
ITEM_RESAMPLE_BUDGET: float | None = 2e8
MIN_RESAMPLES = 200


def resamples_for(
    prep: Prepared, resamples: int, groups: np.ndarray | None = None, *, budget: float | None = ITEM_RESAMPLE_BUDGET
) -> int:
    """How many bootstrap resamples a prepared metric gets (see :data:`ITEM_RESAMPLE_BUDGET`).

    >>> from labledger.metrics import prepare
    >>> resamples_for(prepare("accuracy", gold=[0, 1] * 10, pred=[0, 1] * 10), 1000)
    1000
    """
    if not resamples or budget is None or prep.strategy != "weights":
        return resamples
    # clusters are expanded to item weights, so the cost is items x resamples either way
    if prep.n * resamples <= budget:
        return resamples
    return max(min(resamples, MIN_RESAMPLES), int(budget // max(prep.n, 1)))


def _value_entry(metric: Metric, params: dict[str, Any], iv, *, extra: Mapping[str, Any] | None = None) -> dict:
    return {
        "metric": metric.name,
        "key": metric_key(metric.name, params),
        "params": _json_params(params),
        "definition": metric.describe(params),
        "higher_is_better": metric.higher_is_better,
        "value": _num(iv.value),
        "ci_low": _num(iv.low),
        "ci_high": _num(iv.high),
        "ci": iv.ci,
        "resamples": iv.resamples,
        "method": iv.method,
        "n": iv.n,
        "clusters": iv.clusters,
        "undefined_resamples": iv.undefined_resamples,
        **(extra or {}),
    }


def _entry(entries: list[dict[str, Any]], task: str, key: str) -> dict[str, Any]:
    """The one entry whose ``key`` is ``key``, else the one whose bare metric name is ``key``."""
    found = [e for e in entries if e["key"] == key] or [e for e in entries if e["metric"] == key]
    if len(found) != 1:
        raise UnknownNameError(f"metric of task '{task}'", key, [e["key"] for e in entries])
    return found[0]


# ------------------------------------------------------------------------------------------------
# evaluate


class Evaluation:
    """The result of :func:`evaluate`: a JSON-ready document plus accessors."""

    def __init__(self, document: dict[str, Any]):
        self.document = document

    def to_dict(self) -> dict[str, Any]:
        """The evaluation as one JSON-ready dict (what ``labledger eval --json`` prints)."""
        return self.document

    @property
    def tasks(self) -> dict[str, Any]:
        return self.document["tasks"]

    def metric(self, task: str, key: str, *, slice: str | None = None) -> dict[str, Any]:
        """The stored entry of metric ``key`` (``f1[average=macro]`` or a bare name when unique)."""
        body = self.tasks[task]
        if slice is not None:
            fld, _, val = slice.partition("=")
            body = body["slices"][fld][val]
        return _entry(body["metrics"], task, key)

    def value(self, task: str, key: str, *, slice: str | None = None) -> float | None:
        """The value of metric ``key`` for ``task`` (optionally in slice ``field=value``)."""
        return self.metric(task, key, slice=slice)["value"]

    def __repr__(self) -> str:
        return f"Evaluation({self.document.get('source')!r}, tasks={list(self.tasks)})"


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
) -> tuple[list[dict], dict[str, Any], dict[str, np.ndarray]]:
    """Scalar metric entries, table sections (per_class, confusion_matrix) and kept samples."""
    cache = _TaskCache(td)
    entries: list[dict] = []
    tables: dict[str, Any] = {}
    samples: dict[str, np.ndarray] = {}
    seen: set[str] = set()
    for spec in specs:
        metric = spec.metric
        if td.kind not in metric.kinds:
            continue
        params = task_params(metric, dict(spec.params), td)
        key = metric_key(metric.name, params)
        if key in seen:
            continue
        seen.add(key)
        prep = prepare_task(metric, params, td, cache)
        if metric.name == "confusion_matrix":
            if where == "":
                counts = prep.value()
                k = len(td.labels)
                tables["confusion_matrix"] = {
                    "labels": list(td.labels),
                    "rows": "gold",
                    "columns": "pred",
                    "matrix": np.asarray(list(counts.values())).reshape(k, k).astype(int).tolist(),
                    "definition": metric.describe(params),
                }
            continue
        if metric.name == "per_class" and where != "":
            continue
        used = resamples_for(prep, resamples, td.group, budget=budget)
        draws = bootstrap_samples(prep, resamples=used, seed=_seed(seed, td.task, where, key), groups=td.group)
        iv = interval(prep, prep.value(), draws, ci=ci, resamples=used, groups=td.group)
        if metric.name != "per_class":
            stats_extra = _interval_stats(prep, iv, td.group, ci, draws)
        if metric.name == "per_class":
            rows = []
            for lab in td.labels:
                row: dict[str, Any] = {"label": lab, "support": int(iv[f"support[{lab}]"].value)}
                for stat in ("precision", "recall", "f1"):
                    c = iv[f"{stat}[{lab}]"]
                    row[stat] = {"value": _num(c.value), "ci_low": _num(c.low), "ci_high": _num(c.high)}
                rows.append(row)
            tables["per_class"] = {
                "definition": metric.describe(params),
                "params": _json_params(params),
                "ci": ci,
                "resamples": resamples,
                "method": iv[next(iter(iv))].method,
                "labels": rows,
            }
            continue
        entries.append(
            _value_entry(
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
        )
        if keep is not None and key in keep and draws is not None:
            samples[key] = draws
    return entries, tables, samples


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
    rs = load(source, tolerance=tolerance, positive=positive)
    tasks = _select_tasks(rs, task)
    _check_applicable(rs, metrics)
    fields = [by] if isinstance(by, str) else list(by or [])
    if fields and not any(f in rs[t].slice_columns for t in tasks for f in fields):
        known = sorted({f for t in tasks for f in rs[t].slice_columns})
        raise UnknownNameError("slice field", fields[0], known)
    doc: dict[str, Any] = {
        "kind": "evaluation",
        "version": 1,
        "source": rs.source,
        "n": sum(rs[t].n for t in tasks),
        "ci": ci,
        "resamples": resamples,
        "seed": seed,
        "by": fields,
        "tasks": {},
    }
    headline_samples: dict[str, tuple[dict, np.ndarray | None]] = {}
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
        body: dict[str, Any] = {
            "kind": td.kind,
            "n": td.n,
            "labels": list(td.labels) or None,
            "positive": td.positive,
            "clusters": None if td.group is None else int(td.group.max()) + 1,
            "headline": head_key,
            "metrics": entries,
            **tables,
        }
        if head_key:
            entry = next((e for e in entries if e["key"] == head_key), None)
            if entry is not None:
                headline_samples[name] = (entry, kept.get(head_key))
        if fields:
            body["slices"] = _slices(td, specs, fields, ci=ci, resamples=resamples, seed=seed, budget=item_draw_budget)
        doc["tasks"][name] = body
    doc["suite"] = _suite(headline_samples, ci) if len(tasks) > 1 else None
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
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fld in fields:
        if fld not in td.slice_columns:
            continue
        codes, values = td.slice_columns[fld]
        per: dict[str, Any] = {}
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
            per[label] = {"n": sub.n, "metrics": entries}
        out[fld] = per
    return out


def _suite(heads: dict[str, tuple[dict, np.ndarray | None]], ci: float) -> dict[str, Any]:
    used = {t: e for t, (e, _) in heads.items() if e["higher_is_better"] and e["value"] is not None}
    excluded = sorted(set(heads) - set(used))
    if not used:
        return {"metric": "macro mean of task headline metrics", "value": None, "tasks": {}, "excluded": excluded}
    value = float(np.mean([e["value"] for e in used.values()]))
    low = high = None
    draws = [heads[t][1] for t in used]
    if all(d is not None for d in draws) and len({len(d) for d in draws}) == 1:
        mean_draws = np.mean(np.stack(draws), axis=0)  # tasks are resampled independently
        mean_draws = mean_draws[np.isfinite(mean_draws)]
        if len(mean_draws):
            low, high = (float(x) for x in np.quantile(mean_draws, [(1 - ci) / 2, (1 + ci) / 2]))
    return {
        "metric": "macro mean of task headline metrics",
        "definition": "Unweighted mean over tasks of each task's headline metric (tasks whose headline is "
        "lower-is-better are left out); CI from the mean of independent per-task bootstrap "
        "resamples.",
        "value": value,
        "ci_low": low,
        "ci_high": high,
        "ci": ci,
        "n_tasks": len(used),
        "tasks": {t: e["key"] for t, e in used.items()},
        "excluded": excluded,
    }


# ------------------------------------------------------------------------------------------------
# compare


class Comparison:
    """The result of :func:`compare`: a JSON-ready document."""

    def __init__(self, document: dict[str, Any]):
        self.document = document

    def to_dict(self) -> dict[str, Any]:
        return self.document

    def metric(self, task: str, key: str) -> dict[str, Any]:
        return _entry(self.document["tasks"][task]["metrics"], task, key)

    def __repr__(self) -> str:
        return f"Comparison({self.document['a']!r} vs {self.document['b']!r})"


def _examples(ids: Iterable[str], k: int = 5) -> str:
    shown = sorted(ids)[:k]
    return ", ".join(repr(i) for i in shown) if shown else "none"


def _align_labels(a: TaskData, b: TaskData) -> tuple[TaskData, TaskData]:
    """Both tasks re-expressed over the union of their labels (matched by name, never position)."""
    if a.labels == b.labels:
        return a, b
    if a.kind == "binary" and a.positive != b.positive:
        raise ComparisonError(f"task '{a.task}': A's positive label is {a.positive!r}, B's is {b.positive!r}")
    union = tuple(sorted(set(a.labels) | set(b.labels)))
    return _relabel(a, union), _relabel(b, union)


def _relabel(td: TaskData, labels: tuple[str, ...]) -> TaskData:
    index = np.array([labels.index(lab) for lab in td.labels], dtype=np.int64)
    new = td.subset(np.arange(td.n))
    new.labels = labels
    new.gold_index = index[td.gold_index]
    new.pred_index = index[td.pred_index]
    if td.probs is not None:
        probs = np.zeros((td.n, len(labels)))
        probs[:, index] = td.probs
        new.probs = probs
    return new


def _pair(a: TaskData, b: TaskData, unpaired: bool) -> tuple[TaskData, TaskData, bool]:
    ids_a, ids_b = a.ids, b.ids
    same_order = len(ids_a) == len(ids_b) and bool(np.all(ids_a == ids_b))
    if not same_order:
        set_a, set_b = set(ids_a.tolist()), set(ids_b.tolist())
        if set_a != set_b:
            if unpaired:
                return a, b, False
            only_a, only_b = set_a - set_b, set_b - set_a
            raise ComparisonError(
                f"task '{a.task}': the item sets differ (A has {len(set_a)} items, B has {len(set_b)}; "
                f"{len(only_a)} only in A, e.g. {_examples(only_a)}; {len(only_b)} only in B, e.g. "
                f"{_examples(only_b)}). A paired comparison needs the same ids; pass --unpaired (unpaired=True) "
                "to compare different item sets."
            )
        pos = {v: i for i, v in enumerate(ids_b.tolist())}
        b = b.subset(np.fromiter((pos[v] for v in ids_a.tolist()), dtype=np.int64, count=len(ids_a)))
    if unpaired:
        return a, b, False
    _check_gold(a, b)
    return a, b, True


def _check_gold(a: TaskData, b: TaskData) -> None:
    if a.kind in ("classification", "binary", "match"):
        ga = np.asarray(a.labels, dtype=object)[a.gold_index] if a.n else np.zeros(0, object)
        gb = np.asarray(b.labels, dtype=object)[b.gold_index] if b.n else np.zeros(0, object)
        diff = np.flatnonzero(ga != gb)
    elif a.kind == "regression":
        diff = np.flatnonzero(a.gold_value != b.gold_value)
        ga, gb = a.gold_value, b.gold_value
    elif a.kind == "sets":
        diff = np.flatnonzero([x != y for x, y in zip(a.gold_items, b.gold_items)])
        ga, gb = a.gold_items, b.gold_items
    else:
        diff = np.flatnonzero([x != y for x, y in zip(a.gold_relevance, b.gold_relevance)])
        ga, gb = a.gold_relevance, b.gold_relevance
    if len(diff):
        i = int(diff[0])
        raise ComparisonError(
            f"task '{a.task}': gold differs between A and B for {len(diff)} items (e.g. id "
            f"{a.ids[i]!r}: A {_short(ga[i])}, B {_short(gb[i])}); these are not the same data"
        )


def _short(v: Any) -> str:
    text = repr(sorted(v) if isinstance(v, frozenset) else v)
    return text if len(text) < 60 else text[:57] + "..."


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
) -> Comparison:
    """Compare two result sets task by task: A - B for each metric with a CI and a p-value.

    Same item ids: a paired bootstrap (and McNemar's test for accuracy / exact match). Different
    item sets raise :class:`~labledger.errors.ComparisonError` (counts and example ids) unless
    ``unpaired=True``, which resamples each side independently. ``adjust``: the p-values of every
    metric and task form one family, adjusted by Holm (default), ``bh`` or ``none`` (``p_adjusted``).

    >>> gold = ["y", "n"] * 30
    >>> rows = lambda p: [{"id": i, "task": "t", "gold": g, "pred": p(i, g)} for i, g in enumerate(gold)]
    >>> c = compare(rows(lambda i, g: g), rows(lambda i, g: g if i % 4 else "?"), metrics=["exact_match"])
    >>> c.metric("t", "exact_match")["diff"]
    0.25
    """
    ra = load(a, tolerance=tolerance, positive=positive)
    rb = load(b, tolerance=tolerance, positive=positive)
    if task is None:
        only_a, only_b = set(ra) - set(rb), set(rb) - set(ra)
        if only_a or only_b:
            raise ComparisonError(
                f"the tasks differ: only in A: {', '.join(sorted(only_a)) or 'none'}; only in B: "
                f"{', '.join(sorted(only_b)) or 'none'} (pass task= to compare one)"
            )
        tasks = list(ra)
    else:
        tasks = _select_tasks(ra, task)
        _select_tasks(rb, task)
    _check_applicable(ra, metrics)
    doc: dict[str, Any] = {
        "kind": "comparison",
        "version": 1,
        "a": ra.source,
        "b": rb.source,
        "ci": ci,
        "resamples": resamples,
        "seed": seed,
        "tasks": {},
    }
    for name in tasks:
        ta, tb = ra[name], rb[name]
        if ta.kind != tb.kind:
            raise ComparisonError(f"task '{name}' is {ta.kind} in A but {tb.kind} in B")
        if ta.kind in ("classification", "binary", "match"):
            ta, tb = _align_labels(ta, tb)
        ta, tb, paired = _pair(ta, tb, unpaired)
        groups = ta.group if ta.group is not None else tb.group
        entries = []
        for spec in _specs_for(ta, metrics):
            metric = spec.metric
            if ta.kind not in metric.kinds or metric.table:
                continue
            params = task_params(metric, dict(spec.params), ta)
            pa, pb = prepare_task(metric, params, ta), prepare_task(metric, params, tb)
            key = metric_key(metric.name, params)
            s = _seed(seed, name, "compare", key)
            if paired:
                res = paired_bootstrap(pa, pb, ci=ci, resamples=resamples, seed=s, groups=groups)
                if metric.name in ("accuracy", "exact_match"):
                    if groups is None:
                        res.mcnemar = mcnemar(correct_a=_correct(pa), correct_b=_correct(pb))
                    else:  # the item McNemar ignores clusters (type I error 30% in simulation): not reported
                        res.mcnemar = clustered_mcnemar(correct_a=_correct(pa), correct_b=_correct(pb), groups=groups)
            else:
                res = unpaired_bootstrap(
                    pa, pb, ci=ci, resamples=resamples, seed=s, groups_a=ta.group, groups_b=tb.group
                )
            extra = _paired_stats(pa, pb, res, groups if paired else None, ci, paired)
            entries.append(
                {
                    "metric": metric.name,
                    "key": key,
                    "params": _json_params(params),
                    "definition": metric.describe(params),
                    "higher_is_better": metric.higher_is_better,
                    "a": _num(res.a),
                    "b": _num(res.b),
                    "diff": _num(res.diff),
                    "ci_low": _num(res.low),
                    "ci_high": _num(res.high),
                    "p_value": res.p_value,
                    "ci": ci,
                    "resamples": resamples,
                    "method": res.method,
                    "n": res.n,
                    "clusters": res.clusters,
                    "mcnemar": res.mcnemar,
                    **extra,
                }
            )
        doc["tasks"][name] = {
            "kind": ta.kind,
            "paired": paired,
            "n_a": ta.n,
            "n_b": tb.n,
            "n": ta.n if paired else None,
            "metrics": entries,
        }
    _adjust_comparison(doc, adjust)
    return Comparison(doc)


def _adjust_comparison(doc: dict[str, Any], adjust: str) -> None:
    """``p_adjusted`` on every compared metric (one family over tasks and metrics) and ``family``."""
    from labledger.metrics.stats import adjust_p, family_note

    entries = [e for body in doc["tasks"].values() for e in body["metrics"]]
    tested = [e for e in entries if e["p_value"] is not None]
    for e, p in zip(tested, adjust_p([e["p_value"] for e in tested], adjust)):
        e["p_adjusted"] = p
    doc["adjust"] = adjust
    doc["family"] = family_note(len(tested), adjust) if tested else None


# ------------------------------------------------------------------------------------------------
# Inference beside the bootstrap (analytic intervals, few-cluster warnings, MDE): labledger.metrics.stats

#: Metrics that are not plain means get BCa intervals below this many resampling units (items or clusters).
BCA_BELOW = 200


def _item_values(prep: Prepared) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(per-item values, mask) when the metric is a plain mean of per-item values, else None."""
    if prep.columns is not None:
        return None
    if prep.metric == "accuracy" and prep.strategy == "table":
        return _correct(prep).astype(np.float64), None
    if prep.strategy == "mean" and prep.post is None and prep.values is not None:
        return prep.values, prep.mask
    return None


def _interval_stats(prep: Prepared, iv, groups: np.ndarray | None, ci: float, draws=None) -> dict[str, Any]:
    """Fields added to a stored value: ``analytic`` interval for means, ``warning`` below 30 clusters or
    items, and ``interval_note`` "too few clusters" where a zero-width interval is refused. Metrics
    that are not means get the BCa interval below :data:`BCA_BELOW` units and from 5 clusters (it
    covers better there in bench/stats_coverage.py; the percentile interval elsewhere)."""
    out: dict[str, Any] = {}
    item = _item_values(prep)
    if item is not None:
        out["analytic"] = mean_interval(item[0], groups=groups, ci=ci, mask=item[1])
    units = iv.clusters if iv.clusters is not None else iv.n
    few = iv.clusters is not None and iv.clusters < MIN_CLUSTERS  # BCa covered worse there (0.73 vs 0.77)
    if (
        item is None
        and draws is not None
        and units is not None
        and units < BCA_BELOW
        and not few
        and iv.low is not None
    ):
        jack = jackknife_values(prep, groups)
        if jack is not None:
            lo, hi = bca_interval(draws, iv.value, jack, ci)
            if lo is not None:
                iv.low, iv.high = lo, hi
                iv.method = iv.method.replace("percentile bootstrap", "BCa bootstrap (jackknife acceleration)")
    note = coverage_note(units, clusters=iv.clusters is not None)
    if note:
        out["warning"] = note
    refused = refuse_degenerate(iv.low, iv.high, iv.clusters)
    if refused:
        iv.low = iv.high = None
        out["interval_note"] = refused
    return out


def _paired_stats(pa: Prepared, pb: Prepared, res, groups: np.ndarray | None, ci: float, paired: bool) -> dict:
    """Fields added to a compared metric: ``se`` of the difference, ``mde`` at 80% power (alpha 0.05),
    ``analytic`` paired interval for means, ``warning`` below 30 clusters or items."""
    out: dict[str, Any] = {"se": _num(res.se), "mde": _num(mde_from_se(res.se))}
    ia, ib = _item_values(pa), _item_values(pb)
    if paired and ia is not None and ib is not None and ia[1] is None and ib[1] is None:
        out["analytic"] = mean_interval(ia[0] - ib[0], groups=groups, ci=ci)
    units = res.clusters if res.clusters is not None else res.n
    note = coverage_note(units, clusters=res.clusters is not None)
    if note:
        out["warning"] = note
    refused = refuse_degenerate(res.low, res.high, res.clusters)
    if refused:
        res.low = res.high = None
        out["interval_note"] = refused
    return out


def _correct(prep: Prepared) -> np.ndarray:
    if prep.strategy == "table":  # accuracy: the diagonal cells of the gold x pred table
        k = round(math.sqrt(prep.n_cells))
        cells = prep.get_cells()
        return (cells // k) == (cells % k)
    return prep.values > 0.5


__all__ = [
    "DEFAULT_METRICS",
    "HEADLINE",
    "Comparison",
    "Evaluation",
    "compare",
    "evaluate",
    "prepare_task",
    "task_params",
]
