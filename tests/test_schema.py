"""Typed documents (#11): MetricId, the codec and its versions, the p-value rule, JSON Schemas that
every producer's output and every ``--json`` output validate against, and a ledger written by the
code before typed documents (tests/fixtures/ledger-v1) opened with this one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import orjson
import pytest
from click.testing import CliRunner
from import_sources import results_rows, write_jsonl

import labledger
from labledger.analysis.benchmarks import Entry, record_evaluation, version_table
from labledger.cli import main
from labledger.errors import LedgerError, RecordError
from labledger.metrics.registry import list_metrics, metric_key, parse_metric
from labledger.schema import (
    KINDS,
    ComparisonDoc,
    EvaluationDoc,
    MetricId,
    NewerDocumentError,
    ci_label,
    decode,
    encode,
    format_p,
    json_schema,
)

FIXTURE = Path(__file__).parent / "fixtures" / "ledger-v1"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())


def validate(kind: str, doc: dict) -> None:
    """``doc`` validates against the JSON Schema of ``kind`` and decodes without losing a field."""
    jsonschema.validate(doc, json_schema(kind))
    back = decode(doc, kind=kind).to_dict()
    missing = {k for k in doc if k not in back and k != "version"}
    assert not missing, f"{kind}: the schema drops {missing}"
    for k, v in doc.items():
        if k not in ("version", "kind", "schema_version"):
            assert back[k] == v, (kind, k)


# -- MetricId ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spellings", "key"),
    [
        (
            ["f1:average=macro", "f1[average=macro]", "macro_f1", "Macro-F1", "macro f1", "F1 (macro)"],
            "f1[average=macro]",
        ),
        (["accuracy", "Acc.", "acc", "Accuracy"], "accuracy"),
        (["ndcg@10", "ndcg:k=10", "ndcg[k=10]", "NDCG@10"], "ndcg[k=10]"),
        (["recall@5", "recall_at_k:k=5"], "recall_at_k[k=5]"),
        (
            ["f1(average=binary, pos_label=yes, zero_division=0.0)", "f1:average=binary,pos_label=yes,zero_division=0"],
            "f1[average=binary,pos_label=yes,zero_division=0]",
        ),
        (["exact match", "EM", "exact_match"], "exact_match"),
    ],
)
def test_every_spelling_of_a_metric_is_one_id(spellings, key):
    ids = {MetricId.parse(s) for s in spellings}
    assert len(ids) == 1 and next(iter(ids)).key == key


def test_metric_id_is_a_value():
    a = MetricId("f1", {"zero_division": 0.0, "average": "macro", "pos_label": None})
    b = MetricId.parse("f1[average=macro,zero_division=0]")
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a.short == "f1[average=macro]" and a.covers(MetricId.parse("macro_f1"))
    assert not MetricId.parse("macro_f1").covers(a) and a != MetricId.parse("f1")
    assert MetricId.parse("F1", table=True).key == "f1[average=binary]" and MetricId.parse("F1").key == "f1"
    with pytest.raises(AttributeError):
        a.name = "x"  # type: ignore[misc]


def test_registry_keys_are_metric_ids():
    for m in list_metrics():
        spec = parse_metric(metric_key(m.name, m.params))
        assert spec.name == m.name and MetricId(spec.name, dict(spec.params)) == MetricId(m.name, m.params)


# -- formats -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("p", "text"),
    [
        (None, "–"),
        (float("nan"), "–"),
        (0.0, "< 0.001"),
        (0.000999, "< 0.001"),
        (0.001, "0.0010"),
        (0.0012, "0.0012"),
        (0.0509, "0.051"),
        (0.0995, "0.10"),
        (0.23, "0.23"),
        (0.5, "0.50"),
        (1.0, "1.0"),
    ],
)
def test_one_p_value_rule(p, text):
    assert format_p(p) == text


def test_ci_label_is_the_stored_level():
    assert [ci_label(x) for x in (0.95, 0.9, 0.99, 0.995)] == ["95% CI", "90% CI", "99% CI", "99.5% CI"]


# -- codec ---------------------------------------------------------------------------------------
def _eval_doc(**kw) -> EvaluationDoc:
    rows = [{"id": i, "task": "t", "gold": "a" if i % 3 else "b", "pred": "a"} for i in range(30)]
    return labledger.evaluate(rows, metrics=["accuracy", "macro_f1"], resamples=50, **kw).doc


def test_encode_decode_round_trip_and_dispatch_on_kind():
    doc = _eval_doc()
    again = decode(encode(doc))
    assert isinstance(again, EvaluationDoc) and again == doc
    assert again.kind == "evaluation" and again.schema_version == 2


def test_version_1_is_migrated_and_a_newer_version_is_refused(tmp_path):
    v1 = {k: v for k, v in _eval_doc().to_dict().items() if k not in ("kind", "schema_version")}
    v1.update(kind="evaluation", version=1)
    assert decode(v1).to_dict()["schema_version"] == 2
    path = tmp_path / "evaluation.json"
    path.write_bytes(orjson.dumps({**v1, "schema_version": 7}))
    with pytest.raises(NewerDocumentError, match=r"evaluation\.json.*schema_version 7.*reads up to 2"):
        decode(path.read_bytes(), source=str(path))
    with pytest.raises(RecordError, match="does not match its schema"):
        decode({"kind": "comparison", "a": 1}, source="x.json")
    with pytest.raises(RecordError, match="unknown document kind"):
        decode({"kind": "nope"})


def test_a_newer_stored_document_is_refused_naming_the_file(tmp_path):
    book = labledger.open_ledger(tmp_path / "ledger", create=True)
    with labledger.start_run("r", ledger=tmp_path / "ledger") as run:
        pass
    path = book.save_evaluation(run.id, "ev", _eval_doc())
    raw = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps({**raw, "schema_version": 3}))
    with pytest.raises(LedgerError, match=r"ev/evaluation\.json: evaluation document has schema_version 3"):
        book.run(run.id).evaluation("ev")
    res = CliRunner().invoke(main, ["show", run.id, "--ledger", str(tmp_path / "ledger")])
    assert res.exit_code == 0  # listing a run does not read its documents


def test_every_kind_has_a_schema_and_the_cli_prints_it():
    every = json_schema()
    assert set(every["kinds"]) == set(KINDS)
    for kind in KINDS:
        res = CliRunner().invoke(main, ["schema", kind])
        assert res.exit_code == 0 and json.loads(res.output) == json_schema(kind)
        jsonschema.Draft202012Validator.check_schema(json_schema(kind))
        assert (Path(__file__).parents[1] / "docs" / "schemas" / f"{kind}.json").read_text() == res.output
    res = CliRunner().invoke(main, ["schema", "--markdown"])
    assert res.exit_code == 0 and "### `version_table`" in res.output
    assert CliRunner().invoke(main, ["schema", "nope"]).exit_code == 2


# -- every producer and every --json output validates ----------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("schema")
    ledger = root / "ledger"
    data_a = write_jsonl(root / "a.jsonl", results_rows(60, seed=0))
    rows_b = results_rows(60, seed=0)
    for i, r in enumerate(rows_b):
        if i % 5 == 0:
            r["probs"] = {k: 1 - v for k, v in r["probs"].items()}
    data_b = write_jsonl(root / "b.jsonl", rows_b)
    ids = {}
    for name, data in (("a", data_a), ("b", data_b)):
        with labledger.start_run(name, ledger=ledger) as run:
            run.log(1, loss=0.5)
            run.log_results("test", data)
        ids[name] = run.id
    book = labledger.open_ledger(ledger)
    for name in ("a", "b"):
        view = book.run(ids[name])
        ev = labledger.evaluate(view.results_path("test"), by="len", resamples=50)
        record_evaluation(book, ids[name], "test", ev.doc, model=name, results_path=str(view.results_path("test")))
    return {"root": root, "ledger": str(ledger), "ids": ids, "a": str(data_a), "b": str(data_b), "book": book}


def _cli(world, *args):
    res = CliRunner().invoke(main, [*args, "--ledger", world["ledger"]])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_library_producers_validate(world):
    ev = labledger.evaluate(world["a"], by="len", resamples=50)
    validate("evaluation", ev.to_dict())
    cmp = labledger.compare(world["a"], world["b"], resamples=50)
    validate("comparison", cmp.to_dict())
    assert (
        isinstance(cmp.doc, ComparisonDoc)
        and cmp.metric("hover", "accuracy").diff == cmp.doc.tasks["hover"].metrics[0].diff
    )
    entries = [
        Entry(model=m, suite="s", benchmark="b", metric="f1", params={"average": "macro"}, value=v)
        for m, v in (("x", 0.5), ("y", 0.6))
    ]
    for e in entries:
        validate("benchmark_entry", e.to_dict())
        assert e.to_dict()["metric_id"] == "f1[average=macro]"
    validate("version_table", version_table(entries, suite="s", models=["x", "y"], delta_from="x").to_dict())


def test_cli_json_outputs_validate(world):
    a, b = world["ids"]["a"], world["ids"]["b"]
    validate("evaluation", _cli(world, "eval", f"{a}:test", "--resamples", "50", "--json"))
    validate("comparison", _cli(world, "compare", f"{a}:test", f"{b}:test", "--resamples", "50", "--json"))
    table = _cli(world, "table", "--delta-from", "a", "--json")
    validate("version_table", table)
    for row in _cli(world, "runs", "--json")["runs"]:
        validate("run_summary", row)
    sweep = _cli(world, "sweep", f"{a}:test", "--positive", "SUPPORTED", "--json")
    validate("sweep", sweep)
    rec = world["root"] / "recipe.toml"
    CliRunner().invoke(
        main,
        ["calibrate", "fit", f"{a}:test", "--method", "temperature", "--out", str(rec), "--ledger", world["ledger"]],
    )
    validate(
        "calibration",
        _cli(
            world,
            "calibrate",
            "report",
            f"{a}:test",
            "--recipe",
            str(rec),
            "--resamples",
            "50",
            "--save",
            f"{a}:cal",
            "--json",
        ),
    )
    imported = _cli(world, "import", world["b"], "--json")
    validate("import", imported)


def test_stored_documents_come_back_typed(world):
    book, a = world["book"], world["ids"]["a"]
    doc = book.run(a).evaluation("test")
    assert isinstance(doc, EvaluationDoc) and doc.tasks["hover"].slices is not None
    assert [e.kind for e in book.evaluations(a)].count("evaluation") == 1
    values = [v for v in book.metric_values(a) if v.evaluation == "test"]
    assert {v.slice for v in values} >= {"", "len=long", "len=short"}
    acc = next(v for v in values if v.metric == "accuracy" and v.slice == "")
    assert acc.value == doc.tasks["hover"].metrics[0].value and acc.id == MetricId.parse("accuracy")


# -- a ledger written before typed documents ------------------------------------------------------
@pytest.fixture
def old_ledger(tmp_path):
    dst = tmp_path / "ledger"
    shutil.copytree(FIXTURE / "ledger", dst)
    return dst


def _raw(ledger: Path, run: str, name: str, kind: str) -> dict:
    return json.loads((ledger / "runs" / run / "evals" / name / f"{kind}.json").read_text())


def test_the_v1_ledger_opens_with_the_same_numbers(old_ledger):
    runs = EXPECTED["runs"]
    tuned = runs["tuned"]
    show = json.loads(CliRunner().invoke(main, ["show", tuned, "--json", "--ledger", str(old_ledger)]).output)
    before = EXPECTED["show"]
    for key in ("id", "name", "status", "counts", "last_scalars", "results", "headline"):
        assert show[key] == before[key], key
    assert [(e["name"], e["kind"], e["n"]) for e in show["evaluations"]] == [
        (e["name"], e["kind"], e["n"]) for e in before["evaluations"]
    ]
    book = labledger.open_ledger(old_ledger)
    view = book.run(tuned)
    for name, kind in (
        ("test", "evaluation"),
        ("ev90", "evaluation"),
        ("cmp", "comparison"),
        ("calrep", "calibration"),
    ):
        raw = _raw(old_ledger, tuned, name, kind)
        assert raw["version"] == 1
        doc = view.evaluation(name, kind=kind)
        assert doc.schema_version == 2 and doc.to_dict()["tasks"] == raw["tasks"], (name, kind)
    ev90 = view.evaluation("ev90")
    assert ev90.ci == 0.9 and ev90.tasks["fact"].metrics[0].interval_label == "90% CI"
    assert labledger.analysis.evaluation.Evaluation(ev90).value("fact", "f1[average=binary,pos_label=yes]") == next(
        m["value"]
        for m in _raw(old_ledger, tuned, "ev90", "evaluation")["tasks"]["fact"]["metrics"]
        if m["metric"] == "f1"
    )
    validate("sweep", json.loads((FIXTURE / "sweep.json").read_text()))


def test_the_v1_ledger_shows_the_same_table(old_ledger):
    res = CliRunner().invoke(main, ["table", "--models", "base,tuned", "--json", "--ledger", str(old_ledger)])
    assert res.exit_code == 0, res.output
    now, before = json.loads(res.output), EXPECTED["table_json"]
    assert now["mean"] == before["mean"] and now["columns"] == before["columns"]
    assert [(r["benchmark"], r["values"], r["ci"], r["n"]) for r in now["rows"]] == [
        (r["benchmark"], r["values"], r["ci"], r["n"]) for r in before["rows"]
    ]
    assert [r["metric_id"] for r in now["rows"]] == ["accuracy", "f1[average=binary,pos_label=yes]"]
    text = (
        CliRunner()
        .invoke(main, ["table", "--models", "base,tuned", "--delta-from", "base", "--ledger", str(old_ledger)])
        .output
    )
    for cell in ("65.00%", "78.33%", "+13.33pp n.s.", "+21.74pp *", "Mean (2 benchmarks)", "71.63%", "89.17%"):
        assert cell in text and cell in EXPECTED["table"]
    plain = CliRunner().invoke(main, ["table", "--models", "base,tuned", "--ledger", str(old_ledger)]).output
    assert "--delta-from" not in plain and "delta" not in plain


def test_table_names_the_suites_that_exist(old_ledger):
    res = CliRunner().invoke(main, ["table", "--suite", "private", "--ledger", str(old_ledger)])
    assert res.exit_code == 1 and "suites with entries: public" in res.output
