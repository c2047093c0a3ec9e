"""``GET /api/runs?where=&sort=``: the query language through the server; unknown parameters are refused."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

import labledger
from labledger.server import create_app


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    for i, lr in enumerate([1e-4, 1e-2, 5e-4]):
        with labledger.start_run(f"r{i}", config={"optim": {"lr": lr}}, ledger=root / "ledger") as run:
            run.log(1, loss=1.0 + i)
    with TestClient(create_app(root / "ledger", uploads_dir=root / "uploads")) as c:
        yield c


def test_where_and_sort(client):
    r = client.get("/api/runs", params={"where": "config.optim.lr < 1e-3", "sort": "-scalars.loss.last"})
    assert r.status_code == 200, r.text
    assert [x["name"] for x in r.json()["runs"]] == ["r2", "r0"]
    assert r.json()["total"] == 2


def test_unknown_parameters_and_bad_expressions_are_400(client):
    r = client.get("/api/runs?config.lr=0.1")
    assert r.status_code == 400 and "unknown query parameter 'config.lr'" in r.json()["error"]
    assert "where=" in r.json()["error"]
    r = client.get("/api/runs", params={"where": "lr << 3"})
    assert r.status_code == 400
    assert r.json()["error"].splitlines()[-1] == "      ^"  # under the second <
