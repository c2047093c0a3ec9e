"""``labledger rm``, ``restore``, ``trash`` and ``gc``: delete runs to a trash, bring them back, empty it."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import click

from labledger.cli.base import emit_json, escape_controls, handle_errors, json_option, ledger_option, main, open_for_cli
from labledger.errors import LedgerError

_AGE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([dhms]?)\s*$")
_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "": 86400.0}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s`` or a plain number of days -> seconds.

    >>> parse_age("30d"), parse_age("1.5"), parse_age("90m")
    (2592000.0, 129600.0, 5400.0)
    """
    m = _AGE.match(text)
    if m is None:
        raise click.BadParameter(f"{text!r} is not an age: give e.g. 30d, 12h, 90m, 45s or a number of days")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def _can_ask() -> bool:
    """Whether a confirmation can be asked: stdin is a terminal."""
    return sys.stdin.isatty()


def _confirm(question: str, yes: bool, what: str) -> bool:
    """``True`` to go on: ``--yes``, or the user said yes. Without a terminal to ask on and
    without ``--yes``: a one-line error (exit 1), nothing done."""
    if yes:
        return True
    if not _can_ask():
        raise LedgerError(
            f"labledger {what} asks before it removes anything and there is no terminal to ask on; pass --yes"
        )
    return click.confirm(question, default=False)


def _size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"  # pragma: no cover - the loop returns


def _when(ts: float) -> str:
    from labledger.cli.runs import fmt_time

    return fmt_time(ts, seconds=False)


def _line(text: str) -> None:
    click.echo(escape_controls(text))


@main.command("rm")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@ledger_option
@json_option
@handle_errors
def rm_cmd(runs, yes, ledger_path, as_json):
    """Move RUNs (ids, id prefixes or names) to the ledger's trash: their folders and index rows,
    in one step each. labledger restore brings them back; labledger gc removes them for good.

    Asks first (--yes: not). A running run is refused (a crashed one may go). Checkpoint files that
    other runs use (recorded in place or started from) stay where they are. A run whose folder was
    removed by hand goes too (its index rows are kept in the trash).
    """
    from labledger.store.trash import delete_runs, shared_files

    ledger = open_for_cli(ledger_path)
    infos = []
    for ref in runs:
        info = ledger.info(ref)
        if info.id not in [i.id for i in infos]:
            infos.append(info)
    ids = {i.id for i in infos}
    if not yes and not _can_ask():
        _confirm("", yes, "rm")  # the one-line refusal, before anything is listed
    if not yes:
        _line(f"Runs to move to the trash of {ledger.root}:")
        for info in infos:
            run_dir = ledger.run_dir(info.id)
            where = _fmt_bytes(_size(run_dir)) if run_dir.is_dir() else "folder gone"
            steps = info.summary.get("steps")
            _line(
                f"  {info.id}  {info.name}  {info.status}  started {_when(info.started)}"
                f"  {'-' if steps is None else steps} steps  {where}"
            )
            for item in shared_files(ledger, info.id, ids):
                _line(f"    keeps {item['path']} in place: run {', '.join(item['used_by'])} uses it")
    n = len(infos)
    question = f"Move {n} run{'s' if n != 1 else ''} to the trash?"
    if not _confirm(question, yes, "rm"):
        click.echo("Nothing removed.", err=True)
        sys.exit(1)
    entries = delete_runs(ledger, [i.id for i in infos])
    if as_json:
        emit_json({"ledger": str(ledger.root), "trashed": [e.to_dict() for e in entries]})
        return
    for e in entries:
        _line(f"Moved run {e.id} ({e.name}) to {e.path}")
        for item in e.kept:
            _line(f"  kept {item['path']} in its folder: run {', '.join(item['used_by'])} uses it")
    _line(
        "labledger restore RUN brings a run back; labledger gc empties the trash"
        if n != 1
        else f"labledger restore {entries[0].id} brings it back; labledger gc empties the trash"
    )


@main.command("restore")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@ledger_option
@json_option
@handle_errors
def restore_cmd(runs, ledger_path, as_json):
    """Bring RUNs (ids, id prefixes or names of deleted runs) back from the trash: their index rows
    exactly as they were and their folders.
    """
    from labledger.store.trash import resolve_trashed, restore_runs

    ledger = open_for_cli(ledger_path)
    names = {}
    for ref in runs:
        entry = resolve_trashed(ledger, ref)
        names[entry.id] = entry.name
    restored = restore_runs(ledger, list(names))
    if as_json:
        emit_json({"ledger": str(ledger.root), "restored": restored})
        return
    for run_id in restored:
        _line(f"Restored run {run_id} ({names[run_id]}) to {ledger.run_dir(run_id)}")


@main.command("trash")
@ledger_option
@json_option
@handle_errors
def trash_cmd(ledger_path, as_json):
    """List the deleted runs in the ledger's trash: id, name, when deleted, size, kept files."""
    from labledger.cli.runs import print_table
    from labledger.cli.text_table import Column
    from labledger.store.trash import trash_entries

    ledger = open_for_cli(ledger_path)
    entries = trash_entries(ledger)
    sizes = {e.id: _size(e.path) for e in entries}
    if as_json:
        emit_json({"ledger": str(ledger.root), "trash": [{**e.to_dict(), "bytes": sizes[e.id]} for e in entries]})
        return
    if not entries:
        _line(f"The trash of {ledger.root} is empty.")
        return
    now = time.time()
    rows = []
    for e in entries:
        age = now - e.deleted
        if age >= 86400:
            ago = f"{age // 86400:.0f}d ago"
        elif age >= 3600:
            ago = f"{age // 3600:.0f}h ago"
        else:
            ago = f"{age // 60:.0f}m ago" if age >= 60 else "just now"
        rows.append(
            [
                e.id,
                escape_controls(e.name),
                e.status or "-",
                f"{_when(e.deleted)} ({ago})",
                _fmt_bytes(sizes[e.id]) if e.folder else "rows only",
                str(len(e.kept)),
            ]
        )
    headers = ("id", "name", "status", "deleted", "size", "kept files")
    columns = [Column(h, justify="right" if h in ("size", "kept files") else "left") for h in headers]
    print_table(escape_controls(f"Trash of {ledger.root}"), columns, rows, [[None] * len(headers) for _ in rows])


@main.command("gc")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option(
    "--older-than",
    metavar="AGE",
    default=None,
    help="Only runs deleted more than AGE ago: 30d, 12h, 90m, 45s or a number of days.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@ledger_option
@json_option
@handle_errors
def gc_cmd(runs, older_than, yes, ledger_path, as_json):
    """Empty the trash for good: RUNs of it, else the runs deleted more than --older-than ago, else
    all. Files kept for other runs go once no run uses them.
    """
    from labledger.store.trash import purge, resolve_trashed, trash_entries

    age = None if older_than is None else parse_age(older_than)
    ledger = open_for_cli(ledger_path)
    if runs:
        entries = [resolve_trashed(ledger, r) for r in runs]
    else:
        cutoff = None if age is None else time.time() - age
        entries = [e for e in trash_entries(ledger) if cutoff is None or e.deleted < cutoff]
    if not entries:
        if as_json:
            emit_json({"ledger": str(ledger.root), "purged": [], "bytes": 0})
        else:
            _line("Nothing in the trash to remove.")
        return
    freed = sum(_size(e.path) for e in entries)
    if not yes and not _can_ask():
        _confirm("", yes, "gc")  # the one-line refusal, before anything is listed
    if not yes:
        _line(f"Runs to remove for good from the trash of {ledger.root} ({_fmt_bytes(freed)}):")
        for e in entries:
            _line(f"  {e.id}  {e.name}  deleted {_when(e.deleted)}")
    n = len(entries)
    if not _confirm(f"Remove {n} run{'s' if n != 1 else ''} for good? This cannot be undone.", yes, "gc"):
        click.echo("Nothing removed.", err=True)
        sys.exit(1)
    result = purge(ledger, refs=[e.id for e in entries])
    doc = {"ledger": str(ledger.root), **result.to_dict(), "bytes": freed}
    if as_json:
        emit_json(doc)
        return
    for e in result.purged:
        _line(f"Removed run {e.id} ({e.name}) for good")
    for path in result.kept_files:
        _line(f"  {path} stays: a run in the ledger uses it")
    _line(f"Freed {_fmt_bytes(freed)}.")
