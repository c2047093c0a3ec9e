"""Import Stanford HELM run folders (``benchmark_output/runs/<suite>/<run name>/``).

PATH is one run folder (``scenario_state.json`` and ``per_instance_stats.json``, optionally
``run_spec.json`` and ``stats.json``) or a folder of them (a suite). Run folders of one model
become one run. A run folder gives one result set per split (and sub-split) of its unperturbed
instances, as HELM aggregates them: the test split's set is named after the run (less its
``model=`` part), another split's adds ``.<split>`` (``mmlu_subject_anatomy.valid``). Each
per-instance score statistic (``exact_match``, ``quasi_exact_match``, ``f1_score``, ``rouge_l``,
``*accuracy``...) is a labledger task of score rows (see :mod:`labledger.importers.harness`),
train trials of one instance averaged first, so each set's mean is HELM's ``stats.json`` mean for
that split (the mean over train trials of the mean over instances).

Each perturbation (``data_augmentation``) gives two more sets per split: its perturbed copies
(``.<perturbation>``, the statistics HELM computed on them) and HELM's worst case
(``.<perturbation>.worst``: per instance and train trial the lowest value over the unperturbed and
the perturbed copy), and ``.robustness.worst`` / ``.fairness.worst`` over every robustness /
fairness perturbation when the run has one. A perturbation's parameters join its name when two of
the run's perturbations share a name. HELM's ``computed_on: original`` statistics (the unperturbed
value on the perturbed instances) are not imported again; the import note says so.

Gold is the references tagged ``correct``; ``prediction`` the first completion of the first train
trial (mapped through ``output_mapping`` for multiple-choice-joint runs); ``item_hash`` hashes the
input and references (a perturbed copy is another item).

HELM's ``stats.json`` gives the value (``mean``) but no standard error across instances: its
``stddev`` is across train trials. labledger's CI is the first interval over instances.

A run folder that cannot be read is left out with its one-line error (file, field, and the folder
as the task), the suite's other folders stored (see :func:`load`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from labledger.errors import ImportSourceError, LedgerError, RecordError
from labledger.importers.harness import (
    HarnessMetric,
    HarnessTask,
    as_float,
    item_hash,
    set_name,
    store_harness_run,
    task_error,
)
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


def _pkey(pert: Any) -> str | None:
    """A perturbation description as one comparable key (``None``: unperturbed).

    >>> _pkey({"name": "typos", "prob": 0.1, "robustness": True}) == _pkey({"robustness": True, "prob": 0.1, "name": "typos"})
    True
    """
    if not pert:
        return None
    if not isinstance(pert, dict):
        return json.dumps(pert)
    return json.dumps({k: v for k, v in pert.items() if v is not None}, sort_keys=True)


def _context(stat: Any, where: str) -> tuple[str, tuple[Any, Any, str | None]]:
    """``(metric, (split, sub_split, perturbation key))`` of a Stat: what HELM aggregates over
    (its ``MetricName`` less the metric's name)."""
    name, split, pert = _stat_name(stat, where)
    return name, (split, stat["name"].get("sub_split"), _pkey(pert))


def _label(desc: dict[str, Any], clash: bool) -> str:
    """A perturbation's part of a result-set name: its name, with its parameters when another
    perturbation of the run has the same name."""
    name = str(desc.get("name"))
    if not clash:
        return name
    params = [f"{k}={desc[k]}" for k in sorted(desc) if k not in _PERT_FLAGS and desc[k] is not None]
    return "_".join([name, *params])


#: Fields every HELM perturbation description has; the others are the perturbation's parameters.
_PERT_FLAGS = {"name", "robustness", "fairness", "computed_on"}
_Values = dict[str, dict[str, dict[int, float]]]  # metric -> instance id -> train trial -> value


#: HELM's per-instance usage stats -> the result row fields the usage metrics read (metrics.usage);
#: ``inference_runtime`` is in seconds, ``latency_ms`` in milliseconds.
USAGE_STATS = {"num_prompt_tokens": "tokens_in", "num_output_tokens": "tokens_out", "inference_runtime": "latency_ms"}


def _usage_row(by_trial: dict[int, dict[str, float]]) -> dict[str, float]:
    """One instance's usage fields: each the mean over the train trials that report it.

    >>> _usage_row({0: {"tokens_in": 70.0, "latency_ms": 0.5}, 1: {"tokens_in": 72.0, "latency_ms": 0.7}})
    {'tokens_in': 71.0, 'latency_ms': 600.0}
    """
    out: dict[str, float] = {}
    for field in USAGE_STATS.values():
        vals = [u[field] for u in by_trial.values() if field in u]
        if vals:
            mean = sum(vals) / len(vals)
            out[field] = mean * 1000.0 if field == "latency_ms" else mean
    return out


def _task(folder: Path) -> tuple[list[HarnessTask], dict[str, Any], str, list[str]]:
    """One run folder's result sets: one per split (and sub-split) of the unperturbed instances,
    and per perturbation its perturbed copies and HELM's worst case; with the folder's settings,
    the model, and what the import note says about it."""
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
    docs: dict[tuple[str, str | None], dict[str, Any]] = {}
    for i, rs in enumerate(state["request_states"]):
        inst = rs.get("instance") if isinstance(rs, dict) else None
        if not isinstance(inst, dict) or "id" not in inst:
            raise RecordError(
                "must have an instance with an id",
                source=str(folder / "scenario_state.json"),
                field=f"request_states[{i}].instance.id",
            )
        key = (str(inst["id"]), _pkey(inst.get("perturbation")))
        if key in docs:
            continue
        refs = inst.get("references") or []
        gold = [r.get("output", {}).get("text") for r in refs if "correct" in (r.get("tags") or [])]
        comps = (rs.get("result") or {}).get("completions") or [{}]
        text = comps[0].get("text")
        mapping = rs.get("output_mapping") or {}
        docs[key] = {
            "item_hash": item_hash((inst.get("input") or {}).get("text"), [r.get("output") for r in refs]),
            "prompt": (rs.get("request") or {}).get("prompt"),
            "target": gold[0] if len(gold) == 1 else gold,
            "prediction": mapping.get(text.strip(), text) if isinstance(text, str) else text,
        }
    # (split, sub_split, perturbation key) -> metric -> instance id -> train trial -> value
    values: dict[tuple[Any, Any, str | None], _Values] = {}
    # (split, sub_split, perturbation key) -> instance id -> train trial -> usage field -> value
    usage: dict[tuple[Any, Any, str | None], dict[str, dict[int, dict[str, float]]]] = {}
    descs: dict[str, dict[str, Any]] = {}
    where = str(folder / "per_instance_stats.json")
    for i, entry in enumerate(per):
        if not isinstance(entry, dict) or "instance_id" not in entry:
            raise RecordError("is missing", source=where, field=f"[{i}].instance_id")
        iid = str(entry["instance_id"])
        trial = entry.get("train_trial_index", 0)
        if not isinstance(trial, int) or isinstance(trial, bool):
            raise RecordError("must be an integer", source=where, field=f"[{i}].train_trial_index")
        for stat in entry.get("stats") or []:
            name, ctx = _context(stat, where)
            if name in USAGE_STATS and stat.get("count"):
                amount = as_float(stat.get("mean"))
                if amount is not None:
                    usage.setdefault(ctx, {}).setdefault(iid, {}).setdefault(trial, {})[USAGE_STATS[name]] = amount
                continue
            if not SCORE.search(name) or not stat.get("count"):
                continue
            mean = as_float(stat.get("mean"))
            if mean is None:
                raise RecordError("must be a number", source=where, field=f"[{i}].stats[{name}].mean")
            pert = stat["name"].get("perturbation")
            if ctx[2] is not None:
                if not isinstance(pert, dict) or pert.get("computed_on", "perturbed") != "perturbed":
                    raise RecordError(
                        "must describe a perturbed copy (computed_on 'perturbed')",
                        source=where,
                        field=f"[{i}].stats[{name}].name.perturbation",
                    )
                descs[ctx[2]] = pert
            values.setdefault(ctx, {}).setdefault(name, {}).setdefault(iid, {})[trial] = mean
    reported: dict[tuple[str, tuple[Any, Any, str | None]], float | None] = {}
    if (folder / "stats.json").is_file():
        for stat in load_json(folder / "stats.json") or []:
            name, ctx = _context(stat, str(folder / "stats.json"))
            reported[(name, ctx)] = as_float(stat.get("mean"))

    run_name = str(spec.get("name") or folder.name)
    task_name = ",".join(p for p in re.split(r"(?<=[:,])", run_name) if not p.startswith("model=")).rstrip(",:")
    base = task_name or run_name
    names = [str(d.get("name")) for d in descs.values()]
    labels = {k: _label(d, names.count(str(d.get("name"))) > 1) for k, d in descs.items()}
    info = {"adapter_method": adapter.get("method"), "num_train_trials": adapter.get("num_train_trials")}
    files = [f"{folder.name}/per_instance_stats.json"]

    def build(
        ctx: tuple[Any, Any, str | None],
        per_metric: _Values,
        doc_key: str | None,
        suffix: list[str],
        desc: dict[str, Any] | None,
    ) -> HarnessTask:
        split, sub_split, _ = ctx
        metrics = []
        for name, per_id in per_metric.items():
            rows = []
            for iid, by_trial in per_id.items():
                vals = [by_trial[t] for t in sorted(by_trial)]
                row = {"id": iid, "task": name, "gold": 1.0, "pred": sum(vals) / len(vals), "trials": vals}
                row.update(docs.get((iid, doc_key), {}))
                row.update(_usage_row(usage.get(ctx, {}).get(iid, {})))
                rows.append(row)
            metrics.append(
                HarnessMetric(
                    name,
                    "scores",
                    rows,
                    "mean",
                    value=reported.get((name, ctx)),
                    stderr=None,
                    stderr_method="none: HELM's stats.json stddev is across train trials, not instances",
                    extra={
                        "split": split,
                        "sub_split": sub_split,
                        "perturbation": desc,
                        "trials": max(len(v) for v in per_id.values()),
                    },
                )
            )
        parts = [base] if split in ("test", None) else [base, str(split)]
        if sub_split is not None:
            parts.append(str(sub_split))
        return HarnessTask(
            set_name(*parts, *suffix),
            run_name,
            metrics,
            info={
                **info,
                "split": split,
                "sub_split": sub_split,
                "perturbation": desc,
                # the unperturbed test split stands for the run in a suite
                "primary": desc is None and not suffix and split in ("test", None) and sub_split is None,
            },
            files=files,
        )

    tasks = []
    for ctx, per_metric in values.items():
        pkey = ctx[2]
        if pkey is None:
            tasks.append(build(ctx, per_metric, None, [], None))
        else:
            tasks.append(build(ctx, per_metric, pkey, [labels[pkey]], descs[pkey]))
    # HELM's worst case (metric.py compute_worst_case_metrics): per instance and train trial, the
    # lowest value over the unperturbed copy and the perturbation's copy (or every robustness /
    # fairness perturbation's copies), averaged over instances.
    for (split, sub_split, pkey), per_metric in list(values.items()):
        if pkey is not None:
            continue
        groups: list[tuple[dict[str, Any], list[str], str]] = [
            ({**d, "computed_on": "worst"}, [k], labels[k]) for k, d in descs.items() if (split, sub_split, k) in values
        ]
        for flag in ("robustness", "fairness"):
            keys = [k for k, d in descs.items() if d.get(flag) and (split, sub_split, k) in values]
            if keys:
                desc = {"name": flag, "robustness": flag == "robustness", "fairness": flag == "fairness"}
                groups.append(({**desc, "computed_on": "worst"}, keys, flag))
        for desc, keys, label in groups:
            worst: _Values = {}
            for name, per_id in per_metric.items():
                for iid, by_trial in per_id.items():
                    copies = [values[(split, sub_split, k)].get(name, {}).get(iid, {}) for k in keys]
                    for t, v in by_trial.items():
                        worst.setdefault(name, {}).setdefault(iid, {})[t] = min([v, *(c[t] for c in copies if t in c)])
            wctx = (split, sub_split, _pkey(desc))
            tasks.append(build(wctx, worst, None, [label, "worst"], desc))
    notes = []
    if descs:
        notes.append(
            f"{folder.name}: perturbations imported as result sets of their own (the perturbed copies, and "
            f"HELM's worst case over the unperturbed and perturbed copies): {', '.join(sorted(set(labels.values())))}; "
            "HELM's computed_on=original stats (the unperturbed value on the perturbed instances) are not "
            "imported again"
        )
    return tasks, {"adapter_spec": adapter, "run_spec": spec}, str(adapter.get("model") or "model"), notes


def _model_of(folder: Path) -> str | None:
    """The model of a run folder that cannot be read whole: ``run_spec.json``'s, else ``None``."""
    try:
        spec = load_json(folder / "run_spec.json")
    except LedgerError:
        return None
    adapter = spec.get("adapter_spec") if isinstance(spec, dict) else None
    model = adapter.get("model") if isinstance(adapter, dict) else None
    return str(model) if model else None


def load(source: Source, stage: Ledger, opts: ImportOptions) -> list[ImportedRun]:
    """One run per model. A run folder that cannot be read is left out with its one-line error,
    told in the run of its model (from ``run_spec.json``; the first run when that cannot be read
    either); when no folder can be read, the first error ends the import and nothing is stored."""
    by_model: dict[str, list[tuple[Path, list[HarnessTask], dict[str, Any], list[str]]]] = {}
    failed: list[tuple[str | None, LedgerError]] = []
    for folder in run_folders(source.path):
        try:
            tasks, info, model, notes = _task(folder)
        except LedgerError as exc:
            failed.append((_model_of(folder), task_error(exc, folder.name)))
            continue
        by_model.setdefault(model, []).append((folder, tasks, info, notes))
    if failed and not by_model:
        raise failed[0][1]
    errors: dict[str, list[LedgerError]] = {}
    for owner, err in failed:
        errors.setdefault(owner if owner in by_model else next(iter(by_model)), []).append(err)
    runs = []
    for model, items in by_model.items():
        first = items[0][2]["adapter_spec"]
        config = {
            "harness": "helm",
            "harness_version": None,
            "model": model,
            "model_deployment": first.get("model_deployment"),
            "tasks": {
                str(info["run_spec"].get("name") or f.name): {
                    "method": info["adapter_spec"].get("method"),
                    "n_shot": info["adapter_spec"].get("max_train_instances"),
                    "num_train_trials": info["adapter_spec"].get("num_train_trials"),
                    "max_eval_instances": info["adapter_spec"].get("max_eval_instances"),
                    "run_spec": bool(info["run_spec"]),
                }
                for f, _, info, _ in items
            },
            "temperature": first.get("temperature"),
        }
        notes = [
            f"{f.name}: no run_spec.json; model and adapter settings from scenario_state.json"
            for f, _, info, _ in items
            if not info["run_spec"]
        ] + [n for *_, folder_notes in items for n in folder_notes]
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
                tasks=[t for _, tasks, _, _ in items for t in tasks],
                started=None,
                ended=None,
                notes=notes,
                errors=errors.get(model, []),
                files=[f / n for f, *_ in items for n in _FILES if (f / n).is_file()],
            )
        )
    return runs
