#!/usr/bin/env python
"""Reading columns (#19): results files and a run's samples, from JSONL, from the columnar cache,
beside ``pq.read_table`` of the same data as zstd Parquet.

Each case runs in a fresh interpreter (imports included in wall and CPU; "op" is the read alone),
interleaved, ``--reps`` times; the table shows medians of wall, op, CPU (user + sys of the child)
and peak RSS (the child's own VmHWM: wait4's figure would include the pages of this process that
the child was forked from), and the load average before and after.

Data (built under ``--dir`` once, then reused):

* ``bin.jsonl``: ``--rows`` binary results rows ``{"id", "task", "gold": yes|no, "score"}`` (the
  format of reviews/perf-scripts/s2_gen.py) and the same as zstd Parquet;
* a ledger with one finished run of ``--batches`` microbatches x 16 samples (200-character text
  input, 3-class probabilities, cross entropy; reviews/perf-scripts/s3_write.py's records), written
  with ``Run.log_batch``, and its samples as flat zstd Parquet (one row per sample).

Cases: ``read_results`` with the cache off (JSONL, the Arrow reader) and from the cache;
``view.table("samples")`` with the cache off (the Arrow samples reader), first read with the cache
on (read + store), from the cache; ``view.dataframe("samples")`` from the cache; ``labledger
export --what samples --format parquet``; ``pq.read_table`` of each Parquet file. ``--baseline
SRC`` adds the same cases with another source tree first on the path (e.g. /work/main/src).

    python bench/columnar.py                               # 1M rows, 20k batches
    python bench/columnar.py --rows 1000000 --batches 100000 --reps 3 --baseline /work/main/src
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

import argparse
import json
import math
import shutil
import statistics
import subprocess
import time
from pathlib import Path

SRC = str(Path(_HERE).parent / "src")

READ = r"""
import json, sys, time
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
{op}
t2 = time.perf_counter()
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({{"op_s": t2 - t1, "import_s": t1 - t0, "hwm_kib": int(hwm[0].split()[1]) if hwm else -1}}))
"""

CASES = {
    "results: read_results, JSONL (cache off)": (
        "from labledger.inputs.results import read_results",
        "rs = read_results(sys.argv[1] + '/bin.jsonl', positive='yes')",
        False,
    ),
    "results: read_results, from the cache": (
        "from labledger.inputs.results import read_results",
        "rs = read_results(sys.argv[1] + '/bin.jsonl', positive='yes')",
        True,
    ),
    "results: pq.read_table(zstd Parquet)": (
        "import pyarrow.parquet as pq",
        "t = pq.read_table(sys.argv[1] + '/bin.zstd.parquet')",
        False,
    ),
    "samples: view.table, JSONL (cache off)": (
        "import labledger",
        "t = labledger.open_ledger(sys.argv[1] + '/ledger').run(sys.argv[2]).table('samples')",
        False,
    ),
    "samples: view.table, from the cache": (
        "import labledger",
        "t = labledger.open_ledger(sys.argv[1] + '/ledger').run(sys.argv[2]).table('samples')",
        True,
    ),
    "samples: view.dataframe, from the cache": (
        "import labledger",
        "t = labledger.open_ledger(sys.argv[1] + '/ledger').run(sys.argv[2]).dataframe('samples')",
        True,
    ),
    "samples: export --format parquet (cache on)": (
        "from labledger.cli import main",
        "main(['export', sys.argv[2], '--what', 'samples', '--format', 'parquet', '--ledger', sys.argv[1] + '/ledger',"
        " '--out', sys.argv[1] + '/export.parquet'], standalone_mode=False)",
        True,
    ),
    "samples: view.table, compacted run (cache off)": (
        "import labledger",
        "t = labledger.open_ledger(sys.argv[1] + '/ledger-packed').run(sys.argv[2]).table('samples')",
        False,
    ),
    "batches: every record as dicts (view.batches), JSONL": (
        "import labledger",
        "n = sum(1 for _ in labledger.open_ledger(sys.argv[1] + '/ledger').run(sys.argv[2]).batches())",
        False,
    ),
    "batches: every record as dicts (view.batches), compacted run": (
        "import labledger",
        "n = sum(1 for _ in labledger.open_ledger(sys.argv[1] + '/ledger-packed').run(sys.argv[2]).batches())",
        False,
    ),
    "samples: pq.read_table(flat zstd Parquet)": (
        "import pyarrow.parquet as pq",
        "t = pq.read_table(sys.argv[1] + '/samples.zstd.parquet')",
        False,
    ),
    "samples: pq.read_table(flat).to_pandas()": (
        "import pyarrow.parquet as pq",
        "t = pq.read_table(sys.argv[1] + '/samples.zstd.parquet').to_pandas()",
        False,
    ),
}


def build(folder: Path, rows: int, batches: int) -> None:
    """The data (see the module docstring), written once."""
    import numpy as np
    import orjson
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "bin.zstd.parquet").exists():
        rng = np.random.default_rng(0)
        gold = rng.random(rows) < 0.3
        score = np.clip(rng.normal(np.where(gold, 0.65, 0.35), 0.2), 0.0, 1.0).tolist()
        g = np.where(gold, "yes", "no").tolist()
        with open(folder / "bin.jsonl", "wb") as f:
            f.write(
                b"".join(
                    orjson.dumps({"id": f"b{i}", "task": "bin", "gold": g[i], "score": score[i]}) + b"\n"
                    for i in range(rows)
                )
            )
        pq.write_table(pj.read_json(folder / "bin.jsonl"), folder / "bin.zstd.parquet", compression="zstd")
    if (folder / "samples.zstd.parquet").exists():
        return
    sys.path.insert(0, SRC)
    import labledger

    shutil.rmtree(folder / "ledger", ignore_errors=True)
    os.environ["LABLEDGER_COMPACT_MIN_BYTES"] = "off"  # the plain run; compacted copies are made from it
    rng = np.random.default_rng(4)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=int(k))) for k in rng.integers(2, 10, size=20_000)]
    labels = ("-1", "0", "+1")
    words = rng.zipf(1.2, size=(batches * 16, 60))
    cols: dict[str, list] = {}
    with labledger.start_run("columnar", ledger=folder / "ledger") as run:
        for k in range(1, batches + 1):
            logits = rng.normal(0, 1.5, (16, 3))
            p = np.exp(logits)
            p /= p.sum(1, keepdims=True)
            gold_i = rng.integers(0, 3, 16).tolist()
            pl = p.tolist()
            samples = []
            for i in range(16):
                text = " ".join(vocab[(int(w) - 1) % len(vocab)] for w in words[(k - 1) * 16 + i])[:200].ljust(200, ".")
                ce = -math.log(pl[i][gold_i[i]])
                samples.append(
                    {
                        "id": f"s{(k - 1) * 16 + i}",
                        "input": text,
                        "gold": labels[gold_i[i]],
                        "prediction": labels[int(np.argmax(p[i]))],
                        "probabilities": dict(zip(labels, pl[i])),
                        "cross_entropy": ce,
                    }
                )
            rec = {"microbatch": k, "optimizer_step": (k - 1) // 8 + 1, "examples_seen": k * 16, "batch_size": 16}
            rec.update(loss=sum(s["cross_entropy"] for s in samples) / 16, time=1.75e9 + k * 0.01, samples=samples)
            run.log_batch(rec)
            for i, s in enumerate(samples):
                flat = {**{c: rec[c] for c in rec if c != "samples"}, "sample_index": i}
                flat.update({c: v for c, v in s.items() if c != "probabilities"})
                flat.update({f"probabilities.{lab}": v for lab, v in s["probabilities"].items()})
                for c, v in flat.items():
                    cols.setdefault(c, []).append(v)
    pq.write_table(pa.table(cols), folder / "samples.zstd.parquet", compression="zstd")


COMPACT = r"""
import json, sys, time
t0 = time.perf_counter()
from labledger.cli import main
t1 = time.perf_counter()
main(["compact", "--ledger", sys.argv[1] + "/ledger-packed"], standalone_mode=False)
t2 = time.perf_counter()
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({"op_s": t2 - t1, "import_s": t1 - t0, "hwm_kib": int(hwm[0].split()[1]) if hwm else -1}))
"""


def compact_copy(folder: Path, src: str) -> dict[str, float] | None:
    """``ledger-packed``: a copy of the plain ledger, compacted by ``labledger compact`` (timed, once);
    ``None`` when the copy is there already."""
    if (folder / "ledger-packed").exists():
        return None
    shutil.copytree(folder / "ledger", folder / "ledger-packed.tmp")
    os.rename(folder / "ledger-packed.tmp", folder / "ledger-packed")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", COMPACT, str(folder)], env={**os.environ, "PYTHONPATH": src}, stdout=subprocess.PIPE
    )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit("labledger compact failed")
    doc = json.loads(out.decode().strip().splitlines()[-1])
    return {
        "wall": time.perf_counter() - t0,
        "op": doc["op_s"],
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": doc["hwm_kib"] / 1024,
    }


RUN = "columnar"


def run_one(name: str, folder: Path, src: str, cache: Path) -> dict[str, float]:
    """One case in a fresh interpreter: wall, op, CPU and peak RSS of the child (wait4)."""
    imports, op, warm = CASES[name]
    env = {**os.environ, "PYTHONPATH": src, "LABLEDGER_CACHE_DIR": str(cache) if warm else "off"}
    code = READ.format(imports=imports, op=op)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(folder), RUN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"{name} failed: {err.decode()[-2000:]}")
    doc = json.loads(out.decode().strip().splitlines()[-1])
    return {"wall": wall, "op": doc["op_s"], "cpu": usage.ru_utime + usage.ru_stime, "rss": doc["hwm_kib"] / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/labledger-bench-columnar")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--baseline", help="another source tree to run the labledger cases with (e.g. /work/main/src)")
    ap.add_argument("--run", default="columnar", help="the run's name in DIR/ledger (default: the one built)")
    ap.add_argument("--only", help="comma-separated substrings of case names")
    args = ap.parse_args()
    folder = Path(args.dir)
    global RUN
    RUN = args.run
    build(folder, args.rows, args.batches)
    load_c = os.getloadavg()
    compaction = compact_copy(folder, SRC)
    cache = folder / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    trees = [("this tree", SRC)] + ([("baseline", args.baseline)] if args.baseline else [])
    names = [n for n in CASES if not args.only or any(s in n for s in args.only.split(","))]
    load0 = os.getloadavg()
    # prime the cache: one read each, with the cache on
    for name in names:
        if CASES[name][2]:
            run_one(name, folder, SRC, cache)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.reps):
        for tree, src in trees:
            for name in names:
                if tree == "baseline" and (
                    "pq.read_table" in name
                    or ("from the cache" in name and "export" not in name)
                    or "compacted" in name
                ):
                    continue
                results.setdefault((tree, name), []).append(run_one(name, folder, src, cache))
    first = {}
    if any(n.startswith("samples: view.table, JSONL") for n in names):
        shutil.rmtree(cache, ignore_errors=True)
        first["samples: view.table, first read (read + store in the cache)"] = run_one(
            "samples: view.table, from the cache", folder, SRC, cache
        )
        first["results: read_results, first read (read + store in the cache)"] = run_one(
            "results: read_results, from the cache", folder, SRC, cache
        )
    load1 = os.getloadavg()
    sizes = {
        "batches.jsonl": sum(p.stat().st_size for p in (folder / "ledger").rglob("batches.jsonl")),
        "batches.jsonl.zst (the compacted run)": sum(
            p.stat().st_size for p in (folder / "ledger-packed").rglob("batches.jsonl.zst")
        ),
        "samples cache entry": sum(p.stat().st_size for p in cache.glob("table-samples-*.parquet")),
        "samples, flat zstd Parquet": (folder / "samples.zstd.parquet").stat().st_size,
        "bin.jsonl": (folder / "bin.jsonl").stat().st_size,
        "results cache entry": sum(p.stat().st_size for p in cache.glob("results-*.arrow")),
        "bin, zstd Parquet": (folder / "bin.zstd.parquet").stat().st_size,
    }
    import pyarrow.parquet as pq

    n_rows = pq.read_metadata(folder / "bin.zstd.parquet").num_rows
    n_samples = pq.read_metadata(folder / "samples.zstd.parquet").num_rows
    print(
        f"# bench/columnar.py: {n_rows:,} results rows, {n_samples:,} samples ({n_samples // 16:,} batches); {args.reps} reps"
    )
    print(
        f"load average before {load0[0]:.2f} {load0[1]:.2f}, after {load1[0]:.2f} {load1[1]:.2f}; {os.cpu_count()} CPUs\n"
    )
    print("| tree | case | wall s | op s | CPU s | peak RSS MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for (tree, name), rs in results.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"| {tree} | {name} | {med['wall']:.2f} | {med['op']:.2f} | {med['cpu']:.2f} | {med['rss']:,.0f} |")
    for name, r in first.items():
        print(f"| this tree | {name} (once) | {r['wall']:.2f} | {r['op']:.2f} | {r['cpu']:.2f} | {r['rss']:,.0f} |")
    if compaction is not None:
        r = compaction
        print(
            f"| this tree | `labledger compact` of the run (once; load {load_c[0]:.1f}) | {r['wall']:.2f} | "
            f"{r['op']:.2f} | {r['cpu']:.2f} | {r['rss']:,.0f} |"
        )
    parquet = sizes["samples, flat zstd Parquet"]
    print("\n| file | MiB | x flat zstd Parquet of the samples |")
    print("|---|---:|---:|")
    for k, v in sizes.items():
        ratio = f"{v / parquet:.2f}x" if k.startswith(("batches", "samples")) else ""
        print(f"| {k} | {v / 2**20:,.1f} | {ratio} |")


if __name__ == "__main__":
    main()
