"""Cost, tokens and latency per item (#45): `field_mean` / `field_total` of a numeric row field,
with the bootstrap over items or clusters that every mean metric has, and paired in `compare`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main
from labledger.errors import MetricInputError


def _write(path, gold, pred, cost, latency, group=None):
    with open(path, "w") as f:
        for i, (g, p, c, ms) in enumerate(zip(gold, pred, cost, latency)):
            row = {"id": f"q{i}", "task": "qa", "gold": "ny"[g], "pred": "ny"[p], "cost": float(c)}
            if ms is not None:
                row["latency_ms"] = float(ms)
            if group is not None:
                row["group"] = f"doc{group[i]}"
            f.write(json.dumps(row) + "\n")


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(1)
    n = 600
    gold = rng.integers(0, 2, n)
    out = {}
    for name, acc, scale in (("a", 0.80, 0.002), ("b", 0.86, 0.004)):
        pred = np.where(rng.random(n) < acc, gold, 1 - gold)
        cost = rng.gamma(2.0, scale / 2, n)
        latency = [None if i % 40 == 0 else float(x) for i, x in enumerate(rng.lognormal(5, 0.5, n))]
        _write(tmp_path / f"{name}.jsonl", gold, pred, cost, latency)
        out[name] = (pred == gold, cost, latency)
    return tmp_path, out


@pytest.mark.parametrize("fast", ["1", "0"])
def test_eval_gives_the_mean_and_total_of_a_row_field_with_intervals(pair, monkeypatch, fast):
    monkeypatch.setenv("LABLEDGER_FAST", fast)
    d, truth = pair
    args = ["eval", str(d / "a.jsonl"), "--metric", "mean_cost", "--metric", "total_cost"]
    res = CliRunner().invoke(main, [*args, "--metric", "mean_latency_ms", "--json"])
    assert res.exit_code == 0, res.output
    got = {(m["metric"], m["params"].get("field")): m for m in json.loads(res.output)["tasks"]["qa"]["metrics"]}
    _, cost, latency = truth["a"]
    lat = np.array([x for x in latency if x is not None])
    mean, total = got[("field_mean", "cost")], got[("field_total", "cost")]
    ms = got[("field_mean", "latency_ms")]
    assert mean["value"] == pytest.approx(cost.mean(), rel=1e-12) and mean["ci_low"] < cost.mean() < mean["ci_high"]
    assert total["value"] == pytest.approx(cost.sum(), rel=1e-12) and total["ci_low"] < cost.sum() < total["ci_high"]
    assert ms["value"] == pytest.approx(lat.mean(), rel=1e-12) and ms["n"] == len(lat) == 585
    assert "lower is better" in mean["definition"]


def test_compare_pairs_cost_and_accuracy_on_the_same_items(pair):
    d, truth = pair
    res = CliRunner().invoke(
        main,
        ["compare", str(d / "b.jsonl"), str(d / "a.jsonl"), "--metric", "accuracy", "--metric", "mean_cost", "--json"],
    )
    assert res.exit_code == 0, res.output
    got = {m["metric"]: m for m in json.loads(res.output)["tasks"]["qa"]["metrics"]}
    cost_diff = truth["b"][1].mean() - truth["a"][1].mean()
    assert got["field_mean"]["diff"] == pytest.approx(cost_diff, rel=1e-9)
    assert got["field_mean"]["ci_low"] > 0  # b costs more, and the paired interval says so
    assert got["accuracy"]["diff"] == pytest.approx(truth["b"][0].mean() - truth["a"][0].mean())


def test_a_field_that_is_not_a_number_or_missing_is_one_line(tmp_path):
    (tmp_path / "r.jsonl").write_text(
        '{"id": "1", "task": "t", "gold": "a", "pred": "a", "cost": 0.1}\n'
        '{"id": "2", "task": "t", "gold": "b", "pred": "a", "cost": "cheap"}\n'
    )
    r = CliRunner()
    bad = r.invoke(main, ["eval", str(tmp_path / "r.jsonl"), "--metric", "mean_cost"])
    assert bad.exit_code == 1 and "field 'cost' must hold numbers; item 2 has 'cheap'" in bad.output
    assert len(bad.output.strip().splitlines()) == 1
    missing = r.invoke(main, ["eval", str(tmp_path / "r.jsonl"), "--metric", "mean_latency_ms"])
    assert missing.exit_code == 1 and "has no field 'latency_ms' in its rows (extra fields: cost)" in missing.output
    with pytest.raises(MetricInputError, match="field_mean needs the field: field_mean:field=cost"):
        labledger.evaluate(str(tmp_path / "r.jsonl"), metrics=["field_mean"], resamples=0)


@pytest.mark.simulation
def test_the_mean_cost_interval_covers_at_its_level_on_skewed_costs(tmp_path):
    """Gamma(2)-distributed costs, 300 items, clustered in 60 documents: the bootstrap interval over
    clusters of the mean cost covers the true mean in ~95% of datasets."""
    from labledger.analysis.evaluation import evaluate

    rng = np.random.default_rng(7)
    hits, reps = 0, 300
    for r in range(reps):
        doc = np.repeat(np.arange(60), 5)
        doc_effect = rng.gamma(4.0, 0.25, 60)[doc]
        cost = rng.gamma(2.0, 0.001, 300) * doc_effect  # true mean 0.002
        path = tmp_path / f"r{r}.jsonl"
        _write(path, np.zeros(300, int), np.zeros(300, int), cost, cost, group=doc)
        m = evaluate(str(path), metrics=["mean_cost"], resamples=1000, seed=r).doc.tasks["qa"].metrics[0]
        hits += m.ci_low <= 0.002 <= m.ci_high
    assert 0.92 <= hits / reps <= 0.975
