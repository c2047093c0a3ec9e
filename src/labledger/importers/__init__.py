"""Bring existing runs into a ledger: seed-style folders, reports, results files, TensorBoard, MLflow,
and the outputs of evaluation harnesses (lm-eval, inspect_ai, lighteval, HELM).

:func:`import_path` detects the format (or takes the one named), builds the runs in a staging
ledger through the ordinary :class:`labledger.Run` API (the same validation as logging), and adopts
them into the ledger in one transaction: a failure anywhere leaves the ledger as it was. The
source's content hash is recorded, so importing the same content again is refused unless
``again=True``. Originals are only read: referenced (path, sha256, size in the run's ``run.json``
under ``imported_from``) or copied into the run (``copy=True``).

>>> import json, tempfile, pathlib, labledger
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "results.jsonl").write_text(json.dumps(
...     {"id": "a", "task": "t", "gold": "yes", "probs": {"yes": 0.8, "no": 0.2}}) + "\\n")
>>> result = import_path(d / "results.jsonl", d / "ledger")
>>> result.format, [r.counts for r in result.runs]
('results', [{'results:results': 1}])
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from labledger.errors import ImportSourceError, UnknownNameError
from labledger.importers import seed_run
from labledger.importers.source import ImportedRun, ImportOptions, Source
from labledger.store.ledger import Ledger

#: Importer modules (of this package) by format name, in detection order; each is imported when
#: first needed, so an import of one format loads neither the others nor their libraries.
_MODULES = {
    "seed-run": "seed_run",
    "lm-eval": "lm_eval",
    "inspect": "inspect_log",
    "lighteval": "lighteval",
    "helm": "helm",
    "mlflow": "mlflow",
    "wandb": "wandb_offline",
    "trackio": "trackio",
    "aim": "aim",
    "tensorboard": "tensorboard",
    "report": "report",
    "results": "results",
}
FORMATS = tuple(_MODULES)


def importer(fmt: str) -> ModuleType:
    """The importer module of format ``fmt`` (one of :data:`FORMATS`).

    >>> importer("results").FORMAT
    'results'
    """
    return importlib.import_module(f"labledger.importers.{_MODULES[fmt]}")


@dataclass
class ImportResult:
    """What an import did: the source, its format and content hash, the runs it made."""

    source: str
    format: str
    sha256: str
    mode: str
    runs: list[ImportedRun] = field(default_factory=list)
    again: bool = False
    previous: dict[str, Any] | None = None

    @property
    def run_ids(self) -> list[str]:
        return [r.id for r in self.runs]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "format": self.format,
            "sha256": self.sha256,
            "mode": self.mode,
            "again": self.again,
            "previous": self.previous,
            "runs": [r.to_dict() for r in self.runs],
        }


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of ``path`` (see :data:`FORMATS`); raises :class:`ImportSourceError` when none fits.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "batches.jsonl").write_text("")
    >>> detect_format(d)
    'seed-run'
    """
    p = Path(path)
    if not p.exists():
        raise ImportSourceError(f"{p}: no such file or folder")
    if p.is_file() and p.name in seed_run.FOLDER_FILES:
        raise ImportSourceError(f"{p}: {p.name} is part of a run folder; import the folder that holds it ({p.parent})")
    for name in FORMATS:
        if importer(name).detect(p):
            return name
    raise ImportSourceError(
        f"{p}: cannot tell its format. Known: a seed-004 run folder (batches.jsonl, training_history.json, "
        "full_test/images.jsonl), a seed-000 report (.json with threshold_trials, paired_test, "
        "checkpoint_sha256...), a results .jsonl, TensorBoard event files (*tfevents*), an MLflow store "
        "(mlflow.db or mlruns/), lm-eval output (results_<ts>.json + samples_*.jsonl), an inspect_ai log "
        "(.eval or .json), lighteval output (results_<ts>.json + details/*.parquet), a HELM run folder "
        "(run_spec.json, scenario_state.json, per_instance_stats.json), W&B offline runs (run-*.wandb), a Trackio "
        "project (<project>.db, or its TRACKIO_DIR), an Aim "
        "repository (a folder holding .aim/). "
        "Name one with --format."
    )


def import_path(
    path: str | os.PathLike[str],
    ledger: Ledger | str | os.PathLike[str],
    *,
    fmt: str = "auto",
    name: str | None = None,
    group: str | None = None,
    copy: bool = False,
    again: bool = False,
    tags: tuple[str, ...] = (),
    partial: bool = False,
    salvage: bool = False,
) -> ImportResult:
    """Import ``path`` into ``ledger`` (created if missing) as one transaction; see the module docs.

    ``fmt`` is ``auto`` or one of :data:`FORMATS`. Raises :class:`ImportSourceError` when the same
    content was imported before (unless ``again``), and :class:`labledger.errors.RecordError`
    (file, line, field) when a record is invalid; the ledger is unchanged then. ``partial``
    imports a harness task whose file holds fewer documents than the harness states it evaluated
    (a truncated lm-eval samples file), with a note, instead of leaving it out with an error.
    A damaged W&B run file (a record checksum that fails, a broken chunk) is refused naming the
    file and byte offset; ``salvage`` imports it up to the damage, with a note (one cut short
    inside its last record, as a killed writer leaves it, is imported up to there with a note).
    """
    src_path = Path(path)
    if not src_path.exists():
        raise ImportSourceError(f"{src_path}: no such file or folder")
    if fmt == "auto":
        fmt = detect_format(src_path)
    elif fmt not in _MODULES:
        raise UnknownNameError("import format", fmt, (*FORMATS, "auto"))
    module = importer(fmt)
    if fmt == seed_run.FORMAT and not module.detect(src_path):
        raise ImportSourceError(
            f"{src_path}: not a seed-004 run folder (no batches.jsonl, "
            "training_history.json, history.jsonl, metrics.jsonl or full_test/images.jsonl)"
        )
    source: Source = module.make_source(src_path)
    digest = source.sha256()
    owns = not isinstance(ledger, Ledger)
    book = ledger if isinstance(ledger, Ledger) else Ledger(ledger, create=True)
    try:
        previous = book.previous_import(digest)
        if previous is not None and not again:
            import datetime as dt

            when = dt.datetime.fromtimestamp(previous["created"]).strftime("%Y-%m-%d %H:%M:%S")
            raise ImportSourceError(
                f"{source.path}: the same content (sha256 {digest[:12]}...) was imported on {when} from "
                f"{previous['source']} as run {previous['run_id']} ({previous['format']}); pass --again "
                "(again=True) to import it once more"
            )
        opts = ImportOptions(name=name, group=group, copy=copy, tags=tuple(tags), partial=partial, salvage=salvage)
        with book.staging() as stage:
            runs = module.load(source, stage, opts)
            if not runs:
                raise ImportSourceError(f"{source.path}: nothing to import ({fmt} source without runs)")
            book.adopt(stage, source=str(source.path), sha256=digest, fmt=fmt)
        return ImportResult(
            source=str(source.path),
            format=fmt,
            sha256=digest,
            mode="copy" if copy else "reference",
            runs=runs,
            again=previous is not None,
            previous=previous,
        )
    finally:
        if owns:
            book.close()


__all__ = ["FORMATS", "ImportResult", "ImportedRun", "detect_format", "import_path", "importer"]
