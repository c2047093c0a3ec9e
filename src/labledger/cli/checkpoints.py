"""``labledger soup``, ``hash``, ``logit-diff``, ``mixture``: checkpoints and data audits."""

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
    resolve_ledger_path,
)


@main.command("hash")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@json_option
@handle_errors
def hash_cmd(files, as_json):
    """sha256 and size of each FILE, streamed (1 MiB at a time)."""
    from labledger.analysis.checkpoints import hash_files

    rows = hash_files(files)
    if as_json:
        emit_json({"files": rows})
        return
    for r in rows:
        console.print(f"{r['sha256']}  {r['size']:>14,}  {r['path']}", markup=False)


@main.command("soup")
@click.argument("checkpoints", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--weights",
    required=True,
    metavar="W...",
    help="One weight per checkpoint, separated by spaces or commas (e.g. '0.08 0.32 0.60').",
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file: .safetensors or .pt.")
@click.option("--normalize", is_flag=True, help="Rescale the weights to sum to 1.")
@click.option(
    "--integers",
    type=click.Choice(["equal", "first"]),
    default="equal",
    show_default=True,
    help="Integer tensors are not averaged: require them equal, or take the first's.",
)
@click.option(
    "--record/--no-record",
    default=True,
    show_default=True,
    help="Record the soup in the ledger as a run with its lineage.",
)
@click.option("--name", default="soup", show_default=True, help="Run name when recorded.")
@click.option("--group", default=None, help="Run group when recorded.")
@ledger_option
@json_option
@handle_errors
def soup_cmd(checkpoints, weights, out, normalize, integers, record, name, group, ledger_path, as_json):
    """Weighted average of CHECKPOINTS (same keys, shapes, dtypes), streamed tensor by tensor."""
    from labledger.analysis.checkpoints import soup

    try:
        w = [float(x) for x in weights.replace(",", " ").split()]
    except ValueError:
        raise click.BadParameter(f"expected numbers; got {weights!r}", param_hint="--weights") from None
    if len(w) != len(checkpoints):
        raise click.BadParameter(f"{len(checkpoints)} checkpoints but {len(w)} weights", param_hint="--weights")
    res = soup(
        checkpoints,
        w,
        out,
        normalize=normalize,
        integers=integers,
        ledger=resolve_ledger_path(ledger_path) if record else None,
        name=name,
        group=group,
    )
    if as_json:
        emit_json(res.to_dict())
        return
    t = Table(title=f"soup -> {res.out}", title_justify="left")
    for col in ("weight", "input", "sha256"):
        t.add_column(col, overflow="fold")
    for i in res.inputs:
        t.add_row(f"{i['weight']:.4g}", escape(i["path"]), i["sha256"])
    t.add_row("=", res.out, res.sha256, style="bold")
    console.print(t)
    console.print(
        f"{res.tensors} tensors ({len(res.integer_tensors)} integer, not averaged); "
        f"{res.size:,} bytes" + (f"; recorded as run {res.run_id}" if res.run_id else "")
    )


@main.command("logit-diff")
@click.argument("a", type=click.Path(dir_okay=False, exists=True))
@click.argument("b", type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--tol",
    type=click.FloatRange(0),
    default=None,
    metavar="T",
    help="Non-regression check: max |a-b| <= T on every item (items over it are counted).",
)
@click.option("--strict", is_flag=True, help="With --tol: exit 3 when an item is over it.")
@json_option
@handle_errors
def logit_diff_cmd(a, b, tol, strict, as_json):
    """Maximum absolute difference between two models' outputs (npy/npz or results files), per head."""
    import sys

    from labledger.analysis.checkpoints import logit_diff

    if strict and tol is None:
        raise click.UsageError("--strict needs --tol")
    res = logit_diff(a, b, tol=tol)
    if as_json:
        emit_json(res)
    else:
        _print_logit_diff(res)
    if strict and not res["passed"]:
        sys.exit(3)


def _print_logit_diff(res):
    """The logit-diff table, and the tolerance check's verdict when one was asked for."""
    t = Table(title="logit difference (non-regression)", title_justify="left")
    for col in ("head", "n", "max |a-b|", "mean |a-b|", "argmax agreement"):
        t.add_column(col, justify="right" if col != "head" else "left")
    for k, h in res["heads"].items():
        agree = h.get("argmax_agreement")
        t.add_row(
            k, f"{h['n']:,}", f"{h['max_abs']:.3g}", f"{h['mean_abs']:.3g}", "-" if agree is None else f"{agree:.4f}"
        )
    console.print(t)
    for side in ("only_in_a", "only_in_b"):
        if res[side]:
            console.print(f"heads {side.replace('_', ' ')}: {', '.join(res[side])}")
    if "tol" in res:
        for k, h in res["heads"].items():
            verdict = "pass" if h["passed"] else "FAIL"
            console.print(
                f"{escape(k)}: max |a-b| <= {res['tol']:g} on every item: {verdict} ({h['items_over']:,} of "
                f"{h['n']:,} items over; largest {h['worst_abs']:.3g} at item {escape(str(h['worst_item']))})",
                highlight=False,
            )


@main.command("mixture")
@click.argument("run")
@click.option(
    "--tolerance",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.2,
    show_default=True,
    help="Flag a dataset whose actual/intended share ratio is off by more.",
)
@click.option(
    "--natural",
    default=None,
    metavar="RESULTS|RUN:NAME",
    help="The natural class distribution per dataset, from a results file's gold labels (default: "
    "config['class_distribution']).",
)
@click.option(
    "--balance-tolerance",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.1,
    show_default=True,
    help="Flag a dataset whose trained-on share of a label is this far from its natural share.",
)
@click.option("--strict", is_flag=True, help="Exit 3 when any dataset is flagged.")
@ledger_option
@json_option
@handle_errors
def mixture_cmd(run, tolerance, natural, balance_tolerance, strict, ledger_path, as_json):
    """Audit RUN's data mixture: intended vs actual share of examples seen per dataset, and the class
    balance trained on vs each dataset's natural distribution (a forced 50:50 is flagged)."""
    import sys

    from labledger.analysis.mixture import audit_run, audit_run_balance, natural_from_rows
    from labledger.errors import LedgerError

    view = open_for_cli(ledger_path).run(run)
    audit = audit_run(view, tolerance=tolerance) if view.config.get("mixture") is not None else None
    balance = None
    if natural is not None:
        from labledger.cli.evaluation import resolve_results
        from labledger.store.jsonl import read_jsonl

        path, shown, _, _ = resolve_results(natural, ledger_path)
        balance = audit_run_balance(
            view, natural=natural_from_rows(read_jsonl(path)), natural_from=shown, tolerance=balance_tolerance
        )
    elif view.config.get("class_distribution") is not None:
        balance = audit_run_balance(view, tolerance=balance_tolerance)
    if audit is None and balance is None:
        raise LedgerError(
            f"run {view.id} declares no mixture (config['mixture']) and no class distribution "
            "(config['class_distribution'] or --natural)"
        )
    flagged = (audit.flagged if audit else []) + (balance.flagged if balance else [])
    if as_json:
        doc = audit.to_dict() if audit else {"run": view.id}
        if balance is not None:
            doc["class_balance"] = balance.to_dict()
        emit_json(doc)
    else:
        if audit is not None:
            _print_mixture(audit, tolerance)
        if balance is not None:
            _print_balance(balance)
    if strict and flagged:
        sys.exit(3)


def _print_mixture(audit, tolerance: float) -> None:
    t = Table(
        title=f"data mixture of run {audit.run_id} ({audit.examples:,} examples seen, field '{audit.field_used}')",
        title_justify="left",
    )
    for col in ("dataset", "intended", "actual", "ratio", "examples", ""):
        t.add_column(col, justify="left" if col in ("dataset", "") else "right")
    for r in audit.rows:
        t.add_row(
            escape(r["dataset"]),
            f"{r['intended_share']:.1%}",
            f"{r['actual_share']:.1%}",
            f"{r['ratio']:.2f}",
            f"{r['examples']:,}",
            "[red bold]OFF[/]" if r["flagged"] else "ok",
        )
    console.print(t)
    if audit.flagged:
        console.print(
            f"[red]{len(audit.flagged)} dataset(s) off by more than {tolerance:.0%} of "
            f"their intended share: {', '.join(escape(f) for f in audit.flagged)}[/]"
        )


def _print_balance(balance) -> None:
    def pct(v):
        return "-" if v is None else f"{v:.1%}"

    t = Table(
        title=f"class balance of run {balance.run_id} (natural: {escape(balance.natural_from)})", title_justify="left"
    )
    for col in ("dataset", "label", "trained", "natural", "examples", ""):
        t.add_column(col, justify="left" if col in ("dataset", "label", "") else "right")
    for r in balance.rows:
        flag = "[red bold]FORCED 50:50[/]" if r["forced_uniform"] else ("[red bold]OFF[/]" if r["flagged"] else "ok")
        t.add_row(
            escape(r["dataset"]),
            escape(r["label"]),
            pct(r["trained_share"]),
            pct(r["natural_share"]),
            f"{r['examples']:,}",
            flag,
        )
    console.print(t)
    if balance.forced:
        console.print(
            f"[red]{len(balance.forced)} dataset(s) trained on a forced uniform class balance their natural "
            f"distribution does not have: {', '.join(escape(f) for f in balance.forced)}[/]"
        )
    elif balance.flagged:
        console.print(
            f"[red]{len(balance.flagged)} dataset(s) trained more than {balance.tolerance:.0%} away from their "
            f"natural class balance: {', '.join(escape(f) for f in balance.flagged)}[/]"
        )
