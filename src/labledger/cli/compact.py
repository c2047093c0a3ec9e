"""``labledger compact``: compress the record files of finished runs."""

from __future__ import annotations

import os

import click

from labledger.cli.base import console, emit_json, handle_errors, json_option, ledger_option, main, resolve_ledger_path


@main.command("compact")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@ledger_option
@click.option("--dry-run", is_flag=True, help="Only say what would be compacted.")
@click.option(
    "--min-bytes",
    type=click.IntRange(min=0),
    default=None,
    help="Leave record files under this many bytes as JSONL (default 1 MiB, as at finish).",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Also rewrite compressed files of the layout before the zstd seekable format (read, but in order only).",
)
@json_option
@handle_errors
def compact_cmd(runs, ledger_path, dry_run, min_bytes, upgrade, as_json):
    """Compress the record files of RUNs (default: every run that is not running) into verified zstd
    files in the zstd seekable format (X.jsonl.zst), as Run.finish does: each is decompressed and
    its sha256 checked before the JSONL is removed. Idempotent; a running run is skipped.
    """
    from labledger.store.compressed import COMPACT_MIN_BYTES, compact_run
    from labledger.store.ledger import Ledger

    least = COMPACT_MIN_BYTES if min_bytes is None else min_bytes
    rows = []
    with Ledger(resolve_ledger_path(ledger_path)) as ledger:
        ids = [ledger.resolve(r) for r in runs] if runs else [i.id for i in ledger.runs() if i.status != "running"]
        for run_id in ids:
            for c in compact_run(ledger.run_dir(run_id), min_bytes=least, dry_run=dry_run, upgrade=upgrade):
                row = {"run": run_id, **c.to_dict()}
                row["path"] = os.path.relpath(row["path"], ledger.root)  # runs/RUN/FILE, as verify shows it
                rows.append(row)
    if as_json:
        emit_json({"dry_run": dry_run, "files": rows})
        return
    before = after = 0
    for row in rows:
        done = row["action"] in ("compacted", "upgraded")
        if row["action"] == "compacted":  # (the ratio is compaction's: an upgrade was compressed already)
            before += row["before"]
            after += row["after"]
        sizes = f" {row['before']:,} -> {row['after']:,} bytes" if done else ""
        console.print(f"{row['path']}: {row['action']}{sizes}", markup=False)
    n = sum(1 for r in rows if r["action"] in ("compacted", "would compact"))
    verb = "would compact" if dry_run else "compacted"
    ratio = f" ({before:,} -> {after:,} bytes, {after / before:.2f}x)" if before else ""
    ups = sum(1 for r in rows if r["action"] in ("upgraded", "would upgrade"))
    upgraded = f"; {'would upgrade' if dry_run else 'upgraded'} {ups} file(s)" if upgrade else ""
    console.print(f"{verb} {n} file(s) of {len(ids)} run(s){ratio}{upgraded}", markup=False)
