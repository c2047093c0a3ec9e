"""The index's rows for readers and writers outside ``store/``: the only SQL that code outside this
package depends on, so that the site, the analyses and the server call functions, never SQL.

Every function takes an open :class:`~labledger.store.ledger.Ledger` (SQLite or PostgreSQL: the
statements are in the ledger's dialect) and leaves it open.

>>> import tempfile, labledger
>>> with labledger.open_ledger(tempfile.mkdtemp(), create=True) as book:
...     with labledger.start_run("r", ledger=book, config={"lr": 0.1}) as run:
...         run.log(1, loss=0.5)
...     fields = index_fields(book)
>>> [(f.fields["config.lr"], f.fields["scalars.loss.last"]) for f in fields.values()]
[(0.1, 0.5)]
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from labledger.errors import RecordError

if TYPE_CHECKING:
    from labledger.store.ledger import Ledger

__all__ = [
    "BENCHMARK_COLUMNS",
    "RUN_TABLES",
    "IndexFields",
    "add_benchmark_rows",
    "checkpoint_rows",
    "current_benchmark_rows",
    "index_fields",
    "init_rows",
    "replace_run_rows",
    "table_columns",
]


class IndexFields(NamedTuple):
    """A run's queryable fields as the index holds them (``config.*``, ``scalars.*``, ``eval.*``...),
    with the host and git commit it ran on."""

    host: str | None
    git_commit: str | None
    fields: dict[str, Any]


def index_fields(book: Ledger, run_ids: Sequence[str] | None = None) -> dict[str, IndexFields]:
    """Each run's :class:`IndexFields` by id (``run_ids``: only those; default: every run)."""
    sql = "SELECT id, host, git_commit, fields, eval_fields FROM runs"
    params: tuple[str, ...] = ()
    if run_ids is not None and len(run_ids) == 1:  # (a whole catalog is read at once instead)
        sql += " WHERE id = ?"
        params = (run_ids[0],)
    wanted = set(run_ids) if run_ids is not None else None
    out: dict[str, IndexFields] = {}
    for rid, host, commit, fields, evals in book.db.execute(sql, params).fetchall():
        if wanted is None or rid in wanted:
            merged = {**orjson.loads(fields or "{}"), **orjson.loads(evals or "{}")}
            out[rid] = IndexFields(host, commit, merged)
    return out


#: The index columns that change whenever a write through labledger changes a run (``heartbeat``
#: and ``counters`` change as a run lives, and are left out).
CHANGE_COLUMNS = (
    "id, name, grp, status, started, ended, host, pid, git_commit, git_dirty, error, summary, updated, "
    "fields, eval_fields"
)


def change_rows(book: Ledger) -> tuple[dict[str, tuple[Any, ...]], dict[str, list[tuple[str, str, float]]]]:
    """What tells that a run changed, from the index alone, for every run: its
    :data:`CHANGE_COLUMNS` by id, and the ``(name, kind, created)`` of each document stored for it
    (``save_evaluation``), by run id (a static site's rebuild compares them with the last build's)."""
    stored: dict[str, list[tuple[str, str, float]]] = {}
    for rid, name, kind, created in book.db.execute("SELECT run_id, name, kind, created FROM evaluations"):
        stored.setdefault(rid, []).append((name, kind, created))
    rows = {row[0]: tuple(row) for row in book.db.execute(f"SELECT {CHANGE_COLUMNS} FROM runs")}
    return rows, stored


def checkpoint_rows(book: Ledger) -> Iterator[tuple[str, Any, str, str, int]]:
    """Every logged checkpoint as ``(run_id, step, path, sha256, size)``, oldest first."""
    yield from book.db.execute("SELECT run_id, step, path, sha256, size FROM checkpoints ORDER BY created").fetchall()


def init_rows(book: Ledger) -> Iterator[tuple[str, str, str | None, str | None, str | None, int | None]]:
    """What each run started from, as ``(run_id, kind, sha256, name, path, size)``."""
    yield from book.db.execute("SELECT run_id, kind, sha256, name, path, size FROM run_inits").fetchall()


#: The columns of a benchmark entry as :func:`add_benchmark_rows` takes them and
#: :func:`current_benchmark_rows` gives them.
BENCHMARK_COLUMNS = (
    "model",
    "suite",
    "benchmark",
    "category",
    "metric",
    "params",
    "variant",
    "value",
    "n",
    "ci_low",
    "ci_high",
    "run_id",
    "evaluation",
    "results_path",
    "source",
)


def add_benchmark_rows(book: Ledger, rows: Sequence[Sequence[Any]]) -> int:
    """Add benchmark entries (each row in :data:`BENCHMARK_COLUMNS` order) in one transaction;
    how many were added."""
    names = ", ".join(BENCHMARK_COLUMNS)
    marks = ", ".join("?" * (len(BENCHMARK_COLUMNS) + 1))
    now = time.time()
    with book.transaction() as db:
        db.executemany(f"INSERT INTO benchmark_entries ({names}, created) VALUES ({marks})", [[*r, now] for r in rows])
    return len(rows)


def current_benchmark_rows(
    book: Ledger,
    *,
    suite: str | None = None,
    models: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The current benchmark entries (the latest per model, suite, benchmark and variant), each a
    dict of :data:`BENCHMARK_COLUMNS`, in the order they were added; ``suite``, ``models`` and
    ``variants`` keep only those."""
    q = (
        f"SELECT {', '.join(BENCHMARK_COLUMNS)} FROM benchmark_entries WHERE id IN (SELECT MAX(id) FROM "
        f"benchmark_entries GROUP BY model, suite, benchmark, variant)"
    )
    params: list[Any] = []
    if suite is not None:
        q += " AND suite = ?"
        params.append(suite)
    if models:
        q += f" AND model IN ({','.join('?' * len(models))})"
        params.extend(models)
    if variants:
        q += f" AND variant IN ({','.join('?' * len(variants))})"
        params.extend(variants)
    q += " ORDER BY id"
    return [dict(zip(BENCHMARK_COLUMNS, row)) for row in book.db.execute(q, params).fetchall()]


#: The index tables that hold one run's rows, with the column that names the run (evaluations and
#: their metric values aside: their ids are the index's own).
RUN_TABLES = (("runs", "id"), ("run_tags", "run_id"), ("checkpoints", "run_id"), ("benchmark_entries", "run_id"))


def table_columns(db: Any, dialect: str, table: str) -> list[str]:
    """The column names of an index table, in order (``db``: the ledger's index connection, or a
    transaction's; ``dialect``: the ledger's)."""
    if dialect == "postgresql":
        return list(db.columns(table))
    return [str(r[1]) for r in db.execute(f"PRAGMA table_info({table})").fetchall()]


def replace_run_rows(book: Ledger, run_id: str, tables: Mapping[str, Any]) -> None:
    """Replace one run's index rows with ``tables`` (``{table: {"columns": [...], "rows": [[...]]}}``,
    as :func:`labledger.store.manifest.index_rows` makes them), in one transaction. Columns this
    index does not have are left out; the ids of benchmark entries and evaluations are the index's
    own (metric values follow their evaluation). Raises :class:`~labledger.errors.RecordError` for
    tables of another shape, before anything is changed."""

    def table(name: str) -> tuple[list[str], list[list[Any]]]:
        t = tables.get(name) or {"columns": [], "rows": []}
        cols, rows = t.get("columns"), t.get("rows")
        if not isinstance(cols, list) or not isinstance(rows, list):
            raise RecordError(f"index table {name!r} must be {{'columns': [...], 'rows': [[...]]}}")
        return cols, rows

    for name in (*(n for n, _ in RUN_TABLES), "evaluations", "metric_values"):
        table(name)
    runs_cols, runs_rows = table("runs")
    if len(runs_rows) != 1 or "id" not in runs_cols or runs_rows[0][runs_cols.index("id")] != run_id:
        raise RecordError(f"the index rows must hold exactly the runs row of {run_id}")
    if "updated" not in runs_cols:  # left out by the sender: it changes without the run changing
        runs_cols, runs_rows = [*runs_cols, "updated"], [[*runs_rows[0], time.time()]]
    ours = {
        name: set(table_columns(book.db, book.dialect, name))
        for name in (*(n for n, _ in RUN_TABLES), "evaluations", "metric_values")
    }

    def insert(db: Any, name: str, cols: list[str], rows: list[list[Any]], skip: tuple[str, ...] = ()) -> None:
        keep = [i for i, c in enumerate(cols) if c in ours[name] and c not in skip]
        if not keep or not rows:
            return
        names = ", ".join(cols[i] for i in keep)
        marks = ",".join("?" * len(keep))
        db.executemany(f"INSERT INTO {name} ({names}) VALUES ({marks})", [[r[i] for i in keep] for r in rows])

    with book.transaction() as db:
        _delete_run_rows(db, run_id)
        for name, _ in RUN_TABLES:
            cols, rows = (runs_cols, runs_rows) if name == "runs" else table(name)
            insert(db, name, cols, rows, skip=("id",) if name == "benchmark_entries" else ("heartbeat",))
        ecols, erows = table("evaluations")
        mcols, mrows = table("metric_values")
        if not erows:
            return
        keep = [i for i, c in enumerate(ecols) if c in ours["evaluations"] and c != "id"]
        names = ", ".join(ecols[i] for i in keep)
        marks = ",".join("?" * len(keep))
        eid_at = ecols.index("id")
        mid_at = mcols.index("eval_id") if "eval_id" in mcols else -1
        for row in erows:
            values = [row[i] for i in keep]
            if book.dialect == "postgresql":
                sql = f"INSERT INTO evaluations ({names}) VALUES ({marks}) RETURNING id"
                new_id = db.execute(sql, values).fetchone()[0]
            else:
                new_id = db.execute(f"INSERT INTO evaluations ({names}) VALUES ({marks})", values).lastrowid
            mine = [[new_id if i == mid_at else v for i, v in enumerate(m)] for m in mrows if m[mid_at] == row[eid_at]]
            insert(db, "metric_values", mcols, mine)


def _delete_run_rows(db: Any, run_id: str) -> None:
    """Delete one run's rows from every index table, inside the caller's transaction."""
    ids = [r[0] for r in db.execute("SELECT id FROM evaluations WHERE run_id = ?", (run_id,)).fetchall()]
    for eid in ids:
        db.execute("DELETE FROM metric_values WHERE eval_id = ?", (eid,))
    db.execute("DELETE FROM evaluations WHERE run_id = ?", (run_id,))
    for name, key in reversed(RUN_TABLES):
        db.execute(f"DELETE FROM {name} WHERE {key} = ?", (run_id,))
