"""Data-mixture audit: did the run see the datasets in the shares it asked for?

A run declares its intended mixture in ``config["mixture"] = {"dataset": weight, ...}``. The audit
counts the ``dataset`` (else ``source``) field of every sample in ``batches.jsonl`` and compares
each dataset's share of examples seen with its intended share. Seed 001's bug A, a sampling
temperature that turned a small dataset's intended 26.5% into 3.0%, is what this catches.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from labledger.errors import LedgerError

#: Default relative tolerance: a dataset is flagged when actual/intended is outside [1-tol, 1+tol].
DEFAULT_TOLERANCE = 0.2


@dataclass
class MixtureAudit:
    """Per dataset: intended share, actual share, ratio and flag; cumulative shares over steps."""

    run_id: str
    tolerance: float
    examples: int
    rows: list[dict[str, Any]]
    series: dict[str, Any] = field(default_factory=dict)  # steps + cumulative share per dataset
    field_used: str = "dataset"

    @property
    def flagged(self) -> list[str]:
        return [r["dataset"] for r in self.rows if r["flagged"]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "tolerance": self.tolerance,
            "examples": self.examples,
            "field": self.field_used,
            "rows": self.rows,
            "flagged": self.flagged,
            "series": self.series,
            "definition": "actual share = samples from the dataset / all samples in batches.jsonl "
            "(oversampled repeats count); ratio = actual / intended; flagged when the "
            "ratio is outside [1 - tolerance, 1 + tolerance] or an intended dataset "
            "was never seen or an unexpected one was",
        }


def audit_counts(
    intended: dict[str, float],
    batches,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    run_id: str = "",
    max_points: int = 400,
) -> MixtureAudit:
    """The audit from an intended mixture and an iterable of batch records (see module doc)."""
    if not isinstance(intended, dict) or not intended:
        raise LedgerError("the run has no intended mixture: set config['mixture'] = {dataset: weight}")
    bad = {k: v for k, v in intended.items() if not isinstance(v, (int, float)) or v < 0}
    if bad:
        raise LedgerError(f"config['mixture'] weights must be numbers >= 0; got {bad}")
    total_w = float(sum(intended.values()))
    if total_w <= 0:
        raise LedgerError("config['mixture'] weights sum to 0")
    if not 0 < tolerance < 1:
        raise LedgerError(f"tolerance must be in (0, 1); got {tolerance}")
    counts: Counter[str] = Counter()
    step_points: list[tuple[int, dict[str, int]]] = []
    last_step = None
    fields_seen = set()
    for b in batches:
        for s in b.get("samples") or ():
            name = s.get("dataset")
            if name is None:
                name = s.get("source")
                if name is not None:
                    fields_seen.add("source")
            else:
                fields_seen.add("dataset")
            counts["(unlabelled)" if name is None else str(name)] += 1
        step = b.get("optimizer_step", b.get("microbatch"))
        if step != last_step:
            step_points.append((step, dict(counts)))
            last_step = step
        else:
            step_points[-1] = (step, dict(counts))
    n = sum(counts.values())
    if n == 0:
        raise LedgerError(f"run {run_id} has no samples in batches.jsonl to audit")
    names = list(intended) + sorted(k for k in counts if k not in intended)
    rows = []
    for name in names:
        want = intended.get(name, 0.0) / total_w
        got = counts.get(name, 0) / n
        ratio = got / want if want > 0 else (float("inf") if got > 0 else 1.0)
        flagged = not (1 - tolerance <= ratio <= 1 + tolerance) if want > 0 else got > 0
        rows.append(
            {
                "dataset": name,
                "intended_share": want,
                "actual_share": got,
                "ratio": ratio,
                "examples": counts.get(name, 0),
                "flagged": flagged,
            }
        )
    # Cumulative share per dataset over optimizer steps, thinned to at most max_points points.
    stride = max(1, len(step_points) // max_points)
    picked = step_points[::stride]
    if picked and picked[-1] is not step_points[-1]:
        picked.append(step_points[-1])
    series: dict[str, Any] = {"steps": [p[0] for p in picked], "share": {}}
    for name in names:
        series["share"][name] = [(p[1].get(name, 0) / max(1, sum(p[1].values()))) for p in picked]
    return MixtureAudit(
        run_id=run_id,
        tolerance=tolerance,
        examples=n,
        rows=rows,
        series=series,
        field_used="dataset" if "dataset" in fields_seen or not fields_seen else "source",
    )


def audit_run(view, *, tolerance: float = DEFAULT_TOLERANCE) -> MixtureAudit:
    """The mixture audit of a stored run (a :class:`labledger.RunView`)."""
    intended = (view.config or {}).get("mixture")
    if intended is None:
        raise LedgerError(f"run {view.id} declares no mixture (config['mixture'] is missing)")
    return audit_counts(intended, view.batches(), tolerance=tolerance, run_id=view.id)
