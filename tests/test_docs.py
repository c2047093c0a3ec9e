"""The docs test themselves.

- Every shell example of README.md and docs/*.md runs against the files in docs/examples/, and
  its shown output must match (``docs/run_examples.py``; ``--update`` rewrites the outputs).
- docs/results.md has one valid row of every task kind; the README's training loop runs.
- Every command and option has help text and is in docs/cli.md; every command is in the README's
  command table and in the docs it points to.
- The docstring examples of every module run.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import json
import pkgutil
import re
import shutil
import sys
from pathlib import Path

import click
import pytest
from conftest import REPO

import labledger
from labledger.cli import main

_spec = importlib.util.spec_from_file_location("run_examples", REPO / "docs" / "run_examples.py")
assert _spec and _spec.loader
run_examples = importlib.util.module_from_spec(_spec)
sys.modules["run_examples"] = run_examples
_spec.loader.exec_module(run_examples)

UPDATE_HINT = "After a deliberate change, run `python docs/run_examples.py --update` and review the diff."


def _commands():
    for name, cmd in main.commands.items():
        yield name
        for sub in getattr(cmd, "commands", {}):
            yield f"{name} {sub}"


def test_every_command_is_in_the_readme_and_the_docs():
    readme = (REPO / "README.md").read_text()
    docs = "\n".join(p.read_text() for p in (REPO / "docs").glob("*.md") if p.name != "cli.md")
    for name in _commands():
        top = name.split()[0]
        assert re.search(rf"`{re.escape(top)}[ `,/]", readme), f"README's command table lacks `{top}`"
        assert f"labledger {name}" in docs or f"labledger {name}" in readme, f"no docs show `labledger {name}`"


def test_readme_and_docs_links_resolve():
    for page in run_examples.pages():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


# ------------------------------------------------------------------------------------------------
# Shell examples


def _uses_demo(page: Path) -> bool:
    return bool(re.search(r"^\$ labledger demo\b", page.read_text(), re.M))


PAGES = [p for p in run_examples.pages() if run_examples.parse(p, p.read_text().split("\n"))]


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, id=p.name, marks=[pytest.mark.slow, pytest.mark.timeout(900)] if _uses_demo(p) else [])
        for p in PAGES
    ],
)
def test_shell_examples_run_and_show_their_output(page):
    results, blocks = run_examples.run_page(page)
    assert results or all(b.skip for b in blocks)
    bad = [r for r in results if r.problem]
    assert not bad, run_examples.report(bad) + "\n\n" + UPDATE_HINT


def test_every_page_with_shell_blocks_is_checked():
    """A ```bash block either runs or says why not (a skip directive naming the test that covers it)."""
    for page in run_examples.pages():
        for block in run_examples.parse(page, page.read_text().split("\n")):
            if block.skip:
                assert len(block.skip) > 10, f"{block.where}: say why the block is skipped"


SAMPLE = """# A page

<!-- examples: dir=none-such -->

```
$ echo 20261201-095756-6936c0 took 3.2 s in $PWD
20261130-000000-aaaaaa took 9.9 s in /tmp/example
$ printf 'a\\nb\\nc\\nd\\n'
a
...
d
$ echo wrong
right
```

<!-- example: skip: not run in this test -->
```bash
false
```
"""


def test_the_runner_finds_differences_and_update_rewrites_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(SAMPLE)
    results, blocks = run_examples.run_page(page)
    assert [b.skip for b in blocks] == [None, "not run in this test"]
    # run ids, timings and the folder are normalised; '...' stands for any lines
    assert [r.problem for r in results] == [None, None, "output differs from the one shown"]
    assert "-right\n    +wrong" in run_examples.report(results)
    assert run_examples.update(page, results) == 1
    text = page.read_text()
    assert "$ echo wrong\nwrong\n```" in text and "a\n...\nd\n" in text
    results, _ = run_examples.run_page(page)
    assert all(r.problem is None for r in results)


def test_a_failing_command_and_an_expected_error_are_told_apart(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```\n$ labledger eval missing.jsonl\nError: nope\n$ labledger eval missing.jsonl\n```\n")
    results, _ = run_examples.run_page(page)
    assert results[0].problem == "output differs from the one shown"  # it failed, as shown, but not with that text
    assert results[1].problem == "exited 1"
    assert run_examples.update(page, results) == 1  # only the output of the expected failure is written
    assert "Error: missing.jsonl: no such results file" in page.read_text().split("$ labledger eval")[1]


def test_normalise_what_varies():
    n = run_examples.normalise
    assert n("  20261201-095756-6936c0  2026-12-01 10:01:59  9s") == n("20261130-000000-aaaaaa 2026-11-30 09:00:00 12s")
    assert n("Latency: a 0.085, b 0.194 ms per test image") == n("Latency: a 0.1, b 0.2 ms per test image")
    assert n("│ accuracy │ 0.9362 │") != n("│ accuracy │ 0.9363 │")  # numbers that do not vary are compared


# ------------------------------------------------------------------------------------------------
# The results-row format


def test_results_md_has_one_valid_row_of_every_kind():
    from labledger.inputs.results import KINDS, validate_rows

    text = (REPO / "docs" / "results.md").read_text()
    rows = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", text, re.S)]
    kinds = validate_rows(rows, source="docs/results.md")
    assert sorted(t["kind"] for t in kinds.values()) == sorted(KINDS)
    for fld in ("id", "task", "gold", "probs", "score", "scores", "pred", "slices", "group", "positive"):
        assert f"| `{fld}` |" in text, f"docs/results.md does not describe `{fld}`"


def test_the_shipped_example_results_cover_every_kind():
    from labledger.inputs.results import KINDS, read_results

    rs = read_results(REPO / "docs" / "examples" / "metrics" / "results.jsonl")
    assert sorted(td.kind for td in rs.values()) == sorted(KINDS)


def test_examples_are_small_and_generated_by_make_py(tmp_path):
    files = [p for p in (REPO / "docs" / "examples").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sum(p.stat().st_size for p in files) < 2 * 2**20
    copy = tmp_path / "examples"
    shutil.copy(REPO / "docs" / "examples" / "make.py", tmp_path / "make.py")
    spec = importlib.util.spec_from_file_location("make_examples", tmp_path / "make.py")
    assert spec and spec.loader
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    make.HERE = copy
    make.main()
    for p in files:
        if p.name == "make.py":
            continue
        rel = p.relative_to(REPO / "docs" / "examples")
        assert (copy / rel).read_bytes() == p.read_bytes(), f"docs/examples/{rel} differs from what make.py writes"


# ------------------------------------------------------------------------------------------------
# The README's training loop


def test_readme_training_loop_runs(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    text = (REPO / "README.md").read_text()
    code = re.search(r"## In a training loop.*?```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LABLEDGER_DIR", raising=False)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    ledger = labledger.open_ledger(tmp_path / ".labledger")
    (info,) = list(ledger.runs())
    assert info.status == "finished" and info.name == "mlp-h32"
    view = ledger.run(info.id)
    assert len(list(view.batches())) == 4
    assert len(view.results_path("test").read_text().splitlines()) == 64
    assert len(list(view.checkpoints())) == 1


# ------------------------------------------------------------------------------------------------
# Help texts and the command reference


def test_every_command_and_option_has_help_and_is_in_the_reference():
    reference = (REPO / "docs" / "cli.md").read_text()
    missing = []
    for path, cmd in run_examples.commands():
        if not (cmd.help or cmd.short_help):
            missing.append(f"`labledger {path}` has no help text")
        if f"$ labledger {path} --help" not in reference:
            missing.append(f"docs/cli.md lacks `labledger {path}`")
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden:
                if not p.help:
                    missing.append(f"`labledger {path} {p.opts[0]}` has no help text")
                for opt in p.opts + p.secondary_opts:
                    if opt.startswith("--") and opt not in reference:
                        missing.append(f"docs/cli.md lacks `labledger {path} {opt}`")
    assert not missing, "\n".join(missing) + "\n" + UPDATE_HINT


# ------------------------------------------------------------------------------------------------
# Docstring examples

#: demo/ modules whose examples would train a model are not collected (none today has one that
#: does; the list is where one would go).
DOCTEST_SKIP: set[str] = set()


def _modules() -> list[str]:
    names = ["labledger"]
    for info in pkgutil.walk_packages(labledger.__path__, "labledger."):
        if info.name not in DOCTEST_SKIP:
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("module", _modules())
def test_docstring_examples_run(module, tmp_path, monkeypatch):
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # an optional extra that is not installed
        pytest.skip(f"{module}: {exc}")
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(mod, module):
        if test.filename and Path(test.filename).resolve() != Path(mod.__file__).resolve():
            continue  # re-exported from another module: tested there
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {module} failed"


# ------------------------------------------------------------------------------------------------
# What the README's install lacks


def test_dataframe_without_pandas_names_the_extra(tmp_path, monkeypatch):
    with labledger.start_run("r", ledger=tmp_path / "l") as run:
        run.log(1, loss=0.5)
    view = labledger.open_ledger(tmp_path / "l").run("r")
    monkeypatch.setitem(sys.modules, "pandas", None)  # what `import pandas` meets when it is not installed
    with pytest.raises(labledger.errors.LedgerError, match=re.escape("pip install 'labledger[pandas]'")):
        view.dataframe("scalars")
    monkeypatch.undo()
    pytest.importorskip("pandas")
    assert view.dataframe("scalars")["loss"].tolist() == [0.5]


def test_the_module_map_of_layout_md_is_current():
    spec = importlib.util.spec_from_file_location("gen_layout", REPO / "docs" / "gen_layout.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (REPO / "docs" / "layout.md").read_text()
    shown = text.split(gen.START, 1)[1].split(gen.END, 1)[0].strip()
    assert shown == gen.module_map().strip(), (
        "docs/layout.md's module map is out of date: run `python docs/gen_layout.py`"
    )
    every = {m.name for m in pkgutil.walk_packages(labledger.__path__, "labledger.")}
    assert every and all(f"| `{name}` |" in shown for name in every)
