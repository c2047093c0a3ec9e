"""Bench: the 37-threshold sweep with per-slice recall vs a loop of scikit-learn calls (issue 3).

What users do today, for each threshold t of 0.05:0.95:0.025: ``pred = score >= t``, then
``accuracy_score``, ``f1_score``, ``recall_score`` for each class and for each slice value, and
``roc_auc_score`` once. ``labledger.metrics.sweep.threshold_sweep`` computes all of it from one
sort. Data: n binary predictions (P(positive) float64, gold int8), two slice fields of two values
each (int8 codes). Prints a Markdown table: times, speed-up, the largest absolute difference over
every number, and the sweep's peak memory (tracemalloc) against 3x the input arrays.

    python bench/sweep.py                      # 1M and 10M
    python bench/sweep.py --sizes 100000 --repeat 1
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # bench/logging.py (the logging bench) would shadow the standard library's

import argparse
import os
import platform
import time
import tracemalloc

import numpy as np
import sklearn
from sklearn.metrics import accuracy_score, f1_score, recall_score, roc_auc_score

from labledger.metrics.sweep import threshold_sweep

GRID = "0.05:0.95:0.025"
SLICES = {"length": ["long", "short"], "source": ["real", "synthetic"]}


def make_data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    gold = (rng.random(n) < 0.4).astype(np.int8)
    score = np.clip(np.where(gold == 1, rng.beta(5, 2, n), rng.beta(2, 5, n)), 0, 1)
    slices = {name: (rng.integers(0, len(values), n).astype(np.int8), values) for name, values in SLICES.items()}
    return gold, score, slices


def gates():
    return [f"recall[{name}={v}]>=0.5" for name, values in SLICES.items() for v in values]


def run_labledger(gold, score, slices):
    return threshold_sweep(
        gold=gold, score=score, positive=1, negative=0, thresholds=GRID, slices=slices, gates=gates()
    )


def run_sklearn(gold, score, slices, thresholds):
    masks = {
        f"recall[{name}={v}]": codes == j for name, (codes, values) in slices.items() for j, v in enumerate(values)
    }
    cols: dict[str, list[float]] = {k: [] for k in ("accuracy", "f1", "0_recall", "1_recall", *masks)}
    auc = roc_auc_score(gold, score)
    for t in thresholds:
        pred = (score >= t).astype(np.int8)
        cols["accuracy"].append(accuracy_score(gold, pred))
        cols["f1"].append(f1_score(gold, pred))
        cols["1_recall"].append(recall_score(gold, pred, pos_label=1))
        cols["0_recall"].append(recall_score(gold, pred, pos_label=0))
        for name, m in masks.items():
            cols[name].append(recall_score(gold[m], pred[m]))
    cols["roc_auc"] = [auc] * len(thresholds)
    return cols


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_peak_delta(fn) -> int | None:
    """Bytes by which the process's peak RSS rises above its RSS while ``fn`` runs (Linux)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    except OSError:
        return None
    before = _status_kib("VmRSS")
    fn()
    peak = _status_kib("VmHWM")
    return None if before is None or peak is None else (peak - before) * 1024


def bench(n: int, repeat: int) -> dict:
    gold, score, slices = make_data(n)
    input_bytes = score.nbytes + gold.nbytes + sum(c.nbytes for c, _ in slices.values())
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        report = run_labledger(gold, score, slices)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    run_labledger(gold, score, slices)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = rss_peak_delta(lambda: run_labledger(gold, score, slices))
    t0 = time.perf_counter()
    ref = run_sklearn(gold, score, slices, report.thresholds)
    t_sklearn = time.perf_counter() - t0
    diff = max(float(np.max(np.abs(np.asarray(report.columns[k]) - np.asarray(v)))) for k, v in ref.items())
    return {
        "n": n,
        "ours": min(times),
        "sklearn": t_sklearn,
        "diff": diff,
        "peak": peak,
        "rss": rss,
        "input": input_bytes,
        "thresholds": report.thresholds.size,
        "numbers": sum(len(v) for v in ref.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--repeat", type=int, default=3, help="Best of R runs of the sweep.")
    args = ap.parse_args()
    rows = [bench(int(s), args.repeat) for s in args.sizes.split(",")]
    mib = 2**20
    print(
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"scikit-learn {sklearn.__version__}. Sweep: best of {args.repeat}; sklearn loop: once."
    )
    print()
    print(
        "| n | thresholds | numbers compared | labledger sweep (s) | sklearn loop (s) | speed-up "
        "| max abs diff | peak memory, tracemalloc (MiB) | peak RSS rise (MiB) "
        "| 3x input arrays (MiB) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['thresholds']} | {r['numbers']:,} | {r['ours']:.3f} | "
            f"{r['sklearn']:.1f} | {r['sklearn'] / r['ours']:.0f}x | {r['diff']:.1e} | "
            f"{r['peak'] / mib:.0f} | "
            f"{'-' if r['rss'] is None else format(r['rss'] / mib, '.0f')} | "
            f"{3 * r['input'] / mib:.0f} |"
        )


if __name__ == "__main__":
    main()
