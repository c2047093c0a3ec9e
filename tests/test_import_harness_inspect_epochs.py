"""inspect_ai: every epoch's output is kept (#44), from a real inspect log.

inspect_ai's ``mockllm/model`` answers each call in turn (tests/harness_runs/inspect_forms_run.py:
``yes`` three calls in four, ``no`` the fourth), so the two epochs of a sample differ; the stored
row holds each epoch's output and answer in epoch order, as inspect's own reader gives them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness_process import run_harness

from labledger import open_ledger
from labledger.importers import import_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inspect_epochs")
    run_harness("inspect_forms_run.py", root, package="inspect_ai")
    (out,) = (root / "eval").glob("*.eval")
    return out


def test_every_epochs_output_and_answer_kept_in_epoch_order(log, tmp_path):
    from inspect_ai.log import read_eval_log

    own = read_eval_log(str(log))
    outputs: dict[str, dict[int, str]] = {}
    answers: dict[str, dict[int, object]] = {}
    for s in own.samples or []:
        if s.error is None:
            outputs.setdefault(str(s.id), {})[s.epoch] = s.output.completion
            answers.setdefault(str(s.id), {})[s.epoch] = s.scores["includes"].answer
    assert any(len(set(e.values())) > 1 for e in outputs.values())  # the epochs differ: the test tells them apart
    (run,) = import_path(log, tmp_path / "ledger").runs
    with open_ledger(tmp_path / "ledger") as book:
        path = book.run(run.id).results_path("forms-qa")
        rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows
    for r in rows:
        want = outputs[r["id"]]
        assert r["prediction"] == [want[k] for k in sorted(want)], r["id"]
        if r["task"].startswith("includes"):
            assert r["answer"] == [answers[r["id"]][k] for k in sorted(want)]
        assert len(r["epochs"]) == len(r["prediction"]) == 2
