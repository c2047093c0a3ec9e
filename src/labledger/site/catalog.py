"""The catalog of a site (#47): a small head, ``data/catalog.js``, and chunks, ``data/catalog/<k>.js``.

The runs, in the order the catalog lists them (the index's: newest first), are cut into chunks of
``chunk`` runs counted from the oldest: ``data/catalog/0.js`` holds the oldest ``chunk`` runs,
``1.js`` the next ones, and so on. The newest runs that do not fill a chunk (fewer than ``chunk``)
are the *tail*, kept in the head itself. A new run therefore changes the head only; once the tail
fills a chunk, that chunk is written as its file, and the files before it never change unless a run
in them does. Each chunk is packed on its own (:func:`labledger.site.packing.pack_catalog`), so one
chunk is composed without the others.

The head (key ``catalog``) holds what the first paint needs: the tail's runs and query fields
(packed, as a chunk), ``n`` (every run), ``chunk`` and ``chunks`` (the number of runs in each chunk
file, oldest first), and what the page would otherwise learn only from every run: ``names`` (every
query field name), ``groups``, ``tags``, ``statuses``, ``headline`` (the headline names the runs
recorded, in catalog order), ``last`` (the names of the runs' last values kept in the entries),
``batches`` and ``pages`` (whether any run has microbatches, evaluation pages or test breakdowns);
with ``ledger``, ``labledger`` (the version) and ``comparisons``. A chunk's key is ``catalog/<k>``.

:func:`catalog_files` makes the head and the chunks for both :func:`labledger.site.build_site` and
``labledger serve`` (which composes them from the index while its site builds): the same runs give
the same bytes. :func:`labledger.site.load_data_file` of the head reads its chunks from the folder
beside it and gives the whole catalog back as one list of runs
(:func:`labledger.site.packing.join_catalog`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labledger.site.output import js_assignment
from labledger.store.index import index_fields
from labledger.store.ledger import Ledger

#: Runs per chunk file of the catalog.
CATALOG_CHUNK = 1000
#: The head's path in a site and its key.
HEAD = "data/catalog.js"


def chunk_path(k: int) -> str:
    """The path in a site of catalog chunk ``k`` (0: the oldest runs)."""
    return f"data/catalog/{k}.js"


def chunk_bounds(n: int, chunk: int) -> list[tuple[int, int]]:
    """The positions ``[start, stop)`` in a catalog of ``n`` runs (newest first) of each chunk file,
    chunk 0 (the oldest runs) first; the tail is ``[0, n - len(bounds) * chunk)``.

    >>> chunk_bounds(7, 3)
    [(4, 7), (1, 4)]
    """
    return [(n - (k + 1) * chunk, n - k * chunk) for k in range(n // chunk)]


@dataclass
class Catalog:
    """What :func:`catalog_files` made: the head's bytes, the bytes of each chunk composed (by chunk
    number; not those ``kept``), and each chunk's summary (what the head needs of it), oldest first."""

    head: bytes
    chunks: dict[int, bytes] = field(default_factory=dict)
    summaries: list[dict[str, Any]] = field(default_factory=list)

    def files(self) -> dict[str, bytes]:
        """The composed files by path in the site."""
        return {HEAD: self.head, **{chunk_path(k): data for k, data in self.chunks.items()}}


def catalog_files(
    book: Ledger,
    catalog_runs: list[dict[str, Any]],
    comparisons: dict[str, Any],
    *,
    chunk: int = CATALOG_CHUNK,
    kept: Mapping[int, Mapping[str, Any]] | None = None,
) -> Catalog:
    """The catalog of the entries ``catalog_runs`` (in the catalog's order, newest first; each gains
    ``host`` and ``git_commit`` from the index) and the comparisons' summary ``comparisons``.

    ``kept``: chunks the caller carries over unchanged from an earlier build of the same runs, by
    chunk number, each as the summary recorded with it (:attr:`Catalog.summaries`): they are not
    composed again (nor their runs' query fields read).
    """
    kept = kept or {}
    bounds = chunk_bounds(len(catalog_runs), chunk)
    wanted = list(catalog_runs[: len(catalog_runs) - len(bounds) * chunk])
    for k, (start, stop) in enumerate(bounds):
        if k not in kept:
            wanted += catalog_runs[start:stop]
    found = index_fields(book, [r["id"] for r in wanted]) if wanted else {}
    return compose_catalog(
        catalog_runs, found, ledger=book.root.resolve().name, comparisons=comparisons, chunk=chunk, kept=kept
    )


def compose_catalog(
    catalog_runs: list[dict[str, Any]],
    found: Mapping[str, Any],
    *,
    ledger: str,
    comparisons: dict[str, Any],
    chunk: int = CATALOG_CHUNK,
    kept: Mapping[int, Mapping[str, Any]] | None = None,
) -> Catalog:
    """:func:`catalog_files` of runs whose index fields are ``found`` (:func:`index_fields` of every
    run of a chunk not ``kept``) in the ledger named ``ledger``."""
    if chunk < 1:
        raise ValueError("a catalog chunk holds at least one run")
    kept = kept or {}
    bounds = chunk_bounds(len(catalog_runs), chunk)
    tail_stop = len(catalog_runs) - len(bounds) * chunk
    out = Catalog(head=b"")
    for k, (start, stop) in enumerate(bounds):
        if k in kept:
            out.summaries.append(dict(kept[k]))
            continue
        payload, summary = _compose(catalog_runs[start:stop], found)
        out.chunks[k] = js_assignment(f"catalog/{k}", payload)
        out.summaries.append(summary)
    tail, summary = _compose(catalog_runs[:tail_stop], found)
    every = [summary, *reversed(out.summaries)]  # newest first, as the runs are listed
    head = {
        **tail,
        "ledger": ledger,
        "labledger": _version(),
        "comparisons": comparisons,
        "n": len(catalog_runs),
        "chunk": chunk,
        "chunks": [s["n"] for s in out.summaries],
        "names": sorted({n for s in every for n in s["names"]}),
        "groups": sorted({g for s in every for g in s["groups"]}),
        "tags": sorted({t for s in every for t in s["tags"]}),
        "statuses": sorted({t for s in every for t in s["statuses"]}),
        "headline": list(dict.fromkeys(k for s in every for k in s["headline"])),
        "last": list(dict.fromkeys(k for s in every for k in s["last"])),
        "batches": any(s["batches"] for s in every),
        "pages": any(s["pages"] for s in every),
    }
    out.head = js_assignment("catalog", head)
    return out


def _compose(entries: Sequence[dict[str, Any]], found: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A chunk's packed payload (``runs`` and ``fields``) and its summary."""
    from labledger.site.packing import pack_catalog  # (numpy: not for the server's start)

    fields = query_fields(entries, found)
    runs = slim_entries(entries, fields)
    summary = {
        "n": len(entries),
        "names": fields["names"],
        "groups": sorted({r["group"] for r in entries if r.get("group")}),
        "tags": sorted({t for r in entries for t in r.get("tags") or ()}),
        "statuses": sorted({r["status"] for r in entries if r.get("status") is not None}),
        "headline": list(dict.fromkeys(k for r in entries for k in r.get("headline") or {})),
        "last": list(dict.fromkeys(k for r in runs for k in r.get("last") or {})),
        "batches": any(r.get("batches") and not r.get("unreadable") for r in entries),
        "pages": any(r.get("evaluations") or r.get("tests") for r in entries),
    }
    return pack_catalog({"runs": runs, "fields": fields}), summary


def query_fields(catalog_runs: Sequence[dict[str, Any]], found: Mapping[str, Any]) -> dict[str, Any]:
    """The index's queryable fields of the catalogued runs (``found``: :func:`index_fields` of them),
    for the catalog's filter box: field names once and a row of values per run (null where a run has
    no such field); ``host`` and ``git_commit`` are added to each catalog entry."""
    rows: list[dict[str, Any]] = [{} for _ in catalog_runs]
    names: dict[str, None] = {}
    for i, entry in enumerate(catalog_runs):
        indexed = found.get(entry["id"])
        if indexed is None:
            continue
        entry["host"], entry["git_commit"], rows[i] = indexed
        names.update(dict.fromkeys(rows[i]))
    order = sorted(names)
    return {"names": order, "rows": [[row.get(n) for n in order] for row in rows]}


def catalog_query_fields(book: Ledger, catalog_runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """:func:`query_fields` of ``catalog_runs``, read from the index of ``book``."""
    return query_fields(catalog_runs, index_fields(book, [r["id"] for r in catalog_runs]))


def slim_entries(catalog_runs: Sequence[dict[str, Any]], query_fields: dict[str, Any]) -> list[dict[str, Any]]:
    """Catalog entries without ``last`` where the query fields carry ``scalars.<name>.last`` (the
    page reads them there; at 10,000 runs the copy was a fifth of the catalog).

    >>> slim_entries([{"id": "a", "last": {"loss": 0.2}}], {"names": ["scalars.loss.last"], "rows": [[0.2]]})
    [{'id': 'a'}]
    """
    lasts = [i for i, n in enumerate(query_fields["names"]) if n.startswith("scalars.") and n.endswith(".last")]
    out = []
    for entry, row in zip(catalog_runs, query_fields["rows"]):
        if entry.get("last") and any(row[i] is not None for i in lasts):
            entry = {k: v for k, v in entry.items() if k != "last"}
        out.append(entry)
    return out


def _version() -> str:
    from labledger import __version__

    return __version__
