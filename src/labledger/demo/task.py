"""The digit stepping task of seed 004, on scikit-learn's bundled ``load_digits`` (no download).

Given the 8x8 image of a target digit and a current number 0..9, choose the action ``-1``, ``0`` or
``+1`` that moves the current number toward the digit: gold = sign(target - current).

Everything here is pure numpy (no torch): the data and its held-out split, the class-balanced row
pool that training draws from, and the replay of episodes from cached per-state predictions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

#: Action labels, in the order of the model's logits. Always key by label, never by position.
ACTIONS: tuple[str, ...] = ("-1", "0", "+1")
#: The move each action makes.
ACTION_DELTA: dict[str, int] = {"-1": -1, "0": 0, "+1": 1}
#: The current numbers (states).
STATES: tuple[int, ...] = tuple(range(10))
SOURCE = "sklearn-digits"
TASK_NAME = "digit_step"
#: Name of the result set that holds a run's full test.
RESULTS_NAME = "full_test"
#: Name of the validation predictions (every validation image x state), what calibration fits on.
VALIDATION_NAME = "validation"

#: Why an episode ended.
TERMINATIONS = ("reached_target", "left_range", "stalled", "loop", "step_limit")


def gold_action(target: int, current: int) -> str:
    """The action that moves ``current`` toward ``target``: ``"-1"``, ``"0"`` or ``"+1"``.

    >>> gold_action(7, 3), gold_action(2, 2), gold_action(0, 9)
    ('+1', '0', '-1')
    """
    return ACTIONS[int(np.sign(target - current)) + 1]


def gold_index(targets: np.ndarray, currents: np.ndarray) -> np.ndarray:
    """Vectorised :func:`gold_action` as indices into :data:`ACTIONS`.

    >>> gold_index(np.array([7, 2, 0]), np.array([3, 2, 9])).tolist()
    [2, 1, 0]
    """
    return (np.sign(np.asarray(targets) - np.asarray(currents)) + 1).astype(np.int64)


def state_text(current: int) -> str:
    """The English state shown with the image.

    >>> state_text(3)
    'The current number is 3. Move it toward the digit in the image.'
    """
    return f"The current number is {current}. Move it toward the digit in the image."


def image_ref(image_id: int) -> str:
    """Where a run keeps the PNG of an image (a path under the run's files).

    >>> image_ref(17)
    'images/17.png'
    """
    return f"images/{image_id}.png"


@lru_cache(maxsize=1)
def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.ascontiguousarray(bunch.images, dtype=np.float32)
    images.setflags(write=False)
    targets = np.asarray(bunch.target, dtype=np.int64)
    targets.setflags(write=False)
    return images, targets


@dataclass(frozen=True)
class DigitSplit:
    """Image ids (indices into ``load_digits``) of each split, stratified by digit."""

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray
    seed: int

    def sizes(self) -> dict[str, int]:
        """Number of images per split."""
        return {"train": len(self.train), "validation": len(self.validation), "test": len(self.test)}


@dataclass(frozen=True)
class DigitsData:
    """The 1,797 images of ``load_digits`` (values 0..16) and their digits.

    >>> data = DigitsData.load()
    >>> data.images.shape, int(data.targets[0])
    ((1797, 8, 8), 0)
    """

    images: np.ndarray
    targets: np.ndarray

    @classmethod
    def load(cls) -> DigitsData:
        """Load the bundled dataset (cached; the arrays are read-only)."""
        images, targets = _load_digits()
        return cls(images=images, targets=targets)

    def split(
        self,
        *,
        test_fraction: float = 0.2,
        validation_fraction: float = 0.1,
        seed: int = 0,
        max_per_split: dict[str, int] | None = None,
    ) -> DigitSplit:
        """A held-out split, stratified by digit, fixed by ``seed`` (independent of training seeds).

        ``max_per_split`` (e.g. ``{"train": 300}``) keeps a stratified subset of a split, for quick
        runs; the images kept are still disjoint from the other splits.

        >>> s = DigitsData.load().split(seed=0)
        >>> sorted(s.sizes().items())
        [('test', 359), ('train', 1258), ('validation', 180)]
        """
        rng = np.random.default_rng(seed)
        parts: dict[str, list[np.ndarray]] = {"train": [], "validation": [], "test": []}
        n = len(self.targets)
        n_test, n_val = round(n * test_fraction), round(n * validation_fraction)
        # Largest-remainder allocation per digit, so that each split has exactly the asked size.
        digits = np.unique(self.targets)
        by_digit = {int(d): rng.permutation(np.flatnonzero(self.targets == d)) for d in digits}
        counts = np.array([len(by_digit[int(d)]) for d in digits])
        test_alloc = _allocate(counts, n_test)
        val_alloc = _allocate(counts - test_alloc, n_val)
        for d, nt, nv in zip(digits, test_alloc, val_alloc):
            ids = by_digit[int(d)]
            parts["test"].append(ids[:nt])
            parts["validation"].append(ids[nt : nt + nv])
            parts["train"].append(ids[nt + nv :])
        out = {k: np.sort(np.concatenate(v)) for k, v in parts.items()}
        for name, cap in (max_per_split or {}).items():
            if name not in out:
                raise ValueError(f"unknown split {name!r}; expected train, validation or test")
            out[name] = _stratified_subset(out[name], self.targets, cap, rng)
        return DigitSplit(train=out["train"], validation=out["validation"], test=out["test"], seed=seed)


def _allocate(counts: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` over groups in proportion to ``counts`` (largest remainder)."""
    share = counts * (total / counts.sum())
    alloc = np.floor(share).astype(np.int64)
    order = np.argsort(-(share - alloc), kind="stable")
    alloc[order[: total - alloc.sum()]] += 1
    return np.minimum(alloc, counts)


def _stratified_subset(ids: np.ndarray, targets: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    if cap >= len(ids):
        return ids
    labels = targets[ids]
    digits, counts = np.unique(labels, return_counts=True)
    alloc = _allocate(counts, cap)
    keep = [rng.permutation(ids[labels == d])[:k] for d, k in zip(digits, alloc)]
    return np.sort(np.concatenate(keep))


@dataclass(frozen=True)
class RowPool:
    """The class-balanced training row pool over (image, current) pairs.

    Every (image, current) pair of the training images is a row; the action ``"0"`` is rare (one
    current in ten), so each action class is oversampled up to the size of the largest class:
    first whole copies, then a random remainder without replacement. ``training_row`` in
    ``batches.jsonl`` is an index into these arrays.

    >>> data = DigitsData.load()
    >>> pool = RowPool.build(data, data.split().train[:50], seed=0)
    >>> counts = pool.class_counts()
    >>> counts["-1"] == counts["0"] == counts["+1"]
    True
    """

    image_ids: np.ndarray
    currents: np.ndarray
    targets: np.ndarray
    gold: np.ndarray
    natural_counts: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.image_ids)

    @classmethod
    def build(cls, data: DigitsData, image_ids: np.ndarray, *, seed: int = 0) -> RowPool:
        """The pool of ``image_ids`` (the training images); ``seed`` fixes the oversampling."""
        rng = np.random.default_rng(seed)
        ids = np.repeat(np.asarray(image_ids, dtype=np.int64), len(STATES))
        cur = np.tile(np.asarray(STATES, dtype=np.int64), len(image_ids))
        tgt = data.targets[ids]
        gold = gold_index(tgt, cur)
        per_class = [np.flatnonzero(gold == k) for k in range(len(ACTIONS))]
        natural = {ACTIONS[k]: len(rows) for k, rows in enumerate(per_class)}
        size = max(len(rows) for rows in per_class)
        chosen = []
        for rows in per_class:
            if len(rows) == 0:
                continue
            copies, rest = divmod(size, len(rows))
            chosen.append(np.concatenate([np.tile(rows, copies), rng.choice(rows, size=rest, replace=False)]))
        order = np.sort(np.concatenate(chosen), kind="stable")
        return cls(
            image_ids=ids[order], currents=cur[order], targets=tgt[order], gold=gold[order], natural_counts=natural
        )

    def class_counts(self) -> dict[str, int]:
        """Rows per action in the pool (after oversampling)."""
        counts = np.bincount(self.gold, minlength=len(ACTIONS))
        return {a: int(c) for a, c in zip(ACTIONS, counts)}


# --------------------------------------------------------------------------------------------
# Episodes


def replay_episode(predictions: list[str] | tuple[str, ...], *, target: int, start: int, max_steps: int = 20) -> dict:
    """Replay the cached per-state predictions of one image from ``start`` until it ends.

    ``predictions[s]`` is the action predicted for current state ``s``. The episode succeeds when
    the current number reaches ``target``; it fails when an action leaves 0..9 (``left_range``),
    when the action is ``"0"`` away from the target (``stalled``), when a state repeats
    (``loop``) or after ``max_steps`` moves (``step_limit``). Because the policy is deterministic,
    a repeated state would repeat forever. ``extra_moves`` (success only) counts the moves beyond
    the shortest path ``|target - start|``. Note that under this deterministic replay a successful
    episode never revisits a state, so it moves monotonically and its ``extra_moves`` is always 0;
    extra moves could only appear with a policy that samples from the cached probabilities.

    >>> ep = replay_episode(["+1"] * 5 + ["-1"] * 5, target=4, start=1)
    >>> ep["success"], ep["termination"], len(ep["trace"]), ep["extra_moves"]
    (True, 'reached_target', 3, 0)
    >>> replay_episode(["+1"] * 10, target=4, start=7)["termination"]
    'left_range'
    """
    current, seen = start, {start}
    trace: list[Any] = []
    termination = None
    while termination is None:
        if current == target:
            termination = "reached_target"
            break
        if len(trace) >= max_steps:
            termination = "step_limit"
            break
        action = predictions[current]
        after = current + ACTION_DELTA[action]
        trace.append({"before": current, "action": action, "after": after})
        if after < STATES[0] or after > STATES[-1]:
            termination = "left_range"
        elif after == current:
            termination = "stalled"
        elif after in seen:
            termination = "loop"
        else:
            seen.add(after)
            current = after
    success = termination == "reached_target"
    return {
        "start": start,
        "success": success,
        "termination": termination,
        "steps": len(trace),
        "shortest": abs(target - start),
        "extra_moves": len(trace) - abs(target - start) if success else None,
        "trace": trace,
    }
