"""``labledger import``: bring existing runs into the ledger (seed folders, reports, results files,
TensorBoard logs, MLflow stores)."""

from __future__ import annotations

import click

from labledger.cli.base import console, emit_json, handle_errors, json_option, ledger_option, main, resolve_ledger_path
from labledger.importers import FORMATS

#: ``auto`` and every importer, in the order ``auto`` tries them.
FORMAT_CHOICES = ("auto", *FORMATS)


@main.command("import")
@click.argument("path", type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.option("--name", help="Run name (default: from the source; a prefix when it holds several runs).")
@click.option("--group", help="Run group (default: from the source, e.g. the MLflow experiment).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMAT_CHOICES),
    default="auto",
    show_default=True,
    help="Source format (auto: detected from the path).",
)
@click.option(
    "--copy/--reference",
    "copy",
    default=False,
    show_default=True,
    help="Copy the original files into the run, or only record their path and sha256.",
)
@click.option("--again", is_flag=True, help="Import even if the same content was imported before.")
@click.option(
    "--suite",
    default=None,
    metavar="SUITE",
    help="Harness outputs: also evaluate each task and add its headline to this benchmark suite "
    "(then `labledger table --suite SUITE` is the version table across models and tasks).",
)
@click.option(
    "--partial",
    is_flag=True,
    help="Harness outputs: import a task whose file holds fewer documents than the harness states "
    "(a truncated lm-eval samples file), with a note; without it that task is left out with an error.",
)
@click.option(
    "--salvage",
    is_flag=True,
    help="W&B run files: import one whose bytes are damaged (a record checksum fails, a chunk is "
    "broken) up to the damage, with a note on the run naming the file and byte; without it the import "
    "is refused with that error. (A file cut short inside its last record, as a killed run leaves it, "
    "is imported up to there with a note either way.)",
)
@ledger_option
@json_option
@handle_errors
def import_cmd(path, name, group, fmt, copy, again, suite, partial, salvage, ledger_path, as_json):
    """Import PATH as runs, all or nothing, through the same validation as logging.

    PATH is a training-run folder (batches.jsonl, training_history.json, full_test/), a
    threshold-selection report (.json), a results .jsonl, TensorBoard event files (a file or a folder), or an MLflow
    store (mlflow.db or mlruns/), or what an evaluation harness wrote: lm-eval's --output_path
    (with --log_samples), inspect_ai logs (.eval, .json), lighteval's output folder, a HELM run
    folder: one run per model, one result set per task; or another tracker's runs: W&B offline runs
    (wandb/), a Trackio project (<project>.db), an Aim repository (a folder holding .aim/).
    Originals are never changed. The same content imported twice is
    refused unless --again.
    """
    from labledger.importers import import_path

    result = import_path(
        path,
        resolve_ledger_path(ledger_path),
        fmt=fmt,
        name=name,
        group=group,
        copy=copy,
        again=again,
        partial=partial,
        salvage=salvage,
    )
    added, suite_notes = None, []
    if suite is not None:
        from labledger import open_ledger
        from labledger.importers.harness import suite_entries

        with open_ledger(resolve_ledger_path(ledger_path)) as book:
            added, suite_notes = suite_entries(book, result.run_ids, suite=suite)
    if as_json:
        extra = {"suite": suite, "suite_entries": added, "suite_notes": suite_notes} if suite else {}
        emit_json({**result.to_dict(), **extra})
        _exit_on_task_errors(result)
        return
    how = "copied" if copy else "referenced"
    console.print(
        f"Imported {result.source} ({result.format}, sha256 {result.sha256[:12]}..., originals "
        f"{how}) as {len(result.runs)} run(s):",
        markup=False,
        highlight=False,
    )
    for r in result.runs:
        counts = ", ".join(f"{v:,} {k}" for k, v in r.counts.items() if v)
        group_text = f" [{r.group}]" if r.group else ""
        console.print(f"  {r.id}  {r.name}{group_text}: {counts or 'no records'}", markup=False, highlight=False)
        for text in r.notes:
            console.print(f"    note: {text}", markup=False, highlight=False)
        for text in r.errors:
            console.print(f"    error: {text}", markup=False, highlight=False)
    if result.again and result.previous:
        console.print(
            f"(imported again: the same content was imported before as run {result.previous['run_id']})",
            markup=False,
            highlight=False,
        )
    if suite is not None:
        console.print(
            f"Added {added} entries to suite '{suite}' (labledger table --suite {suite})", markup=False, highlight=False
        )
        for text in suite_notes:
            console.print(f"  note: {text}", markup=False, highlight=False)
    _exit_on_task_errors(result)


def _exit_on_task_errors(result) -> None:
    """Exit 1 when some task of the source could not be read (its error printed above; the rest
    of the source is stored)."""
    failed = sum(len(r.errors) for r in result.runs)
    if failed:
        click.echo(f"{failed} task(s) could not be read and were left out (errors above); the rest is stored", err=True)
        raise SystemExit(1)
