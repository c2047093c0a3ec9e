"""A check shared by the speed-path tests (#19): a script's output must not depend on how many
threads OpenBLAS may use (the machine's cores, by default)."""

from __future__ import annotations

import os
import subprocess
import sys


def outputs_by_blas_threads(script: str, counts: tuple[str, ...] = ("1", "2", "4")) -> list[str]:
    """What ``python -c script`` prints under each ``OPENBLAS_NUM_THREADS``."""
    docs = []
    for threads in counts:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads}
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        docs.append(out.stdout)
    return docs
