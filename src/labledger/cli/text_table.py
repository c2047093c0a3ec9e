"""A plain-text table, laid out exactly as rich prints a ``box.SIMPLE_HEAD`` table, without rich.

``labledger runs`` prints its table through :func:`render`: importing and running rich for one
table costs more than the rest of the command (docs/performance.md).
:func:`render` covers the tables that fit as they are: every line of every cell printable ASCII
without leading or trailing spaces, the natural widths within the terminal, the title within the
table. Otherwise (a cell to wrap or cut, wide characters, tabs) it returns ``None`` and the caller
prints with rich, so what users see never depends on which path ran (tests compare the two).
Styles are ANSI codes as rich writes them, only on a terminal: the title italic, the header bold,
a cell's own style (``"green"``, ``"red bold"``) on its text; ``NO_COLOR`` keeps bold and italic.
"""

from __future__ import annotations

import os
from typing import IO

#: SGR codes of the styles tables use, in the order rich writes them (attributes, then colour).
_ATTRIBUTES = {"bold": "1", "dim": "2", "italic": "3"}
_COLOURS = {"black": "30", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36"}


class Column:
    """One column: its header, how its cells are justified, a minimum width, and whether rich may
    wrap its cells (``wrap``; the fast path never needs to, or it hands the table to rich).

    A plain class, not a dataclass: ``labledger runs`` imports no ``dataclasses``.

    >>> Column("steps", justify="right")
    Column(header='steps', justify='right', min_width=0, wrap=False)
    """

    __slots__ = ("header", "justify", "min_width", "wrap")

    def __init__(self, header: str, justify: str = "left", min_width: int = 0, wrap: bool = False) -> None:
        self.header = header
        self.justify = justify
        self.min_width = min_width
        self.wrap = wrap

    def __repr__(self) -> str:
        return f"Column(header={self.header!r}, justify={self.justify!r}, min_width={self.min_width!r}, wrap={self.wrap!r})"


def is_terminal(stream: IO[str]) -> bool:
    """Whether rich takes ``stream`` for a terminal: ``TTY_COMPATIBLE`` (0 or 1), else a
    non-empty ``FORCE_COLOR``, else ``isatty()``.

    >>> import io
    >>> is_terminal(io.StringIO())
    False
    """
    env = os.environ
    forced = env.get("TTY_COMPATIBLE", "")
    if forced in ("0", "1"):
        return forced == "1"
    if "FORCE_COLOR" in env:
        return env["FORCE_COLOR"] != ""
    return stream.isatty()


def is_dumb(stream: IO[str]) -> bool:
    """Whether ``stream`` is a terminal that takes no styles (``TERM`` is ``dumb`` or ``unknown``)."""
    return os.environ.get("TERM", "").lower() in ("dumb", "unknown") and is_terminal(stream)


def color_mode(stream: IO[str]) -> str:
    """``"full"`` (colours and attributes), ``"attrs"`` (bold and italic only: ``NO_COLOR``) or
    ``"none"``, as rich decides for ``stream``: styles only on a terminal (:func:`is_terminal`),
    none on a dumb one.

    >>> import io
    >>> color_mode(io.StringIO())
    'none'
    """
    if not is_terminal(stream) or is_dumb(stream):
        return "none"
    return "attrs" if os.environ.get("NO_COLOR", "") != "" else "full"


def sgr(style: str | None, mode: str) -> str:
    """The ANSI select-graphic-rendition codes of ``style`` in ``mode`` (``""`` for none).

    >>> sgr("red bold", "full"), sgr("red bold", "attrs"), sgr("green", "none")
    ('1;31', '1', '')
    """
    if not style or mode == "none":
        return ""
    words = style.split()
    codes = [code for name, code in _ATTRIBUTES.items() if name in words]
    if mode == "full":
        codes += [_COLOURS[w] for w in words if w in _COLOURS]
    return ";".join(codes)


def _styled(text: str, code: str) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if code and text else text


def _plain(text: str) -> bool:
    """Whether every line of ``text`` is printable ASCII without spaces at either end (one cell per
    character, laid out by rich as it is)."""
    return all(line.isascii() and line.isprintable() and line == line.strip(" ") for line in text.split("\n"))


def render(
    title: str,
    columns: list[Column],
    rows: list[list[str]],
    *,
    width: int,
    mode: str = "none",
    styles: list[list[str | None]] | None = None,
) -> str | None:
    """The table as rich's ``Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)`` prints
    it on a console ``width`` columns wide, or ``None`` when only rich can lay it out.

    ``rows`` are plain text (no markup; ``\\n`` separates the lines of a cell); ``styles[r][c]``
    styles cell ``c`` of row ``r`` (its text only, as ``[green]text[/]`` markup does).

    >>> text = render("Runs", [Column("id"), Column("steps", justify="right")], [["a1", "12"]], width=40)
    >>> [line.rstrip() for line in text.splitlines()]
    ['Runs', '', '  id   steps', ' ────────────', '  a1      12', '']
    """
    texts = [c.header for c in columns] + [cell for row in rows for cell in row] + [title]
    if not all(_plain(t) for t in texts) or "\n" in title:
        return None
    widths = [
        max([c.min_width, len(c.header)] + [len(line) for row in rows for line in row[i].split("\n")])
        for i, c in enumerate(columns)
    ]
    table_width = sum(widths) + 3 * len(columns) + 1
    if table_width > width or len(title) > table_width:
        return None  # rich wraps or cuts cells (or the title) to fit: leave that to it
    bold, italic = sgr("bold", mode), sgr("italic", mode)
    blank = " " * table_width
    out = [_styled(title.ljust(table_width), italic)] if title else []
    out.append(blank)
    header = [
        _styled(" ", bold) + _styled(_justify(c.header, w, c.justify), bold) + _styled(" ", bold)
        for c, w in zip(columns, widths)
    ]
    out.append(" " + " ".join(header) + " ")
    out.append(" " + "─" * (table_width - 2) + " ")
    for r, row in enumerate(rows):
        lines = [cell.split("\n") for cell in row]
        height = max(len(cell) for cell in lines)
        codes = [sgr(s, mode) for s in styles[r]] if styles is not None else [""] * len(columns)
        for k in range(height):
            parts = []
            for cell, c, w, code in zip(lines, columns, widths, codes):
                text = cell[k] if k < len(cell) else ""
                pad = " " * (w - len(text))
                parts.append(pad + _styled(text, code) if c.justify == "right" else _styled(text, code) + pad)
            out.append("  " + "   ".join(parts) + "  ")
    out.append(blank)
    return "\n".join(out) + "\n"


def _justify(text: str, width: int, justify: str) -> str:
    return text.rjust(width) if justify == "right" else text.ljust(width)
