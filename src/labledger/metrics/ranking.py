"""Ranking and set metrics: nDCG@k, MRR, recall@k, exact match, per-item set F1 (numpy, no I/O).

Ranking inputs are, per item, ``gold``: a mapping doc -> graded relevance (>= 0; > 0 is relevant)
and ``scores``: a mapping doc -> model score (higher ranks first). Documents in ``gold`` but not in
``scores`` were not retrieved: they count in the ideal DCG and in recall's denominator only.
Items with no relevant document score 0 on every ranking metric (as scikit-learn's ``ndcg_score``).
All per-item values are computed at once over flattened arrays (one ``lexsort``), never per item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics._inputs import as_1d, same_length
from labledger.metrics.entry import Metric
from labledger.metrics.prepared import MeanPrepared

KINDS = ("ranking",)


class RankingArrays:
    """Flattened ranking data: one entry per (item, scored doc) plus the gold relevances per item."""

    def __init__(self, gold: Sequence[Mapping[str, float]], scores: Sequence[Mapping[str, float]]) -> None:
        same_length(gold=gold, scores=scores)
        n = len(gold)
        self.n = n
        lens = np.fromiter((len(s) for s in scores), dtype=np.int64, count=n)
        self.item = np.repeat(np.arange(n), lens)
        self.score = np.fromiter((v for s in scores for v in s.values()), dtype=np.float64, count=int(lens.sum()))
        self.rel = np.fromiter(
            (g.get(d, 0.0) for g, s in zip(gold, scores) for d in s), dtype=np.float64, count=int(lens.sum())
        )
        glens = np.fromiter((len(g) for g in gold), dtype=np.int64, count=n)
        self.gold_item = np.repeat(np.arange(n), glens)
        self.gold_rel = np.fromiter((v for g in gold for v in g.values()), dtype=np.float64, count=int(glens.sum()))
        if not np.isfinite(self.score).all():
            raise MetricInputError("scores has NaN or infinite values")
        if not np.isfinite(self.gold_rel).all() or (self.gold_rel < 0).any():
            raise MetricInputError("gold relevance must be finite numbers >= 0")
        self.n_relevant = np.bincount(self.gold_item[self.gold_rel > 0], minlength=n)


def _positions(item: np.ndarray, order: np.ndarray) -> np.ndarray:
    """0-based position of each sorted entry within its item."""
    it = item[order]
    if len(it) == 0:
        return np.zeros(0, np.int64)
    starts = np.r_[0, np.flatnonzero(it[1:] != it[:-1]) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(it)]))
    return np.asarray(np.arange(len(it)) - first)


def ndcg_values(data: RankingArrays, k: int) -> np.ndarray:
    """Per-item nDCG@k: linear gains, 1/log2(rank + 1) discounts, tied scores share their mean gain."""
    n = data.n
    order = np.lexsort((-data.score, data.item))
    it, s, r = data.item[order], data.score[order], data.rel[order]
    pos = _positions(data.item, order)
    disc = np.where(pos < k, 1.0 / np.log2(pos + 2.0), 0.0)
    if len(it):
        new = np.r_[True, (it[1:] != it[:-1]) | (s[1:] != s[:-1])]
        grp = np.cumsum(new) - 1
        g_gain = np.bincount(grp, weights=r) / np.bincount(grp)
        g_disc = np.bincount(grp, weights=disc)
        g_item = it[new]
        dcg: np.ndarray = np.bincount(g_item, weights=g_gain * g_disc, minlength=n)
    else:
        dcg = np.zeros(n)
    gorder = np.lexsort((-data.gold_rel, data.gold_item))
    gpos = _positions(data.gold_item, gorder)
    gdisc = np.where(gpos < k, 1.0 / np.log2(gpos + 2.0), 0.0)
    idcg = np.bincount(data.gold_item[gorder], weights=data.gold_rel[gorder] * gdisc, minlength=n)
    out = np.zeros(n)
    np.divide(dcg, idcg, out=out, where=idcg > 0)
    return out


def _pessimistic(data: RankingArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # within tied scores, non-relevant documents go first (ties never help)
    relevant = data.rel > 0
    order = np.lexsort((relevant, -data.score, data.item))
    return order, _positions(data.item, order), relevant[order]


def mrr_values(data: RankingArrays) -> np.ndarray:
    """Per-item reciprocal rank of the first relevant document (0 when none is retrieved)."""
    order, pos, rel = _pessimistic(data)
    it = data.item[order]
    out = np.zeros(data.n)
    if rel.any():
        first = np.full(data.n, np.iinfo(np.int64).max)
        np.minimum.at(first, it[rel], pos[rel])
        hit = first < np.iinfo(np.int64).max
        out[hit] = 1.0 / (first[hit] + 1.0)
    return out


def recall_at_k_values(data: RankingArrays, k: int) -> np.ndarray:
    """Per-item fraction of the relevant documents that are among the top k scored ones."""
    order, pos, rel = _pessimistic(data)
    hits = np.bincount(data.item[order][rel & (pos < k)], minlength=data.n).astype(np.float64)
    out = np.zeros(data.n)
    np.divide(hits, data.n_relevant, out=out, where=data.n_relevant > 0)
    return out


def set_f1_values(gold: Sequence[Any], pred: Sequence[Any]) -> np.ndarray:
    """Per-item F1 of two sets: ``2 |G & P| / (|G| + |P|)``; 1.0 when both are empty."""
    same_length(gold=gold, pred=pred)
    out = np.empty(len(gold))
    for i, (g, p) in enumerate(zip(gold, pred)):
        g, p = _as_set(g), _as_set(p)
        den = len(g) + len(p)
        out[i] = 1.0 if den == 0 else 2.0 * len(g & p) / den
    return out


def _as_set(x: Any) -> frozenset[Any]:
    if isinstance(x, (set, frozenset)):
        return frozenset(x)
    return frozenset(tuple(v) if isinstance(v, list) else v for v in x)


def _mean_prepared(name: str, params: dict[str, Any], values: np.ndarray) -> MeanPrepared:
    return MeanPrepared(metric=name, params=params, n=len(values), n_used=len(values), values=values)


def ranking_prepared(name: str, params: dict[str, Any], data: RankingArrays) -> MeanPrepared:
    """A :class:`~labledger.metrics.prepared.MeanPrepared` for ``ndcg``, ``mrr`` or ``recall_at_k``."""
    params = _BY_NAME[name].resolve(params)
    if name == "ndcg":
        return _mean_prepared(name, params, ndcg_values(data, params["k"]))
    if name == "mrr":
        return _mean_prepared(name, params, mrr_values(data))
    if name == "recall_at_k":
        return _mean_prepared(name, params, recall_at_k_values(data, params["k"]))
    raise MetricInputError(f"{name} is not a ranking metric")


def ndcg(*, gold: Any, scores: Any, k: Any = 10, sample_weight: Any = None) -> float:
    """Mean nDCG@k over items (linear gains, log2 discounts, ties averaged as scikit-learn).

    >>> round(ndcg(gold=[{"a": 1}], scores=[{"a": 0.2, "b": 0.9}], k=10), 4)
    0.6309
    """
    return float(ranking_prepared("ndcg", {"k": k}, RankingArrays(gold, scores)).value(sample_weight))


def mrr(*, gold: Any, scores: Any, sample_weight: Any = None) -> float:
    """Mean reciprocal rank of the first relevant document (ties broken against it).

    >>> mrr(gold=[{"a": 1}, {"c": 2}], scores=[{"a": 0.2, "b": 0.9}, {"c": 0.5}])
    0.75
    """
    return float(ranking_prepared("mrr", {}, RankingArrays(gold, scores)).value(sample_weight))


def recall_at_k(*, gold: Any, scores: Any, k: Any = 10, sample_weight: Any = None) -> float:
    """Mean fraction of relevant documents found in the top k.

    >>> recall_at_k(gold=[{"a": 1, "c": 1}], scores=[{"a": 0.2, "b": 0.9}], k=2)
    0.5
    """
    return float(ranking_prepared("recall_at_k", {"k": k}, RankingArrays(gold, scores)).value(sample_weight))


def exact_match(*, gold: Any, pred: Any, sample_weight: Any = None) -> float:
    """Fraction of items whose prediction equals the gold value exactly (sets: as sets).

    >>> exact_match(gold=["a", "b"], pred=["a", "B"])
    0.5
    """
    return float(exact_match_prepared({}, _match_values(gold, pred)).value(sample_weight))


def set_f1(*, gold: Any, pred: Any, sample_weight: Any = None) -> float:
    """Mean over items of the per-item set F1 ``2 |G & P| / (|G| + |P|)`` (1 when both are empty).

    >>> set_f1(gold=[["x", "y"], []], pred=[["x"], []])
    0.8333333333333333
    """
    return float(_mean_prepared("set_f1", {}, set_f1_values(gold, pred)).value(sample_weight))


def _match_values(gold: Any, pred: Any) -> np.ndarray:
    same_length(gold=gold, pred=pred)
    out = np.empty(len(gold))
    for i, (g, p) in enumerate(zip(gold, pred)):
        if isinstance(g, (list, tuple, set, frozenset)) and isinstance(p, (list, tuple, set, frozenset)):
            out[i] = _as_set(g) == _as_set(p)
        else:
            out[i] = g == p and type(g) is type(p)
    return out


def exact_match_prepared(params: dict[str, Any], hits: np.ndarray) -> MeanPrepared:
    """A :class:`~labledger.metrics.prepared.MeanPrepared` for exact match from per-item hits (0/1)."""
    return _mean_prepared("exact_match", params, np.asarray(hits, dtype=np.float64))


def _prep_rank(name: str) -> Callable[..., MeanPrepared]:
    def prep(*, gold: Any, scores: Any, **params: Any) -> MeanPrepared:
        return ranking_prepared(name, params, RankingArrays(gold, scores))

    return prep


def _prep_exact(*, gold: Any, pred: Any) -> MeanPrepared:
    return exact_match_prepared(
        {}, _match_values(as_1d(np.asarray(gold, dtype=object), "gold"), as_1d(np.asarray(pred, dtype=object), "pred"))
    )


def _prep_set_f1(*, gold: Any, pred: Any) -> MeanPrepared:
    return _mean_prepared("set_f1", {}, set_f1_values(gold, pred))


#: This module's metrics (labledger.metrics.registry builds the registry from them).
METRICS: list[Metric] = []

METRICS.append(
    Metric(
        name="ndcg",
        definition="Mean over items of DCG@k / ideal DCG@k with k={k}: gain = graded relevance, "
        "discount 1/log2(rank + 1), tied scores share their mean gain (scikit-learn ndcg_score); the ideal "
        "ranks every gold document; 0 for an item with no relevant document.",
        higher_is_better=True,
        needs="ranking",
        kinds=KINDS,
        prepare=_prep_rank("ndcg"),
        fn=ndcg,
        params={"k": 10},
        strategy="mean",
    )
)
METRICS.append(
    Metric(
        name="mrr",
        definition="Mean over items of 1 / rank of the first relevant document (relevance > 0) "
        "among the scored ones, ties broken against relevant documents; 0 when none is retrieved.",
        higher_is_better=True,
        needs="ranking",
        kinds=KINDS,
        prepare=_prep_rank("mrr"),
        fn=mrr,
        strategy="mean",
    )
)
METRICS.append(
    Metric(
        name="recall_at_k",
        definition="Mean over items of the fraction of relevant documents (relevance > 0) "
        "ranked in the top k={k} scored ones, ties broken against relevant documents; 0 for an item with no "
        "relevant document.",
        higher_is_better=True,
        needs="ranking",
        kinds=KINDS,
        prepare=_prep_rank("recall_at_k"),
        fn=recall_at_k,
        params={"k": 10},
        strategy="mean",
    )
)
METRICS.append(
    Metric(
        name="exact_match",
        definition="Fraction of items whose prediction equals the gold value exactly "
        "(strings as written, no normalisation; JSON values compared as canonical JSON; lists as sets).",
        higher_is_better=True,
        needs="match",
        kinds=("match", "sets"),
        prepare=_prep_exact,
        fn=exact_match,
        strategy="mean",
    )
)
METRICS.append(
    Metric(
        name="set_f1",
        definition="Mean over items of the per-item set F1 2|G & P| / (|G| + |P|) between the "
        "gold and predicted sets (duplicates collapse; 1 when both are empty), i.e. a per-review F1.",
        higher_is_better=True,
        needs="sets",
        kinds=("sets",),
        prepare=_prep_set_f1,
        fn=set_f1,
        strategy="mean",
    )
)

_BY_NAME = {m.name: m for m in METRICS}

__all__ = [
    "METRICS",
    "RankingArrays",
    "exact_match",
    "exact_match_prepared",
    "mrr",
    "mrr_values",
    "ndcg",
    "ndcg_values",
    "ranking_prepared",
    "recall_at_k",
    "recall_at_k_values",
    "set_f1",
    "set_f1_values",
]
