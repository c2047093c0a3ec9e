"""Contamination (`labledger contamination`, #45): eval items found among a run's training samples."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score

import labledger
from labledger.analysis.contamination import contamination, find_overlap, split_metric, words
from labledger.cli import main
from labledger.inputs.results import results_from_rows

VOCAB = [f"w{i}" for i in range(400)]


def _naive(train, items, n, min_share=None):
    """The reference by hand: sets of word tuples."""
    train_words = [words(t) for t in train]
    whole = {tuple(w) for w in train_words}
    grams = {tuple(w[i : i + n]) for w in train_words for i in range(len(w) - n + 1)}
    exact, share = [], []
    for it in items:
        w = words(it)
        exact.append(bool(w) and tuple(w) in whole)
        own = {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}
        share.append(len(own & grams) / len(own) if own else float("nan"))
    over = [e or (s == s and s > 0 and (min_share is None or s >= min_share)) for e, s in zip(exact, share)]
    return exact, share, over


texts = st.lists(st.sampled_from(["a", "b", "c", "d", "A", "b!", "c,"]), min_size=0, max_size=12).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(
    train=st.lists(texts, max_size=15),
    items=st.lists(texts, min_size=1, max_size=12),
    n=st.integers(1, 4),
    chunk=st.integers(1, 5),
    min_share=st.sampled_from([None, 0.5, 1.0]),
)
def test_overlap_equals_the_naive_sets(train, items, n, chunk, min_share):
    ov = find_overlap(iter(train), items, ngram=n, min_share=min_share, chunk=chunk)
    exact, share, over = _naive(train, items, n, min_share)
    assert ov.exact.tolist() == exact
    np.testing.assert_allclose(ov.share, share, equal_nan=True)
    assert ov.overlapping.tolist() == over
    assert ov.train_samples == len(train)
    # the first training sample that matched: it holds the item or one of its n-grams
    for i in np.flatnonzero(ov.overlapping):
        w, t = words(items[i]), words(train[ov.first[i]])
        found = w == t or any(
            w[j : j + n] == t[k : k + n] for j in range(len(w) - n + 1) for k in range(len(t) - n + 1)
        )
        assert found and all(
            not (
                w == words(x)
                or any(
                    w[j : j + n] == words(x)[k : k + n]
                    for j in range(len(w) - n + 1)
                    for k in range(len(words(x)) - n + 1)
                )
            )
            for x in train[: ov.first[i]]
        )


def test_normalisation_and_non_text_values():
    assert words("Ｆｕｌｌ-width  ＴＥＸＴ, punctuation!") == ["full", "width", "text", "punctuation"]
    ov = find_overlap([{"q": "What is 2+2?"}, 17], ["what is 2 2", "17", 17, None], ngram=13)
    assert ov.exact.tolist() == [True, True, True, False] and ov.short == 4


def _prompt(rng, k=20):
    return " ".join(VOCAB[j] for j in rng.integers(0, len(VOCAB), k))


@pytest.fixture(scope="module")
def contaminated(tmp_path_factory):
    """A run whose 3,000 training samples hold 40 eval prompts verbatim (case and punctuation
    changed) and 30 inside longer texts; a model right on 95% of those and 60% of the rest."""
    root = tmp_path_factory.mktemp("contam") / "ledger"
    rng = np.random.default_rng(7)
    prompts = [_prompt(rng) for _ in range(400)]
    copied, embedded = set(range(40)), set(range(40, 70))
    train = [_prompt(rng, 30) for _ in range(3000)]
    for i in copied:
        train[int(rng.integers(0, 3000))] = prompts[i].upper() + "?"
    for i in embedded:
        j = int(rng.integers(0, 3000))
        train[j] = train[j] + " " + " ".join(prompts[i].split()[2:17]) + " tail"
    with labledger.start_run("pretrain", ledger=root) as run:
        for b in range(0, 3000, 100):
            samples = [
                {"input": {"text": t}, "gold": "a", "probabilities": {"a": 0.5, "b": 0.5}} for t in train[b : b + 100]
            ]
            run.log_batch({"microbatch": b // 100 + 1, "loss": 0.5, "samples": samples})
    rows = []
    for i, p in enumerate(prompts):
        right = rng.random() < (0.95 if i in copied | embedded else 0.6)
        rows.append(
            {
                "id": f"q{i}",
                "task": "qa",
                "gold": "yes",
                "pred": "yes" if right else "no",
                "prompt": p,
                "group": f"d{i // 3}",
            }
        )
    with labledger.start_run("eval", ledger=root) as run:
        run.log_results("test", rows)
    return root, rows, copied | embedded


def test_the_planted_items_are_found_and_the_metric_is_split(contaminated):
    root, rows, planted = contaminated
    res = contamination(labledger.open_ledger(root), "pretrain", "eval:test", train_field="input.text", resamples=500)
    doc = res.to_dict()
    found = {int(x["id"][1:]) for x in doc["items"]}
    assert found == planted and doc["n_exact"] == 40 and doc["train_samples"] == 3000
    assert all(x["share"] >= 15 / 20 - 13 / 20 for x in doc["items"])  # 15 shared words: 3 of 8 13-grams
    over = np.array([int(r["id"][1:]) in planted for r in rows])
    right = np.array([r["pred"] == r["gold"] for r in rows])
    y = np.ones(len(rows))
    assert doc["clean"]["value"] == pytest.approx(accuracy_score(y[~over], right[~over]))
    assert doc["overlapping"]["value"] == pytest.approx(accuracy_score(y[over], right[over]))
    d = doc["difference"]
    assert d["diff"] == pytest.approx(doc["overlapping"]["value"] - doc["clean"]["value"])
    assert d["ci_low"] > 0 and d["p_value"] < 0.01 and d["method"].startswith("unpaired")
    assert doc["clean"]["n"] + doc["overlapping"]["n"] == 400
    assert any(w.startswith("1 cluster(s) have items on both sides") for w in doc["warnings"])


def test_a_stricter_share_counts_fewer_items(contaminated):
    root, _, _ = contaminated
    book = labledger.open_ledger(root)
    loose = contamination(book, "pretrain", "eval:test", train_field="input.text", resamples=0).to_dict()
    strict = contamination(book, "pretrain", "eval:test", train_field="input.text", min_share=1.0, resamples=0)
    assert strict.to_dict()["n_overlapping"] == 40 < loose["n_overlapping"] == 70


def test_the_cli_prints_the_split_and_the_json(contaminated):
    root, _, _ = contaminated
    r = CliRunner().invoke(
        main, ["contamination", "pretrain", "--eval", "eval:test", "--ledger", str(root), "--train-field", "input.text"]
    )
    assert r.exit_code == 0, r.output
    assert "overlapping: 70 of 400 items (17.5%; exact 40, any n-gram)" in r.output
    assert "overlapping - clean" in r.output and "first training sample" in r.output
    j = CliRunner().invoke(
        main,
        [
            "contamination",
            "pretrain",
            "--eval",
            "eval:test",
            "--ledger",
            str(root),
            "--train-field",
            "input.text",
            "--json",
        ],
    )
    doc = json.loads(j.stdout)
    assert doc["n_overlapping"] == 70 and doc["ngram"] == 13 and len(doc["items"]) == 70


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (
            ["pretrain", "--eval", "eval:test", "--train-field", "nosuch"],
            1,
            "none of its 3000 training samples has a value in field 'nosuch'",
        ),
        (["eval", "--eval", "eval:test"], 1, "logged no training samples"),
        (["pretrain", "--eval", "eval:test", "--eval-field", "nosuch"], 1, "has no field 'nosuch' (it has: id, prompt"),
        (["pretrain", "--eval", "eval:nope"], 1, "nope"),
        (["pretrain", "--eval", "eval:test", "--min-share", "0"], 2, "--min-share"),
        (["pretrain", "--eval", "eval:test", "--ngram", "0"], 2, "--ngram"),
    ],
)
def test_bad_arguments_are_one_line(contaminated, args, code, text):
    root, _, _ = contaminated
    r = CliRunner().invoke(main, ["contamination", *args, "--ledger", str(root)])
    assert r.exit_code == code, r.output
    assert text in r.output and "Traceback" not in r.output


def test_memory_does_not_grow_with_the_training_samples():
    rng = np.random.default_rng(3)
    items = [_prompt(rng) for _ in range(500)]

    def peak(n):
        gen = (" ".join(VOCAB[(i * 7 + j) % 400] for j in range(30)) for i in range(n))
        tracemalloc.start()
        find_overlap(gen, items, chunk=500)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(2_000), peak(40_000)
    assert large < 1.3 * small


def test_split_metric_with_one_side_empty():
    rows = [{"id": i, "task": "t", "gold": "y", "pred": "y" if i % 3 else "n"} for i in range(30)]
    td = results_from_rows(rows)["t"]
    sides, diff, notes = split_metric(td, np.zeros(30, dtype=bool), metric="exact_match", resamples=200)
    assert diff is None and list(sides) == ["clean"] and "nothing to compare" in notes[0]
    assert sides["clean"]["value"] == pytest.approx(20 / 30)


@pytest.mark.simulation
def test_the_difference_interval_covers_at_its_level():
    """Overlapping vs clean items with a true accuracy gap of 0.1, clusters of 3: the unpaired
    bootstrap interval of the difference covers the truth in [0.93, 0.97] of 500 datasets, and
    under no gap its p-value rejects in at most 6%."""
    rng = np.random.default_rng(11)
    covered = rejected = 0
    reps = 1000
    a = rng.normal(0, 0.8, 2_000_000)
    base = 1 / (1 + np.exp(-(0.6 + a)))
    truth = float(np.minimum(base + 0.1, 1).mean() - base.mean())  # the population gap (clipped at 1)
    for rep in range(reps):
        n_clusters = 150
        cl = np.repeat(np.arange(n_clusters), 3)
        over_cluster = rng.random(n_clusters) < 0.3
        over = over_cluster[cl]
        ability = rng.normal(0, 0.8, n_clusters)[cl]
        gap = 0.1 if rep % 2 == 0 else 0.0
        p = 1 / (1 + np.exp(-(0.6 + ability)))
        p = np.clip(p + gap * over, 0, 1)
        right = rng.random(len(cl)) < p
        rows = [
            {"id": i, "task": "t", "gold": "y", "pred": "y" if r else "n", "group": int(c)}
            for i, (r, c) in enumerate(zip(right, cl))
        ]
        td = results_from_rows(rows)["t"]
        _, d, _ = split_metric(td, over, metric="exact_match", resamples=1000, seed=rep)
        if gap:
            covered += d["ci_low"] <= truth <= d["ci_high"]
        else:
            rejected += d["p_value"] < 0.05
    print(f"coverage {covered / (reps / 2):.3f}, type I {rejected / (reps / 2):.3f}")
    assert 0.93 <= covered / (reps / 2) <= 0.97
    assert rejected / (reps / 2) <= 0.06
