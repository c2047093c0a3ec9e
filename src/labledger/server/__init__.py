"""``labledger serve``: the ledger over HTTP (live pages, a JSON API, uploads) and team mode.

``create_app`` builds the ASGI app (needs starlette; run it with uvicorn); ``push_file`` uploads a
file to a server and checks the sha256 it stored (the standard library's ``http.client`` only).
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "push_file"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the push client must not need starlette.
    if name == "create_app":
        from labledger.server.app import create_app

        return create_app
    if name == "push_file":
        from labledger.server.client import push_file

        return push_file
    raise AttributeError(f"module 'labledger.server' has no attribute {name!r}")
