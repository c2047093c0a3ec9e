"""``labledger query``: SQL (DuckDB) over every run, as the open dataset of Parquet files (#46)."""

from __future__ import annotations

import math
from typing import Any

import click

from labledger.cli.base import emit_json, escape_controls, handle_errors, json_option, ledger_option, main, open_for_cli


def _cell(value: Any) -> str:
    """A value as the table shows it: null, numbers exactly (shortest repr), lists and maps as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, (int, str)):
        return str(value)
    import orjson

    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def _print_table(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    cells = [[escape_controls(_cell(v)).replace("\n", "\\n") for v in r] for r in rows]
    heads = [escape_controls(c) for c in columns]
    right = [
        bool(rows)
        and all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in rows if r[i] is not None)
        for i in range(len(columns))
    ]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(heads)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip()

    click.echo(line(heads))
    click.echo("  ".join("-" * w for w in widths))
    for r in cells:
        click.echo(line(r))
    click.echo(f"({len(rows):,} row{'s' if len(rows) != 1 else ''})")


@main.command("query")
@click.argument("sql")
@click.option(
    "--from",
    "source",
    default=None,
    metavar="s3://BUCKET/PREFIX|DIR",
    help="Query the dataset there: an object store that `labledger sync --to` or `serve --artifacts` "
    "writes to, or a folder holding kind=... folders (default: the ledger's own dataset/, brought up to date first).",
)
@ledger_option
@json_option
@handle_errors
def query_cmd(sql: str, source: str | None, ledger_path: str | None, as_json: bool) -> None:
    """Run SQL (DuckDB) over every ended run: views runs, scalars, results and metrics.

    Without --from, the ledger's runs are first written as zstd Parquet files to its dataset/
    folder (only the runs that changed since; the files stay there for any tool to read), then
    queried. Each view has the run's id as column `run` (and `results` the result set as `set`);
    `labledger schema dataset-KIND` lists the columns. Needs duckdb: pip install "labledger[query]".

    \b
    Examples:
      labledger query "SELECT run, max(value) FROM scalars WHERE key = 'loss' GROUP BY run"
      labledger query "SELECT r.name, m.value FROM metrics m JOIN runs r USING (run) WHERE m.metric = 'accuracy'"
      labledger query --from s3://lab-runs/team "SELECT count(*) FROM runs"
    """
    from labledger.store.dataset_query import NEEDS_DUCKDB, run_query

    try:
        import duckdb  # noqa: F401  (said before any work is done)
    except ImportError:
        from labledger.errors import LedgerError

        raise LedgerError(NEEDS_DUCKDB) from None
    if source is None:
        from labledger.store.dataset import refresh_local

        book = open_for_cli(ledger_path)
        location: str = str(refresh_local(book).root)
    else:
        location = source
        if not source.startswith("s3://"):
            import os

            if not os.path.isdir(source):
                raise click.BadParameter(f"{source!r} is not a folder (or s3://BUCKET/PREFIX)", param_hint="--from")
    answer = run_query(sql, location)
    if as_json:
        emit_json(answer.to_dict())
        return
    _print_table(answer.columns, answer.rows)


__all__ = ["query_cmd"]
