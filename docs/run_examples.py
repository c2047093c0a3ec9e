"""Run every shell example of README.md and docs/*.md, and check (or rewrite) the output shown.

    python docs/run_examples.py                 # run them all; print a diff per example that differs
    python docs/run_examples.py --update        # rewrite the shown outputs from this run
    python docs/run_examples.py docs/sweep.md   # one page

``tests/test_docs.py`` runs the same check, page by page, and fails on a diff.

What counts as an example:

- a fenced block (no language, ``console``, ``bash``, ``sh`` or ``shell``) with lines starting
  ``$ ``: each such line is a command (a line ending in ``\\`` continues on the next), and the
  lines up to the next ``$ `` are its output as shown, which must match the real output;
- a ``bash``/``sh``/``shell`` block without ``$ ``: every line is a command (``#`` comments
  allowed) that must succeed; nothing is shown, so nothing is compared.

Other blocks (usage synopses, file trees, outputs quoted on their own, Python) are not shell
examples. A command whose shown output has a line starting with ``Error:`` must fail (exit 1 or
2); every other command must exit 0.

Each page runs in a fresh temporary folder, holding a copy of ``docs/examples/<page>/`` (see
``docs/examples/make.py``), commands in order (a command sees what the earlier ones wrote).
Directives are HTML comments, invisible on the rendered page:

- ``<!-- examples: dir=NAME width=N -->`` anywhere in a page: copy ``docs/examples/NAME/``
  instead; run at a terminal width of N columns (default 110);
- ``<!-- example: skip REASON -->`` on the line before a block: do not run it (REASON says why,
  and which test covers what it shows instead).

In the shown output a line ``...`` stands for any number of lines (``--update`` keeps it). Before
comparing, both sides are normalised for what varies from run to run: run ids, timestamps, the
temporary folder (shown as ``/tmp/example``), recipe ids, durations and timings, process ids and host details,
and the padding of table columns. ``labledger ...`` commands run in this process (through click's
test runner, at a fixed terminal width), anything else through ``bash``; ``labledger demo`` runs
once per invocation of this script with the same arguments (its ledger is copied for the next page
that asks), which keeps ``--update`` to about a minute.
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import gc
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "examples"
#: The temporary folder as the docs show it.
SHOWN_CWD = "/tmp/example"
#: Terminal width for tables (rich) in every example.
WIDTH = 110
SHELL_LANGS = {"", "console", "bash", "sh", "shell"}
SCRIPT_LANGS = {"bash", "sh", "shell"}
ELLIPSIS = "..."

#: What varies from run to run, replaced on both sides before comparing.
NORMALISE = [
    (re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}(?:[0-9a-f]{6})?\b"), "<run-id>"),
    # a recipe's id hashes its content, which names the results file it was fitted on (a temporary path)
    (re.compile(r"\brecipe [0-9a-f]{16}\b"), "recipe <id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?"), "<time>"),
    (re.compile(r"^(\s*Latency:).*"), r"\1 <timings>"),
    (re.compile(r"\b\d+(\.\d+)? ?(µs|ms|s)\b"), "<t>"),
    (re.compile(r"\bpid \d+"), "pid <pid>"),
    (re.compile(r"^(\s*(host|python)\s).*"), r"\1<machine>"),
    (re.compile(r"[ \t]+"), " "),
    (re.compile(r"─+"), "─"),
    (re.compile(r"━+"), "━"),
]


def normalise(line: str) -> str:
    for rx, repl in NORMALISE:
        line = rx.sub(repl, line)
    return line.strip()


@dataclass
class Command:
    text: str  # as run (continuations joined)
    first: int  # index of its first line in the page
    last: int  # index of its last line (continuations included)
    shown: list[str] | None  # output lines as shown (None: not compared)
    out_end: int = 0  # index after its shown output


@dataclass
class Block:
    page: Path
    start: int  # index of the opening fence
    end: int  # index of the closing fence
    commands: list[Command] = field(default_factory=list)
    skip: str | None = None

    @property
    def where(self) -> str:
        return f"{_rel(self.page)}:{self.start + 1}"


def _rel(page: Path) -> str:
    try:
        return str(page.relative_to(REPO))
    except ValueError:
        return str(page)


def pages() -> list[Path]:
    """README.md and every docs/*.md, in a fixed order."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def parse(page: Path, lines: list[str]) -> list[Block]:
    """The shell examples of one page."""
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang = m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1 : j]
        if lang in SHELL_LANGS:
            block = Block(page, i, j)
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            sm = re.match(r"^<!--\s*example:\s*skip\b:?\s*(.*?)\s*-->$", prev.strip())
            if sm:
                block.skip = sm.group(1) or "skipped"
            if any(b.startswith("$ ") for b in body):
                _session(block, lines, i + 1, j)
            elif lang in SCRIPT_LANGS:
                _script(block, lines, i + 1, j)
            if block.commands or (block.skip and lang in SCRIPT_LANGS):
                blocks.append(block)
        i = j + 1
    return blocks


def _join(lines: list[str], k: int, end: int) -> tuple[str, int]:
    """A command starting at line k, with its ``\\`` continuations; returns (text, last line)."""
    text = lines[k]
    while text.endswith("\\") and k + 1 < end:
        k += 1
        text = text[:-1] + " " + lines[k].strip()
    return text, k


def _session(block: Block, lines: list[str], start: int, end: int) -> None:
    k = start
    while k < end:
        if not lines[k].startswith("$ "):
            k += 1  # text before the first command
            continue
        text, last = _join(lines, k, end)
        out = last + 1
        while out < end and not lines[out].startswith("$ "):
            out += 1
        cmd = Command(text[2:].strip(), k, last, lines[last + 1 : out], out)
        block.commands.append(cmd)
        k = out


def _script(block: Block, lines: list[str], start: int, end: int) -> None:
    k = start
    while k < end:
        raw = lines[k].strip()
        if not raw or raw.startswith("#"):
            k += 1
            continue
        text, last = _join(lines, k, end)
        block.commands.append(Command(text.strip(), k, last, None, last + 1))
        k = last + 1


# ------------------------------------------------------------------------------------------------
# Running


@dataclass
class Outcome:
    output: str
    exit_code: int
    #: Ledgers the command opened and left for the garbage collector to close (each one's
    #: ``ResourceWarning``): a command must close every ledger it opens.
    unclosed: tuple[str, ...] = ()


class Runner:
    """Runs commands in one folder; ``labledger`` commands in this process."""

    _demos: dict[tuple[str, ...], tuple[Path, str, Outcome]] = {}  # noqa: RUF012

    def __init__(self, cwd: Path, width: int = WIDTH):
        self.cwd = cwd
        self.width = width
        self.env = {
            "COLUMNS": str(width),
            "NO_COLOR": "1",
            "TERM": "dumb",
            "LABLEDGER_DIR": "",
            "LABLEDGER_TOKEN": "",
            "HF_HUB_OFFLINE": "1",
        }

    def run(self, command: str) -> Outcome:
        words = shlex.split(command, comments=True)
        plain = words and words[0] == "labledger" and not re.search(r"[|;&<>`$()]", command.split("#")[0])
        if plain and words[1:2] == ["demo"] and not {"--help", "-h"} & set(words):
            return self._demo(words)
        if plain:
            return self._in_process(words[1:])
        env = {**os.environ, **{k: v for k, v in self.env.items() if v}}
        for k in ("LABLEDGER_DIR", "LABLEDGER_TOKEN"):
            env.pop(k, None)
        p = subprocess.run(["bash", "-c", command], cwd=self.cwd, env=env, capture_output=True, text=True, timeout=600)
        return Outcome(p.stdout + p.stderr, p.returncode)

    def _in_process(self, args: list[str]) -> Outcome:
        from click.testing import CliRunner

        from labledger.cli import base, main

        # rich keeps the width it was given (restored below, so other users of the consoles, such as
        # the other tests, see what they would have seen)
        widths = [(c, c._width) for c in (base.console, base.err_console)]
        for c, _ in widths:
            c.width = self.width
        old = Path.cwd()
        os.chdir(self.cwd)
        saved = {k: os.environ.get(k) for k in ("LABLEDGER_DIR", "LABLEDGER_TOKEN")}
        for k in saved:
            os.environ.pop(k, None)
        try:
            env = {k: (v or None) for k, v in self.env.items()}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ResourceWarning)
                result = CliRunner(env=env).invoke(main, args, prog_name="labledger", catch_exceptions=True)
                gc.collect()
        finally:
            for c, w in widths:
                c._width = w
            os.chdir(old)
            for k, v in saved.items():
                if v is not None:
                    os.environ[k] = v
        out = result.output
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            import traceback

            out += "".join(traceback.format_exception(result.exception))
        unclosed = tuple(str(w.message) for w in caught if issubclass(w.category, ResourceWarning))
        return Outcome(out, result.exit_code, unclosed)

    def _demo(self, words: list[str]) -> Outcome:
        """``labledger demo``: run once per argument list, then copy its ledger."""
        args = words[1:]
        ledger = ".labledger"
        rest = list(args)
        if "--ledger" in args:
            k = args.index("--ledger")
            ledger = args[k + 1]
            del rest[k : k + 2]
        key = (str(self.width), *rest)
        cached = self._demos.get(key)
        if cached is None:
            outcome = self._in_process(args)
            if outcome.exit_code != 0 or not (self.cwd / ledger).is_dir():
                return outcome
            keep = Path(tempfile.mkdtemp(prefix="labledger-docs-demo-"))
            atexit.register(shutil.rmtree, keep, True)
            shutil.copytree(self.cwd / ledger, keep / "ledger", symlinks=True)
            text = outcome.output.replace(str(self.cwd / ledger), str(keep / "ledger"))
            self._demos[key] = (
                keep / "ledger",
                str(keep),
                Outcome(text.replace(str(self.cwd), str(keep)), outcome.exit_code),
            )
            return outcome
        src, src_cwd, outcome = cached
        shutil.copytree(src, self.cwd / ledger, symlinks=True)
        text = outcome.output.replace(str(src), str(self.cwd / ledger)).replace(src_cwd, str(self.cwd))
        return Outcome(text, outcome.exit_code)


def shown_form(output: str, cwd: Path) -> list[str]:
    """The output as the docs show it: the folder as ``/tmp/example``, no trailing blanks."""
    text = output.replace(str(cwd.resolve()), SHOWN_CWD).replace(str(cwd), SHOWN_CWD)
    lines = [ln.rstrip() for ln in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _matches(shown: list[str], actual: list[str]) -> list[str] | None:
    """``actual`` laid out like ``shown`` (its ``...`` kept), or None when the two differ."""
    return _layout(shown, actual, strict=True)


def _layout(shown: list[str], actual: list[str], *, strict: bool) -> list[str] | None:
    segs: list[list[str]] = [[]]
    for ln in shown:
        if ln.strip() == ELLIPSIS:
            segs.append([])
        else:
            segs[-1].append(ln)
    na = [normalise(a) for a in actual]
    if len(segs) == 1:
        if not strict:
            return list(actual)
        return list(actual) if [normalise(s) for s in shown] == na else None
    head, *middle, tail = segs
    out: list[str] = []
    pos = len(head)
    if strict and [normalise(s) for s in head] != na[: len(head)]:
        return None
    out += actual[: len(head)]
    tail_start = len(actual) - len(tail)
    if tail_start < pos or (strict and [normalise(s) for s in tail] != na[tail_start:]):
        return None if strict else _fail_layout()
    for seg in middle:
        ns = [normalise(s) for s in seg]
        found = next((p for p in range(pos, tail_start - len(seg) + 1) if na[p : p + len(seg)] == ns), None)
        if found is None and not strict and seg:
            key = " ".join(ns[0].split()[:2])
            found = next((p for p in range(pos, tail_start - len(seg) + 1) if na[p].startswith(key)), None)
        if found is None:
            return None if strict else _fail_layout()
        out += [ELLIPSIS, *actual[found : found + len(seg)]]
        pos = found + len(seg)
    out += [ELLIPSIS, *actual[tail_start:]]
    return out


def _fail_layout() -> None:
    return None


#: The text of each page as it was when its examples ran (``update`` refuses a page edited since).
_read: dict[Path, str] = {}


@dataclass
class Result:
    block: Block
    command: Command
    actual: list[str]
    exit_code: int
    problem: str | None  # None: as shown
    seconds: float = 0.0


def run_page(page: Path) -> tuple[list[Result], list[Block]]:
    """Run a page's examples; returns the results of every command run, and every block."""
    original = page.read_text()
    _read[page] = original
    lines = original.split("\n")
    blocks = parse(page, lines)
    text = "\n".join(lines)
    dm = re.search(r"<!--\s*examples:\s*(.*?)\s*-->", text)
    opts = dict(kv.split("=", 1) for kv in dm.group(1).split()) if dm else {}
    folder = EXAMPLES / opts.get("dir", page.stem)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="labledger-docs-") as tmp:
        cwd = Path(tmp).resolve()
        if folder.is_dir():
            for f in folder.iterdir():
                (shutil.copytree if f.is_dir() else shutil.copy2)(f, cwd / f.name)
        runner = Runner(cwd, width=int(opts.get("width", WIDTH)))
        for block in blocks:
            if block.skip:
                continue
            for cmd in block.commands:
                t0 = time.perf_counter()
                got = runner.run(cmd.text)
                took = time.perf_counter() - t0
                actual = shown_form(got.output, cwd)
                expect_error = cmd.shown is not None and any(s.startswith("Error:") for s in cmd.shown)
                problem = None
                if got.unclosed:
                    problem = f"left a ledger open: {got.unclosed[0]}"
                elif expect_error and got.exit_code not in (1, 2):
                    problem = f"expected to fail (exit 1 or 2), exited {got.exit_code}"
                elif not expect_error and got.exit_code != 0:
                    problem = f"exited {got.exit_code}"
                elif cmd.shown is not None and _matches(cmd.shown, actual) is None:
                    problem = "output differs from the one shown"
                results.append(Result(block, cmd, actual, got.exit_code, problem, took))
    return results, blocks


def report(results: list[Result]) -> str:
    """A readable account of every failing command, with a diff of its output."""
    parts = []
    for r in results:
        if r.problem is None:
            continue
        head = f"{_rel(r.block.page)}:{r.command.first + 1}: $ {r.command.text}\n  {r.problem}"
        if r.command.shown is not None:
            diff = difflib.unified_diff(r.command.shown, r.actual, "shown", "actual", lineterm="", n=2)
            head += "\n" + "\n".join("    " + d for d in diff)
        else:
            head += "\n" + "\n".join("    " + a for a in r.actual[-30:])
        parts.append(head)
    return "\n\n".join(parts)


def update(page: Path, results: list[Result]) -> int:
    """Rewrite the page's shown outputs from ``results``; returns how many changed."""
    text = page.read_text()
    if _read.get(page) != text:
        print(f"{_rel(page)} changed while its examples ran: not rewritten (run --update again)")
        return 0
    lines = text.split("\n")
    changed = 0
    for r in sorted(results, key=lambda r: r.command.first, reverse=True):
        cmd = r.command
        if cmd.shown is None or r.problem is None:
            continue
        if r.problem != "output differs from the one shown":
            continue  # a failing command is reported, not written into the docs
        new = _layout(cmd.shown, r.actual, strict=False)
        if new is None:
            print(f"{_rel(page)}:{cmd.first + 1}: cannot place the '...' of the shown output; edit by hand")
            continue
        lines[cmd.last + 1 : cmd.out_end] = new
        changed += 1
    if changed:
        page.write_text("\n".join(lines))
    return changed


CLI_PAGE = REPO / "docs" / "cli.md"


def commands() -> list[tuple[str, object]]:
    """Every command and subcommand of ``labledger``, as (``"calibrate fit"``, click command)."""
    from labledger.cli import main as root

    out: list[tuple[str, object]] = []

    def walk(prefix: str, group: object) -> None:
        for name in sorted(getattr(group, "commands", {})):
            cmd = group.commands[name]  # type: ignore[attr-defined]
            path = f"{prefix} {name}".strip()
            out.append((path, cmd))
            walk(path, cmd)

    walk("", root)
    return out


def cli_skeleton() -> str:
    """docs/cli.md without outputs: one ``$ labledger ... --help`` per command (``--update`` fills them)."""
    parts = [
        "# Command reference",
        "",
        "Every command's `--help`, generated by `python docs/run_examples.py --update` (and checked by",
        "`tests/test_docs.py`, which fails when a command or an option has no help text or is missing here).",
        "The pages linked from the [README](../README.md) explain what the commands are for.",
        "",
        "The `labledger` program (the console script and `python -m labledger`) sets two things in its own",
        "process before it loads numpy: `OPENBLAS_NUM_THREADS` defaults to 1 (its commands run their matrix",
        "products on one BLAS thread, so their documents do not depend on the core count; a value you set is",
        "kept), and glibc's allocator keeps freed arrays of up to 64 MiB for reuse instead of taking fresh",
        "pages from the kernel for each one. Calling `labledger.cli.main` from your own process changes neither.",
        "",
        "```",
        "$ labledger --help",
        "```",
    ]
    for path, _ in commands():
        parts += ["", f"## labledger {path}", "", "```", f"$ labledger {path} --help", "```"]
    return "\n".join(parts) + "\n"


def _keep_outputs(skeleton: str, old: str) -> str:
    """The skeleton with the outputs that the old page already showed (so an update only adds)."""
    if not old:
        return skeleton
    shown: dict[str, list[str]] = {}
    lines = old.split("\n")
    for block in parse(CLI_PAGE, lines):
        for cmd in block.commands:
            shown[cmd.text] = cmd.shown or []
    out: list[str] = []
    for line in skeleton.split("\n"):
        out.append(line)
        if line.startswith("$ ") and line[2:] in shown:
            out += shown[line[2:]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path, help="pages to run (default: README.md and docs/*.md)")
    ap.add_argument("--update", action="store_true", help="rewrite the shown outputs from this run")
    ap.add_argument("--times", action="store_true", help="print each command's wall time")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    failed = 0
    chosen = [p.resolve() for p in args.pages] or pages()
    if args.update and CLI_PAGE in chosen:
        old = CLI_PAGE.read_text() if CLI_PAGE.exists() else ""
        CLI_PAGE.write_text(_keep_outputs(cli_skeleton(), old))
    for page in chosen:
        results, blocks = run_page(page)
        if args.times:
            for r in results:
                print(f"{r.seconds:7.2f} s  {_rel(page)}:{r.command.first + 1}  {r.command.text[:80]}")
        bad = [r for r in results if r.problem]
        skipped = sum(1 for b in blocks if b.skip)
        if args.update:
            n = update(page, results)
            bad = [r for r in bad if r.problem != "output differs from the one shown"]
            print(f"{_rel(page)}: {len(results)} commands, {n} outputs rewritten, {skipped} blocks skipped")
        else:
            print(f"{_rel(page)}: {len(results)} commands, {len(bad)} differ or fail, {skipped} blocks skipped")
        if bad:
            print(report(bad))
            failed += len(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
