"""Regenerate the module map of docs/layout.md from the modules' docstrings: ``python docs/gen_layout.py``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

DOC = Path(__file__).with_name("layout.md")
SRC = Path(__file__).resolve().parents[1] / "src"
START, END = "<!-- module-map:start -->", "<!-- module-map:end -->"


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line, its reST roles plain."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?[.!?])(\s+[A-Z(`*\"]|$)", para)
    text = m.group(1) if m else para
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)  # :func:`x` -> `x`
    return text.replace("``", "`").replace("|", "\\|")


def module_map() -> str:
    """The Markdown table: every module of ``labledger`` and what it holds."""
    rows = ["| module | what it holds |", "|---|---|"]
    for path in sorted((SRC / "labledger").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        rows.append(f"| `{name}` | {first_sentence(doc) or '(the program: `python -m labledger`)'} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{module_map()}{END}{tail}")
    print(f"wrote {DOC}")
