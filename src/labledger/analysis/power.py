"""Plan an evaluation: the items needed to detect a difference, or the smallest difference a given
number of items detects (Miller 2024, "Adding Error Bars to Evals", section 5):

    n = (z_{1-alpha/2} + z_{1-beta})^2 * omega^2 / delta^2,   MDE = (z_{1-alpha/2} + z_{1-beta}) * sqrt(omega^2 / n)

omega^2 is the variance of the per-item paired difference A - B. It comes from a stated value, from a
baseline accuracy and an error correlation, or from stored result sets (one: its accuracy and the
stated correlation; two on the same items: the observed per-item differences, cluster-robust when
rows carry ``group``).

>>> plan = power_plan(omega2=0.1684, delta=0.03)
>>> plan["n"], plan["omega2_source"]
(1469, 'given')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labledger.errors import MetricInputError
from labledger.metrics.stats import cluster_robust_se, mde, n_for_delta, paired_binary_variance, power_at


def task_item_values(rs: Any, metric: str, task: str | None) -> tuple[np.ndarray, Any, str]:
    """``(per-item values, the task's data, its name)`` of a mean metric (accuracy, exact match, ...)
    on the one task of a result set (or ``task``)."""
    from labledger.analysis.intervals import item_values
    from labledger.analysis.tasks import prepare_task, select_tasks, task_params
    from labledger.metrics.registry import parse_metric

    names = select_tasks(rs, task) if task else list(rs)
    if len(names) != 1:
        raise MetricInputError(f"the result set has {len(names)} tasks ({', '.join(names)}): choose one with task=")
    td = rs[names[0]]
    spec = parse_metric(metric)
    prep = prepare_task(spec.metric, task_params(spec.metric, dict(spec.params), td), td)
    item = item_values(prep)
    if item is None or item[1] is not None:
        raise MetricInputError(f"a per-item mean metric is needed (accuracy, exact_match...); got '{metric}'")
    return item[0], td, names[0]


def item_scores(source: Any, metric: str, task: str | None) -> tuple[np.ndarray, np.ndarray | None, list[str], str]:
    """Per-item values of a mean metric (accuracy, exact match, ...) of one task, with groups and ids."""
    from labledger.inputs.results import load

    values, td, name = task_item_values(load(source), metric, task)
    return values, td.group, [str(i) for i in td.ids.tolist()], name


def _paired_omega2(a: np.ndarray, b: np.ndarray, groups: np.ndarray | None) -> float:
    d = a - b
    if groups is not None and len(np.unique(groups)) >= 2:
        return float(len(d) * cluster_robust_se(d, groups) ** 2)  # design effect included
    return float(d.var(ddof=1)) if len(d) > 1 else 0.0


def power_plan(
    *,
    delta: float | None = None,
    n: int | None = None,
    omega2: float | None = None,
    baseline: float | None = None,
    correlation: float | None = None,
    results: Any = None,
    results_b: Any = None,
    metric: str = "accuracy",
    task: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> dict[str, Any]:
    """The n needed for ``delta`` (or, given ``n``, the MDE) and where omega^2 came from.

    >>> p = power_plan(baseline=0.8, correlation=0.6, n=1000)
    >>> round(p["mde"], 4), p["omega2_source"]
    (0.0317, 'baseline accuracy 0.8, correlation 0.6')
    """
    if (delta is None) == (n is None):
        raise MetricInputError("give exactly one of delta (to get n) or n (to get the minimum detectable effect)")
    source: str
    extra: dict[str, Any] = {}
    if omega2 is not None:
        source = "given"
    elif results is not None and results_b is not None:
        a, groups, ids_a, name = item_scores(results, metric, task)
        b, groups_b, ids_b, _ = item_scores(results_b, metric, task)
        if ids_a != ids_b:
            if sorted(ids_a) != sorted(ids_b):
                raise MetricInputError(
                    "the two result sets cover different items: a paired variance needs the same ids"
                )
            pos = {v: i for i, v in enumerate(ids_b)}
            b = b[[pos[v] for v in ids_a]]
        groups = groups if groups is not None else groups_b
        omega2 = _paired_omega2(a, b, groups)
        c = float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else None
        source = "observed paired differences" + (" (cluster-robust)" if groups is not None else "")
        extra = {"task": name, "pilot_n": len(a), "pilot_diff": float(a.mean() - b.mean()), "pilot_correlation": c}
    else:
        if results is not None:
            a, _, _, name = item_scores(results, metric, task)
            baseline = float(a.mean())
            extra = {"task": name, "pilot_n": len(a)}
        if baseline is None or correlation is None:
            raise MetricInputError(
                "omega^2 needs one of: omega2; baseline (or one result set) and correlation; two result sets"
            )
        other = baseline if delta is None else min(1.0, max(0.0, baseline + delta))
        omega2 = paired_binary_variance(baseline, other, correlation)
        source = f"baseline accuracy {baseline:.4g}, correlation {correlation:.4g}"
    out: dict[str, Any] = {
        "alpha": alpha,
        "power": power,
        "omega2": omega2,
        "omega2_source": source,
        "formula": "n = (z_{1-alpha/2} + z_{power})^2 omega^2 / delta^2 (Miller 2024)",
        **extra,
    }
    if delta is not None:
        need = n_for_delta(omega2, delta, alpha=alpha, power=power)
        return {**out, "delta": delta, "n": need}
    assert n is not None  # exactly one of delta and n, checked above
    return {**out, "n": n, "mde": mde(omega2, n, alpha=alpha, power=power), "power_at_mde": power}


def achieved_power(delta: float, omega2: float, n: int, *, alpha: float = 0.05) -> float:
    """Power of the paired test for a true ``delta`` at ``n`` items.

    >>> round(achieved_power(0.02, 0.1954 - 0.0004, 1000), 2)
    0.3
    """
    return power_at(delta, omega2, n, alpha=alpha)


__all__ = ["achieved_power", "power_plan"]
