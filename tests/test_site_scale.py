"""The site at scale (issue 47): no per-run step of a build looks at every run, and a rebuild after
one new run reads only that run, yet writes the same site a cold build writes.

Nothing here times anything (bench/site_scale.py does): the tests count what a rebuild reads and
compare the fast paths with the plain definitions they replace.
"""

from __future__ import annotations

import random
from pathlib import Path

import labledger
from labledger.analysis import lineage as lineage_module
from labledger.site import build_site, packing
from labledger.site.pairs import PARTNERS, pairs_of
from labledger.store import view as view_module


def _ledger(root: Path, n: int = 6) -> tuple[Path, list[str]]:
    """``n`` runs of two groups: checkpoints and runs started from them (lineage edges), notes, a
    result set in each run (paired diffs), a stored evaluation."""
    d = root / "L"
    ids: list[str] = []
    rec = None
    for i in range(n):
        config = {"lr": [1e-3, 3e-4][i % 2], "steps": 10 * (i + 1)}
        init = rec if i % 3 == 2 else None
        with labledger.start_run(f"r{i}", group=f"g{i % 2}", config=config, ledger=d, init=init) as run:
            for step in range(1, 6):
                run.log(step, loss=1.0 / (step + i), acc=step / 10)
            if i % 2 == 0:
                ck = root / f"w{i}.pt"
                ck.write_bytes(f"weights {i}".encode())
                rec = run.log_checkpoint(ck, step=5)
            if i % 3 == 1:
                run.note(f"purpose of r{i}")
            rows = [{"id": f"x{k}", "task": "t", "gold": k % 2, "pred": int((k + i) % 3 == 0)} for k in range(20)]
            run.log_results("test", rows)
        ids.append(run.id)
    return d, ids


def _data(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "data").rglob("*")) if p.is_file()}


def test_a_rebuild_after_one_new_run_reads_that_run_and_writes_what_a_cold_build_writes(tmp_path, monkeypatch):
    d, ids = _ledger(tmp_path)
    out = tmp_path / "site"
    build_site(d, out)
    with labledger.start_run("new", group="g0", config={"lr": 1e-3}, ledger=d, init="hub/base") as run:
        run.log(1, loss=0.5)
        run.note("a new run")
    from labledger.site import build as build_module

    read: list[str] = []
    real_payload, real_facts = build_module.run_payload, lineage_module.run_facts

    def payload(view, info, **kw):
        read.append(info.id)
        return real_payload(view, info, **kw)

    def facts(book, view):
        read.append(view.id)
        return real_facts(book, view)

    monkeypatch.setattr(build_module, "run_payload", payload)
    monkeypatch.setattr(lineage_module, "run_facts", facts)
    real_config = view_module.RunView.config.fget
    monkeypatch.setattr(view_module.RunView, "config", property(lambda v: read.append(v.id) or real_config(v)))
    got = build_site(d, out)
    monkeypatch.undo()
    assert got.rebuilt_runs == [run.id]
    assert read and set(read) == {run.id}  # no other run's pages, config or lineage facts are read
    written = {p.relative_to(out).as_posix() for p in got.written}
    assert {f"data/runs/{run.id}.js", "data/catalog.js", "data/lineage.js"} <= written
    assert not [w for w in written if w.startswith("data/runs/") and run.id not in w]
    cold = tmp_path / "cold"
    build_site(d, cold)
    assert _data(out) == _data(cold)


def test_the_lineage_page_from_kept_facts_is_the_one_read_from_the_runs(tmp_path):
    from labledger.site.lineage import lineage_payload

    d, ids = _ledger(tmp_path)
    with labledger.open_ledger(d) as book:
        plain = lineage_payload(book, ids)
        facts = {rid: lineage_module.run_facts(book, book.run(rid)) for rid in ids}
        assert lineage_payload(book, ids, infos=book.runs(), facts=facts) == plain
        assert any(row["purpose"] for row in plain["trajectory"])
        assert plain["edges"]


def _order_by_scan(graph: lineage_module.Lineage) -> list[str]:
    """The definition :meth:`Lineage.order` had: a scan of every pending node per step."""
    parents: dict[str, set[str]] = {n: set() for n in graph.nodes}
    for e in graph.edges:
        parents[e["target"]].add(e["source"])
    done: list[str] = []
    seen: set[str] = set()
    pending = sorted(graph.nodes, key=lambda n: (float(graph.nodes[n].get("started") or 0.0), n))
    while pending:
        first = ([n for n in pending if parents[n] <= seen] or pending[:1])[0]
        done.append(first)
        seen.add(first)
        pending.remove(first)
    return done


def test_lineage_order_is_the_scans_order_on_random_graphs_with_cycles():
    rng = random.Random(47)
    for _ in range(300):
        n = rng.randrange(1, 25)
        nodes = {f"n{i:02d}": {"started": rng.choice([None, 0.0, 1.0, 2.0, float(rng.randrange(9))])} for i in range(n)}
        names = list(nodes)
        edges = [
            {"source": rng.choice(names), "target": rng.choice(names), "kind": "init"}
            for _ in range(rng.randrange(0, 2 * n))
        ]
        graph = lineage_module.Lineage(focus=names[0], nodes=nodes, edges=edges)
        assert graph.order() == _order_by_scan(graph)


def test_packed_columns_are_the_general_packers_on_random_columns():
    rng = random.Random(47)
    pool = [None, 0, 1, 1.0, True, False, "a", "b", 2**53, 2**53 + 1, float("nan"), float("inf"), 0.5, [1], {"a": 1}]
    pool.append(packing.ABSENT)
    for _ in range(3000):
        n = rng.randrange(1, 80)
        kind = rng.random()
        if kind < 0.25:
            values = [rng.random() if rng.random() < 0.9 else None for _ in range(n)]
        elif kind < 0.4:
            values = [f"s{rng.randrange(2 * n)}" for _ in range(n)]
        elif kind < 0.5:
            values = [rng.randrange(300) for _ in range(n)]
        else:
            some = rng.sample(pool, rng.randrange(1, 6))
            values = [rng.choice(some) for _ in range(n)]
        assert repr(packing.pack_column(values)) == repr(packing._pack_any(values)), values


def test_diff_partners_are_the_nearest_on_each_side():
    from types import SimpleNamespace as R

    rng = random.Random(47)
    runs = [R(id=f"r{i:03d}", group="g", name="x", started=float(rng.randrange(50))) for i in range(120)]
    results = {r.id: set(rng.sample(["a", "b", "c"], rng.randrange(0, 3))) for r in runs}
    got = pairs_of(runs, results)
    order = sorted((r for r in runs if results[r.id]), key=lambda i: (i.started, i.id))
    for k, info in enumerate(order):
        mine = results[info.id]
        before = [r.id for r in reversed(order[:k]) if mine & results[r.id]][:PARTNERS]
        after = [r.id for r in order[k + 1 :] if mine & results[r.id]][:PARTNERS]
        assert got[info.id] == list(reversed(before)) + after
