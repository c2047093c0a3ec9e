"""CLI start-up (#19): a command imports only its own module; ``--help`` and ``runs`` load no numpy or pyarrow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import labledger
from labledger.cli import COMMANDS, main

SRC = str(Path(labledger.__file__).resolve().parents[1])
HEAVY = ("numpy", "pyarrow", "scipy", "pandas", "labledger.metrics", "labledger.analysis")
#: What the table of ``labledger runs`` and the JSON of ``runs --json`` print without, too (#19).
LIGHT_TOO = ("rich", "msgspec", "labledger.schema", "hashlib")


def _importtime(*argv: str, env: dict[str, str]) -> set[str]:
    res = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env, timeout=60
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}


def imported(*args: str, ledger: Path) -> set[str]:
    """Modules ``python -X importtime -m labledger ARGS`` imported (a real process), less those a
    bare interpreter in the same environment imports (under ``pytest --cov`` coverage starts in
    every subprocess and loads hashlib, for one)."""
    env = {**os.environ, "PYTHONPATH": SRC, "LABLEDGER_DIR": str(ledger)}
    return _importtime("-m", "labledger", *args, env=env) - _importtime("-c", "pass", env=env)


@pytest.fixture(scope="module")
def small_ledger(tmp_path_factory):
    d = tmp_path_factory.mktemp("startup") / "ledger"
    with labledger.start_run("r", ledger=d) as run:
        run.log(1, loss=0.5)
    return d


#: What ``labledger runs`` without --where/--sort loads neither: the query language and the record
#: readers (only a filter, a sort or a crashed run to reap needs them, #19).
UNFILTERED_TOO = (
    "labledger.store.query",
    "labledger.store.counters",
    "labledger.store.jsonl",
    "labledger.store.compressed",
    "difflib",
)


@pytest.mark.parametrize("args", [("--help",), ("runs",), ("runs", "--json")])
def test_help_and_runs_import_no_numpy_or_pyarrow(args, small_ledger):
    mods = imported(*args, ledger=small_ledger)
    assert "labledger.cli" in mods  # the measurement saw the CLI load
    heavy = HEAVY + LIGHT_TOO + UNFILTERED_TOO + (("orjson",) if args == ("runs",) else ())  # the table: json
    assert not {m for m in mods if m.split(".")[0] in heavy or m.startswith(heavy)}


def test_runs_with_a_filter_loads_the_query_language(small_ledger):
    """The check above is not vacuous: ``--where`` does load store.query."""
    assert "labledger.store.query" in imported("runs", "--where", "name = 'r'", ledger=small_ledger)


def test_every_command_is_listed_and_loads_from_its_module():
    names = set(main.commands)  # reading them all imports every command module
    assert names == set(COMMANDS), "add new commands to labledger.cli.COMMANDS"
    for name, (module, text) in COMMANDS.items():
        cmd = main.commands[name]
        assert cmd.callback.__module__.startswith(f"labledger.cli.{module}")
        first = " ".join((cmd.short_help or (cmd.help or "").split("\n\n")[0]).split())
        assert text == first, f"COMMANDS[{name!r}] lists another help than the command's own first paragraph"


def test_help_lists_every_command_without_importing_their_modules(small_ledger):
    mods = imported("--help", ledger=small_ledger)
    modules = {module for module, _ in COMMANDS.values()}
    assert not {m for m in mods if m.startswith("labledger.cli.") and m.split(".")[2] in modules}
    assert not {m for m in mods if m.split(".")[0] == "rich"}


def test_the_consoles_are_made_once_and_follow_each_commands_columns(monkeypatch):
    """Every module holds the same console (a warning printed on stderr makes no second one), and
    each command lays its tables out to that command's $COLUMNS."""
    from labledger.cli import base

    first = base.__getattr__("console")
    assert base.__getattr__("err_console") is base.err_console and base.console is first
    monkeypatch.setenv("COLUMNS", "91")
    base._fit_console()
    assert first.width == 91


def test_output_to_a_full_disk_is_a_one_line_error(small_ledger):
    """``labledger schema --markdown > out.md`` on a full disk (/dev/full): exit 1, one line, no traceback."""
    env = {**os.environ, "PYTHONPATH": SRC, "LABLEDGER_DIR": str(small_ledger)}
    for args in (["schema", "--markdown"], ["runs"]):
        with open("/dev/full", "w") as full:
            res = subprocess.run(
                [sys.executable, "-m", "labledger", *args],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                timeout=60,
            )
        assert res.returncode == 1, res.stderr
        assert res.stderr.strip().splitlines() == [
            "Error: cannot write the output: No space left on device (what was written is incomplete)"
        ]


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    res = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**base, "PYTHONPATH": SRC, **(env or {})},
        timeout=60,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


def test_the_program_runs_numpy_on_one_blas_thread_unless_the_user_says():
    """``labledger`` (the console script and ``python -m labledger``) calls ``run``, which sets
    OPENBLAS_NUM_THREADS=1 before numpy loads; a user's own value is kept (#19)."""
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="labledger")
    assert script.value == "labledger.cli:run"
    code = "import os; from labledger.cli.base import process_settings; process_settings(); print(os.environ['OPENBLAS_NUM_THREADS'])"
    assert _python(code) == "1"
    assert _python(code, env={"OPENBLAS_NUM_THREADS": "3"}) == "3"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_programs_freed_arrays_are_reused_without_fresh_pages():
    """After ``process_settings`` a 48 MiB array freed and made again takes no new page from the
    kernel (glibc keeps it); without, the second one is mapped afresh (above glibc's largest
    dynamic threshold, 32 MiB) and faults its pages in again: 4 KiB or 2 MiB ones (#19)."""
    code = (
        "import resource, sys, numpy as np\n"
        "if sys.argv[1] == 'on':\n"
        "    from labledger.cli.base import process_settings; process_settings()\n"
        "a = np.ones(6 << 20); del a\n"
        "f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "b = np.ones(6 << 20)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)\n"
    )
    off, on = int(_python(code, "off")), int(_python(code, "on"))
    assert off >= 12 and on <= off // 4, (off, on)
