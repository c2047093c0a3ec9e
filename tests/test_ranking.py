"""Rankings with rank intervals and the tie group of the best (#45): labledger.analysis.ranking and `labledger rank`."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from labledger.analysis.ranking import rank_results, rank_systems, true_ranks
from labledger.cli import main
from labledger.errors import ComparisonError, MetricInputError
from labledger.schema import RankingDoc, decode


def _correct(rng: np.random.Generator, p: list[float], n: int, shared: float = 0.5) -> np.ndarray:
    """(k, n) 0/1 correctness with exact per-system means ``p``: each item's uniform draw is shared
    by every system with probability ``shared`` (paired items), else each system draws its own."""
    k = len(p)
    common = rng.random(n)
    own = rng.random((k, n))
    u = np.where((rng.random(n) < shared)[None, :], common[None, :], own)
    return (u < np.asarray(p)[:, None]).astype(float)


def _clustered(rng: np.random.Generator, p: list[float], n: int, clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """0/1 correctness with a cluster effect shared by every system (items of a cluster correlate)."""
    g = rng.integers(0, clusters, n)
    eff = rng.normal(0, 0.15, clusters)[g]
    common, own = rng.random(n), rng.random((len(p), n))
    u = np.where((rng.random(n) < 0.5)[None, :], common[None, :], own)
    prob = np.clip(np.asarray(p)[:, None] + eff[None, :], 0, 1)
    return (u < prob).astype(float), g


def test_ranks_intervals_and_tie_group_by_definition():
    v = _correct(np.random.default_rng(3), [0.9, 0.6, 0.59, 0.3], 500)
    doc = rank_systems(v, names=["a", "b", "c", "d"], resamples=400, seed=1)
    by = {e.name: e for e in doc.systems}
    means = v.mean(axis=1)
    assert [by[x].value for x in "abcd"] == pytest.approx(means.tolist())
    assert [by[x].rank for x in "abcd"] == true_ranks(means.tolist())
    # a is above everyone, d below everyone, b and c not separated from each other
    assert sorted(map(tuple, doc.separated)) == [("a", "b"), ("a", "c"), ("a", "d"), ("b", "d"), ("c", "d")]
    assert [(by[x].rank_low, by[x].rank_high) for x in "abcd"] == [(1, 1), (2, 3), (2, 3), (4, 4)]
    assert doc.tie_group == ["a"] and [by[x].tied_with_best for x in "abcd"] == [True, False, False, False]
    assert doc.n == 500 and doc.clusters is None and doc.resamples == 400 and doc.alpha == 0.05 and doc.ci == 0.95
    assert "Romano & Wolf" in doc.adjustment and "paired bootstrap over items" in doc.method
    assert doc.critical is not None and 2 < doc.critical < 3.5
    assert decode(doc.to_json(), type=RankingDoc) == doc


def test_lower_is_better_clusters_and_no_resamples():
    rng = np.random.default_rng(5)
    loss = np.vstack([rng.normal(1.0, 1, 300), rng.normal(2.0, 1, 300)])
    doc = rank_systems(loss, names=["low", "high"], higher_is_better=False, groups=np.repeat(np.arange(60), 5))
    assert [e.rank for e in doc.systems] == [1, 2] and doc.tie_group == ["low"]
    assert doc.clusters == 60 and "cluster-robust" in doc.method and "over clusters" in doc.method
    flat = rank_systems(loss, names=["low", "high"], higher_is_better=False, resamples=0)
    assert flat.critical is None and flat.separated == [] and flat.tie_group == ["low", "high"]
    assert all((e.rank_low, e.rank_high) == (1, 2) for e in flat.systems)
    few = rank_systems(loss, groups=np.repeat(np.arange(10), 30), resamples=200)
    assert few.warning is not None and few.warning.startswith("10 clusters")


def test_identical_systems_are_never_separated():
    v = _correct(np.random.default_rng(0), [0.7, 0.7], 200)
    doc = rank_systems(np.vstack([v[0], v[0], v[1]]), names=["x", "x2", "y"], resamples=200)
    assert ["x", "x2"] not in doc.separated and ["x2", "x"] not in doc.separated
    by = {e.name: e for e in doc.systems}
    assert by["x"].rank == by["x2"].rank  # equal means share the better rank


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ([[1.0, 0.0]], {}, "k >= 2 systems"),
        ([[1.0, 0.0], [1.0, math.nan]], {}, "finite value"),
        ([[1.0, 0.0], [1.0, 1.0]], {"names": ["a"]}, "1 names for 2 systems"),
        ([[1.0, 0.0], [1.0, 1.0]], {"names": ["a", "a"]}, "distinct"),
        ([[1.0, 0.0], [1.0, 1.0]], {"alpha": 0.5}, "alpha"),
        ([[1.0, 0.0], [1.0, 1.0]], {"groups": [1, 1]}, "at least 2 clusters"),
        ([[1.0, 0.0], [1.0, 1.0]], {"groups": [1, 2, 3]}, "groups has shape"),
    ],
)
def test_refusals_are_one_line(args, kwargs, message):
    with pytest.raises(MetricInputError, match=message) as err:
        rank_systems(np.asarray(args), **kwargs)
    assert "\n" not in str(err.value)


def _rows(gold: list[str], pred: list[str], task: str = "t", ids: list[int] | None = None) -> list[dict]:
    ids = list(range(len(gold))) if ids is None else ids
    return [{"id": i, "task": task, "gold": g, "pred": p} for i, g, p in zip(ids, gold, pred)]


def test_rank_results_pairs_by_id_and_refuses_other_items_and_metrics():
    gold = ["a", "b"] * 50
    good = _rows(gold, gold)
    bad = _rows(gold, ["a"] * 100)
    shuffled = list(reversed(bad))  # the same ids in another order: paired by id
    doc = rank_results([good, shuffled], names=["good", "bad"], resamples=200)
    assert doc.metric == "accuracy" and doc.task == "t" and doc.n == 100
    assert [e.value for e in doc.systems] == [1.0, 0.5] and doc.separated == [["good", "bad"]]
    with pytest.raises(ComparisonError, match="same item ids"):
        rank_results([good, _rows(gold, gold, ids=list(range(1, 101)))], names=["a", "b"])
    with pytest.raises(MetricInputError, match="mean of per-item values"):
        rank_results([good, bad], names=["a", "b"], metric="f1:average=macro")
    with pytest.raises(MetricInputError, match="pass task="):
        rank_results([good + _rows(gold, gold, task="u"), bad + _rows(gold, gold, task="u")], names=["a", "b"])


@pytest.fixture(scope="module")
def digits_results(tmp_path_factory):
    """Three scikit-learn classifiers on load_digits' held-out 40%, as results.jsonl files."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB
    from sklearn.tree import DecisionTreeClassifier

    x, y = load_digits(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.4, random_state=0)
    out = tmp_path_factory.mktemp("digits")
    paths, acc = {}, {}
    models = {
        "logreg": LogisticRegression(max_iter=2000),
        "nb": GaussianNB(),
        "tree": DecisionTreeClassifier(random_state=0),
    }
    for name, model in models.items():
        pred = model.fit(xtr, ytr).predict(xte)
        acc[name] = float((pred == yte).mean())
        path = out / f"{name}.jsonl"
        path.write_text(
            "".join(
                json.dumps({"id": i, "task": "digits", "gold": str(g), "pred": str(p)}) + "\n"
                for i, (g, p) in enumerate(zip(yte, pred))
            )
        )
        paths[name] = str(path)
    return paths, acc


def test_cli_rank_on_digits(digits_results):
    paths, acc = digits_results
    names = ["logreg", "nb", "tree"]
    args = ["rank", *(paths[x] for x in names), *(a for x in names for a in ("--name", x))]
    res = CliRunner().invoke(main, [*args, "--json", "--resamples", "500"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["kind"] == "ranking" and doc["n"] == 719
    by = {e["name"]: e for e in doc["systems"]}
    assert {x: by[x]["value"] for x in names} == pytest.approx(acc)
    # logistic regression (0.957) is separated above both others; NB (0.823) and the tree (0.828) tie
    assert doc["tie_group"] == ["logreg"] and (by["logreg"]["rank_low"], by["logreg"]["rank_high"]) == (1, 1)
    assert (by["nb"]["rank_low"], by["nb"]["rank_high"]) == (by["tree"]["rank_low"], by["tree"]["rank_high"]) == (2, 3)
    shown = CliRunner().invoke(main, [*args, "--resamples", "500"])
    assert shown.exit_code == 0 and "Tie group of the best (1 of 3): logreg" in shown.output
    assert "[2, 3]" in shown.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["rank", "{logreg}"], 2, "at least two RESULTS"),
        (["rank", "{logreg}", "{nb}", "--name", "x"], 2, "--name given 1 times for 2 RESULTS"),
        (["rank", "{logreg}", "{nb}", "--metric", "f1:average=macro"], 1, "mean of per-item values"),
        (["rank", "{logreg}", "{nb}", "--alpha", "0.7"], 2, "--alpha"),
    ],
)
def test_cli_rank_errors(digits_results, args, code, message):
    paths, _ = digits_results
    res = CliRunner().invoke(main, [a.format(**paths) for a in args])
    assert res.exit_code == code and message in res.output


# -- simulation: family-wise error under k equal systems, joint coverage of the true ranks -----------
REPLICATES = 800
RESAMPLES = 400


def _bound(rate: float, reps: int) -> float:
    return 3 * math.sqrt(rate * (1 - rate) / reps)


@pytest.mark.simulation
@pytest.mark.slow
def test_simulated_family_wise_error_and_rank_coverage():
    rng = np.random.default_rng(2026)
    alpha = 0.05
    # null: 5 equal systems (p = 0.7) on 150 items; any separation is an error of "separable from the best"
    errors = sum(
        len(rank_systems(_correct(rng, [0.7] * 5, 150), resamples=RESAMPLES, seed=r).tie_group) != 5
        for r in range(REPLICATES)
    )
    assert errors / REPLICATES <= alpha + _bound(alpha, REPLICATES), errors / REPLICATES
    # the same with 40 clusters (items of a cluster correlate): clusters are resampled
    clustered = sum(len(_rank_clustered(rng, [0.7] * 4, r).tie_group) != 4 for r in range(REPLICATES // 2))
    assert clustered / (REPLICATES // 2) <= alpha + _bound(alpha, REPLICATES // 2), clustered / (REPLICATES // 2)
    # non-null: distinct means, two pairs close; every true rank inside its interval, jointly
    p = [0.75, 0.73, 0.68, 0.66, 0.58]
    truth = true_ranks(p)
    covered = 0
    separated = 0
    best_in_group = 0
    for r in range(REPLICATES):
        doc = rank_systems(_correct(rng, p, 300), resamples=RESAMPLES, seed=r)
        covered += all(e.rank_low <= t <= e.rank_high for e, t in zip(doc.systems, truth))
        separated += len(doc.separated)
        best_in_group += doc.systems[0].tied_with_best
    coverage = covered / REPLICATES
    assert coverage >= 0.95 - _bound(0.95, REPLICATES), coverage
    assert best_in_group / REPLICATES >= 0.95 - _bound(0.95, REPLICATES)
    # and the intervals are informative: of the 10 pairs, about half are separated on average
    assert separated / REPLICATES > 4.5, separated / REPLICATES
    # clustered non-null (4 systems, 40 clusters; the shared cluster effect keeps their order)
    p4 = [0.78, 0.74, 0.70, 0.62]
    truth4 = true_ranks(p4)
    reps = REPLICATES // 2
    docs = [_rank_clustered(rng, p4, r) for r in range(reps)]
    coverage4 = sum(all(e.rank_low <= t <= e.rank_high for e, t in zip(d.systems, truth4)) for d in docs) / reps
    assert coverage4 >= 0.95 - _bound(0.95, reps), coverage4
    assert sum(len(d.separated) for d in docs) / reps > 3, "4 of 6 pairs are separated on average"


def _rank_clustered(rng: np.random.Generator, p: list[float], seed: int) -> RankingDoc:
    v, g = _clustered(rng, p, 400, 40)
    return rank_systems(v, groups=g, resamples=RESAMPLES, seed=seed)


def test_table_ranks_from_stored_predictions(digits_results, tmp_path):
    paths, acc = digits_results
    ledger = str(tmp_path / "ledger")
    runner = CliRunner()
    for name in ("logreg", "nb", "tree"):
        assert runner.invoke(main, ["import", paths[name], "--name", name, "--ledger", ledger]).exit_code == 0
        saved = runner.invoke(
            main, ["eval", f"{name}:{name}", "--save", f"{name}:eval", "--model", name, "--ledger", ledger]
        )
        assert saved.exit_code == 0, saved.output
    res = runner.invoke(main, ["table", "--ranks", "--json", "--ledger", ledger])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    ranking = doc["rows"][0]["ranking"]
    assert ranking["kind"] == "ranking" and ranking["n"] == 719 and ranking["tie_group"] == ["logreg"]
    assert {e["name"]: (e["rank"], e["rank_low"], e["rank_high"]) for e in ranking["systems"]} == {
        "logreg": (1, 1, 1),
        "nb": (3, 2, 3),
        "tree": (2, 2, 3),
    }
    from labledger.schema import VersionTableDoc

    assert decode(res.output, type=VersionTableDoc).rows[0].ranking.tie_group == ["logreg"]
    shown = runner.invoke(main, ["table", "--ranks", "--ledger", ledger, "--format", "md"])
    row = next(line for line in shown.output.splitlines() if "digits" in line)
    assert re.search(r"\| 95.69 \[[0-9.]+, [0-9.]+\] #1 \[1–1\] ≈1 \|", row) and re.search(
        r"\| 82.34 \[[^]]+\] #3 \[2–3\] \|", row
    ), row
    plain = runner.invoke(main, ["table", "--json", "--ledger", ledger])
    assert "ranking" not in json.loads(plain.output)["rows"][0]  # only with --ranks
    # the hand-off report carries the same ranks with --ranks
    args = ["report", "--models", "logreg,nb,tree", "--suite", doc["suite"], "--variant", "raw", "--ledger", ledger]
    report = runner.invoke(main, [*args, "--ranks"])
    assert report.exit_code == 0, report.output
    line = next(x for x in report.output.splitlines() if x.startswith("|") and "digits" in x)
    assert "#1 [1–1] ≈1" in line and "#3 [2–3]" in line and "rank interval" in report.output
    assert "#1 [" not in runner.invoke(main, args).output


def test_the_site_comparisons_page_shows_the_ranks_and_the_tie_group(digits_results, tmp_path, browser):
    """The site's version table ranks each row as `table --ranks` does (the same document), the
    Comparisons page shows `#r [lo–hi]` and `≈1` in each cell, and a rebuild reuses the cached ranks."""
    from conftest import ARTIFACTS

    from labledger.site import build_site, load_data_file

    paths, _ = digits_results
    ledger = str(tmp_path / "ledger")
    runner = CliRunner()
    for name in ("logreg", "nb", "tree"):
        assert runner.invoke(main, ["import", paths[name], "--name", name, "--ledger", ledger]).exit_code == 0
        args = ["eval", f"{name}:{name}", "--save", f"{name}:eval", "--model", name, "--ledger", ledger]
        assert runner.invoke(main, args).exit_code == 0
    cli = json.loads(runner.invoke(main, ["table", "--ranks", "--json", "--ledger", ledger]).output)
    out = tmp_path / "site"
    build_site(ledger, out)
    _, payload = load_data_file(out / "data" / "compare.js")
    [table] = payload["tables"]
    assert table["rows"][0]["ranking"] == cli["rows"][0]["ranking"]
    assert "rank interval" in table["definition"]
    cached = json.loads((out / ".labledger-site.json").read_text())["paired_tests"].values()
    assert [c["ranking"]["tie_group"] for c in cached if "ranking" in c] == [["logreg"]]  # beside the paired tests
    from labledger.analysis import ranking

    calls = []
    real = ranking.rank_entries
    ranking.rank_entries = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        build_site(ledger, out)
    finally:
        ranking.rank_entries = real
    assert calls == []
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    try:
        page.goto((out / "compare.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")
        cells = page.locator("table.version-table tbody tr").first.locator("td.n")
        texts = cells.all_inner_texts()
        assert texts[0].endswith("#1 [1–1] ≈1") and texts[1].endswith("#3 [2–3]") and texts[2].endswith("#2 [2–3]")
        assert "not separable from the best" in cells.first.get_attribute("title")
        assert cells.first.get_attribute("class") == "n tie-best"
        (ARTIFACTS / "screenshots").mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "screenshots" / "compare-ranks.png"), full_page=True)
    finally:
        page.close()


def test_table_ranks_says_why_a_row_is_not_ranked(tmp_path):
    from labledger.analysis.benchmarks import version_table
    from labledger.analysis.ranking import rank_entries
    from labledger.schema import BenchmarkEntry

    entries = [
        BenchmarkEntry(model=m, suite="s", benchmark="b", metric="accuracy", value=v)
        for m, v in (("x", 0.6), ("y", 0.5))
    ]
    table = version_table(entries, suite="s", models=["x", "y"], ranker=rank_entries)
    assert "ranking" not in table.rows[0]
    assert "'b' is not ranked: no stored predictions for x, y" in table.warnings
