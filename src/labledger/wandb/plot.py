"""``wandb.plot``: charts over a table, logged with ``wandb.log({"key": chart})``.

Each function returns a :class:`~labledger.wandb.media.CustomChart` (the rows as a
:class:`~labledger.wandb.media.Table` and which columns the chart draws), built as W&B builds it: the
same chart names (``wandb/line/v0``, ``wandb/confusion_matrix/v1``, ...), columns and fields. Logged,
the table is stored as ``files/tables/<key>_table/<step>.jsonl`` and the spec in a ``chart`` record
of ``media.jsonl``.

>>> cm = confusion_matrix(y_true=[0, 1, 1], preds=[0, 1, 0], class_names=["no", "yes"])
>>> cm.spec.spec_name, cm.table.columns
('wandb/confusion_matrix/v1', ['Actual', 'Predicted', 'nPredictions'])
>>> [row for row in cm.table.data if row[2]]
[['no', 'no', 1.0], ['yes', 'no', 1.0], ['yes', 'yes', 1.0]]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from labledger.wandb._run import UnsupportedNameError, WandbError
from labledger.wandb.media import CustomChart, CustomChartSpec, Table, Visualize, VisualizeSpec


def plot_table(
    vega_spec_name: str,
    data_table: Table,
    fields: dict[str, Any],
    string_fields: dict[str, Any] | None = None,
    split_table: bool = False,
) -> CustomChart:
    """``wandb.plot_table``: a chart named ``vega_spec_name`` over ``data_table``; ``fields`` maps the
    chart's fields to columns, ``string_fields`` holds its titles."""
    if not isinstance(data_table, Table):
        raise WandbError(f"Expected `data_table` to be `wandb.Table` type, instead got {type(data_table).__name__}")
    return CustomChart(
        table=data_table,
        spec=CustomChartSpec(
            spec_name=vega_spec_name,
            fields=dict(fields),
            string_fields=dict(string_fields or {}),
            split_table=split_table,
        ),
    )


def visualize(id: str, value: Table) -> Visualize:
    """``wandb.visualize``: ``value`` drawn by the preset chart ``id``."""
    if not isinstance(value, Table):
        raise WandbError(f"Expected `value` to be `wandb.Table` type, instead got {type(value).__name__}")
    return Visualize(table=value, spec=VisualizeSpec(name=id))


def line(
    table: Table, x: str, y: str, stroke: str | None = None, title: str = "", split_table: bool = False
) -> CustomChart:
    """``wandb.plot.line``: ``y`` against ``x`` (one line per value of ``stroke`` when given)."""
    return plot_table(
        "wandb/line/v0", table, {"x": x, "y": y, "stroke": stroke}, {"title": title}, split_table=split_table
    )


def scatter(table: Table, x: str, y: str, title: str = "", split_table: bool = False) -> CustomChart:
    """``wandb.plot.scatter``: the points (``x``, ``y``)."""
    return plot_table("wandb/scatter/v0", table, {"x": x, "y": y}, {"title": title}, split_table=split_table)


def bar(table: Table, label: str, value: str, title: str = "", split_table: bool = False) -> CustomChart:
    """``wandb.plot.bar``: one bar of height ``value`` per ``label``."""
    return plot_table(
        "wandb/bar/v0", table, {"label": label, "value": value}, {"title": title}, split_table=split_table
    )


def histogram(table: Table, value: str, title: str = "", split_table: bool = False) -> CustomChart:
    """``wandb.plot.histogram``: the distribution of the column ``value``."""
    return plot_table("wandb/histogram/v0", table, {"value": value}, {"title": title}, split_table=split_table)


def line_series(
    xs: Any,
    ys: Sequence[Iterable[Any]],
    keys: Sequence[str] | None = None,
    title: str = "",
    xname: str = "x",
    split_table: bool = False,
) -> CustomChart:
    """``wandb.plot.line_series``: several lines, one per ``ys`` series (named by ``keys``), over shared
    ``xs`` or one x series each; the table has W&B's columns ``step``, ``lineKey``, ``lineVal``."""
    ys = [list(y) for y in ys]
    xs = list(xs)
    if not xs or not isinstance(xs[0], Iterable) or isinstance(xs[0], (str, bytes)):
        xs = [xs] * len(ys)
    if len(xs) != len(ys):
        raise WandbError(f"wandb.plot.line_series: {len(xs)} x series for {len(ys)} y series (give one, or one each)")
    names = list(keys) if keys is not None else [f"line_{i}" for i in range(len(ys))]
    if len(names) != len(ys):
        raise WandbError(f"wandb.plot.line_series: {len(names)} keys for {len(ys)} y series")
    data = [[x, names[i], y] for i, (xx, yy) in enumerate(zip(xs, ys, strict=True)) for x, y in zip(xx, yy)]
    return plot_table(
        "wandb/lineseries/v0",
        Table(columns=["step", "lineKey", "lineVal"], data=data),
        {"step": "step", "lineKey": "lineKey", "lineVal": "lineVal"},
        {"title": title, "xname": xname},
        split_table=split_table,
    )


def confusion_matrix(
    probs: Sequence[Sequence[float]] | None = None,
    y_true: Sequence[Any] | None = None,
    preds: Sequence[Any] | None = None,
    class_names: Sequence[str] | None = None,
    title: str = "Confusion Matrix Curve",
    split_table: bool = False,
) -> CustomChart:
    """``wandb.plot.confusion_matrix``: counts of (actual, predicted) over every pair of classes, from
    ``preds`` or the argmax of ``probs``, as W&B counts them (classes sorted; with ``class_names`` the
    labels are indices into it, else the names are ``Class_1``, ``Class_2``, ...)."""
    if probs is not None and preds is not None:
        raise WandbError("wandb.plot.confusion_matrix: give probs or preds, not both")
    if probs is not None:
        preds = np.argmax(np.asarray(probs), axis=1).tolist()
    if preds is None or y_true is None:
        raise WandbError("wandb.plot.confusion_matrix: give y_true and preds (or probs)")
    preds, truth = list(preds), list(y_true)
    if len(preds) != len(truth):
        raise WandbError(f"wandb.plot.confusion_matrix: {len(preds)} predictions for {len(truth)} true labels")
    if class_names is not None:
        n = len(class_names)
        idx: Iterable[Any] = range(n)
        if len(set(preds)) > n or len(set(truth)) > n:
            raise WandbError(f"wandb.plot.confusion_matrix: more distinct labels than the {n} class names")
        names = list(class_names)
    else:
        idx = set(preds) | set(truth)
        n = len(idx)
        names = [f"Class_{i + 1}" for i in range(n)]
    position = {v: i for i, v in enumerate(sorted(idx))}
    counts = np.zeros((n, n))
    for t, p in zip(truth, preds, strict=True):
        counts[position[t], position[p]] += 1
    data = [[names[i], names[j], float(counts[i, j])] for i in range(n) for j in range(n)]
    return plot_table(
        "wandb/confusion_matrix/v1",
        Table(columns=["Actual", "Predicted", "nPredictions"], data=data),
        {"Actual": "Actual", "Predicted": "Predicted", "nPredictions": "nPredictions"},
        {"title": title},
        split_table=split_table,
    )


def _curve_classes(y_true: Any, y_probas: Any, labels: Any, classes_to_plot: Any) -> Any:
    truth = np.asarray(y_true)
    probas = np.asarray(y_probas, dtype=float)
    if probas.ndim != 2 or len(probas) != len(truth):
        raise WandbError("wandb.plot: y_probas needs one row of class scores per label in y_true")
    classes = np.unique(truth)
    wanted = classes if classes_to_plot is None else classes_to_plot
    for i in np.where(np.isin(classes, wanted))[0]:
        label = classes[i]
        name = labels[label] if labels is not None and isinstance(label, (int, np.integer)) else label
        yield (name.item() if isinstance(name, np.generic) else name), truth == label, probas[:, i]


def roc_curve(
    y_true: Sequence[Any],
    y_probas: Sequence[Sequence[float]] | None = None,
    labels: list[str] | None = None,
    classes_to_plot: list[Any] | None = None,
    title: str = "ROC Curve",
    split_table: bool = False,
) -> CustomChart:
    """``wandb.plot.roc_curve``: one-vs-rest ROC points (``class``, ``fpr``, ``tpr``, rounded to 3 places)
    per class, from scikit-learn's ``roc_curve`` as W&B computes them."""
    from sklearn import metrics

    rows = []
    for name, positive, scores in _curve_classes(y_true, y_probas, labels, classes_to_plot):
        fpr, tpr, _ = metrics.roc_curve(positive, scores)
        rows += [[name, round(float(f), 3), round(float(t), 3)] for f, t in zip(fpr, tpr, strict=True)]
    return plot_table(
        "wandb/area-under-curve/v0",
        Table(columns=["class", "fpr", "tpr"], data=rows),
        {"x": "fpr", "y": "tpr", "class": "class"},
        {"title": title, "x-axis-title": "False positive rate", "y-axis-title": "True positive rate"},
        split_table=split_table,
    )


def pr_curve(
    y_true: Sequence[Any] | None = None,
    y_probas: Sequence[Sequence[float]] | None = None,
    labels: list[str] | None = None,
    classes_to_plot: list[Any] | None = None,
    interp_size: int = 21,
    title: str = "Precision-Recall Curve",
    split_table: bool = False,
) -> CustomChart:
    """``wandb.plot.pr_curve``: one-vs-rest precision at ``interp_size`` recall levels (1 down to 0) per
    class, from scikit-learn's ``precision_recall_curve`` interpolated as W&B interpolates it."""
    from sklearn import metrics

    recall_levels = np.linspace(0, 1, interp_size)[::-1]
    rows = []
    for name, positive, scores in _curve_classes(y_true, y_probas, labels, classes_to_plot):
        precision, recall, _ = metrics.precision_recall_curve(positive, scores)
        precision = np.maximum.accumulate(precision)[::-1]
        recall = recall[::-1]
        at = np.minimum(np.searchsorted(recall, recall_levels, side="left"), len(precision) - 1)
        rows += [[name, round(float(precision[j]), 3), round(float(r), 3)] for j, r in zip(at, recall_levels)]
    return plot_table(
        "wandb/area-under-curve/v0",
        Table(columns=["class", "precision", "recall"], data=rows),
        {"x": "recall", "y": "precision", "class": "class"},
        {"title": title, "x-axis-title": "Recall", "y-axis-title": "Precision"},
        split_table=split_table,
    )


def __getattr__(name: str) -> Any:
    if name in ("custom_chart", "utils", "viz"):  # W&B's submodules
        raise UnsupportedNameError(
            f"wandb.plot.{name} is not supported by labledger.wandb: use the chart functions of wandb.plot "
            "(line, scatter, bar, histogram, line_series, confusion_matrix, roc_curve, pr_curve, plot_table)"
        )
    raise AttributeError(f"labledger.wandb.plot has no {name!r}: see docs/wandb.md for the charts it supports")


__all__ = [
    "CustomChart",
    "Visualize",
    "bar",
    "confusion_matrix",
    "histogram",
    "line",
    "line_series",
    "plot_table",
    "pr_curve",
    "roc_curve",
    "scatter",
    "visualize",
]
