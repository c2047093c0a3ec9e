"""The lineage page's data (#15): the graph of every run of the site, laid out in layers, and the
trajectory table (see :mod:`labledger.analysis.lineage`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from labledger.analysis.lineage import lineage_of, trajectory
from labledger.store.ledger import Ledger


def lineage_payload(
    book: Ledger,
    run_ids: list[str],
    *,
    infos: Sequence[Any] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``{"nodes", "edges", "trajectory"}`` for ``data/lineage.js``; each node has a ``layer``
    (0 for what has no parent; one more than its deepest parent), a one-line ``label`` (the hover
    text), and the parts the page lays out on the node's lines: ``name``, ``headline``
    (``"metric value"`` of a run or soup) and ``file`` (a checkpoint's file name). ``infos`` (every
    run of the ledger) and ``facts`` (:func:`labledger.analysis.lineage.run_facts` of runs by id)
    are what the builder has read already (see :func:`labledger.analysis.lineage.lineage_of`).

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("a", ledger=d, init="hub/base") as run:
    ...     pass
    >>> doc = lineage_payload(labledger.open_ledger(d), [run.id])
    >>> [(n["type"], n["layer"]) for n in doc["nodes"]]
    [('external', 0), ('run', 1)]
    """
    if not run_ids:
        return {"nodes": [], "edges": [], "trajectory": []}
    graph = lineage_of(book, run_ids, infos=infos, facts=facts)
    parents: dict[str, list[str]] = {}
    for e in graph.edges:
        parents.setdefault(e["target"], []).append(e["source"])
    layer: dict[str, int] = {}
    nodes = []
    for node_id in graph.order():
        layer[node_id] = 1 + max((layer.get(p, 0) for p in parents.get(node_id, ())), default=-1)
        n = graph.nodes[node_id]
        nodes.append(
            {
                "id": node_id,
                "type": n["type"],
                "label": graph.label(node_id),
                "layer": layer[node_id],
                "run_id": n.get("run_id"),
                "sha256": n.get("sha256"),
                "size": n.get("size"),
                "step": n.get("step"),
                "state": n.get("state"),
                "name": n.get("name"),
                "headline": graph.headline_text(node_id),
                "file": n.get("file"),
            }
        )
    rows = trajectory(book, graph, facts=facts)
    return {"nodes": nodes, "edges": graph.edges, "trajectory": rows}
