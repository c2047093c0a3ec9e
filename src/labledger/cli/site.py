"""``labledger site OUT``: write the static site of a ledger (opens from file://, no server)."""

from __future__ import annotations

import webbrowser

import click

from labledger.cli.base import (
    console,
    emit_json,
    handle_errors,
    json_option,
    ledger_option,
    main,
    open_for_cli,
    warn,
)


def _split_runs(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(part.strip() for part in v.split(",") if part.strip())
    return out


@main.command("site")
@click.argument("out", type=click.Path(file_okay=False, dir_okay=True, writable=True))
@click.option(
    "--runs",
    "runs",
    multiple=True,
    metavar="ID",
    help="Only these runs (id, unique id prefix or name; repeat the option or separate with commas).",
)
@click.option("--group", default=None, metavar="G", help="Only the runs of this group.")
@click.option(
    "--full",
    is_flag=True,
    help="List every run's folder and check every file of the site (a change made by hand in a finished "
    "run, a file removed from the site); by default a run whose index row and folder did not change is "
    "carried over unread.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open index.html in the default browser afterwards.")
@ledger_option
@json_option
@handle_errors
def site_cmd(out, runs, group, full, open_browser, ledger_path, as_json):
    """Write (or update) the static site of the ledger in the folder OUT.

    OUT/index.html opens by double-clicking (file://, no server, no network): every run with its
    curves, microbatches and samples, evaluations and test breakdowns. Rebuilding rewrites only
    the files whose content changed. OUT must be new, empty, or a site built before.
    """
    from labledger.site import build_site

    result = build_site(open_for_cli(ledger_path), out, runs=_split_runs(runs) or None, group=group, full=full)
    if as_json:
        emit_json(result.to_dict())
    else:
        for w in result.warnings:
            warn(w)
        mib = result.bytes_written / 2**20
        console.print(f"Site:    {result.index.resolve()}")
        console.print(
            f"Runs:    {len(result.runs)} ({len(result.rebuilt_runs)} rebuilt, {len(result.skipped_runs)} unchanged)"
        )
        console.print(
            f"Files:   {len(result.written)} written ({mib:.1f} MiB), {result.unchanged} unchanged, "
            f"{len(result.removed)} removed, in {result.elapsed_s:.2f} s"
        )
    if open_browser:
        try:
            opened = webbrowser.open(result.index.resolve().as_uri())
        except webbrowser.Error:
            opened = False
        if not opened:
            warn(f"no browser to open; open {result.index.resolve()} yourself")
