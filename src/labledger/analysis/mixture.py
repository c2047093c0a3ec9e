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


# -- class balance (#15) ------------------------------------------------------------------------
#: Default tolerance of the class-balance audit: the largest |trained - natural| share of a label.
DEFAULT_BALANCE_TOLERANCE = 0.1


@dataclass
class ClassBalanceAudit:
    """Per dataset and label: the share the run trained on against the dataset's natural share."""

    run_id: str
    tolerance: float
    rows: list[dict[str, Any]]
    natural_from: str

    @property
    def flagged(self) -> list[str]:
        return sorted({r["dataset"] for r in self.rows if r["flagged"]})

    @property
    def forced(self) -> list[str]:
        """Datasets trained on a uniform balance (50:50) that their natural distribution is not."""
        return sorted({r["dataset"] for r in self.rows if r["forced_uniform"]})

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "tolerance": self.tolerance,
            "natural_from": self.natural_from,
            "rows": self.rows,
            "flagged": self.flagged,
            "forced_uniform": self.forced,
            "definition": "trained share = samples of the label / samples of the dataset in batches.jsonl "
            "(field 'gold', else 'label'); natural share from config['class_distribution'] or --natural; "
            "flagged when |trained - natural| > tolerance for any label of the dataset; forced_uniform "
            "when every trained share is within 0.02 of 1/k while the natural distribution is not",
        }


def _sample_dataset(s: dict[str, Any]) -> str:
    name = s.get("dataset", s.get("source"))
    return "(all)" if name is None else str(name)


def _shares(counts: dict[str, float]) -> dict[str, float]:
    total = float(sum(counts.values()))
    return {k: v / total for k, v in counts.items()} if total > 0 else {}


def natural_from_rows(rows: Any) -> dict[str, dict[str, float]]:
    """Per dataset (``dataset``, else ``slices.dataset``, else ``task``), the share of each ``gold`` label.

    >>> natural_from_rows([{"task": "t", "gold": "yes"}] * 3 + [{"task": "t", "gold": "no"}])
    {'t': {'yes': 0.75, 'no': 0.25}}
    """
    counts: dict[str, Counter[str]] = {}
    for r in rows:
        gold = r.get("gold")
        if gold is None or isinstance(gold, (list, dict)):
            continue
        slices = r.get("slices") if isinstance(r.get("slices"), dict) else {}
        name = r.get("dataset", slices.get("dataset", r.get("task")))
        counts.setdefault("(all)" if name is None else str(name), Counter())[str(gold)] += 1
    return {k: _shares(dict(c)) for k, c in counts.items()}


def _natural_table(declared: Any, source: str) -> dict[str, dict[str, float]]:
    """``{dataset: {label: share}}`` from a declared ``class_distribution`` (counts or shares; a flat
    ``{label: share}`` applies to every dataset, under ``(all)``)."""
    if not isinstance(declared, dict) or not declared:
        raise LedgerError(f"{source} must map dataset -> {{label: share}} (or label -> share)")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in declared.values()):
        declared = {"(all)": declared}
    out = {}
    for name, dist in declared.items():
        if not isinstance(dist, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in dist.values()
        ):
            raise LedgerError(f"{source}['{name}'] must map labels to numbers >= 0; got {dist!r}")
        out[str(name)] = _shares({str(k): float(v) for k, v in dist.items()})
    return out


def audit_class_balance(
    natural: dict[str, Any],
    batches: Any,
    *,
    tolerance: float = DEFAULT_BALANCE_TOLERANCE,
    run_id: str = "",
    natural_from: str = "config['class_distribution']",
) -> ClassBalanceAudit:
    """Trained-on label shares per dataset against the natural ones (seed 001's second loader bug).

    >>> batches = [{"samples": [{"dataset": "hover", "gold": g} for g in ["yes", "no"] * 50]}]
    >>> audit = audit_class_balance({"hover": {"yes": 79, "no": 21}}, batches)
    >>> audit.forced, audit.flagged
    (['hover'], ['hover'])
    """
    if not 0 < tolerance < 1:
        raise LedgerError(f"tolerance must be in (0, 1); got {tolerance}")
    table = _natural_table(natural, natural_from)
    counts: dict[str, Counter[str]] = {}
    for b in batches:
        for s in b.get("samples") or ():
            label = s.get("gold", s.get("label"))
            if label is None or isinstance(label, (list, dict)):
                continue
            counts.setdefault(_sample_dataset(s), Counter())[str(label)] += 1
    if "(all)" in table and len(table) == 1:  # one distribution for every dataset
        table = dict.fromkeys(counts, table["(all)"]) or table
    if not counts:
        raise LedgerError(f"run {run_id} has no labelled samples ('gold' or 'label') in batches.jsonl")
    rows = []
    for name in sorted(set(table) | set(counts)):
        trained = _shares(dict(counts.get(name, {})))
        nat = table.get(name)
        labels = sorted(set(trained) | set(nat or {}))
        k = len(labels)
        uniform_trained = bool(trained) and k > 1 and all(abs(trained.get(x, 0.0) - 1 / k) <= 0.02 for x in labels)
        uniform_natural = nat is not None and all(abs(nat.get(x, 0.0) - 1 / k) <= 0.02 for x in labels)
        for label in labels:
            t, n = trained.get(label), (nat or {}).get(label)
            diff = None if t is None or n is None else t - n
            rows.append(
                {
                    "dataset": name,
                    "label": label,
                    "trained_share": t,
                    "natural_share": n,
                    "difference": diff,
                    "examples": counts.get(name, Counter()).get(label, 0),
                    "flagged": nat is not None and bool(trained) and abs((t or 0.0) - (n or 0.0)) > tolerance,
                    "forced_uniform": uniform_trained and not uniform_natural,
                }
            )
    # a dataset is flagged as a whole when any of its labels is
    bad = {r["dataset"] for r in rows if r["flagged"]}
    for r in rows:
        r["flagged"] = r["dataset"] in bad
    return ClassBalanceAudit(run_id=run_id, tolerance=tolerance, rows=rows, natural_from=natural_from)


def audit_run_balance(
    view: Any,
    *,
    natural: dict[str, Any] | None = None,
    natural_from: str | None = None,
    tolerance: float = DEFAULT_BALANCE_TOLERANCE,
) -> ClassBalanceAudit:
    """The class-balance audit of a stored run: ``natural`` given, else ``config['class_distribution']``."""
    if natural is None:
        natural = (view.config or {}).get("class_distribution")
        natural_from = "config['class_distribution']"
        if natural is None:
            raise LedgerError(
                f"run {view.id} declares no natural class distribution (config['class_distribution']); "
                "give one with --natural RESULTS"
            )
    return audit_class_balance(
        natural, view.batches(), tolerance=tolerance, run_id=view.id, natural_from=natural_from or "natural"
    )
