"""``import labledger.wandb as wandb``: the common W&B API, writing an ordinary labledger run.

Training code written against W&B runs unchanged; no account, no network, no background process.
``project`` becomes the run's group unless ``group`` is given; see docs/wandb.md for every call
(supported, mapped, not supported). A call that is not supported raises
:class:`UnsupportedError` saying what to do instead.

>>> import tempfile
>>> import labledger.wandb as wandb
>>> d = tempfile.mkdtemp()
>>> with wandb.init(project="mnist", config={"lr": 0.1}, dir=d) as run:
...     for i in range(3):
...         wandb.log({"loss": 1.0 / (i + 1), "eval": {"acc": 0.5 + i / 10}})
...     wandb.summary["best_acc"] = 0.7
>>> import labledger
>>> view = labledger.open_ledger(d + "/.labledger").run(run.id)
>>> view.group, [r["eval.acc"] for r in view.scalars()]
('mnist', [0.5, 0.6, 0.7])
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from labledger.wandb._run import Config, Summary, UnsupportedError, WandbError, WandbRun, flatten
from labledger.wandb.media import Artifact, Histogram, Image, MediaError, Settings, Table

#: The W&B API this module follows (the calls of wandb 0.19+ that docs/wandb.md lists).
__version__ = "0.19.0"

Error = WandbError
_log = logging.getLogger("labledger.wandb")

#: The current run (``wandb.run``), ``None`` before ``init`` and after ``finish``.
run: WandbRun | None = None
#: ``wandb.config`` of the current run (an empty config before ``init``).
config: Config = Config()
#: ``wandb.summary`` of the current run.
summary: Summary = Summary()


class _DisabledRun(WandbRun):
    """``mode="disabled"``: every call is accepted and nothing is written."""

    def __init__(self) -> None:  # no ledger, no files
        self.config = Config()
        self.summary = Summary()
        self.step = 0
        self.finished = False
        self.project = self.entity = self.job_type = self.notes = None
        self.tags = ()

    id = "disabled"
    name = "disabled"
    dir = os.devnull

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

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        self.finished = True
        _ended(self)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.finish()


_open: list[WandbRun] = []
_hooked = False


def _at_exit() -> None:
    """At interpreter exit, end the runs still open, as W&B does: failed if the script died of an exception."""
    error = getattr(sys, "last_value", None)
    for r in list(_open):
        if r.finished:
            continue
        if error is not None:
            r._flush()
            r._close_extras()
            r._run.finish("failed", error=f"{type(error).__name__}: {error}"[:500])
            r.finished = True
        else:
            r.finish()
    _open.clear()


def _set_current(new: WandbRun | None) -> None:
    global run, config, summary
    run = new
    config = new.config if new is not None else Config()
    summary = new.summary if new is not None else Summary()


def _ended(ended: WandbRun) -> None:
    if ended in _open:
        _open.remove(ended)
    if run is ended:
        _set_current(None)


def init(
    project: str | None = None,
    name: str | None = None,
    group: str | None = None,
    tags: Any = None,
    config: Any = None,
    notes: str | None = None,
    job_type: str | None = None,
    entity: str | None = None,
    dir: str | os.PathLike[str] | None = None,
    mode: str | None = None,
    reinit: bool | str | None = None,
    resume: bool | str | None = None,
    id: str | None = None,
    settings: Settings | Mapping[str, Any] | None = None,
    *,
    ledger: Any = None,
    system_metrics: bool = True,
    **kwargs: Any,
) -> WandbRun:
    """``wandb.init``: start a labledger run and make it ``wandb.run``.

    Mapping: ``project`` -> group (unless ``group``), ``name`` -> run name (default: the project),
    ``tags``/``notes``/``config`` as themselves, ``job_type``/``entity``/``id`` kept in ``run.json``
    under ``wandb``. The ledger is ``ledger=`` when given, else ``dir/.labledger`` when ``dir`` is
    given, else ``$LABLEDGER_DIR``, else ``./.labledger``. ``mode`` online,
    offline or None write the run locally (labledger never uploads); ``disabled`` writes nothing.
    ``reinit``: False/"default"/"return_previous" return the active run, True/"finish_previous"
    finish it first, "create_new" starts another beside it. ``resume="must"`` raises (runs are
    append-only: start a new run and compare). System metrics are sampled unless
    ``system_metrics=False``.

    >>> import tempfile, labledger.wandb as wandb
    >>> r = wandb.init(project="p", name="first", dir=tempfile.mkdtemp(), system_metrics=False)
    >>> (r.name, r.group, wandb.run is r)
    ('first', 'p', True)
    >>> wandb.finish(); wandb.run is None
    True
    """
    mode = mode or os.environ.get("WANDB_MODE")
    if os.environ.get("WANDB_DISABLED", "").lower() in ("1", "true", "yes"):
        mode = "disabled"
    if mode not in (None, "online", "offline", "disabled", "dryrun", "run", "shared"):
        raise WandbError(f"wandb.init(mode={mode!r}): use 'online', 'offline' or 'disabled'")
    if resume in ("must", True):
        raise UnsupportedError(
            f"wandb.init(resume={resume!r}) is not supported by labledger.wandb: runs are append-only; "
            "start a new run (resume=None) and relate them with a group or tag"
        )
    if run is not None and not run.finished:
        if reinit in (None, False, "default", "return_previous"):
            return run
        if reinit in (True, "finish_previous"):
            run.finish()
        elif reinit != "create_new":
            raise WandbError(
                f"wandb.init(reinit={reinit!r}): use True, False, 'finish_previous', 'return_previous' or 'create_new'"
            )
    if mode == "disabled":
        new: WandbRun = _DisabledRun()
        new.config.update(config)
    else:
        project = project or os.environ.get("WANDB_PROJECT")
        name = name or os.environ.get("WANDB_NAME")
        group = group or os.environ.get("WANDB_RUN_GROUP")
        extra: dict[str, Any] = {"mode": mode or "offline"}
        if isinstance(settings, Settings):
            extra["settings"] = settings.to_dict()
        if kwargs:
            extra["ignored_arguments"] = sorted(kwargs)
        new = WandbRun(
            project=project,
            name=name,
            group=group,
            tags=tags,
            config=config,
            notes=notes,
            job_type=job_type,
            entity=entity,
            dir=dir,
            id=id,
            ledger=ledger,
            system_metrics=system_metrics,
            extra=extra,
        )
    global _hooked
    if not _hooked:  # one interpreter-exit handler (no IPython or excepthook hooks)
        atexit.register(_at_exit)
        _hooked = True
    if not isinstance(new, _DisabledRun):
        _open.append(new)
    _set_current(new)
    return new


def _current(what: str) -> WandbRun:
    if run is None:
        raise WandbError(f"You must call wandb.init() before wandb.{what}()")
    return run


def log(data: Mapping[str, Any], step: int | None = None, commit: bool | None = None, sync: Any = None) -> None:
    """``wandb.log`` on the current run (see :meth:`WandbRun.log`)."""
    r = run
    if r is None:
        raise WandbError("You must call wandb.init() before wandb.log()")
    r.log(data, step, commit)


def finish(exit_code: int | None = None, quiet: bool | None = None) -> None:
    """``wandb.finish``: end the current run (no-op without one)."""
    if run is not None:
        run.finish(exit_code=exit_code)


def define_metric(name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``wandb.define_metric`` on the current run (see :meth:`WandbRun.define_metric`)."""
    return _current("define_metric").define_metric(name, *args, **kwargs)


def save(glob_str: str | os.PathLike[str], base_path: str | None = None, policy: str = "live") -> list[str]:
    """``wandb.save`` on the current run: copies the files with their sha256."""
    return _current("save").save(glob_str, base_path, policy)


def log_artifact(artifact_or_path: Any, name: str | None = None, type: str | None = None, **kwargs: Any) -> Artifact:
    """``wandb.log_artifact`` on the current run."""
    return _current("log_artifact").log_artifact(artifact_or_path, name=name, type=type, **kwargs)


def watch(*args: Any, **kwargs: Any) -> None:
    """``wandb.watch``: a no-op, with a one-time note."""
    from labledger.wandb._run import _note_watch

    _note_watch()


def unwatch(*args: Any, **kwargs: Any) -> None:
    """``wandb.unwatch``: a no-op."""


def login(*args: Any, **kwargs: Any) -> bool:
    """``wandb.login``: nothing to log in to; returns True."""
    return True


def setup(*args: Any, **kwargs: Any) -> None:
    """``wandb.setup``: nothing to set up."""


def teardown(*args: Any, **kwargs: Any) -> None:
    """``wandb.teardown``: finishes the current run."""
    finish()


def termlog(string: str = "", *args: Any, **kwargs: Any) -> None:
    """``wandb.termlog``: to the ``labledger.wandb`` logger (INFO)."""
    _log.info("%s", string)


def termwarn(string: str = "", *args: Any, **kwargs: Any) -> None:
    """``wandb.termwarn``: to the ``labledger.wandb`` logger (WARNING)."""
    _log.warning("%s", string)


def termerror(string: str = "", *args: Any, **kwargs: Any) -> None:
    """``wandb.termerror``: to the ``labledger.wandb`` logger (ERROR)."""
    _log.error("%s", string)


def _unsupported(name: str, instead: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"wandb.{name} is not supported by labledger.wandb: {instead}")

    call.__name__ = name
    call.__doc__ = f"Not supported: raises :class:`UnsupportedError` ({instead})."
    return call


sweep = _unsupported("sweep", "define the grid with `labledger sweep` (docs/sweeps.md)")
agent = _unsupported("agent", "run the sweep's commands with `labledger sweep run`")
controller = _unsupported("controller", "use `labledger sweep`")
Api = _unsupported("Api", "read runs with labledger.open_ledger(...).runs() / .run(id)")
restore = _unsupported("restore", "open the file in the producing run's folder (RunView.dir / 'files')")
use_artifact = _unsupported("use_artifact", "open the file from the producing run's files/artifacts/ folder")
alert = _unsupported("alert", "alerts need a server; check the value in your loop and raise")
link_model = _unsupported("link_model", "there is no model registry; log the file with wandb.log_artifact")
mark_preempting = _unsupported("mark_preempting", "runs that die are marked crashed; start a new run to continue")
Object3D = _unsupported("Object3D", "save the file with wandb.save")
Molecule = _unsupported("Molecule", "save the file with wandb.save")
Audio = _unsupported("Audio", "save the audio file with wandb.save")
Video = _unsupported("Video", "save the video file with wandb.save")
Html = _unsupported("Html", "save the HTML file with wandb.save")
plot = _unsupported("plot", "log the values with wandb.log or the rows with wandb.Table")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"labledger.wandb has no {name!r}: see docs/wandb.md for the calls it supports; "
        "for anything else use the labledger API (wandb.run.labledger_run is the labledger.Run)"
    )


__all__ = [
    "Api",
    "Artifact",
    "Audio",
    "Config",
    "Error",
    "Histogram",
    "Html",
    "Image",
    "MediaError",
    "Molecule",
    "Object3D",
    "Settings",
    "Summary",
    "Table",
    "UnsupportedError",
    "Video",
    "WandbError",
    "WandbRun",
    "agent",
    "alert",
    "config",
    "controller",
    "define_metric",
    "finish",
    "flatten",
    "init",
    "link_model",
    "log",
    "log_artifact",
    "login",
    "mark_preempting",
    "plot",
    "restore",
    "run",
    "save",
    "setup",
    "summary",
    "sweep",
    "teardown",
    "termerror",
    "termlog",
    "termwarn",
    "unwatch",
    "use_artifact",
    "watch",
]
