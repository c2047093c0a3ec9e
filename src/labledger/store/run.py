"""A run being logged: append-only writers for every record kind, checkpoints, results, finish/crash.

The hot paths (:meth:`Run.log` and :meth:`Run.log_batch`) validate, serialise with orjson and hand
the line to the kernel with one ``write(2)``: nothing is buffered in user space, so a ``kill -9``
loses nothing that a ``log_*`` call had acknowledged. Files are fsynced at checkpoints, at finish
and every ``sync_interval`` seconds. The index's summary, query fields and counters
(:mod:`labledger.store.counters`) are refreshed every ``index_interval`` seconds while the run logs,
from the records the log calls only appended to a pending list.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import operator
import os
import re
import secrets
import shutil
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from labledger.errors import IndexUnavailableError, LedgerError, RecordError, RunStateError
from labledger.inputs.records import clean_scalars, unwrap_scalar, validate_batch
from labledger.store.counters import Counters, is_time
from labledger.store.environment import environment
from labledger.store.fields import ScalarStats, run_fields
from labledger.store.jsonl import (
    DISK_ERRNOS,
    DUMP_OPTIONS,
    RECORD_FILES,
    Appender,
    atomic_write,
    disk_error,
    dumps_line,
    fsync_dir,
    fsync_files,
    write_all,
    write_json,
)
from labledger.store.ledger import Ledger, default_ledger_path
from labledger.store.manifest import sha256_file
from labledger.store.names import check_name as check_name
from labledger.store.names import check_relative_path as check_relative_path

if TYPE_CHECKING:
    from labledger.inputs.result_columns import ResultColumns

#: Seconds between folds of logged scalars into the running min/max (bounds the pending list). Short,
#: so that the pending records stay few and their memory is reused rather than given back and
#: faulted in again; the CPU per call is the same (docs/performance.md).
FOLD_INTERVAL = 0.01
#: Seconds between refreshes of the index row (summary, query fields, counters) while a run logs:
#: what ``labledger runs`` and ``show`` report is at most this old (plus one log call's gap).
INDEX_INTERVAL = 0.5
#: Chunk size for streamed hashing and copying.
CHUNK = 1 << 20
_os_write = os.write
_time = time.time
_dumps = orjson.dumps
_STEP = operator.itemgetter("step")


def _copy_hashed(src: Path, dest: Path) -> tuple[str, int, list[str]]:
    """Store a copy of ``src`` at ``dest``; ``(sha256, size, chunk hashes)`` of the bytes stored.

    A copy-on-write clone (``FICLONE``) where the filesystem supports it, then hashed; else a
    streamed copy hashed as it is written (:func:`labledger.store.manifest.sha256_and_chunks`:
    the bytes are read once, not once to copy and again to hash). A hard link would not protect
    the record: ``torch.save`` truncates and rewrites the same inode.
    """
    from labledger.store.manifest import sha256_and_chunks

    with open(src, "rb") as fin, open(dest, "xb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), 0x40049409, fin.fileno())  # FICLONE
        except OSError:
            return sha256_and_chunks(src, copy_to=fout)
    return sha256_and_chunks(dest)


def _hash_in_place(path: Path, run_dir: Path) -> tuple[str, int]:
    """``(sha256, size)`` of a checkpoint referenced where it is (``copy=False``). One inside the run
    folder (the demo's, a trainer's ``output_dir`` there) is synced with the run, so its chunk hashes
    are recorded too (:func:`labledger.store.manifest.record_chunks`), keyed by its ``stat`` before
    the read: a write during or after the read leaves the record unused. One elsewhere is not
    synced, and only its sha256 is taken."""
    from labledger.store.manifest import record_chunks, sha256_and_chunks

    root = run_dir.resolve()
    if not path.is_relative_to(root):
        return sha256_file(path)
    before = path.stat()
    digest, size, chunks = sha256_and_chunks(path)
    record_chunks(root, path.relative_to(root).as_posix(), chunks, before)
    return digest, size


def _copy_checkpoint(src: Path, dest_dir: Path) -> tuple[str, int, Path]:
    """Copy ``src`` into ``dest_dir``; ``(sha256, size, stored path)`` of what was stored.

    The stored copy is hashed (not the source), so the record describes the bytes the run keeps
    even if the source changes during the copy. Same name and content as an earlier copy: reused.
    """
    from labledger.store.manifest import record_chunks

    tmp = dest_dir / f".{src.name}.{secrets.token_hex(4)}.tmp"
    try:
        digest, size, chunks = _copy_hashed(src, tmp)  # the chunks: what sync sends it by (#18)
        target = dest_dir / src.name
        if target.exists():
            if sha256_file(target)[0] == digest:
                tmp.unlink()
                return digest, size, target
            target = dest_dir / f"{src.stem}-{digest[:12]}{src.suffix}"
            if target.exists():
                tmp.unlink()
                return digest, size, target
        os.replace(tmp, target)
        record_chunks(dest_dir.parent, f"{dest_dir.name}/{target.name}", chunks)
        return digest, size, target
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:  # one line, nothing stored, the run goes on
            raise disk_error(exc, dest_dir / src.name, "the checkpoint copy was not stored") from None
        raise


def _as_step(step: Any) -> int:
    """An integer step from an int-like value (numpy integers, 0-d integer tensors)."""
    import numbers

    if isinstance(step, numbers.Integral) and not isinstance(step, bool):
        return int(step)
    value = unwrap_scalar(step)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise RecordError(f"must be an integer; got {step!r}", field="step")


def _rows_from_bytes(data: bytes, source: str) -> tuple[list[Any], list[int], bytes]:
    """Rows, their line numbers and the bytes to store, from one results file's content.

    Parsed by :func:`labledger.inputs.results.rows_in`: a valid last line without its newline is kept (and
    completed), a torn one is left out of both the rows and the stored bytes, with a warning.
    """
    from labledger.inputs.results import rows_in

    numbered = list(rows_in(data, source))
    if data and not data.endswith(b"\n"):
        last = data.count(b"\n") + 1
        if numbered and numbered[-1][0] == last:
            data += b"\n"  # a valid last line: complete it, or readers see it torn
        else:
            data = data[: data.rfind(b"\n") + 1]  # the torn tail is not stored
    return [row for _, row in numbered], [n for n, _ in numbered], data


#: What a run can start from (see :meth:`Run.set_init`).
InitSource = str | os.PathLike[str] | Mapping[str, Any] | Sequence[Mapping[str, Any]]
_SHA_RE = re.compile(r"^[0-9a-fA-F]{64}$")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def _init_entry(rec: Mapping[str, Any]) -> dict[str, Any]:
    """One stored init entry from a mapping (a checkpoint record or an entry read back). A mapping
    ``{"kind": "run", "run_id": ID}`` (or ``"name": ID`` read back) is a run this run is nested in
    (an MLflow parent run): stored as ``{"kind": "run", "name": ID}``, a lineage edge between the runs."""
    if rec.get("kind") == "run":
        parent = rec.get("run_id", rec.get("name"))
        if not isinstance(parent, str) or not parent:
            raise RecordError(f"a run entry names its run's id; got {parent!r}", field="init.run_id")
        return {"kind": "run", "name": parent}
    sha = rec.get("sha256")
    if isinstance(sha, str) and _SHA_RE.match(sha):
        size = rec.get("size")
        entry: dict[str, Any] = {"kind": str(rec.get("kind") or "sha256"), "sha256": sha.lower()}
        if rec.get("path") is not None:
            entry["path"] = str(rec["path"])
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            entry["size"] = size
        return entry
    if sha is None and isinstance(rec.get("name"), str) and rec["name"]:
        return {"kind": "name", "name": rec["name"]}
    raise RecordError(f"must be 64 hexadecimal digits (or a 'name' without one); got {sha!r}", field="init.sha256")


def resolve_init(source: InitSource, *, missing_as_name: bool = False) -> list[dict[str, Any]]:
    """Init entries (``kind`` file/sha256/name, ``sha256``, ``path``, ``size``) for :meth:`Run.set_init`.

    >>> resolve_init("ab" * 32)
    [{'kind': 'sha256', 'sha256': 'abababababababababababababababababababababababababababababababab'}]
    >>> resolve_init("org/model-name")
    [{'kind': 'name', 'name': 'org/model-name'}]
    """
    if isinstance(source, Mapping):
        return [_init_entry(source)]
    if isinstance(source, Sequence) and not isinstance(source, str):
        out = []
        for item in source:
            if not isinstance(item, Mapping):
                raise RecordError(f"a list of init entries holds mappings; got {type(item).__name__}", field="init")
            out.append(_init_entry(item))
        return out
    if not isinstance(source, (str, os.PathLike)):
        raise RecordError(f"must be a path, a sha256 or a name; got {type(source).__name__}", field="init")
    text = os.fspath(source)
    if not text.strip():
        raise RecordError("must not be empty", field="init")
    path = Path(text)
    if path.is_file():
        digest, size = sha256_file(path)
        return [{"kind": "file", "sha256": digest, "path": str(path.resolve()), "size": size}]
    if path.is_dir():
        weights = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
        if not weights and missing_as_name:
            return [{"kind": "name", "name": text}]
        if not weights:
            raise LedgerError(f"init folder {path} holds no weights file ({', '.join(_WEIGHT_SUFFIXES)})")
        out = []
        for w in weights:
            digest, size = sha256_file(w)
            out.append({"kind": "file", "sha256": digest, "path": str(w.resolve()), "size": size})
        return out
    if isinstance(source, str) and _SHA_RE.match(text):
        return [{"kind": "sha256", "sha256": text.lower()}]
    looks_like_path = text.startswith(("/", "./", "../")) or text.endswith(_WEIGHT_SUFFIXES)
    if looks_like_path and missing_as_name:  # integrations: a path that is gone is still a name
        return [{"kind": "name", "name": text}]
    if not isinstance(source, str) or looks_like_path:
        raise LedgerError(f"init {text!r}: no such file (a hub name is text without a path or weights suffix)")
    return [{"kind": "name", "name": text}]


def new_run_id() -> str:
    """Time-sortable, globally unique: ``YYYYmmdd-HHMMSS-xxxxxxxxxxxx`` (48 random bits).

    Runs of many machines meet on one team server (#18): with 24 random bits, a sweep starting
    1,000 runs in the same second on a cluster collided with odds of about 3 %; with 48 bits the odds
    are about 2e-9.

    >>> len(new_run_id().split("-")[-1])
    12
    """
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(6)


class Run:
    """A run being logged. Create it with :func:`labledger.start_run`.

    >>> import tempfile, labledger
    >>> with labledger.start_run("demo", ledger=tempfile.mkdtemp()) as run:
    ...     run.log(1, loss=0.9, lr=1e-3)
    >>> run.status
    'finished'
    """

    #: Seconds between background fsyncs (checked on each log call).
    sync_interval = 5.0
    #: Seconds between refreshes of the index row (checked on each log call; see INDEX_INTERVAL).
    index_interval = INDEX_INTERVAL
    #: Compact the record files at finish (:mod:`labledger.store.compressed`): those of at
    #: least ``compact_min_bytes`` (``None``: ``$LABLEDGER_COMPACT_MIN_BYTES``, else 1 MiB) become
    #: verified zstd frames (``X.jsonl.zst``).
    compact_at_finish = True
    compact_min_bytes: int | None = None

    def __init__(
        self,
        name: str,
        *,
        group: str | None = None,
        tags: Iterable[str] = (),
        config: Mapping[str, Any] | None = None,
        notes: str | None = None,
        ledger: Ledger | str | os.PathLike[str] | None = None,
        started: float | None = None,
        extra_meta: Mapping[str, Any] | None = None,
        system_metrics: bool = False,
        sync: str | None = None,
        init: InitSource | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise LedgerError("a run needs a non-empty name")
        self._owns_ledger = not isinstance(ledger, Ledger)
        self.ledger = (
            ledger
            if isinstance(ledger, Ledger)
            else Ledger(ledger if ledger is not None else default_ledger_path(), create=True)
        )
        self.id = new_run_id()
        self.name = name
        self.group = group
        self.tags = sorted({str(t) for t in tags})
        self.dir = self.ledger.run_dir(self.id)
        try:
            config_json = orjson.loads(
                orjson.dumps(dict(config or {}), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
            )
        except TypeError as exc:
            raise RecordError(f"must be JSON-serialisable ({exc})", field="config") from None
        env = environment()
        # The folder is made in .new-runs/ and renamed into runs/ once its row is committed (the
        # commit decides, as an import's does): a kill part-way never leaves a folder in runs/
        # without its row; the next start settles what one left there (Ledger.start_folder). The
        # lock lives as long as this process: a dead process releases it, which is how a reader
        # tells "crashed" from "running".
        new, self._lock_fd = self.ledger.start_folder(self.id)
        self.meta: dict[str, Any] = {
            "id": self.id,
            "name": name,
            "group": group,
            "tags": self.tags,
            "status": "running",
            "started": time.time() if started is None else float(started),
            "ended": None,
            "notes": notes,
            "error": None,
            **env,
            **dict(extra_meta or {}),
        }
        try:
            write_json(new / "config.json", config_json)
            write_json(new / "run.json", self.meta)
            self.ledger.register_run(self.meta, config=config_json)
        except BaseException:  # a full disk: no run folder without its index row is left (#17)
            os.close(self._lock_fd)
            shutil.rmtree(new, ignore_errors=True)
            raise
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        os.replace(new, self.dir)
        self.config: dict[str, Any] = config_json
        self.summary: dict[str, Any] = {}
        self.status = "running"
        self._scalars = Appender(self.dir / RECORD_FILES["scalars"])
        self._scalars_fd = self._scalars.fd  # Run.log writes here without looking it up
        self._batches = Appender(self.dir / RECORD_FILES["batches"])
        self._history: Appender | None = None
        self._checkpoints: Appender | None = None
        self._notes: Appender | None = None
        # Each scalar's last value (in the order first logged), last step and the run's max step
        # and record count are folded from the pending records (see _fold), not kept per log call.
        self._last_values: dict[str, Any] = {}
        self._max_step: int | None = None
        self._n_scalars = 0
        self._n_batches = 0
        self._n_history = 0
        self._n_checkpoints = 0
        self._n_notes = 0
        self._last_microbatch: int | None = None
        # Scalar records not yet folded into the count, max step, last values and steps, min/max and
        # times (see _fold, called by _tick every FOLD_INTERVAL): Run.log only appends the record it wrote.
        self._pending: list[dict[str, Any]] = []
        self._stats = ScalarStats()
        self._last_step: dict[str, Any] = {}
        self._first_time: float | None = None
        self._last_time: float | None = None
        now = time.time()
        self._sync_due = now + self.sync_interval
        self._index_due = now + self.index_interval
        self._next_sync = min(self._sync_due, self._index_due, now + FOLD_INTERVAL)
        if notes:
            self.note(notes)
        self._system: Any = None
        if system_metrics:
            from labledger.store.system import start_sampler

            self._system = start_sampler(self.dir)
        self.sync_process: Any = None
        target = sync if sync is not None else os.environ.get("LABLEDGER_SYNC")
        if target:
            self.sync_process = self._start_sync(target)
        if init is not None:
            self.set_init(init)

    def _start_sync(self, to: str) -> Any:
        """A ``labledger sync --watch`` process for this run (#18): the loop never waits for the network.

        It runs beside the training process, reads only the run's files, retries while the server is
        down and exits once the run has ended and is fully synced (also after a crash: the run is
        marked crashed and synced so). Its output goes to the run folder's ``.sync.log``.
        """
        import subprocess
        import sys

        if self.ledger.dialect != "sqlite":
            raise LedgerError("sync= copies a local ledger folder to a server; this run's ledger is already a team one")
        if not to.startswith(("http://", "https://")):
            raise LedgerError(f"sync must be the http(s) URL of a labledger server; got {to!r}")
        log = open(self.dir / ".sync.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "labledger",
                    "sync",
                    "--to",
                    to,
                    "--watch",
                    "--ledger",
                    str(self.ledger.root),
                    self.id,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the training script does not cut the last round
                close_fds=True,
            )
        finally:
            log.close()

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.status != "running":
            return
        if exc is None:
            self.finish("finished")
        elif isinstance(exc, KeyboardInterrupt):
            self.finish("killed", error="KeyboardInterrupt")
        else:
            summary = "".join(traceback.format_exception_only(exc_type, exc)).strip()
            self.finish("failed", error=summary)

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.name!r} {self.status}>"

    def _check_open(self) -> None:
        if self.status != "running":
            raise RunStateError(f"run {self.id} is {self.status}; it takes no more records")

    # -- hot paths ------------------------------------------------------------------------------
    def log(self, step: int, **scalars: Any) -> None:
        """Log per-step scalars (loss, lr, grad_norm, ...) at ``step``.

        Values must be numbers (numpy scalars and 0-d tensors are unwrapped); NaN and infinities
        are stored as JSON ``null`` and read back as NaN.
        """
        if type(step) is not int:
            step = _as_step(step)
        for v in scalars.values():
            t = type(v)
            if t is not float and t is not int:
                scalars = clean_scalars(scalars)
                break
        now = _time()
        rec = {"step": step, "time": now, **scalars}  # an explicit time= (imports) overrides the wall time
        data = _dumps(rec, option=DUMP_OPTIONS)
        # write_all's first os.write, inlined; a short write or a refusal goes through write_all,
        # which completes the line or cuts it back and raises StorageError (a refused write wrote
        # nothing, so write_all tries it once more from the start). An ended run's fd is -1 (finish
        # sets it before closing the file): its refused write is where logging to it is refused.
        try:
            written = _os_write(self._scalars_fd, data)
        except OSError:
            written = 0
        if written != len(data):
            if self.status != "running":
                self._check_open()
            write_all(self._scalars_fd, data, written)
        self._pending.append(rec)
        if now >= self._next_sync:
            self._tick(now)

    def log_encoded_scalars(
        self,
        lines: bytes,
        *,
        records: int,
        max_step: int | None,
        last: Mapping[str, Any],
        low: Mapping[str, float],
        high: Mapping[str, float],
    ) -> None:
        """Append ``records`` scalar records already encoded as JSON lines, as :meth:`log` writes them.

        For bulk importers (``labledger.importers.source.log_scalar_columns`` builds the lines from
        columns): ``last`` is each scalar's last value, ``low``/``high`` its finite min and max.

        >>> import tempfile, labledger
        >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
        ...     run.log_encoded_scalars(b'{"step":1,"time":0.5,"loss":0.9}\\n', records=1, max_step=1,
        ...                             last={"loss": 0.9}, low={"loss": 0.9}, high={"loss": 0.9})
        >>> (run.dir / "metrics.jsonl").read_bytes()
        b'{"step":1,"time":0.5,"loss":0.9}\\n'
        """
        self._check_open()
        write_all(self._scalars_fd, lines)
        self._fold()
        self._last_values.update((k, v) for k, v in last.items() if k not in ("step", "time"))
        self._stats.fold([low, high])
        self._n_scalars += records
        if max_step is not None and (self._max_step is None or max_step > self._max_step):
            self._max_step = max_step

    def log_batch(self, record: Mapping[str, Any]) -> None:
        """Log one microbatch record with its samples (schema: :mod:`labledger.inputs.records`).

        ``time`` is filled in when absent. Unknown keys are kept verbatim. A record that fails
        validation raises :class:`RecordError` naming the field and is not written.
        """
        if self.status != "running":
            self._check_open()
        mb = validate_batch(record, last_microbatch=self._last_microbatch)
        if "time" not in record:
            record = {**record, "time": time.time()}
        try:
            line = orjson.dumps(record, option=DUMP_OPTIONS)
        except TypeError as exc:
            raise RecordError(f"a batch record must be JSON-serialisable ({exc})") from None
        write_all(self._batches.fd, line)
        self._last_microbatch = mb
        self._n_batches += 1
        now = time.time()
        if now >= self._next_sync:
            self._tick(now)

    # -- other records --------------------------------------------------------------------------
    def log_history(self, entry: Mapping[str, Any]) -> None:
        """Log one trainer logging-interval entry (loss over the interval, lr, grad norm, epoch...)."""
        self._check_open()
        if not isinstance(entry, Mapping):
            raise RecordError(f"a history entry must be a mapping; got {type(entry).__name__}")
        try:
            line = dumps_line(dict(entry))
        except TypeError as exc:
            raise RecordError(f"a history entry must be JSON-serialisable ({exc})") from None
        if self._history is None:
            self._history = Appender(self.dir / RECORD_FILES["history"])
        self._history.append_bytes(line)
        self._n_history += 1

    def log_checkpoint(
        self,
        path: str | os.PathLike[str],
        *,
        step: int | None = None,
        metrics: Mapping[str, Any] | None = None,
        copy: bool = True,
    ) -> dict[str, Any]:
        """Record a checkpoint file: streamed sha256 and size, and a copy in the run folder.

        By default the file is copied into the run's ``checkpoints/`` (a copy-on-write clone where
        the filesystem can, else a streamed copy), so that a script writing ``model.pt`` again
        cannot change what this run recorded. With ``copy=False`` the file is referenced in place;
        readers re-hash it (:meth:`labledger.store.view.RunView.verified_checkpoints`) and report a
        changed file as a sha256 mismatch. A second file of the same name with other content is
        stored as ``<stem>-<sha256[:12]><suffix>``. Returns the stored record (``path``,
        ``sha256``, ``size``, ``step``, ``metrics``, ...).

        >>> import tempfile, pathlib, labledger
        >>> ck = pathlib.Path(tempfile.mkdtemp()) / "model.pt"; _ = ck.write_bytes(b"weights")
        >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
        ...     rec = run.log_checkpoint(ck, step=1)
        >>> rec["copied"], pathlib.Path(rec["path"]).parent.name
        (True, 'checkpoints')
        """
        self._check_open()
        src = Path(path)
        if not src.is_file():
            raise LedgerError(f"checkpoint {src} does not exist or is not a file")
        stored = src.resolve()
        if copy:
            dest_dir = self.dir / "checkpoints"
            dest_dir.mkdir(exist_ok=True)
            digest, size, stored = _copy_checkpoint(src, dest_dir)
        else:
            digest, size = _hash_in_place(stored, self.dir)
        # A copied checkpoint is recorded relative to the run folder, so the record stays true when the
        # folder moves (imports adopted from a staging ledger, a ledger copied to another machine).
        shown = str(stored.relative_to(self.dir)) if copy else str(stored)
        rec = self._append_checkpoint(
            {
                "path": shown,
                "source": str(src.resolve()),
                "sha256": digest,
                "size": size,
                "step": step,
                "metrics": metrics,
                "copied": copy,
            }
        )
        return {**rec, "path": str(stored)}

    def log_checkpoint_reference(
        self,
        path: str | os.PathLike[str],
        sha256: str,
        *,
        size: int | None = None,
        step: int | None = None,
        metrics: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record a checkpoint known only by its hash (a report names it; the file is elsewhere or gone).

        Nothing is read: ``path`` is kept as given and ``sha256`` as stated, with ``reference: true``
        in the record. ``size`` is ``None`` when unknown (the index, whose column is NOT NULL,
        stores -1 then).

        >>> import tempfile, labledger
        >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
        ...     rec = run.log_checkpoint_reference("runs/head.pt", "ab" * 32)
        >>> rec["reference"], rec["size"]
        (True, None)
        """
        self._check_open()
        digest = sha256.lower() if isinstance(sha256, str) else sha256
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise RecordError(f"must be 64 hexadecimal digits; got {sha256!r}", field="sha256")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise RecordError(f"must be an integer >= 0 or None; got {size!r}", field="size")
        return self._append_checkpoint(
            {
                "path": str(path),
                "source": str(path),
                "sha256": digest,
                "size": size,
                "step": step,
                "metrics": metrics,
                "copied": False,
                "reference": True,
            }
        )

    def _append_checkpoint(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Write a checkpoint record to checkpoints.jsonl and the index, then fsync (both log_checkpoint*)."""
        rec["step"] = None if rec["step"] is None else _as_step(rec["step"])
        rec["metrics"] = clean_scalars(rec["metrics"] or {})
        rec["time"] = time.time()
        if self._checkpoints is None:
            self._checkpoints = Appender(self.dir / RECORD_FILES["checkpoints"])
        self._checkpoints.append(rec)
        self._n_checkpoints += 1
        size = rec["size"]
        with self.ledger.transaction() as db:  # the index column is NOT NULL: -1 = size unknown
            db.execute(
                "INSERT INTO checkpoints (run_id, step, path, sha256, size, created) VALUES (?, ?, ?, ?, ?, ?)",
                (self.id, rec["step"], rec["path"], rec["sha256"], -1 if size is None else size, rec["time"]),
            )
        self.sync()
        return rec

    def set_init(self, source: InitSource, *, missing_as_name: bool = False) -> list[dict[str, Any]]:
        """Record what this run started from; returns the stored entries (also ``run.json`` ``init``).

        ``source`` is a checkpoint file (hashed, streamed), a folder of weights (each ``.safetensors``,
        ``.bin``, ``.pt``, ``.pth``, ``.ckpt`` file in it hashed), a sha256 (64 hex digits), a
        checkpoint record (a mapping with ``sha256``, as :meth:`log_checkpoint` returns), a list of
        such entries, or any other text: an external name such as a hub model id, kept as text. A
        sha256 that a checkpoint of another run in the ledger has links the two runs
        (:func:`labledger.analysis.lineage.lineage`). Calling it again replaces the entries. With
        ``missing_as_name`` a path that does not exist (or a folder without weights) is kept as a name.

        >>> import tempfile, labledger
        >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
        ...     [e["kind"] for e in run.set_init("bert-base-uncased")]
        ['name']
        """
        self._check_open()
        entries = resolve_init(source, missing_as_name=missing_as_name)
        with self.ledger.transaction() as db:
            db.execute("DELETE FROM run_inits WHERE run_id = ?", (self.id,))
            db.executemany(
                "INSERT INTO run_inits (run_id, kind, sha256, name, path, size) VALUES (?, ?, ?, ?, ?, ?)",
                [(self.id, e["kind"], e.get("sha256"), e.get("name"), e.get("path"), e.get("size")) for e in entries],
            )
        self.meta["init"] = entries
        write_json(self.dir / "run.json", self.meta)
        return entries

    def update_config(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``values`` into the run's config (top-level keys; new values win); returns the config.

        For loggers that learn hyperparameters after the run started (Lightning's
        ``log_hyperparams``). ``config.json`` is rewritten atomically.

        >>> import tempfile, labledger
        >>> with labledger.start_run("r", config={"lr": 0.1}, ledger=tempfile.mkdtemp()) as run:
        ...     run.update_config({"batch_size": 8})["batch_size"]
        8
        """
        self._check_open()
        if not isinstance(values, Mapping):
            raise RecordError(f"must be a mapping; got {type(values).__name__}", field="config")
        try:
            new = orjson.loads(orjson.dumps(dict(values), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
        except TypeError as exc:
            raise RecordError(f"must be JSON-serialisable ({exc})", field="config") from None
        self.config = {**self.config, **new}
        write_json(self.dir / "config.json", self.config)
        return self.config

    def log_results(
        self, name: str, rows_or_path: Iterable[Mapping[str, Any]] | str | os.PathLike[str], **meta: Any
    ) -> Path:
        """Store per-item predictions whole (every row, every extra field) as result set ``name``.

        ``rows_or_path`` is an iterable of row dicts or a ``results.jsonl`` file (copied byte for
        byte after validation). Rows are validated first (see :mod:`labledger.inputs.results`); a bad row
        raises with file, line and field, and nothing is stored. Returns the stored file's path.
        """
        from labledger.inputs.results import validate_rows

        self.check_results_name(name)
        if isinstance(rows_or_path, (str, os.PathLike)):
            src = Path(rows_or_path)
            try:
                data = src.read_bytes()  # read once: what is validated is what is stored
            except OSError as exc:
                raise RecordError(f"cannot read ({exc.strerror})", source=str(src)) from None
            rows, lines, data = _rows_from_bytes(data, str(src))
            validate_rows(rows, source=str(src), lines=lines)
            return self._store_results(name, data, len(rows), str(src.resolve()), meta)
        data, n_rows = result_rows_bytes(name, rows_or_path)
        return self._store_results(name, data, n_rows, None, meta)

    def log_result_columns(self, name: str, columns: Sequence[ResultColumns], **meta: Any) -> Path:
        """Store result rows given as columns (one :class:`~labledger.inputs.result_columns.ResultColumns`
        block per task, one after another) as result set ``name``.

        The stored file, its ``meta.json`` and every error are those of
        ``log_results(name, [r for c in columns for r in c.rows()], **meta)``; the rows are checked
        and encoded column by column (see :mod:`labledger.inputs.result_columns`), and only what
        those checks cannot vouch for goes through the row checker. Returns the stored file's path.

        >>> import tempfile, labledger
        >>> from labledger.inputs.result_columns import ResultColumns
        >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
        ...     p = run.log_result_columns("r", [ResultColumns("mean", ["a"], [1.0], {"pred": [0.5]})])
        >>> p.read_bytes()
        b'{"id":"a","task":"mean","gold":1.0,"pred":0.5}\\n'
        """
        self.check_results_name(name)
        data, n_rows = result_set_bytes(name, columns)
        return self._store_results(name, data, n_rows, None, meta)

    def log_encoded_results(self, name: str, path: Path, *, rows: int, sha256: str, **meta: Any) -> Path:
        """Store as result set ``name`` the file at ``path``, written by :func:`result_set_bytes`
        (checked and encoded, maybe in another process) in this run's ledger, with its ``rows``
        and ``sha256``: the file is moved into place, so the stored bytes and ``meta.json`` are
        those of :meth:`log_result_columns` given the same columns (#13).

        >>> import tempfile, labledger
        >>> from labledger.inputs.result_columns import ResultColumns
        >>> with labledger.start_run("r", ledger=tempfile.mkdtemp()) as run:
        ...     data, n = result_set_bytes("r", [ResultColumns("mean", ["a"], [1.0], {"pred": [0.5]})])
        ...     _ = (run.dir / "part").write_bytes(data)
        ...     p = run.log_encoded_results("r", run.dir / "part", rows=n, sha256=hashlib.sha256(data).hexdigest())
        >>> p.read_bytes()
        b'{"id":"a","task":"mean","gold":1.0,"pred":0.5}\\n'
        """
        self.check_results_name(name)
        return self._store_results(name, None, rows, None, meta, written=(Path(path), sha256))

    def check_results_name(self, name: str) -> None:
        """Raise unless ``name`` is a valid result-set name this open run does not have yet."""
        self._check_open()
        check_name(name, "result set name")
        if (self.dir / "evals" / name / "results.jsonl").exists():
            raise LedgerError(f"run {self.id} already has results '{name}'")

    def _store_results(
        self,
        name: str,
        data: bytes | None,
        n_rows: int,
        origin: str | None,
        meta: Mapping[str, Any],
        *,
        written: tuple[Path, str] | None = None,
    ) -> Path:
        """Write a checked result set's file (``data``, or move the ``written`` file with its
        sha256 into place) and ``meta.json`` inside the index transaction."""
        out_dir = self.dir / "evals" / name
        target = out_dir / "results.jsonl"
        info = {
            **meta,
            "name": name,
            "rows": n_rows,
            "sha256": written[1] if written is not None else hashlib.sha256(data or b"").hexdigest(),
            "source": origin,
            "created": time.time(),
        }
        # The files are written inside the index transaction: if either fails, neither is kept. In a
        # staging ledger (an import) their fsyncs wait for the adopt, which makes them all at once.
        deferred = self.ledger.deferred_sync
        with self.ledger.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO evaluations (run_id, name, kind, created, n_rows, sha256) "
                "VALUES (?, ?, 'results', ?, ?, ?)",
                (self.id, name, info["created"], n_rows, info["sha256"]),
            )
            out_dir.mkdir(parents=True, exist_ok=True)
            try:
                write_json(out_dir / "meta.json", info, fsync=deferred is None)
                if written is not None:
                    if deferred is None:
                        fsync_files([written[0]])
                    os.replace(written[0], target)
                    if deferred is None:
                        fsync_dir(out_dir)
                else:
                    atomic_write(target, data or b"", fsync=deferred is None)
            except BaseException:
                for leftover in (target, out_dir / "meta.json"):
                    leftover.unlink(missing_ok=True)
                raise
        if deferred is not None:
            deferred += (out_dir / "meta.json", target)
        return target

    def log_file(self, name: str, data: bytes | str | os.PathLike[str]) -> Path:
        """Store a file under the run's ``files/`` (``name`` may contain ``/``). Returns its path.

        ``data`` is the content (bytes) or the path of a file to copy.
        """
        self._check_open()
        rel = check_relative_path(name)
        target = self.dir / "files" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, (bytes, bytearray, memoryview)):
            atomic_write(target, bytes(data), fsync=False)
        else:
            src = Path(data)
            if not src.is_file():
                raise LedgerError(f"{src} does not exist or is not a file")
            shutil.copyfile(src, target)
        return target

    def note(self, text: str) -> None:
        """Append a free-text note (observations, limits of interpretation, ...)."""
        self._check_open()
        if self._notes is None:
            self._notes = Appender(self.dir / RECORD_FILES["notes"])
        self._notes.append({"time": time.time(), "text": str(text)})
        self._n_notes += 1

    def set_summary(self, **values: Any) -> None:
        """Headline values shown in ``labledger runs`` (e.g. ``test_accuracy``)."""
        self.summary.update(clean_scalars(values))

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def _last(self) -> dict[str, Any]:
        """Each scalar's last value, in the order first logged (read by :mod:`labledger.wandb`)."""
        self._fold()
        return self._last_values

    def _summary(self) -> dict[str, Any]:
        self._fold()
        return {
            "steps": self._max_step,
            "scalar_records": self._n_scalars,
            "batches": self._n_batches,
            "history": self._n_history,
            "checkpoints": self._n_checkpoints,
            "last": dict(self._last_values),
            "headline": dict(self.summary),
        }

    def _appenders(self) -> list[Appender]:
        return [
            a for a in (self._scalars, self._batches, self._history, self._checkpoints, self._notes) if a is not None
        ]

    def _fold(self) -> None:
        """Fold the pending scalar records into the record count, the max step, each key's last
        value and step, the min/max and the first and last times.

        Each value is visited by C-level passes only (``map``, ``min``, ``max``): in the usual run
        every pending record has the keys of the newest one, so its columns are taken whole and the
        last values are the newest record's; otherwise each key's records are found.
        """
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._n_scalars += len(pending)
        newest = pending[-1]
        last, last_step, stats = self._last_values, self._last_step, self._stats
        cols: dict[str, list[Any]] | None
        try:
            cols = {k: list(map(operator.itemgetter(k), pending)) for k in newest if k != "time"}
        except KeyError:
            cols = None
        if cols is not None and sum(map(len, pending)) != len(newest) * len(pending):
            cols = None  # each has the newest record's keys, and one has more: not the same keys
        if cols is not None:
            top = max(cols.pop("step"))
            for k in pending[0]:  # a new key takes its place in the order keys were first logged
                if k not in last and k in cols:
                    last[k] = None
            step = newest["step"]
            for k, col in cols.items():
                last[k] = col[-1]
                last_step[k] = step
                stats.fold_column(k, col, numbers=True)
        else:
            top = max(map(_STEP, pending))
            keys = set().union(*pending)
            # Each key's last value and step: from the newest record back, until every key is seen.
            found: dict[str, tuple[Any, Any]] = {}
            need = len(keys)
            for rec in reversed(pending):
                step = rec["step"]
                for k, v in rec.items():
                    if k not in found:
                        found[k] = (v, step)
                if len(found) >= need:
                    break
            keys.discard("step")
            keys.discard("time")
            new = keys - last.keys()
            if new:  # a key logged for the first time: keep the order in which keys were first logged
                for rec in pending:
                    for k in rec:
                        if k in new:
                            last[k] = None
                            new.discard(k)
                    if not new:
                        break
            for k in keys:
                last[k], last_step[k] = found[k]
            stats.fold(pending, keys, numbers=True)
        if self._max_step is None or top > self._max_step:
            self._max_step = top
        # the first and last numeric times, as the counters' full scan defines them (an explicit
        # time=None or time="..." record does not count): the usual first/last record's, else a scan
        if self._first_time is None:
            self._first_time = next((t for r in pending if is_time(t := r.get("time"))), None)
        t = newest.get("time")
        if not is_time(t):
            t = next((t for r in reversed(pending) if is_time(t := r.get("time"))), self._last_time)
        self._last_time = t

    def _fields(self) -> dict[str, Any]:
        self._fold()
        return run_fields(self.config, self._summary(), self._stats)

    def _counters(self) -> Counters:
        """The index's counters (:mod:`labledger.store.counters`) of what this run wrote so far."""
        self._fold()
        files: dict[str, list[int]] = {}
        for a in self._appenders():
            st = os.fstat(a.fd)
            files[a.path.name] = [st.st_size, st.st_mtime_ns]
        records = {
            "scalars": self._n_scalars,
            "batches": self._n_batches,
            "history": self._n_history,
            "checkpoints": self._n_checkpoints,
            "notes": self._n_notes,
        }
        if self._system is not None and self._system.position is not None:
            n, size, mtime = self._system.position
            records["system"] = n
            files[RECORD_FILES["system"]] = [size, mtime]
        last_step = self._last_step
        return Counters(
            records=records,
            files=files,
            steps=self._max_step,
            last={k: [_finite_or_none(v), last_step.get(k)] for k, v in self._last_values.items()},
            first_time=self._first_time,
            last_time=self._last_time,
        )

    def _tick(self, now: float) -> None:
        """The log calls' timer: fold pending scalars (memory stays flat); refresh the index and
        sync when they are due."""
        self._fold()
        if now >= self._sync_due:
            self.sync()
        elif now >= self._index_due:
            # the records are in the files; when the index is unreachable the next sync tries again
            # and fails loudly
            with contextlib.suppress(IndexUnavailableError):
                self.refresh_index()
        else:
            self._next_sync = min(self._sync_due, self._index_due, now + FOLD_INTERVAL)

    def refresh_index(self) -> None:
        """Write the index row's summary, query fields and counters (done every ``index_interval``).

        When the index is unreachable (team mode, PostgreSQL down past its retry window), the next
        attempt waits for the next sync, so that log calls do not wait on the index at every refresh.
        """
        try:
            self.ledger.update_run(
                self.id, summary=self._summary(), fields=self._fields(), counters=self._counters().to_json()
            )
        except IndexUnavailableError:
            self._index_due = self._sync_due
            self._next_sync = min(self._sync_due, time.time() + FOLD_INTERVAL)
            raise
        now = time.time()
        self._index_due = now + self.index_interval
        self._next_sync = min(self._sync_due, self._index_due, now + FOLD_INTERVAL)

    def sync(self) -> None:
        """fsync every file and refresh the index row (both also done on an interval)."""
        for a in self._appenders():
            a.fsync()
        self._sync_due = time.time() + self.sync_interval
        self.refresh_index()

    def _compact(self) -> None:
        """Compress the record files of at least ``compact_min_bytes``: verified before the
        JSONL goes; a failure (a full disk) keeps the JSONL and only warns."""
        from labledger.store.compressed import compact_min_bytes, compact_run

        least = self.compact_min_bytes if self.compact_min_bytes is not None else compact_min_bytes()
        if least is None:
            return
        try:
            compact_run(self.dir, min_bytes=least, held=True)
        except (LedgerError, OSError) as exc:
            import warnings

            warnings.warn(f"{self.dir}: record files left as JSONL ({exc})", RuntimeWarning, stacklevel=3)

    def finish(self, status: str = "finished", *, error: str | None = None, ended: float | None = None) -> None:
        """End the run with ``status`` (finished, failed, killed); fsyncs everything."""
        if self.status != "running":
            return
        if status not in ("finished", "failed", "killed"):
            raise LedgerError(f"status must be finished, failed or killed; got {status!r}")
        if self._system is not None:
            self._system.stop()
        counters = self._counters()  # the files as they end, before they close
        self._system = None
        self._scalars_fd = -1  # Run.log's write is refused from here on (see log)
        for a in self._appenders():
            a.fsync()
            a.close()
        self.status = status
        self.meta.update(status=status, ended=time.time() if ended is None else float(ended), error=error)
        if self.summary:  # headline values live in run.json too: a copied run folder keeps them (#17)
            self.meta["headline"] = dict(self.summary)
        write_json(self.dir / "run.json", self.meta)
        self.ledger.update_run(
            self.id,
            status=status,
            ended=self.meta["ended"],
            error=error,
            summary=self._summary(),
            fields=self._fields(),
            counters=counters.to_json(),
        )
        if self.compact_at_finish:
            self._compact()
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)
        if self._owns_ledger:
            self.ledger.close()


def _finite_or_none(v: Any) -> Any:
    """A logged value as the counters store it (NaN and infinities as ``None``, as in the files)."""
    if type(v) is float and not math.isfinite(v):
        return None
    return v


def result_rows_bytes(name: str, rows: Iterable[Mapping[str, Any]]) -> tuple[bytes, int]:
    """The ``results.jsonl`` bytes and row count of result set ``name`` from row dicts, checked by
    the row checker (a bad row raises naming it), as :meth:`Run.log_results` stores them.

    >>> result_rows_bytes("r", [{"id": "a", "task": "mean", "gold": 1.0, "pred": 0.5}])
    (b'{"id":"a","task":"mean","gold":1.0,"pred":0.5}\\n', 1)
    """
    from labledger.inputs.results import validate_rows

    checked = [dict(r) for r in rows]
    validate_rows(checked, source=f"results '{name}'")
    try:
        return b"".join(dumps_line(r) for r in checked), len(checked)
    except TypeError as exc:
        raise RecordError(f"results rows must be JSON-serialisable ({exc})") from None


def result_set_bytes(name: str, columns: Sequence[ResultColumns]) -> tuple[bytes, int]:
    """The ``results.jsonl`` bytes and row count :meth:`Run.log_result_columns` stores for
    ``columns`` (encoded column by column, or by the row checker when the fast checks cannot vouch
    for them: its error then names the row); for encoding in a worker process (#13).

    >>> from labledger.inputs.result_columns import ResultColumns
    >>> result_set_bytes("r", [ResultColumns("mean", ["a"], [1.0], {"pred": [0.5]})])
    (b'{"id":"a","task":"mean","gold":1.0,"pred":0.5}\\n', 1)
    """
    from labledger.inputs.result_columns import encode_columns, rows_of

    data = encode_columns(columns)
    if data is None:
        return result_rows_bytes(name, rows_of(columns))
    return data, sum(c.n for c in columns)


def start_run(
    name: str,
    *,
    group: str | None = None,
    tags: Iterable[str] = (),
    config: Mapping[str, Any] | None = None,
    notes: str | None = None,
    ledger: Ledger | str | os.PathLike[str] | None = None,
    system_metrics: bool = False,
    sync: str | None = None,
    init: InitSource | None = None,
) -> Run:
    """Start a run; use it as a context manager.

    ``init`` is what the run starts from (a checkpoint file, a sha256, a hub name: see
    :meth:`Run.set_init`); a checkpoint another run logged links the two in ``labledger lineage``.

    An exception inside the ``with`` block marks the run ``failed`` with the exception's summary
    and re-raises it. The ledger is ``ledger`` (a path or :class:`Ledger`), else ``$LABLEDGER_DIR``,
    else ``./.labledger``; it is created if missing. ``system_metrics=True`` samples CPU, memory and
    GPUs once a second into the run's ``system.jsonl`` (:mod:`labledger.store.system`). ``sync`` (else ``$LABLEDGER_SYNC``) is the URL of
    a team server to copy the run to in the background while it logs (``labledger sync --watch``;
    the token comes from ``$LABLEDGER_TOKEN``).

    >>> import tempfile, labledger
    >>> ledger_dir = tempfile.mkdtemp()
    >>> with labledger.start_run("mlp", group="sweep", config={"lr": 1e-3}, ledger=ledger_dir) as run:
    ...     for step in range(1, 4):
    ...         run.log(step, loss=1.0 / step)
    >>> labledger.open_ledger(ledger_dir).run(run.id).status
    'finished'
    """
    return Run(
        name,
        group=group,
        tags=tags,
        config=config,
        notes=notes,
        ledger=ledger,
        system_metrics=system_metrics,
        sync=sync,
        init=init,
    )
