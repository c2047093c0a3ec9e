"""The runs as an open dataset (#46): every ended run as standard zstd Parquet files, laid out
hive-style so that any engine (DuckDB, Spark, Polars, pyarrow) queries every run with no labledger
code and no server::

    dataset/kind=runs/run=<id>/part-0.parquet              the run's index row (one row)
    dataset/kind=scalars/run=<id>/part-0.parquet           every Run.log value, one row per (step, key)
    dataset/kind=results/run=<id>/set=<name>/part-0.parquet every row of a stored result set
    dataset/kind=metrics/run=<id>/part-0.parquet           every value of its stored evaluations

The columns of each kind are :data:`labledger.schema.dataset.DATASET_KINDS` (their JSON Schemas:
``labledger schema dataset-<kind>``). The same files are written to two places by one writer,
:func:`publish_run`:

* an object store, ``<prefix>/dataset/...``, by ``labledger sync --to s3://bucket/prefix`` and by a
  ``labledger serve --artifacts s3://bucket/prefix`` when a synced run's index rows arrive;
* a ledger's own folder, ``<ledger>/dataset/...``, by :func:`refresh_local` (what ``labledger query``
  runs before it queries), rewriting only the runs that changed since it last wrote them.

A run is in the dataset once it has ended (finished, failed or crashed); a running run is left out
until it ends. Each run's files are replaced together: a file of the run that the new set lacks
(a result set since removed) is deleted after the new ones are written.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from labledger.errors import RecordError
from labledger.schema.dataset import DATASET_DIR, DATASET_KINDS, PART_FILE
from labledger.store.files import RECORD_FILES

if TYPE_CHECKING:
    import pyarrow as pa

    from labledger.store.ledger import Ledger
    from labledger.store.objects import ObjectStore

#: The file that records, per run, what the local dataset was written from (see :func:`refresh_local`).
STAMPS = ".stamps.json"


def arrow_schema(kind: str) -> pa.Schema:
    """The Arrow schema of the files of dataset ``kind`` (partition columns not included).

    >>> arrow_schema("scalars").names
    ['step', 'time', 'key', 'value']
    """
    import pyarrow as pa

    types = {
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "string": pa.string(),
        "json": pa.string(),
        "list<string>": pa.list_(pa.string()),
        "map<string,float64>": pa.map_(pa.string(), pa.float64()),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
    }
    return pa.schema([(c.name, types[c.type]) for c in DATASET_KINDS[kind].columns])


def as_text(value: Any) -> str | None:
    """A value that may be any JSON, as a text column holds it (:data:`~labledger.schema.dataset.AS_TEXT`).

    >>> [as_text(v) for v in ("a", 7, [1, 2], None, True)]
    ['a', '7', '[1,2]', None, 'true']
    """
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _table_rows(tables: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    t = tables.get(name) or {}
    cols = t.get("columns") or []
    return [dict(zip(cols, r)) for r in t.get("rows") or []]


def _json_object(text: Any) -> dict[str, Any]:
    """The JSON object in an index column (text that is not a JSON object holds nothing)."""
    if not isinstance(text, str):
        return {}
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def run_row(tables: Mapping[str, Any], run_dir: Path) -> pa.Table:
    """The ``runs`` table of one run (one row) from its index rows (as :func:`~labledger.store.manifest.index_rows` gives them)."""
    import pyarrow as pa

    rows = _table_rows(tables, "runs")
    if len(rows) != 1:
        raise RecordError(f"{run_dir.name}: the index rows hold {len(rows)} runs rows, not 1")
    r = rows[0]
    fields = {**_json_object(r.get("fields")), **_json_object(r.get("eval_fields"))}
    nums = {k: float(v) for k, v in fields.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    texts = {k: v for k, v in fields.items() if isinstance(v, str)}
    config = None
    cfg = run_dir / "config.json"
    if cfg.is_file():
        try:
            config = orjson.dumps(orjson.loads(cfg.read_bytes())).decode()
        except orjson.JSONDecodeError:
            raise RecordError(f"{cfg}: not valid JSON") from None
    started, ended = r.get("started"), r.get("ended")
    row = {
        "name": r.get("name"),
        "group": r.get("grp"),
        "status": r.get("status"),
        "started": started,
        "ended": ended,
        "duration": None if started is None or ended is None else ended - started,
        "host": r.get("host"),
        "git_commit": r.get("git_commit"),
        "git_dirty": None if r.get("git_dirty") is None else bool(r.get("git_dirty")),
        "error": r.get("error"),
        "tags": sorted(t["tag"] for t in _table_rows(tables, "run_tags")),
        "num_fields": list(nums.items()),
        "text_fields": list(texts.items()),
        "fields": orjson.dumps(fields).decode(),
        "summary": r.get("summary"),
        "config": config,
    }
    return pa.Table.from_pylist([row], schema=arrow_schema("runs"))


def metrics_table(tables: Mapping[str, Any]) -> pa.Table:
    """The ``metrics`` table of one run: every indexed value of its stored documents."""
    import pyarrow as pa

    from labledger.schema.ids import MetricId

    docs = {e["id"]: e for e in _table_rows(tables, "evaluations")}
    out = []
    for v in _table_rows(tables, "metric_values"):
        doc = docs.get(v["eval_id"])
        if doc is None:
            continue
        params = _json_object(v.get("params"))
        out.append(
            {
                "set": doc["name"],
                "doc": doc["kind"],
                "task": v["task"],
                "slice": v.get("slice") or "",
                "metric": MetricId(v["metric"], params).short,
                "params": orjson.dumps(params).decode(),
                "value": v.get("value"),
                "ci_low": v.get("ci_low"),
                "ci_high": v.get("ci_high"),
                "n": v.get("n"),
            }
        )
    out.sort(key=lambda d: (d["set"], d["doc"], d["task"], d["slice"], d["metric"]))
    return pa.Table.from_pylist(out, schema=arrow_schema("metrics"))


def scalars_table(wide: pa.Table) -> pa.Table:
    """The ``scalars`` table (one row per step and key) from a run's wide table of scalars
    (:meth:`RunView.table` ``("scalars")``: a column per key, null where the key was not logged at
    that step, NaN where NaN was logged). Rows are in step order, then key order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = arrow_schema("scalars")
    if "step" not in wide.column_names or wide.num_rows == 0:
        return schema.empty_table()
    step = wide["step"].cast(pa.int64())
    when = wide["time"].cast(pa.float64()) if "time" in wide.column_names else pa.nulls(wide.num_rows, pa.float64())
    parts = []
    for i, key in enumerate(sorted(k for k in wide.column_names if k not in ("step", "time"))):
        try:
            col = wide[key].cast(pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise RecordError(f"scalar {key!r} holds values that are not numbers ({wide[key].type})") from None
        logged = pc.is_valid(col)
        values = pc.filter(col, logged)
        parts.append(
            pa.table(
                {
                    "step": pc.filter(step, logged),
                    "time": pc.filter(when, logged),
                    "key": pa.repeat(key, len(values)).cast(pa.string()),
                    "value": pc.if_else(pc.is_nan(values), pa.scalar(None, pa.float64()), values),
                    "_order": pa.repeat(i, len(values)).cast(pa.int32()),
                }
            )
        )
    if not parts:
        return schema.empty_table()
    table = pa.concat_tables(parts).sort_by([("step", "ascending"), ("_order", "ascending")])
    return table.drop_columns(["_order"]).cast(schema)


def results_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """The ``results`` table of one result set from its rows (as :meth:`RunView.results` gives them)."""
    import pyarrow as pa

    declared = (
        "id",
        "task",
        "gold",
        "pred",
        "probs",
        "score",
        "scores",
        "positive",
        "slices",
        "group",
        "epoch",
        "sample",
    )
    out = []
    for n, r in enumerate(rows):
        probs, scores, slices = r.get("probs"), r.get("scores"), r.get("slices")
        extra = {k: v for k, v in r.items() if k not in declared}
        out.append(
            {
                "row": n,
                "id": as_text(r.get("id")),
                "task": as_text(r.get("task")),
                "gold": as_text(r.get("gold")),
                "pred": as_text(r.get("pred")),
                "probs": None if not isinstance(probs, dict) else [(str(k), v) for k, v in probs.items()],
                "score": r.get("score"),
                "scores": None if not isinstance(scores, dict) else [(str(k), v) for k, v in scores.items()],
                "positive": as_text(r.get("positive")),
                "slices": None if not isinstance(slices, dict) else [(str(k), as_text(v)) for k, v in slices.items()],
                "group": as_text(r.get("group")),
                "epoch": r.get("epoch"),
                "sample": r.get("sample"),
                "extra": orjson.dumps(extra, option=orjson.OPT_NON_STR_KEYS).decode() if extra else None,
            }
        )
    try:
        return pa.Table.from_pylist(out, schema=arrow_schema("results"))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise RecordError(f"a result row does not fit the dataset's columns ({exc})") from None


def run_tables(book: Ledger, run_id: str, tables: Mapping[str, Any]) -> dict[str, pa.Table]:
    """Every file of one run in the dataset: ``{path under the dataset root: table}``.

    ``tables`` are the run's index rows (:func:`~labledger.store.manifest.index_rows`); the records
    are read from the run's folder through ``book`` (:meth:`RunView.table`, :meth:`RunView.results`).
    """
    view = book.run(run_id)
    run_dir = view.dir
    out = {
        f"kind=runs/run={run_id}/{PART_FILE}": run_row(tables, run_dir),
        f"kind=metrics/run={run_id}/{PART_FILE}": metrics_table(tables),
    }
    try:
        wide = view.table("scalars")
    except RecordError as exc:
        raise RecordError(f"run {run_id}: {exc}") from None
    out[f"kind=scalars/run={run_id}/{PART_FILE}"] = scalars_table(wide)
    for name in view.results_names():
        try:
            out[f"kind=results/run={run_id}/set={name}/{PART_FILE}"] = results_table(view.results(name))
        except RecordError as exc:
            raise RecordError(f"run {run_id}, result set {name}: {exc}") from None
    return out


def parquet_bytes(table: pa.Table) -> bytes:
    """``table`` as one zstd Parquet file."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def run_prefixes(run_id: str) -> list[str]:
    """The folders (under the dataset root) that hold a run's files, one per kind."""
    return [f"kind={k}/run={run_id}/" for k in DATASET_KINDS]


class Sink(Protocol):
    """Where the dataset's files go: a folder, or an object store."""

    def replace_run(self, run_id: str, files: Mapping[str, bytes], previous: Iterable[str] | None = None) -> None:
        """Write ``files`` (paths under the dataset root), then delete the run's other files
        (``previous``: the paths it had, when known; else they are looked for)."""

    def drop_run(self, run_id: str) -> None:
        """Delete every file of the run."""


@dataclass
class FolderSink:
    """The dataset in a local folder (its root: ``<ledger>/dataset``). Each file is written to a
    temporary name and renamed into place, so a reader sees a file whole or not at all."""

    root: Path

    def replace_run(self, run_id: str, files: Mapping[str, bytes], previous: Iterable[str] | None = None) -> None:
        for rel, data in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        keep = {self.root / rel for rel in files}
        for prefix in run_prefixes(run_id):
            folder = self.root / prefix
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob(PART_FILE), reverse=True):
                if path not in keep:
                    path.unlink(missing_ok=True)
                    _prune(path.parent, folder)

    def drop_run(self, run_id: str) -> None:
        for prefix in run_prefixes(run_id):
            shutil.rmtree(self.root / prefix, ignore_errors=True)


def _prune(folder: Path, top: Path) -> None:
    """Remove ``folder`` and its parents up to ``top`` while they are empty."""
    while True:
        try:
            folder.rmdir()
        except OSError:
            return
        if folder == top:
            return
        folder = folder.parent


@dataclass
class StoreSink:
    """The dataset in an object store, under ``<prefix>/dataset/`` (boto3, as the store's runs)."""

    store: ObjectStore

    def key(self, rel: str) -> str:
        return self.store.key(DATASET_DIR, rel)

    def _existing(self, run_id: str) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        keys: list[str] = []
        pager = self.store.client.get_paginator("list_objects_v2")
        for prefix in run_prefixes(run_id):
            try:
                for page in pager.paginate(Bucket=self.store.bucket, Prefix=self.key(prefix)):
                    keys += [o["Key"] for o in page.get("Contents", [])]
            except (BotoCoreError, ClientError) as exc:
                raise self.store.fail(f"listing {self.key(prefix)}", exc) from None
        return keys

    def replace_run(self, run_id: str, files: Mapping[str, bytes], previous: Iterable[str] | None = None) -> None:
        for rel, data in files.items():
            self.store.put_bytes(self.key(rel), data)
        wanted = {self.key(rel) for rel in files}
        had = self._existing(run_id) if previous is None else [self.key(rel) for rel in previous]
        self.store.delete_keys(sorted(k for k in set(had) if k not in wanted))

    def drop_run(self, run_id: str) -> None:
        self.store.delete_keys(self._existing(run_id))


def publish_run(
    book: Ledger,
    run_id: str,
    sink: Sink,
    tables: Mapping[str, Any] | None = None,
    *,
    previous: Iterable[str] | None = None,
) -> dict[str, int]:
    """Write one run's files of the dataset to ``sink`` (see the module docstring); return the size
    of each, by its path under the dataset's root.

    ``tables``: the run's index rows (default: read from ``book``'s index). ``previous``: the paths
    the run's files had (what an earlier call returned), so that the sink need not look for them.
    A run that is still running is not published (its files, if any, are left as they are): ``{}``.
    """
    files = dataset_files(book, run_id, tables)
    if files:
        sink.replace_run(run_id, files, previous)
    return {rel: len(b) for rel, b in files.items()}


def dataset_files(book: Ledger, run_id: str, tables: Mapping[str, Any] | None = None) -> dict[str, bytes]:
    """The bytes of each of one run's files of the dataset, by path under the dataset's root
    (``{}`` for a run still running): what :func:`publish_run` writes. ``tables`` as there."""
    if tables is None:
        from labledger.store.manifest import index_rows

        tables = index_rows(book, run_id)
    rows = _table_rows(tables, "runs")
    if not rows or rows[0].get("status") == "running":
        return {}
    return {rel: parquet_bytes(t) for rel, t in run_tables(book, run_id, tables).items()}


def stamp(parts: Any) -> str:
    """A digest of what a run's files were written from (any JSON-able value).

    >>> stamp({"a": 1}) == stamp({"a": 1}) != stamp({"a": 2})
    True
    """
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)).hexdigest()


def dataset_stamp(tables: Mapping[str, Any], sources: Mapping[str, Any]) -> str:
    """The digest of what a run's dataset files are made from: its index rows ``tables`` (less
    ``counters``, which a reader may fill in without the run changing) and ``sources``, an identity
    (chunk hashes, or size and mtime) of each of its :func:`source_files`."""
    index = dict(tables)
    runs = tables.get("runs") or {}
    cols = list(runs.get("columns") or [])
    if "counters" in cols:
        i = cols.index("counters")
        index["runs"] = {
            "columns": cols[:i] + cols[i + 1 :],
            "rows": [r[:i] + r[i + 1 :] for r in runs.get("rows") or []],
        }
    return stamp([index, sources])


def source_files(run_dir: Path) -> list[str]:
    """The files of a run folder the dataset is made from (its scalars and result sets), relative."""
    out = [n for n in (RECORD_FILES["scalars"], RECORD_FILES["scalars"] + ".zst") if (run_dir / n).is_file()]
    evals = run_dir / "evals"
    if evals.is_dir():
        out += sorted(f"evals/{p.name}/results.jsonl" for p in evals.iterdir() if (p / "results.jsonl").is_file())
    return out


@dataclass
class RefreshReport:
    """What :func:`refresh_local` did."""

    root: Path
    runs: int = 0
    written: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    bytes: int = 0


def refresh_local(book: Ledger) -> RefreshReport:
    """Bring ``<ledger>/dataset`` up to date: write the files of every ended run whose index rows or
    source files changed since they were written, and delete those of runs no longer in the index
    (or running again). What each run was written from is kept in ``dataset/.stamps.json``: the
    run's index row (less the columns that change without the run changing), its tags, its stored
    documents, and the size and mtime of its source files.

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("r", ledger=d) as run:
    ...     run.log(1, loss=0.5)
    >>> book = labledger.open_ledger(d)
    >>> len(refresh_local(book).written), len(refresh_local(book).written)
    (1, 0)
    """
    root = book.root / DATASET_DIR
    report = RefreshReport(root)
    path = root / STAMPS
    try:
        old: dict[str, str] = orjson.loads(path.read_bytes()) if path.is_file() else {}
    except orjson.JSONDecodeError:
        old = {}
    cur = book.db.execute("SELECT * FROM runs WHERE status != 'running'")
    cols = [d[0] for d in cur.description]
    skip = {cols.index(c) for c in ("updated", "heartbeat", "counters") if c in cols}
    rows = {r[0]: [v for i, v in enumerate(r) if i not in skip] for r in cur.fetchall()}
    extra: dict[str, list[Any]] = {rid: [] for rid in rows}
    for rid, tag in book.db.execute("SELECT run_id, tag FROM run_tags ORDER BY run_id, tag"):
        if rid in extra:
            extra[rid].append(tag)
    for rid, name, kind, created in book.db.execute(
        "SELECT run_id, name, kind, created FROM evaluations ORDER BY run_id, name, kind"
    ):
        if rid in extra:
            extra[rid].append([name, kind, created])
    sink = FolderSink(root)
    new: dict[str, str] = {}
    report.runs = len(rows)
    for rid, row in rows.items():
        run_dir = book.run_dir(rid)
        files = []
        for rel in source_files(run_dir):
            st = (run_dir / rel).stat()
            files.append([rel, st.st_size, st.st_mtime_ns])
        digest = stamp([row, extra[rid], files])
        if old.get(rid) == digest and (root / f"kind=runs/run={rid}/{PART_FILE}").is_file():
            new[rid] = digest
            continue
        report.bytes += sum(publish_run(book, rid, sink).values())
        report.written.append(rid)
        new[rid] = digest
    for rid in sorted(set(old) - set(rows)):
        sink.drop_run(rid)
        report.dropped.append(rid)
    if new != old:
        root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{STAMPS}.{os.getpid()}.tmp")
        tmp.write_bytes(orjson.dumps(new, option=orjson.OPT_SORT_KEYS))
        os.replace(tmp, path)
    return report


__all__ = [
    "STAMPS",
    "FolderSink",
    "RefreshReport",
    "Sink",
    "StoreSink",
    "arrow_schema",
    "as_text",
    "dataset_stamp",
    "metrics_table",
    "parquet_bytes",
    "publish_run",
    "refresh_local",
    "results_table",
    "run_prefixes",
    "run_row",
    "run_tables",
    "scalars_table",
    "source_files",
    "stamp",
]
