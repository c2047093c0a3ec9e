"""``labledger calibrate fit|apply|report``: recipes fitted honestly, applied losslessly, reported raw
vs calibrated. RESULTS is a ``results.jsonl`` file or ``RUN:NAME`` (a run's stored results)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from labledger.cli.base import console, emit_json, handle_errors, json_option, ledger_option, main, resolve_ledger_path
from labledger.cli.evaluation import prefetch, resolve_results
from labledger.errors import CalibrationError, MetricInputError
from labledger.schema import MetricId

_METHODS_HELP = (
    "threshold, positive_threshold, prior_multiplier, option_damping, temperature, em_prior_shift; "
    "a chain runs in order: temperature,prior_multiplier"
)


def _recipe(ref: str, ledger_path: str | None):
    """A recipe file, or ``RUN:NAME`` (a recipe stored with ``fit --save``)."""
    from labledger.calibrate import Recipe

    path = Path(ref)
    if path.exists() or ":" not in ref:
        return Recipe.load(path)
    from labledger import open_ledger

    run, _, name = ref.partition(":")
    with open_ledger(resolve_ledger_path(ledger_path)) as ledger:
        doc = ledger.run(run).evaluation(name, kind="recipe")
    return Recipe.from_dict({k: v for k, v in doc.items() if k != "kind"}, source=ref)


def _save_target(value: str) -> tuple[str, str | None]:
    run, _, name = value.partition(":")
    if not run:
        raise click.BadParameter("give RUN or RUN:NAME", param_hint="--save")
    return run, name or None


def _short_key(key: str) -> str:
    """A metric key as tables show it (:attr:`MetricId.short`: without ``zero_division=0``)."""
    try:
        return MetricId.parse(key).short
    except MetricInputError:
        return key


def _fmt(v: Any, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


@main.group("calibrate")
def calibrate_group() -> None:
    """Post-hoc calibration: fit a recipe, apply it to results.jsonl, report raw vs calibrated.

    \b
      labledger calibrate fit results.jsonl --task hover --method threshold --fit-split split=dev --out recipe.toml
      labledger calibrate apply results.jsonl --recipe recipe.toml --out results_calibrated.jsonl
      labledger calibrate report results.jsonl --recipe recipe.toml
    """


@calibrate_group.command("fit")
@click.argument("results")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Task to fit (repeatable; default: the only one).")
@click.option("--method", required=True, metavar="M[,M2]", help=_METHODS_HELP + ".")
@click.option(
    "--grid",
    "grids",
    multiple=True,
    metavar="[N@]SPEC",
    help="Values searched: thresholds/alphas START:STOP:STEP or a list (threshold default 0:1:0.01, "
    "alpha 0.02:2:0.02), prior multipliers LABEL=VALUES (repeat per label), temperature LOW:HIGH "
    "(default 0.05:20). N@ names the step of a chain.",
)
@click.option("--positive", metavar="LABEL", help="Positive label of a threshold (and of binary 'score' rows).")
@click.option("--pattern", metavar="REGEX", help="option_damping: options whose label (or --field text) matches.")
@click.option("--field", "option_field", metavar="NAME", help="option_damping: row field naming the options.")
@click.option(
    "--item-field", metavar="NAME", help="positive_threshold: field grouping rows into items (default: group)."
)
@click.option(
    "--source-prior",
    type=click.Choice(["gold", "mean_posterior"]),
    default="gold",
    show_default=True,
    help="em_prior_shift: the priors the probabilities reflect, from the fit items.",
)
@click.option(
    "--fit-split", metavar="FIELD=VALUE", help="Fit on these items only (a slice or row field); report on the rest."
)
@click.option(
    "--crossfit",
    type=click.IntRange(min=2),
    metavar="K",
    help="Also compute the out-of-fold figure (K folds, by group when rows have one).",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the folds.")
@click.option(
    "--objective",
    metavar="METRIC",
    help="Metric to optimise (default: the task's headline; per-item "
    "F1 for positive_threshold; log loss for a temperature).",
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Recipe file (.toml, or .yaml).")
@click.option("--merge", is_flag=True, help="Add these tasks to an existing recipe file.")
@click.option("--force", is_flag=True, help="Replace an existing recipe file.")
@click.option(
    "--save",
    metavar="RUN[:NAME]",
    help="Also store the recipe in a run of the ledger (evals/NAME/recipe.json; NAME default: calibration).",
)
@ledger_option
@json_option
@handle_errors
def fit_cmd(
    results,
    tasks,
    method,
    grids,
    positive,
    pattern,
    option_field,
    item_field,
    source_prior,
    fit_split,
    crossfit,
    seed,
    objective,
    out,
    merge,
    force,
    save,
    ledger_path,
    as_json,
):
    """Fit a calibration recipe on RESULTS and write it to --out."""
    prefetch(results)
    from labledger.calibrate import Recipe
    from labledger.calibrate.fitting import fit, grid_from_options, parse_methods

    if fit_split is not None and crossfit is not None:
        raise click.UsageError(
            "--fit-split and --crossfit are exclusive: fit on a split and report on the rest, "
            "or cross-fit on everything"
        )
    if fit_split is not None and ("=" not in fit_split or fit_split.startswith("=")):
        raise click.BadParameter(f"{fit_split!r} must look like FIELD=VALUE (e.g. split=dev)", param_hint="--fit-split")
    if merge and force:
        raise click.UsageError("--merge and --force are exclusive")
    target = _save_target(save) if save else None
    out_path = Path(out)
    if out_path.exists() and not (merge or force):
        raise CalibrationError(f"{out} exists; pass --merge to add these tasks to it, or --force to replace it")
    path, display, _run_id, _ = resolve_results(results, ledger_path)
    methods = parse_methods(method)
    recipe = fit(
        path,
        method=methods,
        task=list(tasks) or None,
        grids=grid_from_options(methods, grids),
        objective=objective,
        positive=positive,
        pattern=pattern,
        field=option_field,
        item_field=item_field,
        source_prior=source_prior,
        fit_split=fit_split,
        crossfit=crossfit,
        seed=seed,
        display=display,
    )
    fitted_tasks = list(recipe.tasks)
    if merge and out_path.exists():
        old = Recipe.load(out_path)
        recipe = Recipe({**old.tasks, **recipe.tasks})
    recipe.save(out_path)
    saved = None
    if target is not None:
        from labledger import open_ledger

        with open_ledger(resolve_ledger_path(ledger_path)) as ledger:
            name = target[1] or "calibration"
            stored = ledger.save_evaluation(
                target[0], name, {"kind": "calibration_recipe", **recipe.to_dict()}, kind="recipe"
            )
            saved = {"run": ledger.resolve(target[0]), "name": name, "path": str(stored)}
    if as_json:
        emit_json({"recipe": recipe.to_dict(), "out": str(out_path), "saved": saved})
        return
    table = Table(title=escape(f"Fitted on {display}"), title_justify="left")
    for col in ("task", "steps", "objective", "fit items", "raw", "in-sample", "cross-fitted"):
        right = col in ("fit items", "raw", "in-sample", "cross-fitted")
        table.add_column(col, justify="right" if right else "left", no_wrap=right or col == "task", overflow="fold")
    for name in fitted_tasks:
        t = recipe.tasks[name]
        v, f = t.values or {}, t.fit or {}
        table.add_row(
            escape(name),
            escape(t.describe()),
            escape(_short_key(t.objective or "-")),
            f"{f.get('n', 0):,} ({escape(f.get('split', 'all'))})",
            _fmt(v.get("raw")),
            _fmt(v.get("in_sample")),
            _fmt(v.get("crossfit")),
        )
    console.print(table)
    console.print(
        "[dim]in-sample: on the items it was fitted on (optimistic); cross-fitted: out-of-fold "
        "(--crossfit K); a split's honest figure comes from `labledger calibrate report`.[/dim]"
    )
    console.print(f"Wrote {escape(str(out_path))} (recipe {recipe.id}; tasks: {escape(', '.join(recipe.tasks))}).")
    if saved:
        console.print(f"Stored in run {saved['run']} as {escape(saved['path'])}.", soft_wrap=True)
    if any(
        "crossfit" not in (recipe.tasks[t].values or {}) and (recipe.tasks[t].fit or {}).get("split") == "all"
        for t in fitted_tasks
    ):
        console.print(
            "[dim]Fitted on every item: a report on these items is optimistic, and shows the "
            "cross-fitted figure beside it (--crossfit K records it now).[/dim]"
        )


@calibrate_group.command("apply")
@click.argument("results")
@click.option("--recipe", "recipe_ref", required=True, metavar="FILE|RUN:NAME", help="The recipe to apply.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The calibrated results file.")
@click.option("--keep-other-tasks", is_flag=True, help="Copy rows of tasks the recipe does not know, unchanged.")
@ledger_option
@json_option
@handle_errors
def apply_cmd(results, recipe_ref, out, keep_other_tasks, ledger_path, as_json):
    """Write --out: every row of RESULTS byte for byte, plus a 'calibrated' field."""
    from labledger.calibrate import apply

    path, display, _, _ = resolve_results(results, ledger_path)
    recipe = _recipe(recipe_ref, ledger_path)
    summary = apply(path, recipe, out, keep_other_tasks=keep_other_tasks, display=display)
    if as_json:
        emit_json(summary)
        return
    console.print(f"Wrote {escape(out)}: {summary['rows']:,} rows, recipe {summary['recipe']}.")
    for task, info in summary["tasks"].items():
        extra = ""
        if info.get("em"):
            prior = ", ".join(f"{k} {v:.3f}" for k, v in info["em"]["target_prior"].items())
            extra = f"; EM priors on these items: {prior}"
        console.print(
            f"  {escape(task)}: {info['n']:,} rows calibrated ({escape(info['steps'])}), "
            f"{info['changed_predictions']:,} predictions changed{escape(extra)}",
            soft_wrap=True,
        )
    for task, n in summary["kept"].items():
        console.print(f"  {escape(task)}: {n:,} rows copied unchanged (not in the recipe)")


@calibrate_group.command("report")
@click.argument("results")
@click.option("--recipe", "recipe_ref", required=True, metavar="FILE|RUN:NAME", help="The recipe to report on.")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Only this task (repeatable).")
@click.option(
    "--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True, help="Markdown or JSON."
)
@click.option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence level of the paired intervals.",
)
@click.option(
    "--resamples", type=click.IntRange(min=0), default=1000, show_default=True, help="Bootstrap resamples (0: none)."
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the bootstrap.")
@click.option(
    "--bins",
    type=click.IntRange(min=1),
    default=15,
    show_default=True,
    help="ECE bins (equal-width and equal-mass) and reliability bins.",
)
@click.option(
    "--crossfit",
    type=click.IntRange(min=2),
    default=5,
    show_default=True,
    help="Folds of the cross-fitted figure when the recipe records none.",
)
@click.option(
    "--save",
    metavar="RUN[:NAME]",
    help="Store the report in a run (evals/NAME/calibration.json; NAME "
    "default: the results' name for RUN:NAME, else calibration).",
)
@ledger_option
@json_option
@handle_errors
def report_cmd(results, recipe_ref, tasks, fmt, ci, resamples, seed, bins, crossfit, save, ledger_path, as_json):
    """Raw vs calibrated on RESULTS with paired CIs, labelled held out or in-sample."""
    prefetch(results)
    from labledger.calibrate import report

    target = _save_target(save) if save else None
    path, display, run_id, res_name = resolve_results(results, ledger_path)
    recipe = _recipe(recipe_ref, ledger_path)
    rep = report(
        path,
        recipe,
        task=list(tasks) or None,
        ci=ci,
        resamples=resamples,
        seed=seed,
        bins=bins,
        crossfit=crossfit,
        display=display,
    )
    doc = rep.doc
    if target is not None:
        from labledger import open_ledger

        with open_ledger(resolve_ledger_path(ledger_path)) as ledger:
            rid = ledger.resolve(target[0])
            name = target[1] or (res_name if res_name and rid == run_id else "calibration")
            doc.stored = str(ledger.save_evaluation(rid, name, doc))
    if as_json or fmt == "json":
        emit_json(doc.to_dict())
        return
    click.echo(rep.to_markdown())
    if doc.stored is not None:
        click.echo(f"Stored as {doc.stored}")
