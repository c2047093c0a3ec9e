"""The data-mixture audit catches seed 001's bug A: temperature-scaled sampling starving a dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import labledger
import labledger.analysis.mixture
from labledger.analysis.mixture import audit_counts
from labledger.cli import main

# Seed 001: row counts of the fine-tuning datasets it names, and an intended mixture in which the
# small, hard CLadder set gets 26.5% of the training examples.
SIZES = {
    "fmt-acos-calibrated": 6_175,
    "fmt-home-sim-hard": 27_850,
    "fmt-contractnli-dual": 14_672,
    "fmt-hover-multihop": 15_329,
    "fmt-when2call-aligned": 7_995,
    "fmt-cladder-hard": 3_362,
    "fmt-nli4ct-aligned": 1_688,
    "fmt-ragtruth-aligned": 9_059,
    "fmt-hellaswag": 5_000,
    "anchor-replay": 10_260,
}
OTHERS = [k for k in SIZES if k != "fmt-cladder-hard"]
INTENDED = {"fmt-cladder-hard": 0.265, **{k: 0.735 / len(OTHERS) for k in OTHERS}}


def temperature_probs(intended, sizes, temperature):
    """The buggy sampler: P(dataset) proportional to weight * size**temperature (seed 001, bug A)."""
    raw = {k: intended[k] * sizes[k] ** temperature for k in intended}
    z = sum(raw.values())
    return {k: v / z for k, v in raw.items()}


def log_training(ledger, probs, *, steps=400, seed=0, mixture=INTENDED):
    rng = np.random.default_rng(seed)
    names = list(probs)
    p = np.array([probs[k] for k in names])
    with labledger.start_run("mix", config={"mixture": mixture, "mix_temperature": 0.5}, ledger=ledger) as run:
        mb = 0
        for step in range(1, steps + 1):
            for _ in range(4):  # gradient accumulation 4
                mb += 1
                picks = rng.choice(len(names), size=16, p=p)
                run.log_batch(
                    {
                        "microbatch": mb,
                        "optimizer_step": step,
                        "loss": 1.0,
                        "samples": [{"dataset": names[i], "input": "x"} for i in picks],
                    }
                )
    return run.id


def test_seed_001_bug_a_is_caught(tmp_path):
    # Find the temperature at which the buggy sampler delivers CLadder's 26.5% as 3.0% (seed 001).
    lo, hi = 0.0, 3.0
    for _ in range(60):
        mid = (lo + hi) / 2
        share = temperature_probs(INTENDED, SIZES, mid)["fmt-cladder-hard"]
        lo, hi = (mid, hi) if share > 0.03 else (lo, mid)
    probs = temperature_probs(INTENDED, SIZES, lo)
    assert probs["fmt-cladder-hard"] == pytest.approx(0.030, abs=1e-6)
    run_id = log_training(tmp_path, probs)
    audit = labledger.analysis.mixture.audit_run(labledger.open_ledger(tmp_path).run(run_id))
    cladder = next(r for r in audit.rows if r["dataset"] == "fmt-cladder-hard")
    assert cladder["intended_share"] == pytest.approx(0.265)
    assert cladder["actual_share"] == pytest.approx(0.030, abs=0.006)  # 25,600 samples drawn
    assert cladder["flagged"] and "fmt-cladder-hard" in audit.flagged
    assert audit.examples == 400 * 4 * 16
    # the cumulative share series ends at the actual share
    assert audit.series["share"]["fmt-cladder-hard"][-1] == pytest.approx(cladder["actual_share"])
    # CLI: table, JSON, and --strict exit code 3
    res = CliRunner().invoke(main, ["mixture", run_id, "--ledger", str(tmp_path)])
    assert res.exit_code == 0 and "fmt-cladder-hard" in res.output and "OFF" in res.output
    res = CliRunner().invoke(main, ["mixture", run_id, "--ledger", str(tmp_path), "--json"])
    assert "fmt-cladder-hard" in json.loads(res.stdout)["flagged"]
    res = CliRunner().invoke(main, ["mixture", run_id, "--ledger", str(tmp_path), "--strict"])
    assert res.exit_code == 3


def test_the_fix_passes(tmp_path):
    # mix_temperature = 0: the weights alone control the budget, as seed 001's fix does.
    probs = temperature_probs(INTENDED, SIZES, 0.0)
    run_id = log_training(tmp_path, probs, seed=1)
    audit = labledger.analysis.mixture.audit_run(labledger.open_ledger(tmp_path).run(run_id))
    assert audit.flagged == []


def test_unexpected_and_missing_datasets_are_flagged():
    batches = [{"microbatch": 1, "optimizer_step": 1, "samples": [{"source": "a"}, {"source": "z"}]}]
    audit = audit_counts({"a": 1, "b": 1}, batches)
    flags = {r["dataset"]: r["flagged"] for r in audit.rows}
    # a: 50% actual vs 50% intended -> ok; b never seen; z not intended
    assert flags == {"a": False, "b": True, "z": True}
    assert audit.field_used == "source"


def test_run_without_mixture_is_a_clear_error(tmp_path):
    with labledger.start_run("nomix", ledger=tmp_path) as run:
        run.log(1, loss=1.0)
    res = CliRunner().invoke(main, ["mixture", run.id, "--ledger", str(tmp_path)])
    assert res.exit_code == 1 and "declares no mixture" in res.output


# -- class balance (#15) ------------------------------------------------------------------------
def _balance_run(ledger_dir, *, forced: bool, config: dict | None = None):
    """HoVer 79:21 and ContractNLI 69:31 naturally; seed 001's loader bug trained them 50:50."""
    import labledger

    def samples(name, yes, no):
        return [{"dataset": name, "gold": "yes"}] * yes + [{"dataset": name, "gold": "no"}] * no

    hover = samples("hover", 50, 50) if forced else samples("hover", 79, 21)
    nli = samples("contractnli", 69, 31)
    with labledger.start_run("balance", ledger=ledger_dir, config=config or {}) as run:
        run.log_batch({"microbatch": 1, "samples": hover + nli})
    return run


def test_class_balance_catches_a_forced_50_50(tmp_path):
    import labledger
    from labledger.analysis.mixture import audit_run_balance

    natural = {"hover": {"yes": 79, "no": 21}, "contractnli": {"yes": 0.69, "no": 0.31}}
    run = _balance_run(tmp_path, forced=True, config={"class_distribution": natural})
    audit = audit_run_balance(labledger.open_ledger(tmp_path).run(run.id))
    assert audit.forced == ["hover"] and audit.flagged == ["hover"]
    row = next(r for r in audit.rows if r["dataset"] == "hover" and r["label"] == "yes")
    assert row["trained_share"] == 0.5 and abs(row["natural_share"] - 0.79) < 1e-12
    ok = _balance_run(tmp_path / "ok", forced=False, config={"class_distribution": natural})
    assert audit_run_balance(labledger.open_ledger(tmp_path / "ok").run(ok.id)).flagged == []


def test_mixture_cli_class_balance_from_a_natural_results_file(tmp_path):
    import json

    from click.testing import CliRunner

    from labledger.cli import main

    run = _balance_run(tmp_path / "l", forced=True)
    natural = tmp_path / "natural.jsonl"
    rows = [
        {"id": f"h{i}", "task": "hover", "gold": "yes" if i < 79 else "no", "probs": {"yes": 1.0, "no": 0.0}}
        for i in range(100)
    ]
    natural.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["mixture", run.id, "--natural", str(natural), "--ledger", str(tmp_path / "l")]
    res = CliRunner().invoke(main, [*args, "--strict"])
    assert res.exit_code == 3, res.output
    assert "FORCED 50:50" in res.output and "hover" in res.output
    doc = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    assert doc["class_balance"]["forced_uniform"] == ["hover"]
    res = CliRunner().invoke(main, ["mixture", run.id, "--ledger", str(tmp_path / "l")])
    assert res.exit_code == 1 and "no class distribution" in res.output
