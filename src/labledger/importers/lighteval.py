"""Import Hugging Face lighteval output (``EvaluationTracker(output_dir, save_details=True)``).

PATH is the output folder (``results/<model>/results_<ts>.json`` and
``details/<model>/<ts>/details_<task>_<ts>.parquet``) or one results file. Each results file is one
invocation and becomes one run; each task (``suite|task|fewshot`` key of ``results``, less ``all``)
one result set from its details Parquet file. Parquet rows are not in document order: items are
keyed by ``doc.id``. Per metric of the ``metric`` struct: ``acc`` of a log-likelihood task becomes
choice rows (probabilities from ``model_response.logprobs``, gold ``doc.gold_index``), every other
number score rows (see :mod:`labledger.importers.harness`). ``item_hash`` hashes the query, the
choices and the gold.

A corpus-level metric (``mcc``, ``loglikelihood_f1``...) stores each item's ``{golds, preds}``:
label rows (gold and predicted choice). ``mcc`` is recomputed from them; a metric no labledger
metric computes (``loglikelihood_f1``: the largest per-class F1) keeps lighteval's reported value
in the set's ``meta.json`` only (no rows: ``labledger eval`` would give them another metric), the
note naming it as corpus-level (and, for ``loglikelihood_f1``, the value the import computes from
the items beside it, ``from_items``). One task run at several few-shot counts
in one invocation gives one set per count (``arc_easy.0-shot``, ``arc_easy.5-shot``). A task whose
details file cannot be read is left out with a one-line error; the others are stored.

lighteval's reported stderr of a non-mean metric is a bootstrap whose spread is divided by the
square root of the number of resamples (0.13.0): ``labledger eval`` says so beside it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from labledger.errors import ImportSourceError, LedgerError, RecordError
from labledger.importers.harness import (
    HarnessMetric,
    HarnessTask,
    as_float,
    choice_rows,
    item_hash,
    read_results,
    results_stamp,
    score_row,
    set_name,
    store_harness_run,
    task_error,
)
from labledger.importers.harness import results_files as harness_results_files
from labledger.importers.source import ImportedRun, ImportOptions, Source
from labledger.store.ledger import Ledger

FORMAT = "lighteval"
#: lighteval's corpus-level metrics labledger recomputes from the per-item gold and pred, and its spec.
CORPUS = {"mcc": "mcc"}
#: Those it does not (no labledger metric computes the same number), and what lighteval computes.
CORPUS_ONLY = {
    "loglikelihood_f1": "the largest per-class F1, scikit-learn f1_score(average=None)",
    "mf1": "the mean of per-class F1",
}


#: The key in the head of a lighteval results file (lm-eval's has ``n-shot`` and ``configs``).
MARKERS = (b'"config_general"',)


def results_files(path: Path) -> list[Path]:
    """The lighteval results files at ``path`` (the file, or those under the folder)."""
    return harness_results_files(path, MARKERS, head=200_000)


def detect(path: Path) -> bool:
    """A lighteval ``results_<ts>.json`` (it has ``config_general``) or a folder holding one."""
    return bool(results_files(path))


def _details(results: Path) -> dict[str, Path]:
    """``{task key: details parquet}`` for a results file: ``details/<model>/<ts>/details_<task>_<ts>.parquet``."""
    stamp = results_stamp(results)
    out: dict[str, Path] = {}
    roots = [results.parent.parent.parent / "details" / results.parent.name / stamp, results.parent]
    for root in roots:
        if root.is_dir():
            for p in sorted(root.glob(f"details_*_{stamp}.parquet")):
                out.setdefault(p.name[len("details_") : -len(f"_{stamp}.parquet")], p)
    return out


def make_source(path: Path) -> Source:
    files = []
    for r in results_files(path):
        files.append(r)
        files.extend(_details(r).values())
    if not files:
        raise ImportSourceError(f"{path}: no lighteval results_<timestamp>.json here")
    return Source(path, FORMAT, files)


def _rows(path: Path, task: str) -> tuple[list[HarnessMetric], list[str]]:
    """The metrics of one details file, and the corpus-level metrics whose items hold several golds
    (left out: not one label per item)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise ImportSourceError(f"{path}: not a readable Parquet file ({exc})") from None
    for col in ("doc", "metric"):
        if col not in table.column_names:
            raise RecordError(
                "is missing (lighteval details have doc, model_response, metric)", source=str(path), field=col
            )
    metrics: dict[str, HarnessMetric] = {}
    corpus_only: set[str] = set()
    seen: dict[str, int] = {}
    for i, rec in enumerate(table.to_pylist()):
        where = f"{path}: row {i}"
        doc, resp, met = rec.get("doc") or {}, rec.get("model_response") or {}, rec.get("metric") or {}
        sid = doc.get("id")
        if sid is None or sid == "":
            raise RecordError("is missing (each row's document needs an id)", source=where, field="doc.id")
        sid = str(sid)
        if sid in seen:
            raise RecordError(f"duplicate document id {sid!r} (also row {seen[sid]})", source=where, field="doc.id")
        seen[sid] = i
        gold = doc.get("gold_index")
        gold = gold[0] if isinstance(gold, list) and len(gold) == 1 else gold
        choices = doc.get("choices") or []
        extras = {
            "item_hash": item_hash(doc.get("query"), choices, doc.get("gold_index")),
            "prompt": doc.get("query"),
            "target": choices[gold] if isinstance(gold, int) and 0 <= gold < len(choices) else doc.get("gold_index"),
        }
        logprobs = resp.get("logprobs")
        for name, value in met.items():
            if value is None:
                continue
            if name == "acc" and isinstance(logprobs, list) and logprobs and isinstance(gold, int):
                if not 0 <= gold < len(logprobs):
                    raise RecordError(
                        f"must index a choice (0..{len(logprobs) - 1})", source=where, field="doc.gold_index"
                    )
                row = choice_rows([sid], [[float(v) for v in logprobs]], [gold], task=name)[0]
                pick = max(range(len(logprobs)), key=logprobs.__getitem__)
                row.update(extras, prediction=choices[pick] if pick < len(choices) else pick, harness_score=value)
                shape, spec = "choices", "accuracy"
            elif isinstance(value, dict) and "golds" in value and "preds" in value:
                # a corpus-level metric's per-item input (lighteval's LogprobCorpusMetricInput): gold and pred
                golds = value["golds"] if isinstance(value["golds"], list) else [value["golds"]]
                if len(golds) != 1 or isinstance(value["preds"], list):
                    corpus_only.add(name)  # several golds: not one label per item
                    continue
                row = {"id": sid, "task": name, "gold": str(golds[0]), "pred": str(value["preds"]), **extras}
                shape, spec = "labels", CORPUS.get(name, "")
            elif as_float(value) is not None:
                row = score_row(sid, name, value)
                text = resp.get("text_post_processed") or resp.get("text")
                row.update(extras, prediction=text[0] if isinstance(text, list) and len(text) == 1 else text)
                shape, spec = "scores", "mean"
            else:
                raise RecordError(f"must be a number; got {str(value)[:40]!r}", source=where, field=f"metric.{name}")
            metrics.setdefault(name, HarnessMetric(name, shape, [], spec)).add_row(row)
    for name in corpus_only:
        metrics.pop(name, None)
    return list(metrics.values()), sorted(corpus_only)


def max_class_f1(gold: list[str], pred: list[str]) -> float | None:
    """The largest per-class F1 over the labels in ``gold`` or ``pred`` (what lighteval's
    ``loglikelihood_f1`` computes: scikit-learn ``f1_score(average=None)``, a label without any
    true or predicted item scoring 0); ``None`` for no items.

    >>> max_class_f1(["0", "1", "1"], ["0", "0", "1"])
    0.6666666666666666
    """
    if not gold:
        return None
    best = 0.0
    for label in sorted(set(gold) | set(pred)):
        tp = sum(1 for g, p in zip(gold, pred) if g == label and p == label)
        fp = sum(1 for g, p in zip(gold, pred) if g != label and p == label)
        fn = sum(1 for g, p in zip(gold, pred) if g == label and p != label)
        best = max(best, 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return best


def _from_items(m: HarnessMetric) -> str:
    """What the note says of a reported-only metric computed from the items by the import."""
    v = m.extra.get("from_items")
    if v is None or m.value is None:
        return ""
    same = "equal" if abs(v - m.value) <= 1e-9 else f"lighteval reported {m.value:.6g}"
    return f"; from the items {v:.6g}, {same}"


def _label(key: str, *, keep_shots: bool = False) -> str:
    """A task key's result-set name: ``suite|task|fewshot`` less the few-shot count (kept, as
    ``<n>-shot``, when the invocation ran the task at several counts).

    >>> _label("lighteval|arc:easy|0"), _label("lighteval|arc:easy|5", keep_shots=True)
    ('lighteval.arc_easy', 'lighteval.arc_easy.5-shot')
    """
    parts = key.split("|")
    if len(parts) == 1:
        return set_name(key)
    shots = [f"{p}-shot" for p in parts if p.isdigit()] if keep_shots else []
    return set_name(*(p for p in parts if not p.isdigit()), *shots)


def _run_for(source: Source, stage: Ledger, opts: ImportOptions, results_path: Path, several: bool) -> ImportedRun:
    data = read_results(results_path)
    general = data.get("config_general") or {}
    details = _details(results_path)
    tasks: list[HarnessTask] = []
    notes = []
    errors: list[LedgerError] = []
    keys = [k for k in data["results"] if k != "all"]
    labels = {k: _label(k) for k in keys}
    for key in keys:
        reported = data["results"][key]
        if key not in details:
            notes.append(f"{key}: no details file (run lighteval with save_details) beside {results_path.name}")
            continue
        try:
            mets, corpus_only = _rows(details[key], key)
        except LedgerError as exc:  # this task only (an unreadable file, a bad row): the others are stored
            errors.append(task_error(exc, key))
            continue
        label = labels[key]
        if list(labels.values()).count(label) > 1:  # the same task at several few-shot counts
            label = _label(key, keep_shots=True)
        for m in mets:
            m.value = as_float((reported or {}).get(m.name))
            m.stderr = as_float((reported or {}).get(f"{m.name}_stderr"))
            m.stderr_method = "sample sd (n-1) / sqrt(n) (lighteval mean_stderr) or its bootstrap for non-mean metrics"
            if m.shape == "labels" and not m.spec:
                m.extra["corpus_level"] = CORPUS_ONLY.get(m.name, "a corpus-level metric labledger does not recompute")
                if m.name == "loglikelihood_f1" and isinstance(m.rows, list):
                    m.extra["from_items"] = max_class_f1([r["gold"] for r in m.rows], [r["pred"] for r in m.rows])
                m.rows = []  # no labledger metric for it: its value stays lighteval's, in meta.json only
        reported_only = [m for m in mets if m.shape == "labels" and not m.spec]
        if reported_only or corpus_only:
            said = [f"{m.name} ({m.extra['corpus_level']}{_from_items(m)})" for m in reported_only]
            said += [f"{n} (several golds per item)" for n in corpus_only]
            notes.append(
                f"{label}: corpus-level, lighteval's reported value kept, not recomputed by labledger eval: "
                + ", ".join(said)
            )
        tasks.append(
            HarnessTask(
                label,
                key,
                mets,
                info={
                    "hashes": ((data.get("summary_tasks") or {}).get(key) or {}).get("hashes"),
                    **(
                        {"reported_only": {n: as_float((reported or {}).get(n)) for n in corpus_only}}
                        if corpus_only
                        else {}
                    ),
                },
                files=[details[key].name],
            )
        )
    mc = general.get("model_config") or {}
    model = str(general.get("model_name") or mc.get("model_name") or results_path.parent.name)
    version = general.get("lighteval_version") or general.get("lighteval_sha")
    name = opts.name or model
    if several and opts.name:
        name = f"{opts.name}-{results_stamp(results_path)}"
    config = {
        "harness": "lighteval",
        "harness_version": version,
        "model": model,
        "model_config": mc,
        "tasks": {
            t.task: {
                "version": (data.get("versions") or {}).get(t.task),
                "n_shot": int(t.task.rsplit("|", 1)[-1]) if t.task.rsplit("|", 1)[-1].isdigit() else None,
            }
            for t in tasks
        },
        "seeds": {"model": mc.get("seed"), "num_fewshot_seeds": general.get("num_fewshot_seeds")},
        "max_samples": general.get("max_samples"),
    }
    stamp = results_stamp(results_path)
    try:
        started = dt.datetime.strptime(stamp, "%Y-%m-%dT%H-%M-%S.%f").timestamp()
    except ValueError:
        started = None
    total = general.get("total_evaluation_time_secondes")
    try:
        ended = started + float(total) if started is not None and total is not None else started
    except (TypeError, ValueError):
        ended = started
    return store_harness_run(
        stage,
        source,
        opts,
        harness="lighteval",
        version=version,
        name=name,
        config=config,
        tasks=tasks,
        started=started,
        ended=ended,
        notes=notes,
        errors=errors,
        files=[results_path, *details.values()],
    )


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    files = results_files(source.path)
    return [_run_for(source, stage, opts, f, len(files) > 1) for f in files]
