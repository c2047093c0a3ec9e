"""``labledger verify``: check record files, the index, sha256s and site manifests; repair safely."""

from __future__ import annotations

import sys

import click

from labledger.cli.base import console, emit_json, handle_errors, json_option, ledger_option, main, resolve_ledger_path


@main.command("verify")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@ledger_option
@click.option(
    "--repair",
    is_flag=True,
    help="Move damaged lines into FILE.damaged, remove interrupted imports, and move the index rows of runs "
    "whose folder is gone into the trash (no data lost).",
)
@click.option("--site", "sites", multiple=True, metavar="DIR", help="Also check this site folder's manifest.")
@json_option
@handle_errors
def verify_cmd(runs, ledger_path, repair, sites, as_json):
    """Check the ledger (or only RUNs): every record file line by line, index rows against folders,
    result and checkpoint sha256s, site manifests, leftovers of interrupted imports.

    Prints every problem as FILE:LINE: what; exits 1 if any is left (after --repair, only what it
    could not repair). --repair never deletes data: damaged lines go to FILE.damaged, and the index
    rows of a run whose folder was removed by hand go to the trash (labledger restore).
    """
    from labledger.store.ledger import Ledger
    from labledger.store.verify import verify_ledger

    with Ledger(resolve_ledger_path(ledger_path)) as ledger:
        report = verify_ledger(ledger, runs, repair=repair, sites=sites)
    if as_json:
        emit_json(report.to_dict())
    else:
        for problem in report.problems:
            console.print(str(problem), markup=False)
        left = sum(1 for p in report.problems if p.repaired is None)
        fixed = len(report.problems) - left
        console.print(
            f"checked {report.runs} run(s), {report.files} file(s), {report.lines:,} line(s): "
            + ("no problems" if not report.problems else f"{left} problem(s) left, {fixed} repaired"),
            markup=False,
        )
    if not report.ok:
        sys.exit(1)
