"""The columnar readers of the harness importers (#13) against their row paths, on files written here
in each harness's format: lm-eval samples files (multiple choice, generative with two filters, a
corpus metric, a metric left out) and the central directory of inspect ``.eval`` ZIPs."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labledger.errors import RecordError
from labledger.importers import import_path, inspect_log, lm_eval
from labledger.importers.harness import softmax
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


# -- the multiple-choice decoder (log-likelihoods decoded as floats) against the row path, on random documents

LOGLIK = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),  # what lm-eval writes: str(float)
    st.floats(-50, 0).map(lambda v: f"{v:.{17}e}"),
    st.sampled_from(["-0", "-0.0", "0", "0.0", "1e-400", "-5", "12345678901234567890123", "nan", "-inf", " -1.5"]),
    st.sampled_from(["+1.5", "1_0", "-1.", ".5", "0x1p3", "1e5", "-2.4703282292062328e-324", "1.7976931348623159e308"]),
    st.floats(-50, 0),  # a JSON number, not a string
)
TEXTS = st.text(alphabet=st.sampled_from(["a", " ", "\0", "\n", "é", '"', "\\", "x"]), max_size=5)


@st.composite
def mc_docs(draw: st.DrawFn) -> tuple[list[dict], dict]:
    k = draw(st.integers(1, 4))
    delim = draw(st.sampled_from([" ", "", "\n\n", "\0", "a"]))
    metrics = draw(st.sampled_from([["acc", "acc_norm"], ["acc"], ["acc_norm", "acc"]]))
    docs = []
    for i in range(draw(st.integers(1, 5))):
        kk = k if draw(st.integers(0, 9)) else draw(st.integers(1, 4))
        conts = [draw(st.sampled_from([delim, ""])) + draw(TEXTS) for _ in range(kk)]
        doc = {
            "doc_id": i,
            "target": draw(st.sampled_from([str(i % kk), str(kk), "0"])),
            "arguments": {f"gen_args_{j}": {"arg_0": f"Q{i}", "arg_1": c} for j, c in enumerate(conts)},
            "filtered_resps": [[draw(LOGLIK), draw(st.sampled_from(["False", "True", False]))] for _ in range(kk)],
            "filter": "none",
            "metrics": metrics,
            "doc_hash": f"h{i}",
            "prompt_hash": f"p{i}",
            **{m: draw(st.sampled_from([0.0, 1.0])) for m in metrics},
        }
        docs.append(doc)
    return docs, {"output_type": "multiple_choice", "target_delimiter": delim}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=mc_docs())
def test_lm_eval_multiple_choice_columns_are_the_rows_on_random_documents(tmp_path, case):
    docs, config = case
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    cols = lm_eval._metric_columns(path, config)
    try:
        rows = lm_eval._metric_rows(path, config)
    except RecordError:
        assert cols is None  # a fault: the row path is the one to name it
        return
    if cols is not None:
        for filt, mets in rows.items():
            for name, m in mets.items():
                assert repr(cols[filt][name].rows.rows()) == repr(m.rows)
                assert b"".join(map(dumps_line, cols[filt][name].rows.rows())) == b"".join(map(dumps_line, m.rows))


def test_lm_eval_typed_decoder_reads_what_lm_eval_writes(tmp_path):
    path = write(tmp_path / "s.jsonl", [mc_doc(i, k=4) for i in (1, 2, 3)])  # no log-likelihood of 0
    dec = lm_eval._doc_decoder(["acc", "acc_norm"], 4)
    docs = dec.decode_lines(path.read_bytes())
    assert docs[0].filtered_resps[0] == (float(mc_doc(1, k=4)["filtered_resps"][0][0]), False)
    assert lm_eval._columns_of(docs, ["acc", "acc_norm"], MC, typed=True) is not None
    assert lm_eval._doc_decoder(["acc"], 0) is None
    zero = mc_doc(0, filtered_resps=[["-0", "False"], ["-1", "False"], ["-2", "False"]])
    path = write(tmp_path / "z.jsonl", [zero])
    typed = lm_eval._doc_decoder(["acc", "acc_norm"], 3).decode_lines(path.read_bytes())
    assert lm_eval._columns_of(typed, ["acc", "acc_norm"], MC, typed=True) is None  # "-0": float() decides
    same(path, MC)
    # K requests but another number of log-likelihoods on a line of another filter: the row path decides
    odd = mc_doc(1, filter="other", filtered_resps=[["-1", "False"], ["-2", "False"]])
    path = write(tmp_path / "o.jsonl", [mc_doc(2), odd])
    typed = lm_eval._doc_decoder(["acc", "acc_norm"], 3).decode_lines(path.read_bytes())
    assert lm_eval._columns_of(typed, ["acc", "acc_norm"], MC, typed=True) is None
    assert lm_eval._metric_columns(path, MC) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(TEXTS, max_size=6), st.sampled_from(["", " ", "\0", "ab", "a"]))
def test_strip_prefix_is_the_per_text_cut(texts, prefix):
    want = [t[len(prefix) :] if t.startswith(prefix) else t for t in texts]
    assert lm_eval.strip_prefix(texts, prefix) == want


def test_softmax_rows_with_and_without_numpy_exp(monkeypatch):
    ll = np.array([[-1.5, -0.25, -3.0], [0.0, -700.0, -1e-9]])
    want = [list(softmax(r).values()) for r in ll.tolist()]
    assert lm_eval._softmax_rows(ll).tolist() == want
    monkeypatch.setattr(lm_eval, "_NUMPY_EXP", False)  # as on a CPU where numpy has its own exp
    assert lm_eval._softmax_rows(ll).tolist() == want
    assert lm_eval._exp_is_math_exp() in (True, False)


@pytest.mark.parametrize(
    "first",
    [
        b"[1]",  # not an object
        b"{not json",
        orjson.dumps({**mc_doc(0), "metrics": "acc"}),  # metrics not a list
        orjson.dumps({**mc_doc(0), "filtered_resps": "x"}),  # no K for the typed decoder: the plain one reads it
    ],
)
def test_lm_eval_columns_of_odd_first_lines(tmp_path, first):
    path = tmp_path / "s.jsonl"
    path.write_bytes(first + b"\n" + orjson.dumps(mc_doc(1)) + b"\n")
    assert lm_eval._metric_columns(path, MC) is None
