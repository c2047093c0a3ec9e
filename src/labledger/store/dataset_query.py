"""SQL over the runs' open dataset (#46): DuckDB, with one view per kind (``runs``, ``scalars``,
``results``, ``metrics``; :data:`labledger.schema.dataset.DATASET_KINDS` has their columns, and each
has the ``run`` column of its path, ``results`` the ``set`` column too).

The dataset is read where it is: a folder (a ledger's ``dataset/``, brought up to date first by
:func:`labledger.store.dataset.refresh_local`) or an object store (``s3://bucket/prefix``: the
``dataset/`` that ``labledger sync --to`` and ``labledger serve --artifacts`` write there). Each
kind is a ``pyarrow.dataset`` of its Parquet files (hive partitions ``run=`` and ``set=`` read as
text) that DuckDB scans with its filters and columns pushed down; object storage is read through
Arrow's own S3 client, configured by the standard AWS variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ...), so no DuckDB extension has to be downloaded.

duckdb is an optional dependency (``pip install "labledger[query]"``), imported only here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from labledger.errors import LedgerError
from labledger.schema.dataset import DATASET_DIR, DATASET_KINDS

#: What to install when duckdb is missing.
NEEDS_DUCKDB = 'labledger query needs duckdb, which is not installed: pip install "labledger[query]"'


class SqlError(LedgerError):
    """SQL that DuckDB could not parse or run (its message, first line; exit 1)."""


@dataclass
class Answer:
    """The columns and rows a query returned."""

    columns: list[str]
    rows: list[tuple[Any, ...]]

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "rows": [list(r) for r in self.rows]}


def s3_filesystem() -> Any:
    """Arrow's S3 file system, configured as every AWS tool is (the endpoint from
    ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, the region from ``AWS_REGION`` or
    ``AWS_DEFAULT_REGION``, credentials from the environment, ``~/.aws`` or an instance role)."""
    from pyarrow import fs

    kw: dict[str, Any] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kw["endpoint_override"] = parts.netloc
        kw["scheme"] = parts.scheme
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kw["region"] = region
    return fs.S3FileSystem(**kw)


def kind_datasets(location: str | os.PathLike[str]) -> dict[str, Any]:
    """One ``pyarrow.dataset.Dataset`` per kind of the dataset rooted at ``location``: a folder
    that holds ``kind=<kind>/`` folders, or ``s3://bucket/prefix`` (its ``dataset/``). A kind with
    no file is an empty dataset with the kind's columns."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    from pyarrow import fs

    from labledger.store.dataset import arrow_schema

    text = str(location)
    if text.startswith("s3://"):
        from labledger.store.objects import parse_s3_url

        bucket, prefix = parse_s3_url(text)
        filesystem = s3_filesystem()
        base = "/".join(p for p in (bucket, prefix, DATASET_DIR) if p)
    else:
        filesystem = fs.LocalFileSystem()
        base = os.path.abspath(text)
    out = {}
    for kind, spec in DATASET_KINDS.items():
        root = f"{base}/kind={kind}"
        try:
            infos = filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
        except OSError as exc:
            raise LedgerError(f"{text}: the dataset's {kind} cannot be listed ({exc})") from None
        paths = sorted(
            i.path
            for i in infos
            if i.type == fs.FileType.File and i.path.endswith(".parquet") and not i.base_name.startswith(".")
        )
        parts = pa.schema([(p, pa.string()) for p in spec.partitions])
        schema = pa.unify_schemas([arrow_schema(kind), parts])
        out[kind] = ds.dataset(
            paths,
            schema=schema,
            format="parquet",
            filesystem=filesystem,
            partitioning=ds.partitioning(parts, flavor="hive"),
            partition_base_dir=root,
        )
    return out


def run_query(sql: str, location: str | os.PathLike[str]) -> Answer:
    """Run ``sql`` with DuckDB over the dataset at ``location`` (see :func:`kind_datasets`).

    Raises :class:`SqlError` with DuckDB's one-line message for SQL that does
    not parse or does not run, and :class:`~labledger.errors.LedgerError` when duckdb is missing.

    >>> import tempfile, labledger
    >>> from labledger.store.dataset import refresh_local
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("r", ledger=d) as run:
    ...     run.log(1, loss=0.5)
    >>> book = labledger.open_ledger(d)
    >>> _ = refresh_local(book)
    >>> run_query("SELECT key, value FROM scalars", book.root / "dataset").rows
    [('loss', 0.5)]
    """
    try:
        import duckdb
    except ImportError:
        raise LedgerError(NEEDS_DUCKDB) from None
    views = kind_datasets(location)
    con = duckdb.connect()
    try:
        for kind, dataset in views.items():
            con.register(kind, dataset)
        try:
            cur = con.execute(sql)
            columns = [d[0] for d in cur.description or []]
            rows = cur.fetchall() if columns else []
        except duckdb.Error as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SqlError(f"query: {message}") from None
    finally:
        con.close()
    return Answer(columns, rows)


__all__ = ["NEEDS_DUCKDB", "Answer", "SqlError", "kind_datasets", "run_query", "s3_filesystem"]
