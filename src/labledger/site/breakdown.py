"""Test breakdowns (seed 004): ``files/<name>/summary.json`` with ``cells[target][current]`` and
``files/<name>/images.jsonl`` with per-image predictions, probabilities and episodes.

The summary goes to ``data/tests/<run>/<name>.js`` (the grid renders from it alone); the image
lines are split by their ``target`` into ``data/tests/<run>/<name>/<part>.js`` so that opening a
cell loads only the images of that target (lines without a ``target`` go to parts of at most
``PART_IMAGES`` lines, all loaded on the first click).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import orjson

from labledger.errors import LedgerError
from labledger.site.batches import ImageIndex, image_refs, iter_json_lines
from labledger.site.output import SiteWriter, js_assignment
from labledger.store.jsonl import read_json
from labledger.store.view import RunView

#: Image lines per part when lines carry no ``target``.
PART_IMAGES = 200
_PART_RE = re.compile(r"[^A-Za-z0-9._-]")


def breakdown_summaries(view: RunView) -> dict[str, dict[str, Any]]:
    """``{folder: summary}`` of the folders under the run's ``files/`` whose ``summary.json`` has a
    ``cells`` mapping (in name order)."""
    root = view.dir / "files"
    if not root.is_dir():
        return {}
    summaries = {}
    for path in sorted(root.glob("*/summary.json")):
        try:
            doc = read_json(path)
        except LedgerError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("cells"), dict):
            summaries[path.parent.name] = doc
    return summaries


def _part_name(target: Any) -> str:
    text = target if isinstance(target, str) else orjson.dumps(target).decode()
    safe = _PART_RE.sub("_", text)[:40]
    return f"t-{safe}" if safe == text else f"t-{safe}-{zlib.crc32(text.encode()):08x}"


def write_breakdown(
    writer: SiteWriter, view: RunView, name: str, summary: dict[str, Any], images: ImageIndex
) -> dict[str, Any]:
    """Write the data files of test breakdown ``name`` (its ``summary.json`` already read, see
    :func:`breakdown_summaries`); return its line for the run page."""
    parts: dict[str, list[bytes]] = {}
    part_of_target: dict[str, str] = {}
    refs_by_part: dict[str, set[str]] = {}
    n_images = 0
    untargeted = 0
    for _lineno, raw, rec in iter_json_lines(view.dir / "files" / name / "images.jsonl"):
        if not isinstance(rec, dict):
            continue
        n_images += 1
        target = rec.get("target")
        if target is None:
            part = f"p-{untargeted // PART_IMAGES}"
            untargeted += 1
        else:
            key = target if isinstance(target, str) else orjson.dumps(target).decode()
            part = part_of_target.setdefault(key, _part_name(target))
        parts.setdefault(part, []).append(raw)
        refs = refs_by_part.setdefault(part, set())
        for k in ("image", "input", "model_input"):
            if k in rec:
                image_refs(rec[k], refs)
    for part, lines in parts.items():
        head = orjson.dumps({"run": view.id, "name": name, "part": part, "images": images.check(refs_by_part[part])})
        raw = head[:-1] + b',"items":[' + b",".join(lines) + b"]}"
        writer.write(
            f"data/tests/{view.id}/{name}/{part}.js", js_assignment(f"tests/{view.id}/{name}/{part}", raw_json=raw)
        )
    payload = {
        "run": view.id,
        "run_name": view.name,
        "name": name,
        "summary": summary,
        "images": n_images,
        "parts": sorted(parts),
        "part_of_target": part_of_target,
        "untargeted_parts": sorted(p for p in parts if p.startswith("p-")),
    }
    writer.write_data(f"data/tests/{view.id}/{name}.js", f"tests/{view.id}/{name}", payload)
    analysis = summary.get("analysis")
    if not isinstance(analysis, dict):  # a hand-written summary.json may hold anything here (#17)
        analysis = {}
    return {
        "name": name,
        "images": n_images,
        "analysis": {k: v for k, v in analysis.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
    }
