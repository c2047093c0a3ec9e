"""The cost-quality frontier (`labledger frontier`, #45): values, dominance, paired steps, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from labledger.analysis.evaluation import compare
from labledger.analysis.frontier import cost_frontier
from labledger.cli import main
from labledger.errors import MetricInputError


def _rows(rng, right, price, tokens, n=300):
    out = []
    for i in range(n):
        toks = int(rng.gamma(4.0, tokens / 4.0)) + 1
        ok = rng.random() < right
        out.append(
            {
                "id": f"q{i}",
                "task": "qa",
                "gold": "A",
                "pred": "A" if ok else "B",
                "cost": toks * price,
                "group": f"p{i // 3}",
            }
        )
    return out


@pytest.fixture(scope="module")
def systems(tmp_path_factory):
    d = tmp_path_factory.mktemp("frontier")
    spec = {"cheap": (0.6, 1e-7, 300), "mid": (0.8, 4e-7, 300), "old": (0.65, 5e-7, 400), "big": (0.82, 2e-6, 300)}
    paths = {}
    for k, (name, (right, price, tokens)) in enumerate(spec.items()):
        rows = _rows(np.random.default_rng(k), right, price, tokens)
        paths[name] = d / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


def test_values_frontier_and_pairs(systems):
    names = list(systems)
    doc = cost_frontier([systems[n] for n in names], names=names, metric="exact_match", cost="mean_cost", resamples=300)
    for s in doc["systems"]:
        rows = [json.loads(x) for x in systems[s["name"]].read_text().splitlines()]
        assert s["quality"]["value"] == pytest.approx(np.mean([r["pred"] == r["gold"] for r in rows]))
        assert s["cost"]["value"] == pytest.approx(np.mean([r["cost"] for r in rows]))
        assert s["cost"]["ci_low"] < s["cost"]["value"] < s["cost"]["ci_high"]
    by = {s["name"]: s for s in doc["systems"]}
    # the frontier by hand: not dominated on (higher quality, lower cost)
    pts = {n: (by[n]["quality"]["value"], by[n]["cost"]["value"]) for n in names}
    hand = [
        n
        for n in names
        if not any((pts[o][0] >= pts[n][0] and pts[o][1] <= pts[n][1]) and pts[o] != pts[n] for o in names if o != n)
    ]
    assert sorted(doc["frontier"]) == sorted(hand) == ["big", "cheap", "mid"]
    assert doc["frontier"] == sorted(hand, key=lambda n: pts[n][1])
    assert by["old"]["dominated_by"] == "mid" and by["old"]["clearly_dominated"]
    # each pair is compare's paired difference, second minus first
    step = doc["steps"][0]
    ref = compare(systems["mid"], systems["cheap"], metrics=["exact_match", "mean_cost"], resamples=300, adjust="none")
    assert step["from"] == "cheap" and step["to"] == "mid"
    for axis, m in (("quality", "exact_match"), ("cost", "mean_cost")):
        r = ref.metric("qa", m)
        assert (step[axis]["diff"], step[axis]["ci_low"], step[axis]["ci_high"]) == pytest.approx(
            (r.diff, r.ci_low, r.ci_high)
        )


def test_the_cli_prints_small_costs_with_significant_digits(systems):
    args = ["frontier", *(str(systems[n]) for n in systems), *(a for n in systems for a in ("--name", n))]
    r = CliRunner().invoke(main, [*args, "--metric", "exact_match", "--resamples", "200"])
    assert r.exit_code == 0, r.output
    assert "frontier: cheap -> mid -> big" in r.output and "no: mid (clearly)" in r.output
    assert "0.00003099 │ [0.00002959, 0.00003282]" in r.output  # a cost of ~$0.00003 keeps 4 significant digits
    j = json.loads(CliRunner().invoke(main, [*args, "--metric", "exact_match", "--resamples", "200", "--json"]).stdout)
    assert j["kind"] == "frontier" and j["frontier"] == ["cheap", "mid", "big"]


@pytest.mark.parametrize(
    ("extra", "code", "text"),
    [
        (["--cost", "mean_latency_ms"], 1, "latency_ms"),
        (["--name", "x"], 2, "--name given 1 times for 2 RESULTS"),
    ],
)
def test_bad_input_is_one_line(systems, extra, code, text):
    r = CliRunner().invoke(main, ["frontier", str(systems["cheap"]), str(systems["mid"]), *extra])
    assert r.exit_code == code and text in r.output and "Traceback" not in r.output


def test_one_system_is_refused(systems):
    assert CliRunner().invoke(main, ["frontier", str(systems["cheap"])]).exit_code == 2
    with pytest.raises(MetricInputError, match="at least two"):
        cost_frontier([systems["cheap"]])
