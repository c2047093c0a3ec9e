"""``labledger cache``: the columnar cache of large results and record files, shown and freed."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import click

from labledger.cli.base import console, emit_json, handle_errors, json_option, main
from labledger.cli.runs import fmt_time
from labledger.cli.serve import parse_size


def _size(n: int) -> str:
    """Bytes as a reader sees them: ``1.5 GiB``, ``320 KiB``, ``12 bytes``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


@contextlib.contextmanager
def _folder_errors() -> Iterator[None]:
    """A cache folder that cannot be read or changed (a file in its place, no permission): one
    ``Error:`` line naming it, exit 1."""
    from labledger.errors import LedgerError
    from labledger.inputs.columnar import cache_folder

    try:
        yield
    except OSError as e:
        raise LedgerError(f"the columnar cache folder {cache_folder()} cannot be used: {e.strerror or e}") from None


def _off() -> None:
    from labledger.inputs.columnar import CACHE_DIR_ENV

    console.print(f"the columnar cache is off ({CACHE_DIR_ENV}=off): nothing is kept", markup=False)


@main.group("cache")
def cache_group():
    """The columnar cache of large results and record files: where it is, what it holds, and freeing
    it. Entries are rebuilt from their JSONL when next read; the folder is $LABLEDGER_CACHE_DIR ('off':
    no cache), else $XDG_CACHE_HOME/labledger/columnar (~/.cache/labledger/columnar).
    """


@cache_group.command("info")
@click.option(
    "--entries", "list_entries", is_flag=True, help="Also list each entry: its source file, size and last use."
)
@json_option
@handle_errors
def info_cmd(list_entries, as_json):
    """Where the cache is, its entries and their size, its bound, and when entries were last used."""
    from labledger.inputs.columnar import cache_files, cache_info, entry_source

    with _folder_errors():
        info = cache_info()
        files = [f for f in cache_files() if not f.temporary] if list_entries else []
    listed = [
        {"path": str(f.path), "source": entry_source(f.path), "bytes": f.bytes, "used": f.used}
        for f in reversed(files)  # the most recently used first
    ]
    if as_json:
        emit_json({**info, "files": listed} if list_entries else info)
        return
    if not info["on"]:
        _off()
        return
    bound = f"at most {_size(info['max_bytes'])}" if info["max_bytes"] else "no bound"
    lines = [
        ("folder", info["folder"]),
        ("entries", f"{info['entries']} ({_size(info['bytes'])}; {bound}, then the least recently used go)"),
        ("cached", f"results and record files of {_size(info['min_source_bytes'])} or more"),
        (
            "used",
            f"{fmt_time(info['least_recent_use'], seconds=False)} .. {fmt_time(info['most_recent_use'], seconds=False)}",
        ),
    ]
    if info["temporaries"]:
        lines.append(("writing", f"{info['temporaries']} temporary file(s), {_size(info['temporary_bytes'])}"))
    for name, value in lines:
        console.print(f"{name:<8} {value}", markup=False)
    for item in listed:
        source = item["source"] or "(source not recorded)"
        gone = "" if item["source"] is None or os.path.exists(item["source"]) else "  (source gone)"
        console.print(
            f"  {fmt_time(item['used'], seconds=False)}  {_size(item['bytes']):>10}  {source}{gone}", markup=False
        )


def _freed(removed, as_json: bool) -> None:
    """What ``removed`` freed, and what the cache holds now."""
    from labledger.inputs.columnar import cache_info

    with _folder_errors():
        info = cache_info()
    entries = [f for f in removed if not f.temporary]
    doc = {
        "folder": info["folder"],
        "on": info["on"],
        "removed_entries": len(entries),
        "removed_bytes": sum(f.bytes for f in removed),
        "removed_temporaries": len(removed) - len(entries),
        "entries": info["entries"],
        "bytes": info["bytes"],
    }
    if as_json:
        emit_json(doc)
        return
    console.print(
        f"removed {doc['removed_entries']} entr{'y' if doc['removed_entries'] == 1 else 'ies'} "
        f"({_size(doc['removed_bytes'])}); the cache holds {info['entries']} ({_size(info['bytes'])})",
        markup=False,
    )


@cache_group.command("prune")
@click.option(
    "--max-size",
    "max_size",
    metavar="SIZE",
    default=None,
    help="Keep at most SIZE (e.g. 5GiB, 500MB; default $LABLEDGER_CACHE_MAX_BYTES, else 20 GiB).",
)
@json_option
@handle_errors
def prune_cmd(max_size, as_json):
    """Remove the entries whose source file is gone, then those used least recently until the cache
    holds at most its bound, and the temporary files of writes that were killed (an hour old or
    more)."""
    from labledger.inputs.columnar import cache_folder, prune_cache

    bound = None
    if max_size is not None:
        try:
            bound = parse_size(max_size)
        except click.BadParameter as e:
            raise click.BadParameter(e.message, param_hint="'--max-size'") from None
    if cache_folder() is None and not as_json:
        _off()
        return
    with _folder_errors():
        removed = prune_cache(max_bytes=bound, orphans=True)
    _freed(removed, as_json)


@cache_group.command("clear")
@json_option
@handle_errors
def clear_cmd(as_json):
    """Remove every entry (each is rebuilt from its JSONL when next read)."""
    from labledger.inputs.columnar import cache_folder, clear_cache

    if cache_folder() is None and not as_json:
        _off()
        return
    with _folder_errors():
        removed = clear_cache()
    _freed(removed, as_json)
