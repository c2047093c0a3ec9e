"""The demo's training loop: microbatches of 16, gradient accumulation 8, everything logged.

Every microbatch goes to ``run.log_batch`` with every sample (its input, gold, prediction,
probabilities keyed by action and cross-entropy); every optimizer step to ``run.log``; the trainer
history at logging intervals and a validation after every epoch to ``run.log_history``; a
checkpoint after every epoch to ``run.log_checkpoint``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from labledger.demo.model import StepperMLP, encode_inputs, log_softmax64, predict_all_states
from labledger.demo.task import (
    ACTIONS,
    SOURCE,
    STATES,
    DigitsData,
    RowPool,
    gold_index,
    image_ref,
    replay_episode,
    state_text,
)

_STATE_TEXT = [state_text(c) for c in STATES]


@dataclass
class TrainConfig:
    """Settings of one demo training run (all of it goes into the run's config)."""

    hidden: int = 64
    depth: int = 2
    epochs: int = 3
    microbatch_size: int = 16
    grad_accum: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 10
    max_grad_norm: float = 1.0
    logging_steps: int = 10
    seed: int = 0
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict."""
        return asdict(self)


@dataclass
class TrainResult:
    """What a training run did; the model is the one after the last epoch."""

    model: StepperMLP
    optimizer_steps: int
    microbatches: int
    examples_seen: int
    epochs: int
    pool_size: int
    validation: list[dict] = field(default_factory=list)
    checkpoints: list[dict] = field(default_factory=list)
    elapsed_s: float = 0.0


def lr_at(step: int, *, total_steps: int, config: TrainConfig) -> float:
    """Learning rate for 1-based optimizer ``step``: linear warmup, then cosine decay to 10%.

    >>> cfg = TrainConfig(lr=1.0, warmup_steps=2)
    >>> [round(lr_at(s, total_steps=4, config=cfg), 3) for s in (1, 2, 4)]
    [0.5, 1.0, 0.1]
    """
    if step <= config.warmup_steps:
        return config.lr * step / max(1, config.warmup_steps)
    span = max(1, total_steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    return config.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def evaluate_states(
    model: nn.Module, data: DigitsData, image_ids: np.ndarray, *, device: str = "cpu"
) -> dict[str, float]:
    """Validation metrics over every (image, current state) of ``image_ids``.

    Returns ``eval_loss`` (mean cross-entropy), ``eval_accuracy``, ``eval_macro_f1`` (scikit-learn,
    over the three actions) and ``eval_episode_success_rate`` (episodes replayed from every start).
    """
    from sklearn.metrics import f1_score

    logits = predict_all_states(model, data.images[image_ids], device=device)
    logp = log_softmax64(logits)
    targets = data.targets[image_ids]
    k = len(STATES)
    gold = gold_index(np.repeat(targets, k), np.tile(np.arange(k), len(targets)))
    flat = logp.reshape(-1, len(ACTIONS))
    pred = flat.argmax(axis=1)
    episodes_ok = 0
    pred_labels = np.asarray(ACTIONS)[pred.reshape(len(targets), len(STATES))].tolist()
    for row, target in zip(pred_labels, targets.tolist()):
        episodes_ok += sum(replay_episode(row, target=target, start=s)["success"] for s in STATES)
    return {
        "eval_loss": float(-flat[np.arange(len(gold)), gold].mean()),
        "eval_accuracy": float((pred == gold).mean()),
        "eval_macro_f1": float(
            f1_score(gold, pred, labels=list(range(len(ACTIONS))), average="macro", zero_division=0)
        ),
        "eval_episode_success_rate": episodes_ok / (len(targets) * len(STATES)),
        "eval_images": len(targets),
    }


def _memory_mib(device: str) -> tuple[float, float]:
    if device.startswith("cuda") and torch.cuda.is_available():
        return (torch.cuda.memory_allocated() / 2**20, torch.cuda.max_memory_allocated() / 2**20)
    return 0.0, 0.0


def train(
    run: Any,
    data: DigitsData,
    pool: RowPool,
    validation_ids: np.ndarray,
    config: TrainConfig,
    *,
    checkpoint_dir: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train a :class:`StepperMLP` on ``pool`` and log everything into ``run``.

    Each epoch shuffles the pool and uses as many whole optimizer steps
    (``microbatch_size * grad_accum`` rows) as fit; the remainder of that epoch's shuffle is left
    out, so every microbatch has ``microbatch_size`` samples and every optimizer step
    ``grad_accum`` microbatches. ``epoch`` in the history is row-pool exposure
    (``examples_seen / len(pool)``), not a count of distinct images.
    """
    started = time.perf_counter()
    device = config.device
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = StepperMLP(hidden=config.hidden, depth=config.depth).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    mb, accum = config.microbatch_size, config.grad_accum
    steps_per_epoch = len(pool) // (mb * accum)
    if steps_per_epoch == 0:
        raise ValueError(f"the row pool has {len(pool)} rows; one optimizer step needs {mb * accum}")
    total_steps = steps_per_epoch * config.epochs
    checkpoint_dir = Path(checkpoint_dir if checkpoint_dir is not None else run.dir / "checkpoints")
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    images = data.images
    pool_ids, pool_cur, pool_tgt, pool_gold = pool.image_ids, pool.currents, pool.targets, pool.gold
    gold_t = torch.from_numpy(pool_gold)
    result = TrainResult(
        model=model, optimizer_steps=0, microbatches=0, examples_seen=0, epochs=config.epochs, pool_size=len(pool)
    )
    step = microbatch = seen = 0
    interval_losses: list[float] = []
    model.train()
    for epoch in range(1, config.epochs + 1):
        order = rng.permutation(len(pool))[: steps_per_epoch * mb * accum]
        for rows in order.reshape(steps_per_epoch, accum, mb):
            step += 1
            lr = lr_at(step, total_steps=total_steps, config=config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            step_losses = []
            for idx in rows:
                microbatch += 1
                x = encode_inputs(images[pool_ids[idx]], pool_cur[idx], device=device)
                y = gold_t[idx].to(device)
                t0 = time.perf_counter()
                logits = model(x)
                loss = loss_fn(logits, y)
                forward_ms = (time.perf_counter() - t0) * 1000.0
                (loss / accum).backward()
                seen += len(idx)
                loss_value = float(loss.item())
                step_losses.append(loss_value)
                run.log_batch(
                    _batch_record(
                        microbatch=microbatch,
                        step=step,
                        seen=seen,
                        loss=loss_value,
                        logits=logits.detach().cpu().numpy(),
                        rows=idx,
                        image_ids=pool_ids[idx],
                        currents=pool_cur[idx],
                        targets=pool_tgt[idx],
                        gold=pool_gold[idx],
                        forward_ms=forward_ms,
                        device=device,
                    )
                )
            grad_norm = float(nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step_loss = sum(step_losses) / len(step_losses)
            interval_losses.extend(step_losses)
            run.log(step, loss=step_loss, lr=lr, grad_norm=grad_norm)
            if step % config.logging_steps == 0 or step == total_steps:
                run.log_history(
                    {
                        "kind": "train",
                        "step": step,
                        "epoch": seen / len(pool),
                        "loss": sum(interval_losses) / len(interval_losses),
                        "grad_norm": grad_norm,
                        "learning_rate": lr,
                        "examples_seen": seen,
                        "microbatches": len(interval_losses),
                    }
                )
                interval_losses = []
        t0 = time.perf_counter()
        metrics = evaluate_states(model, data, validation_ids, device=device)
        metrics["eval_runtime_s"] = time.perf_counter() - t0
        entry = {"kind": "eval", "step": step, "epoch": seen / len(pool), "epoch_index": epoch, **metrics}
        run.log_history(entry)
        result.validation.append(entry)
        path = checkpoint_dir / f"epoch{epoch:02d}-step{step:05d}.pt"
        torch.save(model.state_dict(), path)
        result.checkpoints.append(run.log_checkpoint(path, step=step, metrics={"epoch": epoch, **metrics}, copy=False))
        if on_progress is not None:
            on_progress(f"epoch {epoch}/{config.epochs}: step {step}, val accuracy {metrics['eval_accuracy']:.3f}")
    result.optimizer_steps, result.microbatches, result.examples_seen = step, microbatch, seen
    result.elapsed_s = time.perf_counter() - started
    model.eval()
    return result


def _batch_record(
    *,
    microbatch: int,
    step: int,
    seen: int,
    loss: float,
    logits: np.ndarray,
    rows: np.ndarray,
    image_ids: np.ndarray,
    currents: np.ndarray,
    targets: np.ndarray,
    gold: np.ndarray,
    forward_ms: float,
    device: str,
) -> dict[str, Any]:
    """One ``batches.jsonl`` record; every number in it comes from the same forward pass."""
    logp = log_softmax64(logits)
    probs = np.exp(logp)
    n = len(rows)
    ce = (-logp[np.arange(n), gold]).tolist()
    pred = logp.argmax(axis=1).tolist()
    p_list = probs.tolist()
    a0, a1, a2 = ACTIONS
    samples = []
    for i, (row, image_id, cur, tgt, g) in enumerate(
        zip(rows.tolist(), image_ids.tolist(), currents.tolist(), targets.tolist(), gold.tolist())
    ):
        p = p_list[i]
        samples.append(
            {
                "source": SOURCE,
                "dataset": "digits-train",
                "image_id": image_id,
                "current": cur,
                "training_row": row,
                "target_digit": tgt,
                "input": {"image": image_ref(image_id), "state": _STATE_TEXT[cur]},
                "gold": ACTIONS[g],
                "prediction": ACTIONS[pred[i]],
                "probabilities": {a0: p[0], a1: p[1], a2: p[2]},
                "cross_entropy": ce[i],
            }
        )
    allocated, peak = _memory_mib(device)
    return {
        "microbatch": microbatch,
        "optimizer_step": step,
        "examples_seen": seen,
        "batch_size": n,
        "loss": loss,
        "samples": samples,
        "time": time.time(),
        "forward_ms": forward_ms,
        "gpu_allocated_mib": allocated,
        "gpu_peak_allocated_mib": peak,
    }
