"""One builder for the interval of a stored value or difference (evaluate, compare).

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

from labledger.analysis.threads import chunk_map
from labledger.metrics.analytic import analytic_interval as _analytic_interval
from labledger.metrics.analytic import influence, paired_analytic, use_analytic
from labledger.metrics.prepared import MeanPrepared, Prepared, TablePrepared
from labledger.metrics.registry import clip_to_range
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
        if iv is not None and not isinstance(iv, dict):
            iv.low, iv.high, _ = clip_to_range(prep.metric, iv.low, iv.high)
        if iv is not None:
            return iv, None, resamples
    used = resamples_for(prep, resamples, groups, budget=budget)
    draws = bootstrap_samples(prep, resamples=used, seed=seed, groups=groups, run=chunk_map)
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
        return paired_bootstrap(pa, pb, ci=ci, resamples=resamples, seed=seed, groups=groups, run=chunk_map)
    return unpaired_bootstrap(
        pa, pb, ci=ci, resamples=resamples, seed=seed, groups_a=groups_a, groups_b=groups_b, run=chunk_map
    )


def diff_ready(prep: Prepared, *, resamples: int, paired: bool, groups: np.ndarray | None = None) -> Prepared:
    """``prep`` with what :func:`diff_interval`'s analytic path reads of it computed now: its influence
    values (kept on it), when that path applies. Two sides are then made ready in two threads
    (``compare``'s pool) instead of in turn in :func:`paired_analytic`.

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
        return diagonal[prep.get_cells()]  # one gather, not two integer divisions
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
    below :data:`BCA_BELOW` units and from 5 clusters (it covers better there in bench/stats_coverage.py).
    The analytic interval beside it is kept inside the values the metric can take (a t interval of a
    cluster-robust SE is symmetric; accuracy is not: :func:`~labledger.metrics.registry.clip_to_range`).

    >>> from labledger.metrics import prepare
    >>> gold = [1] * 60
    >>> prep = prepare("accuracy", gold=gold, pred=[0 if i == 3 else 1 for i in range(60)])
    >>> groups = np.repeat(np.arange(6), 10)
    >>> iv, _, _ = value_interval(prep, ci=0.95, resamples=200, seed=0, groups=groups)
    >>> value_notes(prep, iv, groups, 0.95)["analytic"].high
    1.0
    """
    out = _value_notes(prep, iv, groups, ci, draws)
    an = out.get("analytic")
    if an is not None:
        low, high, clipped = clip_to_range(prep.metric, an.low, an.high)
        if clipped:
            out["analytic"] = msgspec.structs.replace(an, low=low, high=high)
    return out


def _value_notes(
    prep: Prepared, iv: Interval, groups: np.ndarray | None, ci: float, draws: np.ndarray | None
) -> dict[str, Any]:
    if groups is None and prep.metric == "accuracy" and isinstance(prep, TablePrepared) and prep.columns is None:
        # the Wilson interval of its correct items, from the count table's diagonal: the per-item
        # correctness (the cells and a 0/1 float per item) is never made
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
        # (nor its values read: a BlockMean's are never made whole for it)
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


#: The two tests of a margin: one-sided non-inferiority, and equivalence by two one-sided tests.
MARGIN_TESTS = ("non-inferiority", "equivalence")
#: A bound within this much (relative, at least absolute) of the margin counts as on it: H0 is kept.
MARGIN_TIES = 1e-9


def margin_test(
    pa: Prepared,
    pb: Prepared,
    *,
    test: str,
    margin: float,
    alpha: float,
    higher_is_better: bool,
    resamples: int,
    seed: Any,
    paired: bool,
    groups: np.ndarray | None = None,
    groups_a: np.ndarray | None = None,
    groups_b: np.ndarray | None = None,
) -> dict[str, Any]:
    """A margin test of ``delta = A - B`` (the fields of :class:`~labledger.schema.MarginTest` that
    do not name the metric).

    ``test="non-inferiority"``: A is no worse than B by ``margin`` or more. A higher-is-better metric
    tests ``H0: delta <= -margin`` against ``H1: delta > -margin``, rejected at ``alpha`` (one-sided)
    when the one-sided ``1 - alpha`` lower bound of ``delta`` is above ``-margin``; a
    lower-is-better metric mirrors it (``H0: delta >= margin``, the upper bound below ``margin``).
    ``test="equivalence"``: two one-sided tests (TOST, Schuirmann 1987), each at ``alpha``:
    ``H0: |delta| >= margin`` is rejected when the ``1 - 2 alpha`` two-sided interval lies inside
    ``(-margin, margin)``; its p-value is the larger of the two one-sided ones.

    Both read the ``1 - 2 alpha`` two-sided interval of ``delta`` (``low``, ``high``): its ends are
    the one-sided ``1 - alpha`` bounds. It is formed by the procedure of :func:`diff_interval` with
    the same seed, so with the same resamples as the comparison's own interval: the analytic form
    (t or normal reference on the per-item differences of the influence values, cluster-robust with
    clusters) where that applies, else the paired (or unpaired) percentile bootstrap over items or
    clusters. One-sided p-values: ``P(T >= (delta + margin) / se)`` on the analytic form's reference;
    ``(1 + #{d* <= -margin}) / (B + 1)`` over the bootstrap's finite differences ``d*`` (mirrored
    for the upper test). A bound or a difference within :data:`MARGIN_TIES` of the margin counts as on
    it (float rounding: ``6/120 - 0/120`` against 0.05), so H0 is kept there. ``passed`` is None (undecided, ``note`` says why) when there is no interval,
    or a zero-width one from fewer than 5 clusters.

    >>> from labledger.metrics import prepare
    >>> gold = [0, 1] * 100
    >>> a = prepare("accuracy", gold=gold, pred=[0, 1] * 95 + [1, 0] * 5)
    >>> b = prepare("accuracy", gold=gold, pred=[0, 1] * 96 + [1, 0] * 4)
    >>> t = margin_test(a, b, test="non-inferiority", margin=0.05, alpha=0.05, higher_is_better=True,
    ...                 resamples=1000, seed=0, paired=True)
    >>> t["passed"], t["low"] > -0.05, t["p_value"] < 0.05
    (True, True, True)
    """
    if test not in MARGIN_TESTS:
        from labledger.errors import UnknownNameError

        raise UnknownNameError("margin test", test, MARGIN_TESTS)
    if not (math.isfinite(margin) and margin > 0):
        from labledger.errors import MetricInputError

        raise MetricInputError(f"the margin must be a positive number; got {margin}")
    if not (0 < alpha < 0.5):
        from labledger.errors import MetricInputError

        raise MetricInputError(f"alpha must be strictly between 0 and 0.5; got {alpha}")
    level = 1 - 2 * alpha
    res = diff_interval(
        pa,
        pb,
        ci=level,
        resamples=resamples,
        seed=seed,
        paired=paired,
        groups=groups,
        groups_a=groups_a,
        groups_b=groups_b,
    )
    note = refuse_degenerate(res.low, res.high, res.clusters)
    low, high = (None, None) if note else (res.low, res.high)
    # a bound equal to the margin up to float rounding (6/120 - 0/120 against 0.05) does not reject
    edge = margin - MARGIN_TIES * max(1.0, margin)
    if res.resamples == 0:  # the analytic form (or no interval at all)
        p_low, p_high = _analytic_one_sided(pa, res, margin, groups if paired else None)
    else:
        d = _bootstrap_differences(pa, pb, resamples, seed, paired, groups, groups_a, groups_b)
        p_low, p_high = _bootstrap_one_sided(d, edge)
    m = f"{margin:g}"
    if test == "equivalence":
        hypothesis = (
            f"H0: |A - B| >= {m} (not equivalent); H1: -{m} < A - B < {m}; two one-sided tests at alpha "
            f"{alpha:g} each: equivalent when the {level:.0%} interval of A - B lies inside (-{m}, {m})"
        )
        passed = None if low is None or high is None else bool(low > -edge and high < edge)
        p = None if p_low is None or p_high is None else max(p_low, p_high)
    elif higher_is_better:
        hypothesis = (
            f"H0: A - B <= -{m} (A worse than B by the margin or more); H1: A - B > -{m}; one-sided at alpha "
            f"{alpha:g}: non-inferior when the one-sided {1 - alpha:.0%} lower bound of A - B is above -{m}"
        )
        passed = None if low is None else bool(low > -edge)
        p = p_low
    else:
        hypothesis = (
            f"H0: A - B >= {m} (A worse than B by the margin or more; lower is better); H1: A - B < {m}; "
            f"one-sided at alpha {alpha:g}: non-inferior when the one-sided {1 - alpha:.0%} upper bound of "
            f"A - B is below {m}"
        )
        passed = None if high is None else bool(high < edge)
        p = p_high
    if passed is None and note is None:
        note = "no interval (no resamples, no items, or a non-finite difference)"
    method = res.method.split("; p-value")[0] if res.method else None
    how = "the analytic form's reference" if res.resamples == 0 else "the bootstrap's differences"
    return {
        "test": test,
        "margin": float(margin),
        "alpha": float(alpha),
        "higher_is_better": bool(higher_is_better),
        "hypothesis": hypothesis,
        "diff": _finite(res.diff),
        "low": _finite(low),
        "high": _finite(high),
        "level": level,
        "p_value": None if passed is None else p,
        "passed": passed,
        "method": f"{method}; the {level:.0%} two-sided interval's ends are the one-sided bounds; p-value: "
        f"one-sided, from {how}",
        "resamples": res.resamples,
        "n": res.n,
        "clusters": res.clusters,
        "note": note,
    }


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _analytic_one_sided(
    pa: Prepared, res: PairedResult, margin: float, groups: np.ndarray | None
) -> tuple[float | None, float | None]:
    """One-sided p-values of ``H0: delta <= -margin`` and ``H0: delta >= margin`` on the analytic
    form's reference (t on n-1 or C-1 df for means and with clusters, else normal)."""
    from labledger.metrics.analytic import interval_kind, t_df
    from labledger.metrics.stats import norm_sf, t_sf

    if res.se is None or not math.isfinite(res.se) or not math.isfinite(res.diff):
        return None, None
    if res.se == 0:
        return (0.0 if res.diff > -margin else 1.0), (0.0 if res.diff < margin else 1.0)
    _, t_ref = interval_kind(pa)
    df = t_df(pa, groups, t_ref)

    def sf(x: float) -> float:
        return float(norm_sf(x) if df is None else t_sf(x, max(df, 1)))

    return sf((res.diff + margin) / res.se), sf((margin - res.diff) / res.se)


def _bootstrap_differences(
    pa: Prepared,
    pb: Prepared,
    resamples: int,
    seed: Any,
    paired: bool,
    groups: np.ndarray | None,
    groups_a: np.ndarray | None,
    groups_b: np.ndarray | None,
) -> np.ndarray:
    """The resampled differences ``d*`` that :func:`diff_interval`'s bootstrap draws from ``seed``
    (the same draws: :func:`~labledger.metrics.resample.paired_bootstrap` and
    :func:`~labledger.metrics.resample.unpaired_bootstrap`)."""
    from labledger.metrics.resample import resample_values, rng_for

    if paired:
        sa, sb = resample_values([pa, pb], resamples, rng_for(seed), groups, chunk_map)
        return np.asarray(sa - sb, dtype=np.float64)
    ss = np.random.SeedSequence(list(seed) if isinstance(seed, (list, tuple)) else seed)
    ra, rb = (np.random.default_rng(s) for s in ss.spawn(2))
    sa = resample_values([pa], resamples, ra, groups_a, chunk_map)[0]
    sb = resample_values([pb], resamples, rb, groups_b, chunk_map)[0]
    return np.asarray(sa - sb, dtype=np.float64)


def _bootstrap_one_sided(d: np.ndarray, margin: float) -> tuple[float | None, float | None]:
    """``((1 + #{d* <= -margin}) / (B + 1), (1 + #{d* >= margin}) / (B + 1))`` over the finite ``d*``:
    below ``alpha`` when the percentile bound at ``1 - alpha`` is beyond the margin (up to 1/B;
    ``margin`` is the margin less :data:`MARGIN_TIES`)."""
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return None, None
    b = len(d) + 1
    return min(1.0, (1 + int((d <= -margin).sum())) / b), min(1.0, (1 + int((d >= margin).sum())) / b)


__all__ = [
    "BCA_BELOW",
    "ITEM_RESAMPLE_BUDGET",
    "MARGIN_TESTS",
    "MARGIN_TIES",
    "MIN_RESAMPLES",
    "analytic_interval",
    "correct_of",
    "diff_interval",
    "diff_notes",
    "interval_notes",
    "item_values",
    "margin_test",
    "resamples_for",
    "value_interval",
    "value_notes",
]
