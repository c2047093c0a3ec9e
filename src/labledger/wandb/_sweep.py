"""``wandb.sweep`` and ``wandb.agent`` in one process: grid and random search over W&B's sweep config.

``sweep(config)`` checks the config and returns an id; ``agent(id, function=train, count=N)`` calls
``train()`` once per trial. Inside it ``wandb.init`` starts the trial's run: the trial's parameters
override the ``config`` given to ``init``; the run's group is the sweep's (``name`` in the sweep config,
else ``sweep-<id>``) and its project the one given to ``sweep``/``agent``, unless ``init`` names them;
``run.json`` keeps ``wandb.sweep_id`` and ``wandb.sweep_trial``. A trial whose function raises is marked
failed and the next trial starts, as W&B's agent does. Compare the trials with
``labledger runs --group <group>``.

Parameters follow W&B's sweep config: ``value``, ``values`` (with ``probabilities``), ``parameters``
(nested), and ``distribution`` with ``min``/``max`` (``int_uniform``, ``uniform``, ``q_uniform``,
``log_uniform`` (exponents), ``log_uniform_values``, ``inv_log_uniform(_values)``, their ``q_`` forms)
or ``mu``/``sigma`` (``normal``, ``log_normal``, their ``q_`` forms). ``grid`` takes ``value``,
``values`` and ``int_uniform``; ``random`` takes all; ``bayes`` is refused (it needs a model of past
trials).

>>> sid = sweep({"method": "grid", "parameters": {"lr": {"values": [0.1, 0.01]}, "layers": {"value": 2}}})
>>> [t for t in grid_trials(_SWEEPS[sid].config["parameters"])]
[{'lr': 0.1, 'layers': 2}, {'lr': 0.01, 'layers': 2}]
"""

from __future__ import annotations

import itertools
import math
import random
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from labledger.wandb._run import UnsupportedError, WandbError, WandbRun, forget, jsonable, warn

METHODS = ("grid", "random")
_DISCRETE = ("constant", "categorical", "int_uniform")


@dataclass
class SweepSpec:
    """A sweep made by :func:`sweep`: its id, config, group and how many trials have run."""

    id: str
    config: dict[str, Any]
    group: str
    project: str | None = None
    done: int = 0


@dataclass
class Trial:
    """The trial :func:`agent` is running: what ``wandb.init`` reads (``params``, ``group``, ``sweep_id``)."""

    sweep_id: str
    index: int
    params: dict[str, Any]
    group: str
    config: dict[str, Any]
    project: str | None = None
    runs: list[WandbRun] = field(default_factory=list)

    def started(self, run: WandbRun) -> None:
        """``wandb.init`` made ``run`` for this trial: keep the sweep config beside it (``files/wandb-sweep.json``)."""
        import orjson

        self.runs.append(run)
        doc = {"sweep_id": self.sweep_id, "trial": self.index, "params": self.params, "sweep": self.config}
        run.labledger_run.log_file("wandb-sweep.json", orjson.dumps(jsonable(doc), option=orjson.OPT_INDENT_2))


_SWEEPS: dict[str, SweepSpec] = {}
_trial: Trial | None = None


def current_trial() -> Trial | None:
    """The trial :func:`agent` is running now (None outside an agent)."""
    return _trial


def _check(params: Any, method: str, where: str = "") -> None:
    if not isinstance(params, Mapping) or not params:
        raise WandbError(f"wandb.sweep: 'parameters'{where} must be a non-empty dict of parameter specs")
    for name, spec in params.items():
        path = f"{where}.{name}" if where else str(name)
        if not isinstance(spec, Mapping):
            raise WandbError(f"wandb.sweep: parameter {path!r} must be a dict such as {{'values': [...]}}")
        if "parameters" in spec:
            _check(spec["parameters"], method, path)
            continue
        dist = _distribution(spec, path)
        if method == "grid" and dist not in _DISCRETE:
            raise WandbError(
                f"wandb.sweep: grid search needs 'values' for parameter {path!r} (it has distribution {dist!r}); "
                "list the values or use method 'random'"
            )


def _distribution(spec: Mapping[str, Any], path: str) -> str:
    if "distribution" in spec:
        dist = str(spec["distribution"])
    elif "value" in spec:
        dist = "constant"
    elif "values" in spec:
        dist = "categorical"
    elif "min" in spec and "max" in spec:
        ints = isinstance(spec["min"], int) and isinstance(spec["max"], int)
        dist = "int_uniform" if ints else "uniform"
    else:
        raise WandbError(f"wandb.sweep: parameter {path!r} needs 'value', 'values', or 'min' and 'max'")
    if dist not in _SAMPLERS:
        raise WandbError(
            f"wandb.sweep: parameter {path!r}: unknown distribution {dist!r}; use one of {', '.join(_SAMPLERS)}"
        )
    if dist == "categorical" and not list(spec.get("values") or []):
        raise WandbError(f"wandb.sweep: parameter {path!r}: 'values' is empty")
    return dist


def sweep(sweep: Any, entity: str | None = None, project: str | None = None, prior_runs: Any = None) -> str:
    """Register a sweep (a W&B sweep config, or a function returning one) in this process; returns its id.

    Raises :class:`WandbError` for a config W&B would refuse (no parameters, grid over a continuous
    distribution, unknown distribution) and :class:`UnsupportedError` for ``method: bayes``.
    """
    config = sweep() if callable(sweep) else sweep
    if not isinstance(config, Mapping):
        raise WandbError(f"wandb.sweep takes a sweep config dict; got {type(config).__name__}")
    config = dict(config)
    method = config.get("method")
    if method == "bayes":
        raise UnsupportedError(
            "wandb.sweep(method='bayes') is not supported by labledger.wandb: use method 'random' or 'grid' "
            "(docs/wandb.md, Sweeps)"
        )
    if method not in METHODS:
        raise WandbError(f"wandb.sweep: method {method!r}: use 'grid' or 'random'")
    _check(config.get("parameters"), method)
    sweep_id = secrets.token_hex(4)
    group = str(config.get("name") or f"sweep-{sweep_id}")
    _SWEEPS[sweep_id] = SweepSpec(sweep_id, config, group, project=project)
    return sweep_id


def grid_trials(params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every combination of the parameters' values, the first parameter varying slowest (nested dicts kept)."""
    names = list(params)
    choices = [_grid_values(params[n]) for n in names]
    for combo in itertools.product(*choices):
        yield dict(zip(names, combo, strict=True))


def _grid_values(spec: Mapping[str, Any]) -> list[Any]:
    if "parameters" in spec:
        return list(grid_trials(spec["parameters"]))
    dist = _distribution(spec, "")
    if dist == "constant":
        return [spec["value"]]
    if dist == "categorical":
        return list(spec["values"])
    return list(range(int(spec["min"]), int(spec["max"]) + 1))


def random_trial(params: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """One draw of every parameter from its distribution."""
    out: dict[str, Any] = {}
    for name, spec in params.items():
        if "parameters" in spec:
            out[name] = random_trial(spec["parameters"], rng)
        else:
            out[name] = _SAMPLERS[_distribution(spec, str(name))](spec, rng)
    return out


def _q(x: float, spec: Mapping[str, Any]) -> float:
    q = float(spec.get("q", 1.0))
    v = round(x / q) * q
    return int(v) if float(v).is_integer() and float(q).is_integer() else v


def _categorical(spec: Mapping[str, Any], rng: random.Random) -> Any:
    values = list(spec["values"])
    weights = spec.get("probabilities")
    return rng.choices(values, weights=weights)[0] if weights else rng.choice(values)


def _uniform(spec: Mapping[str, Any], rng: random.Random) -> float:
    return rng.uniform(float(spec["min"]), float(spec["max"]))


def _log_values(spec: Mapping[str, Any], rng: random.Random) -> float:
    return math.exp(rng.uniform(math.log(float(spec["min"])), math.log(float(spec["max"]))))


def _normal(spec: Mapping[str, Any], rng: random.Random) -> float:
    return rng.gauss(float(spec.get("mu", 0.0)), float(spec.get("sigma", 1.0)))


_SAMPLERS: dict[str, Callable[[Mapping[str, Any], random.Random], Any]] = {
    "constant": lambda s, r: s["value"],
    "categorical": _categorical,
    "int_uniform": lambda s, r: r.randint(int(s["min"]), int(s["max"])),
    "uniform": _uniform,
    "q_uniform": lambda s, r: _q(_uniform(s, r), s),
    "log_uniform": lambda s, r: math.exp(_uniform(s, r)),
    "log_uniform_values": _log_values,
    "q_log_uniform": lambda s, r: _q(math.exp(_uniform(s, r)), s),
    "q_log_uniform_values": lambda s, r: _q(_log_values(s, r), s),
    "inv_log_uniform": lambda s, r: 1.0 / math.exp(_uniform(s, r)),
    "inv_log_uniform_values": lambda s, r: 1.0 / _log_values(s, r),
    "normal": _normal,
    "q_normal": lambda s, r: _q(_normal(s, r), s),
    "log_normal": lambda s, r: math.exp(_normal(s, r)),
    "q_log_normal": lambda s, r: _q(math.exp(_normal(s, r)), s),
}


def agent(
    sweep_id: str,
    function: Callable[[], Any] | None = None,
    entity: str | None = None,
    project: str | None = None,
    count: int | None = None,
) -> None:
    """Run ``function()`` once per trial of the sweep ``sweep_id`` (made by :func:`sweep` in this process).

    ``grid`` runs every combination not yet run (at most ``count``); ``random`` draws ``count`` trials,
    or trials until interrupted when ``count`` is None, as W&B's agent does. A trial's run left open
    by ``function`` is finished; a trial whose function raises is marked failed (``error`` in
    ``run.json``), reported in one line, and the next trial starts.
    """
    global _trial
    spec = _SWEEPS.get(str(sweep_id).rsplit("/", 1)[-1])
    if spec is None:
        raise UnsupportedError(
            f"wandb.agent({sweep_id!r}) is not supported by labledger.wandb: only sweeps made by wandb.sweep in "
            "this process run; call wandb.sweep(config) in the same script and pass its id"
        )
    if function is None:
        raise UnsupportedError(
            "wandb.agent without function= is not supported by labledger.wandb: pass function=train, "
            "a function that calls wandb.init and trains one trial"
        )
    if count is not None and count < 0:
        raise WandbError(f"wandb.agent(count={count}): count is a number of trials (0 or more)")
    params = spec.config["parameters"]
    trials: Iterator[dict[str, Any]]
    if spec.config["method"] == "grid":
        trials = itertools.islice(grid_trials(params), spec.done, None)
    else:
        rng = random.Random()
        trials = (random_trial(params, rng) for _ in itertools.count())
    if count is not None:
        trials = itertools.islice(trials, count)
    for values in trials:
        trial = Trial(spec.id, spec.done, values, spec.group, spec.config, project=project or spec.project)
        spec.done += 1
        _trial = trial
        try:
            function()
        except Exception as exc:  # noqa: BLE001 - recorded on the trial's run; the next trial starts, as in W&B
            for run in trial.runs:
                if not run.finished:
                    run._flush()
                    run._close_extras()
                    run.labledger_run.finish("failed", error=f"{type(exc).__name__}: {exc}"[:500])
                    run.finished = True
                    forget(run)
            warn(f"sweep {spec.id} trial {trial.index} failed: {type(exc).__name__}: {exc}")
        finally:
            _trial = None
            for run in trial.runs:
                if not run.finished:
                    run.finish()
