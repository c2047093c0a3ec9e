"""Invariants shared by every metric in the registry (like scikit-learn's metrics/tests/test_common.py)."""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest

from labledger.errors import MetricInputError, UnknownMetricError
from labledger.inputs.results import KINDS
from labledger.metrics import get_metric, list_metrics, metric_key, parse_metric, prepare

DOCS = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
ALL = [m.name for m in list_metrics()]


def inputs(metric, rng: np.random.Generator, n: int = 40) -> dict:
    """Random inputs of the right shape for ``metric``."""
    if metric.needs == "labels":
        labels = np.array(["a", "b", "c"])
        return {"gold": labels[rng.integers(0, 3, n)], "pred": labels[rng.integers(0, 3, n)]}
    if metric.needs == "probs":
        raw = rng.integers(1, 9, (n, 3)).astype(float)
        gold = rng.integers(0, 3, n)
        gold[:3] = [0, 1, 2]
        return {"gold": gold, "probs": raw / raw.sum(axis=1, keepdims=True), "labels": [0, 1, 2]}
    if metric.needs == "values":
        return {"gold": rng.integers(-6, 7, n) / 2, "pred": rng.normal(size=n).round(1)}
    if metric.needs == "ranking":
        rel = rng.integers(0, 3, (n, 5))
        sc = rng.integers(0, 4, (n, 5)) / 2
        return {
            "gold": [{f"d{j}": int(rel[i, j]) for j in range(5) if rel[i, j]} for i in range(n)],
            "scores": [{f"d{j}": float(sc[i, j]) for j in range(5)} for i in range(n)],
        }
    if metric.needs == "sets":
        return {
            "gold": [list(rng.choice(5, rng.integers(0, 3), replace=False)) for _ in range(n)],
            "pred": [list(rng.choice(5, rng.integers(0, 3), replace=False)) for _ in range(n)],
        }
    if metric.needs == "fields":
        costs = rng.gamma(2.0, 0.5, n).round(3)
        return {"values": [None if i % 7 == 0 else float(c) for i, c in enumerate(costs)], "field": "cost"}
    return {"gold": list(rng.choice(["x", "y", "z"], n)), "pred": list(rng.choice(["x", "y", "z"], n))}


def take(data: dict, idx: np.ndarray) -> dict:
    out = {}
    for k, v in data.items():
        if k in ("labels", "field"):
            out[k] = v
        elif isinstance(v, np.ndarray):
            out[k] = v[idx]
        else:
            out[k] = [v[i] for i in idx]
    return out


def same(a, b, tol=1e-10) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], tol) for k in a)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a))


@pytest.mark.parametrize("name", ALL)
def test_registry_entry_is_complete(name):
    m = get_metric(name)
    assert m.name == name and isinstance(m.higher_is_better, bool)
    assert m.needs in {"labels", "probs", "values", "ranking", "sets", "match", "fields"}
    assert set(m.kinds) <= set(KINDS) and m.kinds
    assert m.strategy in {"table", "mean", "weights"}
    text = m.describe()
    assert text.endswith(".") and "{" not in text and len(text) > 30
    assert set(m.choices) <= set(m.params)
    # the public function takes only keyword arguments: gold/pred cannot be swapped by position
    params = inspect.signature(m.fn).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    assert "gold" in inspect.signature(m.fn).parameters


@pytest.mark.parametrize("name", ALL)
def test_order_of_items_does_not_matter(name):
    m = get_metric(name)
    rng = np.random.default_rng(1)
    data = inputs(m, rng)
    perm = rng.permutation(prepare(name, **data).n)
    assert same(prepare(name, **data).value(), prepare(name, **take(data, perm)).value())


@pytest.mark.parametrize("name", ALL)
def test_unit_weights_equal_no_weights(name):
    data = inputs(get_metric(name), np.random.default_rng(2))
    prep = prepare(name, **data)
    assert same(prep.value(sample_weight=np.ones(prep.n)), prep.value())


@pytest.mark.parametrize("name", ALL)
def test_integer_weights_equal_repeated_items(name):
    if name == "field_total":
        pytest.skip("a total is n times the weighted mean: the total of n items, not of the sum(w) repeated ones")
    rng = np.random.default_rng(3)
    data = inputs(get_metric(name), rng)
    prep = prepare(name, **data)
    w = rng.integers(0, 4, prep.n)
    repeated = prepare(name, **take(data, np.repeat(np.arange(prep.n), w)))
    assert same(prep.value(sample_weight=w), repeated.value())


@pytest.mark.parametrize("name", ALL)
def test_batched_weights_equal_one_at_a_time(name):
    # the bootstrap computes B values at once; each must be the metric under that row's weights
    rng = np.random.default_rng(4)
    prep = prepare(name, **inputs(get_metric(name), rng))
    w = rng.integers(0, 3, (5, prep.n)).astype(float)
    batch = prep.weighted(w)
    for b in range(5):
        one = prep.value(sample_weight=w[b])
        row = batch[b] if prep.columns is None else dict(zip(prep.columns, batch[b]))
        assert same(row, one)


@pytest.mark.parametrize("name", ALL)
def test_key_round_trips_through_the_parser(name):
    m = get_metric(name)
    params = m.resolve({})
    spec = parse_metric(metric_key(name, params))
    assert (spec.metric is m and m.resolve(dict(spec.params)) == params) or any(
        isinstance(v, float) and math.isnan(v) for v in params.values()
    )


@pytest.mark.parametrize(
    "text, name, params",
    [
        ("f1", "f1", {}),
        ("f1:average=macro", "f1", {"average": "macro"}),
        ("f1[average=binary,pos_label=yes]", "f1", {"average": "binary", "pos_label": "yes"}),
        ("macro_f1", "f1", {"average": "macro"}),
        ("ndcg@10", "ndcg", {"k": 10}),
        ("recall@5", "recall_at_k", {"k": 5}),
        ("ece:n_bins=10,strategy=quantile", "ece", {"n_bins": 10, "strategy": "quantile"}),
    ],
)
def test_metric_specs(text, name, params):
    spec = parse_metric(text)
    assert spec.name == name and dict(spec.params) == params


@pytest.mark.parametrize(
    "text, error, message",
    [
        ("f1score", UnknownMetricError, "Did you mean 'f1'?"),
        ("acuracy", UnknownMetricError, "Did you mean 'accuracy'"),
        ("f1:mode=macro", MetricInputError, "has no parameter 'mode'"),
        ("f1:average=mean", MetricInputError, "average must be one of"),
        ("ndcg@0", MetricInputError, "k must be an integer >= 1"),
        ("f1:average", MetricInputError, "name=value"),
        ({"name": "ece"}, MetricInputError, "a metric is a name ('ece', "),  # was AttributeError: no 'strip'
        (None, MetricInputError, "got NoneType None"),
    ],
)
def test_bad_specs(text, error, message):
    with pytest.raises(error, match=re.escape(message)):
        parse_metric(text)


def test_docs_list_every_metric_with_its_definition():
    from labledger.metrics.registry import metrics_markdown

    text = DOCS.read_text()
    start, end = "<!-- metrics-table:start -->", "<!-- metrics-table:end -->"
    assert start in text and end in text, f"{DOCS} lost its generated table markers"
    block = text.split(start, 1)[1].split(end, 1)[0].strip()
    assert block == metrics_markdown().strip(), (
        f"{DOCS} is out of date with the registry: run `python docs/gen_metrics.py`"
    )
    for name in ALL:
        assert f"`{name}`" in block, f"metric {name} is missing from {DOCS}"


@pytest.mark.parametrize(
    "module",
    [
        "labledger.inputs.results",
        "labledger.inputs.reference",
        "labledger.metrics",
        "labledger.metrics.registry",
        "labledger.metrics.classification",
        "labledger.metrics.regression",
        "labledger.metrics.ranking",
        "labledger.metrics.resample",
        "labledger.analysis.evaluation",
    ],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    failures, tried = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
