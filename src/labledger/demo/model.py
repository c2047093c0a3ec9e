"""The demo's model: a small MLP over the 8x8 image and a one-hot current number -> 3 logits."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from labledger.demo.task import ACTIONS, STATES


class StepperMLP(nn.Module):
    """``[pixels/16 (64) | one-hot current (10)] -> hidden -> hidden -> logits over ACTIONS``.

    >>> model = StepperMLP(hidden=32)
    >>> model(encode_inputs(np.zeros((2, 8, 8)), np.array([0, 9]))).shape
    torch.Size([2, 3])
    """

    def __init__(self, hidden: int = 64, *, depth: int = 2):
        super().__init__()
        layers: list[nn.Module] = []
        width = 64 + len(STATES)
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, len(ACTIONS)))
        self.net = nn.Sequential(*layers)
        self.hidden, self.depth = hidden, depth

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def encode_inputs(images: np.ndarray, currents: np.ndarray, *, device: str = "cpu") -> torch.Tensor:
    """The model input for a batch: flattened pixels scaled to 0..1 and a one-hot current.

    >>> encode_inputs(np.full((1, 8, 8), 16.0), np.array([3]))[0, 60:].tolist()
    [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    """
    n = len(currents)
    x = np.zeros((n, 64 + len(STATES)), dtype=np.float32)
    x[:, :64] = np.asarray(images, dtype=np.float32).reshape(n, 64) / 16.0
    x[np.arange(n), 64 + np.asarray(currents, dtype=np.int64)] = 1.0
    return torch.from_numpy(x).to(device)


@torch.inference_mode()
def predict_all_states(model: nn.Module, images: np.ndarray, *, device: str = "cpu") -> np.ndarray:
    """Logits for every image and every current state, shape ``(n_images, 10, 3)`` (float32).

    >>> predict_all_states(StepperMLP(hidden=8), np.zeros((4, 8, 8))).shape
    (4, 10, 3)
    """
    n, k = len(images), len(STATES)
    was_training = model.training
    model.eval()
    try:
        x = encode_inputs(np.repeat(np.asarray(images), k, axis=0), np.tile(np.arange(k), n), device=device)
        return model(x).float().cpu().numpy().reshape(n, k, len(ACTIONS))
    finally:
        model.train(was_training)


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities in float64 over the last axis (stable), from logits of any float type.

    >>> np.exp(log_softmax64(np.array([[0.0, 0.0]]))).tolist()
    [[0.5, 0.5]]
    """
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
