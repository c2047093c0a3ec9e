"""Coverage of the analytic intervals (#19): DeLong (ROC-AUC), the AP delta method, the CLT (log loss,
Brier) and DeLong of a paired AUC difference, at several n, against the known population value.

Population: gold ~ Bernoulli(0.3); score = clip(N(0.35 + 0.3 gold, 0.2), 0.001, 0.999), rounded
to 3 digits (ties). (Clipped at 0 and 1 instead, a few items per thousand get a log loss of 36 --
-ln of the clipping eps -- and no interval of the mean covers at n = 1,000: 0.75 in this script.) The true values are those of a 2,000,000-item sample (their own SE < 0.0005).
R datasets per cell; the Monte Carlo SE of a coverage near 0.95 is sqrt(0.95 * 0.05 / R).

    python bench/analytic_coverage.py --reps 1000          # ~1 minute on 2 cores
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from labledger.metrics import prepare
from labledger.metrics.analytic import analytic_interval, paired_analytic


def sample(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = rng.random(n) < 0.3
    s = np.clip(rng.normal(0.35 + 0.3 * y, 0.2), 0.001, 0.999).round(3)
    s2 = np.clip(s + rng.normal(0, 0.15, n), 0.001, 0.999).round(3)  # a second, worse model on the same items
    return y.astype(int), s, s2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--sizes", default="100,300,1000,10000")
    args = ap.parse_args()
    metrics = ("roc_auc", "average_precision", "log_loss", "brier")
    y, s, s2 = sample(np.random.default_rng(12345), 2_000_000)
    truth = {m: prepare(m, gold=y, score=s).value() for m in metrics}
    truth["roc_auc A-B"] = truth["roc_auc"] - prepare("roc_auc", gold=y, score=s2).value()
    t0, c0 = time.perf_counter(), time.process_time()
    print(
        f"R = {args.reps} per cell; MC se at 0.95: {math.sqrt(0.95 * 0.05 / args.reps):.4f}; load {os.getloadavg()[0]:.1f}"
    )
    print("| n | " + " | ".join(truth) + " |")
    print("|---:|" + "---:|" * len(truth))
    for n in (int(x) for x in args.sizes.split(",")):
        rng = np.random.default_rng(n)
        hits = dict.fromkeys(truth, 0)
        for _ in range(args.reps):
            yy, ss, ss2 = sample(rng, n)
            for m in metrics:
                iv = analytic_interval(prepare(m, gold=yy, score=ss))
                hits[m] += iv.low is not None and iv.low <= truth[m] <= iv.high
            d = paired_analytic(prepare("roc_auc", gold=yy, score=ss), prepare("roc_auc", gold=yy, score=ss2))
            hits["roc_auc A-B"] += d.low is not None and d.low <= truth["roc_auc A-B"] <= d.high
        print(f"| {n:,} | " + " | ".join(f"{hits[k] / args.reps:.3f}" for k in truth) + " |")
    print(f"wall {time.perf_counter() - t0:.1f} s, CPU {time.process_time() - c0:.1f} s, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
