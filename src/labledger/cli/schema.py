"""``labledger schema``: the JSON Schema of every document kind, generated from the typed documents."""

from __future__ import annotations

import click

from labledger.cli.base import emit_json, handle_errors, main
from labledger.schema import KINDS, SCHEMA_VERSION, json_schema


def schema_markdown(kind: str | None = None) -> str:
    """A Markdown page: one section per kind with its JSON Schema (what ``docs/schema.md`` links)."""
    import json

    kinds = [kind] if kind else list(KINDS)
    out = [f"# Document schemas (schema_version {SCHEMA_VERSION})", ""]
    for k in kinds:
        doc = (KINDS[k].__doc__ or "").strip().splitlines()[0]
        out += [f"## `{k}`", "", doc, "", "```json", json.dumps(json_schema(k), indent=2), "```", ""]
    return "\n".join(out)


@main.command("schema")
@click.argument("kind", required=False, type=click.Choice(list(KINDS)))
@click.option("--markdown", is_flag=True, help="Print Markdown (a section per kind) instead of JSON.")
@handle_errors
def schema_cmd(kind: str | None, markdown: bool) -> None:
    """Print the JSON Schema of document KIND (default: every kind, sharing $defs).

    \b
    Examples:
      labledger schema evaluation
      labledger schema --markdown > schemas.md
    """
    if markdown:
        click.echo(schema_markdown(kind), nl=False)
        return
    emit_json(json_schema(kind))


__all__ = ["schema_cmd", "schema_markdown"]
