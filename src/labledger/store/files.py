"""A run folder's files, and writing a file whole: the atomic-write helpers, folder fsyncs, and the
one-line :class:`~labledger.errors.StorageError` of a write the disk refused. The record files
(:mod:`labledger.store.jsonl`) and their compressed form (:mod:`labledger.store.compressed`) both
build on these.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from labledger.errors import StorageError

if TYPE_CHECKING:
    from labledger.store.ledger import Ledger

#: Where each kind of run record lives in a run folder (one append-only JSONL file per kind).
RECORD_FILES = {
    "scalars": "metrics.jsonl",
    "batches": "batches.jsonl",
    "history": "history.jsonl",
    "checkpoints": "checkpoints.jsonl",
    "notes": "notes.jsonl",
    "system": "system.jsonl",  # system metrics, one sample a second (store/system.py)
    "media": "media.jsonl",  # images, tables, files referenced by labledger.wandb runs
}


#: errno values that mean "the disk refused the write" (reported as StorageError, not a traceback).
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG})


def disk_error(
    exc: OSError, path: str | os.PathLike[str] | None, what: str = "the record was not stored"
) -> StorageError:
    """A one-line :class:`StorageError` for an ``OSError`` from a write (``disk full: FILE: ...``).

    >>> import errno
    >>> str(disk_error(OSError(errno.ENOSPC, "No space left on device"), "run/metrics.jsonl"))
    'disk full: run/metrics.jsonl: the record was not stored (No space left on device); free space and try again'
    """
    kind = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "write failed"
    where = f"{path}: " if path is not None else ""
    return StorageError(f"{kind}: {where}{what} ({exc.strerror or exc}); free space and try again")


def fsync_dir(folder: str | os.PathLike[str], *, strict: bool = False) -> None:
    """fsync a folder, so that a rename inside it survives a machine crash: best effort, or with
    ``strict`` (before a server acknowledges a write) an ``OSError`` when the folder cannot be
    opened or fsynced."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        if strict:
            raise
        return
    try:
        os.fsync(fd)
    except OSError:
        if strict:
            raise
    finally:
        os.close(fd)


def fsync_files(paths: Iterable[str | os.PathLike[str]]) -> None:
    """fsync many written files and then their folders, from a pool of threads: the file system
    commits its journal once for fsyncs that wait together, not once per file (#13). A disk that
    refuses raises :class:`StorageError` naming the file.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"; _ = p.write_bytes(b"x")
    >>> fsync_files([p])
    """
    from concurrent.futures import ThreadPoolExecutor

    files = list(dict.fromkeys(Path(p) for p in paths))
    if not files:
        return
    folders = list(dict.fromkeys(f.parent for f in files))

    def one(path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise disk_error(exc, path, "the file was not written") from None

    with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        list(pool.map(one, files))
        list(pool.map(fsync_dir, folders))


def remove_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files that writers of ``path`` killed before their rename left
    (``.NAME.PID.tmp`` of :func:`atomic_open` whose process no longer runs on this machine); returns
    them. One folder listing: ``atomic_open(..., sweep=True)`` runs it for a user's output file.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / ".out.jsonl.999999999.tmp").write_text("half")
    >>> [p.name for p in remove_stale_temps(d / "out.jsonl")]
    ['.out.jsonl.999999999.tmp']
    """
    path = Path(path)
    prefix = f".{path.name}."
    removed: list[Path] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        pid = name[len(prefix) : -len(".tmp")] if name.startswith(prefix) and name.endswith(".tmp") else ""
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # a live writer's
        except (ProcessLookupError, OverflowError):
            pass  # no such process: its writer is gone
        except OSError:
            continue  # a live process of another user
        with contextlib.suppress(OSError):
            os.unlink(path.parent / name)
            removed.append(path.parent / name)
    return removed


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], *, fsync: bool = True, sweep: bool = False) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` whole or not at all: the one atomic-write helper.

    The data goes to a temporary file in the same folder; on success it is flushed, fsynced and
    renamed over ``path`` and the folder is fsynced; on any failure (an exception, a full disk) the
    temporary file is removed and ``path`` is untouched. A full disk raises :class:`StorageError`.
    For streaming writers (``torch.save``, safetensors, CSV writers); :func:`atomic_write` is the
    one-buffer form. ``sweep``: first remove what writers of this same ``path`` killed before their
    rename left (:func:`remove_stale_temps`, one folder listing) — for the files a command writes
    where its user said, which no other cleanup ever visits.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.bin"
    >>> with atomic_open(p) as f:
    ...     _ = f.write(b"whole")
    >>> p.read_bytes()
    b'whole'
    """
    path = Path(path)
    if sweep:
        remove_stale_temps(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)  # a failed write leaves neither half a file nor a temporary one
        if exc.errno in DISK_ERRNOS:
            raise disk_error(exc, path, "the file was not written") from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


def atomic_write(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True, sweep: bool = False) -> None:
    """Write ``data`` to ``path`` through :func:`atomic_open`: readers never see half a file.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> atomic_write(p, b"hello")
    >>> p.read_bytes()
    b'hello'
    """
    with atomic_open(path, fsync=fsync, sweep=sweep) as f:
        f.write(data)


def missing_ids(ledger: Ledger, ids: Iterable[str]) -> list[str]:
    """The runs of ``ids`` (in the index) whose folder is gone from ``runs/``: one listing of the
    folder, not one look-up per run. A run that is starting (its folder still in ``.new-runs/``) is
    not missing."""
    wanted = list(ids)
    if not wanted:
        return []
    try:
        present = set(os.listdir(ledger.root / "runs"))
    except OSError:
        present = set()
    gone = [i for i in wanted if i not in present]
    if gone and (ledger.root / ledger.NEW_RUNS).is_dir():
        starting = set(os.listdir(ledger.root / ledger.NEW_RUNS))
        gone = [i for i in gone if i not in starting]
    return gone
