"""Typed, versioned documents: the one contract between labledger's modules (#11).

Every document kind (evaluation, comparison, calibration, sweep, benchmark entry, version table,
run summary, import record) is a msgspec ``Struct`` with ``kind`` and ``schema_version``;
:func:`encode` / :func:`decode` write and read them, migrating older versions on read and refusing
newer ones. :class:`MetricId` is the one way a metric is named.

>>> from labledger.schema import MetricId, decode
>>> MetricId.parse("macro_f1").key
'f1[average=macro]'
"""

from __future__ import annotations

from labledger.schema.codec import NewerDocumentError, decode, encode, json_schema, upgrade
from labledger.schema.documents import (
    KINDS,
    SCHEMA_VERSION,
    STORED_KINDS,
    BenchmarkEntry,
    CalibrationDoc,
    ComparisonDoc,
    Document,
    EvaluationDoc,
    HarnessCheck,
    ImportRecord,
    PowerPlanDoc,
    RankingDoc,
    RepeatsDoc,
    RunSummary,
    SliceBody,
    SuiteMean,
    SweepDoc,
    TaskComparison,
    TaskEvaluation,
    VersionTableDoc,
)
from labledger.schema.format import format_ci, format_p
from labledger.schema.ids import MetricId
from labledger.schema.values import (
    AnalyticInterval,
    ConfusionMatrix,
    McNemar,
    MetricDiff,
    MetricValue,
    PerClass,
    PerClassRow,
    Stat,
    ci_label,
)

__all__ = [
    "KINDS",
    "SCHEMA_VERSION",
    "STORED_KINDS",
    "AnalyticInterval",
    "BenchmarkEntry",
    "CalibrationDoc",
    "ComparisonDoc",
    "ConfusionMatrix",
    "Document",
    "EvaluationDoc",
    "HarnessCheck",
    "ImportRecord",
    "McNemar",
    "MetricDiff",
    "MetricId",
    "MetricValue",
    "NewerDocumentError",
    "PerClass",
    "PerClassRow",
    "PowerPlanDoc",
    "RankingDoc",
    "RepeatsDoc",
    "RunSummary",
    "SliceBody",
    "Stat",
    "SuiteMean",
    "SweepDoc",
    "TaskComparison",
    "TaskEvaluation",
    "VersionTableDoc",
    "ci_label",
    "decode",
    "encode",
    "format_ci",
    "format_p",
    "json_schema",
    "upgrade",
]
