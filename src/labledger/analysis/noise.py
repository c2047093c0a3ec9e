"""The noise floor of a setup: how far two runs that differ only by their seed land apart.

From a group of runs that differ only in seed keys (every other config key the same; a group whose
runs differ in anything else is refused, as those are not seeds), each with per-item scores of a
mean metric (accuracy, exact match, ...) on the same items, :func:`seed_noise` decomposes a
(seeds x items) score matrix by the two-way crossed design without replication (expected mean
squares: seed ``n*s2_seed + s2_resid``, item ``k*s2_item + s2_resid``, residual ``s2_resid``):

- ``seed_sd``: the standard deviation of one run's metric over seeds on these items (``s_m``,
  ``k - 1`` df), with a chi-square interval;
- ``aa``: the A/A interval, within which the difference of two new runs of this setup falls with
  probability ``ci`` (``+- t(k-1) * s_m * sqrt(2)``, a prediction interval);
- ``unseen_share``: the part of the A/A variance that a paired item test of one run against one
  run (``labledger compare``) does not see: the seed main effect ``s2_seed`` over
  ``s2_seed + s2_resid / n``;
- ``mde``: the smallest difference between two setups that a paired comparison of ``r`` seeds each
  on these items detects at ``alpha`` with ``power`` (``(t(1-alpha/2) + t(power)) * s_m * sqrt(2/r)``,
  t on ``k - 1`` df).

With 2 or 3 seeds the interval rests on 1 or 2 degrees of freedom: the estimates are given and the
intervals are not (a warning says so). Coverage: ``bench/noise_coverage.py``.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> p = rng.uniform(0.5, 0.95, 400)
>>> scores = (rng.random((6, 400)) < p).astype(float)
>>> r = seed_noise(scores)
>>> r["n_seeds"], r["n_items"], r["aa"]["low"] < 0 < r["aa"]["high"], r["warning"]
(6, 400, True, None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labledger.errors import LedgerError, MetricInputError
from labledger.store.fields import flatten

#: A config key names a seed when its last dotted part is or ends in "seed" (``seed``,
#: ``data.shuffle_seed``, ``trainer.seed``).
SEED_KEY = r"(^|[._-])[A-Za-z]*seed$"
#: Fewest seeds whose intervals are shown.
MIN_SEEDS = 4

DEFINITION = (
    "per-item scores of a mean metric, seeds x items; seed_sd: SD over seeds of a run's metric on these "
    "items (chi-square interval, k-1 df); aa: prediction interval of the difference of two new runs "
    "(t on k-1 df times seed_sd*sqrt(2)); components: two-way crossed expected mean squares of one item's "
    "score (seed, item, seed x item); unseen_share: seed main effect over the A/A variance of a run's "
    "metric, the part a paired item test of two single runs does not see; mde[r]: (t(1-alpha/2)+t(power)) "
    "on k-1 df times seed_sd*sqrt(2/r), paired on these items"
)


def seed_noise(
    scores: Any, *, ci: float = 0.95, alpha: float = 0.05, power: float = 0.8, seeds: Sequence[int] = (1, 3, 5)
) -> dict[str, Any]:
    """The noise floor of a (seeds x items) matrix of per-item scores (see the module docstring)."""
    from scipy import stats

    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise MetricInputError(f"the noise floor needs at least 2 seeds and 2 items; got {x.shape[0]} x {x.shape[-1]}")
    if not np.isfinite(x).all():
        raise MetricInputError("per-item scores must be finite")
    k, n = x.shape
    seed_means, item_means = x.mean(axis=1), x.mean(axis=0)
    grand = float(x.mean())
    ms_seed = n * float(seed_means.var(ddof=1))
    ms_item = k * float(item_means.var(ddof=1))
    resid = x - seed_means[:, None] - item_means[None, :] + grand
    ms_res = float((resid**2).sum()) / ((k - 1) * (n - 1))
    parts = {
        "seed": max(0.0, (ms_seed - ms_res) / n),
        "item": max(0.0, (ms_item - ms_res) / k),
        "seed_x_item": ms_res,
    }
    total = sum(parts.values())
    df = k - 1
    sd = float(seed_means.std(ddof=1))
    warn = None
    if k < MIN_SEEDS:
        warn = f"{k} seeds give {df} degree(s) of freedom: too few to support an interval (run at least {MIN_SEEDS})"
    q = (1 + ci) / 2
    show = warn is None
    sd_low = math.sqrt(df * sd**2 / stats.chi2.ppf(q, df)) if show else None
    sd_high = math.sqrt(df * sd**2 / stats.chi2.ppf(1 - q, df)) if show else None
    half = float(stats.t.ppf(q, df)) * sd * math.sqrt(2) if show else None
    aa_var = parts["seed"] + parts["seed_x_item"] / n
    factor = float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))
    return {
        "value": grand,
        "n_seeds": k,
        "n_items": n,
        "df": df,
        "ci": ci,
        "seed_sd": {"value": sd, "low": sd_low, "high": sd_high},
        "aa": {"half_width": half, "low": -half if half is not None else None, "high": half},
        "components": parts,
        "shares": {name: (v / total if total > 0 else None) for name, v in parts.items()},
        "unseen_share": parts["seed"] / aa_var if aa_var > 0 else None,
        "mde": {"alpha": alpha, "power": power, "by_seeds": {int(r): factor * sd * math.sqrt(2 / r) for r in seeds}},
        "warning": warn,
        "definition": DEFINITION,
    }


def differing_keys(configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The dotted config keys whose values are not the same in every run (a key missing in some run
    differs).

    >>> differing_keys({"a": {"lr": 0.1, "seed": 1}, "b": {"lr": 0.1, "seed": 2, "x": {"y": 1}}})
    ['seed', 'x.y']
    """
    flat = [dict(flatten(dict(c))) for c in configs.values()]
    keys = sorted({k for f in flat for k in f})
    missing = object()
    return [k for k in keys if len({repr(f.get(k, missing)) for f in flat}) > 1]


def split_seed_keys(keys: Iterable[str], seed_keys: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """``(seed keys, other keys)`` of ``keys``: those named in ``seed_keys``, else those matching
    :data:`SEED_KEY`.

    >>> split_seed_keys(["seed", "data.shuffle_seed", "lr"])
    (['seed', 'data.shuffle_seed'], ['lr'])
    """
    seeds: list[str] = []
    other: list[str] = []
    for k in keys:
        is_seed = k in seed_keys if seed_keys else re.search(SEED_KEY, k, re.I) is not None
        (seeds if is_seed else other).append(k)
    return seeds, other


@dataclass
class NoiseFloor:
    """The noise floor of one group of runs on one metric (:func:`noise_floor`)."""

    group: str
    metric: str
    task: str
    runs: list[dict[str, Any]]
    seed_keys: list[str]
    result: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "metric": self.metric,
            "task": self.task,
            "seed_keys": self.seed_keys,
            "runs": self.runs,
            **self.result,
            "warnings": self.warnings,
        }


def noise_floor(
    ledger: Any,
    group: str,
    *,
    metric: str,
    results: str | None = None,
    task: str | None = None,
    seed_keys: Sequence[str] | None = None,
    ci: float = 0.95,
    alpha: float = 0.05,
    power: float = 0.8,
    seeds: Sequence[int] = (1, 3, 5),
) -> NoiseFloor:
    """The noise floor of the finished runs of ``group`` on ``metric`` (:func:`seed_noise`), from
    each run's stored result set ``results`` (default: its only one). Raises
    :class:`~labledger.errors.LedgerError` when the runs differ in a config key that is not a seed
    key, lack per-item scores, or do not share their items."""
    from labledger.analysis.power import item_scores

    infos = [i for i in ledger.runs(group=group) if i.status == "finished"]
    if len(infos) < 2:
        raise LedgerError(
            f"group '{group}' has {len(infos)} finished run(s) in {ledger.root}; the noise floor needs 2+"
        )
    views = [ledger.run(i.id) for i in reversed(infos)]
    found, other = split_seed_keys(differing_keys({v.id: v.config for v in views}), seed_keys)
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        raise LedgerError(
            f"the runs of group '{group}' differ in {shown}, not only in seeds; name the seed keys with "
            f"--seed-key, or compare them as setups (labledger compare-groups)"
        )
    rows, ids0, task_name = [], None, ""
    for v in views:
        names = v.results_names()
        name = results if results is not None else (names[0] if len(names) == 1 else None)
        if name is None or name not in names:
            have = ", ".join(names) or "none"
            raise LedgerError(f"run {v.id} ({v.name}): choose a stored result set with --results (it has: {have})")
        try:
            vals, _, ids, task_name = item_scores(v.results_path(name), metric, task)
        except MetricInputError as exc:
            raise LedgerError(f"run {v.id} ({v.name}) results '{name}': {exc}") from None
        order = np.argsort(np.asarray(ids, dtype=object))
        key = [ids[i] for i in order]
        if ids0 is None:
            ids0 = key
        elif key != ids0:
            raise LedgerError(f"run {v.id} ({v.name}) results '{name}' cover other items than run {views[0].id}")
        rows.append(np.asarray(vals, dtype=np.float64)[order])
    result = seed_noise(np.vstack(rows), ci=ci, alpha=alpha, power=power, seeds=seeds)
    runs = [
        {
            "run": v.id,
            "name": v.name,
            "value": float(r.mean()),
            "seeds": {k: dict(flatten(v.config)).get(k) for k in found},
        }
        for v, r in zip(views, rows, strict=True)
    ]
    out = NoiseFloor(group=group, metric=metric, task=task_name, runs=runs, seed_keys=found, result=result)
    if not found:
        out.warnings.append(f"the runs of group '{group}' have the same config: their differences are nondeterminism")
    if result["warning"]:
        out.warnings.append(result["warning"])
    return out
