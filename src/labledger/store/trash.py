"""Deleting runs: a trash folder to restore them from, and purging it (MLflow's soft delete + gc).

```
<ledger>/.trash/<run id>/note.json   when, by whom, and every index row of the run (saved exactly)
<ledger>/.trash/<run id>/run/        the run's folder, as it was (absent: its folder was gone already)
<ledger>/runs/<run id>/.deleted.json a deleted run's files that other runs still use, kept in place
```

:func:`delete_runs` moves each run's folder into the trash (one ``rename``) and removes its index
rows (``runs``, tags, checkpoints, inits, evaluations and their metric values, benchmark entries,
import records: every table with a ``run_id`` column, and the metric values of its evaluations) in
one transaction, after writing them to the note. The transaction decides: a delete interrupted
before its commit leaves the run as it was (its folder is put back by the next ``rm``, ``restore``,
``gc`` or ``verify --repair``, see :func:`settle`); one interrupted after it is a finished delete.
:func:`restore_runs` puts the rows back (same evaluation and entry ids) and the folder in place.
:func:`purge` removes trash entries for good.

A checkpoint file inside a deleted run's folder that another run still uses (a checkpoint that run
recorded in place, or the init it started from, by path or by sha256 only) is kept at its path, so
that the other run's records stay true: the file is linked back (same bytes; a copy where the
filesystem cannot link) into ``runs/<id>/`` beside a ``.deleted.json`` marker that says why. A purge
removes such a file once no run in the index uses it.

A run whose folder was removed by hand (``rm -rf``) stays in the index until ``verify --repair``
(:func:`forget_missing`) moves its rows into the trash; every command that reads the run says so in
one line (:class:`RunFolderGoneError`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labledger.errors import LedgerError, RunNotFoundError, RunStateError
from labledger.store.index import table_columns

if TYPE_CHECKING:
    from labledger.store.ledger import Ledger

#: The trash folder, inside the ledger folder (team mode: inside the shared artifacts folder).
TRASH = ".trash"
#: The note of a trash entry: its index rows and what was kept.
NOTE = "note.json"
#: The marker beside the files of a deleted run that other runs still use.
MARKER = ".deleted.json"
#: The version of the note's layout.
NOTE_FORMAT = 1
#: Index tables derived from others (triggers on ``runs`` fill ``run_fields``): never saved or restored.
DERIVED_TABLES = frozenset({"run_fields"})
#: A purge renames an entry to this prefix first, so that a purge killed mid-way is finished later.
_PURGING = ".purging-"


class RunFolderGoneError(LedgerError):
    """A run is in the index but its folder is not there (removed by hand, or left in the trash by
    an interrupted ``labledger rm``); the message says what ``verify --repair`` does about it."""


@dataclass
class TrashEntry:
    """One deleted run in the trash.

    ``rows``: the number of index rows saved per table; ``kept``: the files left in place because
    other runs use them (``path`` relative to the run folder, ``sha256``, ``used_by`` run ids);
    ``folder``: whether the entry holds the run's folder (``False``: it was removed by hand and only
    the index rows were saved).
    """

    id: str
    name: str
    deleted: float
    path: Path
    folder: bool
    status: str | None = None
    rows: dict[str, int] = field(default_factory=dict)
    kept: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "deleted": self.deleted,
            "path": str(self.path),
            "folder": self.folder,
            "status": self.status,
            "rows": self.rows,
            "kept": self.kept,
        }


# -- where things are ------------------------------------------------------------------------------
def trash_dir(ledger: Ledger) -> Path:
    """The ledger's trash folder (``<ledger>/.trash``; it may not exist yet)."""
    return ledger.root / TRASH


def gone_error(ledger: Ledger, run_id: str) -> RunFolderGoneError | None:
    """The error to raise for a run of the index whose folder is not in ``runs/``, else ``None``
    (its folder is there, or the run is starting: its folder is renamed into ``runs/`` just after
    its row is committed)."""
    run_dir = ledger.run_dir(run_id)
    if run_dir.is_dir() or (ledger.root / ledger.NEW_RUNS / run_id).is_dir():
        return None
    entry = trash_dir(ledger) / run_id
    if (entry / "run").is_dir():
        return RunFolderGoneError(
            f"run {run_id}: its folder is in the trash ({entry / 'run'}), left by an interrupted "
            f"labledger rm; labledger verify --repair puts it back"
        )
    return RunFolderGoneError(
        f"run {run_id}: its folder {run_dir} is gone (removed by hand?); "
        f"labledger verify --repair removes it from the index"
    )


@contextlib.contextmanager
def _trash_lock(ledger: Ledger) -> Iterator[Path]:
    """``.trash/.lock`` held: one delete, restore, purge or settling at a time across processes."""
    base = trash_dir(ledger)
    base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield base
    finally:
        os.close(fd)


# -- the index rows of a run -----------------------------------------------------------------------
def _tables(db: Any, dialect: str) -> list[str]:
    if dialect == "postgresql":
        q = (
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE' ORDER BY table_name"
        )
    else:
        q = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    return [str(r[0]) for r in db.execute(q).fetchall()]


def _run_tables(db: Any, dialect: str) -> list[tuple[str, str, list[str]]]:
    """``(table, key column, columns)`` of every index table whose rows belong to one run, in the
    order rows are inserted (``runs`` first, ``evaluations`` before ``metric_values``): ``runs``
    (``id``), each table with a ``run_id`` column, and each with an ``eval_id`` column (keyed by
    the run's evaluations)."""
    by_run: list[tuple[str, str, list[str]]] = []
    by_eval: list[tuple[str, str, list[str]]] = []
    runs: tuple[str, str, list[str]] | None = None
    for table in _tables(db, dialect):
        if table in DERIVED_TABLES or table.startswith("_"):
            continue
        cols = table_columns(db, dialect, table)
        if table == "runs":
            runs = (table, "id", cols)
        elif "run_id" in cols:
            by_run.append((table, "run_id", cols))
        elif "eval_id" in cols:
            by_eval.append((table, "eval_id", cols))
    by_run.sort(key=lambda t: t[0] != "evaluations")  # evaluations first: metric values refer to them
    return ([runs] if runs else []) + by_run + by_eval


def _order(cols: list[str]) -> str:
    """The column that keeps a table's rows in the order they were written."""
    return "id" if "id" in cols else "rowid"


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": bytes(value).hex()}
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$bytes"}:
        return bytes.fromhex(value["$bytes"])
    return value


def snapshot_rows(db: Any, dialect: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every index row of run ``run_id``, per table, as ``{column: value}`` in the order written
    (PostgreSQL's own ``rowid`` identity column left out: it is the database's to number)."""
    out: dict[str, list[dict[str, Any]]] = {}
    eval_ids: list[Any] = []
    for table, key, cols in _run_tables(db, dialect):
        keep = [c for c in cols if c != "rowid"]
        select = ", ".join(keep)
        if key == "eval_id":
            rows: list[Any] = []
            for eval_id in eval_ids:
                rows += db.execute(
                    f"SELECT {select} FROM {table} WHERE eval_id = ? ORDER BY {_order(cols)}", (eval_id,)
                ).fetchall()
        else:
            rows = db.execute(
                f"SELECT {select} FROM {table} WHERE {key} = ? ORDER BY {_order(cols)}", (run_id,)
            ).fetchall()
        if rows:
            out[table] = [{c: _jsonable(v) for c, v in zip(keep, row)} for row in rows]
        if table == "evaluations":
            eval_ids = [r["id"] for r in out.get(table, [])]
    return out


def _delete_rows(db: Any, run_id: str, rows: dict[str, list[dict[str, Any]]], keys: dict[str, str]) -> None:
    """Remove the rows :func:`snapshot_rows` saved (children first: the foreign keys point at ``runs``)."""
    eval_ids = [r["id"] for r in rows.get("evaluations", [])]
    for table in reversed(list(keys)):
        key = keys[table]
        if key == "eval_id":
            db.executemany(f"DELETE FROM {table} WHERE eval_id = ?", [(i,) for i in eval_ids])
        else:
            db.execute(f"DELETE FROM {table} WHERE {key} = ?", (run_id,))


def _insert_rows(db: Any, dialect: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Put saved rows back, in :func:`_run_tables` order, into the columns the tables have now (a
    column added since is left to its default)."""
    order = {t: i for i, (t, _, _) in enumerate(_run_tables(db, dialect))}
    for table in sorted(rows, key=lambda t: order.get(t, len(order))):
        if table not in order:
            raise LedgerError(f"the index has no table {table!r} any more; the run's rows cannot go back")
        have = set(table_columns(db, dialect, table))
        for row in rows[table]:
            cols = [c for c in row if c in have]
            marks = ", ".join("?" * len(cols))
            db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})", [_from_json(row[c]) for c in cols])


# -- files other runs use --------------------------------------------------------------------------
def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def shared_files(ledger: Ledger, run_id: str, deleting: set[str], *, db: Any = None) -> list[dict[str, Any]]:
    """The files in run ``run_id``'s folder that a run outside ``deleting`` uses: ``{"path" (relative
    to the run folder), "sha256", "used_by"}``. A file is used by another run when that run's
    checkpoint or init row names its path, or when an init row names only its sha256 (lineage by
    hash) and the file is one of this run's checkpoints. ``db``: the connection of a transaction
    under way (default: the ledger's)."""
    db = ledger.db if db is None else db
    run_dir = ledger.run_dir(run_id)
    if not run_dir.is_dir():
        return []
    real = run_dir.resolve()
    own: dict[str, str] = {}  # this run's checkpoint files inside its folder: relative path -> sha256
    for path, sha in db.execute("SELECT path, sha256 FROM checkpoints WHERE run_id = ?", (run_id,)).fetchall():
        if not isinstance(path, str):
            continue
        target = Path(path) if Path(path).is_absolute() else real / path
        target = Path(os.path.normpath(target))
        if _inside(target, real) and target.is_file():
            own[target.relative_to(real).as_posix()] = sha
    kept: dict[str, dict[str, Any]] = {}

    def use(rel: str, sha: str | None, other: str) -> None:
        entry = kept.setdefault(rel, {"path": rel, "sha256": sha or own.get(rel), "used_by": []})
        if other not in entry["used_by"]:
            entry["used_by"].append(other)

    by_sha: dict[str, list[str]] = {}
    for rel, sha in own.items():
        by_sha.setdefault(sha, []).append(rel)
    rows = db.execute(
        "SELECT run_id, path, sha256, 'checkpoint' FROM checkpoints WHERE run_id != ? "
        "UNION ALL SELECT run_id, path, sha256, 'init' FROM run_inits WHERE run_id != ?",
        (run_id, run_id),
    ).fetchall()
    for other, path, sha, kind in rows:
        if other in deleting:
            continue
        if isinstance(path, str) and Path(path).is_absolute():
            target = Path(os.path.normpath(path))
            if _inside(target, real) and (target.is_file() or target.relative_to(real).as_posix() in own):
                use(target.relative_to(real).as_posix(), sha, other)
                continue
        if kind == "init" and not path and sha in by_sha:
            for rel in by_sha[sha]:
                use(rel, sha, other)
    return sorted(kept.values(), key=lambda e: str(e["path"]))


def _link_kept(run_dir: Path, entry_dir: Path, note: dict[str, Any]) -> None:
    """Put each kept file back at its path (a hard link to the trash's copy, else a copy) and write
    the marker; idempotent (a settling after a kill does it again)."""
    kept = note.get("kept") or []
    if not kept:
        return
    source = entry_dir / "run"
    for item in kept:
        dst = run_dir / item["path"]
        src = source / item["path"]
        if dst.exists() or not src.is_file():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    marker = {
        "id": note["id"],
        "name": note.get("name"),
        "deleted": note.get("deleted"),
        "trash": f"{TRASH}/{note['id']}",
        "why": "these files of a deleted run are kept because other runs use them (see 'kept')",
        "kept": kept,
    }
    _write_json(run_dir / MARKER, marker)


def _write_json(path: Path, obj: Any) -> None:
    """Atomically write a JSON document with the standard library's encoder (it keeps inf and
    NaN, which an index row may hold, and gives floats back exactly)."""
    from labledger.store.jsonl import atomic_write

    atomic_write(path, (json.dumps(obj, indent=1, sort_keys=False) + "\n").encode())


def _read_note(entry_dir: Path) -> dict[str, Any] | None:
    try:
        note = json.loads((entry_dir / NOTE).read_bytes())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) and isinstance(note.get("id"), str) else None


def _entry(entry_dir: Path, note: dict[str, Any]) -> TrashEntry:
    rows = note.get("rows") or {}
    status = None
    if rows.get("runs"):
        status = rows["runs"][0].get("status")
    return TrashEntry(
        id=note["id"],
        name=str(note.get("name") or ""),
        deleted=float(note.get("deleted") or 0.0),
        path=entry_dir,
        folder=(entry_dir / "run").is_dir(),
        status=status,
        rows={t: len(r) for t, r in rows.items()},
        kept=list(note.get("kept") or []),
    )


# -- delete ------------------------------------------------------------------------------------------
def delete_runs(ledger: Ledger, refs: Iterable[str]) -> list[TrashEntry]:
    """Move runs ``refs`` (ids, id prefixes or names, as :meth:`Ledger.resolve` takes them) to the
    trash; their trash entries.

    Every reference is resolved before anything moves. A running run (its process alive, on this
    host or, in team mode, with a fresh heartbeat) is refused with :class:`RunStateError`; a dead
    one is marked crashed first and may go. Each run goes in one transaction (see the module): a
    failure leaves that run as it was, and the runs before it deleted. A run whose folder was
    removed by hand goes too (its rows are saved; the entry has no folder).
    """
    ids: list[str] = []
    for ref in refs:
        run_id = ledger.resolve(ref)
        if run_id not in ids:
            ids.append(run_id)
    if not ids:
        return []
    ledger.reap()  # a run whose process died is crashed, not running
    with _trash_lock(ledger):
        _settle(ledger)
        for run_id in ids:
            _refuse_running(ledger, run_id)
        done: list[TrashEntry] = []
        for run_id in ids:
            try:
                done.append(_delete_one(ledger, run_id, set(ids)))
            except LedgerError as exc:
                if not done:
                    raise
                moved = ", ".join(e.id for e in done)
                raise LedgerError(f"{exc} (moved to the trash before it: {moved})") from None
        return done


def _refuse_running(ledger: Ledger, run_id: str) -> None:
    row = ledger.db.execute("SELECT status, name, host, pid FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise RunNotFoundError(f"run {run_id} is not in the index any more")
    status, name, host, pid = row
    if status == "running":
        raise RunStateError(
            f"run {run_id} ({name}) is running (pid {pid} on {host}); stop it (or let it end) before removing it"
        )


def _delete_one(ledger: Ledger, run_id: str, deleting: set[str]) -> TrashEntry:
    run_dir = ledger.run_dir(run_id)
    entry_dir = trash_dir(ledger) / run_id
    if entry_dir.exists():
        raise LedgerError(
            f"run {run_id}: the trash already holds an entry {entry_dir}; labledger gc removes it for good"
        )
    moved = made = False
    try:
        with ledger.transaction() as db:
            row = db.execute("SELECT status, name FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise RunNotFoundError(f"run {run_id} is not in the index any more")
            if row[0] == "running":
                raise RunStateError(f"run {run_id} ({row[1]}) started running again; it was not removed")
            rows = snapshot_rows(db, ledger.dialect, run_id)
            keys = {t: k for t, k, _ in _run_tables(db, ledger.dialect)}
            has_folder = run_dir.is_dir()
            note = {
                "format": NOTE_FORMAT,
                "id": run_id,
                "name": row[1],
                "deleted": time.time(),
                "host": ledger.host,
                "user": _user(),
                "folder": f"runs/{run_id}" if has_folder else None,
                "kept": shared_files(ledger, run_id, deleting, db=db),
                "rows": rows,
            }
            entry_dir.mkdir(parents=True)
            made = True
            _write_json(entry_dir / NOTE, note)
            if has_folder:
                try:
                    os.rename(run_dir, entry_dir / "run")
                except OSError as exc:  # another filesystem (runs/ a link to another disk), no permission
                    raise LedgerError(
                        f"run {run_id}: cannot move its folder into {entry_dir} ({exc.strerror}); nothing was removed"
                    ) from None
                moved = True
            _delete_rows(db, run_id, rows, keys)
    except BaseException:
        if moved:
            os.rename(entry_dir / "run", run_dir)
        if made:
            shutil.rmtree(entry_dir, ignore_errors=True)
        raise
    from labledger.store.jsonl import fsync_dir

    fsync_dir(trash_dir(ledger))
    fsync_dir(ledger.root / "runs")
    _link_kept(run_dir, entry_dir, note)
    return _entry(entry_dir, note)


def _user() -> str | None:
    try:
        import getpass

        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return None


# -- forget a run whose folder is gone ---------------------------------------------------------------
def forget_missing(ledger: Ledger, run_id: str) -> TrashEntry:
    """Move the index rows of run ``run_id``, whose folder was removed by hand, into a trash entry
    without a folder (what ``verify --repair`` does: nothing is lost; ``restore`` puts the rows
    back once the folder is back in ``runs/``). A run whose folder is in the trash because an
    ``rm`` was interrupted is put back instead, by :func:`settle`. Raises when the folder is there."""
    with _trash_lock(ledger):
        _settle(ledger)
        if ledger.run_dir(run_id).is_dir():
            raise LedgerError(f"run {run_id}: its folder {ledger.run_dir(run_id)} is there; nothing to forget")
        return _delete_one(ledger, run_id, {run_id})


# -- restore -----------------------------------------------------------------------------------------
def trash_entries(ledger: Ledger) -> list[TrashEntry]:
    """The trash's entries, most recently deleted first."""
    base = trash_dir(ledger)
    if not base.is_dir():
        return []
    out = []
    for entry_dir in base.iterdir():
        if entry_dir.name.startswith(".") or not entry_dir.is_dir():
            continue
        note = _read_note(entry_dir)
        if note is not None:
            out.append(_entry(entry_dir, note))
    out.sort(key=lambda e: (-e.deleted, e.id))
    return out


def resolve_trashed(ledger: Ledger, ref: str) -> TrashEntry:
    """The trash entry named by ``ref``: a run id, a unique id prefix, or a run name (the most
    recently deleted run of that name)."""
    ref = str(ref).strip()
    entries = trash_entries(ledger)
    for e in entries:
        if e.id == ref:
            return e
    by_prefix = [e for e in entries if ref and e.id.startswith(ref)]
    if len(by_prefix) == 1:
        return by_prefix[0]
    by_name = [e for e in entries if e.name == ref]
    if by_name:
        return by_name[0]
    if by_prefix:
        raise RunNotFoundError(f"'{ref}' is the start of {len(by_prefix)} ids in the trash; give more of the id")
    raise RunNotFoundError(f"No run '{ref}' in the trash of {ledger.root} (`labledger trash` lists it)")


def restore_runs(ledger: Ledger, refs: Iterable[str]) -> list[str]:
    """Put runs ``refs`` (see :func:`resolve_trashed`) back from the trash: their index rows as they
    were (same evaluation and entry ids) and their folder in ``runs/``, in one transaction each;
    the ids restored. An entry without a folder (its folder was removed by hand) is restored only
    once the folder is back in ``runs/<id>``; a run id the index has again is refused."""
    entries: list[TrashEntry] = []
    for ref in refs:
        entry = resolve_trashed(ledger, ref)
        if entry.id not in [e.id for e in entries]:
            entries.append(entry)
    with _trash_lock(ledger):
        _settle(ledger)
        restored: list[str] = []
        for e in entries:
            try:
                restored.append(_restore_one(ledger, e.id))
            except LedgerError as exc:
                if not restored:
                    raise
                raise LedgerError(f"{exc} (restored before it: {', '.join(restored)})") from None
        return restored


def _db_errors(ledger: Ledger) -> tuple[type[Exception], ...]:
    """The exceptions the index raises for a refused statement (a key taken, a constraint)."""
    if ledger.dialect != "postgresql":
        return (sqlite3.Error,)
    import psycopg

    return (sqlite3.Error, psycopg.Error)


def _restore_one(ledger: Ledger, run_id: str) -> str:
    entry_dir = trash_dir(ledger) / run_id
    note = _read_note(entry_dir)
    if note is None:
        raise RunNotFoundError(f"run {run_id} is not in the trash any more")
    run_dir = ledger.run_dir(run_id)
    source = entry_dir / "run"
    marker = run_dir / MARKER
    if not source.is_dir() and not (run_dir / "run.json").is_file():
        raise LedgerError(
            f"run {run_id}: the trash holds only its index rows (its folder was removed by hand); "
            f"put the folder back at {run_dir} and run labledger restore {run_id} again"
        )
    if source.is_dir() and run_dir.exists() and not marker.is_file():
        raise LedgerError(f"run {run_id}: {run_dir} exists; move it away to restore the run from the trash")
    aside = entry_dir / "kept-aside"
    set_aside = moved = False
    try:
        with ledger.transaction() as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise LedgerError(f"run {run_id} is in the index already; it was not restored")
            try:
                _insert_rows(db, ledger.dialect, note.get("rows") or {})
            except _db_errors(ledger) as exc:  # a row the index refuses (a key taken since)
                raise LedgerError(
                    f"run {run_id}: its index rows cannot go back ({exc}); nothing was restored"
                ) from None
            if source.is_dir():
                if run_dir.exists():  # the kept files of the delete: the trash has them too
                    os.rename(run_dir, aside)
                    set_aside = True
                os.rename(source, run_dir)
                moved = True
    except BaseException:
        if moved:
            os.rename(run_dir, source)
        if set_aside:
            os.rename(aside, run_dir)
        raise
    shutil.rmtree(entry_dir, ignore_errors=True)
    return run_id


# -- purge -------------------------------------------------------------------------------------------
@dataclass
class PurgeResult:
    """What :func:`purge` did: the entries removed for good, and the kept files it removed (no run
    uses them any more) or left (a run still does)."""

    purged: list[TrashEntry] = field(default_factory=list)
    removed_files: list[Path] = field(default_factory=list)
    kept_files: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "purged": [e.to_dict() for e in self.purged],
            "removed_files": [str(p) for p in self.removed_files],
            "kept_files": [str(p) for p in self.kept_files],
        }


def purge(ledger: Ledger, *, older_than: float | None = None, refs: Iterable[str] = ()) -> PurgeResult:
    """Remove trash entries for good: those of ``refs`` (see :func:`resolve_trashed`), else those
    deleted more than ``older_than`` seconds ago, else all. Files kept for other runs
    (``runs/<id>/.deleted.json``) whose entry is gone are removed once no run in the index uses
    them; the marker folder goes with its last file."""
    result = PurgeResult()
    refs = list(refs)
    with _trash_lock(ledger) as base:
        _settle(ledger)
        if refs:
            chosen = {resolve_trashed(ledger, r).id for r in refs}
            entries = [e for e in trash_entries(ledger) if e.id in chosen]
        else:
            cutoff = None if older_than is None else time.time() - older_than
            entries = [e for e in trash_entries(ledger) if cutoff is None or e.deleted < cutoff]
        for e in entries:
            doomed = base / f"{_PURGING}{e.id}"
            os.rename(e.path, doomed)  # gone from the trash at once; the bytes go next
            shutil.rmtree(doomed, ignore_errors=True)
            result.purged.append(e)
        _sweep_kept(ledger, result)
    return result


def _sweep_kept(ledger: Ledger, result: PurgeResult) -> None:
    """Remove the kept files of purged runs that no run in the index uses any more."""
    runs_dir = ledger.root / "runs"
    if not runs_dir.is_dir():
        return
    users: set[str] | None = None  # read once, when a marker folder is found
    for folder in sorted(runs_dir.iterdir()):
        marker_path = folder / MARKER
        if not marker_path.is_file() or (trash_dir(ledger) / folder.name).is_dir():
            continue  # not a marker folder, or its run can still be restored
        if ledger.db.execute("SELECT 1 FROM runs WHERE id = ?", (folder.name,)).fetchone():
            continue  # pragma: no cover - a restored run's folder has no marker
        try:
            marker = json.loads(marker_path.read_bytes())
        except (OSError, ValueError):
            continue
        real = folder.resolve()
        if users is None:
            users = _path_users(ledger)
        left = []
        for item in marker.get("kept") or []:
            path = folder / item["path"]
            if not path.exists():
                continue
            absolute = os.path.normpath(real / item["path"])
            used = absolute in users or (item.get("sha256") in users and item.get("sha256") is not None)
            if used:
                left.append(item)
                result.kept_files.append(path)
            else:
                path.unlink()
                result.removed_files.append(path)
        if left:
            marker["kept"] = left
            marker["trash"] = None
            _write_json(marker_path, marker)
        else:
            marker_path.unlink()
            for sub in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
                if sub.is_dir():
                    with contextlib.suppress(OSError):
                        sub.rmdir()  # only empty folders; anything else someone put there stays
            with contextlib.suppress(OSError):
                folder.rmdir()


def _path_users(ledger: Ledger) -> set[str]:
    """Absolute paths named by checkpoint and init rows, and the sha256s of inits known by hash only."""
    out: set[str] = set()
    rows = ledger.db.execute(
        "SELECT path, sha256, 0 FROM checkpoints UNION ALL SELECT path, sha256, 1 FROM run_inits"
    ).fetchall()
    for path, sha, is_init in rows:
        if isinstance(path, str) and os.path.isabs(path):
            out.add(os.path.normpath(path))
        elif is_init and not path and sha:
            out.add(sha)
    return out


# -- interrupted deletes and restores ---------------------------------------------------------------
def settle(ledger: Ledger) -> list[str]:
    """Finish what interrupted deletes, restores and purges left (what ``verify --repair`` runs;
    ``rm``, ``restore`` and ``gc`` run it first): the index decides. A run whose row is in the index
    but whose folder is in the trash (a delete killed before its commit) gets its folder back; an
    entry of a run the index has with its folder in place (a restore killed after its commit) is
    removed; a folder in ``runs/`` without a row whose entry still has the note (a restore killed
    before its commit) goes back into the trash; kept files are linked back. The ids settled."""
    if not trash_dir(ledger).is_dir():
        return []
    with _trash_lock(ledger):
        return _settle(ledger)


def _settle(ledger: Ledger) -> list[str]:
    base = trash_dir(ledger)
    settled: list[str] = []
    for entry_dir in sorted(base.iterdir()):
        if not entry_dir.is_dir():
            continue
        if entry_dir.name.startswith(_PURGING):
            shutil.rmtree(entry_dir, ignore_errors=True)
            continue
        note = _read_note(entry_dir)
        if note is None:  # killed between making the entry and writing its note: nothing moved yet
            if not (entry_dir / "run").exists():
                shutil.rmtree(entry_dir, ignore_errors=True)
            continue
        run_id = note["id"]
        run_dir = ledger.run_dir(run_id)
        source = entry_dir / "run"
        aside = entry_dir / "kept-aside"
        indexed = ledger.db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None
        if indexed:
            if source.is_dir() and not run_dir.exists():
                os.rename(source, run_dir)  # a delete that never committed
            elif source.is_dir() and aside.is_dir() and run_dir.is_dir():
                pass  # pragma: no cover - cannot happen: the restore renames aside and in before its commit
            if not source.is_dir():
                shutil.rmtree(entry_dir, ignore_errors=True)
                settled.append(run_id)
            continue
        if not source.is_dir() and note.get("folder") and (run_dir / "run.json").is_file():
            os.rename(run_dir, source)  # a restore that never committed
            if aside.is_dir():
                os.rename(aside, run_dir)
            settled.append(run_id)
        if source.is_dir():
            _link_kept(run_dir, entry_dir, note)
    return settled
