"""``labledger schema``: the JSON Schema of every document kind, and the data dictionary, from the types."""

from __future__ import annotations

import click

from labledger.cli.base import emit_json, handle_errors, main
from labledger.schema import KINDS, json_schema


@main.command("schema")
@click.argument("kind", required=False, type=click.Choice(list(KINDS)))
@click.option(
    "--markdown",
    is_flag=True,
    help="Print the data dictionary (every file, index table and document field: type, unit, meaning).",
)
@handle_errors
def schema_cmd(kind: str | None, markdown: bool) -> None:
    """Print the JSON Schema of document KIND (default: every kind, sharing $defs).

    With --markdown, print the data dictionary instead: every file of a run, every index table and
    every document, field by field (with KIND, only that document's tables).

    \b
    Examples:
      labledger schema evaluation
      labledger schema --markdown > docs/data-dictionary.md
    """
    if markdown:
        from labledger.schema.dictionary import dictionary_markdown

        click.echo(dictionary_markdown(kind))
        return
    emit_json(json_schema(kind))


__all__ = ["schema_cmd"]
