"""``labledger eval`` / ``compare`` / ``calibrate report`` at scale, beside pandas+sklearn and duckdb+numpy (#19).

Writes binary and 3-class ``results.jsonl`` files of ``--rows`` rows (the review's generator:
reviews/perf.md section 2), then runs each case in a fresh subprocess, cases interleaved rep by rep,
and prints one table: wall and CPU (user+sys) seconds, peak RSS, and the 1-minute load average at
the start of the case. CPU is the stable figure on a shared machine; wall is what a user waits for.

Memory against the goal "peak <= 2x the columns it needs" (#19): one untimed probe per file reads it,
records which fields of each task ``evaluate`` (default metrics) actually reads (every attribute
access on the task objects, the ``n`` property's own read of ``lines`` left out), and sums the
numpy ``nbytes`` of those fields' arrays (``gold_index``, ``probs``, ``pred_index``, ``score``;
``ids``, ``group``, ``lines``, slices only when read), the label indices counted as int64 whatever
type the reader holds them in (int8 since the twentieth round): the ``cols MiB``, the same bar for
every version. ``held MiB`` is the same sum as the arrays are held, and ``peak / held`` the peak
over it. It also measures the
RSS of the interpreter with numpy, pyarrow and labledger imported and nothing read (``base``,
~70 MiB). Each labledger row then shows ``peak / cols`` (the whole process's peak RSS over the
columns) and ``(peak - base) / cols`` (the interpreter left out).

Cases (``--only`` picks some by name):

- ``eval``: ``labledger eval FILE --json`` (default metrics, 95% intervals), end to end from JSONL
  (the columnar cache off);
- ``eval-first``: the same with the columnar cache on and empty (emptied before each run): a
  user's first eval of a file, which reads the JSONL and writes the cache entry (its sorted columns
  included);
- ``eval-cached``: the same reading the columnar cache entry (filled by an untimed first run);
- ``eval-compute``: the same in one process, ``evaluate`` timed apart from reading (``read`` column);
  it also finds the bytes of *the columns evaluate needs* (below);
- ``eval-3``: accuracy, macro F1 and ROC-AUC, ``--resamples 0`` (like for like with the peers);
- ``pandas``: ``pd.read_json`` + sklearn (accuracy, macro F1, ROC-AUC; no intervals);
- ``duckdb``: ``read_json`` + numpy (the same three; no intervals);
- ``compare``: ``labledger compare A B --json`` on two 3-class files with the same items;
- ``calibrate``: ``labledger calibrate report A --recipe R --json`` (a prior-multiplier recipe
  fitted with ``--crossfit 5`` beforehand, not timed).

    python bench/eval.py --rows 1000000            # ~1-2 minutes on 2 quiet cores
    python bench/eval.py --rows 10000000 --only eval,eval-compute,compare,calibrate
    python bench/eval.py --rows 200000 --reps 3 --markdown
    python bench/eval.py --rows 1000000 --only eval,eval-cached --kinds binary --baseline /work/main/src
    python bench/eval.py --rows 10000000 --only eval,eval-cached,eval-compute,duckdb --kinds binary --keep D

``--baseline SRC`` adds each labledger case run with ``PYTHONPATH=SRC`` (another checkout's ``src``),
interleaved with this tree's. Bytecode is cached in a temporary folder, as in an installed package
(``PYTHONDONTWRITEBYTECODE`` would compile every module in every process). pandas at 10M binary
rows needs ~10 GiB of memory (reviews/perf.md): leave it out of ``--only`` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

CASES = ("eval", "eval-first", "eval-cached", "eval-compute", "eval-3", "pandas", "duckdb", "compare", "calibrate")

COMPUTE = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
from labledger.inputs.results import load
from labledger.analysis.evaluation import evaluate
path, positive = sys.argv[1], (sys.argv[2] or None)
t1 = time.perf_counter()
rs = load(path, positive=positive)
t2 = time.perf_counter(); c2 = time.process_time()
ev = evaluate(rs)
t3 = time.perf_counter(); c3 = time.process_time()
print(json.dumps({"read_s": t2 - t1, "compute_s": t3 - t2, "compute_cpu_s": c3 - c2}))
"""

COLUMNS = r"""
import json, sys, threading
def rss():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmRSS"))
import numpy as np, pyarrow
from labledger.inputs.results import load
from labledger.analysis.evaluation import evaluate
base = rss()
path, positive = sys.argv[1], (sys.argv[2] or None)
rs = load(path, positive=positive)
read: dict[int, set[str]] = {}
lock = threading.Lock()
def recording(cls):
    class Recording(cls):
        def __getattribute__(self, name):
            if not name.startswith("__") and sys._getframe(1).f_code.co_name != "n":
                with lock:
                    read.setdefault(id(self), set()).add(name)
            return super().__getattribute__(name)
    Recording.__name__ = cls.__name__
    return Recording
tasks = list(rs.tasks.values())
for td in tasks:
    td.__class__ = recording(type(td))
evaluate(rs)
total, held, fields = 0, 0, {}
for td in tasks:
    names = read.get(id(td), set())
    for name in sorted(names):
        value = vars(td).get(name)
        if name == "slice_columns":
            arrays = [c for c, _ in (value or {}).values()]
        else:
            arrays = [value] if isinstance(value, np.ndarray) else []
        b = sum(a.nbytes for a in arrays)
        # label indices counted as int64 (numpy's default integer, sklearn's label codes), whatever
        # type the reader holds them in: a narrower type lowers the peak, not the bar
        wide = sum(a.size * 8 for a in arrays) if name in ("gold_index", "pred_index") else b
        if b:
            fields[f"{td.task}.{name}"] = b
            total += wide
            held += b
print(json.dumps({"columns_bytes": total, "held_bytes": held, "fields": fields, "base_bytes": base}))
"""

PANDAS = r"""
import json, sys
import numpy as np, pandas as pd
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score
path, kind = sys.argv[1], sys.argv[2]
df = pd.read_json(path, lines=True)
if kind == "binary":
    y = (df["gold"] == "yes").to_numpy(); s = df["score"].to_numpy(); pred = s >= 0.5
    out = [accuracy_score(y, pred), f1_score(y, pred, average="macro"), roc_auc_score(y, s)]
else:
    labels = ["neg", "neu", "pos"]
    P = pd.DataFrame(df["probs"].tolist())[labels].to_numpy()
    y = df["gold"].map({l: i for i, l in enumerate(labels)}).to_numpy(); pred = P.argmax(1)
    out = [accuracy_score(y, pred), f1_score(y, pred, average="macro"),
           roc_auc_score(y, P, multi_class="ovr", average="macro")]
print(json.dumps(out))
"""

DUCK = r"""
import json, sys
import duckdb, numpy as np
path, kind = sys.argv[1], sys.argv[2]
def auc(pos, s):
    u, inv, cnt = np.unique(s, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(cnt) - (cnt - 1) / 2.0)[inv]
    n1 = int(pos.sum()); n0 = len(s) - n1
    return (ranks[pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0)
def macro_f1(y, pred, k):
    cm = np.bincount(y * k + pred, minlength=k * k).reshape(k, k)
    tp = np.diag(cm); fp = cm.sum(0) - tp; fn = cm.sum(1) - tp
    return float(np.mean(2 * tp / (2 * tp + fp + fn)))
if kind == "binary":
    d = duckdb.sql(f"SELECT gold, score FROM read_json('{path}', format='newline_delimited')").fetchnumpy()
    y = (d["gold"] == "yes").astype(np.int64); s = d["score"]; pred = (s >= 0.5).astype(np.int64)
    out = [float((y == pred).mean()), macro_f1(y, pred, 2), auc(y == 1, s)]
else:
    d = duckdb.sql(f"SELECT gold, probs.neg AS a, probs.neu AS b, probs.pos AS c FROM read_json('{path}', "
                   "format='newline_delimited')").fetchnumpy()
    P = np.column_stack([d["a"], d["b"], d["c"]]); labels = np.array(["neg", "neu", "pos"])
    y = np.searchsorted(labels, d["gold"].astype(str)); pred = P.argmax(1)
    out = [float((y == pred).mean()), macro_f1(y, pred, 3), float(np.mean([auc(y == c, P[:, c]) for c in range(3)]))]
print(json.dumps(out))
"""


def generate(kind: str, n: int, path: Path, seed: int = 0, model_seed: int | None = None) -> None:
    """The review's generator (reviews/perf-scripts/s2_gen.py), in chunks of 1M rows."""
    rng = np.random.default_rng(seed)
    rng2 = np.random.default_rng(model_seed) if model_seed is not None else None
    chunk = 1_000_000
    with open(path, "wb") as f:
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            if kind == "binary":
                gold = rng.random(m) < 0.3
                score = np.clip(rng.normal(np.where(gold, 0.65, 0.35), 0.2), 0.0, 1.0).tolist()
                g = np.where(gold, "yes", "no").tolist()
                lines = [
                    orjson.dumps({"id": f"b{start + i}", "task": "bin", "gold": g[i], "score": score[i]})
                    for i in range(m)
                ]
            else:
                labels = ("neg", "neu", "pos")
                gold = rng.choice(3, size=m, p=[0.3, 0.45, 0.25])
                logits = rng.normal(0, 1, (m, 3))
                boost = 1.2
                if rng2 is not None:
                    logits, boost = rng2.normal(0, 1, (m, 3)), 1.3
                logits[np.arange(m), gold] += boost
                p = np.exp(logits)
                p /= p.sum(1, keepdims=True)
                pl = p.tolist()
                gl = [labels[k] for k in gold.tolist()]
                lines = [
                    orjson.dumps(
                        {
                            "id": f"c{start + i}",
                            "task": "cls3",
                            "gold": gl[i],
                            "probs": {"neg": pl[i][0], "neu": pl[i][1], "pos": pl[i][2]},
                        }
                    )
                    for i in range(m)
                ]
            f.write(b"\n".join(lines) + b"\n")


def run(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall, CPU (user+sys) and peak RSS of one fresh subprocess, with its stdout."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    return {"wall": wall, "out": out.decode(), "err": err.decode()[-400:], "rc": proc.returncode, "load": load}


def measured(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Like :func:`run`, with CPU and peak RSS from ``/usr/bin/time`` when present, else rusage deltas."""
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    if timer:
        r = run([timer, "-f", "@@%U %S %M", *cmd], env)
        tail = [ln for ln in r["err"].splitlines() if ln.startswith("@@")]
        if tail:
            u, s, m = tail[-1][2:].split()
            return {**r, "cpu": float(u) + float(s), "rss_mib": int(m) / 1024}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**r, "cpu": cpu, "rss_mib": after.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--kinds", default="binary,cls3")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", help="write the files here and keep them (reused when present)")
    ap.add_argument("--baseline", help="another checkout's src folder: its labledger cases run too, interleaved")
    args = ap.parse_args()
    only = args.only.split(",")
    lb = [sys.executable, "-m", "labledger"]
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="bench-eval-"))
    tmp.mkdir(parents=True, exist_ok=True)
    files = {}
    unknown = set(args.kinds.split(",")) - {"binary", "cls3"}
    if unknown:
        ap.error(f"--kinds: {', '.join(sorted(unknown))} is not a kind (binary, cls3)")
    for kind in args.kinds.split(","):
        path = tmp / f"{kind}_{args.rows}.jsonl"
        if not path.exists():
            generate(kind, args.rows, path)
        files[kind] = path
    if "compare" in only or "calibrate" in only:
        files["cls3_b"] = tmp / f"cls3_b_{args.rows}.jsonl"
        if not files["cls3_b"].exists():
            generate("cls3", args.rows, files["cls3_b"], seed=0, model_seed=7)
    recipe = tmp / f"recipe_{args.rows}.toml"
    if "calibrate" in only and not recipe.exists():
        subprocess.run(
            [
                *lb,
                "calibrate",
                "fit",
                str(files.get("cls3", tmp / f"cls3_{args.rows}.jsonl")),
                "--task",
                "cls3",
                "--method",
                "prior_multiplier",
                "--crossfit",
                "5",
                "--out",
                str(recipe),
            ],
            check=True,
            capture_output=True,
        )

    base_env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "LABLEDGER_CACHE_DIR": "off"}
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    trees = {"": base_env}
    if args.baseline:
        trees[" (baseline)"] = {**base_env, "PYTHONPATH": args.baseline}
    # a cache folder per tree: two versions whose entry layouts differ would rewrite each other's
    # entries, and every "from the cache" run would be a first read
    cache_dirs = {tree: tmp / ("columnar-cache" + ("-baseline" if tree else "")) for tree in trees}

    def cases():
        for kind, path in files.items():
            if kind == "cls3_b":
                continue
            pos = ["--positive", "yes"] if kind == "binary" else []
            yield kind, "eval", [*lb, "eval", str(path), *pos, "--json"]
            yield kind, "eval-first", [*lb, "eval", str(path), *pos, "--json"]
            yield kind, "eval-cached", [*lb, "eval", str(path), *pos, "--json"]
            yield kind, "eval-compute", [sys.executable, "-c", COMPUTE, str(path), "yes" if kind == "binary" else ""]
            yield (
                kind,
                "eval-3",
                [
                    *lb,
                    "eval",
                    str(path),
                    *pos,
                    "--metric",
                    "accuracy",
                    "--metric",
                    "macro_f1",
                    "--metric",
                    "roc_auc",
                    "--resamples",
                    "0",
                    "--json",
                ],
            )
            yield kind, "pandas", [sys.executable, "-c", PANDAS, str(path), kind]
            yield kind, "duckdb", [sys.executable, "-c", DUCK, str(path), kind]
            if kind == "cls3" and "cls3_b" in files:  # (written only when compare/calibrate is asked for)
                yield kind, "compare", [*lb, "compare", str(path), str(files["cls3_b"]), "--json"]
                yield kind, "calibrate", [*lb, "calibrate", "report", str(path), "--recipe", str(recipe), "--json"]

    rows: list[dict] = []
    columns: dict[str, dict] = {}
    if any(
        c in only for c in ("eval", "eval-first", "eval-cached", "eval-compute")
    ):  # the columns evaluate needs (not timed)
        for kind, path in files.items():
            if kind == "cls3_b":
                continue
            r = run([sys.executable, "-c", COLUMNS, str(path), "yes" if kind == "binary" else ""], base_env)
            if r["rc"] == 0:
                columns[kind] = json.loads(r["out"].strip().splitlines()[-1])
                print(json.dumps({"kind": kind, **columns[kind]}), file=sys.stderr, flush=True)
    if "eval-cached" in only:  # fill the cache entries (not timed)
        for _kind, case, cmd in cases():
            if case == "eval-cached":
                for tree, env in trees.items():
                    subprocess.run(cmd, env={**env, "LABLEDGER_CACHE_DIR": str(cache_dirs[tree])}, capture_output=True)
    labledger_cases = ("eval", "eval-first", "eval-cached", "eval-compute", "eval-3", "compare", "calibrate")
    first_dir = tmp / "columnar-cache-first"
    for rep in range(args.reps):
        for (kind, case, cmd), (tree, env) in ((c, t) for c in cases() for t in trees.items()):
            if case not in only or (tree and case not in labledger_cases):
                continue
            if case == "eval-cached":
                env = {**env, "LABLEDGER_CACHE_DIR": str(cache_dirs[tree])}
            if case == "eval-first":  # an empty cache folder before each run (not timed)
                shutil.rmtree(first_dir, ignore_errors=True)
                env = {**env, "LABLEDGER_CACHE_DIR": str(first_dir)}
            if case in ("pandas", "duckdb"):
                mod = "sklearn" if case == "pandas" else "duckdb"
                if subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode:
                    rows.append({"kind": kind, "case": case, "rep": rep, "skipped": f"{mod} not installed"})
                    continue
            r = measured(cmd, env)
            row = {
                "kind": kind,
                "case": case + tree,
                "rep": rep,
                "wall": r["wall"],
                "cpu": r["cpu"],
                "rss_mib": r["rss_mib"],
                "load": r["load"],
                "rc": r["rc"],
            }
            if r["rc"]:
                row["error"] = r["err"]
            if case == "eval-compute" and not r["rc"]:
                row.update(json.loads(r["out"].strip().splitlines()[-1]))
            if kind in columns and case in ("eval", "eval-first", "eval-cached", "eval-compute"):
                cols, base = columns[kind]["columns_bytes"] / 2**20, columns[kind]["base_bytes"] / 2**20
                held = columns[kind]["held_bytes"] / 2**20
                row.update(
                    cols_mib=cols,
                    base_mib=base,
                    ratio=r["rss_mib"] / cols,
                    ratio_net=(r["rss_mib"] - base) / cols,
                    held_mib=held,
                    ratio_held=r["rss_mib"] / held,
                )
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"\n{args.rows:,} rows; {args.reps} rep(s); os.cpu_count() = {os.cpu_count()}")
    head = (
        "| file | case | wall s | CPU s | peak RSS MiB | load | cols MiB | peak / cols | (peak - base) / cols "
        "| held MiB | peak / held | note |"
    )
    print(head)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['kind']} | {r['case']} | | | | | | | | | | skipped: {r['skipped']} |")
            continue
        note = r.get("error", "")[:60]
        if "compute_s" in r:
            note = f"read {r['read_s']:.2f} s, compute {r['compute_s']:.2f} s wall / {r['compute_cpu_s']:.2f} s CPU"
        mem = (
            f"{r['cols_mib']:.0f} | {r['ratio']:.2f} | {r['ratio_net']:.2f} | {r['held_mib']:.0f} | {r['ratio_held']:.2f}"
            if "ratio" in r
            else " | | | | "
        )
        print(
            f"| {r['kind']} | {r['case']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss_mib']:.0f} | {r['load']:.1f} | {mem} | {note} |"
        )
    for kind, c in columns.items():
        parts = ", ".join(f"{k} {v / 2**20:.0f}" for k, v in c["fields"].items())
        print(
            f"\n{kind}: columns evaluate reads (MiB, as held): {parts}; base RSS (interpreter + numpy + pyarrow + labledger) {c['base_bytes'] / 2**20:.0f} MiB"
        )
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
