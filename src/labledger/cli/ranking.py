"""``labledger rank``: k systems on the same items, each with a rank interval, and the tie group of the best;
``labledger frontier``: their cost–quality frontier with paired intervals on both axes."""

from __future__ import annotations

import click

from labledger.cli.base import emit_json, handle_errors, json_option, ledger_option, main
from labledger.cli.evaluation import console, escape, prefetch, resolve_results
from labledger.schema import RankingDoc
from labledger.schema.format import format_ci, format_p, format_value


def _print_ranking(doc: RankingDoc) -> None:
    from rich.table import Table

    extra = f", {doc.clusters:,} clusters" if doc.clusters is not None else ""
    way = "higher" if doc.higher_is_better else "lower"
    console.print(escape(f"task '{doc.task}': {doc.metric} ({way} is better), n={doc.n:,}{extra}"))
    table = Table()
    for col in ("rank", "system", "value", f"rank {doc.ci:.0%} interval", "tied with best"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for e in sorted(doc.systems, key=lambda e: (e.rank, e.rank_low, e.rank_high)):
        table.add_row(
            str(e.rank),
            escape(e.name),
            format_value(e.value, 4),
            f"[{e.rank_low}, {e.rank_high}]",
            "yes" if e.tied_with_best else "no",
        )
    console.print(table)
    console.print(
        f"Tie group of the best ({len(doc.tie_group)} of {len(doc.systems)}): {escape(', '.join(doc.tie_group))}"
    )
    if doc.warning:
        console.print(f"[yellow]Warning:[/] {escape(doc.warning)}")
    console.print(
        f"[dim]rank: 1 + systems with a better value; interval: [1 + systems separated above, k - systems "
        f"separated below], all {len(doc.systems)} at once at {doc.ci:.0%}; tied with best: no system separated "
        f"above it. Separated: |t| beyond the step-down max-t critical value at alpha {doc.alpha:g}, adjusted over "
        f"all pairs; {escape(doc.method)}; {doc.resamples:,} resamples, seed {doc.seed}.[/dim]"
    )


@main.command("rank")
@click.argument("results", nargs=-1, required=True)
@click.option(
    "--metric",
    default="accuracy",
    show_default=True,
    metavar="NAME",
    help="Metric to rank by: a mean of per-item values (accuracy, exact_match, a per-item loss, ...).",
)
@click.option("--task", default=None, metavar="T", help="The task to rank (needed when the results share several).")
@click.option(
    "--name", "names", multiple=True, metavar="NAME", help="A name per RESULTS, in order (default: the refs)."
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Family-wise error of the separations over all pairs (the rank intervals hold jointly at 1 - alpha).",
)
@click.option(
    "--resamples", type=click.IntRange(min=0), default=1000, show_default=True, help="Paired bootstrap resamples."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--positive", metavar="LABEL", default=None, help="Positive label of binary 'score' tasks.")
@json_option
@ledger_option
@handle_errors
def rank_command(
    results: tuple[str, ...],
    metric: str,
    task: str | None,
    names: tuple[str, ...],
    alpha: float,
    resamples: int,
    seed: int,
    positive: str | None,
    as_json: bool,
    ledger_path: str | None,
) -> None:
    """Rank RESULTS (two or more files or RUN:NAME on the same items) by a metric: each one's rank with an interval, and the tie group of the best.

    Pairs are separated by a paired, studentized bootstrap over items (clusters when rows carry a
    group) with the step-down max-t adjustment over all pairs, so every rank interval holds at once
    at 1 - alpha and "not separable from the best" keeps its family-wise error at alpha.

    \b
    Examples:
      labledger rank a.jsonl b.jsonl c.jsonl
      labledger rank run-a:test run-b:test --metric exact_match --json
    """
    if len(results) < 2:
        raise click.UsageError("rank needs at least two RESULTS")
    if names and len(names) != len(results):
        raise click.UsageError(f"--name given {len(names)} times for {len(results)} RESULTS")
    prefetch(*results)
    from labledger.analysis.ranking import rank_results

    found = [resolve_results(ref, ledger_path) for ref in results]
    doc = rank_results(
        [path for path, *_ in found],
        names=list(names) or [shown for _, shown, *_ in found],
        metric=metric,
        task=task,
        positive=positive,
        alpha=alpha,
        resamples=resamples,
        seed=seed,
    )
    if as_json:
        emit_json(doc.to_dict())
        return
    _print_ranking(doc)


def _print_frontier(doc: dict) -> None:
    from rich.table import Table

    metric, cost = doc["metric"], doc["cost"]
    pct = f"{doc['ci']:.0%}"
    first = doc["systems"][0]
    console.print(
        escape(f"task '{doc['task']}': {metric} against {cost}, n={first['quality']['n']:,}; frontier: ")
        + escape(" -> ".join(doc["frontier"])),
        highlight=False,
    )
    t = Table()
    for col in ("system", metric, f"{pct} CI", cost, f"{pct} CI ", "frontier"):
        t.add_column(escape(col), justify="left" if col in ("system", "frontier") else "right")
    for s in doc["systems"]:
        q, c = s["quality"], s["cost"]
        where = (
            "yes" if s["on_frontier"] else f"no: {s['dominated_by']}" + (" (clearly)" if s["clearly_dominated"] else "")
        )
        t.add_row(
            escape(s["name"]),
            format_value(q["value"]),
            format_ci(q["ci_low"], q["ci_high"]),
            format_value(c["value"]),
            format_ci(c["ci_low"], c["ci_high"]),
            escape(where),
        )
    console.print(t, highlight=False)
    pairs = [(f"{x['from']} -> {x['to']}", x) for x in doc["steps"]] + [
        (f"{s['dominated_by']} vs {s['name']}", s["versus_dominator"]) for s in doc["systems"] if not s["on_frontier"]
    ]
    if pairs:
        p = Table(
            title="paired on the same items (second minus first; dominator minus dominated)", title_justify="left"
        )
        for col in ("pair", f"Δ {metric}", f"{pct} CI", "p", f"Δ {cost}", f"{pct} CI ", "p "):
            p.add_column(escape(col), justify="left" if col == "pair" else "right")
        for label, d in pairs:
            q, c = d["quality"], d["cost"]
            p.add_row(
                escape(label),
                format_value(q["diff"], signed=True),
                format_ci(q["ci_low"], q["ci_high"], signed=True),
                format_p(q["p_value"]),
                format_value(c["diff"], signed=True),
                format_ci(c["ci_low"], c["ci_high"], signed=True),
                format_p(c["p_value"]),
            )
        console.print(p, highlight=False)
    console.print(f"[dim]{escape(doc['note'])}[/dim]", highlight=False)


@main.command("frontier")
@click.argument("results", nargs=-1, required=True)
@click.option(
    "--metric", default="accuracy", show_default=True, metavar="NAME", help="The quality axis (a registry metric)."
)
@click.option(
    "--cost",
    default="mean_cost",
    show_default=True,
    metavar="NAME",
    help="The cost axis: mean_cost, mean_latency_ms, mean_tokens_out, ... (field_mean:field=F for any row field).",
)
@click.option("--task", default=None, metavar="T", help="The task (needed when the results share several).")
@click.option(
    "--name", "names", multiple=True, metavar="NAME", help="A name per RESULTS, in order (default: the refs)."
)
@click.option("--ci", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True, help="Interval level.")
@click.option("--resamples", type=click.IntRange(min=0), default=1000, show_default=True, help="Bootstrap resamples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@json_option
@ledger_option
@handle_errors
def frontier_command(results, metric, cost, task, names, ci, resamples, seed, as_json, ledger_path) -> None:
    """The cost-quality frontier of RESULTS (two or more files or RUN:NAME on the same items), with paired intervals on both axes.

    Each system's quality metric and cost metric with intervals; the systems no other beats on both
    axes (the frontier, from the cheapest); each step along it and each dominated system against
    its cheapest dominator as paired differences on the same items, with intervals and p-values.

    \b
    Examples:
      labledger frontier small:test medium:test large:test --metric accuracy --cost mean_cost
      labledger frontier a.jsonl b.jsonl --cost mean_latency_ms --json
    """
    if len(results) < 2:
        raise click.UsageError("frontier needs at least two RESULTS")
    if names and len(names) != len(results):
        raise click.UsageError(f"--name given {len(names)} times for {len(results)} RESULTS")
    from labledger.analysis.frontier import cost_frontier

    found = [resolve_results(ref, ledger_path) for ref in results]
    doc = cost_frontier(
        [path for path, *_ in found],
        names=list(names) or [shown for _, shown, *_ in found],
        metric=metric,
        cost=cost,
        task=task,
        ci=ci,
        resamples=resamples,
        seed=seed,
    )
    if as_json:
        emit_json(doc)
        return
    _print_frontier(doc)


__all__ = ["frontier_command", "rank_command"]
