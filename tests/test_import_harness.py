"""Importing evaluation-harness outputs (#13): real files made by each harness's own dummy/mock model.

The session fixture runs lm-eval's ``dummy`` model, inspect_ai's ``mockllm/model`` and lighteval's
dummy model once (tests/harness_runs/*.py, offline: nothing is downloaded), then the tests import
those files, evaluate, compare and check every number against what the harness itself reported.
HELM cannot be installed beside the others (crfm-helm pins torch 2.14 and pandas 2.3), so its tests
use a run folder from HELM's own repository (tests/fixtures/helm, Apache-2.0).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness_process import OFFLINE, RUNS

from labledger import open_ledger
from labledger.analysis.evaluation import compare, evaluate
from labledger.analysis.harness import harness_check, harness_meta, harness_metrics
from labledger.cli import main
from labledger.errors import ComparisonError, ImportSourceError, RecordError
from labledger.importers import detect_format, import_path

# The session fixture runs four real harnesses side by side (~1-2 min on 2 cores); its setup counts
# against the first test's timeout, so the module gets the fixture's own 600 s bound, not 120 s.
pytestmark = pytest.mark.timeout(600)
HELM = Path(__file__).parent / "fixtures" / "helm"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="session")
def outputs(tmp_path_factory):
    """Run the harnesses once per session, side by side; ``{name: output folder}`` (None: not installed)."""
    root = tmp_path_factory.mktemp("harness")
    jobs = {
        "lm-eval": ("lm_eval", [RUNS / "lm_eval_run.py", root / "lm", "0"]),
        "lm-eval-b": ("lm_eval", [RUNS / "lm_eval_run.py", root / "lm_b", "1"]),
        "inspect": ("inspect_ai", [RUNS / "inspect_run.py", root / "inspect"]),
        "lighteval": ("lighteval", [RUNS / "lighteval_run.py", root / "lighteval"]),
    }
    env = {**os.environ, **OFFLINE}
    procs = {}
    for name, (module, args) in jobs.items():
        if _installed(module):
            log = open(root / f"{name}.log", "wb")  # closed below
            procs[name] = (subprocess.Popen([sys.executable, *map(str, args)], stdout=log, stderr=log, env=env), log)
    out: dict[str, Path | None] = dict.fromkeys(jobs)
    for name, (proc, log) in procs.items():
        rc = proc.wait(timeout=600)
        log.close()
        if rc != 0:
            raise RuntimeError(f"{name} run failed:\n{(root / f'{name}.log').read_text()[-3000:]}")
        out[name] = Path(jobs[name][1][1])
    return out


def _need(outputs, name: str) -> Path:
    if outputs[name] is None:
        pytest.skip(f"{name} is not installed (pip install 'labledger[harness]')")
    return outputs[name]


def _lm_results(folder: Path) -> dict:
    return json.loads(next(folder.rglob("results_*.json")).read_text())


def _evaluate_set(ledger: Path, run_id: str, name: str, resamples: int = 200):
    with open_ledger(ledger) as book:
        path = book.run(run_id).results_path(name)
    meta = harness_meta(path)
    ev = evaluate(path, metrics=harness_metrics(meta), resamples=resamples)
    return path, meta, ev


# ------------------------------------------------------------------------------------------------
# lm-evaluation-harness


@pytest.mark.slow
def test_lm_eval_recomputed_equals_reported(outputs, tmp_path):
    out = _need(outputs, "lm-eval")
    reported = _lm_results(out)
    assert detect_format(out / "out") == "lm-eval"
    result = import_path(out / "out", tmp_path / "ledger")
    (run,) = result.runs
    assert set(run.counts) == {
        "results:tiny_mc",
        "results:tiny_bool",
        "results:tiny_gen.strict-match",
        "results:tiny_gen.none",
    }
    checked = 0
    for set_name, task, filt in (
        ("tiny_mc", "tiny_mc", "none"),
        ("tiny_bool", "tiny_bool", "none"),
        ("tiny_gen.strict-match", "tiny_gen", "strict-match"),
        ("tiny_gen.none", "tiny_gen", "none"),
    ):
        _, meta, ev = _evaluate_set(tmp_path / "ledger", run.id, set_name)
        assert meta["filter"] == filt
        for metric, spec in harness_metrics(meta).items():
            value = ev.value(metric, spec[0].split(":")[0])
            assert value == pytest.approx(reported["results"][task][f"{metric},{filt}"], abs=1e-9)
            assert ev.tasks[metric]["n"] == reported["n-samples"][task]["effective"]
            checked += 1
    assert checked == 7  # acc, acc_norm; acc, f1, mcc; exact_match x 2 filters
    with open_ledger(tmp_path / "ledger") as book:
        view = book.run(run.id)
        assert view.config["harness"] == "lm-eval"
        assert view.config["harness_version"] == reported["lm_eval_version"]
        assert view.config["tasks"]["tiny_gen"]["version"] == 2.0
        assert view.config["seeds"]["random_seed"] == 0
        rows = list(view.results("tiny_mc"))
    # per-choice log-likelihoods kept; acc_norm's probabilities are the length-normalised ones
    samples = [json.loads(x) for x in next(out.rglob("samples_tiny_mc_*.jsonl")).read_text().splitlines()]
    by_id = {(r["task"], r["id"]): r for r in rows}
    for s in samples:
        raw = by_id[("acc", str(s["doc_id"]))]
        norm = by_id[("acc_norm", str(s["doc_id"]))]
        assert raw["loglik"] == [float(x[0]) for x in s["filtered_resps"]]
        assert raw["item_hash"] == f"{s['doc_hash']}/{s['prompt_hash']}"
        best = max(range(3), key=lambda i: raw["probs"][str(i)])
        assert float(best == int(s["target"])) == s["acc"]
        best_norm = max(range(3), key=lambda i: norm["probs"][str(i)])
        assert float(best_norm == int(s["target"])) == s["acc_norm"]


@pytest.mark.slow
def test_lm_eval_stderr_beside_ci_and_cli(outputs, tmp_path):
    out = _need(outputs, "lm-eval")
    reported = _lm_results(out)
    run = import_path(out / "out", tmp_path / "ledger").runs[0]
    _, meta, ev = _evaluate_set(tmp_path / "ledger", run.id, "tiny_bool")
    checks = {c["task"]: c for c in harness_check(ev.to_dict(), meta)}
    assert all(c["equal"] for c in checks.values())
    assert checks["acc"]["harness_stderr"] == pytest.approx(reported["results"]["tiny_bool"]["acc_stderr,none"])
    assert checks["f1"]["stderr_method"].startswith("bootstrap")
    res = CliRunner().invoke(main, ["eval", f"{run.id}:tiny_gen.strict-match", "--ledger", str(tmp_path / "ledger")])
    assert res.exit_code == 0, res.output
    assert "Against what lm-eval reported:" in res.output
    assert "exact_match: lm-eval 0.0000 (stderr 0.0000), labledger 0.0000" in res.output
    assert "note: the value is 0" in res.output


@pytest.mark.slow
def test_lm_eval_compare_pairs_on_documents(outputs, tmp_path):
    a, b = _need(outputs, "lm-eval"), _need(outputs, "lm-eval-b")
    ledger = tmp_path / "ledger"
    ra = import_path(a / "out", ledger).runs[0]
    rb = import_path(b / "out", ledger, name="dummy-seed1").runs[0]
    with open_ledger(ledger) as book:
        pa, pb = book.run(ra.id).results_path("tiny_mc"), book.run(rb.id).results_path("tiny_mc")
    cmp = compare(pa, pb, metrics=harness_metrics(harness_meta(pa)), resamples=200)
    assert cmp.to_dict()["tasks"]["acc"]["paired"]
    ra_acc = _lm_results(a)["results"]["tiny_mc"]["acc,none"]
    rb_acc = _lm_results(b)["results"]["tiny_mc"]["acc,none"]
    assert cmp.metric("acc", "accuracy")["diff"] == pytest.approx(ra_acc - rb_acc, abs=1e-9)
    # the same documents with a changed prompt are different items: refused
    changed = tmp_path / "changed"
    shutil.copytree(b / "out", changed)
    samples = next(changed.rglob("samples_tiny_mc_*.jsonl"))
    lines = samples.read_text().splitlines()
    first = json.loads(lines[0])
    first["prompt_hash"] = "0" * 64
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    rc = import_path(changed, ledger, name="changed").runs[0]
    with open_ledger(ledger) as book:
        pc = book.run(rc.id).results_path("tiny_mc")
    with pytest.raises(ComparisonError, match="documents differ .* 1 paired items"):
        compare(pa, pc, metrics=["accuracy"], resamples=0)
    res = CliRunner().invoke(main, ["compare", f"{ra.id}:tiny_mc", f"{rc.id}:tiny_mc", "--ledger", str(ledger)])
    assert res.exit_code == 1 and "documents differ" in res.output


@pytest.mark.slow
def test_lm_eval_reimport_refused_and_original_kept(outputs, tmp_path):
    out = _need(outputs, "lm-eval")
    ledger = tmp_path / "ledger"
    import_path(out / "out", ledger)
    with pytest.raises(ImportSourceError, match="--again"):
        import_path(out / "out", ledger)
    again = import_path(out / "out", ledger, again=True, copy=True)
    with open_ledger(ledger) as book:
        view = book.run(again.runs[0].id)
        files = {f["path"] for f in view.meta["imported_from"]["files"]}
    assert any(f.endswith(".json") and "results_" in f for f in files)
    assert sum("samples_" in f for f in files) == 3


# ------------------------------------------------------------------------------------------------
# inspect_ai


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_inspect_recomputed_equals_reported(outputs, tmp_path, fmt):
    out = _need(outputs, "inspect")
    from inspect_ai.log import read_eval_log

    (log_path,) = (out / fmt).glob(f"*.{fmt}")
    log = read_eval_log(str(log_path))
    assert detect_format(log_path) == "inspect"
    run = import_path(log_path, tmp_path / "ledger").runs[0]
    _, meta, ev = _evaluate_set(tmp_path / "ledger", run.id, "tiny-qa")
    (score,) = log.results.scores
    assert ev.value("includes", "mean") == pytest.approx(score.metrics["accuracy"].value, abs=1e-9)
    body = ev.tasks["includes"]
    assert body["n"] == 6 == score.scored_samples  # questions, not attempts
    assert meta["metrics"]["includes"]["epochs"] == 2
    assert body["clusters"] == 3  # the passage metadata field of stderr(cluster="passage")
    assert meta["metrics"]["includes"]["stderr"] == pytest.approx(score.metrics["stderr2"].value)
    with open_ledger(tmp_path / "ledger") as book:
        rows = {r["id"]: r for r in book.run(run.id).results("tiny-qa")}
    for s in log.samples:
        assert rows[str(s.id)]["epochs"][s.epoch - 1] == (1.0 if s.scores["includes"].value == "C" else 0.0)
    assert rows["q0"]["pred"] == 0.5 and rows["q0"]["group"] == "p0"


@pytest.mark.slow
def test_inspect_eval_and_json_give_the_same_rows(outputs, tmp_path):
    out = _need(outputs, "inspect")
    ledger = tmp_path / "ledger"
    ids = [import_path(out / fmt, ledger).runs[0].id for fmt in ("eval", "json")]
    with open_ledger(ledger) as book:
        a, b = (book.run(i).results_path("tiny-qa") for i in ids)
    rows_a = [json.loads(x) for x in a.read_text().splitlines()]
    rows_b = [json.loads(x) for x in b.read_text().splitlines()]
    assert [(r["id"], r["pred"], r["epochs"], r["item_hash"]) for r in rows_a] == [
        (r["id"], r["pred"], r["epochs"], r["item_hash"]) for r in rows_b
    ]
    cmp = compare(a, b, metrics=["mean"], resamples=100)
    assert cmp.to_dict()["tasks"]["includes"]["paired"]


# ------------------------------------------------------------------------------------------------
# lighteval


@pytest.mark.slow
def test_lighteval_recomputed_equals_reported(outputs, tmp_path):
    out = _need(outputs, "lighteval")
    reported = json.loads(next((out / "out").rglob("results_*.json")).read_text())["results"]["tiny_mc|0"]
    assert detect_format(out / "out") == "lighteval"
    run = import_path(out / "out", tmp_path / "ledger").runs[0]
    assert run.counts == {"results:tiny_mc": 9}
    _, meta, ev = _evaluate_set(tmp_path / "ledger", run.id, "tiny_mc")
    assert ev.value("acc", "accuracy") == pytest.approx(reported["acc"], abs=1e-9)
    assert meta["metrics"]["acc"]["stderr"] == pytest.approx(reported["acc_stderr"])
    import pyarrow.parquet as pq

    details = pq.read_table(next((out / "out").rglob("*.parquet"))).to_pylist()
    with open_ledger(tmp_path / "ledger") as book:
        rows = {r["id"]: r for r in book.run(run.id).results("tiny_mc")}
    assert [d["doc"]["id"] for d in details] != sorted(d["doc"]["id"] for d in details)  # not in document order
    for d in details:
        r = rows[d["doc"]["id"]]
        assert r["gold"] == str(d["doc"]["gold_index"]) and r["loglik"] == d["model_response"]["logprobs"]


# ------------------------------------------------------------------------------------------------
# malformed files (hand-written, no harness needed)


def _lm_folder(tmp_path: Path, line: dict) -> Path:
    d = tmp_path / "lm"
    d.mkdir()
    (d / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps(
            {
                "results": {"t": {"acc,none": 1.0, "acc_stderr,none": 0.0}},
                "configs": {"t": {"output_type": "multiple_choice"}},
                "n-shot": {"t": 0},
                "versions": {"t": 1},
                "config": {"model": "m"},
                "lm_eval_version": "0.4.13",
            }
        )
    )
    good = {
        "doc_id": 0,
        "target": "0",
        "arguments": {"gen_args_0": {"arg_0": "q", "arg_1": " a"}, "gen_args_1": {"arg_0": "q", "arg_1": " b"}},
        "filtered_resps": [["-0.1", "False"], ["-2.0", "False"]],
        "filter": "none",
        "metrics": ["acc"],
        "doc_hash": "h",
        "prompt_hash": "p",
        "acc": 1.0,
    }
    (d / "samples_t_2026-01-01T00-00-00.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    return d


def test_lm_eval_minimal_folder_imports(tmp_path):
    d = _lm_folder(
        tmp_path,
        {
            "doc_id": 1,
            "target": "1",
            "arguments": {"gen_args_0": {"arg_0": "q", "arg_1": " a"}, "gen_args_1": {"arg_0": "q", "arg_1": " bb"}},
            "filtered_resps": [["-3", "False"], ["-2.0", "False"]],
            "filter": "none",
            "metrics": ["acc"],
            "acc": 1.0,
        },
    )
    run = import_path(d, tmp_path / "ledger", fmt="lm-eval").runs[0]
    assert run.counts == {"results:t": 2}


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"doc_id": 1, "filter": "none", "metrics": ["acc"]}, "acc"),
        (
            {"doc_id": 1, "filter": "none", "metrics": ["acc"], "acc": 0.0, "filtered_resps": [["x", "False"]]},
            "filtered_resps[0]",
        ),
        ({"doc_id": 1, "metrics": ["acc"]}, "filter"),
    ],
)
def test_lm_eval_malformed_line_names_file_line_field(tmp_path, line, field):
    d = _lm_folder(tmp_path, line)
    with pytest.raises(RecordError) as info:
        import_path(d, tmp_path / "ledger")
    assert info.value.source.endswith("samples_t_2026-01-01T00-00-00.jsonl")
    assert info.value.line == 2 and info.value.field == field
    assert not (tmp_path / "ledger" / "runs").exists() or not any((tmp_path / "ledger" / "runs").iterdir())


def test_inspect_newer_log_version_refused(tmp_path):
    log = tmp_path / "x.json"
    log.write_text(json.dumps({"version": 3, "status": "success", "eval": {"task": "t"}, "plan": {}, "samples": []}))
    with pytest.raises(RecordError, match="version 3 is not supported") as info:
        import_path(log, tmp_path / "ledger")
    assert info.value.field == "version"


# ------------------------------------------------------------------------------------------------
# suite table across models


@pytest.mark.slow
def test_suite_table_across_models(outputs, tmp_path):
    a, b = _need(outputs, "lm-eval"), _need(outputs, "lm-eval-b")
    ledger = str(tmp_path / "ledger")
    runner = CliRunner()
    for out, name in ((a, "dummy-s0"), (b, "dummy-s1")):
        res = runner.invoke(main, ["import", str(out / "out"), "--name", name, "--suite", "h", "--ledger", ledger])
        assert res.exit_code == 0, res.output
        # tiny_gen's two filters are one benchmark: lm-eval's first filter (strict-match) stands for it
        assert "Added 3 entries to suite 'h'" in res.output
        assert "tiny_gen: one benchmark in the suite, from tiny_gen.strict-match" in " ".join(res.output.split())
    res = runner.invoke(main, ["table", "--suite", "h", "--delta-from", "dummy-s0", "--json", "--ledger", ledger])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {r["benchmark"] for r in doc["rows"]} == {"tiny_mc", "tiny_bool", "tiny_gen.strict-match"}
    assert doc["mean"]["n"] == 3
    for col, value in doc["mean"]["values"].items():
        assert value == pytest.approx(sum(r["values"][col] for r in doc["rows"]) / 3, abs=1e-12)
    text = json.dumps(doc)
    with open_ledger(ledger) as book:  # each entry's evaluation: as `labledger eval` makes it, with lm-eval's values
        saved = book.run("dummy-s0").evaluation("tiny_mc.suite")
    (check,) = saved["harness"]["checks"]
    assert check["task"] == "tiny_mc" and check["equal"] and saved.suite is None
    acc_a = _lm_results(a)["results"]["tiny_mc"]["acc,none"]
    acc_b = _lm_results(b)["results"]["tiny_mc"]["acc,none"]
    assert str(round(acc_a, 6))[:5] in text or f"{acc_a}" in text
    assert f"{acc_b}" in text or str(round(acc_b, 6))[:5] in text


# ------------------------------------------------------------------------------------------------
# HELM (files from HELM's repository: crfm-helm cannot be installed beside the others)


def test_helm_run_folder(tmp_path):
    folder = next(p for p in HELM.iterdir() if p.name.startswith("bbq:"))
    assert detect_format(HELM) == "helm"
    (run,) = import_path(folder, tmp_path / "ledger").runs
    assert run.name == "google/gemini-1.5-pro-001"
    assert any("no run_spec.json" in n for n in run.notes)
    (set_name,) = [k.split(":", 1)[1] for k in run.counts]
    assert set_name == "bbq_subject_all_method_multiple_choice_joint"
    stats = {s["name"]["name"]: s["mean"] for s in json.loads((folder / "stats.json").read_text())}
    with open_ledger(tmp_path / "ledger") as book:
        path = book.run(run.id).results_path(set_name)
    meta = harness_meta(path)
    ev = evaluate(path, metrics=harness_metrics(meta), resamples=100)
    for metric in ("exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match"):
        assert ev.value(metric, "mean") == pytest.approx(stats[metric], abs=1e-9)
        assert ev.tasks[metric]["n"] == 2
    rows = {
        r["id"]: r
        for r in json.loads("[" + ",".join(path.read_text().splitlines()) + "]")
        if r["task"] == "exact_match"
    }
    assert rows["id58485"]["target"] == "Cannot be determined" and rows["id58485"]["prediction"] == "The"
    assert meta["metrics"]["exact_match"]["stderr"] is None


@pytest.mark.parametrize(
    "module",
    ["labledger.importers.harness", "labledger.importers.inspect_log", "labledger.analysis.harness"],
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    failures, tried = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


@pytest.mark.slow
def test_lm_eval_columns_equal_rows_on_real_output(outputs):
    """The columnar reader takes real lm-eval samples files and builds exactly the row path's rows (#13)."""
    from labledger.importers import lm_eval

    out = _need(outputs, "lm-eval")
    configs = _lm_results(out)["configs"]
    files = sorted(out.rglob("samples_*.jsonl"))
    assert files
    for path in files:
        task = next(t for t in configs if path.name.startswith(f"samples_{t}_"))
        cols = lm_eval._metric_columns(path, configs[task])
        rows = lm_eval._metric_rows(path, configs[task])
        assert cols is not None, path.name
        assert list(cols) == list(rows)
        for filt, mets in rows.items():
            assert list(cols[filt]) == list(mets)
            for name, m in mets.items():
                c = cols[filt][name]
                assert (c.shape, c.spec) == (m.shape, m.spec)
                assert (c.rows if m.shape == "skipped" else c.rows.rows()) == m.rows


# ------------------------------------------------------------------------------------------------
# the site's evaluation pages of harness sets (#44)

#: Metrics of a classification task that mean nothing over the choice positions of multiple-choice rows
#: (a harness's own f1 of label rows, lm-eval's, is not one of them).
CHOICE_POSITION_METRICS = {"roc_auc", "ece", "brier", "log_loss", "balanced_accuracy", "f1", "per_class"}


@pytest.mark.slow
@pytest.mark.parametrize("harness", ["lm-eval", "inspect", "lighteval"])
def test_site_evaluation_pages_show_the_harness_metrics_and_stderr_as_eval_does(outputs, tmp_path, harness):
    """Each harness set's page: only the harness's own metrics (no ROC-AUC, ECE... over choice
    positions), no reliability diagram or temperature illustration of choice rows, and the
    harness's values and stderrs beside labledger's: the very ``harness`` block of ``eval --json``."""
    from labledger.site import build_site, load_data_file

    out = _need(outputs, harness)
    ledger = tmp_path / "ledger"
    runs = import_path(out / ("eval" if harness == "inspect" else "out"), ledger).runs
    build_site(ledger, tmp_path / "site")
    pages = 0
    choice_sets = 0
    for run in runs:
        for key in run.counts:
            name = key.split(":", 1)[1]
            with open_ledger(ledger) as book:
                meta = harness_meta(book.run(run.id).results_path(name))
            _, page = load_data_file(tmp_path / "site" / "data" / "evals" / run.id / f"{name}.js")
            (doc,) = [d["doc"] for d in page["documents"] if d["kind"] == "evaluation"]
            for task, body in doc["tasks"].items():
                assert [m["metric"] for m in body["metrics"]] == [harness_metrics(meta)[task][0].split(":")[0]]
                if meta["metrics"][task].get("shape") == "choices":
                    assert not CHOICE_POSITION_METRICS & {m["metric"] for m in body["metrics"]}
                assert body.get("per_class") is None and body.get("confusion_matrix") is None
            assert doc.get("suite") is None  # the set's tasks are one harness task's metrics, not benchmarks
            res = CliRunner().invoke(main, ["eval", f"{run.id}:{name}", "--json", "--ledger", str(ledger)])
            assert res.exit_code == 0, res.output
            assert doc["harness"] == json.loads(res.output)["harness"]  # the CLI's payload, whole
            for c in doc["harness"]["checks"]:
                m = meta["metrics"][c["task"]]
                assert (c["harness_value"], c["harness_stderr"]) == (m["value"], m["stderr"])
            choices = {t for t, m in meta["metrics"].items() if m.get("shape") == "choices"}
            for task in choices & set(page["rows"]["tasks"]):
                view = page["rows"]["tasks"][task]
                assert "reliability" not in view and "positions, not classes" in view["confusion_note"]
                conf = view["confusion"]  # positions against positions: its diagonal is the harness's hits
                assert all(label.isdigit() for label in conf["labels"])
                hits = sum(conf["matrix"][i][i] for i in range(len(conf["labels"])))
                assert hits / view["n"] == pytest.approx(meta["metrics"][task]["value"], abs=1e-9)
                choice_sets += 1
            if choices:
                assert not (tmp_path / "site" / "data" / "evals" / run.id / f"{name}.logits.js").exists()
            pages += 1
    assert pages
    if harness in ("lm-eval", "lighteval"):
        assert choice_sets
