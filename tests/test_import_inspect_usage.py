"""inspect_ai: each sample's tokens, cost and latency carried into the result rows (#45), from a real log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness_process import run_harness

from labledger import open_ledger
from labledger.cli import main
from labledger.importers import import_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inspect_usage")
    run_harness("inspect_usage_run.py", root, package="inspect_ai")
    (out,) = (root / "logs").glob("*.eval")
    return out


def test_usage_is_the_mean_over_a_samples_epochs_as_inspect_reports_it(log, tmp_path):
    from inspect_ai.log import read_eval_log

    own = read_eval_log(str(log))
    want: dict[str, list[tuple[float, float, float, float]]] = {}
    for s in own.samples or []:
        (u,) = s.model_usage.values()
        want.setdefault(str(s.id), []).append((u.input_tokens, u.output_tokens, u.total_cost, s.working_time * 1000))
    ledger = tmp_path / "ledger"
    (run,) = import_path(log, ledger).runs
    with open_ledger(ledger) as book:
        view = book.run(run.id)
        (name,) = view.results_names()
        rows = [json.loads(x) for x in view.results_path(name).read_text().splitlines()]
    assert len(rows) == 4
    for r in rows:
        per = want[r["id"]]
        assert len(per) == 2
        for j, field in enumerate(("tokens_in", "tokens_out", "cost", "latency_ms")):
            assert r[field] == pytest.approx(sum(p[j] for p in per) / 2), (r["id"], field)
    # the usage metrics read them: mean cost per question over the 4 questions
    res = CliRunner().invoke(
        main,
        [
            "eval",
            f"{run.id}:{name}",
            "--metric",
            "mean_cost",
            "--metric",
            "mean_tokens_out",
            "--json",
            "--ledger",
            str(ledger),
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (task,) = doc["tasks"].values()
    got = {m["metric"] + str(m["params"]): m["value"] for m in task["metrics"]}
    mean_cost = sum(sum(p[2] for p in per) / 2 for per in want.values()) / 4
    assert any(v == pytest.approx(mean_cost) for v in got.values()), got
