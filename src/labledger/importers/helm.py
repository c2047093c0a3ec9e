"""Import Stanford HELM run folders (``benchmark_output/runs/<suite>/<run name>/``).

PATH is one run folder (``scenario_state.json`` and ``per_instance_stats.json``, optionally
``run_spec.json`` and ``stats.json``) or a folder of them (a suite). Run folders of one model
become one run, each run folder one result set (named after the run, less its ``model=`` part),
each per-instance score statistic (``exact_match``, ``quasi_exact_match``, ``f1_score``,
``rouge_l``, ``*accuracy``...) a labledger task of score rows (see
:mod:`labledger.importers.harness`). Train trials of one instance are averaged first; perturbed
copies are left out. Gold is the references tagged ``correct``; ``prediction`` the first
completion (mapped through ``output_mapping`` for multiple-choice-joint runs).

HELM's ``stats.json`` gives the value (``mean``) but no standard error across instances: its
``stddev`` is across train trials. labledger's CI is the first interval over instances.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from labledger.errors import ImportSourceError, RecordError
from labledger.importers.harness import HarnessMetric, HarnessTask, as_float, item_hash, set_name, store_harness_run
from labledger.importers.source import ImportedRun, ImportOptions, Source, load_json
from labledger.store.ledger import Ledger

FORMAT = "helm"
_FILES = ("run_spec.json", "scenario_state.json", "per_instance_stats.json", "stats.json")
#: Per-instance statistics that are scores (the rest are token counts, runtimes, costs...).
SCORE = re.compile(r"(exact_match|f1|rouge|bleu|accuracy|correct|pass)", re.IGNORECASE)


def _is_run(path: Path) -> bool:
    return (path / "scenario_state.json").is_file() and (path / "per_instance_stats.json").is_file()


def run_folders(path: Path) -> list[Path]:
    """The HELM run folders at ``path``: the folder itself, or those under it."""
    if not path.is_dir():
        return []
    if _is_run(path):
        return [path]
    return sorted(p.parent for p in path.rglob("per_instance_stats.json") if _is_run(p.parent))


def detect(path: Path) -> bool:
    """A HELM run folder (scenario_state.json + per_instance_stats.json), or a folder holding some."""
    return bool(run_folders(path))


def make_source(path: Path) -> Source:
    runs = run_folders(path)
    if not runs:
        raise ImportSourceError(f"{path}: no HELM run folder (scenario_state.json + per_instance_stats.json) here")
    return Source(path, FORMAT, [r / f for r in runs for f in _FILES if (r / f).is_file()])


def _stat_name(stat: Any, where: str) -> tuple[str, str | None, Any]:
    name = stat.get("name") if isinstance(stat, dict) else None
    if not isinstance(name, dict) or not isinstance(name.get("name"), str):
        raise RecordError("must be a HELM Stat with name {name, split}", source=where, field="stats[].name")
    return name["name"], name.get("split"), name.get("perturbation")


def _task(folder: Path) -> tuple[HarnessTask, dict[str, Any], str]:
    state = load_json(folder / "scenario_state.json")
    per = load_json(folder / "per_instance_stats.json")
    if not isinstance(state, dict) or not isinstance(state.get("request_states"), list):
        raise RecordError(
            "must hold request_states", source=str(folder / "scenario_state.json"), field="request_states"
        )
    if not isinstance(per, list):
        raise RecordError("must be a list of per-instance stats", source=str(folder / "per_instance_stats.json"))
    adapter = state.get("adapter_spec") or {}
    spec = load_json(folder / "run_spec.json") if (folder / "run_spec.json").is_file() else {}
    docs: dict[str, dict[str, Any]] = {}
    for i, rs in enumerate(state["request_states"]):
        inst = rs.get("instance") if isinstance(rs, dict) else None
        if not isinstance(inst, dict) or "id" not in inst:
            raise RecordError(
                "must have an instance with an id",
                source=str(folder / "scenario_state.json"),
                field=f"request_states[{i}].instance.id",
            )
        if inst.get("perturbation") or str(inst["id"]) in docs:
            continue
        refs = inst.get("references") or []
        gold = [r.get("output", {}).get("text") for r in refs if "correct" in (r.get("tags") or [])]
        comps = (rs.get("result") or {}).get("completions") or [{}]
        text = comps[0].get("text")
        mapping = rs.get("output_mapping") or {}
        docs[str(inst["id"])] = {
            "item_hash": item_hash((inst.get("input") or {}).get("text"), [r.get("output") for r in refs]),
            "prompt": (rs.get("request") or {}).get("prompt"),
            "target": gold[0] if len(gold) == 1 else gold,
            "prediction": mapping.get(text.strip(), text) if isinstance(text, str) else text,
        }
    values: dict[str, dict[str, list[float]]] = {}
    split_of: dict[str, str | None] = {}
    where = str(folder / "per_instance_stats.json")
    for i, entry in enumerate(per):
        if not isinstance(entry, dict) or "instance_id" not in entry:
            raise RecordError("is missing", source=where, field=f"[{i}].instance_id")
        if entry.get("perturbation"):
            continue
        iid = str(entry["instance_id"])
        for stat in entry.get("stats") or []:
            name, split, pert = _stat_name(stat, where)
            if pert or not SCORE.search(name) or not stat.get("count"):
                continue
            mean = as_float(stat.get("mean"))
            if mean is None:
                raise RecordError("must be a number", source=where, field=f"[{i}].stats[{name}].mean")
            values.setdefault(name, {}).setdefault(iid, []).append(mean)
            split_of[name] = split
    reported: dict[str, float | None] = {}
    if (folder / "stats.json").is_file():
        for stat in load_json(folder / "stats.json") or []:
            name, split, pert = _stat_name(stat, str(folder / "stats.json"))
            if not pert and name in values and split == split_of.get(name):
                reported[name] = as_float(stat.get("mean"))
    metrics = []
    for name, per_id in values.items():
        rows = []
        for iid, vals in per_id.items():
            row = {"id": iid, "task": name, "gold": 1.0, "pred": sum(vals) / len(vals), "trials": vals}
            row.update(docs.get(iid, {}))
            rows.append(row)
        metrics.append(
            HarnessMetric(
                name,
                "scores",
                rows,
                "mean",
                value=reported.get(name),
                stderr=None,
                stderr_method="none: HELM's stats.json stddev is across train trials, not instances",
                extra={"split": split_of.get(name), "trials": max(len(v) for v in per_id.values())},
            )
        )
    run_name = str(spec.get("name") or folder.name)
    task_name = ",".join(p for p in re.split(r"(?<=[:,])", run_name) if not p.startswith("model=")).rstrip(",:")
    task = HarnessTask(
        set_name(task_name or run_name),
        run_name,
        metrics,
        info={"adapter_method": adapter.get("method"), "num_train_trials": adapter.get("num_train_trials")},
        files=[f"{folder.name}/per_instance_stats.json"],
    )
    return task, {"adapter_spec": adapter, "run_spec": spec}, str(adapter.get("model") or "model")


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    by_model: dict[str, list[tuple[Path, HarnessTask, dict[str, Any]]]] = {}
    for folder in run_folders(source.path):
        task, info, model = _task(folder)
        by_model.setdefault(model, []).append((folder, task, info))
    runs = []
    for model, items in by_model.items():
        first = items[0][2]["adapter_spec"]
        config = {
            "harness": "helm",
            "harness_version": None,
            "model": model,
            "model_deployment": first.get("model_deployment"),
            "tasks": {
                t.task: {
                    "method": info["adapter_spec"].get("method"),
                    "n_shot": info["adapter_spec"].get("max_train_instances"),
                    "num_train_trials": info["adapter_spec"].get("num_train_trials"),
                    "max_eval_instances": info["adapter_spec"].get("max_eval_instances"),
                    "run_spec": bool(info["run_spec"]),
                }
                for _, t, info in items
            },
            "temperature": first.get("temperature"),
        }
        notes = [
            f"{f.name}: no run_spec.json; model and adapter settings from scenario_state.json"
            for f, _, info in items
            if not info["run_spec"]
        ]
        name = opts.name if opts.name and len(by_model) == 1 else (f"{opts.name}-{model}" if opts.name else model)
        runs.append(
            store_harness_run(
                stage,
                source,
                opts,
                harness="helm",
                version=None,
                name=name,
                config=config,
                tasks=[t for _, t, _ in items],
                started=None,
                ended=None,
                notes=notes,
                files=[f / n for f, _, _ in items for n in _FILES if (f / n).is_file()],
            )
        )
    return runs
