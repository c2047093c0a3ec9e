"""The ledger: a folder with an SQLite index (WAL) and one folder per run.

```
<ledger>/ledger.db             index: runs, tags, checkpoints, evaluations, metric values
<ledger>/runs/<run_id>/        run.json, config.json, metrics.jsonl, batches.jsonl, history.jsonl,
                               checkpoints.jsonl, notes.jsonl, files/, evals/<name>/...
```

The run folders are the record; the index makes listing and filtering fast and holds what is
derived from records (summaries, metric values). Writes to the index are short ``BEGIN IMMEDIATE``
transactions, so many processes can share one ledger.

Team mode: ``Ledger("postgresql://user@host/db", artifacts=DIR)`` keeps the index in PostgreSQL
(same migrations, same API; see :mod:`labledger.store.dialect`) and the run folders in ``DIR``, a
folder every machine mounts. Live runs there also stamp a heartbeat, so that a run whose machine
died shows as crashed on every other machine.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import sqlite3
import time
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labledger.errors import (
    IndexUnavailableError,
    LedgerError,
    LedgerNotFoundError,
    RunNameWarning,
    RunNotFoundError,
    StorageError,
)
from labledger.store.dialect import STALE_HEARTBEAT_ERROR, Heartbeat, PostgresIndex, display_url, is_database_url
from labledger.store.fields import ScalarStats, backfill_fields, dumps_fields, eval_fields_of_run, run_fields
from labledger.store.files import disk_error
from labledger.store.migrations import MIGRATIONS, migrate
from labledger.store.runinfo import INDEX_COLUMNS as INDEX_COLUMNS
from labledger.store.runinfo import RENAMED_COLUMNS, run_duration
from labledger.store.runinfo import RunInfo as RunInfo

if TYPE_CHECKING:
    from labledger.schema import Document
    from labledger.schema.store import StoredEvaluation, StoredMetricValue
    from labledger.store.counters import Counters
    from labledger.store.trash import TrashEntry
    from labledger.store.view import RunView

DB_NAME = "ledger.db"

#: The ledgers open in this process: those still open when it exits are closed then (their commits
#: checkpointed into ``ledger.db``), as a file object is flushed at exit.
_OPEN: weakref.WeakSet[Ledger] = weakref.WeakSet()


@atexit.register
def _close_open_ledgers() -> None:
    for ledger in list(_OPEN):
        with suppress(Exception):  # one that cannot close must not stop the others
            ledger.close()


RUN_STATUSES = ("running", "finished", "failed", "crashed", "killed")


def default_ledger_path() -> Path | str:
    """``$LABLEDGER_DIR`` if set, else ``./.labledger`` (a ``postgresql://`` URL stays a string)."""
    value = os.environ.get("LABLEDGER_DIR") or ".labledger"
    return value if is_database_url(value) else Path(value)


def lock_is_held(lock_path: Path) -> bool:
    """True when a live process holds the run's lock (a ``flock`` dies with its process)."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class Ledger:
    """A ledger folder. Use :func:`labledger.open_ledger` to get one.

    >>> import tempfile, labledger
    >>> ledger = labledger.open_ledger(tempfile.mkdtemp(), create=True)
    >>> ledger.runs()
    []
    """

    #: Team mode: seconds between heartbeats of live runs (the run's sync interval).
    heartbeat_interval = 5.0
    #: Team mode: a running run of another host whose heartbeat is older than this is crashed.
    heartbeat_timeout = 60.0
    #: Team mode: seconds to keep retrying when PostgreSQL is unreachable before failing loudly.
    retry_timeout = 30.0

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        create: bool = False,
        artifacts: str | os.PathLike[str] | None = None,
    ) -> None:
        if root is None:
            root = default_ledger_path()
        self.url: str | None = None
        #: The run index: a ``sqlite3.Connection``, or a :class:`PostgresIndex` that speaks the same
        #: dialect (``execute``/``executemany``/``commit``) plus ``server_now`` and ``columns``.
        self.db: Any
        #: Whether reads (``runs``, ``info``) mark dead runs crashed first. A server sets it off: its
        #: GETs change nothing, and a background task reaps instead (#17).
        self.reap_on_read = True
        self.dialect = "sqlite"
        self.host = os.uname().nodename  # socket.gethostname(), without importing socket
        self._heartbeat: Heartbeat | None = None
        #: Files written without their own fsync, synced together by :meth:`sync_deferred` before
        #: :meth:`adopt` makes them visible (a staging ledger's result sets, #13); ``None``: every
        #: write fsyncs itself.
        self.deferred_sync: list[Path] | None = None
        if is_database_url(root):
            self._open_postgres(str(root), artifacts, create)
            return
        if artifacts is not None:
            raise LedgerError("artifacts= is for a postgresql:// ledger; a ledger folder keeps its runs inside it")
        self.root = Path(root)
        db_path = self.root / DB_NAME
        if not db_path.exists():
            if not create:
                raise LedgerNotFoundError(
                    f"No ledger at {self.root} (no {DB_NAME}). Log a run with labledger.start_run "
                    f"or run `labledger demo` to create one, or pass --ledger DIR."
                )
            if self.root.exists() and not self.root.is_dir():
                raise LedgerError(f"{self.root} exists and is not a folder")
            try:
                (self.root / "runs").mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(f"cannot create a ledger at {self.root}: {exc.strerror or exc}") from None
        try:
            self.db = sqlite3.connect(db_path, timeout=60, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA busy_timeout = 60000")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.create_function("regexp", 2, _regexp, deterministic=True)
            migrate(self.db)
        except sqlite3.DatabaseError as exc:
            self.db = self._open_read_only(db_path, exc)
            if self.db is None:
                kind = StorageError if "disk" in str(exc) else LedgerError  # full, read-only or failing disk
                raise kind(f"{db_path}: cannot open the ledger index ({exc})") from None
        backfill_fields(self)
        _OPEN.add(self)

    #: Why the index is open read-only (``None``: it is not): see :meth:`_open_read_only`.
    read_only: str | None = None

    def _open_read_only(self, db_path: Path, exc: sqlite3.DatabaseError) -> sqlite3.Connection | None:
        """The index opened for reading only, when the disk refused the normal open: on a full disk
        SQLite cannot create the ``-wal``/``-shm`` files a WAL database is opened with, and listing
        runs is how a user finds what to delete (#17). Only when the ``-wal`` file is absent or
        empty (as the failed open leaves it): then every commit is in the main file, and nothing can
        be written while the disk is full. Writes then raise :class:`StorageError`. ``None``: not
        that case."""
        wal = db_path.with_name(db_path.name + "-wal")
        if "disk" not in str(exc) or (wal.exists() and wal.stat().st_size > 0):
            return None
        try:
            db = sqlite3.connect(
                f"{db_path.resolve().as_uri()}?mode=ro&immutable=1",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            db.create_function("regexp", 2, _regexp, deterministic=True)
            done = {row[0] for row in db.execute("SELECT name FROM _migrations")}
        except sqlite3.DatabaseError:
            return None
        if any(name not in done for name, _ in MIGRATIONS):
            db.close()
            return None
        free = shutil.disk_usage(db_path.parent).free
        # why it is read-only, in the user's words: a disk with (almost) no room left is full
        self.read_only = f"the disk is full, {free:,} bytes free" if free < 1 << 20 else f"{exc}"
        return db

    def _open_postgres(self, url: str, artifacts: str | os.PathLike[str] | None, create: bool) -> None:
        artifacts = artifacts if artifacts is not None else os.environ.get("LABLEDGER_ARTIFACTS")
        if not artifacts:
            raise LedgerError(
                f"a PostgreSQL ledger ({display_url(url)}) needs a folder for run files that every "
                f"machine mounts: pass artifacts=DIR (--artifacts DIR) or set $LABLEDGER_ARTIFACTS"
            )
        self.url = url
        self.dialect = "postgresql"
        self.root = Path(artifacts)
        if not (self.root / "runs").is_dir():
            if not create:
                raise LedgerNotFoundError(
                    f"No run folder at {self.root / 'runs'} for the PostgreSQL ledger {display_url(url)}: "
                    f"pass the shared artifacts folder, or log a run to create it."
                )
            if self.root.exists() and not self.root.is_dir():
                raise LedgerError(f"{self.root} exists and is not a folder")
            (self.root / "runs").mkdir(parents=True, exist_ok=True)
        self.db = PostgresIndex(url, retry_timeout=self.retry_timeout)
        try:
            migrate(self.db)
            backfill_fields(self)
        except BaseException:
            self.close()
            raise
        _OPEN.add(self)

    # -- plumbing -------------------------------------------------------------------------------
    #: Whether :meth:`close` has run (a ledger whose open failed part-way has no index to close).
    closed = False

    def close(self) -> None:
        """Stop the heartbeat and close the index; safe to call more than once.

        A SQLite index is checkpointed first: every commit this connection can see is copied from
        ``ledger.db-wal`` into ``ledger.db`` (``PRAGMA wal_checkpoint(PASSIVE)``, which waits for no
        other reader or writer), so that a copy of ``ledger.db`` alone holds it even while another
        process keeps the WAL open. The last connection to close also removes the WAL, as SQLite does.
        """
        if self.closed:
            return
        self.closed = True
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        db = getattr(self, "db", None)
        if db is None:
            return
        if self.dialect == "sqlite" and self.read_only is None:
            with suppress(sqlite3.Error):  # busy or read-only: the commits stay in the WAL, still durable
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        db.close()

    def __del__(self) -> None:
        """A ledger freed without :meth:`close` says so, as an unclosed file does (a
        ``ResourceWarning``, shown under ``python -W default`` and by pytest); its index connection
        is closed when it is freed in turn, without the checkpoint."""
        if not self.closed and getattr(self, "db", None) is not None:
            with suppress(Exception):  # (at the interpreter's exit the warnings machinery may be gone)
                warnings.warn(
                    f"unclosed {self!r}: call close() or use it in a with block", ResourceWarning, stacklevel=1
                )

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.url is not None:
            return f"Ledger({display_url(self.url)!r}, artifacts={str(self.root)!r})"
        return f"Ledger({str(self.root)!r})"

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``; on PostgreSQL ``BEGIN`` + the ledger's write lock).

        A full disk (SQLite's "database or disk is full", "disk I/O error") rolls back and raises
        :class:`~labledger.errors.StorageError` naming the index file.
        """
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                with suppress(Exception):  # SQLite may have rolled back already (SQLITE_FULL)
                    self.db.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            text = str(exc) if self.read_only is None else f"opened read-only: {self.read_only}"
            if "disk is full" in text or "disk I/O error" in text or "the disk is full" in text:
                kind = "disk full" if "full" in text else "write failed"
                raise StorageError(
                    f"{kind}: {self.root / DB_NAME}: the index was not updated ({text}); free space and try again"
                ) from None
            raise

    def _write(self, body: Any) -> Any:
        """Run ``body(db)`` in a transaction; in team mode, replay it when the connection was lost
        (PostgreSQL restarted) until ``retry_timeout`` has passed. ``body`` must be idempotent."""
        deadline = time.monotonic() + self.retry_timeout
        while True:
            try:
                with self.transaction() as db:
                    return body(db)
            except IndexUnavailableError:
                if self.dialect != "postgresql" or time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    # -- runs -----------------------------------------------------------------------------------
    def register_run(self, meta: dict[str, Any], *, config: dict[str, Any] | None = None) -> None:
        """Insert a new run into the index (called by :class:`labledger.Run`); ``config`` makes
        its ``config.*`` fields queryable from the start."""
        git = meta.get("git") or {}
        fields = dumps_fields(run_fields(config or {}, {}, None))

        def insert(db: Any) -> None:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (meta["id"],)).fetchone():
                return  # a replay after a lost connection whose COMMIT had gone through
            db.execute(
                "INSERT INTO runs (id, name, grp, status, started, host, pid, git_commit, git_dirty, "
                "summary, updated, fields) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '{}', ?, ?)",
                (
                    meta["id"],
                    meta["name"],
                    meta.get("group"),
                    meta["status"],
                    meta["started"],
                    meta.get("host"),
                    meta.get("pid"),
                    git.get("commit"),
                    None if git.get("dirty") is None else int(git["dirty"]),
                    time.time(),
                    fields,
                ),
            )
            db.executemany(
                "INSERT INTO run_tags (run_id, tag) VALUES (?, ?)", [(meta["id"], t) for t in meta.get("tags", ())]
            )
            if self.dialect == "postgresql":
                db.execute(
                    "UPDATE runs SET heartbeat = extract(epoch from clock_timestamp()) WHERE id = ?", (meta["id"],)
                )

        self._write(insert)
        if self.dialect == "postgresql" and meta["status"] == "running":
            if self._heartbeat is None:
                self._heartbeat = Heartbeat(str(self.url), self.heartbeat_interval)
            self._heartbeat.add(meta["id"])

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Update index columns of one run (``summary`` is a dict, stored as JSON)."""
        if "summary" in fields:
            import orjson  # here, not at the top: the table of `labledger runs` loads no orjson

            fields["summary"] = orjson.dumps(fields["summary"], option=orjson.OPT_SERIALIZE_NUMPY).decode()
        for key in ("fields", "eval_fields"):
            if key in fields:
                fields[key] = dumps_fields(fields[key])
        for f, col in RENAMED_COLUMNS.items():
            if f in fields:
                fields[col] = fields.pop(f)
        fields["updated"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        self._write(lambda db: db.execute(f"UPDATE runs SET {cols} WHERE id = ?", (*fields.values(), run_id)))
        if self._heartbeat is not None and fields.get("status", "running") != "running":
            self._heartbeat.discard(run_id)

    def tags_of(self, ids: list[str]) -> dict[str, list[str]]:
        """Each run's tags by id, sorted (by code point, as the index sorts text), for the runs of
        ``ids``: one statement for them all, the ids one JSON array that the database unpacks."""
        from json import dumps

        tags: dict[str, list[str]] = {i: [] for i in ids}
        if not ids:
            return tags
        if self.dialect == "postgresql":
            q = "SELECT run_id, tag FROM run_tags WHERE run_id = ANY(ARRAY(SELECT json_array_elements_text(?::json)))"
        else:
            q = "SELECT run_id, tag FROM run_tags WHERE run_id IN (SELECT value FROM json_each(?))"
        for run_id, tag in self.db.execute(q, (dumps(ids),)).fetchall():
            tags[run_id].append(tag)
        for several in tags.values():
            if len(several) > 1:
                several.sort()
        return tags

    def _rows_to_info(self, rows: list[tuple[Any, ...]]) -> list[RunInfo]:
        tags = self.tags_of([r[0] for r in rows])
        out = []
        runs_dir = self.root / "runs"  # each RunInfo makes its dir from it when asked (#12)
        # the standard library's parser: these few small documents do not pay for importing orjson;
        # both give the same values for what orjson wrote
        from json import loads

        for rid, name, grp, status, started, ended, host, pid, commit, dirty, error, summary in rows:  # INDEX_COLUMNS
            info = RunInfo(
                rid,
                name,
                grp,
                tags[rid],
                status,
                started,
                ended,
                host,
                pid,
                commit,
                None if dirty is None else bool(dirty),
                error,
                loads(summary or "{}"),
                runs_dir / rid,
            )
            out.append(info)
        return out

    _COLUMNS = ", ".join(INDEX_COLUMNS)

    def reap(self) -> list[str]:
        """Mark runs whose process died as ``crashed``; return their ids.

        Reads call it first. When the disk is full it marks what it can and returns those ids: the
        read goes on, and the runs left are marked by a later read once there is space.

        A run of this host is dead when no process holds its ``flock``. In team mode, a run of
        another host (whose lock is not visible from here) is dead when its heartbeat, stamped
        with the database server's clock, is older than ``heartbeat_timeout`` seconds.
        """
        crashed = []
        stale: list[tuple[str, str | None, float]] = []
        team = self.dialect == "postgresql"
        now = self.db.server_now() if team else None
        rows = self.db.execute("SELECT id, host, heartbeat FROM runs WHERE status = 'running'").fetchall()
        for run_id, host, heartbeat in rows:
            if host not in (None, self.host):
                # another machine's run: its lock is not visible from here
                if now is not None and heartbeat is not None and now - heartbeat > self.heartbeat_timeout:
                    stale.append((run_id, host, now - self.heartbeat_timeout))
                continue
            if lock_is_held(self.run_dir(run_id) / ".lock"):
                continue
            if (self.run_dir(run_id) / ".sync.json").exists():
                continue  # a copy synced from another ledger (#18): its owner reports its status
            crashed.append(run_id)
        marked: list[str] = []
        try:
            for run_id in crashed:
                self._mark_crashed(run_id)
                marked.append(run_id)
            for run_id, host, cutoff in stale:
                if self._mark_crashed(
                    run_id,
                    stale_before=cutoff,
                    error=(
                        f"{STALE_HEARTBEAT_ERROR} from host {host} for over {self.heartbeat_timeout:g} s: "
                        f"its logging process stopped or lost the index (killed, crashed, or cut off)"
                    ),
                ):
                    marked.append(run_id)
        except StorageError:
            # A full disk must not stop the read that reaps (listing runs is how a user finds what
            # to delete): the rest stay "running" until a later read, with space, marks them.
            pass
        return marked

    def _mark_crashed(self, run_id: str, *, stale_before: float | None = None, error: str | None = None) -> bool:
        # here, not at the top: reading the index (`labledger runs`) needs no record readers
        import orjson

        from labledger.store.counters import scan_run, summary_of
        from labledger.store.jsonl import read_json, write_json

        run_dir = self.run_dir(run_id)
        meta_path = run_dir / "run.json"
        ended = None
        try:
            meta = read_json(meta_path)
        except (OSError, LedgerError):
            meta = None
        # The last sign of life: the newest modification time among the run's files.
        try:
            ended = max(p.stat().st_mtime for p in run_dir.iterdir() if p.is_file())
        except (ValueError, OSError):  # no files; or the folder is gone (removed by hand)
            ended = time.time()
        stats = ScalarStats()
        counters = scan_run(run_dir, stats=stats)  # one pass: counts, last values, min/max
        summary = summary_of(counters)
        try:
            config = read_json(run_dir / "config.json")
        except (OSError, LedgerError):
            config = {}
        row = self.db.execute("SELECT summary FROM runs WHERE id = ?", (run_id,)).fetchone()
        headline = orjson.loads(row[0] or "{}").get("headline") if row else None
        summary["headline"] = headline or {}
        fields = dumps_fields(run_fields(config if isinstance(config, dict) else {}, summary, stats))
        status = "crashed"
        if meta is not None and meta.get("status") in ("finished", "failed", "killed"):
            # run.json is written (atomically) before the index at finish: the process finished the
            # run and only the index update was lost. Trust the run folder; do not call it crashed.
            status, ended, error = meta["status"], meta.get("ended") or ended, meta.get("error")
        else:
            error = error or "the logging process ended without finishing the run (killed or crashed)"
        q = (
            "UPDATE runs SET status = ?, ended = ?, error = ?, summary = ?, updated = ?, fields = ?, counters = ? "
            "WHERE id = ? AND status = 'running'"
        )
        params: tuple[Any, ...] = (
            status,
            ended,
            error,
            orjson.dumps(summary).decode(),
            time.time(),
            fields,
            counters.to_json(),
            run_id,
        )
        if stale_before is not None:  # unless it beat meanwhile
            q += " AND (heartbeat IS NULL OR heartbeat < ?)"
            params += (stale_before,)
        changed = self._write(lambda db: db.execute(q, params).rowcount)
        if changed and meta is not None and status == "crashed":
            meta.update(status="crashed", ended=ended, error=error)
            write_json(meta_path, meta)
        return bool(changed) and status == "crashed"

    def runs(
        self,
        *,
        name: str | None = None,
        group: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        where: str | None = None,
        sort: str | list[str] | None = None,
    ) -> list[RunInfo]:
        """Runs in the index, newest first (or in ``sort`` order), filtered by exact name, group,
        tag, status and a query expression ``where`` (see :mod:`labledger.store.query`).

        >>> import tempfile, labledger
        >>> d = tempfile.mkdtemp()
        >>> for lr in (1e-4, 1e-2):
        ...     with labledger.start_run(f"lr{lr}", config={"optim": {"lr": lr}}, ledger=d) as run:
        ...         run.log(1, loss=lr * 10)
        >>> [r.name for r in labledger.open_ledger(d).runs(where="config.optim.lr < 1e-3", sort="-scalars.loss.min")]
        ['lr0.0001']
        """
        return self._rows_to_info(self._select(name, group, tag, status, where, sort))

    def run_dicts(
        self,
        *,
        name: str | None = None,
        group: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        where: str | None = None,
        sort: str | list[str] | None = None,
        after: tuple[float, str] | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The runs of :meth:`runs` as the dicts of :meth:`RunInfo.to_dict`, made straight from the
        index rows (what ``labledger runs --json`` prints: no objects in between, #12).

        ``after`` and ``limit`` page through the runs in their default order (newest first) by
        key, not by position: at most ``limit`` runs that come after the run whose ``(started,
        id)`` is ``after``, read from the index with the rest of the query (no run before the page
        is read). They take no ``sort``.

        >>> import tempfile, labledger
        >>> d = tempfile.mkdtemp()
        >>> labledger.start_run("a", config={"lr": 0.1}, ledger=d).finish()
        >>> book = labledger.open_ledger(d)
        >>> book.run_dicts(where="config.lr = 0.1") == [r.to_dict() for r in book.runs(where="config.lr = 0.1")]
        True
        """
        if (after is not None or limit is not None) and sort:
            raise LedgerError("paging by key (after=, limit=) takes the default order: no sort")
        rows = self._select(name, group, tag, status, where, sort, after=after, limit=limit)
        tags = self.tags_of([r[0] for r in rows])
        runs_dir = str(self.root / "runs")
        import orjson

        from labledger.machine import paused_gc

        loads = orjson.loads
        with paused_gc():  # thousands of acyclic dicts: no collection would free any
            return [
                {
                    "id": rid,
                    "name": name_,
                    "group": grp,
                    "tags": tags[rid],
                    "status": status_,
                    "started": started,
                    "ended": ended,
                    "duration": run_duration(started, ended, status_),
                    "host": host,
                    "pid": pid,
                    "git_commit": commit,
                    "git_dirty": None if dirty is None else bool(dirty),
                    "error": error,
                    "summary": loads(summary or "{}"),
                    "dir": f"{runs_dir}/{rid}",  # str(RunInfo.dir), without a Path per run
                }
                for rid, name_, grp, status_, started, ended, host, pid, commit, dirty, error, summary in rows
            ]

    def _select(
        self,
        name: str | None,
        group: str | None,
        tag: str | None,
        status: str | None,
        where: str | None,
        sort: str | list[str] | None,
        *,
        after: tuple[float, str] | None = None,
        limit: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """The index rows (:attr:`_COLUMNS`) of :meth:`runs` (a page of them by key: see :meth:`run_dicts`)."""
        if self.reap_on_read:
            self.reap()
        page, page_params = "", []
        if after is not None:
            page = "WHERE (started < ? OR (started = ? AND id < ?)) "
            page_params = [after[0], after[0], after[1]]
        if limit is not None:
            page_params.append(limit)
        tail = "ORDER BY started DESC, id DESC" + (" LIMIT ?" if limit is not None else "")
        unfiltered = name is None and group is None and tag is None and status is None
        if unfiltered and not sort and (where is None or not str(where).strip()):
            # Every run, newest first: what compile_query selects without a filter or a sort (a
            # test checks they agree), without importing the query language.
            every: list[tuple[Any, ...]] = self.db.execute(
                f"SELECT {self._COLUMNS} FROM runs {page}{tail}", page_params
            ).fetchall()
            return every
        from labledger.store.query import compile_query, prepare

        node, keys = prepare(self.db, self.dialect, where, sort)
        exact = [("name", name), ("group", group), ("status", status)]
        filters = [f"{k} = {_quote(v)}" for k, v in exact if v is not None]
        if tag is not None:
            filters.append(f"has tag {_quote(tag)}")
        if filters:
            from labledger.store.query import Bool, parse

            extra = parse(" and ".join(filters))
            node = extra if node is None else Bool("and", (extra, node))
        sql, params = compile_query(node, keys, columns=self._COLUMNS, dialect=self.dialect, now=time.time())
        if after is not None or limit is not None:  # the default order, restated outside the query
            sql = f"SELECT * FROM ({sql}) q {page}{tail}"
            params = [*params, *page_params]
        rows: list[tuple[Any, ...]] = self.db.execute(sql, params).fetchall()
        return rows

    def runs_table(
        self, *, where: str | None = None, sort: str | list[str] | None = None, columns: list[str] | None = None
    ) -> Any:
        """The runs that match ``where`` as a ``pyarrow.Table`` (``.to_pandas()`` for a DataFrame):
        ``id`` and ``name``, then ``columns`` (any query field; default: group, status, started,
        duration, tags and every config.*, scalars.*.last and eval.* field of the matching runs).

        >>> import tempfile, labledger
        >>> d = tempfile.mkdtemp()
        >>> with labledger.start_run("a", config={"lr": 0.1}, ledger=d) as run:
        ...     run.log(1, loss=0.5)
        >>> labledger.open_ledger(d).runs_table(columns=["config.lr", "scalars.loss.last"]).to_pylist()[0]["config.lr"]
        0.1
        """
        from labledger.store.query import runs_table

        return runs_table(self, where=where, sort=sort, columns=columns)

    def resolve(self, ref: str) -> str:
        """The id of the run named by ``ref``: an id, a unique id prefix, a run name or ``name@K``.

        An id or a unique id prefix is exact. A name is a label, not a key: when several runs
        share it, the newest is used and a :class:`~labledger.errors.RunNameWarning` says so
        (the CLI prints it once on stderr). ``name@K`` is the K-th newest run of that name
        (``name@1`` is the newest, ``name@2`` the one before).

        >>> import tempfile, warnings, labledger
        >>> d = tempfile.mkdtemp()
        >>> first = labledger.start_run("mlp", ledger=d); first.finish()
        >>> second = labledger.start_run("mlp", ledger=d); second.finish()
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     newest = labledger.open_ledger(d).resolve("mlp")
        >>> newest == second.id, "2 runs named 'mlp'" in str(caught[0].message)
        (True, True)
        >>> labledger.open_ledger(d).resolve("mlp@2") == first.id
        True
        """
        run_id, note = self.resolve_with_note(ref)
        if note is not None:
            import warnings

            warnings.warn(RunNameWarning(note), stacklevel=2)
        return run_id

    def resolve_with_note(self, ref: str) -> tuple[str, str | None]:
        """:meth:`resolve` without the warning: ``(run id, note)``, where the note says which of
        several runs of the same name was taken (``None`` when the reference was unambiguous)."""
        ref = str(ref).strip()
        if not ref:
            raise RunNotFoundError("empty run reference")
        if self.db.execute("SELECT 1 FROM runs WHERE id = ?", (ref,)).fetchone():
            return ref, None
        by_prefix = [
            r[0]
            for r in self.db.execute(
                "SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY started DESC, id DESC", (len(ref), ref)
            )
        ]
        if len(by_prefix) == 1:
            return by_prefix[0], None
        by_name = self._ids_named(ref)
        if by_name:
            if len(by_name) == 1:
                return by_name[0], None
            return by_name[0], (
                f"{len(by_name)} runs named {ref!r}; using the newest, {by_name[0]}; `{ref}@2` is the one before"
            )
        base, at, k = ref.rpartition("@")
        if at and base and k.isdigit():
            named = self._ids_named(base)
            if named:
                if not 1 <= int(k) <= len(named):
                    raise RunNotFoundError(
                        f"'{ref}': there {'is' if len(named) == 1 else 'are'} {len(named)} run"
                        f"{'' if len(named) == 1 else 's'} named {base!r} (`{base}@1` is the newest)"
                    )
                return named[int(k) - 1], None
        if by_prefix:
            raise RunNotFoundError(
                f"'{ref}' is the start of {len(by_prefix)} run ids ({', '.join(by_prefix[:5])}"
                f"{', ...' if len(by_prefix) > 5 else ''}); give more of the id"
            )
        known = [r[0] for r in self.db.execute("SELECT name FROM runs ORDER BY started DESC LIMIT 200")]
        import difflib

        close = difflib.get_close_matches(ref, known, n=3)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise RunNotFoundError(f"No run '{ref}' in {self.root}.{hint} (`labledger runs` lists them)")

    def _ids_named(self, name: str) -> list[str]:
        """Ids of the runs called ``name``, newest first."""
        q = "SELECT id FROM runs WHERE name = ? ORDER BY started DESC, id DESC"
        return [r[0] for r in self.db.execute(q, (name,))]

    def info(self, ref: str) -> RunInfo:
        """The index row of one run."""
        if self.reap_on_read:
            self.reap()
        run_id = self.resolve(ref)
        rows = self.db.execute(f"SELECT {self._COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchall()
        return self._rows_to_info(rows)[0]

    def run_counters(self, run_id: str) -> Counters | None:
        """The counters the index holds for a run (:mod:`labledger.store.counters`), ``None`` when
        it holds none (a run of an older version, or one that died before its first refresh)."""
        from labledger.store.counters import Counters

        row = self.db.execute("SELECT counters FROM runs WHERE id = ?", (run_id,)).fetchone()
        return Counters.from_json(row[0]) if row else None

    def results_rows(self, run_id: str) -> dict[str, int | None]:
        """Rows of each result set of a run, as :meth:`Run.log_results` stored them in the index."""
        q = "SELECT name, n_rows FROM evaluations WHERE run_id = ? AND kind = 'results'"
        return dict(self.db.execute(q, (run_id,)).fetchall())

    def store_counters(self, run_id: str, counters: Counters) -> None:
        """Keep counters that a reader computed for a run that no longer logs (a running run's own
        refreshes are the only writer of its row)."""
        text = counters.to_json()
        self._write(
            lambda db: db.execute("UPDATE runs SET counters = ? WHERE id = ? AND status != 'running'", (text, run_id))
        )

    def run(self, ref: str) -> RunView:
        """A read-only view of one run's records (see :class:`labledger.store.view.RunView`)."""
        from labledger.store.view import RunView

        return RunView(self, self.info(ref))

    # -- deleting runs (the logic: labledger.store.trash) -------------------------------------------
    def delete_run(self, ref: str) -> TrashEntry:
        """Move run ``ref`` (id, id prefix or name) to the trash: its folder into ``.trash/<id>/run``
        and its index rows into the entry's note, in one transaction (a failure leaves the run as
        it was); files other runs use stay in place. A running run is refused
        (:class:`~labledger.errors.RunStateError`). :meth:`restore_run` puts it back.

        >>> import tempfile, labledger
        >>> book = labledger.open_ledger(tempfile.mkdtemp(), create=True)
        >>> labledger.start_run("r", ledger=book.root).finish()
        >>> entry = book.delete_run("r")
        >>> book.runs(), [e.name for e in book.trash()]
        ([], ['r'])
        >>> book.restore_run("r") == entry.id, [r.name for r in book.runs()]
        (True, ['r'])
        """
        from labledger.store.trash import delete_runs

        return delete_runs(self, [ref])[0]

    def restore_run(self, ref: str) -> str:
        """Put a deleted run (id, id prefix or name, in the trash) back: its rows and its folder; its id."""
        from labledger.store.trash import restore_runs

        return restore_runs(self, [ref])[0]

    def trash(self) -> list[TrashEntry]:
        """The deleted runs that :meth:`restore_run` can bring back, most recently deleted first."""
        from labledger.store.trash import trash_entries

        return trash_entries(self)

    def purge_trash(self, *, older_than: float | None = None) -> list[str]:
        """Remove deleted runs for good (those deleted more than ``older_than`` seconds ago, else
        all); the ids removed."""
        from labledger.store.trash import purge

        return [e.id for e in purge(self, older_than=older_than).purged]

    # -- imports ------------------------------------------------------------------------------
    @contextmanager
    def staging(self) -> Iterator[Ledger]:
        """A scratch ledger inside this one; runs logged there become visible only by :meth:`adopt`.

        The folder is removed on exit, whatever happened: an import that fails part-way leaves
        this ledger exactly as it was. The import holds ``.import.lock`` in it while it runs; the
        folders of imports killed before they could clean up (no live holder) are removed here, at
        the next import (and by ``labledger verify --repair``).
        """
        import secrets

        base = self.root / ".staging"
        path = base / secrets.token_hex(6)
        try:
            path.mkdir(parents=True)
            lock_fd = os.open(path / ".import.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:  # a full or read-only disk: the ledger is named, not the scratch folder
            shutil.rmtree(path, ignore_errors=True)
            raise disk_error(exc, self.root, "nothing was imported") from None
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        for other in base.iterdir():
            if (
                other != path
                and other.is_dir()
                and not lock_is_held(other / ".import.lock")
                and ((other / ".import.lock").exists() or time.time() - other.stat().st_mtime > 60)
            ):
                self.finish_adopted(other)  # an import killed part-way: its committed runs moved in
                shutil.rmtree(other, ignore_errors=True)  # the rest never adopted
        try:
            stage = Ledger(path, create=True)
        except StorageError as exc:  # the scratch ledger's index: the disk is full or failing
            os.close(lock_fd)
            shutil.rmtree(path, ignore_errors=True)
            detail = str(exc).rpartition(" (")[2].rstrip(")") or str(exc)
            kind = "disk full" if "full" in detail else "write failed"
            raise StorageError(
                f"{kind}: {self.root}: nothing was imported (the import's scratch ledger could not be made: "
                f"{detail}); free space and try again"
            ) from None
        except BaseException:
            os.close(lock_fd)
            shutil.rmtree(path, ignore_errors=True)
            raise
        stage.deferred_sync = []  # nothing staged is seen before adopt, which syncs it all at once
        try:
            yield stage
        finally:
            stage.close()
            self.finish_adopted(path)
            shutil.rmtree(path, ignore_errors=True)
            os.close(lock_fd)

    #: Where a run's folder is made before it is renamed into ``runs/`` (:class:`~labledger.store.run.Run`).
    NEW_RUNS = ".new-runs"

    @contextmanager
    def _new_runs(self) -> Iterator[Path]:
        """:attr:`NEW_RUNS`, with its ``.settle.lock`` held: a start makes its folder there and locks
        it, and a settling (:meth:`finish_started`) judges the folders there, one at a time across
        processes. Without it a start's folder could be seen between its ``mkdir`` and its lock,
        taken for a killed start's and removed under the live run (four processes starting runs in
        one ledger: a run failed with FileNotFoundError on its own config.json)."""
        base = self.root / self.NEW_RUNS
        lock = base / ".settle.lock"
        try:
            fd: int | None = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:  # a ledger this process may only read (verify without --repair): its lock if any
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC) if lock.exists() else None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield base
        finally:
            if fd is not None:
                os.close(fd)  # (the lock goes with it)

    @staticmethod
    def _left_started(base: Path) -> list[Path]:
        """The folders in ``base`` (:attr:`NEW_RUNS`) that no live process holds: starts killed part-way."""
        return [f for f in sorted(base.iterdir()) if f.is_dir() and not lock_is_held(f / ".lock")]

    def left_started(self) -> list[Path]:
        """The run folders that starts killed part-way left in :attr:`NEW_RUNS` (what
        :meth:`finish_started` settles), judged as a settling judges them."""
        if not (self.root / self.NEW_RUNS).is_dir():
            return []
        with self._new_runs() as base:
            return self._left_started(base)

    def finish_started(self) -> list[Path]:
        """Settle the run folders that starts killed part-way left in :attr:`NEW_RUNS` (no live
        process holds their lock): one whose row is in the index (the commit decides) is moved into
        ``runs/``; the others were never runs and are removed. The folders settled."""
        if not (self.root / self.NEW_RUNS).is_dir():
            return []
        with self._new_runs() as base:
            return self._settle_started(base)

    def _settle_started(self, base: Path) -> list[Path]:
        import shutil

        stale = self._left_started(base)
        moved = set(self._move_indexed(stale))
        for folder in stale:
            if folder.name not in moved:
                shutil.rmtree(folder, ignore_errors=True)
        return stale

    def start_folder(self, run_id: str) -> tuple[Path, int]:
        """A new run's folder in :attr:`NEW_RUNS` and the descriptor of its held ``.lock`` (held as
        long as the descriptor is open: a dead process releases it, which is how a reader tells
        "crashed" from "running"). What killed starts left there is settled first; both under the
        settle lock, so no other process's settling sees this folder before its lock is held."""
        (self.root / self.NEW_RUNS).mkdir(parents=True, exist_ok=True)
        with self._new_runs() as base:
            self._settle_started(base)
            new = base / run_id
            new.mkdir()
            fd = os.open(new / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
        return new, fd

    def finish_adopted(self, stage_path: Path) -> list[str]:
        """Move into place the run folders that a staging folder still holds for runs this ledger's
        index has (an adoption committed, then interrupted before it moved them: the commit is what
        decides); the run ids moved. Anything else there was never adopted."""
        runs = stage_path / "runs"
        return self._move_indexed(sorted(runs.iterdir())) if runs.is_dir() else []

    def _move_indexed(self, folders: list[Path]) -> list[str]:
        """Move each run folder whose id the index has, and whose place in ``runs/`` is free, there."""
        moved = []
        for folder in folders:
            dst = self.run_dir(folder.name)
            known = self.db.execute("SELECT 1 FROM runs WHERE id = ?", (folder.name,)).fetchone()
            if folder.is_dir() and known is not None and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(folder, dst)
                moved.append(folder.name)
        return moved

    def sync_deferred(self) -> None:
        """fsync the files written with their fsync deferred (see :attr:`deferred_sync`), all at once."""
        if self.deferred_sync:
            from labledger.store.jsonl import fsync_files

            fsync_files(self.deferred_sync)
            self.deferred_sync.clear()

    def previous_import(self, sha256: str) -> dict[str, Any] | None:
        """The earlier import of a source with this content hash, if any."""
        row = self.db.execute(
            "SELECT source, format, run_id, created FROM imports WHERE sha256 = ? ORDER BY id LIMIT 1", (sha256,)
        ).fetchone()
        return None if row is None else dict(zip(("source", "format", "run_id", "created"), row))

    def adopt(self, stage: Ledger, *, source: str | None = None, sha256: str | None = None, fmt: str = "") -> list[str]:
        """Move every run of ``stage`` into this ledger in one transaction (index rows and folders).

        With ``sha256``, the import is recorded so that the same content is recognised later.
        """
        run_ids = [r[0] for r in stage.db.execute("SELECT id FROM runs ORDER BY started")]
        stage.sync_deferred()  # every staged file on disk before the commit that shows it
        if self.dialect == "postgresql":
            return self._adopt_through_python(stage, run_ids, source=source, sha256=sha256, fmt=fmt)
        self.db.execute("ATTACH DATABASE ? AS stage", (str(stage.root / DB_NAME),))
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                marks = ",".join("?" * len(run_ids))
                for table in ("runs", "run_tags", "checkpoints", "run_inits"):
                    key = "id" if table == "runs" else "run_id"
                    self.db.execute(
                        f"INSERT INTO main.{table} SELECT * FROM stage.{table} WHERE {key} IN ({marks})", run_ids
                    )
                cols = "run_id, name, kind, created, n_rows, sha256"
                for old_id, *values in self.db.execute(
                    f"SELECT id, {cols} FROM stage.evaluations WHERE run_id IN ({marks})", run_ids
                ).fetchall():
                    new_id = self.db.execute(
                        f"INSERT INTO main.evaluations ({cols}) VALUES (?, ?, ?, ?, ?, ?)", values
                    ).lastrowid
                    self.db.execute(
                        "INSERT INTO main.metric_values SELECT ?, task, slice, metric, params, value, ci_low, "
                        "ci_high, n, definition FROM stage.metric_values WHERE eval_id = ?",
                        (new_id, old_id),
                    )
                bcols = (
                    "model, suite, benchmark, category, metric, params, variant, value, n, ci_low, ci_high, "
                    "run_id, evaluation, results_path, source, created"
                )
                self.db.execute(
                    f"INSERT INTO main.benchmark_entries ({bcols}) SELECT {bcols} FROM stage.benchmark_entries"
                )
                if sha256 is not None:
                    self.db.executemany(
                        "INSERT INTO main.imports (source, sha256, format, run_id, created) VALUES (?, ?, ?, ?, ?)",
                        [(source or "", sha256, fmt, rid, time.time()) for rid in run_ids],
                    )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        finally:
            self.db.execute("DETACH DATABASE stage")
        # the folders after the commit, which decides: a kill before it leaves them in the staging
        # folder (removed as never adopted), one after it leaves the rest there for finish_adopted
        # (the next import, `verify --repair`) to move in; never a folder in runs/ without its row
        self.finish_adopted(stage.root)
        return run_ids

    def _common_columns(self, stage: Ledger, table: str, *, skip: tuple[str, ...] = ()) -> list[str]:
        ours = set(self.db.columns(table))
        return [
            r[1]
            for r in stage.db.execute(f"PRAGMA table_info({table})")
            if r[1] in ours and r[1] not in skip and r[1] != "rowid"
        ]

    def _adopt_through_python(
        self, stage: Ledger, run_ids: list[str], *, source: str | None, sha256: str | None, fmt: str
    ) -> list[str]:
        """:meth:`adopt` for a PostgreSQL index: the staging SQLite's rows are copied in one transaction."""
        marks = ",".join("?" * len(run_ids))
        with self.transaction() as db:
            for table, key in (
                ("runs", "id"),
                ("run_tags", "run_id"),
                ("checkpoints", "run_id"),
                ("run_inits", "run_id"),
            ):
                cols = self._common_columns(stage, table)
                rows = stage.db.execute(
                    f"SELECT {', '.join(cols)} FROM {table} WHERE {key} IN ({marks})", run_ids
                ).fetchall()
                db.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})", rows)
            ecols = self._common_columns(stage, "evaluations", skip=("id",))
            mcols = self._common_columns(stage, "metric_values", skip=("eval_id",))
            for old_id, *values in stage.db.execute(
                f"SELECT id, {', '.join(ecols)} FROM evaluations WHERE run_id IN ({marks})", run_ids
            ).fetchall():
                new_id = db.execute(
                    f"INSERT INTO evaluations ({', '.join(ecols)}) VALUES ({','.join('?' * len(ecols))}) RETURNING id",
                    values,
                ).fetchone()[0]
                rows = stage.db.execute(
                    f"SELECT {', '.join(mcols)} FROM metric_values WHERE eval_id = ? ORDER BY rowid", (old_id,)
                ).fetchall()
                db.executemany(
                    f"INSERT INTO metric_values (eval_id, {', '.join(mcols)}) VALUES "
                    f"({','.join('?' * (len(mcols) + 1))})",
                    [(new_id, *r) for r in rows],
                )
            bcols = self._common_columns(stage, "benchmark_entries", skip=("id",))
            rows = stage.db.execute(f"SELECT {', '.join(bcols)} FROM benchmark_entries ORDER BY id").fetchall()
            db.executemany(
                f"INSERT INTO benchmark_entries ({', '.join(bcols)}) VALUES ({','.join('?' * len(bcols))})", rows
            )
            if sha256 is not None:
                db.executemany(
                    "INSERT INTO imports (source, sha256, format, run_id, created) VALUES (?, ?, ?, ?, ?)",
                    [(source or "", sha256, fmt, rid, time.time()) for rid in run_ids],
                )
        self.finish_adopted(stage.root)  # after the commit, as in adopt
        return run_ids

    # -- evaluations ----------------------------------------------------------------------------
    def save_evaluation(
        self,
        run_ref: str,
        name: str,
        document: Document | dict[str, Any],
        *,
        kind: str | None = None,
    ) -> Path:
        """Store a document under ``evals/<name>/<kind>.json`` and index its metric values.

        ``document``: a typed document (:class:`~labledger.schema.EvaluationDoc`,
        :class:`~labledger.schema.ComparisonDoc`, :class:`~labledger.schema.CalibrationDoc`), or
        its dict (decoded and checked against its schema first), or the dict of another kind
        (``kind="recipe"``...), stored as is. ``kind`` defaults to the document's own. Metric values
        of evaluations (tasks and slices) and calibration reports are indexed for
        :meth:`metric_values`. Benchmark entries: ``labledger.analysis.benchmarks.record_evaluation``.
        """
        from labledger.schema import STORED_KINDS, Document, decode
        from labledger.store.jsonl import write_json
        from labledger.store.metric_rows import iter_metric_values
        from labledger.store.names import check_name

        check_name(name, "evaluation name")
        if isinstance(document, dict) and (kind or document.get("kind") or "evaluation") in STORED_KINDS:
            document = decode(
                document, kind=kind or document.get("kind") or "evaluation", source=f"evaluation '{name}'"
            )
        if isinstance(document, Document):
            kind = kind or document.KIND
            if kind != document.KIND:
                raise LedgerError(f"evaluation '{name}': a {document.KIND} document cannot be stored as kind '{kind}'")
            data: Any = document.to_dict()
            rows = list(iter_metric_values(document))
            n_rows = getattr(document, "n", None)
        else:
            kind = kind or "evaluation"
            rows = list(iter_metric_values(document))
            data, n_rows = document, document.get("n") if isinstance(document, dict) else None
        run_id = self.resolve(run_ref)
        out_dir = self.run_dir(run_id) / "evals" / name
        made = not out_dir.exists()
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{kind}.json"

        def store(db: Any) -> None:
            old = db.execute(
                "SELECT id FROM evaluations WHERE run_id = ? AND name = ? AND kind = ?", (run_id, name, kind)
            ).fetchone()
            if old:
                db.execute("DELETE FROM metric_values WHERE eval_id = ?", (old[0],))
                db.execute("DELETE FROM evaluations WHERE id = ?", (old[0],))
            q = "INSERT INTO evaluations (run_id, name, kind, created, n_rows) VALUES (?, ?, ?, ?, ?)"
            values = (run_id, name, kind, time.time(), n_rows)
            if self.dialect == "sqlite":
                eval_id = db.execute(q, values).lastrowid
            else:
                eval_id = db.execute(q + " RETURNING id", values).fetchone()[0]
            db.executemany(
                "INSERT INTO metric_values (eval_id, task, slice, metric, params, value, ci_low, "
                "ci_high, n, definition) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(eval_id, *r) for r in rows],
            )
            db.execute("UPDATE runs SET eval_fields = ? WHERE id = ?", (eval_fields_of_run(db, run_id), run_id))
            write_json(path, data)

        try:
            self._write(store)
        except BaseException:
            if made:  # a refused write (a full disk) leaves no empty evaluation folder behind
                with contextlib.suppress(OSError):
                    out_dir.rmdir()
            raise
        return path

    def evaluation_file(self, run_ref: str, name: str, filename: str) -> Path:
        """Where a file derived from a stored evaluation or result set goes (``evals/<name>/<filename>``),
        e.g. calibrated results written beside the raw ones. Names are checked; the folder is made."""
        from labledger.store.names import check_name, check_relative_path

        check_name(name, "evaluation name")
        rel = check_relative_path(filename)
        path = self.run_dir(self.resolve(run_ref)) / "evals" / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def evaluations(self, run_ref: str) -> list[StoredEvaluation]:
        """Stored documents of a run: name, kind, created, n, path.

        >>> import tempfile
        >>> book = Ledger(tempfile.mkdtemp(), create=True)
        >>> book.register_run({"id": "r1", "name": "r", "status": "finished", "started": 0.0})
        >>> book.evaluations("r1")
        []
        """
        from labledger.schema.store import StoredEvaluation

        run_id = self.resolve(run_ref)
        return [
            StoredEvaluation(
                name=name,
                kind=kind,
                created=created,
                n=n_rows,
                path=str(self.run_dir(run_id) / "evals" / name / f"{kind}.json"),
            )
            for name, kind, created, n_rows in self.db.execute(
                "SELECT name, kind, created, n_rows FROM evaluations WHERE run_id = ? ORDER BY created", (run_id,)
            )
        ]

    def metric_values(self, run_ref: str) -> list[StoredMetricValue]:
        """Every indexed metric value of a run's stored evaluations."""
        import orjson

        from labledger.schema.store import StoredMetricValue

        run_id = self.resolve(run_ref)
        q = (
            "SELECT e.name, m.task, m.slice, m.metric, m.params, m.value, m.ci_low, m.ci_high, m.n, "
            "m.definition FROM metric_values m JOIN evaluations e ON e.id = m.eval_id "
            "WHERE e.run_id = ? ORDER BY e.created, m.rowid"
        )
        return [
            StoredMetricValue(
                evaluation=ev,
                task=task,
                slice=slice_,
                metric=metric,
                params=orjson.loads(params),
                value=value,
                ci_low=low,
                ci_high=high,
                n=n,
                definition=definition,
            )
            for ev, task, slice_, metric, params, value, low, high, n, definition in self.db.execute(q, (run_id,))
        ]


def _regexp(pattern: str, value: Any) -> bool | None:
    """SQLite's ``regexp`` (:func:`labledger.store.query.regexp`): the query module loads when a
    ``~`` test first runs, not when a ledger opens."""
    from labledger.store.query import regexp

    return regexp(pattern, value)


def _quote(value: str) -> str:
    """A text literal of the query language."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
