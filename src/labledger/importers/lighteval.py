"""Placeholder."""

from __future__ import annotations

from pathlib import Path

FORMAT = "lighteval"


def detect(path: Path) -> bool:
    return False
