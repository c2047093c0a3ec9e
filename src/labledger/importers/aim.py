"""Import Aim repositories: a folder holding ``.aim/`` (or the ``.aim`` folder itself).

Read with Aim's own classes (``aim.Repo``, ``aim.Run(hash, read_only=True)``, its metric
sequences); the ``aim`` package is required. Aim writes each run into its own RocksDB chunks
(``.aim/meta/chunks/<hash>``, ``.aim/seqs/chunks/<hash>``), and its readers go through an index
(``.aim/meta/index``) that only Aim's indexing thread fills, which runs inside ``aim up`` / ``aim
server`` (or ``aim reindex``): without one, ``Repo.iter_runs()`` yields nothing and a run's
``run[...]`` raises ``KeyError`` even after ``run.close()``. So :func:`read_repo` reads each run
from its own chunks, opened read-only, and never writes to the repository (no re-index, no
write-ahead-log folding, no upgrade: a repository of an older Aim version is refused with what to
run).

Each run becomes one labledger run: its name (else its hash), experiment (the group), tags,
description (a note), params (the config; Aim's own ``__system_params`` left out), creation and
end time. Every metric sequence (name, context) is a scalar key: ``loss`` for the empty context,
``loss[subset=train]`` for ``{"subset": "train"}`` (context keys sorted, nested keys dotted), and
points at the same step become one scalar record (``time``: the earliest point's; ``epoch``: the
epoch tracked with them, when one was). Aim's system metrics (``__system__*``) are the run's
system records. Images, texts, distributions and other sequences are counted in a note. A run
without an end time (still running, or its process died) is imported as failed.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labledger.errors import ImportSourceError
from labledger.importers.source import ImportedRun, ImportOptions, Source, finish_import, new_run
from labledger.store.jsonl import RECORD_FILES, Appender
from labledger.store.ledger import Ledger

FORMAT = "aim"
RESERVED = ("step", "time")
SYSTEM_PREFIX = "__system__"
METRIC_DTYPES = ("float", "float64", "int")
#: Files RocksDB and Aim rewrite on every open (logs, locks): left out of the content hash.
_VOLATILE = ("LOCK", "LOG")
_KEPT_DIRS = ("meta/chunks", "seqs/chunks")


def _aim_dir(path: Path) -> Path | None:
    """The ``.aim`` folder that ``path`` is or holds, when it looks like an Aim repository."""
    cand = path if path.name == ".aim" else path / ".aim"
    return cand if cand.is_dir() and (cand / "meta").is_dir() else None


def detect(path: Path) -> bool:
    """A folder holding an Aim repository (``.aim/meta``), or the ``.aim`` folder itself."""
    return path.is_dir() and _aim_dir(path) is not None


def _repo_files(aim_dir: Path) -> list[Path]:
    out = [p for p in (aim_dir / "run_metadata.sqlite", aim_dir / "VERSION") if p.is_file()]
    for sub in _KEPT_DIRS:
        for dirpath, _dirs, names in os.walk(aim_dir / sub):
            out.extend(Path(dirpath) / n for n in names if not n.startswith(_VOLATILE))
    return sorted(out)


def make_source(path: Path) -> Source:
    aim_dir = _aim_dir(path)
    if aim_dir is None:
        raise ImportSourceError(f"{path}: not an Aim repository (no .aim/meta folder)")
    files = _repo_files(aim_dir)
    if not any(p.parent.parent.name == "chunks" for p in files):
        raise ImportSourceError(f"{aim_dir}: an Aim repository without runs (.aim/meta/chunks is empty)")
    return Source(path, FORMAT, files)


@dataclass
class AimRun:
    """What one Aim run holds, read out of the repository before anything is written."""

    hash: str
    name: str | None
    experiment: str | None
    tags: list[str]
    description: str | None
    created: float | None
    ended: float | None
    params: dict[str, Any]
    sequences: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    others: Counter[str] = field(default_factory=Counter)


def read_repo(aim_dir: Path) -> list[AimRun]:
    """Every run of the Aim repository ``aim_dir`` (a ``.aim`` folder), oldest first; writes nothing there.

    Aim's ``Repo`` and ``Run(hash, read_only=True)`` are used, with their storage containers made
    here, because Aim would otherwise (1) read through the index, empty unless ``aim up`` or ``aim
    reindex`` ran; (2) open each run's RocksDB chunk for writing, to fold its write-ahead log into
    table files ("optimize for read", also done by its union of chunks, which deletes an index it
    finds corrupted). So each run's two chunks are opened read-only without that optimisation
    (RocksDB replays the write-ahead log in memory), and the run's own meta chunk serves as the
    repository's meta tree while the run is read.
    """
    try:
        import aim
        import aimrocks.errors
        from aim.sdk.repo import ContainerConfig, Repo, RepoStatus
        from aim.storage.rockscontainer import RocksContainer
    except ImportError:
        raise ImportSourceError(
            f"{aim_dir}: importing Aim repositories needs the aim package (pip install 'labledger[importers]')"
        ) from None
    root = str(aim_dir.parent)
    if Repo.check_repo_status(root) != RepoStatus.UPDATED:
        version = ".".join(map(str, Repo.get_version(root)))
        raise ImportSourceError(
            f"{aim_dir}: written by an older Aim (repository version {version}); run `aim upgrade` on a copy "
            "(the import never writes the original), then import that"
        )
    if not (aim_dir / "run_metadata.sqlite").is_file():  # Aim would create it in the original
        raise ImportSourceError(f"{aim_dir}: not a complete Aim repository (no run_metadata.sqlite)")
    repo = Repo(root)
    failures = (KeyError, ValueError, OSError, aimrocks.errors.Corruption, aimrocks.errors.RocksIOError)
    out = []
    for run_hash in sorted(repo.list_all_runs()):
        containers = {}
        run = None
        path = aim_dir / "meta" / "chunks" / run_hash
        try:
            for name in ("meta", "seqs"):
                path = aim_dir / name / "chunks" / run_hash
                container = RocksContainer(str(path), read_only=True, skip_read_optimization=True, wait_if_busy=False)
                containers[name] = container
                repo.container_pool[ContainerConfig(name, run_hash, True)] = container
            repo.container_pool[ContainerConfig("meta", None, True)] = containers["meta"]
            path = aim_dir / "meta" / "chunks" / run_hash
            run = aim.Run(run_hash, repo=repo, read_only=True)
            seqs, others = _sequences(run)
            out.append(
                AimRun(
                    hash=run_hash,
                    name=run.name,
                    experiment=run.experiment,
                    tags=[str(t) for t in (run.tags or ())],
                    description=run.description,
                    created=run.creation_time,
                    ended=run.end_time,
                    params=_params(run),
                    sequences=seqs,
                    others=others,
                )
            )
        except failures as exc:
            detail = " ".join(str(exc).split())[:200]
            raise ImportSourceError(f"{path}: cannot read this Aim run ({type(exc).__name__}: {detail})") from None
        finally:
            del run  # before its containers close
            for container in containers.values():
                container.close()
            repo.container_pool.pop(ContainerConfig("meta", None, True), None)
    out.sort(key=lambda r: (r.created or 0.0, r.hash))
    return out


def context_key(name: str, context: Mapping[str, Any]) -> str:
    """The scalar key of an Aim metric sequence: its name, then its context in brackets.

    >>> context_key("loss", {}), context_key("loss", {"subset": "train", "a": {"b": 1}})
    ('loss', 'loss[a.b=1,subset=train]')
    """
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            flat[prefix] = value

    if context:
        walk("", dict(context))
    if not flat:
        return name
    return f"{name}[{','.join(f'{k}={v}' for k, v in sorted(flat.items()))}]"


def _params(run: Any) -> dict[str, Any]:
    try:
        params = run[...]
    except KeyError:  # a run with no params at all
        return {}
    return {k: v for k, v in (params or {}).items() if not str(k).startswith("__")}


def _sequences(run: Any) -> tuple[list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]], Counter[str]]:
    """``(key, steps, values, epochs, times)`` of every metric sequence, and the other kinds counted."""
    seqs = []
    for metric in run.metrics():
        steps, (values, epochs, times) = metric.data.numpy()
        seqs.append((context_key(metric.name, metric.context.to_dict()), steps, values, epochs, times))
    others: Counter[str] = Counter()
    try:
        traces = run.meta_run_tree.collect("traces")
    except KeyError:
        traces = {}
    for per_context in (traces or {}).values():
        for info in per_context.values():
            dtype = info.get("dtype", "float") if isinstance(info, dict) else "float"
            if dtype not in METRIC_DTYPES:
                others[str(dtype)] += 1
    return seqs, others


def _merged(seqs: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> list[tuple[Any, ...]]:
    """Every point as ``(step, key index, value, epoch, time)``, by step then key."""
    if not seqs:
        return []
    k = np.concatenate([np.full(len(s[1]), i, dtype=np.int32) for i, s in enumerate(seqs)])
    step = np.concatenate([s[1] for s in seqs]).astype(np.int64)
    value = np.concatenate([np.asarray(s[2], dtype=np.float64) for s in seqs])
    epoch = np.concatenate([np.asarray(s[3], dtype=np.float64) for s in seqs])
    when = np.concatenate([np.asarray(s[4], dtype=np.float64) for s in seqs])
    order = np.lexsort((k, step))
    return list(
        zip(
            step[order].tolist(),
            k[order].tolist(),
            value[order].tolist(),
            epoch[order].tolist(),
            when[order].tolist(),
            strict=True,
        )
    )


def _log_points(run: Any, keys: list[str], points: list[tuple[Any, ...]]) -> tuple[int, int]:
    """One scalar record per step; returns (records, values)."""
    n_records = n_values = 0
    cur: int | None = None
    values: dict[str, Any] = {}
    first_time = math.inf
    epoch: float | None = None

    def flush() -> None:
        nonlocal n_records, n_values
        rec: dict[str, Any] = {} if epoch is None else {"epoch": int(epoch) if epoch.is_integer() else epoch}
        rec.update(values)
        kwargs = {"time": first_time} if math.isfinite(first_time) else {}
        run.log(cur, **kwargs, **rec)
        n_records += 1
        n_values += len(values)

    for step, ki, value, ep, when in points:
        if step != cur:
            if cur is not None:
                flush()
            cur, values, first_time, epoch = step, {}, math.inf, None
        values[keys[ki]] = value
        if when < first_time:
            first_time = when
        if epoch is None and not math.isnan(ep):
            epoch = ep
    if cur is not None:
        flush()
    return n_records, n_values


def _log_system(run: Any, seqs: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> int:
    """Aim's ``__system__*`` sequences as the run's system records (one per sampling step)."""
    keys = [s[0][len(SYSTEM_PREFIX) :] for s in seqs]
    by_step: dict[int, dict[str, Any]] = {}
    for ki, s in enumerate(seqs):
        for st, v, t in zip(s[1].tolist(), np.asarray(s[2], dtype=np.float64).tolist(), s[4].tolist(), strict=True):
            rec = by_step.setdefault(st, {"time": t})
            rec["time"] = min(rec["time"], t)
            rec[keys[ki]] = v
    if not by_step:
        return 0
    out = Appender(run.dir / RECORD_FILES["system"])
    try:
        for st in sorted(by_step):
            out.append(by_step[st])
    finally:
        out.close()
    return len(by_step)


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One run per Aim run of the repository (see the module docstring)."""
    aim_dir = _aim_dir(source.path)
    if aim_dir is None:  # make_source checked
        raise ImportSourceError(f"{source.path}: not an Aim repository")
    out = []
    for arun in read_repo(aim_dir):
        files = [f for f in source.files if arun.hash in f.parts or f.parent == aim_dir]
        run = new_run(
            stage,
            opts.name or arun.name or arun.hash,
            source=source,
            opts=opts,
            config=arun.params,
            started=arun.created,
            group=arun.experiment,
            tags=arun.tags,
            files=files,
            meta={"aim": {"hash": arun.hash, "experiment": arun.experiment}},
            times_from="Aim's creation and end time of the run, and the time of each tracked point",
        )
        notes: list[str] = []
        with run:
            if arun.description:
                run.note(str(arun.description))
            seqs = arun.sequences
            system = [s for s in seqs if s[0].startswith(SYSTEM_PREFIX)]
            metrics = [s for s in seqs if not s[0].startswith(SYSTEM_PREFIX)]
            keys = [s[0] + "_" if s[0] in RESERVED else s[0] for s in metrics]
            n_records, n_values = _log_points(run, keys, _merged(metrics))
            n_system = _log_system(run, system)
            renamed = sorted(s[0] for s in metrics if s[0] in RESERVED)
            if arun.others:
                notes.append(
                    "Not imported (metrics are): "
                    + ", ".join(f"{n} {k} sequence(s)" for k, n in sorted(arun.others.items()))
                    + "."
                )
            if renamed:
                notes.append(
                    f"Metrics renamed because step and time are the record's own fields: {', '.join(renamed)}."
                )
            if opts.copy:
                source.copy_into(run, files)
            for text in notes:
                run.note(text)
            fields = {
                f".aim/meta/chunks/{arun.hash}": "params -> config; name, experiment, tags, description",
                f".aim/seqs/chunks/{arun.hash}": f"{len(metrics)} metric sequences ({n_values} points in "
                f"{n_records} records), {len(system)} system sequences ({n_system} records)",
            }
            ended = arun.ended
            if ended is None:
                last = max((float(s[4].max()) for s in seqs if len(s[4])), default=None)
                error = "the Aim run has no end time (still running, or its process ended before run.close())"
                finish_import(run, fields, ended=last, status="failed", error=error)
            else:
                finish_import(run, fields, ended=ended)
        out.append(
            ImportedRun(
                run.id,
                run.name,
                run.group,
                {"scalars": n_records, "values": n_values, "system": n_system, "notes": len(notes)},
                fields,
                notes,
            )
        )
    return out
