"""The diff view's paired comparisons of result sets, precomputed at build time (#12).

``labledger diff A B`` compares the result sets both runs stored through :func:`labledger.compare`
(a paired bootstrap when the items match). The static site cannot run a bootstrap in the page, so
the builder runs the same comparisons (:func:`labledger.analysis.rundiff.run_comparisons`) for the
pairs of runs one is likely to diff, and writes them per run::

    OUT/data/diff/<run>.paired.js    {"id": run, "partners": {<other run>: [comparisons, as A = run]}}

Comparing every pair is quadratic (10,000 runs would be 10^8 bootstraps), so the pairs are the
runs of the same group (or, without a group, of the same name: reruns and seeds) that share a
result set name, each run with its :data:`PARTNERS` nearest by start time on each side. The diff
view of any other pair says that its comparison was not precomputed and gives the command. Every
comparison is kept in the build manifest keyed by both runs' result files (size and mtime), so a
rebuild runs only the comparisons of result sets that changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

import orjson

from labledger.store.ledger import Ledger, RunInfo
from labledger.store.view import RunView

#: Partners of a run on each side (older and newer) within its group or name.
PARTNERS = 2
#: The bootstrap resamples of each comparison (``labledger diff``'s default).
RESAMPLES = 1000


def pairs_of(infos: list[RunInfo], results: dict[str, set[str]]) -> dict[str, list[str]]:
    """For each run with a result set, the runs whose comparisons with it are precomputed.

    >>> from types import SimpleNamespace as R
    >>> runs = [R(id=f"r{i}", group="g", name="x", started=float(i)) for i in range(5)]
    >>> pairs_of(runs, {f"r{i}": {"test"} for i in range(5)})["r2"]
    ['r0', 'r1', 'r3', 'r4']
    """
    buckets: dict[str, list[RunInfo]] = {}
    for info in infos:
        if results.get(info.id):
            key = f"group\0{info.group}" if info.group else f"name\0{info.name}"
            buckets.setdefault(key, []).append(info)
    out: dict[str, list[str]] = {}
    for runs in buckets.values():
        runs.sort(key=lambda i: (i.started or 0.0, i.id))
        for k, info in enumerate(runs):
            mine = results[info.id]
            # the nearest PARTNERS on each side, looked for lazily (a list of every older and newer
            # run of the bucket per run was quadratic in the bucket's size)
            before = list(islice((r for r in _down(runs, k) if mine & results[r.id]), PARTNERS))
            after = list(islice((r for r in _up(runs, k) if mine & results[r.id]), PARTNERS))
            out[info.id] = [r.id for r in reversed(before)] + [r.id for r in after]
    return out


def _down(runs: list[RunInfo], k: int) -> Iterator[RunInfo]:
    for j in range(k - 1, -1, -1):
        yield runs[j]


def _up(runs: list[RunInfo], k: int) -> Iterator[RunInfo]:
    for j in range(k + 1, len(runs)):
        yield runs[j]


def _files_key(view: RunView, names: list[str]) -> list[Any]:
    out: list[Any] = []
    for name in names:
        path = view.results_path(name)
        try:
            st = path.stat()
            out.append([name, st.st_size, st.st_mtime_ns])
        except OSError:
            out.append([name, None, None])
    return out


def write_paired(
    write: Callable[[str, str, Any], Any],
    book: Ledger,
    infos: list[RunInfo],
    readable: dict[str, Any],
    old: dict[str, Any] | None,
    warnings: list[str],
    *,
    known_results: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Write ``data/diff/<run>.paired.js`` for every readable run with a result set; returns the
    comparisons computed or reused (the manifest keeps them for the next build).
    ``known_results``: the result set names of runs, where the caller has listed their folders
    (the others are looked at here).

    >>> import tempfile, labledger
    >>> d = tempfile.mkdtemp()
    >>> for flip in (2, 3):
    ...     with labledger.start_run(f"r{flip}", group="g", ledger=d) as run:
    ...         rows = [{"id": f"x{i}", "task": "t", "gold": i % 2, "pred": int(i % flip == 0)} for i in range(30)]
    ...         _ = run.log_results("test", rows)
    >>> book, files = labledger.open_ledger(d), {}
    >>> infos = book.runs()
    >>> kept = write_paired(lambda rel, key, doc: files.update({rel: doc}), book, infos, {i.id: 1 for i in infos}, None, [])
    >>> len(kept), sorted(len(doc["partners"]) for doc in files.values())
    (2, [1, 1])
    """
    from labledger.analysis.rundiff import run_comparisons

    cache = old if isinstance(old, dict) else {}
    new: dict[str, Any] = {}
    known = known_results or {}
    mine = {i.id: i for i in infos if i.id in readable}
    views: dict[str, RunView] = {}  # made when needed: most runs have no result set

    def view_of(rid: str) -> RunView:
        if rid not in views:
            views[rid] = RunView(book, mine[rid])
        return views[rid]

    results: dict[str, set[str]] = {}
    for rid in mine:
        if rid in known:
            results[rid] = set(known[rid])
            continue
        try:
            results[rid] = set(view_of(rid).results_names())
        except OSError as exc:
            warnings.append(f"run {rid}: its result sets could not be listed: {exc}")
    for rid, partners in pairs_of(list(mine.values()), results).items():
        a = view_of(rid)
        payload: dict[str, Any] = {"id": rid, "resamples": RESAMPLES, "partners": {}}
        for other in partners:
            b = view_of(other)
            shared = sorted(results[rid] & results[other])
            key = hashlib.sha256(
                orjson.dumps([rid, other, RESAMPLES, _files_key(a, shared), _files_key(b, shared)])
            ).hexdigest()
            if key in cache:
                new[key] = cache[key]
            elif key not in new:
                new[key] = run_comparisons(a, b, resamples=RESAMPLES)
            payload["partners"][other] = new[key]
        write(f"data/diff/{rid}.paired.js", f"diff/{rid}/paired", payload)
    return new
