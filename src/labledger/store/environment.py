"""What a run records about where it ran: host, Python, package versions, git commit and dirtiness."""

from __future__ import annotations

import getpass
import os
import platform
import re
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


#: Options whose value is a secret (``--token T``, ``--password=T``, ``--api-key T``, ...).
_SECRET_OPTION = re.compile(r"^--?[\w-]*(token|password|passwd|secret|api[-_]?key|access[-_]?key|credential)s?$", re.I)
#: ``NAME=VALUE`` arguments whose name says secret (``HF_TOKEN=...``, ``AWS_SECRET_ACCESS_KEY=...``).
_SECRET_ASSIGN = re.compile(
    r"^(--?)?([\w.-]*(token|password|passwd|secret|key|credential)s?)=(.+)$",
    re.I,
)
REDACTED = "<redacted>"


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` with the values of secret-looking arguments replaced by ``<redacted>``.

    >>> redact_argv(["train.py", "--token", "abc", "--lr=0.1", "--password=hunter2", "WANDB_API_KEY=k1", "--keep"])
    ['train.py', '--token', '<redacted>', '--lr=0.1', '--password=<redacted>', 'WANDB_API_KEY=<redacted>', '--keep']
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if _SECRET_OPTION.match(arg):
            out.append(arg)
            hide_next = True
            continue
        m = _SECRET_ASSIGN.match(arg)
        if m:
            out.append(f"{m.group(1) or ''}{m.group(2)}={REDACTED}")
            continue
        out.append(arg)
    return out


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
        "argv": redact_argv(list(sys.argv)),
        "cwd": os.getcwd(),
        "packages": package_versions(),
        "git": git_state(),
    }
