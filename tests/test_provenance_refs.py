"""Provenance names a run by its id: ``mlp-h128@2:val`` is another run once a new ``mlp-h128`` is
logged, so recipes, calibration reports and evaluations store ``mlp-h128:val (run <id>)``; documents
written before with the typed form are still read (issue #43, N16)."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

import labledger
import labledger.calibrate as cal
from labledger.cli import main


def _rows(n: int = 90, seed: int = 0) -> list[dict]:
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        gold = "yes" if i % 3 == 0 else "no"
        score = min(0.99, max(0.01, (0.7 if gold == "yes" else 0.35) + rng.uniform(-0.3, 0.3)))
        rows.append({"id": f"i{i}", "task": "hover", "gold": gold, "score": round(score, 4), "positive": "yes"})
    return rows


@pytest.fixture
def two_runs(tmp_path):
    """Two runs named mlp-h128, each with results 'val' (different scores)."""
    ledger = tmp_path / "ledger"
    ids = []
    for seed in (0, 1):
        data = tmp_path / f"val{seed}.jsonl"
        data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _rows(seed=seed)))
        with labledger.start_run("mlp-h128", ledger=ledger) as run:
            run.log_results("val", data)
        ids.append(run.id)
    return ledger, ids[0], ids[1]


def cli(ledger, *args):
    res = CliRunner().invoke(main, [*args, "--ledger", str(ledger)])
    assert res.exit_code == 0, res.output
    return res


def test_stored_sources_name_the_run_id(two_runs, tmp_path):
    ledger, older, newer = two_runs
    recipe = tmp_path / "rec.toml"
    res = cli(ledger, "calibrate", "fit", "mlp-h128@2:val", "--method", "temperature", "--out", str(recipe))
    assert f"Fitted on mlp-h128:val (run {older})" in " ".join(res.output.split())
    stored = cal.Recipe.load(recipe).tasks["hover"].fit["source"]
    assert stored == f"mlp-h128:val (run {older})"
    assert f'source = "mlp-h128:val (run {older})"' in recipe.read_text()

    report = cli(
        ledger, "calibrate", "report", "mlp-h128@2:val", "--recipe", str(recipe), "--resamples", "20", "--save", older
    )
    assert report.exit_code == 0
    doc = labledger.open_ledger(ledger).run(older).evaluation("val", kind="calibration")
    assert doc["source"] == f"mlp-h128:val (run {older})"

    cli(ledger, "eval", "mlp-h128:val", "--resamples", "20", "--save", f"{newer}:val-eval")
    assert labledger.open_ledger(ledger).run(newer).evaluation("val-eval")["source"] == f"mlp-h128:val (run {newer})"

    # a third mlp-h128: `@2` now means the newer run, but what was stored still names the older one
    with labledger.start_run("mlp-h128", ledger=ledger) as run:
        run.log_results("val", _rows(seed=2))
    book = labledger.open_ledger(ledger)
    assert book.resolve("mlp-h128@2") == newer
    assert cal.Recipe.load(recipe).tasks["hover"].fit["source"].endswith(f"(run {older})")

    # a run given by its whole id is stored as given
    res = cli(ledger, "eval", f"{older}:val", "--resamples", "0", "--json")
    assert orjson.loads(res.stdout)["source"] == f"{older}:val"


def test_documents_with_the_old_form_are_still_read(two_runs, tmp_path):
    """A recipe written before (``source = "mlp-h128@2:val"``) loads, applies and reports as it did."""
    ledger, older, _ = two_runs
    recipe = tmp_path / "rec.toml"
    cli(ledger, "calibrate", "fit", f"{older}:val", "--method", "temperature", "--out", str(recipe))
    text = recipe.read_text()
    old = "\n".join(ln for ln in text.splitlines() if not ln.startswith("id = "))  # the id hashes the source
    old = old.replace(f'source = "{older}:val"', 'source = "mlp-h128@2:val"')
    assert 'source = "mlp-h128@2:val"' in old
    legacy = tmp_path / "legacy.toml"
    legacy.write_text(old)
    loaded = cal.Recipe.load(legacy)
    assert loaded.tasks["hover"].fit["source"] == "mlp-h128@2:val"
    res = cli(
        ledger, "calibrate", "report", f"{older}:val", "--recipe", str(legacy), "--resamples", "0", "--format", "json"
    )
    doc = orjson.loads(res.stdout)
    assert any("mlp-h128@2:val" in str(t) for t in doc["tasks"].values())
