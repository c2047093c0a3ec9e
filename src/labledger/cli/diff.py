"""``labledger diff A B``: only what differs between two runs."""

from __future__ import annotations

from typing import Any

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from labledger.cli.base import console, emit_json, handle_errors, json_option, ledger_option, main, open_for_cli
from labledger.cli.runs import fmt_num
from labledger.schema.ids import MetricId

TITLES = {
    "config": "config",
    "environment": "environment",
    "data": "data",
    "scalars": "scalar summaries",
    "evaluations": "stored evaluations",
}


def _v(v: Any) -> str:
    if v is None:
        return "-"
    return escape(fmt_num(v) if not isinstance(v, str) else v)


def _p(p: Any) -> str:
    return "-" if p is None else f"{p:.3g}"


@click.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--no-compare", is_flag=True, help="Skip the paired comparison of shared result sets.")
@click.option("--resamples", type=click.IntRange(min=100), default=1000, show_default=True, help="Bootstrap resamples.")
@ledger_option
@json_option
@handle_errors
def diff_cmd(a, b, no_compare, resamples, ledger_path, as_json):
    """What differs between runs A and B: config (dotted keys), environment (Python, packages, git,
    host), data (declared mixture, result sets), scalar summaries and stored evaluations; result sets
    both runs have are compared item by item (B - A, paired bootstrap) when their items match."""
    from labledger.analysis.rundiff import SECTIONS, diff_runs

    ledger = open_for_cli(ledger_path)
    doc = diff_runs(ledger, a, b, compare_results=not no_compare, resamples=resamples)
    if as_json:
        emit_json(doc)
        return
    ra, rb = doc["a"], doc["b"]
    console.print(f"A = {escape(ra['name'])} {ra['id']}\nB = {escape(rb['name'])} {rb['id']}", highlight=False)
    if not any(doc[s] for s in SECTIONS) and not doc["comparisons"]:
        console.print("No differences.")
        return
    for section in SECTIONS:
        rows = doc[section]
        if not rows:
            continue
        t = Table(title=TITLES[section], title_justify="left")
        t.add_column("key", overflow="fold")
        t.add_column("A", overflow="fold")
        t.add_column("B", overflow="fold")
        numeric = any("delta" in r for r in rows)
        if numeric:
            t.add_column("B - A", justify="right")
        for r in rows:
            cells = [escape(r["key"]), _v(r["a"]), _v(r["b"])]
            if numeric:
                cells.append(fmt_num(r["delta"]) if "delta" in r else "")
            t.add_row(*cells)
        console.print(t)
    for c in doc["comparisons"]:
        if not c["paired"]:
            console.print(f"results {escape(c['results'])}: {escape(c['note'])}", highlight=False)
            continue
        tasks = list(dict.fromkeys(str(m["task"]) for m in c["metrics"]))
        ns = list(dict.fromkeys(m["n"] for m in c["metrics"]))
        same_n = len(ns) == 1 and ns[0] is not None  # said once in the title: the table fits 80 columns
        one = f" (task {tasks[0]})" if len(tasks) == 1 else ""
        one = one[:-1] + f", n={ns[0]:,})" if one and same_n else one
        t = Table(
            title=f"results {escape(c['results'])}{escape(one)}: B - A on the same items",
            title_justify="left",
            box=box.SIMPLE_HEAD,  # narrow: the table fits 80 columns
            pad_edge=False,
            collapse_padding=True,
        )
        adjust = c.get("adjust") or "none"
        p_cols = ("p",) if adjust == "none" else ("p", f"p ({adjust})")
        n_col = [] if one and same_n else ["n"]
        for col in (*(["task"] if not one else []), "metric", *n_col, "A", "B", "B - A", "95% CI", *p_cols):
            text = col in ("task", "metric")
            t.add_column(
                col,
                justify="left" if text else "right",
                overflow="fold",
                no_wrap=not text,
                min_width=12 if text else None,
            )
        methods: dict[str, list[str]] = {}  # each interval's method, said once under the table
        for m in c["metrics"]:
            name = MetricId.parse(str(m["metric"])).short
            methods.setdefault(m["method"] or "-", []).append(name)
            ci = "-" if m["ci_low"] is None else f"[{m['ci_low']:+.4f}, {m['ci_high']:+.4f}]"
            t.add_row(
                *([escape(str(m["task"]))] if not one else []),
                escape(name),
                *(["-" if m["n"] is None else f"{m['n']:,}"] if n_col else []),
                _v(m["a"]),
                _v(m["b"]),
                "-" if m["diff"] is None else f"{m['diff']:+.4f}",
                ci,
                *[_p(m.get(k)) for k in ("p", "p_adjusted")[: len(p_cols)]],
            )
        console.print(t)
        for method, names in methods.items():
            which = "" if len(methods) == 1 else f" of {', '.join(dict.fromkeys(names))}"
            console.print(f"[dim]95% CI{escape(which)}: {escape(method)}[/dim]")
        if adjust != "none":
            console.print(
                f"[dim]95% CI and p per comparison (unadjusted); p ({adjust}): adjusted over "
                f"{escape(c.get('family') or '')} of this result set.[/dim]"
            )


main.add_command(diff_cmd)
