"""``labledger demo``: train the seed-004 digit stepping task for real and log it in the ledger."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from labledger.cli.base import (
    console,
    emit_json,
    err_console,
    handle_errors,
    json_option,
    ledger_option,
    main,
    resolve_ledger_path,
)
from labledger.errors import LedgerError
from labledger.schema import ComparisonDoc, EvaluationDoc, ci_label, decode, format_p
from labledger.schema.format import format_ci, format_value


@main.command("demo")
@ledger_option
@click.option("--quick", is_flag=True, help="A small, fast version (a subset of the images, fewer epochs).")
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Training seed (both runs; they differ only in width).",
)
@click.option(
    "--site", "site_dir", metavar="DIR", default=None, help="Where to build the static site (default: LEDGER/site)."
)
@click.option("--no-site", is_flag=True, help="Do not build the static site.")
@click.option("--open", "open_site", is_flag=True, help="Open the site in the default browser, if there is one.")
@json_option
@handle_errors
def demo_cmd(ledger_path, quick, seed, site_dir, no_site, open_site, as_json):
    """Train two small PyTorch models on the digit stepping task and log everything.

    Given the 8x8 image of a digit (scikit-learn's bundled load_digits) and a current number 0..9,
    each model chooses -1, 0 or +1 to move the number toward the digit. Every microbatch is logged
    with every sample, then a full test on held-out images replays episodes from every start state.
    Needs the demo extra: pip install -e ".[demo]".
    """
    try:
        import sklearn  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise LedgerError(
            f'the demo needs torch and scikit-learn ({exc}); install them with: pip install -e ".[demo]"'
        ) from None
    from pathlib import Path

    from labledger.demo import run_demo

    progress = None if as_json else (lambda msg: err_console.print(f"[dim]{msg}[/dim]"))
    ledger_dir = resolve_ledger_path(ledger_path)
    site = None if no_site else (site_dir or str(Path(ledger_dir) / "site"))
    summary = run_demo(ledger_dir, quick=quick, seed=seed, on_progress=progress, site=site)
    if open_site and summary.site_index is not None:
        import webbrowser

        webbrowser.open(summary.site_index.as_uri())
    if as_json:
        emit_json(summary.to_dict())
        return
    console.print(f"Ledger:  {summary.ledger}")
    console.print(
        f"Group:   {summary.group}  ({len(summary.runs)} runs, "
        f"{'quick' if summary.quick else 'full'} demo, {summary.elapsed_s:.1f} s)"
    )
    console.print(
        f"Images:  {summary.split['train']} train, {summary.split['validation']} "
        f"validation, {summary.split['test']} held-out test (x 10 current states)"
    )
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("run", no_wrap=True)
    for col in ("steps", "microbatches", "test accuracy", "episode success"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in summary.runs:
        table.add_row(
            r.name,
            f"{r.optimizer_steps:,}",
            f"{r.microbatches:,}",
            f"{r.test_accuracy:.4f}",
            f"{r.episode_success_rate:.4f}",
        )
    console.print(table)
    console.print(
        "Latency: "
        + ", ".join(f"{r.name} {r.latency_p50_ms:.3f}" for r in summary.runs)
        + " ms per test image (median; 10 states)"
    )
    _print_evaluation(summary)
    _print_calibration(summary)
    console.print("Runs (id, folder):")
    for r in summary.runs:
        console.print(f"  {r.id}  {r.dir}", soft_wrap=True)
    console.print("Next:")
    console.print(f"  labledger runs --group {summary.group} --ledger {summary.ledger}", soft_wrap=True)
    console.print(f"  labledger show {summary.runs[0].id} --ledger {summary.ledger}", soft_wrap=True)
    console.print(
        f"  labledger eval {summary.runs[-1].id}:{summary.results_name} --by current --ledger {summary.ledger}",
        soft_wrap=True,
    )
    if summary.site_index is not None:
        console.print(f"Site:    {summary.site_index}  (open it from disk: no server needed)", soft_wrap=True)


def _ci(value: float | None, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return format_value(value)
    return f"{format_value(value)} {format_ci(low, high)}"


def _print_calibration(summary) -> None:
    """Raw vs calibrated on the full test: a temperature then a prior multiplier fitted on validation."""
    cals = getattr(summary, "calibrations", None)
    if not cals:
        return
    t = Table(
        title="Calibration (temperature, then prior multiplier), fitted on validation, reported on the "
        "held-out full test; paired 95% CIs",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    for col in ("run", "metric", "raw", "calibrated", "difference [95% CI]"):
        t.add_column(col, justify="left" if col in ("run", "metric") else "right", no_wrap=True)
    for c in cals.values():
        for i, r in enumerate(c["rows"]):
            ci = "" if r["ci_low"] is None else f" [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"
            t.add_row(
                c["name"] if i == 0 else "",
                escape(r["metric"]),
                f"{r['raw']:.4f}",
                f"{r['calibrated']:.4f}",
                f"{r['diff']:+.4f}{ci}",
            )
    console.print(t)
    for c in cals.values():
        console.print(f"  {c['name']}: recipe {c['recipe']}: {c['steps']}", markup=False, highlight=False)


def _print_evaluation(summary) -> None:
    """Each run's full test with its CIs (cluster bootstrap over images) and the paired comparison."""
    if not summary.evaluations:
        return
    docs = {run_id: decode(d, type=EvaluationDoc) for run_id, d in summary.evaluations.items()}
    first = next(iter(docs.values()))
    task = next(iter(first.tasks))
    t = Table(
        title=f"Full test ({task}): value [{ci_label(first.ci)}], n = {first.tasks[task].n:,} items, resampling images",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    t.add_column("metric", no_wrap=True)
    names = {r.id: r.name for r in summary.runs}
    for run_id in docs:
        t.add_column(names.get(run_id, run_id), justify="right", no_wrap=True)
    rows: dict[str, list[str]] = {}
    for doc in docs.values():
        body = doc.tasks[task]
        for m in body.metrics:
            if m.value is not None:
                rows.setdefault(m.id.short, []).append(_ci(m.value, m.ci_low, m.ci_high))
        for cls in body.per_class.labels if body.per_class else ():
            rows.setdefault(f"recall[{cls.label}] (n={cls.support})", []).append(
                _ci(cls.recall.value, cls.recall.ci_low, cls.recall.ci_high)
            )
    for key, cells in rows.items():
        t.add_row(escape(key), *cells)
    console.print(t)
    comp = summary.comparison
    if comp:
        cdoc = decode(comp, type=ComparisonDoc)
        names_ab = cdoc.names or {"a": "A", "b": "B"}
        for m in cdoc.tasks[task].metrics:
            line = (
                f"{names_ab['a']} - {names_ab['b']}: {m.id.short} {format_value(m.diff, signed=True)} "
                f"{format_ci(m.ci_low, m.ci_high, signed=True)} ({ci_label(m.ci)}), paired bootstrap p "
                f"{format_p(m.p_value)}"
            )
            if m.mcnemar is not None:
                clustered = "clustered " if m.mcnemar.clusters is not None else ""
                line += f", {clustered}McNemar p {format_p(m.mcnemar.p_value)}"
            console.print(line + f" (n = {m.n or 0:,}, same items)", markup=False, highlight=False)
