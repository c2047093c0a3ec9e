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


def _ci(m: dict) -> str:
    if m.get("ci_low") is None:
        return f"{m['value']:.4f}"
    return f"{m['value']:.4f} [{m['ci_low']:.4f}, {m['ci_high']:.4f}]"


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
    """Each run's full test with 95% CIs (cluster bootstrap over images) and the paired comparison."""
    if not summary.evaluations:
        return
    first = next(iter(summary.evaluations.values()))
    task = next(iter(first["tasks"]))
    t = Table(
        title=f"Full test ({task}): value [95% CI], n = {first['tasks'][task]['n']:,} items, resampling images",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    t.add_column("metric", no_wrap=True)
    names = {r.id: r.name for r in summary.runs}
    for run_id in summary.evaluations:
        t.add_column(names.get(run_id, run_id), justify="right", no_wrap=True)
    rows: dict[str, list[str]] = {}
    for doc in summary.evaluations.values():
        body = doc["tasks"][task]
        for m in body["metrics"]:
            if isinstance(m.get("value"), (int, float)):
                rows.setdefault(m["key"], []).append(_ci(m))
        for cls in (body.get("per_class") or {}).get("labels", []):
            rows.setdefault(f"recall[{cls['label']}] (n={cls['support']})", []).append(_ci(cls["recall"]))
    for key, cells in rows.items():
        t.add_row(escape(key), *cells)
    console.print(t)
    comp = summary.comparison
    if comp:
        body = comp["tasks"][task]
        names_ab = comp.get("names", {})
        for m in body["metrics"]:
            p = m["p_value"]
            shown_p = f"< {1 / (m['resamples'] + 1):.2g}" if p <= 1 / (m["resamples"] + 1) + 1e-12 else f"= {p:.3g}"
            line = (
                f"{names_ab.get('a', 'B')} - {names_ab.get('b', 'A')}: {m['key']} {m['diff']:+.4f} "
                f"[{m['ci_low']:+.4f}, {m['ci_high']:+.4f}], paired bootstrap p {shown_p}"
            )
            if m.get("mcnemar"):
                clustered = "clustered " if m["mcnemar"].get("clusters") is not None else ""
                line += f", {clustered}McNemar p = {m['mcnemar']['p_value']:.3g}"
            console.print(line + f" (n = {m['n']:,}, same items)", markup=False, highlight=False)
