"""The record files of a run and the rows of the index, as types whose fields carry their meaning (#15).

The writers (:mod:`labledger.store.run`, :mod:`labledger.store.system`, ``labledger.wandb``) write
plain dicts on the hot path; these ``Struct``\\ s say what those dicts hold, field by field, with a
type, a unit and a meaning (``msgspec.Meta``: the meaning is the field's JSON Schema
``description``, the unit is in ``extra``). They are the one source of
:mod:`labledger.schema.dictionary` (``labledger schema --markdown``, docs/data-dictionary.md and the
site's data dictionary page), and the tests decode a real run's files with them, so a field that a
writer adds without a meaning here fails a test.

>>> msgspec.convert({"step": 3, "time": 1.5e9, "loss": 0.25}, ScalarRecord).step
3
>>> field_meta(ScalarRecord, "time")
('unix seconds', 'when the values were logged (wall clock)')
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import Meta


def meaning(text: str, unit: str | None = None) -> Meta:
    """Field metadata: ``text`` (what the field means) and its ``unit`` (None for none).

    >>> meaning("bytes of the file", "bytes").extra
    {'unit': 'bytes'}
    """
    return Meta(description=text, extra={"unit": unit} if unit else {})


def field_meta(struct: type[msgspec.Struct], name: str) -> tuple[str | None, str | None]:
    """``(unit, meaning)`` of field ``name`` (its JSON name) of ``struct``; ``(None, None)`` when undocumented.

    >>> field_meta(NoteRecord, "text")
    (None, 'the note')
    """
    import msgspec.inspect as mi

    info = mi.type_info(struct)
    for f in info.fields:  # type: ignore[attr-defined]
        if f.encode_name == name:
            t = f.type
            if isinstance(t, mi.Metadata):
                unit = (t.extra or {}).get("unit")
                return unit, (t.extra_json_schema or {}).get("description")
            return None, None
    raise KeyError(name)


UnixTime = Annotated[float, meaning("when the record was written (wall clock)", "unix seconds")]


class RunRecord(msgspec.Struct, kw_only=True):
    """Base of the record types: ``EXTRA`` says what keys beyond the declared fields mean (None: none)."""

    EXTRA: ClassVar[str | None] = None


# -- the run folder's JSONL record files ----------------------------------------------------------
class ScalarRecord(RunRecord, kw_only=True):
    """One ``Run.log(step, **scalars)`` call: a line of ``metrics.jsonl``."""

    EXTRA: ClassVar[str | None] = (
        "every other key is a scalar logged at this step (a number; NaN and infinities are stored as "
        "null and read back as NaN), named as logged (``loss``, ``lr``, ``val.accuracy``)"
    )
    step: Annotated[int, meaning("the step the values belong to, as given to Run.log (usually the optimizer step)")]
    time: Annotated[float, meaning("when the values were logged (wall clock)", "unix seconds")]


class SampleRecord(RunRecord, kw_only=True):
    """One sample of a microbatch (an element of a batch record's ``samples``)."""

    EXTRA: ClassVar[str | None] = "any other key is kept verbatim (seed 004: ``image_id``, ``current``, ...)"
    input: Annotated[Any, meaning("what the model was given (any JSON; seed 004 calls it model_input)")] = None
    model_input: Annotated[Any, meaning("the same as input, under seed 004's name (accepted, kept as written)")] = None
    gold: Annotated[Any, meaning("the supervision target (a label, a number, any JSON)")] = None
    prediction: Annotated[Any, meaning("what the model predicted (for classification, the most probable label)")] = None
    probabilities: Annotated[
        dict[str, float] | None,
        meaning("probability per label, keyed by label (never assume key order); values in [0, 1] summing to 1"),
    ] = None
    cross_entropy: Annotated[
        float | None,
        meaning(
            "-log p(gold) of this sample, checked against probabilities when both are present "
            "(only bounded below where p(gold) underflows float32)",
            "nats",
        ),
    ] = None
    source: Annotated[str | None, meaning("where the sample came from (a dataset file or split)")] = None
    dataset: Annotated[str | None, meaning("the dataset of a mixture the sample was drawn from")] = None
    id: Annotated[Any, meaning("the sample's id in its source")] = None
    input_provenance: Annotated[
        Any, meaning("whether input is the captured encoded source or a later reconstruction (seed 004)")
    ] = None


class BatchRecord(RunRecord, kw_only=True):
    """One training microbatch (one forward pass): a line of ``batches.jsonl`` (``Run.log_batch``)."""

    EXTRA: ClassVar[str | None] = "any other key is kept verbatim"
    microbatch: Annotated[int, meaning("the forward pass's number in this run, from 1, strictly increasing")]
    optimizer_step: Annotated[
        int | None,
        meaning(
            "the optimizer update this microbatch's gradient goes into (with accumulation 8, "
            "eight lines share one optimizer step)"
        ),
    ] = None
    examples_seen: Annotated[
        int | None, meaning("examples fed so far, this batch included (repeats and oversampling counted)", "examples")
    ] = None
    batch_size: Annotated[int | None, meaning("the samples in this forward pass (= len(samples))", "examples")] = None
    loss: Annotated[float | None, meaning("the mean training loss of this forward pass")] = None
    samples: Annotated[list[SampleRecord], meaning("every sample of the batch (see the sample table)")] = []
    time: Annotated[float | None, meaning("when the record was logged (filled in when absent)", "unix seconds")] = None
    forward_ms: Annotated[
        float | None, meaning("wall time of the measured forward section (not the whole step's latency)", "ms")
    ] = None
    gpu_allocated_mib: Annotated[float | None, meaning("PyTorch's allocated GPU memory when logged", "MiB")] = None
    gpu_peak_allocated_mib: Annotated[
        float | None, meaning("the peak allocated GPU memory of the measured section", "MiB")
    ] = None


class HistoryEntry(RunRecord, kw_only=True):
    """One trainer logging interval (``Run.log_history``; the HF callback's ``on_log``/``on_evaluate``)."""

    EXTRA: ClassVar[str | None] = (
        "every other key is what the trainer logged, verbatim (``loss`` is the interval's mean, not the "
        "last microbatch's; ``learning_rate``, ``grad_norm``, ``eval_*``)"
    )
    kind: Annotated[str | None, meaning("train, eval, predict or summary (HF callback)")] = None
    step: Annotated[int | None, meaning("the trainer's global step (optimizer steps)")] = None
    epoch: Annotated[
        float | None, meaning("data seen relative to the training set (a fraction: repeats counted)", "epochs")
    ] = None
    gradient_accumulation_steps: Annotated[int | None, meaning("microbatches per optimizer step")] = None
    interval_steps: Annotated[int | None, meaning("optimizer steps since the previous train entry")] = None
    microbatch_mean_loss: Annotated[
        float | None, meaning("the mean cross-entropy of the interval's microbatch records")
    ] = None
    microbatches: Annotated[int | None, meaning("microbatch records in the interval")] = None


class CheckpointRecord(RunRecord, kw_only=True):
    """One checkpoint: a line of ``checkpoints.jsonl`` (``Run.log_checkpoint`` / ``log_checkpoint_reference``)."""

    path: Annotated[
        str,
        meaning(
            "where the weights are: relative to the run folder when copied (checkpoints/...), "
            "else the absolute path (or the name a reference gave)"
        ),
    ]
    source: Annotated[str, meaning("the file that was logged (absolute path)")]
    sha256: Annotated[str, meaning("sha256 of the file's bytes when logged (64 hex digits)")]
    size: Annotated[int | None, meaning("the file's size (None for a reference of unknown size)", "bytes")]
    step: Annotated[int | None, meaning("the training step the checkpoint was saved at")] = None
    metrics: Annotated[dict[str, float | None], meaning("scalars logged with the checkpoint")] = {}
    copied: Annotated[
        bool, meaning("true: a copy is kept in the run folder; false: referenced in place and re-hashed on read")
    ] = True
    reference: Annotated[bool, meaning("true when only the hash is known (nothing was read)")] = False
    time: UnixTime


class NoteRecord(RunRecord, kw_only=True):
    """A free-text note (``Run.note``, and the notes labledger writes itself): a line of ``notes.jsonl``."""

    time: UnixTime
    text: Annotated[str, meaning("the note")]


class SystemSample(RunRecord, kw_only=True):
    """One sample of system metrics, once a second while the run logs: a line of ``system.jsonl``."""

    EXTRA: ClassVar[str | None] = (
        "per GPU ``i``: ``gpu.i.util_percent`` (%), ``gpu.i.memory_used_mb`` and ``gpu.i.memory_percent`` "
        "(NVML), or ``gpu.i.memory_allocated_mb`` / ``gpu.i.memory_reserved_mb`` (MiB, torch.cuda)"
    )
    time: UnixTime
    cpu_percent: Annotated[float | None, meaning("this process's CPU use since the last sample, of one core", "%")] = (
        None
    )
    rss_mb: Annotated[float | None, meaning("this process's resident memory", "MiB")] = None
    mem_used_percent: Annotated[float | None, meaning("the machine's memory in use", "%")] = None
    mem_available_mb: Annotated[float | None, meaning("the machine's available memory", "MiB")] = None


class MediaRecord(RunRecord, kw_only=True):
    """What a ``labledger.wandb`` run logged that is not a number (an image, a histogram, a table, a
    chart, a file or artifact...): a line of ``media.jsonl``."""

    EXTRA: ClassVar[str | None] = (
        "by kind: image and html ``files`` (each {path, sha256, caption, shape}); histogram ``bins`` and "
        "``counts``; table ``results`` (the result set it became) or ``path``, with ``rows`` and ``columns``; "
        "chart ``chart`` (the W&B preset), ``fields``, ``string_fields`` and its ``table``; value ``value``; "
        "file ``path``, ``source``, ``sha256``, ``size``; artifact ``name``, ``type``, ``version``, "
        "``aliases``, ``metadata`` and ``files`` (each {path, sha256, size}); pinned_config_keys ``keys``"
    )
    step: Annotated[int, meaning("the W&B step the value was logged at")]
    time: UnixTime
    kind: Annotated[str, meaning("image, html, histogram, table, chart, value, file, artifact or pinned_config_keys")]
    key: Annotated[str, meaning("the key it was logged under (an artifact's name, a file's path)")]


# -- run.json, results, index rows -----------------------------------------------------------------
class GitState(msgspec.Struct, kw_only=True):
    """The git state of the working directory at start (``run.json`` ``git``)."""

    commit: Annotated[str | None, meaning("HEAD's commit hash")] = None
    dirty: Annotated[bool | None, meaning("true when tracked files had uncommitted changes")] = None
    branch: Annotated[str | None, meaning("the branch checked out")] = None


class InitEntry(msgspec.Struct, kw_only=True):
    """What a run started from (``run.json`` ``init``, ``Run.set_init``)."""

    kind: Annotated[str, meaning("file (hashed), sha256 (given) or name (an external model id, kept as text)")]
    sha256: Annotated[str | None, meaning("sha256 of the weights: links the run to the run that logged them")] = None
    name: Annotated[str | None, meaning("an external name (a hub model id)")] = None
    path: Annotated[str | None, meaning("the file that was hashed")] = None
    size: Annotated[int | None, meaning("the file's size", "bytes")] = None


class RunMeta(RunRecord, kw_only=True):
    """A run's identity, status and environment: ``run.json`` (rewritten atomically on each change)."""

    EXTRA: ClassVar[str | None] = "an importer adds keys saying where the run came from (kept verbatim)"
    id: Annotated[str, meaning("the run id: start time (UTC, YYYYMMDD-HHMMSS) and 12 random hex digits")]
    name: Annotated[str, meaning("the run's name (not unique)")]
    group: Annotated[str | None, meaning("the group (a sweep, an experiment)")] = None
    tags: Annotated[list[str], meaning("tags, sorted")] = []
    status: Annotated[str, meaning("running, finished, failed or crashed (a dead process's run)")]
    started: Annotated[float, meaning("when the run started", "unix seconds")]
    ended: Annotated[float | None, meaning("when it finished (null while running)", "unix seconds")] = None
    notes: Annotated[str | None, meaning("the notes given at start")] = None
    error: Annotated[str | None, meaning("the exception that failed the run (type: message)")] = None
    host: Annotated[str | None, meaning("the machine's host name")] = None
    user: Annotated[str | None, meaning("the user that ran it")] = None
    pid: Annotated[int | None, meaning("the logging process's id")] = None
    python: Annotated[str | None, meaning("the Python version")] = None
    platform: Annotated[str | None, meaning("the operating system (platform.platform())")] = None
    argv: Annotated[list[str], meaning("the command line (secret-looking values redacted)")] = []
    cwd: Annotated[str | None, meaning("the working directory")] = None
    packages: Annotated[dict[str, str], meaning("versions of the key packages imported (numpy, torch, ...)")] = {}
    git: Annotated[GitState | None, meaning("the git state at start")] = None
    init: Annotated[list[InitEntry] | None, meaning("what the run started from (set_init / start_run(init=))")] = None


class ResultRow(RunRecord, kw_only=True):
    """One evaluated item: a line of ``evals/<name>/results.jsonl`` (docs/results.md has the rules)."""

    EXTRA: ClassVar[str | None] = "any other key is kept verbatim; derived values are added beside the raw ones"
    id: Annotated[Any, meaning("the item's id (unique within its task)")]
    task: Annotated[str, meaning("the task (benchmark) the item belongs to")]
    gold: Annotated[Any, meaning("the reference: a label, a number, a list, or relevance per document")]
    probs: Annotated[
        dict[str, float] | None, meaning("classification / multiple choice: probability per label, summing to 1")
    ] = None
    score: Annotated[float | None, meaning("binary tasks: P(positive)")] = None
    scores: Annotated[dict[str, float] | None, meaning("ranking: a score per document")] = None
    pred: Annotated[Any, meaning("regression value, exact-match text or set prediction")] = None
    positive: Annotated[str | None, meaning("the positive label of a binary task")] = None
    slices: Annotated[dict[str, Any] | None, meaning("slice field -> value, for per-slice metrics")] = None
    group: Annotated[Any, meaning("the bootstrap cluster (items of one group are resampled together)")] = None
    epoch: Annotated[int | None, meaning("the repeat (epoch) of a repeated evaluation")] = None
    sample: Annotated[int | None, meaning("the sample number of a repeated (pass@k) evaluation")] = None


class ResultSetMeta(RunRecord, kw_only=True):
    """A result set's provenance: ``evals/<name>/meta.json``."""

    EXTRA: ClassVar[str | None] = "an importer adds what the harness reported (``harness``)"
    name: Annotated[str, meaning("the result set's name (the folder name)")]
    rows: Annotated[int, meaning("lines in results.jsonl", "rows")]
    sha256: Annotated[str, meaning("sha256 of results.jsonl as written")]
    source: Annotated[str | None, meaning("the file it was read from, if any")] = None
    created: Annotated[float, meaning("when it was stored", "unix seconds")]


class RunsRow(RunRecord, kw_only=True):
    """Index table ``runs``: one row per run, kept current as it logs."""

    id: Annotated[str, meaning("the run id (the run folder's name)")]
    name: Annotated[str, meaning("the run's name")]
    grp: Annotated[str | None, meaning("the run's group")] = None
    status: Annotated[str, meaning("running, finished, failed or crashed")]
    started: Annotated[float, meaning("when the run started", "unix seconds")]
    ended: Annotated[float | None, meaning("when it ended", "unix seconds")] = None
    host: Annotated[str | None, meaning("the host it ran on")] = None
    pid: Annotated[int | None, meaning("the logging process's id")] = None
    git_commit: Annotated[str | None, meaning("HEAD's commit at start")] = None
    git_dirty: Annotated[int | None, meaning("1 when the working tree had uncommitted changes")] = None
    error: Annotated[str | None, meaning("why the run failed")] = None
    summary: Annotated[str, meaning("JSON: headline values (set_summary) and last/min/max of each scalar")]
    updated: Annotated[float, meaning("when the row last changed", "unix seconds")]
    heartbeat: Annotated[float | None, meaning("the logger's last sign of life", "unix seconds")] = None
    fields: Annotated[str | None, meaning("JSON: config flattened to dotted keys, for queries")] = None
    eval_fields: Annotated[str | None, meaning("JSON: stored evaluation values by task.metric, for queries")] = None
    counters: Annotated[
        str | None,
        meaning(
            "JSON: records per kind, steps, each scalar's last value and step, first/last time and where each "
            "record file ended, kept by the run as it logs so that show never scans its files (null: not yet "
            "counted; the first reader scans once and stores them)"
        ),
    ] = None


class RunTagsRow(RunRecord, kw_only=True):
    """Index table ``run_tags``: one row per (run, tag)."""

    run_id: Annotated[str, meaning("the run")]
    tag: Annotated[str, meaning("one of its tags")]


class RunFieldsRow(RunRecord, kw_only=True):
    """Index table ``run_fields``: one row per (run, query field) of ``runs.fields`` and ``runs.eval_fields``,
    kept equal to them by triggers, so that a query reads indexed values instead of every run's JSON (#12)."""

    run_id: Annotated[str, meaning("the run")]
    key: Annotated[str, meaning("the field, as the query language names it (config.lr, eval.test.accuracy)")]
    kind: Annotated[int, meaning("what the value is: 0 a number, 1 text, 2 a boolean, 3 a list or object, 4 null")]
    num: Annotated[float | None, meaning("a number's value, or a boolean's (1 or 0)")] = None
    text: Annotated[str | None, meaning("a text value")] = msgspec.field(default=None, name="str")


class CheckpointsRow(RunRecord, kw_only=True):
    """Index table ``checkpoints``: every checkpoint of every run, by sha256 (lineage links)."""

    run_id: Annotated[str, meaning("the run that logged it")]
    step: Annotated[int | None, meaning("the step it was saved at")] = None
    path: Annotated[str, meaning("as in checkpoints.jsonl")]
    sha256: Annotated[str, meaning("sha256 of the file when logged")]
    size: Annotated[int, meaning("the file's size (-1: unknown)", "bytes")]
    created: Annotated[float, meaning("when it was logged", "unix seconds")]


class RunInitsRow(RunRecord, kw_only=True):
    """Index table ``run_inits``: what each run started from (run.json ``init``)."""

    run_id: Annotated[str, meaning("the run")]
    kind: Annotated[str, meaning("file, sha256 or name")]
    sha256: Annotated[str | None, meaning("sha256 of the initial weights")] = None
    name: Annotated[str | None, meaning("an external model name")] = None
    path: Annotated[str | None, meaning("the file hashed")] = None
    size: Annotated[int | None, meaning("its size", "bytes")] = None


class EvaluationsRow(RunRecord, kw_only=True):
    """Index table ``evaluations``: one row per stored document of a result set."""

    id: Annotated[int, meaning("row id (metric_values.eval_id)")]
    run_id: Annotated[str, meaning("the run")]
    name: Annotated[str, meaning("the result set (evals/<name>)")]
    kind: Annotated[str, meaning("the document kind: evaluation, comparison or calibration")]
    created: Annotated[float, meaning("when it was stored", "unix seconds")]
    n_rows: Annotated[int | None, meaning("items evaluated", "rows")] = None
    sha256: Annotated[str | None, meaning("sha256 of the results file it was computed from")] = None


class MetricValuesRow(RunRecord, kw_only=True):
    """Index table ``metric_values``: the values of stored evaluations, for queries and tables."""

    eval_id: Annotated[int, meaning("the evaluations row")]
    task: Annotated[str, meaning("the task")]
    slice: Annotated[str, meaning("field=value of a slice; empty for the whole task")] = ""
    metric: Annotated[str, meaning("the registry metric")]
    params: Annotated[str, meaning("JSON: the metric's canonical parameters")] = "{}"
    value: Annotated[float | None, meaning("the metric's value")] = None
    ci_low: Annotated[float | None, meaning("lower end of its bootstrap interval")] = None
    ci_high: Annotated[float | None, meaning("upper end of its bootstrap interval")] = None
    n: Annotated[int | None, meaning("items", "rows")] = None
    definition: Annotated[str | None, meaning("the metric's one-sentence definition")] = None


class BenchmarkEntriesRow(RunRecord, kw_only=True):
    """Index table ``benchmark_entries``: the benchmark ledger (``benchmark_entry`` documents); append-only."""

    id: Annotated[int, meaning("row id; the latest per (model, suite, benchmark, variant) is current")]
    model: Annotated[str, meaning("the model (a version table's column)")]
    suite: Annotated[str, meaning("the suite (one version table)")]
    benchmark: Annotated[str, meaning("the benchmark (a table row)")]
    category: Annotated[str, meaning("the benchmark's category (a group of rows)")] = ""
    metric: Annotated[str, meaning("the registry metric")]
    params: Annotated[str, meaning("JSON: the metric's parameters")] = "{}"
    variant: Annotated[str, meaning("raw or calibrated (or another named variant)")] = "raw"
    value: Annotated[float, meaning("the value")]
    n: Annotated[int | None, meaning("items behind it", "rows")] = None
    ci_low: Annotated[float | None, meaning("lower end of its interval")] = None
    ci_high: Annotated[float | None, meaning("upper end of its interval")] = None
    run_id: Annotated[str | None, meaning("the run whose result set it came from")] = None
    evaluation: Annotated[str | None, meaning("the result set's name")] = None
    results_path: Annotated[str | None, meaning("the results file (paired deltas read it)")] = None
    source: Annotated[str | None, meaning("where it came from (an imported table, a harness)")] = None
    created: Annotated[float, meaning("when it was added", "unix seconds")]


class ImportsRow(RunRecord, kw_only=True):
    """Index table ``imports``: each import of a source, so importing it again is recognised."""

    id: Annotated[int, meaning("row id")]
    source: Annotated[str, meaning("the imported file or folder")]
    sha256: Annotated[str, meaning("sha256 of the source")]
    format: Annotated[str, meaning("the importer (tensorboard, mlflow, lm_eval, ...)")]
    run_id: Annotated[str, meaning("a run it made")]
    created: Annotated[float, meaning("when it was imported", "unix seconds")]


#: The files of a run folder, in the order the dictionary lists them: (path, the type of its records, or
#: what it is when it has no fields of its own).
RUN_FILES: tuple[tuple[str, type[RunRecord] | str], ...] = (
    ("run.json", RunMeta),
    ("config.json", "the run's config as given (any JSON object; flattened to dotted keys in the index)"),
    ("metrics.jsonl", ScalarRecord),
    ("batches.jsonl", BatchRecord),
    ("history.jsonl", HistoryEntry),
    ("checkpoints.jsonl", CheckpointRecord),
    ("checkpoints/", "the copies of logged checkpoint files (a clone or a streamed copy)"),
    ("notes.jsonl", NoteRecord),
    ("system.jsonl", SystemSample),
    ("media.jsonl", MediaRecord),
    ("evals/<name>/results.jsonl", ResultRow),
    ("evals/<name>/meta.json", ResultSetMeta),
    (
        "evals/<name>/<kind>.json",
        "stored documents of the result set: evaluation, comparison or calibration (see Documents below)",
    ),
    ("files/", "files logged with Run.log_file (a test breakdown, wandb-summary.json, media/...)"),
    (".lock", "held (flock) by the logging process while it lives: a run without its holder is crashed"),
    (
        ".chunks/<path>.json",
        "the sha256 of each 1 MiB chunk of each checkpoint in the run folder (copied or referenced there), hashed as it was "
        "stored, with that file's size, mtime, inode and ctime (`stat`): `labledger sync` sends the file by "
        "them while its stat is unchanged, instead of reading it to hash it (never synced itself)",
    ),
)

#: The index's tables (``ledger.db``, or PostgreSQL in team mode) and the type of their rows.
INDEX_TABLES: dict[str, type[RunRecord]] = {
    "runs": RunsRow,
    "run_tags": RunTagsRow,
    "run_fields": RunFieldsRow,
    "checkpoints": CheckpointsRow,
    "run_inits": RunInitsRow,
    "evaluations": EvaluationsRow,
    "metric_values": MetricValuesRow,
    "benchmark_entries": BenchmarkEntriesRow,
    "imports": ImportsRow,
}

__all__ = [
    "INDEX_TABLES",
    "RUN_FILES",
    "BatchRecord",
    "BenchmarkEntriesRow",
    "CheckpointRecord",
    "CheckpointsRow",
    "EvaluationsRow",
    "GitState",
    "HistoryEntry",
    "ImportsRow",
    "InitEntry",
    "MediaRecord",
    "MetricValuesRow",
    "NoteRecord",
    "ResultRow",
    "ResultSetMeta",
    "RunFieldsRow",
    "RunInitsRow",
    "RunMeta",
    "RunRecord",
    "RunTagsRow",
    "RunsRow",
    "SampleRecord",
    "ScalarRecord",
    "SystemSample",
    "field_meta",
    "meaning",
]
