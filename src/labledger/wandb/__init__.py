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

from labledger.wandb import _run as _run_module
from labledger.wandb import _sweep
from labledger.wandb._run import (
    CommError,
    Config,
    RunDisabled,
    Summary,
    UnsupportedError,
    UnsupportedNameError,
    UsageError,
    WandbError,
    WandbRun,
    flatten,
    unsupported,
    warn,
)
from labledger.wandb.media import (
    AlertLevel,
    Artifact,
    ArtifactTTL,
    Classes,
    CustomChart,
    Histogram,
    Html,
    Image,
    MediaError,
    Settings,
    Table,
    Visualize,
)

#: The W&B API this module follows (the calls of wandb 0.19+ that docs/wandb.md lists).
__version__ = "0.19.0"

Error = WandbError
#: ``wandb.Run``: the class of ``wandb.run`` (``isinstance(wandb.run, wandb.Run)`` holds).
Run = WandbRun
_log = logging.getLogger("labledger.wandb")
#: ``wandb.patched``: the libraries W&B patched for automatic logging; labledger.wandb patches none.
patched: dict[str, list[Any]] = {"tensorboard": [], "keras": [], "gym": []}

#: The current run (``wandb.run``), ``None`` before ``init`` and after ``finish``.
run: WandbRun | None = None
#: ``wandb.config`` of the current run (an empty config before ``init``).
config: Config = Config()
#: ``wandb.summary`` of the current run.
summary: Summary = Summary()


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


_run_module.ENDED_HOOKS.append(_ended)


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
    config_exclude_keys: list[str] | None = None,
    config_include_keys: list[str] | None = None,
    save_code: bool | None = None,
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
    append-only: start a new run and compare). ``config_include_keys``/``config_exclude_keys`` keep or
    drop top-level config keys, as W&B does; ``save_code=True`` stores the running script under
    ``files/code/``. Inside :func:`agent` the trial's parameters override ``config`` and the run joins
    the sweep's group. System metrics are sampled unless ``system_metrics=False``.

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
    config = _config_keys(config, config_include_keys, config_exclude_keys)
    trial = _sweep.current_trial()
    if trial is not None:
        config = {**config, **trial.params}
    if isinstance(settings, Mapping):
        settings = Settings(**settings)
    if mode == "disabled":
        new: WandbRun = RunDisabled()
        new.config.update(config)
    else:
        project = project or (trial.project if trial is not None else None) or os.environ.get("WANDB_PROJECT")
        name = name or os.environ.get("WANDB_NAME")
        group = group or os.environ.get("WANDB_RUN_GROUP")
        extra: dict[str, Any] = {"mode": mode or "offline"}
        if settings is not None:
            extra["settings"] = settings.to_dict()
        if trial is not None:
            group = group or trial.group
            extra.update(sweep_id=trial.sweep_id, sweep_trial=trial.index)
        if kwargs:
            extra["ignored_arguments"] = sorted(kwargs)
        for arg in ("sync_tensorboard", "tensorboard"):
            if kwargs.get(arg):
                warn(
                    f"wandb.init({arg}=True): TensorBoard's logs are not copied into this run; "
                    "import them as a run with `labledger import LOGDIR`"
                )
        if kwargs.get("monitor_gym"):
            warn("wandb.init(monitor_gym=True): gym videos are not recorded; store them with wandb.save")
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
            settings=settings,
            sweep_id=trial.sweep_id if trial is not None else None,
        )
        if trial is not None:
            trial.started(new)
        if save_code:
            _save_main_code(new)
    global _hooked
    if not _hooked:  # one interpreter-exit handler (no IPython or excepthook hooks)
        atexit.register(_at_exit)
        _hooked = True
    if not isinstance(new, RunDisabled):
        _open.append(new)
    _set_current(new)
    return new


def _config_keys(config: Any, include: Any, exclude: Any) -> dict[str, Any]:
    """``init``'s config with only the ``include`` keys (when given) and without the ``exclude`` keys."""
    from labledger.wandb._run import config_input

    values = config_input(config)
    if include:
        keep = {str(k) for k in include}
        values = {k: v for k, v in values.items() if k in keep}
    if exclude:
        drop = {str(k) for k in exclude}
        values = {k: v for k, v in values.items() if k not in drop}
    return values


def _save_main_code(new: WandbRun) -> None:
    """``init(save_code=True)``: the running script under ``files/code/`` (W&B saves it as ``code/<path>``)."""
    from labledger.wandb._run import program_name

    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if not main or not os.path.isfile(main):
        warn("wandb.init(save_code=True): no script file to save (interactive session); nothing stored")
        return
    new._store_file(f"code/{program_name()}", main, key="code")


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
    from labledger.wandb._run import note_watch

    note_watch()


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


def log_model(path: str | os.PathLike[str], name: str | None = None, aliases: list[str] | None = None) -> None:
    """``wandb.log_model`` on the current run (see :meth:`WandbRun.log_model`)."""
    _current("log_model").log_model(path, name=name, aliases=aliases)


def mark_preempting() -> None:
    """``wandb.mark_preempting`` on the current run (see :meth:`WandbRun.mark_preempting`)."""
    _current("mark_preempting").mark_preempting()


def pin_config_keys(keys: Any = ()) -> None:
    """``wandb.pin_config_keys`` on the current run (see :meth:`WandbRun.pin_config_keys`)."""
    _current("pin_config_keys").pin_config_keys(keys)


def join(exit_code: int | None = None, quiet: bool | None = None) -> None:
    """``wandb.join``: W&B's old name of :func:`finish`."""
    finish(exit_code=exit_code, quiet=quiet)


#: W&B's feature flags that ``require`` accepts (each is already how labledger.wandb behaves).
REQUIREMENTS = ("service", "core", "legacy-service", "require")


def require(requirement: Any = None, experiment: Any = None) -> None:
    """``wandb.require``: accepts W&B's feature flags (``"service"``, ``"core"``, ...), which change nothing
    here; an unknown flag raises :class:`UnsupportedError`, as W&B raises for it."""
    features = requirement or experiment
    if not features:
        return
    for feature in [features] if isinstance(features, str) else list(features):
        base = str(feature).split("@", 1)[0].split(":", 1)[0]
        if base not in REQUIREMENTS:
            raise UnsupportedError(
                f"wandb.require({feature!r}) is not supported by labledger.wandb: unknown feature; "
                f"remove the call (known: {', '.join(REQUIREMENTS)})"
            )


def termsetup(*args: Any, **kwargs: Any) -> None:
    """``wandb.termsetup``: nothing to set up (messages go to the ``labledger.wandb`` logger)."""


def ensure_configured() -> None:
    """``wandb.ensure_configured``: deprecated in W&B and does nothing, here as there."""


def sweep(sweep: Any, entity: str | None = None, project: str | None = None, prior_runs: Any = None) -> str:
    """``wandb.sweep``: register a grid or random sweep in this process; returns its id for :func:`agent`.

    See :func:`labledger.wandb._sweep.sweep` and docs/wandb.md ("Sweeps").
    """
    return _sweep.sweep(sweep, entity=entity, project=project, prior_runs=prior_runs)


def agent(
    sweep_id: str,
    function: Any = None,
    entity: str | None = None,
    project: str | None = None,
    count: int | None = None,
) -> None:
    """``wandb.agent``: run ``function`` once per trial of the sweep, each trial a run in the sweep's group.

    See :func:`labledger.wandb._sweep.agent` and docs/wandb.md ("Sweeps").
    """
    _sweep.agent(sweep_id, function=function, entity=entity, project=project, count=count)


def _unsupported(name: str, instead: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"wandb.{name} is not supported by labledger.wandb: {instead}")

    call.__name__ = name
    call.__qualname__ = name
    call.__doc__ = f"Not supported: raises :class:`UnsupportedError` ({instead})."
    return unsupported(call)


def _unsupported_class(name: str, instead: str) -> Any:
    """A class standing for a W&B media/API class: ``isinstance`` checks are False, making one raises."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedError(f"wandb.{name} is not supported by labledger.wandb: {instead}")

    doc = f"Not supported: making one raises :class:`UnsupportedError` ({instead})."
    return unsupported(type(name, (), {"__init__": __init__, "__doc__": doc, "__module__": __name__}))


_SAVE_FILE = "write the file and store it with wandb.save (or wandb.log_artifact)"
controller = _unsupported(
    "controller", "sweeps run in this process; call wandb.agent(sweep_id, function=train) (docs/wandb.md, Sweeps)"
)
Api = _unsupported_class("Api", "read runs with labledger.open_ledger(...).runs() / .run(id)")
restore = _unsupported("restore", "open the file in the producing run's folder (RunView.dir / 'files')")
use_artifact = _unsupported("use_artifact", "open the file from the producing run's files/artifacts/ folder")
use_model = _unsupported("use_model", "open the model file from the producing run's files/artifacts/ folder")
alert = _unsupported("alert", "alerts need a server; check the value in your loop and raise")
link_model = _unsupported("link_model", "there is no model registry; log the model with wandb.log_model")
attach = _unsupported("attach", "runs live in the process that made them; pass the run object (wandb.run) along")
sagemaker_auth = _unsupported("sagemaker_auth", "there is nothing to log in to; remove the call")
Object3D = _unsupported_class("Object3D", _SAVE_FILE)
box3d = _unsupported("box3d", _SAVE_FILE)
Molecule = _unsupported_class("Molecule", _SAVE_FILE)
Audio = _unsupported_class("Audio", _SAVE_FILE)
Video = _unsupported_class("Video", _SAVE_FILE)
Plotly = _unsupported_class(
    "Plotly", "log the figure's HTML as wandb.Html(fig.to_html()), or a PNG (fig.write_image) as wandb.Image(path)"
)
Graph = _unsupported_class("Graph", "log the values you need with wandb.log (wandb.watch is a no-op)")
EvalTable = _unsupported_class("EvalTable", "log the rows as a wandb.Table")
JoinedTable = _unsupported_class("JoinedTable", "join the rows yourself and log them as one wandb.Table")

from labledger.wandb import data_types, errors, helper, plot, sdk  # noqa: E402 - submodules that use the names above

plot_table = plot.plot_table
visualize = plot.visualize
wandb = sys.modules[__name__]  # ``wandb.wandb``: the package itself, as in W&B
wandb_sdk = sdk
wandb_lib = sdk.lib

_LOG_INSTEAD = "log the values with wandb.log from the library's own callback"
#: Names of the real ``wandb`` package that are W&B's own machinery (its server API, its submodules,
#: its integrations) and have no labledger meaning: reaching them raises :class:`UnsupportedNameError`
#: (an :class:`UnsupportedError` that is also an ``AttributeError``) saying what to do instead.
UNSUPPORTED_NAMES: dict[str, str] = {
    "api": "read runs with labledger.open_ledger(...).runs() / .run(id)",
    "apis": "read runs with labledger.open_ledger(...).runs() / .run(id)",
    "agents": "run sweeps with wandb.sweep and wandb.agent(sweep_id, function=...)",
    "wandb_agent": "run sweeps with wandb.sweep and wandb.agent(sweep_id, function=...)",
    "analytics": "there is no telemetry; remove the use",
    "trigger": "there are no W&B hooks; call your function where the event happens",
    "env": "the WANDB_* variables labledger.wandb reads are listed in docs/wandb.md",
    "util": "use the standard library or labledger's API",
    "proto": "read W&B run files with labledger.wandb.records.read_wandb_file",
    "profiler": "profile with torch.profiler and store the trace with wandb.save",
    "integration": _LOG_INSTEAD,
    "wandb_torch": "wandb.watch is a no-op; log gradient norms with wandb.log",
    "jupyter": "show a run with labledger show RUN or the site (labledger site)",
    "keras": _LOG_INSTEAD,
    "tensorflow": _LOG_INSTEAD,
    "tensorboard": "import TensorBoard logs with labledger import",
    "sklearn": "log the metrics with wandb.log, or evaluate predictions with labledger eval",
    "xgboost": _LOG_INSTEAD,
    "lightgbm": _LOG_INSTEAD,
    "catboost": _LOG_INSTEAD,
    "sacred": _LOG_INSTEAD,
    "gym": _LOG_INSTEAD,
}


def __getattr__(name: str) -> Any:
    if name in UNSUPPORTED_NAMES:
        raise UnsupportedNameError(f"wandb.{name} is not supported by labledger.wandb: {UNSUPPORTED_NAMES[name]}")
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"labledger.wandb has no {name!r}: see docs/wandb.md for the calls it supports; "
        "for anything else use the labledger API (wandb.run.labledger_run is the labledger.Run)"
    )


__all__ = [
    "AlertLevel",
    "Api",
    "Artifact",
    "ArtifactTTL",
    "Audio",
    "Classes",
    "CommError",
    "Config",
    "CustomChart",
    "Error",
    "EvalTable",
    "Graph",
    "Histogram",
    "Html",
    "Image",
    "JoinedTable",
    "MediaError",
    "Molecule",
    "Object3D",
    "Plotly",
    "Run",
    "RunDisabled",
    "Settings",
    "Summary",
    "Table",
    "UnsupportedError",
    "UnsupportedNameError",
    "UsageError",
    "Video",
    "Visualize",
    "WandbError",
    "WandbRun",
    "agent",
    "alert",
    "attach",
    "box3d",
    "config",
    "controller",
    "data_types",
    "define_metric",
    "ensure_configured",
    "errors",
    "finish",
    "flatten",
    "helper",
    "init",
    "join",
    "link_model",
    "log",
    "log_artifact",
    "log_model",
    "login",
    "mark_preempting",
    "patched",
    "pin_config_keys",
    "plot",
    "plot_table",
    "require",
    "restore",
    "run",
    "sagemaker_auth",
    "save",
    "sdk",
    "setup",
    "summary",
    "sweep",
    "teardown",
    "termerror",
    "termlog",
    "termsetup",
    "termwarn",
    "unwatch",
    "use_artifact",
    "use_model",
    "visualize",
    "watch",
]
