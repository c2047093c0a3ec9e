"""Bench: fit (5-fold cross-fit, 101-point grid) and apply a prior multiplier on 1M rows of 3-class
results, against the same written the obvious way with scikit-learn (issue 4).

The task: FinEntity-like 3-class results (Negative / Neutral / Positive), rows clustered in
groups of 4. The recipe: a prior multiplier on Neutral over ``0.5:2.5:0.02`` (101 points), the
objective macro F1, 5 folds by group (each fold fitted on the other four, pooled out-of-fold
macro F1), plus the final fit on every item.

- labledger: ``labledger.calibrate.fit(path, method="prior_multiplier", crossfit=5, ...)`` (reads the
  file, fits every fold and the final recipe from one pass over the items, computes the in-sample
  and out-of-fold figures) and ``labledger.calibrate.apply`` (writes every line byte for byte plus
  its ``calibrated`` field).
- the obvious way: read the file with ``json.loads`` line by line; for each of the 6 fits (all
  items, then each fold's training items) and each of the 101 grid points, ``argmax(p * w)`` and
  ``sklearn.metrics.f1_score(average="macro")``; pool the held-out predictions; write each row
  with ``json.dumps`` after adding the field. Its fitting loop is timed on ``--sk-points`` grid
  points per fit and extrapolated to all 606 calls (``--full`` runs them all).

Both sides are two steps that each read the file, as the commands are (``labledger calibrate fit``,
then ``labledger calibrate apply``); the obvious way's second read is counted as the same
``json.loads`` time as its first (measured once).

Both pick their parameters from the same objective values: the script checks that every macro F1
the loop computed equals labledger's for the same grid point and rows (largest absolute
difference printed).

    python bench/calibration.py                    # 1M rows
    python bench/calibration.py --n 200000 --full
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # bench/logging.py (the logging bench) would shadow the standard library's

import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np
import orjson
import sklearn
from sklearn.metrics import f1_score

import labledger.calibrate as cal
from labledger.calibrate.fitting import make_folds
from labledger.calibrate.methods import task_arrays
from labledger.calibrate.search import _table_values, argmax_tables, resolve_objective
from labledger.inputs.results import read_results
from labledger.metrics.sweep import parse_thresholds

LABELS = ("Negative", "Neutral", "Positive")
GRID_SPEC = "0.5:2.5:0.02"
GRID = parse_thresholds(GRID_SPEC)  # 101 points
K = 5
SEED = 0


def make_file(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    gold = rng.choice(3, size=n, p=[0.3, 0.45, 0.25])
    z = np.eye(3)[gold] * 1.4 + rng.normal(size=(n, 3))
    z[:, 1] -= 0.25  # the model under-predicts Neutral (seed 001's FinEntity)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    with open(path, "wb") as fh:
        for i in range(n):
            fh.write(
                orjson.dumps(
                    {
                        "id": f"fin-{i}",
                        "task": "finentity",
                        "gold": LABELS[gold[i]],
                        "probs": {LABELS[0]: float(p[i, 0]), LABELS[1]: float(p[i, 1]), LABELS[2]: float(p[i, 2])},
                        "group": f"doc-{i // 4}",
                    }
                )
                + b"\n"
            )


def ours(path: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    recipe = cal.fit(
        path,
        method="prior_multiplier",
        grid={"Neutral": GRID_SPEC},
        objective="f1:average=macro",
        crossfit=K,
        seed=SEED,
    )
    t1 = time.perf_counter()
    cal.apply(path, recipe, out)
    t2 = time.perf_counter()
    return {"fit": t1 - t0, "apply": t2 - t1, "recipe": recipe}


def ours_core(path: Path) -> tuple[float, float, np.ndarray, np.ndarray]:
    """The fit's core on arrays (no file reading): every fold's 101 macro F1s from one pass."""
    td = read_results(path)["finentity"]
    t0 = time.perf_counter()
    arr = task_arrays(td, [("prior_multiplier", {})])
    obj = resolve_objective("f1:average=macro", arr, ["prior_multiplier"], positive=None, item_field=None)
    fold = make_folds(arr.group, K, SEED)
    cands = np.ones((len(GRID), 3))
    cands[:, 1] = GRID
    tables = argmax_tables(arr.probs, arr.gold, lambda k, a, b: cands[:, k][:, None], len(GRID), fold, K)
    values = _table_values(obj, arr, tables)
    t1 = time.perf_counter()
    return t1 - t0, values, fold, arr


def sklearn_way(path: Path, out: Path, points: int, full: bool, fold: np.ndarray, w_best: float) -> dict:
    t0 = time.perf_counter()
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    gold = np.array([LABELS.index(r["gold"]) for r in rows])
    p = np.array([[r["probs"][lab] for lab in LABELS] for r in rows])
    t_load = time.perf_counter() - t0
    fits = [np.ones(len(gold), dtype=bool)] + [fold != f for f in range(K)]
    calls, t_calls, values = 0, 0.0, {}
    for r, train in enumerate(fits):
        g, pr = gold[train], p[train]
        for gi, w in enumerate(GRID if full else GRID[:points]):
            t = time.perf_counter()
            pred = np.argmax(pr * np.array([1.0, w, 1.0]), axis=1)
            values[(r, gi)] = f1_score(g, pred, average="macro")
            t_calls += time.perf_counter() - t
            calls += 1
    per_call = t_calls / calls
    fit_time = per_call * len(fits) * len(GRID)  # extrapolated unless --full
    t = time.perf_counter()
    pooled = np.empty(len(gold), dtype=np.int64)
    for f in range(K):  # each fold calibrated with the multiplier that fitted best without it; one f1_score
        held = fold == f
        scored = [g for g in range(len(GRID)) if (f + 1, g) in values]
        w = GRID[max(scored, key=lambda g: values[(f + 1, g)])]
        pooled[held] = np.argmax(p[held] * np.array([1.0, w, 1.0]), axis=1)
    f1_score(gold, pooled, average="macro")
    fit_time += time.perf_counter() - t
    t = time.perf_counter()
    q = p * np.array([1.0, w_best, 1.0])
    q /= q.sum(axis=1, keepdims=True)
    with open(out, "w", encoding="utf-8") as fh:
        for r, pr, qr in zip(rows, np.argmax(q, axis=1).tolist(), q.tolist()):
            r["calibrated"] = {
                "recipe": "r",
                "method": "prior_multiplier",
                "prediction": LABELS[pr],
                "probs": dict(zip(LABELS, qr)),
            }
            fh.write(json.dumps(r) + "\n")
    t_apply = time.perf_counter() - t
    return {
        "load": t_load,
        "fit": fit_time,
        "apply": t_apply,
        "calls": calls,
        "per_call": per_call,
        "values": values,
        "extrapolated": not full,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--sk-points", type=int, default=8, help="grid points timed per fit (then extrapolated)")
    ap.add_argument("--full", action="store_true", help="run the scikit-learn loop over the whole grid")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        path = d / "results.jsonl"
        make_file(path, args.n)
        size = path.stat().st_size
        runs = [ours(path, d / "cal.jsonl") for _ in range(2)]
        best = min(runs, key=lambda r: r["fit"] + r["apply"])
        t = time.perf_counter()
        read_results(path)
        t_read = time.perf_counter() - t
        core, values, fold, _arr = ours_core(path)
        w_best = best["recipe"].tasks["finentity"].steps[0].params["weights"]["Neutral"]
        sk = sklearn_way(path, d / "cal_sk.jsonl", args.sk_points, args.full, fold, w_best)
    diff = max(abs(values[r, g] - v) for (r, g), v in sk["values"].items())
    rec = best["recipe"].tasks["finentity"]
    ours_total = best["fit"] + best["apply"]
    machine = platform.processor() or platform.machine()
    print(
        f"{args.n:,} rows ({size / 2**20:.0f} MiB), 3 classes, groups of 4; {machine}, "
        f"{os.cpu_count()} CPUs; Python {platform.python_version()}, numpy {np.__version__}, "
        f"scikit-learn {sklearn.__version__}"
    )
    print(
        f"recipe: {rec.describe()}; macro F1 raw {rec.values['raw']:.4f}, in-sample {rec.values['in_sample']:.4f}, "
        f"cross-fitted {rec.values['crossfit']:.4f}"
    )
    print()
    sk_fit, sk_apply = sk["load"] + sk["fit"], sk["load"] + sk["apply"]
    sk_total = sk_fit + sk_apply
    ext = " (extrapolated)" if sk["extrapolated"] else ""
    print("| step | labledger (s) | scikit-learn, the obvious way (s) | speed-up |")
    print("|---|---:|---:|---:|")
    print(
        f"| fit: read the file, 6 fits x 101 grid points, in-sample and out-of-fold figures | {best['fit']:.2f} | "
        f"{sk_fit:.1f}{ext} | {sk_fit / best['fit']:.0f}x |"
    )
    print(
        f"| of which: read the file | {t_read:.2f} | {sk['load']:.1f} (json.loads per line) | "
        f"{sk['load'] / t_read:.1f}x |"
    )
    print(
        f"| of which: the 606 macro F1s on arrays | {core:.2f} | {sk['fit']:.1f} "
        f"({sk['per_call'] * 1000:.0f} ms per f1_score call{', extrapolated' if sk['extrapolated'] else ''}) | "
        f"{sk['fit'] / core:.0f}x |"
    )
    print(
        f"| apply: read the file, write it with the calibrated field | {best['apply']:.2f} | {sk_apply:.1f} | "
        f"{sk_apply / best['apply']:.1f}x |"
    )
    print(f"| total (fit, then apply) | {ours_total:.2f} | {sk_total:.1f}{ext} | {sk_total / ours_total:.0f}x |")
    print()
    print(
        f"scikit-learn calls timed: {sk['calls']} of 606; largest |macro F1 (labledger) - macro F1 (scikit-learn)| "
        f"over them: {diff:.1e}"
    )


if __name__ == "__main__":
    main()
