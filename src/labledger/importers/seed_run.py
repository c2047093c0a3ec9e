"""Import a run folder laid out as seed 004 describes (also the ledger's own record names).

| file | becomes |
|---|---|
| ``batches.jsonl`` | microbatch records (:meth:`Run.log_batch`: the same validation as logging) |
| ``training_history.json`` (a list, or an object with ``log_history``/``history``) or ``history.jsonl`` | history entries; the object's other keys go to ``config["training_history"]`` |
| ``metrics.jsonl`` (``step``, ``time``, scalars) | per-step scalars with their wall times |
| ``config.json`` | the run's config |
| ``run.json`` (a ledger run folder's meta) | name, group, tags, start and end, status and error, and where it ran (host, user, git...) |
| ``notes.jsonl`` (``{"text"}``), ``checkpoints.jsonl`` (``path``, ``sha256``, ``size``, ``step``, ``metrics``), ``evals/<name>/results.jsonl`` (the ledger's own names, as ``labledger export`` writes them) | notes; checkpoint records (the file hashed when it is there with the same sha256, else recorded by its hash); result sets |
| ``full_test/images.jsonl`` | the file ``full_test/images.jsonl`` and, when it has per-state probabilities, the result set ``full_test`` (one row per image x state, as the demo stores it) |
| ``full_test/summary.json`` (``cells[target][current]``) | the file ``full_test/summary.json``; its cells are checked and recomputed from ``images.jsonl`` (a note says whether they agree) |
| anything else | referenced (path, sha256, size) or, with ``--copy``, copied under ``files/source/`` |

A record that fails validation raises naming the file, the line and the field, and nothing is
imported. A batch record without ``time`` is stored with ``"time": null`` (the import does not
invent one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labledger.errors import RecordError
from labledger.importers.source import (
    ImportedRun,
    ImportOptions,
    Source,
    file_times,
    finish_import,
    is_number,
    load_json,
    load_jsonl,
    log_results_file,
    new_run,
    relocate,
)
from labledger.store.compressed import record_exists
from labledger.store.ledger import Ledger

FORMAT = "seed-run"
BATCHES = "batches.jsonl"
HISTORY_FILES = ("training_history.json", "history.jsonl")
METRICS = "metrics.jsonl"
NOTES = "notes.jsonl"
CHECKPOINTS = "checkpoints.jsonl"
CONFIG = "config.json"
META = "run.json"
#: Keys of a ledger ``run.json`` carried over to the imported run's meta.
META_KEYS = ("host", "user", "pid", "python", "platform", "argv", "cwd", "packages", "git")
IMAGES = "full_test/images.jsonl"
SUMMARY = "full_test/summary.json"
#: Result set that holds the full test's per-state rows (the demo's name).
RESULTS_NAME = "full_test"
#: The three actions of seed 004, by the sign of ``target - current``.
SIGN_ACTIONS = {-1: "-1", 0: "0", 1: "+1"}
_MARKERS = (BATCHES, *HISTORY_FILES, METRICS, IMAGES)
#: Files that only make sense inside a run folder (importing one alone is refused with a hint).
FOLDER_FILES = (BATCHES, *HISTORY_FILES, METRICS, NOTES, CHECKPOINTS)


def detect(path: Path) -> bool:
    """A folder with ``batches.jsonl``, ``training_history.json``/``history.jsonl``, ``metrics.jsonl``
    or ``full_test/images.jsonl``."""
    return path.is_dir() and any(record_exists(path / m) for m in _MARKERS)


def make_source(path: Path) -> Source:
    return Source(path, FORMAT)


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """Build one run in ``stage`` from the folder (see the module docstring)."""
    root = source.path
    fields: dict[str, str] = {}
    notes: list[str] = []
    config: dict[str, Any] = {}
    if (root / CONFIG).is_file():
        config = load_json(root / CONFIG)
        if not isinstance(config, dict):
            raise RecordError(f"must be a JSON object; got {type(config).__name__}", source=str(root / CONFIG))
        fields[CONFIG] = "config"
    history_path = next((root / h for h in HISTORY_FILES if record_exists(root / h)), None)
    history: list[tuple[int | None, dict[str, Any]]] = []
    if history_path is not None:
        history, extra = _read_history(history_path)
        if extra:
            config = {**config, "training_history": extra}
        fields[history_path.name] = f"history ({len(history)} entries)" + (
            "; its other keys -> config.training_history" if extra else ""
        )
    started, fallback_end, time_from = _times(root, source)
    ends: list[float] = []
    meta = _read_meta(root / META) if (root / META).is_file() else {}
    if meta:
        fields[META] = "name, group, tags, times, status and environment"
        if is_number(meta.get("started")):
            started, time_from = float(meta["started"]), f"{META}: started and ended"
        if is_number(meta.get("ended")):
            fallback_end = float(meta["ended"])
    name = opts.name or meta.get("name") or root.name
    run = new_run(
        stage,
        name,
        source=source,
        opts=opts,
        config=config,
        started=started,
        group=meta.get("group"),
        tags=meta.get("tags") or (),
        times_from=time_from,
        environment={k: meta[k] for k in META_KEYS if k in meta},
    )
    counts: dict[str, int] = {}
    with run:
        if isinstance(meta.get("init"), list) and meta["init"]:
            run.set_init(meta["init"])  # lineage: what the run started from (#15)
        if record_exists(root / BATCHES):
            counts["batches"], last = _log_batches(run, root / BATCHES)
            ends += [last] if last is not None else []
            fields[BATCHES] = f"batches ({counts['batches']} records)"
        for _, entry in history:
            run.log_history(entry)
        counts["history"] = len(history)
        if record_exists(root / METRICS):
            counts["scalars"], last = _log_metrics(run, root / METRICS)
            ends += [last] if last is not None else []
            fields[METRICS] = f"scalars ({counts['scalars']} records)"
        if record_exists(root / CHECKPOINTS):
            counts["checkpoints"] = _log_checkpoints(run, root / CHECKPOINTS, source)
            fields[CHECKPOINTS] = f"checkpoints ({counts['checkpoints']} records)"
        for results in sorted(root.glob("evals/*/results.jsonl")):
            set_name = results.parent.name
            counts[f"results:{set_name}"] = log_results_file(run, set_name, results)
            fields[source.rel(results)] = f"result set '{set_name}'"
        headline = meta.get("headline")
        if isinstance(headline, dict) and headline:
            run.set_summary(**{k: v for k, v in headline.items() if isinstance(k, str)})
            fields[META] += ", headline values"
        documents = _ledger_documents(root)
        ledger_files = _ledger_files(root, source)
        for rel, path in ledger_files:
            run.log_file(rel, path)
            fields[source.rel(path)] = f"file {rel} of the run"
        if record_exists(root / NOTES):
            for lineno, rec in load_jsonl(root / NOTES):
                if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
                    raise RecordError(
                        "must be an object with a 'text' string", source=str(root / NOTES), line=lineno, field="text"
                    )
                notes.append(rec["text"])
            fields[NOTES] = "notes"
        images = root / IMAGES
        parsed_images: list[tuple[int, dict[str, Any]]] | None = None
        if images.is_file():
            parsed_images = [(n, _check_image(rec, images, n)) for n, rec in load_jsonl(images)]
            run.log_file(IMAGES, images)
            rows, lines = _result_rows(parsed_images, task=str(config.get("task") or RESULTS_NAME))
            if rows:
                from labledger.inputs.results import validate_rows

                validate_rows(rows, source=str(images), lines=lines)
                run.log_results(RESULTS_NAME, rows, source=str(images))
                counts[f"results:{RESULTS_NAME}"] = len(rows)
                fields[IMAGES] = (
                    f"file {IMAGES} and result set '{RESULTS_NAME}' ({len(rows)} rows: one per image x state)"
                )
            else:
                fields[IMAGES] = f"file {IMAGES} (no per-state probabilities with a gold: no result set)"
        summary = root / SUMMARY
        if summary.is_file():
            doc = load_json(summary)
            cells = _check_cells(doc, summary)
            run.log_file(SUMMARY, summary)
            fields[SUMMARY] = f"file {SUMMARY}"
            if cells is not None and parsed_images is not None:
                notes.append(_compare_cells(cells, parsed_images))
        elif parsed_images is not None:
            notes.append(f"{IMAGES} has no {SUMMARY} beside it; nothing to check its cells against.")
        copied = source.copy_into(run) if opts.copy else {}
        for f in source.files:
            rel = source.rel(f)
            where = (
                f"original copied to files/{copied[rel]}"
                if opts.copy
                else "original referenced in run.json imported_from.files"
            )
            fields[rel] = f"{fields[rel]}; {where}" if rel in fields else where
        for text in notes:
            run.note(text)
        status, error = _status(meta)
        ended = fallback_end if meta.get("ended") is not None else (max(ends) if ends else fallback_end)
        for set_name, kind, path in documents:
            fields[source.rel(path)] = f"{kind} document '{set_name}'"
        finish_import(run, fields, ended=ended, status=status, error=error)
    for set_name, kind, path in documents:  # indexed like the original's (metric values, documents)
        stage.save_evaluation(run.id, set_name, load_json(path), kind=kind)
        counts[f"{kind}:{set_name}"] = 1
    counts.update(notes=len(notes), files=len(run_files(run)))
    return [ImportedRun(run.id, run.name, run.group, counts, fields, notes)]


#: Documents a ledger run folder keeps beside its result sets (``evals/<name>/<kind>.json``).
DOCUMENT_KINDS = ("evaluation", "calibration", "comparison", "recipe")


def _ledger_documents(root: Path) -> list[tuple[str, str, Path]]:
    """``(set name, kind, path)`` of the stored documents of a ledger run folder."""
    from labledger.store.run import check_name

    out = []
    for kind in DOCUMENT_KINDS:
        for path in sorted(root.glob(f"evals/*/{kind}.json")):
            check_name(path.parent.name, "evaluation name")
            doc = load_json(path)
            if not isinstance(doc, dict):
                raise RecordError(f"must be a JSON object; got {type(doc).__name__}", source=str(path))
            out.append((path.parent.name, kind, path))
    return out


def _ledger_files(root: Path, source: Any) -> list[tuple[str, Path]]:
    """``(name under files/, path)`` for every file of a ledger run folder's ``files/``."""
    from labledger.importers.source import walk_files

    base = root / "files"
    if not base.is_dir():
        return []
    from labledger.importers.source import safe_relpath

    return [(safe_relpath(p.relative_to(base).as_posix()), p) for p in walk_files(base)]


def _read_meta(path: Path) -> dict[str, Any]:
    meta = load_json(path)
    if not isinstance(meta, dict):
        raise RecordError(f"must be a JSON object; got {type(meta).__name__}", source=str(path))
    for key, kind in (("name", str), ("group", str), ("tags", list), ("status", str)):
        if meta.get(key) is not None and not isinstance(meta[key], kind):
            raise RecordError(f"must be a {kind.__name__}; got {meta[key]!r}", source=str(path), field=key)
    return meta


def _status(meta: dict[str, Any]) -> tuple[str, str | None]:
    status = meta.get("status") or "finished"
    if status in ("finished", "failed", "killed"):
        return status, meta.get("error")
    return "killed", f"the source run was '{status}' when imported" + (
        f" ({meta['error']})" if meta.get("error") else ""
    )


def run_files(run) -> list[Path]:
    root = run.dir / "files"
    return [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []


def _times(root: Path, source: Source) -> tuple[float | None, float | None, str]:
    """Start (and a fallback end): the first record's ``time`` of ``batches.jsonl``, else of
    ``metrics.jsonl``; else the files' modification times."""
    for name in (BATCHES, METRICS):
        if record_exists(root / name):
            for _, rec in load_jsonl(root / name):
                t = rec.get("time") if isinstance(rec, dict) else None
                if is_number(t):
                    return float(t), None, f"{name}: the first and last record's time"
                break
    lo, hi = file_times(source.files)
    return lo, hi, "the source files' modification times (the source records no start time)"


def _log_batches(run, path: Path) -> tuple[int, float | None]:
    n, last = 0, None
    for lineno, rec in load_jsonl(path):
        if isinstance(rec, dict) and "time" not in rec:
            rec["time"] = None  # keep the record honest: the import does not invent a time
        try:
            run.log_batch(rec)
        except RecordError as exc:
            raise relocate(exc, source=str(path), line=lineno) from None
        n += 1
        if is_number(rec.get("time")):
            last = float(rec["time"])
    return n, last


def _read_history(path: Path) -> tuple[list[tuple[int | None, dict[str, Any]]], dict[str, Any]]:
    """Entries (with their line in a JSONL file) and the other keys of a history object."""
    if path.suffix == ".jsonl":
        out: list[tuple[int | None, dict[str, Any]]] = []
        for lineno, rec in load_jsonl(path):
            if not isinstance(rec, dict):
                raise RecordError(
                    f"a history entry must be a JSON object; got {type(rec).__name__}", source=str(path), line=lineno
                )
            out.append((lineno, rec))
        return out, {}
    doc = load_json(path)
    extra: dict[str, Any] = {}
    key = ""
    if isinstance(doc, dict):
        key = next((k for k in ("log_history", "history") if isinstance(doc.get(k), list)), "")
        if not key:
            raise RecordError(
                "must be a list of entries or an object with a 'log_history' or 'history' list", source=str(path)
            )
        extra = {k: v for k, v in doc.items() if k != key}
        entries = doc[key]
    elif isinstance(doc, list):
        entries = doc
    else:
        raise RecordError(f"must be a list of entries; got {type(doc).__name__}", source=str(path))
    prefix = f"{key}" if key else ""
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise RecordError(f"must be an object; got {type(e).__name__}", source=str(path), field=f"{prefix}[{i}]")
    return [(None, e) for e in entries], extra


def _log_metrics(run, path: Path) -> tuple[int, float | None]:
    n, last = 0, None
    for lineno, rec in load_jsonl(path):
        if not isinstance(rec, dict):
            raise RecordError(
                f"a scalar record must be a JSON object; got {type(rec).__name__}", source=str(path), line=lineno
            )
        values = dict(rec)
        step = values.pop("step", None)
        wall = values.pop("time", None)
        if wall is not None and not is_number(wall):
            raise RecordError(f"must be a number; got {wall!r}", source=str(path), line=lineno, field="time")
        try:
            if wall is None:
                run.log(step, **values)
            else:
                run.log(step, time=float(wall), **values)
        except RecordError as exc:
            raise relocate(exc, source=str(path), line=lineno) from None
        n += 1
        if wall is not None and (last is None or wall > last):
            last = float(wall)
    return n, last


def _log_checkpoints(run, path: Path, source: Source) -> int:
    n = 0
    for lineno, rec in load_jsonl(path):
        if not isinstance(rec, dict) or not isinstance(rec.get("path"), str):
            raise RecordError("must be an object with a 'path' string", source=str(path), line=lineno, field="path")
        file = Path(rec["path"])
        if not file.is_absolute():
            file = source.root / file
        step, metrics, sha = rec.get("step"), rec.get("metrics") or {}, rec.get("sha256")
        try:
            if file.is_file() and (sha is None or source.digest(file)[0] == sha):
                run.log_checkpoint(file, step=step, metrics=metrics, copy=False)
            else:
                run.log_checkpoint_reference(rec["path"], sha, size=rec.get("size"), step=step, metrics=metrics)
        except RecordError as exc:
            raise relocate(exc, source=str(path), line=lineno) from None
        n += 1
    return n


def _check_image(rec: Any, path: Path, line: int) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise RecordError(
            f"an image record must be a JSON object; got {type(rec).__name__}", source=str(path), line=line
        )
    for key in ("predictions", "probabilities", "gold", "episodes"):
        v = rec.get(key)
        if v is not None and not isinstance(v, list):
            raise RecordError(
                f"must be a list indexed by state; got {type(v).__name__}", source=str(path), line=line, field=key
            )
    probs = rec.get("probabilities")
    if probs is not None:
        for s, p in enumerate(probs):
            if not isinstance(p, dict):
                raise RecordError(
                    f"must map labels to probabilities; got {type(p).__name__}",
                    source=str(path),
                    line=line,
                    field=f"probabilities[{s}]",
                )
        preds = rec.get("predictions")
        if preds is not None and len(preds) != len(probs):
            raise RecordError(
                f"has {len(preds)} states but probabilities has {len(probs)}",
                source=str(path),
                line=line,
                field="predictions",
            )
    return rec


def _gold(rec: dict[str, Any], s: int) -> Any:
    gold = rec.get("gold")
    if isinstance(gold, list) and s < len(gold):
        return gold[s]
    target = rec.get("target")
    if isinstance(target, int) and not isinstance(target, bool):
        labels = set((rec.get("probabilities") or [{}])[s])
        if labels == set(SIGN_ACTIONS.values()):
            return SIGN_ACTIONS[(target > s) - (target < s)]
    return None


def _result_rows(images: list[tuple[int, dict[str, Any]]], *, task: str) -> tuple[list[dict], list[int]]:
    """One results row per (image, state) with a gold and probabilities, and each row's line."""
    rows, lines = [], []
    for lineno, rec in images:
        probs = rec.get("probabilities")
        if not probs:
            continue
        image_id = rec.get("image_id", f"line{lineno}")
        target = rec.get("target")
        preds = rec.get("predictions") or []
        for s, p in enumerate(probs):
            gold = _gold(rec, s)
            if gold is None:
                continue
            row = {
                "id": f"img{image_id}-cur{s}",
                "task": task,
                "gold": gold,
                "probs": p,
                "slices": {"current": str(s)},
                "group": f"img{image_id}",
                "image_id": image_id,
                "current": s,
            }
            if target is not None:
                row["slices"]["target"] = str(target)
                row["target_digit"] = target
            if s < len(preds):
                row["prediction"] = preds[s]
            rows.append(row)
            lines.append(lineno)
    return rows, lines


_CELL_KEYS = ("images", "errors", "failed_episodes")


def _check_cells(doc: Any, path: Path) -> dict[str, dict[str, dict[str, int]]] | None:
    if not isinstance(doc, dict):
        raise RecordError(f"must be a JSON object; got {type(doc).__name__}", source=str(path))
    cells = doc.get("cells")
    if cells is None:
        return None
    if not isinstance(cells, dict):
        raise RecordError("must map target -> current -> counts", source=str(path), field="cells")
    for target, row in cells.items():
        if not isinstance(row, dict):
            raise RecordError("must map current -> counts", source=str(path), field=f"cells.{target}")
        for current, cell in row.items():
            where = f"cells.{target}.{current}"
            if not isinstance(cell, dict):
                raise RecordError("must be an object of counts", source=str(path), field=where)
            for key in _CELL_KEYS:
                v = cell.get(key)
                if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                    raise RecordError(f"must be an integer >= 0; got {v!r}", source=str(path), field=f"{where}.{key}")
    return cells


def _compare_cells(cells: dict[str, Any], images: list[tuple[int, dict[str, Any]]]) -> str:
    """Recompute ``cells[target][current]`` from the image lines and say whether they agree."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for _, rec in images:
        target = str(rec.get("target"))
        preds = rec.get("predictions") or []
        episodes = rec.get("episodes") or []
        n_states = max(len(preds), len(episodes), len(rec.get("probabilities") or []))
        for s in range(n_states):
            c = counts.setdefault((target, str(s)), {"images": 0, "errors": 0, "failed_episodes": 0})
            c["images"] += 1
            gold = _gold(rec, s)
            if s < len(preds) and gold is not None and preds[s] != gold:
                c["errors"] += 1
            if s < len(episodes) and isinstance(episodes[s], dict) and episodes[s].get("success") is False:
                c["failed_episodes"] += 1
    diffs = []
    n = 0
    for target, row in cells.items():
        for current, cell in row.items():
            mine = counts.get((str(target), str(current)), {"images": 0, "errors": 0, "failed_episodes": 0})
            for key in _CELL_KEYS:
                if key in cell:
                    n += 1
                    if cell[key] != mine[key]:
                        diffs.append(f"cells[{target}][{current}].{key} = {cell[key]} but the images give {mine[key]}")
    missing = sorted(k for k in counts if k[0] not in cells or k[1] not in (cells.get(k[0]) or {}))
    if missing:
        diffs.append(f"{len(missing)} (target, current) pairs of the images have no cell, e.g. {missing[0]}")
    if not diffs:
        return (
            f"{SUMMARY}: all {n} counts of summary.cells agree with {IMAGES} "
            f"(recomputed at import from {len(images)} image lines)."
        )
    shown = "; ".join(diffs[:5]) + (f"; ... ({len(diffs)} in all)" if len(diffs) > 5 else "")
    return f"{SUMMARY}: summary.cells disagrees with {IMAGES} (recomputed at import): {shown}."
