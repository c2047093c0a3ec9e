"""Coverage of `labledger noise`'s intervals by simulation (#45).

A setup is items of logit difficulty N(1.5, 1.5^2) and a per-seed logit shift N(0, sd^2); a run is
one Bernoulli draw per item. For each simulated setup, k seeds give the A/A interval and the seed SD
interval; the A/A interval is checked against the difference of two fresh seeds of the same setup,
the seed SD interval against the true SD of a run's accuracy on those items (from 4,000 seeds).

    python bench/noise_coverage.py            # R = 1000 setups per cell (about a minute on 2 cores)
    python bench/noise_coverage.py --r 300    # quicker
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from labledger.analysis.noise import seed_noise


def _runs(rng: np.random.Generator, item: np.ndarray, k: int, sd: float) -> np.ndarray:
    shift = rng.normal(0, sd, k)
    p = 1 / (1 + np.exp(-(item[None, :] + shift[:, None])))
    return (rng.random((k, len(item))) < p).astype(float)


def _cell(hits: int, r: int) -> str:
    c = hits / r
    return f"{c:.3f} ± {np.sqrt(c * (1 - c) / r):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--r", type=int, default=1000, help="setups per cell")
    args = ap.parse_args()
    rng = np.random.default_rng(20261207)
    t0, c0 = time.perf_counter(), time.process_time()
    print(f"## Coverage of `labledger noise`'s nominal 95% intervals (R = {args.r} setups per cell; ± = MC SE)\n")
    print("| seeds | items | seed logit SD | A/A interval covers two new runs | seed SD interval covers the true SD |")
    print("|---:|---:|---:|---:|---:|")
    for k, n, sd in ((4, 300, 0.3), (5, 300, 0.0), (5, 1000, 0.3), (10, 300, 0.6)):
        aa = sd_hits = 0
        for _ in range(args.r):
            item = rng.normal(1.5, 1.5, n)
            res = seed_noise(_runs(rng, item, k, sd))
            a, b = _runs(rng, item, 2, sd).mean(axis=1)
            aa += abs(a - b) <= res["aa"]["half_width"]
            true_sd = float(_runs(rng, item, 4000, sd).mean(axis=1).std(ddof=1))
            sd_hits += res["seed_sd"]["low"] <= true_sd <= res["seed_sd"]["high"]
        print(f"| {k} | {n} | {sd} | {_cell(aa, args.r)} | {_cell(sd_hits, args.r)} |")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\n{wall:.1f} s wall, {cpu:.1f} s CPU, load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
