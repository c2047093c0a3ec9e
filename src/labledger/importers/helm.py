"""Placeholder."""

from __future__ import annotations

from pathlib import Path

FORMAT = "helm"


def detect(path: Path) -> bool:
    return False
