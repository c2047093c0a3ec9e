"""Every user-facing failure in labledger is a subclass of :class:`LedgerError`.

The library raises these; only ``labledger.cli`` turns them into ``Error: ...`` lines and exit codes.
"""

from __future__ import annotations

from collections.abc import Iterable


class LedgerError(Exception):
    """Base class of every error labledger reports to a user."""

    exit_code = 1


class RecordError(LedgerError):
    """A record (a logged dict or a line of a file) does not match its schema.

    The message names the source (file and line, when the record came from a file) and the field.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None, field: str | None = None):
        self.source = source
        self.line = line
        self.field = field
        self.detail = message
        where = ""
        if source is not None:
            where = f"{source}:{line}: " if line is not None else f"{source}: "
        if field is not None:
            message = f"field '{field}' {message}" if not message.startswith("field ") else message
        super().__init__(where + message)


class LedgerNotFoundError(LedgerError):
    """No ledger exists at the given location."""


class RunNotFoundError(LedgerError):
    """No run matches the given id, prefix or name (or more than one does)."""


class RunStateError(LedgerError):
    """The operation is not allowed in the run's current state (e.g. logging to a finished run)."""


class UnknownNameError(LedgerError):
    """A name (metric, method, format, ...) is not known; the message suggests the nearest ones."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        import difflib  # here: `labledger --help` and `runs` import this module and need no difflib

        known = sorted(known)
        self.kind, self.name, self.known = kind, name, known
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        msg = f"Unknown {kind} '{name}'."
        if close:
            msg += " Did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
        else:
            msg += " Known: " + ", ".join(known) + "." if known else f" There is no {kind} here."
        super().__init__(msg)


class UnknownMetricError(UnknownNameError):
    """A metric name is not in the registry."""

    def __init__(self, name: str, known: Iterable[str]):
        super().__init__("metric", name, known)


class MetricInputError(LedgerError):
    """Inputs to a metric are inconsistent (lengths, kinds, values outside their range)."""


class DuplicateMetricError(LedgerError):
    """A metric registry was given two metrics of the same name."""


class ComparisonError(LedgerError):
    """Two things cannot be compared as asked (different item sets, different tasks, ...)."""


class ForensicsError(LedgerError):
    """A forensic reconstruction was asked with impossible or inconsistent inputs."""


class CalibrationError(LedgerError):
    """A calibration recipe is malformed, does not fit the data, or was already applied."""


class CheckpointError(LedgerError):
    """Checkpoints cannot be hashed, read or averaged as asked (names the first mismatch)."""


class ImportSourceError(LedgerError):
    """A source to import is malformed, unsupported, or was already imported."""


class GateError(LedgerError):
    """A threshold-sweep gate expression is malformed or names an unknown class or slice."""


class SiteError(LedgerError):
    """The static site cannot be built as asked (output folder, data file, run selection)."""


class PNGError(LedgerError):
    """Bytes or pixels that the demo's grayscale PNG encoder/decoder cannot handle."""


class IndexUnavailableError(LedgerError):
    """The ledger's index database (PostgreSQL in team mode) could not be reached within the retry window."""


class PushError(LedgerError):
    """An upload to a labledger server was refused, cut off, or stored with a different sha256."""


class SyncError(PushError):
    """``labledger sync`` could not complete: a conflict, a refused write, a sha256 that differs (#18)."""


class SyncConflictError(SyncError):
    """Two copies of one run disagree (another machine's, or one changed on the server): refused, not merged."""


class SyncDigestError(SyncError):
    """The server hashed a file's bytes as they arrived and they were not the ones the client
    stated (``X-Digest``): the local copy changed or was damaged since it was hashed; nothing was kept."""


class StorageError(LedgerError):
    """The disk refused a write (full, read-only, I/O error): the record or file was not stored.

    The writer leaves no partial line or file behind, so the same call works again once the cause
    (usually free space) is fixed.
    """


class DamagedLineWarning(UserWarning):
    """A line of a record file is damaged (not JSON, not an object); it was skipped, the rest was read."""


class TornLineWarning(DamagedLineWarning):
    """A JSONL file ends in an incomplete line (its writer died mid-write); the line was skipped."""


class CacheWarning(UserWarning):
    """The columnar cache could not be written (a full disk, no permission): large files are parsed
    from their JSONL each time until it can; nothing stored is affected."""


class QueryWarning(UserWarning):
    """A query compares a field with a value of one kind (a number) while some runs hold another
    kind there (text): those runs do not match."""


class RunNameWarning(UserWarning):
    """Several runs share the name a run was asked for by; the newest was used (``name@K`` picks another)."""
