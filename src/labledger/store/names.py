"""The names a ledger accepts for evaluations, result sets and a run's files: safe as folder and
file names on every system, never a path out of the run's folder.

>>> check_name("full_test")
'full_test'
>>> check_relative_path("images/step-3.png").as_posix()
'images/step-3.png'
"""

from __future__ import annotations

import re
from pathlib import Path

from labledger.errors import LedgerError

__all__ = ["check_name", "check_relative_path"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_FILE_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def check_name(name: str, what: str = "name") -> str:
    """Names of evaluations and result sets: letters, digits, ``.``, ``-``, ``_`` (no paths)."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise LedgerError(
            f"{what} {name!r} must be 1-128 letters, digits, '.', '-' or '_' (starting with a letter or digit)"
        )
    return name


def check_relative_path(name: str) -> Path:
    """A relative path of safe components (for ``log_file``): no ``..``, no absolute paths."""
    parts = str(name).replace("\\", "/").split("/")
    if (
        not name
        or name.startswith("/")
        or any(p in ("", ".", "..") or not _FILE_RE.match(p) or p.startswith(".") for p in parts)
    ):
        raise LedgerError(
            f"file name {name!r} must be a relative path of letters, digits, '.', '-', "
            f"'_' components separated by '/' (no '..', no hidden or absolute paths)"
        )
    return Path(*parts)
