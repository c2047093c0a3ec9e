"""Read W&B's offline run files (``wandb/offline-run-*/run-*.wandb``) into plain dicts.

wandb 0.2x+ ships no Python reader for its record file (the old ``wandb.sdk.internal.datastore``
is gone), so this reads the container itself: a 7-byte header (``:W&B``, magic ``0xBEE1``, version
0) then LevelDB log blocks of 32 KiB, each record a chunk header (CRC-32C, length, type
FULL/FIRST/MIDDLE/LAST) and its bytes; the assembled bytes are decoded with W&B's own protobuf
classes (``wandb.proto.wandb_internal_pb2.Record``), so wandb must be installed.

>>> read_wandb_file.__name__
'read_wandb_file'
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labledger.errors import ImportSourceError

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def iter_chunks(data: bytes, source: str = "<wandb>") -> Iterator[bytes]:
    """Each record's bytes, reassembled from the LevelDB log chunks (a torn tail is dropped).

    >>> body = b"hi"
    >>> blob = HEADER + struct.pack("<IHB", 0, len(body), 1) + body
    >>> list(iter_chunks(blob))
    [b'hi']
    """
    if not data.startswith(HEADER[:4]):
        raise ImportSourceError(f"{source}: not a W&B run file (no ':W&B' header)")
    pos = len(HEADER)
    parts: list[bytes] = []
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # block trailer: zero padding
            pos += left
            continue
        _crc, length, kind = struct.unpack_from("<IHB", data, pos)
        pos += 7
        if kind == 0 and length == 0:
            pos += left - 7  # zero padding up to the next block
            continue
        chunk = data[pos : pos + length]
        if len(chunk) < length:
            break  # torn last record
        pos += length
        if kind == _FULL:
            yield chunk
            parts = []
        elif kind == _FIRST:
            parts = [chunk]
        elif kind == _MIDDLE:
            parts.append(chunk)
        elif kind == _LAST:
            parts.append(chunk)
            yield b"".join(parts)
            parts = []
        else:
            raise ImportSourceError(f"{source}: byte {pos - length - 7}: unknown chunk type {kind}")


def _key(item: Any) -> str:
    return ".".join(item.nested_key) if len(item.nested_key) else str(item.key)


def _value(item: Any) -> Any:
    return json.loads(item.value_json) if item.value_json else None


@dataclass
class WandbRunFile:
    """What one ``.wandb`` file holds: the run record, config, history rows, summary, files, exit code."""

    path: str
    run: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    exit_code: int | None = None


def regroup(row: dict[str, Any]) -> dict[str, Any]:
    """Put media values back together: W&B flattens ``{"img": {"_type": ..., "path": ...}}`` into
    ``img._type``, ``img.path``; a key with a ``._type`` child becomes one dict again.

    >>> regroup({"a.b": 1, "img._type": "image-file", "img.path": "p.png"})
    {'a.b': 1, 'img': {'_type': 'image-file', 'path': 'p.png'}}
    """
    prefixes = sorted((k[: -len("._type")] for k in row if k.endswith("._type")), key=len)
    if not prefixes:
        return row
    out: dict[str, Any] = {}
    for key, value in row.items():
        owner = next((p for p in prefixes if key.startswith(p + ".")), None)
        if owner is None:
            out[key] = value
        else:
            out.setdefault(owner, {})[key[len(owner) + 1 :]] = value
    return out


def _config_dict(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key = _key(item)
        if key == "_wandb":
            continue
        value = _value(item)
        if isinstance(value, dict) and set(value) == {"value", "desc"}:
            value = value["value"]  # config stored as {"value": v, "desc": None}
        out[key] = value
    return out


def read_wandb_file(path: str | os.PathLike[str]) -> WandbRunFile:
    """Read a W&B offline run file with W&B's protobuf classes (history rows keep ``_step``, ``_timestamp``)."""
    try:
        import importlib

        pb: Any = importlib.import_module("wandb.proto.wandb_internal_pb2")
        DecodeError: Any = importlib.import_module("google.protobuf.message").DecodeError
    except ImportError as exc:
        raise ImportSourceError(
            f"{path}: reading W&B run files needs the wandb package (pip install wandb): {exc}"
        ) from None
    src = Path(path)
    try:
        data = src.read_bytes()
    except OSError as exc:
        raise ImportSourceError(f"{src}: cannot read ({exc.strerror})") from None
    out = WandbRunFile(path=str(src))
    for raw in iter_chunks(data, str(src)):
        rec = pb.Record()
        try:
            rec.ParseFromString(raw)
        except DecodeError:  # a damaged record: skip it, as W&B's sync does
            continue
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            r = rec.run
            out.run = {
                "id": r.run_id,
                "project": r.project,
                "entity": r.entity,
                "group": r.run_group,
                "job_type": r.job_type,
                "name": r.display_name,
                "notes": r.notes,
                "tags": list(r.tags),
                "start_time": r.start_time.ToMicroseconds() / 1e6 if r.HasField("start_time") else None,
            }
            out.config.update(_config_dict(r.config.update))
        elif kind == "config":
            out.config.update(_config_dict(rec.config.update))
            for item in rec.config.remove:
                out.config.pop(_key(item), None)
        elif kind == "history":
            out.history.append(regroup({_key(i): _value(i) for i in rec.history.item}))
        elif kind == "summary":
            for item in rec.summary.update:
                out.summary[_key(item)] = _value(item)
            for item in rec.summary.remove:
                out.summary.pop(_key(item), None)
        elif kind == "metric":
            m = rec.metric
            out.metrics.append({"name": m.name or m.glob_name, "step_metric": m.step_metric or None})
        elif kind == "files":
            out.files.extend(f.path for f in rec.files.files)
        elif kind == "exit":
            out.exit_code = rec.exit.exit_code
    out.summary = regroup(out.summary)
    return out
