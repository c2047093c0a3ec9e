"""`labledger contamination`'s overlap search at many training samples: CPU, wall and peak memory (#45).

Training samples are word sequences of 30 words from a 20,000-word vocabulary, made on the fly (a
generator, as a run's samples are read); the evaluation is 10,000 items of 20 words, 1% of them
copied into the training stream. labledger's streamed search (`find_overlap`: the eval n-grams held,
the samples hashed in chunks and let go) runs beside the way a script does it by hand: every
training 13-gram in a Python set, then each eval item looked up (lm-eval's decontamination builds
such an index of the training set), measured at the same sample count in a child process each.

    python bench/contamination.py                       # 1M samples each, then labledger at 10M
    python bench/contamination.py --samples 200000 --big 0
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
VOCAB = 20_000
ITEMS = 10_000


def _data(samples: int):
    import numpy as np

    rng = np.random.default_rng(0)
    items = [" ".join(f"w{j}" for j in rng.integers(0, VOCAB, 20)) for _ in range(ITEMS)]
    leak = {int(k): items[int(i)] for k, i in zip(rng.integers(0, samples, ITEMS // 100), range(ITEMS // 100))}

    def train():
        r = np.random.default_rng(1)
        for k in range(samples):
            if k in leak:
                yield leak[k]
            else:
                yield " ".join(f"w{j}" for j in r.integers(0, VOCAB, 30).tolist())

    return items, train


def child(way: str, samples: int) -> None:
    sys.path.insert(0, SRC)
    from labledger.analysis.contamination import find_overlap, words

    items, train = _data(samples)
    c0, w0 = time.process_time(), time.perf_counter()
    if way == "labledger":
        found = int(find_overlap(train(), items).overlapping.sum())
    else:
        grams: set[tuple[str, ...]] = set()
        for text in train():
            w = words(text)
            grams.update(tuple(w[i : i + 13]) for i in range(len(w) - 12))
        found = sum(any(tuple(w[i : i + 13]) in grams for i in range(len(w) - 12)) for w in map(words, items))
    out = {
        "way": way,
        "samples": samples,
        "cpu_s": time.process_time() - c0,
        "wall_s": time.perf_counter() - w0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "found": found,
    }
    print(json.dumps(out))


def _run(way: str, samples: int) -> dict:
    p = subprocess.run(
        [sys.executable, __file__, "--child", way, "--samples", str(samples)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--big", type=int, default=10_000_000, help="labledger alone at this many samples (0: skip)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.samples)
        return
    print(f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    rows = [_run("labledger", a.samples), _run("python set", a.samples)]
    if a.big:
        rows.append(_run("labledger", a.big))
    print("| way | training samples | CPU s | wall s | peak RSS MiB | items found (of 100 copied) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['way']} | {r['samples']:,} | {r['cpu_s']:.1f} | {r['wall_s']:.1f} | {r['peak_rss_mib']:.0f} | {r['found']} |"
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
