"""The noise floor of a setup (`labledger noise`, #45): seeds x items decomposition, A/A interval, MDE."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from sklearn.metrics import accuracy_score

import labledger
from labledger.analysis.noise import noise_floor, seed_noise
from labledger.cli import main
from labledger.errors import MetricInputError


def _setup_scores(rng, k, n, seed_sd=0.3, item_sd=1.5):
    """(k x n) 0/1 scores: item difficulty on the logit scale, a per-seed shift, Bernoulli draws."""
    item = rng.normal(1.5, item_sd, n)
    shift = rng.normal(0, seed_sd, k)
    p = 1 / (1 + np.exp(-(item[None, :] + shift[:, None])))
    return (rng.random((k, n)) < p).astype(float), item


def test_the_decomposition_matches_the_expected_mean_squares_by_hand():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 40)) + rng.normal(0, 2, 40)[None, :] + rng.normal(0, 0.5, 5)[:, None]
    r = seed_noise(x)
    k, n = x.shape
    grand = x.mean()
    ss_seed = n * sum((x[s].mean() - grand) ** 2 for s in range(k))
    ss_item = k * sum((x[:, i].mean() - grand) ** 2 for i in range(n))
    ss_res = sum((x[s, i] - x[s].mean() - x[:, i].mean() + grand) ** 2 for s in range(k) for i in range(n))
    ms_seed, ms_item, ms_res = ss_seed / (k - 1), ss_item / (n - 1), ss_res / ((k - 1) * (n - 1))
    assert r["components"]["seed"] == pytest.approx((ms_seed - ms_res) / n)
    assert r["components"]["item"] == pytest.approx((ms_item - ms_res) / k)
    assert r["components"]["seed_x_item"] == pytest.approx(ms_res)
    sd = np.std(x.mean(axis=1), ddof=1)
    assert r["seed_sd"]["value"] == pytest.approx(sd)
    assert r["aa"]["half_width"] == pytest.approx(stats.t.ppf(0.975, k - 1) * sd * np.sqrt(2))
    lo, hi = (np.sqrt((k - 1) * sd**2 / stats.chi2.ppf(q, k - 1)) for q in (0.975, 0.025))
    assert (r["seed_sd"]["low"], r["seed_sd"]["high"]) == pytest.approx((lo, hi))
    factor = stats.t.ppf(0.975, k - 1) + stats.t.ppf(0.8, k - 1)
    assert r["mde"]["by_seeds"][3] == pytest.approx(factor * sd * np.sqrt(2 / 3))
    assert sum(r["shares"].values()) == pytest.approx(1.0)


def test_two_or_three_seeds_give_estimates_and_no_interval():
    rng = np.random.default_rng(1)
    for k in (2, 3):
        r = seed_noise(_setup_scores(rng, k, 200)[0])
        assert r["seed_sd"]["value"] > 0 and r["aa"]["half_width"] is None and r["seed_sd"]["low"] is None
        assert f"{k} seeds give {k - 1} degree" in r["warning"]


@pytest.mark.simulation
def test_the_aa_interval_covers_two_new_runs_at_its_level():
    """Two fresh seeds of the same setup differ by less than the A/A half-width in ~95% of setups."""
    rng = np.random.default_rng(2)
    hits = 0
    reps = 1500
    for _ in range(reps):
        scores, item = _setup_scores(rng, 7, 300)
        half = seed_noise(scores)["aa"]["half_width"]
        shift = rng.normal(0, 0.3, 2)
        p = 1 / (1 + np.exp(-(item[None, :] + shift[:, None])))
        a, b = (rng.random((2, len(item))) < p).mean(axis=1)
        hits += abs(a - b) <= half
    assert 0.93 <= hits / reps <= 0.97


def _group(root, rng, seeds, *, lr=lambda s: 0.1, group="seeds"):
    gold = rng.integers(0, 3, 300)
    hard = rng.random(300)
    accs = []
    for s in seeds:
        wrong = rng.random(300) < (0.15 + 0.3 * hard + rng.normal(0, 0.03))
        pred = np.where(wrong, (gold + 1) % 3, gold)
        rows = [
            {"id": f"q{i}", "task": "digits", "gold": "abc"[g], "pred": "abc"[p]}
            for i, (g, p) in enumerate(zip(gold, pred))
        ]
        with labledger.start_run(f"r{s}", group=group, config={"lr": lr(s), "seed": s}, ledger=root) as run:
            run.log_results("test", rows)
        accs.append(accuracy_score(gold, pred))
    return accs


def test_noise_command_on_a_seed_group(tmp_path):
    rng = np.random.default_rng(3)
    accs = _group(tmp_path, rng, range(6))
    r = CliRunner().invoke(main, ["noise", "seeds", "--metric", "accuracy", "--ledger", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["n_seeds"] == 6 and doc["n_items"] == 300 and doc["seed_keys"] == ["seed"]
    assert doc["value"] == pytest.approx(np.mean(accs)) and doc["seed_sd"]["value"] == pytest.approx(
        np.std(accs, ddof=1)
    )
    assert sorted(x["value"] for x in doc["runs"]) == pytest.approx(sorted(accs))
    text = CliRunner().invoke(main, ["noise", "seeds", "--metric", "accuracy", "--ledger", str(tmp_path)])
    assert text.exit_code == 0 and "A/A interval" in text.output and "6 seeds x 300 items" in text.output
    api = noise_floor(labledger.open_ledger(tmp_path), "seeds", metric="accuracy")
    assert api.result["aa"]["half_width"] == pytest.approx(doc["aa"]["half_width"])


def test_runs_that_differ_in_more_than_seeds_are_refused(tmp_path):
    rng = np.random.default_rng(4)
    _group(tmp_path, rng, range(4), lr=lambda s: 0.1 * (s + 1))
    args = ["noise", "seeds", "--metric", "accuracy", "--ledger", str(tmp_path)]
    r = CliRunner().invoke(main, args)
    assert (
        r.exit_code == 1 and "differ in lr, not only in seeds" in r.output and len(r.output.strip().splitlines()) == 1
    )
    ok = CliRunner().invoke(main, [*args, "--seed-key", "seed", "--seed-key", "lr", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.output)["seed_keys"] == ["lr", "seed"]
    bad = CliRunner().invoke(
        main, [*args[:2], "--metric", "roc_auc", "--ledger", str(tmp_path), "--seed-key", "lr", "--seed-key", "seed"]
    )
    assert bad.exit_code == 1 and "results 'test': metric 'roc_auc'" in bad.output and len(bad.output.splitlines()) == 1


def test_compare_groups_gives_no_interval_on_two_recorded_seeds_and_names_non_seed_differences(tmp_path):
    """Seed 003's complaint: accuracy 0.9549 [0.7320, 1.1777] from a 2-run group whose runs differed in
    hidden size and lr."""
    from labledger.analysis.groups import compare_groups

    for group, vals in (("base", (0.90, 0.91, 0.92, 0.905)), ("new", (0.97, 0.94))):
        for k, v in enumerate(vals):
            cfg = {"hidden": 64 * (k + 1), "lr": 0.1} if group == "new" else {"seed": k}
            with labledger.start_run(f"{group}{k}", group=group, config=cfg, ledger=tmp_path) as run:
                run.log_history({"accuracy": v})
    res = compare_groups(labledger.open_ledger(tmp_path), baseline="base", groups=["new"], metrics=["accuracy"])
    by = {s["group"]: s for s in res.summary}
    assert by["base"]["interval"]["low"] is not None  # 4 seeds carry a t interval
    assert by["new"]["interval"]["low"] is None and by["new"]["diff_interval"]["low"] is None
    assert any("2 seeds cannot support a t interval" in w for w in res.warnings)
    assert any("group 'new' differ in hidden, not only in seeds" in w for w in res.warnings)
    assert not any("group 'base' differ" in w for w in res.warnings)


def test_compare_groups_never_prints_an_interval_past_the_metrics_range(tmp_path):
    """Four recorded accuracies near 1: the t interval over them reaches past 1.0; it is cut at the
    range and marked (the JSON says so in the interval's note)."""
    from labledger.analysis.groups import compare_groups
    from labledger.metrics.stats import seed_t_interval

    vals = (0.999, 0.96, 1.0, 0.995)
    for group, shift in (("base", 0.0), ("new", -0.05)):
        for k, v in enumerate(vals):
            with labledger.start_run(f"{group}{k}", group=group, config={"seed": k}, ledger=tmp_path) as run:
                run.log_history({"accuracy": v + shift})
    assert seed_t_interval(vals)["high"] > 1.0  # what the interval was
    res = compare_groups(labledger.open_ledger(tmp_path), baseline="base", groups=["new"], metrics=["accuracy"])
    by = {s["group"]: s for s in res.summary}
    assert by["base"]["interval"]["high"] == 1.0 and "cut at the metric's range" in by["base"]["interval"]["note"]
    assert by["new"]["interval"]["high"] < 1.0 and "note" not in by["new"]["interval"]
    r = CliRunner().invoke(
        main,
        ["compare-groups", "--baseline", "base", "--group", "new", "--metric", "accuracy", "--ledger", str(tmp_path)],
    )
    assert r.exit_code == 0 and "1.0000]†" in r.output and "† cut at the metric's range" in r.output


def test_repeats_add_a_level_that_matches_the_expected_mean_squares():
    """(seeds x items x repeats): the crossed design with replication, by hand."""
    rng = np.random.default_rng(5)
    k, n, r = 4, 30, 3
    x = (
        rng.normal(0, 0.5, k)[:, None, None]
        + rng.normal(0, 2, n)[None, :, None]
        + rng.normal(0, 0.7, (k, n))[:, :, None]
        + rng.normal(0, 1.0, (k, n, r))
    )
    out = seed_noise(x)
    cells = x.mean(axis=2)
    g = cells.mean()
    ms_seed = n * r * np.var(cells.mean(axis=1), ddof=1)
    ms_item = k * r * np.var(cells.mean(axis=0), ddof=1)
    resid = cells - cells.mean(axis=1)[:, None] - cells.mean(axis=0)[None, :] + g
    ms_int = r * (resid**2).sum() / ((k - 1) * (n - 1))
    ms_err = ((x - cells[:, :, None]) ** 2).sum() / (k * n * (r - 1))
    c = out["components"]
    assert c["repeat"] == pytest.approx(ms_err)
    assert c["seed_x_item"] == pytest.approx(max(0, (ms_int - ms_err) / r))
    assert c["seed"] == pytest.approx(max(0, (ms_seed - ms_int) / (n * r)))
    assert c["item"] == pytest.approx((ms_item - ms_int) / (k * r))
    assert out["seed_sd"]["value"] == pytest.approx(np.std(x.mean(axis=(1, 2)), ddof=1))
    # one repeat is the two-way table: the same numbers as before
    flat = seed_noise(x[:, :, :1])
    assert "repeat" not in flat["components"] and flat["n_repeats"] == 1
    assert flat["components"] == seed_noise(x[:, :, 0])["components"]


def test_noise_command_on_runs_with_epochs(tmp_path):
    """inspect-style rows (each item scored in 3 epochs per run, stored as one row with the mean as
    ``pred`` and the epochs' scores in ``epochs``): the run's value is its mean over items and epochs,
    and the noise floor shows the repeat share; a results file that repeats ids by ``epoch`` reads the
    same matrix, and one lacking an epoch is one line."""
    from labledger.analysis.noise import item_repeat_scores

    rng = np.random.default_rng(6)
    p = rng.uniform(0.3, 0.95, 120)
    means = []
    for s in range(5):
        right = (rng.random((120, 3)) < p[:, None]).astype(float)
        rows = [
            {"id": f"q{i}", "task": "qa", "gold": 1.0, "pred": float(right[i].mean()), "epochs": right[i].tolist()}
            for i in range(120)
        ]
        with labledger.start_run(f"e{s}", group="epochs", config={"seed": s}, ledger=tmp_path) as run:
            run.log_results("test", rows)
        means.append(right.mean())
    args = ["noise", "epochs", "--metric", "mean", "--ledger", str(tmp_path)]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["n_repeats"] == 3 and doc["n_items"] == 120 and "repeat" in doc["shares"]
    assert sorted(x["value"] for x in doc["runs"]) == pytest.approx(sorted(means))
    text = CliRunner().invoke(main, args)
    assert "5 seeds x 120 items x 3 repeats" in text.output and "repeat" in text.output
    # the same scores as rows that repeat ids by epoch, in a file
    flat = [
        {"id": f"q{i}", "task": "qa", "gold": "y", "pred": "y" if right[i, e] else "n", "epoch": e + 1}
        for i in range(120)
        for e in range(3)
    ]
    path = tmp_path / "epochs.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in flat))
    ids, matrix, _ = item_repeat_scores(path, "exact_match", None)
    assert matrix.shape == (120, 3) and matrix[ids.index("q7")].tolist() == right[7].tolist()
    path.write_text("".join(json.dumps(x) + "\n" for x in flat[:-1]))
    with pytest.raises(MetricInputError, match="item 'q119' lacks a repeat"):
        item_repeat_scores(path, "exact_match", None)


@pytest.mark.simulation
def test_the_aa_interval_covers_two_new_runs_with_repeats():
    """With 3 sampled answers per item per run, the A/A interval still covers two new runs at its level."""
    rng = np.random.default_rng(7)
    hits, reps = 0, 2000
    for _ in range(reps):
        item = rng.normal(1.0, 1.5, 200)
        shift = rng.normal(0, 0.3, 7)
        p = 1 / (1 + np.exp(-(item[None, :] + shift[:, None])))
        x = (rng.random((7, 200, 3)) < p[:, :, None]).astype(float)
        half = seed_noise(x[:5])["aa"]["half_width"]
        a, b = x[5].mean(), x[6].mean()
        hits += abs(a - b) <= half
    print(f"coverage {hits / reps:.3f}")
    assert 0.93 <= hits / reps <= 0.97
