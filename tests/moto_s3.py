"""A real S3-protocol server for the object-storage tests: ``moto`` in server mode on 127.0.0.1
(started by the fixture, stopped after), spoken to over HTTP with the endpoint and credentials from
the standard AWS variables, which the fixture sets for its module and restores after. It holds one
bucket, ``runs``."""

from __future__ import annotations

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
