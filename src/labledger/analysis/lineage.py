"""Lineage: which run started from which checkpoint, and which soups combined which (issue 15).

The graph is read from the ledger's index: each run's checkpoints (``checkpoints``), what each run
started from (``run_inits``: a sha256 or an external name, see :meth:`labledger.Run.set_init`) and
each soup's weighted inputs (the ``soup`` config that :func:`labledger.analysis.checkpoints.soup`
records). A run whose init sha256 is a checkpoint another run logged is linked to that run.

Nodes are ``run`` (a training run), ``soup`` (a run tagged ``soup`` with weighted inputs),
``checkpoint`` (sha256, step, size, path, and ``state``: ``ok``, ``changed``, ``missing`` or
``reference``, re-verified on read) and ``external`` (a hub name or a sha256 no run logged).
Edges go from what came first: checkpoint -> the run that started from it (``init``), run -> the
checkpoint it wrote (``wrote``), checkpoint -> soup (``input``, with its ``weight``).

:func:`lineage` returns the graph up (ancestors) and down (descendants) from a run or checkpoint;
:meth:`Lineage.mermaid`, :meth:`Lineage.dot` draw it; :func:`trajectory` is seed 001's table.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labledger.errors import LedgerError, RunNotFoundError
from labledger.store.index import checkpoint_rows, init_rows
from labledger.store.ledger import Ledger
from labledger.store.view import checkpoint_state

__all__ = ["DEFAULT_COLUMNS", "Lineage", "lineage", "lineage_of", "run_facts", "trajectory"]

#: Trajectory table columns: label -> config keys tried in order (dotted keys reach into nested configs).
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "steps": ("steps", "max_steps", "num_steps", "train_steps", "training_args.max_steps"),
    "max length": ("max_length", "max_len", "max_seq_length", "seq_len", "model_max_length"),
    "lr backbone": ("lr_backbone", "backbone_lr", "learning_rate_backbone"),
    "lr head": ("lr_head", "head_lr", "learning_rate_head"),
    "lr": ("lr", "learning_rate", "training_args.learning_rate"),
    "mixture temperature": ("mixture_temperature", "mix_temperature", "temperature"),
    "class balance": ("class_balance", "balance", "balanced"),
}
_SHA_PREFIX = re.compile(r"^[0-9a-fA-F]{8,64}$")


@dataclass
class Lineage:
    """A lineage graph: ``nodes`` by id, ``edges`` (``source``, ``target``, ``kind``, ``weight``)
    and the ``focus`` node it was drawn from (see :func:`lineage`)."""

    focus: str
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``--json``): focus, nodes in topological order, edges, problems."""
        return {
            "focus": self.focus,
            "nodes": [self.nodes[n] for n in self.order()],
            "edges": self.edges,
            "changed_checkpoints": [
                n["sha256"] for n in self.nodes.values() if n["type"] == "checkpoint" and n["state"] == "changed"
            ],
        }

    def order(self) -> list[str]:
        """Node ids, parents before children (ties by start time, then id).

        Each step takes the first node (by start time, then id) whose parents are all placed; where
        none is (a cycle), the first node not yet placed. Linear but for the heap (a scan of every
        pending node per step made the site's lineage page quadratic in runs).

        >>> g = Lineage(focus="run:b", nodes={"run:a": {"started": 2.0}, "run:b": {"started": 1.0}, "x": {}},
        ...             edges=[{"source": "run:a", "target": "run:b"}])
        >>> g.order()
        ['x', 'run:a', 'run:b']
        """
        parents: dict[str, set[str]] = {n: set() for n in self.nodes}
        for e in self.edges:
            parents[e["target"]].add(e["source"])
        children: dict[str, list[str]] = {}
        for n, ps in parents.items():
            for p in ps:
                children.setdefault(p, []).append(n)

        def key(n: str) -> tuple[float, str]:
            return (float(self.nodes[n].get("started") or 0.0), n)

        keys = {n: key(n) for n in self.nodes}
        waiting = {n: len(ps) for n, ps in parents.items()}  # parents not placed yet
        pending = sorted(self.nodes, key=keys.__getitem__)
        ready = [keys[n] for n in pending if not waiting[n]]  # sorted: a heap already
        done: list[str] = []
        seen: set[str] = set()
        at = 0  # pending[:at] are placed
        while len(done) < len(pending):
            if ready:
                first = heapq.heappop(ready)[1]
            else:  # a cycle: break it at the first node not placed
                while pending[at] in seen:
                    at += 1
                first = pending[at]
            done.append(first)
            seen.add(first)
            for c in children.get(first, ()):
                waiting[c] -= 1
                if not waiting[c] and c not in seen:
                    heapq.heappush(ready, keys[c])
        return done

    def path_to(self, node: str) -> set[str]:
        """Ids of ``node`` and every node upstream of it (the path to a selected model)."""
        up: dict[str, list[str]] = {}
        for e in self.edges:
            up.setdefault(e["target"], []).append(e["source"])
        out, stack = set(), [node]
        while stack:
            n = stack.pop()
            if n not in out:
                out.add(n)
                stack.extend(up.get(n, ()))
        return out

    def runs(self) -> list[dict[str, Any]]:
        """The run and soup nodes, parents first."""
        return [self.nodes[n] for n in self.order() if self.nodes[n]["type"] in ("run", "soup")]

    def label(self, node_id: str) -> str:
        """A one-line label: run name and headline, checkpoint file and short sha256, soup weights."""
        n = self.nodes[node_id]
        if n["type"] in ("run", "soup"):
            head = self.headline_text(node_id)
            return n["name"] + (f" ({head})" if head else "")
        if n["type"] == "checkpoint":
            step = f" step {n['step']}" if n.get("step") is not None else ""
            flag = " CHANGED" if n["state"] == "changed" else (" missing" if n["state"] == "missing" else "")
            return f"{n['file']} {n['sha256'][:12]}{step}{flag}"
        return str(n.get("name") or n.get("sha256", "")[:12])

    def headline_text(self, node_id: str) -> str | None:
        """A run or soup node's headline as ``"metric value"`` (4 significant digits), as its label
        and the trajectory table show it; ``None`` for other nodes and runs without one.

        >>> g = Lineage(focus="run:a", nodes={"run:a": {"type": "run", "name": "a",
        ...     "headline": {"metric": "accuracy", "value": 0.96875}}})
        >>> g.headline_text("run:a"), g.label("run:a")
        ('accuracy 0.9688', 'a (accuracy 0.9688)')
        """
        n = self.nodes[node_id]
        head = n.get("headline") if n["type"] in ("run", "soup") else None
        return f"{head['metric']} {_num(head['value'])}" if head else None

    def mermaid(self) -> str:
        """A mermaid ``flowchart`` (renders where Markdown renders mermaid; reads as text elsewhere).

        >>> g = Lineage(focus="run:a", nodes={"run:a": {"type": "run", "name": 'a"b', "headline": None}})
        >>> print(g.mermaid())
        flowchart TD
          n0["a#quot;b"]
        """
        ids = {n: f"n{i}" for i, n in enumerate(self.order())}
        shapes = {"run": ('["', '"]'), "soup": ('{{"', '"}}'), "checkpoint": ('[("', '")]'), "external": ('>"', '"]')}
        lines = ["flowchart TD"]
        for n, short in ids.items():
            open_, close = shapes[self.nodes[n]["type"]]
            lines.append(f"  {short}{open_}{_mermaid_text(self.label(n))}{close}")
        for e in self.edges:
            arrow = f' -- "{_num(e["weight"])}" --> ' if e.get("weight") is not None else " --> "
            lines.append(f"  {ids[e['source']]}{arrow}{ids[e['target']]}")
        return "\n".join(lines)

    def dot(self) -> str:
        """A Graphviz ``digraph`` (``dot -Tsvg``).

        >>> g = Lineage(focus="run:a", nodes={"run:a": {"type": "run", "name": "a", "headline": None}})
        >>> print(g.dot())
        digraph lineage {
          rankdir=TB;
          n0 [label="a", shape=box, penwidth=2];
        }
        """
        ids = {n: f"n{i}" for i, n in enumerate(self.order())}
        shapes = {"run": "box", "soup": "hexagon", "checkpoint": "cylinder", "external": "note"}
        lines = ["digraph lineage {", "  rankdir=TB;"]
        for n, short in ids.items():
            extra = ", penwidth=2" if n == self.focus else ""
            if self.nodes[n].get("state") == "changed":
                extra += ', color="red"'
            lines.append(
                f'  {short} [label="{_dot_text(self.label(n))}", shape={shapes[self.nodes[n]["type"]]}{extra}];'
            )
        for e in self.edges:
            attr = f' [label="{_num(e["weight"])}"]' if e.get("weight") is not None else ""
            lines.append(f"  {ids[e['source']]} -> {ids[e['target']]}{attr};")
        lines.append("}")
        return "\n".join(lines)


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _mermaid_text(text: str) -> str:
    return (
        text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;").replace("\n", " ")
    )


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


# -- building the graph --------------------------------------------------------------------------
def _headline(ledger: Ledger, info: Any) -> dict[str, Any] | None:
    """The run's headline: its first ``set_summary`` value, else its first stored overall metric."""
    head = (info.summary or {}).get("headline") or {}
    for k, v in head.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return {"metric": k, "value": v}
    for m in ledger.metric_values(info.id):
        if m.slice == "" and m.value is not None:
            return {"metric": m.metric, "value": m.value, "evaluation": m.evaluation, "task": m.task}
    return None


def _file_name(path: Any) -> str:
    return Path(str(path)).name if path else "(unnamed)"


class _Index:
    """The whole ledger's lineage edges, read once from the index (and soup configs). ``infos``:
    every run of the ledger when the caller has listed them already; ``facts``: :func:`run_facts`
    of runs by id, read before (the site keeps them per run: a run it did not rebuild is not read)."""

    def __init__(
        self, ledger: Ledger, infos: Sequence[Any] | None = None, facts: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        self.ledger = ledger
        self.infos = {i.id: i for i in (ledger.runs() if infos is None else infos)}
        self.facts = facts or {}
        self.ckpts: dict[str, list[tuple[str, Any, str, int]]] = {}  # sha -> [(run, step, path, size)]
        self.by_run: dict[str, list[str]] = {}
        for run_id, step, path, sha, size in checkpoint_rows(ledger):
            self.ckpts.setdefault(sha, []).append((run_id, step, path, size))
            if sha not in self.by_run.setdefault(run_id, []):
                self.by_run[run_id].append(sha)
        self.inits: dict[str, list[dict[str, Any]]] = {}
        for run_id, kind, init_sha, name, init_path, init_size in init_rows(ledger):
            self.inits.setdefault(run_id, []).append(
                {"kind": kind, "sha256": init_sha, "name": name, "path": init_path, "size": init_size}
            )
        self.soups: dict[str, list[dict[str, Any]]] = {}
        for info in ledger.runs(tag="soup"):
            spec = ledger.run(info.id).config.get("soup") or {}
            inputs = spec.get("inputs") or []
            if isinstance(inputs, list):
                self.soups[info.id] = [i for i in inputs if isinstance(i, dict) and isinstance(i.get("sha256"), str)]
        self.used_by: dict[str, list[str]] = {}  # sha -> runs that started from it or souped it
        self.nested: dict[str, list[str]] = {}  # run -> runs nested in it (kind "run": MLflow's parentRunId)
        for run_id, entries in self.inits.items():
            for e in entries:
                if e["sha256"]:
                    self.used_by.setdefault(e["sha256"], []).append(run_id)
                elif e["kind"] == "run" and e["name"]:
                    self.nested.setdefault(e["name"], []).append(run_id)
        for run_id, inputs in self.soups.items():
            for i in inputs:
                self.used_by.setdefault(i["sha256"], []).append(run_id)

    def headline(self, info: Any) -> dict[str, Any] | None:
        known = self.facts.get(info.id)
        return known["headline"] if known is not None else _headline(self.ledger, info)

    def parents(self, run_id: str) -> list[str]:
        shas = [e["sha256"] for e in self.inits.get(run_id, ()) if e["sha256"]]
        shas += [i["sha256"] for i in self.soups.get(run_id, ())]
        outer = [e["name"] for e in self.inits.get(run_id, ()) if e["kind"] == "run" and e["name"] != run_id]
        return [r for s in shas for r, *_ in self.ckpts.get(s, ()) if r != run_id] + outer

    def children(self, run_id: str) -> list[str]:
        inner = [r for r in self.nested.get(run_id, ()) if r != run_id]
        return [r for s in self.by_run.get(run_id, ()) for r in self.used_by.get(s, ()) if r != run_id] + inner


def _resolve_focus(ledger: Ledger, index: _Index, ref: str) -> tuple[str, str | None]:
    """``(run id, checkpoint sha256 or None)`` for a run reference or a checkpoint sha256 (prefix)."""
    ref = str(ref).strip()
    if _SHA_PREFIX.match(ref):
        shas = {s for s in index.ckpts if s.startswith(ref.lower())}
        shas |= {s for s in index.used_by if s.startswith(ref.lower())}
        if len(shas) > 1:
            raise LedgerError(f"sha256 prefix '{ref}' matches {len(shas)} checkpoints; give more digits")
        if shas:
            sha = shas.pop()
            holders = index.ckpts.get(sha) or []
            if holders:
                return holders[0][0], sha
            return index.used_by[sha][0], sha
    if ref in index.infos:  # a run id (what the site passes): no look-up
        return ref, None
    try:
        return ledger.resolve(ref), None
    except RunNotFoundError as exc:
        raise RunNotFoundError(f"{exc} (or give a checkpoint sha256)") from None


def lineage(ledger: Ledger, ref: str, *, all_checkpoints: bool = False, verify: bool = True) -> Lineage:
    """The lineage graph up and down from run or checkpoint ``ref`` (see the module docstring).

    A run's checkpoints in the graph are those another run started from or souped, else its last
    one (``all_checkpoints`` keeps every one). ``verify`` re-hashes each checkpoint file present,
    so a file changed after it was logged shows ``state: changed``.

    >>> import tempfile, pathlib, labledger
    >>> d = tempfile.mkdtemp(); ck = pathlib.Path(d) / "s1.pt"; _ = ck.write_bytes(b"w1")
    >>> with labledger.start_run("s1", ledger=d + "/L", init="bert-base") as a:
    ...     rec = a.log_checkpoint(ck, step=10)
    >>> with labledger.start_run("s2", ledger=d + "/L", init=rec) as b:
    ...     pass
    >>> g = lineage(labledger.open_ledger(d + "/L"), "s2")
    >>> [g.nodes[n]["type"] for n in g.order()]
    ['external', 'run', 'checkpoint', 'run']
    """
    return _lineage(ledger, _Index(ledger), ref, all_checkpoints=all_checkpoints, verify=verify)


def _lineage(ledger: Ledger, index: _Index, ref: str, *, all_checkpoints: bool, verify: bool) -> Lineage:
    """:func:`lineage` on an index of the ledger's edges read before (one for many graphs)."""
    focus_run, focus_sha = _resolve_focus(ledger, index, ref)
    keep: set[str] = {focus_run}
    for step in (index.parents, index.children):
        stack = [focus_run]
        while stack:
            rid = stack.pop()
            for nxt in step(rid):
                if nxt not in keep and nxt in index.infos:
                    keep.add(nxt)
                    stack.append(nxt)
    graph = Lineage(focus=f"ckpt:{focus_sha}" if focus_sha else f"run:{focus_run}")
    views: dict[str, Any] = {}
    for rid in keep:
        info = index.infos[rid]
        kind = "soup" if rid in index.soups else "run"
        graph.nodes[f"run:{rid}"] = {
            "id": f"run:{rid}",
            "type": kind,
            "run_id": rid,
            "name": info.name,
            "group": info.group,
            "status": info.status,
            "started": info.started,
            "headline": index.headline(info),
        }
        views[rid] = info
    # the shas a kept run started from or souped (what ``used_by`` maps to a kept run), read from
    # the kept runs: a scan of every sha of the ledger per graph was quadratic in runs
    used = {e["sha256"] for rid in keep for e in index.inits.get(rid, ()) if e["sha256"]}
    used |= {i["sha256"] for rid in keep for i in index.soups.get(rid, ())}
    for rid in keep:
        shas = index.by_run.get(rid, [])
        chosen = [s for s in shas if s in used or s == focus_sha]
        if all_checkpoints or not chosen:
            chosen = shas if all_checkpoints else shas[-1:]
        for sha in chosen:
            _add_checkpoint(graph, ledger, index, rid, sha, verify=verify)
    for rid in keep:
        for e in index.inits.get(rid, ()):
            if e["kind"] == "run":  # nested in a run (MLflow's parentRunId): an edge between the runs
                if f"run:{e['name']}" in graph.nodes:
                    graph.edges.append(
                        {"source": f"run:{e['name']}", "target": f"run:{rid}", "kind": "parent", "weight": None}
                    )
                continue
            _link_input(graph, index, rid, e, weight=None, kind="init")
        for i in index.soups.get(rid, ()):
            _link_input(graph, index, rid, {"sha256": i["sha256"], "path": i.get("path")}, i.get("weight"), "input")
    return graph


def lineage_of(
    ledger: Ledger,
    refs: Iterable[str],
    *,
    verify: bool = True,
    infos: Sequence[Any] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
) -> Lineage:
    """One graph: the union of :func:`lineage` of each of ``refs`` (the report's runs).

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> for name in ("a", "b"):
    ...     with labledger.start_run(name, ledger=d) as run:
    ...         pass
    >>> sorted(n["name"] for n in lineage_of(labledger.open_ledger(d), ["a", "b"]).runs())
    ['a', 'b']

    ``infos`` (every run of the ledger, listed before) and ``facts`` (:func:`run_facts` by run id,
    kept from before) spare the reads of the index and of each run that they hold.
    """
    merged: Lineage | None = None
    seen_edges: set[tuple[str, str, str]] = set()
    # once for every graph: the edges of the whole ledger
    index = _Index(ledger) if infos is None and facts is None else _Index(ledger, infos, facts)
    for ref in refs:
        if merged is not None and f"run:{ref if ref in index.infos else ledger.resolve(ref)}" in merged.nodes:
            continue
        g = _lineage(ledger, index, ref, all_checkpoints=False, verify=verify)
        if merged is None:
            merged = g
            seen_edges = {(e["source"], e["target"], e["kind"]) for e in g.edges}
            continue
        for k, n in g.nodes.items():
            merged.nodes.setdefault(k, n)
        for e in g.edges:
            key = (e["source"], e["target"], e["kind"])
            if key not in seen_edges:
                seen_edges.add(key)
                merged.edges.append(e)
    if merged is None:
        raise LedgerError("no runs to draw the lineage of")
    return merged


def _add_checkpoint(graph: Lineage, ledger: Ledger, index: _Index, run_id: str, sha: str, *, verify: bool) -> str:
    node_id = f"ckpt:{sha}"
    if node_id in graph.nodes:
        return node_id
    holder = next((h for h in index.ckpts.get(sha, ()) if h[0] == run_id), None) or index.ckpts[sha][0]
    rid, step, path, size = holder
    # the run's own record knows what the index does not: a copy's folder, a reference by hash only
    rec = next((c for c in ledger.run(rid).checkpoints() if c.get("sha256") == sha), None) or {
        "path": path,
        "sha256": sha,
    }
    state = checkpoint_state(rec) if verify or rec.get("reference") else {"state": "unverified"}
    graph.nodes[node_id] = {
        "id": node_id,
        "type": "checkpoint",
        "run_id": rid,
        "sha256": sha,
        "step": step,
        "size": None if size == -1 else size,
        "path": rec.get("path"),
        "file": _file_name(path),
        "started": (graph.nodes.get(f"run:{rid}") or {}).get("started"),
        **state,
    }
    graph.edges.append({"source": f"run:{rid}", "target": node_id, "kind": "wrote", "weight": None})
    return node_id


def _link_input(graph: Lineage, index: _Index, run_id: str, entry: Mapping[str, Any], weight: Any, kind: str) -> None:
    sha = entry.get("sha256")
    if sha and f"ckpt:{sha}" in graph.nodes:
        source = f"ckpt:{sha}"
    else:
        source = f"ext:{sha}" if sha else f"ext:{entry.get('name')}"
        if source not in graph.nodes:
            graph.nodes[source] = {
                "id": source,
                "type": "external",
                "name": entry.get("name") or (_file_name(entry["path"]) if entry.get("path") else str(sha or "")[:12]),
                "sha256": sha,
                "path": entry.get("path"),
                "started": 0.0,
            }
    graph.edges.append({"source": source, "target": f"run:{run_id}", "kind": kind, "weight": weight})


# -- the trajectory table ------------------------------------------------------------------------
def _lookup(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _columns(columns: Sequence[str] | None) -> dict[str, tuple[str, ...]]:
    if not columns:
        return dict(DEFAULT_COLUMNS)
    return {c: DEFAULT_COLUMNS.get(c, (c,)) for c in columns}


def run_facts(ledger: Ledger, view: Any) -> dict[str, Any]:
    """What the lineage graph and the trajectory table read of one run (``view``): its headline,
    the value of each :data:`DEFAULT_COLUMNS` column and its purpose. The site keeps them per run
    and passes them back (``facts`` of :func:`lineage_of` and :func:`trajectory`), so that a
    rebuild reads again only the runs that changed.

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("s1", ledger=d, config={"lr": 1e-4, "purpose": "probe"}) as run:
    ...     pass
    >>> book = labledger.open_ledger(d)
    >>> f = run_facts(book, book.run("s1"))
    >>> f["columns"]["lr"], f["purpose"], f["headline"]
    (0.0001, 'probe', None)
    """
    config = view.config
    return {
        "headline": _headline(ledger, view.info),
        "columns": {label: _column(config, keys) for label, keys in DEFAULT_COLUMNS.items()},
        "purpose": _purpose(view, config),
    }


def _column(config: Mapping[str, Any], keys: Sequence[str]) -> Any:
    return next((v for v in (_lookup(config, k) for k in keys) if v is not None), None)


def _purpose(view: Any, config: Mapping[str, Any]) -> Any:
    purpose = config.get("purpose")
    if purpose is None:
        texts = [str(t.get("text", "")) for t in view.notes()]
        purpose = texts[0] if texts else None
    return purpose


def trajectory(
    ledger: Ledger,
    graph: Lineage,
    *,
    columns: Sequence[str] | None = None,
    facts: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Seed 001 §4.1's table: one row per run or soup of ``graph``, parents first.

    Each row has ``stage`` (run name), ``run_id``, ``checkpoint`` (file, short sha256, step; a
    changed file says so), ``init`` (the checkpoint or name it started from, or a soup's weighted
    inputs ``0.5 S2 + 0.5 S3``), one value per column (config keys: ``columns``, else
    :data:`DEFAULT_COLUMNS`, each label trying its keys in order; a column no run has is left
    out), ``headline`` and ``purpose`` (config ``purpose``, else the run's notes).

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("s1", ledger=d, config={"lr": 1e-4, "max_length": 512}) as run:
    ...     pass
    >>> book = labledger.open_ledger(d)
    >>> row = trajectory(book, lineage(book, "s1"))[0]
    >>> row["stage"], row["lr"], row["max length"]
    ('s1', 0.0001, 512)
    """
    cols = _columns(columns)
    runs = graph.runs()
    wrote: dict[str, list[dict[str, Any]]] = {}  # each node's edges, once (not a scan per run)
    into: dict[str, list[dict[str, Any]]] = {}
    for e in graph.edges:
        if e["kind"] == "wrote":
            wrote.setdefault(e["source"], []).append(e)
        into.setdefault(e["target"], []).append(e)
    rows: list[dict[str, Any]] = []
    known = (facts or {}) if not columns else {}  # (kept facts hold the default columns only)
    for n in runs:
        rid = n["run_id"]
        outs = [graph.nodes[e["target"]] for e in wrote.get(n["id"], ())]
        inputs = into.get(n["id"], [])
        row: dict[str, Any] = {
            "stage": n["name"],
            "run_id": rid,
            "type": n["type"],
            "checkpoint": "; ".join(graph.label(o["id"]) for o in outs) or "-",
            "init": _init_text(graph, inputs),
        }
        fact = known.get(rid)
        if fact is not None:
            row.update({label: fact["columns"].get(label) for label in cols})
            purpose = fact["purpose"]
        else:
            view = ledger.run(rid)
            config = view.config
            for label, keys in cols.items():
                row[label] = _column(config, keys)
            purpose = _purpose(view, config)
        head = n.get("headline")
        row["headline"] = f"{head['metric']} {_num(head['value'])}" if head else None
        row["purpose"] = purpose
        rows.append(row)
    present = [c for c in cols if any(r[c] is not None for r in rows)] if not columns else list(cols)
    return [{k: v for k, v in r.items() if k not in cols or k in present} for r in rows]


def _init_text(graph: Lineage, inputs: Iterable[dict[str, Any]]) -> str:
    parts = []
    for e in inputs:
        src = graph.nodes[e["source"]]
        if src["type"] == "checkpoint":
            owner = graph.nodes.get(f"run:{src['run_id']}")
            what = f"{owner['name'] if owner else src['run_id']} ({src['sha256'][:12]})"
        elif e.get("kind") == "parent":
            what = f"nested in {src.get('name')}"
        else:
            what = str(src.get("name"))
        parts.append(f"{_num(e['weight'])} {what}" if e.get("weight") is not None else what)
    return " + ".join(parts) or "-"
