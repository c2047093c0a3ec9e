"""Read W&B's offline run files (``wandb/offline-run-*/run-*.wandb``) into plain dicts.

wandb 0.2x+ ships no Python reader for its record file (the old ``wandb.sdk.internal.datastore``
is gone; ``wandb-core`` reads it in Go, ``core/pkg/leveldb``), so this reads the container itself:
a 7-byte header (``:W&B``, magic ``0xBEE1``, version 0) then LevelDB log blocks of 32 KiB, each
record one or more chunks (a header of checksum, length and type FULL/FIRST/MIDDLE/LAST, then
its bytes); the assembled bytes are decoded with W&B's own protobuf classes
(``wandb.proto.wandb_internal_pb2.Record``), so wandb must be installed.

Every chunk's checksum is verified as wandb's readers verify it: CRC-32 (zlib's, IEEE; not
LevelDB's masked CRC-32C) of the chunk's type byte followed by its bytes. The first chunk that
fails (a checksum, a length past its block, a type out of order, non-zero block padding, a record
protobuf or a value's JSON that does not decode) raises :class:`WandbFileDamage` naming the file
and the byte offset; with ``salvage=True`` :func:`read_wandb_file` instead returns the records
before it, with the damage recorded. A file that ends inside a record is what a writer killed
mid-log (or still writing) leaves, since wandb-core writes whole 32 KiB blocks: as wandb's own reader
("the end of an incomplete .wandb file"), :func:`read_wandb_file` returns the whole records before
it, the truncation recorded (``damage.truncated``), without ``salvage``.

>>> read_wandb_file.__name__
'read_wandb_file'
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labledger.errors import ImportSourceError

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


class WandbFileDamage(ImportSourceError):
    """A ``.wandb`` file whose bytes are not what wandb wrote, from byte ``offset`` on.

    ``reason`` says what failed there; ``truncated`` is true when the file ends inside a record (its
    writer was stopped mid-write, the copy was cut short, or it is still being written);
    ``records`` is how many whole, verified records come before ``offset``. The message is one
    line: ``<file>:<offset>: <reason>``.
    """

    def __init__(self, path: str, offset: int, reason: str, *, truncated: bool = False, records: int = 0):
        self.path, self.offset, self.reason, self.truncated, self.records = path, offset, reason, truncated, records
        super().__init__(f"{path}:{offset}: {reason}")


def chunk_crc(kind: int, body: bytes) -> int:
    """The checksum wandb stores in a chunk header: zlib's CRC-32 of the type byte then the bytes.

    >>> hex(chunk_crc(1, b"hi"))
    '0x67c98b76'
    """
    return zlib.crc32(body, zlib.crc32(bytes((kind,))))


def iter_records(data: bytes, source: str = "<wandb>") -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of each record, reassembled from its checksummed chunks; ``offset`` is the
    byte of its first chunk's header. Raises :class:`WandbFileDamage` at the first chunk that fails
    or where the file ends inside a record (see the module docstring), after yielding every record
    before it; a file that is not a W&B run file raises :class:`ImportSourceError`.

    >>> body = b"hi"
    >>> blob = HEADER + struct.pack("<IHB", chunk_crc(1, body), len(body), 1) + body
    >>> list(iter_records(blob))
    [(7, b'hi')]
    """
    if not data.startswith(HEADER[:4]):
        raise ImportSourceError(f"{source}: not a W&B run file (no ':W&B' header)")
    if data[: len(HEADER)] != HEADER:
        raise ImportSourceError(
            f"{source}: a W&B run file of another version (header {data[: len(HEADER)].hex()}; this reader "
            f"knows {HEADER.hex()})"
        )
    pos = len(HEADER)
    parts: list[bytes] = []
    start = pos  # the offset of the record being assembled
    count = 0

    def damage(at: int, reason: str, *, truncated: bool = False) -> WandbFileDamage:
        return WandbFileDamage(source, at, reason, truncated=truncated, records=count)

    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # block trailer: zero padding
            if data[pos : pos + left].strip(b"\0"):
                raise damage(pos, "non-zero bytes in a block's trailer (the padding must be zero)")
            pos += left
            continue
        if pos + 7 > len(data):
            raise damage(start if parts else pos, "truncated: the file ends inside a chunk header", truncated=True)
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        if crc == 0 and length == 0 and kind == 0 and not parts:
            # a zeroed rest of block, which wandb's reader skips; data after zeros is damage
            if data[pos : pos + left].strip(b"\0"):
                raise damage(pos, "a zeroed chunk header followed by data in its block (damaged bytes)")
            pos += left
            continue
        if kind not in (_FULL, _FIRST, _MIDDLE, _LAST):
            raise damage(pos, f"unknown chunk type {kind} (the chunk header is damaged)")
        if length > left - 7:
            raise damage(pos, f"a chunk of {length} bytes overflows its block ({left - 7} bytes left in it)")
        body = data[pos + 7 : pos + 7 + length]
        if len(body) < length:
            raise damage(
                start if parts else pos,
                f"truncated: the file ends inside a record ({len(body)} of its chunk's {length} bytes are there)",
                truncated=True,
            )
        if chunk_crc(kind, body) != crc:
            raise damage(
                pos, f"record checksum mismatch (stored {crc:08x}, computed {chunk_crc(kind, body):08x}): damaged bytes"
            )
        if kind in (_FULL, _FIRST) and parts:
            raise damage(pos, f"a record starts before the one at byte {start} ended (chunk type {kind})")
        if kind in (_MIDDLE, _LAST) and not parts:
            raise damage(pos, f"a continuation chunk (type {kind}) without the record's first chunk")
        if kind in (_FULL, _FIRST):
            start = pos
        pos += 7 + length
        if kind == _FULL:
            count += 1
            yield start, body
        elif kind == _FIRST:
            parts = [body]
        elif kind == _MIDDLE:
            parts.append(body)
        else:
            parts.append(body)
            count += 1
            yield start, b"".join(parts)
            parts = []
    if parts:
        raise damage(start, "truncated: the file ends inside a record that spans blocks", truncated=True)


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
    #: The environment records (host, os, python, program, args, root, git, ...), merged, with
    #: wandb's own field names (``MessageToDict`` of ``EnvironmentRecord``).
    environment: dict[str, Any] = field(default_factory=dict)
    #: Each logged artifact: name, type, digest, description, aliases, metadata and its manifest's
    #: files (``path``, ``size``, ``digest``).
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    #: Config keys W&B keeps for its own UI (``_wandb.visualize.<key>``: chart specs), left out of
    #: ``config``.
    internal_config: list[str] = field(default_factory=list)
    exit_code: int | None = None
    #: How many records were read (all of them, or those before ``damage``).
    records: int = 0
    #: Where the reading stopped: a truncated tail, or with ``salvage=True`` the damage (None when
    #: the whole file was read).
    damage: WandbFileDamage | None = None


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


def _internal(key: str) -> bool:
    """W&B's own config entries (``_wandb``, ``_wandb.visualize.<chart>``), not the user's config."""
    return key == "_wandb" or key.startswith("_wandb.")


def _config_dict(items: Any, internal: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key = _key(item)
        if _internal(key):
            if internal is not None and key != "_wandb" and key not in internal:
                internal.append(key)
            continue
        value = _value(item)
        if isinstance(value, dict) and set(value) == {"value", "desc"}:
            value = value["value"]  # config stored as {"value": v, "desc": None}
        out[key] = value
    return out


def read_wandb_file(path: str | os.PathLike[str], *, salvage: bool = False) -> WandbRunFile:
    """Read a W&B offline run file with W&B's protobuf classes (history rows keep ``_step``, ``_timestamp``).

    Every record is verified (see the module docstring). At the first damage it raises
    :class:`WandbFileDamage` (one line: file, byte offset, what failed; nothing of the file is
    returned), or with ``salvage`` returns what the records before the damage hold, the damage in
    ``.damage``. A file that ends inside a record is read up to there without ``salvage``
    (``.damage.truncated``). A record is taken whole or not at all: a record whose protobuf or one
    of whose JSON values does not decode is the damage, not skipped.
    """
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
    records = iter_records(data, str(src))
    try:
        for offset, raw in records:
            rec = pb.Record()
            try:
                rec.ParseFromString(raw)
            except DecodeError as exc:
                raise WandbFileDamage(
                    str(src), offset, f"a record that does not decode as a W&B record ({exc})", records=out.records
                ) from None
            try:
                _apply(out, rec)
            except ValueError as exc:  # json.JSONDecodeError: a value_json that is not JSON
                raise WandbFileDamage(
                    str(src),
                    offset,
                    f"a {rec.WhichOneof('record_type')} record with a value that is not JSON ({exc})",
                    records=out.records,
                ) from None
            out.records += 1
    except WandbFileDamage as exc:
        if not (salvage or exc.truncated):
            raise
        out.damage = exc
    out.summary = regroup(out.summary)
    return out


def _apply(out: WandbRunFile, rec: Any) -> None:
    """Add what one decoded record holds to ``out`` (all of it, or nothing when a value fails)."""
    kind = rec.WhichOneof("record_type")
    if kind == "run":
        r = rec.run
        config = _config_dict(r.config.update, out.internal_config)
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
            "resumed": bool(r.resumed or r.resume),
            "starting_step": r.starting_step,
            "sweep_id": r.sweep_id,
            "host": r.host,
        }
        out.config.update(config)
    elif kind == "config":
        out.config.update(_config_dict(rec.config.update, out.internal_config))
        for item in rec.config.remove:
            out.config.pop(_key(item), None)
    elif kind == "history":
        out.history.append(regroup({_key(i): _value(i) for i in rec.history.item}))
    elif kind == "summary":
        update = {_key(item): _value(item) for item in rec.summary.update}
        out.summary.update(update)
        for item in rec.summary.remove:
            out.summary.pop(_key(item), None)
    elif kind == "metric":
        m = rec.metric
        parts = [f.name for f, on in m.summary.ListFields() if on is True] if m.HasField("summary") else []
        out.metrics.append(
            {
                "name": m.name or m.glob_name,
                "step_metric": m.step_metric or None,
                "summary": ",".join(parts) or None,
                "goal": {1: "minimize", 2: "maximize"}.get(m.goal),
                "hidden": bool(m.options.hidden) if m.HasField("options") else False,
            }
        )
    elif kind == "files":
        out.files.extend(f.path for f in rec.files.files)
    elif kind == "environment":
        env = _message_dict(rec.environment)
        env.pop("writer_id", None)
        out.environment.update(env)
    elif kind == "artifact":
        a = rec.artifact
        out.artifacts.append(
            {
                "name": a.name,
                "type": a.type,
                "digest": a.digest,
                "description": a.description or None,
                "aliases": list(a.aliases),
                "metadata": json.loads(a.metadata) if a.metadata else None,
                "files": [
                    {"path": c.path, "size": c.size, "digest": c.digest, "ref": c.ref or None}
                    for c in a.manifest.contents
                ],
            }
        )
    elif kind == "exit":
        out.exit_code = rec.exit.exit_code


def _message_dict(message: Any) -> dict[str, Any]:
    """A protobuf message as a dict with its proto field names (wandb's own names)."""
    from google.protobuf.json_format import MessageToDict

    out: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=True)
    return out
