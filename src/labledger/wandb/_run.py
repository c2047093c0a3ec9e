"""The run behind ``labledger.wandb``: W&B's step/commit semantics over an ordinary :class:`labledger.Run`.

Scalars go to the run's ``metrics.jsonl`` through :meth:`labledger.Run.log` at W&B's ``_step``;
nested dicts are flattened with ``.`` as W&B flattens them; media, tables, histograms, non-numeric
values, saved files and artifacts are referenced from ``media.jsonl`` (see :mod:`.media`).

>>> import tempfile
>>> run = WandbRun(project="demo", ledger=tempfile.mkdtemp())
>>> run.log({"loss": 0.5, "eval": {"acc": 0.9}})
>>> run.log({"loss": 0.25})
>>> run.step, dict(run.summary)["eval.acc"]
(2, 0.9)
>>> run.finish()
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import logging
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import LedgerError
from labledger.store.jsonl import RECORD_FILES, Appender
from labledger.store.manifest import sha256_file
from labledger.store.run import Run
from labledger.wandb.media import Artifact, CustomChart, Histogram, Html, Image, Settings, Table, Visualize

#: The record file (in the run folder) that references media, tables, files and artifacts.
MEDIA_FILE = RECORD_FILES["media"]
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class WandbError(LedgerError):
    """A W&B call cannot be honoured as made (``wandb.Error``); the message says what to do."""


class UnsupportedError(WandbError):
    """A W&B call labledger.wandb does not support; the message names the alternative."""


class CommError(WandbError):
    """``wandb.CommError`` (W&B: talking to the server failed); never raised here, there is no server."""


class UsageError(WandbError):
    """``wandb.UsageError``: a call made in a way W&B refuses (raised as W&B raises it)."""


class ConfigError(WandbError):
    """``wandb.sdk.lib.config_util.ConfigError`` (HF Trainer catches it); never raised here: new config
    values win, as with ``allow_val_change``."""


class AuthenticationError(WandbError):
    """``wandb.errors.AuthenticationError``; never raised here, there is nothing to log in to."""


class UnsupportedNameError(UnsupportedError, AttributeError):
    """A name of the real ``wandb`` package that labledger.wandb does not provide (raised on access).

    It is also an :class:`AttributeError`, so ``hasattr``/``getattr(obj, name, default)`` probes see the
    name as absent; the message names the alternative.
    """


_log = logging.getLogger("labledger.wandb")


def unsupported(fn: Any) -> Any:
    """Mark a W&B call that only raises :class:`UnsupportedError` (``fn.unsupported`` is True), so that
    the API surface can be told apart from the calls that work."""
    fn.unsupported = True
    return fn


def warn(text: str) -> None:
    """Report something a W&B user should know, as one line (``labledger.wandb: ...``) without a source path.

    It goes to the ``labledger.wandb`` logger at WARNING: printed to stderr as the bare line when
    logging is not configured, else where the application's handlers send it.
    """
    _log.warning("labledger.wandb: %s", " ".join(str(text).split()))


def _scalar(value: Any) -> Any:
    """A logged number as a Python number: a numpy scalar, a 1-element array or tensor (any shape) by ``item()``.

    >>> import numpy as np
    >>> _scalar(np.array([[0.5]])), _scalar(np.int64(3)), _scalar(2.0)
    (0.5, 3, 2.0)
    """
    t = type(value)
    if t is float or t is int or t is bool or value is None:
        return value
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return float(value)


def safe_name(name: str) -> str:
    """A path component made of letters, digits, ``.``, ``-`` and ``_``."""
    out = _SAFE.sub("_", str(name)).strip("._") or "x"
    return out[:120]


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of a config value: numpy and tensors unwrapped, other objects as ``str``."""

    def default(obj: Any) -> Any:
        if hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
            return obj.item()
        if hasattr(obj, "tolist"):
            return obj.tolist()
        if hasattr(obj, "to_dict"):
            return obj.to_dict()
        if isinstance(obj, (set, frozenset, tuple)):
            return list(obj)
        return str(obj)

    return orjson.loads(
        orjson.dumps(value, default=default, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
    )


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """W&B's flattening of nested dicts in ``log``: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``.

    >>> flatten({"train": {"loss": 1.0, "lr": {"g0": 0.1}}, "step": 3})
    {'train.loss': 1.0, 'train.lr.g0': 0.1, 'step': 3}
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def config_input(config: Any) -> dict[str, Any]:
    """A config dict from what ``wandb.init(config=...)`` takes: a mapping, argparse.Namespace or object."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, str):
        raise UnsupportedError(
            f"wandb.init(config={config!r}): config files are not read by labledger.wandb; "
            "load the file yourself (e.g. yaml.safe_load) and pass the dict"
        )
    if hasattr(config, "__dict__"):
        return {k: v for k, v in vars(config).items() if not k.startswith("_")}
    raise WandbError(f"wandb.init(config=...) takes a dict or an argparse.Namespace; got {type(config).__name__}")


class Config:
    """``wandb.config``: attribute and item access, ``update``, ``get``, ``keys``/``items``, ``as_dict``.

    Every change is written to the run's ``config.json`` (atomically).

    >>> import tempfile
    >>> run = WandbRun(config={"lr": 0.1}, ledger=tempfile.mkdtemp())
    >>> run.config.batch = 8; run.config["opt"] = "sgd"; run.config.update({"lr": 0.2})
    >>> run.config.lr, run.config["batch"], sorted(run.config)
    (0.2, 8, ['batch', 'lr', 'opt'])
    >>> run.finish()
    """

    def __init__(self, run: Run | None = None) -> None:
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_data", dict(run.config) if run is not None else {})

    def _write(self, values: dict[str, Any]) -> None:
        clean = jsonable(values)
        self._data.update(clean)
        if self._run is not None and self._run.status == "running":
            self._run.update_config(clean)

    def update(self, values: Any = None, allow_val_change: bool | None = None, **kwargs: Any) -> None:
        """Merge a dict (or Namespace) and keyword values into the config."""
        merged = {**config_input(values), **kwargs}
        if merged:
            self._write(merged)

    def setdefaults(self, values: Mapping[str, Any]) -> None:
        """Set the keys that are not set yet."""
        missing = {k: v for k, v in values.items() if k not in self._data}
        if missing:
            self._write(missing)

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def keys(self) -> Any:
        return self._data.keys()

    def items(self) -> Any:
        return self._data.items()

    def values(self) -> Any:
        return self._data.values()

    def as_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._write({key: value})

    def __getattr__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(f"wandb.config has no key {key!r}") from None

    def __setattr__(self, key: str, value: Any) -> None:
        self._write({key: value})

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"wandb.config({self._data!r})"


class ConfigStatic:
    """``run.config_static``: a read-only snapshot of the config (attribute and item access).

    >>> c = ConfigStatic({"lr": 0.1})
    >>> c.lr, c["lr"], list(c.keys())
    (0.1, 0.1, ['lr'])
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(f"wandb.run.config_static has no key {key!r}") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise WandbError("wandb.run.config_static is read-only: set values with wandb.config")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def keys(self) -> Any:
        return self._values.keys()

    def __repr__(self) -> str:
        return f"wandb.run.config_static({self._values!r})"


class Summary:
    """``wandb.summary``: the last logged value of each key unless set explicitly (``summary[k] = v``).

    >>> import tempfile
    >>> run = WandbRun(ledger=tempfile.mkdtemp())
    >>> run.log({"loss": 0.5}); run.summary["best"] = 0.1
    >>> dict(run.summary)
    {'loss': 0.5, 'best': 0.1}
    >>> run.finish()
    """

    def __init__(self, owner: WandbRun | None = None) -> None:
        self._owner = owner
        self._set: dict[str, Any] = {}

    def _merged(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._owner is not None:
            out.update(self._owner._last)
            out.update(self._owner._run._last)
            out.pop("time", None)
        out.update(self._set)
        return out

    def __getitem__(self, key: str) -> Any:
        return self._merged()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._set[key] = value

    def __delitem__(self, key: str) -> None:
        self._set.pop(key, None)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self._merged()[key]
        except KeyError:
            raise AttributeError(f"wandb.summary has no key {key!r}") from None

    def update(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._set.update(flatten(dict(values or {})))
        self._set.update(kwargs)

    def get(self, key: str, default: Any = None) -> Any:
        return self._merged().get(key, default)

    def keys(self) -> Any:
        return self._merged().keys()

    def items(self) -> Any:
        return self._merged().items()

    def __contains__(self, key: object) -> bool:
        return key in self._merged()

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())

    def __repr__(self) -> str:
        return f"wandb.summary({self._merged()!r})"


_SUMMARIES = ("min", "max", "mean", "first", "last", "best", "none", "copy")


class WandbRun:
    """``wandb.run``: ``.id``, ``.name``, ``.dir``, ``.config``, ``.summary``, ``.log``, ``.finish``, ...

    ``project`` becomes the labledger group unless ``group`` is given (then the project is kept in
    ``run.json`` under ``wandb.project``); the ledger is ``ledger``, else ``dir/.labledger`` when
    ``dir`` is given, else ``$LABLEDGER_DIR``, else ``./.labledger``.
    """

    def __init__(
        self,
        *,
        project: str | None = None,
        name: str | None = None,
        group: str | None = None,
        tags: Any = None,
        config: Any = None,
        notes: str | None = None,
        job_type: str | None = None,
        entity: str | None = None,
        dir: str | os.PathLike[str] | None = None,
        id: str | None = None,
        ledger: Any = None,
        system_metrics: bool = True,
        extra: Mapping[str, Any] | None = None,
        settings: Settings | None = None,
        sweep_id: str | None = None,
    ) -> None:
        if ledger is None and dir is not None:
            ledger = Path(dir) / ".labledger"
        wandb_meta = {
            k: v
            for k, v in {"project": project, "entity": entity, "job_type": job_type, "id": id, **(extra or {})}.items()
            if v is not None
        }
        run_tags = [str(t) for t in (tags or ())]
        self._run = Run(
            name or project or "wandb",
            group=group if group is not None else project,
            tags=run_tags,
            config=jsonable(config_input(config)),
            notes=notes,
            ledger=ledger,
            extra_meta={"wandb": wandb_meta, "written_by": "labledger.wandb"},
            system_metrics=system_metrics,  # on by default, as in W&B
        )
        self.config = Config(self._run)
        self.summary = Summary(self)
        self.project = project
        self.entity = entity
        self.job_type = job_type
        self.notes = notes
        self.tags = tuple(run_tags)
        self.step = 0
        self._pending: dict[str, Any] = {}
        self._plain = False  # the pending row holds only numbers (written as they are)
        self._last: dict[str, Any] = {}  # last non-numeric values (kept out of Run._last)
        self._metrics: list[dict[str, Any]] = []  # define_metric definitions
        self._sync_axes: list[tuple[str, str]] = []  # (glob, step metric) pairs with step_sync
        self._tracked: dict[str, dict[str, float]] = {}  # min/max/sum/n/first per key for summaries
        self._slow = False  # any definition that needs the per-row path
        self._media: Appender | None = None
        self._counters: dict[str, int] = {}
        self._sweep_id = sweep_id
        self._settings = settings if settings is not None else Settings()
        self._output: Any = None  # write_logs' file, opened on first use
        self.preempting = False
        self.finished = False

    # -- attributes W&B code reads ---------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._run.id

    @property
    def name(self) -> str:
        return self._run.name

    @property
    def group(self) -> str | None:
        return self._run.group

    @property
    def dir(self) -> str:
        return str(self._run.dir)

    @property
    def path(self) -> str:
        return str(self._run.dir)

    @property
    def url(self) -> str:
        return self._run.dir.resolve().as_uri()

    @property
    def offline(self) -> bool:
        return True

    @property
    def sync_dir(self) -> str:
        """The run folder (W&B: the folder ``wandb sync`` uploads; labledger never uploads)."""
        return str(self._run.dir)

    @property
    def project_url(self) -> None:
        """None, as for a W&B offline run (there is no server; :attr:`url` is the run folder)."""
        return None

    @property
    def sweep_url(self) -> None:
        """None, as for a W&B offline run."""
        return None

    @property
    def sweep_id(self) -> str | None:
        """The id of the :func:`labledger.wandb.sweep` this run is a trial of (None outside a sweep)."""
        return self._sweep_id

    @property
    def resumed(self) -> bool:
        """False: labledger runs are append-only and never resumed."""
        return False

    @property
    def disabled(self) -> bool:
        """False (True for a ``mode="disabled"`` run)."""
        return False

    @property
    def start_time(self) -> float:
        """When the run started (unix seconds; ``run.json`` ``started``)."""
        return float(self._run.meta["started"])

    @property
    def starting_step(self) -> int:
        """0: a labledger run always starts at step 0."""
        return 0

    @property
    def settings(self) -> Settings:
        """A copy of the ``settings`` given to ``init``, with the run's ``run_id``, ``run_name``, ``project``,
        ``run_group``, ``mode``, ``files_dir``, ``sync_dir`` and ``sweep_id`` filled in."""
        return Settings(
            **{
                **vars(self._settings),
                "run_id": self.id,
                "run_name": self.name,
                "project": self.project,
                "entity": self.entity,
                "run_group": self.group,
                "run_job_type": self.job_type,
                "run_notes": self.notes,
                "run_tags": self.tags,
                "mode": "offline",
                "files_dir": self.dir,
                "sync_dir": self.sync_dir,
                "sweep_id": self.sweep_id,
                "resumed": False,
            }
        )

    @property
    def config_static(self) -> ConfigStatic:
        """A read-only snapshot of the config, as W&B's ``ConfigStatic``."""
        return ConfigStatic(self.config.as_dict())

    @property
    def labledger_run(self) -> Run:
        """The :class:`labledger.Run` underneath (for labledger's own calls: log_results, log_batch...)."""
        return self._run

    def _label(self, **_: Any) -> None:
        """Integrations label their runs (HF Trainer); accepted and ignored."""

    def __repr__(self) -> str:
        return f"<labledger.wandb run {self.id} {self.name!r}>"

    def __enter__(self) -> WandbRun:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.finished:
            return
        if exc is None:
            self.finish()
        else:
            self._flush()
            self._close_extras()
            self._run.__exit__(exc_type, exc, tb)
            self.finished = True
            forget(self)

    # -- logging --------------------------------------------------------------------------------
    def log(
        self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None, sync: Any = None
    ) -> None:
        """``wandb.log``: merge ``data`` into the row at the current step; commit unless ``commit=False``.

        With ``step=`` the row is that step (a smaller step than the current one is ignored with a
        warning, as W&B does) and is committed when a later step arrives, at ``commit=True`` or at finish.
        """
        if step is None and commit is None and not self._pending and not self._slow:
            for v in data.values():
                t = type(v)
                if t is not float and t is not int:
                    break
            else:  # the hot path: a flat dict of numbers
                self._run.log(self.step, **data)
                self.step += 1
                return
        elif commit is None and type(step) is int and step > self.step and not self._slow:
            for v in data.values():
                t = type(v)
                if t is not float and t is not int:
                    break
            else:  # the hot path with step=: the row waits for a later step (it may still grow)
                if self._pending:
                    self._flush()
                self._pending = dict(data)
                self._plain = True
                self.step = step
                return
        if self.finished:
            raise WandbError(f"run {self.id} is finished; call wandb.init() to start another")
        if not isinstance(data, Mapping):
            raise WandbError(f"wandb.log takes a dict; got {type(data).__name__}")
        if step is not None:
            step = int(step)
            if step < self.step:
                warn(f"step {step} < current step {self.step}: data ignored (as W&B does)")
                return
            if step > self.step:
                self._flush()
                self.step = step
        self._pending.update(flatten(data))
        self._plain = False
        if commit is True or (commit is None and step is None):
            self._flush()
            self.step += 1

    def _flush(self) -> None:
        """Write the pending row: numbers to metrics.jsonl, everything else to media.jsonl."""
        if not self._pending:
            return
        row, self._pending = self._pending, {}
        if self._plain:  # only numbers, from the hot path
            self._plain = False
            self._run.log(self.step, **row)
            return
        for pattern, axis in self._sync_axes:
            if (
                axis not in row
                and axis in self._run._last
                and any(fnmatch.fnmatchcase(k, pattern) for k in row if k != axis)
            ):
                row[axis] = self._run._last[axis]
        numbers: dict[str, Any] = {}
        for key, value in row.items():
            kind = self._kind(value)
            if kind == "number":
                numbers[key] = _scalar(value)
            else:
                self._log_other(key, value, kind)
        if numbers:
            self._run.log(self.step, **numbers)
            if self._tracked or self._metrics:
                self._track(numbers)

    @staticmethod
    def _kind(value: Any) -> str:
        t = type(value)
        if t is float or t is int or t is bool or value is None:
            return "number"
        if isinstance(value, (Image, Table, Histogram)):
            return type(value).__name__.lower()
        if isinstance(value, (CustomChart, Visualize)):
            return "chart"
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, Image) for v in value):
            return "images"
        if isinstance(value, Html) or (
            isinstance(value, (list, tuple)) and value and all(isinstance(v, Html) for v in value)
        ):
            return "html"
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            numel = getattr(value, "numel", None)  # torch: size() is a shape, numel() the count
            size = getattr(value, "size", None)
            n = numel() if callable(numel) else size() if callable(size) else size
            if n == 1 or getattr(value, "ndim", 0) == 0:
                return "number"
            return "array"
        from numbers import Real

        if isinstance(value, Real):
            return "number"
        return "value"

    def _media_file(self) -> Appender:
        if self._media is None:
            self._media = Appender(self._run.dir / MEDIA_FILE)
        return self._media

    def _record(self, rec: dict[str, Any]) -> None:
        self._media_file().append({"step": self.step, "time": time.time(), **rec})

    def _log_other(self, key: str, value: Any, kind: str) -> None:
        if kind == "array":
            value, kind = Histogram(value), "histogram"
        if kind in ("image", "images"):
            images = value if kind == "images" else [value]
            self._record({"kind": "image", "key": key, "files": [self._image_file(key, img) for img in images]})
        elif kind == "html":
            pages = value if isinstance(value, (list, tuple)) else [value]
            files = []
            for page in pages:
                n = self._counters.get(key, 0)
                self._counters[key] = n + 1
                rel = f"media/{safe_name(key)}/{self.step}-{n}.html"
                data = page.html.encode("utf-8")
                self._run.log_file(rel, data)
                files.append({"path": f"files/{rel}", "sha256": hashlib.sha256(data).hexdigest()})
            self._record({"kind": "html", "key": key, "files": files})
        elif kind == "table":
            self._log_table(key, value)
        elif kind == "chart":
            self._log_chart(key, value)
        elif kind == "histogram":
            self._record({"kind": "histogram", "key": key, "bins": value.bins, "counts": value.counts})
        else:
            self._last[key] = value
            self._record({"kind": "value", "key": key, "value": jsonable(value)})

    def _image_file(self, key: str, img: Image) -> dict[str, Any]:
        """Write ``img`` (and its masks) to ``files/media/<key>/<step>-<n>.png``; its reference."""
        n = self._counters.get(key, 0)
        self._counters[key] = n + 1
        rel = f"media/{safe_name(key)}/{self.step}-{n}{img.suffix}"
        data = img.png()
        self._run.log_file(rel, data)
        ref: dict[str, Any] = {
            "path": f"files/{rel}",
            "sha256": hashlib.sha256(data).hexdigest(),
            "caption": img.caption,
            "shape": list(img.shape),
        }
        if img.masks:
            ref["masks"] = []
            for name, mask in img.masks.items():
                base = f"media/{safe_name(key)}/{self.step}-{n}.mask-{safe_name(name)}"
                self._run.log_file(f"{base}.png", mask.png())
                self._run.log_file(f"{base}.overlay.png", mask.overlay_png())
                ref["masks"].append(
                    {
                        "name": name,
                        "path": f"files/{base}.png",
                        "overlay": f"files/{base}.overlay.png",
                        "class_labels": mask.class_labels,
                        "colors": mask.colors(),
                    }
                )
        return ref

    def _log_table(self, key: str, table: Table) -> None:
        from labledger.errors import RecordError
        from labledger.inputs.results import validate_rows

        if any(isinstance(v, Image) for row in table.data for v in row):  # images in cells: files, as W&B's
            table = Table(
                columns=table.columns,
                data=[
                    [{"_type": "image-file", **self._image_file(key, v)} if isinstance(v, Image) else v for v in row]
                    for row in table.data
                ],
            )
        rows = jsonable(table.rows())
        name = f"{safe_name(key)}-{self.step}"
        try:
            validate_rows(rows, source=f"wandb.Table {key!r}")
            is_results = bool(rows)
        except RecordError:
            is_results = False
        if is_results:
            self._run.log_results(name, rows, source_kind="wandb.Table", key=key, step=self.step)
            self._record({"kind": "table", "key": key, "results": name, "rows": len(rows), "columns": table.columns})
            return
        self._record({"kind": "table", "key": key, **self._table_file(key, rows, table.columns)})

    def _table_file(self, key: str, rows: list[dict[str, Any]], columns: list[str]) -> dict[str, Any]:
        """Write ``rows`` to ``files/tables/<key>/<step>.jsonl``; the reference to put in a media record."""
        rel = f"tables/{safe_name(key)}/{self.step}.jsonl"
        data = b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in rows)
        self._run.log_file(rel, data)
        return {
            "path": f"files/{rel}",
            "sha256": hashlib.sha256(data).hexdigest(),
            "rows": len(rows),
            "columns": list(columns),
        }

    def _log_chart(self, key: str, chart: CustomChart | Visualize) -> None:
        """A ``wandb.plot`` chart: its table as a JSONL file (``<key>_table``, as W&B names it) and the
        chart's spec (``chart`` and the column ``fields``) in a ``chart`` media record."""
        table = chart.table
        ref = self._table_file(f"{key}_table", jsonable(table.rows()), table.columns)
        if isinstance(chart, CustomChart):
            spec: dict[str, Any] = {
                "chart": chart.spec.spec_name,
                "fields": jsonable(chart.spec.fields),
                "string_fields": jsonable(chart.spec.string_fields),
            }
        else:
            spec = {"chart": chart.spec.name, "fields": {}, "string_fields": {}}
        self._record({"kind": "chart", "key": key, **spec, "table": ref.pop("path"), **ref})

    def define_metric(
        self,
        name: str,
        step_metric: str | None = None,
        step_sync: bool | None = None,
        hidden: bool | None = None,
        summary: str | None = None,
        goal: str | None = None,
        overwrite: bool | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """``wandb.define_metric``: a metric's x-axis (``step_metric``) and its summary (min, max, mean, ...).

        Definitions are kept in ``files/wandb-metrics.json``; ``step_sync`` fills the axis into rows
        that lack it (its last value), as W&B does; summaries go to the run's headline values.
        """
        if summary is not None:
            for part in str(summary).split(","):
                if part.strip() not in _SUMMARIES:
                    raise WandbError(
                        f"define_metric({name!r}, summary={summary!r}): use one of {', '.join(_SUMMARIES)}"
                    )
        if goal is not None and goal not in ("minimize", "maximize"):
            raise WandbError(f"define_metric({name!r}, goal={goal!r}): goal is 'minimize' or 'maximize'")
        definition = {
            "name": name,
            "step_metric": step_metric,
            "step_sync": step_sync,
            "hidden": hidden,
            "summary": summary,
            "goal": goal,
        }
        self._metrics.append(definition)
        if step_metric is not None and step_sync is not False:
            self._sync_axes.append((name, step_metric))
        self._slow = True
        self._plain = False
        return definition

    def _track(self, numbers: Mapping[str, Any]) -> None:
        for key, value in numbers.items():
            if value is None or isinstance(value, bool):
                continue
            try:
                x = float(value)
            except (TypeError, ValueError):
                continue
            if math.isnan(x):
                continue
            t = self._tracked.get(key)
            if t is None:
                self._tracked[key] = {"min": x, "max": x, "sum": x, "n": 1, "first": x, "last": x}
            else:
                t["min"] = min(t["min"], x)
                t["max"] = max(t["max"], x)
                t["sum"] += x
                t["n"] += 1
                t["last"] = x

    def _defined_summaries(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for d in self._metrics:
            if not d["summary"]:
                continue
            for key, t in self._tracked.items():
                if not fnmatch.fnmatchcase(key, d["name"]):
                    continue
                for part in (p.strip() for p in d["summary"].split(",")):
                    if part == "best":
                        part = "max" if d["goal"] == "maximize" else "min"
                    if part in ("none", "copy"):
                        continue
                    value = t["sum"] / t["n"] if part == "mean" else t[part]
                    out[f"{key}.{part}"] = value
        return out

    # -- files ----------------------------------------------------------------------------------
    def save(self, glob_str: str | os.PathLike[str], base_path: str | None = None, policy: str = "live") -> list[str]:
        """``wandb.save``: copy the matching files into the run's ``files/`` with their sha256."""
        pattern = str(glob_str)
        matches = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not matches:
            warn(f"wandb.save: no file matches {pattern!r}; nothing stored")
        stored = []
        for path in matches:
            rel = os.path.relpath(path, base_path) if base_path else os.path.basename(path)
            stored.append(self._store_file(f"saved/{rel}", path, key=rel))
        return stored

    def _store_file(self, rel: str, path: str, *, key: str) -> str:
        """Copy ``path`` to ``files/<rel>`` (each part made safe) with a ``file`` media record; its stored path."""
        rel = "/".join(safe_name(p) for p in Path(rel).parts if p not in ("..", "."))
        target = self._run.log_file(rel, path)
        digest, size = sha256_file(target)
        self._record(
            {
                "kind": "file",
                "key": key,
                "path": f"files/{rel}",
                "source": os.path.abspath(path),
                "sha256": digest,
                "size": size,
            }
        )
        return str(target)

    def log_artifact(
        self,
        artifact_or_path: Artifact | str | os.PathLike[str],
        name: str | None = None,
        type: str | None = None,
        aliases: list[str] | None = None,
        **_: Any,
    ) -> Artifact:
        """``wandb.log_artifact``: copy the artifact's files into ``files/artifacts/<name>/v<n>/`` with sha256."""
        if isinstance(artifact_or_path, Artifact):
            art = artifact_or_path
        else:
            path = Path(artifact_or_path)
            art = Artifact(name or path.name, type=type or "unspecified")
            if path.is_dir():
                art.add_dir(path)
            else:
                art.add_file(path)
        version = self._counters.get(f"artifact:{art.name}", 0)
        self._counters[f"artifact:{art.name}"] = version + 1
        base = f"artifacts/{safe_name(art.name)}/v{version}"
        manifest = []
        for rel, src in art.files:
            rel = "/".join(safe_name(p) for p in Path(rel).parts)
            target = self._run.log_file(f"{base}/{rel}", src)
            digest, size = sha256_file(target)
            manifest.append({"path": f"files/{base}/{rel}", "sha256": digest, "size": size})
        self._record(
            {
                "kind": "artifact",
                "key": art.name,
                "name": art.name,
                "type": art.type,
                "version": version,
                "aliases": list(aliases or []),
                "metadata": jsonable(art.metadata),
                "files": manifest,
            }
        )
        return art

    def upsert_artifact(
        self,
        artifact_or_path: Artifact | str | os.PathLike[str],
        name: str | None = None,
        type: str | None = None,
        aliases: list[str] | None = None,
        distributed_id: str | None = None,
    ) -> Artifact:
        """``run.upsert_artifact`` (one part of a distributed artifact): stored as :meth:`log_artifact` stores,
        each call a new version of the artifact holding the files it was given."""
        return self.log_artifact(artifact_or_path, name=name, type=type, aliases=aliases)

    def finish_artifact(
        self,
        artifact_or_path: Artifact | str | os.PathLike[str],
        name: str | None = None,
        type: str | None = None,
        aliases: list[str] | None = None,
        distributed_id: str | None = None,
    ) -> Artifact:
        """``run.finish_artifact`` (the last part of a distributed artifact): stored as :meth:`log_artifact` stores."""
        return self.log_artifact(artifact_or_path, name=name, type=type, aliases=aliases)

    def log_model(
        self, path: str | os.PathLike[str], name: str | None = None, aliases: list[str] | None = None
    ) -> None:
        """``run.log_model``: the file or folder at ``path`` as an artifact of type ``model`` (name, as W&B's
        default, ``run-<run id>-<base name>``; aliases default ``["latest"]``), copied with sha256 as
        :meth:`log_artifact` copies."""
        text = str(path)
        if "://" in text:
            raise UnsupportedError(
                f"run.log_model({text!r}) is not supported by labledger.wandb: remote objects are not copied; "
                "download the file and log its local path"
            )
        if not os.path.exists(text):
            raise WandbError(f"run.log_model: {text} does not exist")
        art_name = name or f"run-{self.id}-{Path(text).name}"
        self.log_artifact(text, name=art_name, type="model", aliases=list(aliases or ["latest"]))

    def log_code(
        self,
        root: str | os.PathLike[str] | None = ".",
        name: str | None = None,
        include_fn: Any = None,
        exclude_fn: Any = None,
    ) -> Artifact | None:
        """``run.log_code``: the code files under ``root`` as an artifact of type ``code``, copied with sha256.

        As in W&B the default is every ``*.py`` file, ``requirements.txt`` and ``Dockerfile*``, leaving out
        the ``wandb/`` and ``.wandb/`` folders; ``include_fn``/``exclude_fn`` take ``(path)`` or ``(path,
        root)``. Unlike W&B, folders whose names start with ``.`` (``.venv``, ``.git``, the ledger) and
        ``__pycache__`` are not walked. The artifact is named ``source-<project>-<script>`` unless ``name``
        is given. Returns None, with a warning, when no file matches.
        """
        if root is None:
            return None
        top = os.path.abspath(root)
        include = _two_args(include_fn or _is_code_file)
        exclude = _two_args(exclude_fn or _in_wandb_folder)
        art_name = name or _SAFE.sub("_", f"source-{self.project or self.name}-{program_name()}")[:128]
        art = Artifact(art_name, type="code")
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for fname in sorted(files):
                path = os.path.join(folder, fname)
                if include(path, top) and not exclude(path, top):
                    art.add_file(path, name=os.path.relpath(path, top))
        if not art.files:
            warn(f"run.log_code: no code file under {top}; no code stored")
            return None
        return self.log_artifact(art)

    def mark_preempting(self) -> None:
        """``run.mark_preempting``: a note on the run that it expects to be preempted (``run.preempting``
        becomes True); a run that then dies shows as crashed with that note beside it."""
        self._run.note(f"wandb.mark_preempting at step {self.step}: this run expected to be preempted")
        self.preempting = True

    def pin_config_keys(self, keys: Any = ()) -> None:
        """``run.pin_config_keys``: the config keys to show first, kept in a ``pinned_config_keys`` media record."""
        names = [str(k) for k in keys]
        self._record({"kind": "pinned_config_keys", "key": "pinned_config_keys", "keys": names})

    def write_logs(self, text: str) -> None:
        """``run.write_logs``: append ``text`` (and a newline) to the run's ``files/output.log``; ignored
        once the run has finished, as in W&B."""
        if self.finished:
            return
        if self._output is None:
            target = self._run.dir / "files" / "output.log"
            target.parent.mkdir(parents=True, exist_ok=True)
            self._output = open(target, "a", encoding="utf-8")  # noqa: SIM115 - closed at finish
        self._output.write(text if text.endswith("\n") else text + "\n")
        self._output.flush()

    def status(self) -> RunStatus:
        """``run.status``: nothing is ever pending (labledger writes to the ledger as it logs)."""
        return RunStatus()

    def display(self, height: int = 420, hidden: bool = False) -> bool:
        """``run.display``: False (there is no W&B page to embed; ``labledger site`` builds the run's page)."""
        return False

    def to_html(self, height: int = 420, hidden: bool = False) -> str:
        """``run.to_html``: a link to the run folder (there is no W&B page to embed)."""
        import html

        return f'<a href="{html.escape(self.url)}">labledger run {html.escape(self.name)} ({html.escape(self.id)})</a>'

    def watch(self, *_: Any, **__: Any) -> None:
        """``wandb.watch``: accepted and a no-op (gradients and parameters are not logged)."""
        note_watch()

    def unwatch(self, *_: Any, **__: Any) -> None:
        """``run.unwatch``: a no-op, as :meth:`watch` is."""

    @unsupported
    def link_artifact(self, *_: Any, **__: Any) -> None:
        raise UnsupportedError(
            "run.link_artifact is not supported by labledger.wandb: there is no registry to link to; "
            "the artifact is stored with the run (files/artifacts/)"
        )

    @unsupported
    def link_model(self, *_: Any, **__: Any) -> None:
        raise UnsupportedError(
            "run.link_model is not supported by labledger.wandb: there is no model registry; "
            "log the model with run.log_model"
        )

    @unsupported
    def use_model(self, *_: Any, **__: Any) -> None:
        raise UnsupportedError(
            "run.use_model is not supported by labledger.wandb: models are not downloaded; open the file in the "
            "producing run's files/artifacts/ folder (labledger show RUN)"
        )

    @unsupported
    def restore(self, *_: Any, **__: Any) -> None:
        raise UnsupportedError(
            "run.restore is not supported by labledger.wandb: files are not downloaded; open the file in the "
            "producing run's files/ folder (labledger show RUN)"
        )

    @unsupported
    def alert(self, *_: Any, **__: Any) -> None:
        raise UnsupportedError(
            "wandb.alert is not supported by labledger.wandb: alerts need a server; check values in your loop "
            "and raise, or use labledger's gates"
        )

    @unsupported
    def use_artifact(self, *_: Any, **__: Any) -> None:
        raise UnsupportedError(
            "wandb.use_artifact is not supported by labledger.wandb: artifacts are not downloaded; open the file "
            "from the producing run's folder (labledger show RUN) and record it with Run.log_checkpoint"
        )

    # -- end ------------------------------------------------------------------------------------
    def _close_extras(self) -> None:
        headline = {k: _scalar(v) for k, v in self.summary._set.items() if self._kind(v) == "number"}
        headline.update(self._defined_summaries())
        if headline:
            self._run.set_summary(**headline)
        if self._metrics:
            self._run.log_file("wandb-metrics.json", orjson.dumps(self._metrics, option=orjson.OPT_INDENT_2))
        full = {**self.summary._merged(), **self._defined_summaries()}
        self._run.log_file("wandb-summary.json", orjson.dumps(jsonable(full), option=orjson.OPT_INDENT_2))
        if self._media is not None:
            self._media.fsync()
            self._media.close()
        if self._output is not None:
            self._output.close()
            self._output = None

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        """``wandb.finish``: commit the pending row and end the run (``exit_code`` != 0 marks it failed)."""
        if self.finished:
            return
        self._flush()
        self._close_extras()
        if exit_code:
            self._run.finish("failed", error=f"exit code {exit_code}")
        else:
            self._run.finish()
        self.finished = True
        forget(self)


class RunDisabled(WandbRun):
    """The run ``wandb.init(mode="disabled")`` returns: every call is accepted and nothing is written.

    It is a :class:`WandbRun` (as W&B's disabled run is a ``wandb.Run``) and is also exported as
    ``wandb.sdk.lib.RunDisabled``, the name integrations such as Lightning's ``WandbLogger`` check.
    """

    def __init__(self) -> None:  # no ledger, no files
        self.config = Config()
        self.summary = Summary()
        self.step = 0
        self.finished = False
        self.project = self.entity = self.job_type = self.notes = None
        self.tags = ()
        self.preempting = False
        self._sweep_id = None
        self._settings = Settings()
        self._started = time.time()

    id = "disabled"
    name = "disabled"
    group = None
    dir = os.devnull
    path = os.devnull
    sync_dir = os.devnull
    url = "about:blank"
    disabled = True

    @property
    def start_time(self) -> float:
        return self._started

    def log(
        self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None, sync: Any = None
    ) -> None:
        self.step = step + 1 if step is not None else self.step + 1

    def define_metric(self, name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"name": name}

    def save(self, *args: Any, **kwargs: Any) -> list[str]:
        return []

    def log_artifact(self, artifact_or_path: Any, *args: Any, **kwargs: Any) -> Any:
        return artifact_or_path

    def log_code(self, *args: Any, **kwargs: Any) -> None:
        return None

    def log_model(self, *args: Any, **kwargs: Any) -> None:
        return None

    def mark_preempting(self) -> None:
        self.preempting = True

    def pin_config_keys(self, keys: Any = ()) -> None:
        return None

    def write_logs(self, text: str) -> None:
        return None

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        self.finished = True
        forget(self)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.finish()


class RunStatus:
    """What ``run.status()`` returns: nothing to sync (``sync_items_pending`` 0, ``sync_time`` None)."""

    def __init__(self) -> None:
        self.sync_items_total = 0
        self.sync_items_pending = 0
        self.sync_time = None


def _is_code_file(path: str) -> bool:
    """W&B's default ``log_code`` filter: ``*.py``, ``requirements.txt`` and ``Dockerfile*``."""
    base = os.path.basename(path)
    return base.endswith(".py") or base.startswith("Dockerfile") or base == "requirements.txt"


def _in_wandb_folder(path: str, root: str) -> bool:
    """W&B's default ``log_code`` exclusion: files under ``<root>/wandb/`` and ``<root>/.wandb/``."""
    rel = os.path.relpath(path, root)
    return any(rel.startswith(d + os.sep) for d in ("wandb", ".wandb"))


def _two_args(fn: Any) -> Any:
    """``fn(path, root)`` for a filter that takes ``(path)`` or ``(path, root)``, as W&B accepts both."""
    import inspect

    try:
        n = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        n = 2
    return fn if n >= 2 else (lambda path, root: fn(path))


def program_name() -> str:
    """The running script's path relative to the working folder (``python`` for an interactive session)."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if not main:
        return "python"
    try:
        return os.path.relpath(main)
    except ValueError:
        return os.path.basename(main)


_watch_noted = False


def note_watch() -> None:
    global _watch_noted
    if not _watch_noted:
        _watch_noted = True
        warn("wandb.watch is a no-op (gradients and parameters are not logged); log the values you need with wandb.log")


#: What to call when a run ends: the module-level API registers how ``wandb.run`` forgets it.
ENDED_HOOKS: list[Callable[[WandbRun], None]] = []


def forget(run: WandbRun) -> None:
    """Tell the module-level API that ``run`` ended (``wandb.run`` becomes None when it was current)."""
    for hook in ENDED_HOOKS:
        hook(run)
