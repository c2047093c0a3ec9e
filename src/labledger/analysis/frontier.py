"""The cost–quality frontier of several systems on the same items, with paired intervals on both axes.

Each system (a results file or a run's stored results) has a quality metric (``metric``, e.g.
accuracy) and a cost metric (``cost``, e.g. ``mean_cost``, ``mean_latency_ms``, ``mean_tokens_out``),
each with its interval (:func:`~labledger.analysis.evaluation.evaluate`). A system is on the
frontier when no other is at least as good on both axes and better on one (by the point values;
each metric's direction comes from the registry). Then, paired on the same items
(:func:`~labledger.analysis.evaluation.compare`):

- each step along the frontier (ordered from the cheapest): what the next system buys, the quality
  difference and the cost difference, each with its interval and p-value;
- each system off the frontier against the cheapest frontier system that dominates it: by how much,
  and whether that is clear (``clearly_dominated``: better on at least one axis with the interval
  excluding 0, and no interval showing it worse on the other).

The intervals are per pair at ``ci``, not adjusted over the pairs (the note says so).

>>> rows = lambda acc, cost: [{"id": i, "task": "t", "gold": "y", "pred": "y" if i < acc else "n", "cost": cost}
...                           for i in range(100)]
>>> f = cost_frontier([rows(90, 2.0), rows(80, 1.0), rows(70, 1.5)], names=["big", "small", "worse"],
...                   metric="exact_match", cost="mean_cost", resamples=200)
>>> [(s["name"], s["on_frontier"], s["dominated_by"]) for s in f["systems"]]
[('big', True, None), ('small', True, None), ('worse', False, 'small')]
>>> [(s["from"], s["to"]) for s in f["steps"]]
[('small', 'big')]
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import msgspec

from labledger.errors import MetricInputError

NOTE = (
    "frontier by point values (no other system at least as good on both axes and better on one); steps and "
    "dominance are paired differences on the same items, each interval at its level for that pair, not adjusted "
    "over the pairs"
)


def _better(a: float, b: float, higher: bool) -> bool:
    return a > b if higher else a < b


def cost_frontier(
    sources: Sequence[Any],
    *,
    names: Sequence[str] | None = None,
    metric: str = "accuracy",
    cost: str = "mean_cost",
    task: str | None = None,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The frontier document of ``sources`` (see the module docstring)."""
    from labledger.analysis.evaluation import compare, evaluate
    from labledger.inputs.results import load

    if len(sources) < 2:
        raise MetricInputError("a frontier needs at least two systems")
    labels = list(names) if names is not None else [str(s) for s in sources]
    if len(labels) != len(sources):
        raise MetricInputError(f"{len(labels)} names for {len(sources)} systems")
    sets = [load(s) for s in sources]
    if task is None:
        common = set.intersection(*(set(rs) for rs in sets))
        if len(common) != 1:
            raise MetricInputError(
                f"the results share {len(common)} tasks ({', '.join(sorted(common)) or 'none'}): pass task= (--task)"
            )
        task = common.pop()
    metrics = [metric, cost]
    systems: list[dict[str, Any]] = []
    for name, rs in zip(labels, sets, strict=True):
        ev = evaluate(rs, metrics=metrics, task=task, ci=ci, resamples=resamples, seed=seed)
        q, c = (msgspec.to_builtins(ev.metric(task, m)) for m in metrics)
        if q["value"] is None or c["value"] is None:
            raise MetricInputError(f"{name}: {metric if q['value'] is None else cost} is undefined on task '{task}'")
        systems.append({"name": name, "quality": q, "cost": c})
    hq = systems[0]["quality"]["higher_is_better"]
    hc = systems[0]["cost"]["higher_is_better"]

    def dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
        qa, qb, ca, cb = a["quality"]["value"], b["quality"]["value"], a["cost"]["value"], b["cost"]["value"]
        at_least = not _better(qb, qa, hq) and not _better(cb, ca, hc)
        return at_least and (_better(qa, qb, hq) or _better(ca, cb, hc))

    def paired(a: int, b: int) -> dict[str, Any]:
        cmp = compare(
            sets[a], sets[b], metrics=metrics, task=task, ci=ci, resamples=resamples, seed=seed, adjust="none"
        )
        return {k: msgspec.to_builtins(cmp.metric(task, m)) for k, m in (("quality", metric), ("cost", cost))}

    for s in systems:
        s["on_frontier"] = not any(dominates(o, s) for o in systems if o is not s)
    order = sorted(range(len(systems)), key=lambda i: systems[i]["cost"]["value"] * (-1 if hc else 1))
    front = [i for i in order if systems[i]["on_frontier"]]
    steps = []
    for a, b in pairwise(front):
        d = paired(b, a)
        steps.append({"from": labels[a], "to": labels[b], **d})
    for i, s in enumerate(systems):
        s["dominated_by"] = None
        if s["on_frontier"]:
            continue
        j = next(k for k in front if dominates(systems[k], s))
        d = paired(j, i)
        s["dominated_by"] = labels[j]
        s["versus_dominator"] = d
        s["clearly_dominated"] = _clear(d, hq, hc)
    return {
        "kind": "frontier",
        "task": task,
        "metric": metric,
        "cost": cost,
        "ci": ci,
        "resamples": resamples,
        "seed": seed,
        "systems": systems,
        "frontier": [labels[i] for i in front],
        "steps": steps,
        "note": NOTE,
    }


def _clear(d: dict[str, Any], hq: bool, hc: bool) -> bool:
    """Dominator - dominated: better on one axis beyond its interval, and not worse beyond it on the other."""

    def side(e: dict[str, Any], higher: bool) -> int:
        lo, hi = e.get("ci_low"), e.get("ci_high")
        if lo is None or hi is None:
            return 0
        if lo > 0:
            return 1 if higher else -1
        if hi < 0:
            return -1 if higher else 1
        return 0

    q, c = side(d["quality"], hq), side(d["cost"], hc)
    return max(q, c) == 1 and min(q, c) >= 0


__all__ = ["NOTE", "cost_frontier"]
