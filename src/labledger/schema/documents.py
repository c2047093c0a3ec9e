"""One typed, versioned record per document kind.

Every document has ``kind`` and ``schema_version`` and ``to_dict()`` / ``to_json()``; the
codec (:mod:`labledger.schema.codec`) encodes and decodes them in one place. Version 1 is what
labledger wrote before these types (plain dicts with ``"version": 1``); it is migrated on read.

>>> doc = ComparisonDoc(a="a.jsonl", b="b.jsonl", ci=0.95, resamples=0, seed=0, tasks={})
>>> doc.kind, doc.schema_version, doc.to_dict()["a"]
('comparison', 2, 'a.jsonl')
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from labledger.schema.ids import MetricId
from labledger.schema.values import (
    AnalyticInterval,
    Compat,
    ConfusionMatrix,
    MetricDiff,
    MetricValue,
    Part,
    PerClass,
)

#: The schema version every document kind is written with today.
SCHEMA_VERSION = 2


class Document(Compat, msgspec.Struct, kw_only=True):
    """Base of every document: ``kind`` and ``schema_version`` first, then the body."""

    KIND: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The document as JSON-ready builtins (what ``--json`` prints and the store writes)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out

    def to_json(self) -> str:
        """The document as JSON text."""
        return msgspec.json.encode(self).decode()


# -- evaluation ----------------------------------------------------------------------------------
class SliceBody(Part, kw_only=True):
    """The metrics of one value of a slice field."""

    n: int
    metrics: list[MetricValue]


class TaskEvaluation(Part, kw_only=True):
    """One task of an evaluation: its metrics, tables and slices."""

    kind: str
    n: int
    labels: list[str] | None
    positive: str | None
    clusters: int | None
    headline: str | None
    metrics: list[MetricValue]
    per_class: PerClass | None = None
    confusion_matrix: ConfusionMatrix | None = None
    slices: dict[str, dict[str, SliceBody]] | None = None


class SuiteMean(Part, kw_only=True):
    """The macro mean of the tasks' headline metrics (evaluations of several tasks)."""

    metric: str
    definition: str | None = None
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    ci: float | None = None
    n_tasks: int | None = None
    tasks: dict[str, str]
    excluded: list[str]


class EvaluationDoc(Document, kw_only=True):
    """What :func:`labledger.evaluate` computes and ``Ledger.save_evaluation`` stores."""

    KIND: ClassVar[str] = "evaluation"
    kind: Literal["evaluation"] = "evaluation"
    schema_version: int = SCHEMA_VERSION
    source: str
    n: int
    ci: float
    resamples: int
    seed: int
    by: list[str]
    tasks: dict[str, TaskEvaluation]
    suite: SuiteMean | None = None
    #: For a result set imported from an evaluation harness: what the harness reported beside
    #: labledger's recomputed values (see :mod:`labledger.analysis.harness`).
    harness: HarnessCheck | None = None

    def _repr_html_(self) -> str:
        """Notebook display: small escaped tables with CIs and definitions (:mod:`labledger.schema.html`)."""
        from labledger.schema.html import evaluation_html

        return evaluation_html(self)


class HarnessCheck(Part, kw_only=True):
    """The harness's own values and stderrs next to labledger's, one check per harness metric."""

    name: str
    version: str | None = None
    checks: list[dict[str, Any]] = msgspec.field(default_factory=list)


# -- comparison ----------------------------------------------------------------------------------
class TaskComparison(Part, kw_only=True):
    """One task of a comparison."""

    kind: str
    paired: bool
    n_a: int
    n_b: int
    n: int | None
    metrics: list[MetricDiff]


class ComparisonDoc(Document, kw_only=True):
    """What :func:`labledger.compare` computes: A - B per task and metric. ``adjust`` names the
    multiplicity adjustment of the metrics' ``p_adjusted`` (holm, bh, none) over every metric and
    task, ``family`` says how many p-values it covered."""

    KIND: ClassVar[str] = "comparison"
    kind: Literal["comparison"] = "comparison"
    schema_version: int = SCHEMA_VERSION
    a: str
    b: str
    ci: float
    resamples: int
    seed: int
    tasks: dict[str, TaskComparison]
    names: dict[str, str] | None = None
    adjust: str | None = None
    family: str | None = None

    def _repr_html_(self) -> str:
        """Notebook display: small escaped tables with CIs and definitions (:mod:`labledger.schema.html`)."""
        from labledger.schema.html import comparison_html

        return comparison_html(self)


# -- calibration report --------------------------------------------------------------------------
class CalibrationMetric(Part, kw_only=True):
    """Calibrated minus raw for one metric of one task (``value`` is the difference)."""

    metric: str
    key: str
    base_metric: str
    variant: str
    params: dict[str, Any]
    definition: str
    higher_is_better: bool
    raw: float | None
    calibrated: float | None
    value: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    ci: float
    resamples: int
    n: int
    method: str | None = None


class CalibrationValue(Part, kw_only=True):
    """One metric's value for one variant (raw, calibrated, cross-fitted) with its interval;
    ``metric`` is the name shown (the two ECEs apart), ``key`` the metric's identity."""

    metric: str
    key: str
    params: dict[str, Any]
    definition: str
    higher_is_better: bool
    value: float | None
    ci_low: float | None
    ci_high: float | None
    ci: float
    resamples: int
    n: int

    @property
    def id(self) -> MetricId:
        """The metric's identity (parsed from ``key``)."""
        return MetricId.parse(self.key)


class CalibrationSliceBody(Part, kw_only=True):
    """Raw or calibrated values of one task (``slices.variant.raw`` / ``.calibrated``)."""

    n: int
    metrics: list[CalibrationValue]


class CalibrationTask(Part, kw_only=True):
    """One task of a calibration report."""

    method: str
    steps: str
    transductive: bool
    fitted_on: str | None = None
    in_sample: str
    status: str
    n: int
    clusters: int | None
    headline: str | None
    honest: str | None
    metrics: list[CalibrationMetric]
    slices: dict[str, dict[str, CalibrationSliceBody]] | None = None
    reliability: dict[str, Any] | None = None
    crossfit: dict[str, Any] | None = None
    transductive_note: str | None = None
    em: dict[str, Any] | None = None


class CalibrationRow(Part, kw_only=True):
    """One row of the report's headline table."""

    task: str
    method: str
    metric: str
    variant: str
    fitted: str
    raw: float | None
    calibrated: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n: int
    honest: bool


class CalibrationDoc(Document, kw_only=True):
    """``labledger calibrate report``: raw vs calibrated with paired CIs."""

    KIND: ClassVar[str] = "calibration"
    kind: Literal["calibration"] = "calibration"
    schema_version: int = SCHEMA_VERSION
    source: str
    sha256: str | None = None
    recipe_id: str | None = None
    ci: float
    resamples: int
    seed: int
    bins: int
    tasks: dict[str, CalibrationTask]
    table: list[CalibrationRow]
    raw: dict[str, float | None]
    calibrated: dict[str, float | None]
    n: int
    mean: dict[str, Any] | None
    recipe: dict[str, Any]
    definitions: dict[str, str]
    stored: str | None = None

    def _repr_html_(self) -> str:
        """Notebook display: small escaped tables with CIs and definitions (:mod:`labledger.schema.html`)."""
        from labledger.schema.html import calibration_html

        return calibration_html(self)


# -- sweep report --------------------------------------------------------------------------------
class SweepDoc(Document, kw_only=True):
    """``labledger sweep --json``: thresholds under gates and the selected one."""

    KIND: ClassVar[str] = "sweep"
    kind: Literal["sweep"] = "sweep"
    schema_version: int = SCHEMA_VERSION
    source: str | None = None
    task: str | None = None
    n: int
    positive: str
    negative: str
    support: dict[str, int]
    decision: str
    thresholds: str
    objective: str
    gates: list[str]
    selection_rule: str
    tie_break: str
    definition: dict[str, str]
    threshold_selection: dict[str, Any]
    threshold_trials: list[dict[str, Any]]
    paired_test: dict[str, Any] | None = None
    notes: list[str] | None = None
    test: dict[str, Any] | None = None


# -- benchmark entries and version tables --------------------------------------------------------
class BenchmarkEntry(Document, kw_only=True):
    """One value of the benchmark ledger (``labledger table``'s cells)."""

    KIND: ClassVar[str] = "benchmark_entry"
    kind: Literal["benchmark_entry"] = "benchmark_entry"
    schema_version: int = SCHEMA_VERSION
    model: str
    suite: str
    benchmark: str
    metric: str
    value: float
    category: str = ""
    params: dict[str, Any] = {}
    variant: str = "raw"
    n: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    run_id: str | None = None
    evaluation: str | None = None
    results_path: str | None = None
    source: str | None = None
    metric_id: str = ""


class VersionRow(Part, kw_only=True):
    """One benchmark of a version table."""

    category: str
    benchmark: str
    metric_id: str
    values: dict[str, float | None]
    ci: dict[str, list[float | None] | None]
    n: dict[str, int | None]
    delta: float | None = None
    delta_ci: list[float | None] | None = None
    p_value: float | None = None
    significance: str | None = None
    p_adjusted: float | None = None
    mde: float | None = None
    warning: str | None = None


class VersionMean(Part, kw_only=True):
    """The mean row: macro mean over the benchmarks present in every column."""

    n: int
    values: dict[str, float | None]
    delta: float | None = None


class VersionDelta(Part, kw_only=True):
    """Which columns the delta column subtracts."""

    to: str | None
    from_: str = msgspec.field(name="from")


class VersionTableDoc(Document, kw_only=True):
    """``labledger table --json``: benchmarks x model columns, a mean row and deltas."""

    KIND: ClassVar[str] = "version_table"
    kind: Literal["version_table"] = "version_table"
    schema_version: int = SCHEMA_VERSION
    suite: str
    columns: list[str]
    rows: list[VersionRow]
    mean: VersionMean
    delta: VersionDelta | None
    warnings: list[str]
    definition: str
    ci: float | None = None
    adjust: str | None = None
    family: str | None = None

    def _repr_html_(self) -> str:
        """Notebook display: small escaped tables with CIs and definitions (:mod:`labledger.schema.html`)."""
        from labledger.schema.html import version_table_html

        return version_table_html(self)


# -- statistics: power plans and repeated rows (#16) ---------------------------------------------
class PowerPlanDoc(Document, kw_only=True):
    """``labledger power --json``: the items needed for ``delta`` (``n``), or the minimum
    detectable effect of ``n`` items (``mde``), and where omega^2 (the variance of the per-item
    difference) came from."""

    KIND: ClassVar[str] = "power_plan"
    kind: Literal["power_plan"] = "power_plan"
    schema_version: int = SCHEMA_VERSION
    alpha: float
    power: float
    omega2: float
    omega2_source: str
    formula: str
    n: int
    delta: float | None = None
    mde: float | None = None
    power_at_mde: float | None = None
    task: str | None = None
    pilot_n: int | None = None
    pilot_diff: float | None = None
    pilot_correlation: float | None = None


class RepeatMetric(Part, kw_only=True):
    """One mean metric over repeated rows: reduced per item (``reduction``) before the interval;
    ``n`` items, ``k`` repeats, ``n_scores`` attempts; ``between`` / ``within`` the variance parts."""

    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    method: str
    analytic: AnalyticInterval | None = None
    reduction: str
    k: int
    n: int
    n_scores: int
    between: float | None = None
    within: float | None = None
    warning: str | None = None


class RepeatTask(Part, kw_only=True):
    """The metrics of one task of a repeats evaluation."""

    metrics: list[RepeatMetric]


class RepeatsDoc(Document, kw_only=True):
    """``labledger eval --json`` on rows repeated by ``epoch`` / ``sample``
    (:func:`labledger.analysis.repeats.evaluate_repeats`)."""

    KIND: ClassVar[str] = "repeats"
    kind: Literal["repeats"] = "repeats"
    schema_version: int = SCHEMA_VERSION
    source: str | None = None
    repeat_field: str
    ci: float
    tasks: dict[str, RepeatTask]


# -- runs and imports ----------------------------------------------------------------------------
class RunSummary(Document, kw_only=True):
    """One run's index row and summary (``labledger runs --json`` rows, ``/api/runs``)."""

    KIND: ClassVar[str] = "run_summary"
    kind: Literal["run_summary"] = "run_summary"
    schema_version: int = SCHEMA_VERSION
    id: str
    name: str
    group: str | None
    tags: list[str]
    status: str
    started: float
    ended: float | None
    duration: float | None
    host: str | None
    pid: int | None
    git_commit: str | None
    git_dirty: bool | None
    error: str | None
    summary: dict[str, Any]
    dir: str | None


class ImportRecord(Document, kw_only=True):
    """``labledger import --json``: the source, its format and hash, the runs made."""

    KIND: ClassVar[str] = "import"
    kind: Literal["import"] = "import"
    schema_version: int = SCHEMA_VERSION
    source: str
    format: str
    sha256: str
    mode: str
    again: bool
    previous: dict[str, Any] | None
    runs: list[dict[str, Any]]


#: Every document type by kind.
KINDS: dict[str, type[Document]] = {
    t.KIND: t
    for t in (
        EvaluationDoc,
        ComparisonDoc,
        CalibrationDoc,
        SweepDoc,
        BenchmarkEntry,
        VersionTableDoc,
        RunSummary,
        ImportRecord,
        PowerPlanDoc,
        RepeatsDoc,
    )
}

#: Kinds a ledger stores under ``evals/<name>/<kind>.json`` and reads back typed.
STORED_KINDS = ("evaluation", "comparison", "calibration")

__all__ = [
    "KINDS",
    "SCHEMA_VERSION",
    "STORED_KINDS",
    "BenchmarkEntry",
    "CalibrationDoc",
    "CalibrationMetric",
    "CalibrationRow",
    "CalibrationTask",
    "CalibrationValue",
    "ComparisonDoc",
    "Document",
    "EvaluationDoc",
    "HarnessCheck",
    "ImportRecord",
    "PowerPlanDoc",
    "RepeatMetric",
    "RepeatTask",
    "RepeatsDoc",
    "RunSummary",
    "SliceBody",
    "SuiteMean",
    "SweepDoc",
    "TaskComparison",
    "TaskEvaluation",
    "VersionDelta",
    "VersionMean",
    "VersionRow",
    "VersionTableDoc",
]
