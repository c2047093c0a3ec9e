#!/usr/bin/env python
"""CLI start-up (issue 19): ``labledger --help``, ``runs``, ``runs --json``, ``show`` against ``python -c pass``.

Each case runs in a fresh process (the ``labledger`` console script of the running interpreter's
environment, else ``python -m labledger``), cases interleaved rep by rep; wall time, CPU time
(user + sys of the child, from ``wait4``) and peak RSS. Then which heavy modules ``labledger --help``
and ``labledger runs`` load (numpy, pyarrow, scipy, rich, the metric registry), from ``sys.modules``.

The ledger is a small one built under ``--dir`` (20 runs of 100 steps). Bytecode is cached (in a
temporary folder) as in a normal install, after one warm-up round. Goal: ``--help`` and
``runs`` <= 0.15 s wall (the review measured 0.30 s, reviews/perf.md section 2).

    python bench/startup.py                 # 7 reps
    python bench/startup.py --reps 15 --markdown
    python bench/startup.py --reps 7 --baseline /work/main/src   # each case also on another checkout
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]  # bench/logging.py

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

GOAL_S = 0.15
HEAVY = ("numpy", "pyarrow", "scipy", "pandas", "rich", "labledger.metrics.registry", "starlette")


def labledger_cmd() -> list[str]:
    script = Path(sys.executable).parent / "labledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "labledger"]


def build_ledger(root: Path, runs: int = 20, steps: int = 100) -> str:
    import labledger

    first = None
    for i in range(runs):
        with labledger.start_run(f"run-{i:02d}", group="bench", config={"lr": 10.0**-i}, ledger=root) as run:
            for step in range(1, steps + 1):
                run.log(step, loss=1.0 / step, lr=1e-3)
        first = first or run.id
    return str(first)


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def heavy_modules(args: list[str], env: dict[str, str]) -> list[str]:
    """The heavy modules loaded once ``labledger ARGS`` has run (in a child process)."""
    code = (
        "import sys, contextlib, io\n"
        "from labledger.cli import main\n"
        "with contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())):\n"
        "    try:\n"
        f"        main({args!r}, prog_name='labledger')\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--dir", default=None, help="where to build the small ledger (default: a temporary folder)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--query-ledger",
        default=None,
        help="a ledger of many runs (bench/runs.py builds one of 10,000): adds its query case, on a copy of its index",
    )
    ap.add_argument(
        "--baseline", help="another checkout's src folder: every labledger case also runs on it, interleaved"
    )
    a = ap.parse_args()
    tmp = Path(a.dir or tempfile.mkdtemp(prefix="labledger-startup-"))
    ledger = tmp / "ledger"
    if ledger.exists():
        shutil.rmtree(ledger)
    run_id = build_ledger(ledger)
    # Compiled bytecode as a user's install has it: this machine sets PYTHONDONTWRITEBYTECODE, which
    # would compile every module from source in every process; the cache goes to a temporary folder.
    env = {**os.environ, "LABLEDGER_DIR": str(ledger), "COLUMNS": "150", "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    lab = labledger_cmd()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "labledger --help": [*lab, "--help"],
        "labledger runs": [*lab, "runs"],
        "labledger runs --json": [*lab, "runs", "--json"],
        "labledger show RUN": [*lab, "show", run_id],
        "labledger show RUN --json": [*lab, "show", run_id, "--json"],
    }
    if a.query_ledger:
        # bench/runs.py's query (#12 goal: <= 0.3 s on 10,000 runs); it reads the index only, so a
        # copy of ledger.db with an empty runs/ folder answers it (and this version's migrations
        # never touch the original).
        qdir = tmp / "query-ledger"
        (qdir / "runs").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(a.query_ledger) / "ledger.db", qdir / "ledger.db")
        cases["runs --where --sort --json (query ledger)"] = [
            *lab,
            "runs",
            "--where",
            "config.lr < 1e-3 and config.opt = 'adam'",
            "--sort",
            "-eval.test.accuracy",
            "--json",
            "--ledger",
            str(qdir),
        ]
    envs = dict.fromkeys(cases, env)
    if a.baseline:
        base_env = {**env, "PYTHONPATH": a.baseline, "PYTHONPYCACHEPREFIX": str(tmp / "pycache-baseline")}
        for name, cmd in list(cases.items()):
            if name != "python -c pass":
                cases[name + " (baseline)"], envs[name + " (baseline)"] = cmd, base_env
        cases = dict(sorted(cases.items(), key=lambda kv: kv[0].removesuffix(" (baseline)")))
    for name, cmd in cases.items():  # warm-up: fills the bytecode cache
        timed(cmd, envs[name])
    load0 = os.getloadavg()[0]
    results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cases}
    for _ in range(a.reps):
        for name, cmd in cases.items():
            wall, cpu, rss, rc = timed(cmd, envs[name])
            if rc != 0:
                raise SystemExit(f"{name}: exit {rc}")
            results[name].append((wall, cpu, rss))
    load1 = os.getloadavg()[0]
    heavy = {
        "labledger --help": heavy_modules(["--help"], env),
        "labledger runs": heavy_modules(["runs"], env),
        "labledger runs --json": heavy_modules(["runs", "--json"], env),
    }
    import labledger

    print(
        f"labledger CLI start-up, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"labledger at {Path(labledger.__file__).parent}; command: {' '.join(lab)}; {a.reps} reps, interleaved")
    print(f"1-min load average {load0:.2f} before, {load1:.2f} after (other processes share these cores)\n")
    header = ("case", "wall best s", "wall median s", "CPU median s", "peak RSS MiB", "goal")
    rows = []
    for name, vals in results.items():
        walls = [v[0] for v in vals]
        cpus = [v[1] for v in vals]
        rss = max(v[2] for v in vals)
        goal = ""
        limit = {"labledger --help": GOAL_S, "labledger runs": GOAL_S}.get(name, 0.3 if "query" in name else None)
        if limit is not None:
            goal = f"<= {limit} s: {'PASS' if statistics.median(walls) <= limit else 'FAIL'}"
        rows.append(
            (
                name,
                f"{min(walls):.3f}",
                f"{statistics.median(walls):.3f}",
                f"{statistics.median(cpus):.3f}",
                f"{rss:.0f}",
                goal,
            )
        )
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print()
    for name, mods in heavy.items():
        print(f"{name}: loads {', '.join(mods) or 'none of ' + ', '.join(HEAVY)}")
    if a.markdown:
        print("\n| " + " | ".join(header) + " |")
        print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    (tmp / "startup.json").write_text(json.dumps({"results": results, "heavy": heavy, "load": [load0, load1]}))
    if not a.dir:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
