"""Readers of older document versions: each returns the builtins of the current version.

Version 1 is what labledger wrote before typed documents: the same fields, with ``"version": 1``
instead of ``schema_version`` (and no ``kind`` in benchmark entries, version tables, run summaries,
sweep reports and import records). Append a function per version step; never edit an old one.

>>> v1_to_v2({"kind": "comparison", "version": 1, "a": "x"}, "comparison")
{'kind': 'comparison', 'schema_version': 2, 'a': 'x'}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def v1_to_v2(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    """Version 1 -> 2: ``version`` becomes ``schema_version``; ``kind`` is set."""
    out = {"kind": kind, "schema_version": 2}
    out.update((k, v) for k, v in doc.items() if k not in ("version", "kind", "schema_version"))
    return out


#: ``MIGRATIONS[n]`` turns a version-n document into version n + 1.
MIGRATIONS: dict[int, Callable[[dict[str, Any], str], dict[str, Any]]] = {1: v1_to_v2}

__all__ = ["MIGRATIONS", "v1_to_v2"]
