"""``labledger runs``, ``show`` and ``export``: list runs, look inside one, get its records out."""

from __future__ import annotations

import datetime as dt
import math
import sys
from pathlib import Path
from typing import Any

import click

# the consoles are read as base.console when printing: importing them would load rich
from labledger.cli import base, text_table
from labledger.cli.base import (
    csv_list,
    emit_json,
    escape_controls,
    handle_errors,
    json_option,
    ledger_option,
    main,
    open_for_cli,
)
from labledger.cli.text_table import Column


def fmt_time(ts: float | None, *, seconds: bool = True) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = round(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def fmt_num(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.4e}"
    return str(v)


STATUS_STYLE = {
    "finished": "green",
    "running": "cyan",
    "failed": "red",
    "crashed": "red bold",
    "killed": "yellow",
    "missing": "red bold",
}


def _gone(ledger, ids: list[str]) -> list[str]:
    """The runs of ``ids`` whose folder is gone from the ledger (removed by hand): ``runs`` marks them."""
    from labledger.store.files import missing_ids

    return missing_ids(ledger, ids)


def headline(summary: dict[str, Any], limit: int = 3) -> str:
    """The run's headline values: ``set_summary`` values first, then last scalars."""
    items = list((summary.get("headline") or {}).items())
    last = summary.get("last") or {}
    items += [(k, v) for k, v in last.items() if k not in dict(items)]
    return "\n".join(f"{k}={fmt_num(v)}" for k, v in items[:limit])


#: Columns of ``labledger runs`` by default, and the order in which they give way to a narrow
#: terminal (the last first); ``id`` and ``name`` always stay, whole.
RUN_COLUMNS = ("id", "name", "group", "status", "steps", "started", "duration", "headline")
DROP_ORDER = ("group", "steps", "duration", "started", "status", "headline")


def escape(text: str) -> str:
    """rich's markup escape, imported on first use: ``runs`` and ``show --json`` load no rich."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _cell(info, col: str, fields: dict[str, Any]) -> str:
    """The plain text of one cell of ``labledger runs`` (control characters escaped; no markup)."""
    if col == "id":
        return info.id
    if col == "name":
        text = info.name
    elif col == "group":
        text = info.group or "-"
    elif col == "status":
        text = info.status
    elif col == "steps":
        return fmt_num(info.summary.get("steps"))
    elif col == "started":
        return fmt_time(info.started, seconds=False)
    elif col == "duration":
        return fmt_duration(info.duration)
    elif col == "headline":
        text = headline(info.summary)
    elif col == "tags":
        text = ", ".join(info.tags) or "-"
    elif col == "host":
        text = info.host or "-"
    elif col == "git.commit":
        text = (info.git_commit or "-")[:12]
    else:
        v = fields.get(col)
        text = "-" if v is None else (fmt_num(v) if not isinstance(v, str) else v)
    return "\n".join(map(escape_controls, text.split("\n")))


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes (rich's count: wide characters take two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def fit_columns(columns: list[str], rows: list[list[str]], width: int) -> list[str]:
    """The columns that fit ``width`` characters (dropping those of DROP_ORDER first; ``id`` and
    ``name`` always stay; ``headline`` wraps beyond 24 characters)."""

    def need(cols: list[str]) -> int:
        total = 0
        for c in cols:
            i = columns.index(c)
            cells = [max(cell_len(line) for line in r[i].split("\n")) for r in rows] + [len(c)]
            w = max(cells) if c != "headline" else min(max(cells), 24)
            total += w + 3
        return total + 2

    kept = list(columns)
    for c in DROP_ORDER:
        if need(kept) <= width:
            break
        if c in kept and len(kept) > 2:
            kept.remove(c)
    return kept


def print_table(title: str, columns: list[Column], rows: list[list[str]], styles: list[list[str | None]]) -> None:
    """Print a table on stdout as rich's ``box.SIMPLE_HEAD`` shows it: by :mod:`labledger.cli.text_table`
    when it fits as it is (no rich to import), else by rich, which wraps and cuts cells to fit."""
    width = base.out_width()
    text = text_table.render(title, columns, rows, width=width, mode=text_table.color_mode(sys.stdout), styles=styles)
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title, style="table.title"), title_justify="left", box=box.SIMPLE_HEAD)
    for c in columns:
        table.add_column(
            c.header,
            justify="right" if c.justify == "right" else "left",
            no_wrap=not c.wrap,
            min_width=c.min_width or None,
            ratio=1 if c.wrap else None,
            overflow="fold" if c.wrap else "ellipsis",
        )
    for row, row_styles in zip(rows, styles):
        cells: list[Text] = []
        for cell, style in zip(row, row_styles):
            rich_text = Text(cell)
            if style:
                rich_text.stylize(style, 0, len(cell))  # the text only, as [style]...[/] markup does
            cells.append(rich_text)
        table.add_row(*cells)
    base.console.print(table)


@click.command("runs")
@click.option("--group", help="Only runs in this group.")
@click.option("--tag", help="Only runs with this tag.")
@click.option(
    "--status",
    type=click.Choice(["running", "finished", "failed", "crashed", "killed"]),
    help="Only runs with this status.",
)
@click.option("--name", help="Only runs with this exact name.")
@click.option(
    "--where",
    metavar="EXPR",
    help="Only runs that match EXPR, e.g. \"config.lr < 1e-3 and config.opt = 'adam'\" (docs/query.md).",
)
@click.option("--sort", metavar="KEY[,KEY]", help="Sort by fields, '-' for descending, e.g. -eval.test.accuracy.")
@click.option(
    "--columns",
    metavar="COL,...",
    help="Columns to show: id, name, group, status, steps, started, duration, headline, tags, host, "
    "git.commit or any query field (config.lr, scalars.loss.min, eval.test.accuracy).",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many runs.")
@ledger_option
@json_option
@handle_errors
def runs_cmd(group, tag, status, name, where, sort, columns, limit, ledger_path, as_json):
    """List runs: id, name, group, status, steps, started, duration, headline metrics.

    Ids are never cut: on a narrow terminal the less useful columns give way first.
    """
    ledger = open_for_cli(ledger_path)
    cols = csv_list(columns) or list(RUN_COLUMNS)
    extra = [c for c in cols if c not in RUN_COLUMNS and c not in ("tags", "host", "git.commit")]
    fields: dict[str, dict[str, Any]] = {}
    filters = {"name": name, "group": group, "tag": tag, "status": status, "where": where, "sort": sort}
    if as_json:  # the index rows straight to dicts, no RunInfo in between (#12)
        docs = ledger.run_dicts(**filters)[:limit]
        gone = set(_gone(ledger, [doc["id"] for doc in docs]))
        for doc in docs:
            if doc["id"] in gone:
                doc["missing"] = True  # its folder is gone
        if extra and docs:
            fields = {row["id"]: row for row in ledger.runs_table(where=where, sort=sort, columns=extra).to_pylist()}
            for doc in docs:
                doc["fields"] = {c: fields.get(doc["id"], {}).get(c) for c in extra}
        emit_json({"ledger": str(ledger.root), "runs": docs})
        return
    infos = ledger.runs(**filters)[:limit]
    if extra and infos:
        table = ledger.runs_table(where=where, sort=sort, columns=extra)
        for row in table.to_pylist():
            fields[row["id"]] = row
    if not infos:
        click.echo(escape_controls(f"No runs in {ledger.root} match."))
        return
    rows = [[_cell(i, c, fields.get(i.id, {})) for c in cols] for i in infos]
    gone = _gone(ledger, [i.id for i in infos])
    if gone and "status" in cols:  # a folder removed by hand: the status says so
        missing = set(gone)
        for info, row in zip(infos, rows):
            if info.id in missing:
                row[cols.index("status")] = "missing"
    shown = cols if columns else fit_columns(cols, rows, base.out_width())
    spec = [
        Column(
            col,
            justify="right" if col == "steps" or col in extra else "left",
            min_width=len(infos[0].id) if col == "id" else 0,
            wrap=col == "headline",
        )
        for col in shown
    ]
    idx = [cols.index(c) for c in shown]
    status = cols.index("status") if "status" in shown else None
    styles = [[STATUS_STYLE.get(r[status]) if i == status else None for i in idx] for r in rows]
    print_table(escape_controls(f"Runs in {ledger.root}"), spec, [[r[i] for i in idx] for r in rows], styles)
    if gone:
        several = len(gone) > 1
        click.echo(
            f"Note: {len(gone)} run{'s' if several else ''} ({', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}) "
            f"{'have' if several else 'has'} no folder in {ledger.root / 'runs'} (removed by hand?); "
            f"labledger verify --repair removes {'them' if several else 'it'} from the index",
            err=True,
        )
    if len(shown) < len(cols):
        hidden = ", ".join(c for c in cols if c not in shown)
        click.echo(f"({hidden} hidden to fit {base.out_width()} columns; --columns picks them)", err=True)


#: A config section (a nested dict, at any depth) with more leaves than this, and no recorded
#: defaults, is shown by ``show`` as one line with its count (``--all-config`` lists it).
COLLAPSE_LEAVES = 30
#: A config text longer than this is cut by ``show`` to its first CUT_TEXT characters.
LONG_TEXT = 160
CUT_TEXT = 100


def _leaves(v: Any) -> int:
    return sum(_leaves(x) for x in v.values()) if isinstance(v, dict) and v else 1


def _short_rows(d: dict[str, Any], prefix: str = ""):
    """``_flat_items`` with each dict of more than COLLAPSE_LEAVES leaves as one (key, count) row and
    long texts cut; yields (key, text, leaves left out)."""
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            n = _leaves(v)
            if n > COLLAPSE_LEAVES:
                yield key, f"{n:,} keys", n
            else:
                yield from _short_rows(v, key + ".")
        elif isinstance(v, str) and len(v) > LONG_TEXT:
            yield key, f"{v[:CUT_TEXT]}… ({len(v):,} characters)", 1
        else:
            yield key, str(v), 0


def config_rows(
    config: dict[str, Any], defaults: dict[str, Any] | None, *, everything: bool = False
) -> tuple[list[tuple[str, str]], int]:
    """The (key, value) rows ``show`` prints for a run's config, and how many leaves it left out or cut.

    With ``everything``, every leaf (dotted keys), whole. Otherwise a section ``K`` that has recorded
    defaults (the run's ``meta.config_defaults[K]``: the default of each key of ``config[K]`` that
    differs from it, as the integrations record them) shows only those keys, each with its default,
    then one ``K.*`` row counting the rest; a dict of more than :data:`COLLAPSE_LEAVES` leaves is one
    row with its count, and a text longer than :data:`LONG_TEXT` characters is cut.

    >>> config_rows({"lr": 0.1, "args": {"seed": 42, "lr": 0.1}}, {"args": {"lr": 5e-05}})
    ([('lr', '0.1'), ('args.lr', '0.1  (default 5e-05)'), ('args.*', '1 more at their defaults')], 1)
    >>> config_rows({"labels": {str(i): i for i in range(40)}}, None)
    ([('labels', '40 keys')], 40)
    """
    if everything:
        return [(k, str(v)) for k, v in _flat_items(config)], 0
    rows: list[tuple[str, str]] = []
    hidden = 0
    for key, value in config.items():
        known = (defaults or {}).get(key)
        if isinstance(value, dict) and isinstance(known, dict):
            for k, text, n in _short_rows({k: v for k, v in value.items() if k in known}, f"{key}."):
                top = k[len(key) + 1 :].split(".", 1)[0]
                nested = isinstance(value.get(top), dict)
                rows.append((k, text + ("" if nested else f"  (default {known.get(top)})")))
                hidden += n
            rest = sum(_leaves(v) for k, v in value.items() if k not in known)
            if rest:
                rows.append((f"{key}.*", f"{rest:,} more at their defaults"))
                hidden += rest
        else:
            for k, text, n in _short_rows({key: value}):
                rows.append((k, text))
                hidden += n
    return rows, hidden


#: Characters of a checkpoint's sha256 that ``show`` prints (``--json`` has all 64).
SHA_SHOWN = 16


@click.command("show")
@click.argument("run")
@click.option(
    "--all-config",
    is_flag=True,
    help="List every config key (by default a long section, such as an HF run's training_args, shows only "
    "the keys that differ from their defaults).",
)
@ledger_option
@json_option
@handle_errors
def show_cmd(run, all_config, ledger_path, as_json):
    """Show one run: meta, config, files, counts, last scalars, checkpoints (sha256).

    A config section whose defaults were recorded (the Hugging Face integration's ``training_args``
    and ``model``) lists only its keys that differ from them; ``--all-config`` or ``--json`` gives all.
    """
    ledger = open_for_cli(ledger_path)
    view = ledger.run(run)
    meta = view.meta
    counters = view.counters()  # from the index: no scan of the run's records
    doc = {
        "id": view.id,
        "name": view.name,
        "group": view.group,
        "tags": view.tags,
        "status": view.status,
        "dir": str(view.dir),
        "meta": meta,
        "config": view.config,
        "counts": view.counts(counters),
        "last_scalars": view.last_scalars(counters),
        "headline": (view.summary.get("headline") or {}),
        "checkpoints": list(view.checkpoints()),
        "results": view.results_names(),
        "evaluations": ledger.evaluations(view.id),
        "files": view.files(),
        "notes": [n["text"] for n in view.notes()],
    }
    if as_json:
        emit_json(doc)
        return
    from rich.table import Table

    status = f"[{STATUS_STYLE.get(view.status, '')}]{view.status}[/]"
    base.console.print(f"[bold]{escape(view.name)}[/]  {view.id}  {status}")
    git = meta.get("git") or {}
    lines = [
        ("group", view.group or "-"),
        ("tags", ", ".join(view.tags) or "-"),
        ("started", fmt_time(meta.get("started"))),
        ("ended", fmt_time(meta.get("ended"))),
        ("duration", fmt_duration(view.info.duration)),
        ("host", f"{meta.get('host')} (pid {meta.get('pid')}, user {meta.get('user')})"),
        ("python", f"{meta.get('python')}  " + "  ".join(f"{k} {v}" for k, v in (meta.get("packages") or {}).items())),
        ("git", f"{git.get('commit') or '-'}" + (" (dirty)" if git.get("dirty") else "")),
        ("folder", str(view.dir)),
    ]
    if meta.get("error"):
        lines.append(("error", meta["error"]))
    for k, v in lines:
        base.console.print(f"  [dim]{k:>9}[/]  {escape(str(v))}", markup=True, highlight=False)
    hidden = 0
    if doc["config"]:
        defaults = meta.get("config_defaults")
        rows, hidden = config_rows(
            doc["config"], defaults if isinstance(defaults, dict) else None, everything=all_config
        )
        t = Table(title="config", title_justify="left", show_header=False)
        t.add_column("key")
        t.add_column("value")
        for k, v in rows:
            t.add_row(escape(k), escape(v))
        base.console.print(t)
    t = Table(title="records", title_justify="left")
    t.add_column("kind")
    t.add_column("count", justify="right")
    for k, v in doc["counts"].items():
        t.add_row(k, f"{v:,}")
    base.console.print(t)
    if doc["last_scalars"] or doc["headline"]:
        t = Table(title="last values", title_justify="left")
        t.add_column("name")
        t.add_column("value", justify="right")
        t.add_column("step", justify="right")
        for k, v in doc["headline"].items():
            t.add_row(escape(k), fmt_num(v), "summary")
        for k, v in doc["last_scalars"].items():
            t.add_row(escape(k), fmt_num(v["value"]), fmt_num(v["step"]))
        base.console.print(t)
    if doc["checkpoints"]:
        t = Table(
            title=f"checkpoints (paths relative to the run folder when inside it; sha256 to {SHA_SHOWN} "
            "characters, --json for all)",
            title_justify="left",
        )
        for col in ("step", "path", "size", "sha256"):
            t.add_column(
                col,
                overflow="fold",
                no_wrap=col != "path",
                min_width=12 if col == "path" else None,
                justify="right" if col in ("step", "size") else "left",
            )
        for c in doc["checkpoints"]:
            shown = view.display_path(c["path"])
            size = "-" if c.get("size") is None else f"{c['size']:,}"
            t.add_row(fmt_num(c.get("step")), escape(shown), size, (c["sha256"] or "-")[:SHA_SHOWN])
        base.console.print(t)
    if doc["results"] or doc["evaluations"]:
        base.console.print("  [dim]results[/]  " + (", ".join(doc["results"]) or "-"))
        evals = sorted({e["name"] for e in doc["evaluations"] if e["kind"] != "results"})
        base.console.print("  [dim]evaluations[/]  " + (", ".join(evals) or "-"))
    if doc["files"]:
        shown = doc["files"][:8]
        more = len(doc["files"]) - len(shown)
        base.console.print("  [dim]files[/]  " + ", ".join(shown) + (f", ... ({more} more)" if more > 0 else ""))
    for n in doc["notes"]:
        base.console.print("  note: " + n, markup=False, highlight=False)
    if hidden:
        click.echo(
            f"({hidden:,} config values not listed or cut: labledger show {view.id} --all-config lists them all)"
        )


def _flat_items(d: dict[str, Any], prefix: str = ""):
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            yield from _flat_items(v, key + ".")
        else:
            yield key, v


EXPORT_FORMATS = ("jsonl", "parquet", "csv")


@click.command("export")
@click.argument("run")
@click.option(
    "--what",
    required=True,
    metavar="KIND",
    help="scalars, batches, samples, history, checkpoints, notes, or results[:NAME].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(EXPORT_FORMATS),
    default=None,
    help="Output format (default: from --out's suffix, else jsonl).",
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file.")
@ledger_option
@json_option
@handle_errors
def export_cmd(run, what, fmt, out, ledger_path, as_json):
    """Export a run's records as JSONL (exactly as logged), Parquet or CSV (flattened)."""
    kind = what.partition(":")[0]
    if kind not in ("scalars", "batches", "samples", "history", "checkpoints", "notes", "results"):
        raise click.BadParameter(
            f"unknown kind {what!r}; choose scalars, batches, samples, history, checkpoints, notes or results[:NAME]",
            param_hint="--what",
        )
    out_path = Path(out)
    if fmt is None:
        suffix = out_path.suffix.lstrip(".").lower()
        fmt = suffix if suffix in EXPORT_FORMATS else "jsonl"
    ledger = open_for_cli(ledger_path)
    view = ledger.run(run)
    from labledger.store.jsonl import atomic_open

    # One atomic write: a failure (a full disk) leaves no partial or empty output file (#17).
    if fmt == "jsonl":
        import orjson

        n = 0
        with atomic_open(out_path, sweep=True) as f:
            for rec in view.records(what):
                f.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS))
                n += 1
    else:
        table = view.table(what)
        n = table.num_rows
        with atomic_open(out_path, sweep=True) as f:
            entry = view.cached_parquet(what) if fmt == "parquet" else None
            if entry is not None:  # the columnar cache holds this very table as zstd Parquet
                import shutil

                with open(entry, "rb") as src:
                    shutil.copyfileobj(src, f, 2**20)
            elif fmt == "parquet":
                import pyarrow.parquet as pq

                pq.write_table(table, f, compression="zstd")
            else:
                import pyarrow.csv as pacsv

                pacsv.write_csv(table, f)
    doc = {"run": view.id, "what": what, "format": fmt, "rows": n, "out": str(out_path.resolve())}
    if as_json:
        emit_json(doc)
    else:
        base.console.print(f"Wrote {n:,} {what} records of run {view.id} to {out_path} ({fmt}).")


for _cmd in (runs_cmd, show_cmd, export_cmd):
    main.add_command(_cmd)
