"""evaluate() and compare(): documents, slices, clusters, suite means, paired comparisons."""

from __future__ import annotations

import math
import re

import numpy as np
import orjson
import pytest
import sklearn.metrics as skm

from labledger.analysis.evaluation import compare, evaluate
from labledger.errors import ComparisonError, MetricInputError, UnknownMetricError, UnknownNameError
from labledger.inputs.results import read_results

LABELS = ("SUPPORTED", "NOT_SUPPORTED")


def hover_rows(seed=0, n=300, skill=0.75, task="hover", ids=None):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        gold = LABELS[int(rng.random() < 0.4)]
        p_gold = float(np.clip(rng.normal(skill, 0.2), 0.01, 0.99))
        other = LABELS[1 - LABELS.index(gold)]
        rows.append(
            {
                "id": f"h{i}" if ids is None else ids[i],
                "task": task,
                "gold": gold,
                "probs": {other: round(1 - p_gold, 6), gold: round(p_gold, 6)},  # key order varies
                "slices": {"length": "long" if i % 3 else "short"},
                "group": f"doc{i // 4}",
            }
        )
    return rows


def mosi_rows(seed=1, n=200):
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(-3, 3, n) * 2) / 2
    pred = gold + rng.normal(0, 0.8, n)
    return [{"id": i, "task": "mosi", "gold": float(g), "pred": float(p)} for i, (g, p) in enumerate(zip(gold, pred))]


def write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_document_shape_and_values_match_sklearn(tmp_path):
    rows = hover_rows()
    ev = evaluate(write(tmp_path / "r.jsonl", rows), resamples=200)
    doc = ev.to_dict()
    body = doc["tasks"]["hover"]
    assert doc["kind"] == "evaluation" and doc["n"] == 300 and doc["ci"] == 0.95 and doc["resamples"] == 200
    assert body["kind"] == "classification" and body["n"] == 300 and body["labels"] == sorted(LABELS)
    assert body["clusters"] == 75
    gold = [r["gold"] for r in rows]
    pred = [max(r["probs"], key=r["probs"].get) for r in rows]
    assert ev.value("hover", "accuracy") == pytest.approx(skm.accuracy_score(gold, pred), abs=1e-12)
    assert ev.value("hover", "f1[average=macro,zero_division=0]") == pytest.approx(
        skm.f1_score(gold, pred, average="macro"), abs=1e-12
    )
    for entry in body["metrics"]:
        assert {
            "metric",
            "key",
            "params",
            "definition",
            "value",
            "ci_low",
            "ci_high",
            "ci",
            "resamples",
            "method",
            "n",
            "higher_is_better",
        } <= set(entry)
        assert entry["ci_low"] <= entry["value"] <= entry["ci_high"], entry["key"]
        assert "clusters" in entry["method"] and entry["clusters"] == 75
    cm = body["confusion_matrix"]
    assert cm["labels"] == sorted(LABELS)
    assert cm["matrix"] == skm.confusion_matrix(gold, pred, labels=sorted(LABELS)).tolist()
    recall = {r["label"]: r["recall"]["value"] for r in body["per_class"]["labels"]}
    assert recall == pytest.approx(
        dict(zip(sorted(LABELS), skm.recall_score(gold, pred, average=None, labels=sorted(LABELS))))
    )
    orjson.dumps(doc)  # JSON-ready


def test_slices_equal_evaluating_the_subset():
    rows = hover_rows()
    ev = evaluate(rows, metrics=["accuracy", "macro_f1"], by="length", resamples=100)
    for value in ("long", "short"):
        sub = evaluate(
            [r for r in rows if r["slices"]["length"] == value], metrics=["accuracy", "macro_f1"], resamples=0
        )
        body = ev.tasks["hover"]["slices"]["length"][value]
        assert body["n"] == sub.tasks["hover"]["n"]
        assert ev.value("hover", "accuracy", slice=f"length={value}") == sub.value("hover", "accuracy")
        assert ev.value("hover", "f1", slice=f"length={value}") == sub.value("hover", "f1")


def test_regression_defaults_and_positive_binary():
    ev = evaluate(mosi_rows(), resamples=100)
    keys = [e["key"] for e in ev.tasks["mosi"]["metrics"]]
    assert keys == [
        "mae",
        "rmse",
        "pearson",
        "spearman",
        "has0_acc",
        "has0_f1",
        "non0_acc",
        "non0_f1",
        "zero_f1",
        "acc5",
        "acc7",
    ]
    nz = next(e for e in ev.tasks["mosi"]["metrics"] if e["key"] == "non0_f1")
    assert nz["n"] == sum(1 for r in mosi_rows() if r["gold"] != 0)
    rows = [{"id": i, "task": "b", "gold": "cross" if i % 2 else "single", "score": (i % 10) / 10} for i in range(100)]
    ev = evaluate(rows, positive="cross", resamples=0)
    f1 = ev.metric("b", "f1")
    assert f1["params"] == {"average": "binary", "pos_label": "cross", "zero_division": 0.0}
    gold = [r["gold"] == "cross" for r in rows]
    assert f1["value"] == pytest.approx(skm.f1_score(gold, [r["score"] >= 0.5 for r in rows]))
    assert ev.metric("b", "roc_auc")["value"] == pytest.approx(skm.roc_auc_score(gold, [r["score"] for r in rows]))


def test_reproducible_and_independent_of_other_metrics():
    rows = hover_rows()
    a = evaluate(rows, metrics=["accuracy", "roc_auc"], seed=3, resamples=200).metric("hover", "roc_auc")
    b = evaluate(rows, metrics=["roc_auc"], seed=3, resamples=200).metric("hover", "roc_auc")
    c = evaluate(rows, metrics=["roc_auc"], seed=4, resamples=200).metric("hover", "roc_auc")
    assert (a["ci_low"], a["ci_high"]) == (b["ci_low"], b["ci_high"]) != (c["ci_low"], c["ci_high"])


def test_suite_mean_of_headlines():
    rows = hover_rows() + hover_rows(seed=5, task="vast", skill=0.6) + mosi_rows()
    ev = evaluate(
        rows,
        metrics={"hover": ["accuracy"], "vast": ["accuracy"], "mosi": ["mae"]},
        resamples=200,
        headline={"mosi": "mae"},
    )
    suite = ev.to_dict()["suite"]
    assert suite["tasks"] == {"hover": "accuracy", "vast": "accuracy"} and suite["excluded"] == ["mosi"]
    assert suite["value"] == pytest.approx((ev.value("hover", "accuracy") + ev.value("vast", "accuracy")) / 2)
    assert suite["ci_low"] < suite["value"] < suite["ci_high"]
    ev2 = evaluate(rows, metrics={"hover": ["accuracy"], "vast": ["accuracy"], "mosi": ["mae"]}, resamples=0)
    assert ev2.to_dict()["suite"]["tasks"]["mosi"] == "pearson"  # the default headline is added


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"metrics": ["f1score"]}, UnknownMetricError, "Did you mean 'f1'"),
        ({"metrics": ["mae"]}, MetricInputError, "applies to regression tasks"),
        ({"by": "lenght"}, UnknownNameError, "Did you mean 'length'"),
        ({"task": "hovr"}, UnknownNameError, "Did you mean 'hover'"),
        ({"metrics": ["f1:pos_label=MAYBE"]}, UnknownNameError, "MAYBE"),
        ({"metrics": ["f1:average=binary"]}, MetricInputError, "needs pos_label"),
    ],
)
def test_evaluate_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        evaluate(hover_rows(n=20), resamples=0, **kwargs)


def test_ranking_sets_and_match_tasks():
    rows = [
        {"id": i, "task": "toolret", "gold": {f"d{i % 3}": 1}, "scores": {"d0": 0.5, "d1": 0.4, "d2": 0.1}}
        for i in range(30)
    ]
    rows += [
        {"id": i, "task": "acos", "gold": [["a", "pos"]], "pred": [["a", "pos"]] if i % 2 else []} for i in range(30)
    ]
    rows += [
        {"id": i, "task": "bfcl", "gold": {"name": "f"}, "pred": {"name": "f" if i % 3 else "g"}} for i in range(30)
    ]
    ev = evaluate(rows, resamples=100)
    assert ev.value("toolret", "mrr") == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert ev.value("acos", "set_f1") == 0.5 and ev.value("acos", "exact_match") == 0.5
    assert ev.value("bfcl", "exact_match") == pytest.approx(20 / 30)
    assert set(ev.to_dict()["suite"]["tasks"]) == {"toolret", "acos", "bfcl"}


# ------------------------------------------------------------------------------------------------
# compare


def test_paired_compare_matches_two_evaluations(tmp_path):
    a = write(tmp_path / "a.jsonl", hover_rows(seed=0, skill=0.8))
    b_rows = hover_rows(seed=0, skill=0.8)
    rng = np.random.default_rng(9)
    for r in b_rows:  # B: same items and gold, worse probabilities
        if rng.random() < 0.3:
            r["probs"] = {k: round(1 - v, 6) for k, v in r["probs"].items()}
    b = write(tmp_path / "b.jsonl", list(reversed(b_rows)))  # row order does not matter
    c = compare(a, b, metrics=["accuracy", "macro_f1", "roc_auc"], resamples=300)
    ea, eb = evaluate(a, resamples=0), evaluate(b, resamples=0)
    body = c.to_dict()["tasks"]["hover"]
    assert body["paired"] and body["n"] == 300
    acc = c.metric("hover", "accuracy")
    assert acc["diff"] == pytest.approx(ea.value("hover", "accuracy") - eb.value("hover", "accuracy"))
    assert acc["ci_low"] < acc["diff"] < acc["ci_high"] and acc["p_value"] < 0.05
    assert acc["mcnemar"]["b"] > acc["mcnemar"]["c"] and acc["mcnemar"]["p_value"] < 0.05
    assert "clusters" in acc["method"]
    assert c.metric("hover", "roc_auc")["mcnemar"] is None


def test_compare_refuses_different_item_sets(tmp_path):
    a = hover_rows(n=50)
    b = hover_rows(n=50, ids=[f"h{i}" for i in range(7, 57)])
    with pytest.raises(ComparisonError) as info:
        compare(a, b, metrics=["accuracy"], resamples=0)
    msg = str(info.value)
    assert "A has 50 items, B has 50" in msg and "7 only in A" in msg and "7 only in B" in msg
    assert "'h0', 'h1', 'h2', 'h3', 'h4'" in msg and "'h5'" not in msg.split("only in B")[0]
    assert "--unpaired" in msg
    c = compare(a, b, metrics=["accuracy"], unpaired=True, resamples=200)
    body = c.to_dict()["tasks"]["hover"]
    assert not body["paired"] and body["n_a"] == 50 and c.metric("hover", "accuracy")["mcnemar"] is None


def test_compare_refuses_different_gold_and_tasks():
    a = hover_rows(n=20)
    b = [dict(r) for r in a]
    b[3] = dict(b[3], gold=LABELS[1 - LABELS.index(b[3]["gold"])])
    with pytest.raises(ComparisonError, match="gold differs between A and B for 1 items"):
        compare(a, b, metrics=["accuracy"], resamples=0)
    with pytest.raises(ComparisonError, match="the tasks differ: only in A: hover"):
        compare(a, mosi_rows(), resamples=0)


def test_compare_matches_labels_by_name():
    a = [{"id": i, "task": "t", "gold": "x", "probs": {"x": 0.9, "y": 0.1}} for i in range(10)]
    b = [{"id": i, "task": "t", "gold": "x", "probs": {"z": 0.2, "y": 0.1, "x": 0.7}} for i in range(10)]
    c = compare(a, b, metrics=["accuracy", "log_loss"], resamples=50)
    assert c.metric("t", "accuracy")["diff"] == 0.0
    assert c.metric("t", "log_loss")["diff"] == pytest.approx(-math.log(0.9) + math.log(0.7))


def test_a_resultset_is_accepted(tmp_path):
    rs = read_results(write(tmp_path / "r.jsonl", mosi_rows()))
    assert evaluate(rs, metrics=["mae"], resamples=0).value("mosi", "mae") == evaluate(
        mosi_rows(), metrics=["mae"], resamples=0
    ).value("mosi", "mae")


def test_item_resample_budget_caps_weight_metrics_and_says_so():
    rng = np.random.default_rng(5)
    rows = [
        {"id": i, "task": "t", "gold": "yes" if g else "no", "score": float(s)}
        for i, (g, s) in enumerate(zip(rng.integers(0, 2, 400), rng.random(400)))
    ]
    doc = evaluate(
        rows, metrics=["accuracy", "roc_auc"], resamples=1000, positive="yes", item_draw_budget=400 * 250
    ).to_dict()
    by = {m["metric"]: m for m in doc["tasks"]["t"]["metrics"]}
    assert by["accuracy"]["resamples"] == 1000 and "resamples_requested" not in by["accuracy"]
    assert by["roc_auc"]["resamples"] == 250 and by["roc_auc"]["resamples_requested"] == 1000
    assert "250 resamples instead of 1000" in by["roc_auc"]["resamples_note"]
    assert by["roc_auc"]["ci_low"] < by["roc_auc"]["value"] < by["roc_auc"]["ci_high"]
    doc = evaluate(rows, metrics=["roc_auc"], resamples=1000, positive="yes", item_draw_budget=None).to_dict()
    assert doc["tasks"]["t"]["metrics"][0]["resamples"] == 1000


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"ci": 1.5}, "ci must be strictly between 0 and 1; got 1.5"),  # was numpy's "Quantiles must be in [0, 1]"
        ({"resamples": -1}, "resamples must be >= 0; got -1"),  # was accepted
        ({"seed": "x"}, "seed must be an integer; got str 'x'"),  # was int()'s "invalid literal"
        ({"by": "nope"}, "Unknown slice field 'nope'. There is no slice field here."),  # was "Known: ."
    ],
)
def test_bad_arguments_are_one_line_errors_before_anything_is_read(kwargs, message):
    from labledger.errors import LedgerError
    from labledger.inputs.results import results_from_rows

    rs = results_from_rows([{"id": i, "task": "t", "gold": "ab"[i % 2], "pred": "a"} for i in range(10)])
    with pytest.raises(LedgerError, match=re.escape(message)):
        evaluate(rs, **kwargs)
