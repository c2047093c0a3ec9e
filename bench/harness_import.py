"""Importing harness outputs at scale (#13): labledger's import against each harness's own reader.

Generates, in each harness's on-disk format:

- an lm-eval ``--output_path`` folder: one ``results_<ts>.json`` and 70 ``samples_<task>_<ts>.jsonl``
  of 1,000 four-choice documents each (70,000 samples), fields as lm-eval 0.4.13 writes them;
- an inspect_ai ``.eval`` log: 10,000 samples x 3 epochs (30,000 zstd-compressed sample members),
  ``header.json`` and ``reductions.json`` as inspect_ai 0.3.285 writes them;

then times, each in a fresh process (peak RSS from ``getrusage``): ``labledger import`` into a new
ledger, and the harness's own reader (lm-eval has no public results reader: its
``EvaluationTracker.recreate_metadata_card`` lists files with ``lm_eval.utils`` and loads samples
with ``datasets.load_dataset("json")``, which is what is timed; inspect: ``read_eval_log``).

Goal (issue #13): 100,000 samples imported in <= 3 s: the defaults make 70,000 lm-eval samples and
30,000 inspect ones (the issue's 60 tasks plus 10 more of the costlier kind: an lm-eval document
becomes two rows, acc and acc_norm, each with its probabilities, log-likelihoods and choices).
Usage: ``python bench/harness_import.py [--tasks 70]
[--docs 1000] [--samples 10000] [--epochs 3] [--compare /work/main/src --repeat 3] [--no-peers]
[--data DIR]``.
Prints a table (the import-only figures are the best CPU of ``--repeat`` runs, alternating with
``--compare``'s when given); figures go in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

STAMP = "2026-12-01T00-00-00.000000"


def make_lm_eval(root: Path, tasks: int, docs: int) -> Path:
    out = root / "lm" / "dummy"
    out.mkdir(parents=True)
    rng = random.Random(0)
    results, configs = {}, {}
    for t in range(tasks):
        name = f"task{t:02d}"
        correct = correct_norm = 0
        lines = []
        for d in range(docs):
            choices = [f"choice {c} of doc {d}" + "x" * rng.randrange(5) for c in range(4)]
            ll = [-rng.random() * 5 for _ in choices]
            gold = rng.randrange(4)
            acc = float(max(range(4), key=ll.__getitem__) == gold)
            norm = [v / len(c) for v, c in zip(ll, choices)]
            acc_norm = float(max(range(4), key=norm.__getitem__) == gold)
            correct += acc
            correct_norm += acc_norm
            ctx = f"Question {d} of {name}?"
            lines.append(
                json.dumps(
                    {
                        "doc_id": d,
                        "doc": {"question": ctx, "choices": choices, "answer": gold},
                        "target": str(gold),
                        "arguments": {f"gen_args_{i}": {"arg_0": ctx, "arg_1": " " + c} for i, c in enumerate(choices)},
                        "resps": [[[str(v), "False"]] for v in ll],
                        "filtered_resps": [[str(v), "False"] for v in ll],
                        "filter": "none",
                        "metrics": ["acc", "acc_norm"],
                        "doc_hash": hashlib.sha256(ctx.encode()).hexdigest(),
                        "prompt_hash": hashlib.sha256(("p" + ctx).encode()).hexdigest(),
                        "target_hash": hashlib.sha256(str(gold).encode()).hexdigest(),
                        "acc": acc,
                        "acc_norm": acc_norm,
                    }
                )
            )
        (out / f"samples_{name}_{STAMP}.jsonl").write_text("\n".join(lines) + "\n")
        results[name] = {
            "alias": name,
            "acc,none": correct / docs,
            "acc_stderr,none": 0.0,
            "acc_norm,none": correct_norm / docs,
            "acc_norm_stderr,none": 0.0,
        }
        configs[name] = {"task": name, "output_type": "multiple_choice", "target_delimiter": " "}
    (out / f"results_{STAMP}.json").write_text(
        json.dumps(
            {
                "results": results,
                "configs": configs,
                "versions": dict.fromkeys(results, 1.0),
                "n-shot": dict.fromkeys(results, 0),
                "n-samples": {t: {"original": docs, "effective": docs} for t in results},
                "config": {"model": "dummy", "model_args": "", "bootstrap_iters": 0, "random_seed": 0},
                "lm_eval_version": "0.4.13",
                "date": 1796119157.8,
                "total_evaluation_time_seconds": "1.0",
            }
        )
    )
    return root / "lm"


def make_inspect(root: Path, samples: int, epochs: int) -> Path:
    import zipfile_zstd  # noqa: F401  (adds zstd, method 93, to zipfile, as inspect_ai does)

    path = root / "big.eval"
    rng = random.Random(1)
    reduced = []
    with zipfile.ZipFile(path, "w", compression=93) as z:
        for i in range(samples):
            vals = []
            for e in range(1, epochs + 1):
                v = "C" if rng.random() < 0.6 else "I"
                vals.append(1.0 if v == "C" else 0.0)
                z.writestr(
                    f"samples/s{i}_epoch_{e}.json",
                    json.dumps(
                        {
                            "id": f"s{i}",
                            "epoch": e,
                            "input": f"Question {i}?",
                            "target": "yes",
                            "messages": [{"role": "user", "content": f"Question {i}?", "source": "input"}],
                            "output": {
                                "model": "mockllm/model",
                                "choices": [],
                                "completion": "yes" if v == "C" else "no",
                            },
                            "scores": {"includes": {"value": v, "answer": "yes" if v == "C" else "no", "history": []}},
                            "metadata": {"cluster": f"c{i // 10}"},
                            "store": {},
                            "events": [],
                        }
                    ),
                )
            reduced.append({"value": sum(vals) / len(vals), "sample_id": f"s{i}"})
        mean = sum(r["value"] for r in reduced) / len(reduced)
        z.writestr("reductions.json", json.dumps([{"scorer": "includes", "samples": reduced}]))
        z.writestr(
            "header.json",
            json.dumps(
                {
                    "version": 2,
                    "status": "success",
                    "eval": {
                        "eval_id": "bench",
                        "run_id": "bench",
                        "created": "2026-12-01T00:00:00+00:00",
                        "task": "big",
                        "task_id": "big",
                        "task_version": 0,
                        "dataset": {"samples": samples},
                        "model": "mockllm/model",
                        "config": {"epochs": epochs},
                        "packages": {"inspect_ai": "0.3.285"},
                    },
                    "plan": {"name": "plan", "steps": []},
                    "results": {
                        "total_samples": samples * epochs,
                        "completed_samples": samples * epochs,
                        "scores": [
                            {
                                "name": "includes",
                                "scorer": "includes",
                                "scored_samples": samples,
                                "unscored_samples": 0,
                                "params": {},
                                "metrics": {"accuracy": {"name": "accuracy", "value": mean, "params": {}}},
                            }
                        ],
                    },
                    "stats": {"started_at": "2026-12-01T00:00:00+00:00", "completed_at": "2026-12-01T00:01:00+00:00"},
                }
            ),
        )
    return path


CHILD = {
    "labledger": "from labledger.importers import import_path; import sys; import_path(sys.argv[1], sys.argv[2])",
    "lm_eval": (
        "import sys, os, json; os.environ['HF_DATASETS_OFFLINE']='1'; from pathlib import Path;"
        "from lm_eval.utils import get_results_filenames, get_sample_results_filenames; import datasets;"
        "files=[str(p) for p in Path(sys.argv[1]).rglob('*')];"
        "[json.load(open(f)) for f in get_results_filenames(files)];"
        "ds=datasets.load_dataset('json', data_files=get_sample_results_filenames(files),"
        " cache_dir=sys.argv[2]); print(len(ds['train']))"
    ),
    "inspect_ai": "import sys; from inspect_ai.log import read_eval_log; log=read_eval_log(sys.argv[1]); print(len(log.samples))",
}


def measure(kind: str, *args: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one child process (the child reports its own peak)."""
    code = CHILD[kind] + "\nimport resource as _r; print('RSS', _r.getrusage(_r.RUSAGE_SELF).ru_maxrss)"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rss = next(int(x.split()[1]) for x in out.stdout.splitlines() if x.startswith("RSS "))
    return wall, cpu, rss / 1024


def measure_import_only(path: Path, ledger: Path, src: str | None = None) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MiB of the import itself, in a child, without interpreter and
    module start-up; ``src`` puts another checkout's ``src`` first on the path (``--compare``).
    CPU counts the import's worker processes too (they are joined before it returns), and peak is
    the largest of the import's process and its workers."""
    code = (
        "import sys, time, resource; from labledger.importers import import_path; import labledger.importers.lm_eval;"
        "t=time.perf_counter(); c=time.process_time(); import_path(sys.argv[1], sys.argv[2]);"
        "w=resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(time.perf_counter()-t, time.process_time()-c+w.ru_utime+w.ru_stime,"
        " max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, w.ru_maxrss))"
    )
    env = {**os.environ, "PYTHONPATH": src} if src else None
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(ledger)], check=True, capture_output=True, text=True, env=env
    )
    wall, cpu, rss = map(float, out.stdout.split())
    return wall, cpu, rss / 1024


def set_digests(ledger: Path) -> dict[str, str]:
    """``{result set: sha256 of its stored results.jsonl}`` over every run of a ledger."""
    out = {}
    for f in ledger.rglob("evals/*/results.jsonl"):
        out[f.parent.name] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def mb(p: Path) -> float:
    """Size of a file or folder in MiB."""
    files = [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p]
    return sum(f.stat().st_size for f in files) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=70)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument(
        "--compare", metavar="SRC", help="also time the import with this src folder (e.g. main's), interleaved"
    )
    ap.add_argument("--repeat", type=int, default=1, help="import-only runs per source (and per --compare side)")
    ap.add_argument("--no-peers", action="store_true", help="skip the harnesses' own readers")
    ap.add_argument("--data", metavar="DIR", help="generate the files here once and reuse them on later runs")
    a = ap.parse_args()
    data = Path(a.data) if a.data else Path(tempfile.mkdtemp(prefix="harness-bench-"))
    lm, ev = data / "lm", data / "big.eval"
    t0 = time.perf_counter()
    if not (lm.exists() and ev.exists()):
        data.mkdir(parents=True, exist_ok=True)
        lm = make_lm_eval(data, a.tasks, a.docs)
        ev = make_inspect(data, a.samples, a.epochs)
        print(f"generated in {time.perf_counter() - t0:.1f} s: {data}")
    else:
        print(f"reusing {data} (made by an earlier run with --data)")
    root = Path(tempfile.mkdtemp(prefix="harness-bench-ledgers-"))
    print(f"load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    rows = []
    sides = [("this", None)] + ([("compare", a.compare)] if a.compare else [])
    best: dict[tuple[str, str], tuple[float, float, float]] = {}
    digests: dict[tuple[str, str], dict[str, str]] = {}
    k = 0
    for label, path, n, own in (
        (f"lm-eval {a.tasks} tasks x {a.docs} docs", lm, a.tasks * a.docs, "lm_eval"),
        (f"inspect {a.samples} samples x {a.epochs} epochs", ev, a.samples * a.epochs, "inspect_ai"),
    ):
        load = os.getloadavg()[0]
        w, c, rss = measure("labledger", str(path), str(root / f"ledger-{own}"))
        for _ in range(a.repeat):
            for side, src in sides:
                k += 1
                r = measure_import_only(path, root / f"ledger{k}", src)
                digests.setdefault((own, side), set_digests(root / f"ledger{k}"))
                print(
                    f"  {own} {side}: import {r[0]:.2f} s wall, {r[1]:.2f} s CPU, {r[2]:.0f} MiB (load {os.getloadavg()[0]:.1f})"
                )
                if (own, side) not in best or r[1] < best[own, side][1]:
                    best[own, side] = r
        iw, ic, irss = best[own, "this"]
        hw, hc, hrss = (float("nan"),) * 3 if a.no_peers else measure(own, str(path), str(root / "hf-cache"))
        rows.append((label, n, mb(path), load, w, c, rss, iw, ic, irss, n / ic, own, hw, hc, hrss))
    print()
    head = (
        "source",
        "samples",
        "MiB",
        "load",
        "labledger wall s",
        "CPU s",
        "peak MiB",
        "import-only wall s",
        "CPU s",
        "peak MiB",
        "samples/CPU s",
        "harness reader",
        "wall s",
        "CPU s",
        "peak MiB",
    )
    print(" | ".join(head))
    for r in rows:
        print(" | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in r))
    total_n = sum(r[1] for r in rows)
    total_w = sum(r[7] for r in rows)
    total_c = sum(r[8] for r in rows)
    print(
        f"\ntotal: {total_n:,} samples imported in {total_w:.2f} s wall, {total_c:.2f} s CPU "
        f"({total_n / total_c:,.0f} samples per CPU second; goal: 100,000 in <= 3 s)"
    )
    if a.compare:
        other = sum(best[own, "compare"][1] for own in ("lm_eval", "inspect_ai"))
        print(f"compare ({a.compare}): {other:.2f} s CPU for the same imports (best of {a.repeat})")
        for own in ("lm_eval", "inspect_ai"):
            mine, theirs = digests[own, "this"], digests[own, "compare"]
            same = sum(mine[k] == theirs.get(k) for k in mine)
            print(
                f"  {own}: {same} of {len(mine)} stored result sets byte-identical to compare's ({len(theirs)} there)"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
