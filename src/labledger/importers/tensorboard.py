"""Import TensorBoard event files: scalars with their steps and wall times, hyperparameters.

Files are read with TensorBoard's own record reader
(``tensorboard.backend.event_processing.event_file_loader.RawEventFileLoader``) and its ``Event``
protobuf, so the ``tensorboard`` package is required. As in TensorBoard, every folder holding event
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
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from labledger.errors import ImportSourceError
from labledger.importers.source import (
    ImportedRun,
    ImportOptions,
    Source,
    finish_import,
    new_run,
    walk_files,
)
from labledger.store.ledger import Ledger

FORMAT = "tensorboard"
MARK = "tfevents"
RESERVED = ("step", "time")
#: Bytes around each TFRecord's payload: length (8), length CRC (4), payload CRC (4).
RECORD_OVERHEAD = 16


def _reader():
    try:
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        raise ImportSourceError(
            "reading TensorBoard event files needs the 'tensorboard' package (labledger reads them with "
            "TensorBoard's own event reader): pip install tensorboard, or pip install 'labledger[importers]'"
        ) from None
    return RawEventFileLoader, event_pb2


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


def _first_wall_time(files: list[Path], loader_cls: Any, event_pb2: Any) -> float | None:
    for f in files:
        for raw in loader_cls(str(f)).Load():
            return event_pb2.Event.FromString(raw).wall_time
    return None


def _groups(source: Source) -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = {}
    for f in source.files:
        rel_dir = Path(source.rel(f)).parent.as_posix()
        groups.setdefault(rel_dir, []).append(f)
    return dict(sorted(groups.items()))


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One run per folder of event files (see the module docstring)."""
    loader_cls, event_pb2 = _reader()
    from tensorboard.util import tensor_util

    base = source.path.name if source.path.is_dir() else source.path.parent.name
    base = opts.name or base or "tensorboard"
    groups = _groups(source)
    several = len(groups) > 1
    out = []
    for rel_dir, files in groups.items():
        name = base if rel_dir == "." else f"{base}/{rel_dir}"
        started = _first_wall_time(files, loader_cls, event_pb2)
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
        with run:
            for f in files:
                consumed = n_file = 0
                has_hparams = False
                for raw in loader_cls(str(f)).Load():
                    consumed += len(raw) + RECORD_OVERHEAD
                    ev = event_pb2.Event.FromString(raw)
                    if last_time is None or ev.wall_time > last_time:
                        last_time = ev.wall_time
                    if first_time is None or ev.wall_time < first_time:
                        first_time = ev.wall_time
                    what = ev.WhichOneof("what")
                    if what != "summary":
                        if what not in (None, "file_version"):
                            skipped[what] += 1
                        continue
                    values: dict[str, float] = {}
                    for v in ev.summary.value:
                        x = _scalar(v, tensor_util)
                        if x is not None:
                            tag = v.tag
                            if tag in RESERVED:
                                renamed[tag] = tag + "_"
                                tag = renamed[tag]
                            if tag in values:  # the same tag twice in one event: keep both records
                                run.log(ev.step, time=ev.wall_time, **values)
                                n_records += 1
                                values = {}
                            values[tag] = x
                            continue
                        plugin = v.metadata.plugin_data.plugin_name
                        if plugin == "hparams":
                            hp = _hparams(v)
                            if hp:
                                run.update_config(hp)
                                has_hparams = True
                            continue
                        skipped[plugin or v.WhichOneof("value") or "unknown"] += 1
                    if values:
                        run.log(ev.step, time=ev.wall_time, **values)
                        n_records += 1
                        n_values += len(values)
                        n_file += len(values)
                size = f.stat().st_size
                if consumed < size:
                    notes.append(
                        f"{source.rel(f)}: the last {size - consumed} bytes are not a complete "
                        "record (the writer stopped mid-write, or the file is damaged); the "
                        "records before them were imported."
                    )
                fields[source.rel(f)] = f"scalars ({n_file} values)" + (
                    "; hyperparameters -> config" if has_hparams else ""
                )
            if skipped:
                notes.append(
                    "Not imported (only scalars and hyperparameters are): "
                    + ", ".join(f"{n} {k} value(s)" for k, n in sorted(skipped.items()))
                    + "."
                )
            if renamed:
                notes.append(
                    "Tags renamed because step and time are the record's own fields: "
                    + ", ".join(f"{a} -> {b}" for a, b in sorted(renamed.items()))
                    + "."
                )
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
