"""The runs as an open dataset (#46): zstd Parquet files in a hive-partitioned layout, written into the
ledger's folder and into object storage (``sync --to s3://``, ``serve --artifacts s3://``), read back
by pyarrow and by DuckDB (its own httpfs extension against a real S3-protocol server, moto on
127.0.0.1), with every value equal to what the ledger's API gives; and ``labledger query``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import jsonschema
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from moto_s3 import duckdb_with_httpfs, s3  # noqa: F401 (s3: a fixture)

import labledger
from labledger.cli import main
from labledger.schema.dataset import DATASET_KINDS, dataset_json_schema
from labledger.store.dataset import arrow_schema, as_text, refresh_local
from labledger.store.dataset_query import run_query
from labledger.store.objects import ObjectStore, sync_to_objects

REPO = Path(__file__).resolve().parents[1]
SRC = str(REPO / "src")


def _rows(i: int) -> list[dict]:
    """Result rows of every shape the dataset has columns for (and an extra key)."""
    out = []
    for k in range(12):
        gold = "a" if (k + i) % 3 else "b"
        p = 0.8 if (k * 7 + i) % 4 else 0.3
        out.append(
            {
                "id": k if k % 2 else f"item-{k}",
                "task": "cls",
                "gold": gold,
                "probs": {"a": p, "b": round(1 - p, 10)},
                "slices": {"length": "short" if k % 2 else "long", "bucket": k % 3},
                "group": f"doc{k // 3}",
                "note": {"seen": k},
            }
        )
    return out


def _ledger(root: Path, n: int = 3) -> list[str]:
    """``n`` ended runs (one failed), each with scalars (one logged NaN, one key logged sparsely),
    a result set and a stored evaluation; and one running run, which the dataset leaves out."""
    ids = []
    for i in range(n):
        run = labledger.start_run(
            f"mlp-{i}",
            group="sweep",
            tags=["t", f"opt-{i % 2}"],
            config={"lr": 10.0 ** -(i + 2), "opt": ["adam", "sgd"][i % 2]},
            ledger=root,
        )
        for step in range(1, 6):
            run.log(step, loss=1.0 / (step + i), acc=float("nan") if step == 2 else step / 10)
            if step % 2:
                run.log(step, val_loss=2.0 / (step + i))
        run.log_results("test", _rows(i))
        if i == n - 1:
            run.finish(status="failed", error="diverged")
        else:
            run.finish()
        ids.append(run.id)
    book = labledger.open_ledger(root)
    for rid in ids:
        ev = labledger.evaluate(book.run(rid).results_path("test"), metrics=["accuracy", "f1:average=macro"])
        book.save_evaluation(rid, "test", ev.to_dict())
    book.close()
    live = labledger.start_run("live", ledger=root)
    live.log(1, loss=0.5)
    return ids


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    root = tmp_path_factory.mktemp("dataset") / "ledger"
    ids = _ledger(root)
    return root, ids


def _expected_scalars(view) -> list[tuple]:
    """(step, key, value) of every logged value, from RunView.scalars (NaN as None, as the dataset keeps it)."""
    out = []
    for rec in view.scalars():
        for k, v in rec.items():
            if k not in ("step", "time"):
                out.append((rec["step"], k, None if isinstance(v, float) and math.isnan(v) else float(v)))
    return sorted(out)


def _expected_results(view, name: str) -> list[tuple]:
    out = []
    for n, r in enumerate(view.results(name)):
        extra = {k: v for k, v in r.items() if k not in ("id", "task", "gold", "probs", "slices", "group")}
        slices = {k: as_text(v) for k, v in r["slices"].items()}
        out.append((n, as_text(r["id"]), r["task"], r["gold"], r["probs"], slices, r["group"], extra or None))
    return out


def _ended(book) -> list[str]:
    return sorted(r.id for r in book.runs() if r.status != "running")


def _check_against_api(book, tables: dict[str, pa.Table], ids: list[str]) -> None:
    """The dataset's tables (read with their hive partitions) hold exactly what the ledger API gives
    for runs ``ids``, and hold every ended run of the ledger and no running one."""
    runs = {r["run"]: r for r in tables["runs"].to_pylist()}
    assert sorted(runs) == _ended(book)
    assert set(tables["scalars"].column("run").to_pylist()) <= set(runs)
    scalars = tables["scalars"].to_pylist()
    results = tables["results"].to_pylist()
    metrics = tables["metrics"].to_pylist()
    for rid in ids:
        view = book.run(rid)
        info = book.run_dicts(where=f"id = '{rid}'")[0]
        row = runs[rid]
        assert (row["name"], row["group"], row["status"], row["error"]) == (
            info["name"],
            info["group"],
            info["status"],
            info["error"],
        )
        assert (
            row["tags"] == sorted(info["tags"]) and row["started"] == info["started"] and row["ended"] == info["ended"]
        )
        assert json.loads(row["config"]) == view.config
        nums = dict(row["num_fields"])
        assert nums["config.lr"] == view.config["lr"] and dict(row["text_fields"])["config.opt"] == view.config["opt"]
        got = sorted((r["step"], r["key"], r["value"]) for r in scalars if r["run"] == rid)
        assert got == _expected_scalars(view)
        got_rows = sorted(
            (
                r["row"],
                r["id"],
                r["task"],
                r["gold"],
                dict(r["probs"]),
                dict(r["slices"]),
                r["group"],
                None if r["extra"] is None else json.loads(r["extra"]),
            )
            for r in results
            if r["run"] == rid and r["set"] == "test"
        )
        assert got_rows == _expected_results(view, "test")
        ev = view.evaluation("test")
        want = {(m.id.short, m.value, m.ci_low, m.ci_high) for t in ev.tasks.values() for m in t.metrics}
        got_m = {
            (m["metric"], m["value"], m["ci_low"], m["ci_high"])
            for m in metrics
            if m["run"] == rid and m["slice"] == ""
        }
        assert got_m == want
        assert nums["eval.test.accuracy"] == next(v for k, v, *_ in want if k == "accuracy")


def _read_folder(root: Path) -> dict[str, pa.Table]:
    """Each kind read by pyarrow alone with hive partitioning (what Polars, Spark and pandas do)."""
    out = {}
    for kind in DATASET_KINDS:
        out[kind] = ds.dataset(root / f"kind={kind}", format="parquet", partitioning="hive").to_table()
    return out


def test_the_local_dataset_holds_what_the_api_gives_and_is_rewritten_only_where_runs_changed(ledger, tmp_path):
    import shutil

    src, ids = ledger
    root = tmp_path / "ledger"
    shutil.copytree(src, root)
    book = labledger.open_ledger(root)
    book.reap()  # the copy of the fixture's live run: no process holds it, so it is crashed
    live = labledger.start_run("live-here", ledger=root)  # this one is running: left out
    live.log(1, loss=0.25)
    try:
        first = refresh_local(book)
        assert sorted(first.written) == _ended(book) and first.runs == len(_ended(book)) == len(ids) + 1
        data = root / "dataset"
        for path in data.rglob("*.parquet"):  # standard zstd Parquet, with the documented columns
            meta = pq.ParquetFile(path).metadata
            assert meta.num_row_groups == 0 or meta.row_group(0).column(0).compression == "ZSTD"
            kind = path.relative_to(data).parts[0].removeprefix("kind=")
            assert pq.read_schema(path).remove_metadata() == arrow_schema(kind)
        _check_against_api(book, _read_folder(data), ids)
        assert refresh_local(book).written == []  # nothing changed: nothing written
        # a new evaluation of one run rewrites that run only; a removed result set's file goes
        ev = labledger.evaluate(book.run(ids[0]).results_path("test"), metrics=["accuracy"])
        book.save_evaluation(ids[0], "again", ev.to_dict())
        assert refresh_local(book).written == [ids[0]]
        book.delete_run(ids[1])
        again = refresh_local(book)
        assert again.dropped == [ids[1]] and not any(data.glob(f"kind=*/run={ids[1]}"))
        tables = _read_folder(data)
        assert {m["set"] for m in tables["metrics"].to_pylist() if m["run"] == ids[0]} == {"test", "again"}
        assert ids[1] not in set(tables["runs"].column("run").to_pylist())
        live.finish()  # ended now: in the dataset at the next refresh
        assert refresh_local(book).written == [live.id]
    finally:
        book.close()


def test_labledger_query_runs_duckdb_over_the_ledger(ledger, tmp_path):
    import shutil

    src, ids = ledger
    root = tmp_path / "ledger"
    shutil.copytree(src, root)
    book = labledger.open_ledger(root)
    want = {r.id: r.name for r in book.runs(where="config.lr < 1e-2 and status != 'running'", sort="config.lr")}
    sql = "SELECT run, name FROM runs WHERE num_fields['config.lr'] < 1e-2 ORDER BY num_fields['config.lr']"
    out = CliRunner().invoke(main, ["query", "--ledger", str(root), "--json", sql])
    assert out.exit_code == 0, out.output
    assert {r[0]: r[1] for r in json.loads(out.output)["rows"]} == want
    # the same accuracy as the stored evaluation, computed by SQL from the predictions themselves
    acc = (
        "SELECT run, avg(CASE WHEN probs['a'] >= probs['b'] THEN (gold = 'a')::INT ELSE (gold = 'b')::INT END) "
        "FROM results WHERE set = 'test' GROUP BY run"
    )
    got = dict(run_query(acc, root / "dataset").rows)
    for rid in ids:
        assert got[rid] == pytest.approx(book.run(rid).evaluation("test").tasks["cls"].metrics[0].value, abs=1e-12)
    table = CliRunner().invoke(
        main, ["query", "--ledger", str(root), "SELECT key, count(*) AS n FROM scalars GROUP BY key ORDER BY key"]
    )
    assert table.exit_code == 0 and table.output.splitlines()[0].split() == ["key", "n"]
    assert "val_loss" in table.output and table.output.rstrip().endswith("(3 rows)")
    bad = CliRunner().invoke(main, ["query", "--ledger", str(root), "SELEC 1"])
    assert bad.exit_code == 1 and bad.output.count("\n") == 1 and "Error: query: Parser Error" in bad.output
    missing = CliRunner().invoke(main, ["query", "--ledger", str(root), "SELECT nope FROM runs"])
    assert missing.exit_code == 1 and '"nope" not found' in missing.output and "Traceback" not in missing.output
    book.close()


def test_without_duckdb_the_error_names_the_extra(tmp_path):
    code = (
        "import sys; sys.modules['duckdb'] = None\n"
        "from labledger.cli import main\n"
        f"main(['query', '--ledger', {str(tmp_path / 'l')!r}, 'SELECT 1'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}
    )
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        'Error: labledger query needs duckdb, which is not installed: pip install "labledger[query]"'
    ]


def test_import_labledger_loads_neither_duckdb_nor_pyarrow():
    code = (
        "import sys, labledger; print(sorted(m for m in ('duckdb', 'pyarrow', 'pyarrow.dataset') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": SRC}, check=True
    )
    assert out.stdout.strip() == "[]"


def test_each_kind_has_a_json_schema_that_its_rows_validate_against(ledger, tmp_path):
    import shutil

    src, _ = ledger
    root = tmp_path / "ledger"
    shutil.copytree(src, root)
    book = labledger.open_ledger(root)
    refresh_local(book)
    book.close()
    tables = _read_folder(root / "dataset")
    for kind in DATASET_KINDS:
        schema = dataset_json_schema(kind)
        out = CliRunner().invoke(main, ["schema", f"dataset-{kind}"])
        assert out.exit_code == 0 and json.loads(out.output) == schema
        assert (REPO / "docs" / "schemas" / f"dataset-{kind}.json").read_text() == out.output
        assert set(schema["properties"]) == set(tables[kind].column_names)
        for row in tables[kind].to_pylist()[:50]:
            for k, v in list(row.items()):
                if isinstance(v, list) and v and isinstance(v[0], tuple):  # a map, as pyarrow gives it
                    row[k] = dict(v)
            jsonschema.validate(row, schema)


# -- object storage ------------------------------------------------------------------------------
def test_sync_to_s3_publishes_the_dataset_that_duckdb_httpfs_and_pyarrow_read(ledger, s3, tmp_path):
    import shutil

    src, ids = ledger
    root = tmp_path / "ledger"
    shutil.copytree(src, root)
    url = "s3://runs/team"
    book = labledger.open_ledger(root)
    book.reap()  # the copy of the fixture's live run: no process holds it, so it is crashed
    first = sync_to_objects(root, url)
    assert first.datasets_written == len(_ended(book)) == len(ids) + 1
    assert sync_to_objects(root, url).datasets_written == 0  # unchanged: not written again
    # DuckDB with its own httpfs, reading the bucket as any analyst would: no labledger code
    con = duckdb_with_httpfs(s3)
    try:
        base = "s3://runs/team/dataset"
        sql = (
            f"SELECT run, name FROM read_parquet('{base}/kind=runs/**/*.parquet', hive_partitioning = 1) "
            "WHERE num_fields['config.lr'] < 1e-2 AND text_fields['config.opt'] = 'adam'"
        )
        got = dict(con.execute(sql).fetchall())
        want = {
            r.id: r.name for r in book.runs(where="config.lr < 1e-2 and config.opt = 'adam' and status != 'running'")
        }
        assert got == want and got
        evals = con.execute(
            f"SELECT run, value FROM read_parquet('{base}/kind=metrics/**/*.parquet', hive_partitioning = 1) "
            "WHERE metric = 'f1[average=macro]' AND slice = ''"
        ).fetchall()
        assert dict(evals) == {rid: book.run(rid).evaluation("test").tasks["cls"].metrics[1].value for rid in ids}
        n = con.execute(
            f"SELECT count(*) FROM read_parquet('{base}/kind=results/**/*.parquet', hive_partitioning = 1) WHERE set = 'test'"
        ).fetchone()[0]
        assert n == sum(len(list(book.run(rid).results("test"))) for rid in ids)
    finally:
        con.close()
    # pyarrow's own S3 client with hive partitioning: every value as the API gives it
    from labledger.store.dataset_query import kind_datasets

    tables = {k: d.to_table() for k, d in kind_datasets(url).items()}
    _check_against_api(book, tables, ids)
    # labledger query --from the bucket: the same answer as over the local ledger
    sql = "SELECT run, key, max(value) AS top FROM scalars GROUP BY ALL ORDER BY ALL"
    remote = CliRunner().invoke(main, ["query", "--from", url, "--json", sql])
    local = CliRunner().invoke(main, ["query", "--ledger", str(root), "--json", sql])
    assert remote.exit_code == 0 and local.exit_code == 0, remote.output + local.output
    assert json.loads(remote.output) == json.loads(local.output) and json.loads(remote.output)["rows"]
    # a result set removed from a run: its file in the bucket goes at the next sync, the others stay
    results_key = f"team/dataset/kind=results/run={ids[0]}/set=test/part-0.parquet"
    store = ObjectStore(url)
    assert store.has(results_key)
    (book.run(ids[0]).dir / "evals" / "test" / "results.jsonl").unlink()
    assert sync_to_objects(root, url).datasets_written == 1
    assert not store.has(results_key) and store.has(f"team/dataset/kind=scalars/run={ids[0]}/part-0.parquet")
    book.close()


def test_serve_with_s3_artifacts_publishes_each_synced_run_that_ended(tmp_path, s3):
    from server_process import ServerProcess

    from labledger.server.sync_client import sync_runs
    from labledger.store.ledger import Ledger

    server_root = tmp_path / "server"
    Ledger(server_root, create=True).close()
    url = "s3://runs/served-dataset"
    token = "dataset-serve-token-0123456789"
    local = tmp_path / "local"
    ids = _ledger(local, n=2)
    srv = ServerProcess(server_root, uploads_dir=tmp_path / "up", token=token, artifacts=url).start()
    try:
        sync_runs(local, srv.url, token=token)
    finally:
        srv.stop()
    store = ObjectStore(url)
    keys = sorted(
        o["Key"]
        for page in store.client.get_paginator("list_objects_v2").paginate(
            Bucket="runs", Prefix="served-dataset/dataset/"
        )
        for o in page.get("Contents", [])
    )
    for rid in ids:
        for kind in ("runs", "scalars", "metrics"):
            assert f"served-dataset/dataset/kind={kind}/run={rid}/part-0.parquet" in keys
        assert f"served-dataset/dataset/kind=results/run={rid}/set=test/part-0.parquet" in keys
    assert not any("run=" + r.id in k for r in labledger.open_ledger(local).runs(status="running") for k in keys)
    book = labledger.open_ledger(local)
    from labledger.store.dataset_query import kind_datasets

    _check_against_api(book, {k: d.to_table() for k, d in kind_datasets(url).items()}, ids)
    book.close()


def test_a_run_finished_through_the_api_of_an_s3_server_is_published_and_a_deleted_one_removed(tmp_path, s3):
    from starlette.testclient import TestClient

    from labledger.server import create_app

    token = "dataset-api-token-0123456789abcdef"
    auth = {"Authorization": f"Bearer {token}"}
    url = "s3://runs/api-dataset"
    root = tmp_path / "server"
    app = create_app(root, uploads_dir=tmp_path / "up", token=token, artifacts=url, site_refresh=0.0)
    store = ObjectStore(url)

    def keys(run_id: str) -> list[str]:
        found = store.client.list_objects_v2(Bucket="runs", Prefix="api-dataset/dataset/")
        return sorted(o["Key"] for o in found.get("Contents", []) if f"/run={run_id}/" in o["Key"])

    with TestClient(app) as c:
        run = c.post("/api/runs", json={"name": "remote", "config": {"lr": 0.01}}, headers=auth).json()["run"]
        r = c.post(
            f"/api/runs/{run['id']}/scalars", json=[{"step": 1, "loss": 0.9}, {"step": 2, "loss": 0.5}], headers=auth
        )
        assert r.status_code == 200, r.text
        assert keys(run["id"]) == []  # running: not published
        r = c.post(f"/api/runs/{run['id']}/finish", json={}, headers=auth)
        assert r.status_code == 200, r.text
        written = keys(run["id"])
        assert r.json()["dataset"] == {"files": len(written)}
        assert f"api-dataset/dataset/kind=runs/run={run['id']}/part-0.parquet" in written
        assert f"api-dataset/dataset/kind=scalars/run={run['id']}/part-0.parquet" in written
        from labledger.store.dataset_query import kind_datasets

        scalars = kind_datasets(url)["scalars"].to_table().to_pylist()
        assert sorted((s["step"], s["key"], s["value"]) for s in scalars if s["run"] == run["id"]) == [
            (1, "loss", 0.9),
            (2, "loss", 0.5),
        ]
        assert c.delete(f"/api/runs/{run['id']}", headers=auth).status_code == 200
        assert keys(run["id"]) == []
