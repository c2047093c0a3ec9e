"""``run_demo``: the seed-004 experiment trained for real, two runs in one group, in one ledger.

Later steps (evaluation with confidence intervals, calibration, the static site) hook in through
:class:`DemoSummary`: it names the ledger, the group and every run id, and each run stores its full
test as ``results("full_test")`` with probabilities and logits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labledger.demo.png import digit_png
from labledger.demo.task import (
    ACTIONS,
    RESULTS_NAME,
    SOURCE,
    TASK_NAME,
    VALIDATION_NAME,
    DigitsData,
    RowPool,
    image_ref,
)

DEMO_GROUP = "digits-step"
#: Seed of the held-out image split: fixed, and shared by both runs so their tests are paired.
SPLIT_SEED = 0


@dataclass(frozen=True)
class DemoPlan:
    """Sizes of a demo: how many images per split and epochs (``quick`` is for tests)."""

    epochs: int
    max_train: int | None
    max_validation: int | None
    max_test: int | None
    hiddens: tuple[int, ...] = (32, 128)

    @classmethod
    def for_mode(cls, quick: bool) -> DemoPlan:
        """The full plan (every image, 8 epochs) or the quick one (a stratified subset)."""
        if quick:
            return cls(epochs=8, max_train=400, max_validation=60, max_test=100)
        return cls(epochs=8, max_train=None, max_validation=None, max_test=None)


@dataclass
class DemoRun:
    """Where one demo run is and what it did."""

    id: str
    name: str
    dir: Path
    hidden: int
    seed: int
    optimizer_steps: int
    microbatches: int
    examples_seen: int
    epochs: int
    pool_size: int
    test_images: int
    test_accuracy: float
    episode_success_rate: float
    mean_extra_moves: float | None
    latency_ms_per_image: float
    latency_p50_ms: float
    validation_accuracy: float
    checkpoints: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dir"] = str(self.dir)
        return d


@dataclass
class DemoSummary:
    """What :func:`run_demo` made: the ledger, the group and its runs (ids, folders, headline)."""

    ledger: Path
    group: str
    quick: bool
    seed: int
    runs: list[DemoRun]
    elapsed_s: float
    split: dict[str, int]
    #: Name of each run's stored full test (``RunView.results(results_name)``), for later steps.
    results_name: str = RESULTS_NAME
    #: Each run's evaluation document of its full test (``labledger.analysis.evaluation``), by run id.
    evaluations: dict[str, Any] = field(default_factory=dict)
    #: The paired comparison of the two runs' full tests (first run = A, second = B).
    comparison: dict[str, Any] | None = None
    #: ``index.html`` of the static site, when it was built.
    site_index: Path | None = None
    #: Each run's calibration (fitted on validation, reported on the full test), by run id.
    calibrations: dict[str, Any] = field(default_factory=dict)

    @property
    def run_ids(self) -> list[str]:
        """Ids of the runs, in the order they were trained."""
        return [r.id for r in self.runs]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ledger": str(self.ledger),
            "group": self.group,
            "quick": self.quick,
            "seed": self.seed,
            "elapsed_s": self.elapsed_s,
            "split": self.split,
            "results_name": self.results_name,
            "validation_name": VALIDATION_NAME,
            "evaluations": self.evaluations,
            "comparison": self.comparison,
            "site_index": None if self.site_index is None else str(self.site_index),
            "calibrations": self.calibrations,
            "run_ids": self.run_ids,
            "runs": [r.to_dict() for r in self.runs],
        }


def log_digit_images(run: Any, data: DigitsData, image_ids: np.ndarray) -> int:
    """Write ``images/<image_id>.png`` (32x32 grayscale, from the real 8x8 arrays) into a run."""
    n = 0
    for image_id in np.unique(image_ids).tolist():
        run.log_file(image_ref(image_id), digit_png(data.images[image_id]))
        n += 1
    return n


def run_demo(
    ledger: Any = None,
    *,
    quick: bool = False,
    seed: int = 0,
    on_progress: Callable[[str], None] | None = None,
    threads: int | None = 1,
    site: str | Path | None = None,
    resamples: int = 1000,
) -> DemoSummary:
    """Train the digit stepping task twice (two widths, one group) and log it all into ``ledger``.

    ``ledger`` is a path, a :class:`labledger.store.ledger.Ledger` or None (``$LABLEDGER_DIR``,
    else ``./.labledger``). ``seed`` seeds training, the same for both runs, so that only the
    width differs; the held-out split is fixed, so both runs are tested on the same images.
    ``threads`` sets torch's CPU threads while the demo runs (default 1: the microbatches are
    tiny, so more threads only add overhead; None leaves torch's setting). ``on_progress``
    receives one line per stage (the library itself never prints). After training, each run's
    full test is evaluated (accuracy, macro F1, per-class recall with ``resamples`` bootstrap
    95% CIs, also by ``current`` state), the two runs are compared on the same items, and with
    ``site`` (a folder) the static site is built there.

    >>> import tempfile
    >>> summary = run_demo(tempfile.mkdtemp(), quick=True)   # doctest: +SKIP
    >>> len(summary.run_ids)                                  # doctest: +SKIP
    2
    """
    import torch

    import labledger
    from labledger.demo.evaluation import build_demo_site, compare_runs, evaluate_runs
    from labledger.demo.fulltest import log_full_test, results_rows, run_full_test
    from labledger.demo.train import TrainConfig, train
    from labledger.store.ledger import Ledger, default_ledger_path

    started = time.perf_counter()
    say = on_progress or (lambda _msg: None)
    plan = DemoPlan.for_mode(quick)
    owns = not isinstance(ledger, Ledger)
    book = (
        ledger
        if isinstance(ledger, Ledger)
        else Ledger(ledger if ledger is not None else default_ledger_path(), create=True)
    )
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(max(1, threads))
    try:
        data = DigitsData.load()
        caps = {
            k: v
            for k, v in (("train", plan.max_train), ("validation", plan.max_validation), ("test", plan.max_test))
            if v is not None
        }
        split = data.split(seed=SPLIT_SEED, max_per_split=caps)
        pool = RowPool.build(data, split.train, seed=SPLIT_SEED)
        used_ids = np.concatenate([split.train, split.validation, split.test])
        runs = []
        for offset, hidden in enumerate(plan.hiddens):
            config = TrainConfig(hidden=hidden, epochs=plan.epochs, seed=seed)
            name = f"digits-mlp-h{hidden}"
            say(f"run {offset + 1}/{len(plan.hiddens)}: {name} (seed {config.seed})")
            run_config = {
                "task": TASK_NAME,
                "source": SOURCE,
                "actions": list(ACTIONS),
                "model": {
                    "kind": "StepperMLP",
                    "hidden": hidden,
                    "depth": config.depth,
                    "inputs": "pixels/16 (64) + one-hot current (10)",
                },
                "train": config.to_dict(),
                "quick": quick,
                "split": {"seed": split.seed, **split.sizes(), "stratified_by": "digit"},
                "row_pool": {
                    "size": len(pool),
                    "seed": SPLIT_SEED,
                    "natural_counts": pool.natural_counts,
                    "balanced_counts": pool.class_counts(),
                    "oversampling": "each action class up to the largest class",
                },
                "threads": torch.get_num_threads(),
            }
            with labledger.start_run(
                name, group=DEMO_GROUP, tags=("demo", "digits"), config=run_config, ledger=book
            ) as run:
                log_digit_images(run, data, used_ids)
                run.log_file("split.json", _split_json(split))
                trained = train(run, data, pool, split.validation, config, on_progress=say)
                test = run_full_test(trained.model, data, split.test, device=config.device)
                summary = log_full_test(run, test)
                # Validation predictions too (every image x state, with logits): what calibration
                # is fitted on, so that the full test stays untouched for reporting.
                validation = run_full_test(trained.model, data, split.validation, device=config.device)
                run.log_results(VALIDATION_NAME, results_rows(validation))
                analysis = summary["analysis"]
                headline = {
                    "test_accuracy": analysis["action_accuracy"],
                    "episode_success": analysis["episode_success_rate"],
                }
                run.set_summary(**headline)
                run.note(
                    f"Full test on {len(split.test)} held-out images x 10 states: action "
                    f"accuracy {analysis['action_accuracy']:.4f}, episode success "
                    f"{analysis['episode_success_rate']:.4f}. Episodes replay cached "
                    f"per-state predictions."
                )
                runs.append(
                    DemoRun(
                        id=run.id,
                        name=name,
                        dir=Path(run.dir).resolve(),
                        hidden=hidden,
                        seed=config.seed,
                        optimizer_steps=trained.optimizer_steps,
                        microbatches=trained.microbatches,
                        examples_seen=trained.examples_seen,
                        epochs=trained.epochs,
                        pool_size=trained.pool_size,
                        test_images=len(split.test),
                        test_accuracy=analysis["action_accuracy"],
                        episode_success_rate=analysis["episode_success_rate"],
                        mean_extra_moves=analysis["mean_extra_moves"],
                        latency_ms_per_image=summary["latency"]["mean_ms"],
                        latency_p50_ms=summary["latency"]["p50_ms"],
                        validation_accuracy=trained.validation[-1]["eval_accuracy"],
                        checkpoints=[c["path"] for c in trained.checkpoints],
                        elapsed_s=trained.elapsed_s,
                    )
                )
            say(
                f"{name}: test accuracy {analysis['action_accuracy']:.3f}, episode success "
                f"{analysis['episode_success_rate']:.3f}"
            )
        ids = [r.id for r in runs]
        say("evaluating the full tests (bootstrap 95% CIs, by current state) and comparing the runs")
        evaluations = evaluate_runs(book, ids, results=RESULTS_NAME, resamples=resamples, seed=seed)
        comparison = compare_runs(book, ids[0], ids[-1], results=RESULTS_NAME, resamples=resamples, seed=seed)
        say("calibrating: a temperature and a prior multiplier fitted on validation, reported on the full test")
        from labledger.demo.calibration import calibrate_runs

        calibrations = calibrate_runs(
            book, ids, fit_on=VALIDATION_NAME, report_on=RESULTS_NAME, resamples=resamples, seed=seed
        )
        site_index = None
        if site is not None:
            say("building the static site")
            site_index = build_demo_site(book, Path(site), ids).index
        return DemoSummary(
            ledger=Path(book.root).resolve(),
            group=DEMO_GROUP,
            quick=quick,
            seed=seed,
            runs=runs,
            elapsed_s=time.perf_counter() - started,
            split=split.sizes(),
            evaluations=evaluations,
            comparison=comparison,
            calibrations=calibrations,
            site_index=None if site_index is None else Path(site_index).resolve(),
        )
    finally:
        torch.set_num_threads(old_threads)
        if owns:
            book.close()


def _split_json(split: Any) -> bytes:
    import orjson

    return orjson.dumps(
        {
            "seed": split.seed,
            "stratified_by": "digit",
            "train": split.train.tolist(),
            "validation": split.validation.tolist(),
            "test": split.test.tolist(),
        }
    )
