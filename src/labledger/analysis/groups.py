"""Comparisons across runs: paired tests behind version-table deltas, and groups of runs against a
baseline group (seed 003: "0617 FD-router vs 0615 mean").

Values come from stored predictions whenever a run has them, so every number uses the registry's
definition of the metric; otherwise from what the run recorded (its summary, history or scalars),
and the table says so.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from labledger.errors import ComparisonError, LedgerError, MetricInputError
from labledger.schema import EvaluationDoc, MetricId
from labledger.schema.ids import LABELS


def paired_entry_test(a, b, *, ci: float = 0.95, resamples: int = 1000, seed: int = 0) -> dict[str, Any] | None:
    """Paired bootstrap of ``a - b`` for two benchmark entries that kept their predictions.

    Returns ``{"diff", "ci_low", "ci_high", "p_value", "n", "mde", "warning"}``, or ``None`` when either entry has no
    stored predictions, the metrics differ, or the two prediction sets cover different items.
    """
    from labledger.analysis.comparison import compare

    if not a.results_path or not b.results_path or a.id != b.id:
        return None
    try:
        doc = compare(
            a.results_path,
            b.results_path,
            metrics=[a.id.key],
            task=a.benchmark,
            ci=ci,
            resamples=resamples,
            seed=seed,
        ).doc
    except ComparisonError:
        return None
    metrics = doc.tasks[a.benchmark].metrics
    if not metrics:
        return None
    m = metrics[0]
    return {
        "diff": m.diff,
        "ci_low": m.ci_low,
        "ci_high": m.ci_high,
        "p_value": m.p_value,
        "n": m.n,
        "ci": ci,
        "mde": m.mde,
        "warning": m.warning,
    }


def recorded_id(key: str) -> MetricId | None:
    """The metric a logged scalar's name stands for: ``MetricId.parse`` of it, case and separators
    folded and a trailing ``score`` dropped (``Has0_F1_score`` -> ``has0_f1``); None when no id fits.

    >>> recorded_id("Has0_F1_score"), recorded_id("macro-F1")
    (MetricId('has0_f1'), MetricId('f1[average=macro]'))
    """
    low = key.strip().lower()
    if low in LABELS:
        return MetricId.parse(low)
    text = re.sub(r"[\s-]+", "_", low)
    text = re.sub(r"_?score$", "", text)
    try:
        return MetricId.parse(text)
    except MetricInputError:
        pass
    return None


def recorded_value(view, metric: str) -> tuple[float, str] | None:
    """The value a run recorded for ``metric`` (names compared as :class:`MetricId`s, so that
    ``Has0_F1_score`` = ``has0_f1`` and ``macro-F1`` = ``f1:average=macro``).

    Looked up in the run's summary, then its last history entry that has it, then its last scalar.
    """
    want = recorded_id(metric)

    def same(k: str) -> bool:
        return want is not None and recorded_id(k) == want

    for k, v in (view.summary.get("headline") or {}).items():
        if same(k) and isinstance(v, (int, float)):
            return float(v), "recorded (summary)"
    found = None
    for entry in view.history():
        for k, v in entry.items():
            if same(k) and isinstance(v, (int, float)) and not isinstance(v, bool):
                found = float(v)
    if found is not None:
        return found, "recorded (history)"
    for k, v in (view.summary.get("last") or {}).items():
        if same(k) and isinstance(v, (int, float)):
            return float(v), "recorded (scalars)"
    return None


@dataclass
class GroupComparison:
    """Per group and metric: mean, spread, number of runs, difference from the baseline's mean."""

    baseline: str
    groups: list[str]
    metrics: list[str]
    summary: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "groups": self.groups,
            "metrics": self.metrics,
            "summary": self.summary,
            "runs": self.runs,
            "warnings": self.warnings,
            "definition": "mean and sample standard deviation over the group's runs; diff = group mean "
            "- baseline mean; 'predictions' values are recomputed from stored results with "
            "the registry's definition, 'recorded' values are what the run logged; 'interval' and "
            "'diff_interval': a two-level (seeds, then items) bootstrap when every run stored per-item "
            "scores of a mean metric on the same items, else a t interval over the runs' values",
        }


def item_scores(path, metric: str, task: str | None) -> tuple[list[str], Any] | None:
    """(item ids, per-item scores) of a per-item mean metric in a stored result set, else None."""
    from labledger.analysis.power import item_scores as scores

    try:
        vals, _, ids, _ = scores(path, metric, task)
    except LedgerError:
        return None
    return ids, vals


def _seed_matrix(entries: list[tuple[list[str], Any] | None]) -> tuple[list[str], Any] | None:
    """(ids, seeds x items matrix) when every run of a group has per-item scores on the same items."""
    import numpy as np

    present = [e for e in entries if e is not None]
    if not present or len(present) < len(entries):
        return None
    ids = sorted(present[0][0])
    rows = []
    for run_ids, vals in present:
        if sorted(run_ids) != ids:
            return None
        pos = {v: i for i, v in enumerate(run_ids)}
        rows.append(np.asarray(vals)[[pos[v] for v in ids]])
    return ids, np.vstack(rows)


def _seed_statistics(items, values, g: str, baseline: str, metric: str) -> dict[str, Any]:
    """``interval`` of the group mean and ``diff_interval`` against the baseline (#16): the two-level
    seed x item bootstrap when every run has per-item scores on the same items, else t over seeds."""
    from labledger.metrics.stats import compare_seed_groups, seed_group_interval, seed_t_interval, welch_diff

    out: dict[str, Any] = {}
    mat = _seed_matrix(items.get((g, metric), []))
    vals = values.get((g, metric), [])
    if mat is not None:
        out["interval"] = seed_group_interval(mat[1])
    elif vals:
        out["interval"] = _in_range(_enough_seeds(seed_t_interval(vals), len(vals)), metric)
    if g == baseline:
        return out
    base = _seed_matrix(items.get((baseline, metric), []))
    if mat is not None and base is not None:
        out["diff_interval"] = compare_seed_groups(mat[1], base[1], paired=mat[0] == base[0])
    elif vals and values.get((baseline, metric)):
        fewest = min(len(vals), len(values[(baseline, metric)]))
        welch = welch_diff(vals, values[(baseline, metric)])
        out["diff_interval"] = _in_range(_enough_seeds(welch, fewest), metric, difference=True)
    return out


def _in_range(interval: dict[str, Any], metric: str, *, difference: bool = False) -> dict[str, Any]:
    """A t interval over recorded values kept inside the values the metric (or a difference of two)
    can take, with a ``note`` when it was cut there (a t interval is symmetric, the metric is not)."""
    from labledger.metrics.registry import clip_to_range

    low, high, clipped = clip_to_range(metric, interval.get("low"), interval.get("high"), difference=difference)
    if not clipped:
        return interval
    return {**interval, "low": low, "high": high, "note": "cut at the metric's range (the t interval reached past it)"}


def _enough_seeds(interval: dict[str, Any], seeds: int) -> dict[str, Any]:
    """A t interval over recorded per-seed values, without its bounds when fewer than
    :data:`~labledger.analysis.noise.MIN_SEEDS` seeds carry it (1 or 2 df: ``warning`` says so)."""
    from labledger.analysis.noise import MIN_SEEDS

    if seeds >= MIN_SEEDS or interval.get("low") is None:
        return interval
    why = f"{seeds} seeds cannot support a t interval over seeds (run at least {MIN_SEEDS}, or store predictions)"
    return {**interval, "low": None, "high": None, "warning": why}


def _warn_not_seeds(ledger: Any, group: str, infos: Sequence[Any], warnings: list[str]) -> None:
    """Say when a group's runs differ in config keys other than seeds (its intervals over runs treat
    them as seeds)."""
    from labledger.analysis.noise import differing_keys, split_seed_keys

    other = split_seed_keys(differing_keys({i.id: ledger.run(i.id).config for i in infos}))[1]
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        warnings.append(
            f"the runs of group '{group}' differ in {shown}, not only in seeds: its spread is not seed noise"
        )


def _computed_value(doc: EvaluationDoc, task: str, want: MetricId) -> float | None:
    """The value of ``want`` in an evaluation document: the entry whose identity covers it (same
    metric, every parameter the user gave equal to the stored one; the document also lists the
    defaults it filled in)."""
    for m in doc.tasks[task].metrics:
        if m.id.covers(want):
            return m.value
    return None


def compare_groups(
    ledger,
    *,
    baseline: str,
    groups: Sequence[str],
    metrics: Sequence[str],
    results: str | None = None,
    task: str | None = None,
    include_unfinished: bool = False,
) -> GroupComparison:
    """Compare groups of runs with a baseline group on ``metrics`` (see :class:`GroupComparison`).

    Only finished runs count unless ``include_unfinished`` (crashed, killed or failed runs then
    count too, each named in a warning: what they recorded may come from early in training).

    >>> # compare_groups(open_ledger(), baseline="0615", groups=["0617-main"], metrics=["has0_f1"])
    """
    from labledger.analysis.evaluation import evaluate

    if not metrics:
        raise LedgerError("name at least one metric")
    names = [baseline, *[g for g in groups if g != baseline]]
    out = GroupComparison(baseline=baseline, groups=names[1:], metrics=list(metrics))
    values: dict[tuple[str, str], list[float]] = {}
    items: dict[tuple[str, str], list[tuple[list[str], Any] | None]] = {}
    for g in names:
        all_runs = ledger.runs(group=g)
        infos = [i for i in all_runs if i.status == "finished" or (include_unfinished and i.status != "running")]
        if not infos:
            statuses = ", ".join(sorted({i.status for i in all_runs})) or "none"
            raise LedgerError(f"group '{g}' has no finished runs in {ledger.root} (runs there: {statuses})")
        for i in infos:
            if i.status != "finished":
                out.warnings.append(
                    f"group '{g}' includes run {i.id} ({i.name}), which is {i.status}: its values "
                    f"may come from before it stopped"
                )
        _warn_not_seeds(ledger, g, infos, out.warnings)
        for info in reversed(infos):
            view = ledger.run(info.id)
            row: dict[str, Any] = {"group": g, "run": info.id, "name": info.name, "values": {}, "sources": {}}
            stored = view.results_names()
            source_name = (
                results if results in stored else (stored[0] if len(stored) == 1 and results is None else None)
            )
            ev = None
            for metric in metrics:
                value, source = None, None
                if source_name is not None:
                    if ev is None:
                        ev = evaluate(view.results_path(source_name), metrics=list(metrics), resamples=0, task=task).doc
                    tasks = list(ev.tasks)
                    if len(tasks) != 1:
                        raise LedgerError(f"run {info.id} results '{source_name}' have tasks {tasks}; pass task=")
                    value = _computed_value(ev, tasks[0], MetricId.parse(metric))
                    source = f"predictions ({source_name})"
                    items.setdefault((g, metric), []).append(item_scores(view.results_path(source_name), metric, task))
                if value is None:
                    rec = recorded_value(view, metric)
                    if rec is not None:
                        value, source = rec
                        items.setdefault((g, metric), []).append(None)
                if value is None:
                    out.warnings.append(f"run {info.id} ({info.name}) has no value for {metric}")
                    continue
                row["values"][metric] = value
                row["sources"][metric] = source
                values.setdefault((g, metric), []).append(value)
            out.runs.append(row)
    for metric in metrics:
        base = values.get((baseline, metric), [])
        base_mean = statistics.fmean(base) if base else None
        for g in names:
            vals = values.get((g, metric), [])
            mean = statistics.fmean(vals) if vals else None
            sources = sorted({r["sources"][metric] for r in out.runs if r["group"] == g and metric in r["sources"]})
            out.summary.append(
                {
                    "group": g,
                    "metric": metric,
                    "runs": len(vals),
                    "mean": mean,
                    "std": statistics.stdev(vals) if len(vals) > 1 else None,
                    "min": min(vals) if vals else None,
                    "max": max(vals) if vals else None,
                    "diff": None if mean is None or base_mean is None or g == baseline else mean - base_mean,
                    "sources": sources,
                }
            )
            if any(s.startswith("recorded") for s in sources) and any(s.startswith("predictions") for s in sources):
                out.warnings.append(f"group '{g}' mixes recomputed and recorded values of {metric}")
            out.summary[-1].update(_seed_statistics(items, values, g, baseline, metric))
            for iv in (out.summary[-1].get("interval"), out.summary[-1].get("diff_interval")):
                if iv and iv.get("warning"):
                    out.warnings.append(f"group '{g}' {metric}: {iv['warning']}")
    for s in out.summary:
        if s["mean"] is not None and not math.isfinite(s["mean"]):
            out.warnings.append(f"group '{s['group']}' {s['metric']} mean is not finite")
    return out
