"""Notebook HTML for a run (``RunView._repr_html_``): its meta, config, headline values and curves.

Self-contained (inline SVG, no script, no network) and every string escaped. Curves are drawn for
each scalar key (up to :data:`MAX_CURVES`, at most :data:`MAX_POINTS` points each, evenly thinned)
and for the run's system metrics when it has them.

>>> import tempfile, labledger
>>> d = tempfile.mkdtemp()
>>> with labledger.start_run("<b>r</b>", ledger=d) as run:
...     run.log(1, loss=0.5); run.log(2, loss=0.25)
>>> page = labledger.open_ledger(d).run(run.id)._repr_html_()
>>> "&lt;b&gt;r&lt;/b&gt;" in page and "<svg" in page and "<b>r</b>" not in page
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from html import escape
from typing import TYPE_CHECKING, Any

from labledger.store.compressed import record_exists

if TYPE_CHECKING:
    from labledger.store.view import RunView

MAX_CURVES = 24
MAX_POINTS = 400
_W, _H = 260, 90


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def svg_curve(points: list[tuple[float, float]], title: str) -> str:
    """One small line chart (inline SVG) of ``(x, y)`` points; non-finite y values are left out.

    >>> svg_curve([(0, 1.0), (1, 0.5)], "loss").startswith("<svg")
    True
    """
    pts = [(x, y) for x, y in points if isinstance(y, (int, float)) and math.isfinite(y)]
    if len(pts) > MAX_POINTS:
        stride = math.ceil(len(pts) / MAX_POINTS)
        pts = pts[::stride] + ([pts[-1]] if (len(pts) - 1) % stride else [])
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H + 30}" role="img">'
    label = f'<text x="4" y="12" font-size="11" font-family="sans-serif">{escape(title)}</text>'
    if not pts:
        return head + label + '<text x="4" y="40" font-size="10">no finite values</text></svg>'
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx = (_W - 8) / (x1 - x0) if x1 > x0 else 0.0
    sy = (_H - 8) / (y1 - y0) if y1 > y0 else 0.0
    coords = " ".join(f"{4 + (x - x0) * sx:.1f},{18 + _H - 4 - (y - y0) * sy:.1f}" for x, y in pts)
    line = f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{coords}"/>'
    if len(pts) == 1:
        line = f'<circle cx="4" cy="{18 + _H / 2:.1f}" r="2" fill="#1f77b4"/>'
    axis = (
        f'<text x="4" y="{_H + 28}" font-size="9" font-family="sans-serif">'
        f"x {escape(_fmt(x0))}..{escape(_fmt(x1))}, y {escape(_fmt(y0))}..{escape(_fmt(y1))}, last "
        f"{escape(_fmt(ys[-1]))}</text>"
    )
    return head + label + line + axis + "</svg>"


def _kv_table(title: str, items: Iterable[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(_fmt(v))}</td></tr>" for k, v in items)
    return f"<h4>{escape(title)}</h4><table>{rows}</table>" if rows else ""


def _curves(
    records: Iterable[Mapping[str, Any]], x_key: str, skip: tuple[str, ...]
) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for i, rec in enumerate(records):
        x = rec.get(x_key, i)
        for k, v in rec.items():
            if k in skip or k == x_key:
                continue
            if len(out) >= MAX_CURVES and k not in out:
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(k, []).append((float(x), float(v)))
    return out


def run_html(view: RunView) -> str:
    """The run as one self-contained HTML fragment (see the module docstring)."""
    meta = view.meta
    info = [
        ("id", view.id),
        ("name", view.name),
        ("group", view.group or ""),
        ("tags", ", ".join(view.tags)),
        ("status", view.status),
    ]
    if meta.get("error"):
        info.append(("error", meta["error"]))
    parts = [
        '<div class="labledger-run" style="font-family:sans-serif;font-size:12px">',
        _kv_table("Run", info),
        _kv_table("Headline", sorted((view.summary.get("headline") or {}).items())),
        _kv_table("Config", sorted((k, v) for k, v in view.config.items())),
    ]
    curves = _curves(view.scalars(), "step", ("time",))
    if curves:
        parts.append("<h4>Curves (x = step)</h4><div>")
        parts.extend(svg_curve(points, key) for key, points in sorted(curves.items()))
        parts.append("</div>")
    if record_exists(view.dir / "system.jsonl"):
        recs = list(view.records("system"))
        t0 = recs[0]["time"] if recs else 0.0
        system = _curves(({**r, "time": r["time"] - t0} for r in recs), "time", ())
        if system:
            parts.append("<h4>System (x = seconds)</h4><div>")
            parts.extend(svg_curve(points, key) for key, points in sorted(system.items()))
            parts.append("</div>")
    parts.append("</div>")
    return "".join(parts)
