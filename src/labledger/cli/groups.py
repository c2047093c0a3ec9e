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
        if not iv or iv.get("low") is None:
            return "-"
        return f"[{iv['low']:.4f}, {iv['high']:.4f}]" + ("†" if iv.get("note") else "")

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
    cut = {
        iv["note"] for s in res.summary for iv in (s.get("interval"), s.get("diff_interval")) if iv and iv.get("note")
    }
    for note in sorted(cut):
        console.print(f"[dim]† {escape(note)}[/]")
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
        f"{r['n_seeds']} seeds x {r['n_items']} items"
        + (f" x {r['n_repeats']} repeats" if r.get("n_repeats", 1) > 1 else "")
        + f" (runs differ in: {escape(keys)})",
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


@main.command("signal")
@click.argument("results", nargs=-1, required=True)
@click.option("--metric", default=None, metavar="NAME", help="The metric (default: each task's headline).")
@click.option(
    "--task", "tasks", multiple=True, metavar="T", help="A task (benchmark); repeatable (default: every shared one)."
)
@click.option("--ci", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True, help="Interval level.")
@click.option(
    "--alpha",
    type=click.FloatRange(0.001, 0.5),
    default=0.05,
    show_default=True,
    help="Level of the adjacent steps' tests.",
)
@click.option("--resamples", type=click.IntRange(min=0), default=1000, show_default=True, help="Bootstrap resamples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@ledger_option
@json_option
@handle_errors
def signal_cmd(results, metric, tasks, ci, alpha, resamples, seed, ledger_path, as_json):
    """Which benchmarks tell a run's checkpoints apart: signal-to-noise and monotonicity per task of RESULTS at successive checkpoints.

    RESULTS are result sets of the same items at three or more checkpoints, in training order: files,
    RUN:NAME, or RUN:PATTERN (RUN:val-* takes every matching set of the run, in natural order). Per
    task: the metric at each checkpoint, the spread over the checkpoints against one checkpoint's item
    noise (SNR), Kendall's tau against the order, and the adjacent steps that are separable (paired,
    Holm-adjusted).
    """
    from labledger.analysis.signal import checkpoint_signal
    from labledger.cli.base import resolve_ledger_path
    from labledger.cli.evaluation import resolve_results
    from labledger.schema.format import format_ci, format_p, format_value
    from labledger.store.refs import expand_results

    refs = [r for ref in results for r in expand_results(ref, resolve_ledger_path(ledger_path) if ":" in ref else None)]
    found = [resolve_results(ref, ledger_path) for ref in refs]
    doc = checkpoint_signal(
        [path for path, *_ in found],
        names=refs,
        metric=metric,
        task=list(tasks) or None,
        ci=ci,
        resamples=resamples,
        seed=seed,
        alpha=alpha,
    )
    if as_json:
        emit_json(doc)
        return
    console.print(f"{len(refs)} checkpoints: {escape(', '.join(refs))}", highlight=False)
    t = Table(title="signal and noise per task", title_justify="left")
    for col in (
        "task",
        "metric",
        "n",
        "first",
        "last",
        "signal (SD)",
        "noise (SE)",
        "SNR",
        "tau",
        "p (tau)",
        "separable steps",
    ):
        t.add_column(col, justify="left" if col in ("task", "metric") else "right")
    for e in doc["tasks"]:
        pts = e["checkpoints"]
        mono = e["monotonicity"]
        t.add_row(
            escape(e["task"]),
            escape(e["metric"]),
            f"{e['n']:,}",
            format_value(pts[0]["value"]),
            format_value(pts[-1]["value"]),
            format_value(e["signal"]),
            format_value(e["noise"]),
            "-" if e["snr"] is None else f"{e['snr']:.2f}",
            "-" if mono["tau"] is None else f"{mono['tau']:+.2f}",
            format_p(mono["p_value"]),
            f"{e['separable_steps']} of {len(e['adjacent'])}",
        )
    console.print(t, highlight=False)
    for e in doc["tasks"]:
        steps = ", ".join(
            f"{format_value(s['diff'], signed=True)} {format_ci(s['ci_low'], s['ci_high'], signed=True)}"
            + (" *" if s.get("p_adjusted") is not None and s["p_adjusted"] < alpha else "")
            for s in e["adjacent"]
        )
        console.print(f"{escape(e['task'])} steps: {steps}", highlight=False)
    console.print(
        f"[dim]* = separable at alpha {alpha:g} (Holm over the task's steps). {escape(doc['definition'])}[/]",
        highlight=False,
    )
