"""One typed, versioned record per document kind.

Every document has ``kind`` and ``schema_version`` and ``to_dict()`` / ``to_json()``; the
codec (:mod:`labledger.schema.codec`) encodes and decodes them in one place. Version 1 is what
labledger wrote before these types (plain dicts with ``"version": 1``); it is migrated on read.

>>> doc = ComparisonDoc(a="a.jsonl", b="b.jsonl", ci=0.95, resamples=0, seed=0, tasks={})
>>> doc.kind, doc.schema_version, doc.to_dict()["a"]
('comparison', 2, 'a.jsonl')
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from labledger.schema.ids import MetricId
from labledger.schema.records import meaning
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

    n: Annotated[int, meaning("items with this slice value", "items")]
    metrics: Annotated[list[MetricValue], meaning("the metrics on those items")]


class TaskEvaluation(Part, kw_only=True):
    """One task of an evaluation: its metrics, tables and slices."""

    kind: Annotated[str, meaning("the task kind: classification, binary, regression, ranking, exact_match, ...")]
    n: Annotated[int, meaning("items of the task", "items")]
    labels: Annotated[list[str] | None, meaning("the labels, in the order of the tables")]
    positive: Annotated[str | None, meaning("the positive label of a binary task")]
    clusters: Annotated[
        int | None,
        meaning("clusters (rows' group values) resampled together; null when items were resampled one by one"),
    ]
    headline: Annotated[str | None, meaning("the key of the task's headline metric")]
    metrics: Annotated[list[MetricValue], meaning("every metric of the task with its interval")]
    per_class: Annotated[PerClass | None, meaning("precision, recall and F1 per label with intervals")] = None
    confusion_matrix: Annotated[ConfusionMatrix | None, meaning("counts of (gold, predicted) label pairs")] = None
    slices: Annotated[
        dict[str, dict[str, SliceBody]] | None, meaning("slice field -> slice value -> the metrics on those items")
    ] = None


class SuiteMean(Part, kw_only=True):
    """The macro mean of the tasks' headline metrics (evaluations of several tasks)."""

    metric: Annotated[str, meaning("what is averaged: the tasks' headline metrics")]
    definition: Annotated[str | None, meaning("how the mean is formed")] = None
    value: Annotated[float | None, meaning("the macro mean over the tasks")]
    ci_low: Annotated[float | None, meaning("lower end of the interval")] = None
    ci_high: Annotated[float | None, meaning("upper end of the interval")] = None
    ci: Annotated[float | None, meaning("the interval's confidence level (0.95: a 95% CI)")] = None
    n_tasks: Annotated[int | None, meaning("tasks in the mean")] = None
    tasks: Annotated[dict[str, str], meaning("task -> the headline metric key averaged")]
    excluded: Annotated[list[str], meaning("tasks left out (no comparable headline)")]


class EvaluationDoc(Document, kw_only=True):
    """What :func:`labledger.evaluate` computes and ``Ledger.save_evaluation`` stores."""

    KIND: ClassVar[str] = "evaluation"
    kind: Annotated[Literal["evaluation"], meaning("the document kind")] = "evaluation"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    source: Annotated[str, meaning("the results file (or RUN:NAME) evaluated")]
    n: Annotated[int, meaning("result rows read", "rows")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[int, meaning("bootstrap resamples drawn (0: no interval)")]
    seed: Annotated[int, meaning("the random seed of the bootstrap")]
    by: Annotated[list[str], meaning("slice fields the metrics are also given by")]
    tasks: Annotated[dict[str, TaskEvaluation], meaning("task -> its evaluation")]
    suite: Annotated[SuiteMean | None, meaning("the macro mean of the tasks' headline metrics (several tasks)")] = None
    #: For a result set imported from an evaluation harness: what the harness reported beside
    #: labledger's recomputed values (see :mod:`labledger.analysis.harness`).
    harness: Annotated[
        HarnessCheck | None, meaning("for an imported harness run: the harness's own values beside labledger's")
    ] = None

    def _repr_html_(self) -> str:
        """Notebook display: small escaped tables with CIs and definitions (:mod:`labledger.schema.html`)."""
        from labledger.schema.html import evaluation_html

        return evaluation_html(self)


class HarnessCheck(Part, kw_only=True):
    """The harness's own values and stderrs next to labledger's, one check per harness metric."""

    name: Annotated[str, meaning("the harness (lm_eval, inspect_ai, lighteval, ...)")]
    version: Annotated[str | None, meaning("the harness's version")] = None
    checks: Annotated[
        list[dict[str, Any]],
        meaning("per harness metric: its reported value and stderr, labledger's value, whether they agree"),
    ] = msgspec.field(default_factory=list)


# -- comparison ----------------------------------------------------------------------------------
class MarginTest(Part, kw_only=True):
    """A non-inferiority or equivalence test of one metric's ``A - B`` against a margin
    (:func:`labledger.analysis.intervals.margin_test`): ``low``/``high`` are the ends of the
    ``1 - 2 alpha`` two-sided interval (the one-sided ``1 - alpha`` bounds), ``passed`` the decision
    at ``alpha`` by those bounds (per comparison), ``p_adjusted`` the one-sided p adjusted over every
    margin test of the document (``ComparisonDoc.margin_family``)."""

    metric: Annotated[str, meaning("the metric's registry name (accuracy, f1, ece, ...)")]
    key: Annotated[str, meaning("the metric's identity: name and canonical parameters, e.g. f1[average=macro]")]
    test: Annotated[
        Literal["non-inferiority", "equivalence"],
        meaning("non-inferiority (one-sided, A no worse than B by the margin) or equivalence (TOST: |A - B| < margin)"),
    ]
    margin: Annotated[float, meaning("the margin, in the metric's units (0.01: one point of accuracy)")]
    alpha: Annotated[float, meaning("the level of each one-sided test")]
    higher_is_better: Annotated[bool, meaning("the metric's direction (non-inferiority mirrors for lower is better)")]
    hypothesis: Annotated[str, meaning("H0, H1 and the decision rule, in words")]
    diff: Annotated[float | None, meaning("A - B")]
    low: Annotated[float | None, meaning("lower end of the 1 - 2 alpha interval: the one-sided 1 - alpha lower bound")]
    high: Annotated[float | None, meaning("upper end of the 1 - 2 alpha interval: the one-sided 1 - alpha upper bound")]
    level: Annotated[float, meaning("the two-sided level of [low, high]: 1 - 2 alpha (0.9 for alpha 0.05)")]
    p_value: Annotated[
        float | None, meaning("one-sided p of the test's H0 (equivalence: the larger of the two one-sided p)")
    ]
    p_adjusted: Annotated[
        float | None, meaning("p_value adjusted over every margin test of the document (ComparisonDoc.adjust)")
    ] = None
    passed: Annotated[
        bool | None,
        meaning("true when H0 is rejected at alpha by the bounds (not adjusted); null when undecided (see note)"),
    ]
    method: Annotated[str | None, meaning("how the bounds and the p-value were formed")]
    resamples: Annotated[int, meaning("bootstrap resamples drawn (0: the analytic form, or no interval)")]
    n: Annotated[int | None, meaning("items behind the difference", "items")]
    clusters: Annotated[
        int | None,
        meaning("clusters (rows' group values) resampled together; null when items were resampled one by one"),
    ]
    note: Annotated[str | None, meaning("why the test is undecided (no interval, too few clusters)")] = None


class FlippedItem(Part, kw_only=True):
    """One item on which A and B disagree about being right (``compare --items``): for label, match
    and set tasks A right and B wrong or the reverse; for regression tasks the item's absolute errors
    differ (``error_a``/``error_b``). Text fields (``prompt``, ``target``, ``output_a``/``output_b``)
    are the rows' own extra fields, when they carry them."""

    id: Annotated[str, meaning("the item's id")]
    better: Annotated[
        Literal["a", "b"],
        meaning("a: A right and B wrong (regression: A's error smaller); b: the reverse"),
    ]
    gold: Annotated[Any, meaning("the gold label (or value, or set)")]
    pred_a: Annotated[Any, meaning("A's prediction (label, value or set)")]
    pred_b: Annotated[Any, meaning("B's prediction")]
    cluster: Annotated[
        str | int | None, meaning("the item's group value (its bootstrap cluster); null when the rows have none")
    ] = None
    error_a: Annotated[float | None, meaning("|pred_a - gold| (regression tasks)")] = None
    error_b: Annotated[float | None, meaning("|pred_b - gold| (regression tasks)")] = None
    prompt: Annotated[Any, meaning("the rows' prompt (or doc / input) field: the item's text, as A's row has it")] = (
        None
    )
    prompt_b: Annotated[Any, meaning("B's prompt, where it differs from A's (compare --pair-on doc)")] = None
    target: Annotated[Any, meaning("the rows' target field (a harness's gold answer text)")] = None
    output_a: Annotated[Any, meaning("A's prediction field (a harness's model output text)")] = None
    output_b: Annotated[Any, meaning("B's prediction field")] = None


class ItemFlips(Part, kw_only=True):
    """The discordant items of one paired task (``compare --items``), all of them, A-better first
    then B-better, each in A's row order (regression: largest error difference first)."""

    basis: Annotated[
        Literal["correct", "error"],
        meaning(
            "correct: right means pred equals gold (label, match and set tasks); error: the smaller absolute error "
            "is better (regression tasks), items with equal errors are not listed"
        ),
    ]
    a_better: Annotated[int, meaning("items A has right and B wrong (regression: A's error smaller)", "items")]
    b_better: Annotated[int, meaning("items B has right and A wrong (regression: B's error smaller)", "items")]
    cluster: Annotated[
        str | None, meaning("the cluster (group value) the items and counts are limited to; null: the whole task")
    ] = None
    items: Annotated[list[FlippedItem], meaning("every discordant item (in the cluster, when one is given)")]


class TaskComparison(Part, kw_only=True):
    """One task of a comparison."""

    kind: Annotated[str, meaning("the task kind")]
    paired: Annotated[bool, meaning("true when A and B share item ids (paired resampling)")]
    n_a: Annotated[int, meaning("items in A", "items")]
    n_b: Annotated[int, meaning("items in B", "items")]
    n: Annotated[int | None, meaning("items in both (paired)", "items")]
    metrics: Annotated[list[MetricDiff], meaning("A - B per metric")]
    margin_tests: Annotated[
        list[MarginTest] | None,
        meaning("non-inferiority or equivalence tests per metric (compare --margin / --equivalence)"),
    ] = None
    prompts_differ: Annotated[
        int | None,
        meaning(
            "paired items whose item_hash differs between A and B (another prompt of the same document), paired "
            "on the id by compare --pair-on doc; null when none differ",
            "items",
        ),
    ] = None
    flips: Annotated[
        ItemFlips | None,
        meaning("the items A and B disagree on (compare --items); null when not asked for or not defined (ranking)"),
    ] = None


class ComparisonDoc(Document, kw_only=True):
    """What :func:`labledger.compare` computes: A - B per task and metric. ``adjust`` names the
    multiplicity adjustment of the metrics' ``p_adjusted`` (holm, bh, none) over every metric and
    task, ``family`` says how many p-values it covered."""

    KIND: ClassVar[str] = "comparison"
    kind: Annotated[Literal["comparison"], meaning("the document kind")] = "comparison"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    a: Annotated[str, meaning("result set A (a file or RUN:NAME)")]
    b: Annotated[str, meaning("result set B")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[int, meaning("bootstrap resamples drawn (0: no interval)")]
    seed: Annotated[int, meaning("the random seed of the bootstrap")]
    tasks: Annotated[dict[str, TaskComparison], meaning("task -> its comparison")]
    names: Annotated[dict[str, str] | None, meaning("display names of A and B")] = None
    adjust: Annotated[str | None, meaning("the multiplicity adjustment of p_adjusted: holm, bh or none")] = None
    family: Annotated[str | None, meaning("how many p-values the adjustment covered")] = None
    margin_family: Annotated[
        str | None, meaning("how many margin tests the adjustment of their p_adjusted covered")
    ] = None
    pair_on: Annotated[
        Literal["item", "doc"] | None,
        meaning(
            "how paired items were matched: item (the id, and item_hash where the rows carry one) or doc (the id "
            "and the document, even where the prompt differs); null: item"
        ),
    ] = None

    def _repr_html_(self) -> str:
        """Notebook display: small escaped tables with CIs and definitions (:mod:`labledger.schema.html`)."""
        from labledger.schema.html import comparison_html

        return comparison_html(self)


# -- calibration report --------------------------------------------------------------------------
class CalibrationMetric(Part, kw_only=True):
    """Calibrated minus raw for one metric of one task (``value`` is the difference)."""

    metric: Annotated[str, meaning("the metric's name as shown (the two ECEs apart)")]
    key: Annotated[str, meaning("the metric's identity: name and canonical parameters, e.g. f1[average=macro]")]
    base_metric: Annotated[str, meaning("the key of the metric being differenced")]
    variant: Annotated[str, meaning("calibrated or cross-fitted (what raw is subtracted from)")]
    params: Annotated[dict[str, Any], meaning("the metric's parameters (average=, k=, pos_label=, n_bins=)")]
    definition: Annotated[str, meaning("the metric's one-sentence definition")]
    higher_is_better: Annotated[bool, meaning("true when a larger value is better")]
    raw: Annotated[float | None, meaning("the metric on the raw predictions")]
    calibrated: Annotated[float | None, meaning("the metric on this variant's predictions")]
    value: Annotated[float | None, meaning("variant minus raw")]
    ci_low: Annotated[float | None, meaning("lower end of the paired interval of the difference")]
    ci_high: Annotated[float | None, meaning("upper end of the paired interval of the difference")]
    p_value: Annotated[float | None, meaning("two-sided percentile-bootstrap p of H0: difference = 0")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[
        int,
        meaning("bootstrap resamples drawn (0: none drawn; `method` names an analytic interval, else there is none)"),
    ]
    n: Annotated[int, meaning("items", "items")]
    method: Annotated[
        str | None, meaning("how the interval was formed (percentile bootstrap, cluster bootstrap, ...)")
    ] = None


class CalibrationValue(Part, kw_only=True):
    """One metric's value for one variant (raw, calibrated, cross-fitted) with its interval;
    ``metric`` is the name shown (the two ECEs apart), ``key`` the metric's identity."""

    metric: Annotated[str, meaning("the metric's name as shown (the two ECEs apart)")]
    key: Annotated[str, meaning("the metric's identity: name and canonical parameters, e.g. f1[average=macro]")]
    params: Annotated[dict[str, Any], meaning("the metric's parameters (average=, k=, pos_label=, n_bins=)")]
    definition: Annotated[str, meaning("the metric's one-sentence definition")]
    higher_is_better: Annotated[bool, meaning("true when a larger value is better")]
    value: Annotated[float | None, meaning("the metric's value (null when undefined on these items)")]
    ci_low: Annotated[float | None, meaning("lower end of the interval")]
    ci_high: Annotated[float | None, meaning("upper end of the interval")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[
        int,
        meaning("bootstrap resamples drawn (0: none drawn; `method` names an analytic interval, else there is none)"),
    ]
    n: Annotated[int, meaning("items", "items")]
    method: Annotated[
        str | None, meaning("how the interval was formed: an analytic form (DeLong, CLT, Wilson) or which bootstrap")
    ] = None

    @property
    def id(self) -> MetricId:
        """The metric's identity (parsed from ``key``)."""
        return MetricId.parse(self.key)


class CalibrationSliceBody(Part, kw_only=True):
    """Raw or calibrated values of one task (``slices.variant.raw`` / ``.calibrated``)."""

    n: Annotated[int, meaning("items", "items")]
    metrics: Annotated[list[CalibrationValue], meaning("every metric on this variant's predictions")]


class CalibrationTask(Part, kw_only=True):
    """One task of a calibration report."""

    method: Annotated[str, meaning("the recipe's calibration method(s)")]
    steps: Annotated[str, meaning("the fitted steps with their parameters, as text")]
    transductive: Annotated[bool, meaning("true when a step uses the evaluated items themselves (em_prior_shift)")]
    fitted_on: Annotated[str | None, meaning("what the recipe was fitted on (file, split, sha256)")] = None
    in_sample: Annotated[str, meaning("whether the recipe was fitted on these items: yes, no, partly or unknown")]
    status: Annotated[str, meaning("what that means for the calibrated figure (held out, or optimistic)")]
    n: Annotated[int, meaning("items of the task", "items")]
    clusters: Annotated[
        int | None,
        meaning("clusters (rows' group values) resampled together; null when items were resampled one by one"),
    ]
    headline: Annotated[str | None, meaning("the key of the task's headline metric")]
    honest: Annotated[str | None, meaning("the variant to quote: cross-fitted when fitted in sample, else calibrated")]
    metrics: Annotated[list[CalibrationMetric], meaning("variant minus raw per metric, with paired intervals")]
    slices: Annotated[
        dict[str, dict[str, CalibrationSliceBody]] | None,
        meaning("slices.variant.<raw|calibrated|cross-fitted>: each variant's metrics"),
    ] = None
    reliability: Annotated[
        dict[str, Any] | None,
        meaning("reliability bins of top-label confidence (bins, raw_bins, cross_fitted_bins, strategy, note)"),
    ] = None
    crossfit: Annotated[
        dict[str, Any] | None, meaning("the cross-fit's k, seed and folds (or why it could not be done)")
    ] = None
    transductive_note: Annotated[str | None, meaning("what a transductive step means for the figures")] = None
    em: Annotated[dict[str, Any] | None, meaning("the EM prior-shift estimate (priors, iterations)")] = None


class CalibrationRow(Part, kw_only=True):
    """One row of the report's headline table."""

    task: Annotated[str, meaning("the task")]
    method: Annotated[str, meaning("the calibration method")]
    metric: Annotated[str, meaning("the metric's registry name (accuracy, f1, ece, ...)")]
    variant: Annotated[str, meaning("calibrated or cross-fitted")]
    fitted: Annotated[str, meaning("in sample or held out (in_sample / status in short)")]
    raw: Annotated[float | None, meaning("the headline metric on raw predictions")]
    calibrated: Annotated[float | None, meaning("the headline metric on this variant")]
    diff: Annotated[float | None, meaning("calibrated - raw")]
    ci_low: Annotated[float | None, meaning("lower end of the interval")]
    ci_high: Annotated[float | None, meaning("upper end of the interval")]
    p_value: Annotated[float | None, meaning("two-sided percentile-bootstrap p of H0: difference = 0")]
    n: Annotated[int, meaning("items the value is computed on", "items")]
    honest: Annotated[bool, meaning("true for the row to quote")]


class CalibrationDoc(Document, kw_only=True):
    """``labledger calibrate report``: raw vs calibrated with paired CIs."""

    KIND: ClassVar[str] = "calibration"
    kind: Annotated[Literal["calibration"], meaning("the document kind")] = "calibration"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    source: Annotated[str, meaning("the results evaluated")]
    sha256: Annotated[str | None, meaning("sha256 of the results file")] = None
    recipe_id: Annotated[str | None, meaning("the id of the recipe applied")] = None
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    resamples: Annotated[int, meaning("bootstrap resamples drawn (0: no interval)")]
    seed: Annotated[int, meaning("the random seed of the bootstrap")]
    bins: Annotated[int, meaning("equal-width bins of the reliability tables and ECE")]
    tasks: Annotated[dict[str, CalibrationTask], meaning("task -> its report")]
    table: Annotated[list[CalibrationRow], meaning("the headline table, one row per task and variant")]
    raw: Annotated[dict[str, float | None], meaning("task -> the headline metric on raw predictions")]
    calibrated: Annotated[
        dict[str, float | None], meaning("task -> the headline metric calibrated (the honest variant)")
    ]
    n: Annotated[int, meaning("items over every task", "items")]
    mean: Annotated[dict[str, Any] | None, meaning("the mean over tasks of raw, calibrated and their difference")]
    recipe: Annotated[dict[str, Any], meaning("the recipe applied, in full")]
    definitions: Annotated[dict[str, str], meaning("what raw, calibrated, cross-fitted and reliability mean")]
    stored: Annotated[str | None, meaning("where the report was saved (--save)")] = None

    def _repr_html_(self) -> str:
        """Notebook display: small escaped tables with CIs and definitions (:mod:`labledger.schema.html`)."""
        from labledger.schema.html import calibration_html

        return calibration_html(self)


# -- sweep report --------------------------------------------------------------------------------
class SweepDoc(Document, kw_only=True):
    """``labledger sweep --json``: thresholds under gates and the selected one."""

    KIND: ClassVar[str] = "sweep"
    kind: Annotated[Literal["sweep"], meaning("the document kind")] = "sweep"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    source: Annotated[str | None, meaning("the results swept")] = None
    task: Annotated[str | None, meaning("the task swept")] = None
    n: Annotated[int, meaning("items", "items")]
    positive: Annotated[str, meaning("the positive label")]
    negative: Annotated[str, meaning("the negative label")]
    support: Annotated[dict[str, int], meaning("items per label", "items")]
    decision: Annotated[str, meaning("the decision rule: positive when score >= threshold")]
    thresholds: Annotated[str, meaning("the thresholds tried, as given (a grid or the observed scores)")]
    objective: Annotated[str, meaning("the metric maximised")]
    gates: Annotated[list[str], meaning("the constraints a threshold must meet (recall >= 0.9, per-slice gates)")]
    selection_rule: Annotated[str, meaning("how the selected threshold was chosen")]
    tie_break: Annotated[str, meaning("how ties on the objective were broken")]
    definition: Annotated[dict[str, str], meaning("metric -> its definition")]
    threshold_selection: Annotated[
        dict[str, Any], meaning("the selected threshold with its metrics (or why none met the gates)")
    ]
    threshold_trials: Annotated[list[dict[str, Any]], meaning("every threshold tried with its metrics and gates met")]
    paired_test: Annotated[
        dict[str, Any] | None,
        meaning("the selected threshold applied to held-out test results (--test), with its metrics"),
    ] = None
    notes: Annotated[list[str] | None, meaning("what to keep in mind when reading the figures")] = None
    test: Annotated[
        dict[str, Any] | None, meaning("held-out test results of an older sweep document (kept as written)")
    ] = None


# -- benchmark entries and version tables --------------------------------------------------------
class BenchmarkEntry(Document, kw_only=True):
    """One value of the benchmark ledger (``labledger table``'s cells); what
    :mod:`labledger.analysis.benchmarks` stores, reads and tables. ``metric_id`` is filled in from
    ``metric`` and ``params`` when not given.

    >>> e = BenchmarkEntry(model="m", suite="s", benchmark="b", metric="f1", params={"average": "macro"}, value=0.5)
    >>> e.metric_id, e.id.key
    ('f1[average=macro]', 'f1[average=macro]')
    """

    KIND: ClassVar[str] = "benchmark_entry"
    kind: Annotated[Literal["benchmark_entry"], meaning("the document kind")] = "benchmark_entry"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    model: Annotated[str, meaning("the model (a version table's column)")]
    suite: Annotated[str, meaning("the suite (one version table)")]
    benchmark: Annotated[str, meaning("the benchmark (a table row)")]
    metric: Annotated[str, meaning("the metric's registry name (accuracy, f1, ece, ...)")]
    value: Annotated[float, meaning("the value")]
    category: Annotated[str, meaning("the benchmark's category (a group of table rows)")] = ""
    params: Annotated[dict[str, Any], meaning("the metric's parameters (average=, k=, pos_label=, n_bins=)")] = {}
    variant: Annotated[str, meaning("raw or calibrated (or another named variant)")] = "raw"
    n: Annotated[int | None, meaning("items behind the value", "items")] = None
    ci_low: Annotated[float | None, meaning("lower end of the interval")] = None
    ci_high: Annotated[float | None, meaning("upper end of the interval")] = None
    run_id: Annotated[str | None, meaning("the run it came from")] = None
    evaluation: Annotated[str | None, meaning("the result set's name")] = None
    results_path: Annotated[str | None, meaning("the results file (paired deltas read it)")] = None
    source: Annotated[str | None, meaning("where it came from (an evaluation, an imported table line, a harness)")] = (
        None
    )
    metric_id: Annotated[str, meaning("the metric's key as tables show it (quiet default parameters dropped)")] = ""

    def __post_init__(self) -> None:
        if not self.metric_id:
            self.metric_id = self.id.short

    @property
    def id(self) -> MetricId:
        """The metric's identity (name and canonical parameters)."""
        return MetricId(self.metric, self.params)


class VersionRow(Part, kw_only=True):
    """One benchmark of a version table."""

    category: Annotated[str, meaning("the benchmark's category (a group of table rows)")]
    benchmark: Annotated[str, meaning("the benchmark (a table row)")]
    metric_id: Annotated[str, meaning("the metric's key as tables show it (quiet default parameters dropped)")]
    values: Annotated[dict[str, float | None], meaning("column -> value")]
    ci: Annotated[dict[str, list[float | None] | None], meaning("column -> [low, high] of its interval")]
    n: Annotated[dict[str, int | None], meaning("column -> items", "items")]
    delta: Annotated[float | None, meaning("the delta column's difference (to - from)")] = None
    delta_ci: Annotated[list[float | None] | None, meaning("[low, high] of the delta's paired interval")] = None
    p_value: Annotated[float | None, meaning("two-sided percentile-bootstrap p of H0: difference = 0")] = None
    significance: Annotated[str | None, meaning("significant or not significant, by the adjusted p")] = None
    p_adjusted: Annotated[float | None, meaning("p_value adjusted over the document's family of tests")] = None
    mde: Annotated[float | None, meaning("difference detectable with 80% power at alpha 0.05")] = None
    warning: Annotated[str | None, meaning("the interval covers less than its level")] = None
    ranking: Annotated[
        RankingDoc | None,
        meaning("the columns ranked on this benchmark's stored predictions, with rank intervals (table --ranks)"),
    ] = None


class VersionMean(Part, kw_only=True):
    """The mean row: macro mean over the benchmarks present in every column."""

    n: Annotated[int, meaning("benchmarks present in every column (the mean's rows)")]
    values: Annotated[dict[str, float | None], meaning("column -> macro mean")]
    delta: Annotated[float | None, meaning("the mean's delta")] = None


class VersionDelta(Part, kw_only=True):
    """Which columns the delta column subtracts."""

    to: Annotated[str | None, meaning("the column subtracted from")]
    from_: Annotated[str, meaning("the column subtracted")] = msgspec.field(name="from")


class VersionProvenance(Part, kw_only=True):
    """The stored predictions behind a version table's cells
    (:func:`labledger.analysis.benchmarks.predictions_digest`)."""

    sha256: Annotated[str, meaning("sha256 over the sorted lines: benchmark, model, variant, results file sha256")]
    entries: Annotated[int, meaning("entries in the table's columns")]
    with_predictions: Annotated[int, meaning("of them, entries whose results file is stored (the digest covers these)")]


class VersionTableDoc(Document, kw_only=True):
    """``labledger table --json``: benchmarks x model columns, a mean row and deltas."""

    KIND: ClassVar[str] = "version_table"
    kind: Annotated[Literal["version_table"], meaning("the document kind")] = "version_table"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    suite: Annotated[str, meaning("the suite (one version table)")]
    columns: Annotated[list[str], meaning("model (or model/variant) columns, in order")]
    rows: Annotated[list[VersionRow], meaning("one row per benchmark")]
    mean: Annotated[VersionMean, meaning("the mean row")]
    delta: Annotated[VersionDelta | None, meaning("which columns the delta column subtracts")]
    warnings: Annotated[list[str], meaning("what makes cells incomparable (different metrics or n, missing cells)")]
    definition: Annotated[str, meaning("how the mean row is formed")]
    ci: Annotated[float | None, meaning("the level of the delta intervals")] = None
    adjust: Annotated[str | None, meaning("the multiplicity adjustment of p_adjusted: holm, bh or none")] = None
    family: Annotated[str | None, meaning("how many p-values the adjustment covered")] = None
    provenance: Annotated[
        VersionProvenance | None, meaning("the digest of the stored predictions behind the cells")
    ] = None

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
    kind: Annotated[Literal["power_plan"], meaning("the document kind")] = "power_plan"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    alpha: Annotated[float, meaning("the two-sided significance level")]
    power: Annotated[float, meaning("the power asked for")]
    omega2: Annotated[float, meaning("variance of the per-item difference (omega^2)")]
    omega2_source: Annotated[str, meaning("where omega^2 came from (a pilot comparison, or given)")]
    formula: Annotated[str, meaning("the formula used")]
    n: Annotated[int, meaning("items needed for delta, or the items given for an MDE", "items")]
    delta: Annotated[float | None, meaning("the difference to detect")] = None
    mde: Annotated[float | None, meaning("the minimum detectable effect of n items")] = None
    power_at_mde: Annotated[float | None, meaning("the power at the MDE")] = None
    task: Annotated[str | None, meaning("the task of the pilot")] = None
    pilot_n: Annotated[int | None, meaning("paired items of the pilot", "items")] = None
    pilot_diff: Annotated[float | None, meaning("the pilot's mean difference")] = None
    pilot_correlation: Annotated[float | None, meaning("correlation of A's and B's per-item scores in the pilot")] = (
        None
    )


class RepeatMetric(Part, kw_only=True):
    """One mean metric over repeated rows: reduced per item (``reduction``) before the interval;
    ``n`` items, ``k`` repeats, ``n_scores`` attempts; ``between`` / ``within`` the variance parts."""

    metric: Annotated[str, meaning("the metric's registry name (accuracy, f1, ece, ...)")]
    value: Annotated[float | None, meaning("the mean over items of the per-item reduced score")]
    ci_low: Annotated[float | None, meaning("lower end of the interval")]
    ci_high: Annotated[float | None, meaning("upper end of the interval")]
    method: Annotated[str, meaning("how the interval was formed")]
    analytic: Annotated[
        AnalyticInterval | None, meaning("the analytic interval beside the bootstrap one (for per-item means)")
    ] = None
    reduction: Annotated[str, meaning("how an item's repeats are reduced first: mean, max (best of k) or min")]
    k: Annotated[int, meaning("repeats per item")]
    n: Annotated[int, meaning("items", "items")]
    n_scores: Annotated[int, meaning("attempts (rows) over every item", "rows")]
    between: Annotated[float | None, meaning("variance of the per-item means (n - 1)")] = None
    within: Annotated[float | None, meaning("mean within-item variance across repeats")] = None
    warning: Annotated[str | None, meaning("the interval covers less than its level (few clusters or items)")] = None


class RepeatTask(Part, kw_only=True):
    """The metrics of one task of a repeats evaluation."""

    metrics: Annotated[list[RepeatMetric], meaning("the task's mean metrics")]


class RepeatsDoc(Document, kw_only=True):
    """``labledger eval --json`` on rows repeated by ``epoch`` / ``sample``
    (:func:`labledger.analysis.repeats.evaluate_repeats`)."""

    KIND: ClassVar[str] = "repeats"
    kind: Annotated[Literal["repeats"], meaning("the document kind")] = "repeats"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    source: Annotated[str | None, meaning("the results evaluated")] = None
    repeat_field: Annotated[str, meaning("the field that numbers repeats: epoch or sample")]
    ci: Annotated[float, meaning("the interval's confidence level (0.95: a 95% CI)")]
    tasks: Annotated[dict[str, RepeatTask], meaning("task -> its metrics")]


# -- rankings with uncertainty (#45) -------------------------------------------------------------
class RankEntry(Part, kw_only=True):
    """One system of a ranking: its value, point rank, rank interval and tie with the best."""

    name: Annotated[str, meaning("the system (a results file, RUN:NAME, or a name given)")]
    value: Annotated[float, meaning("the metric: the mean of its per-item values over the n items")]
    rank: Annotated[int, meaning("point rank: 1 + the systems with a strictly better value (ties share the best rank)")]
    rank_low: Annotated[
        int,
        meaning("lower end of the rank interval: 1 + the systems separated above it (all ranks at once at 1 - alpha)"),
    ]
    rank_high: Annotated[int, meaning("upper end of the rank interval: k - the systems separated below it")]
    tied_with_best: Annotated[
        bool, meaning("not separable from the best: no system is separated above it (rank_low is 1)")
    ]


class RankingDoc(Document, kw_only=True):
    """``labledger rank --json``: k systems ranked on the same items, each with a rank interval, and
    the tie group of the best (:func:`labledger.analysis.ranking.rank_systems`)."""

    KIND: ClassVar[str] = "ranking"
    kind: Annotated[Literal["ranking"], meaning("the document kind")] = "ranking"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    metric: Annotated[str | None, meaning("the metric ranked (a mean of per-item values)")]
    higher_is_better: Annotated[bool, meaning("whether a higher value ranks first")]
    n: Annotated[int, meaning("items every system is scored on (the same items)", "items")]
    clusters: Annotated[int | None, meaning("clusters resampled (None: items are resampled)", "clusters")]
    resamples: Annotated[int, meaning("paired bootstrap resamples (the same draws for every system)")]
    seed: Annotated[int, meaning("seed of the bootstrap")]
    alpha: Annotated[float, meaning("family-wise error rate of every separation (and of the rank intervals)")]
    ci: Annotated[float, meaning("joint confidence level of the rank intervals (1 - alpha)")]
    method: Annotated[str, meaning("how the pairwise statistics and their joint law are formed")]
    adjustment: Annotated[str, meaning("the multiplicity adjustment over all pairs of systems")]
    critical: Annotated[float | None, meaning("the first step's critical value of max |t| (None: no resamples)")]
    systems: Annotated[list[RankEntry], meaning("each system, in the order given")]
    tie_group: Annotated[list[str], meaning("the systems not separable from the best (rank interval reaching 1)")]
    separated: Annotated[
        list[list[str]], meaning("the pairs [better, worse] whose difference is separated at alpha, adjusted")
    ]
    task: Annotated[str | None, meaning("the task of the results ranked")] = None
    warning: Annotated[str | None, meaning("why the intervals are approximate (few items or clusters)")] = None


# -- runs and imports ----------------------------------------------------------------------------
class RunSummary(Document, kw_only=True):
    """One run's index row and summary (``labledger runs --json`` rows, ``/api/runs``)."""

    KIND: ClassVar[str] = "run_summary"
    kind: Annotated[Literal["run_summary"], meaning("the document kind")] = "run_summary"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    id: Annotated[str, meaning("the run id")]
    name: Annotated[str, meaning("the run's name")]
    group: Annotated[str | None, meaning("the run's group")]
    tags: Annotated[list[str], meaning("its tags")]
    status: Annotated[str, meaning("running, finished, failed or crashed")]
    started: Annotated[float, meaning("when it started", "unix seconds")]
    ended: Annotated[float | None, meaning("when it ended", "unix seconds")]
    duration: Annotated[float | None, meaning("ended - started (to now while running)", "s")]
    host: Annotated[str | None, meaning("the host it ran on")]
    pid: Annotated[int | None, meaning("the logging process's id")]
    git_commit: Annotated[str | None, meaning("HEAD's commit at start")]
    git_dirty: Annotated[bool | None, meaning("uncommitted changes at start")]
    error: Annotated[str | None, meaning("why it failed")]
    summary: Annotated[dict[str, Any], meaning("headline values and last/min/max of each scalar")]
    dir: Annotated[str | None, meaning("the run folder (only with the token)")]


class ImportRecord(Document, kw_only=True):
    """``labledger import --json``: the source, its format and hash, the runs made."""

    KIND: ClassVar[str] = "import"
    kind: Annotated[Literal["import"], meaning("the document kind")] = "import"
    schema_version: Annotated[int, meaning("the document's schema version (older ones are migrated on read)")] = (
        SCHEMA_VERSION
    )
    source: Annotated[str, meaning("the imported file or folder")]
    format: Annotated[str, meaning("the importer")]
    sha256: Annotated[str, meaning("sha256 of the source")]
    mode: Annotated[str, meaning("copy or reference")]
    again: Annotated[bool, meaning("true when this source was imported before")]
    previous: Annotated[dict[str, Any] | None, meaning("the earlier import of the same source")]
    runs: Annotated[list[dict[str, Any]], meaning("the runs made (id, name, counts)")]


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
        RankingDoc,
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
    "FlippedItem",
    "HarnessCheck",
    "ImportRecord",
    "ItemFlips",
    "PowerPlanDoc",
    "RankEntry",
    "RankingDoc",
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
    "VersionProvenance",
    "VersionRow",
    "VersionTableDoc",
]
