"""Coverage, type I error and power of labledger's intervals and tests, by simulation (#16).

Regenerates the tables in docs/metrics.md ("Measured coverage") and the figures behind
``labledger.metrics.stats.FEW_CLUSTER_COVERAGE``. The designs are those of reviews/numbers.md
(tasks 2 and 3), in tests/stats_simulation.py; tests/test_stats_simulation.py runs them at a
smaller R.

    python bench/stats_coverage.py            # R = 1000 datasets per cell (a few minutes on 2 cores)
    python bench/stats_coverage.py --r 300    # quicker
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import stats_simulation as sim


def _cell(c: float, r: int) -> str:
    return f"{c:.3f} ± {sim.mc_se(c, r):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--r", type=int, default=1000, help="datasets per cell")
    args = ap.parse_args()
    r = args.r
    t0, c0 = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(20261201)

    print(f"## Coverage of nominal 95% intervals (R = {r} per cell; ± = Monte Carlo SE)\n")
    print("| data | units | accuracy, bootstrap | accuracy, analytic | macro-F1, percentile | macro-F1, BCa |")
    print("|---|---:|---|---|---|---|")
    for n in (10, 20, 30, 100, 1000):
        gold, pred = sim.iid_classification(rng, r, n)
        acc = sim.coverage("accuracy", gold, pred, sim.TRUE_ACCURACY)
        f1 = sim.coverage("f1", gold, pred, sim.TRUE_MACRO_F1)
        print(
            f"| iid items | {n} items | {_cell(acc['bootstrap'], r)} | {_cell(acc['analytic'], r)} (Wilson) "
            f"| {_cell(f1['bootstrap'], r)} | {_cell(f1['bca'], r)} |"
        )
    for c in (3, 5, 10, 20, 30, 100):
        gold, pred, groups = sim.clustered_classification(rng, r, c)
        acc = sim.coverage("accuracy", gold, pred, sim.TRUE_ACCURACY, groups)
        f1 = sim.coverage("f1", gold, pred, sim.TRUE_MACRO_F1, groups)
        print(
            f"| clusters of 10, group given | {c} clusters | {_cell(acc['bootstrap'], r)} "
            f"| {_cell(acc['analytic'], r)} (CR1, t on C-1) | {_cell(f1['bootstrap'], r)} | {_cell(f1['bca'], r)} |"
        )

    print(f"\n## Paired test under the null (accuracy 0.80 both, rho 0.6; R = {r})\n")
    print("| design | bootstrap p < .05 | clustered McNemar | item McNemar | p and CI agree |")
    print("|---|---|---|---|---|")
    a, b, groups = sim.clustered_null_pairs(rng, r)
    rej = sim.paired_rejections(a, b, groups)
    print(
        f"| 100 clusters of 10, preference d_g ~ N(0, 0.5^2) | {_cell(rej['bootstrap'], r)} "
        f"| {_cell(rej['clustered_mcnemar'], r)} | {_cell(rej['item_mcnemar'], r)} | {rej['agree']:.4f} |"
    )
    a, b, _ = sim.clustered_null_pairs(rng, r, clusters=1000, size=1, pref=0.0)
    rej = sim.paired_rejections(a, b, None)
    print(
        f"| 1,000 iid items | {_cell(rej['bootstrap'], r)} | - | {_cell(rej['item_mcnemar'], r)} | {rej['agree']:.4f} |"
    )

    print(f"\n## Multiplicity: 16-benchmark null table (R = {r * 10} tables of uniform null p)\n")
    print("| adjustment | family-wise error |")
    print("|---|---|")
    for adj in ("none", "holm", "bh"):
        fwer = sim.null_table_fwer(rng, r * 10, adjust=adj)
        print(f"| {adj} | {_cell(fwer, r * 10)} |")
    rb = max(50, r // 5)
    fwer_b = sim.null_table_fwer_bootstrap(rng, rb, adjust="holm")
    fwer_n = sim.null_table_fwer_bootstrap(np.random.default_rng(7), rb, adjust="none")
    print(f"| holm, p from the paired bootstrap (n = 200 per benchmark, R = {rb}) | {_cell(fwer_b, rb)} |")
    print(f"| none, p from the paired bootstrap (R = {rb}) | {_cell(fwer_n, rb)} |")

    print(f"\n## Seeds: two-level interval (10 seeds x 200 items; R = {r // 2})\n")
    cov = sim.seed_coverage(rng, r // 2)
    print(f"- coverage of the population mean: {_cell(cov['coverage'], r // 2)}")
    t1 = sim.seed_compare_null(rng, r // 2)
    print(f"- paired compare_seed_groups, same system twice: type I error {_cell(t1, r // 2)}")

    print(f"\n## Power (0.82 vs 0.80, rho 0.6; R = {r})\n")
    pw = sim.power_check(rng, r)
    print(
        f"- n = 1,000: simulated {pw['simulated']:.3f} ± {sim.mc_se(pw['simulated'], r):.3f}, formula "
        f"{pw['theory']:.3f} (omega^2 = {pw['omega2']:.4f}, MDE {pw['mde_at_n'] * 100:.2f} pp)"
    )
    planned = sim.power_at_planned_n(rng, r)
    print(f"- planned n = {planned['n']:,} for 80%: simulated {planned['simulated']:.3f}")

    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nwall {wall:.1f} s, CPU {cpu:.1f} s, load average {load:.1f}")


if __name__ == "__main__":
    main()
