"""Import an MLflow tracking store: experiments, runs, params, metrics (steps, timestamps), tags.

The store is a SQLite database (``mlflow.db``, or any SQLite file with MLflow's tables) or a
file store folder (``mlruns/``), read with MLflow's own client (``MlflowClient(tracking_uri=...)``).
The original is never opened for writing: a database is read from a snapshot taken with SQLite's
backup API (MLflow would otherwise create or check tables in it), and a file store from a copy of
its metadata (artifacts excluded) in a temporary folder. The content hash covers the database (and
its ``-wal`` file) or every file of the store outside ``artifacts/`` folders.

Each active MLflow run becomes one ledger run:

| MLflow | ledger |
|---|---|
| run name (``--name`` when the store has one run; ``NAME/run name`` when it has several) | run name |
| experiment name (unless ``--group``) | group |
| params (MLflow stores them as text) | config: a param whose text is exactly how Python writes a finite number (``str(int)``, ``repr(float)``: ``"0.01"``, ``"64"``, ``"1e-05"``) as that number, so ``config.lr < 0.05`` compares numbers and ``str(value)`` is the text again; any other text as text. The texts, as MLflow has them, in ``run.json`` ``mlflow.params`` |
| tags | ``run.json`` ``mlflow.tags`` (all of them); user tags also as ledger tags ``key=value``; ``mlflow.note.content`` as a note; ``mlflow.user`` / ``mlflow.source.*`` as the run's user, argv and git |
| metrics, every point (an SQLite store's read with one ``SELECT``) | scalar records: one per (step, timestamp), ``time`` = timestamp / 1000, values keyed by metric name |
| status FINISHED / FAILED / KILLED | finished / failed / killed; RUNNING or SCHEDULED becomes killed with an error saying the run had not ended |
| start_time / end_time (ms) | started / ended |
| artifacts | referenced (``artifact_uri``), or with ``--copy`` copied under ``files/artifacts/`` when local |
| dataset inputs | ``run.json`` ``mlflow.dataset_inputs`` |
| MLflow 3 logged models of the run (``search_logged_models``: kept outside the run's artifacts) | ``run.json`` ``mlflow.logged_models`` (``model_id``, name, status, params, tags, metrics, flavors from ``MLmodel``, each local file's sha256 and size) and a note; with ``--copy`` the files under ``files/models/<model_id>/`` |
| tag ``mlflow.parentRunId`` (a nested run) | lineage: ``init`` ``{"kind": "run", "name": <the parent's ledger id>}`` when the parent is in the import (parents are imported first), else a note |

Deleted runs and experiments are not imported (a note on each imported run counts them).
"""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

from labledger.errors import ImportSourceError
from labledger.importers.source import (
    ImportedRun,
    ImportOptions,
    Source,
    finish_import,
    log_scalar_columns,
    new_run,
    safe_relpath,
    walk_files,
)
from labledger.store.ledger import Ledger

FORMAT = "mlflow"
DB_NAMES = ("mlflow.db",)
SQLITE_MAGIC = b"SQLite format 3\x00"


#: Tables whose presence marks an SQLite file as an MLflow store.
def param_value(text: str) -> Any:
    """An MLflow param (text) as the config holds it: the number its text spells when the text is
    exactly how Python writes that number (``str`` of an int, ``repr`` of a finite float), so that
    ``str(param_value(t)) == t`` always; any other text unchanged.

    >>> [param_value(t) for t in ("0.01", "64", "1e-05", "-0.5", "1_000", "01", "nan", "True", "adam")]
    [0.01, 64, 1e-05, -0.5, '1_000', '01', 'nan', 'True', 'adam']
    """
    try:
        if str(number := int(text)) == text:
            return number
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) and repr(value) == text else text


MLFLOW_TABLES = {"experiments", "runs", "metrics", "params", "tags"}
STATUS = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "killed"}
RESERVED = ("step", "time")
PAGE = 1000


def _client_cls():
    try:
        from mlflow.entities import ViewType
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ImportSourceError(
            "reading an MLflow store needs MLflow's client: pip install mlflow-skinny sqlalchemy alembic "
            "(or mlflow), or pip install 'labledger[importers]'"
        ) from None
    return MlflowClient, ViewType


def is_sqlite_store(path: Path) -> bool:
    """An SQLite file with MLflow's tables (read-only check)."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            if f.read(16) != SQLITE_MAGIC:
                return False
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except (OSError, sqlite3.DatabaseError):
        return False
    return names >= MLFLOW_TABLES


def is_file_store(path: Path) -> bool:
    """An ``mlruns/`` folder: experiment folders with a ``meta.yaml`` each."""
    if not path.is_dir():
        return False
    return any((p / "meta.yaml").is_file() for p in path.iterdir() if p.is_dir() and p.name != ".trash")


def store_path(path: Path) -> Path | None:
    """The store at ``path``: itself, or an ``mlflow.db`` / ``mlruns`` inside it."""
    if is_sqlite_store(path) or is_file_store(path):
        return path
    if path.is_dir():
        for name in DB_NAMES:
            if is_sqlite_store(path / name):
                return path / name
        if is_file_store(path / "mlruns"):
            return path / "mlruns"
    return None


def detect(path: Path) -> bool:
    return store_path(path) is not None


def make_source(path: Path) -> Source:
    store = store_path(path)
    if store is None:
        raise ImportSourceError(
            f"{path}: not an MLflow store (no mlflow.db with MLflow's tables, no mlruns/ "
            "folder of experiments with meta.yaml)"
        )
    if store.is_file():
        files = [store] + [p for p in (Path(f"{store}-wal"),) if p.is_file()]
        return Source(store, FORMAT, files)
    return Source(store, FORMAT, walk_files(store, skip_dirs=("artifacts",)))


@contextmanager
def _snapshot(store: Path) -> Iterator[str]:
    """A tracking URI for a private copy of the store (the original is only read)."""
    with tempfile.TemporaryDirectory(prefix="labledger-mlflow-") as tmp:
        if store.is_file():
            copy = Path(tmp) / "mlflow.db"
            try:
                src = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
                dst = sqlite3.connect(copy)
                try:
                    src.backup(dst)
                finally:
                    dst.close()
                    src.close()
            except sqlite3.DatabaseError:
                shutil.copyfile(store, copy)
                if Path(f"{store}-wal").is_file():
                    shutil.copyfile(f"{store}-wal", f"{copy}-wal")
            yield f"sqlite:///{copy}"
        else:
            copy = Path(tmp) / "mlruns"
            # Artifact folders are kept (MLflow checks that a run folder has one) but left empty.
            shutil.copytree(
                store, copy, symlinks=True, ignore=lambda d, names: names if os.path.basename(d) == "artifacts" else []
            )
            old = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
            try:
                yield copy.as_uri()
            finally:
                if old is None:
                    os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
                else:
                    os.environ["MLFLOW_ALLOW_FILE_STORE"] = old


def _paged(fetch) -> Iterator[Any]:
    token = None
    while True:
        page = fetch(token)
        yield from page
        token = getattr(page, "token", None)
        if not token:
            return


def _metric_arrays(client: Any, run_id: str, keys: list[str]) -> tuple[np.ndarray, ...]:
    """(key index, step, timestamp ms, value) of every point of every metric, as compact arrays."""
    ks, steps, stamps, values = [], [], [], []
    for i, key in enumerate(keys):
        history = client.get_metric_history(run_id, key)
        n = len(history)
        ks.append(np.full(n, i, dtype=np.int32))
        steps.append(np.fromiter((m.step for m in history), dtype=np.int64, count=n))
        stamps.append(np.fromiter((m.timestamp for m in history), dtype=np.int64, count=n))
        values.append(np.fromiter((m.value for m in history), dtype=np.float64, count=n))
        del history
    if not ks:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros(0)
    return np.concatenate(ks), np.concatenate(steps), np.concatenate(stamps), np.concatenate(values)


def _sql_metric_arrays(db: Path, run_id: str, keys: list[str]) -> tuple[np.ndarray, ...]:
    """What :func:`_metric_arrays` gives, read with one ``SELECT`` from MLflow's ``metrics`` table:
    the columns go straight into numpy arrays, no ORM objects, no ``Metric`` entities. NaN
    is stored as ``is_nan`` (value 0), as MLflow's own reader reads it."""
    dtype = np.dtype([("step", "<i8"), ("stamp", "<i8"), ("value", "<f8"), ("nan", "?")])
    parts = []
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        for i, key in enumerate(keys):  # the primary key starts with the metric's key: one index range each
            rows = con.execute(
                "SELECT step, timestamp, value, is_nan FROM metrics WHERE key = ? AND run_uuid = ?", (key, run_id)
            ).fetchall()
            try:
                part = np.array(rows, dtype=dtype)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ImportSourceError(
                    f"{db}: a point of metric {key!r} of run {run_id} is not a number ({exc})"
                ) from None
            parts.append((np.full(part.size, i, dtype=np.int64), part))
            del rows
    except sqlite3.DatabaseError as exc:
        raise ImportSourceError(f"{db}: cannot read MLflow's metrics table ({exc})") from None
    finally:
        con.close()
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros(0)
    k = np.concatenate([p[0] for p in parts])
    table = np.concatenate([p[1] for p in parts])
    value = table["value"].copy()
    value[table["nan"]] = np.nan
    return k, table["step"].copy(), table["stamp"].copy(), value


def _log_metrics(run: Any, keys: list[str], arrays: tuple[np.ndarray, ...]) -> int:
    """One scalar record per (step, timestamp), values keyed by metric name (a metric with two
    values at one step and timestamp starts a second record); returns the number of records."""
    k, step, stamp, value = arrays
    if k.size == 0:
        return 0
    order = np.lexsort((value, k, stamp, step))  # as MLflow orders a history: timestamp, step, value
    k, step, stamp, value = k[order], step[order], stamp[order], value[order]
    new = np.ones(k.size, dtype=bool)
    new[1:] = (step[1:] != step[:-1]) | (stamp[1:] != stamp[:-1]) | (k[1:] == k[:-1])
    first = np.flatnonzero(new)
    starts = np.append(first, k.size)
    names = [name + "_" if name in RESERVED else name for name in keys]
    return log_scalar_columns(run, names, step[first], stamp[first] / 1000.0, starts, k, value)


def _local_path(uri: str | None) -> Path | None:
    if not uri:
        return None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and uri.startswith("/"):
        return Path(uri)
    return None


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One ledger run per active MLflow run (see the module docstring)."""
    client_cls, view_type = _client_cls()
    out: list[ImportedRun] = []
    with _snapshot(source.path) as uri:
        client = client_cls(tracking_uri=uri)
        db = Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None
        experiments = list(
            _paged(lambda token: client.search_experiments(view_type=view_type.ALL, max_results=PAGE, page_token=token))
        )
        active = [e for e in experiments if e.lifecycle_stage == "active"]
        runs = []
        deleted_runs = 0
        for exp in active:
            for r in _paged(
                lambda token, exp=exp: client.search_runs(
                    [exp.experiment_id], run_view_type=view_type.ALL, max_results=PAGE, page_token=token
                )
            ):
                if r.info.lifecycle_stage == "active":
                    runs.append((exp, r))
                else:
                    deleted_runs += 1
        skipped_note = None
        if deleted_runs or len(active) < len(experiments):
            skipped_note = (
                f"Not imported from the MLflow store: {len(experiments) - len(active)} deleted "
                f"experiment(s) and {deleted_runs} deleted run(s) of active experiments."
            )
        several = len(runs) > 1
        models = _logged_models(client, [e.experiment_id for e in active])
        ledger_ids: dict[str, str] = {}  # MLflow run id -> ledger run id, parents imported first
        for exp, r in _parents_first(runs):
            imported = _import_run(
                client,
                db,
                source,
                stage,
                opts,
                exp,
                r,
                several,
                skipped_note,
                models.get(r.info.run_id, []),
                ledger_ids,
            )
            ledger_ids[r.info.run_id] = imported.id
            out.append(imported)
    return out


def _parents_first(runs: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """``runs`` in their order, each run's parent (``mlflow.parentRunId``) moved before it."""
    by_id = {r.info.run_id: (e, r) for e, r in runs}
    done: dict[str, None] = {}

    def place(run_id: str, seen: frozenset[str]) -> None:
        if run_id in done or run_id in seen:
            return
        parent = by_id[run_id][1].data.tags.get("mlflow.parentRunId")
        if parent in by_id:
            place(parent, seen | {run_id})
        done[run_id] = None

    for _, r in runs:
        place(r.info.run_id, frozenset())
    return [by_id[i] for i in done]


def _logged_models(client: Any, experiment_ids: list[str]) -> dict[str, list[Any]]:
    """MLflow 3's logged models (``mlflow.<flavor>.log_model``) by the run that logged them. They
    live outside the run's artifacts (``<experiment artifacts>/models/<model_id>/artifacts``)."""
    search = getattr(client, "search_logged_models", None)
    if search is None or not experiment_ids:  # MLflow 2: models are run artifacts
        return {}
    out: dict[str, list[Any]] = {}
    for m in _paged(lambda token: search(experiment_ids=experiment_ids, max_results=PAGE, page_token=token)):
        if m.source_run_id:
            out.setdefault(m.source_run_id, []).append(m)
    for models in out.values():
        models.sort(key=lambda m: (m.creation_timestamp or 0, m.model_id))
    return out


def _model_record(source: Source, run: Any, model: Any, copy: bool) -> dict[str, Any]:
    """What ``run.json`` ``mlflow.logged_models`` keeps of one logged model; with ``copy`` its files
    are stored under ``files/models/<model_id>/``. Each local file is hashed (sha256, size)."""
    import hashlib

    status: Any = model.status
    if isinstance(status, int) and not isinstance(status, bool):  # the SQL store gives the proto number
        from mlflow.entities.logged_model_status import LoggedModelStatus

        status = LoggedModelStatus.from_int(status)
    status = getattr(status, "value", status)
    rec: dict[str, Any] = {
        "model_id": model.model_id,
        "name": model.name,
        "model_type": model.model_type,
        "status": status,
        "params": dict(model.params or {}),
        "tags": dict(model.tags or {}),
        "metrics": [
            {"key": x.key, "value": x.value, "step": x.step, "timestamp": x.timestamp} for x in (model.metrics or [])
        ],
        "created": model.creation_timestamp / 1000.0 if model.creation_timestamp else None,
        "artifact_location": model.artifact_location,
        "flavors": None,
        "files": [],
        "copied": False,
    }
    where = _local_path(model.artifact_location)
    if where is None or not where.is_dir():
        return rec
    for f in walk_files(where):
        rel = f.relative_to(where).as_posix()
        data = f.read_bytes()
        rec["files"].append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        if rel == "MLmodel":
            import yaml

            try:
                doc = yaml.safe_load(data)
            except yaml.YAMLError as exc:
                raise ImportSourceError(
                    f"{f}: MLmodel of logged model {model.model_id} is not YAML ({exc})".replace("\n", " ")
                ) from None
            if isinstance(doc, dict) and isinstance(doc.get("flavors"), dict):
                rec["flavors"] = sorted(doc["flavors"])
        if copy:
            run.log_file(f"models/{safe_relpath(model.model_id)}/{safe_relpath(rel)}", data)
    rec["copied"] = copy
    return rec


def _import_run(
    client: Any,
    db: Path | None,
    source: Source,
    stage: Ledger,
    opts: ImportOptions,
    exp: Any,
    r: Any,
    several: bool,
    skipped_note: str | None,
    models: list[Any],
    ledger_ids: dict[str, str],
) -> ImportedRun:
    info, data = r.info, r.data
    tags = dict(data.tags)
    run_name = info.run_name or tags.get("mlflow.runName") or info.run_id
    name = (f"{opts.name}/{run_name}" if several else opts.name) if opts.name else run_name
    user_tags = sorted(f"{k}={v}" for k, v in tags.items() if not k.startswith("mlflow."))
    env = {
        "user": info.user_id or tags.get("mlflow.user"),
        "argv": [tags["mlflow.source.name"]] if tags.get("mlflow.source.name") else None,
        "git": {
            "commit": tags.get("mlflow.source.git.commit"),
            "dirty": None,
            "branch": tags.get("mlflow.source.git.branch"),
        },
    }
    inputs = getattr(r, "inputs", None)
    datasets = [
        {
            "name": d.dataset.name,
            "digest": d.dataset.digest,
            "source_type": d.dataset.source_type,
            "context": {t.key: t.value for t in d.tags},
        }
        for d in (getattr(inputs, "dataset_inputs", None) or [])
    ]
    started = info.start_time / 1000.0 if info.start_time is not None else None
    ended = info.end_time / 1000.0 if info.end_time is not None else None
    files = None
    if source.path.is_dir():  # a file store: this run's own files and its experiment's meta.yaml
        mine = (f"{info.experiment_id}/{info.run_id}/", f"{info.experiment_id}/meta.yaml")
        files = [f for f in source.files if source.rel(f).startswith(mine)]
    run = new_run(
        stage,
        name,
        source=source,
        opts=opts,
        config={k: param_value(v) for k, v in data.params.items()},
        started=started,
        group=exp.name,
        tags=user_tags,
        environment=env,
        files=files,
        times_from="MLflow start_time and end_time",
        meta={
            "mlflow": {
                "run_id": info.run_id,
                "experiment_id": info.experiment_id,
                "experiment_name": exp.name,
                "experiment_tags": dict(exp.tags or {}),
                "status": info.status,
                "lifecycle_stage": info.lifecycle_stage,
                "artifact_uri": info.artifact_uri,
                "tags": tags,
                "dataset_inputs": datasets,
                "params": dict(data.params),
            }
        },
    )
    notes: list[str] = []
    keys = sorted(data.metrics)
    fields = {
        "params": f"config ({len(data.params)} params, "
        f"{sum(not isinstance(param_value(v), str) for v in data.params.values())} of them numbers; "
        "their texts in run.json mlflow.params)",
        "tags": f"run.json mlflow.tags ({len(tags)}); {len(user_tags)} user tag(s) as ledger tags",
    }
    with run:
        if db is not None:
            arrays = _sql_metric_arrays(db, info.run_id, keys)
        else:
            arrays = _metric_arrays(client, info.run_id, keys)
        n = _log_metrics(run, keys, arrays)
        fields["metrics"] = f"scalars ({len(keys)} metrics in {n} records, one per step and timestamp)"
        if tags.get("mlflow.note.content"):
            notes.append(tags["mlflow.note.content"])
            fields["tags"] += "; mlflow.note.content as a note"
        renamed = [k for k in keys if k in RESERVED]
        if renamed:
            notes.append(
                "Metrics renamed because step and time are the record's own fields: "
                + ", ".join(f"{k} -> {k}_" for k in renamed)
                + "."
            )
        art = _local_path(info.artifact_uri)
        if opts.copy and art is not None and art.is_dir():
            files = walk_files(art)
            for f in files:
                run.log_file(f"artifacts/{safe_relpath(f.relative_to(art).as_posix())}", f)
            fields["artifacts"] = f"{len(files)} file(s) copied under files/artifacts/"
        else:
            fields["artifacts"] = "referenced (run.json mlflow.artifact_uri)"
        if models:
            recs = [_model_record(source, run, m, opts.copy) for m in models]
            run.meta["mlflow"]["logged_models"] = recs
            fields["logged_models"] = (
                f"{len(recs)} logged model(s) in run.json mlflow.logged_models (files with sha256)"
                + ("; their files copied under files/models/<model_id>/" if opts.copy else "")
            )
            notes.append(
                "MLflow logged models of this run: "
                + "; ".join(
                    f"{m['name']} ({m['model_id']}, {', '.join(m['flavors'] or []) or 'no flavors'}, "
                    f"{len(m['files'])} file(s), "
                    + (f"copied under files/models/{m['model_id']}/" if m["copied"] else f"at {m['artifact_location']}")
                    + ")"
                    for m in recs
                )
                + "."
            )
        parent = tags.get("mlflow.parentRunId")
        if parent and parent in ledger_ids:
            run.set_init({"kind": "run", "run_id": ledger_ids[parent]})
            fields["tags"] += "; mlflow.parentRunId as lineage (nested in its parent run)"
        elif parent:
            notes.append(
                f"Nested in MLflow run {parent}, which is not in this import (deleted, or in another store): "
                "no lineage edge; run.json mlflow.tags keeps mlflow.parentRunId."
            )
        if skipped_note:
            notes.append(skipped_note)
        status = STATUS.get(info.status)
        error = None
        if status is None:
            status = "killed"
            error = f"MLflow status was {info.status} when imported: the run had not ended"
        for text in notes:
            run.note(text)
        finish_import(run, fields, ended=ended, status=status, error=error)
    return ImportedRun(
        run.id, run.name, run.group, {"scalars": n, "params": len(data.params), "notes": len(notes)}, fields, notes
    )
