"""Every failure of the server answers one envelope: ``{"ok": false, "status": <code>, "error": <message>}``
with the HTTP status it names (as datasette's tests/test_error_shape.py pins its own)."""

from __future__ import annotations

import shutil

import pytest
from conftest import make_batch
from starlette.testclient import TestClient

import labledger
from labledger.server import create_app
from labledger.server.openapi import openapi_document

TOKEN = "error-shape-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("errors")
    ledger = root / "ledger"
    with labledger.start_run("done", group="g", ledger=ledger) as run:
        run.log(1, loss=0.5)
        run.log_batch(make_batch(1))
    # A damaged run folder (a directory where a file should be), in a ledger of its own:
    # reading it is a server fault.
    with labledger.start_run("broken", ledger=root / "damaged") as broken:
        broken.log_batch(make_batch(1))
    (broken.dir / "batches.jsonl").unlink()
    (broken.dir / "batches.jsonl").mkdir()
    app = create_app(ledger, uploads_dir=root / "uploads", token=TOKEN, max_upload=1000, max_body=2000)
    readonly = create_app(ledger, uploads_dir=root / "uploads-ro")
    private = create_app(ledger, uploads_dir=root / "uploads-private", token=TOKEN, private=True)
    damaged = create_app(root / "damaged", uploads_dir=root / "uploads-damaged")
    with (
        TestClient(app, raise_server_exceptions=False) as client,
        TestClient(readonly, raise_server_exceptions=False) as ro,
        TestClient(private, raise_server_exceptions=False) as priv,
        TestClient(damaged, raise_server_exceptions=False) as dmg,
    ):
        client.post("/upload?filename=taken.txt", content=b"x", headers=AUTH).raise_for_status()
        started = client.post("/api/runs", json={"name": "live"}, headers=AUTH).json()["run"]["id"]
        yield {
            "client": client,
            "ro": ro,
            "private": priv,
            "damaged": dmg,
            "run": run.id,
            "broken": broken.id,
            "live": started,
        }
    shutil.rmtree(root, ignore_errors=True)


# (name, client, method, path, headers, body, status)
CASES = [
    ("unknown path", "client", "GET", "/nope", None, None, 404),
    ("unknown api path", "client", "GET", "/api/nothing/here", None, None, 404),
    ("unknown run", "client", "GET", "/api/runs/no-such-run", None, None, 404),
    ("unknown record kind", "client", "GET", "/api/runs/{run}/wat", None, None, 404),
    ("unknown evaluation", "client", "GET", "/api/runs/{run}/evals/nope", None, None, 404),
    ("unknown upload", "client", "GET", "/uploads/missing.txt", None, None, 404),
    ("no benchmark entries", "client", "GET", "/api/table?suite=none", None, None, 404),
    ("unknown data file", "client", "GET", "/data/runs/nope.js", None, None, 404),
    ("delete runs", "client", "DELETE", "/api/runs", None, None, 405),
    ("put upload", "client", "PUT", "/upload?filename=a.txt", AUTH, b"x", 405),
    ("get upload endpoint", "client", "GET", "/upload", None, None, 405),
    ("post to a download", "client", "POST", "/uploads/taken.txt", AUTH, b"x", 405),
    ("patch a run", "client", "PATCH", "/api/runs/{run}", AUTH, b"{}", 405),
    ("post checkpoints", "client", "POST", "/api/runs/{live}/checkpoints", AUTH, b"[]", 405),
    ("upload without token", "client", "POST", "/upload?filename=a.txt", None, b"x", 401),
    ("start run without token", "client", "POST", "/api/runs", None, b'{"name": "x"}', 401),
    (
        "basic auth instead of bearer",
        "client",
        "POST",
        "/upload?filename=a.txt",
        {"Authorization": "Basic dXNlcjpwYXNz"},
        b"x",
        401,
    ),
    ("private read without token", "private", "GET", "/api/runs", None, None, 401),
    ("private page without token", "private", "GET", "/", None, None, 401),
    ("wrong token", "client", "POST", "/upload?filename=a.txt", {"Authorization": "Bearer nope"}, b"x", 403),
    ("private read, wrong token", "private", "GET", "/api/runs", {"Authorization": "Bearer nope"}, None, 403),
    ("writes disabled (no token)", "ro", "POST", "/upload?filename=a.txt", AUTH, b"x", 403),
    ("upload over the cap", "client", "POST", "/upload?filename=big.bin", AUTH, b"x" * 1001, 413),
    ("api body over the cap", "client", "POST", "/api/runs/{live}/scalars", AUTH, b"[" + b" " * 2000 + b"]", 413),
    ("malformed JSON", "client", "POST", "/api/runs", AUTH, b'{"name": ', 400),
    ("JSON but not an object", "client", "POST", "/api/runs", AUTH, b'["name"]', 400),
    ("missing field", "client", "POST", "/api/runs", AUTH, b'{"group": "g"}', 400),
    ("malformed JSON lines", "client", "POST", "/api/runs/{live}/batches", AUTH, b'{"microbatch": 1}\n{oops', 400),
    ("bad record field", "client", "POST", "/api/runs/{live}/batches", AUTH, b'[{"microbatch": 0}]', 400),
    ("bad scalar", "client", "POST", "/api/runs/{live}/scalars", AUTH, b'[{"step": 1, "loss": "high"}]', 400),
    ("limit not a number", "client", "GET", "/api/runs/{run}/batches?limit=ten", None, None, 400),
    ("limit past the bound", "client", "GET", "/api/runs/{run}/batches?limit=100000", None, None, 400),
    ("negative offset", "client", "GET", "/api/runs/{run}/batches?offset=-1", None, None, 400),
    ("bad status filter", "client", "GET", "/api/runs?status=bogus", None, None, 400),
    ("unknown runs parameter", "client", "GET", "/api/runs?config.lr=0.1", None, None, 400),
    ("bad where expression", "client", "GET", "/api/runs?where=lr%20%3C%3C%203", None, None, 400),
    ("bad sort key", "client", "GET", "/api/runs?sort=-nope", None, None, 400),
    ("path traversal filename", "client", "POST", "/upload?filename=..%2Fx", AUTH, b"x", 400),
    ("empty upload", "client", "POST", "/upload?filename=empty.txt", AUTH, b"", 400),
    ("bad evaluation name", "client", "GET", "/api/runs/{run}/evals/%2e%2e", None, None, 400),
    ("upload exists", "client", "POST", "/upload?filename=taken.txt", AUTH, b"y", 409),
    ("log to a finished run", "client", "POST", "/api/runs/{run}/scalars", AUTH, b'[{"step": 1, "loss": 1}]', 409),
    ("damaged run folder", "damaged", "GET", "/api/runs/{broken}/batches", None, None, 500),
]


@pytest.mark.parametrize("name,who,method,path,headers,body,status", CASES, ids=[c[0] for c in CASES])
def test_every_failure_is_the_envelope(world, name, who, method, path, headers, body, status):
    client = world[who]
    url = path.format(run=world["run"], broken=world["broken"], live=world["live"])
    response = client.request(method, url, headers=headers, content=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    doc = response.json()
    assert set(doc) == {"ok", "status", "error"}, doc
    assert doc["ok"] is False and doc["status"] == status
    assert isinstance(doc["error"], str) and doc["error"].strip()
    if status == 500:
        assert "Traceback" not in doc["error"] and "IsADirectoryError" not in doc["error"]
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")
    if status == 405:
        assert response.headers["allow"]


def test_the_openapi_error_schema_is_the_envelope():
    schema = openapi_document("x")["components"]["schemas"]["Error"]
    assert set(schema["required"]) == set(schema["properties"]) == {"ok", "status", "error"}
    assert schema["additionalProperties"] is False


def test_messages_name_what_was_wrong(world):
    client, live = world["client"], world["live"]
    r = client.post(
        f"/api/runs/{live}/batches",
        headers=AUTH,
        content=b'{"microbatch": 1, "loss": 0.5}\n{"microbatch": 2, "loss": "x"}\n',
    )
    assert r.status_code == 400 and r.json()["error"] == "request body:2: field 'loss' must be a number; got 'x'"
    r = client.get(f"/api/runs/{world['run']}/batches?limit=100000")
    assert "'limit' must be between 1 and 1000" in r.json()["error"]
    r = client.delete("/api/runs")
    assert r.json()["error"] == "method DELETE is not allowed on /api/runs (allowed: GET, HEAD, POST)"


def test_head_failures_keep_their_status_without_a_body(world):
    r = world["client"].head("/uploads/missing.txt")
    assert r.status_code == 404 and r.content == b""
    r = world["client"].head("/uploads/%2e%2e")
    assert r.status_code == 400


def test_messages_do_not_show_the_servers_paths(world, tmp_path):
    r = world["client"].get("/api/runs/no-such-run")
    assert "<ledger>" in r.json()["error"] and str(tmp_path.parent) not in r.json()["error"]
