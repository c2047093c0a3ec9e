"""Calibration recipes: per-task steps with their provenance, read and written as TOML (or YAML).

A recipe file::

    # labledger calibration recipe
    format = "labledger-calibration-recipe"
    version = 1
    id = "6f1c0a9d2b7e4c31"            # sha256 of the content below (less id and created), 16 hex
    labledger_version = "0.1.0"
    created = "2025-01-01T00:00:00Z"

    [tasks.hover]                       # one step: the method and its parameters, flat
    method = "threshold"
    positive = "NOT_SUPPORTED"
    tau = 0.46
    transductive = false
    objective = "f1[average=binary,pos_label=NOT_SUPPORTED,zero_division=0]"

    [tasks.hover.fit]                   # what it was fitted on (absent in a hand-written recipe)
    source = "results.jsonl"            # a run's results: "mlp-h128:val (run <id>)" (older recipes
                                        # hold the name as typed, e.g. "mlp-h128@2:val": read as is)
    sha256 = "..."
    split = "split=dev"                 # or "all"
    n = 120
    ...

    [tasks.hover.values]                # the objective on the fit items
    raw = 0.75
    in_sample = 0.78                    # after calibration, on the items it was fitted on
    crossfit = 0.76                     # out-of-fold, when computed (--crossfit K)

    [tasks.finentity]                   # several steps run in order
    steps = [{ method = "temperature", T = 1.3 },
             { method = "prior_multiplier", weights = { Negative = 0.6, Neutral = 1.5, Positive = 0.6 } }]

Every malformed entry raises :class:`~labledger.errors.CalibrationError` naming the file and the
key (``tasks.hover.tau``). ``id`` is checked against the content, so a recipe edited after it was
written says so; delete the ``id`` line to accept the edit (a hand-written recipe needs none).
"""

from __future__ import annotations

import difflib
import hashlib
import math
import os
import re
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from labledger.calibrate.methods import METHODS, PARAMS, Step
from labledger.errors import CalibrationError, LedgerError

FORMAT = "labledger-calibration-recipe"
FORMAT_VERSION = 1
_TOP = ("format", "version", "id", "labledger_version", "created", "tasks", "kind")
_TASK = ("method", "steps", "transductive", "objective", "fit", "values")
#: Keys of a task's ``fit`` table and their types.
FIT_KEYS: dict[str, type] = {
    "source": str,
    "sha256": str,
    "split": str,
    "n": int,
    "n_total": int,
    "labels": list,
    "positive": str,
    "ids_sketch": str,
    "grids": list,
    "search": list,
    "crossfit_k": int,
    "crossfit_seed": int,
    "folds_by": str,
    "scale": str,
    "objective_definition": str,
}
VALUE_KEYS = ("raw", "in_sample", "crossfit")
#: Items kept in the id sketch (the smallest hashes of task/id/gold).
SKETCH_SIZE = 64


def labledger_version() -> str:
    from labledger import __version__

    return __version__


def _suggest(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else f" Known keys: {', '.join(known)}."


@dataclass
class TaskRecipe:
    """One task's steps, the objective they were fitted for, and where they were fitted."""

    steps: list[Step]
    objective: str | None = None
    fit: dict[str, Any] | None = None
    values: dict[str, float] | None = None

    @property
    def methods(self) -> list[str]:
        return [s.method for s in self.steps]

    @property
    def method(self) -> str:
        """The method, or the chain ``temperature+prior_multiplier``."""
        return "+".join(self.methods)

    @property
    def transductive(self) -> bool:
        """True when a step re-estimates something on the items it is applied to (EM)."""
        return any(s.method == "em_prior_shift" for s in self.steps)

    def describe(self) -> str:
        return " then ".join(s.describe() for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if len(self.steps) == 1:
            out["method"] = self.steps[0].method
            out.update(self.steps[0].params)
        else:
            out["steps"] = [{"method": s.method, **s.params} for s in self.steps]
        out["transductive"] = self.transductive
        if self.objective is not None:
            out["objective"] = self.objective
        if self.fit:
            out["fit"] = dict(self.fit)
        if self.values:
            out["values"] = dict(self.values)
        return out


@dataclass
class Recipe:
    """A calibration recipe: per-task steps with their provenance.

    >>> r = Recipe({"hover": TaskRecipe([Step("threshold", {"positive": "yes", "tau": 0.4})])})
    >>> r2 = Recipe.from_toml(r.to_toml())
    >>> r2.id == r.id, r2.tasks["hover"].steps[0].params["tau"]
    (True, 0.4)
    """

    tasks: dict[str, TaskRecipe]
    labledger_version: str = field(default_factory=labledger_version)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    source: str = "<recipe>"

    def content(self) -> dict[str, Any]:
        """What the id hashes: everything but ``id`` and ``created``."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "labledger_version": self.labledger_version,
            "tasks": {name: t.to_dict() for name, t in self.tasks.items()},
        }

    @property
    def id(self) -> str:
        """16 hex digits of the sha256 of :meth:`content` (canonical JSON)."""
        return content_id(self.content())

    def to_dict(self) -> dict[str, Any]:
        c = self.content()
        return {
            "format": c["format"],
            "version": c["version"],
            "id": self.id,
            "labledger_version": self.labledger_version,
            "created": self.created,
            "tasks": c["tasks"],
        }

    def to_toml(self) -> str:
        import tomli_w

        head = (
            f"# labledger calibration recipe {self.id}: apply with\n"
            f"#   labledger calibrate apply RESULTS --recipe THIS_FILE --out results_calibrated.jsonl\n"
        )
        return head + tomli_w.dumps(_plain(self.to_dict()))

    def to_yaml(self) -> str:
        yaml = _yaml()
        return yaml.safe_dump(_plain(self.to_dict()), sort_keys=False, allow_unicode=True)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the recipe (``.yaml``/``.yml``: YAML, else TOML); returns the path."""
        path = Path(path)
        text = self.to_yaml() if path.suffix.lower() in (".yaml", ".yml") else self.to_toml()
        from labledger.store.jsonl import atomic_write

        atomic_write(path, text.encode("utf-8"), sweep=True)
        return path

    @classmethod
    def from_toml(cls, text: str, *, source: str = "<recipe>") -> Recipe:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CalibrationError(f"{source}: not valid TOML ({exc})") from None
        return cls.from_dict(data, source=source)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Recipe:
        """Read a recipe file (TOML; YAML for ``.yaml``/``.yml``; JSON for ``.json``)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CalibrationError(f"{path}: no such recipe file") from None
        except (IsADirectoryError, UnicodeDecodeError) as exc:
            raise CalibrationError(f"{path}: cannot read a recipe from it ({exc})") from None
        suffix = path.suffix.lower()
        if suffix in (".yaml", ".yml"):
            yaml = _yaml()
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise CalibrationError(f"{path}: not valid YAML ({exc})") from None
            return cls.from_dict(data, source=str(path))
        if suffix == ".json":
            try:
                return cls.from_dict(orjson.loads(text), source=str(path))
            except orjson.JSONDecodeError as exc:
                raise CalibrationError(f"{path}: not valid JSON ({exc})") from None
        return cls.from_toml(text, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<recipe>") -> Recipe:
        """Validate a parsed recipe; errors name ``source`` and the key."""
        return _parse(data, source)


def content_id(content: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def load_recipe(recipe: Recipe | str | os.PathLike[str] | Mapping[str, Any]) -> Recipe:
    """A :class:`Recipe` from a Recipe, a path or a parsed dict."""
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, Mapping):
        return Recipe.from_dict(recipe)
    return Recipe.load(recipe)


def _yaml():
    try:
        import yaml
    except ImportError:
        raise CalibrationError("YAML recipes need PyYAML (pip install pyyaml); or use a .toml file") from None
    return yaml


def _plain(v: Any) -> Any:
    """Numpy scalars as Python numbers (TOML/YAML writers need them)."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


# ------------------------------------------------------------------------------------------------
# Validation


class _P:
    """Validation helpers bound to a source (file) name."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, msg: str) -> CalibrationError:
        return CalibrationError(f"{self.source}: key '{key}' {msg}")

    def table(self, v: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(v, Mapping):
            raise self.fail(key, f"must be a table; got {_kind(v)}")
        return v

    def text(self, v: Any, key: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(key, f"must be a non-empty string; got {_show(v)}")
        return v

    def number(
        self, v: Any, key: str, *, low: float | None = None, high: float | None = None, positive: bool = False
    ) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(key, f"must be a number; got {_show(v)}")
        if positive and v <= 0:
            raise self.fail(key, f"must be > 0; got {_show(v)}")
        if (low is not None and v < low) or (high is not None and v > high):
            raise self.fail(key, f"must be a number in [{low:g}, {high:g}]; got {_show(v)}")
        return float(v)

    def integer(self, v: Any, key: str, low: int = 0) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise self.fail(key, f"must be an integer >= {low}; got {_show(v)}")
        return int(v)

    def known(self, d: Mapping[str, Any], allowed, where: str) -> None:
        for k in d:
            if k not in allowed:
                raise self.fail(f"{where}.{k}" if where else k, f"is not a recipe key here.{_suggest(k, allowed)}")


def _kind(v: Any) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list"}.get(
        type(v), "a table" if isinstance(v, Mapping) else type(v).__name__
    )


def _show(v: Any) -> str:
    text = repr(v)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({_kind(v)})"


def _parse(data: Any, source: str) -> Recipe:
    p = _P(source)
    if not isinstance(data, Mapping):
        raise CalibrationError(f"{source}: a recipe must be a table with a 'tasks' table; got {_kind(data)}")
    p.known(data, _TOP, "")
    if "format" in data and data["format"] != FORMAT:
        raise p.fail("format", f"must be {FORMAT!r}; got {_show(data['format'])}")
    if "version" in data:
        version = p.integer(data["version"], "version", 1)
        if version > FORMAT_VERSION:
            raise p.fail(
                "version",
                f"is {version}: this recipe is newer than this labledger reads ({FORMAT_VERSION}); upgrade labledger",
            )
    if "tasks" not in data:
        raise p.fail("tasks", "is missing: a recipe needs a [tasks.NAME] table per task")
    tasks_in = p.table(data["tasks"], "tasks")
    if not tasks_in:
        raise p.fail("tasks", "is empty: name at least one task")
    tasks = {str(name): _task(p, body, f"tasks.{name}") for name, body in tasks_in.items()}
    written_by = data.get("labledger_version")
    recipe = Recipe(
        tasks,
        labledger_version=p.text(written_by, "labledger_version") if written_by is not None else labledger_version(),
        created=str(data.get("created") or ""),
        source=source,
    )
    if "id" in data:
        given = p.text(data["id"], "id")
        if given != recipe.id:
            raise p.fail(
                "id",
                f"is {given!r} but the recipe's content hashes to {recipe.id!r}: it was changed after "
                f"it was written. Delete the 'id' line to accept the change.",
            )
    return recipe


def _task(p: _P, body: Any, where: str) -> TaskRecipe:
    body = p.table(body, where)
    if ("method" in body) == ("steps" in body):
        raise p.fail(
            f"{where}.method",
            "is missing: give 'method' (one step) or 'steps' (a list of steps)"
            if "method" not in body
            else "and 'steps' are both given; give one of them",
        )
    if "method" in body:
        method = _method(p, body["method"], f"{where}.method")
        p.known(body, _TASK + PARAMS[method], where)
        steps = [_step(p, method, {k: v for k, v in body.items() if k in PARAMS[method]}, where)]
    else:
        p.known(body, _TASK, where)
        raw = body["steps"]
        if not isinstance(raw, list) or not raw:
            raise p.fail(f"{where}.steps", f"must be a non-empty list of steps; got {_show(raw)}")
        steps = []
        for i, st in enumerate(raw):
            key = f"{where}.steps[{i}]"
            st = p.table(st, key)
            if "method" not in st:
                raise p.fail(f"{key}.method", "is missing")
            method = _method(p, st["method"], f"{key}.method")
            p.known(st, ("method",) + PARAMS[method], key)
            steps.append(_step(p, method, {k: v for k, v in st.items() if k != "method"}, key))
    task = TaskRecipe(steps)
    if "transductive" in body:
        if not isinstance(body["transductive"], bool):
            raise p.fail(f"{where}.transductive", f"must be true or false; got {_show(body['transductive'])}")
        if body["transductive"] != task.transductive:
            raise p.fail(
                f"{where}.transductive",
                f"is {str(body['transductive']).lower()} but the steps make it "
                f"{str(task.transductive).lower()} (em_prior_shift is transductive)",
            )
    if "objective" in body:
        from labledger.metrics.registry import parse_metric

        text = p.text(body["objective"], f"{where}.objective")
        try:
            parse_metric(text)
        except LedgerError as exc:
            raise p.fail(f"{where}.objective", f"is not a metric: {exc}") from None
        task.objective = text
    if "fit" in body:
        fit = dict(p.table(body["fit"], f"{where}.fit"))
        p.known(fit, tuple(FIT_KEYS), f"{where}.fit")
        for k, v in fit.items():
            want = FIT_KEYS[k]
            ok = isinstance(v, want) and not isinstance(v, bool)
            if want is list:
                ok = ok and all(isinstance(x, str) for x in v)
            if not ok:
                raise p.fail(
                    f"{where}.fit.{k}",
                    f"must be {'a list of strings' if want is list else _kind(want())}; got {_show(v)}",
                )
        task.fit = fit
    if "values" in body:
        values = p.table(body["values"], f"{where}.values")
        p.known(values, VALUE_KEYS, f"{where}.values")
        task.values = {k: p.number(v, f"{where}.values.{k}") for k, v in values.items()}
    return task


def _method(p: _P, v: Any, key: str) -> str:
    name = p.text(v, key)
    if name not in METHODS:
        raise p.fail(key, f"is {name!r}, not a calibration method.{_suggest(name, METHODS)}")
    return name


def _labels_table(p: _P, v: Any, key: str) -> dict[str, float]:
    t = p.table(v, key)
    if not t:
        raise p.fail(key, "is empty: give a value per label")
    return {str(lab): p.number(x, f"{key}.{lab}", positive=True) for lab, x in t.items()}


def _step(p: _P, method: str, prm: Mapping[str, Any], where: str) -> Step:
    def need(k):
        if k not in prm:
            raise p.fail(f"{where}.{k}", f"is missing (method {method} needs {', '.join(_required(method))})")
        return prm[k]

    out: dict[str, Any] = {}
    if method in ("threshold", "positive_threshold"):
        out["positive"] = p.text(need("positive"), f"{where}.positive")
        out["tau"] = p.number(need("tau"), f"{where}.tau", low=0.0, high=1.0)
        if method == "positive_threshold" and "item_field" in prm:
            out["item_field"] = p.text(prm["item_field"], f"{where}.item_field")
    elif method == "prior_multiplier":
        out["weights"] = _labels_table(p, need("weights"), f"{where}.weights")
    elif method == "option_damping":
        out["alpha"] = p.number(need("alpha"), f"{where}.alpha", positive=True)
        if "pattern" not in prm and "field" not in prm:
            raise p.fail(
                f"{where}.pattern",
                "is missing: option_damping selects options by 'pattern' (a regex on the "
                "option label) or 'field' (a row field), or both",
            )
        if "pattern" in prm:
            out["pattern"] = p.text(prm["pattern"], f"{where}.pattern")
            try:
                re.compile(out["pattern"])
            except re.error as exc:
                raise p.fail(f"{where}.pattern", f"is not a valid regular expression ({exc})") from None
        if "field" in prm:
            out["field"] = p.text(prm["field"], f"{where}.field")
    elif method == "temperature":
        out["T"] = p.number(need("T"), f"{where}.T", positive=True)
    elif method == "em_prior_shift":
        prior = _labels_table(p, need("source_prior"), f"{where}.source_prior")
        total = sum(prior.values())
        if abs(total - 1.0) > 1e-6:
            raise p.fail(f"{where}.source_prior", f"must sum to 1 (label priors); got {total:.6g}")
        out["source_prior"] = prior
        out["max_iter"] = p.integer(prm.get("max_iter", 1000), f"{where}.max_iter", 1)
        out["tol"] = p.number(prm.get("tol", 1e-8), f"{where}.tol", positive=True)
    return Step(method, out)


def _required(method: str) -> list[str]:
    return {
        "threshold": ["positive", "tau"],
        "positive_threshold": ["positive", "tau"],
        "prior_multiplier": ["weights"],
        "option_damping": ["alpha", "pattern or field"],
        "temperature": ["T"],
        "em_prior_shift": ["source_prior"],
    }[method]


# ------------------------------------------------------------------------------------------------
# Which items a recipe was fitted on: a sketch of (task, id, gold) hashes


def item_hashes(task: str, ids: np.ndarray, gold: list[str] | np.ndarray) -> np.ndarray:
    """64-bit hashes of ``task \\x1f id \\x1f gold`` (FNV-1a, then the splitmix64 finaliser), vectorised."""
    n = len(ids)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    keys = np.array([f"{task}\x1f{i}\x1f{g}".encode() for i, g in zip(ids.tolist(), list(gold))], dtype="S")
    width = keys.dtype.itemsize
    mat = np.frombuffer(keys.tobytes(), dtype=np.uint8).reshape(n, width)
    lengths = np.char.str_len(keys)
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64)
    prime = np.full(n, 0x100000001B3, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in range(width):
            step = (h ^ mat[:, c].astype(np.uint64)) * prime
            h = np.where(lengths > c, step, h)
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def id_sketch(hashes: np.ndarray, k: int = SKETCH_SIZE) -> str:
    """The ``k`` smallest distinct hashes as hex (a uniform sample of the items, by hash)."""
    if len(hashes) > 4 * k:  # the 4k smallest hold the k smallest distinct ones (ids are unique)
        hashes = hashes[np.argpartition(hashes, 4 * k)[: 4 * k]]
    u = np.unique(hashes)
    return " ".join(f"{int(x):016x}" for x in u[:k])


def sketch_overlap(sketch: str, hashes: np.ndarray) -> tuple[int, int]:
    """``(hits, size)``: how many of the sketch's items are among ``hashes``."""
    try:
        values = np.array([int(x, 16) for x in sketch.split()], dtype=np.uint64)
    except ValueError:
        raise CalibrationError("fit.ids_sketch is not a list of hex numbers") from None
    return int(np.isin(values, hashes).sum()), len(values)


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Recipe",
    "TaskRecipe",
    "content_id",
    "id_sketch",
    "item_hashes",
    "load_recipe",
    "sketch_overlap",
]
