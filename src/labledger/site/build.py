"""``build_site``: a folder that opens from ``file://`` and shows every run, batch, sample and
evaluation of a ledger.

Layout (seed 004, extended to many runs)::

    OUT/index.html run.html batches.html eval.html test.html     pages (no data inside)
    OUT/static/...                                              scripts, styles, vendored uPlot
    OUT/data/catalog.js, data/catalog/<k>.js                    every run of the site (site/catalog.py)
    OUT/data/runs/<run>.js                                      config, curves, history, ...
    OUT/data/batches/<run>/<index>.js, toc.js, loss.js          microbatches, loaded on demand
    OUT/data/evals/<run>/<name>.js (+ <name>.logits.js)         evaluation pages
    OUT/data/tests/<run>/<name>.js, <name>/<part>.js            test breakdowns (cells grid)
    OUT/data/compare.js                                         version tables, comparisons, groups
    OUT/data/curves/<run>.js                                    multi-resolution scalar summaries
    OUT/data/curves/<run>/<k>.js, <k>/<level>-<chunk>.js        a long run's: per scalar and chunk
    OUT/data/diff/<run>.js                                      what ``labledger diff`` compares
    OUT/data/diff/<run>.paired.js                               its paired comparisons (site/pairs.py)
    OUT/images/<run>/<path under the run's files/>              images the samples refer to
    OUT/.labledger-site.json                                    manifest for incremental builds

Pages read their data with ``<script>`` tags (no fetch, no server, no network) and build the DOM
with ``textContent``, so every string from a run shows as text.
"""

from __future__ import annotations

import hashlib
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import DamagedLineWarning, LedgerError, SiteError
from labledger.site.batches import CHUNK_BYTES, CHUNK_RECORDS, ImageIndex, write_batches
from labledger.site.breakdown import breakdown_summaries, write_breakdown
from labledger.site.catalog import CATALOG_CHUNK, HEAD, catalog_files, chunk_bounds, chunk_path
from labledger.site.comparisons import PairedTestCache, compare_payload
from labledger.site.curves import write_curves
from labledger.site.evaluations import eval_names, eval_payload, eval_summary
from labledger.site.output import FORMAT, SiteWriter
from labledger.site.pairs import write_paired
from labledger.site.rundata import media_refs, run_basics, run_payload
from labledger.store.compressed import record_state
from labledger.store.index import change_rows
from labledger.store.ledger import Ledger, RunInfo
from labledger.store.run import check_name
from labledger.store.view import RunView

PACKAGE = Path(__file__).resolve().parent
STATIC = PACKAGE / "static"
TEMPLATES = PACKAGE / "templates"

#: The pages: file, template, title, whether it draws charts.
PAGES = (
    ("index.html", "catalog", "Runs", False),
    ("run.html", "run", "Run", True),
    ("batches.html", "batches", "Microbatches", False),
    ("eval.html", "eval", "Evaluation", True),
    ("test.html", "test", "Test breakdown", False),
    ("compare.html", "compare", "Comparisons", False),
    ("lineage.html", "lineage", "Lineage", False),
    ("curves.html", "curves", "Curves", True),
    ("hparams.html", "hparams", "Hyperparameters", False),
    ("diff.html", "diff", "Diff", False),
)
#: What a run folder that cannot be read raises while its pages are built (the run is left out and
#: the build says why); any other error is the builder's own bug, and raised.
_UNREADABLE = (LedgerError, OSError)


@dataclass
class SiteBuild:
    """What :func:`build_site` did.

    ``written`` are the files (re)written by this build, ``unchanged`` the number of files that
    already had the right content, ``removed`` the files of a previous build that are gone now.
    """

    out: Path
    index: Path
    runs: list[str]
    written: list[Path] = field(default_factory=list)
    unchanged: int = 0
    removed: list[Path] = field(default_factory=list)
    rebuilt_runs: list[str] = field(default_factory=list)
    skipped_runs: list[str] = field(default_factory=list)
    bytes_written: int = 0
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    #: the catalog's ``comparisons`` (what :func:`labledger.site.catalog.catalog_files` takes;
    #: ``labledger serve`` composes its catalog from the index with it)
    comparisons: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "index": str(self.index),
            "runs": self.runs,
            "written": [str(p) for p in self.written],
            "n_written": len(self.written),
            "unchanged": self.unchanged,
            "removed": [str(p) for p in self.removed],
            "rebuilt_runs": self.rebuilt_runs,
            "skipped_runs": self.skipped_runs,
            "bytes_written": self.bytes_written,
            "elapsed_s": self.elapsed_s,
            "warnings": self.warnings,
        }


def builder_fingerprint() -> str:
    """A hash of labledger's code (the builder, its templates and static files, and what the pages
    are computed with: the evaluation, the metrics, the readers, the schema the data dictionary page
    is made from) and of the version the pages show: a changed labledger rebuilds all, so no page
    keeps what an earlier one computed."""
    from labledger import __version__

    h = hashlib.sha256(f"format {FORMAT} {__version__}".encode())
    root = PACKAGE.parent
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".html", ".js", ".css") and "__pycache__" not in path.parts:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _render_pages() -> dict[str, bytes]:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    from labledger import __version__

    out = {}
    for filename, page, title, charts in PAGES:
        template = env.get_template(f"{page}.html")
        out[filename] = template.render(page=page, title=title, charts=charts, version=__version__).encode()
    return out


def _static_files() -> list[tuple[str, Path]]:
    return [
        (f"static/{p.relative_to(STATIC).as_posix()}", p)
        for p in sorted(STATIC.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    ]


def shell_paths() -> list[str]:
    """The paths of :func:`shell_files`, without making them."""
    return [p[0] for p in PAGES] + ["dictionary.html"] + [rel for rel, _ in _static_files()]


def shell_files() -> dict[str, bytes | Path]:
    """The site's files that hold no data (its pages and ``static/``), by path in the site: the bytes
    of a rendered page, the source of a static file. :func:`build_site` writes these first; ``labledger
    serve`` answers them from here before its first build has written them."""
    from labledger.site.dictionary import dictionary_page

    out: dict[str, bytes | Path] = dict(_render_pages())
    out["dictionary.html"] = dictionary_page()
    out.update(_static_files())
    return out


def _select_runs(ledger: Ledger, runs: list[str] | tuple[str, ...] | None, group: str | None) -> list[RunInfo]:
    infos = ledger.runs(group=group)
    if runs:
        wanted = [ledger.resolve(r) for r in runs]
        by_id = {i.id: i for i in infos}
        missing = [w for w in wanted if w not in by_id]
        if missing:
            raise SiteError(
                f"run {missing[0]} is not in group '{group}'"
                if group
                else f"run {missing[0]} is not in the ledger index"
            )
        infos = [by_id[w] for w in dict.fromkeys(wanted)]  # first occurrence of each, in order
    return infos


def _safe_name(name: str) -> bool:
    """Whether ``name`` (a run id, an evaluation or test folder) can name files of the site."""
    try:
        check_name(name)
    except LedgerError:
        return False
    return True


def _record_line(h: Any, rel: str, path: Path) -> None:
    """The size and mtime of a record file in either form (compacting it changes no signature)."""
    state = record_state(path)
    if state is not None:
        h.update(f"{rel}\0{state[0]}\0{state[1]}\n".encode())


@dataclass
class _Folder:
    """A run folder's files (``os.scandir``, strings: pathlib's cost per file was most of a
    rebuild's) as ``(path relative to the folder, size, mtime ns)``, sorted by path; ``odd``: it
    holds a link to a folder (not walked), so what its listing says is not the whole story."""

    path: str
    files: list[tuple[str, int, int]]
    odd: bool = False

    def names(self) -> set[str]:
        return {f[0] for f in self.files}

    def evals_with(self, name: str) -> set[str]:
        """The folders ``evals/<x>/`` that hold a file ``name``."""
        out = set()
        for rel, _, _ in self.files:
            parts = rel.split("/")
            if len(parts) == 3 and parts[0] == "evals" and parts[2] == name:
                out.add(parts[1])
        return out


def _walk(run_dir: str) -> _Folder:
    """Every file under ``run_dir`` but ``.lock`` files (what ``Path.rglob`` listed: links to
    files are followed, links to folders are not walked)."""
    folder = _Folder(run_dir, [])
    stack = [("", run_dir)]
    while stack:
        prefix, path = stack.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((rel + "/", entry.path))
                    continue
                if entry.is_symlink() and entry.is_dir():
                    folder.odd = True
                    continue
                if entry.name == ".lock" or not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue
            folder.files.append((rel, st.st_size, st.st_mtime_ns))
    folder.files.sort(key=lambda f: f[0].split("/"))
    return folder


def _signatures(folder: _Folder, info: RunInfo, fingerprint: str, chunking: tuple[int, int]) -> tuple[str, str]:
    """(run signature, batches signature) from the run's files' sizes and mtimes and its index row."""
    run_h = hashlib.sha256(fingerprint.encode())
    run_h.update(orjson.dumps(_index_row(info), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS))
    files_h = hashlib.sha256()
    batches = False
    for rel, size, mtime in folder.files:
        if rel in ("batches.jsonl", "batches.jsonl.zst"):
            batches = True
            continue
        if rel.endswith(".jsonl.zst") and "/" not in rel:  # a compacted record file: as its JSONL
            _record_line(run_h, rel[: -len(".zst")], Path(folder.path, rel[: -len(".zst")]))
            continue
        line = f"{rel}\0{size}\0{mtime}\n".encode()
        run_h.update(line)
        if rel.startswith("files/"):
            files_h.update(line)
    batch_h = hashlib.sha256(f"{fingerprint}\0{chunking}\0{files_h.hexdigest()}".encode())
    if batches:
        _record_line(batch_h, "batches.jsonl", Path(folder.path, "batches.jsonl"))
    run_h.update(batch_h.digest())
    return run_h.hexdigest(), batch_h.hexdigest()


def quick_keys(book: Ledger, infos: list[RunInfo], runs_root: str, salt: str) -> dict[str, str]:
    """Each run's *quick key*: what a rebuild compares to tell, without looking into the run's folder,
    that the run did not change since the last build. It hashes the run's index row (every column a
    write through labledger changes: status, times, summary, query fields, ``updated``; its tags),
    the (name, kind, time) of each document stored for it (``save_evaluation``), one ``stat`` of its
    folder (its modification time changes when a file is added, removed or replaced in it, as
    ``run.json`` is at the end of a run) and ``salt`` (the builder's fingerprint and settings). A run
    whose quick key is the one recorded by the last build is carried over from the manifest without
    being read (see :func:`build_site`)."""
    rows, stored = change_rows(book)
    out = {}
    sha256 = hashlib.sha256
    for info in infos:
        try:
            st = os.stat(os.path.join(runs_root, info.id))
            folder: Any = (st.st_mtime_ns, st.st_ino, st.st_dev)
        except OSError:
            folder = None
        docs = sorted(stored.get(info.id, ()))
        text = f"{rows.get(info.id)!r}\0{info.tags!r}\0{docs!r}\0{folder!r}\0{salt}"
        out[info.id] = sha256(text.encode()).hexdigest()
    return out


def _index_row(info: RunInfo) -> list[Any]:
    """The columns of a run's index row a page shows (not :meth:`RunInfo.to_dict`'s clock)."""
    return [
        info.id,
        info.name,
        info.group,
        info.tags,
        info.status,
        info.started,
        info.ended,
        info.host,
        info.pid,
        info.git_commit,
        info.git_dirty,
        info.error,
        info.summary,
    ]


def build_site(
    ledger: Ledger | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    runs: list[str] | tuple[str, ...] | None = None,
    group: str | None = None,
    full: bool = False,
    chunk_records: int = CHUNK_RECORDS,
    chunk_bytes: int = CHUNK_BYTES,
    catalog_chunk: int = CATALOG_CHUNK,
    on_run: Callable[[RunInfo, RunPages], None] | None = None,
) -> SiteBuild:
    """Build (or update) the static site of ``ledger`` in the folder ``out``.

    ``runs`` (ids, unique id prefixes or names) and ``group`` choose the runs; by default every run.
    Files whose content did not change are not rewritten. ``out`` must be new, empty, or a site
    built before (it is never cleared otherwise).

    What a rebuild reads: a run that is not running and whose :func:`quick_keys` key (its index
    row, its stored documents, one ``stat`` of its folder) is the one the last build recorded is
    carried over from the manifest, its files trusted to be there; any other run's folder is listed
    (sizes and modification times of every file) and the run is read again only if that listing
    changed. ``full``: every run's folder is listed, and every file of the last build is checked
    (one that is missing or of another size is written again): for a change made by hand that the
    quick key does not see (a file edited in place, or inside a subfolder of a finished run), or a
    file removed from the site.

    A run whose folder cannot be read (no ``run.json``, a corrupt line inside a JSONL file, ...)
    does not stop the build: its pages are left out, ``warnings`` names the run and the error, and
    the catalog lists it as "could not be read: <reason>".

    The runs are built in the index's order (newest first); ``on_run(info, pages)`` is called as each
    run's files are in ``out`` (``labledger serve`` answers them from there before the build ends).
    ``catalog_chunk``: runs per catalog chunk (:mod:`labledger.site.catalog`).

    >>> import tempfile, pathlib, labledger
    >>> d = tempfile.mkdtemp()
    >>> with labledger.start_run("demo", ledger=d) as run:
    ...     run.log(1, loss=0.5)
    >>> site = build_site(d, pathlib.Path(d) / "site")
    >>> site.index.name, len(site.runs)
    ('index.html', 1)
    """
    started = time.perf_counter()
    owns = not isinstance(ledger, Ledger)
    book = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    out_path = Path(out)
    try:
        infos = _select_runs(book, runs, group)
        writer = SiteWriter(out_path)
        out_path.mkdir(parents=True, exist_ok=True)
        fingerprint = builder_fingerprint()
        chunking = (chunk_records, chunk_bytes)
        result = SiteBuild(out=out_path, index=out_path / "index.html", runs=[])
        same_builder = writer.old.get("fingerprint") == fingerprint
        if full or not same_builder or not writer.carry(shell_paths()):
            for rel, content in shell_files().items():
                if isinstance(content, bytes):
                    writer.write(rel, content)
                else:
                    writer.copy(rel, content)
        catalog_runs = []
        readable: dict[str, Path] = {}
        listings: dict[str, dict[str, Any]] = {}
        runs_root = str(book.run_dir("x").parent)
        keys = quick_keys(book, infos, runs_root, f"{fingerprint}\0{chunking}")
        for info in infos:
            built = _carried(writer, info, keys[info.id], runs_root, result) if not full else None
            if built is None:
                built = build_run(
                    writer,
                    book,
                    info,
                    result,
                    fingerprint=fingerprint,
                    chunking=chunking,
                    runs_root=runs_root,
                    quick=keys[info.id],
                )
            if built is None:
                continue
            catalog_runs.append(built.catalog)
            if built.readable:
                result.runs.append(info.id)
                readable[info.id] = built.path
                listings[info.id] = built.listing
            if on_run is not None:
                on_run(info, built)
        # what each readable run's listing says (a run with a link to a folder is looked at)
        plain = {rid: listing for rid, listing in listings.items() if not listing.get("odd")}
        paired_diffs = write_paired(
            writer.write_data,
            book,
            infos,
            readable,
            writer.old.get("paired_diffs") if same_builder else None,
            result.warnings,
            known_results={rid: listing["results"] for rid, listing in plain.items()},
        )
        paired = PairedTestCache(writer.old.get("paired_tests") if same_builder else None)
        holders = {rid for rid, listing in plain.items() if listing["comparisons"]} | (set(readable) - set(plain))
        compare = compare_payload(book, infos, readable, paired, result.warnings, holders=holders)
        writer.write_data("data/compare.js", "compare", compare)
        every = runs is None and group is None
        lineage_key = _write_lineage(
            writer, book, infos, readable, keys, result, fingerprint=fingerprint, every=every, full=full
        )
        result.comparisons = {
            "tables": [t["suite"] for t in compare["tables"]],
            "documents": len(compare["comparisons"]),
            "groups": [g["group"] for g in compare["groups"]],
        }
        catalog_cache = _write_catalog(
            writer, book, catalog_runs, result.comparisons, fingerprint=fingerprint, chunk=catalog_chunk, full=full
        )
        writer.save(
            {
                "fingerprint": fingerprint,
                "paired_tests": paired.new,
                "paired_diffs": paired_diffs,
                "catalog": catalog_cache,
                "lineage": lineage_key,
            }
        )
        result.written = [out_path / rel for rel in writer.written]
        result.unchanged = len(writer.unchanged)
        result.removed = [out_path / rel for rel in writer.removed]
        result.bytes_written = writer.bytes_written
        result.elapsed_s = time.perf_counter() - started
        return result
    finally:
        if owns:
            book.close()


def _write_lineage(
    writer: SiteWriter,
    book: Ledger,
    infos: list[RunInfo],
    readable: dict[str, Path],
    keys: dict[str, str],
    result: SiteBuild,
    *,
    fingerprint: str,
    every: bool,
    full: bool,
) -> str | None:
    """Write ``data/lineage.js`` unless what it is made of is what the last build made it of (kept
    then, unless ``full``): the site's runs and every run of the index (their quick keys and
    signatures), the index's checkpoints and starting points, and the size and modification time of
    each checkpoint file (the page marks a file changed since it was logged). Returns that key."""
    from labledger.site.lineage import lineage_payload
    from labledger.store.index import checkpoint_rows, init_rows

    h = hashlib.sha256(f"{fingerprint}\0{every}\n".encode())
    for info in infos:
        sig = writer.runs.get(info.id, {}).get("sig") if info.id in readable else "-"
        h.update(f"{info.id}\0{keys.get(info.id)}\0{sig}\n".encode())
    runs_root = str(book.run_dir("x").parent)
    for row in checkpoint_rows(book):
        try:
            st = os.stat(os.path.join(runs_root, row[0], row[2]))  # (a path inside the run, or absolute)
            found: Any = (st.st_size, st.st_mtime_ns)
        except (OSError, TypeError, ValueError):
            found = None
        h.update(f"{row!r}\0{found!r}\n".encode())
    for start in init_rows(book):
        h.update(f"{start!r}\n".encode())
    key = h.hexdigest()
    if not full and writer.old.get("lineage") == key and writer.carry(["data/lineage.js"]):
        return key
    try:
        facts = {rid: writer.runs[rid]["lineage"] for rid in readable if "lineage" in writer.runs.get(rid, {})}
        listed = infos if every else None  # (the whole ledger, listed)
        writer.write_data(
            "data/lineage.js", "lineage", lineage_payload(book, list(readable), infos=listed, facts=facts)
        )
    except _UNREADABLE as exc:  # the lineage page says so; the rest of the site stands
        result.warnings.append(f"the lineage page could not be built: {exc}")
        writer.write_data("data/lineage.js", "lineage", {"nodes": [], "edges": [], "trajectory": []})
        return None
    return key


def _carried(writer: SiteWriter, info: RunInfo, quick: str, runs_root: str, result: SiteBuild) -> RunPages | None:
    """The pages of a run carried over from the last build, its files trusted to be there, when the
    run is not running and its quick key is the one recorded then; else None (it is looked at)."""
    old = writer.old_runs.get(info.id)
    if (
        info.status == "running"
        or not old
        or old.get("quick") != quick
        or "lineage" not in old
        or "listing" not in old
        or not writer.carry(old.get("outputs", []))
    ):
        return None
    writer.runs[info.id] = old
    result.skipped_runs.append(info.id)
    path = info.dir if info.dir is not None else Path(runs_root, info.id)
    return RunPages(old["catalog"], path, old["listing"], True, old.get("outputs", []))


def _write_catalog(
    writer: SiteWriter,
    book: Ledger,
    catalog_runs: list[dict[str, Any]],
    comparisons: dict[str, Any],
    *,
    fingerprint: str,
    chunk: int,
    full: bool,
) -> dict[str, Any]:
    """Write the catalog's head and the chunks whose runs changed (a chunk whose runs have the quick
    keys and signatures recorded with it, and whose file is there, is kept without being composed);
    returns what the manifest keeps of it."""
    old = writer.old.get("catalog") if writer.old.get("fingerprint") == fingerprint else None
    old_keys = (old or {}).get("keys") or []
    old_summaries = (old or {}).get("summaries") or []
    keys: list[str | None] = []
    for start, stop in chunk_bounds(len(catalog_runs), chunk):
        h: Any = hashlib.sha256(f"{fingerprint}\0{chunk}".encode())
        for entry in catalog_runs[start:stop]:
            kept = writer.runs.get(entry["id"])
            if kept is None or "unreadable" in entry:
                h = None
                break
            h.update(f"{entry['id']}\0{kept.get('quick')}\0{kept.get('sig')}\n".encode())
        keys.append(h.hexdigest() if h is not None else None)
    kept_chunks: dict[int, dict[str, Any]] = {}
    for k, key in enumerate(keys):
        if key is None or k >= len(old_keys) or old_keys[k] != key or k >= len(old_summaries):
            continue
        if (writer.keep if full else writer.carry)([chunk_path(k)]):
            kept_chunks[k] = old_summaries[k]
    catalog = catalog_files(book, catalog_runs, comparisons, chunk=chunk, kept=kept_chunks)
    writer.write(HEAD, catalog.head)
    for k, data in catalog.chunks.items():
        writer.write(chunk_path(k), data)
    return {"keys": keys, "summaries": catalog.summaries}


def _short(reason: str, run_dir: Path) -> str:
    """``reason`` with the run folder's path written relative to the ledger (the site is shared)."""
    rel = f"runs/{run_dir.name}"
    return reason.replace(str(run_dir) + os.sep, "").replace(str(run_dir), rel)


@dataclass
class RunPages:
    """What :func:`build_run` made of one run: its catalog entry, its folder, what its folder's
    listing says (:func:`_listing`), whether it could be read (else the entry says why not), and the
    site files that hold its pages."""

    catalog: dict[str, Any]
    path: Path
    listing: dict[str, Any]
    readable: bool
    outputs: list[str]


def _listing(folder: _Folder) -> dict[str, Any]:
    """What the whole build needs of a run's listing (kept in the manifest with the run): the result
    sets it holds (``evals/<name>/results.jsonl``), whether it holds a comparison document, and
    whether it holds a link to a folder (then its listing is not the whole story)."""
    return {
        "results": sorted(folder.evals_with("results.jsonl")),
        "comparisons": bool(folder.evals_with("comparison.json")),
        "odd": folder.odd,
    }


def build_run(
    writer: SiteWriter,
    book: Ledger,
    info: RunInfo,
    result: SiteBuild,
    *,
    fingerprint: str | None = None,
    chunking: tuple[int, int] = (CHUNK_RECORDS, CHUNK_BYTES),
    runs_root: str | None = None,
    quick: str | None = None,
) -> RunPages | None:
    """Write the pages of one run (``data/runs/<id>.js``, its evaluations, tests, batches, curves,
    diff side and images) with ``writer``: what :func:`build_site` does for each run, and what
    ``labledger serve`` does for a run whose pages its build has not reached. The run's folder is
    listed; a run whose listing and index row are those the last build recorded is not read again
    (its files are checked to be there). A run that cannot be read is left out (``result.warnings``
    says why; its entry says ``unreadable``); None for a run whose id cannot name a file. ``quick``:
    the run's :func:`quick_keys` key, recorded with it."""
    if not _safe_name(info.id):
        result.warnings.append(f"run id {info.id!r} is not a safe file name; left out")
        return None
    if fingerprint is None:
        fingerprint = builder_fingerprint()
    if runs_root is None:
        runs_root = str(book.run_dir("x").parent)
    folder = _walk(os.path.join(runs_root, info.id))
    run_dir = Path(folder.path)
    if "run.json" not in folder.names():
        reason = f"its folder {run_dir} is missing or has no run.json"
        result.warnings.append(f"run {info.id} ({info.name}) is in the index but {reason}; left out")
        return RunPages({**run_basics(info), "unreadable": _short(reason, run_dir)}, run_dir, {}, False, [])
    mark = writer.mark()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DamagedLineWarning)
            entry = _build_run(writer, book, info, folder, fingerprint, chunking, result)
            entry["quick"], entry["listing"] = quick, _listing(folder)
        for w in caught:  # a damaged line is skipped, the run is built, and the build says where
            if issubclass(w.category, DamagedLineWarning):
                result.warnings.append(f"run {info.id} ({info.name}): {w.message}")
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    except _UNREADABLE as exc:
        reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, LedgerError) else str(exc)
        result.warnings.append(f"run {info.id} ({info.name}) could not be read; its pages are left out: {reason}")
        writer.forget_since(mark)
        writer.runs.pop(info.id, None)
        if info.id in result.rebuilt_runs:
            result.rebuilt_runs.remove(info.id)
        return RunPages({**run_basics(info), "unreadable": _short(reason, run_dir)}, run_dir, {}, False, [])
    return RunPages(entry["catalog"], run_dir, entry["listing"], True, list(entry.get("outputs", [])))


def _build_run(
    writer: SiteWriter,
    ledger: Ledger,
    info: RunInfo,
    folder: _Folder,
    fingerprint: str,
    chunking: tuple[int, int],
    result: SiteBuild,
) -> dict[str, Any]:
    run_id = info.id
    sig, batch_sig = _signatures(folder, info, fingerprint, chunking)
    old = writer.old_runs.get(run_id)
    if old and old.get("sig") == sig and "lineage" in old and writer.keep(old.get("outputs", [])):
        writer.runs[run_id] = old
        result.skipped_runs.append(run_id)
        return old
    view = RunView(ledger, info)  # ``info`` is the index row just listed: no second look-up
    result.rebuilt_runs.append(run_id)
    mark = writer.mark()
    images = ImageIndex(view.dir / "files")
    batches_path = view.dir / "batches.jsonl"
    batch_summary = None
    batch_images: list[str] = []
    batch_outputs: list[str] = []
    if (record_state(batches_path) or [0])[0] != 0:
        if (
            old
            and old.get("batch_sig") == batch_sig
            and old.get("batches") is not None
            and writer.keep(old.get("batch_outputs", []))
        ):
            batch_summary = old["batches"]
            batch_images = old.get("batch_images", [])
            batch_outputs = old.get("batch_outputs", [])
        else:
            bmark = writer.mark()
            index = write_batches(
                writer, run_id, batches_path, images, chunk_records=chunking[0], chunk_bytes=chunking[1]
            )
            toc = index.toc(run_id)
            batch_summary = {k: v for k, v in toc.items() if k != "chunks"}
            batch_summary["chunks"] = len(index.chunks)
            batch_images = images.found()
            batch_outputs = writer.produced_since(bmark)
        if not batch_summary.get("count"):
            batch_summary = None
    evaluations = []
    for name in eval_names(view):
        if not _safe_name(name):
            result.warnings.append(f"run {run_id}: evaluation folder {name!r} left out (unsafe name)")
            continue
        payload, logits = eval_payload(view, name)
        if logits is not None:
            writer.write_data(f"data/evals/{run_id}/{name}.logits.js", f"evals/{run_id}/{name}/logits", logits)
        writer.write_data(f"data/evals/{run_id}/{name}.js", f"evals/{run_id}/{name}", payload)
        evaluations.append(eval_summary(payload))
    tests = []
    for name, summary in breakdown_summaries(view).items():
        if not _safe_name(name):
            result.warnings.append(f"run {run_id}: test folder {name!r} left out (unsafe name)")
            continue
        tests.append(write_breakdown(writer, view, name, summary, images))
    curves = write_curves(writer, run_id, view.scalars, info.started)
    payload = run_payload(view, info, batches=batch_summary, evaluations=evaluations, tests=tests, curves=curves)
    for ref in sorted(set(batch_images) | set(images.found()) | set(media_refs(payload))):
        writer.copy(f"images/{run_id}/{ref}", view.dir / "files" / ref)
    writer.write_data(f"data/runs/{run_id}.js", f"runs/{run_id}", payload)
    from labledger.analysis.rundiff import run_sides

    writer.write_data(
        f"data/diff/{run_id}.js", f"diff/{run_id}", {"id": run_id, "name": info.name, **run_sides(ledger, view)}
    )
    catalog = {
        **run_basics(info),
        "batches": batch_summary["count"] if batch_summary else 0,
        "samples": batch_summary["samples"] if batch_summary else 0,
        "evaluations": [e["name"] for e in evaluations],
        "tests": [t["name"] for t in tests],
        "history": len(payload["history"]),
        "checkpoints": len(payload["checkpoints"]),
        "scalars": curves.names,
    }
    from labledger.analysis.lineage import run_facts

    entry = {
        "sig": sig,
        "lineage": run_facts(ledger, view),
        "batch_sig": batch_sig,
        "batches": batch_summary,
        "batch_images": batch_images,
        "batch_outputs": batch_outputs,
        "outputs": writer.produced_since(mark),
        "catalog": catalog,
    }
    writer.runs[run_id] = entry
    return entry
