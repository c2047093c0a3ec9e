"""A seeded fuzz corpus over every file reader (#17): results, batches, history, tables, recipes
and the importers.

Each case is a valid seed file with one mutation (byte flips, truncation, hostile lines such as
``null``/``[]``/deep nesting/invalid UTF-8/NaN, a BOM, an empty file, duplicated lines, huge
strings). Every read must end in exactly one of two ways: a correct read, or a ``LedgerError``
whose message names the file. Counted as failures: tracebacks (any other exception), errors that
do not name the file, silent accepts (a mutation known to make the file invalid, read without an
error or a damaged-line warning), hangs (over 5 s, cut by SIGALRM) and memory (peak RSS over
500 MB above the start). Signals (a segfault in a C reader) kill this process; the test that
runs it reports them from the exit status.

    python tests/fuzz_readers.py --cases 1200 --seed 0        # the CI corpus (prints JSON counts)
    LABLEDGER_FUZZ_LONG=1 python tests/fuzz_readers.py        # 20,000 cases
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from labledger.errors import DamagedLineWarning, LedgerError

HOSTILE_LINES = [
    (b"null", True),
    (b"[]", True),
    (b"5", True),
    (b'"text"', True),
    (b"{", True),
    (b"\xff\xfe\xfd", True),
    (b'{"id": NaN}', True),
    (b'{"value": Infinity}', True),
    (b"[" * 20000 + b"]" * 20000, True),
    (b'{"id": "\xc3"}', True),
]


def _results_seed() -> bytes:
    rows = []
    for i in range(30):
        p = (i % 7) / 7 + 0.05
        rows.append({"id": f"r{i}", "task": "cls", "gold": "a" if i % 3 else "b", "probs": {"a": p, "b": 1 - p}})
        rows.append({"id": f"s{i}", "task": "bin", "gold": "yes" if i % 2 else "no", "score": p, "positive": "yes"})
        rows.append({"id": f"g{i}", "task": "reg", "gold": float(i), "pred": i + 0.5})
    return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def _batch(mb: int) -> dict[str, Any]:
    import math

    samples = []
    for j in range(3):
        p = 0.2 + 0.1 * j
        probs = {"-1": p, "0": 0.5, "+1": 0.5 - p}
        samples.append(
            {"input": f"text {mb} {j}", "gold": "0", "probabilities": probs, "cross_entropy": -math.log(0.5)}
        )
    return {"microbatch": mb, "optimizer_step": mb, "batch_size": 3, "loss": 0.69, "samples": samples, "time": 1.0}


def _batches_seed() -> bytes:
    return b"".join(orjson.dumps(_batch(mb)) + b"\n" for mb in range(1, 16))


def _history_seed() -> bytes:
    return b"".join(orjson.dumps({"step": s, "loss": 1.0 / s, "lr": 0.001}) + b"\n" for s in range(1, 30))


def _table_jsonl_seed() -> bytes:
    rows = [
        {"model": m, "suite": "s", "benchmark": f"b{i}", "metric": "accuracy", "value": 0.5 + i / 100, "n": 100}
        for m in ("base", "v2")
        for i in range(8)
    ]
    return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def _table_csv_seed() -> bytes:
    lines = ["model,suite,benchmark,metric,value,n"]
    lines += [f"{m},s,b{i},accuracy,{0.5 + i / 100},100" for m in ("base", "v2") for i in range(8)]
    return ("\n".join(lines) + "\n").encode()


def _recipe_seed() -> bytes:
    from labledger.calibrate.recipe import Recipe, Step, TaskRecipe

    return Recipe({"cls": TaskRecipe([Step("temperature", {"T": 2.0})])}).to_toml().encode()


def mutate(data: bytes, rng: random.Random, *, lines: bool) -> tuple[bytes, str, bool]:
    """``(mutated bytes, mutation name, known invalid)``."""
    choice = rng.randrange(11 if lines else 6)
    if choice == 0:
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b), "flip", False
    if choice == 1:
        return data[: rng.randrange(len(data))], "truncate", False
    if choice == 2:
        return b"", "empty", True
    if choice == 3:
        return b"\xef\xbb\xbf" + data, "bom", lines
    if choice == 4:
        cut = rng.randrange(len(data))
        return data[:cut] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + data[cut:], "insert", False
    if choice == 5:
        return data + b"x" * rng.choice([10, 1 << 20]), "tail", False
    split = data.split(b"\n")
    if choice == 6:
        hostile, invalid = rng.choice(HOSTILE_LINES)
        split.insert(rng.randrange(len(split)), hostile)
        return b"\n".join(split), "hostile-line", invalid
    if choice == 7:
        i = rng.randrange(max(1, len(split) - 1))
        split.insert(i, split[i])
        return b"\n".join(split), "duplicate", False
    if choice == 8:
        return data.replace(b"0.5", b"NaN", 1), "nan", b"0.5" in data
    if choice == 9:
        i = rng.randrange(max(1, len(split) - 1))
        split[i] = split[i].replace(b'"', b"\xff", 1) if b'"' in split[i] else split[i]
        return b"\n".join(split), "bad-utf8", False
    big = b'{"id": "' + b"z" * rng.choice([1000, 5 << 20]) + b'"}'
    split.insert(rng.randrange(len(split)), big)
    return b"\n".join(split), "huge-line", True


# -- readers: each returns normally (a correct read) or raises ---------------------------------------
def read_results(path: Path) -> None:
    from labledger.inputs.results import read_results as rr

    rr(path)


def read_batches(path: Path) -> None:
    from labledger.inputs.records import validate_batch
    from labledger.store.jsonl import iter_decoded

    last = None
    for lineno, _, rec in iter_decoded(path):
        last = validate_batch(rec, last_microbatch=last, source=str(path), line=lineno)


def read_history(path: Path) -> None:
    from labledger.store.jsonl import read_jsonl

    for rec in read_jsonl(path):
        assert isinstance(rec, dict)


def read_table(path: Path) -> None:
    from labledger.analysis.benchmarks import import_records

    import_records(path)


def read_recipe(path: Path) -> None:
    from labledger.calibrate.recipe import Recipe

    Recipe.load(path)


def import_results(path: Path) -> None:
    from labledger.importers import import_path

    import_path(path, path.parent / "ledger", fmt="results")


def import_seed_run(path: Path) -> None:
    from labledger.importers import import_path

    import_path(path.parent, path.parent.parent / "ledger", fmt="seed-run")


#: (reader, file name, seed, line-based, strict: a known-invalid mutation must be an error)
READERS = [
    (read_results, "results.jsonl", _results_seed, True, True, 30),
    (read_batches, "batches.jsonl", _batches_seed, True, False, 14),
    (read_history, "history.jsonl", _history_seed, True, False, 8),
    (read_table, "table.jsonl", _table_jsonl_seed, True, True, 14),
    (read_table, "table.csv", _table_csv_seed, False, True, 8),
    (read_recipe, "recipe.toml", _recipe_seed, False, False, 8),
    (import_results, "results.jsonl", _results_seed, True, True, 8),
    (import_seed_run, "batches.jsonl", _batches_seed, True, False, 10),
]


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def run(cases: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    seeds = {name: fn() for _, name, fn, *_ in READERS}
    weights = [w for *_, w in READERS]
    counts: Counter[str] = Counter()
    failures: list[str] = []
    signal.signal(signal.SIGALRM, _alarm)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    slowest = 0.0
    with tempfile.TemporaryDirectory(prefix="labledger-fuzz-") as tmp:
        for i in range(cases):
            reader, name, _, lines, strict, _ = rng.choices(READERS, weights)[0]
            data, how, invalid = mutate(seeds[name], rng, lines=lines)
            folder = Path(tmp) / f"c{i}" / "src"
            folder.mkdir(parents=True)
            path = folder / name
            path.write_bytes(data)
            outcome = "ok"
            detail = ""
            started = time.monotonic()
            signal.alarm(5)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    reader(path)
                damaged = any(issubclass(w.category, DamagedLineWarning) and name in str(w.message) for w in caught)
                # strict readers (inputs) must refuse an invalid file, or at least say which line they
                # left out; lenient ones (the ledger's own record files) skip a damaged line with a warning
                must_flag = invalid and (strict or how in ("hostile-line", "nan", "bom"))
                if must_flag and not damaged and not (how == "empty" and not strict):
                    outcome, detail = "silent_accept", how
            except Hang:
                outcome, detail = "hang", how
            except LedgerError as exc:
                outcome = "clean_error" if name in str(exc) or str(folder) in str(exc) else "unnamed_error"
                detail = f"{how}: {exc}"[:300]
            except Exception as exc:  # noqa: BLE001 - what the fuzz is here to find
                outcome, detail = "traceback", f"{how}: {type(exc).__name__}: {exc}"[:300]
            finally:
                signal.alarm(0)
            slowest = max(slowest, time.monotonic() - started)
            counts[outcome] += 1
            counts[f"{reader.__name__}:{outcome}"] += 1
            if outcome not in ("ok", "clean_error"):
                failures.append(f"case {i} {reader.__name__} {name}: {outcome} ({detail})")
            import shutil

            shutil.rmtree(Path(tmp) / f"c{i}", ignore_errors=True)
    peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss) / 1024
    return {
        "cases": cases,
        "seed": seed,
        "counts": dict(sorted(counts.items())),
        "failures": failures[:50],
        "slowest_s": round(slowest, 3),
        "peak_rss_growth_mb": round(peak_mb, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    long = os.environ.get("LABLEDGER_FUZZ_LONG") == "1"
    parser.add_argument("--cases", type=int, default=20000 if long else 1200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.stdout.buffer.write(orjson.dumps(run(args.cases, args.seed), option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    main()
