"""Microbatches for the site: ``batches.jsonl`` streamed into chunk files loaded on demand.

``data/batches/<run>/<index>.js`` holds consecutive microbatch records exactly as logged (the
line's JSON is copied, not rebuilt), plus the image references of that chunk that exist in the
run's files, gzip-compressed as base64 text (:func:`~labledger.site.output.packed_json`: the
site's batch data is smaller than the batch file instead of a second full copy; the page unpacks a chunk
with the browser's ``DecompressionStream``). A chunk closes after ``chunk_records`` records or ``chunk_bytes`` bytes, whichever
comes first, so the chunks of an append-only file never move: a run that logged more batches
rewrites only its last chunk. ``toc.js`` lists each chunk's microbatch and optimizer-step range;
``loss.js`` has every microbatch's loss for the run page's curve (float32 values are written in
their shortest float32 form, which reads back to the same float32).

The file is read one line at a time; only the table of contents, the loss column and the set of
image references stay in memory.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from labledger.errors import RecordError
from labledger.site.output import SiteWriter, js_assignment, packed_json
from labledger.store.jsonl import iter_decoded

#: Records per chunk file (at most).
CHUNK_RECORDS = 100
#: Bytes of record JSON per chunk file (a chunk closes once it reaches this).
CHUNK_BYTES = 512 * 1024
_IMAGE_RE = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*\.(png|jpe?g|gif|webp|bmp)$", re.IGNORECASE)
#: Sample fields that may hold an input (seed 004 calls it ``model_input``).
INPUT_FIELDS = ("input", "model_input", "image")


def is_image_ref(value: Any) -> bool:
    """A relative path (safe components, no ``..``) that names an image file.

    >>> is_image_ref("images/12.png"), is_image_ref("../x.png"), is_image_ref("/etc/a.png")
    (True, False, False)
    """
    return (
        isinstance(value, str)
        and len(value) < 300
        and _IMAGE_RE.match(value) is not None
        and not any(part.startswith(".") for part in value.split("/"))
    )


def image_refs(value: Any, out: set[str], depth: int = 0) -> None:
    """Add every image reference found in ``value`` (strings, lists, dicts; 3 levels) to ``out``."""
    if isinstance(value, str):
        if is_image_ref(value):
            out.add(value)
    elif depth < 3:
        if isinstance(value, dict):
            for v in value.values():
                image_refs(v, out, depth + 1)
        elif isinstance(value, list):
            for v in value[:64]:
                image_refs(v, out, depth + 1)


class ImageIndex:
    """Which image references of a run exist under its ``files/`` (cached per reference)."""

    def __init__(self, files_root: Path):
        self.root = files_root
        self.exists: dict[str, bool] = {}

    def check(self, refs: set[str]) -> list[str]:
        found = []
        for ref in refs:
            ok = self.exists.get(ref)
            if ok is None:
                ok = self.exists[ref] = (self.root / ref).is_file()
            if ok:
                found.append(ref)
        return sorted(found)

    def found(self) -> list[str]:
        return sorted(r for r, ok in self.exists.items() if ok)


@dataclass
class BatchIndex:
    """What the batch browser needs to find a microbatch: chunk ranges and totals."""

    chunks: list[list[Any]] = field(default_factory=list)  # [first_mb, last_mb, min_step, max_step, n]
    microbatches: array = field(default_factory=lambda: array("q"))
    losses: array = field(default_factory=lambda: array("d"))
    samples: int = 0
    first_time: float | None = None
    last_time: float | None = None

    @property
    def count(self) -> int:
        return len(self.microbatches)

    def toc(self, run_id: str) -> dict[str, Any]:
        steps = [c[3] for c in self.chunks if c[3] is not None]
        return {
            "run": run_id,
            "count": self.count,
            "samples": self.samples,
            "chunks": self.chunks,
            "chunk_records": CHUNK_RECORDS,
            "max_step": max(steps) if steps else None,
            "first_time": self.first_time,
            "last_time": self.last_time,
        }


def _float32_text(values: np.ndarray) -> list[str]:
    out = []
    f32 = values.astype(np.float32)
    exact = f32.astype(np.float64) == values
    for v, v32, ok in zip(values.tolist(), f32, exact.tolist()):
        if not math.isfinite(v):
            out.append("null")
        elif ok:
            out.append(
                np.format_float_positional(v32, unique=True, trim="-")
                if 1e-4 <= abs(v) < 1e7
                else np.format_float_scientific(v32, unique=True, trim="-")
            )
        else:
            out.append(repr(v))
    return out


def loss_payload_json(index: BatchIndex, run_id: str) -> bytes:
    """JSON of the per-microbatch loss curve (``microbatch`` omitted when it is 1..n)."""
    mbs = np.frombuffer(index.microbatches, dtype=np.int64) if index.count else np.zeros(0, np.int64)
    losses = np.frombuffer(index.losses, dtype=np.float64) if index.count else np.zeros(0)
    contiguous = bool(index.count == 0 or (mbs[0] == 1 and np.all(np.diff(mbs) == 1)))
    head = {
        "run": run_id,
        "count": index.count,
        "first": int(mbs[0]) if index.count else None,
        "contiguous": contiguous,
    }
    parts = [orjson.dumps(head)[:-1], b',"loss":[', ",".join(_float32_text(losses)).encode(), b"]"]
    if not contiguous:
        parts += [b',"microbatch":', orjson.dumps(mbs.tolist())]
    parts.append(b"}")
    return b"".join(parts)


def iter_json_lines(path: Path) -> Iterator[tuple[int, bytes, Any]]:
    """``(line, raw JSON without its newline, decoded value)`` for each complete line of a JSONL
    file; a line that is not JSON raises naming the file and line."""
    return iter_decoded(path)


def iter_records(path: Path) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """``(line, raw JSON, record)`` for each complete line of ``batches.jsonl``."""
    for lineno, raw, rec in iter_json_lines(path):
        if not isinstance(rec, dict):
            raise RecordError(
                f"a batch record must be a JSON object; got {type(rec).__name__}", source=str(path), line=lineno
            )
        yield lineno, raw, rec


def write_batches(
    writer: SiteWriter,
    run_id: str,
    path: Path,
    images: ImageIndex,
    *,
    chunk_records: int = CHUNK_RECORDS,
    chunk_bytes: int = CHUNK_BYTES,
) -> BatchIndex:
    """Stream ``path`` into ``data/batches/<run>/<i>.js``, ``toc.js`` and ``loss.js``."""
    index = BatchIndex()
    lines: list[bytes] = []
    refs: set[str] = set()
    size = 0
    first_mb = last_mb = min_step = max_step = None

    def flush() -> None:
        nonlocal lines, refs, size, first_mb, last_mb, min_step, max_step
        i = len(index.chunks)
        head = orjson.dumps({"run": run_id, "index": i, "images": images.check(refs)})
        raw = head[:-1] + b',"batches":[' + b",".join(lines) + b"]}"
        writer.write(f"data/batches/{run_id}/{i}.js", js_assignment(f"batches/{run_id}/{i}", raw_json=packed_json(raw)))
        index.chunks.append([first_mb, last_mb, min_step, max_step, len(lines)])
        lines, refs, size = [], set(), 0
        first_mb = last_mb = min_step = max_step = None

    for position, (_lineno, raw, rec) in enumerate(iter_records(path), 1):
        mb = rec.get("microbatch")
        if not isinstance(mb, int) or isinstance(mb, bool):
            mb = position
        step = rec.get("optimizer_step")
        if not isinstance(step, int) or isinstance(step, bool):
            step = None
        loss = rec.get("loss")
        index.microbatches.append(mb)
        index.losses.append(float(loss) if isinstance(loss, (int, float)) and not isinstance(loss, bool) else math.nan)
        t = rec.get("time")
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            if index.first_time is None:
                index.first_time = t
            index.last_time = t
        samples = rec.get("samples")
        if isinstance(samples, list):
            index.samples += len(samples)
            for s in samples:
                if isinstance(s, dict):
                    for key in INPUT_FIELDS:
                        if key in s:
                            image_refs(s[key], refs)
        if first_mb is None:
            first_mb = mb
        last_mb = mb
        if step is not None:
            min_step = step if min_step is None else min(min_step, step)
            max_step = step if max_step is None else max(max_step, step)
        lines.append(raw)
        size += len(raw)
        if len(lines) >= chunk_records or size >= chunk_bytes:
            flush()
    if lines:
        flush()
    writer.write_data(f"data/batches/{run_id}/toc.js", f"batches/{run_id}/toc", index.toc(run_id))
    writer.write_data(
        f"data/batches/{run_id}/loss.js", f"batches/{run_id}/loss", raw_json=loss_payload_json(index, run_id)
    )
    return index
