"""``compare --items`` lists the items that flipped between A and B, and ``--pair-on doc`` pairs the same
documents asked with other prompts (#44).

The plain case: two scikit-learn models on load_digits. The harness cases: lm-eval's own ``dummy`` model run
zero-shot and two-shot on one local task (tests/harness_runs/lm_eval_fewshot_run.py), checked against the
per-sample ``acc`` lm-eval wrote; inspect_ai's ``mockllm/model`` as two models on a task with a cluster
field (tests/harness_runs/inspect_pair_run.py), checked against inspect's per-sample scores, by cluster
and on the site. Offline: nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from harness_process import run_harness

from labledger.analysis.comparison import compare, item_flips
from labledger.analysis.tasks import hash_difference
from labledger.cli import main
from labledger.errors import MetricInputError
from labledger.importers import import_path
from labledger.inputs.results import results_from_rows


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> dict:
    """Two real models' test predictions on load_digits, as results files with a cluster per block of 30."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB
    from sklearn.tree import DecisionTreeClassifier

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=0)
    pred_a = DecisionTreeClassifier(random_state=0).fit(x_train, y_train).predict(x_test)
    pred_b = GaussianNB().fit(x_train, y_train).predict(x_test)
    root = tmp_path_factory.mktemp("digits")

    def rows(pred: np.ndarray, model: str) -> list[dict]:
        return [
            {
                "id": f"img{i}",
                "task": "digits",
                "gold": str(g),
                "pred": str(p),
                "group": f"b{i // 30}",
                "prompt": f"8x8 image {i}\nby {model}",
            }
            for i, (g, p) in enumerate(zip(y_test, pred))
        ]

    # B's rows in another order, with blank lines: items are matched by id, clusters read back by line
    rows_b = rows(pred_b, "nb")[::-1]
    text_b = "".join(json.dumps(r) + ("\n\n" if k % 40 == 0 else "\n") for k, r in enumerate(rows_b))
    (root / "b.jsonl").write_text(text_b)
    return {
        "a": _write(root / "a.jsonl", rows(pred_a, "tree")),
        "b": root / "b.jsonl",
        "gold": y_test,
        "pred_a": pred_a,
        "pred_b": pred_b,
        "block": np.arange(len(y_test)) // 30,
    }


def _invoke(*args: str):
    return CliRunner().invoke(main, ["compare", *map(str, args)])


def test_digits_items_are_the_discordant_pairs(digits) -> None:
    gold, pa, pb = digits["gold"], digits["pred_a"], digits["pred_b"]
    a_only = np.flatnonzero((pa == gold) & (pb != gold))
    b_only = np.flatnonzero((pa != gold) & (pb == gold))
    assert len(a_only) and len(b_only)
    res = _invoke(digits["a"], digits["b"], "--metric", "accuracy", "--resamples", "0", "--items", "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)["tasks"]["digits"]
    flips = body["flips"]
    assert flips["basis"] == "correct" and "cluster" not in flips
    assert (flips["a_better"], flips["b_better"]) == (len(a_only), len(b_only))
    assert (body["metrics"][0]["mcnemar"]["b"], body["metrics"][0]["mcnemar"]["c"]) == (len(a_only), len(b_only))
    # --json carries every item, each with both predictions, the gold, its cluster and its prompt
    assert [x["id"] for x in flips["items"]] == [f"img{i}" for i in [*a_only, *b_only]]
    for x in flips["items"]:
        i = int(x["id"][3:])
        assert (x["gold"], x["pred_a"], x["pred_b"]) == (str(gold[i]), str(pa[i]), str(pb[i]))
        assert x["better"] == ("a" if i in a_only else "b")
        assert x["cluster"] == f"b{i // 30}"
        assert x["prompt"] == f"8x8 image {i}\nby tree" and x["prompt_b"] == f"8x8 image {i}\nby nb"


def test_digits_items_text_limits_the_list_not_the_counts(digits) -> None:
    gold, pa, pb = digits["gold"], digits["pred_a"], digits["pred_b"]
    n_a, n_b = int(((pa == gold) & (pb != gold)).sum()), int(((pa != gold) & (pb == gold)).sum())
    res = _invoke(digits["a"], digits["b"], "--metric", "accuracy", "--resamples", "0", "--items", "--limit", "2")
    assert res.exit_code == 0, res.output
    assert f"items: {n_a} A right & B wrong, {n_b} A wrong & B right; showing 4 (--limit 2)" in res.output
    lines = res.output.splitlines()
    assert sum(line.startswith("A>B ") for line in lines) == 2 and sum(line.startswith("B>A ") for line in lines) == 2
    first = next(line for line in lines if line.startswith("A>B "))
    assert "8x8 image" in first and "\\n" not in first and "by tree" in first  # the prompt on one line


def test_digits_items_of_one_cluster(digits) -> None:
    gold, pa, pb, block = digits["gold"], digits["pred_a"], digits["pred_b"], digits["block"]
    k = int(np.argmax(np.bincount(block, weights=(pa == gold) != (pb == gold))))  # the block with most flips
    in_k = block == k
    res = _invoke(
        digits["a"], digits["b"], "--metric", "accuracy", "--resamples", "0", "--items", "--cluster", f"b{k}", "--json"
    )
    assert res.exit_code == 0, res.output
    flips = json.loads(res.output)["tasks"]["digits"]["flips"]
    assert flips["cluster"] == f"b{k}"
    assert flips["a_better"] == int(((pa == gold) & (pb != gold) & in_k).sum())
    assert flips["b_better"] == int(((pa != gold) & (pb == gold) & in_k).sum())
    assert flips["a_better"] + flips["b_better"] == len(flips["items"]) > 0
    assert {x["cluster"] for x in flips["items"]} == {f"b{k}"}
    res = _invoke(digits["a"], digits["b"], "--metric", "accuracy", "--items", "--cluster", "b999")
    assert res.exit_code == 1 and "Unknown cluster of task 'digits' 'b999'" in res.output


def test_usage_errors_exit_2(digits) -> None:
    a, b = digits["a"], digits["b"]
    for extra in (["--cluster", "b1"], ["--limit", "3"], ["--items", "--unpaired"], ["--pair-on", "prompt"]):
        res = _invoke(a, b, "--resamples", "0", *extra)
        assert res.exit_code == 2, (extra, res.output)
    with pytest.raises(MetricInputError, match="need a paired comparison"):
        compare(a, b, items=True, unpaired=True)


def _rows(kind: str, n: int = 40) -> tuple[list[dict], list[dict]]:
    rng = np.random.default_rng(3)
    rows_a, rows_b = [], []
    for i in range(n):
        if kind == "regression":
            g = float(rng.normal())
            rows_a.append({"id": i, "task": "r", "gold": g, "pred": g + float(rng.normal(0, 0.5))})
            rows_b.append({"id": i, "task": "r", "gold": g, "pred": g + float(rng.normal(0, 0.5))})
        else:
            g = sorted({"x", "y", "z"} - {"xyz"[i % 3]})
            rows_a.append({"id": i, "task": "s", "gold": g, "pred": g if rng.random() < 0.6 else ["x"]})
            rows_b.append({"id": i, "task": "s", "gold": g, "pred": g if rng.random() < 0.5 else ["y"]})
    return rows_a, rows_b


def test_regression_lists_the_largest_error_differences() -> None:
    rows_a, rows_b = _rows("regression")
    err_a = np.array([abs(r["pred"] - r["gold"]) for r in rows_a])
    err_b = np.array([abs(r["pred"] - r["gold"]) for r in rows_b])
    # rows given as iterators: read again for the items
    cmp = compare(iter(rows_a), iter(rows_b), metrics=["mae"], resamples=0, items=True)
    flips = cmp.doc.tasks["r"].flips
    assert flips is not None and flips.basis == "error"
    assert (flips.a_better, flips.b_better) == (int((err_a < err_b).sum()), int((err_a > err_b).sum()))
    order = np.argsort(-np.abs(err_b - err_a), kind="stable")
    assert [x.id for x in flips.items] == [str(i) for i in order]
    top = flips.items[0]
    assert top.error_a == pytest.approx(err_a[order[0]]) and top.error_b == pytest.approx(err_b[order[0]])
    assert top.better == ("a" if err_a[order[0]] < err_b[order[0]] else "b")


def test_set_tasks_flip_on_exact_match_and_ranking_has_none() -> None:
    rows_a, rows_b = _rows("sets")
    flips = compare(rows_a, rows_b, metrics=["exact_match"], resamples=0, items=True).doc.tasks["s"].flips
    right_a = [sorted(r["pred"]) == r["gold"] for r in rows_a]
    right_b = [sorted(r["pred"]) == r["gold"] for r in rows_b]
    expect = [i for i in range(40) if right_a[i] and not right_b[i]] + [
        i for i in range(40) if right_b[i] and not right_a[i]
    ]
    assert flips is not None and [int(x.id) for x in flips.items] == expect
    assert all(x.gold == rows_a[int(x.id)]["gold"] for x in flips.items)
    rank = [{"id": i, "task": "q", "gold": {"d1": 1}, "scores": {"d1": 0.2 * i, "d2": 0.5}} for i in range(5)]
    ta = results_from_rows(rank)["q"]
    assert item_flips(ta, ta) is None


def _hashed(n: int, prompt: str, doc: str = "") -> list[dict]:
    shared = "c0ffee" * 8  # long common prefixes: a truncated prefix alone would look the same
    return [
        {
            "id": i,
            "task": "t",
            "gold": "yn"[i % 2],
            "pred": "yn"[(i // 3) % 2],
            "item_hash": f"{shared}{doc}{i:04d}/{shared}{prompt}",
        }
        for i in range(n)
    ]


def test_pair_on_doc_pairs_other_prompts_and_says_so(tmp_path) -> None:
    a = _write(tmp_path / "a.jsonl", _hashed(10, "p0"))
    b = _write(tmp_path / "b.jsonl", _hashed(10, "p1"))
    res = _invoke(a, b, "--metric", "accuracy", "--resamples", "0")
    assert res.exit_code == 1
    assert "the prompt hash differs" in res.output and "--pair-on doc" in res.output
    assert "A '…feep0', B '…feep1'" in res.output  # where they differ, not two equal prefixes
    res = _invoke(a, b, "--metric", "accuracy", "--resamples", "0", "--pair-on", "doc", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["pair_on"] == "doc" and doc["tasks"]["t"]["prompts_differ"] == 10
    res = _invoke(a, b, "--metric", "accuracy", "--resamples", "0", "--pair-on", "doc")
    assert "Note: 10 paired items have different prompts in A and B" in res.output
    # another document is not another prompt: refused with --pair-on doc too
    c = _write(tmp_path / "c.jsonl", _hashed(10, "p0", doc="x"))
    res = _invoke(a, c, "--metric", "accuracy", "--resamples", "0", "--pair-on", "doc")
    assert res.exit_code == 1 and "the document hash differs" in res.output
    # the same prompts: no note, and pair_on left out of the document
    doc = json.loads(_invoke(a, a, "--metric", "accuracy", "--resamples", "0", "--json").output)
    assert doc["pair_on"] is None and "prompts_differ" not in doc["tasks"]["t"]


def test_hash_difference_shows_where_hashes_part() -> None:
    one, two = "ab" * 20 + "1234", "ab" * 20 + "9876"
    text = hash_difference(one, two)
    assert "1234" in text and "9876" in text
    assert hash_difference(f"d/{one}", f"e/{one}").startswith("the document hash differs")


@pytest.fixture(scope="module")
def fewshot(tmp_path_factory) -> Path:
    """lm-eval's output, zero-shot (``a/out``) and two-shot (``b/out``), of one task (about 25 s)."""
    root = tmp_path_factory.mktemp("lm_fewshot")
    run_harness("lm_eval_fewshot_run.py", root, package="lm_eval")
    return root


@pytest.mark.slow
def test_lm_eval_zero_and_two_shot_items(fewshot, tmp_path) -> None:
    ledger = tmp_path / "ledger"
    import_path(fewshot / "a" / "out", ledger, name="zero-shot")
    import_path(fewshot / "b" / "out", ledger, name="two-shot")
    samples = {
        side: {
            s["doc_id"]: s
            for s in map(json.loads, next((fewshot / side).rglob("samples_tiny_mc_*.jsonl")).read_text().splitlines())
        }
        for side in "ab"
    }
    assert all(samples["a"][k]["doc_hash"] == samples["b"][k]["doc_hash"] for k in samples["a"])
    assert all(samples["a"][k]["prompt_hash"] != samples["b"][k]["prompt_hash"] for k in samples["a"])
    refs = ("zero-shot:tiny_mc", "two-shot:tiny_mc", "--ledger", ledger, "--task", "acc", "--resamples", "0")
    res = _invoke(*refs)
    assert res.exit_code == 1 and "same document hash" in res.output and "the prompt hash differs" in res.output
    res = _invoke(*refs, "--pair-on", "doc", "--items", "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)["tasks"]["acc"]
    assert body["prompts_differ"] == 12
    # the flips are what lm-eval's own per-sample acc says
    acc = {side: {str(k): s["acc"] for k, s in samples[side].items()} for side in "ab"}
    a_only = [k for k in acc["a"] if acc["a"][k] == 1 and acc["b"][k] == 0]
    b_only = [k for k in acc["a"] if acc["a"][k] == 0 and acc["b"][k] == 1]
    flips = body["flips"]
    assert (flips["a_better"], flips["b_better"]) == (len(a_only), len(b_only))
    assert sorted(x["id"] for x in flips["items"]) == sorted(a_only + b_only)
    for x in flips["items"]:
        sa, sb = samples["a"][int(x["id"])], samples["b"][int(x["id"])]
        assert x["gold"] == sa["target"] == sb["target"]
        assert x["prompt"] == sa["arguments"]["gen_args_0"]["arg_0"]
        assert x["prompt_b"] == sb["arguments"]["gen_args_0"]["arg_0"] != x["prompt"]
    res = _invoke(*refs, "--pair-on", "doc", "--items")
    assert res.exit_code == 0 and "Note: 12 paired items have different prompts" in res.output
    assert f"items: {len(a_only)} A right & B wrong, {len(b_only)} A wrong & B right" in res.output


@pytest.fixture(scope="module")
def inspect_pair(tmp_path_factory) -> Path:
    """inspect_ai's two ``.eval`` logs (``a``, ``b``) of one task with a cluster field (about 10 s)."""
    root = tmp_path_factory.mktemp("inspect_pair")
    run_harness("inspect_pair_run.py", root, package="inspect_ai")
    return root


@pytest.mark.slow
def test_inspect_items_that_flipped_by_cluster_and_on_the_site(inspect_pair, tmp_path) -> None:
    """The items inspect scored differently for two models, as inspect's own logs say, listed by
    ``compare --items``, limited to one ``stderr(cluster=)`` cluster, and on the site's Comparisons page."""
    from inspect_ai.log import read_eval_log

    from labledger.site import build_site, load_data_file

    ledger = tmp_path / "ledger"
    logs = {}
    for side in "ab":
        (log_path,) = (inspect_pair / side).glob("*.eval")
        logs[side] = {str(s.id): s for s in read_eval_log(str(log_path)).samples}
        import_path(log_path, ledger, name=f"model-{side}")
    right = {side: {k: s.scores["includes"].value == "C" for k, s in logs[side].items()} for side in "ab"}
    passage = {k: s.metadata["passage"] for k, s in logs["a"].items()}
    flipped = {k for k in right["a"] if right["a"][k] != right["b"][k]}
    assert flipped and len({passage[k] for k in flipped}) > 1  # the run flips items in several clusters
    refs = ("model-a:odd-qa", "model-b:odd-qa", "--ledger", ledger, "--resamples", "0", "--items", "--json")
    res = _invoke(*refs)
    assert res.exit_code == 0, res.output
    flips = json.loads(res.output)["tasks"]["includes"]["flips"]
    assert {x["id"] for x in flips["items"]} == flipped
    assert (flips["a_better"], flips["b_better"]) == (
        sum(right["a"][k] for k in flipped),
        sum(right["b"][k] for k in flipped),
    )
    for x in flips["items"]:  # both outputs, the gold and the prompt, as inspect logged them
        assert x["output_a"] == logs["a"][x["id"]].output.completion
        assert x["output_b"] == logs["b"][x["id"]].output.completion
        assert x["target"] == logs["a"][x["id"]].target and x["prompt"] == logs["a"][x["id"]].input
        assert x["cluster"] == passage[x["id"]]
    one = passage[min(flipped)]
    res = _invoke(*refs, "--cluster", one, "--save", "model-a:vs-b")
    assert res.exit_code == 0, res.output
    flips = json.loads(res.output)["tasks"]["includes"]["flips"]
    assert flips["cluster"] == one and {x["id"] for x in flips["items"]} == {k for k in flipped if passage[k] == one}
    build_site(ledger, tmp_path / "site")
    _, data = load_data_file(tmp_path / "site" / "data" / "compare.js")
    (doc,) = data["comparisons"]
    (task,) = doc["tasks"]
    assert [x["id"] for x in task["flips"]["items"]] == [x["id"] for x in flips["items"]]
