"""The shape of the package's imports: no module imports another that imports it back (directly or
round a longer loop, lazy imports inside functions included), and no module takes another's private
name (a name that starts with one underscore), so that each module can be read and changed alone."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "labledger"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module ``name`` lives in (a name imported from a module resolves to that module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache  # each module parsed once for every test of this file
def _imports(module: str) -> list[tuple[str, str | None]]:
    """What ``module`` imports of the package, as ``(module imported, name taken or None)``; imports
    under ``if TYPE_CHECKING:`` are left out (they never run)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] == PACKAGE:
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.append((sub, None) if sub in MODULES else (base, alias.name))
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for imported, _ in _imports(module):
            owner = _owner(imported)
            if owner is not None and owner != module:
                graph[module].add(owner)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_loop_and_nothing_else():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles between modules (lazy imports included):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_private_name_is_imported_across_modules():
    taken = [
        f"{module} takes {name} from {imported}"
        for module in MODULES
        for imported, name in _imports(module)
        if name is not None and name.startswith("_") and not name.startswith("__")
    ]
    assert not taken, "private names imported across modules:\n" + "\n".join(taken)
