"""``labledger lineage``: where a model came from and what was trained from it (#15)."""

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


@main.command("lineage")
@click.argument("ref", metavar="RUN|CHECKPOINT")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["graph", "mermaid", "dot", "table"]),
    default="graph",
    show_default=True,
    help="graph: nodes and edges; mermaid/dot: a drawing's source; table: the trajectory table.",
)
@click.option(
    "--columns",
    default=None,
    metavar="KEYS",
    help="Comma-separated config keys for --format table (dotted keys reach into nested configs; "
    "default: steps, max length, learning rates, mixture temperature, class balance).",
)
@click.option("--all-checkpoints", is_flag=True, help="Show every checkpoint, not only those used and the last.")
@ledger_option
@json_option
@handle_errors
def lineage_cmd(ref, fmt, columns, all_checkpoints, ledger_path, as_json):
    """The lineage graph up and down from RUN (id, prefix or name) or a CHECKPOINT sha256 (prefix):
    runs, checkpoints (step, sha256, size; a file changed since it was logged is flagged), soups
    with their weights, and each run's headline result."""
    from labledger.analysis.lineage import lineage, trajectory

    ledger = open_for_cli(ledger_path)
    graph = lineage(ledger, ref, all_checkpoints=all_checkpoints)
    cols = csv_list(columns) or None
    changed = graph.to_dict()["changed_checkpoints"]
    if as_json:
        doc = graph.to_dict()
        doc["trajectory"] = trajectory(ledger, graph, columns=cols)
        emit_json(doc)
    elif fmt == "mermaid":
        click.echo(graph.mermaid())
    elif fmt == "dot":
        click.echo(graph.dot())
    elif fmt == "table":
        rows = trajectory(ledger, graph, columns=cols)
        t = Table(title=f"trajectory ({len(rows)} stages)", title_justify="left")
        keys = [k for k in (rows[0] if rows else {}) if k not in ("run_id", "type")]
        for k in keys:
            t.add_column(k, overflow="fold")
        for r in rows:
            t.add_row(*(escape("-" if r[k] is None else str(r[k])) for k in keys))
        console.print(t)
    else:
        t = Table(title=f"lineage of {escape(graph.label(graph.focus))}", title_justify="left")
        for col in ("node", "type", "detail"):
            t.add_column(col, overflow="fold")
        for n in graph.to_dict()["nodes"]:
            if n["type"] in ("run", "soup"):
                detail = n["run_id"]
            elif n["type"] == "checkpoint":
                size = "-" if n.get("size") is None else f"{n['size']:,} B"
                detail = f"{n['sha256']}  {size}  {n['state']}"
            else:
                detail = n.get("sha256") or "external"
            mark = "* " if n["id"] == graph.focus else ""
            t.add_row(mark + escape(graph.label(n["id"])), n["type"], escape(str(detail)))
        console.print(t)
        for e in graph.edges:
            w = f" (weight {e['weight']:.4g})" if isinstance(e.get("weight"), float) else ""
            console.print(
                f"  {escape(graph.label(e['source']))} -{e['kind']}-> {escape(graph.label(e['target']))}{w}",
                highlight=False,
            )
    if changed and not as_json:
        warn(
            f"{len(changed)} checkpoint(s) changed after they were logged (sha256 mismatch): "
            + ", ".join(s[:12] for s in changed)
        )
