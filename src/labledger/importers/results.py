"""Import a ``results.jsonl`` (one row per evaluated item) as a run holding it as a stored result set.

The rows are validated as :meth:`labledger.Run.log_results` validates them (a bad row fails naming
the file, the line and the field) and stored byte for byte under ``evals/<name>/results.jsonl``,
where ``labledger eval``, ``sweep`` and the site find them. The result set is named after the file
(``results.jsonl`` -> ``results``); the run after ``--name``, else the folder that holds the file
when the file is called ``results*.jsonl``, else the file's stem.
"""

from __future__ import annotations

from pathlib import Path

from labledger.errors import RecordError
from labledger.importers.source import (
    ImportedRun,
    ImportOptions,
    Source,
    file_times,
    finish_import,
    log_results_file,
    new_run,
    safe_relpath,
)
from labledger.store.ledger import Ledger

FORMAT = "results"


def detect(path: Path) -> bool:
    """A ``.jsonl`` file."""
    return path.is_file() and path.suffix.lower() == ".jsonl"


def make_source(path: Path) -> Source:
    return Source(path, FORMAT)


def result_set_name(path: Path) -> str:
    """The stored result set's name: the file's stem, made safe (``results.jsonl`` -> ``results``)."""
    name = safe_relpath(path.stem).replace("/", "_").lstrip("._-") or "results"
    return name[:128]


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    path = source.path
    if not path.read_bytes().strip():
        raise RecordError("holds no result rows (the file is empty)", source=str(path))
    set_name = result_set_name(path)
    default = path.parent.name if path.stem.startswith("results") and path.parent.name else path.stem
    started, ended = file_times([path])
    run = new_run(
        stage,
        opts.name or default,
        source=source,
        opts=opts,
        config={},
        started=started,
        times_from="the file's modification time (a results file records no run times)",
    )
    with run:
        n = log_results_file(run, set_name, path)
        if opts.copy:
            source.copy_into(run)
        fields = {source.rel(path): f"result set '{set_name}' ({n} rows, stored byte for byte)"}
        finish_import(run, fields, ended=ended)
    return [ImportedRun(run.id, run.name, run.group, {f"results:{set_name}": n}, fields, [])]
