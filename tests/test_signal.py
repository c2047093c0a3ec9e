"""Which benchmarks tell checkpoints apart (`labledger signal`, #45): SNR, monotonicity, adjacent steps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from sklearn.metrics import accuracy_score

import labledger
from labledger.analysis.evaluation import compare, evaluate
from labledger.analysis.signal import checkpoint_signal
from labledger.cli import main
from labledger.errors import MetricInputError


def _sets(k=5, n=400, seed=0):
    """k checkpoints: 'rising' improves 0.55 -> 0.85 (the same items get right), 'flat' stays at 0.7."""
    rng = np.random.default_rng(seed)
    u = rng.random((2, n))
    out = []
    for c in range(k):
        p = 0.55 + 0.3 * c / (k - 1)
        rows = [
            {"id": i, "task": "rising", "gold": "y", "pred": "y" if u[0, i] < p else "n", "group": i // 4}
            for i in range(n)
        ]
        rows += [{"id": i, "task": "flat", "gold": "y", "pred": "y" if rng.random() < 0.7 else "n"} for i in range(n)]
        out.append(rows)
    return out


def test_signal_noise_and_tau_by_hand():
    sets = _sets()
    doc = checkpoint_signal(sets, names=[f"c{k}" for k in range(5)], resamples=400)
    by = {t["task"]: t for t in doc["tasks"]}
    for task, t in by.items():
        values = [
            accuracy_score([r["gold"] for r in s if r["task"] == task], [r["pred"] for r in s if r["task"] == task])
            for s in sets
        ]
        assert [p["value"] for p in t["checkpoints"]] == pytest.approx(values)
        assert t["signal"] == pytest.approx(np.std(values, ddof=1))
        z = stats.norm.ppf(0.975)
        ses = [(p["ci_high"] - p["ci_low"]) / (2 * z) for p in t["checkpoints"]]
        assert t["noise"] == pytest.approx(np.sqrt(np.mean(np.square(ses))))
        assert t["snr"] == pytest.approx(t["signal"] / t["noise"])
        assert t["monotonicity"]["tau"] == pytest.approx(stats.kendalltau(range(5), values)[0])
        ev = evaluate(sets[2], metrics=["exact_match"], task=task, resamples=400)
        assert (t["checkpoints"][2]["ci_low"], t["checkpoints"][2]["ci_high"]) == pytest.approx(
            (ev.metric(task, "exact_match").ci_low, ev.metric(task, "exact_match").ci_high)
        )
    assert by["rising"]["snr"] > 3 and by["rising"]["monotonicity"]["tau"] == pytest.approx(1.0)
    assert by["rising"]["separable_steps"] >= 3 and by["flat"]["separable_steps"] == 0
    step = by["rising"]["adjacent"][0]
    ref = compare(sets[1], sets[0], metrics=["exact_match"], task="rising", resamples=400, adjust="none")
    assert step["diff"] == pytest.approx(ref.metric("rising", "exact_match").diff)


def test_lower_is_better_metrics_sign_the_tau():
    def rows(k):
        return [{"id": i, "task": "r", "gold": 1.0, "pred": 1.0 + (3 - k) * 0.1 + 0.01 * (i % 7)} for i in range(100)]

    doc = checkpoint_signal([rows(k) for k in range(4)], metric="mae", resamples=200)
    assert doc["tasks"][0]["monotonicity"]["tau"] == pytest.approx(1.0)  # the error falls at every checkpoint: better


def test_the_cli_expands_a_pattern_in_natural_order(tmp_path):
    ledger = tmp_path / "ledger"
    with labledger.start_run("train", ledger=ledger) as run:
        for k, rows in zip((1, 2, 10, 3, 4), _sets(5), strict=True):
            run.log_results(f"val-{k}", rows)
    r = CliRunner().invoke(main, ["signal", "train:val-*", "--ledger", str(ledger), "--resamples", "200", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["checkpoints"] == [f"train:val-{k}" for k in (1, 2, 3, 4, 10)]
    text = CliRunner().invoke(
        main, ["signal", "train:val-*", "--ledger", str(ledger), "--resamples", "200", "--task", "rising"]
    )
    assert text.exit_code == 0 and "rising steps:" in text.output and "flat" not in text.output
    bad = CliRunner().invoke(main, ["signal", "train:test-*", "--ledger", str(ledger)])
    assert bad.exit_code == 1 and "val-1" in bad.output and "Traceback" not in bad.output


def test_too_few_checkpoints_and_unknown_tasks_are_refused():
    sets = _sets(3)
    with pytest.raises(MetricInputError, match="at least 3 checkpoints"):
        checkpoint_signal(sets[:2])
    with pytest.raises(MetricInputError, match="the checkpoints share: rising, flat"):
        checkpoint_signal(sets, task="nope")
