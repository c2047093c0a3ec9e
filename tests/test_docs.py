"""Every command is documented: in the README's command table and in the docs it points to."""

from __future__ import annotations

import re

from conftest import REPO

from labledger.cli import main


def _commands():
    for name, cmd in main.commands.items():
        yield name
        for sub in getattr(cmd, "commands", {}):
            yield f"{name} {sub}"


def test_every_command_is_in_the_readme_and_the_docs():
    readme = (REPO / "README.md").read_text()
    docs = "\n".join(p.read_text() for p in (REPO / "docs").glob("*.md"))
    for name in _commands():
        top = name.split()[0]
        assert re.search(rf"`{re.escape(top)}[ `,/]", readme), f"README's command table lacks `{top}`"
        assert f"labledger {name}" in docs or f"labledger {name}" in readme, f"no docs show `labledger {name}`"


def test_readme_links_resolve():
    readme = (REPO / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if target.startswith("http"):
            continue
        assert (REPO / target).exists(), f"README links to missing {target}"
