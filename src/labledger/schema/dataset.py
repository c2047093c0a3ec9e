"""The columns of the runs as an open dataset (#46): one table per kind, in zstd Parquet files laid
out hive-style (``kind=<kind>/run=<id>/[set=<name>/]part-0.parquet``), so that DuckDB, Spark, Polars
or pyarrow read every run with no labledger code. ``labledger.store.dataset`` writes them; this
module is their contract: the columns of each kind, their types and meanings, and a JSON Schema of
one row (``labledger schema dataset-scalars``; docs/schemas/dataset-*.json).

The run id is not a column of any file: it is the ``run`` partition of the path (and a result set's
name the ``set`` partition), which every hive-aware reader adds as a column.

>>> [c.name for c in DATASET_KINDS["scalars"].columns]
['step', 'time', 'key', 'value']
>>> dataset_json_schema("scalars")["properties"]["value"]["type"]
['number', 'null']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The folder (under a ledger's root, or an object store's prefix) that holds the dataset.
DATASET_DIR = "dataset"
#: Every file of the dataset is this one name in its partition folder.
PART_FILE = "part-0.parquet"

#: Column types (the Arrow/Parquet type each is written as) and the JSON Schema type of a value.
_JSON_TYPES: dict[str, dict[str, Any]] = {
    "int64": {"type": ["integer", "null"]},
    "float64": {"type": ["number", "null"]},
    "bool": {"type": ["boolean", "null"]},
    "string": {"type": ["string", "null"]},
    "json": {"type": ["string", "null"], "contentMediaType": "application/json"},
    "list<string>": {"type": "array", "items": {"type": "string"}},
    "map<string,float64>": {"type": ["object", "null"], "additionalProperties": {"type": ["number", "null"]}},
    "map<string,string>": {"type": ["object", "null"], "additionalProperties": {"type": ["string", "null"]}},
}

#: How a value that may be any JSON is written to a text column.
AS_TEXT = "text as it is; any other value as its JSON text (7 -> '7', [1, 2] -> '[1,2]')"


@dataclass(frozen=True)
class Column:
    """One column of a dataset kind."""

    name: str
    type: str
    meaning: str


@dataclass(frozen=True)
class DatasetKind:
    """One kind of the dataset: its partitions, its columns and what a row is."""

    name: str
    row: str
    partitions: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def path(self) -> str:
        """The file of one partition, relative to the dataset's root (``<id>``/``<name>`` filled in)."""
        parts = [f"kind={self.name}", *(f"{p}=<{'id' if p == 'run' else 'name'}>" for p in self.partitions)]
        return "/".join([*parts, PART_FILE])


DATASET_KINDS: dict[str, DatasetKind] = {
    k.name: k
    for k in (
        DatasetKind(
            "runs",
            "a run: its index row (one row per file)",
            ("run",),
            (
                Column("name", "string", "the run's name"),
                Column("group", "string", "the run's group"),
                Column("status", "string", "finished, failed or crashed (a running run is not in the dataset)"),
                Column("started", "float64", "when the run started (unix seconds)"),
                Column("ended", "float64", "when it ended (unix seconds)"),
                Column("duration", "float64", "ended - started (seconds)"),
                Column("host", "string", "the host it ran on"),
                Column("git_commit", "string", "HEAD's commit at start"),
                Column("git_dirty", "bool", "whether the working tree had uncommitted changes"),
                Column("error", "string", "why the run failed"),
                Column("tags", "list<string>", "its tags, sorted"),
                Column(
                    "num_fields",
                    "map<string,float64>",
                    "every query field of `runs --where` that holds a number, by its name there "
                    "(config.lr, scalars.loss.min, eval.test.accuracy, counts.steps)",
                ),
                Column("text_fields", "map<string,string>", "every query field that holds text (config.opt)"),
                Column("fields", "json", "every query field (booleans, lists and objects too) as one JSON object"),
                Column("summary", "json", "the index's summary: headline values and last/min/max of each scalar"),
                Column("config", "json", "the run's config as logged (config.json), nested"),
            ),
        ),
        DatasetKind(
            "scalars",
            "one value logged with Run.log: one row per (step, scalar)",
            ("run",),
            (
                Column("step", "int64", "the step, as given to Run.log"),
                Column("time", "float64", "when it was logged (unix seconds)"),
                Column("key", "string", "the scalar's name, as logged (loss, val.accuracy)"),
                Column(
                    "value", "float64", "its value; null where NaN or infinite was logged (as metrics.jsonl keeps it)"
                ),
            ),
        ),
        DatasetKind(
            "results",
            "one evaluated item of a stored result set (a line of evals/<set>/results.jsonl)",
            ("run", "set"),
            (
                Column("row", "int64", "the line's number in results.jsonl, from 0"),
                Column("id", "string", f"the item's id: {AS_TEXT}"),
                Column("task", "string", "the task (benchmark) of the item"),
                Column("gold", "string", f"the reference: {AS_TEXT}"),
                Column("pred", "string", f"the prediction (regression, exact match, sets): {AS_TEXT}"),
                Column("probs", "map<string,float64>", "classification / multiple choice: probability per label"),
                Column("score", "float64", "binary tasks: P(positive)"),
                Column("scores", "map<string,float64>", "ranking: a score per document"),
                Column("positive", "string", "the positive label of a binary task"),
                Column("slices", "map<string,string>", f"slice field -> value ({AS_TEXT})"),
                Column("group", "string", f"the bootstrap cluster: {AS_TEXT}"),
                Column("epoch", "int64", "the repeat (epoch) of a repeated evaluation"),
                Column("sample", "int64", "the sample number of a repeated (pass@k) evaluation"),
                Column("extra", "json", "every other key of the line, as one JSON object (null: none)"),
            ),
        ),
        DatasetKind(
            "metrics",
            "one value of a stored document (labledger eval --save, save_evaluation): the index's metric_values",
            ("run",),
            (
                Column("set", "string", "the result set the document is stored under (evals/<set>/)"),
                Column("doc", "string", "the document's kind: evaluation, comparison or calibration"),
                Column("task", "string", "the task"),
                Column("slice", "string", "'field=value' of a slice, or '' for the whole task"),
                Column("metric", "string", "the metric as `labledger eval` prints it (f1[average=macro])"),
                Column("params", "json", "the metric's parameters, every one (defaults included)"),
                Column("value", "float64", "the value"),
                Column("ci_low", "float64", "lower end of its confidence interval"),
                Column("ci_high", "float64", "upper end of its confidence interval"),
                Column("n", "int64", "items it was computed on"),
            ),
        ),
    )
}

#: ``labledger schema`` names of the dataset kinds.
SCHEMA_NAMES = {f"dataset-{k}": k for k in DATASET_KINDS}


def dataset_json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one row of dataset ``kind`` (its partitions included, as readers add them).

    >>> dataset_json_schema("results")["required"]
    ['run', 'set']
    """
    k = DATASET_KINDS[kind]
    props: dict[str, Any] = {}
    for p in k.partitions:
        what = "the run's id" if p == "run" else "the result set's name"
        props[p] = {"type": "string", "description": f"{what} (the `{p}=` partition of the path)"}
    for c in k.columns:
        props[c.name] = {**_JSON_TYPES[c.type], "description": c.meaning, "x-parquet-type": c.type}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"dataset-{kind}",
        "description": f"One row of the dataset's {kind}: {k.row}. Files: {k.path} (zstd Parquet).",
        "type": "object",
        "properties": props,
        "required": list(k.partitions),
        "additionalProperties": False,
    }


__all__ = [
    "AS_TEXT",
    "DATASET_DIR",
    "DATASET_KINDS",
    "PART_FILE",
    "SCHEMA_NAMES",
    "Column",
    "DatasetKind",
    "dataset_json_schema",
]
