"""Reading and validating results.jsonl: columns keyed by label name, errors with file/line/field."""

from __future__ import annotations

import math
import warnings

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labledger.errors import RecordError
from labledger.inputs.results import (
    TornLineWarning,
    read_results,
    results_from_rows,
    validate_rows,
)


def write(path, rows, *, raw_lines=()):
    lines = [orjson.dumps(r) for r in rows] + [r.encode() if isinstance(r, str) else r for r in raw_lines]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def cls_row(i, gold="yes", p=0.8, task="t", **extra):
    return {"id": f"r{i}", "task": task, "gold": gold, "probs": {"yes": p, "no": round(1 - p, 10)}, **extra}


# ------------------------------------------------------------------------------------------------
# Good files


def test_probs_columns_follow_label_names_not_key_order(tmp_path):
    rows = [
        {"id": 1, "task": "t", "gold": "b", "probs": {"a": 0.2, "b": 0.7, "c": 0.1}},
        {"id": 2, "task": "t", "gold": "a", "probs": {"c": 0.3, "a": 0.6, "b": 0.1}},
    ]
    for engine in ("auto", "rows"):
        td = read_results(write(tmp_path / "r.jsonl", rows), engine=engine)["t"]
        assert td.labels == ("a", "b", "c")
        assert td.probs.tolist() == [[0.2, 0.7, 0.1], [0.6, 0.1, 0.3]]
        assert td.column("c").tolist() == [0.1, 0.3]
        assert td.gold_index.tolist() == [1, 0]
        assert td.pred_index.tolist() == [1, 0]
        assert td.ids.tolist() == ["1", "2"]


def test_missing_label_in_one_row_counts_as_zero():
    td = results_from_rows(
        [
            {"id": 1, "task": "t", "gold": "a", "probs": {"a": 1.0}},
            {"id": 2, "task": "t", "gold": "b", "probs": {"a": 0.4, "b": 0.6}},
        ]
    )["t"]
    assert td.probs.tolist() == [[1.0, 0.0], [0.4, 0.6]]


def test_kinds_of_every_task(tmp_path):
    rows = [
        cls_row(1),
        {"id": "b1", "task": "bin", "gold": True, "score": 0.7},
        {"id": "r1", "task": "mosi", "gold": -1.4, "pred": -0.8},
        {"id": "q3", "task": "toolret", "gold": {"doc7": 2}, "scores": {"doc7": 3.1, "doc2": 0.4}},
        {"id": "b5", "task": "bfcl", "gold": {"name": "f", "args": [1]}, "pred": {"args": [1], "name": "f"}},
        {"id": "a1", "task": "acos", "gold": [["food", "pos"], ["staff", "neg"]], "pred": [["food", "pos"]]},
    ]
    rs = read_results(write(tmp_path / "r.jsonl", rows))
    assert {t: rs[t].kind for t in rs} == {
        "t": "classification",
        "bin": "binary",
        "mosi": "regression",
        "toolret": "ranking",
        "bfcl": "match",
        "acos": "sets",
    }
    assert rs["bin"].labels == ("false", "true") and rs["bin"].positive == "true"
    assert rs["bin"].probs.tolist() == [[pytest.approx(0.3), 0.7]]
    assert rs["mosi"].gold_value.tolist() == [-1.4] and rs["mosi"].pred_value.tolist() == [-0.8]
    assert rs["toolret"].scores == [{"doc7": 3.1, "doc2": 0.4}]
    assert rs["bfcl"].gold_index.tolist() == rs["bfcl"].pred_index.tolist()  # key order does not matter
    assert len(rs["acos"].gold_items[0]) == 2 and len(rs["acos"].pred_items[0]) == 1
    assert rs.n == 6 and len(rs) == 6


def test_match_distinguishes_number_from_string():
    td = results_from_rows(
        [{"id": 1, "task": "m", "gold": 1, "pred": "1"}, {"id": 2, "task": "m", "gold": "a", "pred": "a"}]
    )["m"]
    assert (td.gold_index == td.pred_index).tolist() == [False, True]


@pytest.mark.parametrize(
    "rows, positive, expected_labels, expected_pos",
    [
        ([{"gold": "cross", "score": 0.9}, {"gold": "single", "score": 0.2}], "cross", ("cross", "single"), "cross"),
        (
            [{"gold": "cross", "score": 0.9, "positive": "cross"}, {"gold": "single", "score": 0.2}],
            None,
            ("cross", "single"),
            "cross",
        ),
        ([{"gold": 1, "score": 0.9}, {"gold": 0, "score": 0.2}], None, ("0", "1"), "1"),
        ([{"gold": "yes", "score": 0.9}], "yes", ("not_yes", "yes"), "yes"),  # one class present
        ([{"gold": "no", "score": 0.9}], "yes", ("no", "yes"), "yes"),
    ],
)
def test_binary_positive_label(rows, positive, expected_labels, expected_pos):
    rows = [dict(r, id=i, task="b") for i, r in enumerate(rows)]
    td = results_from_rows(rows, positive=positive)["b"]
    assert td.labels == expected_labels and td.positive == expected_pos
    assert np.allclose(td.column(expected_pos), td.score)
    assert td.pred_index.tolist() == [
        td.labels.index(expected_pos) if s >= 0.5 else 1 - td.labels.index(expected_pos) for s in td.score
    ]


def test_positive_for_a_two_label_probs_task_gives_score():
    td = results_from_rows([cls_row(1, p=0.8), cls_row(2, gold="no", p=0.3)], positive="yes")["t"]
    assert td.positive == "yes" and td.score.tolist() == [0.8, 0.3]
    # a plain label that a task does not have is ignored for it; a per-task one is an error
    assert results_from_rows([cls_row(1)], positive="maybe")["t"].positive is None
    with pytest.raises(RecordError, match="positive label 'maybe'"):
        results_from_rows([cls_row(1)], positive={"t": "maybe"})


def test_slices_group_and_extras_are_kept(tmp_path):
    rows = [
        cls_row(i, slices={"len": "long" if i % 2 else "short", "src": i % 3}, group=f"doc{i // 2}", note=f"n{i}")
        for i in range(6)
    ]
    rows[5].pop("group")
    for engine in ("auto", "rows"):
        td = read_results(write(tmp_path / "r.jsonl", rows), engine=engine)["t"]
        codes, values = td.slice_codes("len")
        assert [values[c] for c in codes] == ["short", "long"] * 3
        assert td.slices["src"].tolist() == [0, 1, 2, 0, 1, 2]
        assert td.group.tolist() == [0, 0, 1, 1, 2, 3]  # the row without a group is its own cluster
        assert list(td.extras["note"]) == [f"n{i}" for i in range(6)]
        sub = td.subset(td.slices["len"] == "long")
        assert sub.ids.tolist() == ["r1", "r3", "r5"] and sub.group.tolist() == [0, 1, 2]


def test_blank_lines_keep_true_line_numbers(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(cls_row(1)) + b"\n\n" + orjson.dumps(cls_row(2, p=1.5)) + b"\n")
    with pytest.raises(RecordError, match=r"r.jsonl:3: field 'probs'"):
        read_results(path)
    path.write_bytes(orjson.dumps(cls_row(1)) + b"\n\n" + orjson.dumps(cls_row(2)) + b"\n")
    assert read_results(path)["t"].lines.tolist() == [1, 3]


def test_torn_last_line_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(cls_row(1)) + b"\n" + b'{"id": "r2", "task": "t", "go')
    with pytest.warns(TornLineWarning, match=r"r.jsonl:2: torn last line"):
        assert read_results(path)["t"].n == 1


def test_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(orjson.dumps(cls_row(1)) + b"\n" + orjson.dumps(cls_row(2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_results(path)["t"].n == 2


def test_validate_rows_summary_and_line_numbers():
    rows = [cls_row(1), {"id": 2, "task": "r", "gold": 1.0, "pred": 2}]
    assert validate_rows(rows) == {"t": {"kind": "classification", "n": 1}, "r": {"kind": "regression", "n": 1}}
    with pytest.raises(RecordError, match=r"^results 'x':17: field 'probs'"):
        validate_rows([cls_row(1, p=2.0)], source="results 'x'", lines=[17])


def test_tolerance_is_configurable():
    row = {"id": 1, "task": "t", "gold": "a", "probs": {"a": 0.5, "b": 0.45}}
    with pytest.raises(RecordError, match="sum to 1"):
        results_from_rows([row])
    assert results_from_rows([row], tolerance=0.1)["t"].n == 1


# ------------------------------------------------------------------------------------------------
# Bad rows: one table, checked on Python rows and on files read by both engines

BAD = [
    ("unknown gold label", cls_row(1, gold="maybe"), "gold", "must be one of the labels"),
    (
        "probability above 1",
        {"id": 1, "task": "t", "gold": "a", "probs": {"a": 1.2, "b": -0.2}},
        "probs",
        "numbers in [0, 1]",
    ),
    ("probability as a string", {"id": 1, "task": "t", "gold": "a", "probs": {"a": "0.7", "b": 0.3}}, "probs", '"0.7"'),
    ("probability null", {"id": 1, "task": "t", "gold": "a", "probs": {"a": None, "b": 1.0}}, "probs", "null"),
    ("sum not 1", {"id": 1, "task": "t", "gold": "a", "probs": {"a": 0.6, "b": 0.6}}, "probs", "must sum to 1"),
    ("empty probs", {"id": 1, "task": "t", "gold": "a", "probs": {}}, "probs", "must map labels"),
    ("score outside", {"id": 1, "task": "t", "gold": "a", "score": 1.5, "positive": "a"}, "score", "[0, 1]"),
    ("missing id", {"task": "t", "gold": "a", "pred": "a"}, "id", "is missing"),
    ("missing task", {"id": 1, "gold": "a", "pred": "a"}, "task", "is missing"),
    ("missing gold", {"id": 1, "task": "t", "pred": "a"}, "gold", "is missing"),
    ("no prediction", {"id": 1, "task": "t", "gold": "a"}, "probs", "one of 'probs', 'score', 'scores' or 'pred'"),
    ("float id", {"id": 1.5, "task": "t", "gold": 1, "pred": 1}, "id", "string or an integer"),
    ("slices not a mapping", cls_row(1, slices=["a"]), "slices", "must map slice names"),
    ("slice value a list", cls_row(1, slices={"a": [1]}), "slices", "strings, numbers or booleans"),
    ("group a float", cls_row(1, group=1.5), "group", "bootstrap cluster"),
    (
        "ranking gold not a mapping",
        {"id": 1, "task": "t", "gold": "d1", "scores": {"d1": 1}},
        "gold",
        "graded relevance",
    ),
    ("negative relevance", {"id": 1, "task": "t", "gold": {"d1": -1}, "scores": {"d1": 1}}, "gold", ">= 0"),
    ("list vs string", {"id": 1, "task": "t", "gold": ["a"], "pred": "a"}, "pred", "both be lists"),
]


@pytest.mark.parametrize("name, row, field, text", BAD, ids=[b[0] for b in BAD])
def test_bad_row_named_with_line_and_field(tmp_path, name, row, field, text):
    rows = [cls_row(0, task="other"), row]
    with pytest.raises(RecordError) as info:
        results_from_rows(rows, source="rows.jsonl")
    assert str(info.value).startswith(f"rows.jsonl:2: field '{field}'")
    assert text in str(info.value)
    path = write(tmp_path / "results.jsonl", rows)
    for engine in ("auto", "rows"):
        with pytest.raises(RecordError) as info:
            read_results(path, engine=engine)
        assert f"results.jsonl:2: field '{field}'" in str(info.value) and text in str(info.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_in_python_rows(value):
    for row, fld in [
        ({"id": 1, "task": "t", "gold": "a", "probs": {"a": value, "b": 0.0}}, "probs"),
        ({"id": 1, "task": "t", "gold": 1.0, "pred": value}, "pred"),
        ({"id": 1, "task": "t", "gold": value, "pred": 1.0}, "gold"),
        ({"id": 1, "task": "t", "gold": "a", "score": value, "positive": "a"}, "score"),
    ]:
        with pytest.raises(RecordError, match=f"field '{fld}'"):
            results_from_rows([row])


def test_duplicate_ids_name_both_lines(tmp_path):
    rows = [cls_row(1), cls_row(2), cls_row(1), cls_row(1, task="other")]  # same id in another task is fine
    path = write(tmp_path / "r.jsonl", rows[:3])
    for engine in ("auto", "rows"):
        with pytest.raises(
            RecordError, match=r"r.jsonl:3: field 'id' duplicate id 'r1' in task 't' \(also on line 1\)"
        ):
            read_results(path, engine=engine)
    assert validate_rows([rows[0], rows[3]])["other"]["n"] == 1


def test_task_mixing_kinds(tmp_path):
    rows = [cls_row(1), {"id": "x", "task": "t", "gold": 1.0, "pred": 0.5}]
    with pytest.raises(RecordError, match=r":2: field 'pred' task 't' mixes kinds: line 1 is classification"):
        read_results(write(tmp_path / "r.jsonl", rows))


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_non_json_or_non_object_lines(tmp_path, line, message):
    path = write(tmp_path / "r.jsonl", [cls_row(1)], raw_lines=[line, orjson.dumps(cls_row(2)).decode()])
    with pytest.raises(RecordError, match=rf"r.jsonl:2: .*{message}"):
        read_results(path)


def test_missing_file():
    with pytest.raises(RecordError, match="no such file"):
        read_results("/nonexistent/results.jsonl")


def test_binary_score_without_positive_label():
    with pytest.raises(RecordError, match="no positive label: pass positive="):
        results_from_rows(
            [{"id": 1, "task": "b", "gold": "x", "score": 0.3}, {"id": 2, "task": "b", "gold": "y", "score": 0.3}]
        )
    with pytest.raises(RecordError, match="has 3 labels"):
        results_from_rows([{"id": i, "task": "b", "gold": g, "score": 0.3} for i, g in enumerate("xyz")], positive="x")
    # a positive label that no row has, beside two gold labels: named as such (not "3 labels")
    with pytest.raises(RecordError, match=r"the positive label '1' is not a gold label \(gold labels: x, y\)"):
        results_from_rows([{"id": i, "task": "b", "gold": g, "score": 0.3} for i, g in enumerate("xy")], positive="1")


# ------------------------------------------------------------------------------------------------
# The Arrow path and the row path give the same data


@st.composite
def result_files(draw):
    """Single-kind files (the shape the Arrow path reads itself), two tasks with different labels."""
    kind = draw(st.sampled_from(["cls", "bin", "reg"]))
    int_ids = draw(st.booleans())
    n = draw(st.integers(1, 25))
    label_sets = {"t1": ("a", "b"), "t2": draw(st.sampled_from([("x", "y", "z"), ("1", "2", "3", "4")]))}
    rows = []
    for i in range(n):
        task = draw(st.sampled_from(["t1", "t2"]))
        row = {"id": i if int_ids else f"i{i}", "task": task}
        if kind == "cls":
            labels = label_sets[task]
            w = [x + 1 for x in draw(st.lists(st.integers(0, 10), min_size=len(labels), max_size=len(labels)))]
            keys = list(labels)
            draw(st.randoms()).shuffle(keys)
            row["probs"] = {k: w[labels.index(k)] / sum(w) for k in keys}
            row["gold"] = draw(st.sampled_from(labels))
        elif kind == "bin":
            row["score"] = draw(st.floats(0, 1))
            row["gold"] = draw(st.booleans())
        else:
            row["gold"] = draw(st.floats(-3, 3))
            row["pred"] = draw(st.one_of(st.floats(-3, 3), st.integers(-3, 3)))
        if draw(st.booleans()):
            row["slices"] = {"s": draw(st.sampled_from(["u", "v"])), "k": draw(st.integers(0, 2))}
        if draw(st.booleans()):
            row["group"] = draw(st.sampled_from(["g1", "g2", "g3"]))
        rows.append(row)
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=result_files())
def test_arrow_and_row_engines_agree(tmp_path, rows):
    from labledger.inputs.arrow import read_arrow

    path = write(tmp_path / "r.jsonl", rows)
    a = read_arrow(path, str(path), 1e-3, None)
    assert a is not None  # the Arrow path read it itself
    b = read_results(path, engine="rows")
    assert list(a) == list(b)
    for task in a:
        x, y = a[task], b[task]
        assert x.kind == y.kind and x.labels == y.labels and x.positive == y.positive
        assert x.ids.tolist() == y.ids.tolist() and x.lines.tolist() == y.lines.tolist()
        for f in ("gold_index", "pred_index", "probs", "score", "gold_value", "pred_value", "group"):
            u, v = getattr(x, f), getattr(y, f)
            assert (u is None) == (v is None), f
            if u is not None:
                np.testing.assert_array_equal(u, v, err_msg=f)
        assert {k: [vals[c] for c in codes] for k, (codes, vals) in x.slice_columns.items()} == {
            k: [vals[c] for c in codes] for k, (codes, vals) in y.slice_columns.items()
        }


@pytest.mark.accelerator
def test_arrow_engine_is_used_for_plain_files(tmp_path):
    from labledger.inputs.results import LazyColumns

    path = write(tmp_path / "r.jsonl", [cls_row(i, note="x") for i in range(5)])
    assert isinstance(read_results(path)["t"].extras, LazyColumns)
    assert isinstance(read_results(path, engine="rows")["t"].extras, dict)


@pytest.mark.parametrize(
    "given, bad_task, message",
    [
        (None, "bin", "no positive label: pass positive="),
        ({"bin": "1", "two": "x"}, "bin", "the positive label '1' is not a gold label"),
        ({"bin": "yes", "two": "x"}, "tri", "gold has 3 labels"),
    ],
)
@pytest.mark.accelerator
def test_a_binary_task_without_its_positive_label_is_refused_by_the_arrow_read_itself(
    tmp_path, monkeypatch, given, bad_task, message
):
    """The Arrow reader raises the row reader's error of a binary task it cannot label (the same
    text, file, line and field) once the rest of the file is read, not by reading every row again
    (10M rows: 43 s and 6 GiB before the one-line error)."""
    from labledger.inputs import reference as results_module

    rows = [{"id": f"c{i}", "task": "two", "gold": "xy"[i % 2], "probs": {"x": 0.4, "y": 0.6}} for i in range(20)]
    rows += [{"id": f"b{i}", "task": "bin", "gold": ["no", "yes"][i % 2], "score": i / 20} for i in range(20)]
    rows += [{"id": f"t{i}", "task": "tri", "gold": "abc"[i % 3], "score": i / 20} for i in range(20)]
    path = write(tmp_path / "r.jsonl", rows)
    given = {**given, "tri": "a"} if given else None
    with pytest.raises(RecordError) as by_rows:
        read_results(path, positive=given, engine="rows")
    line = 21 if bad_task == "bin" else 41
    assert f"r.jsonl:{line}: " in str(by_rows.value) and message in str(by_rows.value)

    def no_rows(*a, **k):
        raise AssertionError("the Arrow read fell back to the row reader")

    monkeypatch.setattr(results_module, "iter_rows", no_rows)
    with pytest.raises(RecordError) as by_arrow:
        read_results(path, positive=given, cache=False)
    assert str(by_arrow.value) == str(by_rows.value)
    assert (by_arrow.value.line, by_arrow.value.field) == (by_rows.value.line, by_rows.value.field)
    one = write(tmp_path / "one.jsonl", [r for r in rows if r["task"] == bad_task])  # a one-task file too
    monkeypatch.undo()
    with pytest.raises(RecordError) as one_rows:
        read_results(one, positive=given, engine="rows")
    monkeypatch.setattr(results_module, "iter_rows", no_rows)
    with pytest.raises(RecordError) as one_arrow:
        read_results(one, positive=given, cache=False)
    assert str(one_arrow.value) == str(one_rows.value) and "one.jsonl:1: " in str(one_arrow.value)
    # a refused one-task file's ids are still checked, but its columns are not sorted for metrics
    # that will not run (10M rows: the error in 5.0 s and 0.8 GB instead of 7 s and 1 GB)
    from labledger.inputs import arrow

    def no_sort(*a, **k):
        raise AssertionError("a refused task's columns were sorted")

    from labledger.metrics import classification

    monkeypatch.setattr(arrow, "SORT_BESIDE_FROM", 1)
    monkeypatch.setattr(classification, "stable_argsort", no_sort)  # (the reader's sorts: ascending_groups)
    with pytest.raises(RecordError) as sorted_arrow:
        read_results(one, positive=given, cache=False)
    assert str(sorted_arrow.value) == str(one_rows.value)


def test_a_positive_label_given_per_task_is_a_plain_str_in_the_documents(tmp_path):
    """``positive={task: label}`` (the per-task form) reached the tasks as an internal str
    subclass, which the documents cannot encode: ``evaluate(...).to_dict()`` raised TypeError."""
    import labledger

    rows = [{"id": f"b{i}", "task": "bin", "gold": "yes" if i % 3 else "no", "score": (i % 7) / 7} for i in range(30)]
    rows += [
        {
            "id": f"c{i}",
            "task": "two",
            "gold": "x" if i % 2 else "y",
            "probs": {"x": 0.25 + (i % 3) / 6, "y": 0.75 - (i % 3) / 6},
        }
        for i in range(30)
    ]
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    given = {"bin": "yes", "two": "x"}
    for rs in (
        results_from_rows(rows, positive=given),
        read_results(path, positive=given, engine="rows"),
        read_results(path, positive=given, cache=False),
    ):
        assert type(rs["bin"].positive) is str and type(rs["two"].positive) is str
        assert all(type(lab) is str for lab in rs["bin"].labels)
        doc = labledger.evaluate(rs).to_dict()
        assert doc["tasks"]["bin"]["positive"] == "yes" and orjson.loads(orjson.dumps(doc)) == doc
