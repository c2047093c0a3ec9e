"""The server's JSON API and live pages, in-process (Starlette's TestClient): runs and their records
page by page, evaluations, the version table, logging through HTTP with the library's validation,
the OpenAPI document, and the static site's pages served live with every string escaped (plus one
real-browser check over HTTP)."""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path

import orjson
import pytest
from conftest import make_batch
from server_process import ServerProcess
from starlette.routing import Route
from starlette.testclient import TestClient
from test_site_build import XSS, make_site_ledger, results_rows

import labledger
from labledger.analysis.benchmarks import Entry, add_entries, read_entries, version_table
from labledger.server import create_app
from labledger.site.output import load_data_file

TOKEN = "api-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: A stored evaluation: a real document (the store checks documents against their schema).
EVAL_DOC = labledger.evaluate(
    [{"id": i, "task": "digit_step", "gold": "a" if i % 4 else "b", "pred": "a"} for i in range(60)],
    metrics=["accuracy"],
    resamples=0,
).to_dict()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    ledger = root / "ledger"
    ids = {}
    with labledger.start_run("alpha", group="g1", tags=("demo", "best"), config={"lr": 0.01}, ledger=ledger) as run:
        for mb in range(1, 601):
            run.log_batch(make_batch(mb, n=2))
            if mb % 10 == 0:
                run.log(mb // 10, loss=1.0 / mb, lr=0.01)
        run.log(61, loss=math.nan)
        run.log_results("test", results_rows(30))
        ids["alpha"] = run.id
    book = labledger.open_ledger(ledger)
    book.save_evaluation(ids["alpha"], "test", EVAL_DOC)
    with labledger.start_run("beta", group="g2", tags=("demo",), ledger=ledger) as run:
        run.log(1, loss=0.5)
        ids["beta"] = run.id
    with pytest.raises(RuntimeError), labledger.start_run("gamma", group="g2", ledger=ledger) as run:
        ids["gamma"] = run.id
        raise RuntimeError("boom")
    add_entries(
        book,
        [
            Entry(model=m, suite="public", benchmark=b, category="c", metric="accuracy", value=v)
            for m, b, v in (("v1", "hover", 0.6), ("v2", "hover", 0.7), ("v1", "mosi", 0.5), ("v2", "mosi", 0.45))
        ],
    )
    book.close()
    app = create_app(ledger, uploads_dir=root / "uploads", token=TOKEN, site_refresh=0.0)
    with TestClient(app) as client:
        yield {"client": client, "ids": ids, "ledger": ledger, "root": root}


def test_list_runs_with_filters(world):
    c, ids = world["client"], world["ids"]
    doc = c.get("/api/runs").json()
    assert doc["ok"] and doc["total"] == 3
    assert [r["name"] for r in doc["runs"]] == ["gamma", "beta", "alpha"]  # newest first
    assert "dir" not in doc["runs"][0]
    for query, names in [
        ("group=g2", ["gamma", "beta"]),
        ("tag=best", ["alpha"]),
        ("status=failed", ["gamma"]),
        ("name=beta", ["beta"]),
        ("group=g2&status=finished", ["beta"]),
        ("tag=nope", []),
        ("limit=1&offset=1", ["beta"]),
    ]:
        assert [r["name"] for r in c.get(f"/api/runs?{query}").json()["runs"]] == names, query
    gamma = c.get("/api/runs?name=gamma").json()["runs"][0]
    assert gamma["status"] == "failed" and "boom" in gamma["error"] and gamma["id"] == ids["gamma"]


def test_one_run_by_id_prefix_or_name(world):
    c, alpha = world["client"], world["ids"]["alpha"]
    # The shortest prefix past the timestamp that no other run shares: runs started in the same second
    # share 16 characters and, one time in 256, the next two (a fixed 18 made this test flaky).
    others = [i for i in world["ids"].values() if i != alpha]
    prefix = next(alpha[:k] for k in range(17, len(alpha)) if not any(o.startswith(alpha[:k]) for o in others))
    for ref in (alpha, prefix, "alpha"):
        doc = c.get(f"/api/runs/{ref}").json()
        assert doc["run"]["id"] == alpha and doc["config"] == {"lr": 0.01}
    doc = c.get(f"/api/runs/{alpha}").json()
    assert doc["counts"]["batches"] == 600 and doc["counts"]["scalars"] == 61
    assert doc["results"] == ["test"] and doc["meta"]["status"] == "finished"
    assert {e["name"] for e in doc["evaluations"]} == {"test"}
    assert doc["last"]["loss"]["value"] is None  # NaN is stored as null and sent as null
    r = c.get("/api/runs/alpah")
    assert r.status_code == 404 and "Did you mean 'alpha'" in r.json()["error"]


def test_batches_page_by_page_with_a_bounded_limit(world):
    c, alpha = world["client"], world["ids"]["alpha"]
    doc = c.get(f"/api/runs/{alpha}/batches").json()
    assert (doc["total"], doc["offset"], doc["limit"], doc["count"]) == (600, 0, 100, 100)
    seen = []
    offset = 0
    while True:
        page = c.get(f"/api/runs/{alpha}/batches?offset={offset}&limit=1000").json()
        if not page["batches"]:
            break
        seen += [b["microbatch"] for b in page["batches"]]
        offset += page["count"]
    assert seen == list(range(1, 601))
    mid = c.get(f"/api/runs/{alpha}/batches?offset=299&limit=3").json()["batches"]
    assert [b["microbatch"] for b in mid] == [300, 301, 302]
    view = labledger.open_ledger(world["ledger"]).run(alpha)
    assert mid == list(view.batches())[299:302]  # exactly as logged, samples and all
    assert c.get(f"/api/runs/{alpha}/batches?limit=1001").status_code == 400
    assert c.get(f"/api/runs/{alpha}/batches?offset=5000").json()["batches"] == []


@pytest.mark.filterwarnings("ignore::labledger.store.jsonl.TornLineWarning")
def test_pages_follow_a_growing_file_and_ignore_a_torn_last_line(world, tmp_path):
    c = world["client"]
    run = labledger.start_run("growing", ledger=world["ledger"])
    try:
        for mb in range(1, 301):
            run.log_batch(make_batch(mb, n=1))
        assert c.get(f"/api/runs/{run.id}/batches?limit=1").json()["total"] == 300
        for mb in range(301, 351):
            run.log_batch(make_batch(mb, n=1))
        with open(run.dir / "batches.jsonl", "ab") as f:
            f.write(b'{"microbatch": 351, "lo')  # a record in flight
        doc = c.get(f"/api/runs/{run.id}/batches?offset=340&limit=50").json()
        assert doc["total"] == 350 and [b["microbatch"] for b in doc["batches"]] == list(range(341, 351))
        run_info = c.get(f"/api/runs/{run.id}").json()["run"]
        assert run_info["status"] == "running"
    finally:
        with open(run.dir / "batches.jsonl", "ab") as f:
            f.write(b'ss": 0.1}\n')
        run.finish()


def test_scalars_history_and_other_record_kinds(world):
    c, alpha = world["client"], world["ids"]["alpha"]
    doc = c.get(f"/api/runs/{alpha}/scalars?offset=59").json()
    assert doc["total"] == 61 and [r["step"] for r in doc["scalars"]] == [60, 61]
    assert doc["scalars"][-1]["loss"] is None
    assert c.get(f"/api/runs/{alpha}/history").json()["history"] == []
    assert c.get(f"/api/runs/{alpha}/scalars?limit=10001").status_code == 400


def test_evaluations_documents_and_results(world):
    c, alpha = world["client"], world["ids"]["alpha"]
    assert c.get(f"/api/runs/{alpha}/evals").json()["evals"] == ["test"]
    doc = c.get(f"/api/runs/{alpha}/evals/test").json()
    assert doc["evaluation"] == EVAL_DOC and doc["documents"] == {"evaluation": EVAL_DOC}
    rows = results_rows(30)
    assert doc["results"]["rows"] == 30
    stored = (world["ledger"] / "runs" / alpha / "evals/test/results.jsonl").read_bytes()
    assert doc["results"]["sha256"] == hashlib.sha256(stored).hexdigest()
    page = c.get(f"/api/runs/{alpha}/evals/test/results?offset=10&limit=5").json()
    assert page["total"] == 30 and [r["id"] for r in page["rows"]] == [r["id"] for r in rows[10:15]]
    assert c.get(f"/api/runs/{alpha}/evals/nope").status_code == 404


def test_version_table_matches_the_library(world):
    c = world["client"]
    doc = c.get("/api/table?suite=public&models=v1,v2&delta_from=v1").json()
    book = labledger.open_ledger(world["ledger"])
    expected = version_table(
        read_entries(book, suite="public", models=["v1", "v2"]), suite="public", models=["v1", "v2"], delta_from="v1"
    )
    assert doc["table"] == orjson.loads(orjson.dumps(expected.to_dict()))
    assert doc["table"]["mean"]["values"] == {"v1": pytest.approx(0.55), "v2": pytest.approx(0.575)}
    assert "| hover (accuracy) |" in doc["markdown"].replace("| c ", "| ").replace("|  |", "|")
    assert c.get("/api/table?suite=public&models=v9").status_code == 404


def test_log_a_run_through_the_api(world):
    c = world["client"]
    r = c.post(
        "/api/runs", json={"name": "remote", "group": "api", "tags": ["http"], "config": {"lr": 0.1}}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    run = r.json()["run"]
    assert run["status"] == "running" and r.headers["location"] == f"/api/runs/{run['id']}"
    scalars = [{"step": s, "loss": 1.0 / s, "lr": 0.1} for s in range(1, 21)]
    assert c.post(f"/api/runs/{run['id']}/scalars", json=scalars, headers=AUTH).json()["accepted"] == 20
    batches = [make_batch(mb, n=3) for mb in range(1, 11)]
    lines = b"".join(orjson.dumps(b) + b"\n" for b in batches)
    r = c.post(
        f"/api/runs/{run['id']}/batches", content=lines, headers={**AUTH, "Content-Type": "application/x-ndjson"}
    )
    assert r.json() == {"ok": True, "run": run["id"], "accepted": 10}
    # a bad record anywhere: 400 naming record and field, and none of that request is stored
    bad = [make_batch(11), {**make_batch(12), "batch_size": 99}]
    r = c.post(f"/api/runs/{run['id']}/batches", json=bad, headers=AUTH)
    assert r.status_code == 400
    assert r.json()["error"].startswith("request body:2: field 'batch_size' is 99 but the record has 4 samples")
    # a microbatch that does not follow the stored ones (checked against the run itself)
    r = c.post(f"/api/runs/{run['id']}/batches", json=[make_batch(3)], headers=AUTH)
    assert r.status_code == 400 and "must increase within a run; got 3 after 10" in r.json()["error"]
    assert c.post(f"/api/runs/{run['id']}/history", json=[{"step": 5, "loss": 0.2}], headers=AUTH).status_code == 200
    assert c.post(f"/api/runs/{run['id']}/notes", json={"text": "via HTTP"}, headers=AUTH).status_code == 200
    live = c.get(f"/api/runs/{run['id']}/batches?limit=1000").json()
    assert live["total"] == 10
    r = c.post(f"/api/runs/{run['id']}/finish", json={"summary": {"test_accuracy": 0.9}}, headers=AUTH)
    assert r.json()["run"]["status"] == "finished"
    view = labledger.open_ledger(world["ledger"]).run(run["id"])
    assert view.status == "finished" and view.group == "api" and view.tags == ["http"]
    assert [s["step"] for s in view.scalars()] == list(range(1, 21))
    stored = list(view.batches())
    assert [b["microbatch"] for b in stored] == list(range(1, 11))
    assert [{k: v for k, v in b.items() if k != "time"} for b in stored] == batches
    assert [n["text"] for n in view.notes()] == ["via HTTP"]
    assert view.info.summary["headline"] == {"test_accuracy": 0.9}
    r = c.post(f"/api/runs/{run['id']}/scalars", json=[{"step": 21, "loss": 0.1}], headers=AUTH)
    assert r.status_code == 409


def test_openapi_document_describes_every_route_and_only_those(world):
    doc = world["client"].get("/openapi.json").json()
    assert doc["openapi"].startswith("3.") and doc["info"]["title"] == "labledger server"
    app_paths = set()
    for route in world["client"].app.routes:
        if (
            isinstance(route, Route)
            and not route.path.startswith(("/static", "/data", "/images", "/login", "/favicon"))
            and route.path not in ("/", "/{page}.html")
        ):
            app_paths.add(route.path)
    described = {p for p in doc["paths"] if "{kind}" not in p}
    concrete = {
        p.replace("{kind}", k) for p in app_paths for k in ("batches", "scalars", "history", "checkpoints", "notes")
    }
    assert app_paths - {"/api/runs/{run}/{kind}"} <= described
    assert described <= concrete
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert op["responses"], (method, path)
            if (method == "post" and path not in ("/api/runs",)) or path == "/upload":
                assert op.get("security") == [{"bearer": []}] or path == "/api/runs", (method, path)


# -- the pages, live ----------------------------------------------------------------------------
def data_of(response, tmp_path: Path):
    path = tmp_path / "data.js"
    path.write_bytes(response.content)
    return load_data_file(path)


def test_pages_are_the_static_site_served_live(world, tmp_path):
    c = world["client"]
    index = c.get("/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert 'src="static/js/catalog.js"' in index.text
    assert c.get("/run.html").status_code == 200
    assert c.get("/static/js/common.js").headers["content-type"].startswith("text/javascript")
    key, catalog = data_of(c.get("/data/catalog.js"), tmp_path)
    assert key == "catalog" and {r["name"] for r in catalog["runs"]} >= {"alpha", "beta", "gamma"}
    alpha = world["ids"]["alpha"]
    key, toc = data_of(c.get(f"/data/batches/{alpha}/toc.js"), tmp_path)
    assert toc["count"] == 600
    assert c.get(f"/data/batches/{alpha}/0.js").status_code == 200


def served_when(c, path, tmp_path, ok, timeout: float = 60.0):
    """The data of ``path`` once ``ok(data)`` holds: the server's own timer refreshes the site (#17)."""
    deadline = time.monotonic() + timeout
    while True:
        response = c.get(path)
        assert response.status_code in (200, 404), response.text
        data = data_of(response, tmp_path)[1] if response.status_code == 200 else None
        if data is not None and ok(data):
            return data
        assert time.monotonic() < deadline, f"{path} did not show the change within {timeout} s"
        time.sleep(0.05)


def test_a_new_run_shows_and_a_running_runs_curves_grow_without_a_rebuild(world, tmp_path):
    c = world["client"]
    run = labledger.start_run("fresh", ledger=world["ledger"])
    try:
        for step in range(1, 6):
            run.log(step, loss=1.0 / step)
        catalog = served_when(c, "/data/catalog.js", tmp_path, lambda d: any(r["id"] == run.id for r in d["runs"]))
        assert next(r for r in catalog["runs"] if r["id"] == run.id)["status"] == "running"
        # the run page draws its curves from their summaries (site/curves.py), built for the request
        curve = f"/data/curves/{run.id}.js"  # a short run's scalars: all in its curve file
        doc = served_when(c, curve, tmp_path, lambda d: d["scalars"][0]["points"] == 5)["scalars"][0]
        assert doc["name"] == "loss" and doc["top"]["mean"] == [1.0, 0.5, 1 / 3, 0.25, 0.2]
        for step in range(6, 11):
            run.log(step, loss=1.0 / step)
        served_when(c, curve, tmp_path, lambda d: d["scalars"][0]["points"] == 10)
    finally:
        run.finish()
    served_when(
        c,
        "/data/catalog.js",
        tmp_path,
        lambda d: next(r for r in d["runs"] if r["id"] == run.id)["status"] == "finished",
    )


def test_page_paths_cannot_leave_the_site(world):
    c = world["client"]
    for path in (
        "/data/..%2f..%2fledger.db",
        "/static/%2e%2e/%2e%2e/ledger.db",
        "/data/.labledger-site.json",
        "/%2e%2e.html",
        "/images/..%2fx",
    ):
        r = c.get(path)
        assert r.status_code == 404 and r.json()["ok"] is False, path


@pytest.fixture(scope="module")
def xss_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("xss")
    ids = make_site_ledger(root / "ledger", batches=30)
    return root, ids


def test_strings_from_runs_are_escaped_when_served(xss_site, tmp_path):
    root, ids = xss_site
    with TestClient(create_app(root / "ledger", uploads_dir=root / "uploads")) as c:
        for page in ("/", "/index.html", "/run.html", "/batches.html", "/eval.html", "/test.html"):
            assert "alert(1)" not in c.get(page).text
        served = [
            c.get("/data/catalog.js"),
            c.get(f"/data/runs/{ids['xss']}.js"),
            c.get(f"/data/runs/{ids['alpha']}.js"),
            c.get(f"/data/batches/{ids['alpha']}/0.js"),
        ]
        for r in served:
            assert r.status_code == 200 and b"<" not in r.content
        _, catalog = data_of(served[0], tmp_path)
        xss = next(r for r in catalog["runs"] if r["id"] == ids["xss"])
        assert (xss["name"], xss["group"], xss["tags"]) == (XSS[0], XSS[1], [XSS[0]])
        _, chunk = data_of(served[3], tmp_path)
        assert chunk["batches"][0]["samples"][0]["input"] == XSS[0]
        # the JSON API sends them as JSON strings, with a JSON content type and nosniff
        api = c.get(f"/api/runs/{ids['xss']}")
        assert api.headers["content-type"] == "application/json" and api.headers["x-content-type-options"] == "nosniff"
        assert api.json()["run"]["name"] == XSS[0]


def test_xss_cases_in_a_real_browser_over_http(xss_site, browser):
    root, ids = xss_site
    with ServerProcess(root / "ledger", uploads_dir=root / "uploads") as srv:
        for rel, expected in (
            ("index.html", XSS),
            (f"run.html#run={ids['xss']}", XSS),
            (f"batches.html#run={ids['alpha']}&mb=1&sample=1", XSS),
        ):
            page = browser.new_page()
            dialogs, errors = [], []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{srv.url}/{rel}")
            page.wait_for_selector("body[data-ready='1']", timeout=20000)
            text = page.locator("body").inner_text()
            for s in expected:
                assert s in text, (rel, s)
            assert page.locator('img[src="x"]').count() == 0
            page.wait_for_timeout(200)
            assert dialogs == [] and errors == [], (rel, dialogs, errors)
            page.close()
