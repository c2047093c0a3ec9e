"""What every importer shares: the source's files and content hash, copy-or-reference, run creation.

A :class:`Source` is the path being imported with the list of files that make up its content. Its
:meth:`~Source.sha256` is the hash of that content (one file: the file's own sha256; a folder: the
sha256 of ``relative path NUL sha256 LF`` lines in path order), so re-importing the same content is
recognised wherever it lies. Originals are never written: they are referenced (path, sha256 and
size recorded in the run's ``run.json`` under ``imported_from``) or copied into the run's
``files/source/`` with :meth:`labledger.Run.log_file`.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import orjson

from labledger.errors import ImportSourceError, RecordError
from labledger.machine import cores
from labledger.store.jsonl import iter_decoded, read_json
from labledger.store.ledger import Ledger
from labledger.store.manifest import sha256_file
from labledger.store.run import Run

#: Keys of ``run.json`` that describe the process that logged a run. An imported run did not run
#: here, so they are set from the source where it says (MLflow's user, git commit...) and to None
#: otherwise; the importing process is recorded under ``imported_from.importer``.
ENVIRONMENT_KEYS = ("host", "user", "pid", "python", "platform", "argv", "cwd", "packages", "git")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
#: A source with fewer bytes than this to hash is hashed in one thread.
HASH_THREADS_MIN_BYTES = 8 << 20


@dataclass
class ImportOptions:
    """What the user asked for: run name and group, copy or reference."""

    name: str | None = None
    group: str | None = None
    copy: bool = False
    tags: tuple[str, ...] = ()
    #: Import a harness task whose file holds fewer documents than the harness states (a truncated
    #: file), with a note, instead of leaving it out with an error.
    partial: bool = False
    #: Import a damaged source (a W&B run file whose record checksum fails or whose chunks are
    #: broken) up to the damage, with a note on the run naming the file and byte, instead of
    #: refusing it with an error.
    salvage: bool = False


@dataclass
class ImportedRun:
    """One run made by an import: its id, name, what each part of the source became."""

    id: str
    name: str
    group: str | None
    counts: dict[str, int] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: One line per part of the source that could not be read and was left out (a harness task),
    #: naming the file, the task and the field; the rest of the source is stored.
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "group": self.group,
            "counts": self.counts,
            "fields": self.fields,
            "notes": self.notes,
            "errors": self.errors,
        }


class Source:
    """The files of one import and their content hash.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "a.txt").write_text("hi")
    2
    >>> Source(d / "a.txt", "results").sha256() == hashlib.sha256(b"hi").hexdigest()
    True
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        fmt: str,
        files: Iterable[Path] | None = None,
        *,
        follow_symlinks: bool = False,
    ):
        self.path = Path(path).resolve()
        self.fmt = fmt
        self.root = self.path if self.path.is_dir() else self.path.parent
        if self.path.is_dir() and not follow_symlinks:
            refuse_symlinks_out(self.path)
        if files is None:
            files = [self.path] if self.path.is_file() else walk_files(self.path)
        self.files = sorted({Path(f).resolve() for f in files}, key=lambda p: self.rel(p))
        self._digests: dict[Path, tuple[str, int]] = {}

    def rel(self, path: Path) -> str:
        """``path`` relative to the source's folder, with ``/`` separators."""
        try:
            return Path(path).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def digest(self, path: Path) -> tuple[str, int]:
        """``(sha256, size)`` of one file of the source (computed once)."""
        path = Path(path).resolve()
        if path not in self._digests:
            try:
                self._digests[path] = sha256_file(path)
            except OSError as exc:
                raise ImportSourceError(f"{path}: cannot read ({exc.strerror or exc})") from None
        return self._digests[path]

    def sha256(self) -> str:
        """The content hash of the whole source (see the module docstring)."""
        if self.path.is_file() and self.files == [self.path]:
            return self.digest(self.path)[0]
        self._digest_all()
        h = hashlib.sha256()
        for f in self.files:
            h.update(f"{self.rel(f)}\0{self.digest(f)[0]}\n".encode())
        return h.hexdigest()

    def _digest_all(self) -> None:
        """The digests of every file not hashed yet, from a few threads when there are many bytes
        (hashlib and reads release the GIL: the cores hash side by side, #13); the first file that
        cannot be read raises, as :meth:`digest` in path order would."""
        todo = [f for f in self.files if f not in self._digests]
        if len(todo) < 2 or cores() < 2 or sum(f.stat().st_size for f in todo if f.is_file()) < HASH_THREADS_MIN_BYTES:
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(cores(), 4)) as pool:
            list(pool.map(self.digest, todo))

    def file_entries(self, files: Iterable[Path] | None = None) -> list[dict[str, Any]]:
        """``[{"path", "sha256", "size"}]`` of ``files`` (default: all), paths relative to the source."""
        out = []
        for f in self.files if files is None else files:
            digest, size = self.digest(f)
            out.append({"path": self.rel(f), "sha256": digest, "size": size})
        return out

    def origin(self, *, mode: str, files: Iterable[Path] | None = None, **extra: Any) -> dict[str, Any]:
        """The ``imported_from`` block of an imported run's ``run.json``."""
        from labledger import __version__
        from labledger.store.environment import environment

        env = environment()
        return {
            "format": self.fmt,
            "source": str(self.path),
            "sha256": self.sha256(),
            "mode": mode,
            "files": self.file_entries(files),
            "importer": {
                "time": time.time(),
                "host": env["host"],
                "user": env["user"],
                "labledger": __version__,
                "argv": env["argv"],
            },
            **extra,
        }

    def copy_into(self, run: Run, files: Iterable[Path] | None = None, *, prefix: str = "source") -> dict[str, str]:
        """Copy ``files`` (default: all) into the run under ``files/<prefix>/``; returns
        ``{original relative path: stored name}`` (names are made safe for the ledger)."""
        stored: dict[str, str] = {}
        for f in self.files if files is None else files:
            rel = self.rel(f)
            name = f"{prefix}/{safe_relpath(rel)}" if prefix else safe_relpath(rel)
            run.log_file(name, f)
            stored[rel] = name
        return stored


def refuse_symlinks_out(root: Path) -> None:
    """Raise :class:`ImportSourceError` naming the first symlink under ``root`` that leads out of it.

    An importer reads files of a folder by name (``batches.jsonl``, ``evals/*/results.jsonl``):
    a symlink there to a file elsewhere would be read, hashed and, with ``--copy``, stored.
    """
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            if os.path.islink(p) and not inside(p, root):
                raise ImportSourceError(
                    f"{p}: a symlink out of the source folder (to {os.path.realpath(p)}); "
                    f"the import does not follow it (remove it, or copy the file into the folder)"
                )


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, symlinks resolved, is ``root`` or lies under it."""
    return Path(os.path.realpath(path)).is_relative_to(Path(os.path.realpath(root)))


def walk_files(root: Path, *, skip_dirs: Iterable[str] = (), follow_symlinks: bool = False) -> list[Path]:
    """Every regular file under ``root``, sorted; hidden files and folders (``.lock``, ``.trash``,
    ``.DS_Store``) and folders named in ``skip_dirs`` are left out.

    A symlink is followed only when it stays inside ``root``; one that leads out of it (to
    ``/etc/passwd``, to another user's files) is left out unless ``follow_symlinks``, so an import
    never reads, hashes or copies a file outside the folder it was given.
    """
    skip = set(skip_dirs)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in skip
            and not d.startswith(".")
            and (follow_symlinks or not os.path.islink(os.path.join(dirpath, d)) or inside(Path(dirpath) / d, root))
        )
        for name in filenames:
            if name.startswith("."):
                continue
            p = Path(dirpath) / name
            if p.is_file() and (follow_symlinks or inside(p, root)):
                out.append(p)
    return sorted(out)


def safe_relpath(rel: str) -> str:
    """A relative path whose components the ledger accepts for ``log_file`` (letters, digits,
    ``.-_``; no hidden components).

    >>> safe_relpath("logs/run 1/.hidden/ev@1")
    'logs/run_1/_hidden/ev_1'
    """
    parts = []
    for part in rel.replace("\\", "/").split("/"):
        if part in ("", ".", ".."):
            continue
        part = _UNSAFE.sub("_", part)
        if part.startswith("."):
            part = "_" + part[1:]
        parts.append(part or "_")
    return "/".join(parts) or "_"


def new_run(
    stage: Ledger,
    name: str,
    *,
    source: Source,
    opts: ImportOptions,
    config: Mapping[str, Any] | None,
    started: float | None,
    group: str | None = None,
    tags: Iterable[str] = (),
    environment: Mapping[str, Any] | None = None,
    files: Iterable[Path] | None = None,
    meta: Mapping[str, Any] | None = None,
    **origin_extra: Any,
) -> Run:
    """A run in the staging ledger for an import, with ``imported_from`` (plus ``origin_extra``) and
    ``meta`` in its ``run.json``, and the environment keys set from ``environment`` (what the source
    says) or None."""
    env = dict.fromkeys(ENVIRONMENT_KEYS)
    env.update(environment or {})
    mode = "copy" if opts.copy else "reference"
    meta = {**env, **dict(meta or {}), "imported_from": source.origin(mode=mode, files=files, **origin_extra)}
    return Run(
        name,
        group=opts.group if opts.group is not None else group,
        tags=(*opts.tags, *tags),
        config=config,
        ledger=stage,
        started=started,
        extra_meta=meta,
    )


def log_results_file(run: Run, name: str, path: Path) -> int:
    """Store ``path`` as the run's result set ``name`` (validated, stored byte for byte); returns
    the number of rows stored (from the set's ``meta.json``, so the file is read only once)."""
    stored = run.log_results(name, path)
    return read_json(stored.parent / "meta.json")["rows"]


def finish_import(
    run: Run, fields: Mapping[str, str], *, ended: float | None, status: str = "finished", error: str | None = None
) -> None:
    """Finish an imported run, recording in ``run.json`` what each part of the source became."""
    run.meta["imported_from"]["fields"] = dict(fields)
    run.finish(status, ended=ended, error=error)


def load_jsonl(path: Path, *, display: str | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` for each line; a bad line raises naming file and line."""
    for lineno, _, value in iter_decoded(path, display=display, damaged="raise", objects=False):
        yield lineno, value


def load_json(path: Path) -> Any:
    """One JSON document; a malformed one raises naming the file and the line of the fault."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportSourceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        line = getattr(exc, "lineno", None)
        raise RecordError(
            f"not valid JSON ({exc.msg if hasattr(exc, 'msg') else exc})", source=str(path), line=line
        ) from None


def relocate(exc: RecordError, *, source: str, line: int | None = None, prefix: str = "") -> RecordError:
    """The same validation error, told against a file (and line) of the source."""
    fld = f"{prefix}{exc.field}" if exc.field else (prefix.rstrip(".") or None)
    return RecordError(exc.detail, source=source, line=line if line is not None else exc.line, field=fld)


def is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def file_times(files: Iterable[Path]) -> tuple[float | None, float | None]:
    """Earliest and latest modification time of ``files`` (None when there are none)."""
    times = [f.stat().st_mtime for f in files]
    return (min(times), max(times)) if times else (None, None)


#: Records encoded and written per chunk by :func:`log_scalar_columns` (bounds its memory).
CHUNK = 50_000


def _json_items(values: np.ndarray) -> list[bytes]:
    """Each element of a numeric array as orjson writes it (NaN and infinities as ``null``)."""
    if values.size == 0:
        return []
    return orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")


def log_scalar_columns(
    run: Run,
    names: Sequence[str],
    step: np.ndarray,
    wall_time: np.ndarray,
    starts: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
) -> int:
    """Log scalar records given as columns, byte for byte what ``run.log(step, time=t, **values)``
    would write for each; returns the number of records.

    Record ``i`` has ``step[i]``, ``wall_time[i]`` and the values ``value[starts[i]:starts[i + 1]]`` of
    the scalars ``names[key[...]]`` (in that order). The lines are built from orjson's encoding of
    each column, never from per-record dicts.

    >>> import tempfile, labledger, numpy as np
    >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
    ...     log_scalar_columns(run, ["loss", "acc"], np.array([1, 2]), np.array([10.0, 11.0]),
    ...                        np.array([0, 2, 3]), np.array([0, 1, 0]), np.array([0.5, 0.25, 0.4]))
    2
    >>> (run.dir / "metrics.jsonl").read_text().splitlines()[1]
    '{"step":2,"time":11.0,"loss":0.4}'
    """
    step = np.asarray(step, dtype=np.int64)
    wall_time = np.asarray(wall_time, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.int64)
    key = np.asarray(key, dtype=np.int64)
    value = np.asarray(value, dtype=np.float64)
    n = step.size
    if n == 0:
        return 0
    last: dict[str, Any] = {"time": float(wall_time[-1])}
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    if key.size:
        # The last value of each scalar: the last position of each key.
        rev_first = np.unique(key[::-1], return_index=True)
        for k, pos in zip(rev_first[0].tolist(), rev_first[1].tolist()):
            last[names[k]] = float(value[key.size - 1 - pos])
        finite = np.isfinite(value)
        if finite.any():
            fk, fv = key[finite], value[finite]
            order = np.argsort(fk, kind="stable")
            fk, fv = fk[order], fv[order]
            cuts = np.flatnonzero(np.diff(fk)) + 1
            bounds = np.concatenate([[0], cuts, [fk.size]])
            lows = np.minimum.reduceat(fv, bounds[:-1])
            highs = np.maximum.reduceat(fv, bounds[:-1])
            for k, lo, hi in zip(fk[bounds[:-1]].tolist(), lows.tolist(), highs.tolist()):
                low[names[k]], high[names[k]] = lo, hi
    counts = np.diff(starts)
    for a in range(0, n, CHUNK):
        b = min(a + CHUNK, n)
        lines = _encode_records(names, step[a:b], wall_time[a:b], starts[a:b], counts[a:b], key, value)
        run.log_encoded_scalars(
            lines,
            records=b - a,
            max_step=int(step[a:b].max()),
            last=last if b == n else {},
            low=low if b == n else {},
            high=high if b == n else {},
        )
    return n


def _encode_records(
    names: Sequence[str],
    step: np.ndarray,
    wall_time: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
) -> bytes:
    """The JSON lines of some records: records with the same scalars (in the same order) share one
    bytes template, filled with orjson's encoding of their step, time and value columns."""
    out = np.empty(step.size, dtype=object)
    names_json = [orjson.dumps(str(name)).replace(b"%", b"%%") for name in names]
    for c in np.unique(counts).tolist():
        rec = np.flatnonzero(counts == c)
        pos = starts[rec][:, None] + np.arange(c)
        keys = key[pos]
        base = max(len(names), 1)
        if base**c < 2**62:  # each row's keys as one integer: a 1-D unique, no row sort
            sig = keys @ (base ** np.arange(c, dtype=np.int64))
            _, first, inverse = np.unique(sig, return_index=True, return_inverse=True)
            shapes = keys[first]
        else:
            shapes, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        for g, shape in enumerate(shapes.tolist()):
            sel = np.flatnonzero(inverse == g) if len(shapes) > 1 else np.arange(rec.size)
            tmpl = b'{"step":%b,"time":%b' + b"".join(b"," + names_json[k] + b":%b" for k in shape) + b"}\n"
            cols = [_json_items(step[rec[sel]]), _json_items(wall_time[rec[sel]])]
            cols += [_json_items(value[pos[sel, j]]) for j in range(c)]
            out[rec[sel]] = [tmpl % r for r in zip(*cols)]
    return b"".join(out.tolist())


#: Names a scalar cannot have in a record (the record's own fields); importers add ``_``.
RESERVED = ("step", "time")


def record_name(name: str, renamed: dict[str, str]) -> str:
    """``name`` as a scalar of a record: ``step``/``time`` become ``step_``/``time_`` (noted in ``renamed``).

    >>> seen = {}; record_name("time", seen), record_name("loss", seen), seen
    ('time_', 'loss', {'time': 'time_'})
    """
    if name in RESERVED:
        renamed[name] = name + "_"
        return renamed[name]
    return name


def scalar_notes(skipped: Mapping[str, int], renamed: Mapping[str, str], *, kept: str, names: str) -> list[str]:
    """The notes of a scalar import (TensorBoard, W&B): what was not imported, what was renamed.

    >>> scalar_notes({"histo": 2}, {"step": "step_"}, kept="only scalars are", names="Tags")
    ['Not imported (only scalars are): 2 histo value(s).', "Tags renamed because step and time are the record's own fields: step -> step_."]
    """
    notes = []
    if skipped:
        notes.append(
            f"Not imported ({kept}): " + ", ".join(f"{n} {k} value(s)" for k, n in sorted(skipped.items())) + "."
        )
    if renamed:
        notes.append(
            f"{names} renamed because step and time are the record's own fields: "
            + ", ".join(f"{a} -> {b}" for a, b in sorted(renamed.items()))
            + "."
        )
    return notes
