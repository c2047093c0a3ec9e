"""`_repr_html_` of evaluation, comparison, calibration report and version table (#14): small
escaped tables with CIs and definitions; the notebook test executes them in a real kernel."""

from __future__ import annotations

from html import escape
from html.parser import HTMLParser

import pytest

import labledger
from labledger.analysis.benchmarks import Entry, version_table
from labledger.calibrate import fit, report

EVIL = "<script>alert(1)</script>"


def _rows(shift: float = 0.0) -> list[dict]:
    return [
        {
            "id": i,
            "task": EVIL,
            "gold": "yes" if i % 3 == 0 else "no",
            "split": "dev" if i < 30 else "test",
            "slices": {"lang": "<en>" if i % 2 else "fr"},
            "probs": {
                "yes": 0.35 + 0.3 * (i % 3 == 0) - shift * (i % 5 == 0),
                "no": 0.65 - 0.3 * (i % 3 == 0) + shift * (i % 5 == 0),
            },
        }
        for i in range(60)
    ]


class Cells(HTMLParser):
    """The text of every table cell, and every tag (to check that nothing unescaped got through)."""

    def __init__(self, page: str):
        super().__init__()
        self.cells: list[str] = []
        self.tags: set[str] = set()
        self._in = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag in ("td", "th"):
            self._in = True
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._in = False

    def handle_data(self, data):
        if self._in:
            self.cells[-1] += data


def _check(page: str) -> Cells:
    assert "<script" not in page and "&lt;script&gt;" in page
    parsed = Cells(page)
    assert parsed.tags <= {"div", "h4", "h5", "p", "table", "tr", "th", "td", "details", "summary", "ul", "li", "b"}
    return parsed


@pytest.fixture(scope="module")
def docs():
    ev = labledger.evaluate(_rows(), by="lang", resamples=50)
    cmp = labledger.compare(_rows(), _rows(0.2), resamples=50)
    rec = fit(_rows(), method="threshold", positive="yes", fit_split="split=dev")
    rep = report(_rows(), rec, resamples=50)
    entries = [
        Entry(model=m, suite="s", benchmark=EVIL, metric="accuracy", value=v, ci_low=v - 0.1, ci_high=v + 0.1, n=60)
        for m, v in (("m<1>", 0.5), ("m2", 0.75))
    ]
    table = version_table(entries, suite="s", models=["m<1>", "m2"], delta_from="m<1>")
    return ev, cmp, rep, table


def test_evaluation_html(docs):
    ev = docs[0]
    cells = _check(ev._repr_html_()).cells
    acc = ev.metric(EVIL, "accuracy")
    i = cells.index("accuracy")
    assert cells[i + 1] == f"{acc.value:.4f}" and cells[i + 2] == f"[{acc.ci_low:.4f}, {acc.ci_high:.4f}]"
    assert "95% CI" in cells and "<en>" in cells  # the slice value, escaped in the page
    assert ev._repr_html_() == ev.doc._repr_html_() and escape(acc.definition) in ev._repr_html_()


def test_comparison_html(docs):
    cmp = docs[1]
    page = cmp._repr_html_()
    cells = _check(page).cells
    m = cmp.metric(EVIL, "accuracy")
    i = cells.index("accuracy")
    assert cells[i + 1 : i + 5] == [f"{m.a:.4f}", f"{m.b:.4f}", f"{m.diff:.4f}", f"[{m.ci_low:.4f}, {m.ci_high:.4f}]"]
    assert "p adjusted" in cells and "holm" in page


def test_calibration_report_html(docs):
    rep = docs[2]
    cells = _check(rep._repr_html_()).cells
    row = rep.doc.table[0]
    assert "calibrated" in cells and f"{row.calibrated:.4f}" in cells and row.method in cells


def test_version_table_html(docs):
    table = docs[3]
    cells = _check(table._repr_html_()).cells
    assert "m<1>" in cells and "0.5000 [0.4000, 0.6000]" in cells and "0.2500" in cells  # the delta
    assert "mean (1)" in cells
