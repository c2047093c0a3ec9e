"""Bench: labledger's evaluation engine against scikit-learn (issue 3), side by side in one run.

Rows:

- F1 (binary) and ROC-AUC on 1M and 10M binary predictions, overall and per value of a two-value
  slice, against the same calls to scikit-learn (``f1_score``, ``roc_auc_score``; per slice with a
  boolean mask, which is what users write).
- 1,000 paired bootstrap resamples on 100k items (A - B for accuracy and binary F1) against a loop
  of scikit-learn calls on resampled indices. The loop runs fewer iterations (``--loop-iters``) and
  is extrapolated to 1,000; the table says so. "max abs diff" compares the two on the *same* draws:
  the loop's own resample indices, fed to labledger as resample weights.
- The 37-threshold sweep with per-class and per-slice recall (``labledger.metrics.sweep``, another
  engineer's module; ``bench/sweep.py`` is its full bench) against a loop of scikit-learn calls.
- Reading a 1M-row ``results.jsonl`` (Arrow path vs row by row) and ``evaluate`` on it.

Peak memory is ``tracemalloc``'s peak during the call (numpy reports its buffers to it), shown next
to the size of the input arrays. Every figure in the table is measured by this script.

    python bench/metrics.py                    # full run (~3-4 minutes on 2 cores)
    python bench/metrics.py --sizes 1000000 --no-files
    python bench/metrics.py --write            # also replace the "## Metrics (issue 3)" section of RESULTS.md
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # bench/logging.py would shadow the standard library's logging

import argparse
import datetime as dt
import gc
import os
import platform
import tempfile
import time
import tracemalloc

import numpy as np
import orjson
import sklearn
from sklearn.metrics import accuracy_score, f1_score, recall_score, roc_auc_score

from labledger.metrics import f1, prepare, roc_auc
from labledger.metrics.resample import paired_bootstrap

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADING = "## Metrics (issue 3)"


def measure(fn, repeat: int = 1):
    """(best seconds, tracemalloc peak bytes, result) of ``fn()``."""
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return best, peak, result


def mb(x: float) -> str:
    return f"{x / 2**20:,.0f} MB"


def secs(x: float) -> str:
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def make_binary(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    gold = (rng.random(n) < 0.4).astype(np.int8)
    score = np.clip(np.where(gold == 1, rng.beta(5, 2, n), rng.beta(2, 5, n)), 0, 1)
    slice_codes = rng.integers(0, 2, n).astype(np.int8)
    return gold, score, slice_codes


def bench_point(n: int, repeat: int) -> list[list[str]]:
    gold, score, sl = make_binary(n)
    pred = (score >= 0.5).astype(np.int8)
    inputs = gold.nbytes + score.nbytes + sl.nbytes + pred.nbytes
    masks = [sl == 0, sl == 1]
    rows = []

    def ours_f1():
        out = [f1(gold=gold, pred=pred, average="binary", pos_label=1)]
        out += [f1(gold=gold[m], pred=pred[m], average="binary", pos_label=1) for m in masks]
        return out

    def sk_f1():
        return [f1_score(gold, pred)] + [f1_score(gold[m], pred[m]) for m in masks]

    def ours_auc():
        return [roc_auc(gold=gold, score=score)] + [roc_auc(gold=gold[m], score=score[m]) for m in masks]

    def sk_auc():
        return [roc_auc_score(gold, score)] + [roc_auc_score(gold[m], score[m]) for m in masks]

    for name, ours, theirs in (
        ("F1 (binary), overall + 2 slices", ours_f1, sk_f1),
        ("ROC-AUC, overall + 2 slices", ours_auc, sk_auc),
    ):
        t_o, m_o, v_o = measure(ours, repeat)
        t_s, m_s, v_s = measure(theirs, repeat)
        diff = max(abs(a - b) for a, b in zip(v_o, v_s))
        rows.append(
            [
                f"{name}, n={n:,}",
                secs(t_o),
                secs(t_s),
                f"{t_s / t_o:.1f}x",
                f"{diff:.1e}",
                f"{mb(m_o)} ({m_o / inputs:.1f}x inputs)",
                mb(m_s),
                mb(inputs),
            ]
        )
    return rows


def bench_bootstrap(n: int, resamples: int, loop_iters: int) -> list[list[str]]:
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 2, n).astype(np.int8)
    pa = np.where(rng.random(n) < 0.85, gold, 1 - gold).astype(np.int8)
    pb = np.where(rng.random(n) < 0.83, gold, 1 - gold).astype(np.int8)
    inputs = gold.nbytes + pa.nbytes + pb.nbytes
    rows = []
    specs = {
        "accuracy": ({}, lambda g, p, w=None: accuracy_score(g, p, sample_weight=w)),
        "F1 (binary)": ({"pos_label": 1}, lambda g, p, w=None: f1_score(g, p, sample_weight=w)),
    }
    for label, (params, sk) in specs.items():
        name = "accuracy" if label == "accuracy" else "f1"
        prep_a = prepare(name, gold=gold, pred=pa, **params)
        prep_b = prepare(name, gold=gold, pred=pb, **params)
        t_o, m_o, res = measure(lambda: paired_bootstrap(prep_a, prep_b, resamples=resamples, seed=0))
        draws = np.random.default_rng(2).integers(0, n, size=(loop_iters, n))

        def loop():
            out = []
            for idx in draws:
                out.append(sk(gold[idx], pa[idx]) - sk(gold[idx], pb[idx]))
            return out

        t_loop, _, loop_vals = measure(loop)
        per_iter = t_loop / loop_iters
        # identical numbers on the same draws: the loop's indices as resample weights
        w = np.stack([np.bincount(idx, minlength=n) for idx in draws]).astype(float)
        ours_same = prep_a.weighted(w) - prep_b.weighted(w)
        diff = float(np.max(np.abs(ours_same - np.array(loop_vals))))
        rows.append(
            [
                f"paired bootstrap, {resamples:,} resamples, n={n:,}: {label} A - B "
                f"(CI [{res.low:.4f}, {res.high:.4f}], p={res.p_value:.3g})",
                secs(t_o),
                f"{secs(per_iter * resamples)} (extrapolated from {loop_iters} loop iterations)",
                f"{per_iter * resamples / t_o:.0f}x",
                f"{diff:.1e} (same {loop_iters} draws)",
                f"{mb(m_o)} ({m_o / inputs:.1f}x inputs)",
                "-",
                mb(inputs),
            ]
        )
    return rows


def bench_sweep(n: int) -> list[list[str]]:
    try:
        from labledger.metrics.sweep import threshold_sweep
    except ImportError:
        return [["37-threshold sweep: labledger.metrics.sweep not available", "-", "-", "-", "-", "-", "-", "-"]]
    gold, score, sl = make_binary(n, seed=3)
    slices = {"length": (sl, ["long", "short"])}
    gates = ["recall[length=long]>=0.5", "recall[length=short]>=0.5"]
    inputs = gold.nbytes + score.nbytes + sl.nbytes

    def ours():
        return threshold_sweep(
            gold=gold, score=score, positive=1, negative=0, thresholds="0.05:0.95:0.025", slices=slices, gates=gates
        )

    t_o, m_o, report = measure(ours)
    thr = np.asarray(report.thresholds)
    masks = [sl == 0, sl == 1]

    def loop():
        out = {"accuracy": [], "f1": [], "recall0": [], "recall1": [], "long": [], "short": []}
        for t in thr:
            p = (score >= t).astype(np.int8)
            out["accuracy"].append(accuracy_score(gold, p))
            out["f1"].append(f1_score(gold, p))
            out["recall0"].append(recall_score(gold, p, pos_label=0))
            out["recall1"].append(recall_score(gold, p, pos_label=1))
            out["long"].append(recall_score(gold[masks[0]], p[masks[0]]))
            out["short"].append(recall_score(gold[masks[1]], p[masks[1]]))
        out["auc"] = roc_auc_score(gold, score)
        return out

    t_s, m_s, ref = measure(loop)
    cols = report.to_dict()["threshold_trials"]
    diffs = [abs(c["accuracy"] - a) for c, a in zip(cols, ref["accuracy"])]
    diffs += [abs(c["f1"] - a) for c, a in zip(cols, ref["f1"])]
    diffs += [abs(c["0_recall"] - a) for c, a in zip(cols, ref["recall0"])]
    diffs += [abs(c["1_recall"] - a) for c, a in zip(cols, ref["recall1"])]
    diffs += [abs(c["recall[length=long]"] - a) for c, a in zip(cols, ref["long"])]
    diffs += [abs(c["recall[length=short]"] - a) for c, a in zip(cols, ref["short"])]
    diffs += [abs(cols[0]["roc_auc"] - ref["auc"])]
    return [
        [
            f"37-threshold sweep (accuracy, F1, ROC-AUC, 2 class recalls, 2 slice recalls), n={n:,}",
            secs(t_o),
            secs(t_s),
            f"{t_s / t_o:.1f}x",
            f"{max(diffs):.1e}",
            f"{mb(m_o)} ({m_o / inputs:.1f}x inputs)",
            mb(m_s),
            mb(inputs),
        ]
    ]


def bench_files(n: int) -> list[list[str]]:
    from labledger.analysis.evaluation import evaluate
    from labledger.inputs.results import read_results

    gold, score, sl = make_binary(n, seed=4)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.jsonl"
        with open(path, "wb") as f:
            for i in range(n):
                p = round(float(score[i]), 6)
                f.write(
                    orjson.dumps(
                        {
                            "id": f"x{i}",
                            "task": "t",
                            "gold": "pos" if gold[i] else "neg",
                            "probs": {"pos": p, "neg": round(1 - p, 6)},
                            "slices": {"length": "long" if sl[i] else "short"},
                        }
                    )
                    + b"\n"
                )
        size = path.stat().st_size
        read_results(path)  # warm the page cache
        t_arrow, m_arrow, fast = measure(lambda: read_results(path))
        t_rows, _, slow = measure(lambda: read_results(path, engine="rows"))
        a, b = fast["t"], slow["t"]
        same = (
            a.labels == b.labels
            and np.array_equal(a.gold_index, b.gold_index)
            and np.array_equal(a.ids, b.ids)
            and a.slices["length"].tolist() == b.slices["length"].tolist()
        )
        diff = float(np.max(np.abs(a.probs - b.probs))) if same else float("nan")
        rows = [
            [
                f"read {n:,}-row results.jsonl ({size / 2**20:,.0f} MB; Arrow path vs row by row)",
                secs(t_arrow),
                f"{secs(t_rows)} (orjson row by row)",
                f"{t_rows / t_arrow:.1f}x",
                f"{diff:.1e} (probs; labels, ids, slices equal)" if same else "DIFFERENT",
                mb(m_arrow),
                "-",
                f"{size / 2**20:,.0f} MB file",
            ]
        ]
        spec = ["accuracy", "f1", "precision", "recall"]
        t_ev, m_ev, _ = measure(lambda: evaluate(path, metrics=spec, by="length", resamples=1000))
        rows.append(
            [
                f"evaluate {n:,} rows: accuracy, F1, precision, recall, each with 1,000-resample CIs, "
                f"overall + by a 2-value slice (incl. reading)",
                secs(t_ev),
                "-",
                "-",
                "-",
                mb(m_ev),
                "-",
                "-",
            ]
        )
        t_auc, m_auc, _ = measure(lambda: evaluate(path, metrics=["roc_auc"], resamples=1000))
        rows.append(
            [
                f"evaluate {n:,} rows: ROC-AUC with a 1,000-resample CI (resample-weight matrix, incl. reading)",
                secs(t_auc),
                "-",
                "-",
                "-",
                mb(m_auc),
                "-",
                "-",
            ]
        )
    return rows


HEAD = [
    "what",
    "labledger",
    "scikit-learn (or baseline)",
    "speed-up",
    "max abs diff",
    "labledger peak memory",
    "scikit-learn peak",
    "inputs",
]


def markdown(rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated n for F1/ROC-AUC")
    ap.add_argument("--repeat", type=int, default=2, help="best of N for the point metrics")
    ap.add_argument("--boot-n", type=int, default=100_000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--loop-iters", type=int, default=50, help="scikit-learn loop iterations (extrapolated)")
    ap.add_argument("--sweep-n", type=int, default=1_000_000)
    ap.add_argument("--file-n", type=int, default=1_000_000)
    ap.add_argument("--no-files", action="store_true", help="skip the results.jsonl rows")
    ap.add_argument("--write", action="store_true", help=f"write the table into {RESULTS.name}")
    args = ap.parse_args()

    rows: list[list[str]] = []
    for n in (int(x) for x in args.sizes.split(",")):
        rows += bench_point(n, args.repeat)
        print(f"done: point metrics n={n:,}", file=sys.stderr)
    rows += bench_bootstrap(args.boot_n, args.resamples, args.loop_iters)
    print("done: bootstrap", file=sys.stderr)
    rows += bench_sweep(args.sweep_n)
    print("done: sweep", file=sys.stderr)
    if not args.no_files:
        rows += bench_files(args.file_n)
        print("done: files", file=sys.stderr)

    env = (
        f"{dt.date.today().isoformat()}, {platform.machine()} with {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, numpy {np.__version__}, scikit-learn {sklearn.__version__}"
    )
    table = markdown(rows)
    print(table)
    print(f"\n{env}")
    if args.write:
        section = (
            f"{HEADING}\n\n`python bench/metrics.py` ({env}). Times are the best of "
            f"{args.repeat} runs for the point metrics, one run otherwise; memory is tracemalloc's peak "
            "during the call. The scikit-learn bootstrap loop ran fewer iterations and is "
            "extrapolated to the same number of resamples, as the row says; its max abs diff compares "
            "both on the loop's own draws.\n\n" + table + "\n"
        )
        text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        if HEADING in text:
            head, rest = text.split(HEADING, 1)
            nxt = rest.find("\n## ")
            tail = rest[nxt + 1 :] if nxt >= 0 else ""
            text = head + section + ("\n" + tail if tail else "")
        else:
            text = text.rstrip("\n") + "\n\n" + section
        RESULTS.write_text(text)
        print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
