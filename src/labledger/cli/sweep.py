"""``labledger sweep``, ``select-epoch`` and ``forensics``: thresholds under gates, epochs, audits."""

from __future__ import annotations

import math
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import click
import orjson
from rich.markup import escape
from rich.table import Table

from labledger.cli.base import (
    LazyChoice,
    console,
    emit_json,
    handle_errors,
    json_option,
    ledger_option,
    main,
    open_for_cli,
    resolve_ledger_path,
    save_document,
    save_target,
    warn,
)
from labledger.errors import LedgerError, MetricInputError


def _objectives() -> list[str]:
    from labledger.metrics.sweep import OBJECTIVES

    return list(OBJECTIVES)


#: Exit code of ``sweep --strict`` when no threshold passes every gate.
EXIT_NO_THRESHOLD = 3


def _thresholds_param(ctx, param, value):
    from labledger.metrics.sweep import parse_thresholds

    try:
        parse_thresholds(value)
    except MetricInputError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.{digits}f}"
    return str(v)


def _binary_task(
    ref: str, ledger_path: str | None, positive: str | None, task: str | None, single_ok: bool = False
) -> dict[str, Any]:
    """The task's gold labels, scores, slices and labels from a results file or RUN:NAME
    (:func:`labledger.store.refs.resolve_results`, :func:`labledger.inputs.binary.read_binary_task`)."""
    from labledger.inputs.binary import read_binary_task
    from labledger.store.refs import ResultsRef, resolve_results

    if Path(ref).exists() or ":" not in ref:
        found = ResultsRef(Path(ref), ref)  # a missing file is reported by read_results, naming it
    else:
        found = resolve_results(ref, resolve_ledger_path(ledger_path))
    bt = read_binary_task(found.path, task=task, positive=positive, shown=found.described, single_ok=single_ok)
    return {
        "gold": bt.gold,
        "score": bt.score,
        "slices": bt.slices,
        "positive": bt.positive,
        "negative": bt.negative,
        "task": bt.task,
        "source": bt.source,
        "n": bt.n,
    }


def _shown_rows(count: int, selected: int, limit: int) -> list[int]:
    if count <= limit:
        return list(range(count))
    import numpy as np

    rows = set(np.linspace(0, count - 1, limit - 1).round().astype(int).tolist()) | {selected}
    return sorted(rows)


def _print_report(report, data: dict[str, Any], max_rows: int) -> None:
    d = report.to_dict()
    trials, sel = d["threshold_trials"], d["threshold_selection"]
    skip = {"threshold", "roc_auc", "passed_gates", "passed_point_gates"}
    columns = [k for k in trials[0] if k not in skip]
    gate_cols = {g.column for g in report.gates}
    table = Table(
        title=escape(
            f"Threshold sweep: task '{data['task']}' in {data['source']}, "
            f"n={d['n']:,} (positive '{d['positive']}' when score >= threshold)"
        ),
        title_justify="left",
    )
    table.add_column("threshold", justify="right")
    for c in columns:
        table.add_column(escape(c) + (" (gate)" if c in gate_cols else ""), justify="right")
    points = "passed_point_gates" in trials[0]
    if report.gates:
        table.add_column("gates", justify="center")
    if points:
        table.add_column("point gates", justify="center")
    shown = _shown_rows(len(trials), report.selected, max_rows)
    for i in shown:
        t = trials[i]
        cells = [f"{t['threshold']:g}"] + [_fmt(t[c]) for c in columns]
        if report.gates:
            cells.append("pass" if t["passed_gates"] else "fail")
        if points:
            cells.append("pass" if t["passed_point_gates"] else "fail")
        if i == report.selected:
            cells[0] = "> " + cells[0]
        table.add_row(*cells, style="bold reverse" if i == report.selected else None)
    auc = trials[0]["roc_auc"]
    caption = [f"ROC-AUC {_fmt(auc)} (the same at every threshold)."]
    if len(shown) < len(trials):
        caption.append(f"Showing {len(shown)} of {len(trials):,} thresholds; --out or --json has all.")
    table.caption = escape(" ".join(caption))
    table.caption_justify = "left"
    console.print(table)
    if report.gates:
        console.print(
            "Gates: " + "; ".join(_gate_text(g, v, sel["threshold"]) for g, v in sel["gates"].items()),
            markup=False,
            highlight=False,
        )
        bounds = [g for g in report.gates if hasattr(g, "side")]
        if bounds:
            console.print(
                f"Bound gates read the one-sided {1 - bounds[0].alpha:.0%} Clopper-Pearson bound of the proportion "
                "(exact binomial, items independent), not its point value; the point value and its verdict are "
                f"beside each. Thresholds passing: {sel['n_passing']} on the bounds, "
                f"{sel['n_passing_point_gates']} on the point values, of {len(trials)}.",
                markup=False,
                highlight=False,
            )
    metrics = escape(", ".join(f"{k} {_fmt(sel[k])}" for k in columns))
    if sel["recall_gate_passed"]:
        console.print(f"[bold green]Selected threshold {sel['threshold']:g}[/]: {metrics}.")
    else:
        console.print(
            f"[bold red]No threshold passes every gate.[/] Fallback (ungated best "
            f"{d['objective']}): {sel['threshold']:g}: {metrics}."
        )
    console.print(f"Rule: {sel['selected_by']}. Ties: {d['tie_break']}.", markup=False, highlight=False)
    if len(sel["tied_thresholds"]) > 1:
        console.print(
            "Tied on " + d["objective"] + ": " + ", ".join(f"{t:g}" for t in sel["tied_thresholds"]), markup=False
        )
    paired = d.get("paired_test")
    if paired:
        line = ", ".join(f"{k} {_fmt(paired[k])}" for k in columns if k in paired)
        gates = ""
        if "recall_gate_passed" in paired:
            gates = f"; gates {'pass' if paired['recall_gate_passed'] else 'FAIL'}"
        console.print(
            f"Paired test ({data['test_source']}, n={paired['n']:,}) at "
            f"{paired['threshold']:g}: {line}, roc_auc {_fmt(paired['roc_auc'])}{gates}.",
            markup=False,
            highlight=False,
        )


def _gate_text(gate: str, v: dict[str, Any], threshold: float) -> str:
    """One gate's verdict at the selected threshold (a bound gate's point value beside it)."""
    text = f"{gate} ({'pass' if v['passed'] else 'FAIL'} at {threshold:g}: {_fmt(v['value'])}"
    if "point" in v:
        text += f"; point value {_fmt(v['point'])}, which {'passes' if v['point_passed'] else 'fails'}"
    return text + ")"


@main.command("sweep")
@click.argument("results", metavar="RESULTS")
@click.option("--positive", metavar="LABEL", help="The positive class (score = P(LABEL)).")
@click.option(
    "--thresholds",
    default="0.05:0.95:0.025",
    show_default=True,
    callback=_thresholds_param,
    metavar="SPEC",
    help="START:STOP:STEP (inclusive), a comma list, or 'all' (every distinct score).",
)
@click.option(
    "--select",
    "objective",
    default="f1",
    show_default=True,
    type=LazyChoice(_objectives),
    help="The objective maximised under the gates.",
)
@click.option(
    "--gate",
    "gates",
    multiple=True,
    metavar="EXPR",
    help="e.g. 'recall[single_symbol]>=0.97', 'recall[length=long]>=0.9', or on a confidence bound: "
    "'lower(recall[cross_boundary])>=0.97' (repeatable).",
)
@click.option(
    "--gate-alpha",
    type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="One-sided level of lower(...) / upper(...) gates (0.05: 95% bounds).",
)
@click.option("--task", help="The task to sweep (needed when RESULTS holds several).")
@click.option(
    "--test", "test_ref", metavar="PAIRED", help="A second results file (or RUN:NAME) scored at the selected threshold."
)
@click.option(
    "--center",
    default=0.5,
    show_default=True,
    type=float,
    help="Tie-break: among equal objectives, the threshold closest to this wins.",
)
@click.option("--out", type=click.Path(dir_okay=False), help="Write the report (JSON) here.")
@click.option(
    "--save",
    metavar="RUN:NAME",
    default=None,
    help="Store the report in a run of the ledger (evals/NAME/sweep.json; the run's page on the site).",
)
@click.option("--strict", is_flag=True, help=f"Exit {EXIT_NO_THRESHOLD} when no threshold passes every gate.")
@click.option(
    "--max-rows",
    default=40,
    show_default=True,
    type=click.IntRange(2),
    help="Most table rows to print (the selected one is always shown).",
)
@ledger_option
@json_option
@handle_errors
def sweep_cmd(
    results,
    positive,
    thresholds,
    objective,
    gates,
    gate_alpha,
    task,
    test_ref,
    center,
    out,
    save,
    strict,
    max_rows,
    ledger_path,
    as_json,
):
    """Sweep a decision threshold over RESULTS and select one under gates; write the report.

    RESULTS is a results.jsonl file or RUN:NAME (results stored in a run). An item is predicted
    positive when its score (the 'score' field, or probs[POSITIVE]) is >= the threshold.
    """
    from labledger.metrics.sweep import threshold_sweep

    target = save_target(save)
    data = _binary_task(results, ledger_path, positive, task)
    test: dict[str, Any] = {}
    if test_ref:
        t = _binary_task(test_ref, ledger_path, data["positive"], data["task"], single_ok=True)
        if {t["positive"], t["negative"]} != {data["positive"], data["negative"]}:
            raise MetricInputError(
                f"{t['source']} has labels {t['negative']!r}, {t['positive']!r}; "
                f"{data['source']} has {data['negative']!r}, {data['positive']!r}."
            )
        test = {"test_gold": t["gold"], "test_score": t["score"], "test_slices": t["slices"]}
        data["test_source"] = t["source"]
    report = threshold_sweep(
        gold=data["gold"],
        score=data["score"],
        thresholds=thresholds,
        positive=data["positive"],
        negative=data["negative"],
        slices=data["slices"],
        gates=gates,
        objective=objective,
        center=center,
        gate_alpha=gate_alpha,
        **test,
    )
    doc = {"source": data["source"], "task": data["task"], **report.to_dict()}
    if test_ref:
        doc["paired_test"] = {"source": data["test_source"], **doc["paired_test"]}
    if out:
        try:
            from labledger.store.jsonl import atomic_write

            atomic_write(out, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n", sweep=True)
        except OSError as exc:
            raise LedgerError(f"cannot write the report to {out}: {exc.strerror}") from None
    saved = save_document(ledger_path, target, doc, kind="sweep") if target is not None else None
    if as_json:
        emit_json(doc)
    else:
        _print_report(report, data, max_rows)
        if out:
            console.print(f"Report written to {out}.", markup=False, highlight=False)
        if saved is not None:
            console.print(f"Saved sweep '{save}' to {saved}", markup=False, highlight=False)
    if strict and not report.gate_passed:
        click.echo(
            f"Error: no threshold passes every gate ({', '.join(g.text for g in report.gates)}); --strict.", err=True
        )
        sys.exit(EXIT_NO_THRESHOLD)


@main.command("select-epoch")
@click.argument("run")
@click.option("--metric", default="f1", show_default=True, help="The history field to optimise.")
@click.option("--lower-is-better", is_flag=True, help="Pick the lowest value (e.g. loss).")
@ledger_option
@json_option
@handle_errors
def select_epoch_cmd(run, metric, lower_is_better, ledger_path, as_json):
    """Pick the epoch of RUN's history with the best METRIC (ties: the earliest)."""
    from labledger.metrics.sweep import select_epoch

    view = open_for_cli(ledger_path).run(run)
    history = list(view.history())
    sel = select_epoch(history, metric=metric, higher_is_better=not lower_is_better)
    if as_json:
        emit_json({"run": view.id, "name": view.name, **sel.to_dict()})
        return
    keys = [k for k, v in sel.entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    keys = ["epoch"] + [k for k in keys if k != "epoch"] if "epoch" in keys else keys
    keys = keys[:10]
    table = Table(title=f"History of {view.name} ({view.id}): {sel.tie_break}", title_justify="left")
    for k in keys:
        table.add_column(k, justify="right")
    for i, entry in enumerate(history):
        if not isinstance(entry.get(metric), (int, float)):
            continue
        style = "bold reverse" if i == sel.index else None
        table.add_row(
            *[_fmt(entry.get(k)) if isinstance(entry.get(k), float) else str(entry.get(k, "-")) for k in keys],
            style=style,
        )
    console.print(table)
    tied = f" (tied: {', '.join(map(str, sel.tied_epochs))})" if len(sel.tied_epochs) > 1 else ""
    console.print(f"Selected epoch {sel.label}: {metric} {_fmt(sel.value)}{tied}.", markup=False, highlight=False)


def _support_param(ctx, param, value):
    try:
        pos, neg = (int(x) for x in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected POS,NEG (two whole counts); got {value!r}") from None
    return pos, neg


def _recorded_param(ctx, param, value):
    """A recorded number and the decimals it was written with ("0.8330" -> (0.833, 4))."""
    if value is None:
        return None
    try:
        d = Decimal(value.strip())
    except InvalidOperation:
        d = None
    if d is None or not d.is_finite():
        raise click.BadParameter(f"expected a number; got {value!r}")
    return float(d), max(0, -int(d.as_tuple().exponent))


@main.command("forensics")
@click.option(
    "--support",
    required=True,
    callback=_support_param,
    metavar="POS,NEG",
    help="True counts of the positive and the negative class.",
)
@click.option("--accuracy", required=True, metavar="ACC", callback=_recorded_param, help="The recorded accuracy.")
@click.option(
    "--weighted-f1",
    "weighted_f1",
    required=True,
    metavar="F1",
    callback=_recorded_param,
    help="The recorded weighted F1.",
)
@click.option(
    "--swapped/--not-swapped",
    default=True,
    show_default=True,
    help="Was the F1 recorded as f1_score(pred, truth) (arguments swapped)?",
)
@click.option(
    "--decimals",
    type=click.IntRange(0),
    default=None,
    help="Decimals of the recorded F1 (default: as many as written).",
)
@click.option(
    "--accuracy-decimals",
    type=click.IntRange(0),
    default=None,
    help="Decimals of the recorded accuracy (default: as many as written).",
)
@json_option
@handle_errors
def forensics_cmd(support, accuracy, weighted_f1, swapped, decimals, accuracy_decimals, as_json):
    """Every binary confusion matrix consistent with recorded accuracy and weighted F1."""
    from labledger.metrics.forensics import reconstruct_confusion

    (acc, acc_written), (f1, f1_written) = accuracy, weighted_f1
    r = reconstruct_confusion(
        support=support,
        accuracy=acc,
        weighted_f1=f1,
        swapped=swapped,
        decimals=f1_written if decimals is None else decimals,
        accuracy_decimals=acc_written if accuracy_decimals is None else accuracy_decimals,
    )
    if as_json:
        emit_json(r.to_dict())
        return
    kind = "swapped F1 (recorded kind)" if swapped else "recorded-kind F1"
    table = Table(
        title=f"Confusion matrices with {support[0]:,} positives and {support[1]:,} "
        f"negatives, accuracy {acc:.{acc_written}f}, weighted F1 "
        f"{f1:.{f1_written}f}"
        f" ({'arguments swapped' if swapped else 'arguments in order'})",
        title_justify="left",
    )
    for col in ("tp", "fn", "fp", "tn", "accuracy", kind, "correct weighted F1"):
        table.add_column(col, justify="right")
    for c in r.candidates:
        recorded = c.weighted_f1_swapped if swapped else c.weighted_f1
        table.add_row(
            f"{c.tp:,}",
            f"{c.fn:,}",
            f"{c.fp:,}",
            f"{c.tn:,}",
            f"{c.accuracy:.6f}",
            f"{recorded:.6f}",
            f"{c.weighted_f1:.6f}",
        )
    console.print(table)
    if not r.candidates:
        warn(
            "no confusion matrix with these class counts gives both recorded values"
            + ("; try --not-swapped" if swapped else "; try --swapped")
            + " or check the supports and decimals."
        )
        return
    console.print(
        f"Correct weighted F1 (f1_score(truth, pred, average='weighted')) over "
        f"{len(r.candidates)} candidate(s): {r.weighted_f1_min:.4f} to "
        f"{r.weighted_f1_max:.4f} (exact: {r.weighted_f1_min:.6f} to "
        f"{r.weighted_f1_max:.6f}).",
        markup=False,
        highlight=False,
    )
