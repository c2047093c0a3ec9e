"""Local lm-evaluation-harness tasks for the tests' harness runs: a task is written from its rows.

``write_task(folder, name, rows, ...)`` writes ``folder/<name>.jsonl`` (one document per row) and
``folder/<name>.yaml`` (lm-eval's task config reading that file through the ``json`` dataset
builder, nothing downloaded); ``write_group`` writes a group's config. The run scripts beside this
file import it (a script's own folder is on ``sys.path``), and so do the tests that run lm-eval.

Values are written as JSON, which YAML reads as the same strings and lists (lm-eval renders a
string with ``{{...}}`` as a Jinja template, a bare field name as that field); ``Function(...)``
writes lm-eval's ``!function module.name`` tag (a Python function in ``folder/<module>.py``).

>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> p = write_task(d, "t", [{"q": "a?", "c": ["x", "y"], "a": 1}], doc_to_text="{{q}}", doc_to_choice="{{c}}",
...                doc_to_target="{{a}}", metrics=["acc"])
>>> print(p.read_text().split("output_type")[1].splitlines()[0])
: multiple_choice
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}


@dataclass(frozen=True)
class Function:
    """lm-eval's ``!function module.name``: a Python function of a file beside the task's YAML."""

    name: str


def _value(v: Any) -> str:
    return f"!function {v.name}" if isinstance(v, Function) else json.dumps(v)


def write_task(
    folder: Path,
    name: str,
    rows: Iterable[Mapping[str, Any]],
    *,
    doc_to_text: str | Function,
    doc_to_target: str | Function,
    metrics: Sequence[str],
    doc_to_choice: str | list[str] | Function | None = None,
    output_type: str = "multiple_choice",
    fewshot: bool = False,
    until: Sequence[str] | None = None,
    filters: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    version: float | None = 1.0,
) -> Path:
    """Write task ``name`` over ``rows`` into ``folder``; returns the YAML's path.

    ``fewshot``: the same file is the few-shot split too; ``until``: a generative task's stop
    sequences; ``filters``: ``{filter name: [{"function": ..., ...}, ...]}`` in lm-eval's order
    (the first is the one a suite uses); ``version``: ``metadata.version`` (None: none written).
    """
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(dict(r)) + "\n" for r in rows))
    lines = [
        f"task: {name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {data}",
        *([f"    train: {data}"] if fewshot else []),
        "test_split: test",
        *(["fewshot_split: train"] if fewshot else []),
        f"output_type: {output_type}",
        f"doc_to_text: {_value(doc_to_text)}",
        *([f"doc_to_choice: {_value(doc_to_choice)}"] if doc_to_choice is not None else []),
        f"doc_to_target: {_value(doc_to_target)}",
    ]
    if until is not None:
        lines += ["generation_kwargs:", f"  until: {json.dumps(list(until))}"]
    lines += ["metric_list:", *(f"  - metric: {m}" for m in metrics)]
    if filters:
        lines.append("filter_list:")
        for filt, steps in filters.items():
            lines += [f"  - name: {filt}", "    filter:"]
            for step in steps:
                first, *rest = step.items()
                lines.append(f"      - {first[0]}: {_value(first[1])}")
                lines += [f"        {k}: {_value(v)}" for k, v in rest]
    if version is not None:
        lines += ["metadata:", f"  version: {version}"]
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_group(folder: Path, name: str, tasks: Sequence[str], metrics: Mapping[str, bool]) -> Path:
    """Write group ``name`` of ``tasks`` (tasks or groups) with an ``aggregate_metric_list`` of
    ``{metric: weight_by_size}``; returns the YAML's path."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"group: {name}", f"task: {json.dumps(list(tasks))}", "aggregate_metric_list:"]
    for m, by_size in metrics.items():
        lines += [f"  - metric: {m}", f"    weight_by_size: {'true' if by_size else 'false'}"]
    lines += ["metadata:", "  version: 1.0"]
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def save_output(res: dict[str, Any], out: Path) -> None:
    """Write ``simple_evaluate``'s result as ``lm_eval --output_path OUT --log_samples`` does."""
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(out))
    samples = res.pop("samples")
    tracker.save_results_aggregated(results=res, samples=samples)
    for task in res["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
