"""What an evaluation harness reported beside what labledger recomputes from the same items.

A result set imported from a harness (see :mod:`labledger.importers.harness`) keeps, in its
``meta.json`` under ``harness``, each metric's reported value and standard error and the labledger
metric that recomputes it. :func:`set_metrics` decides what a stored set is evaluated and compared
on (a harness set: those metrics only); :func:`evaluate_stored` is its evaluation as ``labledger
eval`` and the site give it; :func:`harness_check` sets each recomputed value beside the harness's
(``equal`` within 1e-9) and the harness's stderr beside labledger's CI, with a one-line
:func:`stderr_note` where they differ.

>>> meta = {"name": "lm-eval", "metrics": {"acc": {"metric": "accuracy", "value": 0.5, "stderr": 0.5}}}
>>> harness_metrics(meta)
{'acc': ['accuracy']}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from labledger.metrics.registry import parse_metric

if TYPE_CHECKING:
    from labledger.schema import EvaluationDoc

#: Recomputed values equal the harness's within this.
TOLERANCE = 1e-9


def harness_meta(results_path: str | Path) -> dict[str, Any] | None:
    """The ``harness`` block of a stored result set (``meta.json`` beside its ``results.jsonl``), or None.

    >>> harness_meta("no/such/results.jsonl") is None
    True
    """
    meta = Path(results_path).parent / "meta.json"
    if Path(results_path).name != "results.jsonl" or not meta.is_file():
        return None
    try:
        block = orjson.loads(meta.read_bytes()).get("harness")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    return block if isinstance(block, dict) and isinstance(block.get("metrics"), dict) else None


def harness_metrics(meta: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{task: [metric spec]}``: the labledger metric recomputing each harness metric."""
    return {task: [m["metric"]] for task, m in meta["metrics"].items() if m.get("metric")}


def set_metrics(results_path: str | Path) -> dict[str, list[str]] | None:
    """The metrics a stored result set is evaluated and compared on when none are asked for.

    An imported harness set gets the harness's own metrics only (:func:`harness_metrics`: the
    labledger metric recomputing each one, ``accuracy`` for a multiple-choice metric), never the
    defaults of its task kind: its choice rows are classification rows over choice positions
    ``"0".."K-1"``, on which ROC-AUC, ECE, Brier, F1 or per-class counts mean nothing. ``{}`` for a
    harness set none of whose metrics labledger recomputes; None for any other set (the defaults
    per task kind, :data:`~labledger.analysis.tasks.DEFAULT_METRICS`).

    >>> set_metrics("no/such/results.jsonl") is None
    True
    """
    meta = harness_meta(results_path)
    return None if meta is None else harness_metrics(meta)


def evaluate_stored(
    results_path: str | Path,
    rows: Any = None,
    *,
    metrics: Any = None,
    headline: Mapping[str, str] | None = None,
    **options: Any,
) -> EvaluationDoc:
    """The evaluation of the result set stored at ``results_path`` (``rows``: the same set already
    read, a :class:`~labledger.inputs.results.ResultSet`), as ``labledger eval`` prints it and the
    site shows it; ``options`` go to :func:`~labledger.analysis.evaluation.evaluate`.

    For an imported harness set: the harness's own metrics unless ``metrics`` are given
    (:func:`set_metrics`), each one the headline of its task, no suite mean (the set's tasks are
    one harness task's metrics, not benchmarks), and ``harness``: the harness's values and stderrs
    beside labledger's (:func:`harness_check`). Any other set: :func:`evaluate` as it is.
    """
    from labledger.analysis.evaluation import evaluate
    from labledger.schema import HarnessCheck

    meta = harness_meta(results_path)
    source = results_path if rows is None else rows
    if meta is None:
        return evaluate(source, metrics=metrics, headline=headline, **options).doc
    own = harness_metrics(meta)
    doc = evaluate(
        source,
        metrics=metrics or own,
        headline=headline or {t: v[0] for t, v in own.items()},
        suite=False,
        **options,
    ).doc
    doc.harness = HarnessCheck(
        name=meta["name"], version=meta.get("version"), checks=harness_check(doc.to_dict(), meta)
    )
    return doc


def _entry(evaluation: Mapping[str, Any], task: str, spec: str) -> dict[str, Any] | None:
    body = evaluation.get("tasks", {}).get(task)
    if body is None:
        return None
    name = parse_metric(spec).name
    return next((e for e in body["metrics"] if e["metric"] == name), None)


def stderr_note(
    harness_stderr: float | None,
    value: float | None,
    ci_low: float | None,
    ci_high: float | None,
    *,
    n: int,
    ci: float = 0.95,
    method: str | None = None,
    harness: str | None = None,
) -> str | None:
    """One line saying where the harness's stderr and labledger's CI differ and why (None: they agree).

    The CI is turned into a standard error as ``(high - low) / (2 z)``; within a factor 1.5 of the
    harness's stderr they agree.

    >>> stderr_note(0.0, 0.5, 0.3, 0.7, n=20) is not None
    True
    >>> stderr_note(0.1, 0.5, 0.31, 0.69, n=30) is None
    True
    """
    if value is None or ci_low is None or ci_high is None:
        return "labledger computed no interval (resamples=0 or an undefined metric)"
    z = _z(ci)
    se = (ci_high - ci_low) / (2 * z)
    if harness_stderr is None:
        return f"the harness reported no stderr; labledger's CI implies about {se:.3g}"
    if value in (0.0, 1.0):
        return (
            f"the value is {value:g}: both the CLT stderr and a bootstrap CI collapse to zero width at any n; "
            "it does not mean certainty"
        )
    if harness_stderr == 0.0:
        return f"the harness reported stderr 0 for a value strictly between 0 and 1; labledger's CI implies {se:.3g}"
    ratio = se / harness_stderr
    if 1 / 1.5 <= ratio <= 1.5:
        return None
    if harness == "lighteval" and ratio > 5 and method and "bootstrap" in method:
        return (
            f"lighteval's bootstrap stderr is sd(replicates)/sqrt(B), {ratio:.0f}x smaller than the bootstrap "
            f"sd ({se:.3g}) labledger's CI implies"
        )
    if n < 30:
        return (
            f"with n={n} items the bootstrap CI (implied SE {se:.3g}) and the harness's {method or 'stderr'} "
            f"({harness_stderr:.3g}) disagree; neither is reliable at this n"
        )
    return f"labledger's CI implies SE {se:.3g}, {ratio:.2g}x the harness's {method or 'stderr'} ({harness_stderr:.3g})"


def _z(ci: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + ci / 2))


def harness_check(evaluation: Mapping[str, Any], meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per harness metric: its reported value and stderr beside labledger's value and CI, and a note.

    >>> doc = {"ci": 0.95, "tasks": {"acc": {"metrics": [{"metric": "accuracy", "value": 0.5,
    ...        "ci_low": 0.3, "ci_high": 0.7, "n": 40}]}}}
    >>> meta = {"name": "lm-eval", "metrics": {"acc": {"metric": "accuracy", "value": 0.5, "stderr": 0.1}}}
    >>> harness_check(doc, meta)[0]["equal"]
    True
    """
    out = []
    for task, m in meta["metrics"].items():
        if not m.get("metric"):
            if m.get("recomputed") is not None:
                out.append(_recomputed_check(task, m))
            continue
        e = _entry(evaluation, task, m["metric"])
        value = None if e is None else e["value"]
        reported = m.get("value")
        equal = (
            value is not None and reported is not None and (math.isclose(value, reported, rel_tol=0, abs_tol=TOLERANCE))
        )
        out.append(
            {
                "task": task,
                "metric": m["metric"],
                "harness_value": reported,
                "value": value,
                "equal": equal,
                "harness_stderr": m.get("stderr"),
                "stderr_method": m.get("stderr_method"),
                "ci_low": None if e is None else e["ci_low"],
                "ci_high": None if e is None else e["ci_high"],
                "n": None if e is None else e["n"],
                "clusters": None if e is None else e.get("clusters"),
                "epochs": m.get("epochs"),
                "note": None
                if e is None
                else stderr_note(
                    m.get("stderr"),
                    value,
                    e["ci_low"],
                    e["ci_high"],
                    n=e["n"],
                    ci=evaluation.get("ci", 0.95),
                    method=m.get("stderr_method"),
                    harness=meta.get("name"),
                ),
            }
        )
    return out


def _recomputed_check(task: str, m: Mapping[str, Any]) -> dict[str, Any]:
    """The check of a metric recomputed at import from the stored rows, not by a registry metric
    (lm-eval's perplexities: a ratio of sums over the documents); it has no labledger interval.

    >>> c = _recomputed_check("word_perplexity", {"shape": "perplexity", "value": 2.0, "recomputed": 2.0,
    ...     "recomputed_from": "exp(-Σ loglikelihood / Σ words) over the 4 documents' loglikelihood rows"})
    >>> c["equal"], c["note"]
    (True, "recomputed at import: exp(-Σ loglikelihood / Σ words) over the 4 documents' loglikelihood rows; no interval")
    """
    value, reported = m.get("recomputed"), m.get("value")
    equal = value is not None and reported is not None and math.isclose(value, reported, rel_tol=0, abs_tol=TOLERANCE)
    return {
        "task": task,
        "metric": m.get("shape") or task,
        "harness_value": reported,
        "value": value,
        "equal": equal,
        "harness_stderr": m.get("stderr"),
        "stderr_method": m.get("stderr_method"),
        "ci_low": None,
        "ci_high": None,
        "n": None,
        "clusters": None,
        "epochs": None,
        "note": f"recomputed at import: {m.get('recomputed_from') or 'from the stored rows'}; no interval",
    }


def harness_lines(checks: list[dict[str, Any]], harness: str) -> list[str]:
    """Plain-text lines for the CLI: each metric, the harness's value and stderr, labledger's, a note.

    >>> harness_lines([{"task": "acc", "metric": "accuracy", "harness_value": 0.5, "value": 0.5,
    ...    "equal": True, "harness_stderr": 0.1, "ci_low": 0.3, "ci_high": 0.7, "note": None}], "lm-eval")[1]
    '  acc: lm-eval 0.5000 (stderr 0.1000), labledger 0.5000 [0.3000, 0.7000]: same value'
    """

    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}"

    lines = [f"Against what {harness} reported:"]
    for c in checks:
        same = "same value" if c["equal"] else "DIFFERENT value"
        if c["harness_value"] is None:
            same = "the harness reported no value"
        lines.append(
            f"  {c['task']}: {harness} {f(c['harness_value'])} (stderr {f(c['harness_stderr'])}), "
            f"labledger {f(c['value'])} [{f(c['ci_low'])}, {f(c['ci_high'])}]: {same}"
        )
        if c.get("note"):
            lines.append(f"    note: {c['note']}")
    return lines


__all__ = [
    "evaluate_stored",
    "harness_check",
    "harness_lines",
    "harness_meta",
    "harness_metrics",
    "set_metrics",
    "stderr_note",
]
