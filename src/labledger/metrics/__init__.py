"""Metrics: pure functions over numpy arrays (no I/O), a registry with definitions, and bootstrap CIs.

Every public metric takes keyword-only, named inputs (``gold=``, ``pred=``, ``probs=``, ``score=``,
``scores=``) so truth and prediction cannot be swapped by position.

>>> from labledger.metrics import f1, get_metric
>>> f1(gold=["a", "b", "b"], pred=["a", "b", "a"], average="macro")
0.6666666666666666
>>> get_metric("f1").higher_is_better
True
"""

from labledger.metrics.classification import (
    accuracy,
    average_precision,
    balanced_accuracy,
    brier,
    cohen_kappa,
    confusion_matrix,
    ece,
    f1,
    log_loss,
    mcc,
    per_class,
    precision,
    recall,
    roc_auc,
)
from labledger.metrics.ranking import exact_match, mrr, ndcg, recall_at_k, set_f1
from labledger.metrics.registry import (
    Metric,
    MetricSpec,
    Prepared,
    get_metric,
    list_metrics,
    metric_key,
    parse_metric,
    prepare,
)
from labledger.metrics.regression import (
    acc5,
    acc7,
    has0_acc,
    has0_f1,
    mae,
    non0_acc,
    non0_f1,
    pearson,
    rmse,
    spearman,
    zero_f1,
)
from labledger.metrics.resample import (
    Interval,
    PairedResult,
    bootstrap,
    mcnemar,
    paired_bootstrap,
    unpaired_bootstrap,
)

__all__ = [
    "Interval",
    "Metric",
    "MetricSpec",
    "PairedResult",
    "Prepared",
    "acc5",
    "acc7",
    "accuracy",
    "average_precision",
    "balanced_accuracy",
    "bootstrap",
    "brier",
    "cohen_kappa",
    "confusion_matrix",
    "ece",
    "exact_match",
    "f1",
    "get_metric",
    "has0_acc",
    "has0_f1",
    "list_metrics",
    "log_loss",
    "mae",
    "mcc",
    "mcnemar",
    "metric_key",
    "mrr",
    "ndcg",
    "non0_acc",
    "non0_f1",
    "paired_bootstrap",
    "parse_metric",
    "pearson",
    "per_class",
    "precision",
    "prepare",
    "recall",
    "recall_at_k",
    "rmse",
    "roc_auc",
    "set_f1",
    "spearman",
    "unpaired_bootstrap",
    "zero_f1",
]
