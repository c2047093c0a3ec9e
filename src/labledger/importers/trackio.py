"""Import Trackio projects: the SQLite file Trackio keeps per project (``<TRACKIO_DIR>/<project>.db``).

Read with the standard library's ``sqlite3`` (the ``trackio`` package is not needed), read-only:
a database whose ``-wal`` file is present (its writer is running, or died) is copied with the
``-wal`` to a temporary folder and read there, so the original files are never touched. Each
Trackio run (``run_id``, or ``run_name`` in databases from before run ids) becomes one labledger
run: its name, its group (Trackio's ``_Group``, else the project's name), its config (without
Trackio's ``_Created``/``_Username``/``_Group`` keys; ``_Created`` is the start time,
``_Username`` the user), one scalar record per ``metrics`` row (``step``, ``time`` from the row's
ISO timestamp, the numbers of its JSON, nested mappings joined with ``.``, Trackio's ``"NaN"`` and
``"Infinity"`` strings read back as numbers), ``system_metrics`` rows as the run's system records,
and alerts as notes. Media, tables and traces are counted in a note.

Trackio records no end of a run (``trackio.finish`` writes nothing; its dashboard shows no run
status), so a run killed mid-log and one that finished look the same in the file. What the source
proves is therefore what the run says: status ``killed``, with an error and a note that the
source has no end record and naming its last metrics row; the last row's time is its end.

>>> import sqlite3, tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()); db = sqlite3.connect(d / "proj.db")
>>> _ = db.executescript(
...     "CREATE TABLE metrics (id INTEGER PRIMARY KEY, timestamp TEXT, run_name TEXT, step INTEGER, metrics TEXT);"
...     "CREATE TABLE configs (id INTEGER PRIMARY KEY, run_name TEXT, config TEXT, created_at TEXT);"
...     "INSERT INTO metrics VALUES (1, '2026-01-01T00:00:00+00:00', 'r', 0, '{\\"loss\\": 1.5}');")
>>> db.commit(); db.close()
>>> detect(d / "proj.db"), detect(d)
(True, True)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import ImportSourceError, RecordError
from labledger.importers.source import ImportedRun, ImportOptions, Source, finish_import, is_number, new_run
from labledger.store.jsonl import RECORD_FILES, Appender
from labledger.store.ledger import Ledger

FORMAT = "trackio"
RESERVED = ("step", "time")
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _is_trackio_db(path: Path) -> bool:
    """A SQLite file with Trackio's ``metrics`` table (run_name, step, metrics, timestamp columns)."""
    if not (path.is_file() and path.suffix == ".db"):
        return False
    try:
        with path.open("rb") as f:
            if f.read(16) != _SQLITE_MAGIC:
                return False
        with _connect(path) as conn:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(metrics)")}
    except (OSError, sqlite3.Error):
        return False
    return {"run_name", "step", "metrics", "timestamp"} <= cols


def _project_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if _is_trackio_db(path) else []
    return [p for p in sorted(path.glob("*.db")) if _is_trackio_db(p)] if path.is_dir() else []


def detect(path: Path) -> bool:
    """A Trackio project file (``*.db``), or a folder (``TRACKIO_DIR``) holding one."""
    return bool(_project_files(path))


def make_source(path: Path) -> Source:
    dbs = _project_files(path)
    if not dbs:
        raise ImportSourceError(f"{path}: no Trackio project files (<TRACKIO_DIR>/<project>.db)")
    files = [*dbs, *(w for db in dbs if (w := db.with_name(db.name + "-wal")).is_file())]
    return Source(path, FORMAT, files)


@contextlib.contextmanager
def _connect(db: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection that leaves ``db``'s folder as it was (see the module docstring)."""
    wal = db.with_name(db.name + "-wal")
    tmp = None
    try:
        if wal.exists():
            tmp = Path(tempfile.mkdtemp(prefix="labledger-trackio-"))
            shutil.copyfile(db, tmp / db.name)
            shutil.copyfile(wal, tmp / wal.name)
            conn = sqlite3.connect(tmp / db.name)
        else:
            conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            yield conn
        finally:
            conn.close()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _time(value: Any, db: Path, where: str) -> float:
    try:
        when = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise RecordError(f"not an ISO timestamp: {value!r:.60}", source=str(db), field=where) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _json(text: Any, db: Path, where: str) -> Any:
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise RecordError(f"not valid JSON ({exc})", source=str(db), field=where) from None


def _flatten(values: Mapping[str, Any], skipped: Counter[str], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, str) and value in _SPECIAL:
            value = _SPECIAL[value]
        if is_number(value) or value is None:
            out[name] = value
        elif isinstance(value, bool):
            out[name] = int(value)
        elif isinstance(value, dict) and "_type" not in value:
            out.update(_flatten(value, skipped, f"{name}."))
        else:
            kind = value.get("_type") if isinstance(value, dict) else type(value).__name__
            skipped[str(kind)] += 1
    return out


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _runs(conn: sqlite3.Connection, key: str) -> list[tuple[str, str, str | None]]:
    """``(identity, name, first time)`` of every run with metrics or a config, in order of first
    appearance."""
    first: dict[tuple[str, str], str] = {}
    for ident, name, when in conn.execute(
        f"SELECT {key}, run_name, MIN(timestamp) FROM metrics GROUP BY {key}, run_name"
    ):
        first[(ident, name)] = when
    if "config" in _columns(conn, "configs"):
        ckey = key if key in _columns(conn, "configs") else "run_name"
        for ident, name, when in conn.execute(f"SELECT {ckey}, run_name, created_at FROM configs"):
            first.setdefault((ident, name), when)
    return [(*k, first[k]) for k in sorted(first, key=lambda k: str(first[k] or ""))]


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One run per Trackio run of each project file (see the module docstring)."""
    out: list[ImportedRun] = []
    for db in (f for f in source.files if f.suffix == ".db"):
        files = [f for f in source.files if f == db or f.name == db.name + "-wal"]
        with _connect(db) as conn:
            try:
                out.extend(_load_project(conn, db, files, source, stage, opts))
            except sqlite3.DatabaseError as exc:  # a table or column a Trackio project has is missing
                raise ImportSourceError(f"{db}: not a Trackio project file ({exc})") from None
    return out


def _load_project(
    conn: sqlite3.Connection, db: Path, files: list[Path], source: Source, stage: Ledger, opts: ImportOptions
) -> list[ImportedRun]:
    project = db.stem
    key = "run_id" if "run_id" in _columns(conn, "metrics") else "run_name"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    out = []
    for ident, run_name, first in _runs(conn, key):
        ckey = key if key in _columns(conn, "configs") else "run_name"
        row = conn.execute(f"SELECT config FROM configs WHERE {ckey} = ? ORDER BY id DESC LIMIT 1", (ident,)).fetchone()
        raw = _json(row[0], db, f"configs[{ident}].config") if row else {}
        if not isinstance(raw, dict):
            raise RecordError("a run's config must be a JSON object", source=str(db), field=f"configs[{ident}].config")
        config = {k: v for k, v in raw.items() if not str(k).startswith("_")}
        if raw.get("_Created"):
            started: float | None = _time(raw["_Created"], db, f"configs[{ident}]._Created")
        else:
            started = _time(first, db, f"metrics[{key}={ident}].timestamp") if first else None
        name = opts.name or run_name
        run = new_run(
            stage,
            name,
            source=source,
            opts=opts,
            config=config,
            started=started,
            group=raw.get("_Group") or project,
            environment={"user": raw.get("_Username")},
            files=files,
            meta={"trackio": {"project": project, "run_id": ident, "run_name": run_name}},
            times_from="the timestamp of each Trackio metrics row",
        )
        skipped: Counter[str] = Counter()
        renamed: dict[str, str] = {}
        notes: list[str] = []
        n_records = n_values = n_system = 0
        last_time = started
        last_row: tuple[int, str] | None = None
        with run:
            cur = conn.execute(
                f"SELECT id, step, timestamp, metrics FROM metrics WHERE {key} = ? ORDER BY id", (ident,)
            )
            for rowid, step, stamp, text in cur:
                where = f"metrics[id={rowid}]"
                if not isinstance(step, int):
                    raise RecordError(
                        f"step must be an integer; got {step!r:.40}", source=str(db), field=f"{where}.step"
                    )
                when = _time(stamp, db, f"{where}.timestamp")
                data = _json(text, db, f"{where}.metrics")
                if not isinstance(data, dict):
                    raise RecordError("must be a JSON object", source=str(db), field=f"{where}.metrics")
                values = _flatten(data, skipped)
                for k in RESERVED:
                    if k in values:
                        renamed[k] = k + "_"
                        values[renamed[k]] = values.pop(k)
                if values:
                    run.log(step, time=when, **values)
                    n_records += 1
                    n_values += len(values)
                if last_time is None or when > last_time:
                    last_time = when
                last_row = (step, str(stamp))
            if "system_metrics" in tables:
                skey = key if key in _columns(conn, "system_metrics") else "run_name"
                rows = conn.execute(
                    f"SELECT id, timestamp, metrics FROM system_metrics WHERE {skey} = ? ORDER BY id", (ident,)
                )
                appender = None
                for rowid, stamp, text in rows:
                    where = f"system_metrics[id={rowid}]"
                    data = _json(text, db, f"{where}.metrics")
                    if not isinstance(data, dict):
                        raise RecordError("must be a JSON object", source=str(db), field=f"{where}.metrics")
                    rec = {"time": _time(stamp, db, f"{where}.timestamp"), **_flatten(data, Counter())}
                    if appender is None:
                        appender = Appender(run.dir / RECORD_FILES["system"])
                    appender.append(rec)
                    n_system += 1
                if appender is not None:
                    appender.close()
            if "alerts" in tables and "title" in _columns(conn, "alerts"):
                akey = key if key in _columns(conn, "alerts") else "run_name"
                for title, text, level, step in conn.execute(
                    f"SELECT title, text, level, step FROM alerts WHERE {akey} = ? ORDER BY id", (ident,)
                ):
                    at = f" (step {step})" if step is not None else ""
                    notes.append(f"Trackio alert [{level}]{at}: {title}" + (f": {text}" if text else ""))
            if skipped:
                notes.append(
                    "Not imported (numbers are): "
                    + ", ".join(f"{n} {k} value(s)" for k, n in sorted(skipped.items()))
                    + "."
                )
            if renamed:
                notes.append(
                    "Keys renamed because step and time are the record's own fields: "
                    + ", ".join(f"{a} -> {b}" for a, b in sorted(renamed.items()))
                    + "."
                )
            if opts.copy:
                source.copy_into(run, files)
            error = (
                "Trackio records no end of a run: the source cannot tell a run that finished from one "
                "stopped mid-log; "
                + (
                    f"its last metrics row is step {last_row[0]} at {last_row[1]}"
                    if last_row
                    else "it has no metrics rows"
                )
            )
            notes.append(f"The source has no end record: {error}.")
            for text in notes:
                run.note(text)
            fields = {
                source.rel(db): f"run {run_name} ({n_records} metrics rows, {n_values} values, {n_system} system rows)"
            }
            finish_import(run, fields, ended=last_time, status="killed", error=error)
        out.append(
            ImportedRun(
                run.id,
                run.name,
                run.group,
                {"scalars": n_records, "values": n_values, "system": n_system, "notes": len(notes)},
                fields,
                notes,
            )
        )
    return out
