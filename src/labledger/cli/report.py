"""``labledger report``: the Markdown hand-off of seed 001, from the ledger."""

from __future__ import annotations

import click

from labledger.cli.base import console, csv_list, handle_errors, ledger_option, main, open_for_cli


@main.command("report")
@click.option("--models", required=True, help="Comma-separated models (version names), in column order.")
@click.option("--suite", default="public", show_default=True, help="The main suite; other suites follow.")
@click.option(
    "--variant", "variants", default="raw,calibrated", show_default=True, help="Comma-separated variants to show."
)
@click.option("--run", "runs", multiple=True, metavar="RUN", help="Also include this run (repeatable).")
@click.option("--title", default=None, help="The report's title.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write to FILE (default: stdout).")
@click.option(
    "--ranks",
    is_flag=True,
    help="Rank each benchmark's columns on their stored predictions: #rank [joint 95% interval], and ≈1 for "
    "those not separable from the row's best (labledger rank).",
)
@ledger_option
@handle_errors
def report_cmd(models, suite, variants, runs, title, out, ranks, ledger_path):
    """Write a Markdown hand-off: version tables, calibration recipes with provenance and in-sample
    flags, metric definitions, checkpoints and soup lineage, mixture audits, notes and limits."""
    from labledger.report import handoff

    model_list = csv_list(models)
    text = handoff(
        open_for_cli(ledger_path),
        models=model_list,
        suite=suite,
        variants=csv_list(variants),
        runs=runs,
        title=title,
        ranks=ranks,
    )
    if out:
        from labledger.store.jsonl import atomic_write

        atomic_write(out, text.encode("utf-8"), sweep=True)
        console.print(f"Wrote {out} ({len(text.splitlines())} lines).")
    else:
        click.echo(text, nl=False)
