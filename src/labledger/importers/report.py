"""Import a threshold-selection report shaped like seed 000 as a run.

Every top-level field is accounted for (the import returns the mapping, and stores it in
``run.json`` under ``imported_from.fields``):

| field | becomes |
|---|---|
| ``experiment`` | the run's name (unless ``--name``) and ``config.experiment`` |
| ``generated_at`` | the run's start and end time (the report says when it was written, not when training started) and ``config.generated_at`` |
| ``history`` (a list of per-epoch objects) | history entries, verbatim, in order |
| ``selected`` | the report document; its ``epoch`` also becomes ``config.selected_epoch`` (so the site marks that epoch) |
| ``threshold_trials``, ``threshold_selection``, ``paired_test``, ``non_regression`` | the report document ``evals/report/report.json``; their numbers are indexed as metric values (``split`` and ``threshold`` in the params) |
| ``non_regression`` | also a note |
| ``checkpoint`` + ``checkpoint_sha256`` | a checkpoint record: the file hashed when it is present (a different hash is said in a note), else recorded by the stated hash (:meth:`Run.log_checkpoint_reference`) |
| ``interpretation_limit`` | a note (``Interpretation limit: ...``) |
| ``product_validation`` | ``config.product_validation`` and a note |
| any other scalar (``device``, ``track``, model versions, sample counts, ...) | ``config`` |
| any other list or object | the report document |

The report document is the whole original report, verbatim, with two keys added beside it:
``tasks`` (the indexed metric values, unless the report has its own) and ``imported_from``.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path, PureWindowsPath
from typing import Any

import orjson

from labledger.errors import RecordError
from labledger.importers.source import (
    ImportedRun,
    ImportOptions,
    Source,
    file_times,
    finish_import,
    is_number,
    load_json,
    new_run,
)
from labledger.store.ledger import Ledger
from labledger.store.manifest import sha256_file

FORMAT = "report"
#: Name (and kind) of the stored report document.
DOCUMENT = "report"
#: Fields that mark a JSON object as a seed-000 report.
MARKERS = ("threshold_trials", "threshold_selection", "paired_test", "checkpoint_sha256", "non_regression")
#: Report sections whose numbers are indexed, with the split they were measured on.
SECTIONS = {"threshold_selection": "validation", "selected": "validation", "paired_test": "test"}
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


def detect(path: Path) -> bool:
    """A ``.json`` file holding an object with at least one seed-000 report field."""
    if not (path.is_file() and path.suffix.lower() == ".json"):
        return False
    try:
        doc = load_json(path)
    except Exception:  # noqa: BLE001 - detection only; the import reports the error
        return False
    return isinstance(doc, dict) and any(k in doc for k in MARKERS)


def make_source(path: Path) -> Source:
    return Source(path, FORMAT)


def _check(report: Any, path: Path) -> None:
    src = str(path)
    if not isinstance(report, dict):
        raise RecordError(f"a report must be a JSON object; got {type(report).__name__}", source=src)
    history = report.get("history")
    if history is not None:
        if not isinstance(history, list):
            raise RecordError(
                f"must be a list of per-epoch objects; got {type(history).__name__}", source=src, field="history"
            )
        for i, e in enumerate(history):
            if not isinstance(e, dict):
                raise RecordError(f"must be an object; got {type(e).__name__}", source=src, field=f"history[{i}]")
    trials = report.get("threshold_trials")
    if trials is not None:
        if not isinstance(trials, list):
            raise RecordError(
                f"must be a list of trials; got {type(trials).__name__}", source=src, field="threshold_trials"
            )
        for i, t in enumerate(trials):
            if not isinstance(t, dict):
                raise RecordError(
                    f"must be an object; got {type(t).__name__}", source=src, field=f"threshold_trials[{i}]"
                )
            if not is_number(t.get("threshold")):
                raise RecordError(
                    f"must be a number; got {t.get('threshold')!r}",
                    source=src,
                    field=f"threshold_trials[{i}].threshold",
                )
    for key in (*SECTIONS, "non_regression"):
        v = report.get(key)
        if v is not None and not isinstance(v, dict):
            raise RecordError(f"must be an object; got {type(v).__name__}", source=src, field=key)
    sha = report.get("checkpoint_sha256")
    if sha is not None and (not isinstance(sha, str) or not _HEX64.match(sha)):
        raise RecordError(f"must be 64 hexadecimal digits; got {sha!r}", source=src, field="checkpoint_sha256")
    ckpt = report.get("checkpoint")
    if ckpt is not None and not isinstance(ckpt, str):
        raise RecordError(f"must be a path; got {type(ckpt).__name__}", source=src, field="checkpoint")
    if "generated_at" in report:
        _parse_time(report["generated_at"], src)


def _parse_time(value: Any, src: str) -> float:
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if t.tzinfo is None:
                t = t.replace(tzinfo=dt.UTC)
            return t.timestamp()
    raise RecordError(f"must be an ISO 8601 time or unix seconds; got {value!r}", source=src, field="generated_at")


def _metric_entries(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Indexable metric values of the report's sections (numbers only; booleans stay in the document)."""
    n_val = report.get("validation_samples")
    out = []
    for section, split in SECTIONS.items():
        body = report.get(section)
        if not isinstance(body, dict):
            continue
        params: dict[str, Any] = {"section": section, "split": split}
        for key in ("threshold", "epoch"):
            if is_number(body.get(key)):
                params[key] = body[key]
        for key, value in body.items():
            if key in ("threshold", "epoch") or not is_number(value):
                continue
            entry = {
                "metric": key,
                "params": params,
                "value": value,
                "definition": f"as stated by the imported report ({section}.{key})",
            }
            if split == "validation" and is_number(n_val):
                entry["n"] = int(n_val)
            out.append(entry)
    return out


def _resolve_checkpoint(stated: str, report_dir: Path) -> Path | None:
    """The checkpoint file if it exists: as written, relative to the report, Windows separators too."""
    candidates = [Path(stated), Path(stated.replace("\\", "/"))]
    if "\\" in stated:
        candidates.append(Path(*PureWindowsPath(stated).parts))
    for c in list(candidates):
        if not c.is_absolute():
            candidates.append(report_dir / c)
    return next((c for c in candidates if c.is_file()), None)


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """Build one run from the report (see the module docstring)."""
    path = source.path
    src = str(path)
    report = load_json(path)
    _check(report, path)
    fields: dict[str, str] = {}
    config: dict[str, Any] = {}
    notes: list[str] = []
    document_keys: list[str] = []
    for key, value in report.items():
        if key == "history":
            fields[key] = f"history ({len(value)} entries, verbatim)"
        elif key in ("checkpoint", "checkpoint_sha256"):
            fields[key] = "checkpoint record"
        elif key == "interpretation_limit":
            fields[key] = "note"
            notes.append(f"Interpretation limit: {value}")
        elif isinstance(value, (dict, list)):
            document_keys.append(key)
            fields[key] = f"evaluation document evals/{DOCUMENT}/{DOCUMENT}.json"
        else:
            config[key] = value
            fields[key] = "config"
    if "product_validation" in report:
        fields["product_validation"] = "config and note"
        stated = orjson.dumps(report["product_validation"]).decode()
        notes.append(f"product_validation: {stated} (as the report states it)")
    non_reg = report.get("non_regression")
    if isinstance(non_reg, dict):
        fields["non_regression"] += " and note"
        notes.append("Non-regression (as the report states it): " + ", ".join(f"{k} = {v}" for k, v in non_reg.items()))
    selected = report.get("selected")
    if isinstance(selected, dict) and "epoch" in selected:
        config["selected_epoch"] = selected["epoch"]
        fields["selected"] += "; its epoch -> config.selected_epoch"
    if "experiment" in report:
        fields["experiment"] = "run name (unless --name) and config"
    if "generated_at" in report:
        fields["generated_at"] = "the run's start and end time, and config"
        started: float | None = _parse_time(report["generated_at"], src)
        ended: float | None = started
        times_from = "generated_at (when the report was written; training start unknown)"
    else:
        started, ended = file_times([path])
        times_from = "the report file's modification time (it has no generated_at)"
    name = opts.name or (str(report["experiment"]) if report.get("experiment") else path.stem)
    run = new_run(stage, name, source=source, opts=opts, config=config, started=started, times_from=times_from)
    counts: dict[str, int] = {}
    with run:
        for entry in report.get("history") or ():
            run.log_history(entry)
        counts["history"] = len(report.get("history") or ())
        checkpoint = _log_checkpoint(run, report, path, notes)
        if checkpoint:
            counts["checkpoints"] = 1
        if document_keys:
            document = dict(report)
            if "tasks" not in document:
                task = str(report.get("task") or "report")
                document["tasks"] = {task: {"metrics": _metric_entries(report)}}
            document["imported_from"] = {"source": src, "sha256": source.sha256(), "format": FORMAT}
            stage.save_evaluation(run.id, DOCUMENT, document, kind=DOCUMENT)
            counts["evaluations"] = 1
        if opts.copy:
            source.copy_into(run)
        for text in notes:
            run.note(text)
        counts["notes"] = len(notes)
        finish_import(run, fields, ended=ended)
    return [ImportedRun(run.id, run.name, run.group, counts, fields, notes)]


def _log_checkpoint(run, report: dict[str, Any], path: Path, notes: list[str]) -> dict[str, Any] | None:
    stated = report.get("checkpoint")
    sha = report.get("checkpoint_sha256")
    if stated is None and sha is None:
        return None
    if sha is None:
        found = _resolve_checkpoint(str(stated), path.parent)
        if found is None:
            notes.append(
                f"Checkpoint {stated} is named without a sha256 and is not on this machine: "
                "not recorded as a checkpoint."
            )
            return None
        return run.log_checkpoint(found, copy=False)
    sha = sha.lower()
    found = _resolve_checkpoint(stated, path.parent) if stated else None
    if found is not None:
        digest, _ = sha256_file(found)
        if digest == sha:
            return run.log_checkpoint(found, copy=False)
        notes.append(
            f"Checkpoint {stated}: the file now at {found} has sha256 {digest}, not the "
            f"report's {sha}; it is not the checkpoint the report describes. The report's "
            "checkpoint is recorded by its stated hash."
        )
    return run.log_checkpoint_reference(stated or "(unnamed)", sha)
