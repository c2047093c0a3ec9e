"""Sweep gates on confidence bounds (#45, item 2): ``lower(recall[cross_boundary])>=0.97`` passes
where the one-sided 95% Clopper-Pearson bound of the recall is at least 0.97; the point value and
the point gate's verdict are reported beside. The simulations (slow) measure the pass rate at a true
proportion exactly on the gate (type I error) and away from it (power), R and the MC SE stated."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import numpy as np
import pytest
from scipy import stats
from stats_simulation import mc_se

from labledger.errors import GateError, MetricInputError
from labledger.metrics.sweep import BoundGate, parse_bound_gate, proportion_bound, threshold_sweep
from labledger.schema.documents import SweepDoc

ALPHA = 0.05


def test_parse_bound_gates():
    g = parse_bound_gate(" lower ( recall[ cross_boundary ] ) >= 0.97 ")
    assert isinstance(g, BoundGate)
    assert (g.text, g.side, g.column, g.gate.column, g.op, g.bound) == (
        "lower(recall[cross_boundary])>=0.97",
        "lower",
        "lower(cross_boundary_recall)",
        "cross_boundary_recall",
        ">=",
        0.97,
    )
    u = parse_bound_gate("upper(precision[length=long])<0.5", alpha=0.1)
    assert (u.side, u.alpha, u.column) == ("upper", 0.1, "upper(precision[length=long])")
    assert parse_bound_gate("recall>=0.9").text == "recall>=0.9"  # a point gate stays one
    with pytest.raises(GateError, match=r"f1 has none"):
        parse_bound_gate("lower(f1)>=0.9")
    with pytest.raises(GateError, match="malformed"):
        parse_bound_gate("lower(recall>=0.9")
    with pytest.raises(MetricInputError, match="gate_alpha"):
        parse_bound_gate("lower(recall)>=0.9", alpha=0.5)


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (97, 100), (100, 100), (1164, 1200), (3, 7)])
def test_proportion_bound_is_clopper_pearson(k, n):
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * ALPHA, method="exact")
    assert proportion_bound([k], [n], ALPHA, "lower")[0] == pytest.approx(ci.low, abs=1e-12)
    assert proportion_bound([k], [n], ALPHA, "upper")[0] == pytest.approx(ci.high, abs=1e-12)


def test_no_trials_give_no_bound_and_fail_the_gate():
    assert np.isnan(proportion_bound([0], [0], ALPHA, "lower")[0])
    gold = ["n"] * 20 + ["p"] * 20
    score = [0.1] * 20 + [0.9] * 20
    # at 0.95 nothing is predicted positive: precision has no trials, so its bound gate fails
    r = threshold_sweep(gold=gold, score=score, positive="p", thresholds=[0.5, 0.95], gates=["lower(precision)>=0.5"])
    trials = r.to_dict()["threshold_trials"]
    assert trials[1]["lower(precision)"] is None and trials[1]["passed_gates"] is False
    assert trials[0]["passed_gates"] is True


def _digits_binary():
    """Digits 3 vs 8 (scikit-learn's load_digits), a logistic regression fitted on half, scored on
    the other half: gold labels 'three'/'eight' and score = P(eight)."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    x, y = x[keep] / 16.0, (y[keep] == 8).astype(int)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.5, random_state=0)
    model = LogisticRegression(C=0.05, max_iter=2000).fit(x_tr, y_tr)
    gold = np.where(y_te == 1, "eight", "three")
    return gold, model.predict_proba(x_te)[:, 1]


def test_bound_columns_point_columns_and_verdicts_side_by_side():
    gold, score = _digits_binary()
    r = threshold_sweep(
        gold=gold,
        score=score,
        positive="eight",
        thresholds="0.2:0.8:0.1",
        gates=["lower(recall[eight])>=0.9", "lower(recall[three])>=0.9"],
    )
    d = r.to_dict()
    msgspec.convert(d, SweepDoc)  # the report still fits its schema
    pos = gold == "eight"
    for t in d["threshold_trials"]:
        tp = int(np.count_nonzero(pos & (score >= t["threshold"])))
        assert t["eight_recall"] == tp / pos.sum()
        assert t["lower(eight_recall)"] == pytest.approx(
            stats.beta.ppf(ALPHA, tp, pos.sum() - tp + 1) if tp else 0.0, abs=1e-12
        )
        assert t["passed_gates"] is (t["lower(eight_recall)"] >= 0.9 and t["lower(three_recall)"] >= 0.9)
        assert t["passed_point_gates"] is (t["eight_recall"] >= 0.9 and t["three_recall"] >= 0.9)
    sel = d["threshold_selection"]
    v = sel["gates"]["lower(recall[eight])>=0.9"]
    assert set(v) == {"value", "passed", "point", "point_passed", "bound"}
    assert v["point"] == sel["eight_recall"] and v["value"] == sel["lower(eight_recall)"]
    assert sel["n_passing_point_gates"] >= sel["n_passing"]
    assert "Clopper-Pearson" in d["definition"]["lower(eight_recall)"]


def _labledger(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "labledger", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_cli_bound_gates_on_digits(tmp_path):
    gold, score = _digits_binary()
    path = tmp_path / "digits.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "task": "three_eight", "gold": str(g), "score": float(s), "positive": "eight"})
            + "\n"
            for i, (g, s) in enumerate(zip(gold, score))
        )
    )
    res = _labledger(
        "sweep", "digits.jsonl", "--positive", "eight", "--gate", "lower(recall[eight])>=0.9", "--json", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["gates"] == ["lower(recall[eight])>=0.9"]
    sel = doc["threshold_selection"]
    assert sel["gates"]["lower(recall[eight])>=0.9"]["point"] == sel["eight_recall"]
    table = _labledger(
        "sweep", "digits.jsonl", "--positive", "eight", "--gate", "lower(recall[eight])>=0.9", cwd=tmp_path
    )
    text = " ".join(table.stdout.split())
    assert table.returncode == 0 and "point value" in text and "Clopper-Pearson" in text
    bad = _labledger("sweep", "digits.jsonl", "--positive", "eight", "--gate", "lower(mcc)>0.5", cwd=tmp_path)
    assert bad.returncode == 1 and "mcc has none" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    usage = _labledger("sweep", "digits.jsonl", "--positive", "eight", "--gate-alpha", "0.7", cwd=tmp_path)
    assert usage.returncode == 2 and "--gate-alpha" in usage.stderr


def _pass_rate(r, n_pos, recall, gate, seed):
    """Share of ``r`` simulated validation sets (``n_pos`` positives whose true recall at threshold
    0.5 is ``recall``, as many negatives all below it) on which ``gate`` passes at 0.5."""
    rng = np.random.default_rng(seed)
    gold = np.array(["n"] * n_pos + ["p"] * n_pos)
    hits = 0
    for _ in range(r):
        hit = rng.random(n_pos) < recall
        score = np.concatenate([np.full(n_pos, 0.1), np.where(hit, 0.9, 0.2)])
        rep = threshold_sweep(gold=gold, score=score, positive="p", thresholds=[0.5], gates=[gate])
        hits += bool(rep.passed[0])
    return hits / r


@pytest.mark.slow
def test_bound_gate_type_i_error_on_the_gate_and_power():
    r = 1000  # MC se at 0.05: 0.0069
    on_gate = _pass_rate(r, 1000, 0.97, "lower(recall[p])>=0.97", seed=1)
    assert on_gate <= ALPHA + 3 * mc_se(ALPHA, r), on_gate
    point = _pass_rate(r, 1000, 0.97, "recall[p]>=0.97", seed=1)  # the same data sets
    assert point > 0.4, point  # the point gate passes about half the time on the gate
    upper = _pass_rate(r, 1000, 0.5, "upper(recall[p])<=0.5", seed=2)
    assert upper <= ALPHA + 3 * mc_se(ALPHA, r), upper
    power = _pass_rate(400, 1000, 0.985, "lower(recall[p])>=0.97", seed=3)
    assert power >= 0.8, power
