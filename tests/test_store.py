"""The run logging API and the ledger index, on a real SQLite ledger in tmp_path."""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import make_batch

import labledger
from labledger.errors import (
    LedgerError,
    LedgerNotFoundError,
    RecordError,
    RunNameWarning,
    RunNotFoundError,
    RunStateError,
)
from labledger.store.migrations import MIGRATIONS, migrate


def test_start_run_records_everything(ledger_dir):
    with labledger.start_run(
        "mlp",
        group="sweep",
        tags=("b", "a"),
        config={"lr": 1e-3, "layers": [2, 3]},
        notes="first try",
        ledger=ledger_dir,
    ) as run:
        for step in range(1, 11):
            run.log(step, loss=1.0 / step, lr=1e-3, grad_norm=0.5)
        run.log_batch(make_batch(1))
        run.log_batch(make_batch(2))
        run.log_history({"step": 10, "loss": 0.3, "learning_rate": 1e-3, "epoch": 0.5})
        run.note("loss looks fine")
    ledger = labledger.open_ledger(ledger_dir)
    [info] = ledger.runs()
    assert (info.name, info.group, info.tags, info.status) == ("mlp", "sweep", ["a", "b"], "finished")
    assert info.summary["steps"] == 10 and info.summary["batches"] == 2
    assert info.ended >= info.started
    view = ledger.run(run.id)
    meta = view.meta
    for key in ("host", "python", "packages", "git", "started", "ended", "pid"):
        assert key in meta
    assert view.config == {"lr": 1e-3, "layers": [2, 3]}
    scalars = list(view.scalars())
    assert [s["step"] for s in scalars] == list(range(1, 11))
    assert scalars[-1]["loss"] == pytest.approx(0.1)
    assert [b["microbatch"] for b in view.batches()] == [1, 2]
    assert next(iter(view.history()))["epoch"] == 0.5
    assert [n["text"] for n in view.notes()] == ["first try", "loss looks fine"]


def test_extra_keys_are_kept_verbatim(ledger_dir):
    rec = make_batch(1)
    rec["my_extra"] = {"nested": [1, 2, {"x": "y"}]}
    rec["samples"][0]["input_provenance"] = "encoded-source-capture"
    rec["samples"][0]["target_digit_metadata"] = {"digit": 7}
    with labledger.start_run("extra", ledger=ledger_dir) as run:
        run.log_batch(rec)
    [stored] = list(labledger.open_ledger(ledger_dir).run(run.id).batches())
    assert stored["my_extra"] == rec["my_extra"]
    assert stored["samples"][0]["input_provenance"] == "encoded-source-capture"
    assert stored["samples"][0]["target_digit_metadata"] == {"digit": 7}
    assert {k: v for k, v in stored.items() if k != "time"} == rec


def test_exception_marks_run_failed_and_reraises(ledger_dir):
    with pytest.raises(ZeroDivisionError), labledger.start_run("boom", ledger=ledger_dir) as run:
        run.log(1, loss=1.0)
        1 / 0
    info = labledger.open_ledger(ledger_dir).info(run.id)
    assert info.status == "failed"
    assert "ZeroDivisionError" in info.error
    with pytest.raises(RunStateError):
        run.log(2, loss=0.5)


def test_numpy_and_tensor_like_scalars(ledger_dir):
    np = pytest.importorskip("numpy")
    with labledger.start_run("np", ledger=ledger_dir) as run:
        run.log(np.int64(3), loss=np.float32(0.25), acc=np.float64(0.5), nan=float("nan"))
        with pytest.raises(RecordError, match="field 'bad'"):
            run.log(4, bad="high")
        with pytest.raises(RecordError, match="field 'step'"):
            run.log("5", loss=1.0)
    rows = list(labledger.open_ledger(ledger_dir).run(run.id).scalars())
    assert len(rows) == 1
    assert rows[0]["step"] == 3 and rows[0]["loss"] == 0.25
    assert rows[0]["nan"] != rows[0]["nan"]  # NaN is stored as null and read back as NaN


def test_checkpoint_sha256_streamed_and_referenced(ledger_dir, tmp_path):
    ckpt = tmp_path / "model.pt"
    data = bytes(range(256)) * 10_000
    ckpt.write_bytes(data)
    with labledger.start_run("ck", ledger=ledger_dir) as run:
        rec = run.log_checkpoint(ckpt, step=7, metrics={"val_loss": 0.1}, copy=False)
        copied = run.log_checkpoint(ckpt, step=8)  # copied into the run by default (#15)
    assert rec["sha256"] == hashlib.sha256(data).hexdigest() and rec["size"] == len(data)
    assert rec["path"] == str(ckpt.resolve()) and not rec["copied"]
    assert copied["path"].startswith(str(run.dir)) and open(copied["path"], "rb").read() == data
    stored = list(labledger.open_ledger(ledger_dir).run(run.id).checkpoints())
    assert [c["step"] for c in stored] == [7, 8]
    assert stored[0]["metrics"] == {"val_loss": 0.1}


def test_log_file_rejects_escaping_names(ledger_dir):
    with labledger.start_run("files", ledger=ledger_dir) as run:
        path = run.log_file("images/1.png", b"\x89PNG")
        assert path.read_bytes() == b"\x89PNG"
        for bad in ("../x", "/etc/passwd", "a/../b", ".hidden", "a//b"):
            with pytest.raises(LedgerError, match="file name"):
                run.log_file(bad, b"x")
    assert labledger.open_ledger(ledger_dir).run(run.id).files() == ["images/1.png"]


def test_filters_and_resolution(ledger_dir):
    ids = {}
    for name, group, tag in [("a", "g1", "x"), ("b", "g1", "y"), ("c", "g2", "x")]:
        with labledger.start_run(name, group=group, tags=[tag], ledger=ledger_dir) as run:
            run.log(1, loss=1.0)
        ids[name] = run.id
    ledger = labledger.open_ledger(ledger_dir)
    assert {r.name for r in ledger.runs(group="g1")} == {"a", "b"}
    assert {r.name for r in ledger.runs(tag="x")} == {"a", "c"}
    assert {r.name for r in ledger.runs(group="g1", tag="x")} == {"a"}
    assert ledger.runs(status="failed") == []
    assert ledger.resolve("b") == ids["b"]
    assert ledger.resolve(ids["c"]) == ids["c"]
    with pytest.raises(RunNotFoundError, match="Did you mean 'a'"):
        ledger.resolve("aa")
    with labledger.start_run("a", ledger=ledger_dir):
        pass
    with pytest.warns(RunNameWarning, match="2 runs named 'a'; using the newest"):
        newest = ledger.resolve("a")
    assert newest != ids["a"] and ledger.resolve("a@2") == ids["a"]


def test_open_missing_ledger_is_a_clear_error(tmp_path):
    with pytest.raises(LedgerNotFoundError, match="No ledger at"):
        labledger.open_ledger(tmp_path / "nothing")


def test_migrations_apply_once_and_are_recorded(tmp_path):
    import sqlite3

    db = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    applied = migrate(db)
    assert applied == [name for name, _ in MIGRATIONS]
    assert migrate(db) == []
    names = [r[0] for r in db.execute("SELECT name FROM _migrations ORDER BY rowid")]
    assert names == applied
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "run_tags", "checkpoints", "evaluations", "metric_values"} <= tables


def test_tables_and_dataframes(ledger_dir):
    with labledger.start_run("t", ledger=ledger_dir) as run:
        for step in range(1, 6):
            run.log(step, loss=1.0 / step)
        for mb in range(1, 4):
            run.log_batch(make_batch(mb, n=3))
    view = labledger.open_ledger(ledger_dir).run(run.id)
    t = view.table("scalars")
    assert t.num_rows == 5 and t.column("step").to_pylist() == [1, 2, 3, 4, 5]
    samples = view.table("samples")
    assert samples.num_rows == 9
    assert {"probabilities.-1", "probabilities.0", "probabilities.+1", "cross_entropy", "microbatch"} <= set(
        samples.column_names
    )
    pd = pytest.importorskip("pandas")
    df = view.dataframe("batches")
    assert isinstance(df, pd.DataFrame) and len(df) == 3
    json.loads(df["samples"].iloc[0])  # nested samples kept as JSON text


def test_log_results_from_a_file_with_a_torn_last_line(ledger_dir, tmp_path):
    src = tmp_path / "torn.jsonl"
    src.write_bytes(
        b'{"id":1,"task":"t","gold":1.0,"pred":0.5}\n{"id":2,"task":"t","gold":2.0,"pred":1.5}\n{"id":3,"task":"t","go'
    )
    with labledger.start_run("r", ledger=ledger_dir) as run:
        with pytest.warns(Warning, match=r"torn\.jsonl:3: torn last line left out"):
            path = run.log_results("test", src)
    stored = list(labledger.open_ledger(ledger_dir).run(run.id).results("test"))
    assert [r["id"] for r in stored] == [1, 2]
    assert path.read_bytes().endswith(b"\n")
    assert labledger.evaluate(str(path), metrics=["mae"], resamples=0).value("t", "mae") == 0.5
    # a valid last line without its newline is kept and completed
    src.write_bytes(b'{"id":1,"task":"t","gold":1.0,"pred":0.5}')
    with labledger.start_run("r2", ledger=ledger_dir) as run:
        path = run.log_results("test", src)
    assert path.read_bytes() == b'{"id":1,"task":"t","gold":1.0,"pred":0.5}\n'
