from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SEEDS = SHARED / "seeds"
#: Screenshots and other artefacts that CI keeps.
ARTIFACTS = Path(os.environ.get("LABLEDGER_TEST_ARTIFACTS", REPO / "test-artifacts"))
# The columnar cache (#19) of the files tests read goes to a folder of this session, not ~/.cache,
# removed when the session's process ends (each xdist worker made one and left it in /tmp).
if "LABLEDGER_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["LABLEDGER_CACHE_DIR"] = _CACHE_DIR = tempfile.mkdtemp(prefix="labledger-cache-")
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
# Tables are laid out to the CLI's own default width whatever the runner sets (pytest-xdist's
# workers set COLUMNS=80); a test of another width passes COLUMNS to CliRunner itself.
os.environ["COLUMNS"] = "150"

#: Debian's Chromium, driven headless by Playwright with the flags this machine needs.
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module (Playwright gives it a fresh profile), closed after."""
    if sync_playwright is None or not CHROMIUM.exists():
        pytest.skip("no browser: playwright or /usr/bin/chromium is missing")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def make_batch(
    mb: int,
    *,
    n: int = 4,
    step: int | None = None,
    text_len: int = 40,
    labels=("-1", "0", "+1"),
    rng: random.Random | None = None,
) -> dict:
    """A valid microbatch record in the seed-004 schema, with n samples."""
    rng = rng or random.Random(mb)
    samples = []
    for i in range(n):
        raw = [rng.random() + 0.05 for _ in labels]
        total = sum(raw)
        probs = {lab: r / total for lab, r in zip(labels, raw)}
        gold = labels[rng.randrange(len(labels))]
        samples.append(
            {
                "input": {"text": "x" * text_len, "image": f"images/{mb}-{i}.png"},
                "gold": gold,
                "prediction": max(probs, key=probs.get),
                "probabilities": probs,
                "cross_entropy": -math.log(probs[gold]),
                "source": "test",
                "training_row": mb * n + i,
            }
        )
    return {
        "microbatch": mb,
        "optimizer_step": step if step is not None else (mb - 1) // 8 + 1,
        "examples_seen": mb * n,
        "batch_size": n,
        "loss": 0.5,
        "samples": samples,
        "forward_ms": 1.5,
        "gpu_allocated_mib": 0.0,
        "gpu_peak_allocated_mib": 0.0,
    }


@pytest.fixture
def ledger_dir(tmp_path):
    return tmp_path / "ledger"


#: Tests that take more than a few seconds on a 2-core machine (measured with --durations), marked
#: ``slow`` here so that the test files stay as they are: ``pytest -m "not slow"`` skips them.
#: Entries are node ids without parameters (every parametrisation of the test is marked); a file
#: name alone marks every test of that file that uses one of ``SLOW_FIXTURES``.
SLOW = {
    "tests/test_calibrate.py::test_fitted_multiplier_recovers_a_known_prior_shift",
    "tests/test_demo.py::test_cli_demo",
    "tests/test_import.py::test_mlflow_store_runs_params_metrics_tags",
}
#: Module fixtures that train a model (every test using one is slow: the first pays for it).
SLOW_FIXTURES = {"tests/test_demo.py": {"demo", "views", "batches"}}
#: Docstring examples of modules whose imports alone take seconds (torch, transformers, lightning).
SLOW_DOCTESTS = ("labledger.demo", "labledger.integrations")


def pytest_collection_modifyitems(config, items):
    from labledger import accelerators

    reference_only = not accelerators.enabled()
    for item in items:
        if reference_only and item.get_closest_marker("accelerator") is not None:
            item.add_marker(pytest.mark.skip(reason="an accelerator's own test; LABLEDGER_FAST=0 turns them off"))
        path, _, name = item.nodeid.partition("::")
        base = f"{path}::{name.split('[')[0]}"
        slow = base in SLOW or bool(SLOW_FIXTURES.get(path, set()) & set(getattr(item, "fixturenames", ())))
        if base == "tests/test_docs.py::test_docstring_examples_run":
            module = item.callspec.params["module"]
            slow = module.startswith(SLOW_DOCTESTS)
        if slow:
            item.add_marker(pytest.mark.slow)
