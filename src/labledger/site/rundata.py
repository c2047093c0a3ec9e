"""The run page's data: config, curves of every scalar, trainer history, validation per epoch with
the selected epoch, checkpoints, notes, files, and the media a ``labledger.wandb`` run logged
(images, tables, histograms; ``data/runs/<run>.js``)."""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from labledger.site.curves import Curves
from labledger.site.shown_paths import shown_argv, shown_command, shown_path, shown_paths
from labledger.store.compressed import record_exists
from labledger.store.ledger import RunInfo
from labledger.store.view import RunView

#: Prefixes and kinds that mark a history entry as a validation (evaluation) entry.
VALIDATION_PREFIXES = ("eval_", "val_", "validation_", "valid_")
VALIDATION_KINDS = ("eval", "evaluation", "val", "valid", "validation")
#: Unprefixed metric names that make an entry a validation entry when nothing else does (seed 000).
PLAIN_METRICS = ("accuracy", "f1", "roc_auc", "precision", "recall", "auc", "macro_f1", "mcc")
#: Keys of history entries that locate an entry rather than measure it.
POSITION_KEYS = ("step", "epoch", "epoch_index", "examples_seen", "microbatches", "global_step")
#: Words that make a metric lower-is-better when selecting an epoch.
LOWER_IS_BETTER = ("loss", "error", "mae", "rmse", "mse", "ece", "brier", "perplexity", "runtime")
#: Files listed individually on the run page (the rest are counted per folder).
MAX_FILES_LISTED = 500


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` is better (by its name).

    >>> higher_is_better("eval_accuracy"), higher_is_better("eval_loss")
    (True, False)
    """
    name = metric.lower()
    return not any(word in name for word in LOWER_IS_BETTER)


def _finite(v: Any) -> Any:
    return v if is_number(v) and math.isfinite(float(v)) else None


#: At most this many system samples go into the run page (evenly thinned; the first and last kept).
MAX_SYSTEM_POINTS = 2000


def system_view(records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The run's system metrics (``system.jsonl``) for its page: seconds since the first sample as
    ``x``, one series per numeric key, thinned to :data:`MAX_SYSTEM_POINTS`; None without samples.

    >>> system_view([{"time": 10.0, "cpu_percent": 50.0}, {"time": 11.5, "cpu_percent": 75.0, "rss_mb": 9}])
    {'samples': 2, 'shown': 2, 'x': [0.0, 1.5], 'series': {'cpu_percent': [50.0, 75.0], 'rss_mb': [None, 9]}}
    """
    recs = [r for r in records if is_number(r.get("time"))]
    if not recs:
        return None
    n = len(recs)
    if n > MAX_SYSTEM_POINTS:
        stride = math.ceil(n / MAX_SYSTEM_POINTS)
        recs = recs[::stride] + ([recs[-1]] if (n - 1) % stride else [])
    t0 = recs[0]["time"]
    keys = list(dict.fromkeys(k for r in recs for k, v in r.items() if k != "time" and is_number(v)))
    series = {k: [_finite(r.get(k)) for r in recs] for k in keys}
    return {"samples": n, "shown": len(recs), "x": [round(r["time"] - t0, 3) for r in recs], "series": series}


def _is_validation(entry: Mapping[str, Any]) -> bool:
    kind = entry.get("kind")
    if isinstance(kind, str) and kind.lower() in VALIDATION_KINDS:
        return True
    return any(isinstance(k, str) and k.startswith(VALIDATION_PREFIXES) and is_number(v) for k, v in entry.items())


def validation_view(
    history: list[dict[str, Any]], meta: Mapping[str, Any], config: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The validation entries of a history, their metrics, and the selected epoch.

    The selected epoch is the one the run says it selected (an entry with ``selected: true``, or
    ``selected_epoch``/``best_epoch`` in the run's meta or config); otherwise the best entry by a
    default metric (F1, then accuracy, then loss), ties to the earliest entry, as
    :func:`labledger.metrics.sweep.select_epoch` does. The page lets the reader pick another metric.
    """
    rows = [i for i, e in enumerate(history) if _is_validation(e)]
    if not rows:
        rows = [i for i, e in enumerate(history) if any(is_number(e.get(m)) for m in PLAIN_METRICS)]
    if not rows:
        return None
    entries = [history[i] for i in rows]
    metrics: list[str] = []
    for e in entries:
        for k, v in e.items():
            if is_number(v) and k not in POSITION_KEYS and k not in metrics and k != "selected":
                metrics.append(k)
    epoch_key = next((k for k in ("epoch_index", "epoch", "step") if all(is_number(e.get(k)) for e in entries)), None)
    out: dict[str, Any] = {"rows": rows, "metrics": metrics, "epoch_key": epoch_key, "selected": None}
    explicit = next((j for j, e in enumerate(entries) if e.get("selected") is True), None)
    if explicit is None:
        for source in (meta, config):
            for key in ("selected_epoch", "best_epoch"):
                want = source.get(key) if isinstance(source, Mapping) else None
                if want is not None and epoch_key is not None:
                    explicit = next((j for j, e in enumerate(entries) if e.get(epoch_key) == want), None)
                if explicit is not None:
                    break
            if explicit is not None:
                break
    if explicit is not None:
        out["selected"] = {
            "position": explicit,
            "metric": None,
            "source": "recorded by the run",
            "rule": "the epoch the run recorded as selected",
        }
        return out
    metric = _default_metric(metrics)
    if metric is None:
        return out
    hib = higher_is_better(metric)
    position = _select(entries, metric, hib)
    if position is not None:
        best = "highest" if hib else "lowest"
        out["selected"] = {
            "position": position,
            "metric": metric,
            "higher_is_better": hib,
            "source": "computed by the site builder",
            "rule": f"{best} {metric}; ties go to the earliest entry",
        }
    return out


def _default_metric(metrics: list[str]) -> str | None:
    for word in ("f1", "accuracy", "auc", "loss"):
        for m in metrics:
            if word in m.lower() and "runtime" not in m.lower():
                return m
    return metrics[0] if metrics else None


def _select(entries: list[dict[str, Any]], metric: str, hib: bool) -> int | None:
    from labledger.metrics.sweep import select_epoch

    if not any(is_number(e.get(metric)) and math.isfinite(e[metric]) for e in entries):
        return None
    chosen = select_epoch(entries, metric=metric, higher_is_better=hib)
    return chosen.index


def files_view(view: RunView) -> dict[str, Any]:
    """The run's stored files: a listing (capped), counts per top folder and total size."""
    root = view.dir / "files"
    listed: list[list[Any]] = []
    folders: dict[str, list[int]] = {}
    count = total = 0
    if root.is_dir():
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            size = path.stat().st_size
            count += 1
            total += size
            top = rel.split("/", 1)[0] if "/" in rel else ""
            f = folders.setdefault(top, [0, 0])
            f[0] += 1
            f[1] += size
            if len(listed) < MAX_FILES_LISTED:
                listed.append([rel, size])
    return {
        "count": count,
        "bytes": total,
        "listed": listed,
        "folders": [[k, v[0], v[1]] for k, v in sorted(folders.items())],
    }


#: The media section's bounds: steps per image or histogram key (evenly thinned, the first and the
#: last kept), images per step, the last steps of each table key, rows per table (the page pages
#: them), characters per text cell.
MAX_MEDIA_STEPS = 200
MAX_IMAGES_PER_STEP = 32
MAX_TABLE_STEPS = 20
MAX_TABLE_ROWS = 1000
MAX_CELL_CHARS = 1000
#: A file reference the site can copy to ``images/<run>/<ref>`` (what ``LL.imageSrc`` accepts).
SAFE_REF = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


def thin(n: int, cap: int) -> list[int]:
    """At most ``cap`` of the positions ``0..n-1``, evenly spaced, the first and the last kept.

    >>> thin(5, 10), thin(10, 4)
    ([0, 1, 2, 3, 4], [0, 3, 6, 9])
    """
    if n <= cap:
        return list(range(n))
    if cap <= 1:
        return [n - 1]
    return sorted({round(i * (n - 1) / (cap - 1)) for i in range(cap)})


class _Media:
    """What the media section refers to: the run's files (``files/...``) the site copies."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self.refs: dict[str, None] = {}

    def ref(self, path: Any) -> str | None:
        """The reference under ``files/`` of a stored file (``files/media/k/0-0.png``), registered
        for copying; None for a path that is not a file of the run's ``files/`` folder."""
        if not isinstance(path, str) or not path.startswith("files/"):
            return None
        ref = path[len("files/") :]
        if not SAFE_REF.match(ref) or ".." in ref.split("/") or not (self.dir / path).is_file():
            return None
        self.refs[ref] = None
        return ref

    def image(self, f: Mapping[str, Any]) -> dict[str, Any] | None:
        ref = self.ref(f.get("path"))
        if ref is None:
            return None
        out: dict[str, Any] = {"ref": ref, "caption": f.get("caption")}
        shape = f.get("shape")
        if isinstance(shape, list) and len(shape) >= 2:
            out["h"], out["w"] = shape[0], shape[1]
        masks = []
        for m in f.get("masks") or []:
            overlay = self.ref(m.get("overlay")) if isinstance(m, Mapping) else None
            if overlay is not None:
                masks.append(
                    {
                        "name": str(m.get("name")),
                        "overlay": overlay,
                        "labels": m.get("class_labels") or {},
                        "colors": m.get("colors") or {},
                    }
                )
        if masks:
            out["masks"] = masks
        return out

    def cell(self, v: Any) -> Any:
        """A table cell for the page: an image as ``{"image": ref, "caption"}``, long text cut."""
        if isinstance(v, Mapping) and v.get("_type") == "image-file":
            img = self.image(v)
            return {"image": img["ref"], "caption": img.get("caption")} if img else "(image missing)"
        if isinstance(v, str) and len(v) > MAX_CELL_CHARS:
            return v[:MAX_CELL_CHARS] + "…"
        if isinstance(v, (Mapping, list)):
            text = orjson.dumps(v, default=str).decode()
            return v if len(text) <= MAX_CELL_CHARS else text[:MAX_CELL_CHARS] + "…"
        return v if not (isinstance(v, float) and not math.isfinite(v)) else str(v)


def _table_rows(view: RunView, rec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The first :data:`MAX_TABLE_ROWS` rows of a logged table (its JSONL file or its result set)."""
    rows: list[dict[str, Any]] = []
    if isinstance(rec.get("results"), str):
        try:
            for row in view.results(rec["results"]):
                rows.append(row)
                if len(rows) >= MAX_TABLE_ROWS:
                    break
        except Exception:  # noqa: BLE001 - a result set gone or unreadable: the table says so
            return []
        return rows
    path = rec.get("path")
    if not isinstance(path, str) or ".." in path.split("/") or not path.startswith("files/"):
        return rows
    try:
        with open(view.dir / path, "rb") as fh:
            for line in fh:
                if line.strip():
                    row = orjson.loads(line)
                    if isinstance(row, dict):
                        rows.append(row)
                if len(rows) >= MAX_TABLE_ROWS:
                    break
    except (OSError, orjson.JSONDecodeError):
        pass
    return rows


def media_view(view: RunView) -> dict[str, Any] | None:
    """The images, tables and histograms a run logged (``media.jsonl``, written by
    ``labledger.wandb``), per key and step, bounded (see :data:`MAX_MEDIA_STEPS` and the others):
    images as references under the run's ``files/`` (the site copies them to
    ``images/<run>/<ref>``: ``files`` lists them), tables as columns and rows with images in cells,
    histograms as bin edges and counts. None when the run logged none."""
    if not record_exists(view.dir / "media.jsonl"):
        return None
    images: dict[str, list[Mapping[str, Any]]] = {}
    tables: dict[str, list[Mapping[str, Any]]] = {}
    hists: dict[str, list[Mapping[str, Any]]] = {}
    for entry in view.records("media"):
        key, kind = entry.get("key"), entry.get("kind")
        if not isinstance(key, str):
            continue
        by = {"image": images, "table": tables, "histogram": hists}.get(str(kind))
        if by is not None:
            by.setdefault(key, []).append(entry)
    if not (images or tables or hists):
        return None
    media = _Media(view.dir)
    out: dict[str, Any] = {"images": [], "tables": [], "histograms": []}
    for key, recs in images.items():
        steps, items, more = [], [], []
        for i in thin(len(recs), MAX_MEDIA_STEPS):
            files = [f for f in recs[i].get("files") or [] if isinstance(f, Mapping)]
            shown = [img for img in (media.image(f) for f in files[:MAX_IMAGES_PER_STEP]) if img]
            steps.append(recs[i].get("step"))
            items.append(shown)
            more.append(max(0, len(files) - MAX_IMAGES_PER_STEP))
        out["images"].append({"key": key, "logged": len(recs), "steps": steps, "items": items, "more": more})
    for key, recs in tables.items():
        shown_tables = []
        for rec in recs[-MAX_TABLE_STEPS:]:
            rows = _table_rows(view, rec)
            columns = [str(c) for c in rec.get("columns") or []] or list(dict.fromkeys(k for r in rows for k in r))
            shown_tables.append(
                {
                    "step": rec.get("step"),
                    "columns": columns,
                    "rows": rec.get("rows", len(rows)),
                    "data": [[media.cell(r.get(c)) for c in columns] for r in rows],
                    "results": rec.get("results"),
                }
            )
        out["tables"].append({"key": key, "logged": len(recs), "tables": shown_tables})
    for key, recs in hists.items():
        picked = [recs[i] for i in thin(len(recs), MAX_MEDIA_STEPS)]
        out["histograms"].append(
            {
                "key": key,
                "logged": len(recs),
                "steps": [r.get("step") for r in picked],
                "bins": [[_finite(b) for b in r.get("bins") or []] for r in picked],
                "counts": [[_finite(c) for c in r.get("counts") or []] for r in picked],
            }
        )
    out["files"] = list(media.refs)
    return out


def media_refs(payload: Mapping[str, Any]) -> list[str]:
    """The files (relative to the run's ``files/``) a run payload's media section shows: the site
    copies each to ``images/<run>/<ref>``."""
    media = payload.get("media")
    return list(media.get("files") or []) if isinstance(media, Mapping) else []


def step_metrics(view: RunView, keys: Iterable[str]) -> dict[str, str]:
    """Which scalar is the x axis of which (``define_metric(name, step_metric=...)``, kept by
    ``labledger.wandb`` in ``files/wandb-metrics.json``; a later definition wins, globs as W&B's).

    Only scalars the run logged are named, on both sides.
    """
    path = view.dir / "files" / "wandb-metrics.json"
    if not path.is_file():
        return {}
    try:
        defs = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    names = list(keys)
    known = set(names)
    out: dict[str, str] = {}
    for d in defs if isinstance(defs, list) else []:
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
            continue
        axis = d.get("step_metric")
        for k in names:
            if k != axis and fnmatch.fnmatchcase(k, d["name"]):
                if isinstance(axis, str) and axis in known:
                    out[k] = axis
                else:
                    out.pop(k, None)
    return out


def run_basics(info: RunInfo) -> dict[str, Any]:
    """The fields of a run the catalog and every page show."""
    summary = info.summary or {}
    return {
        "id": info.id,
        "name": info.name,
        "group": info.group,
        "tags": list(info.tags),
        "status": info.status,
        "started": info.started,
        "ended": info.ended,
        "duration": info.duration if info.status != "running" else None,
        "error": info.error,
        "steps": summary.get("steps"),
        "headline": summary.get("headline") or {},
        "last": summary.get("last") or {},
    }


def project_folder(view: RunView) -> str:
    """The folder that holds the run's ledger (``~/proj`` for ``~/proj/.labledger``): the site
    shows machine paths relative to it (:mod:`labledger.site.shown_paths`)."""
    return str(Path(view.ledger.root).resolve().parent)


def shown_meta(meta: Mapping[str, Any], project: str) -> dict[str, Any]:
    """``run.json`` as the run page's "Run record" shows it: without ``notes`` (a section of their
    own), every machine path shortened (``cwd``, ``argv``, an import's source...; ``argv[0]`` by
    its name), so a mailed site carries none; ``run.json`` keeps them whole.

    >>> shown_meta({"cwd": "/p/sub", "argv": ["/v/bin/python", "/p/t.py"], "notes": "n", "host": "h"}, "/p")
    {'cwd': 'sub', 'argv': ['python', 't.py'], 'host': 'h'}
    """
    out = shown_paths({k: v for k, v in meta.items() if k != "notes"}, project=project)
    if isinstance(meta.get("argv"), list):
        out["argv"] = shown_argv(meta["argv"], project=project)
    return out


def started_as(meta: Mapping[str, Any], project: str) -> dict[str, str | None] | None:
    """How the run was started, for the run page's header: ``command`` (its ``argv`` as a shell
    line, :func:`~labledger.site.shown_paths.shown_command`) and ``cwd`` (relative to the folder
    holding the ledger, ``"."`` for that folder; ``None`` when not recorded); ``None`` without
    ``argv`` (a run imported from a format that does not record it).

    >>> started_as({"argv": ["/v/bin/labledger", "demo", "--quick"], "cwd": "/p"}, "/p")
    {'command': 'labledger demo --quick', 'cwd': '.'}
    >>> started_as({"cwd": "/p"}, "/p") is None
    True
    """
    argv = meta.get("argv")
    if not isinstance(argv, list) or not argv:
        return None
    cwd = meta.get("cwd")
    return {
        "command": shown_command(argv, project=project),
        "cwd": shown_path(cwd, project=project) if isinstance(cwd, str) else None,
    }


def run_payload(
    view: RunView,
    info: RunInfo,
    *,
    batches: dict[str, Any] | None,
    evaluations: list[dict[str, Any]],
    tests: list[dict[str, Any]],
    curves: Curves,
) -> dict[str, Any]:
    """Everything ``run.html`` shows, as one JSON-ready dict. ``curves``: what
    :func:`labledger.site.curves.write_curves` wrote of the run's scalars (the page draws each from
    entry k of ``data/curves/<run>.js``, ``scalars`` naming them in that order); ``cursor.scalars``: how
    many records the run's scalar file held, the ``since`` a page in ``labledger serve`` asks the
    API for while the run logs."""
    meta = view.meta
    config = view.config
    history = list(view.history())
    project = project_folder(view)
    checkpoints = [
        {
            **c,
            **{
                k: shown_path(view.display_path(c[k]), project=project)
                for k in ("path", "source")
                if isinstance(c.get(k), str)
            },
        }
        for c in view.checkpoints()
    ]
    validation = validation_view(history, meta, config)
    if validation and validation["selected"] is not None:
        chosen = history[validation["rows"][validation["selected"]["position"]]]
        for c in checkpoints:
            if c.get("step") is not None and c.get("step") == chosen.get("step"):
                c["selected"] = True
    return {
        **run_basics(info),
        "meta": shown_meta(meta, project),
        "started_as": started_as(meta, project),
        "config": config,
        "scalars": curves.names,
        # scalar -> the scalar that is its x axis (define_metric(step_metric=...))
        "step_metrics": step_metrics(view, curves.names),
        "media": media_view(view),
        # how many scalar records the page has: a live page asks the server for those after it
        "cursor": {"scalars": curves.records},
        "system": system_view(view.records("system")) if record_exists(view.dir / "system.jsonl") else None,
        "history": history,
        "validation": validation,
        "checkpoints": checkpoints,
        "notes": list(view.notes()),
        "files": files_view(view),
        "batches": batches,
        "evaluations": evaluations,
        "tests": tests,
    }
