"""``labledger contamination``: evaluation items found among a run's training samples."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from labledger.cli.base import console, emit_json, handle_errors, json_option, ledger_option, main, open_for_cli, warn
from labledger.schema.format import format_ci, format_p, format_value


@main.command("contamination")
@click.argument("run")
@click.option(
    "--eval", "eval_ref", required=True, metavar="RESULTS", help="The evaluation: RUN:NAME or a results file."
)
@click.option("--task", default=None, help="Task within the result set (when it holds several).")
@click.option(
    "--train-field",
    default=None,
    metavar="FIELD",
    help="The training samples' text (dotted: input.question); default: the first of input, text, prompt, model_input.",
)
@click.option(
    "--eval-field",
    default=None,
    metavar="FIELD",
    help="The evaluation rows' text: a row field (dotted), id or slices.NAME; default: the first of prompt, doc, input, text.",
)
@click.option(
    "--ngram",
    type=click.IntRange(1, 1000),
    default=13,
    show_default=True,
    help="N-gram length in words.",
)
@click.option(
    "--min-share",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="An item overlaps when this share of its n-grams is found (default: any one n-gram).",
)
@click.option(
    "--metric",
    default=None,
    metavar="NAME",
    help="The metric on clean vs overlapping items (default: the task's headline).",
)
@click.option("--ci", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True, help="Interval level.")
@click.option(
    "--resamples", type=click.IntRange(0, 100_000), default=1000, show_default=True, help="Bootstrap resamples."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--limit", type=click.IntRange(0, None), default=10, show_default=True, help="Overlapping items listed.")
@ledger_option
@json_option
@handle_errors
def contamination_cmd(
    run,
    eval_ref,
    task,
    train_field,
    eval_field,
    ngram,
    min_share,
    metric,
    ci,
    resamples,
    seed,
    limit,
    ledger_path,
    as_json,
):
    """Evaluation items found among RUN's training samples (exact and n-gram overlap), and the metric on clean vs overlapping items.

    Text on both sides is normalised (NFKC, case-folded, words); the training samples are streamed,
    so memory grows with the evaluation only. The metric on each side has its interval; overlapping
    - clean is an unpaired bootstrap (each side resampled, clusters whole) with its p-value.
    """
    from labledger.analysis.contamination import contamination

    res = contamination(
        open_for_cli(ledger_path),
        run,
        eval_ref,
        task=task,
        train_field=train_field,
        eval_field=eval_field,
        ngram=ngram,
        min_share=min_share,
        metric=metric,
        ci=ci,
        resamples=resamples,
        seed=seed,
    )
    for w in res.warnings:
        warn(w)
    doc = res.to_dict()
    if as_json:
        emit_json(doc)
        return
    share = doc["n_overlapping"] / doc["n_items"] if doc["n_items"] else 0.0
    rule = "any n-gram" if min_share is None else f"n-gram share >= {min_share:g}"
    console.print(
        f"Contamination of {escape(doc['eval'])} task {escape(doc['task'])} ({escape(doc['eval_field'])}) by the "
        f"{doc['train_samples']:,} training samples of {escape(res.run['name'])} ({escape(doc['train_field'])}), "
        f"{ngram}-grams",
        highlight=False,
    )
    console.print(
        f"overlapping: {doc['n_overlapping']:,} of {doc['n_items']:,} items ({share:.1%}; exact {doc['n_exact']:,}, "
        f"{rule})",
        highlight=False,
    )
    pct = f"{ci:.0%}"
    t = Table(title=f"{escape(doc['metric'])} by overlap", title_justify="left")
    for col in ("items", "n", doc["metric"], f"{pct} CI", "p"):
        t.add_column(escape(col), justify="left" if col == "items" else "right")
    for label in ("clean", "overlapping"):
        side = doc[label]
        if side is None:
            t.add_row(label, "0", "-", "-", "")
        else:
            t.add_row(
                label, f"{side['n']:,}", format_value(side["value"]), format_ci(side["ci_low"], side["ci_high"]), ""
            )
    d = doc["difference"]
    if d is not None:
        t.add_row(
            "overlapping - clean",
            "",
            format_value(d["diff"], signed=True),
            format_ci(d["ci_low"], d["ci_high"], signed=True),
            format_p(d["p_value"]),
        )
    console.print(t, highlight=False)
    if d is not None:
        console.print(f"[dim]difference: {escape(d['method'] or '')}[/]", highlight=False)
    items = doc["items"][:limit]
    if items:
        it = Table(title=f"overlapping items (first {len(items)} of {doc['n_overlapping']:,})", title_justify="left")
        for col in ("id", "text", "match", "first training sample"):
            it.add_column(col, max_width=44 if col == "text" else None, no_wrap=col == "text", overflow="ellipsis")
        for x in items:
            match = "exact" if x["exact"] else f"{x['share']:.0%} of n-grams"
            where = "-" if x["microbatch"] is None else f"microbatch {x['microbatch']}, sample {x['sample_index']}"
            text = x["text"] if isinstance(x["text"], str) else json.dumps(x["text"])
            it.add_row(escape(x["id"]), escape(text), match, where)
        console.print(it, highlight=False)
    console.print(f"[dim]{escape(doc['definition'])}[/]", highlight=False)
