"""Read-only access to one run's records: lazy iterators, Arrow tables and pandas DataFrames."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labledger import accelerators
from labledger.errors import LedgerError, UnknownNameError
from labledger.schema import STORED_KINDS, decode
from labledger.store.compressed import record_exists
from labledger.store.counters import TAIL_LIMIT, Counters, bring_up_to_date, scan_run, tail_bytes
from labledger.store.flat import records_to_table, sample_records
from labledger.store.jsonl import RECORD_FILES, count_lines, read_json, read_jsonl

if TYPE_CHECKING:
    import pyarrow as pa

    from labledger.store.ledger import Ledger, RunInfo

#: Record kinds a run has only when it logged them (counted only then).
OPTIONAL_RECORDS = frozenset({"system", "media"})
#: What ``table()``/``export`` can produce.
TABLE_KINDS = ("scalars", "batches", "samples", "history", "checkpoints", "notes", "system", "media", "results")


class RunView:
    """A run in the ledger, read lazily from its folder.

    A run whose folder is gone (removed by hand) raises
    :class:`~labledger.store.trash.RunFolderGoneError` here, one line naming the run and the repair.

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("r", ledger=d) as run:
    ...     run.log(1, loss=0.5)
    >>> view = labledger.open_ledger(d).run(run.id)
    >>> [r["loss"] for r in view.scalars()]
    [0.5]
    """

    def __init__(self, ledger: Ledger, info: RunInfo) -> None:
        self.ledger = ledger
        self.info = info
        self.id = info.id
        self.dir: Path = ledger.run_dir(info.id)
        if not self.dir.is_dir():  # removed by hand: one line naming the run and the repair, no traceback
            from labledger.store.trash import gone_error

            gone = gone_error(ledger, info.id)
            if gone is not None:
                raise gone

    def __repr__(self) -> str:
        return f"<RunView {self.id} {self.name!r} {self.status}>"

    def _repr_html_(self) -> str:
        """Notebook display: meta, headline values, config and inline SVG curves (:mod:`.html`)."""
        from labledger.store.html import run_html

        return run_html(self)

    # -- metadata -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.info.name

    @property
    def group(self) -> str | None:
        return self.info.group

    @property
    def tags(self) -> list[str]:
        return self.info.tags

    @property
    def status(self) -> str:
        return self.info.status

    @property
    def meta(self) -> dict[str, Any]:
        """``run.json`` with the index's status (which knows about crashes)."""
        meta: dict[str, Any] = read_json(self.dir / "run.json")
        meta["status"] = self.info.status
        if self.info.ended is not None:
            meta["ended"] = self.info.ended
        if self.info.error:
            meta["error"] = self.info.error
        return meta

    @property
    def config(self) -> dict[str, Any]:
        path = self.dir / "config.json"
        return read_json(path) if path.exists() else {}

    @property
    def summary(self) -> dict[str, Any]:
        return self.info.summary

    def _file(self, name: str) -> Path:
        return self.dir / name

    def _display(self, name: str) -> str:
        return str(self.dir / name)

    # -- records --------------------------------------------------------------------------------
    def scalars(self) -> Iterator[dict[str, Any]]:
        """Per-step scalar records (``step``, ``time`` and the logged values)."""
        for rec in read_jsonl(self._file(RECORD_FILES["scalars"])):
            yield {k: (math.nan if v is None and k not in ("step", "time") else v) for k, v in rec.items()}

    def batches(self) -> Iterator[dict[str, Any]]:
        """Microbatch records, each with its samples, exactly as logged."""
        return read_jsonl(self._file(RECORD_FILES["batches"]))

    def history(self) -> Iterator[dict[str, Any]]:
        """Trainer logging-interval entries."""
        return read_jsonl(self._file(RECORD_FILES["history"]))

    def checkpoints(self) -> Iterator[dict[str, Any]]:
        """Checkpoint records; a copied checkpoint's relative ``path`` is resolved in the run folder."""
        for rec in read_jsonl(self._file(RECORD_FILES["checkpoints"])):
            path = rec.get("path")
            if rec.get("copied") and path and not Path(path).is_absolute():
                rec["path"] = str(self.dir / path)
            yield rec

    def display_path(self, path: str) -> str:
        """``path`` relative to the run folder when it lies inside it (what ``show`` and the site print:
        no machine path for a file the run holds), else as recorded.

        >>> import tempfile, labledger
        >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
        ...     pass
        >>> view = labledger.open_ledger(run.dir.parent.parent).run(run.id)
        >>> view.display_path(str(view.dir.resolve() / "checkpoints" / "a.pt")), view.display_path("/elsewhere/b.pt")
        ('checkpoints/a.pt', '/elsewhere/b.pt')
        """
        root = str(self.dir.resolve()) + "/"
        return path[len(root) :] if path.startswith(root) else path

    def verified_checkpoints(self) -> Iterator[dict[str, Any]]:
        """Checkpoint records, each with ``state``: the file re-hashed against the recorded sha256.

        ``ok`` (same bytes), ``changed`` (a sha256 mismatch: ``found_sha256`` says what the file
        holds now), ``missing`` (no file at the path) or ``reference`` (recorded by its hash only).
        A file is hashed once per process while its size and modification time stay the same.

        >>> import tempfile, pathlib, labledger
        >>> ck = pathlib.Path(tempfile.mkdtemp()) / "m.pt"; _ = ck.write_bytes(b"v1")
        >>> d = tempfile.mkdtemp()
        >>> with labledger.start_run("r", ledger=d) as run:
        ...     _ = run.log_checkpoint(ck, copy=False)
        >>> _ = ck.write_bytes(b"v2")
        >>> [c["state"] for c in labledger.open_ledger(d).run(run.id).verified_checkpoints()]
        ['changed']
        """
        for rec in self.checkpoints():
            rec.update(checkpoint_state(rec))
            yield rec

    def notes(self) -> Iterator[dict[str, Any]]:
        return read_jsonl(self._file(RECORD_FILES["notes"]))

    def results_names(self) -> list[str]:
        """Names of the result sets stored in the run."""
        evals = self.dir / "evals"
        if not evals.is_dir():
            return []
        return sorted(p.name for p in evals.iterdir() if (p / "results.jsonl").exists())

    def results_path(self, name: str) -> Path:
        """Path of a stored ``results.jsonl`` (raises naming the known ones)."""
        path = self.dir / "evals" / name / "results.jsonl"
        if not path.exists():
            raise UnknownNameError(f"result set of run {self.id}", name, self.results_names())
        return path

    def results(self, name: str) -> Iterator[dict[str, Any]]:
        """Stored result rows of ``name``, exactly as stored."""
        return read_jsonl(self.results_path(name))

    def evaluation(self, name: str, kind: str = "evaluation") -> Any:
        """A stored document (see :meth:`Ledger.save_evaluation`): for the kinds of
        :data:`~labledger.schema.STORED_KINDS` the typed document, decoded and version-checked (an older
        one migrated, a newer one refused naming the file); for other kinds (``recipe``) the dict."""
        path = self.dir / "evals" / name / f"{kind}.json"
        if not path.exists():
            known = [p.parent.name for p in (self.dir / "evals").glob(f"*/{kind}.json")]
            raise UnknownNameError(f"{kind} of run {self.id}", name, known)
        if kind in STORED_KINDS:
            return decode(path.read_bytes(), kind=kind, source=str(path))
        return read_json(path)

    def files(self) -> list[str]:
        """Relative paths of files stored with :meth:`Run.log_file`."""
        root = self.dir / "files"
        if not root.is_dir():
            return []
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    def file_path(self, name: str) -> Path:
        return self.dir / "files" / name

    def counters(self) -> Counters:
        """The run's counters (:mod:`labledger.store.counters`): records of each kind, steps, last
        values, first/last time, without scanning the run's files.

        They come from the index and are brought up to date by reading what was appended since
        they were taken (a running run's last second or so), so they are exact. A run without
        counters (an older version's, or one that died before its first refresh), or whose files
        were rewritten, is scanned once; the result is kept in the index when the run no longer
        logs. A running run that logged more than ``TAIL_LIMIT`` bytes since its last refresh is
        shown as that refresh left it (at most ``Run.index_interval`` seconds old).

        >>> import tempfile, labledger
        >>> d = tempfile.mkdtemp()
        >>> with labledger.start_run("r", ledger=d) as run:
        ...     run.log(1, loss=0.5); run.log(2, loss=0.25)
        >>> c = labledger.open_ledger(d).run(run.id).counters()
        >>> c.records["scalars"], c.steps, c.last["loss"]
        (2, 2, [0.25, 2])
        """
        running = self.info.status == "running"
        stored = self.ledger.run_counters(self.id)
        if stored is not None:
            pending = tail_bytes(stored, self.dir)
            if pending == 0:
                return stored
            if pending is not None and pending <= TAIL_LIMIT:
                fresh = bring_up_to_date(stored, self.dir)
                if fresh is not None:
                    if not running and self.ledger.reap_on_read:
                        self.ledger.store_counters(self.id, fresh)
                    return fresh
            elif pending is not None and running:
                return stored
        scanned = scan_run(self.dir)
        if not running and self.ledger.reap_on_read:  # a server's GETs change nothing (#17)
            self.ledger.store_counters(self.id, scanned)
        return scanned

    def counts(self, counters: Counters | None = None) -> dict[str, int]:
        """Number of records of each kind, from :meth:`counters` (exact even after a crash).

        The optional kinds (``system`` samples, ``media`` of wandb-style runs) are counted only when
        the run has them, so a run without them shows exactly the counts it always did. A result
        set's rows come from the index (the count its validation stored), else from its file.
        ``counters``: from :meth:`counters`, when the caller has them already.
        """
        records = (counters or self.counters()).records
        out = {
            kind: records.get(kind, 0)
            for kind, fname in RECORD_FILES.items()
            if kind not in OPTIONAL_RECORDS or kind in records or record_exists(self._file(fname))
        }
        names = self.results_names()
        if names:
            stored = self.ledger.results_rows(self.id)
            for name in names:
                n = stored.get(name)
                out[f"results:{name}"] = n if n is not None else count_lines(self.results_path(name))
        return out

    def last_scalars(self, counters: Counters | None = None) -> dict[str, Any]:
        """The last value logged for each scalar key, with its step (from :meth:`counters`)."""
        return (counters or self.counters()).last_scalars()

    # -- tables ---------------------------------------------------------------------------------
    def records(self, what: str) -> Iterator[dict[str, Any]]:
        """Records of kind ``what`` (``scalars``, ``batches``, ``samples``, ``history``,
        ``checkpoints``, ``notes``, ``system``, ``media``, ``results:<name>``), as dicts."""
        kind, _, arg = what.partition(":")
        if kind == "scalars":
            return self.scalars()
        if kind == "batches":
            return self.batches()
        if kind == "samples":
            return sample_records(self.batches())
        if kind == "history":
            return self.history()
        if kind == "checkpoints":
            return self.checkpoints()
        if kind == "notes":
            return self.notes()
        if kind in ("system", "media"):  # system metrics; labledger.wandb media references
            return read_jsonl(self._file(RECORD_FILES[kind]))
        if kind == "results":
            names = self.results_names()
            if not arg:
                if len(names) != 1:
                    raise LedgerError(f"run {self.id} has result sets {names}; say which: results:<name>")
                arg = names[0]
            return self.results(arg)
        raise UnknownNameError("record kind", what, TABLE_KINDS)

    def table(self, what: str) -> pa.Table:
        """An Arrow table of records of kind ``what`` (see :meth:`records`).

        Nested values (sample inputs, probability maps, samples of a batch) are flattened where
        they are flat mappings of numbers (``probabilities.<label>``) and kept as JSON text otherwise.

        ``samples`` is built with Arrow kernels from the file itself when its records allow it;
        the table of a large record file (>= 4 MiB) of a run that is not running is kept in the
        columnar cache (:mod:`labledger.inputs.columnar`) and read from there while the file is
        unchanged.
        """
        kind = what.partition(":")[0]
        source = None
        if kind in ("scalars", "batches", "history", "notes", "system", "media"):
            source = self._file(RECORD_FILES[kind])
        elif kind == "samples":
            source = self._file(RECORD_FILES["batches"])
        if source is None:
            return records_to_table(self.records(what))
        from labledger.store.record_columns import file_table, samples_table

        return file_table(
            source,
            f"table-{kind}",
            lambda: records_to_table(self.records(what)),
            fast=samples_table if kind == "samples" and accelerators.enabled() else None,
            cache=self.status != "running",
        )

    def cached_parquet(self, what: str) -> Path | None:
        """The columnar cache's zstd Parquet of :meth:`table` ``(what)`` when it is there and matches
        the run's file now (``export --format parquet`` copies it), else ``None``.

        >>> import tempfile, labledger
        >>> d = tempfile.mkdtemp()
        >>> with labledger.start_run("r", ledger=d) as run:
        ...     run.log(step=1, loss=0.5)
        >>> labledger.open_ledger(d).run(run.id).cached_parquet("scalars") is None  # small files: no entry
        True
        """
        from labledger.inputs.columnar import fresh_entry
        from labledger.store.compressed import record_key

        kind = what.partition(":")[0]
        name = RECORD_FILES["batches"] if kind == "samples" else RECORD_FILES.get(kind)
        if name is None or kind in ("checkpoints",):
            return None
        key = record_key(self._file(name))  # of the JSONL, in either form
        if key is None:
            return None
        return fresh_entry(self._file(name), f"table-{kind}", key=key)

    def dataframe(self, what: str) -> Any:
        """A pandas DataFrame of records of kind ``what``: :meth:`table` as pandas.

        Needs pandas (``pip install 'labledger[pandas]'``; in ``[dev]`` and ``[all]`` too); without
        it, a :class:`~labledger.errors.LedgerError` says so.
        """
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise LedgerError(
                "RunView.dataframe() needs pandas, which is not installed: pip install 'labledger[pandas]' "
                "(or use RunView.table(), a pyarrow.Table, which needs nothing more)"
            ) from None
        return self.table(what).to_pandas()


_HASHES: dict[tuple[str, int, int], str] = {}


def checkpoint_state(rec: dict[str, Any]) -> dict[str, Any]:
    """``{"state": ok|changed|missing|reference}`` for one checkpoint record (with ``found_sha256``
    when changed); see :meth:`RunView.verified_checkpoints`.

    >>> checkpoint_state({"path": "/nonexistent/x.pt", "sha256": "ab" * 32})
    {'state': 'missing'}
    """
    if rec.get("reference"):
        return {"state": "reference"}
    path = rec.get("path")
    if not isinstance(path, str):
        return {"state": "missing"}
    try:
        st = Path(path).stat()
    except OSError:
        return {"state": "missing"}
    key = (path, st.st_size, st.st_mtime_ns)
    found = _HASHES.get(key)
    if found is None:
        from labledger.store.manifest import sha256_file

        try:
            found = sha256_file(path)[0]
        except OSError:
            return {"state": "missing"}
        _HASHES[key] = found
    if found == rec.get("sha256"):
        return {"state": "ok"}
    return {"state": "changed", "found_sha256": found}
