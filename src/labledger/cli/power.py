"""``labledger power``: plan an evaluation (items needed for a difference, or the MDE for n items)."""

from __future__ import annotations

import click
from rich.markup import escape

from labledger.cli.base import console, emit_json, handle_errors, json_option, ledger_option, main


@main.command("power")
@click.option("--delta", type=float, default=None, help="The true difference to detect (e.g. 0.03): prints n.")
@click.option("--n", "n_items", type=click.IntRange(min=1), default=None, help="Items available: prints the MDE.")
@click.option("--omega2", type=click.FloatRange(min=0), default=None, help="Variance of the per-item difference.")
@click.option("--baseline", type=click.FloatRange(0, 1), default=None, help="Baseline accuracy.")
@click.option(
    "--correlation", type=click.FloatRange(-1, 1), default=None, help="Correlation of the two models' errors."
)
@click.option("--results", default=None, metavar="FILE|RUN:NAME", help="A stored result set (baseline accuracy).")
@click.option(
    "--results-b",
    default=None,
    metavar="FILE|RUN:NAME",
    help="A second result set on the same items (paired variance).",
)
@click.option("--metric", default="accuracy", show_default=True, help="A per-item mean metric of the result sets.")
@click.option("--task", default=None, help="Task within the result sets (when they hold several).")
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Two-sided significance level of the planned test.",
)
@click.option(
    "--power",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.8,
    show_default=True,
    help="Power wanted (probability of detecting the difference).",
)
@ledger_option
@json_option
@handle_errors
def power_cmd(
    delta: float | None,
    n_items: int | None,
    omega2: float | None,
    baseline: float | None,
    correlation: float | None,
    results: str | None,
    results_b: str | None,
    metric: str,
    task: str | None,
    alpha: float,
    power: float,
    ledger_path: str | None,
    as_json: bool,
) -> None:
    """Items needed to detect --delta, or the minimum detectable effect of --n items, for a paired test.

    The variance of the per-item difference comes from --omega2, from --baseline and --correlation,
    from one result set (--results, its accuracy) and --correlation, or from two result sets on the
    same items (--results and --results-b: the observed differences, cluster-robust with groups).
    """
    from labledger.analysis.power import power_plan
    from labledger.cli.evaluation import results_source

    if (delta is None) == (n_items is None):
        raise click.UsageError("give exactly one of --delta (prints n) or --n (prints the MDE)")
    if results_b and not results:
        raise click.UsageError("--results-b needs --results")
    path_a = results_source(results, ledger_path)[0] if results else None
    path_b = results_source(results_b, ledger_path)[0] if results_b else None
    plan = power_plan(
        delta=delta,
        n=n_items,
        omega2=omega2,
        baseline=baseline,
        correlation=correlation,
        results=path_a,
        results_b=path_b,
        metric=metric,
        task=task,
        alpha=alpha,
        power=power,
    )
    if as_json:
        from labledger.schema import PowerPlanDoc, decode

        emit_json(decode({"kind": "power_plan", "schema_version": 2, **plan}, type=PowerPlanDoc).to_dict())
        return
    src = f"omega^2 = {plan['omega2']:.4g} ({escape(plan['omega2_source'])})"
    if delta is not None:
        console.print(f"n = {plan['n']:,} items to detect a difference of {delta:+.4g}")
    else:
        console.print(f"MDE = {plan['mde']:.4g} ({plan['mde'] * 100:.1f} pp) with n = {n_items:,} items")
    console.print(f"{src}; two-sided alpha {alpha:g}, power {power:.0%}")
    console.print(f"[dim]{escape(plan['formula'])}[/dim]")


__all__ = ["power_cmd"]
