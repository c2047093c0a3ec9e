"""Inference helpers beside the bootstrap: p-values, clustered tests, analytic intervals, few-cluster
warnings, multiplicity, power, seeds and repeats. Pure numpy/scipy, no I/O.

Each procedure here is named in the value it produces (``method``), so a stored number says how it
was obtained. The figures quoted in warnings (:data:`FEW_CLUSTER_COVERAGE`) come from
``bench/stats_coverage.py``; ``tests/test_stats_simulation.py`` re-measures them.

>>> round(cluster_robust_se([0, 1, 0.5, 0, 1, 0], ["p1", "p1", "p2", "p2", "p3", "p3"]), 5)
0.08333
>>> n_for_delta(0.1684, 0.03), n_for_delta(0.1684, 0.05)
(1469, 529)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from labledger.errors import MetricInputError

# The normal and Student t quantiles and tails the intervals need. The normal ones from the standard
# library (math.erfc, statistics.NormalDist: scipy.special's ndtr/ndtri agree to ~1e-15), Student t's
# quantile at large df from its Cornish-Fisher expansion in 1/df (within ~1e-15 of scipy.special's
# stdtrit from df = 10,000 on, where every analytic interval of a large evaluation lives), and the
# rest from scipy.special, imported on first use, so that a command that needs none of it does not
# wait for its import (docs/performance.md).

#: From this many degrees of freedom on, :func:`t_ppf` uses its 1/df expansion (no scipy import).
T_EXPANSION_DF = 10_000


def quantiles(values: Any, qs: Sequence[float]) -> np.ndarray:
    """``np.quantile(values, qs)`` of a 1-D array (the default ``linear`` method): the same floats,
    found by one sort and numpy's own interpolation, without ``np.quantile``'s machinery, whose
    ``np.unique`` imports ``numpy.ma``. Values
    that are not all finite go to ``np.quantile`` itself.

    >>> v = np.array([3.0, 1.0, 2.0, 10.0])
    >>> quantiles(v, [0.025, 0.5, 0.975, 1.0]).tolist() == np.quantile(v, [0.025, 0.5, 0.975, 1.0]).tolist()
    True
    """
    a = np.asarray(values, dtype=np.float64)
    q = np.asarray(qs, dtype=np.float64)
    if a.ndim != 1 or len(a) == 0 or not np.isfinite(a).all() or not ((q >= 0) & (q <= 1)).all():
        return np.asarray(np.quantile(a, qs), dtype=np.float64)  # numpy's own answer, or its error
    a = np.sort(a)
    n = len(a)
    virtual = (n - 1) * q
    gamma = virtual - np.floor(virtual)
    top = virtual >= n - 1  # the last value, interpolated with itself (numpy's index -1)
    lo = np.where(top, n - 1, np.floor(virtual)).astype(np.intp)
    hi = np.where(top, n - 1, lo + 1)
    low, high = a[lo], a[hi]
    # numpy's _lerp: low + d * t, or high - d * (1 - t) where t >= 0.5
    diff = high - low
    out = low + diff * gamma
    np.subtract(high, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    out += 0.0  # -0.0 as 0.0: where the two zeros tie, which one a sort puts first varies by machine
    return out


def norm_ppf(q: float) -> float:
    """The standard normal quantile (``scipy.stats.norm.ppf``; -inf at 0, inf at 1, nan outside).

    >>> round(norm_ppf(0.975), 6)
    1.959964
    """
    q = float(q)
    if not 0.0 < q < 1.0:
        return -math.inf if q == 0.0 else math.inf if q == 1.0 else math.nan
    from statistics import NormalDist

    return NormalDist().inv_cdf(q)


def norm_cdf(x: float) -> float:
    """The standard normal distribution function (``scipy.stats.norm.cdf``: cephes' ndtr rule).

    >>> norm_cdf(0.0), round(norm_cdf(1.959964), 6)
    (0.5, 0.975)
    """
    x = float(x)
    if math.isnan(x):
        return math.nan
    a = x * math.sqrt(0.5)
    if abs(a) < math.sqrt(0.5):
        return 0.5 + 0.5 * math.erf(a)
    y = 0.5 * math.erfc(abs(a))
    return 1.0 - y if a > 0 else y


def norm_sf(x: float) -> float:
    """The standard normal upper tail (``scipy.stats.norm.sf``).

    >>> round(norm_sf(1.959964), 6)
    0.025
    """
    return norm_cdf(-float(x))


def _t_ppf_expansion(q: float, df: float) -> float:
    """Student t's quantile from the normal one, to order 1/df^4 (Fisher and Cornish's series)."""
    z = norm_ppf(q)
    if not math.isfinite(z):
        return z
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


def t_ppf(q: float, df: float) -> float:
    """Student t's quantile with ``df`` degrees of freedom (``scipy.stats.t.ppf``).

    >>> round(t_ppf(0.975, 10), 6), round(t_ppf(0.975, 999_999), 6)
    (2.228139, 1.959966)
    """
    if df >= T_EXPANSION_DF and math.isfinite(df):
        return _t_ppf_expansion(float(q), float(df))
    from scipy import special as sp

    return float(sp.stdtrit(df, q))


#: From this many degrees of freedom :func:`t_sf` uses its 1/df expansion (no scipy import).
T_SF_EXPANSION_DF = 100_000


def _t_sf_expansion(x: float, df: float) -> float:
    """Student t's upper tail from the normal one, to order 1/df^3: the t density's series in 1/df
    (``phi(t) [1 + (t^4 - 2t^2 - 1) / (4 df) + ...]``) integrated term by term. Against
    ``scipy.special.stdtr`` from 1e5 df: within 4e-16 absolute for every x (relative 1e-12 while
    x^4 <= 1e-3 df; beyond, the tail is below 1e-8 and the relative error grows)."""
    z2 = x * x
    phi = math.exp(-z2 / 2) / math.sqrt(2 * math.pi)
    c1 = x * (z2 + 1) / 4
    c2 = x * (z2 - 3) * ((3 * z2 + 2) * z2 + 1) / 96
    c3 = x * (((((z2 - 11) * z2 + 14) * z2 + 6) * z2 - 3) * z2 - 15) / 384
    return norm_sf(x) + phi * (c1 + (c2 + c3 / df) / df) / df


def t_sf(x: float, df: float) -> float:
    """Student t's upper tail (``scipy.stats.t.sf``).

    >>> round(t_sf(2.228139, 10), 6), round(t_sf(1.959966, 999_999), 6)
    (0.025, 0.025)
    """
    if df >= T_SF_EXPANSION_DF and math.isfinite(df) and math.isfinite(x):
        return _t_sf_expansion(float(x), float(df))
    from scipy import special as sp

    return float(sp.stdtr(df, -x))


#: Below this many clusters (or items, when there are no clusters) every interval carries a warning.
FEW_UNITS = 30
#: Below this many clusters a zero-width interval is not reported as an interval ("too few clusters").
MIN_CLUSTERS = 5
#: Coverage of labledger's default nominal 95% bootstrap intervals measured by ``bench/stats_coverage.py``
#: (R = 1,000 datasets per cell, MC se <= 0.014; accuracy's percentile interval and macro-F1's default
#: interval, BCa from 5 clusters, on the numbers.md models): units -> (lowest, highest) over the two.
#: "clusters": groups of 10 items sharing a random effect, ``group`` given; "items": iid items.
FEW_CLUSTER_COVERAGE: dict[str, dict[int, tuple[float, float]]] = {
    "clusters": {3: (0.73, 0.77), 5: (0.82, 0.84), 10: (0.88, 0.91), 20: (0.92, 0.94), 30: (0.92, 0.94)},
    "items": {10: (0.87, 0.93), 20: (0.90, 0.93), 30: (0.94, 0.96)},
}


# ------------------------------------------------------------------------------------------------
# p-values


def percentile_p_value(d: Any) -> float | None:
    """Two-sided percentile-bootstrap p-value of H0: difference = 0, from resampled differences ``d``.

    ``p = min(1, 2 * min(1 + #{d* <= 0}, 1 + #{d* >= 0}) / (B + 1))``: the smallest level at which the
    central percentile interval excludes 0, so p < 0.05 exactly when the 95% percentile interval
    excludes 0 (up to ties at 0 and the +1, i.e. within 1/B). Non-finite resamples are dropped.

    >>> percentile_p_value([0.1, 0.2, 0.3, -0.1])
    0.8
    >>> percentile_p_value([0.1] * 999)
    0.002
    """
    d = np.asarray(d, dtype=np.float64).ravel()
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return None
    le = int((d <= 0).sum())
    ge = int((d >= 0).sum())
    return float(min(1.0, 2 * (1 + min(le, ge)) / (len(d) + 1)))


def clustered_mcnemar(*, correct_a: Any, correct_b: Any, groups: Any) -> dict[str, Any]:
    """McNemar's test for clustered paired binary data (Durkalski, Palesch, Lipsitz & Rust 2003).

    Per cluster k: b_k = items A got right and B wrong, c_k = the reverse.
    ``X^2 = (sum_k (b_k - c_k))^2 / sum_k (b_k - c_k)^2``, chi-square with 1 degree of freedom. With one
    item per cluster this is McNemar's statistic without continuity correction.

    >>> r = clustered_mcnemar(correct_a=[1, 1, 1, 0, 1, 1], correct_b=[0, 0, 1, 0, 1, 0], groups=[0, 0, 1, 1, 2, 2])
    >>> r["b"], r["c"], r["clusters"], round(r["p_value"], 4)
    (3, 0, 3, 0.1797)
    """
    a = np.asarray(correct_a, dtype=bool)
    b_ = np.asarray(correct_b, dtype=bool)
    g = np.asarray(groups)
    if a.shape != b_.shape or a.shape != g.shape or a.ndim != 1:
        raise MetricInputError(
            f"correct_a, correct_b and groups must be 1-D and the same length; got {a.shape}, {b_.shape}, {g.shape}"
        )
    _, codes = np.unique(g, return_inverse=True)
    n_c = int(codes.max()) + 1 if len(codes) else 0
    bk = np.bincount(codes, weights=(a & ~b_).astype(float), minlength=n_c)
    ck = np.bincount(codes, weights=(~a & b_).astype(float), minlength=n_c)
    dk = bk - ck
    den = float((dk**2).sum())
    method = "clustered McNemar (Durkalski et al. 2003), chi-square 1 df"
    out: dict[str, Any] = {"b": int(bk.sum()), "c": int(ck.sum()), "clusters": n_c, "method": method}
    if den == 0:
        return {**out, "statistic": None, "p_value": 1.0}
    stat = float(dk.sum()) ** 2 / den
    return {**out, "statistic": stat, "p_value": math.erfc(math.sqrt(stat / 2))}


# ------------------------------------------------------------------------------------------------
# Analytic intervals for means


def _codes(groups: Any, n: int) -> np.ndarray:
    g = np.asarray(groups)
    if g.shape != (n,):
        raise MetricInputError(f"groups has shape {g.shape}; expected ({n},)")
    return np.unique(g, return_inverse=True)[1].reshape(-1)


def cluster_robust_se(values: Any, groups: Any, *, small_sample: bool = True) -> float:
    """Cluster-robust standard error of the mean: ``sqrt(C/(C-1) * sum_c (sum_{i in c} (x_i - xbar))^2) / n``.

    ``small_sample=False`` drops the ``C/(C-1)`` factor (Miller 2024, Appendix A, asymptotic form).
    inspect_ai's example: 0.08333 with the factor, 0.06804 without.

    >>> round(cluster_robust_se([0, 1, 0.5, 0, 1, 0], ["p1", "p1", "p2", "p2", "p3", "p3"], small_sample=False), 5)
    0.06804
    """
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    codes = _codes(groups, n)
    c = int(codes.max()) + 1 if n else 0
    if c < 2:
        return float("nan")
    s = np.bincount(codes, weights=x - x.mean(), minlength=c)
    factor = c / (c - 1) if small_sample else 1.0
    return float(math.sqrt(factor * float((s**2).sum())) / n)


def wilson_interval(successes: float, n: float, ci: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval for a proportion.

    >>> tuple(round(x, 4) for x in wilson_interval(7, 10))
    (0.3968, 0.8922)
    """
    if n <= 0:
        return None, None
    z = float(norm_ppf((1 + ci) / 2))
    p = successes / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def proportion_interval(successes: float, n: int, ci: float = 0.95) -> dict[str, Any]:
    """:func:`mean_interval` of ``n`` 0/1 values of which ``successes`` are 1, without clusters: the
    Wilson score interval, the same floats, from the two counts alone (accuracy's from its count
    table: the per-item correctness is never made).

    >>> proportion_interval(3, 4) == mean_interval([1, 0, 1, 1])
    True
    """
    out: dict[str, Any] = {"low": None, "high": None, "se": None, "df": None, "ci": ci}
    if n == 0:
        return {**out, "method": "no items"}
    m = successes / n  # the mean of the 0/1 values: their sum is exact, so the same float
    lo, hi = wilson_interval(successes, n, ci)
    return {**out, "method": "Wilson score interval", "se": math.sqrt(m * (1 - m) / n), "low": lo, "high": hi}


#: The method of a mean's CLT interval (:func:`mean_interval`; an analytic stored value's is the same
#: after ``"analytic: "``).
CLT_METHOD = "CLT SE (n-1 variance), t on n-1 df"


def mean_interval(values: Any, *, groups: Any = None, ci: float = 0.95, mask: Any = None) -> dict[str, Any]:
    """An analytic interval for a mean of per-item values (accuracy, exact match, any per-item score).

    - clusters given: cluster-robust SE (with ``C/(C-1)``), t reference on C-1 degrees of freedom;
    - no clusters, 0/1 values: the Wilson score interval;
    - no clusters, other values: the CLT SE (n-1 variance), t reference on n-1 degrees of freedom.

    >>> r = mean_interval([0, 1, 0.5, 0, 1, 0], groups=["p1", "p1", "p2", "p2", "p3", "p3"])
    >>> r["method"], round(r["se"], 5), r["df"]
    ('cluster-robust SE (CR1: C/(C-1)), t on C-1 df', 0.08333, 2)
    """
    x = np.asarray(values, dtype=np.float64)
    g = None if groups is None else np.asarray(groups)
    if mask is not None:
        keep = np.asarray(mask, dtype=bool)
        x = x[keep]
        g = None if g is None else g[keep]
    n = len(x)
    out: dict[str, Any] = {"low": None, "high": None, "se": None, "df": None, "ci": ci}
    if n == 0:
        return {**out, "method": "no items"}
    m = float(x.mean())
    if g is not None:
        se = cluster_robust_se(x, g)
        c = len(np.unique(g))
        method = "cluster-robust SE (CR1: C/(C-1)), t on C-1 df"
        if not math.isfinite(se):
            return {**out, "method": method, "clusters": c}
        t = float(t_ppf((1 + ci) / 2, c - 1))
        return {**out, "method": method, "se": se, "df": c - 1, "low": m - t * se, "high": m + t * se, "clusters": c}
    if np.all((x == 0) | (x == 1)):
        return proportion_interval(float(x.sum()), n, ci)
    if n < 2:
        return {**out, "method": CLT_METHOD}
    se = float(x.std(ddof=1) / math.sqrt(n))
    t = float(t_ppf((1 + ci) / 2, n - 1))
    return {
        "method": CLT_METHOD,
        "se": se,
        "df": n - 1,
        "low": m - t * se,
        "high": m + t * se,
        "ci": ci,
    }


# ------------------------------------------------------------------------------------------------
# BCa intervals (bias-corrected and accelerated; Efron 1987)


def jackknife_values(prep: Any, groups: Any = None, *, max_units: int = 5000) -> np.ndarray | None:
    """Leave-one-out values of a prepared metric (leave one cluster out when ``groups`` is given);
    None past ``max_units`` units (the acceleration is then negligible and the cost n^2)."""
    n = prep.n
    codes = np.arange(n) if groups is None else _codes(groups, n)
    units = int(codes.max()) + 1 if n else 0
    if units < 3 or units > max_units:
        return None
    out = []
    step = max(1, (1 << 22) // max(n, 1))
    for s0 in range(0, units, step):
        u = np.arange(s0, min(units, s0 + step))
        w = (codes[None, :] != u[:, None]).astype(np.float64)
        out.append(np.asarray(prep.weighted(w), dtype=np.float64).reshape(len(u), -1)[:, 0])
    return np.concatenate(out)


def bca_interval(samples: Any, value: float, jackknife: Any, ci: float = 0.95) -> tuple[float | None, float | None]:
    """The BCa interval from bootstrap ``samples``, the point ``value`` and jackknife values.

    >>> rng = np.random.default_rng(0)
    >>> x = rng.exponential(size=40)
    >>> boots = np.array([rng.choice(x, 40).mean() for _ in range(2000)])
    >>> jack = np.array([np.delete(x, i).mean() for i in range(40)])
    >>> lo, hi = bca_interval(boots, x.mean(), jack)
    >>> bool(lo < x.mean() < hi)
    True
    """
    b = np.asarray(samples, dtype=np.float64)
    b = b[np.isfinite(b)]
    jack = np.asarray(jackknife, dtype=np.float64)
    jack = jack[np.isfinite(jack)]
    if len(b) == 0 or not math.isfinite(value):
        return None, None
    share = (np.sum(b < value) + 0.5 * np.sum(b == value)) / len(b)
    share = min(max(share, 0.5 / len(b)), 1 - 0.5 / len(b))
    z0 = float(norm_ppf(share))
    dev = jack.mean() - jack if len(jack) else np.zeros(1)
    den = float((dev**2).sum())
    acc = float((dev**3).sum()) / (6 * den**1.5) if den > 0 else 0.0
    qs = []
    for z in (norm_ppf((1 - ci) / 2), norm_ppf((1 + ci) / 2)):
        qs.append(float(norm_cdf(z0 + (z0 + z) / (1 - acc * (z0 + z)))))
    lo, hi = quantiles(b, qs)
    return float(lo), float(hi)


# ------------------------------------------------------------------------------------------------
# Few clusters, small n


def coverage_note(units: int | None, *, clusters: bool) -> str | None:
    """The warning every interval carries below :data:`FEW_UNITS` clusters (or items), else None.

    >>> coverage_note(10, clusters=True)
    '10 clusters: intervals are approximate; coverage in simulation 0.88–0.91'
    >>> coverage_note(100, clusters=True) is None
    True
    """
    if units is None or units >= FEW_UNITS:
        return None
    kind = "clusters" if clusters else "items"
    table = FEW_CLUSTER_COVERAGE[kind]
    near = [k for k in sorted(table) if k <= units] or [min(table)]
    lo, hi = table[near[-1]]
    at = "" if near[-1] == units else f" (at {near[-1]} {kind})"
    return f"{units} {kind}: intervals are approximate; coverage in simulation{at} {lo:.2f}–{hi:.2f}"


def refuse_degenerate(low: float | None, high: float | None, clusters: int | None) -> str | None:
    """``"too few clusters"`` when a zero-width interval comes from fewer than :data:`MIN_CLUSTERS` clusters.

    >>> refuse_degenerate(0.7, 0.7, 3), refuse_degenerate(0.6, 0.8, 3)
    ('too few clusters', None)
    """
    if clusters is None or clusters >= MIN_CLUSTERS or low is None or high is None:
        return None
    return "too few clusters" if high - low <= 1e-12 * max(1.0, abs(high)) else None


# ------------------------------------------------------------------------------------------------
# Multiplicity


ADJUSTMENTS = ("holm", "bh", "none")


def adjust_p(p_values: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """Adjusted p-values for a family of tests: ``holm`` (family-wise error), ``bh`` (Benjamini-Hochberg
    false discovery rate) or ``none``. ``None`` entries (untested) stay None and are not in the family.

    >>> adjust_p([0.01, 0.04, None, 0.03], "holm")
    [0.03, 0.06, None, 0.06]
    >>> adjust_p([0.01, 0.04, None, 0.03], "bh")
    [0.03, 0.04, None, 0.04]
    """
    if method not in ADJUSTMENTS:
        from labledger.errors import UnknownNameError

        raise UnknownNameError("multiplicity adjustment", method, ADJUSTMENTS)
    idx = [i for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    if not idx:
        return out
    p = np.array([float(v) for v in p_values if v is not None])
    m = len(p)
    if method == "none":
        adj = p
    elif method == "holm":
        order = np.argsort(p, kind="stable")
        stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
        adj = np.empty(m)
        adj[order] = np.minimum(1.0, stepped)
    else:
        order = np.argsort(p, kind="stable")[::-1]
        ranks = m - np.arange(m)
        stepped = np.minimum.accumulate(p[order] * m / ranks)
        adj = np.empty(m)
        adj[order] = np.minimum(1.0, stepped)
    for i, v in zip(idx, adj.tolist()):
        out[i] = float(v)
    return out


def family_note(n_tests: int, method: str) -> str:
    """The line stated under a table of tests: ``"16 tests, Holm"``.

    >>> family_note(16, "holm")
    '16 tests, Holm'
    """
    name = {"holm": "Holm", "bh": "Benjamini-Hochberg (FDR)", "none": "no adjustment"}[method]
    return f"{n_tests} test{'s' if n_tests != 1 else ''}, {name}"


# ------------------------------------------------------------------------------------------------
# Power and minimum detectable effect (Miller 2024: n = (z_{a/2} + z_b)^2 omega^2 / delta^2)


def _z_sum(alpha: float, power: float) -> float:
    if not (0 < alpha < 1) or not (0 < power < 1):
        raise MetricInputError(f"alpha and power must be in (0, 1); got {alpha}, {power}")
    return float(norm_ppf(1 - alpha / 2) + norm_ppf(power))


def n_for_delta(omega2: float, delta: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Items needed to detect a true paired difference ``delta`` with variance of differences ``omega2``.

    >>> n_for_delta(0.1684, 0.03)
    1469
    """
    if delta == 0:
        raise MetricInputError("delta must be non-zero")
    if omega2 < 0:
        raise MetricInputError(f"the variance of the differences must be >= 0; got {omega2}")
    return math.ceil(_z_sum(alpha, power) ** 2 * omega2 / delta**2 - 1e-9)


def mde(omega2: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect: the true paired difference detected with ``power`` at ``n`` items.

    >>> round(mde(0.1684, 1469), 4)
    0.03
    """
    if n <= 0:
        raise MetricInputError(f"n must be positive; got {n}")
    return _z_sum(alpha, power) * math.sqrt(omega2 / n)


def mde_from_se(se: float | None, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """MDE from the standard error of the observed difference (e.g. the paired bootstrap's SD of d*).

    >>> round(mde_from_se(0.01), 4)
    0.028
    """
    if se is None or not math.isfinite(se):
        return None
    return _z_sum(alpha, power) * se


def power_at(delta: float, omega2: float, n: int, *, alpha: float = 0.05) -> float:
    """Power of the two-sided paired z-test for a true difference ``delta``.

    >>> round(power_at(0.03, 0.1684, 1469), 2)
    0.8
    """
    if omega2 <= 0:
        return 1.0 if delta else alpha
    z = float(norm_ppf(1 - alpha / 2))
    s = abs(delta) / math.sqrt(omega2 / n)
    return float(norm_sf(z - s) + norm_cdf(-z - s))


def paired_binary_variance(p_a: float, p_b: float, rho: float) -> float:
    """Var(d) for d = A correct - B correct with accuracies ``p_a``, ``p_b`` and correlation ``rho``.

    >>> round(paired_binary_variance(0.8, 0.8, 0.6), 4)
    0.128
    """
    for v in (p_a, p_b):
        if not 0 <= v <= 1:
            raise MetricInputError(f"accuracies must be in [0, 1]; got {v}")
    if not -1 <= rho <= 1:
        raise MetricInputError(f"correlation must be in [-1, 1]; got {rho}")
    va, vb = p_a * (1 - p_a), p_b * (1 - p_b)
    return max(0.0, va + vb - 2 * rho * math.sqrt(va * vb))


# ------------------------------------------------------------------------------------------------
# Seeds


def seed_t_interval(values: Any, *, ci: float = 0.95) -> dict[str, Any]:
    """Mean of recorded per-seed values with a t interval over seeds (n_seeds - 1 df).

    >>> r = seed_t_interval([0.70, 0.72, 0.71])
    >>> round(r["value"], 3), r["n_seeds"], r["method"]
    (0.71, 3, 't interval over seeds (recorded values only)')
    """
    x = np.asarray(values, dtype=np.float64)
    s = len(x)
    out: dict[str, Any] = {"value": float(x.mean()) if s else None, "n_seeds": s, "n_items": None, "ci": ci}
    out["method"] = "t interval over seeds (recorded values only)"
    if s < 2:
        return {**out, "low": None, "high": None, "se": None}
    value = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(s))
    t = float(t_ppf((1 + ci) / 2, s - 1))
    return {**out, "low": value - t * se, "high": value + t * se, "se": se}


def welch_diff(a: Any, b: Any, *, ci: float = 0.95) -> dict[str, Any]:
    """Difference of means of recorded per-seed values, Welch t interval and p-value.

    >>> r = welch_diff([0.71, 0.72, 0.70], [0.65, 0.66, 0.64])
    >>> round(r["diff"], 2), r["p_value"] < 0.01, r["method"]
    (0.06, True, 'Welch t interval over seeds (recorded values only)')
    """
    xa, xb = (np.asarray(v, dtype=np.float64) for v in (a, b))
    out: dict[str, Any] = {"diff": float(xa.mean() - xb.mean()) if len(xa) and len(xb) else None, "ci": ci}
    out["method"] = "Welch t interval over seeds (recorded values only)"
    out["n_seeds"] = [len(xa), len(xb)]
    if len(xa) < 2 or len(xb) < 2:
        return {**out, "low": None, "high": None, "p_value": None, "se": None}
    va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
    se = math.sqrt(va + vb)
    if se == 0:
        return {**out, "low": out["diff"], "high": out["diff"], "p_value": None, "se": 0.0}
    df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
    t = float(t_ppf((1 + ci) / 2, df))
    diff = float(xa.mean() - xb.mean())
    p = float(2 * t_sf(abs(diff) / se, df))
    return {**out, "low": diff - t * se, "high": diff + t * se, "p_value": p, "se": se, "df": df}


def _seed_item_draws(
    scores: np.ndarray, resamples: int, rng: np.random.Generator, item_weights: np.ndarray | None = None
) -> np.ndarray:
    """(B,) grand means under the two-level bootstrap of a (seeds x items) score matrix."""
    s, n = scores.shape
    ws = rng.multinomial(s, np.full(s, 1 / s), size=resamples).astype(np.float64)
    if item_weights is None:
        item_weights = rng.multinomial(n, np.full(n, 1 / n), size=resamples).astype(np.float64)
    per_seed = item_weights @ scores.T / n  # (B, S): each seed's mean under the item draw
    out: np.ndarray = (ws * per_seed).sum(axis=1) / s
    return out


TWO_LEVEL = (
    "two-level bootstrap (seeds, then items: one item draw shared by all seeds), less the doubly counted "
    "seed x item variance (Owen 2007); t on Satterthwaite df"
)


def _crossed_parts(x: np.ndarray) -> tuple[float, float, float]:
    """Two-way crossed mean squares divided by S*n: (seeds, items, residual) parts of Var(grand mean)."""
    s, n = x.shape
    m = x.mean()
    ms, mi = x.mean(axis=1), x.mean(axis=0)
    ms_seed = n * float(((ms - m) ** 2).sum()) / max(s - 1, 1)
    ms_item = s * float(((mi - m) ** 2).sum()) / max(n - 1, 1)
    resid = x - ms[:, None] - mi[None, :] + m
    ms_res = float((resid**2).sum()) / max((s - 1) * (n - 1), 1)
    return ms_seed / (s * n), ms_item / (s * n), ms_res / (s * n)


def _t_from_draws(
    value: float, draws: np.ndarray, resid: float, terms: list[tuple[float, float]], ci: float
) -> tuple[float, float, float, float]:
    """value +- t * SE: SE^2 = max(Var(draws) - 2 * resid, the analytic crossed-design variance
    sum(terms)); df by Satterthwaite over the signed ``terms`` (part, df)."""
    analytic = sum(v for v, _ in terms)
    var = max(float(np.var(draws, ddof=1)) - 2 * resid, analytic, 1e-300)
    den = sum(v * v / max(df, 1) for v, df in terms)
    df = max(1.0, analytic * analytic / den) if den > 0 and analytic > 0 else 1.0
    se = math.sqrt(var)
    t = float(t_ppf((1 + ci) / 2, df))
    return value - t * se, value + t * se, se, df


def _terms(x: np.ndarray) -> list[tuple[float, float]]:
    a, b, c = _crossed_parts(x)
    s, n = x.shape
    return [(a, s - 1), (b, n - 1), (-c, (s - 1) * (n - 1))]


def seed_group_interval(scores: Any, *, ci: float = 0.95, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Mean over seeds and items of a (seeds x items) matrix of per-item scores, with a two-level
    bootstrap interval: seeds resampled, then items (the same items in every seed's result set, so one
    item draw serves all seeds of a resample). The interval is value +- t * SE with SE^2 the variance
    of the draws less twice the seed x item residual part (which that bootstrap counts three times,
    Owen 2007), t on Satterthwaite degrees of freedom.

    >>> rng = np.random.default_rng(0)
    >>> r = seed_group_interval((rng.random((5, 200)) < 0.7).astype(float))
    >>> r["n_seeds"], r["n_items"], r["low"] < r["value"] < r["high"]
    (5, 200, True)
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise MetricInputError(f"scores must be a (seeds x items) matrix; got shape {x.shape}")
    value = float(x.mean())
    s, n = x.shape
    out = {"value": value, "n_seeds": s, "n_items": n, "ci": ci, "resamples": resamples, "method": TWO_LEVEL}
    if s < 2:
        return {**out, "low": None, "high": None, "se": None}
    draws = _seed_item_draws(x, resamples, np.random.default_rng(seed))
    lo, hi, se, df = _t_from_draws(value, draws, _crossed_parts(x)[2], _terms(x), ci)
    return {**out, "low": lo, "high": hi, "se": se, "df": df}


def compare_seed_groups(
    scores_a: Any, scores_b: Any, *, paired: bool, ci: float = 0.95, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """A - B for two seed groups (seeds x items matrices) by the same two-level bootstrap; ``paired``:
    the items match, so one item draw serves both groups. p-value: t test with the same SE and df, so
    p < 0.05 exactly when the interval excludes 0.

    >>> rng = np.random.default_rng(1)
    >>> a = (rng.random((4, 300)) < 0.8).astype(float); b = (rng.random((4, 300)) < 0.6).astype(float)
    >>> r = compare_seed_groups(a, b, paired=True)
    >>> r["low"] > 0, r["p_value"] < 0.01
    (True, True)
    """
    xa, xb = (np.asarray(v, dtype=np.float64) for v in (scores_a, scores_b))
    if xa.ndim != 2 or xb.ndim != 2:
        raise MetricInputError("each group must be a (seeds x items) matrix")
    if paired and xa.shape[1] != xb.shape[1]:
        raise MetricInputError(f"paired seed groups need the same items; got {xa.shape[1]} and {xb.shape[1]}")
    rng = np.random.default_rng(seed)
    diff = float(xa.mean() - xb.mean())
    n = xa.shape[1]
    w = rng.multinomial(n, np.full(n, 1 / n), size=resamples).astype(np.float64) if paired else None
    da = _seed_item_draws(xa, resamples, rng, w)
    db = _seed_item_draws(xb, resamples, rng, w)
    d = da - db
    dof = min(xa.shape[0], xb.shape[0]) - 1
    pa, pb = _crossed_parts(xa), _crossed_parts(xb)
    resid = pa[2] + pb[2]
    if paired:  # item effects cancel: the item part is that of the per-item difference of seed means
        delta = xa.mean(axis=0) - xb.mean(axis=0)
        sa, sb = xa.shape[0], xb.shape[0]
        terms = [(pa[0], sa - 1), (pb[0], sb - 1), (float(delta.var(ddof=1)) / n, n - 1)]
        terms += [(-pa[2], (sa - 1) * (n - 1)), (-pb[2], (sb - 1) * (n - 1))]
    else:
        terms = _terms(xa) + _terms(xb)
    lo, hi, se, df = _t_from_draws(diff, d, resid, terms, ci)
    return {
        "diff": diff,
        "low": lo,
        "high": hi,
        "se": se,
        "df": df,
        "p_value": float(2 * t_sf(abs(diff) / se, df)) if dof >= 1 and se > 0 else None,
        "paired": paired,
        "n_seeds": [int(xa.shape[0]), int(xb.shape[0])],
        "n_items": [int(xa.shape[1]), int(xb.shape[1])],
        "ci": ci,
        "method": TWO_LEVEL + ("; paired on items" if paired else "; items drawn per group"),
    }


# ------------------------------------------------------------------------------------------------
# Repeats (epochs, samples)


def reduce_repeats(items: Any, values: Any, *, how: str = "mean") -> dict[str, Any]:
    """Per-item reduction of repeated scores (epochs, samples): ``mean`` (default), ``max`` (best of k)
    or ``min``; with K and n and the variance decomposition of the scores (between items vs within items).

    ``between`` is the variance of the per-item means (n-1), ``within`` the mean within-item variance
    (K_i-1, items with K_i >= 2); the variance of the mean of reduced values is about
    ``(between_true + within / K) / n`` (Miller 2024, section 3).

    >>> r = reduce_repeats(["a", "a", "b", "b"], [1, 0, 1, 1])
    >>> r["items"], r["values"].tolist(), r["k"], r["n"], r["within"]
    (['a', 'b'], [0.5, 1.0], 2, 2, 0.25)
    """
    if how not in ("mean", "max", "min"):
        from labledger.errors import UnknownNameError

        raise UnknownNameError("repeat reduction", how, ("mean", "max", "min"))
    ids = np.asarray(items)
    x = np.asarray(values, dtype=np.float64)
    if ids.shape != x.shape or x.ndim != 1:
        raise MetricInputError(f"items and values must be 1-D and the same length; got {ids.shape}, {x.shape}")
    uniq, first, codes = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes = rank[codes.reshape(-1)]
    n = len(uniq)
    k = np.bincount(codes, minlength=n)
    sums = np.bincount(codes, weights=x, minlength=n)
    means = sums / np.maximum(k, 1)
    if how == "mean":
        red = means
    else:
        red = np.full(n, -np.inf if how == "max" else np.inf)
        (np.maximum if how == "max" else np.minimum).at(red, codes, x)
    dev2 = np.bincount(codes, weights=(x - means[codes]) ** 2, minlength=n)
    multi = k >= 2
    within = float((dev2[multi] / (k[multi] - 1)).mean()) if multi.any() else None
    between = float(means.var(ddof=1)) if n >= 2 else None
    ks = sorted(set(k.tolist()))
    return {
        "items": uniq[order].tolist(),
        "values": red,
        "reduction": how,
        "k": ks[0] if len(ks) == 1 else ks,
        "n": n,
        "n_scores": len(x),
        "between": between,
        "within": within,
    }


__all__ = [
    "ADJUSTMENTS",
    "FEW_CLUSTER_COVERAGE",
    "FEW_UNITS",
    "MIN_CLUSTERS",
    "adjust_p",
    "bca_interval",
    "cluster_robust_se",
    "clustered_mcnemar",
    "compare_seed_groups",
    "coverage_note",
    "family_note",
    "jackknife_values",
    "mde",
    "mde_from_se",
    "mean_interval",
    "n_for_delta",
    "paired_binary_variance",
    "percentile_p_value",
    "power_at",
    "reduce_repeats",
    "refuse_degenerate",
    "seed_group_interval",
    "seed_t_interval",
    "welch_diff",
    "wilson_interval",
]
