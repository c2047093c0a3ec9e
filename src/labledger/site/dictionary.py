"""The site's data dictionary page (``dictionary.html``): the tables of ``labledger schema --markdown`` (#15).

A static page (no script, no data file): every string is escaped by the template. The content is
:func:`labledger.schema.dictionary.dictionary_sections`, so it cannot differ from the Markdown.

>>> page = dictionary_page().decode()
>>> "<code>metrics.jsonl</code>" in page and "unix seconds" in page
True
"""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def dictionary_page() -> bytes:
    """The HTML of ``dictionary.html`` (made once per process: it depends on the code only)."""
    import jinja2

    from labledger import __version__
    from labledger.schema.dictionary import dictionary_sections
    from labledger.schema.documents import SCHEMA_VERSION

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent / "templates")),
        autoescape=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    groups: dict[str, list] = {}
    for sec in dictionary_sections():
        sec.about = sec.about.replace("`", "")
        sec.extra = sec.extra.replace("``", "") if sec.extra else None
        groups.setdefault(sec.group, []).append(sec)
    html = env.get_template("dictionary.html").render(
        groups=list(groups.items()), version=__version__, schema_version=SCHEMA_VERSION
    )
    return html.encode()


__all__ = ["dictionary_page"]
