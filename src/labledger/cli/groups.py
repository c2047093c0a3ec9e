"""``labledger compare-groups``: groups of runs against a baseline group (seed 003)."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

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


@main.command("compare-groups")
@click.option("--baseline", required=True, metavar="GROUP", help="The baseline group.")
@click.option("--group", "groups", multiple=True, required=True, metavar="GROUP", help="A group to compare.")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    required=True,
    metavar="NAME",
    help="A registry metric (e.g. has0_f1, non0_f1, f1:average=macro); repeatable.",
)
@click.option("--results", default=None, metavar="NAME", help="Which stored result set of each run to use.")
@click.option("--task", default=None, help="Task within the result sets (when they hold several).")
@click.option(
    "--include-unfinished",
    is_flag=True,
    help="Also count crashed, killed and failed runs (each is named in a warning).",
)
@ledger_option
@json_option
@handle_errors
def compare_groups_cmd(baseline, groups, metrics, results, task, include_unfinished, ledger_path, as_json):
    """Mean, spread and run count of each metric per group, and the difference from the baseline.

    Values are recomputed from stored predictions when runs have them (the registry's definition),
    else taken from what each run recorded, and marked as such.
    """
    from labledger.analysis.groups import compare_groups

    res = compare_groups(
        open_for_cli(ledger_path),
        baseline=baseline,
        groups=list(groups),
        metrics=list(metrics),
        results=results,
        task=task,
        include_unfinished=include_unfinished,
    )
    for w in res.warnings:
        warn(w)
    if as_json:
        emit_json(res.to_dict())
        return

    def f(v, sign=False):
        return "-" if v is None else (f"{v:+.4f}" if sign else f"{v:.4f}")

    t = Table(title=f"groups vs baseline '{baseline}'", title_justify="left")

    def ci(iv):
        return "-" if not iv or iv.get("low") is None else f"[{iv['low']:.4f}, {iv['high']:.4f}]"

    for col in (
        "group",
        "metric",
        "runs",
        "mean",
        "95% CI",
        "std",
        "min",
        "max",
        "diff vs baseline",
        "diff CI",
        "from",
    ):
        t.add_column(col, justify="left" if col in ("group", "metric", "from") else "right")
    for s in res.summary:
        t.add_row(
            escape(s["group"]),
            escape(s["metric"]),
            str(s["runs"]),
            f(s["mean"]),
            ci(s.get("interval")),
            f(s["std"]),
            f(s["min"]),
            f(s["max"]),
            f(s["diff"], sign=True),
            ci(s.get("diff_interval")),
            ", ".join(s["sources"]),
            style="bold" if s["group"] == baseline else None,
        )
    console.print(t)
    for how in dict.fromkeys(
        iv["method"] + (f" (n_seeds {iv['n_seeds']}, n_items {iv['n_items']})" if iv.get("n_items") else "")
        for s in res.summary
        for iv in (s.get("interval"), s.get("diff_interval"))
        if iv
    ):
        console.print(f"[dim]CI: {escape(how)}[/]")
    pr = Table(title="per run", title_justify="left")
    pr.add_column("group")
    pr.add_column("run")
    for m in res.metrics:
        pr.add_column(escape(m), justify="right")
    for r in res.runs:
        pr.add_row(
            escape(r["group"]),
            escape(r["name"]),
            *[
                f(r["values"].get(m))
                + ("" if r["sources"].get(m, "").startswith("predictions") or m not in r["values"] else " (rec.)")
                for m in res.metrics
            ],
        )
    console.print(pr)
    console.print("[dim](rec.) = recorded by the run, not recomputed from predictions[/]")
