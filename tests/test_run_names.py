"""A run name is a label, not a key: the newest run of a name wins, with a note; ``name@K`` and ids are exact."""

from __future__ import annotations

import warnings

import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main
from labledger.errors import RunNameWarning, RunNotFoundError


def readme_training_run(ledger_dir, seed: int) -> str:
    """The README's training example (a tiny loop), as a user would run it."""
    rows = [{"id": f"x{i}", "task": "t", "gold": "a" if i % 2 else "b", "pred": "a"} for i in range(6)]
    with labledger.start_run(
        "mlp-h128",
        group="digits",
        tags=["baseline"],
        config={"lr": 3e-3, "hidden": 128, "seed": seed},
        ledger=ledger_dir,
    ) as run:
        for step in range(1, 4):
            run.log(step, loss=1.0 / step, lr=3e-3, grad_norm=0.5)
        run.log_results("test", rows)
    return run.id


@pytest.fixture
def twice(tmp_path, monkeypatch):
    d = tmp_path / ".labledger"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LABLEDGER_DIR", raising=False)
    first = readme_training_run(d, 1)
    second = readme_training_run(d, 2)
    return d, first, second


def test_readme_example_twice_library(twice):
    _, first, second = twice
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        view = labledger.open_ledger().run("mlp-h128")
        ev = labledger.evaluate(view.results_path("test"))
    assert view.id == second and view.config["seed"] == 2
    assert ev is not None
    notes = [str(w.message) for w in caught if issubclass(w.category, RunNameWarning)]
    assert notes and notes[0] == (
        f"2 runs named 'mlp-h128'; using the newest, {second}; `mlp-h128@2` is the one before"
    )


def test_name_at_k_and_ids_are_exact(twice):
    d, first, second = twice
    ledger = labledger.open_ledger(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these may warn
        assert ledger.resolve("mlp-h128@1") == second
        assert ledger.resolve("mlp-h128@2") == first
        assert ledger.resolve(first) == first
        assert ledger.resolve(first[:-2]) == first
    assert ledger.resolve_with_note("mlp-h128")[1].startswith("2 runs named 'mlp-h128'")
    with pytest.raises(RunNotFoundError, match=r"there are 2 runs named 'mlp-h128'"):
        ledger.resolve("mlp-h128@3")
    with pytest.raises(RunNotFoundError, match=r"No run 'mlp-h12'.*Did you mean 'mlp-h128'"):
        ledger.resolve("mlp-h12")
    # a prefix shared by both ids is not a name: it asks for more of the id
    common = "".join(a for a, b in zip(first, second) if a == b)[:8]
    with pytest.raises(RunNotFoundError, match="give more of the id"):
        ledger.resolve(common)


def test_readme_example_twice_cli(twice):
    d, first, second = twice
    res = CliRunner().invoke(main, ["show", "mlp-h128"])
    assert res.exit_code == 0, res.output
    assert second in res.stdout and first not in res.stdout
    assert res.stderr.count("2 runs named 'mlp-h128'") == 1
    assert "`mlp-h128@2` is the one before" in res.stderr
    res = CliRunner().invoke(main, ["show", "mlp-h128@2", "--json"])
    assert res.exit_code == 0 and first in res.stdout and "runs named" not in res.stderr
    res = CliRunner().invoke(main, ["eval", "mlp-h128:test", "--metric", "accuracy", "--json"])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("runs named 'mlp-h128'") == 1
