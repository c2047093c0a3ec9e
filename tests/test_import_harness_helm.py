"""HELM imports one result set per split and per perturbation, each equal to HELM's own stats (#44).

The run folder under tests/fixtures/helm/splits/ is crfm-helm 0.5.16's own output (``helm-run`` with
its ``simple/model1`` on a local scenario with a valid and a test split, two train trials and two
perturbations; tests/harness_runs/helm_run.py made it). crfm-helm cannot be installed beside the other
harnesses, so the test reads the committed output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from labledger import open_ledger
from labledger.analysis.evaluation import evaluate
from labledger.analysis.harness import harness_meta, harness_metrics
from labledger.errors import RecordError
from labledger.importers import import_path

SPLITS = Path(__file__).parent / "fixtures" / "helm" / "splits"
FOLDER = SPLITS / "arith_words:model=simple_model1"
METRICS = ("exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match")
LEDGER: list[Path] = []  # the module fixture's ledger


def _helm_stat(name: str, split: str, perturbation: dict | None) -> float:
    """HELM's own aggregated value from stats.json (read here, not through the importer)."""
    found = [
        s["mean"]
        for s in json.loads((FOLDER / "stats.json").read_text())
        if s["name"]["name"] == name
        and s["name"].get("split") == split
        and (s["name"].get("perturbation") or None) == perturbation
    ]
    assert len(found) == 1, (name, split, perturbation)
    return found[0]


def _instances(split: str) -> set[str]:
    state = json.loads((FOLDER / "scenario_state.json").read_text())
    return {rs["instance"]["id"] for rs in state["request_states"] if rs["instance"]["split"] == split}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    ledger = tmp_path_factory.mktemp("helm") / "ledger"
    LEDGER.append(ledger)
    (run,) = import_path(SPLITS, ledger).runs
    sets = {}
    with open_ledger(ledger) as book:
        for key in run.counts:
            name = key.split(":", 1)[1]
            path = book.run(run.id).results_path(name)
            meta = harness_meta(path)
            rows = [json.loads(x) for x in path.read_text().splitlines()]
            sets[name] = (meta, evaluate(path, metrics=harness_metrics(meta), resamples=0), rows)
    return run, sets


LOWER = {"name": "lowercase", "robustness": True, "fairness": False, "computed_on": "perturbed"}
TYPOS = {"name": "typos", "robustness": True, "fairness": False, "computed_on": "perturbed", "prob": 0.1}
ROBUST = {"name": "robustness", "robustness": True, "fairness": False, "computed_on": "worst"}
EXPECTED = {
    "arith_words": ("test", None),
    "arith_words.valid": ("valid", None),
    "arith_words.lowercase": ("test", LOWER),
    "arith_words.valid.lowercase": ("valid", LOWER),
    "arith_words.typos": ("test", TYPOS),
    "arith_words.valid.typos": ("valid", TYPOS),
    "arith_words.lowercase.worst": ("test", {**LOWER, "computed_on": "worst"}),
    "arith_words.valid.lowercase.worst": ("valid", {**LOWER, "computed_on": "worst"}),
    "arith_words.typos.worst": ("test", {**TYPOS, "computed_on": "worst"}),
    "arith_words.valid.typos.worst": ("valid", {**TYPOS, "computed_on": "worst"}),
    "arith_words.robustness.worst": ("test", ROBUST),
    "arith_words.valid.robustness.worst": ("valid", ROBUST),
}


def test_one_set_per_split_and_perturbation_each_equal_to_helm(imported):
    run, sets = imported
    assert set(sets) == set(EXPECTED)
    checked = 0
    for name, (split, pert) in EXPECTED.items():
        meta, ev, rows = sets[name]
        assert meta["split"] == split
        ids = {r["id"] for r in rows}
        assert ids == _instances(split), name  # the split's own instances, nothing pooled
        for metric in METRICS:
            assert ev.tasks[metric]["n"] == len(_instances(split))
            assert ev.value(metric, "mean") == pytest.approx(_helm_stat(metric, split, pert), abs=1e-9), (name, metric)
            assert meta["metrics"][metric]["value"] == _helm_stat(metric, split, pert)
            checked += 1
    assert checked == 48
    # the two splits really differ here: pooling them (what the import once did) is not HELM's value
    pooled = [r["pred"] for n in ("arith_words", "arith_words.valid") for r in sets[n][2] if r["task"] == "exact_match"]
    assert abs(sum(pooled) / len(pooled) - _helm_stat("exact_match", "test", None)) > 1e-3


def test_train_trials_and_perturbed_copies_kept(imported):
    run, sets = imported
    rows = {r["id"]: r for r in sets["arith_words.lowercase"][2] if r["task"] == "quasi_exact_match"}
    orig = {r["id"]: r for r in sets["arith_words"][2] if r["task"] == "quasi_exact_match"}
    assert all(len(r["trials"]) == 2 for r in rows.values())
    some = next(iter(rows))
    assert rows[some]["prompt"].splitlines()[-1] == rows[some]["prompt"].splitlines()[-1].lower()
    assert rows[some]["item_hash"] != orig[some]["item_hash"]  # another input: another item
    worst = {r["id"]: r for r in sets["arith_words.robustness.worst"][2] if r["task"] == "exact_match"}
    lower = {r["id"]: r["pred"] for r in sets["arith_words.lowercase"][2] if r["task"] == "exact_match"}
    typos = {r["id"]: r["pred"] for r in sets["arith_words.typos"][2] if r["task"] == "exact_match"}
    base = {r["id"]: r["pred"] for r in sets["arith_words"][2] if r["task"] == "exact_match"}
    for i, r in worst.items():
        assert r["pred"] <= min(base[i], lower[i], typos[i]) + 1e-12
    (note,) = [n for n in run.notes if "perturbations" in n]
    assert "lowercase, typos" in note and "computed_on=original" in note


def test_unreadable_run_folder_fails_only_itself(tmp_path):
    """A run folder that cannot be read is left out with its one-line error, in the run of its
    model; the suite's other folders are stored. No readable folder: nothing is stored."""
    suite = tmp_path / "suite"
    shutil.copytree(FOLDER, suite / FOLDER.name)
    bad = suite / "arith_words:model=simple_model1,copy"
    shutil.copytree(FOLDER, bad)
    per = json.loads((bad / "per_instance_stats.json").read_text())
    del per[3]["instance_id"]
    (bad / "per_instance_stats.json").write_text(json.dumps(per))
    (run,) = import_path(suite, tmp_path / "ledger").runs
    assert run.name == "simple/model1" and "results:arith_words" in run.counts
    (err,) = run.errors
    assert err == f"{bad}/per_instance_stats.json: field '[3].instance_id' is missing (task {bad.name}: not imported)"
    with pytest.raises(RecordError, match=r"field '\[3\]\.instance_id' is missing \(task .*: not imported\)"):
        import_path(bad, tmp_path / "alone")
    with open_ledger(tmp_path / "alone") as book:
        assert book.runs() == []


def _columns(rows: list[dict]) -> dict[str, tuple[float, ...]]:
    """Each metric's values in id order (the rows the comparison reads)."""
    by: dict[str, dict[str, float]] = {}
    for r in rows:
        by.setdefault(r["task"], {})[r["id"]] = r["pred"]
    return {t: tuple(v[k] for k in sorted(v)) for t, v in by.items()}


def _holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_alias_metrics_with_the_same_values_are_one_test_of_the_family(imported):
    """HELM's alias metrics (several names for the same per-instance values) are one test each in
    the multiple-comparison correction, and the family says so: the unperturbed test split against
    HELM's robustness worst case (the same instances, paired)."""
    from labledger.analysis.comparison import compare
    from labledger.analysis.harness import set_metrics

    run, sets = imported
    a, b = "arith_words", "arith_words.robustness.worst"
    cols_a, cols_b = _columns(sets[a][2]), _columns(sets[b][2])
    firsts: dict[tuple, str] = {}
    first_of = {m: firsts.setdefault((cols_a[m], cols_b[m]), m) for m in METRICS}
    unique = sorted(set(first_of.values()), key=METRICS.index)
    assert 1 < len(unique) < len(METRICS)  # the fixture has aliases and metrics that differ
    with open_ledger(LEDGER[-1]) as book:
        pa, pb = book.run(run.id).results_path(a), book.run(run.id).results_path(b)
    doc = compare(pa, pb, metrics=set_metrics(pa), resamples=200).doc
    entry = {t: body.metrics[0] for t, body in doc.tasks.items()}
    aliases = [m for m in METRICS if first_of[m] != m]
    assert doc.family.startswith(f"{len(unique)} tests, Holm ({len(METRICS)} compared metrics: {len(aliases)} with")
    for m in aliases:
        assert f"{m} = {first_of[m]}" in doc.family
        e, f = entry[m], entry[first_of[m]]
        assert (e.diff, e.ci_low, e.ci_high, e.p_value, e.p_adjusted) == (
            f.diff,
            f.ci_low,
            f.ci_high,
            f.p_value,
            f.p_adjusted,
        )
    for m, adj in zip(unique, _holm([entry[m].p_value for m in unique])):
        assert entry[m].p_adjusted == pytest.approx(adj, abs=1e-12)


def test_the_eight_bbq_aliases_are_one_test(tmp_path):
    """HELM's bbq run (HELM's own files): 8 metrics, every one the same values: one test."""
    from labledger.analysis.rundiff import diff_runs

    folder = next(p for p in (SPLITS.parent).iterdir() if p.name.startswith("bbq:"))
    ledger = tmp_path / "ledger"
    (first,) = import_path(folder, ledger).runs
    (again,) = import_path(folder, ledger, again=True).runs
    with open_ledger(ledger) as book:
        (cmp,) = diff_runs(book, first.id, again.id, resamples=50)["comparisons"]
    assert len(cmp["metrics"]) == 8
    assert cmp["family"].startswith("1 test, Holm (8 compared metrics: 7 with the same values as another")
    assert len({(m["p"], m["p_adjusted"]) for m in cmp["metrics"]}) == 1


def test_a_suite_holds_the_run_once_from_its_unperturbed_test_split(imported):
    """Splits and perturbations are alternatives of one HELM run, not benchmarks of a suite's mean."""
    from labledger.analysis.benchmarks import read_entries
    from labledger.importers.harness import suite_entries

    run, _ = imported
    with open_ledger(LEDGER[-1]) as book:
        added, notes = suite_entries(book, [run.id], suite="helm", resamples=0)
        entries = read_entries(book, suite="helm")
    assert added == 1 and [e.benchmark for e in entries] == ["arith_words"]
    assert entries[0].value == pytest.approx(_helm_stat("exact_match", "test", None), abs=1e-9)
    (note,) = notes
    assert note.startswith("arith_words:model=simple_model1: one benchmark in the suite, from arith_words;")
    assert all(name in note for name in EXPECTED if name != "arith_words")


def test_tokens_and_latency_per_instance_are_helms_usage_stats(imported):
    """Each row carries HELM's num_prompt_tokens, num_output_tokens and inference_runtime of its
    instance and split (mean over train trials; the runtime in ms), so mean_tokens_in and
    mean_latency_ms read them (#45)."""
    from labledger.analysis.evaluation import evaluate as ev_rows

    _, sets = imported
    per = json.loads((FOLDER / "per_instance_stats.json").read_text())
    want: dict[tuple[str, str], dict[str, list[float]]] = {}
    for entry in per:
        for s in entry["stats"]:
            n = s["name"]
            if n["name"] in ("num_prompt_tokens", "num_output_tokens", "inference_runtime") and not n.get(
                "perturbation"
            ):
                want.setdefault((n["split"], entry["instance_id"]), {}).setdefault(n["name"], []).append(s["mean"])
    checked = 0
    for name, split in (("arith_words", "test"), ("arith_words.valid", "valid")):
        rows = [r for r in sets[name][2] if r["task"] == "exact_match"]
        for r in rows:
            w = want[(split, r["id"])]
            assert r["tokens_in"] == pytest.approx(sum(w["num_prompt_tokens"]) / len(w["num_prompt_tokens"]))
            assert r["tokens_out"] == pytest.approx(sum(w["num_output_tokens"]) / len(w["num_output_tokens"]))
            assert r["latency_ms"] == pytest.approx(1000 * sum(w["inference_runtime"]) / len(w["inference_runtime"]))
            checked += 1
        got = ev_rows(rows, metrics=["mean_tokens_in"], resamples=0).value("exact_match", "mean_tokens_in")
        assert got == pytest.approx(sum(r["tokens_in"] for r in rows) / len(rows))
    assert checked == len(_instances("test")) + len(_instances("valid"))
