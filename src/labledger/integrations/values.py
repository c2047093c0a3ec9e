"""Framework values (tensors, enums, paths, namespaces) as JSON-ready data and plain numbers."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from typing import Any

from labledger.inputs.records import unwrap_scalar


def jsonable(obj: Any, depth: int = 0) -> Any:
    """``obj`` as JSON-ready data: containers recursed, enums by value, other objects as text.

    >>> import pathlib
    >>> jsonable({"p": pathlib.Path("a/b"), 1: (2, 3)})
    {'p': 'a/b', '1': [2, 3]}
    """
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if depth > 20:
        return str(obj)
    if isinstance(obj, enum.Enum):
        return jsonable(obj.value, depth + 1)
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in obj]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    item = getattr(obj, "tolist", None)
    if callable(item):
        try:
            return jsonable(item(), depth + 1)
        except Exception:  # noqa: BLE001 - fall back to text
            pass
    return str(obj)


def numbers(values: Mapping[str, Any]) -> dict[str, float | int]:
    """The entries of ``values`` that are numbers (0-d tensors unwrapped; booleans and text dropped).

    >>> numbers({"loss": 0.5, "name": "x", "ok": True})
    {'loss': 0.5}
    """
    out: dict[str, float | int] = {}
    for k, v in values.items():
        if isinstance(v, bool):
            continue
        x = unwrap_scalar(v)
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            out[k] = x
    return out
