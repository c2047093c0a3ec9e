"""``labledger eval`` and ``labledger compare``: metrics with CIs and definitions, paired comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from labledger.cli.base import (
    emit_json,
    handle_errors,
    json_option,
    ledger_option,
    main,
    open_for_cli,
    resolve_ledger_path,
    save_document,
    save_target,
)
from labledger.schema import (
    ComparisonDoc,
    EvaluationDoc,
    MetricDiff,
    MetricId,
    MetricValue,
    RepeatsDoc,
    SliceBody,
    TaskComparison,
    ci_label,
    decode,
    format_p,
)
from labledger.schema.documents import MarginTest
from labledger.schema.format import format_ci, format_value

if TYPE_CHECKING:
    from rich.console import JustifyMethod
    from rich.table import Table

# rich is imported when a table is printed: ``eval --json`` and ``compare --json`` never load it


class _Console:
    """The stdout console of :mod:`labledger.cli.base`, made on the first print."""

    def print(self, *args: Any, **kwargs: Any) -> None:
        from labledger.cli import base

        base.console.print(*args, **kwargs)


console = _Console()


def escape(text: str) -> str:
    """rich's markup escape (:func:`rich.markup.escape`), imported on first use.

    >>> escape("[bold]") == chr(92) + "[bold]"
    True
    """
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _table(**kwargs: Any) -> Table:
    """A :class:`rich.table.Table`, imported on first use."""
    from rich.table import Table

    return Table(**kwargs)


def resolve_results(ref: str, ledger_path: str | None) -> tuple[str, str, str | None, str | None]:
    """A results file, or ``RUN:NAME`` (a run's stored results): ``(path, how to show it, run id,
    results name)``; the last two are ``None`` for a plain file (:func:`labledger.store.refs.resolve_results`)."""
    from labledger.store.refs import resolve_results as resolve

    found = resolve(ref, resolve_ledger_path(ledger_path) if ":" in ref else None)
    return str(found.path), found.shown, found.run_id, found.name


def prefetch(*refs: str) -> None:
    """Start hashing each ref that is a large results file, for the columnar cache's check, while
    the command's modules import (:func:`~labledger.inputs.columnar.prefetch_key`); anything else (a
    ``RUN:NAME``, a missing file) is left to :func:`resolve_results`, which reports it. The cache
    entries this command writes are written in threads, waited for when it ends
    (:func:`~labledger.inputs.columnar.defer_writes`, :func:`~labledger.cli.base.handle_errors`)."""
    from labledger.inputs.columnar import defer_writes, prefetch_key

    for ref in refs:
        prefetch_key(ref)
    defer_writes()  # the cache entries of what is read are written beside what follows


def results_source(ref: str, ledger_path: str | None) -> tuple[str, str]:
    """``(path, how to show it)`` of a results file or ``RUN:NAME``."""
    return resolve_results(ref, ledger_path)[:2]


def _fmt(v: Any, digits: int = 4) -> str:
    return format_value(v, digits)


def _ci(low: float | None, high: float | None) -> str:
    return format_ci(low, high)


def _ci_cell(e: MetricValue | MetricDiff) -> str:
    """The bootstrap interval, or why there is none ("too few clusters")."""
    return e.interval_note if e.interval_note else _ci(e.ci_low, e.ci_high)


def _print_stat_notes(entries: Sequence[MetricValue | MetricDiff]) -> None:
    """The few-cluster / small-n warning and the analytic method, once per table (#16)."""
    for note in dict.fromkeys(e.warning for e in entries if e.warning):
        console.print(f"[yellow]Warning:[/] {escape(note)}")
    for how in dict.fromkeys(e.analytic.method for e in entries if e.analytic is not None):
        console.print(f"[dim]analytic interval: {escape(how)}[/dim]")
    forms: dict[str, list[str]] = {}
    for e in entries:  # intervals formed without resampling: which form each metric got
        if e.method and e.method.startswith("analytic"):
            forms.setdefault(e.method, []).append(display_key(e))
    for how, keys in forms.items():
        console.print(f"[dim]intervals: {escape(how)} ({escape(', '.join(keys))})[/dim]")


def _p_cell(e: MetricDiff) -> str:
    """p (adjusted when the comparison adjusts), with 'n.s. (MDE x pp)' when not significant."""
    return _marked_p(e.p_adjusted if e.p_adjusted is not None else e.p_value, e)


def _marked_p(p: float | None, e: MetricDiff) -> str:
    """``p`` with 'n.s. (MDE x pp)' when it is not below 0.05."""
    text = format_p(p)
    if p is not None and p >= 0.05:
        text += " n.s." + (f" (MDE {e.mde * 100:.1f} pp)" if e.mde is not None else "")
    return text


def display_key(entry: Any) -> str:
    """A metric's key for tables: :attr:`MetricId.short` (its parameters, less ``zero_division=0``)."""
    if isinstance(entry, (MetricValue, MetricDiff)):
        return entry.id.short
    return MetricId(entry["metric"], entry["params"]).short


def _print_repeats(doc: dict[str, Any]) -> None:
    """The per-item reduced evaluation of repeated rows (``labledger eval`` on epoch/sample rows)."""
    console.print(f"Results: {escape(str(doc.get('source', '')))}")
    level = ci_label(doc.get("ci"))
    for task, body in doc["tasks"].items():
        table = _table(title=escape(f"task '{task}' (repeats by '{doc['repeat_field']}')"), title_justify="left")
        for col in ("metric", "value", level, f"analytic {level}", "n items", "K", "reduction"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for e in body["metrics"]:
            an = e.get("analytic") or {}
            table.add_row(
                escape(e["metric"]),
                _fmt(e["value"]),
                _ci(e["ci_low"], e["ci_high"]),
                _ci(an.get("low"), an.get("high")),
                f"{e['n']:,}",
                str(e["k"]),
                e["reduction"],
            )
        console.print(table)
        for note in dict.fromkeys(e["warning"] for e in body["metrics"] if e.get("warning")):
            console.print(f"[yellow]Warning:[/] {escape(note)}")
    console.print(
        "[dim]Each item's scores are reduced over its repeats before any interval: n counts questions, "
        "K the repeats per question (Miller 2024, section 3).[/dim]"
    )


def _check_metrics(values: tuple[str, ...]) -> None:
    from labledger.metrics.registry import parse_metric

    for v in values:
        parse_metric(v)  # unknown names raise UnknownMetricError (exit 1, with suggestions)


def _print_slices(task: str, fld: str, values: dict[str, SliceBody], heads: list[MetricValue], level: str) -> None:
    """One ``--by FIELD`` table: slices as rows, metric by metric (the metric named on its first row),
    each row the slice's value, its n, the metric's value and interval; a metric a slice lacks is
    ``-``. The columns do not grow with the number of slices, so the table reads at 80 columns
    (as ``diff``'s: a simple head, text columns that wrap, numbers that never do); the slices'
    few-cluster warnings follow it once each.
    """
    from rich import box

    st = _table(
        title=escape(f"task '{task}' by {fld} ({level})"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    st.add_column("metric", overflow="fold", min_width=12)
    st.add_column(escape(fld), overflow="fold", min_width=min(len(fld), 12))
    for col in ("n", "value", level):
        st.add_column(col, justify="right", no_wrap=True)
    shown: list[MetricValue] = []
    for head in heads:
        for i, (val, sbody) in enumerate(values.items()):
            found = next((x for x in sbody.metrics if x.key == head.key), None)
            if found is not None:
                shown.append(found)
            st.add_row(
                escape(display_key(head)) if i == 0 else "",
                escape(str(val)),
                f"{sbody.n:,}",
                _fmt(None if found is None else found.value),
                "-" if found is None else _ci_cell(found),
                end_section=i == len(values) - 1,
            )
    console.print(st)
    for note in dict.fromkeys(e.warning for e in shown if e.warning):
        console.print(f"[yellow]Warning:[/] {escape(note)}")


def _print_evaluation(doc: EvaluationDoc, definitions: bool, shown: str) -> None:
    level = ci_label(doc.ci)
    console.print(f"Results: {escape(shown)}")
    for task, body in doc.tasks.items():
        extra = f", {body.clusters:,} clusters" if body.clusters else ""
        pos = f", positive '{body.positive}'" if body.positive else ""
        table = _table(title=escape(f"task '{task}' ({body.kind}, n={body.n:,}{extra}{pos})"), title_justify="left")
        table.add_column("metric")
        table.add_column("value", justify="right")
        table.add_column(level, justify="right")
        table.add_column("n", justify="right")
        analytic = any(e.analytic is not None for e in body.metrics)
        if analytic:
            table.add_column(f"analytic {level}", justify="right")
        if definitions:
            table.add_column("definition", overflow="fold")
        for e in body.metrics:
            mark = " *" if e.key == body.headline else ""
            row = [escape(display_key(e)) + mark, _fmt(e.value), _ci_cell(e), f"{e.n:,}"]
            if analytic:
                an = e.analytic
                row.append(_fmt(None) if an is None else _ci(an.low, an.high))
            if definitions:
                row.append(escape(e.definition))
            table.add_row(*row)
        console.print(table)
        _print_stat_notes(body.metrics)
        if body.per_class is not None:
            pc = _table(title=escape(f"task '{task}': per label ({ci_label(body.per_class.ci)})"), title_justify="left")
            columns: tuple[tuple[str, JustifyMethod], ...] = (
                ("label", "left"),
                ("support", "right"),
                ("precision", "right"),
                ("recall", "right"),
                ("f1", "right"),
            )
            for col, just in columns:
                pc.add_column(col, justify=just)
            for r in body.per_class.labels:
                pc.add_row(
                    escape(str(r.label)),
                    f"{r.support:,}",
                    *(f"{_fmt(s.value)} {_ci(s.ci_low, s.ci_high)}" for s in (r.precision, r.recall, r.f1)),
                )
            console.print(pc)
        cm = body.confusion_matrix
        if cm is not None and len(cm.labels) <= 12:
            t = _table(
                title=escape(f"task '{task}': confusion matrix (rows gold, columns predicted)"), title_justify="left"
            )
            t.add_column("gold \\ pred")
            for lab in cm.labels:
                t.add_column(escape(str(lab)), justify="right")
            for lab, counts in zip(cm.labels, cm.matrix):
                t.add_row(escape(str(lab)), *(f"{v:,}" for v in counts))
            console.print(t)
        for fld, values in (body.slices or {}).items():
            _print_slices(task, fld, values, body.metrics, level)
    suite = doc.suite
    if suite is not None and suite.value is not None:
        heads = ", ".join(f"{t}: {k}" for t, k in suite.tasks.items())
        console.print(
            f"Suite mean of headline metrics ({suite.n_tasks} tasks): {_fmt(suite.value)} "
            f"{_ci(suite.ci_low, suite.ci_high)}  [dim]({escape(heads)})[/dim]"
        )
        if suite.excluded:
            console.print(
                f"[dim]Left out of the mean (lower-is-better or undefined headline): "
                f"{escape(', '.join(suite.excluded))}[/dim]"
            )
    reduced = {m.key: m for t in doc.tasks.values() for m in t.metrics if m.resamples_requested}
    for key, m in sorted(reduced.items()):
        console.print(f"[dim]{escape(key)}: {escape(m.resamples_note or '')}[/]")
    console.print(
        f"[dim]{doc.resamples:,} bootstrap resamples, seed {doc.seed}; * = headline metric. "
        f"--definitions shows what each number means.[/dim]"
    )


@main.command("eval")
@click.argument("results")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Evaluate only this task (repeatable).")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="Metric to compute, e.g. accuracy, f1:average=macro, ndcg@10, ece:n_bins=10 (repeatable; "
    "default: the task kind's set).",
)
@click.option("--by", "by", multiple=True, metavar="SLICE", help="Also evaluate each value of this slice field.")
@click.option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence level of the bootstrap intervals.",
)
@click.option(
    "--resamples",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Bootstrap resamples (0: no intervals).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option(
    "--all-resamples",
    is_flag=True,
    help="Never reduce the resamples of metrics recomputed per resample (ROC-AUC, AP, ECE, "
    "correlations) on large inputs (by default capped at 2e8 item-draws, never under 200).",
)
@click.option(
    "--positive",
    metavar="LABEL",
    default=None,
    help="Positive label of binary tasks that give 'score' (when the rows do not say).",
)
@click.option("--definitions", is_flag=True, help="Show each metric's definition.")
@click.option("--save", "save", metavar="RUN:NAME", default=None, help="Store the evaluation in a run of the ledger.")
@click.option(
    "--model",
    default=None,
    help="With --save: add each task's headline value to the benchmark ledger under this model (version) name.",
)
@click.option("--suite", default="public", show_default=True, help="With --model: the benchmark suite.")
@click.option("--variant", default="raw", show_default=True, help="With --model: raw, calibrated, ...")
@click.option(
    "--replace",
    is_flag=True,
    help="With --model: replace the entries of a model name that holds another run's (refused without it).",
)
@click.option(
    "--repeats",
    type=click.Choice(["mean", "max", "min"]),
    default="mean",
    show_default=True,
    help="Rows repeated per id with an 'epoch' or 'sample' field: reduce each item's scores this way "
    "(max = best of k) before any interval, so n counts questions, not attempts.",
)
@json_option
@ledger_option
@handle_errors
def eval_command(
    results: str,
    tasks: tuple[str, ...],
    metrics: tuple[str, ...],
    by: tuple[str, ...],
    ci: float,
    resamples: int,
    seed: int,
    all_resamples: bool,
    positive: str | None,
    definitions: bool,
    save: str | None,
    model: str | None,
    suite: str,
    variant: str,
    replace: bool,
    repeats: str,
    as_json: bool,
    ledger_path: str | None,
) -> None:
    """Metrics of RESULTS (a results.jsonl, or RUN:NAME of a run's stored results) with bootstrap CIs.

    \b
    Examples:
      labledger eval results.jsonl
      labledger eval results.jsonl --metric accuracy --metric f1:average=macro --by length
      labledger eval my-run:test --json --save my-run:test-eval

    Rows that repeat an id with an 'epoch' or 'sample' field (several attempts per question) are
    reduced per item first (--repeats), for per-item mean metrics (default: accuracy).
    """
    prefetch(results)

    _check_metrics(metrics)
    target = save_target(save)
    if model is not None and save is None:
        raise click.UsageError("--model needs --save RUN:NAME (entries point at a stored evaluation)")
    if replace and model is None:
        raise click.UsageError("--replace applies with --model NAME (it replaces that model's benchmark entries)")
    path, shown = results_source(results, ledger_path)
    budget: dict[str, Any] = {"item_draw_budget": None} if all_resamples else {}
    from labledger.analysis.harness import evaluate_stored, harness_lines
    from labledger.inputs.results import read_results

    # one read: rows that repeat ids with an epoch/sample field come back with their repeat column
    rs = read_results(path, positive=positive, repeats=True)
    if rs.repeat_field is not None:
        from labledger.analysis.repeats import evaluate_repeats

        if save is not None or by:
            raise click.UsageError(
                "rows with an 'epoch' or 'sample' field are evaluated per item over repeats; "
                "--save and --by do not apply to them yet"
            )
        rep = evaluate_repeats(
            rs, metrics=list(metrics) or ["accuracy"], reduction=repeats, ci=ci, resamples=resamples, seed=seed
        )
        rep["source"] = shown
        if tasks:
            rep["tasks"] = {t: body for t, body in rep["tasks"].items() if t in tasks}
        typed = decode(rep, type=RepeatsDoc, source=shown)  # the document's schema, checked
        if as_json:
            emit_json(typed.to_dict())
        else:
            _print_repeats(typed.to_dict())
        return
    doc = evaluate_stored(
        path,
        rs,
        metrics=list(metrics) or None,
        by=list(by) or None,
        ci=ci,
        resamples=resamples,
        seed=seed,
        task=list(tasks) or None,
        positive=positive,
        **budget,
    )
    doc.source = shown
    saved = None
    if target is not None:
        from labledger.analysis.benchmarks import record_evaluation
        from labledger.cli.base import warn

        saved = record_evaluation(
            open_for_cli(ledger_path),
            *target,
            doc,
            model=model,
            suite=suite,
            variant=variant,
            results_path=str(path),
            replace=replace,
            on_replace=warn,
        )
    if as_json:
        emit_json(doc.to_dict())
        return
    _print_evaluation(doc, definitions, shown)
    for line in harness_lines(doc.harness.checks, doc.harness.name) if doc.harness else ():
        console.print(line, markup=False, highlight=False)
    if saved is not None:
        console.print(f"Saved evaluation '{escape(str(save))}' to {escape(str(saved))}")


def _print_comparison(
    doc: ComparisonDoc, shown_a: str, shown_b: str, definitions: bool, items_limit: int | None = None
) -> None:
    """The comparison's tables, task by task; ``items_limit``: each task's discordant items too
    (``--items``), at most that many of each direction."""
    level = ci_label(doc.ci)
    adjusted = (doc.adjust or "none") != "none"
    console.print(f"A: {escape(shown_a)}\nB: {escape(shown_b)}")
    for task, body in doc.tasks.items():
        how = f"paired, n={body.n or 0:,}" if body.paired else f"unpaired, n_A={body.n_a:,}, n_B={body.n_b:,}"
        table = _table(title=escape(f"task '{task}' ({body.kind}, {how})"), title_justify="left")
        columns = ["metric", "A", "B", "A - B", level, "p"]
        if adjusted:
            columns.append(f"p ({doc.adjust})")
        for col in (*columns, "McNemar p"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        if definitions:
            table.add_column("definition", overflow="fold")
        for e in body.metrics:
            mc = e.mcnemar
            # the interval and p are one procedure (p < 1 - ci when the interval excludes 0); the
            # adjusted p is its own column, which the n.s. mark reads (#45)
            p_cells = [format_p(e.p_value), _p_cell(e)] if adjusted else [_p_cell(e)]
            row = [
                escape(display_key(e)),
                _fmt(e.a),
                _fmt(e.b),
                _fmt(e.diff),
                _ci_cell(e),
                *p_cells,
                "-" if mc is None else f"{format_p(mc.p_value)} (b={mc.b}, c={mc.c})",
            ]
            if definitions:
                row.append(escape(e.definition))
            table.add_row(*row)
        console.print(table)
        _print_stat_notes(body.metrics)
        for how in dict.fromkeys(e.mcnemar.method for e in body.metrics if e.mcnemar is not None):
            if "clustered" in how:
                console.print(f"[dim]McNemar: {escape(how)} (the item-level test ignores clusters)[/dim]")
        if body.margin_tests:
            _print_margin_tests(body.margin_tests, doc, {e.key: display_key(e) for e in body.metrics})
        if body.prompts_differ:
            console.print(
                f"[yellow]Note:[/] {body.prompts_differ:,} paired items have different prompts in A and B (their "
                "item_hash differs); paired on the document id (--pair-on doc)"
            )
        if items_limit is not None:
            _print_flips(task, body, items_limit)
    family = (
        f"; {level} and p per comparison (unadjusted: p < {1 - doc.ci:.2g} exactly when the CI excludes 0, up to "
        f"1/B); p ({doc.adjust}): adjusted over {escape(doc.family)}, the n.s. mark reads it"
        if adjusted and doc.family
        else (f"; {escape(doc.family)}" if doc.family else "")
    )
    console.print(
        f"[dim]{doc.resamples:,} bootstrap resamples, seed {doc.seed}; p: two-sided (percentile "
        f"bootstrap){family}; MDE: minimum detectable effect at 80% power; McNemar: b = A right & B wrong, "
        f"c = A wrong & B right.[/dim]"
    )


def _margin_verdict(t: MarginTest) -> str:
    """What a margin test decided, in words."""
    if t.passed is None:
        return f"undecided ({t.note})" if t.note else "undecided"
    if t.test == "equivalence":
        return "equivalent" if t.passed else "not shown equivalent"
    return "non-inferior" if t.passed else "not shown non-inferior"


def _margin_bound(t: MarginTest) -> str:
    """The bound (or interval) a margin test is decided by, against its margin."""
    m = f"{t.margin:g}"
    if t.test == "equivalence":
        return f"{ci_label(t.level)} {_ci(t.low, t.high)} vs ±{m}"
    one_sided = f"{1 - t.alpha:.0%}"
    if t.higher_is_better:
        return f"lower {one_sided} bound {_fmt(t.low)} vs -{m}"
    return f"upper {one_sided} bound {_fmt(t.high)} vs {m}"


def _print_margin_tests(tests: Sequence[MarginTest], doc: ComparisonDoc, shown: dict[str, str]) -> None:
    """The non-inferiority / equivalence tests of one task (``shown``: metric key -> how the table
    shows it), with their hypotheses once each."""
    adjusted = (doc.adjust or "none") != "none" and len([t for t in tests if t.p_value is not None]) > 0
    table = _table(title="margin tests (A against B)", title_justify="left")
    columns = ["metric", "test", "bound vs margin", "p"]
    if adjusted:
        columns.append(f"p ({doc.adjust})")
    for col in (*columns, "result"):
        table.add_column(col, justify="left" if col in ("metric", "test", "result") else "right")
    for t in tests:
        row = [
            escape(shown.get(t.key, t.key)),
            t.test,
            _margin_bound(t),
            format_p(t.p_value),
        ]
        if adjusted:
            row.append(format_p(t.p_adjusted))
        row.append(_margin_verdict(t))
        table.add_row(*row)
    console.print(table)
    console.print("[dim]p: one-sided (equivalence: the larger of its two one-sided p)[/dim]")
    for hypothesis in dict.fromkeys(t.hypothesis for t in tests):
        console.print(f"[dim]{escape(hypothesis)}[/dim]")
    for how in dict.fromkeys(t.method for t in tests if t.method):
        console.print(f"[dim]margin tests: {escape(how)}[/dim]")
    if adjusted and doc.margin_family:
        console.print(
            f"[dim]result: each test at its alpha by its bounds (per comparison); p ({doc.adjust}): adjusted over "
            f"{escape(doc.margin_family)} (margin tests), for a claim about all of them at once.[/dim]"
        )


@main.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Compare only this task (repeatable).")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="Metric to compare (repeatable; default: the task kind's set).",
)
@click.option("--unpaired", is_flag=True, help="Allow different item sets (each side resampled on its own).")
@click.option(
    "--ci",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence level of the paired interval.",
)
@click.option(
    "--resamples", type=click.IntRange(min=0), default=1000, show_default=True, help="Bootstrap resamples (0: none)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--positive", metavar="LABEL", default=None, help="Positive label of binary 'score' tasks.")
@click.option("--definitions", is_flag=True, help="Show each metric's definition.")
@click.option(
    "--adjust",
    type=click.Choice(["holm", "bh", "none"]),
    default="holm",
    show_default=True,
    help="Multiplicity adjustment over every metric and task compared (Holm, BH false discovery rate, none).",
)
@click.option(
    "--margin",
    type=click.FloatRange(0, min_open=True),
    default=None,
    metavar="M",
    help="Non-inferiority test of each metric: A no worse than B by M (metric units), one-sided at --alpha.",
)
@click.option(
    "--equivalence",
    type=click.FloatRange(0, min_open=True),
    default=None,
    metavar="M",
    help="Equivalence test (TOST) of each metric: |A - B| < M, two one-sided tests at --alpha.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Level of each one-sided test of --margin / --equivalence.",
)
@click.option(
    "--pair-on",
    "pair_on",
    type=click.Choice(["item", "doc"]),
    default="item",
    show_default=True,
    help="Pair on the item (id and item_hash) or on the document (the id, even where the prompt differs).",
)
@click.option(
    "--items",
    "show_items",
    is_flag=True,
    help="List the discordant items per task: A right & B wrong and the reverse (regression: by error).",
)
@click.option("--cluster", metavar="VALUE", default=None, help="With --items: only the items of this group value.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="With --items: show at most N items of each direction (default 20; the counts and --json are whole).",
)
@click.option(
    "--save",
    metavar="RUN:NAME",
    default=None,
    help="Store the comparison in a run of the ledger (evals/NAME/comparison.json; the site's Comparisons page).",
)
@json_option
@ledger_option
@handle_errors
def compare_command(
    a: str,
    b: str,
    tasks: tuple[str, ...],
    metrics: tuple[str, ...],
    unpaired: bool,
    ci: float,
    resamples: int,
    seed: int,
    positive: str | None,
    definitions: bool,
    adjust: str,
    margin: float | None,
    equivalence: float | None,
    alpha: float,
    pair_on: str,
    show_items: bool,
    cluster: str | None,
    limit: int | None,
    save: str | None,
    as_json: bool,
    ledger_path: str | None,
) -> None:
    """Compare results A and B (files or RUN:NAME): A - B per metric with a CI and a p-value.

    Same item ids: a paired bootstrap, plus McNemar's test for accuracy. Different item sets are
    refused (with counts and example ids) unless --unpaired. --margin M tests that A is non-inferior
    to B (the one-sided 1 - alpha bound of A - B beyond -M; mirrored for lower-is-better metrics);
    --equivalence M that |A - B| < M (the 1 - 2 alpha interval inside (-M, M)).

    Rows whose item_hash differs (the same document with another prompt) are refused unless
    --pair-on doc. --items lists the items that flipped between A and B, with both predictions,
    the gold and the prompt when the rows carry one.
    """
    if not show_items and (cluster is not None or limit is not None):
        raise click.UsageError("--cluster and --limit go with --items")
    if show_items and unpaired:
        raise click.UsageError("--items lists paired items; it cannot go with --unpaired")
    target = save_target(save)
    prefetch(a, b)
    from labledger.analysis.comparison import compare

    _check_metrics(metrics)
    path_a, shown_a = results_source(a, ledger_path)
    path_b, shown_b = results_source(b, ledger_path)
    from labledger.analysis.harness import set_metrics

    cmp = compare(
        path_a,
        path_b,
        metrics=list(metrics) or set_metrics(path_a),
        unpaired=unpaired,
        ci=ci,
        resamples=resamples,
        seed=seed,
        task=list(tasks) or None,
        positive=positive,
        adjust=adjust,
        margin=margin,
        equivalence=equivalence,
        alpha=alpha,
        pair_on=pair_on,
        items=show_items,
        cluster=cluster,
    )
    doc = cmp.doc
    doc.a, doc.b = shown_a, shown_b
    saved = save_document(ledger_path, target, doc) if target is not None else None
    if as_json:
        emit_json(doc.to_dict())
        return
    items_limit = (20 if limit is None else limit) if show_items else None
    _print_comparison(doc, shown_a, shown_b, definitions, items_limit)
    if saved is not None:
        console.print(f"Saved comparison '{escape(str(save))}' to {escape(str(saved))}")


#: Widest text cell of the --items table (ids, labels, outputs); prompts get PROMPT_WIDTH.
CELL_WIDTH = 24
PROMPT_WIDTH = 60


def one_line(value: Any, width: int = CELL_WIDTH) -> str:
    """``value`` as one line of at most ``width`` characters (whitespace runs made one space).

    >>> one_line("Q: 1+1?\\n  A:", 8)
    'Q: 1+1?…'
    >>> one_line(0.5), one_line(None)
    ('0.5000', '-')
    """
    if value is None:
        return "-"
    text = value if isinstance(value, str) else format_value(value, 4) if isinstance(value, float) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _shown_pred(pred: Any, output: Any) -> str:
    """A prediction, with the model's output text beside it when the rows carry a different one."""
    if output is None or str(output) == str(pred):
        return one_line(pred)
    return one_line(f"{one_line(pred)} ({one_line(output)})")


def _print_flips(task: str, body: TaskComparison, limit: int) -> None:
    """The discordant items of one task: both counts whole, at most ``limit`` items of each direction."""
    f = body.flips
    if f is None:
        why = "an unpaired comparison" if not body.paired else f"a {body.kind} task has no per-item right or wrong"
        console.print(f"[dim]task '{escape(task)}': no items listed ({escape(why)}).[/dim]")
        return
    where = f" in cluster '{escape(f.cluster)}'" if f.cluster is not None else ""
    if f.basis == "correct":
        counts = f"{f.a_better:,} A right & B wrong, {f.b_better:,} A wrong & B right"
    else:
        counts = f"{f.a_better:,} with A's error smaller, {f.b_better:,} with B's (largest difference first)"
    show = [x for x in f.items if x.better == "a"][:limit] + [x for x in f.items if x.better == "b"][:limit]
    more = f"; showing {len(show):,} (--limit {limit})" if len(show) < len(f.items) else ""
    console.print(f"task '{escape(task)}' items{where}: {counts}{more}")
    if not show:
        return
    has = {k: any(getattr(x, k) is not None for x in show) for k in ("cluster", "error_a", "prompt")}
    table = _table(show_header=True, box=None, pad_edge=False)
    for col in ("", "id", *(["cluster"] if has["cluster"] else []), "gold", "A", "B"):
        table.add_column(col, no_wrap=True)
    if has["error_a"]:
        table.add_column("|err A|", justify="right", no_wrap=True)
        table.add_column("|err B|", justify="right", no_wrap=True)
    if has["prompt"]:
        table.add_column("prompt", no_wrap=True)
    for x in show:
        row = [
            "A>B" if x.better == "a" else "B>A",
            one_line(x.id),
            *([one_line(x.cluster)] if has["cluster"] else []),
            _shown_pred(x.gold, x.target),
            _shown_pred(x.pred_a, x.output_a),
            _shown_pred(x.pred_b, x.output_b),
        ]
        if has["error_a"]:
            row += [_fmt(x.error_a), _fmt(x.error_b)]
        if has["prompt"]:
            row.append(one_line(x.prompt, PROMPT_WIDTH))
        table.add_row(*(escape(c) for c in row))
    console.print(table)


__all__ = ["compare_command", "display_key", "eval_command"]
