"""Import TensorBoard event files: scalars with their steps and wall times, hyperparameters.

Files are read as columns (:mod:`labledger.importers.tfrecord`): the TFRecord framing and
both CRCs of every record are checked with numpy, ``add_scalar`` events are decoded with numpy, and
every other record goes through TensorBoard's own ``Event`` protobuf, so the ``tensorboard``
package is required. As in TensorBoard, every folder holding event
files is one run (``SummaryWriter.add_scalars`` and ``add_hparams`` write sub-folders, which become
runs of their own); a folder's files are read in name order (their names start with the time they
were opened).

Each event with scalar values becomes one scalar record: ``step`` is the event's step, ``time`` its
wall time, and each value is keyed by its tag (``train/loss``). Both scalar encodings are read: the
TF1 ``simple_value`` and the TF2/PyTorch scalar tensor (plugin ``scalars``). Hyperparameters
written by ``add_hparams`` (plugin ``hparams``) go to the run's config. Other summaries
(histograms, images, text, graphs) are counted in a note and not imported. A tag named ``step`` or
``time`` is stored as ``step_``/``time_`` (and the note says so). Bytes at the end of a file that do
not make a whole record (a writer that stopped mid-write) are reported in a note.

Restarts are honoured as TensorBoard's ``EventAccumulator`` honours them (its default
``purge_orphaned_data``): a ``SessionLog.START`` event (what ``SummaryWriter(purge_step=P)``
writes when a run restarts from a checkpoint at step P) seen after a ``file_version`` of 2 or more
drops every scalar record read before it, in the folder's files in name order, whose step is P or
more; the run's note counts what was dropped and names each restart. (Files without a
``file_version`` event, which TensorBoard purges by out-of-order steps per tag, are not purged.)
"""

from __future__ import annotations

import mmap
import re
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from labledger.errors import ImportSourceError
from labledger.importers import tfrecord
from labledger.importers.source import (
    ImportedRun,
    ImportOptions,
    Source,
    finish_import,
    log_scalar_columns,
    new_run,
    record_name,
    scalar_notes,
    walk_files,
)
from labledger.store.ledger import Ledger

FORMAT = "tensorboard"
MARK = "tfevents"


def _reader():
    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        raise ImportSourceError(
            "reading TensorBoard event files needs the 'tensorboard' package (labledger reads them with "
            "TensorBoard's own event reader): pip install tensorboard, or pip install 'labledger[importers]'"
        ) from None
    return event_pb2


def is_event_file(path: Path) -> bool:
    return path.is_file() and MARK in path.name


def event_files(path: Path) -> list[Path]:
    """The event files of ``path`` (itself, or every one under it)."""
    if path.is_file():
        return [path] if is_event_file(path) else []
    return [p for p in walk_files(path) if MARK in p.name]


def detect(path: Path) -> bool:
    """An event file, or a folder with event files anywhere under it."""
    if path.is_file():
        return is_event_file(path)
    return path.is_dir() and any(MARK in p.name for p in path.rglob("*tfevents*"))


def make_source(path: Path) -> Source:
    files = event_files(path)
    if not files:
        raise ImportSourceError(f"{path}: no TensorBoard event files (names containing '{MARK}')")
    return Source(path, FORMAT, files)


def _scalar(value: Any, tensor_util: Any) -> float | None:
    """The number of a scalar summary value, or None when it is not a scalar."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    plugin = value.metadata.plugin_data.plugin_name
    if plugin != "scalars" and not (
        plugin == "" and len(value.tensor.tensor_shape.dim) == 0 and value.metadata.data_class == 1
    ):
        return None
    t = value.tensor
    if t.float_val:
        return float(t.float_val[0])
    if t.double_val:
        return float(t.double_val[0])
    arr = tensor_util.make_ndarray(t)
    return float(arr.reshape(-1)[0]) if arr.size == 1 else None


def _hparams(value: Any) -> dict[str, Any]:
    """Hyperparameters of an ``hparams`` plugin ``session_start_info`` value (else empty)."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    if not data.HasField("session_start_info"):
        return {}
    out: dict[str, Any] = {}
    for name, v in data.session_start_info.hparams.items():
        kind = v.WhichOneof("kind")
        if kind == "number_value":
            num = v.number_value
            out[name] = int(num) if num.is_integer() else num
        elif kind == "string_value":
            out[name] = v.string_value
        elif kind == "bool_value":
            out[name] = v.bool_value
        else:
            out[name] = None
    return out


def _groups(source: Source) -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = {}
    for f in source.files:
        rel_dir = Path(source.rel(f)).parent.as_posix()
        groups.setdefault(rel_dir, []).append(f)
    return dict(sorted(groups.items()))


class _File:
    """One event file read as columns, a window at a time (:class:`~labledger.importers.tfrecord.EventWindows`):
    the ``add_scalar`` records decoded, the payloads of the others kept for the protobuf decoder."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self._fh = open(path, "rb")  # noqa: SIM115 - closed once its windows are read
            self._windows = tfrecord.EventWindows(self._fh, tfrecord.CHUNK)
            self._it = iter(self._windows)
            self._first = next(self._it, None)
        except OSError as exc:
            raise ImportSourceError(f"{path}: cannot read ({exc.strerror or exc})") from None
        self._payloads: dict[int, bytes] = self._first[1] if self._first else {}

    @property
    def size(self) -> int:
        return self._windows.size

    @property
    def consumed(self) -> int:
        return self._windows.consumed

    def first_wall_time(self, event_pb2: Any) -> float | None:
        """The wall time of the file's first record (None when it has none)."""
        if self._first is None:
            return None
        sc = self._first[0]
        if sc.index.size and sc.index[0] == 0:
            return float(sc.wall_time[0])
        return self.event(0, event_pb2).wall_time

    def windows(self) -> Iterator[tfrecord.ScalarEvents]:
        """The scalar events of each window in file order (``event`` decodes the window's others)."""
        try:
            if self._first is not None:
                yield self._first[0]
                self._first = None
                for sc, payloads in self._it:
                    self._payloads = payloads
                    yield sc
        except OSError as exc:
            raise ImportSourceError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        finally:
            self._fh.close()

    def event(self, i: int, event_pb2: Any) -> Any:
        return event_pb2.Event.FromString(self._payloads[i])


#: The bytes of an ``Event`` holding a ``SessionLog.START``: ``wall_time`` (field 1, 8 bytes), maybe
#: ``step`` (field 2, a varint), then field 7 (``session_log``), its length and its field 1
#: (``status``) = 1. A file without them holds no restart.
_START = re.compile(rb"\x09.{8}(?:\x10[\x80-\xff]{0,9}[\x00-\x7f])?\x3a[\x80-\xff]{0,4}[\x00-\x7f]\x08\x01", re.DOTALL)


def _first_version(path: Path, event_pb2: Any) -> float | None:
    """The ``file_version`` of a file's first event (writers put it there), or None."""
    from google.protobuf.message import DecodeError
    from tensorboard.backend.event_processing.event_util import ParseFileVersion

    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
            if len(head) < 12 or tfrecord.masked_crc32c(head[:8]) != struct.unpack_from("<I", head, 8)[0]:
                return None  # no whole first record, or a damaged length: the main pass reports it
            length = struct.unpack_from("<Q", head)[0]
            if length > path.stat().st_size:
                return None
            ev = event_pb2.Event.FromString(fh.read(length))
    except (OSError, DecodeError):  # an unreadable or damaged first record: the main pass reports it
        return None
    return ParseFileVersion(ev.file_version) if ev.HasField("file_version") else None


def restarts(files: list[Path], event_pb2: Any) -> list[tuple[int, int, int]]:
    """``(file position, record index, step)`` of each restart TensorBoard's ``EventAccumulator``
    honours in one run folder's ``files`` (in the order it reads them): a ``SessionLog.START``
    event seen when the last ``file_version`` read was 2 or more. Files are decoded only where
    the bytes of a START event occur."""
    from google.protobuf.message import DecodeError
    from tensorboard.backend.event_processing.event_util import ParseFileVersion

    out: list[tuple[int, int, int]] = []
    version: float | None = None
    start = event_pb2.SessionLog.START
    for pos, f in enumerate(files):
        try:
            with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                candidate = _START.search(mm) is not None
        except (OSError, ValueError):  # an empty file (mmap refuses it) or one the main pass reports
            candidate = False
        if not candidate:
            version = _first_version(f, event_pb2) or version
            continue
        with open(f, "rb") as fh:
            for sc, payloads in tfrecord.EventWindows(fh, tfrecord.CHUNK):
                for i in sc.rest.tolist():
                    try:
                        ev = event_pb2.Event.FromString(payloads[i])
                    except DecodeError:  # reported by the main pass
                        continue
                    if ev.HasField("file_version"):
                        version = ParseFileVersion(ev.file_version)
                    if version and version >= 2 and ev.HasField("session_log") and ev.session_log.status == start:
                        out.append((pos, i, int(ev.step)))
    return out


class _Purge:
    """Which records of one file TensorBoard hides: a record is dropped when a restart read after
    it (later in the file, or in a later file) has a step at or below the record's step."""

    def __init__(self, restarts: list[tuple[int, int, int]], pos: int):
        same = sorted((i, step) for p, i, step in restarts if p == pos)
        later = min((step for p, _, step in restarts if p > pos), default=None)
        self.index = np.array([i for i, _ in same], dtype=np.int64)
        steps = np.array([step for _, step in same] + [later if later is not None else np.iinfo(np.int64).max])
        self.limit = np.minimum.accumulate(steps[::-1])[::-1].astype(np.int64)  # min of each suffix
        self.active = bool(same) or later is not None

    def keep(self, event: np.ndarray, step: np.ndarray) -> np.ndarray:
        """Whether each record (its index in the file, its step) stays."""
        return step < self.limit[np.searchsorted(self.index, event, side="right")]


def _decode_error(source: Source, f: Path, exc: Exception) -> ImportSourceError:
    return ImportSourceError(f"{source.rel(f)}: a record is not a TensorBoard Event protobuf ({exc})")


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One run per folder of event files (see the module docstring)."""
    event_pb2 = _reader()
    from google.protobuf.message import DecodeError
    from tensorboard.util import tensor_util

    base = source.path.name if source.path.is_dir() else source.path.parent.name
    base = opts.name or base or "tensorboard"
    groups = _groups(source)
    several = len(groups) > 1
    out = []
    for rel_dir, files in groups.items():
        name = base if rel_dir == "." else f"{base}/{rel_dir}"
        read: dict[Path, _File] = {}
        started = None
        for f in files:  # the first record of the first file that has one
            read[f] = _File(f)
            started = read[f].first_wall_time(event_pb2)
            if started is not None:
                break
        run = new_run(
            stage,
            name,
            source=source,
            opts=opts,
            config={},
            started=started,
            group=base if several else None,
            files=files,
            times_from="the first and last event's wall time",
            run_folder=rel_dir,
        )
        skipped: Counter[str] = Counter()
        renamed: dict[str, str] = {}
        fields: dict[str, str] = {}
        notes: list[str] = []
        n_records = n_values = 0
        first_time = last_time = started
        tag_ids: dict[str, int] = {}

        def tag_id(tag: str, renamed: dict[str, str] = renamed, tag_ids: dict[str, int] = tag_ids) -> int:
            return tag_ids.setdefault(record_name(tag, renamed), len(tag_ids))

        purges = restarts(files, event_pb2)
        dropped = [0, 0]  # records, values hidden by a restart
        with run:
            for pos, f in enumerate(files):
                purge = _Purge(purges, pos)
                tf = read.pop(f, None) or _File(f)
                has_hparams = False
                n_file = 0
                for sc in tf.windows():
                    # The records of other shapes, through the protobuf decoder: (event index, order
                    # within the event, step, wall time, [(tag id, value)]).
                    slow: list[tuple[int, int, int, float, list[tuple[int, float]]]] = []
                    slow_times: list[float] = []
                    for i in sc.rest.tolist():
                        try:
                            ev = tf.event(i, event_pb2)
                        except DecodeError as exc:
                            raise _decode_error(source, f, exc) from None
                        slow_times.append(ev.wall_time)
                        what = ev.WhichOneof("what")
                        if what == "session_log" and ev.session_log.status == event_pb2.SessionLog.START:
                            continue  # a restart: honoured (see restarts)
                        if what != "summary":
                            if what not in (None, "file_version"):
                                skipped[what] += 1
                            continue
                        values: dict[int, float] = {}
                        sub = 0
                        for v in ev.summary.value:
                            try:
                                x = _scalar(v, tensor_util)
                            except (TypeError, ValueError, IndexError) as exc:  # a tensor that does not decode
                                raise _decode_error(source, f, exc) from None
                            if x is not None:
                                k = tag_id(v.tag)
                                if k in values:  # the same tag twice in one event: keep both records
                                    slow.append((i, sub, ev.step, ev.wall_time, list(values.items())))
                                    sub += 1
                                    values = {}
                                values[k] = x
                                continue
                            plugin = v.metadata.plugin_data.plugin_name
                            if plugin == "hparams":
                                try:
                                    hp = _hparams(v)
                                except DecodeError as exc:
                                    raise _decode_error(source, f, exc) from None
                                if hp:
                                    run.update_config(hp)
                                    has_hparams = True
                                continue
                            skipped[plugin or v.WhichOneof("value") or "unknown"] += 1
                        if values:
                            slow.append((i, sub, ev.step, ev.wall_time, list(values.items())))
                    fast_keys = np.array([tag_id(t) for t in sc.tags], dtype=np.int64)
                    n_window, gone = _log_file_scalars(run, tag_ids, sc, fast_keys, slow, purge)
                    n_file += n_window
                    n_records += sc.index.size + len(slow) - gone[0]
                    n_values += n_window
                    dropped[0] += gone[0]
                    dropped[1] += gone[1]
                    times = np.concatenate([sc.wall_time, np.array(slow_times, dtype=np.float64)])
                    if times.size:
                        lo, hi = float(times.min()), float(times.max())
                        first_time = lo if first_time is None or lo < first_time else first_time
                        last_time = hi if last_time is None or hi > last_time else last_time
                size, consumed = tf.size, tf.consumed
                if consumed < size:
                    notes.append(
                        f"{source.rel(f)}: the last {size - consumed} bytes are not a complete "
                        "record (the writer stopped mid-write, or the file is damaged); the "
                        "records before them were imported."
                    )
                fields[source.rel(f)] = f"scalars ({n_file} values)" + (
                    "; hyperparameters -> config" if has_hparams else ""
                )
                del tf
            if purges:
                where = "; ".join(f"{source.rel(files[p])} record {i}: step {step}" for p, i, step in purges)
                notes.append(
                    f"Restarts (SessionLog START, as SummaryWriter(purge_step=P) writes) honoured as TensorBoard "
                    f"does: {dropped[0]} scalar record(s) ({dropped[1]} values) read before a restart at a step "
                    f">= its P were dropped ({where})."
                )
            notes += scalar_notes(skipped, renamed, kept="only scalars and hyperparameters are", names="Tags")
            if opts.copy:
                copied = source.copy_into(run, files)
                for rel, stored in copied.items():
                    fields[rel] += f"; original copied to files/{stored}"
            for text in notes:
                run.note(text)
            if first_time is not None and started is not None and first_time < started:
                # An event older than the file's first one (writers stamp events when they are made).
                run.meta["started"] = first_time
                stage.update_run(run.id, started=first_time)
            finish_import(run, fields, ended=last_time)
        out.append(
            ImportedRun(
                run.id,
                run.name,
                run.group,
                {"scalars": n_records, "values": n_values, "notes": len(notes)},
                fields,
                notes,
            )
        )
    return out


def _log_file_scalars(
    run: Any,
    tag_ids: dict[str, int],
    sc: tfrecord.ScalarEvents,
    fast_keys: np.ndarray,
    slow: list[tuple[int, int, int, float, list[tuple[int, float]]]],
    purge: _Purge | None = None,
) -> tuple[int, tuple[int, int]]:
    """Log one file's scalar records in file order (decoded columns and protobuf-decoded events
    merged by record index), leaving out those a restart hides (``purge``); returns the number of
    values logged and ``(records, values)`` left out."""
    n_fast = sc.index.size
    counts = np.concatenate([np.ones(n_fast, dtype=np.int64), [len(r[4]) for r in slow]]).astype(np.int64)
    event = np.concatenate([sc.index, [r[0] for r in slow]]).astype(np.int64)
    sub = np.concatenate([np.zeros(n_fast, dtype=np.int64), [r[1] for r in slow]]).astype(np.int64)
    step = np.concatenate([sc.step, [r[2] for r in slow]]).astype(np.int64)
    wall = np.concatenate([sc.wall_time, [r[3] for r in slow]]).astype(np.float64)
    keys = np.concatenate([fast_keys[sc.tag], [k for r in slow for k, _ in r[4]]]).astype(np.int64)
    values = np.concatenate([sc.value, [x for r in slow for _, x in r[4]]]).astype(np.float64)
    gone = (0, 0)
    if purge is not None and purge.active and event.size:
        keep = purge.keep(event, step)
        if not keep.all():
            vkeep = np.repeat(keep, counts)
            gone = (int((~keep).sum()), int((~vkeep).sum()))
            counts, event, sub, step, wall = counts[keep], event[keep], sub[keep], step[keep], wall[keep]
            keys, values = keys[vkeep], values[vkeep]
            slow = [r for r, k in zip(slow, keep[n_fast:].tolist(), strict=True) if k]
    if slow:
        order = np.lexsort((sub, event))
        starts = np.concatenate([[0], np.cumsum(counts)])
        new_counts = counts[order]
        new_starts = np.concatenate([[0], np.cumsum(new_counts)])
        take = np.repeat(starts[order] - new_starts[:-1], new_counts) + np.arange(values.size)
        step, wall, keys, values, counts = step[order], wall[order], keys[take], values[take], new_counts
    starts = np.concatenate([[0], np.cumsum(counts)])
    names = sorted(tag_ids, key=tag_ids.__getitem__)
    log_scalar_columns(run, names, step, wall, starts, keys, values)
    return int(values.size), gone
