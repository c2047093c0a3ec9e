"""Run a script of tests/harness_runs/ (a real harness writing its own output files) in a child
process, offline, for a test fixture: skipped when the harness is not installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

RUNS = Path(__file__).parent / "harness_runs"
#: Nothing a harness does in a test may reach the network, print colours or draw a display.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_EVALUATE_OFFLINE": "1",
    "INSPECT_DISPLAY": "none",
    "NO_COLOR": "1",
}


def run_harness(script: str, root: Path, *, package: str, timeout: float = 200) -> Path:
    """``python tests/harness_runs/SCRIPT ROOT``; returns ``root``. Skips the test when ``package``
    is not installed; fails it with the script's last output when the script fails."""
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")
    proc = subprocess.run(
        [sys.executable, str(RUNS / script), str(root)],
        env={**os.environ, **OFFLINE},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root
