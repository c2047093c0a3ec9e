"""lm-eval's group results and perplexity metrics (#44), from real lm-eval output.

lm-eval's ``dummy`` model runs on tiny local tasks (tests/harness_runs/lm_eval_groups_run.py; nothing is
downloaded): two groups, one weighted by size (``grp_size``: two multiple-choice tasks of 5 and 9
documents) and one not (``grp_eq``: a third task and ``grp_size`` as a subgroup), and a
``loglikelihood_rolling`` task with ``word_perplexity``, ``byte_perplexity`` and ``bits_per_byte``. Every
group value and stderr and every perplexity is recomputed from the stored items and checked against
lm-eval's own aggregate.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from harness_process import run_harness

from labledger import open_ledger
from labledger.analysis.evaluation import evaluate
from labledger.analysis.harness import harness_check, harness_meta, harness_metrics
from labledger.errors import ImportSourceError
from labledger.importers import detect_format, import_path
from labledger.importers.lm_eval import _task_rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    """lm-eval's output folder (about 30 s: lm-eval loads each local dataset)."""
    root = tmp_path_factory.mktemp("lm_groups")
    run_harness("lm_eval_groups_run.py", root, package="lm_eval", timeout=250)
    return root / "out"


def _results(out: Path) -> dict:
    return json.loads(next(out.rglob("results_*.json")).read_text())


@pytest.fixture(scope="module")
def imported(out, tmp_path_factory):
    ledger = tmp_path_factory.mktemp("ledger") / "l"
    (run,) = import_path(out, ledger).runs
    return ledger, run


def _set(ledger: Path, run, name: str):
    with open_ledger(ledger) as book:
        path = book.run(run.id).results_path(name)
        meta = harness_meta(path)
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        notes = [n["text"] for n in book.run(run.id).notes()]
    return path, meta, rows, notes


def test_group_values_recomputed_from_the_members_items_equal_lm_eval(out, imported):
    ledger, run = imported
    reported = _results(out)
    assert set(reported["groups"]) == {"grp_size", "grp_eq"}
    acc = {}
    for task in ("mem_a", "mem_b", "mem_c"):
        path, meta, rows, notes = _set(ledger, run, task)
        ev = evaluate(path, metrics=harness_metrics(meta), resamples=0)
        n = len({r["id"] for r in rows})
        assert n == reported["n-samples"][task]["effective"]
        acc[task] = {m: (ev.value(m, "accuracy"), n) for m in ("acc", "acc_norm")}

    def by_size(tasks, m):
        return sum(acc[t][m][0] * acc[t][m][1] for t in tasks) / sum(acc[t][m][1] for t in tasks)

    groups = reported["groups"]
    for m in ("acc", "acc_norm"):  # weight_by_size: true
        assert math.isclose(by_size(["mem_a", "mem_b"], m), groups["grp_size"][f"{m},none"], abs_tol=1e-9)
    # weight_by_size: false over every task under the group (lm-eval 0.4.13), the subgroup's included
    equal = sum(acc[t]["acc"][0] for t in ("mem_c", "mem_a", "mem_b")) / 3
    assert math.isclose(equal, groups["grp_eq"]["acc,none"], abs_tol=1e-9)
    assert not math.isclose(
        by_size(["mem_c", "mem_a", "mem_b"], "acc"), equal, abs_tol=1e-9
    )  # the test tells them apart
    lines = [n for n in run.notes if n.startswith("group ")]
    assert len(lines) == 3 and all("= lm-eval's" in n for n in lines), lines
    assert any("grp_size: acc " in n and "weighted by size" in n for n in lines)
    assert any("grp_eq: acc " in n and "weighted equally" in n for n in lines)
    for line in lines:  # the value shown is lm-eval's to the digits shown
        g, metric = line.split(":")[0].split()[1], line.split(": ")[1].split()[0]
        assert f"{groups[g][f'{metric},none']:.6f}" in line
    *_, stored_notes = _set(ledger, run, "mem_a")
    assert [n for n in stored_notes if "group " in n] == [f"import: {n}" for n in lines]  # kept with the run


def test_group_stderrs_recomputed_from_the_members_items_equal_lm_eval(out, imported):
    from scipy.stats import sem

    from labledger.importers.lm_eval import group_stderr

    _, run = imported
    data = _results(out)
    groups = data["groups"]
    per_item = {}
    for task in ("mem_a", "mem_b", "mem_c"):
        samples = [json.loads(x) for x in next(out.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()]
        per_item[task] = {m: [s[m] for s in samples] for m in ("acc", "acc_norm")}
        for m in ("acc", "acc_norm"):  # each task's stderr: scipy's standard error of the mean (ddof=1)
            assert math.isclose(sem(per_item[task][m]), data["results"][task][f"{m}_stderr,none"], abs_tol=1e-12)

    def pooled(tasks, m):  # lm-eval's pooled_sample_stderr, written out
        n = [len(per_item[t][m]) for t in tasks]
        se = [sem(per_item[t][m]) for t in tasks]
        return math.sqrt(sum((k - 1) * e**2 * k for k, e in zip(n, se)) / (sum(n) - len(n)) / sum(n))

    def unweighted(tasks, m):
        return math.sqrt(sum(sem(per_item[t][m]) ** 2 for t in tasks)) / len(tasks)

    for m in ("acc", "acc_norm"):
        reported = groups["grp_size"][f"{m}_stderr,none"]
        assert math.isclose(pooled(["mem_a", "mem_b"], m), reported, abs_tol=1e-9)
        parts = [(0.0, len(per_item[t][m]), float(sem(per_item[t][m]))) for t in ("mem_a", "mem_b")]
        assert math.isclose(group_stderr(parts, by_size=True), reported, abs_tol=1e-9)
    reported = groups["grp_eq"]["acc_stderr,none"]
    assert math.isclose(unweighted(["mem_c", "mem_a", "mem_b"], "acc"), reported, abs_tol=1e-9)
    assert not math.isclose(pooled(["mem_c", "mem_a", "mem_b"], "acc"), reported, abs_tol=1e-9)
    lines = [n for n in run.notes if n.startswith("group ")]
    for line in lines:
        g, metric = line.split(":")[0].split()[1], line.split(": ")[1].split()[0]
        se = groups[g][f"{metric}_stderr,none"]
        assert f"stderr {se:.6f} = lm-eval's {se:.6f}" in line, line
    assert all("pooled_sample_stderr" in n for n in lines if n.startswith("group grp_size"))
    assert "unweighted_mean_stderr" in next(n for n in lines if n.startswith("group grp_eq"))


def test_a_group_stderr_lm_eval_formed_otherwise_is_shown_different_with_its_reason():
    from labledger.importers.lm_eval import group_notes

    data = {
        "groups": {"g": {"acc,none": 0.5, "acc_stderr,none": 0.3}},
        "group_subtasks": {"g": ["a", "b"]},
    }
    (line,) = group_notes(data, {("a", "none"): {"acc": (1.0, 4, 0.0)}, ("b", "none"): {"acc": (0.0, 4, 0.0)}})
    assert "acc 0.500000 = lm-eval's 0.500000" in line
    assert "stderr: lm-eval 0.300000, DIFFERENT from both recomputed from the tasks' items" in line
    assert "pools the stderrs its tasks reported" in line
    (line,) = group_notes(data, {("a", "none"): {"acc": (1.0, 1, None)}, ("b", "none"): {"acc": (0.0, 1, None)}})
    assert "stderr 0.300000 as lm-eval reported it, not recomputed (a task has no stderr: one document)" in line


def test_a_group_whose_member_is_not_imported_is_named_with_lm_evals_value(out, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    samples = next(copy.rglob("samples_mem_b_*.jsonl"))
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join([lines[0].replace('"target": ', '"target": "nope", "x": ', 1), *lines[1:]]) + "\n")
    (run,) = import_path(copy, tmp_path / "ledger").runs
    assert len(run.errors) == 1 and "mem_b" in run.errors[0]
    size = next(n for n in run.notes if n.startswith("group grp_size: acc "))
    assert "as lm-eval reported it; not recomputed here (not recomputed for mem_b)" in size


def test_perplexities_recomputed_from_the_stored_documents_equal_lm_eval(out, imported):
    ledger, run = imported
    reported = _results(out)["results"]["ppl"]
    path, meta, rows, _ = _set(ledger, run, "ppl")
    assert {r["task"] for r in rows} == {"loglikelihood"} and len(rows) == 6
    ll = [r["pred"] for r in rows]
    words, nbytes = sum(r["words"] for r in rows), sum(r["bytes"] for r in rows)
    ours = {
        "word_perplexity": math.exp(-sum(ll) / words),
        "byte_perplexity": math.exp(-sum(ll) / nbytes),
        "bits_per_byte": -sum(ll) / nbytes / math.log(2),
    }
    for name, value in ours.items():
        assert math.isclose(value, reported[f"{name},none"], rel_tol=0, abs_tol=1e-9), name
        assert math.isclose(meta["metrics"][name]["recomputed"], reported[f"{name},none"], rel_tol=0, abs_tol=1e-9)
    ev = evaluate(path, metrics=harness_metrics(meta), resamples=0)
    checks = {c["task"]: c for c in harness_check(ev.to_dict(), meta)}
    assert all(checks[name]["equal"] for name in ours)
    assert "ppl: not recomputable" not in " ".join(run.notes)


def test_perplexity_rows_and_columns_paths_agree(out):
    samples = next(out.rglob("samples_ppl_*.jsonl"))
    config = _results(out)["configs"]["ppl"]
    reported = _results(out)["results"]["ppl"]
    a = _task_rows(samples, "ppl", samples, config, reported, columns=True)
    b = _task_rows(samples, "ppl", samples, config, reported, columns=False)
    assert [m.name for m in a[0].metrics] == [m.name for m in b[0].metrics]
    for ma, mb in zip(a[0].metrics, b[0].metrics):
        assert ma.extra == mb.extra
        rows_a = list(ma.rows.iter_rows()) if hasattr(ma.rows, "iter_rows") else ma.rows
        assert rows_a == mb.rows
    assert a[0].values == b[0].values


def test_lm_eval_042_layout_is_refused_naming_the_cause(out, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    results = _results(out)
    (old / "results.json").write_text(json.dumps({k: results[k] for k in ("results", "configs", "versions", "n-shot")}))
    for task in results["configs"]:
        lines = next(out.rglob(f"samples_{task}_*.jsonl")).read_text().splitlines()
        (old / f"pretrained__gpt2_{task}.jsonl").write_text(json.dumps([json.loads(x) for x in lines], indent=2))
    assert detect_format(old) == "lm-eval"
    with pytest.raises(ImportSourceError) as info:
        import_path(old, tmp_path / "ledger")
    msg = str(info.value)
    assert "\n" not in msg and "lm-eval 0.4.2's layout" in msg and "0.4.3" in msg
    assert not (tmp_path / "ledger").exists() or not list((tmp_path / "ledger").rglob("results.jsonl"))


def test_diff_of_two_harness_runs_uses_the_harness_metrics_adjusted(out, imported):
    from labledger.analysis.rundiff import diff_runs

    ledger, run = imported
    (again,) = import_path(out, ledger, again=True).runs
    with open_ledger(ledger) as book:
        doc = diff_runs(book, run.id, again.id, resamples=50)
    by_set = {c["results"]: c for c in doc["comparisons"]}
    mem = by_set["mem_a"]
    assert mem["paired"] and mem["harness"] == "lm-eval" and mem["adjust"] == "holm"
    assert {(m["task"], m["metric"]) for m in mem["metrics"]} == {("acc", "accuracy"), ("acc_norm", "accuracy")}
    assert all(m["diff"] == 0 for m in mem["metrics"])
    assert {m["task"] for m in by_set["ppl"]["metrics"]} == {"loglikelihood"}
