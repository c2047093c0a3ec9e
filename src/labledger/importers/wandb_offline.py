"""Import W&B offline runs: ``wandb/offline-run-*/run-*.wandb`` and the files beside them.

Each ``run-*.wandb`` file is read by :func:`labledger.wandb.records.read_wandb_file` (W&B's own
protobuf classes; the ``wandb`` package is required). The files of one W&B run id are one run: a
run resumed offline (``wandb.init(id=..., resume=...)``) leaves one folder per segment, and its
segments, in start order, become one ledger run (``run.json`` ``wandb.segments`` lists them, a note
names them). The run keeps W&B's display name (else its id), project (as the group, unless the
W&B group is set), tags, notes and config (without W&B's own ``_wandb`` entries such as the chart
specs of ``_wandb.visualize.<key>``, which a note names).

Every history row becomes one scalar record: ``step`` is ``_step``, ``time`` is ``_timestamp``, the
numbers keyed as W&B keys them (nested keys joined with ``.``). A later segment's rows at a step
at or below the last step of the segments before it are left out (W&B keeps a run's steps
increasing) and counted in a note. Media become what a ``labledger.wandb`` run logs, referenced
from the run's ``media.jsonl`` so the site's media panel shows them: images (single, and lists
with their captions: ``images/separated``) under ``files/media/<key>/<step>-<name>``, tables as
``files/tables/<key>/<step>.jsonl``, histograms as bins and counts. Other values are counted in
a note.

The summary, as W&B has it (``define_metric`` summaries such as ``{"max": 0.7}`` and nested
mappings included), is ``files/wandb-summary.json``; its numbers are the run's headline values,
nested ones keyed with ``.`` (``acc.max``, ``test.acc``), as a ``labledger.wandb`` run keys them.
``define_metric`` definitions are ``files/wandb-metrics.json`` (the site charts a metric against
its ``step_metric``). The environment record (host, OS, Python, program and args, root, git) is
the run's environment (``host``, ``platform``, ``python``, ``argv``, ``cwd``, ``git``, ``user``),
as labledger's own runs record it, and verbatim in ``run.json`` ``wandb.environment``. Artifacts
are named in a note (name, type, digest, files) and kept in ``run.json`` ``wandb.artifacts``; their
files are in wandb's staging cache, outside the run folder, and are not read.

What the file proves of the run's end is its status: W&B's exit record with code 0 is
``finished``, with another code ``failed``; a file without an exit record (its process was killed
or crashed before ``wandb.finish``, or is still writing) is ``killed``, with an error and a note
saying the source has no end record, as W&B's own app shows such a run as crashed, not finished.
For a resumed run the last segment decides; an earlier segment without an exit record is noted.

Every record is verified (:mod:`labledger.wandb.records`: each chunk's CRC-32, the framing, the
protobuf and JSON values). A damaged file (a changed byte, a broken chunk) is refused with one line
naming the file and byte offset, and nothing is imported; with ``ImportOptions.salvage``
(``labledger import --salvage``) the records before the damage are imported and the run gets a
note naming the file, the byte and what was left out. A file that ends inside a record (a writer
killed mid-log: wandb-core writes whole 32 KiB blocks, so its last record is often cut) is
imported up to there with a note saying it is truncated, as wandb's own reader ends there. A media
file whose sha256 is not the one its record states is refused, naming the file, the step and the key.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping
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
from labledger.store.files import RECORD_FILES
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


def _media_file(run_dir: Path, rel: Any) -> Path | None:
    """The file ``rel`` of the run's ``files/`` folder, or None when it is absent or outside it."""
    if not isinstance(rel, str) or not rel or ".." in Path(rel).parts:
        return None
    candidate = run_dir / "files" / rel
    return candidate if candidate.is_file() and inside(candidate, run_dir) else None


def environment_of(env: Mapping[str, Any], host: str | None = None) -> dict[str, Any]:
    """The run environment (labledger's keys) that W&B's environment record states; keys it does
    not state are left out (the import sets them to None).

    >>> environment_of({"host": "vm", "python": "CPython 3.11.7", "os": "Linux-6", "program": "t.py",
    ...                 "args": ["--lr", "0.1"], "root": "/w", "git": {"commit": "abc"}, "username": "u"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'host': 'vm', 'user': 'u', 'python': '3.11.7', 'platform': 'Linux-6', 'argv': ['t.py', '--lr', '0.1'],
     'cwd': '/w', 'git': {'commit': 'abc', 'dirty': None, 'branch': None, 'remote': None}}
    """
    from labledger.store.environment import redact_argv

    out: dict[str, Any] = {}
    if env.get("host") or host:
        out["host"] = env.get("host") or host
    if env.get("username"):
        out["user"] = env["username"]
    python = env.get("python")
    if isinstance(python, str) and python:
        out["python"] = python.split()[-1]  # "CPython 3.11.7": labledger records the version
    if env.get("os"):
        out["platform"] = env["os"]
    program = env.get("program") or env.get("code_path")
    if program:
        out["argv"] = redact_argv([str(program), *(str(a) for a in env.get("args") or [])])
    if env.get("root"):
        out["cwd"] = env["root"]
    git = env.get("git")
    if isinstance(git, Mapping) and (git.get("commit") or git.get("remote_url")):
        out["git"] = {"commit": git.get("commit"), "dirty": None, "branch": None, "remote": git.get("remote_url")}
    return out


def summary_numbers(summary: Mapping[str, Any]) -> dict[str, float | int]:
    """The numbers of a W&B summary, nested mappings keyed with ``.`` (a ``define_metric`` summary
    ``{"acc": {"max": 0.7}}`` is ``acc.max``, as ``labledger.wandb`` keys it); W&B's own keys
    (``_step``, ``_wandb``...) and media values (mappings with ``_type``) left out.

    >>> summary_numbers({"acc": {"max": 0.7}, "n": 3, "t": {"x": {"y": 1.5}, "s": "a"}, "_step": 4,
    ...                  "img": {"_type": "image-file", "width": 3}, "ok": True})
    {'acc.max': 0.7, 'n': 3, 't.x.y': 1.5}
    """
    out: dict[str, float | int] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            if "_type" in value:
                return
            for k, v in value.items():
                walk(f"{prefix}.{k}", v)
        elif is_number(value) and not (isinstance(value, float) and not math.isfinite(value)):
            out[prefix] = value

    for key, value in summary.items():
        if not str(key).startswith("_"):
            walk(str(key), value)
    return out


class _Media:
    """Writes what a row's media values become: files in the run and ``media.jsonl`` records in
    the shape ``labledger.wandb`` writes them (see :func:`labledger.site.rundata.media_view`)."""

    def __init__(self, run: Any, source: Source) -> None:
        self.run, self.source = run, source
        self.appender: Any = None
        self.files = 0
        self.records = 0

    def _record(self, rec: dict[str, Any]) -> None:
        if self.appender is None:
            from labledger.store.jsonl import Appender

            self.appender = Appender(self.run.dir / RECORD_FILES["media"])
        self.appender.append(rec)
        self.records += 1

    def close(self) -> None:
        if self.appender is not None:
            self.appender.fsync()
            self.appender.close()
            self.appender = None

    def _copy(self, path: Path, dest: str, *, sha256: Any = None, where: str = "") -> str:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if isinstance(sha256, str) and sha256 and sha256 != digest:
            raise ImportSourceError(
                f"{self.source.rel(path)}: sha256 {digest} is not the {sha256} that {where} states "
                "(the media file was changed after W&B wrote it)"
            )
        self.run.log_file(dest, data)
        self.files += 1
        return digest

    def add(
        self, run_dir: Path, key: str, step: int, when: Any, value: Mapping[str, Any], skipped: Counter[str]
    ) -> None:
        """Store media value ``value`` of ``key`` at ``step``; what cannot be stored is counted in ``skipped``."""
        from labledger.wandb._run import safe_name

        kind = str(value.get("_type"))
        base = {"step": step, "time": when if is_number(when) else None, "key": key}
        where = f"history row _step={step}, key {key!r}"
        if kind in ("image-file", "images/separated"):
            if kind == "image-file":
                names, captions, shas = [value.get("path")], [value.get("caption")], [value.get("sha256")]
            else:
                names = list(value.get("filenames") or [])
                captions = list(value.get("captions") or [])
                shas = []
            refs = []
            for i, rel in enumerate(names):
                media = _media_file(run_dir, rel)
                if media is None:
                    skipped[f"{kind} (file missing)"] += 1
                    continue
                dest = f"media/{safe_name(key)}/{step}-{media.name}"
                digest = self._copy(media, dest, sha256=shas[i] if i < len(shas) else None, where=where)
                ref: dict[str, Any] = {"path": f"files/{dest}", "sha256": digest}
                caption = captions[i] if i < len(captions) else None
                ref["caption"] = caption if isinstance(caption, str) else None
                if is_number(value.get("height")) and is_number(value.get("width")):
                    ref["shape"] = [value["height"], value["width"]]
                refs.append(ref)
            if value.get("masks") or value.get("all_masks") or value.get("boxes") or value.get("all_boxes"):
                skipped[f"{kind} masks/boxes"] += 1
            if refs:
                self._record({**base, "kind": "image", "files": refs})
        elif kind == "table-file":
            media = _media_file(run_dir, value.get("path"))
            if media is None:
                skipped["table-file (file missing)"] += 1
                return
            try:
                table = json.loads(media.read_text(encoding="utf-8"))
                cols = [str(c) for c in table.get("columns", [])]
                rows = [dict(zip(cols, r, strict=False)) for r in table.get("data", [])]
            except (ValueError, AttributeError, TypeError) as exc:
                raise ImportSourceError(f"{self.source.rel(media)}: not a W&B table ({exc}); {where}") from None
            dest = f"tables/{safe_name(key)}/{step}.jsonl"
            self.run.log_file(dest, "".join(json.dumps(r) + "\n" for r in rows).encode())
            self.files += 1
            self._record({**base, "kind": "table", "path": f"files/{dest}", "rows": len(rows), "columns": cols})
        elif kind == "histogram" and isinstance(value.get("bins"), list) and isinstance(value.get("values"), list):
            self._record({**base, "kind": "histogram", "bins": value["bins"], "counts": value["values"]})
        else:
            skipped[kind] += 1


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One run per W&B run id: its ``run-*.wandb`` files are its segments (see the module docstring)."""
    from labledger.wandb.records import WandbFileDamage, WandbRunFile, read_wandb_file

    runs: dict[str, list[tuple[Path, WandbRunFile]]] = {}
    for f in source.files:
        try:
            data = read_wandb_file(f, salvage=opts.salvage)
        except WandbFileDamage as exc:
            raise ImportSourceError(
                f"{exc}; nothing imported (--salvage imports the {exc.records} record(s) before byte "
                f"{exc.offset}, with a note on the run)"
            ) from None
        runs.setdefault(str(data.run.get("id") or f.stem), []).append((f, data))
    out = []
    for segments in runs.values():
        segments.sort(key=lambda s: (s[1].run.get("start_time") is None, s[1].run.get("start_time") or 0, str(s[0])))
        out.append(_import_run(source, stage, opts, segments))
    return out


def _held(data: Any, last_step: int | None) -> str:
    return f"{len(data.history)} history row(s)" + (f", the last at step {last_step}" if last_step is not None else "")


def _import_run(source: Source, stage: Ledger, opts: ImportOptions, segments: list[tuple[Path, Any]]) -> ImportedRun:
    first, last = segments[0][1], segments[-1][1]
    info = first.run
    run_id = info.get("id")
    name = opts.name or next((d.run["name"] for _, d in reversed(segments) if d.run.get("name")), None)
    name = name or run_id or segments[0][0].stem
    config: dict[str, Any] = {}
    tags: list[str] = []
    internal: list[str] = []
    for _, d in segments:
        config.update(d.config)
        tags += [t for t in d.run.get("tags") or [] if t not in tags]
        internal += [k for k in d.internal_config if k not in internal]
    project = info.get("project") or None
    files = [f for f, _ in segments]
    wandb_meta: dict[str, Any] = {k: info.get(k) for k in ("id", "project", "entity", "job_type") if info.get(k)}
    if first.environment:
        wandb_meta["environment"] = first.environment
    artifacts = [a for _, d in segments for a in d.artifacts]
    if artifacts:
        wandb_meta["artifacts"] = artifacts
    run = new_run(
        stage,
        name,
        source=source,
        opts=opts,
        config=config,
        started=info.get("start_time"),
        group=info.get("group") or project,
        tags=tags,
        environment=environment_of(first.environment, info.get("host") or None),
        files=files,
        meta={"wandb": wandb_meta},
        times_from="W&B's _timestamp of each history row",
    )
    skipped: Counter[str] = Counter()
    renamed: dict[str, str] = {}
    notes: list[str] = []
    fields: dict[str, str] = {}
    n_records = n_values = 0
    last_step: int | None = None
    last_time = info.get("start_time")
    seg_meta: list[dict[str, Any]] = []
    media = _Media(run, source)
    with run:
        for text in dict.fromkeys(d.run.get("notes") for _, d in segments if d.run.get("notes")):
            run.note(str(text))
        try:
            for f, data in segments:
                seg_first: int | None = None
                seg_last: int | None = None
                seg_records = dropped = 0
                floor = last_step  # a resumed segment's steps continue after the segments before it
                for row in data.history:
                    step = row.get("_step")
                    if not isinstance(step, int):
                        skipped["rows without _step"] += 1
                        continue
                    if floor is not None and step <= floor:
                        dropped += 1
                        continue
                    when = row.get("_timestamp")
                    values: dict[str, Any] = {}
                    for key, value in row.items():
                        if key.startswith("_"):
                            continue
                        if is_number(value) or value is None or isinstance(value, bool):
                            values[record_name(key, renamed)] = value
                        elif isinstance(value, dict) and "_type" in value:
                            media.add(f.parent, key, step, when, value, skipped)
                        else:
                            skipped[type(value).__name__] += 1
                    seg_first = step if seg_first is None else seg_first
                    seg_last = last_step = step
                    if values:
                        kwargs = {"time": when} if is_number(when) else {}
                        run.log(step, **kwargs, **values)
                        n_records += 1
                        seg_records += 1
                        n_values += len(values)
                    if is_number(when) and (last_time is None or when > last_time):
                        last_time = when
                seg_meta.append(
                    {
                        "file": source.rel(f),
                        "started": data.run.get("start_time"),
                        "first_step": seg_first,
                        "last_step": seg_last,
                        "rows": len(data.history),
                        "left_out": dropped,
                        "exit_code": data.exit_code,
                        "resumed": bool(data.run.get("resumed")),
                    }
                )
                fields[source.rel(f)] = f"history ({seg_records} rows)" + (
                    f", segment {len(seg_meta)} of {len(segments)} of W&B run {run_id}" if len(segments) > 1 else ""
                )
                if dropped:
                    notes.append(
                        f"{source.rel(f)}: {dropped} history row(s) at steps up to {floor} left out: the run "
                        f"was resumed and the segments before this one had logged up to step {floor} "
                        "(W&B keeps a run's steps increasing)."
                    )
                notes += _damage_notes(source, f, data, seg_last)
                if data is not last and data.exit_code is None and data.damage is None:
                    notes.append(
                        f"{source.rel(f)}: this segment has no exit record (its process was killed or crashed), "
                        "and the run was resumed after it."
                    )
        finally:
            media.close()
        summary: dict[str, Any] = {}
        for _, d in segments:
            summary.update(d.summary)
        kept = {k: v for k, v in summary.items() if not str(k).startswith("_")}
        headline = summary_numbers(kept)
        if headline:
            run.set_summary(**headline)
        if kept:
            run.log_file("wandb-summary.json", json.dumps(kept, indent=2, sort_keys=True).encode())
            fields["summary"] = (
                f"files/wandb-summary.json ({len(kept)} key(s), as W&B has them); {len(headline)} number(s) as "
                "headline values"
            )
        metrics = [m for _, d in segments for m in d.metrics]
        if metrics:
            run.log_file("wandb-metrics.json", json.dumps(metrics, indent=2).encode())
            fields["define_metric"] = f"files/wandb-metrics.json ({len(metrics)} definition(s))"
        if first.environment:
            fields["environment"] = (
                "the run's environment (host, platform, python, argv, cwd, git); run.json wandb.environment"
            )
        if internal:
            notes.append("Not in the config: W&B's own entries for its UI (" + ", ".join(internal) + ": chart specs).")
            fields["_wandb config"] = "left out of the config (W&B's chart specs): " + ", ".join(internal)
        if artifacts:
            notes.append(_artifacts_note(artifacts))
            fields["artifacts"] = f"named in a note and run.json wandb.artifacts ({len(artifacts)}); files not read"
        if len(segments) > 1:
            wandb_meta["segments"] = seg_meta
            run.meta["wandb"] = wandb_meta
            notes.append(
                f"W&B run {run_id} was resumed: {len(segments)} segments, one run file each, imported as one run: "
                + "; ".join(
                    f"{s['file']} (steps {s['first_step']}-{s['last_step']}, exit code {s['exit_code']})"
                    for s in seg_meta
                )
                + "."
            )
        notes += scalar_notes(skipped, renamed, kept="numbers, images, tables and histograms are", names="Keys")
        if opts.copy:
            source.copy_into(run, files)
        status, error = "finished", None
        held = _held(last, last_step)
        if last.exit_code is None:
            status = "killed"
            if last.damage is not None:
                how = "ends inside a record" if last.damage.truncated else "is damaged"
                error = (
                    f"the W&B run file {how} at byte {last.damage.offset}: no exit record before it; it holds {held}"
                )
            else:
                error = (
                    "the W&B run file has no exit record: its process stopped before wandb.finish "
                    f"(killed or crashed) or is still running; it holds {held}"
                )
                notes.append(f"The source has no end record: {error}.")
        elif last.exit_code != 0:
            status, error = "failed", f"exit code {last.exit_code}"
        for text in notes:
            run.note(text)
        finish_import(run, fields, ended=last_time, status=status, error=error)
    counts = {"scalars": n_records, "values": n_values, "media": media.files, "notes": len(notes)}
    if len(segments) > 1:
        counts["segments"] = len(segments)
    return ImportedRun(run.id, run.name, run.group, counts, fields, notes)


def _damage_notes(source: Source, f: Path, data: Any, last_step: int | None) -> list[str]:
    if data.damage is None:
        return []
    dmg = data.damage
    what = (
        "Truncated file (its writer was stopped mid-write, or is still writing)"
        if dmg.truncated
        else "Salvaged from a damaged file"
    )
    return [
        f"{what}: {source.rel(f)}:{dmg.offset}: {dmg.reason}. Imported the "
        f"{data.records} verified record(s) before that byte ({_held(data, last_step)}); the "
        f"{f.stat().st_size - dmg.offset} byte(s) from there on are not imported."
    ]


def _artifacts_note(artifacts: list[dict[str, Any]]) -> str:
    parts = []
    for a in artifacts:
        size = sum(int(x.get("size") or 0) for x in a["files"])
        parts.append(
            f"{a['name']} (type {a['type']}, digest {a['digest']}, {len(a['files'])} file(s), {size} bytes: "
            + ", ".join(x["path"] for x in a["files"][:5])
            + (", ..." if len(a["files"]) > 5 else "")
            + ")"
        )
    return (
        "W&B artifacts logged by this run, not imported (their files are in wandb's staging cache, outside "
        "the run folder; run.json wandb.artifacts lists each file with its digest): " + "; ".join(parts) + "."
    )
