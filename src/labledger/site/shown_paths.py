"""Machine paths as the site shows them: a site is a folder meant to be mailed or published, so no
absolute path of the machine that made it reaches a page (#43).

A path inside the *project* (the folder that holds the ledger: ``~/proj`` for ``~/proj/.labledger``)
is shown relative to it (``.`` for the project itself); any other absolute path as ``…/`` and its
last part. ``run.json`` keeps every path whole (``labledger show``, the API with the token).

>>> shown_path("/home/me/proj/src/train.py", project="/home/me/proj")
'src/train.py'
>>> shown_path("/data/imagenet/train", project="/home/me/proj")
'…/train'
>>> shown_command(["/home/me/.venv/bin/python", "/home/me/proj/train.py", "--data=/data/x"], project="/home/me/proj")
'python train.py --data=…/x'
"""

from __future__ import annotations

import ntpath
import posixpath
import re
import shlex
from typing import Any

__all__ = ["is_machine_path", "shown_argv", "shown_command", "shown_path", "shown_paths"]

#: ``--opt=/abs/path`` or ``KEY=/abs/path``: the part before the path, kept as it is.
_ASSIGNED = re.compile(r"^([^=\s/\\]+=)(.+)$")
_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")
#: A word the shell reads as it is (no quotes needed); "…" included, as the pages write it.
_SHELL_SAFE = re.compile(r"^[\w@%+=:,./~…-]+$")


def is_machine_path(text: str) -> bool:
    """Whether ``text`` is an absolute path (POSIX ``/...``, ``~/...``, or Windows ``C:\\...``).

    >>> [is_machine_path(t) for t in ("/a/b", "~/x", "C:\\\\w", "rel/x", "https://h/x", "-")]
    [True, True, True, False, False, False]
    """
    return text.startswith(("/", "~/")) or bool(_WINDOWS.match(text))


def shown_path(path: str, *, project: str | None) -> str:
    """``path`` as a page shows it: relative to ``project`` when inside it (``.`` for ``project``
    itself), ``…/`` and its last part when it is another absolute path, as it is when relative.

    >>> shown_path("/p/q", project="/p"), shown_path("/p", project="/p"), shown_path("x/y", project="/p")
    ('q', '.', 'x/y')
    >>> shown_path("/", project="/p"), shown_path("C:\\\\Users\\\\me\\\\run", project=None)
    ('…/', '…/run')
    """
    if not is_machine_path(path):
        return path
    if _WINDOWS.match(path):
        return "…/" + ntpath.basename(ntpath.normpath(path))
    norm = posixpath.normpath(path)
    if project is not None and not path.startswith("~"):
        root = posixpath.normpath(project)
        if norm == root:
            return "."
        if norm.startswith(root.rstrip("/") + "/"):
            return norm[len(root.rstrip("/")) + 1 :]
    return "…/" + posixpath.basename(norm)


def _shown_word(word: str, project: str | None) -> str:
    if is_machine_path(word):
        return shown_path(word, project=project)
    assigned = _ASSIGNED.match(word)
    if assigned and is_machine_path(assigned.group(2)):
        return assigned.group(1) + shown_path(assigned.group(2), project=project)
    return word


def shown_argv(argv: list[Any], *, project: str | None) -> list[str]:
    """``argv`` with every path shortened (:func:`shown_path`, also after ``--opt=``/``KEY=``) and
    the program (``argv[0]``) by its name alone when it is a path (``python``, ``labledger``).

    >>> shown_argv(["/usr/bin/python3", "-m", "x", "--out", "/p/o"], project="/p")
    ['python3', '-m', 'x', '--out', 'o']
    """
    words = [str(a) for a in argv]
    if not words:
        return []
    program = words[0]
    if is_machine_path(program):
        program = (ntpath if _WINDOWS.match(program) else posixpath).basename(program) or program
    return [program, *(_shown_word(w, project) for w in words[1:])]


def shown_command(argv: list[Any], *, project: str | None) -> str:
    """:func:`shown_argv` as one shell line (each word quoted where the shell needs it).

    >>> shown_command(["train.py", "--name", "a b", "--out=/x/y"], project=None)
    "train.py --name 'a b' --out=…/y"
    """
    return " ".join(w if _SHELL_SAFE.match(w) else shlex.quote(w) for w in shown_argv(argv, project=project))


def shown_paths(value: Any, *, project: str | None) -> Any:
    """``value`` (JSON: a run's record) with every string that is a path, or ``--opt=``/``KEY=`` a
    path, shortened by :func:`shown_path`; other values as they are.

    >>> shown_paths({"cwd": "/p/w", "n": 3, "files": ["/etc/x", "--f=/p/a", "a/b"]}, project="/p")
    {'cwd': 'w', 'n': 3, 'files': ['…/x', '--f=a', 'a/b']}
    """
    if isinstance(value, str):
        return _shown_word(value, project)
    if isinstance(value, dict):
        return {k: shown_paths(v, project=project) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_paths(v, project=project) for v in value]
    return value
