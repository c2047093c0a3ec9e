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

``--phases`` instead times the phases of ``compare`` and ``report`` in one process each (threads
off: every pool runs its jobs in turn, so the phases add up), by CPU time: reading, the cross-fit,
preparing the metrics, their intervals, the ECE draws, the reliability bins, the document. A phase
that calls another includes it.

Every labledger process runs with a bytecode cache (``PYTHONPYCACHEPREFIX`` in the temporary
folder), as an install has it: this machine sets ``PYTHONDONTWRITEBYTECODE``, which made every run
compile the modules it imports (~0.5 s of CPU).

    python bench/compare.py --rows 1000000 --reps 2 --main /work/main
    python bench/compare.py --rows 10000000 --only compare,report,numpy-compare
    python bench/compare.py --rows 1000000 --phases --main /work/main
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


PHASES = r"""
import concurrent.futures as cf, functools, importlib, json, os, resource, sys, time
class Inline:  # a pool that runs each job at once, in the caller's thread
    def __init__(self, *a, **k): pass
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def map(self, f, *its): return [f(*a) for a in zip(*its)]
    def submit(self, f, *a, **k):
        fut = cf.Future()
        try: fut.set_result(f(*a, **k))
        except BaseException as e: fut.set_exception(e)
        return fut
c0 = time.process_time()
from labledger.calibrate.reporting import report
from labledger.analysis.comparison import compare
import labledger.metrics.resample as R
R.THREADS = 1
for m in list(sys.modules.values()):
    if getattr(m, "__name__", "").startswith("labledger") and getattr(m, "ThreadPoolExecutor", None) is cf.ThreadPoolExecutor:
        m.ThreadPoolExecutor = Inline
phases = {"imports": time.process_time() - c0}
def wrap(modname, attr, label):
    mod = importlib.import_module(modname)
    f = getattr(mod, attr, None)
    if f is None: return
    @functools.wraps(f)
    def g(*a, **k):
        c = time.process_time()
        try: return f(*a, **k)
        finally: phases[label] = phases.get(label, 0.0) + time.process_time() - c
    for m in list(sys.modules.values()):
        if getattr(m, "__name__", "").startswith("labledger") and getattr(m, attr, None) is f:
            setattr(m, attr, g)
mode, a, b = sys.argv[1:4]
WRAPS = {
    "report": [("labledger.calibrate.fitting", "load_results", "reading (sha256 + columnar cache)"),
               ("labledger.calibrate.fitting", "crossfit_scores", "cross-fit (K refits + out-of-fold)"),
               ("labledger.calibrate.fitting", "fit_chain", "  of which the refits"),
               ("labledger.calibrate.methods", "apply_steps", "applying the recipe (calibrated, folds)"),
               ("labledger.calibrate.reporting", "_prepared_value", "preparing the metrics (sorts, values)"),
               ("labledger.calibrate.reporting", "_entries", "intervals and differences (incl. preparing)"),
               ("labledger.calibrate.reporting", "_metric_entries", "intervals and differences"),
               ("labledger.calibrate.ece_draws", "joint_ece_draws", "  of which the joint ECE draws"),
               ("labledger.analysis.intervals", "value_interval", "  of which the raw values' intervals"),
               ("labledger.metrics.analytic", "normal_draws", "  of which the normal draws (log loss, Brier)"),
               ("labledger.calibrate.reporting", "reliability", "reliability bins")],
    "compare": [("labledger.inputs.results", "load", "reading both sides"),
                ("labledger.analysis.comparison", "_pair", "pairing the items"),
                ("labledger.analysis.comparison", "_prepared", "preparing the metrics (sorts, values)"),
                ("labledger.analysis.comparison", "diff_interval", "differences and intervals"),
                ("labledger.analysis.comparison", "diff_notes", "notes (analytic intervals beside)")],
}
for w in WRAPS[mode]: wrap(*w)
c1 = time.process_time()
doc = report(a, b) if mode == "report" else compare(a, b)
c2 = time.process_time()
text = doc.to_json()
c3 = time.process_time()
phases["the document as JSON"] = c3 - c2
phases["in all (after imports)"] = c3 - c1
phases["peak RSS MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
phases["load"] = os.getloadavg()[0]
print(json.dumps(phases))
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
    ap.add_argument("--phases", action="store_true", help="time the phases of compare and report in-process")
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
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    pycache = {code: str(tmp / f"pycache-{code}") for code in codes}
    env0 = {
        **base,
        "PYTHONPATH": codes["branch"],
        "LABLEDGER_CACHE_DIR": str(warm),
        "PYTHONPYCACHEPREFIX": pycache["branch"],
    }
    fit = ["--task", "cls3", "--method", "prior_multiplier", "--crossfit", "5", "--out", str(recipe)]
    if not recipe.exists():
        subprocess.run(
            [*lb, "calibrate", "fit", str(a), *fit],
            check=True,
            capture_output=True,
            env=env0,
        )
    for code, src in codes.items():  # the columnar cache and each tree's bytecode cache, warm
        env = {**env0, "PYTHONPATH": src, "PYTHONPYCACHEPREFIX": pycache[code]}
        subprocess.run([*lb, "compare", str(a), str(b), "--json"], check=True, capture_output=True, env=env)
    if args.phases:
        _phases(codes, pycache, base, warm, a, b, recipe, args.rows)
        return

    def cases():
        for code, src in codes.items():
            env = {**base, "PYTHONPATH": src, "LABLEDGER_CACHE_DIR": str(warm), "PYTHONPYCACHEPREFIX": pycache[code]}
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


def _phases(codes: dict, pycache: dict, base: dict, warm: Path, a: Path, b: Path, recipe: Path, rows: int) -> None:
    """One in-process run of each command per tree (threads off), its CPU seconds by phase, as a table."""
    found: dict[tuple[str, str], dict] = {}
    for mode, args in (("compare", (a, b)), ("report", (a, recipe))):
        for code, src in codes.items():
            env = {**base, "PYTHONPATH": src, "LABLEDGER_CACHE_DIR": str(warm), "PYTHONPYCACHEPREFIX": pycache[code]}
            out = subprocess.run(
                [sys.executable, "-c", PHASES, mode, *map(str, args)], capture_output=True, text=True, env=env
            )
            if out.returncode:
                raise SystemExit(out.stderr[-2000:])
            found[mode, code] = json.loads(out.stdout.strip().splitlines()[-1])
            print(json.dumps({"mode": mode, "code": code, **found[mode, code]}), file=sys.stderr, flush=True)
    names = list(codes)
    for mode in ("compare", "report"):
        print(f"\n`{mode}`, {rows:,} rows, CPU seconds by phase (one process, threads off)")
        print("| phase | " + " | ".join(names) + " |")
        print("|---|" + "---:|" * len(names))
        labels = list(dict.fromkeys(k for code in names for k in found[mode, code]))
        for label in labels:
            cells = [found[mode, code].get(label) for code in names]
            fmt = "{:.0f}" if label == "peak RSS MiB" else "{:.1f}" if label == "load" else "{:.2f}"
            print(f"| {label} | " + " | ".join("–" if c is None else fmt.format(c) for c in cells) + " |")


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
