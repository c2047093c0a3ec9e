"""Shared pieces of the command line: the root group, common options, output and errors.

The CLI is the only place that prints and picks exit codes: ``LedgerError`` -> ``Error: ...`` on
stderr and exit 1; usage errors (click) -> exit 2.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import os
import re
import sys
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from labledger.errors import LedgerError, RunNameWarning

if TYPE_CHECKING:
    from labledger.store.ledger import Ledger

#: C0 and C1 control characters other than tab and newline (ESC sequences can retitle or clear a terminal).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` escapes, so a run name cannot drive the terminal.

    >>> escape_controls("run\\x1b]0;pwned\\x07 ok")
    'run\\\\x1b]0;pwned\\\\x07 ok'
    """
    if text.isprintable():
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _consoles() -> dict[str, Any]:
    """The two rich consoles, made on first use (so that ``--help`` and ``--json`` do not wait for
    rich's import): ``console`` for tables and summaries on stdout (never used with ``--json``), and
    ``err_console`` for warnings on stderr, so that ``--json`` output stays one clean document. Both
    escape control characters in every string they render (names, tags, groups)."""
    if "console" in globals():  # made already: every module holds these same two
        return {name: globals()[name] for name in ("console", "err_console")}
    from rich.console import Console

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(escape_controls(text), **kwargs)

    made = {
        "console": SafeConsole(highlight=False, soft_wrap=False, width=_width()),
        "err_console": SafeConsole(stderr=True, highlight=False),
    }
    globals().update(made)
    return made


def _width() -> int | None:
    """The width tables are laid out to: the terminal's, else ``$COLUMNS``, else 150."""
    return None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "150"))


def out_width() -> int:
    """The width stdout's tables are laid out to, found as rich finds it: 80 on a dumb terminal
    (unless both ``$COLUMNS`` and ``$LINES`` are set), else :func:`_width`, else (a terminal)
    ``$COLUMNS``, else the terminal's own width, else 80."""
    from labledger.cli.text_table import is_dumb

    columns = os.environ.get("COLUMNS", "")
    if is_dumb(sys.stdout) and not (columns.isdigit() and os.environ.get("LINES", "").isdigit()):
        return 80
    width = _width()
    if width is not None:
        return width
    if columns.isdigit():
        return int(columns) or 80
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
    return 80


def _fit_console() -> None:
    """Lay the stdout console out to this command's width (``$COLUMNS`` may differ from when it was made)."""
    made = globals().get("console")
    if made is not None and not sys.stdout.isatty():
        made.width = _width()


def __getattr__(name: str) -> Any:
    """``console`` and ``err_console`` (see :func:`_consoles`)."""
    if name in ("console", "err_console"):
        return _consoles()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Commands(dict[str, click.Command]):
    """The commands of a :class:`LazyGroup`: reading them all (``group.commands.items()``) first
    imports every module that defines one; adding one (``add_command``) is a plain store."""

    def __init__(self, group: LazyGroup) -> None:
        super().__init__()
        self._group = group

    def _all(self) -> _Commands:
        self._group.load_all()
        return self

    def __iter__(self) -> Iterator[str]:
        return dict.__iter__(self._all())

    def __len__(self) -> int:
        return dict.__len__(self._all())

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self._all(), name)

    def __getitem__(self, name: str) -> click.Command:
        return dict.__getitem__(self._all(), name)

    def get(self, name: str, default: Any = None) -> Any:
        return dict.get(self._all(), name, default)

    def keys(self) -> Any:
        return dict.keys(self._all())

    def values(self) -> Any:
        return dict.values(self._all())

    def items(self) -> Any:
        return dict.items(self._all())


class LazyGroup(click.Group):
    """A click group whose commands are defined in modules imported only when needed.

    ``lazy`` maps each command name to its module under ``labledger.cli``; running a command
    imports its module alone, so ``labledger runs`` never loads numpy, pyarrow or the metric
    registry. ``--help`` lists them from :attr:`lazy_help`; ``group.commands`` imports every module.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Command name -> the module of ``labledger.cli`` that defines it.
        self.lazy: dict[str, str] = {}
        #: Command name -> the first paragraph of its help, which ``--help`` lists without importing.
        self.lazy_help: dict[str, str] = {}
        self._store = _Commands(self)
        self.commands = self._store

    def _import(self, module: str) -> None:
        importlib.import_module(f"labledger.cli.{module}")

    def load_all(self) -> None:
        """Import every module of :attr:`lazy` (each registers its commands when imported)."""
        for name, module in list(self.lazy.items()):
            if not dict.__contains__(self._store, name):
                self._import(module)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.lazy) | set(dict.keys(self._store)))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``--help``, as click writes it, from :attr:`lazy_help` for the
        commands not imported yet (so listing them imports nothing)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = dict.get(self._store, name)
            if cmd is not None and cmd.hidden:
                continue
            rows.append((name, cmd.help if cmd is not None and name not in self.lazy_help else self.lazy_help[name]))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl(
                    [(name, click.Command(name, help=text).get_short_help_str(limit)) for name, text in rows]
                )

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = self.lazy.get(cmd_name)
        if module is not None and not dict.__contains__(self._store, cmd_name):
            self._import(module)
        return dict.get(self._store, cmd_name)


class LazyChoice(click.Choice):
    """A :class:`click.Choice` whose choices come from ``load()`` on first use (help, parsing), so
    that the module that knows them (a metric kernel's) loads only when the command runs.

    >>> LazyChoice(lambda: ["f1", "accuracy"]).convert("f1", None, None)
    'f1'
    """

    def __init__(self, load: Any, case_sensitive: bool = True) -> None:
        self._load = load
        self._choices: tuple[str, ...] | None = None
        self.case_sensitive = case_sensitive

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        if self._choices is None:
            self._choices = tuple(self._load())
        return self._choices


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="labledger")
def main() -> None:
    """labledger: a local-first ledger for ML experiments.

    Every command reads the ledger from --ledger DIR, else $LABLEDGER_DIR, else ./.labledger.
    """


def run(**kwargs: Any) -> None:
    """The ``labledger`` program (its console script and ``python -m labledger``): the settings of
    a command-line process (:func:`process_settings`, warnings shown by :func:`one_line_warning`),
    then :data:`main` (``kwargs``: click's, such as ``prog_name``), which ends the process by
    ``sys.exit`` with the command's status. Code that calls ``main`` in its own process (tests, a
    notebook) keeps its own settings."""
    process_settings()
    warnings.showwarning = one_line_warning
    main(**kwargs)


#: glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def process_settings() -> None:
    """What a ``labledger`` process sets before it imports numpy:

    - ``OPENBLAS_NUM_THREADS`` defaults to 1: numpy's OpenBLAS otherwise starts a thread per core
      at import, which spin, costing CPU and wall time on every command. The commands'
      products run on one BLAS thread anyway (evaluate, compare and calibrate report are inside
      :func:`labledger.analysis.threads.one_blas_thread`, so their documents do not depend on the
      core count). A user's own setting is kept; PyTorch's MKL and OpenMP threads are not touched.
    - glibc's allocator keeps what numpy frees for the next arrays, up to 64 MiB an array and 128
      MiB at the heap's top (``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``: what glibc's own dynamic
      threshold reaches after one 64 MiB free), in two arenas that all threads share
      (``M_ARENA_MAX``): a metric's temporaries otherwise come as fresh pages from the kernel,
      zeroed, on each use. Two arenas, not one: the JSON parser's threads then contend less with
      the reader's. Arrays over 64 MiB are mapped and returned at once as before (the figures are
      in docs/performance.md). Nothing where the C
      library is not glibc.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from labledger.machine import libc

    lib = libc()
    if lib is None:  # musl and other C libraries: their defaults
        return
    for param, value in ((_M_MMAP_THRESHOLD, 64 << 20), (_M_TRIM_THRESHOLD, 128 << 20), (_M_ARENA_MAX, 2)):
        lib.mallopt(param, value)


def resolve_ledger_path(value: str | None) -> str:
    """The ledger location: the option, else ``$LABLEDGER_DIR``, else ``./.labledger``."""
    from labledger.store.ledger import default_ledger_path

    return value or str(default_ledger_path())


def open_for_cli(ledger_path: str | None, *, create: bool = False) -> Ledger:
    """The ledger a command works on (``--ledger``, ``$LABLEDGER_DIR``, ``./.labledger``), closed when
    the command ends, however it ends (``ctx.call_on_close``): its commits checkpointed into
    ``ledger.db``, so that a copy of that file alone holds them."""
    from labledger import open_ledger

    ledger = open_ledger(resolve_ledger_path(ledger_path), create=create)
    ctx = click.get_current_context(silent=True)
    if ctx is None:  # called outside a command: the caller closes it
        return ledger
    ctx.call_on_close(ledger.close)
    return ledger


ledger_option = click.option(
    "--ledger",
    "ledger_path",
    metavar="DIR",
    default=None,
    help="Ledger folder (default: $LABLEDGER_DIR, else ./.labledger).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")


def save_target(save: str | None) -> tuple[str, str] | None:
    """``(run, name)`` of a ``--save RUN:NAME`` value (``None`` when not given); a usage error
    (exit 2) otherwise, raised before any work is done.

    >>> save_target("mlp-h32:test-eval"), save_target(None)
    (('mlp-h32', 'test-eval'), None)
    """
    if save is None:
        return None
    run, _, name = save.partition(":")
    if not run or not name:
        raise click.BadParameter(f"expected RUN:NAME; got {save!r}", param_hint="--save")
    return run, name


def save_document(ledger_path: str | None, target: tuple[str, str], document: Any, *, kind: str | None = None) -> Any:
    """Store ``document`` (a typed document, or the dict of ``kind``) in run ``target[0]`` under
    ``evals/<target[1]>/`` (:meth:`~labledger.Ledger.save_evaluation`), where ``show``, ``runs``
    fields and the site find it; the path written."""
    return open_for_cli(ledger_path).save_evaluation(target[0], target[1], document, kind=kind)


def csv_list(value: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (options like ``--models base,v3``)."""
    return [x.strip() for x in value.split(",") if x.strip()] if value else []


def emit_json(obj: Any) -> None:
    """Print one JSON document on stdout (numpy scalars/arrays and NaN handled)."""
    import orjson  # here, not at the top: `labledger --help` and the tables need no JSON

    data = orjson.dumps(
        obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS, default=_json_default
    )
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def warn(message: str) -> None:
    """A warning on stderr."""
    from rich.markup import escape

    __getattr__("err_console").print(f"[yellow]Warning:[/yellow] {escape(message)}", markup=True, highlight=False)


def one_line_warning(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """A warning as the ``labledger`` program shows it: one ``Warning: ...`` line on stderr, without a
    source path or line (:func:`run` installs it for its own process)."""
    text = " ".join(str(message).split("\n"))
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"Warning: {escape_controls(text)}\n")


@contextlib.contextmanager
def name_notes() -> Iterator[None]:
    """Print each :class:`~labledger.errors.RunNameWarning` (a name shared by several runs) once on
    stderr as ``Note: ...``; other warnings go where they went before."""
    seen: set[str] = set()
    previous = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if issubclass(category, RunNameWarning):
            if str(message) not in seen:
                seen.add(str(message))
                click.echo(f"Note: {escape_controls(str(message))}", err=True)
            return
        previous(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", RunNameWarning)
        warnings.showwarning = show
        yield


def handle_errors(fn):
    """Turn ``LedgerError`` into ``Error: ...`` on stderr with its exit code (1 unless stated)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _fit_console()
        try:
            with name_notes():
                try:
                    return fn(*args, **kwargs)
                finally:  # the cache entries a command left to threads, written before it ends
                    columnar = sys.modules.get("labledger.inputs.columnar")
                    if columnar is not None:
                        columnar.wait_for_writes()
        except LedgerError as exc:
            click.echo(f"Error: {escape_controls(str(exc))}", err=True)
            sys.exit(getattr(exc, "exit_code", 1))
        except BrokenPipeError:  # `labledger runs | head`
            sys.exit(0)
        except OSError as exc:  # stdout on a full disk (`labledger schema --markdown > out.md`)
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
                raise
            where = exc.filename or "the output"
            click.echo(f"Error: cannot write {where}: {exc.strerror} (what was written is incomplete)", err=True)
            with contextlib.suppress(OSError):  # nothing more reaches the full file at exit
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)

    return wrapper
