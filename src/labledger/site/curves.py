"""Multi-resolution summaries of every logged scalar, for the run page and the curves page
(issues 12 and 47).

A scalar logged at millions of steps cannot be drawn point by point, and drawing every k-th point
loses the spikes. The builder keeps each scalar as levels of buckets instead: a bucket covers
``width`` consecutive steps (``[b * width, (b + 1) * width)``) and stores the count of finite
values, their min, max and mean, the last value, whether the min came before the max, and the run's
relative time and examples seen at the bucket's last record. The top level has at most
:data:`TOP_BUCKETS` buckets (its width is the smallest power of two that fits the steps); each
finer level is :data:`LEVEL_FACTOR` times narrower (up to 15 times for the last), down to one step
per bucket, except that the levels stop before one would hold more than :data:`FINE_BUCKETS` buckets (a 14M-step scalar:
widths 8192, 1024, 128; zoomed in all the way, a bucket of 128 steps still shows its min and max,
so no spike is lost, and the page names the steps it covers). Widths are powers of two counted from
step 0, so the buckets of runs of any length line up, and a page can merge a fine level into a
coarse one exactly (min of mins, max of maxes, mean weighted by counts).

Order: records are taken in the order of their steps, records of the same step in the order they
were logged (a stable sort by step). The builder never sorts: each bucket keeps, with its min, its
max and its last value, the (step, record number) where they were, and two partial buckets merge by
comparing those, so the records can be read once, in file order, a block at a time
(:func:`scan_curves`). Memory: one dense array of buckets per scalar at the finest width the data
allows (at most about ``2 * FINE_BUCKETS`` buckets of 120 bytes), coarsened two by two as the steps
grow; a run whose scalars need more than :data:`PASS_BYTES` together is read again for the rest.

Files::

    data/curves/<run>.js          the run's curve file: ``scalars``, one entry per scalar in the
                                  order of the catalog's ``scalars`` (the k-th: scalar k); an entry
                                  is the scalar's summaries (below) when they are one level and fit
                                  the file (:data:`INLINE_BYTES` of summaries at most), else
                                  ``{"name", "own": true}``: they are in the run's folder
    data/curves/<run>/<k>.js      scalar k's summaries, when not in the run's curve file
    data/curves/<run>/<k>/<l>-<c>.js   chunk c of level l (at most CHUNK_BUCKETS non-empty
                                  buckets), loaded on zoom

A scalar's summaries: its name, the number of records (``points``), its first and last step, the
run's start time, the examples key, the ``widths`` of its levels, the bucket range of each chunk of
the finer levels (``chunks``) and the top level (``top``). A short run (every scalar's steps fit
the top level at one step a bucket, as long as the summaries fit :data:`INLINE_BYTES`) is one file;
a long one keeps a file per scalar and per chunk, so that a page loads the top levels of the
scalars it draws and, on zoom, the chunks of the range it shows.

Columns of a level (lists of equal length, only non-empty buckets): ``b`` bucket index, ``n``
finite values, ``mean``, then ``min``, ``max``, ``last`` and ``minfirst`` (1 when the min came
first) unless every bucket holds one record (then they equal ``mean`` and are left out), ``rt``
seconds since the run started at the bucket's last record, and ``ex`` examples seen there (when
the run logs ``examples_seen``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from labledger.errors import SiteError
from labledger.site.output import SiteWriter, dumps, load_data_file

#: At most this many buckets at the top level of a scalar.
TOP_BUCKETS = 2000
#: Each finer level has buckets this many times narrower.
LEVEL_FACTOR = 8
#: Non-empty buckets per file of a finer level.
CHUNK_BUCKETS = 2000
#: Bytes of summaries the run's curve file holds at most: a scalar of one level goes in while it
#: fits (the curves page, which draws one scalar of many runs, loads the whole file of each run).
INLINE_BYTES = 64 << 10
#: The levels stop before one would span more buckets than this (about 20 MB of files per scalar).
FINE_BUCKETS = 1 << 18
#: Scalars that count the examples seen so far (the curves page's "examples seen" x axis).
EXAMPLE_KEYS = ("examples_seen", "examples", "samples_seen")
#: Records read before their values are folded into the buckets.
BLOCK_RECORDS = 1 << 16
#: Bucket arrays of all scalars summarised in one reading of the records; beyond, another reading.
PASS_BYTES = 384 << 20

# Rows of a bucket array (float64 each): records, finite values, their sum; the min with the step
# and record number where it first was; the max likewise; the last value, its step and record
# number, the time and the examples seen there.
_CNT, _N, _SUM, _LO, _LO_S, _LO_Q, _HI, _HI_S, _HI_Q, _LAST, _LAST_S, _LAST_Q, _T, _EX = range(14)
_ROWS = 14
_EMPTY = np.array(
    [0, 0, 0, np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, np.nan, -np.inf, -np.inf, np.nan, np.nan]
).reshape(_ROWS, 1)


def _number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def top_width(last_step: float) -> int:
    """The top level's bucket width: the smallest power of two with at most TOP_BUCKETS buckets.

    >>> top_width(999), top_width(99_999), top_width(999_999)
    (1, 64, 512)
    """
    span = max(1.0, math.floor(last_step) + 1)
    return 1 if span <= TOP_BUCKETS else 1 << math.ceil(math.log2(span / TOP_BUCKETS))


def _span(first: float, last: float, width: int) -> int:
    """Buckets of ``width`` steps from the one holding ``first`` to the one holding ``last``."""
    return int(math.floor(last / width) - math.floor(first / width)) + 1


def widths_for(last_step: float, first_step: float = 0.0) -> list[int]:
    """Bucket widths from the top level down: each :data:`LEVEL_FACTOR` times narrower, down to one
    step (a level narrower than LEVEL_FACTOR steps goes straight to one: it would be nearly as
    large), stopping before a level would span more than :data:`FINE_BUCKETS` buckets.

    >>> widths_for(99_999), widths_for(199_999), widths_for(13_999_999)
    ([64, 8, 1], [128, 16, 1], [8192, 1024, 128])
    """
    w = top_width(last_step)
    out = [w]
    while w > 1:
        w = w // LEVEL_FACTOR if w // LEVEL_FACTOR >= LEVEL_FACTOR else 1
        if _span(first_step, last_step, w) > FINE_BUCKETS:
            break
        out.append(w)
    return out


def _before(s1: np.ndarray, q1: np.ndarray, s2: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Whether (step, record number) ``(s1, q1)`` comes before ``(s2, q2)``."""
    return (s1 < s2) | ((s1 == s2) & (q1 < q2))


def _merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Buckets ``a`` and ``b`` (aligned columns) merged into one: what the buckets of all their
    records are, whatever order the two were filled in."""
    out = a.copy()
    out[_CNT] += b[_CNT]
    out[_N] += b[_N]
    out[_SUM] += b[_SUM]
    lo = (b[_LO] < a[_LO]) | ((b[_LO] == a[_LO]) & _before(b[_LO_S], b[_LO_Q], a[_LO_S], a[_LO_Q]))
    out[_LO : _LO_Q + 1, lo] = b[_LO : _LO_Q + 1, lo]
    hi = (b[_HI] > a[_HI]) | ((b[_HI] == a[_HI]) & _before(b[_HI_S], b[_HI_Q], a[_HI_S], a[_HI_Q]))
    out[_HI : _HI_Q + 1, hi] = b[_HI : _HI_Q + 1, hi]
    last = _before(a[_LAST_S], a[_LAST_Q], b[_LAST_S], b[_LAST_Q])
    out[_LAST:, last] = b[_LAST:, last]
    return out


def _points(s: np.ndarray, v: np.ndarray, t: np.ndarray, e: np.ndarray, q: np.ndarray, width: int) -> tuple:
    """The buckets of ``width`` steps that records (steps, values, times, examples, record numbers)
    fill: ``(bucket indices, bucket columns)``."""
    if len(s) > 1 and np.any(s[1:] < s[:-1]):
        order = np.argsort(s, kind="stable")  # record numbers rise within a block: (step, record)
        s, v, t, e, q = s[order], v[order], t[order], e[order], q[order]
    b = np.floor(s / width).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], len(b)] - 1
    finite = np.isfinite(v)
    cols = np.empty((_ROWS, len(starts)))
    cols[_CNT] = np.diff(np.r_[starts, len(b)])
    cols[_N] = np.add.reduceat(finite.astype(np.float64), starts)
    cols[_SUM] = np.add.reduceat(np.where(finite, v, 0.0), starts)
    seg = np.repeat(np.arange(len(starts)), ends - starts + 1)
    pos = np.arange(len(b))
    for row, fill, reduce in ((_LO, np.inf, np.minimum), (_HI, -np.inf, np.maximum)):
        x = np.where(finite, v, fill)
        best = reduce.reduceat(x, starts)
        first = np.minimum.reduceat(np.where(finite & (x == best[seg]), pos, len(b)), starts)
        found = first < len(b)
        at = np.where(found, first, 0)
        cols[row] = best
        cols[row + 1] = np.where(found, s[at], np.inf)
        cols[row + 2] = np.where(found, q[at], np.inf)
    cols[_LAST] = np.where(finite[ends], v[ends], np.nan)
    cols[_LAST_S], cols[_LAST_Q], cols[_T], cols[_EX] = s[ends], q[ends], t[ends], e[ends]
    return b[starts], cols


def _halve(origin: int, a: np.ndarray) -> tuple[int, np.ndarray]:
    """Buckets twice as wide: pairs ``(2i, 2i + 1)`` merged (``origin``: the first's index)."""
    if origin % 2:
        a = np.concatenate([np.repeat(_EMPTY, 1, axis=1), a], axis=1)
        origin -= 1
    if a.shape[1] % 2:
        a = np.concatenate([a, np.repeat(_EMPTY, 1, axis=1)], axis=1)
    return origin // 2, _merge(a[:, 0::2], a[:, 1::2])


@dataclass
class _Scalar:
    """One scalar's buckets as they fill: a dense array from bucket ``origin`` at ``width``."""

    width: int = 1
    origin: int = 0
    used: int = 0
    cols: np.ndarray = field(default_factory=lambda: np.repeat(_EMPTY, 0, axis=1))
    points: int = 0
    first: float = math.inf
    last: float = -math.inf

    @property
    def nbytes(self) -> int:
        return int(self.cols.nbytes)

    def add(self, s: np.ndarray, v: np.ndarray, t: np.ndarray, e: np.ndarray, q: np.ndarray) -> None:
        if not len(s):
            return
        self.points += len(s)
        self.first = min(self.first, float(s.min()))
        self.last = max(self.last, float(s.max()))
        while _span(self.first, self.last, self.width) > FINE_BUCKETS:
            self.origin, self.cols = _halve(self.origin, self.cols[:, : self.used])
            self.used = self.cols.shape[1]
            self.width *= 2
        lo = math.floor(self.first / self.width)
        hi = math.floor(self.last / self.width)
        if not self.used:
            self.origin = lo
        if lo < self.origin:  # steps before the first ones seen: room at the front
            front = np.repeat(_EMPTY, self.origin - lo, axis=1)
            self.cols = np.concatenate([front, self.cols[:, : self.used]], axis=1)
            self.used += self.origin - lo
            self.origin = lo
        need = hi - self.origin + 1
        if need > self.cols.shape[1]:  # room at the end, twice what is needed (steps keep coming)
            grown = np.repeat(_EMPTY, min(2 * need, need + 2 * FINE_BUCKETS), axis=1)
            grown[:, : self.used] = self.cols[:, : self.used]
            self.cols = grown
        self.used = max(self.used, need)
        b, cols = _points(s, v, t, e, q, self.width)
        at = b - self.origin
        self.cols[:, at] = _merge(self.cols[:, at], cols)

    def levels(self, started: float, examples: bool) -> tuple[list[int], list[dict[str, list[Any]]]]:
        """The widths of the levels (top first) and each level's columns."""
        widths = [w for w in widths_for(self.last, self.first) if w >= self.width] or [self.width]
        origin, cols, width = self.origin, self.cols[:, : self.used], self.width
        out: dict[int, dict[str, list[Any]]] = {}
        for w in reversed(widths):
            while width < w:
                origin, cols = _halve(origin, cols)
                width *= 2
            out[w] = _columns(origin, cols, started, examples)
        return widths, [out[w] for w in widths]


def _clean(a: np.ndarray, digits: int | None = None) -> list[Any]:
    """A float array as a JSON list: NaN -> null; ints when every value is integral (as numbers
    they are the same values; the files are shorter).

    >>> _clean(np.array([1.0, np.nan, 3.0])), _clean(np.array([0.5, np.inf]))
    ([1, None, 3], [0.5, None])
    """
    if digits is not None:
        a = np.round(a, digits)
    finite = np.isfinite(a)
    whole = np.where(finite, a, 0.0)
    out: list[Any]
    if np.all(whole == np.floor(whole)) and np.all(np.abs(whole) < 2**53):
        out = whole.astype(np.int64).tolist()
    else:
        out = whole.tolist()
    for i in np.flatnonzero(~finite).tolist():
        out[i] = None
    return out


def _columns(origin: int, cols: np.ndarray, started: float, examples: bool) -> dict[str, list[Any]]:
    """A level's columns (see the module docstring) from its bucket array."""
    keep = np.flatnonzero(cols[_CNT] > 0)
    c = cols[:, keep]
    n = c[_N]
    some = n > 0
    out: dict[str, list[Any]] = {
        "b": (keep + origin).tolist(),
        "n": n.astype(np.int64).tolist(),
        "mean": _clean(np.where(some, c[_SUM] / np.where(some, n, 1), np.nan)),
    }
    if len(keep) and c[_CNT].max() > 1:
        out["min"] = _clean(np.where(some, c[_LO], np.nan))
        out["max"] = _clean(np.where(some, c[_HI], np.nan))
        out["last"] = _clean(c[_LAST])
        minfirst = ~_before(c[_HI_S], c[_HI_Q], c[_LO_S], c[_LO_Q])
        out["minfirst"] = minfirst.astype(np.int64).tolist()
    out["rt"] = _clean(c[_T] - started, 3)
    if examples:
        out["ex"] = _clean(c[_EX])
    return out


def summarize(
    steps: np.ndarray, values: np.ndarray, times: np.ndarray, examples: np.ndarray | None, width: int, started: float
) -> dict[str, list[Any]]:
    """The buckets of one level of records given as arrays (see the module docstring).

    >>> s = summarize(np.array([0., 1, 2, 3]), np.array([1., 9, 2, 4]), np.zeros(4), None, 2, 0.0)
    >>> s["b"], s["min"], s["max"], s["mean"], s["minfirst"]
    ([0, 1], [1, 2], [9, 4], [5, 3], [1, 1])
    """
    steps = np.asarray(steps, dtype=np.float64)
    ex = np.full(len(steps), np.nan) if examples is None else np.asarray(examples, dtype=np.float64)
    v = np.where(np.isfinite(values), values, np.nan).astype(np.float64)
    b, cols = _points(steps, v, np.asarray(times, dtype=np.float64), ex, np.arange(len(steps), dtype=np.float64), width)
    dense = np.repeat(_EMPTY, int(b[-1] - b[0]) + 1 if len(b) else 0, axis=1)
    if len(b):
        dense[:, b - b[0]] = cols
    return _columns(int(b[0]) if len(b) else 0, dense, started, examples is not None)


@dataclass
class Curves:
    """What :func:`write_curves` found: the scalars in file order (entry ``k`` of
    ``data/curves/<run>.js``; the order they were first logged in), how many records the run's
    scalar file holds, and the scalar that counts examples seen (or None)."""

    names: list[str]
    records: int
    examples: str | None


def _scan(
    read: Callable[[], Iterable[Mapping[str, Any]]], names: list[str], todo: set[str] | None
) -> tuple[dict[str, _Scalar], list[str], int, str | None]:
    """One reading of the records: the buckets of the scalars in ``todo`` (all when None; each new
    scalar's name is appended to ``names``), those left for another reading (their arrays would not
    fit :data:`PASS_BYTES`), the number of records and the examples key."""
    scalars: dict[str, _Scalar] = {}
    route: dict[str, list[Any] | None] = {}  # name -> its pending values, None: not this reading
    deferred: list[str] = []
    ex_key: str | None = None
    seq = 0
    records = 0
    flush_at = BLOCK_RECORDS
    nan = math.nan
    examples = frozenset(EXAMPLE_KEYS)

    def flush() -> None:
        for name, buf in route.items():
            if buf:
                a = np.array(buf, dtype=np.float64).reshape(-1, 5)
                buf.clear()
                v = a[:, 1]
                scalars[name].add(a[:, 0], np.where(np.isfinite(v), v, np.nan), a[:, 2], a[:, 3], a[:, 4])
        total = sum(s.nbytes for s in scalars.values())
        while total > PASS_BYTES and len(scalars) > 1:
            name = next(reversed(scalars))  # the last taken in waits for the next reading
            total -= scalars.pop(name).nbytes
            route[name] = None
            deferred.append(name)

    for rec in read():
        records += 1
        step = rec.get("step")
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            continue
        t = rec.get("time")
        t = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else nan
        if ex_key is None and not examples.isdisjoint(rec):
            ex_key = next((k for k in EXAMPLE_KEYS if _number(rec.get(k))), None)
        e = rec.get(ex_key, nan) if ex_key is not None else nan
        e = float(e) if isinstance(e, (int, float)) and not isinstance(e, bool) else nan
        for name, value in rec.items():
            if name == "step" or name == "time":
                continue
            if value is None:
                value = nan
            elif not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            buf = route.get(name, route)
            if buf is route:  # a name not seen in this reading yet
                if todo is None:
                    names.append(name)
                buf = route[name] = [] if todo is None or name in todo else None
                if buf is not None:
                    scalars[name] = _Scalar()
                flush_at = min(flush_at, seq + max(1024, BLOCK_RECORDS // max(1, len(scalars))))
            if buf is not None:
                buf += (step, value, t, e, seq)  # type: ignore[operator]
        seq += 1
        if seq >= flush_at:
            flush()
            flush_at = seq + max(1024, BLOCK_RECORDS // max(1, len(scalars)))
    flush()
    return scalars, deferred, records, ex_key


def write_curves(
    writer: SiteWriter, run_id: str, read: Callable[[], Iterable[Mapping[str, Any]]], started: float
) -> Curves:
    """Write the summaries of every scalar of a run, reading its scalar records with ``read()`` (called
    again for a run whose scalars do not fit one reading's memory, see :data:`PASS_BYTES`): the run's
    curve file, and a file per scalar (and its chunks) for those that are not in it (see the module
    docstring). A run without scalars has no file.

    >>> import pathlib, tempfile
    >>> w = SiteWriter(pathlib.Path(tempfile.mkdtemp()) / "site")
    >>> write_curves(w, "r1", lambda: ({"step": s, "time": 0.0, "loss": 1 / (s + 1)} for s in range(100)), 0.0)
    Curves(names=['loss'], records=100, examples=None)
    >>> write_curves(w, "r2", lambda: ({"step": s, "time": 0.0, "loss": 1 / (s + 1)} for s in range(3000)), 0.0)
    Curves(names=['loss'], records=3000, examples=None)
    >>> w.written
    ['data/curves/r1.js', 'data/curves/r2/0/1-0.js', 'data/curves/r2/0/1-1.js', 'data/curves/r2/0.js', 'data/curves/r2.js']
    """
    names: list[str] = []
    todo: set[str] | None = None
    records = 0
    ex_key: str | None = None
    entries: dict[int, bytes] = {}
    room = INLINE_BYTES
    while True:
        scalars, deferred, n, ex = _scan(read, names, todo)
        if todo is None:
            records, ex_key = n, ex
        for name, scalar in scalars.items():
            k = names.index(name)
            doc = _write_scalar(writer, run_id, k, name, scalar, started, ex_key, room)
            if doc is not None:
                entries[k] = doc
                room -= len(doc)
            else:
                entries[k] = dumps({"name": name, "own": True})
        if not deferred:
            break
        todo = set(deferred)
    if names:
        body = b'{"scalars":[' + b",".join(entries[k] for k in range(len(names))) + b"]}"
        writer.write_data(f"data/curves/{run_id}.js", f"curves/{run_id}", raw_json=body)
    return Curves(names, records, ex_key)


def _write_scalar(
    writer: SiteWriter,
    run_id: str,
    k: int,
    name: str,
    scalar: _Scalar,
    started: float,
    ex_key: str | None,
    room: int,
) -> bytes | None:
    """Scalar ``k``'s summaries as JSON when they are one level of at most ``room`` bytes (they go
    in the run's curve file), else None: they are written to their own file and its chunks."""
    widths, levels = scalar.levels(started, ex_key is not None)
    chunks: list[list[list[int]] | None] = [None]
    payload = {
        "name": name,
        "points": scalar.points,
        "first": _clean(np.array([scalar.first]))[0],
        "last": _clean(np.array([scalar.last]))[0],
        "started": started,
        "examples": ex_key,
        "widths": widths,
        "chunks": chunks,
        "top": levels[0],
    }
    if len(levels) == 1:
        doc = dumps(payload)
        if len(doc) <= room:
            return doc
    for level, buckets in enumerate(levels[1:], start=1):
        ranges = []
        for c, start in enumerate(range(0, len(buckets["b"]), CHUNK_BUCKETS)):
            part = {col: v[start : start + CHUNK_BUCKETS] for col, v in buckets.items()}
            ranges.append([part["b"][0], part["b"][-1]])
            key = f"curves/{run_id}/{k}/{level}-{c}"
            writer.write_data(f"data/{key}.js", key, part)
        chunks.append(ranges)
    writer.write_data(f"data/curves/{run_id}/{k}.js", f"curves/{run_id}/{k}", payload)
    return None


def read_curve(site: str | os.PathLike[str], run_id: str, k: int) -> dict[str, Any]:
    """The summaries of scalar ``k`` of run ``run_id`` in the site folder ``site``, from where the
    page loads them (``LL.data.curve`` in common.js): entry ``k`` of the run's curve file, or the
    scalar's own file when the entry says so.

    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "site"
    >>> _ = write_curves(SiteWriter(out), "r1", lambda: ({"step": s, "loss": 0.5} for s in range(100)), 0.0)
    >>> doc = read_curve(out, "r1", 0)
    >>> doc["name"], doc["widths"], doc["top"]["b"][:3]
    ('loss', [1], [0, 1, 2])
    """
    folder = Path(site, "data", "curves")
    key, payload = load_data_file(folder / f"{run_id}.js")
    if key != f"curves/{run_id}":
        raise SiteError(f"{folder / run_id}.js holds {key!r}")
    entry = payload["scalars"][k]
    if entry.get("own"):
        key, entry = load_data_file(folder / run_id / f"{k}.js")
        if key != f"curves/{run_id}/{k}":
            raise SiteError(f"{folder / run_id / str(k)}.js holds {key!r}")
    return dict(entry)
