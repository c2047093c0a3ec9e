"""Import W&B offline runs: ``wandb/offline-run-*/run-*.wandb`` and the files beside them.

Each ``run-*.wandb`` file is one run, read by :func:`labledger.wandb.records.read_wandb_file` (W&B's
own protobuf classes; the ``wandb`` package is required). The run keeps W&B's display name (else
its id), project (as the group, unless the W&B group is set), tags, notes and config. Every history
row becomes one scalar record: ``step`` is ``_step``, ``time`` is ``_timestamp``, the numbers keyed
as W&B keys them (nested keys joined with ``.``). Images and tables that the row references and
that exist under the run's ``files/`` are stored in the run: images under ``files/media/``, tables
as a JSONL record file under ``files/tables/<key>/<step>.jsonl``. Numeric summary values are the
run's headline values. Other values (histograms, strings) are counted in a note.

What the file proves of the run's end is its status: W&B's exit record with code 0 is
``finished``, with another code ``failed``; a file without an exit record (its process was killed
or crashed before ``wandb.finish``, or is still writing) is ``killed``, with an error and a note
saying the source has no end record, as W&B's own app shows such a run as crashed, not finished.

Every record is verified (:mod:`labledger.wandb.records`: each chunk's CRC-32, the framing, the
protobuf and JSON values). A damaged file (a changed byte, a broken chunk) is refused with one line
naming the file and byte offset, and nothing is imported; with ``ImportOptions.salvage``
(``labledger import --salvage``) the records before the damage are imported and the run gets a
note naming the file, the byte and what was left out. A file that ends inside a record (a writer
killed mid-log: wandb-core writes whole 32 KiB blocks, so its last record is often cut) is
imported up to there with a note saying it is truncated, as wandb's own reader ends there.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from labledger.errors import ImportSourceError
from labledger.importers.source import (
    ImportedRun,
    ImportOptions,
    Source,
    finish_import,
    inside,
    is_number,
    new_run,
    record_name,
    scalar_notes,
    walk_files,
)
from labledger.store.ledger import Ledger

FORMAT = "wandb"


def _is_run_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".wandb" and path.name.startswith("run-")


def detect(path: Path) -> bool:
    """A ``run-*.wandb`` file, or a folder with one anywhere under it."""
    if path.is_file():
        return _is_run_file(path)
    return path.is_dir() and any(True for _ in path.rglob("run-*.wandb"))


def make_source(path: Path) -> Source:
    files = [path] if path.is_file() else [p for p in walk_files(path) if _is_run_file(p)]
    if not files:
        raise ImportSourceError(f"{path}: no W&B run files (wandb/offline-run-*/run-*.wandb)")
    # W&B links logs/debug-core.log to ~/.cache/wandb: only the run files (inside the folder, as
    # walk_files keeps them) and the media files they name (checked in _media_file) are read.
    return Source(path, FORMAT, sorted(files), follow_symlinks=True)


def _media_file(run_dir: Path, value: dict[str, Any]) -> Path | None:
    rel = value.get("path")
    if not isinstance(rel, str) or ".." in Path(rel).parts:
        return None
    candidate = run_dir / "files" / rel
    return candidate if candidate.is_file() and inside(candidate, run_dir) else None


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One run per ``run-*.wandb`` file (see the module docstring)."""
    from labledger.wandb._run import safe_name
    from labledger.wandb.records import WandbFileDamage, read_wandb_file

    out = []
    for f in source.files:
        try:
            data = read_wandb_file(f, salvage=opts.salvage)
        except WandbFileDamage as exc:
            raise ImportSourceError(
                f"{exc}; nothing imported (--salvage imports the {exc.records} record(s) before byte "
                f"{exc.offset}, with a note on the run)"
            ) from None
        info = data.run
        project = info.get("project") or None
        name = opts.name or info.get("name") or info.get("id") or f.stem
        run = new_run(
            stage,
            name,
            source=source,
            opts=opts,
            config=data.config,
            started=info.get("start_time"),
            group=info.get("group") or project,
            tags=info.get("tags") or (),
            files=[f],
            meta={"wandb": {k: info.get(k) for k in ("id", "project", "entity", "job_type") if info.get(k)}},
            times_from="W&B's _timestamp of each history row",
        )
        skipped: Counter[str] = Counter()
        renamed: dict[str, str] = {}
        notes: list[str] = []
        n_records = n_values = n_media = 0
        last_step: int | None = None
        last_time = info.get("start_time")
        with run:
            if info.get("notes"):
                run.note(info["notes"])
            for row in data.history:
                step = row.get("_step")
                if not isinstance(step, int):
                    skipped["rows without _step"] += 1
                    continue
                when = row.get("_timestamp")
                values: dict[str, Any] = {}
                for key, value in row.items():
                    if key.startswith("_"):
                        continue
                    if is_number(value) or value is None or isinstance(value, bool):
                        values[record_name(key, renamed)] = value
                        continue
                    kind = value.get("_type") if isinstance(value, dict) else type(value).__name__
                    media = _media_file(f.parent, value) if isinstance(value, dict) else None
                    if media is not None and kind == "image-file":
                        run.log_file(f"media/{safe_name(key)}/{step}-{media.name}", media)
                        n_media += 1
                    elif media is not None and kind == "table-file":
                        table = json.loads(media.read_text())
                        cols = [str(c) for c in table.get("columns", [])]
                        lines = "".join(
                            json.dumps(dict(zip(cols, r, strict=False))) + "\n" for r in table.get("data", [])
                        )
                        run.log_file(f"tables/{safe_name(key)}/{step}.jsonl", lines.encode())
                        n_media += 1
                    else:
                        skipped[str(kind)] += 1
                last_step = step
                if values:
                    kwargs = {"time": when} if isinstance(when, (int, float)) else {}
                    run.log(step, **kwargs, **values)
                    n_records += 1
                    n_values += len(values)
                if isinstance(when, (int, float)) and (last_time is None or when > last_time):
                    last_time = when
            headline = {
                k: v
                for k, v in data.summary.items()
                if not k.startswith("_") and is_number(v) and not isinstance(v, bool)
            }
            if headline:
                run.set_summary(**headline)
            notes += scalar_notes(skipped, renamed, kept="numbers, images and tables are", names="Keys")
            if opts.copy:
                source.copy_into(run, [f])
            held = f"{len(data.history)} history row(s)" + (
                f", the last at step {last_step}" if last_step is not None else ""
            )
            status, error = "finished", None
            if data.damage is not None:
                dmg = data.damage
                what = (
                    "Truncated file (its writer was stopped mid-write, or is still writing)"
                    if dmg.truncated
                    else "Salvaged from a damaged file"
                )
                notes.append(
                    f"{what}: {source.rel(f)}:{dmg.offset}: {dmg.reason}. Imported the "
                    f"{data.records} verified record(s) before that byte ({held}); the "
                    f"{f.stat().st_size - dmg.offset} byte(s) from there on are not imported."
                )
            if data.exit_code is None:
                status = "killed"
                if data.damage is not None:
                    how = "ends inside a record" if data.damage.truncated else "is damaged"
                    error = f"the W&B run file {how} at byte {data.damage.offset}: no exit record before it; it holds {held}"
                else:
                    error = (
                        "the W&B run file has no exit record: its process stopped before wandb.finish "
                        f"(killed or crashed) or is still running; it holds {held}"
                    )
                    notes.append(f"The source has no end record: {error}.")
            elif data.exit_code != 0:
                status, error = "failed", f"exit code {data.exit_code}"
            for text in notes:
                run.note(text)
            fields = {source.rel(f): f"history ({n_records} rows, {n_values} values, {n_media} media files)"}
            finish_import(run, fields, ended=last_time, status=status, error=error)
        out.append(
            ImportedRun(
                run.id,
                run.name,
                run.group,
                {"scalars": n_records, "values": n_values, "media": n_media, "notes": len(notes)},
                fields,
                notes,
            )
        )
    return out
