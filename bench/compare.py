"""``labledger compare`` and ``labledger calibrate report`` at scale, beside numpy baselines (#19).

Writes two 3-class ``results.jsonl`` files of ``--rows`` rows on the same items (model A and model B:
the review's generator, reviews/perf.md section 2, via bench/eval.py) and a prior-multiplier recipe
fitted on A with ``--crossfit 5`` (not timed), then runs each case in a fresh process, cases
interleaved rep by rep, and prints one table: wall and CPU (user+sys) seconds, peak RSS and the
1-minute load average at the start of each case. CPU is the stable figure on a shared machine.

Cases (``--only`` picks some):

- ``compare-jsonl``: ``labledger compare A B --json`` (7 default metrics, 95% paired intervals) with
  an empty columnar cache: reading JSONL;
- ``compare``: the same with the columnar cache warm (the usual second run);
- ``report``: ``labledger calibrate report A --recipe R --json`` (raw, calibrated, cross-fitted:
  the 5-fold refit, 5 metrics x 3 variants, 10 differences), cache warm;
- ``numpy-compare``: the review's baseline: ids and gold checked, accuracy and macro F1 of A, B and
  A - B with a 1,000-resample count-table (27 cells) multinomial bootstrap, McNemar; no other metric;
- ``numpy-report``: the 289-point multiplier grid fitted and 5-fold cross-fitted by one argmax pass
  per point, accuracy differences by a 2x2-table multinomial bootstrap, log loss, Brier, two ECEs
  (no intervals for them).

``--main PATH`` also runs every labledger case with ``PYTHONPATH=PATH/src`` (another checkout, e.g.
the main branch), interleaved with this tree's: the ``code`` column says which.

    python bench/compare.py --rows 1000000 --reps 2 --main /work/main
    python bench/compare.py --rows 10000000 --only compare,report,numpy-compare
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # bench/logging.py (the logging bench) would shadow the standard library's

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile

HERE = Path(__file__).resolve().parent
CASES = ("compare-jsonl", "compare", "report", "numpy-compare", "numpy-report")

NUMPY = r"""
import json, sys, time
import numpy as np, pyarrow.compute as pc, pyarrow.json as pj
LABELS = ["neg", "neu", "pos"]
def read(path):
    t = pj.read_json(path)
    probs = t.column("probs")
    P = np.column_stack([pc.struct_field(probs, l).to_numpy() for l in LABELS]).astype(np.float64)
    g = t.column("gold").to_numpy(zero_copy_only=False)
    return t.column("id").to_numpy(zero_copy_only=False), np.select([g == l for l in LABELS], [0, 1, 2], -1), P
def macro_f1(cm):
    tp = np.diagonal(cm, axis1=-2, axis2=-1); fp = cm.sum(-2) - tp; fn = cm.sum(-1) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0).mean(-1)
rng = np.random.default_rng(0)
mode = sys.argv[1]
if mode == "compare":
    ia, ya, pa = read(sys.argv[2]); ib, yb, pb = read(sys.argv[3])
    assert (ia == ib).all() and (ya == yb).all()
    a, b = pa.argmax(1), pb.argmax(1)
    cells = np.bincount(ya * 9 + a * 3 + b, minlength=27)
    draws = rng.multinomial(len(ya), cells / len(ya), size=1000).reshape(1000, 3, 3, 3)
    cm_a, cm_b = draws.sum(3), draws.sum(2)
    acc = np.trace(cm_a, axis1=1, axis2=2) / len(ya) - np.trace(cm_b, axis1=1, axis2=2) / len(ya)
    f1 = macro_f1(cm_a) - macro_f1(cm_b)
    ra, rb = a == ya, b == ya
    n01, n10 = int((ra & ~rb).sum()), int((~ra & rb).sum())
    out = {"acc_ci": np.percentile(acc, [2.5, 97.5]).tolist(), "f1_ci": np.percentile(f1, [2.5, 97.5]).tolist(),
           "mcnemar": (abs(n01 - n10) - 1) ** 2 / max(n01 + n10, 1)}
else:
    ids, y, P = read(sys.argv[2])
    n = len(y)
    v = 2.0 ** (np.arange(-8, 9) / 4.0)
    W = np.array([[1.0, x, z] for x in v for z in v])
    fold = np.empty(n, dtype=np.int64); fold[np.random.default_rng(0).permutation(n)] = np.arange(n) % 5
    cnt = np.stack([np.bincount(fold, weights=(np.argmax(P * w, axis=1) == y), minlength=5) for w in W])
    dist = np.abs(np.log(W)).sum(1)
    def best(vals):
        c = np.flatnonzero(vals == vals.max()); return int(c[np.argmin(dist[c])])
    b_all = best(cnt.sum(1))
    nf = np.bincount(fold, minlength=5)
    fb = [best((cnt.sum(1) - cnt[:, f]) / (n - nf[f])) for f in range(5)]
    variants = {"raw": P, "calibrated": P * W[b_all], "cross-fitted": P * W[np.array(fb)][fold]}
    out = {}
    right = {}
    for name, Q in variants.items():
        Q = Q / Q.sum(1, keepdims=True)
        pg = np.clip(Q[np.arange(n), y], 2.2e-16, 1 - 2.2e-16)
        conf, ok = Q.max(1), Q.argmax(1) == y
        right[name] = ok
        bins = np.minimum((conf * 15).astype(np.int64), 14)
        bq = np.empty(n, dtype=np.int64); bq[np.argsort(conf, kind="stable")] = (15 * np.arange(n)) // n
        onehot = np.zeros_like(Q); onehot[np.arange(n), y] = 1
        out[name] = {"accuracy": float(ok.mean()), "log_loss": float(-np.log(pg).mean()),
                     "brier": float(((Q - onehot) ** 2).sum(1).mean()),
                     "ece_uniform": float(np.abs(np.bincount(bins, weights=ok - conf, minlength=15)).sum() / n),
                     "ece_quantile": float(np.abs(np.bincount(bq, weights=ok - conf, minlength=15)).sum() / n)}
    for name in ("calibrated", "cross-fitted"):
        cells = np.bincount(right[name] * 2 + right["raw"], minlength=4)
        d = rng.multinomial(n, cells / n, size=1000)
        out[name]["accuracy_diff_ci"] = np.percentile((d[:, 2] - d[:, 1]) / n, [2.5, 97.5]).tolist()
print(json.dumps(out))
"""


def _bench_eval():
    """bench/eval.py as a module (its generator and its timing of one fresh process)."""
    spec = importlib.util.spec_from_file_location("bench_eval", HERE / "eval.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--main", help="another checkout whose src/ is timed beside this one (e.g. /work/main)")
    ap.add_argument("--keep", help="write the files here and keep them (reused when present)")
    args = ap.parse_args()
    only = args.only.split(",")
    be = _bench_eval()
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="bench-compare-"))
    tmp.mkdir(parents=True, exist_ok=True)
    a, b = tmp / f"cls3_{args.rows}.jsonl", tmp / f"cls3_b_{args.rows}.jsonl"
    if not a.exists():
        be.generate("cls3", args.rows, a)
    if not b.exists():
        be.generate("cls3", args.rows, b, seed=0, model_seed=7)
    codes = {"branch": str(HERE.parent / "src")}
    if args.main:
        codes["main"] = str(Path(args.main) / "src")
    warm = tmp / "cache-warm"
    recipe = tmp / f"recipe_{args.rows}.toml"
    lb = [sys.executable, "-m", "labledger"]
    env0 = {**os.environ, "PYTHONPATH": codes["branch"], "LABLEDGER_CACHE_DIR": str(warm)}
    fit = ["--task", "cls3", "--method", "prior_multiplier", "--crossfit", "5", "--out", str(recipe)]
    if not recipe.exists():
        subprocess.run(
            [*lb, "calibrate", "fit", str(a), *fit],
            check=True,
            capture_output=True,
            env=env0,
        )
    subprocess.run([*lb, "compare", str(a), str(b), "--json"], check=True, capture_output=True, env=env0)  # warm

    def cases():
        for code, src in codes.items():
            env = {**os.environ, "PYTHONPATH": src, "LABLEDGER_CACHE_DIR": str(warm)}
            cold = {**env, "LABLEDGER_CACHE_DIR": "off"}
            yield code, "compare-jsonl", [*lb, "compare", str(a), str(b), "--json"], cold
            yield code, "compare", [*lb, "compare", str(a), str(b), "--json"], env
            yield code, "report", [*lb, "calibrate", "report", str(a), "--recipe", str(recipe), "--json"], env
        yield "numpy", "numpy-compare", [sys.executable, "-c", NUMPY, "compare", str(a), str(b)], dict(os.environ)
        yield "numpy", "numpy-report", [sys.executable, "-c", NUMPY, "report", str(a)], dict(os.environ)

    rows: list[dict] = []
    for rep in range(args.reps):
        for code, case, cmd, env in cases():
            if case not in only:
                continue
            r = _measured(be, cmd, env)
            row = {
                "code": code,
                "case": case,
                "rep": rep,
                **{k: r[k] for k in ("wall", "cpu", "rss_mib", "load", "rc")},
            }
            if r["rc"]:
                row["error"] = r["err"][-200:]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(
        f"\n{args.rows:,} rows (3 classes, A and B on the same items); {args.reps} rep(s); os.cpu_count() = {os.cpu_count()}"
    )
    print("| case | code | wall s | CPU s | peak RSS MiB | load | note |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        note = r.get("error", "")[:60]
        print(
            f"| {r['case']} | {r['code']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss_mib']:.0f} | {r['load']:.1f} | {note} |"
        )
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


def _measured(be, cmd: list[str], env: dict[str, str]) -> dict:
    """bench/eval.py's ``measured`` (``/usr/bin/time``: CPU and peak RSS) with an environment."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        return be.measured(cmd)
    finally:
        os.environ.clear()
        os.environ.update(saved)


if __name__ == "__main__":
    main()
