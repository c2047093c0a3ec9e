"""``apply``: a recipe applied to ``results.jsonl``, every raw byte kept.

Each output line is the input line, byte for byte, up to its closing brace, then
``, "calibrated": {...}`` and the closing brace (and whatever followed it on the line): the raw
fields are never parsed and re-written, so they cannot change. ``calibrated`` holds the recipe id,
the method, the calibrated ``prediction`` (a label) and, when the method changes probabilities,
the calibrated ``probs`` (the row's own labels, in the row's own order) and, for a binary task,
the calibrated ``score``. Blank lines and lines of tasks the recipe leaves alone (with
``keep_other_tasks``) are copied as they are.

Refused, with an error that says so: a file that already has ``calibrated`` fields (applying
twice), a recipe task the file does not have, and a file task the recipe does not know (unless
``keep_other_tasks``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import orjson

from labledger.calibrate.methods import apply_steps, prob_task, task_arrays
from labledger.calibrate.recipe import Recipe, load_recipe
from labledger.errors import CalibrationError
from labledger.inputs.results import LabelTask, ProbTask, ResultSet, TaskData, read_results
from labledger.store.jsonl import atomic_write

FIELD = "calibrated"


def reading_positive(recipe: Recipe) -> dict[str, str]:
    """Positive labels to read the recipe's tasks with (binary tasks that give only a score)."""
    out = {}
    for name, t in recipe.tasks.items():
        pos = (t.fit or {}).get("positive")
        if pos is None:
            pos = next((s.params["positive"] for s in t.steps if "positive" in s.params), None)
        if pos is not None:
            out[name] = pos
    return out


def check_tasks(rs: ResultSet, recipe: Recipe, *, keep_other_tasks: bool) -> None:
    """The recipe's tasks must be in the file, and (unless ``keep_other_tasks``) the reverse."""
    missing = [t for t in recipe.tasks if t not in rs.tasks]
    if missing:
        raise CalibrationError(
            f"the recipe calibrates task(s) {', '.join(map(repr, missing))}, which "
            f"{rs.source} does not have (its tasks: {', '.join(rs) or 'none'})"
        )
    unknown = [t for t in rs.tasks if t not in recipe.tasks]
    if unknown and not keep_other_tasks:
        raise CalibrationError(
            f"{rs.source} has task(s) {', '.join(map(repr, unknown))} that recipe {recipe.id} "
            f"does not know (it calibrates {', '.join(map(repr, recipe.tasks))}); pass "
            f"keep_other_tasks (--keep-other-tasks) to copy their rows unchanged"
        )


def check_not_calibrated(td: TaskData, source: str) -> None:
    if FIELD in td.extras:
        values = td.extras[FIELD]
        i = next(i for i, v in enumerate(values) if v is not None)
        rid = values[i].get("recipe") if isinstance(values[i], Mapping) else None
        raise CalibrationError(
            f"{source}:{int(td.lines[i])}: field '{FIELD}' is already there"
            f"{f' (recipe {rid})' if rid else ''}: this file was already calibrated. Apply "
            f"recipes to the raw results.jsonl"
        )


def label_order(td: LabelTask, first_line: bytes | None) -> list[int]:
    """Label columns in the order the task's first row gives its probabilities (then the rest)."""
    order: list[str] = []
    if first_line is not None:
        try:
            row = orjson.loads(first_line)
        except orjson.JSONDecodeError:
            row = None
        probs = row.get("probs") if isinstance(row, dict) else None
        if isinstance(probs, dict):
            order = [str(k) for k in probs if str(k) in td.labels]
    order += [lab for lab in td.labels if lab not in order]
    return [td.labels.index(lab) for lab in order]


def calibrate_task(td: TaskData, recipe: Recipe, name: str) -> tuple[Any, dict[str, Any]]:
    """The calibrated predictions of a task (a :class:`~labledger.calibrate.methods.Scores`) and a
    summary: rows, predictions changed, and the EM priors when a step estimated them."""
    t = recipe.tasks[name]
    arr = task_arrays(td, t.steps)
    raw = arr.scores()
    st = apply_steps(t.steps, raw, arr, where=f"recipe {recipe.id}, task '{name}'")
    summary = {
        "n": td.n,
        "method": t.method,
        "steps": t.describe(),
        "changed_predictions": int(np.count_nonzero(st.pred != raw.pred)),
        "probabilities_changed": bool(st.changed),
        "transductive": t.transductive,
    }
    if "em" in st.info:
        summary["em"] = st.info["em"]
    return st, summary


def _column_json(values: np.ndarray) -> list[bytes]:
    """Each float as JSON (orjson's shortest round-trip form), from one call."""
    if len(values) == 0:
        return []
    return orjson.dumps(values.tolist())[1:-1].split(b",")


def _esc(b: bytes) -> bytes:
    return b.replace(b"%", b"%%")


def render_lines(
    raws: list[bytes],
    td: ProbTask,
    recipe_id: str,
    method: str,
    p: np.ndarray | None,
    pred: np.ndarray,
    order: list[int],
    *,
    source: str = "<results>",
) -> list[bytes]:
    """Each raw line with ``, "calibrated": {...}`` before its closing brace: one template per task.

    Calibrated probabilities (``p``, when the method changes them) list the labels in ``order``
    (column indices), leaving out labels whose probability is 0 before and after (options a row
    does not have)."""
    labels = td.labels
    field_head = orjson.dumps({"recipe": recipe_id, "method": method})[:-1] + b',"prediction":'
    head = b', "' + FIELD.encode() + b'": ' + field_head
    label_json = [orjson.dumps(lab) for lab in labels]
    preds = [label_json[j] for j in pred.tolist()]
    if p is None:
        columns, names = [], []
    elif td.kind == "binary":
        columns, names = [_column_json(p[:, labels.index(str(td.positive))])], [b'"score"']
    else:
        columns, names = [_column_json(p[:, j]) for j in order], [label_json[j] for j in order]
    if td.kind == "binary" or p is None:
        tail = b"".join(b"," + n + b":%b" for n in names) + b"}"
        full = [True] * len(raws)
    else:
        tail = b',"probs":{' + b",".join(_esc(n) + b":%b" for n in names) + b"}}"
        full = cast("list[bool]", ((p > 0) | (td.probs > 0)).all(axis=1).tolist())
    template = b"%b" + _esc(head) + b"%b" + tail + b"}"
    out = []
    for i, (raw, lab, *vals) in enumerate(zip(raws, preds, *columns)):
        if full[i] and raw[-1:] == b"}":
            out.append(template % (raw[:-1], lab, *vals))
            continue
        if full[i]:
            blob = field_head + lab + tail % tuple(vals)
        else:
            keep = (np.asarray(p)[i] > 0) | (td.probs[i] > 0)
            body = b",".join(names[c] + b":" + vals[c] for c, j in enumerate(order) if keep[j])
            blob = field_head + lab + b',"probs":{' + body + b"}}"
        out.append(_insert(raw, blob, source, int(td.lines[i])))
    return out


def apply(
    results: str | os.PathLike[str],
    recipe: Recipe | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    keep_other_tasks: bool = False,
    display: str | None = None,
) -> dict[str, Any]:
    """Write ``out``: the rows of ``results`` with a ``calibrated`` field added (raw bytes kept).

    Returns a summary: rows written, per task the number calibrated, the predictions changed,
    and (EM) the priors estimated on the file's items.

    >>> import tempfile, pathlib
    >>> from labledger.calibrate import Recipe, Step, TaskRecipe
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "r.jsonl").write_text('{"id": 1, "task": "t", "gold": "a", "probs": {"a": 0.4, "b": 0.6}}\\n')
    >>> rec = Recipe({"t": TaskRecipe([Step("threshold", {"positive": "a", "tau": 0.3})])})
    >>> _ = apply(d / "r.jsonl", rec, d / "c.jsonl")
    >>> (d / "c.jsonl").read_text()[:91]
    '{"id": 1, "task": "t", "gold": "a", "probs": {"a": 0.4, "b": 0.6}, "calibrated": {"recipe":'
    """
    recipe = load_recipe(recipe)
    src, dst = Path(results), Path(out)
    name = display or str(results)
    if dst.exists() and src.exists() and os.path.samefile(src, dst):
        raise CalibrationError(f"{dst}: the output would overwrite the raw results; write it elsewhere")
    rs = read_results(src, positive=reading_positive(recipe), display=name)
    check_tasks(rs, recipe, keep_other_tasks=keep_other_tasks)
    for td in rs.values():
        check_not_calibrated(td, name)
    data = src.read_bytes()
    lines = data.split(b"\n")
    summary: dict[str, Any] = {"source": name, "out": str(dst), "recipe": recipe.id, "tasks": {}, "kept": {}}
    for task, td in rs.items():
        if task not in recipe.tasks:
            summary["kept"][task] = td.n
            continue
        first = lines[int(td.lines[0]) - 1] if td.n else None
        st, info = calibrate_task(td, recipe, task)
        td = prob_task(td)
        index = (td.lines - 1).tolist()
        raws = [lines[i] for i in index]
        new = render_lines(
            raws,
            td,
            recipe.id,
            recipe.tasks[task].method,
            st.p if st.changed else None,
            st.pred,
            label_order(td, first),
            source=name,
        )
        for i, line in zip(index, new):
            lines[i] = line
        summary["tasks"][task] = info
    dst.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dst, b"\n".join(lines), sweep=True)  # sweep: what a killed earlier apply left
    summary["rows"] = sum(td.n for td in rs.values())
    return summary


def _insert(raw: bytes, field_json: bytes, source: str, line: int) -> bytes:
    """``raw`` with ``"calibrated": field_json`` before its closing brace (whitespace after it kept)."""
    body = raw.rstrip()
    end = len(body) - 1
    if end < 0 or body[end:] != b"}":
        raise CalibrationError(
            f"{source}:{line}: the line does not end with '}}' (a JSON object); cannot add the calibrated field"
        )
    sep = b"" if body[:end].rstrip().endswith(b"{") else b", "
    return raw[:end] + sep + b'"' + FIELD.encode() + b'": ' + field_json + raw[end:]


def calibrated_results(path: str | os.PathLike[str], *, display: str | None = None) -> ResultSet:
    """A calibrated file read with its calibrated predictions (and probabilities) in place of the
    raw ones, ready for :func:`labledger.evaluate`. Tasks without ``calibrated`` fields stay raw.

    >>> import labledger                                                              # doctest: +SKIP
    >>> labledger.evaluate(calibrated_results("results_calibrated.jsonl"))            # doctest: +SKIP
    """
    rs = read_results(path, display=display)
    for td in rs.values():
        if FIELD not in td.extras or not isinstance(td, LabelTask):
            continue
        cal = td.extras[FIELD]
        index = {lab: j for j, lab in enumerate(td.labels)}
        pred = td.pred_index.copy()
        probs = td.probs.copy() if isinstance(td, ProbTask) else None
        for i, c in enumerate(cal):
            if not isinstance(c, Mapping):
                continue
            lab = c.get("prediction")
            if lab is not None:
                if str(lab) not in index:
                    raise CalibrationError(
                        f"{rs.source}:{int(td.lines[i])}: calibrated prediction {lab!r} is not a "
                        f"label of task '{td.task}'"
                    )
                pred[i] = index[str(lab)]
            if probs is not None and isinstance(c.get("probs"), Mapping):
                probs[i] = 0.0
                for k, v in c["probs"].items():
                    if v is not None:
                        probs[i, index[str(k)]] = v
            elif isinstance(td, ProbTask) and probs is not None and c.get("score") is not None and td.kind == "binary":
                j = index[str(td.positive)]
                probs[i, j], probs[i, 1 - j] = c["score"], 1.0 - c["score"]
        td.pred_index = pred
        if isinstance(td, ProbTask) and probs is not None:
            td.probs = probs
            if td.score is not None and td.positive is not None and td.positive in index:
                td.score = probs[:, index[td.positive]].copy()
    return rs


__all__ = [
    "FIELD",
    "apply",
    "calibrate_task",
    "calibrated_results",
    "check_not_calibrated",
    "check_tasks",
    "reading_positive",
    "render_lines",
]
