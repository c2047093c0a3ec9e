"""Lightning: a ``lightning.pytorch.loggers.Logger`` that logs into a ledger.

>>> import lightning.pytorch as pl                                        # doctest: +SKIP
>>> from labledger.integrations.lightning import LedgerLogger             # doctest: +SKIP
>>> trainer = pl.Trainer(max_steps=100, logger=LedgerLogger("mlp", ledger="runs.ledger"))  # doctest: +SKIP
>>> trainer.fit(module, datamodule)                                        # doctest: +SKIP

Only global rank zero writes (``rank_zero_only``). What is logged:

- ``log_hyperparams`` -> the run's config (merged; values that are not JSON become text);
- ``log_metrics(metrics, step)`` -> one scalar record per call at ``step``;
- ``after_save_checkpoint`` -> every checkpoint file ``ModelCheckpoint`` writes, with sha256, size,
  the global step and the monitored score (a file rewritten in place, like ``last.ckpt``, is
  recorded again each time its content changes);
- ``finalize(status)`` -> the run's status: ``success`` -> finished, ``failed`` -> failed, anything
  else (e.g. ``finished`` from a SLURM requeue signal) -> killed.

``version`` is the run id, so ``ModelCheckpoint`` saves under ``<default_root_dir>/<name>/<run id>/
checkpoints`` unless given a ``dirpath``.
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Iterable, Mapping
from typing import Any

try:
    from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
    from lightning.pytorch.utilities.rank_zero import rank_zero_only
except ImportError as _exc:  # pragma: no cover - exercised only without lightning
    raise ImportError(
        "labledger.integrations.lightning needs lightning: pip install 'labledger[integrations]'"
    ) from _exc

from labledger.integrations.values import jsonable, numbers
from labledger.store.ledger import Ledger
from labledger.store.run import Run

STATUS = {"success": "finished", "failed": "failed"}


class LedgerLogger(Logger):
    """Log a Lightning run into a ledger (see the module docstring).

    >>> import tempfile
    >>> logger = LedgerLogger("mlp", ledger=tempfile.mkdtemp())
    >>> logger.name
    'mlp'
    """

    def __init__(
        self,
        name: str = "lightning",
        *,
        group: str | None = None,
        tags: Iterable[str] = (),
        config: Mapping[str, Any] | None = None,
        notes: str | None = None,
        ledger: Ledger | str | os.PathLike[str] | None = None,
        init: str | os.PathLike[str] | None = None,
    ):
        super().__init__()
        #: What the run starts from (the ``ckpt_path`` given to ``fit``, a hub name...; lineage, #15).
        self._init = init
        self._name = name
        self._group = group
        self._tags = tuple(tags)
        self._config = dict(config or {})
        self._notes = notes
        self._ledger = ledger
        self._run: Run | None = None
        self._logged: dict[str, tuple[int, int]] = {}
        self._calls = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str | None:
        """The run's id (the run is created on first use, on rank zero only)."""
        run = self.experiment
        return run.id if isinstance(run, Run) else None

    @property
    @rank_zero_experiment
    def experiment(self) -> Run:
        """The :class:`labledger.Run` (created on first access)."""
        if self._run is None:
            self._run = Run(
                self._name,
                group=self._group,
                tags=self._tags,
                config=self._config,
                notes=self._notes,
                ledger=self._ledger,
            )
            if self._init:
                self._run.set_init(self._init, missing_as_name=True)
        return self._run

    @property
    def run(self) -> Run | None:
        """The run, or None before it started (and always on ranks other than zero)."""
        return self._run

    def _open(self) -> Run | None:
        run = self.experiment
        return run if isinstance(run, Run) and run.status == "running" else None

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        run = self._open()
        if run is None:
            return
        if isinstance(params, Namespace):
            params = vars(params)
        run.update_config(jsonable(dict(params or {})))

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        run = self._open()
        if run is None:
            return
        self._calls += 1
        values = numbers(metrics)
        if values:
            run.log(int(step) if step is not None else self._calls - 1, **values)

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        if getattr(rank_zero_only, "rank", 0) != 0:
            return
        run = self._open()
        if run is None:
            return
        path = (
            getattr(checkpoint_callback, "_last_checkpoint_saved", None)
            or getattr(checkpoint_callback, "last_model_path", None)
            or getattr(checkpoint_callback, "best_model_path", None)
        )
        if not path or not os.path.isfile(path):
            return
        st = os.stat(path)
        key = os.path.realpath(path)
        if self._logged.get(key) == (st.st_mtime_ns, st.st_size):
            return
        self._logged[key] = (st.st_mtime_ns, st.st_size)
        metrics: dict[str, Any] = {}
        monitor = getattr(checkpoint_callback, "monitor", None)
        score = getattr(checkpoint_callback, "current_score", None)
        if monitor and score is not None:
            metrics = numbers({monitor: score})
        step = getattr(checkpoint_callback, "_last_global_step_saved", None)
        run.log_checkpoint(  # referenced in place: ModelCheckpoint owns its files; readers re-verify
            path, step=step if isinstance(step, int) and step >= 0 else None, metrics=metrics, copy=False
        )

    @rank_zero_only
    def finalize(self, status: str) -> None:
        run = self._run
        if run is None or run.status != "running":
            return
        mapped = STATUS.get(status)
        if mapped is None:
            run.finish("killed", error=f"Lightning finalized the run with status {status!r}")
        elif mapped == "failed":
            run.finish("failed", error="Lightning reported the run as failed (an exception or an interrupt)")
        else:
            run.finish("finished")

    @rank_zero_only
    def save(self) -> None:
        if self._run is not None and self._run.status == "running":
            self._run.sync()


__all__ = ["LedgerLogger"]
