"""The columnar readers of the harness importers (#13) against their row paths, on files written here
in each harness's format: lm-eval samples files (multiple choice, generative with two filters, a
corpus metric, a metric left out) and the central directory of inspect ``.eval`` ZIPs."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from labledger.errors import RecordError
from labledger.importers import import_path, inspect_log, lm_eval
from labledger.store.jsonl import dumps_line

MC = {"output_type": "multiple_choice", "target_delimiter": " "}
GEN = {"output_type": "generate_until"}


def mc_doc(i: int, k: int = 3, **over) -> dict:
    choices = [f"c{j}" + "x" * ((i + j) % 3) for j in range(k)]
    doc = {
        "doc_id": i,
        "doc": {"q": f"Question {i}"},
        "target": str(i % k),
        "arguments": {f"gen_args_{j}": {"arg_0": f'Q "{i}"?', "arg_1": " " + c} for j, c in enumerate(choices)},
        "resps": [[[str(-0.5 * (j + i % 2)), "False"]] for j in range(k)],
        "filtered_resps": [[str(-0.5 * ((j + i) % k) - 0.1 * j), "False"] for j in range(k)],
        "filter": "none",
        "metrics": ["acc", "acc_norm"],
        "doc_hash": f"h{i}",
        "prompt_hash": f"p{i}",
        "acc": float(i % 2),
        "acc_norm": 1.0,
    }
    doc.update(over)
    return doc


def gen_doc(i: int, filt: str) -> dict:
    return {
        "doc_id": i,
        "target": f"answer {i}",
        "arguments": {"gen_args_0": {"arg_0": f"Say {i}", "arg_1": {"until": ["\n"]}}},
        "filtered_resps": [f"answer {i}" if i % 2 else "other"],
        "filter": filt,
        "metrics": ["exact_match", "f1", "bleu"],
        "exact_match": float(i % 2),
        "f1": [str(i % 2), "1"],
        "bleu": None,
    }


def write(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def same(path: Path, config: dict) -> None:
    cols = lm_eval._metric_columns(path, config)
    rows = lm_eval._metric_rows(path, config)
    assert cols is not None
    assert list(cols) == list(rows)
    for filt, mets in rows.items():
        assert list(cols[filt]) == list(mets)
        for name, m in mets.items():
            c = cols[filt][name]
            assert (c.name, c.shape, c.spec) == (m.name, m.shape, m.spec)
            got = c.rows if m.shape == "skipped" else c.rows.rows()
            assert repr(got) == repr(m.rows)  # the same values, keys and key order


def test_lm_eval_columns_equal_rows_multiple_choice(tmp_path):
    same(write(tmp_path / "s.jsonl", [mc_doc(i) for i in range(12)]), MC)


def test_lm_eval_columns_equal_rows_generative_two_filters(tmp_path):
    docs = [gen_doc(i, f) for i in range(6) for f in ("strict-match", "flexible")]
    same(write(tmp_path / "s.jsonl", docs), GEN)


@pytest.mark.parametrize(
    "docs",
    [
        [mc_doc(0), mc_doc(1, k=4)],  # a different number of choices
        [mc_doc(0), {k: v for k, v in mc_doc(1).items() if k != "acc_norm"}],  # a metric missing
        [mc_doc(0), mc_doc(1, target="x")],  # a gold that is not a choice index
        [mc_doc(0), mc_doc(1, filtered_resps=[["-inf", "False"]] * 3)],  # not finite
    ],
)
def test_lm_eval_columns_leave_other_shapes_to_the_row_path(tmp_path, docs):
    path = write(tmp_path / "s.jsonl", docs)
    assert lm_eval._metric_columns(path, MC) is None


def test_lm_eval_bad_line_still_named(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps({"results": {"t": {"acc,none": 0.5}}, "configs": {"t": MC}, "n-shot": {"t": 0}})
    )
    write(d / "samples_t_2026-01-01T00-00-00.jsonl", [mc_doc(0), mc_doc(1, target="x")])
    with pytest.raises(RecordError) as info:
        import_path(d, tmp_path / "ledger")
    assert (info.value.line, info.value.field) == (2, "target")


def test_lm_eval_import_stores_what_the_row_path_stores(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps({"results": {"t": {"acc,none": 0.5}}, "configs": {"t": MC}, "n-shot": {"t": 0}})
    )
    write(d / "samples_t_2026-01-01T00-00-00.jsonl", [mc_doc(i) for i in range(8)])
    (run,) = import_path(d, tmp_path / "ledger").runs
    stored = next((tmp_path / "ledger").rglob("evals/t/results.jsonl")).read_bytes()
    rows = [
        r for m in lm_eval._metric_rows(d / "samples_t_2026-01-01T00-00-00.jsonl", MC)["none"].values() for r in m.rows
    ]
    assert stored == b"".join(dumps_line(r) for r in rows)
    assert run.counts == {"results:t": 16}


@pytest.mark.parametrize("comment", [b"", b"a comment"])
def test_eval_central_directory_is_zipfiles(tmp_path, comment):
    p = tmp_path / "x.eval"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.comment = comment
        for name in ("header.json", "samples/1_epoch_1.json", "samples/é_epoch_2.json", "reductions.json"):
            z.writestr(name, json.dumps({"id": name, "pad": "x" * 50}))
    data = p.read_bytes()
    want = {i.filename: (i.compress_type, i.header_offset, i.compress_size) for i in zipfile.ZipFile(p).infolist()}
    assert inspect_log._central_directory(data) == want
    z = inspect_log.EvalZip(p)
    assert z.names == list(want)
    assert z.json("samples/é_epoch_2.json") == {"id": "samples/é_epoch_2.json", "pad": "x" * 50}
    assert inspect_log._central_directory(data[:-30]) is None  # a cut file: zipfile decides
    assert inspect_log._central_directory(b"not a zip") is None
