"""wandb.sweep / wandb.agent in labledger.wandb (#43): grid and random search in one process, each trial
a run in the sweep's group with the trial's parameters as its config."""

from __future__ import annotations

import json
import math

import pytest

import labledger
import labledger.wandb as wandb


@pytest.fixture(autouse=True)
def _no_open_run():
    yield
    if wandb.run is not None:
        wandb.finish()


def _runs(tmp_path):
    ledger = labledger.open_ledger(tmp_path / ".labledger")
    views = [ledger.run(info.id) for info in ledger.runs()]
    return sorted(views, key=lambda v: v.meta["wandb"]["sweep_trial"])


def test_grid_sweep_runs_every_combination_as_a_run_in_one_group(tmp_path):
    config = {
        "method": "grid",
        "name": "lr-grid",
        "metric": {"name": "loss", "goal": "minimize"},
        "parameters": {
            "lr": {"values": [0.1, 0.01]},
            "layers": {"distribution": "int_uniform", "min": 1, "max": 2},
            "opt": {"parameters": {"name": {"value": "sgd"}}},
        },
    }
    sweep_id = wandb.sweep(config, project="demo")
    seen = []

    def train():
        run = wandb.init(dir=str(tmp_path), config={"lr": 9.0, "batch": 8}, system_metrics=False)
        seen.append((run.sweep_id, dict(wandb.config.items())))
        wandb.log({"loss": wandb.config.lr * wandb.config.layers})
        # left open: the agent finishes it

    wandb.agent(sweep_id, function=train, count=3)
    wandb.agent(sweep_id, function=train)  # the rest of the grid
    assert [s for s, _ in seen] == [sweep_id] * 4
    assert [(c["lr"], c["layers"], c["batch"]) for _, c in seen] == [
        (0.1, 1, 8),
        (0.1, 2, 8),
        (0.01, 1, 8),
        (0.01, 2, 8),
    ]
    views = _runs(tmp_path)
    assert [v.group for v in views] == ["lr-grid"] * 4 and all(v.status == "finished" for v in views)
    assert [v.config["opt"] for v in views] == [{"name": "sgd"}] * 4
    assert [v.meta["wandb"]["sweep_id"] for v in views] == [sweep_id] * 4
    assert [v.meta["wandb"]["project"] for v in views] == ["demo"] * 4  # the sweep's project
    assert [r["loss"] for v in views for r in v.scalars()] == pytest.approx([0.1, 0.2, 0.01, 0.02])
    kept = json.loads((views[0].dir / "files" / "wandb-sweep.json").read_text())
    assert kept["params"] == {"lr": 0.1, "layers": 1, "opt": {"name": "sgd"}} and kept["sweep"]["name"] == "lr-grid"


def test_random_sweep_draws_from_each_distribution(tmp_path):
    config = {
        "method": "random",
        "parameters": {
            "lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
            "dropout": {"min": 0.0, "max": 0.5},
            "units": {"min": 16, "max": 64},
            "act": {"values": ["relu", "gelu"], "probabilities": [0.0, 1.0]},
            "wd": {"distribution": "q_uniform", "min": 0, "max": 10, "q": 5},
            "noise": {"distribution": "normal", "mu": 0.0, "sigma": 1.0},
        },
    }
    sweep_id = wandb.sweep(config)
    drawn = []

    def train():
        wandb.init(dir=str(tmp_path), system_metrics=False)
        drawn.append(dict(wandb.config.items()))

    wandb.agent(sweep_id, function=train, count=20)
    assert len(drawn) == 20 and len({d["lr"] for d in drawn}) == 20
    assert all(1e-4 <= d["lr"] <= 1e-1 and 0 <= d["dropout"] <= 0.5 for d in drawn)
    assert all(isinstance(d["units"], int) and 16 <= d["units"] <= 64 for d in drawn)
    assert {d["act"] for d in drawn} == {"gelu"} and {d["wd"] for d in drawn} <= {0, 5, 10}
    assert all(math.isfinite(d["noise"]) for d in drawn)
    assert {v.group for v in _runs(tmp_path)} == {f"sweep-{sweep_id}"}


def test_a_failing_trial_is_marked_failed_and_the_next_runs(tmp_path, caplog):
    sweep_id = wandb.sweep({"method": "grid", "parameters": {"x": {"values": [1, 2, 3]}}})

    def train():
        wandb.init(dir=str(tmp_path), system_metrics=False)
        wandb.log({"x": wandb.config.x})
        if wandb.config.x == 2:
            raise ValueError("diverged")

    with caplog.at_level("WARNING", logger="labledger.wandb"):
        wandb.agent(sweep_id, function=train)
    views = _runs(tmp_path)
    assert [v.status for v in views] == ["finished", "failed", "finished"]
    assert views[1].meta["error"] == "ValueError: diverged" and [r["x"] for r in views[1].scalars()] == [2]
    assert [r.getMessage() for r in caplog.records] == [
        f"labledger.wandb: sweep {sweep_id} trial 1 failed: ValueError: diverged"
    ]
    assert wandb.run is None


def test_sweep_configs_w_and_b_refuses_are_refused_with_what_to_do():
    with pytest.raises(wandb.Error, match="grid search needs 'values' for parameter 'lr'"):
        wandb.sweep({"method": "grid", "parameters": {"lr": {"min": 0.1, "max": 1.0}}})
    with pytest.raises(wandb.Error, match="use 'grid' or 'random'"):
        wandb.sweep({"method": "hyperband", "parameters": {"x": {"value": 1}}})
    with pytest.raises(wandb.Error, match="unknown distribution 'zipf'"):
        wandb.sweep({"method": "random", "parameters": {"x": {"distribution": "zipf", "min": 1, "max": 2}}})
    with pytest.raises(wandb.Error, match="non-empty dict"):
        wandb.sweep({"method": "random"})
    with pytest.raises(wandb.UnsupportedError, match="method 'random' or 'grid'"):
        wandb.sweep({"method": "bayes", "parameters": {"x": {"values": [1]}}})
    with pytest.raises(wandb.UnsupportedError, match="call wandb.sweep"):
        wandb.agent("abc123", function=lambda: None)
    sweep_id = wandb.sweep({"method": "grid", "parameters": {"x": {"values": [1]}}})
    with pytest.raises(wandb.UnsupportedError, match="pass function="):
        wandb.agent(sweep_id)
