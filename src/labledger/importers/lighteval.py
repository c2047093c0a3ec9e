"""Import Hugging Face lighteval output (``EvaluationTracker(output_dir, save_details=True)``).

PATH is the output folder (``results/<model>/results_<ts>.json`` and
``details/<model>/<ts>/details_<task>_<ts>.parquet``) or one results file. Each results file is one
invocation and becomes one run; each task (``suite|task|fewshot`` key of ``results``, less ``all``)
one result set from its details Parquet file. Parquet rows are not in document order: items are
keyed by ``doc.id``. Per metric of the ``metric`` struct: ``acc`` of a log-likelihood task becomes
choice rows (probabilities from ``model_response.logprobs``, gold ``doc.gold_index``), every other
number score rows (see :mod:`labledger.importers.harness`). ``item_hash`` hashes the query, the
choices and the gold.

lighteval's reported stderr of a non-mean metric is a bootstrap whose spread is divided by the
square root of the number of resamples (0.13.0): ``labledger eval`` says so beside it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from labledger.errors import ImportSourceError, RecordError
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
)
from labledger.importers.harness import results_files as harness_results_files
from labledger.importers.source import ImportedRun, ImportOptions, Source
from labledger.store.ledger import Ledger

FORMAT = "lighteval"


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


def _rows(path: Path, task: str) -> list[HarnessMetric]:
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
            elif as_float(value) is not None:
                row = score_row(sid, name, value)
                text = resp.get("text_post_processed") or resp.get("text")
                row.update(extras, prediction=text[0] if isinstance(text, list) and len(text) == 1 else text)
                shape, spec = "scores", "mean"
            else:
                raise RecordError(f"must be a number; got {str(value)[:40]!r}", source=where, field=f"metric.{name}")
            metrics.setdefault(name, HarnessMetric(name, shape, [], spec)).add_row(row)
    return list(metrics.values())


def _run_for(source: Source, stage: Ledger, opts: ImportOptions, results_path: Path, several: bool) -> ImportedRun:
    data = read_results(results_path)
    general = data.get("config_general") or {}
    details = _details(results_path)
    tasks: list[HarnessTask] = []
    notes = []
    for key, reported in data["results"].items():
        if key == "all":
            continue
        if key not in details:
            notes.append(f"{key}: no details file (run lighteval with save_details) beside {results_path.name}")
            continue
        mets = _rows(details[key], key)
        for m in mets:
            m.value = as_float((reported or {}).get(m.name))
            m.stderr = as_float((reported or {}).get(f"{m.name}_stderr"))
            m.stderr_method = "sample sd (n-1) / sqrt(n) (lighteval mean_stderr) or its bootstrap for non-mean metrics"
        parts = key.split("|")
        label = set_name(*(p for p in parts if not p.isdigit())) if len(parts) > 1 else set_name(key)
        tasks.append(
            HarnessTask(
                label,
                key,
                mets,
                info={"hashes": ((data.get("summary_tasks") or {}).get(key) or {}).get("hashes")},
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
        files=[results_path, *details.values()],
    )


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    files = results_files(source.path)
    return [_run_for(source, stage, opts, f, len(files) > 1) for f in files]
