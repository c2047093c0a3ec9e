"""The plain table writer of ``labledger runs`` (#19) prints what rich prints, byte for byte, or hands over to rich."""

from __future__ import annotations

import io

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import labledger
from labledger.cli import main, text_table
from labledger.cli.runs import STATUS_STYLE
from labledger.cli.text_table import Column

STYLES = [None, *STATUS_STYLE.values()]


def rich_output(title: str, columns: list[Column], rows, styles, *, width: int, mode: str) -> str:
    """The table as ``labledger runs`` printed it with rich before #19 (markup cells, a str title)."""
    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        highlight=False,
        soft_wrap=False,
        force_terminal=mode != "none",
        color_system=None if mode == "none" else "standard",
        no_color=mode == "attrs",
        _environ={},
    )
    table = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD)
    for c in columns:
        table.add_column(
            c.header,
            justify=c.justify,
            no_wrap=not c.wrap,
            min_width=c.min_width or None,
            ratio=1 if c.wrap else None,
            overflow="fold" if c.wrap else "ellipsis",
        )
    for row, row_styles in zip(rows, styles):
        table.add_row(*(f"[{s}]{escape(cell)}[/]" if s else escape(cell) for cell, s in zip(row, row_styles)))
    console.print(table)
    return out.getvalue()


# headers are labledger's own column names, which rich reads as markup: no brackets or backslashes
words = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="[]\\"), min_size=1, max_size=12)
# cells without a backslash: the reference is rich fed markup-escaped cells, and rich reads some
# escaped backslashes back otherwise (a cell's last backslash as two, one before "[" not at all):
# quirks of rich's markup that the plain writer (which prints the text as it is) does not copy
cell_words = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="\\"), min_size=1, max_size=12
)
lines = st.lists(cell_words, min_size=1, max_size=3).map(" ".join) | st.just("")
cells = st.lists(lines, min_size=1, max_size=3).map("\n".join)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 5))
    columns = [
        Column(
            draw(words),
            justify=draw(st.sampled_from(["left", "right"])),
            min_width=draw(st.sampled_from([0, 0, 6, 28])),
            wrap=draw(st.booleans()),
        )
        for _ in range(n)
    ]
    rows = draw(st.lists(st.lists(cells, min_size=n, max_size=n), max_size=5))
    styles = [[draw(st.sampled_from(STYLES)) for _ in range(n)] for _ in rows]
    title = draw(st.sampled_from(["", "Runs in .labledger", "Runs in /a/very/long/path/to/a/ledger/folder"]))
    return title, columns, rows, styles


@settings(max_examples=60, deadline=None)
@given(tables(), st.sampled_from([20, 40, 80, 150]), st.sampled_from(["none", "attrs", "full"]))
def test_the_plain_table_is_richs_byte_for_byte(table, width, mode):
    title, columns, rows, styles = table
    text = text_table.render(title, columns, rows, width=width, mode=mode, styles=styles)
    if text is not None:
        assert text == rich_output(title, columns, rows, styles, width=width, mode=mode)


@pytest.mark.parametrize(
    "cell",
    ["wide 表", "tab\there", " leading", "trailing ", "x" * 200],
    ids=["wide", "tab", "leading", "trailing", "too-wide"],
)
def test_what_only_rich_lays_out_is_handed_to_it(cell):
    assert text_table.render("t", [Column("a")], [[cell]], width=80) is None
    assert text_table.render("t", [Column("a")], [["ok"]], width=80) is not None


def test_a_title_wider_than_the_table_goes_to_rich():
    assert text_table.render("Runs in /some/long/folder", [Column("a")], [["b"]], width=80) is None


@pytest.mark.parametrize(
    "env,mode",
    [
        ({}, "none"),
        ({"FORCE_COLOR": "1"}, "full"),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, "attrs"),
        ({"FORCE_COLOR": ""}, "none"),
        ({"TTY_COMPATIBLE": "1", "TERM": "dumb"}, "none"),
        ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, "none"),
    ],
)
def test_styles_only_where_rich_would_use_them(monkeypatch, env, mode):
    for key in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TERM"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert text_table.color_mode(io.StringIO()) == mode
    assert Console(file=io.StringIO()).is_terminal == (mode != "none" or env.get("TERM") == "dumb")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    d = tmp_path_factory.mktemp("table") / "ledger"
    for name in ("mlp", "naïve-wide-表"):
        with labledger.start_run(name, group="g", ledger=d) as run:
            run.log(1, loss=0.5)
            run.set_summary(test_accuracy=0.875)
    return d


def test_runs_prints_the_same_table_either_way(ledger):
    """A wide character sends the whole table to rich; an ASCII table is written without it: both
    lay the rows out alike (same header, same widths for the same cells)."""
    both = CliRunner().invoke(main, ["runs", "--ledger", str(ledger)], env={"COLUMNS": "200"})
    one = CliRunner().invoke(main, ["runs", "--ledger", str(ledger), "--name", "mlp"], env={"COLUMNS": "200"})
    assert both.exit_code == 0 and one.exit_code == 0, both.output + one.output
    assert "naïve-wide-表" in both.stdout and "naïve" not in one.stdout
    mlp = [line for line in both.stdout.splitlines() if " mlp " in line]
    assert mlp and mlp[0].split() == next(line for line in one.stdout.splitlines() if " mlp " in line).split()
    header = [line.split() for line in (both.stdout, one.stdout) for line in [line.splitlines()[2]]]
    assert header[0] == header[1] == ["id", "name", "group", "status", "steps", "started", "duration", "headline"]


def test_no_runs_is_one_line(ledger):
    res = CliRunner().invoke(main, ["runs", "--ledger", str(ledger), "--name", "nope"])
    assert res.exit_code == 0 and res.stdout == f"No runs in {ledger} match.\n"


def test_the_width_on_a_terminal_is_the_one_rich_finds(monkeypatch):
    """On a terminal (a real pty as stdout) tables are laid out to rich's width: ``$COLUMNS``, 80 on
    a dumb terminal, else the first of stdin, stdout, stderr that is a terminal, else 80."""
    import fcntl
    import os
    import struct
    import sys
    import termios

    from labledger.cli import base

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 97, 0, 0))
    tty = open(slave, "w", closefd=False)
    monkeypatch.setattr(sys, "stdout", tty)
    for key in ("TERM", "COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
        monkeypatch.delenv(key, raising=False)
    try:
        cases = [
            ({"COLUMNS": "91"}, 91),
            ({"COLUMNS": "91", "TERM": "dumb"}, 80),
            ({"COLUMNS": "91", "LINES": "20", "TERM": "dumb"}, 91),  # rich takes a size given whole
        ]
        for env, width in cases:
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            assert base.out_width() == width == Console(file=tty).width
            for key in env:
                monkeypatch.delenv(key)
        saved = os.dup(0)
        os.dup2(slave, 0)  # stdin on the terminal: its size is the width
        try:
            assert base.out_width() == 97 == Console(file=tty).width
        finally:
            os.dup2(saved, 0)
            os.close(saved)
        if not any(os.isatty(fd) for fd in (0, 1, 2)):
            assert base.out_width() == 80 == Console(file=tty).width
        assert text_table.color_mode(tty) == "full"
    finally:
        tty.close()
        os.close(slave)
        os.close(master)
