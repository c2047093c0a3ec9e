"""The index's narrow field table, ``run_fields`` (#12): its migration on ledgers made by older code
(every query keeps its answer), and its upkeep on every path that writes a run's query fields, in
SQLite and in PostgreSQL team mode."""

from __future__ import annotations

import json
import shutil
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from postgres_server import postgres_cluster  # noqa: F401 (fixture)

import labledger
from labledger.store.ledger import Ledger
from labledger.store.migrations import migrate
from labledger.store.query import QueryError

FIXTURES = Path(__file__).parent / "fixtures"


def _row(value: Any) -> tuple[int, Any, Any]:
    """``(kind, num, str)`` of one JSON value, as the migration's comment defines them."""
    if isinstance(value, bool):
        return 2, int(value), None
    if isinstance(value, (int, float)):
        return 0, value, None
    if isinstance(value, str):
        return 1, None, value
    return (4, None, None) if value is None else (3, None, None)


def expected_rows(db: Any) -> set[tuple[Any, ...]]:
    """``run_fields`` as the runs' ``fields`` and ``eval_fields`` JSON columns say it must be."""
    out = set()
    for rid, fields, evals in db.execute("SELECT id, fields, eval_fields FROM runs").fetchall():
        for text, of_evals in ((fields, False), (evals, True)):
            try:
                obj = json.loads(text) if text else {}
            except ValueError:
                obj = {}
            for key, value in (obj if isinstance(obj, dict) else {}).items():
                if key.startswith("eval.") == of_evals:
                    out.add((rid, key, *_row(value)))
    return out


def table_rows(db: Any) -> set[tuple[Any, ...]]:
    return set(db.execute("SELECT run_id, key, kind, num, str FROM run_fields").fetchall())


# -- the migration, on ledgers written by older code ----------------------------------------------
@pytest.mark.parametrize("name", ["ledger-m007", "ledger-v1"])
def test_old_ledgers_migrate_and_every_query_keeps_its_answer(tmp_path, name):
    """tests/fixtures/make_ledger_m007.py recorded what main's code (6ed09be, fields as JSON only)
    answered to each query on both fixtures; the migrated copies answer the same, in the same order."""
    expected = json.loads((FIXTURES / "ledger-m007" / "expected.json").read_text())
    src = FIXTURES / name / "ledger"
    shutil.copytree(src, tmp_path / "ledger")
    before = sqlite3.connect(tmp_path / "ledger" / "ledger.db")
    assert not before.execute("SELECT 1 FROM sqlite_master WHERE name = 'run_fields'").fetchone()
    before.close()
    book = labledger.open_ledger(tmp_path / "ledger")
    assert book.db.execute("SELECT 1 FROM _migrations WHERE name = 'm008_run_fields'").fetchone()
    assert table_rows(book.db) == expected_rows(book.db) != set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for (where, sort), ids in zip(expected["queries"], expected["ids"][name], strict=True):
            if ids is None:
                with pytest.raises(QueryError):
                    book.runs(where=where, sort=sort)
            else:
                assert [r.id for r in book.runs(where=where, sort=sort)] == ids, (where, sort)
                assert [d["id"] for d in book.run_dicts(where=where, sort=sort)] == ids


def test_the_fixture_covers_the_hard_cases():
    """The recorded answers are not trivially empty: nulls, mismatched types, lists, big integers."""
    expected = json.loads((FIXTURES / "ledger-m007" / "expected.json").read_text())
    answers = dict(zip([tuple(q) for q in expected["queries"]], expected["ids"]["ledger-m007"], strict=True))
    assert len(answers[("config.lr = 'x'", None)]) == 1
    assert len(answers[("config.flags is not null", None)]) == 2  # a list and an empty list are not null
    assert len(answers[("config.seed >= 1152921504606846976", None)]) == 1
    assert len(answers[(None, "-config.mixed")]) == 6


# -- upkeep on every write path -----------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgresql"])
def book(request, tmp_path):
    if request.param == "sqlite":
        ledger = Ledger(tmp_path / "ledger", create=True)
    else:
        cluster = request.getfixturevalue("postgres_cluster")
        ledger = Ledger(cluster.new_database(), artifacts=tmp_path / "shared", create=True)
    yield ledger
    ledger.close()


def _fields_of(book: Ledger, run_id: str) -> dict[str, tuple[Any, ...]]:
    q = "SELECT key, kind, num, str FROM run_fields WHERE run_id = ?"
    return {k: (kind, num, s) for k, kind, num, s in book.db.execute(q, (run_id,)).fetchall()}


def test_start_refresh_finish_and_evaluation_keep_the_table(book):
    config = {"lr": 1e-3, "opt": "adam", "amp": True, "betas": [0.9, 0.99], "note": None, "m": {"d": 4}}
    run = labledger.start_run("a", config=config, ledger=book)
    fields = _fields_of(book, run.id)
    assert fields["config.lr"] == (0, 1e-3, None) and fields["config.opt"] == (1, None, "adam")
    assert fields["config.amp"] == (2, 1, None) and fields["config.betas"][0] == 3
    assert fields["config.note"][0] == 4 and fields["config.m.d"] == (0, 4, None)
    run.log(1, loss=2.0)
    run.log(2, loss=1.0)
    run.sync()  # the periodic refresh of the index row
    assert _fields_of(book, run.id)["scalars.loss.min"][1] == 1.0
    run.log(3, loss=0.5)
    run.set_summary(best=3)
    run.finish()
    fields = _fields_of(book, run.id)
    assert fields["scalars.loss.last"][1] == 0.5 and fields["summary.best"][1] == 3
    assert fields["counts.steps"][1] == 3
    doc = {"tasks": {"t": {"metrics": [{"metric": "accuracy", "value": 0.75}]}}}  # an imported report
    book.save_evaluation(run.id, "test", doc, kind="report")
    assert _fields_of(book, run.id)["eval.test.accuracy"][1] == 0.75
    book.save_evaluation(
        run.id, "test", {"tasks": {"t": {"metrics": [{"metric": "accuracy", "value": 0.5}]}}}, kind="report"
    )
    assert _fields_of(book, run.id)["eval.test.accuracy"][1] == 0.5  # replaced, not added
    assert table_rows(book.db) == expected_rows(book.db)
    assert [r.name for r in book.runs(where="eval.test.accuracy = 0.5 and config.amp = true")] == ["a"]


def test_a_crashed_run_a_backfill_and_a_deleted_run_keep_the_table(book):
    run_dir = book.run_dir("dead")
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text('{"lr": 7}')
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "loss": 0.25}\n')
    book.register_run({"id": "dead", "name": "dead", "status": "running", "started": 1.0, "host": book.host})
    assert _fields_of(book, "dead") == {}
    assert book.reap() == ["dead"]  # no process holds its lock: crashed, its fields from its folder
    assert _fields_of(book, "dead")["config.lr"] == (0, 7, None)
    assert _fields_of(book, "dead")["scalars.loss.min"][1] == 0.25
    book.db.execute("UPDATE runs SET fields = NULL")  # a run from before the index kept fields
    assert _fields_of(book, "dead") == {}
    from labledger.store.fields import backfill_fields

    assert backfill_fields(book) == 1
    assert _fields_of(book, "dead")["config.lr"] == (0, 7, None)
    book.db.execute("DELETE FROM runs WHERE id = 'dead'")
    assert table_rows(book.db) == set()


def test_rows_that_other_code_writes_keep_the_table(book):
    """Bulk inserts (bench/runs.py), an adopted import, a sync from another ledger, text that is not
    a JSON object: the triggers see every write."""
    cols = "id, name, status, started, summary, updated, fields, eval_fields"
    rows = [
        ("b1", "b1", "finished", 1.0, "{}", 1.0, '{"config.lr": 0.1, "eval.x": 1}', '{"eval.t.acc": 0.5}'),
        ("b2", "b2", "finished", 2.0, "{}", 1.0, "not json", "[1, 2]"),
        ("b3", "b3", "finished", 3.0, "{}", 1.0, '{"config.lr": "x"}', None),
    ]
    with book.transaction() as db:
        db.executemany(f"INSERT INTO runs ({cols}) VALUES ({', '.join('?' * 8)})", rows)
    assert table_rows(book.db) == {
        ("b1", "config.lr", 0, 0.1, None),
        ("b1", "eval.t.acc", 0, 0.5, None),
        ("b3", "config.lr", 1, None, "x"),
    }
    assert [r.name for r in book.runs(where="config.lr = 'x' or eval.t.acc > 0")] == ["b3", "b1"]
    book.update_run("b2", fields={"config.lr": 0.2})
    book.update_run("b1", eval_fields={})
    assert table_rows(book.db) == expected_rows(book.db)
    assert ("b2", "config.lr", 0, 0.2, None) in table_rows(book.db)
    assert not [r for r in table_rows(book.db) if r[1].startswith("eval.")]


def test_an_import_and_a_sync_keep_the_table(tmp_path, book):
    from labledger.store.index import replace_run_rows

    with book.staging() as stage:
        labledger.start_run("imported", config={"opt": "sgd"}, ledger=stage).finish()
        (rid,) = book.adopt(stage)
    assert _fields_of(book, rid)["config.opt"] == (1, None, "sgd")
    # what `labledger sync` sends: the run's index rows, replacing the server's
    other = Ledger(tmp_path / "other", create=True)
    with labledger.start_run("synced", config={"opt": "adam", "h": 2}, ledger=other) as run:
        run.log(1, loss=1.0)
    cols = [r[1] for r in other.db.execute("PRAGMA table_info(runs)")]
    row = list(other.db.execute("SELECT * FROM runs WHERE id = ?", (run.id,)).fetchone())
    replace_run_rows(book, run.id, {"runs": {"columns": cols, "rows": [row]}})
    assert _fields_of(book, run.id)["config.h"] == (0, 2, None)
    row[cols.index("fields")] = '{"config.opt": "lamb"}'
    replace_run_rows(book, run.id, {"runs": {"columns": cols, "rows": [row]}})
    assert _fields_of(book, run.id) == {"config.opt": (1, None, "lamb")}
    assert table_rows(book.db) == expected_rows(book.db)
    other.close()


def test_the_migration_fills_the_table_from_the_json_columns(book):
    """m008 on an index that already holds runs (a PostgreSQL team ledger too)."""
    labledger.start_run("x", config={"lr": 0.5, "flag": False, "names": ["a"]}, ledger=book).finish()
    book.db.execute("UPDATE runs SET eval_fields = ?", ('{"eval.t.f1": 0.25}',))
    book.db.execute("DELETE FROM _migrations WHERE name = 'm008_run_fields'")
    book.db.execute("DROP TABLE run_fields")
    book.db.execute("DROP INDEX runs_without_fields")
    if book.dialect == "postgresql":
        book.db.execute("DROP TRIGGER runs_fields ON runs")
    else:
        for trigger in ("runs_fields_insert", "runs_fields_update", "runs_eval_fields_update", "runs_fields_delete"):
            book.db.execute(f"DROP TRIGGER {trigger}")
    assert migrate(book.db) == ["m008_run_fields"]
    rows = table_rows(book.db)
    assert rows == expected_rows(book.db) and len(rows) > 5
    assert [r.name for r in book.runs(where="config.flag = false and eval.t.f1 < 0.3")] == ["x"]


def test_the_covering_migration_on_an_index_that_holds_runs(book):
    """m010 on a ledger made before it (a PostgreSQL team ledger too): the same answers after; on
    PostgreSQL the value indexes carry the run id, the primary key the value, and the planner has
    statistics over each key and its values (SQLite's indexes hold the key already: no change)."""
    for i, (lr, opt) in enumerate([(1e-4, "adam"), (3e-3, "sgd"), (1e-4, "sgd"), (5e-4, "adam")]):
        with labledger.start_run(f"r{i}", config={"lr": lr, "opt": opt}, ledger=book) as run:
            run.log(1, loss=1.0 / (i + 1))
    query = {"where": "config.lr < 1e-3 and config.opt = 'adam'", "sort": "-scalars.loss.min"}
    before = [r.name for r in book.runs(**query)]
    assert before == ["r0", "r3"]
    if book.dialect == "postgresql":  # the indexes and key as m008 made them
        for statement in (
            "DROP STATISTICS run_fields_key_str",
            "DROP STATISTICS run_fields_key_num",
            "DROP INDEX run_fields_num",
            "CREATE INDEX run_fields_num ON run_fields(key, kind, num)",
            "DROP INDEX run_fields_str",
            "CREATE INDEX run_fields_str ON run_fields(key, str) WHERE str IS NOT NULL",
            "ALTER TABLE run_fields DROP CONSTRAINT run_fields_pkey",
            "ALTER TABLE run_fields ADD CONSTRAINT run_fields_pkey PRIMARY KEY (run_id, key)",
        ):
            book.db.execute(statement)
    book.db.execute("DELETE FROM _migrations WHERE name = 'm010_run_fields_covering'")
    assert migrate(book.db) == ["m010_run_fields_covering"]
    assert [r.name for r in book.runs(**query)] == before
    assert table_rows(book.db) == expected_rows(book.db)
    if book.dialect == "postgresql":
        q = "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'run_fields'"
        defs = dict(book.db.execute(q).fetchall())
        assert defs["run_fields_num"].endswith("(key, kind, num) INCLUDE (run_id)")
        assert "(key, str) INCLUDE (run_id) WHERE" in defs["run_fields_str"]
        assert defs["run_fields_pkey"].endswith("(run_id, key) INCLUDE (kind, num, str)")
        stats = {r[0] for r in book.db.execute("SELECT stxname FROM pg_statistic_ext").fetchall()}
        assert {"run_fields_key_str", "run_fields_key_num"} <= stats
        # the primary key still decides conflicts: a run's fields rewritten in place
        new_fields = '{"config.opt": "adam", "config.lr": 1e-5}'
        book.db.execute("UPDATE runs SET fields = ? WHERE name = 'r1'", (new_fields,))
        assert [r.name for r in book.runs(**query)] == ["r0", "r3", "r1"]  # r1's loss is gone: last


def test_a_new_postgres_ledger_leaves_its_empty_field_table_to_autovacuum(postgres_cluster, tmp_path):
    """m010 analyses run_fields only when it holds rows: statistics of the empty table of a new
    ledger made the trigger's cached plans scan the whole table per run (5,000 runs in one
    transaction: 221 s instead of 5 s)."""
    book = Ledger(postgres_cluster.new_database(), artifacts=tmp_path / "shared", create=True)
    try:
        (reltuples,) = book.db.execute("SELECT reltuples FROM pg_class WHERE relname = 'run_fields'").fetchone()
        assert reltuples < 0  # never analysed
    finally:
        book.close()


def test_run_dicts_are_the_runs_to_dict_and_dir_is_made_on_first_use(tmp_path):
    from labledger.store.ledger import RunInfo

    with labledger.start_run("a", tags=["y", "x"], config={"lr": 0.1}, ledger=tmp_path / "l") as run:
        run.log(1, loss=0.5)
    running = labledger.start_run("b", ledger=tmp_path / "l")
    book = labledger.open_ledger(tmp_path / "l")
    infos = book.runs(sort="name")
    dicts = book.run_dicts(sort="name")
    assert [d["duration"] is not None for d in dicts] == [True, True]  # a running run: to now
    for d in dicts:
        d.pop("duration")
    assert dicts == [{k: v for k, v in i.to_dict().items() if k != "duration"} for i in infos]
    assert dicts[0]["tags"] == ["x", "y"] and dicts[0]["dir"] == str(book.run_dir(run.id))
    assert infos[0].dir == book.run_dir(run.id)
    given = RunInfo("i", "n", None, [], "finished", 0.0, 1.0, None, None, None, None, None, dir=tmp_path)
    assert given.dir == tmp_path and RunInfo("i", "n", None, [], "finished", 0.0, None, *[None] * 5).dir is None
    running.finish()


def test_run_info_compares_and_shows_its_fields_as_the_dataclass_did(tmp_path):
    from labledger.store.ledger import RunInfo

    args = ("i", "n", None, ["t"], "finished", 0.0, 1.0, "h", 7, None, None, None)
    a, b = RunInfo(*args, summary={"steps": 3}, dir=tmp_path), RunInfo(*args, summary={"steps": 3}, dir=tmp_path)
    assert a == b and a != RunInfo(*args) and a != args and a.summary == {"steps": 3}
    assert repr(RunInfo(*args)) == (
        "RunInfo(id='i', name='n', group=None, tags=['t'], status='finished', started=0.0, ended=1.0, "
        "host='h', pid=7, git_commit=None, git_dirty=None, error=None, summary={}, dir=None)"
    )


def test_the_index_columns_are_runinfo_fields_and_columns_of_runs(tmp_path):
    """One list (RunInfo's fields): the columns a RunInfo is read from and those a query selects are
    derived from it, and each is a column of the ``runs`` table; each field reads back."""
    import dataclasses

    from labledger.store import query
    from labledger.store.ledger import INDEX_COLUMNS, RunInfo

    ledger = Ledger(tmp_path / "l", create=True)
    table = [r[1] for r in ledger.db.execute("PRAGMA table_info(runs)")]
    assert set(INDEX_COLUMNS) <= set(table) and set(query._QUERY_COLUMNS) <= set(table)
    assert [{"grp": "group"}.get(c, c) for c in INDEX_COLUMNS] == [
        f.name for f in dataclasses.fields(RunInfo) if f.name not in ("tags", "dir")
    ]
    assert ", ".join(INDEX_COLUMNS) == Ledger._COLUMNS
    sql, _ = query.compile_query(None, [], columns="id", now=0.0)
    assert f"SELECT {', '.join((*INDEX_COLUMNS, 'fields', 'eval_fields'))}, CASE" in sql
    with labledger.start_run("a", group="g", tags=["t"], ledger=ledger) as run:
        run.log(1, loss=0.5)
    ledger.update_run(run.id, group="g2", error="e")
    (info,) = ledger.runs()
    got = (info.id, info.name, info.group, info.tags, info.status, info.error, info.pid, info.host)
    assert got == (run.id, "a", "g2", ["t"], "finished", "e", run.meta["pid"], run.meta["host"])
    assert (
        (info.summary["steps"], info.summary["last"]) == (1, {"loss": 0.5})
        and info.started == run.meta["started"]
        and info.ended == run.meta["ended"]
    )
    assert info == ledger.info(run.id) == ledger.runs(where="name = 'a'")[0]
