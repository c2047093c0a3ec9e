"""``labledger demo``: train the seed-004 digit stepping task for real and log it in the ledger."""

from __future__ import annotations

import click
from rich.table import Table

from labledger.cli.base import console, emit_json, err_console, handle_errors, json_option, \
    ledger_option, main, resolve_ledger_path
from labledger.errors import LedgerError


@main.command("demo")
@ledger_option
@click.option("--quick", is_flag=True,
              help="A small, fast version (a subset of the images, fewer epochs).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Training seed (both runs; they differ only in width).")
@json_option
@handle_errors
def demo_cmd(ledger_path, quick, seed, as_json):
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
        raise LedgerError(f"the demo needs torch and scikit-learn ({exc}); "
                          f"install them with: pip install -e \".[demo]\"") from None
    from labledger.demo import run_demo

    progress = None if as_json else (lambda msg: err_console.print(f"[dim]{msg}[/dim]"))
    summary = run_demo(resolve_ledger_path(ledger_path), quick=quick, seed=seed,
                       on_progress=progress)
    if as_json:
        emit_json(summary.to_dict())
        return
    console.print(f"Ledger:  {summary.ledger}")
    console.print(f"Group:   {summary.group}  ({len(summary.runs)} runs, "
                  f"{'quick' if summary.quick else 'full'} demo, {summary.elapsed_s:.1f} s)")
    console.print(f"Images:  {summary.split['train']} train, {summary.split['validation']} "
                  f"validation, {summary.split['test']} held-out test (x 10 current states)")
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("run", no_wrap=True)
    for col in ("steps", "microbatches", "test accuracy", "episode success"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in summary.runs:
        table.add_row(r.name, f"{r.optimizer_steps:,}", f"{r.microbatches:,}",
                      f"{r.test_accuracy:.4f}", f"{r.episode_success_rate:.4f}")
    console.print(table)
    console.print("Latency: " + ", ".join(f"{r.name} {r.latency_p50_ms:.3f}" for r in summary.runs)
                  + " ms per test image (median; 10 states)")
    console.print("Runs (id, folder):")
    for r in summary.runs:
        console.print(f"  {r.id}  {r.dir}", soft_wrap=True)
    console.print("Next:")
    console.print(f"  labledger runs --group {summary.group} --ledger {summary.ledger}",
                  soft_wrap=True)
    console.print(f"  labledger show {summary.runs[0].id} --ledger {summary.ledger}",
                  soft_wrap=True)
