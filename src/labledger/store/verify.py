"""``labledger verify``: check a ledger's files against themselves and the index, and repair safely.

What is checked, each problem reported with its file (and line where there is one):

* every record file of every run (``metrics.jsonl``, ``batches.jsonl``, ...): each line must be a
  JSON object; a torn or damaged line is a problem;
* the index and the folders agree: a run in the index has a folder with ``run.json``, a run folder
  has an index row;
* every stored result set: ``results.jsonl`` has the sha256 and row count of its ``meta.json`` and
  of its index row;
* every checkpoint the run copied in has its recorded sha256 (one referenced in place is checked
  when it is still there);
* every site folder with a build manifest (``LEDGER/site`` and any ``sites`` given): each file the
  manifest lists has its recorded size and sha256;
* leftovers of interrupted imports (``.staging/<hex>`` folders no live import holds);
* runs in the index whose folder is gone (removed by hand), and deletes or restores interrupted
  part-way (:mod:`labledger.store.trash`).

``repair`` never deletes data: a damaged line is moved to ``FILE.damaged`` beside the record file
(with its line number), and the file is rewritten atomically without it; an interrupted import's
staging folder (a scratch copy of data that was never adopted) is removed. A run whose writer is
still alive is left alone (its last line may be mid-write). A run whose folder is gone leaves the
index: its rows are moved into a trash entry (``.trash/<id>/note.json``), from which ``labledger
restore`` puts them back once the folder is back; an interrupted ``labledger rm`` is settled (the
index decides: a delete that never committed gets its folder back).
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import DamagedLineWarning, LedgerError
from labledger.store.compressed import (
    check_compressed,
    compressed_path,
    is_old_layout,
    is_prefix,
    read_record_bytes,
    upgrade_file,
    write_record_bytes,
)
from labledger.store.jsonl import RECORD_FILES, damaged_lines, decode_line
from labledger.store.ledger import Ledger, lock_is_held
from labledger.store.manifest import check_manifest, sha256_file
from labledger.store.trash import MARKER, forget_missing, gone_error, settle, trash_dir

#: The site builder's manifest (labledger.site.output.MANIFEST; named here so store/ imports nothing above it).
SITE_MANIFEST = ".labledger-site.json"
#: Side file beside a record file that holds the lines ``verify --repair`` took out of it.
DAMAGED_SUFFIX = ".damaged"


@dataclass
class Problem:
    """One finding: where (file, line) and what."""

    path: str
    message: str
    line: int | None = None
    repaired: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        done = f" [repaired: {self.repaired}]" if self.repaired else ""
        return f"{where}: {self.message}{done}"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message, "repaired": self.repaired}


@dataclass
class Report:
    """What :func:`verify_ledger` found: problems, and how much it looked at."""

    problems: list[Problem] = field(default_factory=list)
    runs: int = 0
    files: int = 0
    lines: int = 0

    @property
    def ok(self) -> bool:
        return not any(p.repaired is None for p in self.problems)

    def add(self, path: Path | str, message: str, line: int | None = None) -> Problem:
        problem = Problem(str(path), message, line)
        self.problems.append(problem)
        return problem

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "runs": self.runs,
            "files": self.files,
            "lines": self.lines,
            "problems": [p.to_dict() for p in self.problems],
        }


def quarantine_lines(path: Path, bad: Iterable[int]) -> int:
    """Move lines ``bad`` (1-based) of ``path`` into ``path.damaged``; rewrite ``path`` without them.

    Nothing is lost: each moved line is appended to the side file as ``{"file", "line", "raw"}``
    (``raw`` is the line's bytes, decoded as UTF-8 with replacement, and ``raw_hex`` its exact bytes).
    Returns the number of lines moved.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "metrics.jsonl"
    >>> _ = p.write_bytes(b'{"step": 1}\\n{"st\\n{"step": 2}\\n')
    >>> quarantine_lines(p, [2]), p.read_bytes()
    (1, b'{"step": 1}\\n{"step": 2}\\n')
    """
    bad = set(bad)
    if not bad:
        return 0
    data = read_record_bytes(path)  # a compacted file is rewritten compressed
    lines = data.split(b"\n")
    keep: list[bytes] = []
    moved: list[bytes] = []
    for lineno, raw in enumerate(lines, 1):
        if lineno in bad:
            moved.append(
                orjson.dumps(
                    {"file": path.name, "line": lineno, "raw": raw.decode("utf-8", "replace"), "raw_hex": raw.hex()},
                    option=orjson.OPT_APPEND_NEWLINE,
                )
            )
        elif raw or lineno < len(lines):
            keep.append(raw)
    side = path.with_name(path.name + DAMAGED_SUFFIX)
    with open(side, "ab") as f:  # first the copy, then the rewrite: a crash between loses nothing
        f.write(b"".join(moved))
        f.flush()
        os.fsync(f.fileno())
    body = b"\n".join(keep)
    if body and not body.endswith(b"\n"):
        body += b"\n"
    write_record_bytes(path, body)
    return len(moved)


def _check_record_files(report: Report, run_dir: Path, *, repair: bool, live: bool) -> None:
    for fname in RECORD_FILES.values():
        path = run_dir / fname
        zpath = compressed_path(path)
        if zpath.is_file():  # a compacted file: its frames, index and sha256, then its lines
            report.files += 1
            for line, what in check_compressed(zpath):
                problem = report.add(zpath, what, line)
                if repair and not live and is_old_layout(zpath) and upgrade_file(path).action == "upgraded":
                    problem.repaired = "rewritten in the zstd seekable format"
            if path.is_file() and not is_prefix(path, zpath):  # a leftover of the same records is harmless
                report.add(path, "a JSONL beside its compressed copy holds other records (the compressed copy is read)")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DamagedLineWarning)  # damaged frames: reported above
                data = read_record_bytes(path)
                found = damaged_lines(path)
            report.lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
            del data
            problems = [report.add(zpath, f"damaged line ({why})", line) for line, why in found]
            if repair and problems and not live:
                quarantine_lines(path, [line for line, _ in found])
                for p in problems:
                    p.repaired = f"moved to {path.name}{DAMAGED_SUFFIX}"
            continue
        if not path.is_file():
            continue
        report.files += 1
        found = damaged_lines(path)
        with open(path, "rb") as f:
            report.lines += sum(1 for _ in f)
        if live and found and found[-1][1].startswith("torn last line"):
            found = found[:-1]  # the writer is alive: its last line may be mid-write
        problems = [report.add(path, f"damaged line ({why})", line) for line, why in found]
        if repair and problems and not live:
            n = quarantine_lines(path, [line for line, _ in found])
            for p in problems:
                p.repaired = f"moved to {path.name}{DAMAGED_SUFFIX}"
            if n != len(problems):  # pragma: no cover - damaged_lines and the split agree
                report.add(path, f"moved {n} lines but found {len(problems)}")


def _check_results(report: Report, ledger: Ledger, run_id: str, run_dir: Path) -> None:
    evals = run_dir / "evals"
    if not evals.is_dir():
        return
    indexed = {
        name: (n_rows, sha)
        for name, n_rows, sha in ledger.db.execute(
            "SELECT name, n_rows, sha256 FROM evaluations WHERE run_id = ? AND kind = 'results'", (run_id,)
        ).fetchall()
    }
    for folder in sorted(evals.iterdir()):
        results = folder / "results.jsonl"
        if not results.is_file():
            continue
        report.files += 1
        meta_path = folder / "meta.json"
        try:
            meta = decode_line(meta_path.read_bytes(), str(meta_path), 1)
        except (OSError, LedgerError) as exc:
            report.add(meta_path, f"cannot read the result set's meta.json ({exc})")
            continue
        digest = sha256_file(results)[0]
        if meta.get("sha256") != digest:
            report.add(results, f"sha256 is {digest} but meta.json records {meta.get('sha256')}")
        index = indexed.get(folder.name)
        if index is None:
            report.add(results, "has no row in the index (evaluations)")
        elif index[1] is not None and index[1] != digest:
            report.add(results, f"sha256 is {digest} but the index records {index[1]}")


def checkpoint_files(run_dir: Path) -> Iterator[tuple[int, dict[str, Any], Path]]:
    """``(line, record, file)`` of each checkpoint the run's ``checkpoints.jsonl`` records with a
    path (references to files elsewhere by name only, and damaged lines, left out): what ``verify``
    checks, and what ``labledger sync`` trusts a checkpoint's sha256 from (#18)."""
    path = run_dir / RECORD_FILES["checkpoints"]
    if not path.is_file() and not compressed_path(path).is_file():
        return
    from labledger.store.jsonl import iter_lines

    for lineno, raw in iter_lines(path):
        try:
            rec = decode_line(raw, str(path), lineno)
        except LedgerError:
            continue  # reported as a damaged line
        if rec.get("reference") or not isinstance(rec.get("path"), str):
            continue
        target = Path(rec["path"])
        if rec.get("copied") and not target.is_absolute():
            target = run_dir / target
        yield lineno, rec, target


def _check_checkpoints(report: Report, run_dir: Path) -> None:
    path = run_dir / RECORD_FILES["checkpoints"]
    for lineno, rec, target in checkpoint_files(run_dir):
        if not target.is_file():
            if rec.get("copied"):
                report.add(path, f"checkpoint {target} (copied into the run) is missing", lineno)
            continue
        digest = sha256_file(target)[0]
        if digest != rec.get("sha256"):
            report.add(path, f"checkpoint {target} has sha256 {digest}, not the recorded {rec.get('sha256')}", lineno)


def check_site(report: Report, site: Path) -> None:
    """Check a site folder's files against its build manifest (size and sha256)."""
    manifest_path = site / SITE_MANIFEST
    try:
        manifest = orjson.loads(manifest_path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        report.add(manifest_path, f"cannot read the site manifest ({exc})")
        return
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        report.add(manifest_path, "the site manifest has no 'files' mapping")
        return
    root = site.resolve()
    for rel, entry in sorted(files.items()):
        report.files += 1
        path = site / rel
        if not isinstance(entry, dict) or ".." in rel.split("/") or rel.startswith("/"):
            report.add(manifest_path, f"lists {rel!r}, which is not a file inside the site")
            continue
        if not Path(os.path.realpath(path)).is_relative_to(root):
            report.add(manifest_path, f"lists {rel!r}, which leads outside the site")
            continue
        try:
            size = path.stat().st_size
        except OSError:
            report.add(path, "listed in the site manifest but missing")
            continue
        if size != entry.get("size"):
            report.add(path, f"is {size} bytes; the site manifest records {entry.get('size')}")
        elif entry.get("sha256") is not None and sha256_file(path)[0] != entry["sha256"]:
            report.add(path, "its sha256 differs from the site manifest's")


def stale_staging(ledger_root: Path) -> list[Path]:
    """Staging folders of imports that no live process holds (interrupted by a kill or a crash)."""
    base = ledger_root / ".staging"
    if not base.is_dir():
        return []
    return [p for p in sorted(base.iterdir()) if p.is_dir() and not lock_is_held(p / ".import.lock")]


def verify_ledger(
    ledger: Ledger, run_refs: Iterable[str] = (), *, repair: bool = False, sites: Iterable[str | os.PathLike[str]] = ()
) -> Report:
    """Check ``ledger`` (or only the runs ``run_refs``); with ``repair``, quarantine damaged lines.

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("r", ledger=d) as run:
    ...     run.log(1, loss=0.5)
    >>> verify_ledger(labledger.open_ledger(d)).ok
    True
    """
    report = Report()
    refs = list(run_refs)
    if refs:
        ids = [ledger.resolve(r) for r in refs]
    else:
        ids = [r[0] for r in ledger.db.execute("SELECT id FROM runs ORDER BY started").fetchall()]
        if repair:  # deletes and restores interrupted part-way: the index decides which way they go
            for run_id in settle(ledger):
                report.add(
                    ledger.run_dir(run_id), "left by an interrupted labledger rm or restore"
                ).repaired = "settled"
        runs_dir = ledger.root / "runs"
        if runs_dir.is_dir():
            known = set(ids)
            for folder in sorted(runs_dir.iterdir()):
                if (folder / MARKER).is_file():
                    continue  # files of a deleted run kept for runs that use them (store/trash.py)
                if folder.is_dir() and folder.name not in known:
                    report.add(folder, "a run folder with no row in the index")
        left = [report.add(folder, "left by a run start killed part-way") for folder in ledger.left_started()]
        if repair and left:
            ledger.finish_started()  # each moved into runs/ when its row was committed, else removed
            for problem in left:
                problem.repaired = "settled"
        for stage in stale_staging(ledger.root):
            problem = report.add(stage, "left by an interrupted import (never adopted)")
            if repair:
                moved = ledger.finish_adopted(stage)  # runs whose adoption committed: moved in first
                shutil.rmtree(stage, ignore_errors=True)
                problem.repaired = "removed" + (f" (runs moved in: {', '.join(moved)})" if moved else "")
    for run_id in ids:
        report.runs += 1
        run_dir = ledger.run_dir(run_id)
        if not run_dir.is_dir():
            gone = gone_error(ledger, run_id)
            if gone is None:  # starting: its folder is renamed into runs/ just after its row is committed
                continue
            in_trash = (trash_dir(ledger) / run_id / "run").is_dir()
            problem = report.add(
                run_dir,
                f"run {run_id} is in the index but its folder is "
                + (
                    "in the trash (an interrupted labledger rm); --repair puts it back"
                    if in_trash
                    else "gone (removed by hand?); --repair removes it from the index"
                ),
            )
            if repair and in_trash:
                settle(ledger)  # an rm killed before its commit: the folder goes back
                if run_dir.is_dir():
                    problem.repaired = "folder put back from the trash"
            elif repair:
                forget_missing(ledger, run_id)
                problem.repaired = f"index rows moved to the trash; labledger restore {run_id} once the folder is back"
            continue
        if not (run_dir / "run.json").is_file():
            report.add(run_dir, f"run {run_id} is in the index but its folder (or run.json) is missing")
            continue
        live = lock_is_held(run_dir / ".lock")
        _check_record_files(report, run_dir, repair=repair, live=live)
        _check_results(report, ledger, run_id, run_dir)
        _check_checkpoints(report, run_dir)
        for message in check_manifest(run_dir):  # a run synced here from another ledger (#18)
            report.add(run_dir, message)
    candidates = [Path(s) for s in sites]
    default_site = ledger.root / "site"
    if not refs and (default_site / SITE_MANIFEST).is_file() and default_site not in candidates:
        candidates.append(default_site)
    for site in candidates:
        check_site(report, site)
    return report
