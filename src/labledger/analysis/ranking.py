"""Rankings with uncertainty: each system's rank with a joint interval, and the tie group of the best (#45).

k systems scored on the same n items (a ``(k, n)`` array of per-item values of a mean metric:
accuracy's 0/1 correctness, a per-item loss, ...) are ranked by their means. What is reported:

- **point rank**: ``1 + #{systems with a strictly better mean}`` (equal means share the better rank);
- **separated pairs**: for every pair (i, j), ``t_ij = (mean_i - mean_j) / se_ij`` with ``se_ij`` the
  standard error of the mean per-item difference (cluster-robust, CR1, when items carry clusters). A
  pair is *separated* by the step-down max-t procedure (Romano & Wolf 2005, the bootstrap form of
  Holm's step-down): the paired bootstrap over items (or clusters: a cluster brings all its items)
  draws the same resamples for every system; ``c`` is the ``1 - alpha`` quantile of
  ``max |d*_ij - d_ij| / se*_ij`` (each resample's difference less the observed one, over the
  resample's own standard error) over the pairs not yet separated; every pair with ``|t_ij| > c`` is
  separated, and ``c`` is recomputed over the rest until none is added. This controls the family-wise
  error over all ``k (k - 1) / 2`` pairs, using the correlation between them that Holm's bound ignores.
- **rank interval**: ``[1 + #{systems separated above it}, k - #{systems separated below it}]``.
  Every true rank lies in its interval whenever no pair is wrongly separated, so the intervals hold
  for all systems at once with probability about ``1 - alpha`` (Mogstad, Romano, Shaikh & Wilhelm
  2024, "Inference for ranks with applications to mobility across neighbourhoods and academic
  achievement across countries", simultaneous confidence sets).
- **tie group of the best**: the systems with no system separated above them (their interval
  reaches rank 1): "not separable from the best at alpha, adjusted over all pairs".

Why not Holm over "best vs each": the best is chosen by the same data, so with two equal systems a
one-sided test of best > other at alpha rejects with probability 2 alpha. Testing all pairs (the
best is one of them) removes that selection effect; the simulation in ``tests/test_ranking.py``
checks the family-wise error under k equal systems and the joint coverage of the true ranks.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> values = (rng.random((3, 400)) < np.array([[0.9], [0.6], [0.59]])).astype(float)
>>> doc = rank_systems(values, names=["a", "b", "c"], resamples=500, seed=0)
>>> [(e.name, e.rank, e.rank_low, e.rank_high) for e in doc.systems]
[('a', 1, 1, 1), ('b', 2, 2, 3), ('c', 3, 2, 3)]
>>> doc.tie_group, doc.separated
(['a'], [['a', 'b'], ['a', 'c']])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics.resample import draw_counts, rng_for, weight_rows
from labledger.schema.documents import RankEntry, RankingDoc

#: Below this many resampled units (items, or clusters) the document carries a warning.
FEW_UNITS = 30
#: Elements of one chunk of bootstrap weights (resamples x units).
_CHUNK = 1 << 22
#: A pair whose standard error is at or below this (relative) is never separated: its per-item differences are all equal.
_SE_FLOOR = 1e-12

ADJUSTMENT = (
    "step-down max-t over all pairs (Romano & Wolf 2005): the bootstrap's joint law of the pairwise "
    "t statistics in Holm's step-down; family-wise error <= alpha over all k(k-1)/2 pairs"
)


def _units(n: int, groups: Any) -> tuple[np.ndarray, int | None]:
    """Each item's resampling unit (0..G-1) and the number of clusters (None: items are the units)."""
    if groups is None:
        return np.arange(n), None
    g = np.asarray(groups)
    if g.shape != (n,):
        raise MetricInputError(f"groups has shape {g.shape}; expected ({n},)")
    _, inverse = np.unique(g, return_inverse=True)
    inverse = inverse.reshape(-1)
    return inverse, int(inverse.max()) + 1 if n else 0


def _unit_table(s: np.ndarray, unit: np.ndarray, g: int, clustered: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The resampling units as rows: ``(sums (U, k), items per row (U,), multiplicity (U,))``.

    Clusters: one row per cluster, multiplicity 1 (a resample draws clusters). Items: items with the
    same values on every system share a row whose multiplicity counts them (a resample is then a
    multinomial draw over the rows: the same law as drawing items, cheaper for 0/1 values).
    """
    if clustered:
        counts = np.bincount(unit, minlength=g).astype(np.float64)
        sums = np.stack([np.bincount(unit, weights=row, minlength=g) for row in s], axis=1)
        return sums, counts, np.ones(g)
    rows, mult = np.unique(s.T, axis=0, return_counts=True)
    return rows, np.ones(len(rows)), mult.astype(np.float64)


def _bootstrap_t(
    sums: np.ndarray,
    counts: np.ndarray,
    mult: np.ndarray,
    clustered: bool,
    g: int,
    iu: np.ndarray,
    ju: np.ndarray,
    d: np.ndarray,
    resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """(resamples, P) ``|t* - t|`` of the P pairs ``(iu, ju)``: each resample's difference of means
    less the observed one ``d``, over the resample's own CR1 standard error (a studentized bootstrap:
    the noise of the estimated SE, large with few clusters, is in the law)."""
    a = sums[:, iu] - sums[:, ju]  # (U, P) each unit's summed difference
    a2 = a * a
    na = counts[:, None] * a
    n2 = counts * counts
    per = max(1, _CHUNK // max(len(counts), 1))
    out = []
    done = 0
    while done < resamples:
        size = min(per, resamples - done)
        w = weight_rows(g, size, rng) if clustered else draw_counts(mult, size, rng)
        wn = w @ counts  # items in each resample
        ds = (w @ a) / wn[:, None]
        ss = (w @ a2) - 2 * ds * (w @ na) + ds * ds * (w @ n2)[:, None]
        se = np.sqrt(np.maximum(ss, 0.0) * (g / (g - 1))) / wn[:, None]
        gap = np.abs(ds - d[None, :])
        with np.errstate(divide="ignore", invalid="ignore"):
            dev = np.where(se > _SE_FLOOR, gap / se, np.where(gap > _SE_FLOOR, np.inf, 0.0))
        out.append(dev)
        done += size
    return np.concatenate(out) if out else np.empty((0, len(d)))


def rank_systems(
    values: Any,
    *,
    names: Sequence[str] | None = None,
    groups: Any = None,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    resamples: int = 1000,
    seed: int = 0,
    metric: str | None = None,
    task: str | None = None,
) -> RankingDoc:
    """Rank k systems scored on the same n items (``values``: a ``(k, n)`` array of finite per-item
    values, row i the system ``names[i]``); see the module's docstring for every number's definition.

    ``groups``: a cluster id per item (the bootstrap then resamples clusters, and the pairwise
    standard errors are cluster-robust). ``higher_is_better=False`` ranks the lowest mean first.
    ``alpha``: the family-wise error of the separations (the rank intervals hold jointly at
    ``1 - alpha``). ``resamples=0``: no separations; every interval is ``[1, k]`` and the tie
    group holds every system. Raises :class:`~labledger.errors.MetricInputError` (one line) on
    fewer than 2 systems or 2 units, non-finite values, a shape mismatch or alpha outside (0, 0.5).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 2:
        raise MetricInputError(f"ranking needs a (k, n) array of k >= 2 systems; got shape {v.shape}")
    k, n = v.shape
    labels = [str(x) for x in names] if names is not None else [f"system {i + 1}" for i in range(k)]
    if len(labels) != k:
        raise MetricInputError(f"{len(labels)} names for {k} systems")
    if len(set(labels)) != k:
        raise MetricInputError(f"system names must be distinct; got {labels}")
    if not (0 < alpha < 0.5):
        raise MetricInputError(f"alpha must be strictly between 0 and 0.5; got {alpha}")
    if resamples < 0:
        raise MetricInputError(f"resamples must be >= 0; got {resamples}")
    if not np.isfinite(v).all():
        raise MetricInputError("ranking needs a finite value for every system on every item")
    unit, clusters = _units(n, groups)
    g = clusters if clusters is not None else n
    if g < 2:
        raise MetricInputError(f"ranking needs at least 2 {'clusters' if clusters is not None else 'items'}; got {g}")
    s = v if higher_is_better else -v  # oriented: larger is better
    means = s.mean(axis=1)
    sums, counts, mult = _unit_table(s, unit, g, clusters is not None)
    resid = sums - counts[:, None] * means[None, :]  # each unit's sum of deviations from its system's mean
    gram = resid.T @ (resid * mult[:, None])
    var_unit = np.diag(gram)
    # CR1 variance of the mean difference of systems i and j: G/(G-1) sum_c (r_ci - r_cj)^2 / n^2
    pair_var = (var_unit[:, None] + var_unit[None, :] - 2 * gram) * (g / (g - 1)) / n**2
    se = np.sqrt(np.maximum(pair_var, 0.0))
    iu, ju = np.triu_indices(k, 1)
    d = means[iu] - means[ju]
    se_p = se[iu, ju]
    live = se_p > _SE_FLOOR * np.maximum(1.0, np.abs(means[iu]) + np.abs(means[ju]))
    t = np.zeros_like(d)
    t[live] = d[live] / se_p[live]
    separated = np.zeros(len(d), dtype=bool)
    critical: float | None = None
    if resamples and live.any():
        dev = _bootstrap_t(
            sums, counts, mult, clusters is not None, g, iu[live], ju[live], d[live], resamples, rng_for(seed)
        )
        idx = np.flatnonzero(live)
        open_ = np.ones(len(idx), dtype=bool)
        while open_.any():
            c = float(np.quantile(dev[:, open_].max(axis=1), 1 - alpha, method="higher"))
            critical = c if critical is None else critical
            new = open_ & (np.abs(t[idx]) > c)
            if not new.any():
                break
            separated[idx[new]] = True
            open_ &= ~new
    above = np.zeros((k, k), dtype=bool)  # above[i, j]: i separated above j
    for p in np.flatnonzero(separated):
        i, j = int(iu[p]), int(ju[p])
        if d[p] > 0:
            above[i, j] = True
        else:
            above[j, i] = True
    n_above = above.sum(axis=0)
    n_below = above.sum(axis=1)
    entries = [
        RankEntry(
            name=labels[j],
            value=float(v[j].mean()),
            rank=1 + int((means > means[j]).sum()),
            rank_low=1 + int(n_above[j]),
            rank_high=k - int(n_below[j]),
            tied_with_best=bool(n_above[j] == 0),
        )
        for j in range(k)
    ]
    unit_word = "clusters" if clusters is not None else "items"
    order = sorted(range(k), key=lambda j: (entries[j].rank, j))
    pairs = [
        [labels[i], labels[j]] if d[p] > 0 else [labels[j], labels[i]]
        for p, (i, j) in enumerate(zip(iu.tolist(), ju.tolist()))
        if separated[p]
    ]
    pairs.sort(key=lambda ab: (entries[labels.index(ab[0])].rank, entries[labels.index(ab[1])].rank))
    return RankingDoc(
        metric=metric,
        task=task,
        higher_is_better=higher_is_better,
        n=n,
        clusters=clusters,
        resamples=resamples,
        seed=seed,
        alpha=alpha,
        ci=1 - alpha,
        method=(
            f"paired bootstrap over {unit_word} (the same resamples for every system); pairwise t = difference "
            f"of means / its {'cluster-robust (CR1) ' if clusters is not None else ''}standard error of the "
            "per-item differences"
        ),
        adjustment=ADJUSTMENT,
        critical=critical,
        systems=entries,
        tie_group=[labels[j] for j in order if entries[j].tied_with_best],
        separated=pairs,
        warning=(
            f"{g} {unit_word}: the rank intervals and separations are approximate (the bootstrap's law of max |t| "
            f"is checked in simulation from {FEW_UNITS} {unit_word})"
            if g < FEW_UNITS
            else None
        ),
    )


def rank_results(
    sources: Sequence[Any],
    *,
    names: Sequence[str] | None = None,
    metric: str = "accuracy",
    task: str | None = None,
    positive: str | None = None,
    alpha: float = 0.05,
    resamples: int = 1000,
    seed: int = 0,
) -> RankingDoc:
    """:func:`rank_systems` on results (paths, row iterables or ResultSets, read by
    :func:`labledger.inputs.results.load`): one task (``task``, or the only task they all have) on
    the same item ids (each system's items are put in the first one's order; its gold must match).

    ``metric``: a registry metric that is a mean of per-item values (accuracy, exact match, a
    regression loss, set F1, ...: :func:`labledger.analysis.intervals.item_values`); its direction
    comes from the registry. A metric without per-item values (ROC-AUC, macro F1, ECE, ...) is
    refused (one line): the pairwise standard errors and the studentized bootstrap are built from
    per-item differences. Clusters: the first system's ``group`` field, when it has one.
    """
    from labledger.analysis.comparison import paired_positions
    from labledger.analysis.intervals import item_values
    from labledger.analysis.tasks import check_gold, prepare_task, task_params
    from labledger.errors import ComparisonError
    from labledger.inputs.results import load
    from labledger.metrics.registry import parse_metric

    spec = parse_metric(metric)
    sets = [load(src, positive=positive) for src in sources]
    labels = list(names) if names is not None else [str(rs.source) for rs in sets]
    if task is None:
        common = set.intersection(*(set(rs) for rs in sets)) if sets else set()
        if len(common) != 1:
            raise MetricInputError(
                f"the results share {len(common)} tasks ({', '.join(sorted(common)) or 'none'}): pass task= (--task) "
                "to rank one"
            )
        task = common.pop()
    tds = [rs[task] for rs in sets]
    first = tds[0]
    rows = []
    for j, td in enumerate(tds):
        if td.kind != first.kind:
            raise ComparisonError(f"task '{task}' is {first.kind} in {labels[0]} but {td.kind} in {labels[j]}")
        if j:
            ids_a, ids_b = first.ids, td.ids
            same = len(ids_a) == len(ids_b) and bool(np.all(ids_a == ids_b))
            if not same:
                where = paired_positions(ids_a, ids_b)
                if where is None:
                    raise ComparisonError(
                        f"task '{task}': {labels[j]} does not hold the same item ids as {labels[0]} "
                        f"({len(ids_b)} vs {len(ids_a)} items); a ranking needs the same items"
                    )
                td = td.subset(where)
            try:
                check_gold(first, td)
            except ComparisonError as err:  # its message names the sides A and B
                raise ComparisonError(f"{labels[0]} (A) vs {labels[j]} (B): {err}") from None
        params = task_params(spec.metric, dict(spec.params), td)
        found = item_values(prepare_task(spec.metric, params, td))
        if found is None:
            raise MetricInputError(
                f"{spec}: a ranking needs a metric that is a mean of per-item values (accuracy, exact_match, "
                "a per-item loss, ...)"
            )
        vals, mask = found
        if mask is not None and not np.all(mask):
            raise MetricInputError(f"{spec}: undefined on {int((~np.asarray(mask)).sum())} items of {labels[j]}")
        rows.append(np.asarray(vals, dtype=np.float64))
    return rank_systems(
        np.vstack(rows),
        names=labels,
        groups=first.group,
        higher_is_better=spec.metric.higher_is_better,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        metric=str(spec),
        task=task,
    )


def rank_entries(
    entries: Sequence[Any],
    names: Sequence[str],
    *,
    alpha: float = 0.05,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[RankingDoc | None, str | None]:
    """:func:`rank_results` on benchmark entries (:class:`~labledger.schema.BenchmarkEntry`, one
    benchmark, a version table's row) that point at their stored predictions: ``(document, None)``,
    or ``(None, why not)`` when an entry kept no predictions, the metrics differ, or the predictions
    cannot be ranked (other items, a metric without per-item values). ``names``: each entry's column."""
    from labledger.errors import LedgerError

    if len(entries) < 2:
        return None, "fewer than two columns"
    lacking = [name for name, e in zip(names, entries) if not e.results_path]
    if lacking:
        return None, f"no stored predictions for {', '.join(lacking)}"
    keys = sorted({e.id.key for e in entries})
    if len(keys) > 1:
        return None, f"different metrics ({', '.join(keys)})"
    try:
        doc = rank_results(
            [e.results_path for e in entries],
            names=list(names),
            metric=keys[0],
            task=entries[0].benchmark,
            alpha=alpha,
            resamples=resamples,
            seed=seed,
        )
    except (LedgerError, OSError) as err:
        return None, str(err).splitlines()[0] if str(err) else type(err).__name__
    return doc, None


def true_ranks(means: Sequence[float], *, higher_is_better: bool = True) -> list[int]:
    """The ranks of known means by the point-rank rule: ``1 + #{strictly better}``.

    >>> true_ranks([0.5, 0.7, 0.5])
    [2, 1, 2]
    """
    m = np.asarray(means, dtype=np.float64) * (1 if higher_is_better else -1)
    return [1 + int((m > x).sum()) for x in m]


__all__ = ["ADJUSTMENT", "FEW_UNITS", "rank_entries", "rank_results", "rank_systems", "true_ranks"]
