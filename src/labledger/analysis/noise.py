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
    "score (seed, item, seed x item, and repeat when each item was scored several times per run); unseen_share: seed main effect over the A/A variance of a run's "
    "metric, the part a paired item test of two single runs does not see; mde[r]: (t(1-alpha/2)+t(power)) "
    "on k-1 df times seed_sd*sqrt(2/r), paired on these items"
)


def seed_noise(
    scores: Any, *, ci: float = 0.95, alpha: float = 0.05, power: float = 0.8, seeds: Sequence[int] = (1, 3, 5)
) -> dict[str, Any]:
    """The noise floor of a (seeds x items) matrix of per-item scores (see the module docstring), or
    of a (seeds x items x repeats) array when each run scored every item several times (inspect's
    epochs, sampled generations): a run's metric is then its mean over items and repeats, and the
    decomposition gains a ``repeat`` component (the within-cell variance), the crossed design with
    replication (seed ``n*r*s2_seed + r*s2_sxi + s2_rep``, item ``k*r*s2_item + r*s2_sxi +
    s2_rep``, seed x item ``r*s2_sxi + s2_rep``, within ``s2_rep``).

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> x = rng.normal(0, 1, (5, 60, 4)) + rng.normal(0, 2, 60)[None, :, None]
    >>> r = seed_noise(x)
    >>> sorted(r["components"]), r["n_repeats"], round(r["shares"]["repeat"], 2)
    (['item', 'repeat', 'seed', 'seed_x_item'], 4, 0.21)
    """
    from scipy import stats

    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 2:
        x = x[:, :, None]
    if x.ndim != 3 or x.shape[0] < 2 or x.shape[1] < 2 or x.shape[2] < 1:
        raise MetricInputError(f"the noise floor needs at least 2 seeds and 2 items; got {x.shape[0]} x {x.shape[1]}")
    if not np.isfinite(x).all():
        raise MetricInputError("per-item scores must be finite")
    k, n, reps = x.shape
    cells = x.mean(axis=2)
    seed_means, item_means = cells.mean(axis=1), cells.mean(axis=0)
    grand = float(cells.mean())
    ms_seed = n * reps * float(seed_means.var(ddof=1))
    ms_item = k * reps * float(item_means.var(ddof=1))
    resid = cells - seed_means[:, None] - item_means[None, :] + grand
    ms_int = reps * float((resid**2).sum()) / ((k - 1) * (n - 1))
    ms_err = float(((x - cells[:, :, None]) ** 2).sum()) / (k * n * (reps - 1)) if reps > 1 else 0.0
    parts = {
        "seed": max(0.0, (ms_seed - ms_int) / (n * reps)),
        "item": max(0.0, (ms_item - ms_int) / (k * reps)),
        "seed_x_item": max(0.0, (ms_int - ms_err) / reps) if reps > 1 else ms_int,
    }
    if reps > 1:
        parts["repeat"] = ms_err
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
    aa_var = parts["seed"] + parts["seed_x_item"] / n + parts.get("repeat", 0.0) / (n * reps)
    factor = float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))
    return {
        "value": grand,
        "n_seeds": k,
        "n_items": n,
        "n_repeats": reps,
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


def _epoch_scores(td: Any, values: np.ndarray) -> np.ndarray | None:
    """The rows' ``epochs`` (a list of numbers per row, one length) as an items x epochs matrix,
    when each item's value is the mean of its epochs (as inspect's imports store them); else None."""
    column = td.extras.get("epochs") if hasattr(td, "extras") else None
    if column is None:
        return None
    lists = list(column)
    if not lists or not all(isinstance(e, list) and e for e in lists) or len({len(e) for e in lists}) != 1:
        return None
    try:
        x = np.asarray(lists, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if x.shape[1] < 2 or not np.isfinite(x).all() or not np.allclose(x.mean(axis=1), values, rtol=0, atol=1e-9):
        return None
    return x


def item_repeat_scores(path: Any, metric: str, task: str | None) -> tuple[list[str], np.ndarray, str]:
    """``(ids in sorted order, an items x repeats matrix of per-item scores, the task)`` of one
    result set. Repeats are rows that repeat an id with an ``epoch`` (or ``sample``) field, every
    item having every repeat, or one row per item whose value is the mean of its ``epochs`` list
    (inspect's imports); otherwise one column."""
    from labledger.analysis.power import task_item_values
    from labledger.inputs.results import read_results

    rs = read_results(path, repeats=True)
    values, td, task_name = task_item_values(rs, metric, task)
    ids = [str(i) for i in td.ids.tolist()]
    per_epoch = _epoch_scores(td, values)
    if per_epoch is not None:  # one row per item, its repeats in ``epochs`` (inspect's imports)
        order = sorted(range(len(ids)), key=ids.__getitem__)
        return [ids[i] for i in order], per_epoch[order], task_name
    reps = [repr(r) for r in td.repeat.tolist()] if td.repeat is not None else ["0"] * len(ids)
    keys = sorted(set(ids))
    levels = sorted(set(reps))
    pos_i, pos_r = {k: j for j, k in enumerate(keys)}, {k: j for j, k in enumerate(levels)}
    out = np.full((len(keys), len(levels)), np.nan)
    for i, r, value in zip(ids, reps, values.tolist(), strict=True):
        out[pos_i[i], pos_r[r]] = value
    if np.isnan(out).any():
        j = int(np.argwhere(np.isnan(out))[0][0])
        raise MetricInputError(f"item {keys[j]!r} lacks a repeat: every item needs every {rs.repeat_field} value")
    return keys, out, task_name


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
    rows: list[np.ndarray] = []
    ids0: list[str] | None = None
    task_name = ""
    for v in views:
        names = v.results_names()
        name = results if results is not None else (names[0] if len(names) == 1 else None)
        if name is None or name not in names:
            have = ", ".join(names) or "none"
            raise LedgerError(f"run {v.id} ({v.name}): choose a stored result set with --results (it has: {have})")
        try:
            key, matrix, task_name = item_repeat_scores(v.results_path(name), metric, task)
        except MetricInputError as exc:
            raise LedgerError(f"run {v.id} ({v.name}) results '{name}': {exc}") from None
        if ids0 is None:
            ids0 = key
        elif key != ids0:
            raise LedgerError(f"run {v.id} ({v.name}) results '{name}' cover other items than run {views[0].id}")
        if rows and matrix.shape[1] != rows[0].shape[1]:
            raise LedgerError(
                f"run {v.id} ({v.name}) results '{name}' score each item {matrix.shape[1]} time(s), run "
                f"{views[0].id} {rows[0].shape[1]}: the runs must repeat alike"
            )
        rows.append(matrix)
    result = seed_noise(np.stack(rows), ci=ci, alpha=alpha, power=power, seeds=seeds)
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
