"""One builder for the interval of a stored value or difference (evaluate, compare; #19).

:func:`value_interval` and :func:`diff_interval` choose the procedure (stored in ``method``):

- metrics with an analytic form (:func:`labledger.metrics.analytic.use_analytic`: means, ROC-AUC,
  AP from :data:`~labledger.metrics.analytic.ANALYTIC_FROM` items) get it: DeLong, CLT/Wilson, the
  delta method, cluster-robust with clusters; no resamples, so their cost does not grow with
  n x resamples;
- every other metric keeps the bootstrap: count tables for confusion-matrix metrics, bin cells for
  equal-width ECE from :data:`~labledger.metrics.resample.BINNED_FROM` items, item weights (capped
  by the item-draw budget) for the rest.

:func:`interval_notes` adds what both kinds of entry carry: the analytic interval beside a bootstrap
one for means, the few-cluster / small-n warning, and the refusal of a zero-width interval from too
few clusters.

>>> from labledger.metrics import prepare
>>> iv, draws, used = value_interval(prepare("accuracy", gold=[0, 1] * 50, pred=[0, 1] * 50), ci=0.95,
...                                  resamples=100, seed=0)
>>> iv.method, used
('percentile bootstrap over items (count-table multinomial)', 100)
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import msgspec
import numpy as np

from labledger.metrics.analytic import analytic_interval as _analytic_interval
from labledger.metrics.analytic import influence, paired_analytic, use_analytic
from labledger.metrics.prepared import MeanPrepared, Prepared, TablePrepared
from labledger.metrics.resample import (
    Interval,
    PairedResult,
    bootstrap_samples,
    interval,
    paired_bootstrap,
    unpaired_bootstrap,
)
from labledger.metrics.stats import (
    CLT_METHOD,
    MIN_CLUSTERS,
    bca_interval,
    coverage_note,
    jackknife_values,
    mean_interval,
    proportion_interval,
    refuse_degenerate,
)
from labledger.schema import AnalyticInterval

#: Metrics recomputed on every resampled item set are capped past this many item-draws (see
#: :func:`resamples_for`); at 1M items that is 200 resamples.
ITEM_RESAMPLE_BUDGET: float | None = 2e8
MIN_RESAMPLES = 200
#: Metrics that are not plain means get BCa intervals below this many resampling units (items or clusters).
BCA_BELOW = 200


def resamples_for(
    prep: Prepared, resamples: int, groups: np.ndarray | None = None, *, budget: float | None = ITEM_RESAMPLE_BUDGET
) -> int:
    """How many bootstrap resamples a prepared metric gets (see :data:`ITEM_RESAMPLE_BUDGET`).

    >>> from labledger.metrics import prepare
    >>> resamples_for(prepare("accuracy", gold=[0, 1] * 10, pred=[0, 1] * 10), 1000)
    1000
    """
    from labledger.metrics.resample import binned_path

    if not resamples or budget is None or prep.strategy != "weights" or binned_path(prep, groups):
        return resamples
    # clusters are expanded to item weights, so the cost is items x resamples either way
    if prep.n * resamples <= budget:
        return resamples
    return max(min(resamples, MIN_RESAMPLES), int(budget // max(prep.n, 1)))


def value_interval(
    prep: Prepared,
    *,
    ci: float,
    resamples: int,
    seed: Any,
    groups: np.ndarray | None = None,
    budget: float | None = ITEM_RESAMPLE_BUDGET,
) -> tuple[Interval | dict[str, Interval], np.ndarray | None, int]:
    """(interval, bootstrap draws or None, resamples used) of one metric on its items."""
    if resamples and use_analytic(prep, groups):
        iv = _analytic_interval(prep, ci=ci, groups=groups)
        if iv is not None:
            return iv, None, resamples
    used = resamples_for(prep, resamples, groups, budget=budget)
    draws = bootstrap_samples(prep, resamples=used, seed=seed, groups=groups)
    return interval(prep, prep.value(), draws, ci=ci, resamples=used, groups=groups), draws, used


def diff_interval(
    pa: Prepared,
    pb: Prepared,
    *,
    ci: float,
    resamples: int,
    seed: Any,
    paired: bool,
    groups: np.ndarray | None = None,
    groups_a: np.ndarray | None = None,
    groups_b: np.ndarray | None = None,
) -> PairedResult:
    """A - B with its interval and p-value: paired on the same items, or each side independently."""
    if paired:
        if resamples and use_analytic(pa, groups) and use_analytic(pb, groups):
            res = paired_analytic(pa, pb, ci=ci, groups=groups)
            if res is not None:
                return res
        return paired_bootstrap(pa, pb, ci=ci, resamples=resamples, seed=seed, groups=groups)
    return unpaired_bootstrap(pa, pb, ci=ci, resamples=resamples, seed=seed, groups_a=groups_a, groups_b=groups_b)


def diff_ready(prep: Prepared, *, resamples: int, paired: bool, groups: np.ndarray | None = None) -> Prepared:
    """``prep`` with what :func:`diff_interval`'s analytic path reads of it computed now: its influence
    values (kept on it), when that path applies. Two sides are then made ready in two threads
    (``compare``'s pool) instead of in turn in :func:`paired_analytic`: at 10M 3-class rows the
    columns' sorts and ROC-AUC's one-vs-rest values took 17.7 s in one thread (#19).

    >>> from labledger.metrics import prepare
    >>> small, large = (prepare("log_loss", gold=[0, 1] * k, score=[0.3, 0.6] * k) for k in (60, 6000))
    >>> [sorted(diff_ready(p, resamples=1000, paired=True)._influence) for p in (small, large)]
    [[], [False]]
    """
    if paired and resamples and use_analytic(prep, groups):
        influence(prep, groups is not None)
    return prep


def _plain_mean(prep: Prepared) -> TypeGuard[MeanPrepared]:
    """Whether ``prep`` is a plain (untransformed, scalar) mean of its per-item values."""
    return prep.columns is None and isinstance(prep, MeanPrepared) and prep.post is None


def item_values(prep: Prepared) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(per-item values, mask) when the metric is a plain mean of per-item values, else None."""
    if prep.columns is not None:
        return None
    if prep.metric == "accuracy" and isinstance(prep, TablePrepared):
        return correct_of(prep).astype(np.float64), None
    if _plain_mean(prep):
        return prep.values, prep.mask
    return None


def _diagonal_cells(prep: TablePrepared) -> np.ndarray:
    """The cells ``gold == pred`` of a ``K x K`` count table (``i * K + i``)."""
    k = round(math.sqrt(prep.n_cells))
    return np.arange(k) * (k + 1)


def correct_of(prep: Prepared) -> np.ndarray:
    """Per-item correctness of accuracy (the diagonal cells of its table) or exact match (the hits)."""
    from labledger.errors import MetricInputError

    if isinstance(prep, TablePrepared):
        diagonal = np.zeros(prep.n_cells + 1, dtype=bool)  # the last entry: cell -1 (not counted)
        diagonal[_diagonal_cells(prep)] = True
        return diagonal[prep.get_cells()]  # one gather, not two integer divisions (#19)
    if isinstance(prep, MeanPrepared):
        return np.asarray(prep.values > 0.5)
    raise MetricInputError(f"{prep.metric}: McNemar's test needs per-item correctness")


def analytic_interval(values: Any, *, groups: Any = None, ci: float = 0.95, mask: Any = None) -> AnalyticInterval:
    """:func:`labledger.metrics.stats.mean_interval` as a typed :class:`~labledger.schema.AnalyticInterval`.

    >>> analytic_interval([1, 0, 1, 1]).method
    'Wilson score interval'
    """
    return msgspec.convert(mean_interval(values, groups=groups, ci=ci, mask=mask), AnalyticInterval)


def interval_notes(
    res: Interval | PairedResult,
    *,
    groups: np.ndarray | None,
    ci: float,
    analytic_values: np.ndarray | None = None,
    analytic_mask: np.ndarray | None = None,
    analytic: AnalyticInterval | None = None,
) -> dict[str, Any]:
    """Fields added to a stored value or difference: ``analytic`` (a mean's analytic interval beside
    the stored one: given, or of ``analytic_values``), ``warning`` below 30 clusters or items,
    ``interval_note`` where a zero-width interval from too few clusters is refused (``res.low``/
    ``res.high`` are then cleared)."""
    out: dict[str, Any] = {}
    if analytic is not None:
        out["analytic"] = analytic
    elif analytic_values is not None:
        out["analytic"] = analytic_interval(analytic_values, groups=groups, ci=ci, mask=analytic_mask)
    units = res.clusters if res.clusters is not None else res.n
    note = coverage_note(units, clusters=res.clusters is not None)
    if note:
        out["warning"] = note
    refused = refuse_degenerate(res.low, res.high, res.clusters)
    if refused:
        res.low = res.high = None
        out["interval_note"] = refused
    return out


def value_notes(
    prep: Prepared, iv: Interval, groups: np.ndarray | None, ci: float, draws: np.ndarray | None = None
) -> dict[str, Any]:
    """:func:`interval_notes` for one value, after the BCa upgrade of a non-mean bootstrap interval
    below :data:`BCA_BELOW` units and from 5 clusters (it covers better there in bench/stats_coverage.py)."""
    if groups is None and prep.metric == "accuracy" and isinstance(prep, TablePrepared) and prep.columns is None:
        # the Wilson interval of its correct items, from the count table's diagonal: the per-item
        # correctness (the cells and a 0/1 float per item: ~170 MiB at 10M rows) is never made (#19)
        correct = float(prep.counts()[_diagonal_cells(prep)].sum())
        note = msgspec.convert(proportion_interval(correct, prep.n, ci), AnalyticInterval)
        return interval_notes(iv, groups=groups, ci=ci, analytic=note)
    if (
        _plain_mean(prep)  # (item_values gives its values)
        and groups is None
        and iv.resamples == 0
        and iv.method == "analytic: " + CLT_METHOD
        and iv.n > 1
    ):
        # the stored interval is this mean's own analytic one: the note repeats it, not computed again
        # (nor its values read: a BlockMean's are never made whole for it, #19)
        note = AnalyticInterval(method=CLT_METHOD, low=iv.low, high=iv.high, se=iv.se, df=iv.n - 1, ci=ci)
        return {"analytic": note, **interval_notes(iv, groups=groups, ci=ci)}
    item = item_values(prep)
    units = iv.clusters if iv.clusters is not None else iv.n
    few = iv.clusters is not None and iv.clusters < MIN_CLUSTERS  # BCa covered worse there (0.73 vs 0.77)
    if item is None and draws is not None and units < BCA_BELOW and not few and iv.low is not None:
        jack = jackknife_values(prep, groups)
        if jack is not None:
            lo, hi = bca_interval(draws, iv.value, jack, ci)
            if lo is not None:
                iv.low, iv.high = lo, hi
                iv.method = iv.method.replace("percentile bootstrap", "BCa bootstrap (jackknife acceleration)")
    return interval_notes(
        iv,
        groups=groups,
        ci=ci,
        analytic_values=None if item is None else item[0],
        analytic_mask=None if item is None else item[1],
    )


def diff_notes(
    pa: Prepared, pb: Prepared, res: PairedResult, groups: np.ndarray | None, ci: float, paired: bool
) -> dict[str, Any]:
    """:func:`interval_notes` for a difference, with its ``se`` and ``mde`` (80% power, alpha 0.05)."""
    from labledger.inputs.records import finite_or_none
    from labledger.metrics.stats import mde_from_se

    out: dict[str, Any] = {"se": finite_or_none(res.se), "mde": finite_or_none(mde_from_se(res.se))}
    ia, ib = item_values(pa), item_values(pb)
    both = paired and ia is not None and ib is not None and ia[1] is None and ib[1] is None
    values = ia[0] - ib[0] if both and ia is not None and ib is not None else None
    return {**out, **interval_notes(res, groups=groups, ci=ci, analytic_values=values)}


__all__ = [
    "BCA_BELOW",
    "ITEM_RESAMPLE_BUDGET",
    "MIN_RESAMPLES",
    "analytic_interval",
    "correct_of",
    "diff_interval",
    "diff_notes",
    "interval_notes",
    "item_values",
    "resamples_for",
    "value_interval",
    "value_notes",
]
