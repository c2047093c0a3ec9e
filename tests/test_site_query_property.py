"""The site's query language (static/js/query.js) against the index's (store/query.py), on random
ledgers and random expressions (#12): in one Chromium page, the catalog the builder would write for
a random ledger (packed, then unpacked by the page) and the expressions of tests/test_query.py,
valid ones and mutated ones. The page selects the same runs in the same order as
``Ledger.runs(where=, sort=)``, and an invalid expression fails at the same position with the
same first line."""

from __future__ import annotations

import re
import warnings

import pytest
from conftest import ARGS, CHROMIUM, sync_playwright
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_query import expressions, fill, run_rows, sorts

import labledger
from labledger.site import build_site
from labledger.site.catalog import catalog_query_fields, slim_entries
from labledger.site.packing import pack_catalog
from labledger.site.rundata import run_basics
from labledger.store.ledger import Ledger
from labledger.store.query import QueryError

#: Characters a mutation inserts: the language's punctuation, quotes, operators, a letter, a digit.
NOISE = list("()'\"`<=>~!,-. a1")


@pytest.fixture(scope="module")
def query_page(tmp_path_factory):
    if sync_playwright is None or not CHROMIUM.exists():
        pytest.skip("no browser")
    root = tmp_path_factory.mktemp("query-property")
    labledger.open_ledger(root / "empty", create=True).close()
    build_site(root / "empty", root / "site")
    book = Ledger(root / "ledger", create=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((root / "site" / "index.html").as_uri())
        page.wait_for_selector("body[data-ready='1']")
        yield book, page, errors
        browser.close()
    book.close()


def catalog_of(book: Ledger) -> dict:
    """The catalog ``build_site`` writes for the ledger's runs (entries and query fields), packed."""
    entries = [run_basics(i) for i in book.runs()]
    fields = catalog_query_fields(book, entries)
    return pack_catalog({"ledger": "random", "runs": slim_entries(entries, fields), "fields": fields})


def in_python(book: Ledger, where: str, sort: str) -> dict:
    try:
        return {"ids": [r.id for r in book.runs(where=where, sort=sort or None)]}
    except QueryError as exc:
        return error_of(str(exc))


def error_of(message: str) -> dict:
    """First line (without the suggested names: difflib's and the page's nearness differ, nor a bad
    regular expression's reason: each engine words its own) and caret position of a QueryError's
    three-line message."""
    lines = message.splitlines()
    first = re.sub(r"; did you mean .*?\?(?= \(|$)", "", lines[0])
    first = re.sub(r"bad regular expression \(.*\)$", "bad regular expression", first)
    return {"error": first, "pos": lines[-1].index("^") - 2}


IN_PAGE = """([packed, queries]) => {
  const cat = LL.unpackCatalog(packed);
  return queries.map(([where, sort]) => {
    try {
      return {ids: LL.where.select(cat, where, sort).map(r => r.id)};
    } catch (e) {
      if (!e.query) throw e;
      return {message: e.message};
    }
  });
}"""


@st.composite
def mutated(draw) -> str:
    """A valid expression with one character deleted, inserted or replaced, or cut short."""
    text = draw(expressions())
    i = draw(st.integers(0, len(text)))
    how = draw(st.sampled_from(["delete", "insert", "replace", "cut"]))
    if how == "cut":
        return text[:i]
    if how == "delete":
        return text[:i] + text[i + 1 :]
    c = draw(st.sampled_from(NOISE))
    return text[:i] + c + text[i + (how == "replace") :]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(
    rows=run_rows,
    queries=st.lists(st.tuples(st.one_of(expressions(), mutated()), sorts), min_size=1, max_size=8),
)
def test_the_page_selects_what_the_index_selects(query_page, rows, queries):
    book, page, errors = query_page
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fill(book, rows)
    got = page.evaluate(IN_PAGE, [catalog_of(book), [list(q) for q in queries]])
    assert errors == []
    for (where, sort), js in zip(queries, got):
        expected = in_python(book, where, sort)
        if "message" in js:
            js = error_of(js["message"])
        assert js == expected, (where, sort)
