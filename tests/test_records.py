"""Bad records get an error naming the field; nothing already in the ledger changes."""

from __future__ import annotations

import copy
import math

import pytest
from conftest import make_batch

import labledger
from labledger.errors import RecordError
from labledger.inputs.records import validate_batch


def _mutate(path, value):
    rec = make_batch(2)
    target = rec
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[int(k)] if k.isdigit() else target[k]
    last = keys[-1]
    if value is _DELETE:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return rec


_DELETE = object()

BAD = [
    # (path to change, new value, field named in the error, words in the message)
    ("microbatch", "2", "microbatch", "integer"),
    ("microbatch", 0, "microbatch", ">= 1"),
    ("optimizer_step", -1, "optimizer_step", ">= 0"),
    ("examples_seen", 1.5, "examples_seen", "integer"),
    ("batch_size", 3, "batch_size", "has 4 samples"),
    ("loss", "0.5", "loss", "number"),
    ("forward_ms", [1], "forward_ms", "number"),
    ("samples", {"a": 1}, "samples", "list"),
    ("samples.1", "not a sample", "samples[1]", "object"),
    ("samples.2.probabilities", [0.2, 0.3, 0.5], "samples[2].probabilities", "mapping"),
    ("samples.0.probabilities", {"-1": 0.2, "0": 0.2, "+1": 0.2}, "samples[0].probabilities", "sum to 1"),
    ("samples.0.probabilities", {"-1": -0.2, "0": 0.2, "+1": 1.0}, "samples[0].probabilities", "[0, 1]"),
    ("samples.0.probabilities", {"-1": "0.5", "0": 0.25, "+1": 0.25}, "samples[0].probabilities", "[0, 1]"),
    ("samples.3.gold", "+2", "samples[3].gold", "not a key of probabilities"),
    ("samples.3.cross_entropy", 0.123, "samples[3].cross_entropy", "-log p(gold)"),
    ("samples.3.cross_entropy", "high", "samples[3].cross_entropy", "number"),
]


@pytest.mark.parametrize("path,value,field,words", BAD, ids=[f"{b[0]}={b[1]!r}" for b in BAD])
def test_bad_batch_names_the_field_and_changes_nothing(ledger_dir, path, value, field, words):
    with labledger.start_run("v", ledger=ledger_dir) as run:
        run.log_batch(make_batch(1))
        before = (run.dir / "batches.jsonl").read_bytes()
        with pytest.raises(RecordError) as err:
            run.log_batch(_mutate(path, value))
        assert f"field '{field}'" in str(err.value)
        assert words in str(err.value)
        assert (run.dir / "batches.jsonl").read_bytes() == before
        run.log_batch(make_batch(2))  # the run goes on
    assert [b["microbatch"] for b in labledger.open_ledger(ledger_dir).run(run.id).batches()] == [1, 2]


def test_microbatch_must_increase(ledger_dir):
    with labledger.start_run("v", ledger=ledger_dir) as run:
        run.log_batch(make_batch(5))
        with pytest.raises(RecordError, match="must increase within a run; got 5 after 5"):
            run.log_batch(make_batch(5))
        with pytest.raises(RecordError, match="got 3 after 5"):
            run.log_batch(make_batch(3))


def test_cross_entropy_tolerance_is_1e4():
    rec = make_batch(1)
    s = rec["samples"][0]
    exact = -math.log(s["probabilities"][s["gold"]])
    s["cross_entropy"] = exact + 0.9e-4
    validate_batch(rec)
    s["cross_entropy"] = exact + 1.1e-4
    with pytest.raises(RecordError, match="cross_entropy"):
        validate_batch(rec)


def test_probability_keys_need_not_be_ordered_and_model_input_is_accepted():
    rec = make_batch(1)
    s = rec["samples"][0]
    s["probabilities"] = dict(reversed(list(s["probabilities"].items())))
    s["model_input"] = s.pop("input")
    validate_batch(copy.deepcopy(rec))


def test_error_from_a_file_names_file_and_line():
    with pytest.raises(RecordError) as err:
        validate_batch({"microbatch": "x"}, source="batches.jsonl", line=118)
    assert str(err.value).startswith("batches.jsonl:118: field 'microbatch'")


def test_not_a_mapping():
    with pytest.raises(RecordError, match="JSON object"):
        validate_batch([1, 2, 3])
