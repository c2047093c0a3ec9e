"""Paging runs by key (#46): ``Ledger.run_dicts(after=, limit=)`` in SQLite and PostgreSQL, and
``GET /api/runs?cursor=``: the pages, put end to end, are every run in the default order (newest
first, ties by id), with a filter too, and a bad cursor is a 400."""

from __future__ import annotations

import pytest
from postgres_server import pg_url, postgres_cluster  # noqa: F401 (fixtures)
from starlette.testclient import TestClient

import labledger
from labledger.errors import LedgerError
from labledger.server import create_app


def _fill(book) -> None:
    """23 finished runs, several started at the same second (ties go to the id)."""
    for i in range(23):
        run = labledger.start_run(f"r{i}", config={"lr": [1e-3, 1e-4][i % 2]}, ledger=book)
        run.log(1, loss=1.0 / (i + 1))
        run.finish()
    with book.transaction() as db:  # same start for runs 5..9: the order there is by id
        db.execute("UPDATE runs SET started = 1790000000.0 WHERE name IN ('r5', 'r6', 'r7', 'r8', 'r9')")


def _pages(book, **kw) -> list[list[str]]:
    pages, after = [], None
    while True:
        page = book.run_dicts(after=after, limit=6, **kw)
        if not page:
            return pages
        pages.append([d["id"] for d in page])
        after = (page[-1]["started"], page[-1]["id"])


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pages_by_key_are_every_run_in_order(backend, tmp_path, request):
    if backend == "sqlite":
        book = labledger.open_ledger(tmp_path / "ledger", create=True)
    else:
        url = request.getfixturevalue("pg_url")
        book = labledger.open_ledger(url, artifacts=tmp_path / "artifacts", create=True)
    try:
        _fill(book)
        every = [d["id"] for d in book.run_dicts()]
        pages = _pages(book)
        assert [len(p) for p in pages] == [6, 6, 6, 5]
        assert [i for p in pages for i in p] == every
        some = [d["id"] for d in book.run_dicts(where="config.lr < 5e-4")]
        assert [i for p in _pages(book, where="config.lr < 5e-4") for i in p] == some and len(some) == 11
        with pytest.raises(LedgerError, match="no sort"):
            book.run_dicts(limit=3, sort="name")
    finally:
        book.close()


def test_the_api_pages_runs_with_a_cursor(tmp_path):
    root = tmp_path / "ledger"
    book = labledger.open_ledger(root, create=True)
    _fill(book)
    every = [d["id"] for d in book.run_dicts()]
    book.close()
    with TestClient(create_app(root, uploads_dir=tmp_path / "uploads")) as c:
        got, cursor, calls = [], "", 0
        while cursor is not None:
            r = c.get("/api/runs", params={"cursor": cursor, "limit": 5})
            assert r.status_code == 200, r.text
            body = r.json()
            assert "total" not in body and body["count"] == len(body["runs"]) <= 5
            got += [d["id"] for d in body["runs"]]
            cursor, calls = body["next"], calls + 1
        assert got == every and calls == 5
        where = c.get("/api/runs", params={"cursor": "", "limit": 50, "where": "config.lr < 5e-4"}).json()
        assert where["next"] is None and len(where["runs"]) == 11
        bad = c.get("/api/runs", params={"cursor": "not-a-cursor"})
        assert bad.status_code == 400 and "'cursor'" in bad.json()["error"]
        both = c.get("/api/runs", params={"cursor": "", "sort": "name"})
        assert both.status_code == 400 and "default order" in both.json()["error"]
        legacy = c.get("/api/runs", params={"limit": 5}).json()  # paging by offset stays as it was
        assert legacy["total"] == 23 and [d["id"] for d in legacy["runs"]] == every[:5]
