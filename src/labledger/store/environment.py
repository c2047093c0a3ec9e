"""What a run records about where it ran: host, Python, package versions, git commit and dirtiness."""

from __future__ import annotations

import getpass
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from typing import Any

#: Packages whose versions are recorded when they are already imported by the training process.
WATCHED_PACKAGES = (
    "numpy",
    "torch",
    "scikit-learn",
    "transformers",
    "lightning",
    "jax",
    "pandas",
    "scipy",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "labledger",
)
_MODULE_OF = {"scikit-learn": "sklearn"}


def package_versions() -> dict[str, str]:
    """Versions of watched packages that the process has imported (never imports anything new)."""
    out = {}
    for dist in WATCHED_PACKAGES:
        module = _MODULE_OF.get(dist, dist)
        if module in sys.modules or dist == "labledger":
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return out


def git_state(cwd: str | None = None) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None, "branch": ...}`` for the working directory."""

    def git(*args: str) -> str | None:
        try:
            res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return res.stdout.strip() if res.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "branch": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status), "branch": git("rev-parse", "--abbrev-ref", "HEAD")}


def environment() -> dict[str, Any]:
    """Host, user, pid, Python, platform, argv, package versions and git state of this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    return {
        "host": socket.gethostname(),
        "user": user,
        "pid": os.getpid(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "packages": package_versions(),
        "git": git_state(),
    }
