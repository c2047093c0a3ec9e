"""Which benchmarks can tell a run's checkpoints apart: signal-to-noise and monotonicity per task.

Given result sets of the same items at successive checkpoints (in training order), for each task
(benchmark) and its metric (the task's headline unless named):

- ``signal``: the standard deviation of the metric over the checkpoints (n - 1);
- ``noise``: the root mean square of each checkpoint's standard error over items (its interval's
  half-width over the normal quantile: the interval of ``evaluate``, clusters respected);
- ``snr = signal / noise``: above 1 the checkpoints spread more than one checkpoint's score moves
  with the items drawn; below 1 the benchmark mostly measures its own item noise here;
- ``monotonicity``: Kendall's tau between the checkpoint order and the metric, signed so that +1
  is "gets better every checkpoint" (the metric's direction from the registry), with its p-value;
- ``adjacent``: each checkpoint against the one before, paired on the items
  (:func:`~labledger.analysis.evaluation.compare`), Holm-adjusted over the task's pairs, and how
  many of those steps are separable at ``alpha``.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> sets = [[{"id": i, "task": t, "gold": "y", "pred": "y" if rng.random() < p else "n"}
...          for t, p in (("easy", 0.5 + 0.1 * k), ("flat", 0.6)) for i in range(300)] for k in range(4)]
>>> doc = checkpoint_signal(sets, resamples=200)
>>> [(t["task"], t["snr"] > 1, t["monotonicity"]["tau"]) for t in doc["tasks"]]
[('easy', True, 1.0), ('flat', False, 0.3333333333333334)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from labledger.errors import MetricInputError

DEFINITION = (
    "signal: SD of the metric over the checkpoints (n-1); noise: root mean square of each checkpoint's standard "
    "error over items (its interval's half-width over the normal quantile); snr = signal / noise; monotonicity: "
    "Kendall's tau of the metric against the checkpoint order, signed so +1 = better at every checkpoint; adjacent: "
    "each checkpoint minus the previous, paired on the items, Holm-adjusted over the task's steps"
)


def checkpoint_signal(
    sources: Sequence[Any],
    *,
    names: Sequence[str] | None = None,
    metric: str | None = None,
    task: str | Sequence[str] | None = None,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """The signal document of ``sources`` (result sets at successive checkpoints, in order; see the
    module docstring): one entry per task every source has (or ``task``)."""
    from scipy import stats

    from labledger.analysis.evaluation import compare, evaluate
    from labledger.analysis.tasks import HEADLINE
    from labledger.inputs.results import load
    from labledger.metrics.stats import adjust_p

    if len(sources) < 3:
        raise MetricInputError(f"signal-to-noise needs at least 3 checkpoints; got {len(sources)}")
    labels = list(names) if names is not None else [str(s) for s in sources]
    if len(labels) != len(sources):
        raise MetricInputError(f"{len(labels)} names for {len(sources)} checkpoints")
    sets = [load(s) for s in sources]
    common = [t for t in sets[0] if all(t in rs for rs in sets[1:])]
    wanted = [task] if isinstance(task, str) else list(task) if task else common
    missing = [t for t in wanted if t not in common]
    if missing or not wanted:
        raise MetricInputError(
            f"task(s) {', '.join(missing) or '-'} not in every checkpoint; the checkpoints share: "
            f"{', '.join(common) or 'none'}"
        )
    z = stats.norm.ppf((1 + ci) / 2)
    out = []
    for t in wanted:
        spec = metric or HEADLINE[sets[0][t].kind]
        points = []
        for name, rs in zip(labels, sets, strict=True):
            ev = evaluate(rs, metrics=[spec], task=t, ci=ci, resamples=resamples, seed=seed)
            e = msgspec.to_builtins(ev.metric(t, spec))
            se = (
                (e["ci_high"] - e["ci_low"]) / (2 * z) if e["ci_low"] is not None and e["ci_high"] is not None else None
            )
            points.append(
                {
                    "name": name,
                    "value": e["value"],
                    "ci_low": e["ci_low"],
                    "ci_high": e["ci_high"],
                    "se": se,
                    "n": e["n"],
                }
            )
        higher = bool(e["higher_is_better"])
        values = [p["value"] for p in points]
        if any(v is None for v in values):
            raise MetricInputError(f"task '{t}': {spec} is undefined at a checkpoint")
        k = len(values)
        mean = sum(values) / k
        signal = math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1))
        ses = [p["se"] for p in points if p["se"] is not None]
        noise = math.sqrt(sum(s * s for s in ses) / len(ses)) if ses else None
        tau, p_tau = stats.kendalltau(range(k), values)
        sign = 1 if higher else -1
        steps = []
        for a in range(1, k):
            c = compare(
                sets[a], sets[a - 1], metrics=[spec], task=t, ci=ci, resamples=resamples, seed=seed, adjust="none"
            )
            d = msgspec.to_builtins(c.metric(t, spec))
            steps.append(
                {
                    "from": labels[a - 1],
                    "to": labels[a],
                    "diff": d["diff"],
                    "ci_low": d["ci_low"],
                    "ci_high": d["ci_high"],
                    "p_value": d["p_value"],
                }
            )
        for s, pa in zip(steps, adjust_p([s["p_value"] for s in steps], "holm"), strict=True):
            s["p_adjusted"] = pa
        separable = sum(1 for s in steps if s.get("p_adjusted") is not None and s["p_adjusted"] < alpha)
        out.append(
            {
                "task": t,
                "metric": spec,
                "higher_is_better": higher,
                "n": points[0]["n"],
                "checkpoints": points,
                "signal": signal,
                "noise": noise,
                "snr": signal / noise if noise else None,
                "monotonicity": {
                    "tau": None if math.isnan(tau) else sign * float(tau),
                    "p_value": None if math.isnan(p_tau) else float(p_tau),
                },
                "adjacent": steps,
                "separable_steps": separable,
            }
        )
    return {
        "kind": "signal",
        "checkpoints": labels,
        "ci": ci,
        "alpha": alpha,
        "resamples": resamples,
        "seed": seed,
        "tasks": out,
        "definition": DEFINITION,
    }


__all__ = ["DEFINITION", "checkpoint_signal"]
