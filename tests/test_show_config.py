"""`labledger show` keeps a long config readable: sections without recorded defaults that have more
than 30 keys are one row with their count, long texts are cut, and --all-config lists everything."""

from __future__ import annotations

from click.testing import CliRunner

import labledger
from labledger.cli import main


def test_a_long_section_is_counted_and_all_config_lists_it(tmp_path):
    d = tmp_path / "ledger"
    config = {
        "lr": 0.1,
        "small": {"a": 1, "b": {"c": 2}},
        "big": {f"k{i}": i for i in range(40)},
        "prose": "word " * 60,
    }
    with labledger.start_run("r", config=config, ledger=d) as run:
        run.log(1, loss=0.5)
    env = {"COLUMNS": "120"}
    res = CliRunner().invoke(main, ["show", run.id, "--ledger", str(d)], env=env)
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.output.splitlines() if ln.startswith("│")]
    assert any("lr" in ln and "0.1" in ln for ln in rows)
    assert any("small.b.c" in ln for ln in rows)  # a small section is listed whole
    assert any("big " in ln and "40 keys" in ln for ln in rows) and "big.k0" not in res.output
    assert "(300 characters)" in res.output
    assert (
        res.output.splitlines()[-1]
        == f"(41 config values not listed or cut: labledger show {run.id} --all-config lists them all)"
    )

    full = CliRunner().invoke(main, ["show", run.id, "--all-config", "--ledger", str(d)], env=env)
    assert full.exit_code == 0
    assert all(f"big.k{i} " in full.output for i in range(40)) and "not listed" not in full.output
    assert "characters)" not in full.output


def test_a_short_config_is_shown_as_before(tmp_path):
    d = tmp_path / "ledger"
    with labledger.start_run("r", config={"lr": 0.1, "opt": {"name": "adam"}}, ledger=d) as run:
        pass
    res = CliRunner().invoke(main, ["show", run.id, "--ledger", str(d)], env={"COLUMNS": "100"})
    assert res.exit_code == 0 and "opt.name" in res.output and "adam" in res.output
    assert "not listed" not in res.output
