"""A real S3-protocol server for the object-storage tests: ``moto`` in server mode on 127.0.0.1
(started by the fixture, stopped after), spoken to over HTTP with the endpoint and credentials from
the standard AWS variables, which the fixture sets for its module and restores after. It holds one
bucket, ``runs``."""

from __future__ import annotations

import importlib.resources
import os

import pytest
from server_process import free_port


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    moto_server = pytest.importorskip("moto.server", reason='moto is not installed: pip install "moto[server]"')
    boto3 = pytest.importorskip("boto3")
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        boto3.client("s3").create_bucket(Bucket="runs")
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def duckdb_with_httpfs(env: dict[str, str]):
    """A DuckDB connection with DuckDB's own httpfs extension loaded from its PyPI package (no
    network), pointed at the moto endpoint."""
    duckdb = pytest.importorskip("duckdb")
    pkg = pytest.importorskip("duckdb_extension_httpfs", reason='needs duckdb-extension-httpfs (in ".[dev]")')
    path = importlib.resources.files(pkg) / "extensions" / f"v{duckdb.__version__}" / "httpfs.duckdb_extension"
    assert path.is_file(), f"duckdb-extension-httpfs has no build for duckdb {duckdb.__version__}"
    con = duckdb.connect()
    con.execute(f"LOAD '{path}'")
    endpoint = env["AWS_ENDPOINT_URL"].removeprefix("http://")
    con.execute(
        "CREATE SECRET moto (TYPE s3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?, URL_STYLE 'path', USE_SSL false)".replace(
            "?", "'{}'"
        ).format(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_DEFAULT_REGION"], endpoint)
    )
    return con
