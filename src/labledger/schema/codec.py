"""``encode(doc) -> bytes`` and ``decode(data, source=...) -> Document``: the one place documents
are written and read, dispatching on ``(kind, schema_version)``.

>>> from labledger.schema.documents import ComparisonDoc
>>> data = encode(ComparisonDoc(a="a", b="b", ci=0.9, resamples=0, seed=0, tasks={}))
>>> decode(data).ci
0.9
>>> decode({"kind": "comparison", "version": 1, "a": "a", "b": "b", "ci": 0.9, "resamples": 0,
...         "seed": 0, "tasks": {}}).schema_version
2
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from labledger.errors import LedgerError, RecordError
from labledger.schema.documents import KINDS, SCHEMA_VERSION, Document
from labledger.schema.migrate import MIGRATIONS

D = TypeVar("D", bound=Document)
_ENCODER = msgspec.json.Encoder()


class NewerDocumentError(LedgerError):
    """A document was written by a newer labledger (its schema_version is above this one's)."""


def encode(doc: Document) -> bytes:
    """The document as JSON bytes (UTF-8, field order as declared)."""
    return _ENCODER.encode(doc)


def _version(raw: dict[str, Any]) -> int:
    v = raw.get("schema_version", raw.get("version", 1))
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def upgrade(raw: dict[str, Any], kind: str, *, source: str = "document") -> dict[str, Any]:
    """``raw`` (builtins of any known version of ``kind``) as builtins of the current version.

    A version above :data:`SCHEMA_VERSION` raises :class:`NewerDocumentError` naming ``source``.
    """
    version = _version(raw)
    if version > SCHEMA_VERSION:
        raise NewerDocumentError(
            f"{source}: {kind} document has schema_version {version}, but this labledger reads up to "
            f"{SCHEMA_VERSION}; upgrade labledger to read it"
        )
    while version < SCHEMA_VERSION:
        raw = MIGRATIONS[version](raw, kind)
        version += 1
    return raw


def decode(
    data: bytes | str | dict[str, Any],
    *,
    source: str = "document",
    kind: str | None = None,
    type: type[D] | None = None,
) -> Any:
    """A typed document from JSON bytes/text or builtins, migrated from older versions.

    The kind comes from ``type``, else ``kind``, else the document's own ``kind`` field. A field
    of the wrong type raises :class:`~labledger.errors.RecordError` naming ``source`` and the path
    of the field.
    """
    if isinstance(data, (bytes, str)):
        try:
            raw = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise RecordError(f"not valid JSON ({exc})", source=source) from None
    else:
        raw = data
    if not isinstance(raw, dict):
        raise RecordError("must be a JSON object", source=source)
    if type is not None:
        kind = type.KIND
    kind = kind or raw.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise RecordError(f"unknown document kind {kind!r} (known: {', '.join(sorted(KINDS))})", source=source)
    target = KINDS[kind]
    raw = upgrade(raw, kind, source=source)
    try:
        return msgspec.convert(raw, target, strict=False)
    except msgspec.ValidationError as exc:
        raise RecordError(f"{kind} document does not match its schema: {exc}", source=source) from None


def json_schema(kind: str | None = None) -> dict[str, Any]:
    """The JSON Schema of one document kind, or of all of them (``$defs`` shared).

    >>> json_schema("comparison")["$ref"]
    '#/$defs/ComparisonDoc'
    """
    if kind is not None:
        if kind not in KINDS:
            raise RecordError(f"unknown document kind {kind!r} (known: {', '.join(sorted(KINDS))})")
        out: dict[str, Any] = msgspec.json.schema(KINDS[kind])
        return out
    types = list(KINDS.values())
    refs, defs = msgspec.json.schema_components(types)
    return {"$defs": defs, "oneOf": list(refs), "kinds": dict(zip(KINDS, refs))}


__all__ = ["NewerDocumentError", "decode", "encode", "json_schema", "upgrade"]
