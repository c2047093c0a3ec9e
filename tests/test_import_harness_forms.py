"""Harness outputs of the forms the first importers refused (#44), made by each harness itself.

lm-eval: its ``dummy`` model on four tiny local tasks (tests/harness_runs/lm_eval_forms_run.py):
winogrande's form with the gold index from a ``doc_to_text`` field and from a ``doc_to_text``
function, a gold given as the answer's text, and the usual form; and a task that cannot be read
fails only itself. inspect_ai: ``mockllm/model`` with a dict-valued scorer, two epoch reducers and
errored samples (tests/harness_runs/inspect_forms_run.py), and the site's page of that set in a
browser. Every recomputed value is checked against what the harness reported. Offline: nothing is
downloaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from harness_process import run_harness

from labledger import open_ledger
from labledger.analysis.evaluation import evaluate
from labledger.analysis.harness import harness_meta, harness_metrics
from labledger.cli import main
from labledger.errors import LedgerError, RecordError
from labledger.importers import import_path

pytestmark = pytest.mark.slow  # each module fixture runs a harness (10-20 s)


@pytest.fixture(scope="module")
def forms(tmp_path_factory) -> Path:
    """lm-eval's output folder for the four tasks (about 20 s: lm-eval loads each local dataset)."""
    root = tmp_path_factory.mktemp("lm_forms")
    run_harness("lm_eval_forms_run.py", root, package="lm_eval")
    return root / "out"


def _results(out: Path) -> dict:
    return json.loads(next(out.rglob("results_*.json")).read_text())


def _sets(ledger: Path, run) -> dict:
    out = {}
    with open_ledger(ledger) as book:
        for key in run.counts:
            if key.startswith("results:"):
                name = key.split(":", 1)[1]
                path = book.run(run.id).results_path(name)
                meta = harness_meta(path)
                rows = [json.loads(x) for x in path.read_text().splitlines()]
                out[name] = (meta, evaluate(path, metrics=harness_metrics(meta), resamples=0), rows)
    return out


def test_every_form_imports_and_equals_lm_eval(forms, tmp_path):
    reported = _results(forms)["results"]
    (run,) = import_path(forms, tmp_path / "ledger").runs
    assert run.errors == []
    sets = _sets(tmp_path / "ledger", run)
    assert set(sets) == {"wino_field", "wino_func", "gold_text", "plain_mc"}
    checked = 0
    for name, (meta, ev, _) in sets.items():
        for metric in meta["metrics"]:
            assert ev.value(metric, "accuracy") == pytest.approx(reported[name][f"{metric},none"], abs=1e-9), (
                name,
                metric,
            )
            assert ev.tasks[metric]["n"] == _results(forms)["n-samples"][name]["effective"]
            checked += 1
    assert checked == 6  # acc x 4, acc_norm of gold_text and plain_mc
    assert sets["wino_field"][0]["gold_from"] == ["doc.label (doc_to_text)"]
    assert sets["gold_text"][0]["gold_from"] == ["target (the answer's text)"]
    assert sets["wino_func"][0]["gold_from"] == ["lm-eval's per-document acc (doc_to_text is a function)"]
    (note,) = [n for n in run.notes if n.startswith("wino_func:")]
    assert "not recomputed independently" in note
    # winogrande's form: gold and prediction are choices (the option filled in), not the continuation
    samples = [json.loads(x) for x in next(forms.rglob("samples_wino_field_*.jsonl")).read_text().splitlines()]
    rows = {r["id"]: r for r in sets["wino_field"][2]}
    for s in samples:
        r = rows[str(s["doc_id"])]
        assert r["gold"] == str(s["doc"]["label"])
        assert r["choices"][int(r["gold"])].endswith(s["doc"]["option1" if s["doc"]["label"] == 0 else "option2"])
    # the answer's text: its index among the choices
    text_rows = [r for r in sets["gold_text"][2] if r["task"] == "acc"]
    assert all(r["choices"][int(r["gold"])] == r["target"] for r in text_rows)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_one_unreadable_task_fails_only_itself(forms, tmp_path, monkeypatch, workers):
    monkeypatch.setenv("LABLEDGER_IMPORT_WORKERS", workers)  # the serial path and the worker pool
    broken = tmp_path / "out"
    shutil.copytree(forms, broken)
    samples = next(broken.rglob("samples_gold_text_*.jsonl"))
    lines = samples.read_text().splitlines()
    doc = json.loads(lines[2])
    doc["target"] = "purple"  # not one of the choices
    samples.write_text("\n".join([*lines[:2], json.dumps(doc), *lines[3:]]) + "\n")
    ledger = tmp_path / "ledger"
    (run,) = import_path(broken, ledger).runs
    assert set(run.counts) >= {"results:wino_field", "results:wino_func", "results:plain_mc"}
    assert "results:gold_text" not in run.counts
    (err,) = run.errors
    assert err.startswith(f"{samples}:3: field 'target' must be the gold choice's index or its text")
    assert err.endswith("(task gold_text: not imported)") and "\n" not in err
    reported = _results(forms)["results"]
    sets = _sets(ledger, run)
    assert sets["plain_mc"][1].value("acc", "accuracy") == pytest.approx(reported["plain_mc"]["acc,none"], abs=1e-9)
    with open_ledger(ledger) as book:
        assert any("task gold_text" in n["text"] for n in book.run(run.id).notes())


def test_cli_prints_the_task_error_and_exits_1_with_the_rest_stored(forms, tmp_path):
    broken = tmp_path / "out"
    shutil.copytree(forms, broken)
    samples = next(broken.rglob("samples_plain_mc_*.jsonl"))
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join([*lines[:1], "{not json", *lines[2:]]) + "\n")
    ledger = tmp_path / "ledger"
    res = CliRunner(env={"COLUMNS": "1000"}).invoke(main, ["import", str(broken), "--ledger", str(ledger)])
    assert res.exit_code == 1, res.output
    (line,) = [x for x in res.output.splitlines() if "error: " in x]
    assert line.strip().startswith(f"error: {samples}:2: ") and line.endswith("(task plain_mc: not imported)")
    assert "1 task(s) could not be read" in res.output
    res = CliRunner().invoke(main, ["runs", "--json", "--ledger", str(ledger)])
    assert res.exit_code == 0 and len(json.loads(res.output)["runs"]) == 1


def test_every_task_unreadable_stores_nothing(forms, tmp_path):
    broken = tmp_path / "out"
    shutil.copytree(forms, broken)
    for samples in broken.rglob("samples_*.jsonl"):
        samples.write_text("{not json\n")
    with pytest.raises(RecordError, match=r"samples_\w+_.*:1: .*\(task \w+: not imported\); 3 more task\(s\)") as info:
        import_path(broken, tmp_path / "ledger")
    assert info.value.line == 1
    with open_ledger(tmp_path / "ledger") as book:
        assert book.runs() == []


# ------------------------------------------------------------------------------------------------
# inspect_ai: a dict-valued scorer, two epoch reducers, errored samples


@pytest.fixture(scope="module")
def inspect_forms(tmp_path_factory) -> Path:
    """inspect_ai's ``.eval`` log of tests/harness_runs/inspect_forms_run.py (mockllm/model, about 10 s)."""
    root = tmp_path_factory.mktemp("inspect_forms")
    run_harness("inspect_forms_run.py", root, package="inspect_ai")
    (log,) = (root / "eval").glob("*.eval")
    return log


def test_inspect_dict_scorer_reducers_and_errored_samples(inspect_forms, tmp_path):
    from inspect_ai.log import read_eval_log

    own = read_eval_log(str(inspect_forms))  # inspect's own reader: what it reported
    reported = {(s.scorer, s.name, s.reducer): s.metrics for s in own.results.scores}
    (run,) = import_path(inspect_forms, tmp_path / "ledger").runs
    assert run.errors == []
    ((name, (meta, ev, rows)),) = _sets(tmp_path / "ledger", run).items()
    assert name == "forms-qa"
    expected = {
        "includes.mean": ("includes", "includes", "mean", "accuracy"),
        "includes.max": ("includes", "includes", "max", "accuracy"),
        "a.mean": ("judge", "a", "mean", "mean"),
        "a.max": ("judge", "a", "max", "mean"),
        "b.mean": ("judge", "b", "mean", "mean"),
        "b.max": ("judge", "b", "max", "mean"),
    }
    assert set(meta["metrics"]) == set(expected)
    for metric, (scorer, key, reducer, headline) in expected.items():
        metrics = reported[(scorer, key, reducer)]
        assert ev.value(metric, "mean") == pytest.approx(metrics[headline].value, abs=1e-9), metric
        assert meta["metrics"][metric]["stderr"] == pytest.approx(metrics["stderr"].value, abs=1e-12)
        assert ev.tasks[metric]["n"] == 6  # the 8 samples less the 2 that errored
    # each key of the dict is its own metric; each epoch kept
    b_rows = [r for r in rows if r["task"] == "b.max"]
    assert all(len(r["epochs"]) == 2 and r["pred"] == max(r["epochs"]) for r in b_rows)
    # the errored samples are counted and named, as inspect counts them
    assert own.results.completed_samples == 12 and own.results.total_samples == 16
    (note,) = run.notes
    assert note.startswith("forms-qa: 12 of 16 samples completed") and "q3 (RuntimeError" in note and "q6" in note
    assert meta["errored"] == ["q3", "q6"] and {r["id"] for r in rows}.isdisjoint({"q3", "q6"})


# ------------------------------------------------------------------------------------------------
# lighteval: corpus-level metrics, one task at two few-shot counts


@pytest.fixture(scope="module")
def lighteval_forms(tmp_path_factory) -> Path:
    """lighteval's output folder of tests/harness_runs/lighteval_forms_run.py (dummy model, about 15 s)."""
    root = tmp_path_factory.mktemp("lighteval_forms")
    run_harness("lighteval_forms_run.py", root, package="lighteval")
    return root / "out"


def test_lighteval_corpus_metrics_and_few_shot_variants(lighteval_forms, tmp_path):
    reported = json.loads(next(lighteval_forms.rglob("results_*.json")).read_text())["results"]
    (run,) = import_path(lighteval_forms, tmp_path / "ledger").runs
    assert run.errors == []
    sets = _sets(tmp_path / "ledger", run)
    assert set(sets) == {"tiny_mc.0-shot", "tiny_mc.1-shot"}  # the two few-shot counts, not one name twice
    for name, key in (("tiny_mc.0-shot", "tiny_mc|0"), ("tiny_mc.1-shot", "tiny_mc|1")):
        meta, ev, rows = sets[name]
        assert meta["task"] == key
        assert ev.value("acc", "accuracy") == pytest.approx(reported[key]["acc"], abs=1e-9)
        assert ev.value("mcc", "mcc") == pytest.approx(reported[key]["mcc"], abs=1e-9)  # recomputed
        f1 = meta["metrics"]["loglikelihood_f1"]
        assert f1["metric"] == "" and f1["value"] == reported[key]["loglikelihood_f1"]  # reported, not evaluated
        assert f1["from_items"] == pytest.approx(reported[key]["loglikelihood_f1"], abs=1e-9)
        assert {r["task"] for r in rows} == {"acc", "mcc"}  # no rows another metric would be computed on
        (note,) = [n for n in run.notes if n.startswith(f"{name}:")]
        assert "corpus-level" in note and "loglikelihood_f1" in note and "equal" in note
    # lighteval's reported mcc differs between the two counts: the sets are not one pooled set
    assert reported["tiny_mc|0"]["mcc"] != reported["tiny_mc|1"]["mcc"]


def test_lighteval_unreadable_task_fails_only_itself(lighteval_forms, tmp_path):
    broken = tmp_path / "out"
    shutil.copytree(lighteval_forms, broken)
    (bad,) = broken.rglob("details_tiny_mc|1_*.parquet")
    bad.write_bytes(b"not parquet")
    (run,) = import_path(broken, tmp_path / "ledger").runs
    assert set(run.counts) == {"results:tiny_mc.0-shot"}
    (err,) = run.errors
    assert err.startswith(f"{bad}: not a readable Parquet file") and err.endswith("(task tiny_mc|1: not imported)")


@pytest.mark.filterwarnings("ignore::labledger.errors.TornLineWarning")  # the torn line is said, then skipped
@pytest.mark.parametrize("cut", ["line", "torn"])
def test_lm_eval_truncated_samples_refused_unless_partial(forms, tmp_path, cut):
    """A samples file with fewer documents than lm-eval's n-samples (a whole line missing, or a
    torn last line) fails its task with one line; ``--partial`` imports it with a note."""
    broken = tmp_path / "out"
    shutil.copytree(forms, broken)
    samples = next(broken.rglob("samples_plain_mc_*.jsonl"))
    data = samples.read_text()
    lines = data.splitlines(keepends=True)
    samples.write_text("".join(lines[:-1]) if cut == "line" else data[: len(data) - len(lines[-1]) // 2])
    stated = _results(forms)["n-samples"]["plain_mc"]["effective"]
    (run,) = import_path(broken, tmp_path / "refused").runs
    assert "results:plain_mc" not in run.counts and "results:gold_text" in run.counts
    (err,) = run.errors
    assert err.startswith(f"{samples}: field 'n-samples' is {stated} in results_")
    assert f"holds {stated - 1} documents" in err and err.endswith("(task plain_mc: not imported)")
    res = CliRunner(env={"COLUMNS": "1000"}).invoke(main, ["import", str(broken), "--ledger", str(tmp_path / "cli")])
    assert res.exit_code == 1 and "--partial imports what is there" in res.output
    res = CliRunner(env={"COLUMNS": "1000"}).invoke(
        main, ["import", str(broken), "--partial", "--json", "--ledger", str(tmp_path / "partial")]
    )
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.output)["runs"]
    assert doc["errors"] == [] and doc["counts"]["results:plain_mc"] == 2 * (stated - 1)  # acc, acc_norm
    assert f"plain_mc: {stated - 1} of the {stated} documents lm-eval states" in " ".join(doc["notes"])


@pytest.mark.parametrize("fault", ["value", "status"])
def test_inspect_unreadable_log_fails_only_itself(inspect_forms, tmp_path, fault):
    """A second log of the same eval() call that cannot be imported (a score value of no known form,
    an unfinished evaluation) is left out with its one-line error; the run keeps the other log."""
    from inspect_ai.log import read_eval_log, write_eval_log

    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(inspect_forms, folder / inspect_forms.name)
    log = read_eval_log(str(inspect_forms))
    log.eval.task = "forms-copy"
    if fault == "value":
        next(s for s in log.samples if s.scores).scores["includes"].value = [1, 2]
    else:
        log.status = "started"
    bad = folder / "copy.json"
    write_eval_log(log, str(bad), format="json")
    (run,) = import_path(folder, tmp_path / "ledger").runs
    assert set(run.counts) == {"results:forms-qa"}
    (err,) = run.errors
    assert str(bad) in err and err.endswith("(task forms-copy: not imported)") and "\n" not in err
    assert ("field 'scores.includes.value'" in err) if fault == "value" else ("status is 'started'" in err)
    # the only log of a run unreadable: nothing stored
    with pytest.raises(LedgerError, match=r"\(task forms-copy: not imported\)"):
        import_path(bad, tmp_path / "alone")
    with open_ledger(tmp_path / "alone") as book:
        assert book.runs() == []


@pytest.mark.browser
def test_the_evaluation_page_shows_inspects_values_stderrs_and_errored_samples(inspect_forms, tmp_path, browser):
    """In a real browser (headless Chromium, from file://): the page of inspect's set names the
    errored samples and sets each of inspect's values and stderrs beside labledger's."""
    from inspect_ai.log import read_eval_log

    from labledger.site import build_site

    own = read_eval_log(str(inspect_forms))
    stderr = {f"{s.name}.{s.reducer}": s.metrics["stderr"].value for s in own.results.scores}
    (run,) = import_path(inspect_forms, tmp_path / "ledger").runs
    build_site(tmp_path / "ledger", tmp_path / "site")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto((tmp_path / "site" / "eval.html").as_uri() + f"#run={run.id}&name=forms-qa")
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        callout = page.locator(".callout").first.inner_text()
        assert "completed 12 of 16 samples" in callout and callout.endswith("q3, q6")
        rows = page.locator("table.harness-check tbody tr")
        assert rows.count() == len(stderr) == 6
        for i in range(rows.count()):
            cells = rows.nth(i).locator("td").all_inner_texts()
            metric, se = cells[0], cells[2]
            assert float(se) == pytest.approx(stderr[metric], rel=1e-3), metric  # shown to 4 digits
            assert cells[5] == "same"
        assert errors == []
    finally:
        page.close()
