"""Soup of three checkpoints: labledger's streamed average against the obvious way.

    python bench/soup.py            # three 1 GB safetensors files (float32), in a temp folder
    python bench/soup.py --gb 0.2   # smaller, for a quick look

"The obvious way" loads all three state dicts with ``torch.load`` and averages them in a dict
comprehension (what seed 001's ``average-checkpoints.py`` does). Each side runs in a fresh
subprocess; memory is sampled from /proc/self/status every 20 ms: anonymous RSS (heap and tensors:
what the process really needs) and file-backed RSS (memory-mapped checkpoint pages, which the
kernel can drop at any time), plus the kernel's own peak RSS (VmHWM, both together).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WEIGHTS = (0.08, 0.32, 0.60)

CHILD = r"""
import json, os, sys, threading, time
peak = {"anon": 0, "file": 0}
stop = False
def sample():
    while not stop:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    peak["anon"] = max(peak["anon"], int(line.split()[1]))
                elif line.startswith("RssFile:"):
                    peak["file"] = max(peak["file"], int(line.split()[1]))
        time.sleep(0.02)
import torch
threading.Thread(target=sample, daemon=True).start()
mode, out, *inputs = sys.argv[1:]
weights = [0.08, 0.32, 0.60]
t0 = time.perf_counter()
if mode == "idle":
    pass
elif mode == "labledger":
    from labledger.analysis.checkpoints import soup
    soup(inputs, weights, out)
else:
    sds = [torch.load(p, map_location="cpu", weights_only=True) for p in inputs]
    avg = {k: sum(w * sd[k].float() for w, sd in zip(weights, sds)).to(sds[0][k].dtype) for k in sds[0]}
    torch.save(avg, out)
elapsed = time.perf_counter() - t0
time.sleep(0.05)
stop = True
hwm = 0
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
print(json.dumps({"seconds": elapsed, "anon_kib": peak["anon"], "file_kib": peak["file"], "hwm_kib": hwm}))
"""


def make_inputs(folder: Path, gb: float, fmt: str) -> list[Path]:
    import torch
    from safetensors.torch import save_file

    per_tensor = 4 * 2**20  # 4M float32 = 16 MiB
    n_tensors = max(1, int(gb * 2**30 / (per_tensor * 4)))
    paths = []
    for i in range(3):
        g = torch.Generator().manual_seed(i)
        sd = {f"layers.{j}.weight": torch.randn(per_tensor, generator=g) for j in range(n_tensors)}
        sd["step"] = torch.tensor(1000, dtype=torch.int64)
        path = folder / f"ckpt{i}.{fmt}"
        if fmt == "safetensors":
            save_file(sd, str(path))
        else:
            torch.save(sd, path)
        paths.append(path)
        del sd
    return paths


def run(mode: str, out: Path, inputs: list[Path]) -> dict:
    res = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(out), *map(str, inputs)], capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="size of each input checkpoint in GiB (default 1)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        st = make_inputs(tmp, args.gb, "safetensors")
        pt = make_inputs(tmp, args.gb, "pt")
        size = st[0].stat().st_size
        print(
            f"inputs: 3 x {size / 2**30:.2f} GiB float32 (safetensors and .pt), written in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        rows = [
            ("python + torch imported, nothing else (baseline)", run("idle", tmp / "x", st)),
            ("labledger soup, safetensors in, safetensors out", run("labledger", tmp / "a.safetensors", st)),
            ("labledger soup, .pt in (mmap), .pt out", run("labledger", tmp / "b.pt", pt)),
            ("torch.load x3 + dict average, .pt (the obvious way)", run("obvious", tmp / "c.pt", pt)),
        ]
    gib = 2**20
    print()
    print(
        "| soup of 3 x %.2f GiB | time (s) | peak anonymous RSS (GiB) | peak file-backed RSS (GiB) | VmHWM (GiB) |"
        % (size / 2**30)
    )
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        print(
            f"| {name} | {r['seconds']:.1f} | {r['anon_kib'] / gib:.2f} | {r['file_kib'] / gib:.2f} | "
            f"{r['hwm_kib'] / gib:.2f} |"
        )
    idle, base = rows[0][1]["anon_kib"], rows[3][1]
    for name, r in rows[1:3]:
        print(
            f"\n{name}: {(base['anon_kib'] - idle) / max(r['anon_kib'] - idle, 1):.1f}x less anonymous memory "
            f"above the baseline ({(r['anon_kib'] - idle) / gib:.2f} vs {(base['anon_kib'] - idle) / gib:.2f} GiB; "
            f"the output is {size / 2**30:.2f} GiB), {base['seconds'] / r['seconds']:.1f}x the speed of the "
            f"obvious way"
        )


if __name__ == "__main__":
    main()
