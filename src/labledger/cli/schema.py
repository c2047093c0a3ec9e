"""``labledger schema``: the JSON Schema of every document kind, and the data dictionary, from the types."""

from __future__ import annotations

import click

from labledger.cli.base import emit_json, handle_errors, main
from labledger.schema import KINDS, json_schema
from labledger.schema.dataset import SCHEMA_NAMES, dataset_json_schema


@main.command("schema")
@click.argument("kind", required=False, type=click.Choice([*KINDS, *SCHEMA_NAMES]))
@click.option(
    "--markdown",
    is_flag=True,
    help="Print the data dictionary (every file, index table and document field: type, unit, meaning).",
)
@handle_errors
def schema_cmd(kind: str | None, markdown: bool) -> None:
    """Print the JSON Schema of document KIND (default: every kind, sharing $defs).

    KIND may also be a kind of the runs' open dataset (dataset-runs, dataset-scalars,
    dataset-results, dataset-metrics): the schema of one row of its Parquet files. With --markdown, print the data dictionary instead: every file of a run, every index table and
    every document, field by field (with KIND, only that document's tables).

    \b
    Examples:
      labledger schema evaluation
      labledger schema dataset-scalars
      labledger schema --markdown > docs/data-dictionary.md
    """
    if markdown:
        from labledger.schema.dictionary import dictionary_markdown

        click.echo(dictionary_markdown(kind))
        return
    emit_json(dataset_json_schema(SCHEMA_NAMES[kind]) if kind in SCHEMA_NAMES else json_schema(kind))


__all__ = ["schema_cmd"]
