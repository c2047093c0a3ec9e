"""Multi-resolution summaries of every logged scalar, for the curves page (issue 12).

A scalar logged at a million steps cannot be drawn point by point, and drawing every k-th point
loses the spikes. The builder keeps each scalar as levels of buckets instead: a bucket covers
``width`` consecutive steps (``[b * width, (b + 1) * width)``) and stores the count of finite
values, their min, max and mean, the last value, whether the min came before the max, and the run's
relative time and examples seen at the bucket's last record. The top level has at most
:data:`TOP_BUCKETS` buckets (its width is the smallest power of two that fits the steps); each
finer level is :data:`LEVEL_FACTOR` times narrower, down to one step per bucket. Widths are powers
of two counted from step 0, so the buckets of runs of any length line up, and a page can merge a
fine level into a coarse one exactly (min of mins, max of maxes, mean weighted by counts).

Files (``data/curves/<run>/``)::

    <k>.js            the k-th scalar of the run (the order of the catalog's ``scalars``): its
                      widths, the bucket range of each chunk of the finer levels, and the top level
    <k>/<l>-<c>.js    chunk c of level l (at most CHUNK_BUCKETS non-empty buckets), loaded on zoom

Columns of a level (lists of equal length, only non-empty buckets): ``b`` bucket index, ``n``
finite values, ``mean``, then ``min``, ``max``, ``last`` and ``minfirst`` (1 when the min came
first) unless every bucket holds one value (then they equal ``mean`` and are left out), ``rt``
seconds since the run started at the bucket's last record, and ``ex`` examples seen there (when
the run logs ``examples_seen``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

import numpy as np

from labledger.site.output import SiteWriter

#: At most this many buckets at the top level of a scalar.
TOP_BUCKETS = 2000
#: Each finer level has buckets this many times narrower.
LEVEL_FACTOR = 8
#: Non-empty buckets per file of a finer level.
CHUNK_BUCKETS = 2000
#: Scalars that count the examples seen so far (the curves page's "examples seen" x axis).
EXAMPLE_KEYS = ("examples_seen", "examples", "samples_seen")


def _number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def collect(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, dict[str, list[float]]], str | None]:
    """Per scalar (first-seen order) its steps, values, times and examples seen, and the examples key.

    >>> series, ex = collect([{"step": 1, "time": 5.0, "loss": 0.5, "examples_seen": 32}])
    >>> series["loss"]["v"], series["loss"]["e"], ex
    ([0.5], [32.0], 'examples_seen')
    """
    out: dict[str, dict[str, list[float]]] = {}
    ex_key: str | None = None
    for rec in records:
        step = rec.get("step")
        if not _number(step):
            continue
        t = rec.get("time")
        t = float(t) if _number(t) else math.nan
        if ex_key is None:
            ex_key = next((k for k in EXAMPLE_KEYS if _number(rec.get(k))), None)
        e = rec.get(ex_key) if ex_key is not None else None
        e = float(e) if _number(e) else math.nan
        for key, value in rec.items():
            if key in ("step", "time") or not (_number(value) or value is None):
                continue
            s = out.get(key)
            if s is None:
                s = out[key] = {"s": [], "v": [], "t": [], "e": []}
            s["s"].append(float(step))
            s["v"].append(math.nan if value is None else float(value))
            s["t"].append(t)
            s["e"].append(e)
    return out, ex_key


def top_width(last_step: float) -> int:
    """The top level's bucket width: the smallest power of two with at most TOP_BUCKETS buckets.

    >>> top_width(999), top_width(99_999), top_width(999_999)
    (1, 64, 512)
    """
    span = max(1.0, math.floor(last_step) + 1)
    return 1 if span <= TOP_BUCKETS else 1 << math.ceil(math.log2(span / TOP_BUCKETS))


def widths_for(last_step: float) -> list[int]:
    """Bucket widths from the top level down to one step.

    >>> widths_for(99_999)
    [64, 8, 1]
    """
    w = top_width(last_step)
    out = [w]
    while w > 1:
        w = max(1, w // LEVEL_FACTOR)
        out.append(w)
    return out


def _clean(a: np.ndarray, digits: int | None = None) -> list[Any]:
    """A float array as a JSON list (NaN -> null, integral values as ints)."""
    if digits is not None:
        a = np.round(a, digits)
    return [None if x != x else (int(x) if x.is_integer() and abs(x) < 2**53 else x) for x in a.tolist()]


def summarize(
    steps: np.ndarray, values: np.ndarray, times: np.ndarray, examples: np.ndarray | None, width: int, started: float
) -> dict[str, list[Any]]:
    """The buckets of one level (see the module docstring); ``steps`` sorted ascending.

    >>> s = summarize(np.array([0., 1, 2, 3]), np.array([1., 9, 2, 4]), np.zeros(4), None, 2, 0.0)
    >>> s["b"], s["min"], s["max"], s["mean"], s["minfirst"]
    ([0, 1], [1, 2], [9, 4], [5, 3], [1, 1])
    """
    b = np.floor(steps / width).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], len(b)] - 1
    finite = np.isfinite(values)
    n = np.add.reduceat(finite.astype(np.int64), starts)
    mean = np.add.reduceat(np.where(finite, values, 0.0), starts) / np.where(n > 0, n, 1)
    mean = np.where(n > 0, mean, np.nan)
    out: dict[str, list[Any]] = {"b": b[starts].tolist(), "n": n.tolist(), "mean": _clean(mean)}
    if int(n.max(initial=0)) > 1 or len(starts) != len(b):
        lo = np.minimum.reduceat(np.where(finite, values, np.inf), starts)
        hi = np.maximum.reduceat(np.where(finite, values, -np.inf), starts)
        lo = np.where(n > 0, lo, np.nan)
        hi = np.where(n > 0, hi, np.nan)
        # where in the bucket the min and the max are: the first position holding each
        seg = np.repeat(np.arange(len(starts)), ends - starts + 1)
        pos = np.arange(len(b))
        at_lo = np.where(finite & (values == lo[seg]), pos, len(b))
        at_hi = np.where(finite & (values == hi[seg]), pos, len(b))
        first_lo = np.minimum.reduceat(at_lo, starts)
        first_hi = np.minimum.reduceat(at_hi, starts)
        out["min"] = _clean(lo)
        out["max"] = _clean(hi)
        out["last"] = _clean(values[ends])
        out["minfirst"] = (first_lo <= first_hi).astype(np.int64).tolist()
    out["rt"] = _clean(times[ends] - started, 3)
    if examples is not None:
        out["ex"] = _clean(examples[ends])
    return out


def _slice(level: dict[str, list[Any]], start: int, stop: int) -> dict[str, list[Any]]:
    return {k: v[start:stop] for k, v in level.items()}


def write_curves(
    writer: SiteWriter, run_id: str, names: list[str], records: Iterable[Mapping[str, Any]], started: float
) -> list[str]:
    """Write the summaries of every scalar of a run; returns the scalar names in file order (k).

    >>> import pathlib, tempfile
    >>> w = SiteWriter(pathlib.Path(tempfile.mkdtemp()) / "site")
    >>> write_curves(w, "r1", ["loss"], [{"step": s, "time": 0.0, "loss": 1 / (s + 1)} for s in range(3000)], 0.0)
    ['loss']
    >>> w.written
    ['data/curves/r1/0/1-0.js', 'data/curves/r1/0/1-1.js', 'data/curves/r1/0.js']
    """
    series, ex_key = collect(records)
    order = [n for n in names if n in series] + [n for n in series if n not in names]
    for k, name in enumerate(order):
        s = series[name]
        steps = np.asarray(s["s"], dtype=np.float64)
        values = np.asarray(s["v"], dtype=np.float64)
        values[~np.isfinite(values)] = np.nan
        times = np.asarray(s["t"], dtype=np.float64)
        examples = np.asarray(s["e"], dtype=np.float64) if ex_key is not None else None
        if len(steps) > 1 and np.any(np.diff(steps) < 0):
            idx = np.argsort(steps, kind="stable")
            steps, values, times = steps[idx], values[idx], times[idx]
            examples = examples[idx] if examples is not None else None
        widths = widths_for(float(steps[-1]) if len(steps) else 0.0)
        chunks: list[list[list[int]] | None] = [None]
        top = summarize(steps, values, times, examples, widths[0], started)
        for level, width in enumerate(widths[1:], start=1):
            buckets = summarize(steps, values, times, examples, width, started)
            ranges = []
            for c, start in enumerate(range(0, len(buckets["b"]), CHUNK_BUCKETS)):
                part = _slice(buckets, start, start + CHUNK_BUCKETS)
                ranges.append([part["b"][0], part["b"][-1]])
                key = f"curves/{run_id}/{k}/{level}-{c}"
                writer.write_data(f"data/{key}.js", key, part)
            chunks.append(ranges)
        payload = {
            "name": name,
            "points": len(steps),
            "first": _clean(steps[:1])[0] if len(steps) else None,
            "last": _clean(steps[-1:])[0] if len(steps) else None,
            "started": started,
            "examples": ex_key,
            "widths": widths,
            "chunks": chunks,
            "top": top,
        }
        writer.write_data(f"data/curves/{run_id}/{k}.js", f"curves/{run_id}/{k}", payload)
    return order
