"""``labledger sync``: copy runs of the local ledger to a team server, incrementally and verified (#18)."""

from __future__ import annotations

import contextlib
import sys
import time

import click

from labledger.cli.base import (
    emit_json,
    escape_controls,
    handle_errors,
    json_option,
    ledger_option,
    main,
    resolve_ledger_path,
)


def _say(text: str, *, err: bool = False) -> None:
    """One line on stdout (stderr with ``err``), control characters escaped: plain lines, so a
    sync need not import rich (docs/performance.md)."""
    click.echo(escape_controls(text), err=err)


@main.command("sync")
@click.argument("runs", nargs=-1)
@click.option(
    "--to",
    "to",
    required=True,
    envvar="LABLEDGER_SYNC",
    show_envvar=True,
    metavar="URL",
    help="The team server (http://HOST:PORT), a `labledger serve` with a token; or s3://BUCKET/PREFIX.",
)
@click.option("--token", default=None, envvar="LABLEDGER_TOKEN", show_envvar=True, help="The server's token.")
@click.option(
    "--watch",
    is_flag=True,
    help="Keep syncing live runs every --interval seconds (until they end, "
    "when RUNs are named; else until interrupted). A server that is down is retried.",
)
@click.option(
    "--interval",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.05),
    help="Seconds between rounds of --watch.",
)
@click.option("--status", "status", is_flag=True, help="Send nothing: show what the server lacks, run by run.")
@click.option(
    "--repair",
    is_flag=True,
    help="Send the local copy again over files the server holds damaged or changed (otherwise refused).",
)
@ledger_option
@json_option
@handle_errors
def sync_cmd(runs, to, token, watch, interval, status, repair, ledger_path, as_json):
    """Copy RUNs (default: every run) to the team server at --to, and verify them.

    Only what the server lacks is sent (compared by sha256 per 1 MiB chunk); a second sync sends
    nothing. Exit 0 only when the server's copy of every file equals the local one; a run another
    ledger synced, or one changed on the server, is refused (exit 1), never merged.
    """
    from labledger.server.sync_client import SyncReport, sync_runs
    from labledger.server.sync_client import watch as watch_runs

    path = resolve_ledger_path(ledger_path)
    wanted = list(runs) or None
    if to.startswith("s3://"):
        if watch or status or repair:
            raise click.UsageError("--watch, --status and --repair are for a server; s3:// takes a plain sync")
        from labledger.store.objects import sync_to_objects

        done = sync_to_objects(path, to, runs=wanted)
        if as_json:
            emit_json(done.to_dict())
            return
        _say(
            f"Synced {done.runs} run(s) to {to}: {done.chunks_sent} new chunk(s), {done.bytes_sent:,} bytes "
            f"({done.runs_sent} manifest(s) written); every chunk checked by sha256"
        )
        return
    if status:
        report = sync_runs(path, to, token=token, runs=wanted, dry_run=True)
        if as_json:
            emit_json(report.to_dict())
            return
        if not report.pending:
            _say(f"Up to date: {report.runs} run(s) on {to}")
            return
        for run_id, p in sorted(report.pending.items()):
            live = " (running)" if run_id in report.live else ""
            _say(f"{run_id}  {p['files']} file(s), {p['bytes']:,} bytes pending{live}")
        _say(f"{len(report.pending)} of {report.runs} run(s) pending")
        return
    if watch:

        def on_round(report: SyncReport | None, error: Exception | None) -> None:
            stamp = time.strftime("%H:%M:%S")
            if error is not None:
                _say(f"{stamp} server not reachable, retrying: {error}", err=True)
            elif report is not None and report.files_sent and not as_json:
                _say(
                    f"{stamp} sent {report.files_sent} file(s), {report.bytes_sent:,} bytes "
                    f"({len(report.runs_sent)} run(s))"
                )
            sys.stdout.flush()

        with contextlib.suppress(KeyboardInterrupt):
            watch_runs(path, to, token=token, runs=wanted, interval=interval, on_round=on_round)
        return
    report = sync_runs(path, to, token=token, runs=wanted, repair=repair)
    if as_json:
        emit_json(report.to_dict())
        return
    _say(
        f"Synced {report.runs} run(s) to {to}: sent {report.files_sent} file(s), {report.bytes_sent:,} bytes "
        f"({len(report.runs_sent)} run(s) changed); every file verified"
    )
