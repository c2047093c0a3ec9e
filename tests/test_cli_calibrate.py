"""`labledger calibrate fit|apply|report`: tables of (arguments, exit code, expected output), the same
numbers through the CLI and the API, recipes and reports stored in the ledger, and the site."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

import labledger
import labledger.calibrate as cal
from labledger.cli import main

LABELS = ("Negative", "Neutral", "Positive")


def _rows(n: int = 300, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    gold = rng.choice(3, size=n, p=(0.25, 0.5, 0.25))
    z = np.eye(3)[gold] * 1.5 + rng.normal(size=(n, 3))
    z[:, 1] -= 0.6  # Neutral under-predicted
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    rows = [
        {
            "id": f"f{i}",
            "task": "fin",
            "gold": LABELS[g],
            "probs": dict(zip(LABELS, p[i].tolist())),
            "logits": dict(zip(LABELS, z[i].tolist())),
            "group": f"doc{i // 3}",
            "slices": {"split": "dev" if (i // 3) % 2 else "test"},
        }
        for i, g in enumerate(gold.tolist())
    ]
    rows += [
        {
            "id": i,
            "task": "hover",
            "gold": "yes" if i % 3 == 0 else "no",
            "score": round(0.3 + 0.25 * (i % 3 == 0) + 0.02 * (i % 7), 4),
            "positive": "yes",
            "slices": {"split": "dev" if i % 2 else "test"},
        }
        for i in range(120)
    ]
    return rows


@pytest.fixture
def env(tmp_path):
    data = tmp_path / "results.jsonl"
    data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _rows()))
    ledger = tmp_path / "ledger"
    with labledger.start_run("fin-model", ledger=ledger) as run:
        run.log_results("test", data)
    recipe = tmp_path / "recipe.toml"
    cal.fit(data, task="fin", method="prior_multiplier", fit_split="split=dev").save(recipe)
    calibrated = tmp_path / "calibrated.jsonl"
    cal.apply(data, recipe, calibrated, keep_other_tasks=True)
    bad = tmp_path / "bad.toml"
    bad.write_text('[tasks.fin]\nmethod = "threshold"\npositive = "Neutral"\ntau = "high"\n')
    return {
        "data": str(data),
        "ledger": str(ledger),
        "run": run.id,
        "recipe": str(recipe),
        "bad": str(bad),
        "calibrated": str(calibrated),
        "tmp": str(tmp_path),
    }


CASES = [
    (
        [
            "fit",
            "{data}",
            "--task",
            "fin",
            "--method",
            "prior_multiplier",
            "--fit-split",
            "split=dev",
            "--out",
            "{tmp}/r1.toml",
        ],
        0,
        [
            "Fitted on {data}",
            "prior_multiplier (weights=",
            "(split=dev)",
            "Wrote {tmp}/r1.toml (recipe ",
            "; tasks: fin)",
        ],
    ),
    (
        [
            "fit",
            "{data}",
            "--task",
            "hover",
            "--method",
            "threshold",
            "--crossfit",
            "4",
            "--grid",
            "0.2:0.8:0.05",
            "--out",
            "{tmp}/r2.toml",
        ],
        0,
        ["threshold (positive=yes, tau=", "f1[average=binary,pos_label=yes"],
    ),
    (
        [
            "fit",
            "{data}",
            "--task",
            "fin",
            "--method",
            "temperature,prior_multiplier",
            "--grid",
            "Neutral=0.5:3:0.1",
            "--grid",
            "1@0.1:10",
            "--out",
            "{tmp}/r3.toml",
        ],
        0,
        ["temperature (T=", "then prior_multiplier", "Fitted on every item"],
    ),
    (
        ["fit", "{data}", "--task", "fin", "--method", "temprature", "--out", "{tmp}/x.toml"],
        1,
        ["Error: Unknown calibration method 'temprature'. Did you mean 'temperature'?"],
    ),
    (
        ["fit", "{data}", "--task", "fin", "--method", "temperature", "--out", "{recipe}"],
        1,
        ["Error: {recipe} exists; pass --merge", "--force"],
    ),
    (
        ["fit", "{data}", "--task", "nope", "--method", "temperature", "--out", "{tmp}/x.toml"],
        1,
        ["Error: Unknown task in {data} 'nope'. Known: fin, hover."],
    ),
    (
        [
            "fit",
            "{data}",
            "--task",
            "fin",
            "--method",
            "temperature",
            "--fit-split",
            "split=dev",
            "--crossfit",
            "3",
            "--out",
            "{tmp}/x.toml",
        ],
        2,
        ["--fit-split and --crossfit are exclusive"],
    ),
    (
        ["fit", "{data}", "--task", "fin", "--method", "temperature", "--fit-split", "dev", "--out", "{tmp}/x.toml"],
        2,
        ["Invalid value for --fit-split: 'dev' must look like FIELD=VALUE"],
    ),
    (["fit", "{data}", "--task", "fin", "--method", "temperature"], 2, ["Missing option '--out'"]),
    (
        ["fit", "{data}", "--task", "fin", "--method", "temperature", "--crossfit", "1", "--out", "{tmp}/x.toml"],
        2,
        ["Invalid value for '--crossfit'"],
    ),
    (
        ["fit", "{data}", "--task", "fin", "--method", "threshold", "--out", "{tmp}/x.toml"],
        1,
        ["Error: task 'fin': threshold needs the positive label"],
    ),
    (
        ["apply", "{data}", "--recipe", "{recipe}", "--out", "{tmp}/c.jsonl"],
        1,
        ["task(s) 'hover' that recipe", "--keep-other-tasks"],
    ),
    (
        ["apply", "{data}", "--recipe", "{recipe}", "--out", "{tmp}/c.jsonl", "--keep-other-tasks"],
        0,
        ["Wrote {tmp}/c.jsonl: 420 rows", "fin: 300 rows calibrated", "hover: 120 rows copied unchanged"],
    ),
    (
        ["apply", "{calibrated}", "--recipe", "{recipe}", "--out", "{tmp}/c2.jsonl", "--keep-other-tasks"],
        1,
        ["Error: {calibrated}:1: field 'calibrated' is already there", "already calibrated"],
    ),
    (
        ["apply", "{data}", "--recipe", "{bad}", "--out", "{tmp}/c.jsonl"],
        1,
        ["Error: {bad}: key 'tasks.fin.tau' must be a number; got 'high'"],
    ),
    (["apply", "{data}", "--recipe", "{tmp}/none.toml", "--out", "{tmp}/c.jsonl"], 1, ["no such recipe file"]),
    (
        ["report", "{data}", "--recipe", "{recipe}", "--resamples", "100"],
        0,
        [
            "# Calibration: {data}",
            "| fin | prior_multiplier",
            "held out (fitted on split=dev of this file",
            "ECE (equal-width)",
            "15 equal-width and 15 equal-mass bins",
        ],
    ),
    (
        ["report", "{data}", "--recipe", "{recipe}", "--task", "hover", "--resamples", "0"],
        1,
        ["does not calibrate task 'hover'"],
    ),
    (["report", "{data}", "--recipe", "{recipe}", "--format", "xml"], 2, ["Invalid value for '--format'"]),
]


@pytest.mark.parametrize("args, code, expected", CASES, ids=[" ".join(c[0][:5]) for c in CASES])
def test_cli_table(env, args, code, expected):
    result = CliRunner().invoke(main, ["calibrate"] + [a.format(**env) for a in args])
    assert result.exit_code == code, result.output
    for text in expected:
        assert text.format(**env) in result.output, result.output


def test_split_recipe_gives_the_same_numbers_through_the_cli_and_the_api(env, tmp_path):
    """Fit on split=dev, apply to the file, report on split=test: CLI and API agree to the last bit."""
    runner = CliRunner()
    out = tmp_path / "cli.toml"
    r = runner.invoke(
        main,
        [
            "calibrate",
            "fit",
            env["data"],
            "--task",
            "fin",
            "--method",
            "prior_multiplier",
            "--fit-split",
            "split=dev",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    api = cal.fit(env["data"], task="fin", method="prior_multiplier", fit_split="split=dev")
    cli = cal.load_recipe(out)
    assert json.loads(r.stdout)["recipe"]["id"] == cli.id == api.id
    r = runner.invoke(main, ["calibrate", "report", env["data"], "--recipe", str(out), "--json", "--resamples", "200"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rep = cal.report(env["data"], api, resamples=200)
    assert doc["table"] == json.loads(json.dumps(rep.to_dict()["table"]))
    assert doc["tasks"]["fin"]["n"] == 150 and doc["tasks"]["fin"]["in_sample"] == "no"
    r = runner.invoke(
        main,
        [
            "calibrate",
            "apply",
            env["data"],
            "--recipe",
            str(out),
            "--out",
            str(tmp_path / "c.jsonl"),
            "--keep-other-tasks",
            "--json",
        ],
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["tasks"]["fin"]["n"] == 300
    rs = cal.calibrated_results(tmp_path / "c.jsonl")
    fin = rs["fin"]
    test = fin.subset(fin.slices["split"] == "test")
    ev = labledger.evaluate(
        labledger.inputs.results.ResultSet({"fin": test}), metrics=["accuracy", "brier"], resamples=0
    )
    assert ev.value("fin", "accuracy") == rep.value("fin", "accuracy") == doc["table"][0]["calibrated"]
    assert ev.value("fin", "brier") == pytest.approx(rep.value("fin", "brier"), abs=1e-15)


def test_run_results_recipes_and_reports_live_in_the_ledger(env, tmp_path):
    runner = CliRunner()
    run, ledger = env["run"], env["ledger"]
    r = runner.invoke(
        main,
        [
            "calibrate",
            "fit",
            f"{run}:test",
            "--task",
            "fin",
            "--method",
            "temperature",
            "--crossfit",
            "3",
            "--out",
            str(tmp_path / "t.toml"),
            "--save",
            run,
            "--ledger",
            ledger,
        ],
    )
    assert r.exit_code == 0, r.output
    assert f"Stored in run {run}" in r.output
    r = runner.invoke(
        main,
        [
            "calibrate",
            "report",
            f"{run}:test",
            "--recipe",
            f"{run}:calibration",
            "--save",
            run,
            "--resamples",
            "50",
            "--ledger",
            ledger,
        ],
    )
    assert r.exit_code == 0, r.output
    assert "fitted on the evaluated items (optimistic)" in r.output and "cross-fitted (honest)" in r.output
    book = labledger.open_ledger(ledger)
    kinds = {(e["name"], e["kind"]) for e in book.evaluations(run)}
    assert {("calibration", "recipe"), ("test", "calibration")} <= kinds
    stored = book.run(run).evaluation("test", kind="calibration")
    recipe = book.run(run).evaluation("calibration", kind="recipe")
    assert stored["recipe_id"] == recipe["id"] and recipe["tasks"]["fin"]["fit"]["source"] == f"{run}:test"
    indexed = {(v["slice"], v["metric"]) for v in book.metric_values(run)}
    assert ("variant=cross-fitted", "log_loss") in indexed and ("", "log_loss Δ (cross-fitted − raw)") in indexed
    r = runner.invoke(
        main,
        [
            "calibrate",
            "apply",
            f"{run}:test",
            "--recipe",
            f"{run}:calibration",
            "--out",
            str(tmp_path / "c.jsonl"),
            "--keep-other-tasks",
            "--ledger",
            ledger,
        ],
    )
    assert r.exit_code == 0, r.output
    from labledger.site import build_site

    build_site(book, tmp_path / "site", runs=[run])
    page = (tmp_path / "site" / "data" / "evals" / run / "test.js").read_text()
    assert '"kind":"calibration"' in page and '"raw":{' in page and '"calibrated":{' in page
    assert '"reliability":{"bins":[' in page
    book.close()
