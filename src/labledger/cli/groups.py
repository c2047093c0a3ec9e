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


@main.command("noise")
@click.argument("group")
@click.option("--metric", required=True, metavar="NAME", help="A per-item mean metric (accuracy, exact_match, ...).")
@click.option("--results", default=None, metavar="NAME", help="Which stored result set of each run to use.")
@click.option("--task", default=None, help="Task within the result sets (when they hold several).")
@click.option(
    "--seed-key",
    "seed_keys",
    multiple=True,
    metavar="KEY",
    help="A config key (dotted) that is a seed; repeatable (default: keys ending in 'seed').",
)
@click.option("--ci", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True, help="Interval level.")
@click.option(
    "--alpha", type=click.FloatRange(0.001, 0.5), default=0.05, show_default=True, help="Test level of the MDE."
)
@click.option("--power", type=click.FloatRange(0.5, 0.999), default=0.8, show_default=True, help="Power of the MDE.")
@ledger_option
@json_option
@handle_errors
def noise_cmd(group, metric, results, task, seed_keys, ci, alpha, power, ledger_path, as_json):
    """The noise floor of GROUP: how far two runs that differ only by their seed land apart on a metric.

    From the group's finished runs (their configs may differ in seed keys only), each with per-item
    scores on the same items: the seed SD of a run's metric, the A/A interval of two new runs, the
    seed / item / seed x item variance shares, the part of the A/A variance a paired test of single
    runs does not see, and the MDE of a paired comparison of 1, 3 and 5 seeds per setup.
    """
    from labledger.analysis.noise import noise_floor

    res = noise_floor(
        open_for_cli(ledger_path),
        group,
        metric=metric,
        results=results,
        task=task,
        seed_keys=list(seed_keys) or None,
        ci=ci,
        alpha=alpha,
        power=power,
    )
    for w in res.warnings:
        warn(w)
    if as_json:
        emit_json(res.to_dict())
        return
    r = res.result
    pct = f"{ci:.0%}"

    def num(v):
        return "-" if v is None else f"{v:.4f}"

    keys = ", ".join(res.seed_keys) or "nothing"
    console.print(
        f"Noise floor of group '{escape(group)}': {escape(metric)} on task {escape(res.task)}, "
        f"{r['n_seeds']} seeds x {r['n_items']} items (runs differ in: {escape(keys)})",
        highlight=False,
    )
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column()
    t.add_column(justify="right")
    t.add_column()
    sd = r["seed_sd"]
    iv = f"[{num(sd['low'])}, {num(sd['high'])}]" if sd["low"] is not None else "no interval"
    t.add_row("mean over seeds", num(r["value"]), "")
    t.add_row("seed SD of a run", num(sd["value"]), f"{iv} ({pct}, chi-square, {r['df']} df)")
    aa = r["aa"]["half_width"]
    t.add_row(
        "A/A interval",
        "-" if aa is None else f"±{aa:.4f}",
        f"{pct} prediction interval of run A - run B (t on {r['df']} df)",
    )
    shares = r["shares"]
    t.add_row(
        "one item's score",
        "",
        ", ".join(f"{k.replace('_x_', ' x ')} {v:.1%}" for k, v in shares.items() if v is not None) or "-",
    )
    unseen = r["unseen_share"]
    t.add_row(
        "unseen by compare",
        "-" if unseen is None else f"{unseen:.0%}",
        "of the A/A variance (the seed main effect: a paired item test of two single runs misses it)",
    )
    mde = r["mde"]
    t.add_row(
        "MDE",
        "",
        ", ".join(f"{k} seed{'s' if k > 1 else ''} {v:.4f}" for k, v in mde["by_seeds"].items())
        + f" (alpha {mde['alpha']}, power {mde['power']}, paired on these items)",
    )
    console.print(t, highlight=False)
    console.print(f"[dim]{escape(r['definition'])}[/]", highlight=False)
