"""What the evaluation-harness importers share: per-item rows, result sets with the harness's numbers.

Each harness importer (:mod:`~labledger.importers.lm_eval`, :mod:`~labledger.importers.inspect_log`,
:mod:`~labledger.importers.lighteval`, :mod:`~labledger.importers.helm`) turns one harness
invocation into one run per model, and each task (and lm-eval filter) into one result set. Inside a
result set there is one labledger *task* per harness metric, named after it (``acc``,
``acc_norm``, ``exact_match``, ``f1``, an inspect scorer...), with rows of one of three shapes:

- **choices** (classification): ``probs`` over the choice indices ``"0"..."K-1"``, the softmax of
  the per-choice log-likelihoods (``acc``) or of the length-normalised ones (``acc_norm``);
  ``loglik`` keeps the raw log-likelihoods. Recomputed with ``accuracy``.
- **labels** (match): ``gold`` and ``pred`` labels of a corpus metric that lm-eval stores per sample
  as ``[gold, pred]`` (``f1``, ``mcc``). Recomputed with ``f1`` / ``mcc`` over the items.
- **scores** (regression): ``pred`` is the per-item score the harness gave (epochs already reduced
  to their mean), ``gold`` the best score (1). Recomputed with ``mean``.

Every row keeps ``item_hash`` (the harness's document identity: ``labledger compare`` refuses to
pair two items whose hashes differ), ``prompt``, ``target``, ``prediction`` where the harness
records them, and ``group`` when a cluster field is known. The result set's ``meta.json`` holds
``harness``: the harness's name and version, the task, and per metric the value and standard error
the harness reported and the labledger metric that recomputes it (see
:mod:`labledger.analysis.harness`).

>>> rows = choice_rows(["d0"], [[-1.0, -2.0]], [0], task="acc")
>>> rows[0]["probs"]["0"] > rows[0]["probs"]["1"], rows[0]["gold"]
(True, '0')
"""

from __future__ import annotations

import gc
import hashlib
import math
import os
import pickle
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from labledger.errors import ImportSourceError, LedgerError, RecordError
from labledger.importers.source import ImportedRun, ImportOptions, Source, finish_import, load_json, new_run
from labledger.inputs.result_columns import ResultColumns
from labledger.machine import cores
from labledger.store.jsonl import atomic_write
from labledger.store.ledger import Ledger
from labledger.store.run import result_rows_bytes, result_set_bytes

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

#: ``(value, n, stderr)`` of a harness metric recomputed from a set's rows at import (the stderr
#: as the harness forms it, None when it has none), for what the harness aggregates across tasks.
ItemMean = tuple[float, int, float | None]
#: The labledger metric that recomputes each row shape.
SHAPE_METRIC = {"choices": "accuracy", "scores": "mean"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: ``results_<timestamp>.json``: the results file lm-eval and lighteval both write per invocation.
_CHOICE_KEYS = [str(i) for i in range(64)]
RESULTS_NAME = re.compile(r"^results_(.+)\.json$")


def results_stamp(results: Path) -> str:
    """The ``<timestamp>`` of a ``results_<timestamp>.json`` file name.

    >>> results_stamp(Path("out/results_2026-12-01T00-00-00.json"))
    '2026-12-01T00-00-00'
    """
    m = RESULTS_NAME.match(results.name)
    if m is None:
        raise RecordError("must be results_<timestamp>.json", source=str(results), field="file name")
    return m.group(1)


def results_files(path: Path, markers: Sequence[bytes], *, head: int) -> list[Path]:
    """The ``results_<timestamp>.json`` files at ``path`` (the file itself, or those under the
    folder, searched recursively) whose first ``head`` bytes hold every one of ``markers`` (the keys
    that tell one harness's results from another's).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "results_1.json").write_text('{"n-shot": {}, "configs": {}}')
    >>> [p.name for p in results_files(d, (b'"n-shot"', b'"configs"'), head=1000)]
    ['results_1.json']
    """

    def matches(p: Path) -> bool:
        if not RESULTS_NAME.match(p.name):
            return False
        try:
            with open(p, "rb") as f:
                start = f.read(head)
        except OSError:
            return False
        return all(m in start for m in markers)

    if path.is_file():
        return [path] if matches(path) else []
    return sorted(p for p in path.rglob("results_*.json") if matches(p))


def read_results(path: Path) -> dict[str, Any]:
    """A harness's ``results_<timestamp>.json``: a JSON object whose ``results`` maps each task to
    its metrics (else :class:`RecordError` naming the file and the field)."""
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise RecordError("must map each task to its metrics", source=str(path), field="results")
    return data


@dataclass
class HarnessMetric:
    """One harness metric of one task: the rows that recompute it (row dicts, or the same rows as
    columns) and what the harness reported."""

    name: str
    shape: str
    rows: list[dict[str, Any]] | ResultColumns
    spec: str
    value: float | None = None
    stderr: float | None = None
    stderr_method: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def add_row(self, row: dict[str, Any]) -> None:
        """Add one row to a metric read row by row (not one built as columns)."""
        if isinstance(self.rows, ResultColumns):
            raise TypeError(f"metric {self.name!r} was built as columns")
        self.rows.append(row)


@dataclass
class HarnessTask:
    """One result set: a harness task (and filter) with its metrics."""

    name: str
    task: str
    metrics: list[HarnessMetric]
    info: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    #: ``{metric: (value, n, stderr)}`` recomputed from the rows at import, for what the harness
    #: aggregates across tasks (lm-eval's groups); not stored with the set.
    values: dict[str, ItemMean] = field(default_factory=dict)


def set_name(*parts: str) -> str:
    """A result-set name from a task (and filter): unsafe characters become ``_``, parts join with ``.``.

    >>> set_name("mmlu:abstract algebra", "strict-match")
    'mmlu_abstract_algebra.strict-match'
    """
    out = ".".join(_UNSAFE.sub("_", p).strip("._-") or "_" for p in parts if p)
    out = out.lstrip("._-") or "task"
    return out[:128]


def softmax(logliks: Sequence[float]) -> dict[str, float]:
    """``{"0": p0, "1": p1, ...}``: probabilities over choices from log-likelihoods.

    >>> softmax([0.0, 0.0])
    {'0': 0.5, '1': 0.5}
    """
    top = max(logliks)
    exp = math.exp
    ex = [exp(v - top) for v in logliks]
    total = math.fsum(ex)
    keys = _CHOICE_KEYS if len(ex) <= len(_CHOICE_KEYS) else [str(i) for i in range(len(ex))]
    return {k: e / total for k, e in zip(keys, ex)}


def choice_rows(
    ids: Sequence[str], logliks: Sequence[Sequence[float]], gold: Sequence[int], *, task: str
) -> list[dict[str, Any]]:
    """Classification rows over choice indices from per-choice log-likelihoods (see the module docs)."""
    return [
        {"id": i, "task": task, "gold": str(g), "probs": softmax(ll), "loglik": list(ll)}
        for i, ll, g in zip(ids, logliks, gold)
    ]


def score_row(item_id: str, task: str, value: float) -> dict[str, Any]:
    """A scores-shaped row: ``pred`` is the harness's per-item score, ``gold`` the best score (1)."""
    return {"id": item_id, "task": task, "gold": 1.0, "pred": float(value)}


def item_hash(*values: Any) -> str:
    """A short, stable hash of a document's content (for harnesses that record none).

    >>> item_hash("What is 1+1?", "2") == item_hash("What is 1+1?", "2")
    True
    """
    return hashlib.sha256(orjson.dumps(list(values), option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:32]


def as_float(v: Any) -> float | None:
    """A reported number as a float; ``None`` for ``"N/A"``, missing or non-finite values."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def harness_meta(harness: str, version: str | None, task: HarnessTask) -> dict[str, Any]:
    """The ``harness`` block of a result set's ``meta.json``."""
    return {
        "name": harness,
        "version": version,
        "task": task.task,
        **task.info,
        "metrics": {
            m.name: {
                "metric": m.spec,
                "shape": m.shape,
                "value": m.value,
                "stderr": m.stderr,
                "stderr_method": m.stderr_method,
                **m.extra,
            }
            for m in task.metrics
        },
    }


@dataclass
class EncodedSet:
    """A result set checked, encoded and written (to ``path``) by a worker process: what the run
    stores without reading it again (:meth:`labledger.Run.log_encoded_results`). ``error`` is the
    :class:`~labledger.errors.LedgerError` the serial path raises at this set (``name`` ``None``
    when the file failed before any set was named)."""

    name: str | None
    path: Path | None = None
    rows: int = 0
    sha256: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    error: LedgerError | None = None
    values: dict[str, ItemMean] = field(default_factory=dict)


def encode_task(task: HarnessTask, harness: str, version: str | None, path: Path) -> EncodedSet:
    """What :func:`store_harness_run` stores for ``task``, encoded and written to ``path`` (nothing
    written for a task without rows): the same bytes, from the same checks."""
    blocks = [m.rows for m in task.metrics if len(m.rows)]  # a metric recomputed at import has none
    n = sum(len(b) for b in blocks)
    out = EncodedSet(
        task.name,
        meta=harness_meta(harness, version, task),
        metrics=[m.name for m in task.metrics],
        files=task.files,
        info=task.info,
        values=task.values,
    )
    if n:
        columns = [b for b in blocks if isinstance(b, ResultColumns)]
        if len(columns) == len(blocks):
            data, out.rows = result_set_bytes(task.name, columns)
        else:
            rows = (r for b in blocks for r in (b.iter_rows() if isinstance(b, ResultColumns) else b))
            data, out.rows = result_rows_bytes(task.name, rows)
        atomic_write(path, data, fsync=False)  # fsynced by the adopt, as every staged result set
        out.path, out.sha256 = path, hashlib.sha256(data).hexdigest()
    return out


def portable_error(exc: LedgerError) -> LedgerError:
    """``exc`` if it survives pickling (to travel from a worker process), else a plain
    :class:`~labledger.errors.LedgerError` with the same one-line message.

    >>> str(portable_error(RecordError("must be a number", source="f.jsonl", line=3, field="x")))
    "f.jsonl:3: field 'x' must be a number"
    """
    try:
        back = pickle.loads(pickle.dumps(exc))
    except (pickle.PicklingError, TypeError, AttributeError):  # an __init__ that takes other arguments
        back = None
    if type(back) is type(exc) and str(back) == str(exc):
        return exc
    return (ImportSourceError if isinstance(exc, ImportSourceError) else LedgerError)(str(exc))


#: Worker processes of a large harness import: ``0`` (or ``1``) keeps it in one process, ``N``
#: uses N whatever the size, ``auto`` (the default) uses one per core (up to 8) from
#: :data:`PARALLEL_MIN_BYTES` of per-task files.
WORKERS_ENV = "LABLEDGER_IMPORT_WORKERS"
#: An import whose per-task files are smaller than this stays in one process (a pool would cost
#: more to start than it saves).
PARALLEL_MIN_BYTES = 8 << 20


def import_workers(sizes: Sequence[int]) -> int:
    """How many worker processes decode and encode an import's per-task files of ``sizes`` bytes
    (``0``: none, the serial path); see :data:`WORKERS_ENV`.

    >>> import_workers([100, 200])  # a small import: no pool to start
    0
    """
    raw = os.environ.get(WORKERS_ENV, "auto").strip().lower()
    if raw != "auto":
        try:
            wanted = int(raw)
        except ValueError:
            raise ImportSourceError(
                f"${WORKERS_ENV} must be a number of worker processes (0: none) or 'auto'; got {raw!r}"
            ) from None
        return min(wanted, len(sizes)) if wanted > 1 else 0
    usable = cores()
    if usable < 2 or len(sizes) < 2 or sum(sizes) < PARALLEL_MIN_BYTES:
        return 0
    return min(usable, len(sizes), 8)


def _worker_start() -> None:  # pragma: no cover - runs in the worker processes (coverage does not follow them)
    """In each worker: Ctrl-C is the importing process's to handle (it stops the pool), and the
    worker dies with that process (Linux), so a killed import leaves no worker behind."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):  # not Linux
        pass
    gc.disable()  # what the importing process does while it builds columns (see labledger.machine.paused_gc)


@contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """A pool of ``workers`` processes for an import (``None`` for 0: the serial path), shut down
    on exit, whatever happened, before the staging ledger the workers write into is removed.

    Workers are forked from the importing process (nothing to import again) when it runs no other
    thread, else started from a fork server (or spawned where there is none).

    >>> with worker_pool(0) as pool:
    ...     pool is None
    True
    """
    if workers < 1:
        yield None
        return
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        method = "fork"
    else:  # another thread could hold a lock a forked child would inherit
        method = "forkserver" if "forkserver" in methods else "spawn"
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method), initializer=_worker_start)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def pool_result(future: Future[list[EncodedSet]], path: Path) -> list[EncodedSet]:
    """A worker's result sets for the file at ``path``; a worker that died (a signal, out of
    memory) is an :class:`~labledger.errors.ImportSourceError`, and the import stores nothing."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool:
        raise ImportSourceError(
            f"{path}: a worker process of the import ended abruptly (killed by a signal, or out of memory) "
            "before this file's result sets were ready; nothing was imported"
        ) from None


def encode_tasks(
    read: Callable[..., list[HarnessTask]], args: tuple[Any, ...], harness: str, version: str | None, prefix: Path
) -> list[EncodedSet]:
    """In a worker process: the tasks ``read(*args)`` gives, each encoded and written to
    ``prefix.<i>.jsonl`` (:func:`encode_task`). A :class:`~labledger.errors.LedgerError` ends the
    list as the last set's ``error`` (no traceback crosses the process boundary; the importing
    process raises it where the serial path would)."""
    try:
        tasks = read(*args)
    except LedgerError as exc:
        return [EncodedSet(None, error=portable_error(exc))]
    out = []
    for i, t in enumerate(tasks):
        try:
            out.append(encode_task(t, harness, version, prefix.with_name(f"{prefix.name}.{i}.jsonl")))
        except LedgerError as exc:
            out.append(EncodedSet(t.name, error=portable_error(exc)))
            break
    return out


def task_error(exc: LedgerError, task: str) -> LedgerError:
    """``exc`` (a one-line error naming the file and the field) with the task it left out named
    too; a :class:`~labledger.errors.RecordError` keeps its file, line and field.

    >>> str(task_error(RecordError("must be an index", source="s.jsonl", line=3, field="target"), "arc"))
    "s.jsonl:3: field 'target' must be an index (task arc: not imported)"
    """
    tail = f" (task {task}: not imported)"
    if isinstance(exc, RecordError):
        return RecordError(exc.detail + tail, source=exc.source, line=exc.line, field=exc.field)
    return (ImportSourceError if isinstance(exc, ImportSourceError) else LedgerError)(f"{exc}{tail}")


def store_harness_run(
    stage: Ledger,
    source: Source,
    opts: ImportOptions,
    *,
    harness: str,
    version: str | None,
    name: str,
    config: Mapping[str, Any],
    tasks: Iterable[HarnessTask | EncodedSet],
    started: float | None,
    ended: float | None,
    notes: Sequence[str] = (),
    errors: Sequence[LedgerError] = (),
    files: Sequence[Any] | None = None,
    run_notes: Sequence[str] = (),
) -> ImportedRun:
    """One run holding one result set per task, with the harness's numbers in each set's meta.

    ``tasks`` may be an iterator that reads each task as it is asked for (each task's rows are
    stored and let go before the next is read), or give result sets a worker process encoded
    (:class:`EncodedSet`); ``notes``, ``errors`` and ``run_notes`` are read after the last task.
    ``run_notes`` are kept with the run too (its notes), not only said by the import (lm-eval's
    group results, recomputed from the stored sets). ``errors`` are
    the errors of tasks that could not be read (:func:`task_error`: left out, the others stored,
    each a note of the run); when no task could be read, the first is raised and nothing is
    stored."""
    run = new_run(
        stage,
        name,
        source=source,
        opts=opts,
        config=config,
        started=started,
        tags=(harness,),
        files=files,
        harness={"name": harness, "version": version},
    )
    counts: dict[str, int] = {}
    fields: dict[str, str] = {}
    with run:
        for t in tasks:
            if isinstance(t, EncodedSet):
                if t.error is not None:
                    if t.name is not None:
                        run.check_results_name(t.name)  # what the serial path checks first
                    raise t.error
                if t.name is None or t.path is None:
                    continue  # a set without rows
                run.log_encoded_results(t.name, t.path, rows=t.rows, sha256=t.sha256, harness=t.meta)
                counts[f"results:{t.name}"] = t.rows
                for f in t.files:
                    fields[f] = f"result set '{t.name}' ({', '.join(t.metrics)})"
                continue
            blocks = [m.rows for m in t.metrics if len(m.rows)]
            n = sum(len(b) for b in blocks)
            if not n:
                continue
            columns = [b for b in blocks if isinstance(b, ResultColumns)]
            if len(columns) == len(blocks):
                run.log_result_columns(t.name, columns, harness=harness_meta(harness, version, t))
            else:
                rows = [r for b in blocks for r in (b.iter_rows() if isinstance(b, ResultColumns) else b)]
                run.log_results(t.name, rows, harness=harness_meta(harness, version, t))
            counts[f"results:{t.name}"] = n
            for f in t.files:
                fields[f] = f"result set '{t.name}' ({', '.join(m.name for m in t.metrics)})"
        if errors and not counts:
            first = errors[0]
            more = f"; {len(errors) - 1} more task(s) could not be read either" if len(errors) > 1 else ""
            if more and isinstance(first, RecordError):
                raise RecordError(first.detail + more, source=first.source, line=first.line, field=first.field)
            raise first if not more else type(first)(f"{first}{more}")
        for exc in errors:
            run.note(f"import: {exc}")
        for text in run_notes:
            run.note(f"import: {text}")
        if opts.copy:
            source.copy_into(run, files)
        finish_import(run, fields, ended=ended)
    return ImportedRun(run.id, run.name, run.group, counts, fields, list(notes), [str(e) for e in errors])


def suite_sets(names: Sequence[str], metas: Mapping[str, Mapping[str, Any] | None]) -> tuple[list[str], list[str]]:
    """``(sets, notes)``: the result sets of one run that stand for a benchmark each in a suite.

    A harness task stored as several sets (lm-eval's filters of one task, HELM's splits and
    perturbations) is one benchmark, not several: its set marked ``primary`` at import (lm-eval's
    first filter, HELM's unperturbed test split), else its first stored set, stands for it, and a
    note names the sets left out. Sets without harness meta, or none of whose metrics labledger
    recomputes, are left out without a note.

    >>> m = lambda f, p: {"name": "lm-eval", "task": "gsm", "filter": f, "primary": p, "metrics": {"em": {"metric": "mean"}}}
    >>> suite_sets(["gsm.flex", "gsm.strict"], {"gsm.flex": m("flex", False), "gsm.strict": m("strict", True)})
    (['gsm.strict'], ["gsm: one benchmark in the suite, from gsm.strict; its other sets are alternatives of the same task (gsm.flex), not benchmarks of their own: not in the suite's mean"])
    """
    by_task: dict[tuple[str, str], list[str]] = {}
    for name in names:
        meta = metas.get(name)
        if name.endswith(".suite") or not meta or not any(m.get("metric") for m in meta["metrics"].values()):
            continue  # no metric labledger recomputes (a corpus-level one reported only)
        by_task.setdefault((str(meta.get("name")), str(meta.get("task", name))), []).append(name)
    chosen, notes = [], []
    for (_, task), sets in by_task.items():
        head = next((n for n in sets if (metas[n] or {}).get("primary")), sets[0])
        chosen.append(head)
        others = [n for n in sets if n != head]
        if others:
            notes.append(
                f"{task}: one benchmark in the suite, from {head}; its other sets are alternatives of the same "
                f"task ({', '.join(others)}), not benchmarks of their own: not in the suite's mean"
            )
    return chosen, notes


def suite_entries(
    ledger: Ledger, run_ids: Sequence[str], *, suite: str, resamples: int = 1000, seed: int = 0
) -> tuple[int, list[str]]:
    """Evaluate the harness result sets of ``run_ids`` and add one benchmark entry per harness
    task (:func:`suite_sets`: alternative filters, splits and perturbations of one task are one
    benchmark) to ``suite``, from its set's first metric (the harness's primary one): model = run
    name, benchmark = set name, category = harness. Then ``labledger table --suite SUITE`` is the
    version table across models and tasks, with paired tests on the stored items. Each entry
    points at ``evals/<set>.suite/``: the primary metric's rows with their task named after the set
    (what a version table pairs on), and their evaluation (as ``labledger eval`` makes it, the
    harness's value beside labledger's). Returns the number of entries added and the notes of
    :func:`suite_sets` (each once).
    """
    from labledger.analysis.benchmarks import Entry, add_entries
    from labledger.analysis.harness import evaluate_stored, harness_meta, harness_metrics
    from labledger.store.jsonl import atomic_write, dumps_line, write_json

    entries = []
    notes: list[str] = []
    for run_id in run_ids:
        view = ledger.run(run_id)
        names = view.results_names()
        metas = {n: harness_meta(view.results_path(n)) for n in names}
        chosen, said = suite_sets(names, metas)
        notes.extend(n for n in said if n not in notes)
        for set_name_ in chosen:
            path = view.results_path(set_name_)
            meta = metas[set_name_]
            assert meta is not None  # suite_sets keeps harness sets only
            head = next(iter(harness_metrics(meta)))
            eval_name = f"{set_name_[:122]}.suite"
            out = path.parent.parent / eval_name
            out.mkdir(exist_ok=True)
            rows = (orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip())
            data = b"".join(dumps_line({**r, "task": set_name_}) for r in rows if r.get("task") == head)
            atomic_write(out / "results.jsonl", data)
            write_json(
                out / "meta.json",
                {"name": eval_name, "harness": {**meta, "metrics": {set_name_: meta["metrics"][head]}}},
            )
            doc = evaluate_stored(out / "results.jsonl", resamples=resamples, seed=seed).to_dict()
            ledger.save_evaluation(view.id, eval_name, doc)
            body = doc["tasks"][set_name_]
            e = next(x for x in body["metrics"] if x["key"] == body["headline"])
            if e["value"] is None:
                continue
            entries.append(
                Entry(
                    model=view.name,
                    suite=suite,
                    benchmark=set_name_,
                    category=str(meta["name"]),
                    metric=e["metric"],
                    params=dict(e.get("params") or {}),
                    value=float(e["value"]),
                    n=e.get("n"),
                    ci_low=e.get("ci_low"),
                    ci_high=e.get("ci_high"),
                    run_id=view.id,
                    evaluation=eval_name,
                    results_path=str(out / "results.jsonl"),
                    source=f"{meta['name']} import ({head})",
                )
            )
    return (add_entries(ledger, entries) if entries else 0), notes
