"""`labledger report`: the hand-off, assembled from the ledger."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SEEDS

import labledger
import labledger.analysis.checkpoints
from labledger.cli import main

SEED_001 = SEEDS / "001_90666e8fb933fee6.txt"


def _rows(rng, n, shift, prefix):
    rows = []
    for i in range(n):
        gold = ["neg", "neu", "pos"][rng.integers(0, 3)]
        raw = rng.dirichlet([1, 1, 1]) * 0.5
        raw[["neg", "neu", "pos"].index(gold)] += shift
        p = raw / raw.sum()
        rows.append(
            {
                "id": f"{prefix}{i}",
                "task": "finentity",
                "gold": gold,
                "probs": {"neg": float(p[0]), "neu": float(p[1]), "pos": float(p[2])},
            }
        )
    return rows


@pytest.mark.skipif(not SEED_001.exists(), reason="../shared/seeds is not beside the repo")
def test_handoff_has_every_section(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    from labledger.demo.calibration import calibrate_runs

    ledger_dir = tmp_path / "ledger"
    args = [
        "table",
        "import",
        str(SEED_001),
        "--suite",
        "public",
        "--ledger",
        str(ledger_dir),
        "--column",
        "Base=base",
        "--column",
        "V3 Raw=v3",
        "--column",
        "V4 Raw=v4",
        "--category-suite",
        "미공개 일반화 평가=heldout",
    ]
    assert CliRunner().invoke(main, args).exit_code == 0
    rng = np.random.default_rng(0)
    paths = []
    for i, name in enumerate(("base", "v3")):
        p = tmp_path / f"{name}.safetensors"
        safetensors_torch.save_file({"w": torch.full((4,), float(i))}, str(p))
        paths.append(p)
    with labledger.start_run(
        "v4",
        config={
            "mixture": {"a": 0.5, "b": 0.5},
            "interpretation_limit": "synthetic smoke test, not a product gate",
            "product_validation": False,
        },
        ledger=ledger_dir,
    ) as run:
        run.log_batch({"microbatch": 1, "samples": [{"dataset": "a"}] * 15 + [{"dataset": "b"}]})
        run.log_results("val", _rows(rng, 300, 0.15, "val"))
        run.log_results("test", _rows(rng, 300, 0.15, "test"))
        run.log_checkpoint(paths[1], step=10)
        run.note("trained on 2 GPUs")
    calibrate_runs(labledger.open_ledger(ledger_dir), [run.id], fit_on="val", report_on="test", resamples=100)
    labledger.analysis.checkpoints.soup(
        paths, [0.3, 0.7], tmp_path / "soup.safetensors", ledger=ledger_dir, name="v4-soup"
    )
    out = tmp_path / "HANDOFF.md"
    res = CliRunner().invoke(
        main, ["report", "--models", "base,v3,v4", "--suite", "public", "--out", str(out), "--ledger", str(ledger_dir)]
    )
    assert res.exit_code == 0, res.output
    text = out.read_text()
    for needle in (
        "## Version table: `public`",
        "Mean (16 benchmarks) | 62.69 | 66.74 | 68.21",
        "## Held-out / other suite: `heldout`",
        "## Calibration recipes",
        "temperature",
        "held out",
        "## Metric definitions",
        "`f1[average=macro]`: F1 = 2 tp",
        "## Trajectory",
        "```mermaid\nflowchart TD",
        "## Checkpoints",
        "**Soup `v4-soup`**",
        "## Files and assets",
        "| result set | v4 |",
        "| 0.3 |",
        "## Data-mixture audits",
        "**OFF**",
        "interpretation_limit**: synthetic smoke test",
        "product_validation**: False",
        "note: trained on 2 GPUs",
    ):
        assert needle in text, needle
    order = [text.index(h) for h in ("## Trajectory", "## Calibration recipes", "## Files and assets")]
    assert order == sorted(order)  # seed 001's order: trajectory (§4), calibration (§5), assets (§6)
    res = CliRunner().invoke(main, ["report", "--models", "nobody", "--ledger", str(ledger_dir)])
    assert res.exit_code == 1 and "no benchmark entries for nobody" in res.output
    res = CliRunner().invoke(main, ["report", "--ledger", str(ledger_dir)])
    assert res.exit_code == 2
