"""Hugging Face ``transformers``: a ``TrainerCallback`` that logs a ``Trainer`` run into a ledger, and
a ``Trainer`` subclass that also logs every microbatch with its samples.

>>> from labledger.integrations.hf import LedgerCallback, LedgerTrainer   # doctest: +SKIP
>>> trainer = LedgerTrainer(model=model, args=args, train_dataset=train, eval_dataset=val,
...                         processing_class=tokenizer,
...                         callbacks=[LedgerCallback("bert-tiny", ledger="runs.ledger")])  # doctest: +SKIP
>>> trainer.train()                                                        # doctest: +SKIP

What is logged (only by the main process, ``state.is_world_process_zero``; other DDP ranks write
nothing):

- config: ``training_args`` (``TrainingArguments.to_dict()``, tokens masked as Transformers masks
  them), ``model`` (``model.config.to_dict()``), parameter counts, world size, gradient-accumulation
  steps, effective batch size, and ``loss_reporting`` (what the Trainer's ``loss`` means);
- meta: ``config_defaults`` (see :func:`changed_defaults`): for ``training_args`` and ``model``, the
  default of each key whose value differs from it (what ``labledger show`` lists of them);
- scalars, at ``state.global_step``: every number of each logging interval (``loss``, ``grad_norm``,
  ``learning_rate``, ``epoch``, and any other number logged through ``Trainer.log``), of each
  evaluation (``eval_loss``, ``eval_<metric>``, ``eval_runtime``, ... and ``epoch``) and of each
  ``Trainer.predict`` (``test_*``), under the Trainer's own names, as W&B's and MLflow's callbacks
  log them; the end-of-training summary (``train_runtime``, ``train_loss``...) is not a scalar;
- history, at every logging interval: ``{"kind": "train", "step", "epoch", "loss", "grad_norm",
  "learning_rate", ..., "gradient_accumulation_steps", "interval_steps"}`` exactly as the Trainer
  reports them, plus the run's ``{"kind": "summary", ...}`` (``train_runtime``, ``train_loss``...);
- evaluation metrics per evaluation: ``{"kind": "eval", "step", "epoch", "eval_loss", ...}``
  (``kind: "predict"`` for ``Trainer.predict``);
- the headline (``set_summary``, see :func:`headline_metrics`): ``metric_for_best_model`` and the loss
  of the last evaluation, its other quality metrics, then ``train_loss``; never timings or throughput;
- checkpoints with sha256 and size whenever the Trainer saves one (every weight file of the
  ``checkpoint-<step>`` folder: ``*.safetensors``, ``pytorch_model*.bin``, ...; the folder's
  largest file when it has none), with the last evaluation's metrics;
- with :class:`LedgerTrainer`, one batch record per training microbatch (seed 004's schema): the
  samples' inputs decoded by the tokenizer, gold and predicted label names from
  ``model.config.id2label``, probabilities keyed by label name, cross-entropy ``-log p(gold)``,
  ``loss`` (the mean of those cross-entropies, computed in float64 from the logits) beside
  ``trainer_loss`` (what ``compute_loss`` returned), ``forward_ms``, GPU memory;
- the status: ``finished`` at ``on_train_end``; ``failed`` (or ``killed`` on Ctrl-C) when
  ``LedgerTrainer.train`` raises, or when the callback is used as a context manager.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

try:
    from transformers import Trainer, TrainerCallback
except ImportError as _exc:  # pragma: no cover - exercised only without transformers
    raise ImportError("labledger.integrations.hf needs transformers: pip install 'labledger[integrations]'") from _exc

from labledger.errors import LedgerError
from labledger.integrations.values import jsonable, numbers
from labledger.store.ledger import Ledger
from labledger.store.run import Run

#: What the history's ``loss`` means (stored in the run's config as ``loss_reporting``).
LOSS_REPORTING = (
    "history 'loss' is the Trainer's: the values training_step returned for the interval's microbatches, "
    "summed and divided by the number of optimizer steps in the interval ('interval_steps'). Each "
    "microbatch's value is its loss divided by gradient_accumulation_steps, unless the loss was already "
    "normalised over the whole accumulated batch (num_items_in_batch, or a custom loss that says so): "
    "either way it is a mean per optimizer step, not the last microbatch's loss. Batch records (with "
    "LedgerTrainer) give each microbatch's own mean cross-entropy as 'loss' and compute_loss's return "
    "value as 'trainer_loss'."
)
#: Weight files of a checkpoint folder, by glob, in the order they are logged.
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "adapter_model.bin", "model*.pt", "*.gguf")
#: Files of a checkpoint folder that are never weights.
NOT_WEIGHTS = frozenset(("training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt", "optimizer.bin"))


#: Endings of the Trainer's timing and throughput metrics (``eval_runtime``, ...): never a headline.
TIMING_SUFFIXES = (
    "_runtime",
    "_samples_per_second",
    "_steps_per_second",
    "_tokens_per_second",
    "_model_preparation_time",
    "_jit_compilation_time",
)


def _same(key: str, value: Any, default: Any) -> bool:
    """Whether ``value`` (from ``to_dict()``, after ``__post_init__``) is the field's ``default`` as
    declared: ``__post_init__`` turns an unset None/''/'none' into False/[]/{}, and ``to_dict``
    masks every ``*_token`` as ``<KEY>``; a dict matches a default dict on the keys it has."""
    if value == default:
        return True
    if isinstance(value, dict) and isinstance(default, dict):
        return all(k in default and _same(k, v, default[k]) for k, v in value.items())
    if default in (None, "", "none") and value in (None, False, "", [], {}):
        return True
    return key.endswith("_token") and default is None and value == f"<{key.upper()}>"


def changed_defaults(values: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """For each key of ``values`` whose value differs from its default, the default (None for a key
    ``defaults`` lacks); every other key of ``values`` holds its default. None without defaults.

    >>> changed_defaults({"lr": 0.1, "seed": 42, "debug": [], "extra": 1}, {"lr": 5e-05, "seed": 42, "debug": ""})
    {'lr': 5e-05, 'extra': None}
    """
    if defaults is None:
        return None
    return {k: defaults.get(k) for k, v in values.items() if k not in defaults or not _same(k, v, defaults[k])}


def training_args_defaults(args: Any) -> dict[str, Any] | None:
    """The declared defaults of ``type(args)``'s fields (a ``TrainingArguments`` dataclass), JSON-ready.

    Read from the dataclass fields: building a ``TrainingArguments`` would reset Accelerate's state
    under a running Trainer. An ``accelerator_config`` left unset is Accelerate's defaults."""
    import dataclasses

    if not dataclasses.is_dataclass(args):
        return None
    out: dict[str, Any] = {}
    try:
        for f in dataclasses.fields(args):
            if f.default is not dataclasses.MISSING:
                out[f.name] = jsonable(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = jsonable(f.default_factory())
        if out.get("accelerator_config") is None and "accelerator_config" in out:
            from transformers.trainer_pt_utils import AcceleratorConfig

            out["accelerator_config"] = jsonable(AcceleratorConfig().to_dict())
    except Exception:  # noqa: BLE001 - a field whose default cannot be made: no defaults recorded
        return None
    return out


def model_config_defaults(model_config: Any) -> dict[str, Any] | None:
    """``type(model_config)()``'s ``to_dict()``, JSON-ready (None for a config class that needs arguments)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            made = jsonable(type(model_config)().to_dict())
    except Exception:  # noqa: BLE001 - a config class that cannot be built bare: no defaults recorded
        return None
    return made if isinstance(made, dict) else None


def headline_metrics(
    last_eval: Mapping[str, float | int],
    train_summary: Mapping[str, float | int],
    metric_for_best_model: str | None = None,
) -> dict[str, float | int]:
    """The run's headline, in order: the last evaluation's ``metric_for_best_model`` (``eval_``
    prefixed as the Trainer prefixes it), its ``eval_loss``, its other metrics except ``epoch`` and
    timings/throughput (:data:`TIMING_SUFFIXES`), then ``train_loss``.

    >>> headline_metrics({"eval_loss": 0.4, "eval_runtime": 2.0, "eval_f1": 0.8, "epoch": 1.0},
    ...                  {"train_loss": 0.5, "train_runtime": 9.0}, "f1")
    {'eval_f1': 0.8, 'eval_loss': 0.4, 'train_loss': 0.5}
    """
    out: dict[str, float | int] = {}
    first = []
    if metric_for_best_model:
        best = metric_for_best_model
        first.append(best if best.startswith("eval_") else f"eval_{best}")
    first.append("eval_loss")
    for k in first:
        if k in last_eval:
            out[k] = last_eval[k]
    for k, v in last_eval.items():
        if k not in out and k != "epoch" and not k.endswith(TIMING_SUFFIXES):
            out[k] = v
    if "train_loss" in train_summary:
        out["train_loss"] = train_summary["train_loss"]
    return out


def _scalars(values: Mapping[str, Any]) -> dict[str, float | int]:
    """The numbers of a Trainer log or metrics dict, as scalars (``step``/``time`` are the record's own)."""
    return {k: v for k, v in numbers(values).items() if k not in ("step", "time")}


def checkpoint_files(folder: Path) -> list[Path]:
    """The weight files of a Trainer checkpoint folder (the largest file when none matches)."""
    found: list[Path] = []
    for pattern in WEIGHT_PATTERNS:
        for p in sorted(folder.glob(pattern)):
            if p.is_file() and p.name not in NOT_WEIGHTS and p not in found:
                found.append(p)
    if found:
        return found
    files = [p for p in folder.iterdir() if p.is_file() and p.name not in NOT_WEIGHTS]
    return [max(files, key=lambda p: p.stat().st_size)] if files else []


class LedgerCallback(TrainerCallback):
    """Log a ``transformers.Trainer`` run into a ledger (see the module docstring).

    ``name`` defaults to ``args.run_name``, else the output folder's name. ``ledger`` is a path, a
    :class:`~labledger.store.ledger.Ledger` or None (``$LABLEDGER_DIR``, else ``./.labledger``).
    ``samples`` (with :class:`LedgerTrainer`) logs every microbatch's samples; ``tokenizer``
    overrides the Trainer's ``processing_class`` for decoding inputs. With
    ``finish_on_train_end=False`` the run stays open after training (for ``trainer.evaluate()``
    afterwards) until :meth:`finish` or the end of a ``with`` block.

    >>> import tempfile
    >>> cb = LedgerCallback("tiny", ledger=tempfile.mkdtemp())
    >>> cb.run is None      # the run starts at on_train_begin, on the main process only
    True
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        group: str | None = None,
        tags: Iterable[str] = (),
        config: Mapping[str, Any] | None = None,
        notes: str | None = None,
        ledger: Ledger | str | os.PathLike[str] | None = None,
        samples: bool = True,
        tokenizer: Any = None,
        finish_on_train_end: bool = True,
        init: str | os.PathLike[str] | None = None,
    ):
        self.name = name
        self.group = group
        self.tags = tuple(tags)
        self.extra_config = dict(config or {})
        self.notes = notes
        self.ledger = ledger
        self.samples = samples
        self.tokenizer = tokenizer
        self.finish_on_train_end = finish_on_train_end
        #: What the run starts from (lineage, #15); else resume_from_checkpoint, else the model's name_or_path.
        self.init = init
        self.resume_from: str | os.PathLike[str] | None = None
        self.run: Run | None = None
        self._decoder: Any = None
        self._id2label: dict[int, str] = {}
        self._microbatch = 0
        self._examples = 0
        self._last_logged_step = 0
        self._last_eval: dict[str, float | int] = {}
        self._train_summary: dict[str, float | int] = {}
        self._warned = False
        self._interval_ce: list[float] = []
        self._ratio_noted = False
        #: Facts about the Trainer's loss handling, set by LedgerTrainer (recorded in the config).
        self.trainer_facts: dict[str, Any] = {}

    # -- state ------------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """True while this process holds an open run."""
        return self.run is not None and self.run.status == "running"

    def _open(self) -> bool:
        if self.active:
            return True
        if self.run is not None and not self._warned:
            self._warned = True
            warnings.warn(
                f"labledger: run {self.run.id} is {self.run.status}; Trainer events after it "
                "ended are not logged (pass finish_on_train_end=False to keep it open)",
                stacklevel=3,
            )
        return False

    # -- lifecycle --------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if not state.is_world_process_zero or self.active:
            return
        self._decoder = self.tokenizer if self.tokenizer is not None else processing_class
        config: dict[str, Any] = {"training_args": jsonable(args.to_dict())}
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_dict"):
            config["model"] = jsonable(model_config.to_dict())
            id2label = getattr(model_config, "id2label", None) or {}
            self._id2label = {int(k): str(v) for k, v in id2label.items()}
        if model is not None:
            params = list(model.parameters())
            config["model_class"] = type(model).__name__
            config["parameters"] = int(sum(p.numel() for p in params))
            config["trainable_parameters"] = int(sum(p.numel() for p in params if p.requires_grad))
        ga = int(args.gradient_accumulation_steps)
        config.update(
            {
                "world_size": int(args.world_size),
                "gradient_accumulation_steps": ga,
                "per_device_train_batch_size": int(args.per_device_train_batch_size),
                "effective_batch_size": int(args.per_device_train_batch_size) * ga * int(args.world_size),
                "max_steps": int(state.max_steps),
                "logging_steps": state.logging_steps,
                "loss_reporting": LOSS_REPORTING,
                **({"trainer": self.trainer_facts} if self.trainer_facts else {}),
                "batch_records": (
                    "process 0's microbatches only (examples_seen counts that process's samples)"
                    if args.world_size > 1
                    else "every microbatch"
                ),
            }
        )
        config.update(self.extra_config)
        defaults: dict[str, Any] = {}
        if isinstance(config.get("training_args"), dict):
            found = changed_defaults(config["training_args"], training_args_defaults(args))
            if found is not None:
                defaults["training_args"] = found
        if isinstance(config.get("model"), dict) and model_config is not None:
            found = changed_defaults(config["model"], model_config_defaults(model_config))
            if found is not None:
                defaults["model"] = found
        name = self.name or getattr(args, "run_name", None) or Path(args.output_dir or "trainer").name
        self.run = Run(
            name,
            group=self.group,
            tags=self.tags,
            config=config,
            notes=self.notes,
            ledger=self.ledger,
            extra_meta={"config_defaults": defaults} if defaults else None,
        )
        init = (
            self.init
            or self.resume_from
            or getattr(args, "resume_from_checkpoint", None)
            or getattr(model, "name_or_path", None)
        )
        if init:  # a hub id stays text; a local folder or file is hashed and linked by sha256
            self.run.set_init(init, missing_as_name=True)
        self._microbatch = self._examples = self._last_logged_step = 0
        self._last_eval, self._train_summary, self._warned = {}, {}, False
        self._interval_ce, self._ratio_noted = [], False

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or not self._open():
            return
        if any(k.endswith("_runtime") and k != "train_runtime" for k in logs):
            return  # an evaluation's metrics: logged by on_evaluate
        step = int(state.global_step)
        if "train_runtime" in logs:
            kind = "summary"
        elif any(k in logs for k in ("loss", "learning_rate", "grad_norm")):
            kind = "train"
        else:
            kind = "log"
        entry: dict[str, Any] = {"kind": kind, "step": step, **jsonable(dict(logs))}
        if kind == "train":
            ga = int(args.gradient_accumulation_steps)
            entry["gradient_accumulation_steps"] = ga
            entry["interval_steps"] = step - self._last_logged_step
            self._last_logged_step = step
            if self._interval_ce:
                mean = float(np.mean(self._interval_ce))
                entry["microbatch_mean_loss"] = mean
                entry["microbatches"] = len(self._interval_ce)
                self._note_loss_scale(entry.get("loss"), mean, ga)
            self._interval_ce = []
        elif kind == "summary":
            self._train_summary = numbers(logs)
        if kind != "summary":
            scalars = _scalars(logs)
            if scalars:
                self.run.log(step, **scalars)
        self.run.log_history(entry)

    def _note_loss_scale(self, reported: Any, mean: float, ga: int) -> None:
        """Say once, in a note, when the Trainer's loss is ~GA times the microbatches' mean loss."""
        if self._ratio_noted or ga <= 1 or not isinstance(reported, (int, float)) or mean <= 0:
            return
        ratio = reported / mean
        if abs(ratio - ga) <= 0.05 * ga:
            self._ratio_noted = True
            why = (
                " (the model accepts loss kwargs, so the Trainer took its loss as already normalised "
                "over the accumulated batch, but this loss is a per-microbatch mean)"
                if self.trainer_facts.get("model_accepts_loss_kwargs")
                else ""
            )
            self._current().note(
                f"The Trainer's reported loss is {ratio:.2f}x the mean cross-entropy of the interval's "
                f"microbatches, with gradient_accumulation_steps = {ga}: it summed each microbatch's loss "
                f"without dividing by the accumulation steps{why}. Compare history 'loss' with "
                "'microbatch_mean_loss'."
            )

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not state.is_world_process_zero or not metrics or not self._open():
            return
        self._last_eval = numbers(metrics)
        scalars = _scalars(metrics)
        if scalars:
            self.run.log(int(state.global_step), **scalars)
        self.run.log_history(
            {"kind": "eval", "step": int(state.global_step), "epoch": state.epoch, **jsonable(dict(metrics))}
        )

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        if not state.is_world_process_zero or not metrics or not self._open():
            return
        scalars = _scalars(metrics)
        if scalars:
            self.run.log(int(state.global_step), **scalars)
        self.run.log_history(
            {"kind": "predict", "step": int(state.global_step), "epoch": state.epoch, **jsonable(dict(metrics))}
        )

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not self._open():
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if not folder.is_dir():
            self.run.note(
                f"The Trainer saved at step {state.global_step} but {folder} is not a folder; no checkpoint recorded."
            )
            return
        metrics = dict(self._last_eval)
        if state.epoch is not None:
            metrics["epoch"] = state.epoch
        for f in checkpoint_files(folder):
            # referenced in place: the Trainer owns (and rotates) its checkpoint folders; readers re-verify
            self.run.log_checkpoint(f, step=int(state.global_step), metrics=metrics, copy=False)

    def on_train_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not self.active:
            return
        headline = headline_metrics(self._last_eval, self._train_summary, getattr(args, "metric_for_best_model", None))
        if headline:
            self.run.set_summary(**headline)
        if self.finish_on_train_end:
            self.run.finish("finished")

    def _current(self) -> Run:
        """The open run (the callback's hooks run only after ``on_train_begin`` started it)."""
        if self.run is None:
            raise LedgerError("the labledger run has not started (on_train_begin was not called)")
        return self.run

    # -- ending by hand ---------------------------------------------------------------------------
    def finish(self, status: str = "finished", *, error: str | None = None) -> None:
        """End the run (``finished``, ``failed`` or ``killed``) if it is still open."""
        if self.active:
            self._current().finish(status, error=error)

    def abort(self, exc: BaseException) -> None:
        """Mark the run ``failed`` (``killed`` for Ctrl-C) with the exception's summary."""
        if not self.active:
            return
        if isinstance(exc, KeyboardInterrupt):
            self._current().finish("killed", error="KeyboardInterrupt")
        else:
            self._current().finish("failed", error=f"{type(exc).__name__}: {exc}")

    def __enter__(self) -> LedgerCallback:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None:
            self.abort(exc)
        else:
            self.finish("finished")

    # -- microbatches -----------------------------------------------------------------------------
    def log_microbatch(
        self,
        trainer: Any,
        inputs: Mapping[str, Any],
        outputs: Any,
        loss: Any,
        *,
        forward_ms: float | None = None,
        labels: Any = None,
    ) -> None:
        """Log one training microbatch (called by :class:`LedgerTrainer.compute_loss`; call it from your
        own ``compute_loss`` to do the same). Only the main process writes."""
        if not self.active or not trainer.is_world_process_zero():
            return
        import torch

        logits = _logits(outputs)
        if labels is None:
            labels = inputs.get("labels")
        input_ids = inputs.get("input_ids")
        batch_size = _batch_size(inputs, logits)
        self._microbatch += 1
        self._examples += batch_size
        trainer_loss = float(loss.detach().float().mean()) if hasattr(loss, "detach") else float(loss)
        record: dict[str, Any] = {
            "microbatch": self._microbatch,
            "optimizer_step": int(trainer.state.global_step) + 1,
            "examples_seen": self._examples,
            "batch_size": batch_size,
            "loss": trainer_loss,
            "trainer_loss": trainer_loss,
            "epoch": trainer.state.epoch,
        }
        samples = None
        if (
            self.samples
            and logits is not None
            and logits.dim() == 2
            and (labels is None or (hasattr(labels, "dim") and labels.dim() == 1))
        ):
            samples = self._samples(logits, labels, input_ids)
            ces = [s["cross_entropy"] for s in samples if "cross_entropy" in s]
            if ces:
                record["loss"] = float(np.mean(ces))
                self._interval_ce.append(record["loss"])
            record["samples"] = samples
            record["batch_size"] = len(samples)
        record["time"] = time.time()
        record["forward_ms"] = forward_ms
        if logits is not None and logits.is_cuda:
            device = logits.device
            record["gpu_allocated_mib"] = torch.cuda.memory_allocated(device) / 2**20
            record["gpu_peak_allocated_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        else:
            record["gpu_allocated_mib"] = record["gpu_peak_allocated_mib"] = None
        self._current().log_batch(record)

    def _samples(self, logits: Any, labels: Any, input_ids: Any) -> list[dict[str, Any]]:
        import torch

        logp = torch.log_softmax(logits.detach().to(torch.float64), dim=-1).cpu().numpy()
        probs = np.exp(logp)
        k = logp.shape[1]
        names = [self._id2label.get(j, str(j)) for j in range(k)]
        pred = logp.argmax(axis=1).tolist()
        gold = labels.detach().cpu().tolist() if labels is not None else [None] * len(logp)
        texts = self._decode(input_ids, len(logp))
        out = []
        for i, row in enumerate(probs.tolist()):
            s: dict[str, Any] = {
                "input": texts[i],
                "prediction": names[pred[i]],
                "probabilities": dict(zip(names, row)),
            }
            g = gold[i]
            if isinstance(g, int) and 0 <= g < k:
                s["gold"] = names[g]
                s["cross_entropy"] = math.inf if row[g] == 0.0 else float(-logp[i, g])
            out.append(s)
        return out

    def _decode(self, input_ids: Any, n: int) -> list[Any]:
        if input_ids is None:
            return [None] * n
        ids = input_ids.detach().cpu().tolist() if hasattr(input_ids, "detach") else list(input_ids)
        decode = getattr(self._decoder, "batch_decode", None)
        if decode is None:
            return ids
        return list(decode(ids, skip_special_tokens=True))


def _logits(outputs: Any) -> Any:
    if outputs is None:
        return None
    if isinstance(outputs, Mapping) or hasattr(outputs, "keys"):
        if "logits" in outputs:
            return outputs["logits"]
        return None
    if isinstance(outputs, (tuple, list)) and len(outputs) > 1:
        return outputs[1]
    return None


def _batch_size(inputs: Mapping[str, Any], logits: Any) -> int:
    for key in ("input_ids", "labels", "pixel_values", "inputs_embeds"):
        v = inputs.get(key)
        if v is not None and hasattr(v, "shape") and len(v.shape) > 0:
            return int(v.shape[0])
    return int(logits.shape[0]) if logits is not None else 0


class LedgerTrainer(Trainer):
    """A ``Trainer`` that logs every training microbatch with its samples through a
    :class:`LedgerCallback` (the one in ``callbacks``, ``ledger_callback=``, or a default one), and
    marks the run ``failed``/``killed`` when ``train()`` raises.

    Only ``compute_loss`` and ``train`` are extended: each training forward is timed
    (``forward_ms``: the wall time of ``compute_loss``, not of the whole step) and handed with its
    inputs and outputs to :meth:`LedgerCallback.log_microbatch`; evaluation forwards are not logged.
    """

    def __init__(self, *args: Any, ledger_callback: LedgerCallback | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        found = next((c for c in self.callback_handler.callbacks if isinstance(c, LedgerCallback)), None)
        cb = ledger_callback or found or LedgerCallback()
        if cb is not found:
            self.add_callback(cb)
        self.ledger_callback = cb
        cb.trainer_facts = {
            "class": type(self).__name__,
            "model_accepts_loss_kwargs": bool(getattr(self, "model_accepts_loss_kwargs", False)),
            "loss_is_scaled_for_ga": getattr(self, "loss_is_scaled_for_ga", None),
        }

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        cb = self.ledger_callback
        if not model.training or not cb.active:
            return super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )
        seen = dict(inputs)  # compute_loss may pop "labels" from inputs
        t0 = time.perf_counter()
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        forward_ms = (time.perf_counter() - t0) * 1000.0
        cb.log_microbatch(self, seen, outputs, loss, forward_ms=forward_ms, labels=seen.get("labels"))
        return (loss, outputs) if return_outputs else loss

    def train(self, *args: Any, **kwargs: Any):
        resume = kwargs.get("resume_from_checkpoint", args[0] if args else None)
        if resume is True:
            from transformers.trainer_utils import get_last_checkpoint

            resume = get_last_checkpoint(self.args.output_dir)
        if isinstance(resume, (str, os.PathLike)):
            self.ledger_callback.resume_from = resume
        try:
            return super().train(*args, **kwargs)
        except BaseException as exc:
            self.ledger_callback.abort(exc)
            raise


__all__ = [
    "LedgerCallback",
    "LedgerTrainer",
    "changed_defaults",
    "checkpoint_files",
    "headline_metrics",
    "model_config_defaults",
    "training_args_defaults",
]
