"""Evaluation pages' data: stored documents, a view of the stored rows, and logits for the
temperature illustration (``data/evals/<run>/<name>.js`` and ``<name>.logits.js``).

Documents are read generically: every ``evals/<name>/<kind>.json`` of the run (evaluations,
sweeps, calibrations, ... as the engines store them) is shipped as is, with over-long lists thinned
for display and marked so. A result set without a saved evaluation is evaluated at build time; when the evaluation refuses the
file, the page says why and shows the stored rows.

From the rows themselves the builder counts only what needs no metric definition: the confusion
counts of gold against the stored (or arg-max) prediction, the worst items by -log p(gold), and
top-label confidence bins for a reliability diagram. Each is labelled as counted from the rows.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import LedgerError
from labledger.site.comparisons import comparison_view
from labledger.store.jsonl import read_json
from labledger.store.view import RunView

#: Rows shown in the page's row table.
ROWS_SHOWN = 200
#: Worst items kept per task.
WORST_ITEMS = 100
#: Rows of logits shipped to the temperature illustration (per task).
LOGIT_ROWS = 20000
#: Lists in documents longer than this are thinned for display.
MAX_LIST = 5000
#: Slice fields with more distinct values than this are not sliced at build time.
MAX_SLICE_VALUES = 50
#: Bins of the reliability diagram counted from rows.
RELIABILITY_BINS = 10


def natural_labels(labels: Iterable[Any]) -> list[str]:
    """Labels as strings in a stable reading order: numerically when all are numbers.

    >>> natural_labels(["+1", "-1", "0"])
    ['-1', '0', '+1']
    """
    labels = sorted({str(x) for x in labels})

    def number(s: str) -> float | None:
        try:
            return float(s)
        except ValueError:
            return None

    nums = [number(s) for s in labels]
    if labels and all(n is not None for n in nums):
        return [s for _, s in sorted(zip(nums, labels))]
    return labels


def eval_names(view: RunView) -> list[str]:
    """Folders under ``evals/`` holding stored results or documents."""
    root = view.dir / "evals"
    if not root.is_dir():
        return []
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir()
        and ((p / "results.jsonl").is_file() or any(q.suffix == ".json" and q.name != "meta.json" for q in p.iterdir()))
    )


def _thin(value: Any, notes: list[str], where: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _thin(v, notes, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > MAX_LIST:
            step = math.ceil(len(value) / MAX_LIST)
            notes.append(f"{where}: {len(value):,} entries, every {step}th shown")
            kept = value[::step]
            if kept[-1] is not value[-1]:
                kept.append(value[-1])
            return [_thin(v, notes, where) for v in kept]
        return [_thin(v, notes, where) for v in value]
    return value


#: Order of document kinds on the page: the evaluation leads, calibration comes after it.
KIND_ORDER = ("evaluation", "comparison", "sweep", "calibration")


def kind_rank(kind: str) -> int:
    """Where a document kind goes on the evaluation page (unknown kinds last).

    >>> sorted(["calibration", "recipe", "evaluation"], key=kind_rank)
    ['evaluation', 'calibration', 'recipe']
    """
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def _documents(folder: Path, run_id: str, run_name: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        if path.name == "meta.json":
            continue
        try:
            doc = read_json(path)
        except LedgerError as exc:
            docs.append({"kind": path.stem, "origin": "saved", "error": str(exc)})
            continue
        notes: list[str] = []
        entry: dict[str, Any] = {
            "kind": path.stem,
            "origin": "saved",
            "file": path.name,
            "doc": _thin(doc, notes),
            "thinned": notes,
        }
        if path.stem == "comparison" and isinstance(doc, dict):
            entry["comparison"] = comparison_view(doc, run_id, run_name, folder.name)
        docs.append(entry)
    return sorted(docs, key=lambda d: kind_rank(d["kind"]))


def _engine_document(results: Path, by: list[str]) -> dict[str, Any]:
    """The evaluation of ``results`` (sliced ``by`` the given slice fields), computed now as
    ``labledger eval`` computes it (:func:`~labledger.analysis.harness.evaluate_stored`: a harness
    set on the harness's own metrics, with the harness's values and stderrs beside labledger's). A
    file the engine refuses (a :class:`~labledger.errors.LedgerError`, or one it cannot read) gives
    a document that says why, and the page shows the stored rows; any other error is a bug and raised."""
    from labledger.analysis.harness import evaluate_stored

    try:
        doc = evaluate_stored(results, by=by or None).to_dict()
    except (LedgerError, OSError) as exc:  # the site stands; this page says why
        return {
            "kind": "evaluation",
            "origin": "failed",
            "error": f"labledger could not evaluate {results.name}: {exc}",
        }
    doc = orjson.loads(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
    notes: list[str] = []
    return {
        "kind": "evaluation",
        "origin": "computed at build time, as labledger eval computes it",
        "doc": _thin(doc, notes),
        "thinned": notes,
    }


class _TaskRows:
    """Counts over one task's rows (no metric definitions involved). ``choices``: the rows are a
    harness's multiple-choice rows, whose labels are choice positions (``"0".."K-1"``) and whose
    probabilities are a softmax over the choices' log-likelihoods: no reliability bins and no
    logits for the temperature illustration (calibration over choice positions means nothing),
    and the confusion counts are of the gold position against the chosen one (the first of highest
    probability, as the harness's argmax), not against the stored prediction (the choice's text)."""

    def __init__(self, choices: bool = False) -> None:
        self.choices = choices
        self.n = 0
        self.labels: set[str] = set()
        self.kind: str | None = None
        self.pairs: dict[tuple[str, str], int] = {}
        self.worst: list[tuple[float, int, dict[str, Any]]] = []
        self.bins = [[0, 0.0, 0] for _ in range(RELIABILITY_BINS)]  # count, sum conf, correct
        self.logit_labels: list[str] | None = None
        self.logit_rows: list[list[float]] = []
        self.logit_gold: list[int] = []
        self.logit_source: str | None = None
        self.logit_total = 0

    def add(self, seq: int, row: dict[str, Any]) -> None:
        self.n += 1
        gold = row.get("gold")
        probs = row.get("probs")
        if isinstance(probs, dict) and probs and all(_num(v) for v in probs.values()):
            self.kind = self.kind or "classification"
            labels = [str(k) for k in probs]
            self.labels.update(labels)
            values = {str(k): float(v) for k, v in probs.items()}
            top = max(values, key=lambda lab: values[lab])
            pred = row.get("prediction", row.get("pred"))
            pred = str(pred) if isinstance(pred, (str, int)) and not isinstance(pred, bool) else top
            if gold is not None:
                g = str(gold)
                self.labels.add(g)
                chosen = top if self.choices else pred  # a choice row's prediction is the choice's text
                self.pairs[(g, chosen)] = self.pairs.get((g, chosen), 0) + 1
                p_gold = values.get(g, 0.0)
                ce = math.inf if p_gold <= 0 else -math.log(p_gold)
                item = {
                    "id": row.get("id"),
                    "gold": g,
                    "prediction": pred,
                    "p_gold": p_gold,
                    "cross_entropy": None if math.isinf(ce) else ce,
                    "probs": values,
                    "slices": row.get("slices"),
                }
                self._keep_worst(ce, seq, item)
                if self.choices:
                    return
                conf = values[top]
                b = min(RELIABILITY_BINS - 1, int(conf * RELIABILITY_BINS))
                self.bins[b][0] += 1
                self.bins[b][1] += conf
                self.bins[b][2] += int(top == g)
                self._add_logits(row, values, g)
        elif _num(row.get("pred")) and _num(gold):
            self.kind = self.kind or "regression"
            err = abs(float(row["pred"]) - float(gold or 0))
            self._keep_worst(
                err,
                seq,
                {
                    "id": row.get("id"),
                    "gold": gold,
                    "prediction": row["pred"],
                    "abs_error": err,
                    "slices": row.get("slices"),
                },
            )
        elif gold is not None and "pred" in row:
            self.kind = self.kind or "match"
            g, p = _label(gold), _label(row["pred"])
            self.pairs[(g, p)] = self.pairs.get((g, p), 0) + 1

    def _keep_worst(self, badness: float, seq: int, item: dict[str, Any]) -> None:
        entry = (badness, -seq, item)
        if len(self.worst) < WORST_ITEMS:
            heapq.heappush(self.worst, entry)
        elif entry[:2] > self.worst[0][:2]:
            heapq.heapreplace(self.worst, entry)

    def _add_logits(self, row: dict[str, Any], probs: dict[str, float], gold: str) -> None:
        logits = row.get("logits")
        source = "logits"
        if not (isinstance(logits, dict) and logits and all(_num(v) for v in logits.values())):
            logits = {k: (math.log(v) if v > 0 else -1e4) for k, v in probs.items()}
            source = "log-probabilities (no logits stored)"
        if self.logit_labels is None:
            self.logit_labels = natural_labels(logits)
            self.logit_source = source
        if source != self.logit_source or gold not in logits or set(map(str, logits)) != set(self.logit_labels):
            return
        self.logit_total += 1
        if len(self.logit_rows) >= LOGIT_ROWS:
            return
        z = {str(k): float(v) for k, v in logits.items()}
        self.logit_rows.append([float(f"{z[k]:.7g}") for k in self.logit_labels])
        self.logit_gold.append(self.logit_labels.index(gold))

    def view(self) -> dict[str, Any]:
        labels = natural_labels(self.labels)
        out: dict[str, Any] = {"n": self.n, "kind": self.kind, "labels": labels}
        if self.pairs:
            idx = {
                lab: i
                for i, lab in enumerate(
                    natural_labels({*labels, *(p for _, p in self.pairs), *(g for g, _ in self.pairs)})
                )
            }
            order = list(idx)
            matrix = [[0] * len(order) for _ in order]
            for (g, p), c in self.pairs.items():
                matrix[idx[g]][idx[p]] += c
            out["confusion"] = {"labels": order, "rows": "gold", "columns": "pred", "matrix": matrix}
            out["confusion_note"] = (
                "counted from the stored rows: the gold choice's position (rows) against the chosen "
                "position (0 = the first choice); positions, not classes"
                if self.choices
                else "counted from the stored rows: gold (rows) against the "
                "stored prediction, else the label of highest probability"
            )
        if self.worst:
            worst = sorted(self.worst, key=lambda e: (e[0], e[1]), reverse=True)
            out["worst"] = [e[2] for e in worst]
            out["worst_by"] = "cross_entropy" if self.kind == "classification" else "abs_error"
        if any(b[0] for b in self.bins):
            out["reliability"] = {
                "bins": [
                    {
                        "low": i / RELIABILITY_BINS,
                        "high": (i + 1) / RELIABILITY_BINS,
                        "count": b[0],
                        "confidence": b[1] / b[0] if b[0] else None,
                        "accuracy": b[2] / b[0] if b[0] else None,
                    }
                    for i, b in enumerate(self.bins)
                ],
                "note": f"counted from the stored rows: top-label probability in "
                f"{RELIABILITY_BINS} equal-width bins, and how often that label was gold",
            }
        return out

    def logits(self) -> dict[str, Any] | None:
        if not self.logit_rows or self.logit_labels is None:
            return None
        return {
            "labels": self.logit_labels,
            "gold": self.logit_gold,
            "logits": self.logit_rows,
            "source": self.logit_source,
            "total": self.logit_total,
            "shown": len(self.logit_rows),
        }


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _label(v: Any) -> str:
    return v if isinstance(v, str) else orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def choice_tasks(meta: Any) -> frozenset[str]:
    """The tasks of a stored result set (its ``meta.json``) whose rows are a harness's
    multiple-choice rows (shape ``choices``, see :mod:`labledger.importers.harness`).

    >>> sorted(choice_tasks({"harness": {"metrics": {"acc": {"shape": "choices"}, "f1": {"shape": "labels"}}}}))
    ['acc']
    """
    harness = meta.get("harness") if isinstance(meta, dict) else None
    metrics = harness.get("metrics") if isinstance(harness, dict) else None
    if not isinstance(metrics, dict):
        return frozenset()
    return frozenset(t for t, m in metrics.items() if isinstance(m, dict) and m.get("shape") == "choices")


def rows_view(results: Path, choices: frozenset[str] = frozenset()) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(rows view, logits by task)`` of a stored ``results.jsonl``, read one line at a time;
    ``choices``: its tasks of a harness's multiple-choice rows (:func:`choice_tasks`)."""
    from labledger.store.jsonl import read_jsonl

    tasks: dict[str, _TaskRows] = {}
    shown: list[dict[str, Any]] = []
    slice_values: dict[str, set[str]] = {}
    n = 0
    for row in read_jsonl(results):
        if not isinstance(row, dict):
            continue
        n += 1
        slices = row.get("slices")
        if isinstance(slices, dict):
            for k, v in slices.items():
                seen = slice_values.setdefault(str(k), set())
                if len(seen) <= MAX_SLICE_VALUES:
                    seen.add(_label(v))
        if len(shown) < ROWS_SHOWN:
            shown.append(row)
        task = row.get("task")
        task = task if isinstance(task, str) else "(no task)"
        tr = tasks.get(task)
        if tr is None:
            tr = tasks[task] = _TaskRows(task in choices)
        tr.add(n, row)
    view = {
        "n": n,
        "shown": shown,
        "tasks": {t: tr.view() for t, tr in tasks.items()},
        "slice_fields": {k: len(v) for k, v in slice_values.items()},
    }
    logits = {t: lg for t, tr in tasks.items() if (lg := tr.logits()) is not None}
    return view, logits


def eval_payload(view: RunView, name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(page data, logits data or None)`` of one evaluation folder of a run."""
    folder = view.dir / "evals" / name
    meta_path = folder / "meta.json"
    try:
        meta = read_json(meta_path) if meta_path.is_file() else {}
    except LedgerError:
        meta = {}
    documents = _documents(folder, view.id, view.name)
    results = folder / "results.jsonl"
    rows = logits = None
    if results.is_file():
        rows, logits = rows_view(results, choice_tasks(meta))
        if not any(d["kind"] == "evaluation" and "doc" in d for d in documents):
            by = [k for k, count in rows["slice_fields"].items() if 1 < count <= MAX_SLICE_VALUES]
            documents.insert(0, _engine_document(results, by))
    payload = {
        "run": view.id,
        "run_name": view.name,
        "name": name,
        "meta": meta,
        "documents": documents,
        "rows": rows,
        "has_logits": bool(logits),
    }
    return payload, ({"run": view.id, "name": name, "tasks": logits} if logits else None)


def eval_summary(payload: dict[str, Any]) -> dict[str, Any]:
    """The line of an evaluation on the run page and in the catalog."""
    rows = payload.get("rows") or {}
    return {
        "name": payload["name"],
        "rows": rows.get("n"),
        "kinds": [d["kind"] for d in payload["documents"] if "doc" in d],
        "tasks": sorted((rows.get("tasks") or {}).keys()),
    }
