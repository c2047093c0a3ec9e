"""Named, append-only schema migrations for the ledger's index (SQLite, or PostgreSQL in team mode).

Each migration is a function ``mNNN_name(db)`` registered with :func:`migration`. Applied names are
recorded in the ``_migrations`` table of the database itself; :func:`migrate` applies the missing
ones in order, each in its own transaction. Never edit a migration that has shipped: add one.

Migrations are written in SQLite's dialect; on PostgreSQL ``db`` is a
:class:`labledger.store.dialect.PostgresIndex`, which translates each statement (types, identity
columns, placeholders), so both databases get the same named migrations.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

#: A ``sqlite3.Connection`` or a :class:`labledger.store.dialect.PostgresIndex`.
Connection = Any
MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = []


def migration(fn: Callable[[Connection], None]) -> Callable[[Connection], None]:
    """Register ``fn`` as the next migration (its ``__name__`` is its permanent name)."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


def migrate(db: Connection) -> list[str]:
    """Apply every migration not yet recorded in ``db``; returns the names applied now."""
    create = "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)"
    if getattr(db, "dialect", "sqlite") == "postgresql":
        # Under the ledger's write lock: two machines opening a new PostgreSQL ledger at once must
        # not race on creating the table (IF NOT EXISTS is not atomic there).
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(create)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    else:
        db.execute(create)
    done = {row[0] for row in db.execute("SELECT name FROM _migrations")}
    applied = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the write lock.
            if db.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                db.execute("COMMIT")
                continue
            fn(db)
            db.execute("INSERT INTO _migrations (name, applied) VALUES (?, ?)", (name, time.time()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            grp TEXT,
            status TEXT NOT NULL,
            started REAL NOT NULL,
            ended REAL,
            host TEXT,
            pid INTEGER,
            git_commit TEXT,
            git_dirty INTEGER,
            error TEXT,
            summary TEXT NOT NULL DEFAULT '{}',
            updated REAL NOT NULL
        )""")
    db.execute("CREATE INDEX runs_name ON runs(name)")
    db.execute("CREATE INDEX runs_grp ON runs(grp)")
    db.execute("CREATE INDEX runs_status ON runs(status)")
    db.execute(
        "CREATE TABLE run_tags (run_id TEXT NOT NULL REFERENCES runs(id), tag TEXT NOT NULL, PRIMARY KEY (run_id, tag))"
    )
    db.execute("CREATE INDEX run_tags_tag ON run_tags(tag)")
    db.execute("""
        CREATE TABLE checkpoints (
            run_id TEXT NOT NULL REFERENCES runs(id),
            step INTEGER,
            path TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            size INTEGER NOT NULL,
            created REAL NOT NULL
        )""")
    db.execute("CREATE INDEX checkpoints_sha ON checkpoints(sha256)")
    db.execute("""
        CREATE TABLE evaluations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs(id),
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            created REAL NOT NULL,
            n_rows INTEGER,
            sha256 TEXT,
            UNIQUE (run_id, name, kind)
        )""")
    db.execute("""
        CREATE TABLE metric_values (
            eval_id INTEGER NOT NULL REFERENCES evaluations(id),
            task TEXT NOT NULL,
            slice TEXT NOT NULL DEFAULT '',
            metric TEXT NOT NULL,
            params TEXT NOT NULL DEFAULT '{}',
            value REAL,
            ci_low REAL,
            ci_high REAL,
            n INTEGER,
            definition TEXT
        )""")
    db.execute("CREATE INDEX metric_values_eval ON metric_values(eval_id)")


@migration
def m002_benchmark_entries(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE benchmark_entries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            model TEXT NOT NULL,
            suite TEXT NOT NULL,
            benchmark TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT '',
            metric TEXT NOT NULL,
            params TEXT NOT NULL DEFAULT '{}',
            variant TEXT NOT NULL DEFAULT 'raw',
            value REAL NOT NULL,
            n INTEGER,
            ci_low REAL,
            ci_high REAL,
            run_id TEXT,
            evaluation TEXT,
            results_path TEXT,
            source TEXT,
            created REAL NOT NULL
        )""")
    db.execute("CREATE INDEX benchmark_entries_key ON benchmark_entries(suite, model, benchmark, variant)")


@migration
def m003_imports(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE imports (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            source TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            format TEXT NOT NULL,
            run_id TEXT NOT NULL,
            created REAL NOT NULL
        )""")
    db.execute("CREATE INDEX imports_sha ON imports(sha256)")


@migration
def m004_run_heartbeat(db: sqlite3.Connection) -> None:
    # Team mode: live runs stamp this with the database server's clock on an interval, so that a
    # host that cannot see a run's flock (another machine) can still tell a dead run (issue 7).
    db.execute("ALTER TABLE runs ADD COLUMN heartbeat REAL")


@migration
def m005_run_query_fields(db: sqlite3.Connection) -> None:
    # Issue 12: what the query language asks about many runs lives in the index, so that a query
    # never opens run files. ``fields`` (config.*, scalars.*, summary.*, counts.*) is written by
    # the run at each sync and at finish; runs from before this migration have NULL there and are
    # filled from their folders when the ledger opens (labledger.store.fields.backfill_fields).
    # ``eval_fields`` (eval.<set>.<metric>) is filled here from the indexed metric values.
    from labledger.store.fields import eval_fields_of_run

    db.execute("ALTER TABLE runs ADD COLUMN fields TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN eval_fields TEXT")
    for (run_id,) in db.execute("SELECT DISTINCT run_id FROM evaluations").fetchall():
        db.execute("UPDATE runs SET eval_fields = ? WHERE id = ?", (eval_fields_of_run(db, run_id), run_id))


@migration
def m006_run_inits(db: sqlite3.Connection) -> None:
    # Lineage (issue 15): what each run started from. A row with a sha256 that the checkpoints
    # table also holds links the run to the run that logged that checkpoint.
    db.execute("""
        CREATE TABLE run_inits (
            run_id TEXT NOT NULL REFERENCES runs(id),
            kind TEXT NOT NULL,
            sha256 TEXT,
            name TEXT,
            path TEXT,
            size INTEGER
        )""")
    db.execute("CREATE INDEX run_inits_run ON run_inits(run_id)")
    db.execute("CREATE INDEX run_inits_sha ON run_inits(sha256)")


@migration
def m007_run_counters(db: sqlite3.Connection) -> None:
    # Issue 19: records per kind, steps, last values (with their steps), first/last time and where
    # each record file ended, written by the run with its summary (labledger.store.counters), so
    # that `show` and GET /api/runs/{run} never scan a run's files. NULL (older runs, a run that died
    # before its first refresh): the first reader scans the folder once and stores them.
    db.execute("ALTER TABLE runs ADD COLUMN counters TEXT")


# What a JSON value of ``fields``/``eval_fields`` becomes in ``run_fields`` (m008): kind 0 a number
# (num), 1 text (str), 2 a boolean (num 1 or 0), 3 a list or an object, 4 null.
_SQLITE_FIELD_ROW = """
    SELECT {run}, j.key,
        CASE j.type WHEN 'integer' THEN 0 WHEN 'real' THEN 0 WHEN 'text' THEN 1 WHEN 'true' THEN 2
            WHEN 'false' THEN 2 WHEN 'null' THEN 4 ELSE 3 END,
        CASE j.type WHEN 'integer' THEN j.value WHEN 'real' THEN j.value WHEN 'true' THEN 1
            WHEN 'false' THEN 0 END,
        CASE j.type WHEN 'text' THEN j.value END
    FROM {tables}json_each(CASE WHEN NOT json_valid({value}) THEN NULL WHEN json_type({value}) = 'object'
        THEN {value} END) j
    WHERE substr(j.key, 1, 5) {eval_op} 'eval.'"""

_PG_FUNCTIONS = """
CREATE OR REPLACE FUNCTION labledger_json_object(value text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE parsed jsonb;
BEGIN
    IF value IS NULL THEN RETURN NULL; END IF;
    BEGIN
        parsed := value::jsonb;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
    IF jsonb_typeof(parsed) <> 'object' THEN RETURN NULL; END IF;
    RETURN parsed;
END
$f$;
CREATE OR REPLACE FUNCTION labledger_field_rows(run text, value text, evals boolean)
RETURNS TABLE (run_id text, key text, kind bigint, num double precision, str text) LANGUAGE sql STABLE AS $f$
    SELECT run, j.key,
        CASE jsonb_typeof(j.value) WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 2
            WHEN 'null' THEN 4 ELSE 3 END::bigint,
        CASE jsonb_typeof(j.value) WHEN 'number' THEN (j.value #>> '{}')::float8
            WHEN 'boolean' THEN CASE WHEN j.value = 'true'::jsonb THEN 1 ELSE 0 END END,
        CASE jsonb_typeof(j.value) WHEN 'string' THEN j.value #>> '{}' END
    FROM jsonb_each(labledger_json_object(value)) j WHERE (left(j.key, 5) = 'eval.') = evals
$f$;
CREATE OR REPLACE FUNCTION labledger_run_fields() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM run_fields WHERE run_id = OLD.id;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.fields IS DISTINCT FROM OLD.fields THEN
        DELETE FROM run_fields WHERE run_id = NEW.id AND left(key, 5) <> 'eval.';
        INSERT INTO run_fields (run_id, key, kind, num, str)
            SELECT * FROM labledger_field_rows(NEW.id, NEW.fields, false)
            ON CONFLICT (run_id, key) DO NOTHING;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.eval_fields IS DISTINCT FROM OLD.eval_fields THEN
        DELETE FROM run_fields WHERE run_id = NEW.id AND left(key, 5) = 'eval.';
        INSERT INTO run_fields (run_id, key, kind, num, str)
            SELECT * FROM labledger_field_rows(NEW.id, NEW.eval_fields, true)
            ON CONFLICT (run_id, key) DO NOTHING;
    END IF;
    RETURN NULL;
END
$f$;
CREATE TRIGGER runs_fields AFTER INSERT OR DELETE OR UPDATE OF fields, eval_fields ON runs
    FOR EACH ROW EXECUTE FUNCTION labledger_run_fields()
"""


@migration
def m008_run_fields(db: Connection) -> None:
    # Issue 12: the query fields in a narrow, indexed table, so that a query reads index entries
    # instead of parsing every run's JSON: one row per (run, field) of ``fields`` and ``eval_fields``
    # (see _SQLITE_FIELD_ROW for what each column holds). Triggers on ``runs`` keep it equal to those
    # two columns whatever writes them (start, refreshes, finish, evaluations, imports, sync, the
    # backfill of old runs, and versions of labledger from before this table).
    pg = getattr(db, "dialect", "sqlite") == "postgresql"
    if pg:
        db.execute(
            "CREATE TABLE run_fields (run_id TEXT NOT NULL, key TEXT NOT NULL, kind INTEGER NOT NULL, "
            "num REAL, str TEXT, PRIMARY KEY (run_id, key))"
        )
    else:
        # ``num`` has no type: integers stay integers (exact beyond 2**53), as json_extract gives them.
        db.execute(
            "CREATE TABLE run_fields (run_id TEXT NOT NULL, key TEXT NOT NULL, kind INTEGER NOT NULL, "
            "num, str TEXT, PRIMARY KEY (run_id, key)) WITHOUT ROWID"
        )
    # Opening a ledger looks for runs without fields (backfill_fields): an index of those, not a scan.
    db.execute("CREATE INDEX runs_without_fields ON runs(id) WHERE fields IS NULL")
    db.execute("CREATE INDEX run_fields_num ON run_fields(key, kind, num)")
    db.execute("CREATE INDEX run_fields_str ON run_fields(key, str) WHERE str IS NOT NULL")  # text fields only
    if pg:
        db.execute(_PG_FUNCTIONS)
        db.execute(
            "INSERT INTO run_fields (run_id, key, kind, num, str) "
            "SELECT f.* FROM runs r, labledger_field_rows(r.id, r.fields, false) f "
            "UNION ALL SELECT e.* FROM runs r, labledger_field_rows(r.id, r.eval_fields, true) e"
        )
        return

    def rows(row: str, column: str, *, evals: bool, tables: str = "") -> str:
        op = "=" if evals else "!="
        return _SQLITE_FIELD_ROW.format(run=f"{row}.id", value=f"{row}.{column}", eval_op=op, tables=tables)

    insert = "INSERT OR REPLACE INTO run_fields (run_id, key, kind, num, str)"
    db.execute(
        f"{insert} {rows('r', 'fields', evals=False, tables='runs r, ')}"
        f" UNION ALL {rows('r', 'eval_fields', evals=True, tables='runs r, ')}"
    )
    both = f"{rows('NEW', 'fields', evals=False)} UNION ALL {rows('NEW', 'eval_fields', evals=True)}"
    db.execute(f"CREATE TRIGGER runs_fields_insert AFTER INSERT ON runs BEGIN {insert} {both}; END")
    for column, evals in (("fields", False), ("eval_fields", True)):
        db.execute(f"""
            CREATE TRIGGER runs_{column}_update AFTER UPDATE OF {column} ON runs
            WHEN NEW.{column} IS NOT OLD.{column} BEGIN
                DELETE FROM run_fields WHERE run_id = NEW.id AND substr(key, 1, 5) {"=" if evals else "!="} 'eval.';
                {insert} {rows("NEW", column, evals=evals)};
            END""")
    db.execute(
        "CREATE TRIGGER runs_fields_delete AFTER DELETE ON runs BEGIN DELETE FROM run_fields WHERE run_id = OLD.id; END"
    )


@migration
def m009_eval_field_short_keys(db: Connection) -> None:
    # Issue 43: the ``eval.*`` fields also carry the metric key ``labledger eval`` prints
    # (``f1[average=macro]`` for the stored ``f1[average=macro,zero_division=0]``); recomputed for
    # every run with evaluations (the run_fields triggers follow).
    from labledger.store.fields import eval_fields_of_run

    for (run_id,) in db.execute("SELECT DISTINCT run_id FROM evaluations").fetchall():
        db.execute("UPDATE runs SET eval_fields = ? WHERE id = ?", (eval_fields_of_run(db, run_id), run_id))


@migration
def m010_run_fields_covering(db: Connection) -> None:
    # Issue 46: on PostgreSQL a query's tests and sort keys read ``run_fields`` from its indexes
    # alone (index-only scans), as SQLite does: there the table is its primary key (WITHOUT
    # ROWID) and each index holds that key, so SQLite has nothing to change. The two value indexes
    # carry the run's id, and the primary key (a sort key's look-up) the value. Statistics over
    # the key and its value let the planner see that ``config.opt = 'adam'`` holds for half the
    # runs (not for the share of all field rows that say 'adam').
    if getattr(db, "dialect", "sqlite") != "postgresql":
        return
    for statement in (
        "DROP INDEX run_fields_num",
        "CREATE INDEX run_fields_num ON run_fields(key, kind, num) INCLUDE (run_id)",
        "DROP INDEX run_fields_str",
        "CREATE INDEX run_fields_str ON run_fields(key, str) INCLUDE (run_id) WHERE str IS NOT NULL",
        "ALTER TABLE run_fields DROP CONSTRAINT run_fields_pkey",
        "ALTER TABLE run_fields ADD CONSTRAINT run_fields_pkey PRIMARY KEY (run_id, key) INCLUDE (kind, num, str)",
        "CREATE STATISTICS run_fields_key_str (mcv) ON key, str FROM run_fields",
        "CREATE STATISTICS run_fields_key_num (mcv) ON key, kind, num FROM run_fields",
    ):
        db.execute(statement)
    # Statistics now for a ledger that holds runs; an empty table is left to autovacuum: analysed
    # empty, the planner would take it to stay so, and the trigger's plans (cached for the session)
    # would scan the whole table for each run that a long transaction adds (a sync, an import).
    if db.execute("SELECT 1 FROM run_fields LIMIT 1").fetchone() is not None:
        db.execute("ANALYZE run_fields")
