"""``labledger table``: version tables from the benchmark ledger; ``table import`` to fill it."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from labledger.cli.base import (
    console,
    csv_list,
    emit_json,
    handle_errors,
    json_option,
    ledger_option,
    main,
    open_for_cli,
    warn,
)
from labledger.errors import LedgerError


def _pairs(values, opt):
    out = {}
    for v in values:
        if "=" not in v:
            raise click.BadParameter(f"expected KEY=VALUE; got {v!r}", param_hint=opt)
        k, _, val = v.partition("=")
        out[k.strip()] = val.strip()
    return out


@main.group("table", invoke_without_command=True)
@click.option("--suite", default="public", show_default=True, help="Benchmark suite.")
@click.option("--models", default=None, help="Comma-separated models, in column order (default: all).")
@click.option(
    "--variant", "variants", default="raw", show_default=True, help="Comma-separated variants (raw, calibrated, ...)."
)
@click.option(
    "--delta-from", default=None, metavar="MODEL[:VARIANT]", help="Add a delta column: last column minus this one."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "latex", "html", "csv", "json"]),
    default=None,
    help="Print the table in this format (default: a terminal table); md and latex give each value with "
    "its interval and n, the delta's adjusted p, and a footnote with the definitions and the predictions' sha256.",
)
@click.option(
    "--adjust",
    type=click.Choice(["holm", "bh", "none"]),
    default="holm",
    show_default=True,
    help="Multiplicity adjustment of the deltas' p-values: Holm (family-wise), BH (false discovery rate), none.",
)
@click.option(
    "--ranks",
    is_flag=True,
    help="Rank each benchmark's columns on their stored predictions: #rank [joint 95% interval], and ≈1 for "
    "those not separable from the row's best (labledger rank).",
)
@ledger_option
@json_option
@click.pass_context
@handle_errors
def table_cmd(ctx, suite, models, variants, delta_from, fmt, adjust, ranks, ledger_path, as_json):
    """Version table: benchmarks by category x models, with a mean row and deltas."""
    if ctx.invoked_subcommand is not None:
        return
    from labledger.analysis.benchmarks import read_entries, version_table
    from labledger.analysis.groups import paired_entry_test

    if as_json:
        fmt = "json"
    ledger = open_for_cli(ledger_path)
    model_list = csv_list(models)
    variant_list = csv_list(variants) or ["raw"]
    entries = read_entries(ledger, suite=suite, models=model_list or None, variants=variant_list)
    if not entries:
        suites = sorted({e.suite for e in read_entries(ledger)})
        which = f"models {', '.join(model_list)}" if model_list else "any model"
        raise LedgerError(
            f"no benchmark entries for {which} in suite '{suite}' of {ledger.root}; "
            + (f"suites with entries: {', '.join(suites)} (pass --suite)" if suites else "the ledger has none yet")
        )
    if not model_list:
        model_list = list(dict.fromkeys(e.model for e in entries))
    table = version_table(
        entries,
        suite=suite,
        models=model_list,
        variants=variant_list,
        delta_from=delta_from,
        paired_test=paired_entry_test,
        adjust=adjust,
        ranker=_ranker() if ranks else None,
    )
    for w in table.warnings:
        warn(w)
    if fmt == "json":
        emit_json(table.to_dict())
    elif fmt == "md":
        click.echo(table.to_markdown(), nl=False)
    elif fmt == "latex":
        click.echo(table.to_latex(), nl=False)
    elif fmt == "csv":
        click.echo(table.to_csv(), nl=False)
    elif fmt == "html":
        click.echo(table.to_html(), nl=False)
    else:
        head, body = table._cells()
        t = Table(title=f"suite '{suite}'", title_justify="left")
        for i, h in enumerate(head):
            t.add_column(escape(h), justify="left" if i < 2 else "right")
        for i, cells in enumerate(body):
            t.add_row(*map(escape, cells), style="bold" if i == len(body) - 1 else None)
        console.print(t)
        if table.family:
            console.print(f"Deltas tested: {escape(table.family)}; marks use the adjusted p.")
        console.print("[dim]" + escape(table.definition) + "[/]")


def _ranker():
    from labledger.analysis.ranking import rank_entries

    return rank_entries


@table_cmd.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--suite", default="public", show_default=True, help="Suite of the imported rows.")
@click.option(
    "--column",
    "columns",
    multiple=True,
    metavar="HEADER=MODEL[:VARIANT]",
    help="Markdown only: which columns are models (default: every percentage column).",
)
@click.option(
    "--category-suite",
    "category_suites",
    multiple=True,
    metavar="CATEGORY=SUITE",
    help="Markdown only: rows of CATEGORY go to SUITE (e.g. held-out rows).",
)
@click.option("--dry-run", is_flag=True, help="Parse and check, store nothing.")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace the entries of a model name that holds another run's or another file's (refused without it).",
)
@ledger_option
@json_option
@handle_errors
def table_import_cmd(file, suite, columns, category_suites, dry_run, replace, ledger_path, as_json):
    """Add benchmark entries from CSV/JSONL (model, suite, benchmark, category, metric, variant,
    value[, n]) or from a Markdown table: category, 'Benchmark (Metric)', one column per model
    (values in percent).

    A model whose column (suite, variant) already holds the entries of a run or of another file is
    refused, naming both, unless --replace; importing the same file again replaces its own entries.
    """
    from labledger.analysis.benchmarks import add_entries, import_markdown, import_records

    if file.lower().endswith((".csv", ".jsonl", ".json")):
        if columns or category_suites:
            raise click.UsageError("--column and --category-suite apply to Markdown tables only")
        result = import_records(file)
    else:
        result = import_markdown(
            file,
            suite=suite,
            columns=_pairs(columns, "--column") or None,
            category_suites=_pairs(category_suites, "--category-suite") or None,
        )
    added = 0
    if not dry_run:
        ledger = open_for_cli(ledger_path, create=True)
        added = add_entries(ledger, result.entries, replace=replace, on_replace=warn)
    doc = {"file": file, "entries": len(result.entries), "added": added, "aggregates": result.aggregates}
    if as_json:
        emit_json(doc)
        return
    console.print(f"{'Parsed' if dry_run else 'Added'} {len(result.entries)} entries from {file}.")
    for a in result.aggregates:
        ok = "[green]consistent[/]" if a["consistent"] else "[red]INCONSISTENT[/]"
        rec = "-" if a["recomputed"] is None else f"{a['recomputed'] * 100:.4f}%"
        console.print(
            f"  {a['row']} ({a['model']}, {a['variant']}): stated {a['stated'] * 100:.2f}%, "
            f"recomputed from {a['n']} rows {rec}: {ok} within rounding"
        )
