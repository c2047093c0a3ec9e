"""The OpenAPI 3.1 document of the server (``GET /openapi.json``), written by hand.

``tests/test_server_api.py`` checks that every route of the app is described here and that every
path described here is a route, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any


def _q(name: str, description: str, schema: dict[str, Any] | None = None, *, required: bool = False) -> dict:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema or {"type": "string"},
    }


def _p(name: str, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "description": description, "schema": {"type": "string"}}


def _json(schema_ref: str, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": schema_ref}}}}


def _errors(*statuses: int) -> dict[str, Any]:
    names = {
        400: "Bad request (parameter, body or record; the message names the field)",
        401: "No token (WWW-Authenticate: Bearer)",
        403: "Wrong token, or writes disabled",
        404: "Not found",
        409: "Conflict",
        413: "Body larger than the server's cap",
        422: "The body's bytes are not the ones the client stated (X-Digest): nothing was kept",
        502: "The object store gave back bytes whose sha256 differs from the one recorded",
        503: "The ledger's index (PostgreSQL) is unreachable",
    }
    return {str(s): _json("#/components/schemas/Error", names[s]) for s in statuses}


RUN = _p("run", "Run id, unique id prefix, or unique run name")
OFFSET = _q("offset", "Index of the first record (0-based)", {"type": "integer", "minimum": 0, "default": 0})
SINCE = _q(
    "since",
    "A cursor: the records logged after the first `since` (the `next` of the last page); not with offset",
    {"type": "integer", "minimum": 0},
)
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
RECORDS_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
        "application/x-ndjson": {"schema": {"type": "string", "description": "JSON lines, one object per line"}},
    },
}


def _page(kind: str, default: int, most: int, description: str) -> dict[str, Any]:
    return {
        "get": {
            "summary": description,
            "operationId": f"get_{kind}",
            "tags": ["runs"],
            "parameters": [
                RUN,
                OFFSET,
                SINCE,
                _q(
                    "limit",
                    f"Records per page (at most {most})",
                    {"type": "integer", "minimum": 1, "maximum": most, "default": default},
                ),
            ],
            "responses": {
                "200": _json("#/components/schemas/Page", f"A page of {kind} records"),
                **_errors(400, 401, 403, 404),
            },
        }
    }


def _post_records(kind: str, description: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": description,
            "operationId": f"post_{kind}",
            "tags": ["logging"],
            "security": BEARER,
            "parameters": [_p("run", "Run id (a run started with POST /api/runs)")],
            "requestBody": RECORDS_BODY,
            "responses": {
                "200": _json("#/components/schemas/Accepted", "All records stored"),
                **_errors(400, 401, 403, 404, 409, 413),
            },
        }
    }


def openapi_document(version: str) -> dict[str, Any]:
    """The OpenAPI document (a dict), for labledger ``version``."""
    paths: dict[str, Any] = {
        "/api/runs": {
            "get": {
                "summary": "List runs, newest first",
                "operationId": "list_runs",
                "tags": ["runs"],
                "parameters": [
                    _q("group", "Only this group"),
                    _q("tag", "Only runs with this tag"),
                    _q(
                        "status",
                        "Only this status",
                        {"type": "string", "enum": ["running", "finished", "failed", "crashed", "killed"]},
                    ),
                    _q("name", "Only runs with this exact name"),
                    _q("where", "A query expression, e.g. config.lr < 1e-3 and config.opt = 'adam' (docs/query.md)"),
                    _q("sort", "Sort keys, comma-separated, '-' for descending, e.g. -eval.test.accuracy"),
                    OFFSET,
                    _q("limit", "Runs per page", {"type": "integer", "minimum": 1, "maximum": 10000, "default": 1000}),
                    _q(
                        "cursor",
                        "Page by key, newest first (no sort or offset): empty for the first page, then the "
                        "'next' of the page before; only that page's runs are read from the index, and no total is given",
                    ),
                ],
                "responses": {"200": _json("#/components/schemas/RunList", "Runs"), **_errors(400, 401, 403)},
            },
            "post": {
                "summary": "Start a run held by the server (log to it with the POST endpoints below)",
                "operationId": "start_run",
                "tags": ["logging"],
                "security": BEARER,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["name"],
                                "additionalProperties": False,
                                "properties": {
                                    "name": {"type": "string"},
                                    "group": {"type": "string"},
                                    "tags": {"type": "array", "items": {"type": "string"}},
                                    "config": {"type": "object"},
                                    "notes": {"type": "string"},
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "201": _json("#/components/schemas/Started", "The run, with links"),
                    **_errors(400, 401, 403, 413),
                },
            },
        },
        "/api/runs/{run}": {
            "get": {
                "summary": "One run: index row, meta, config, record counts, last scalars",
                "operationId": "get_run",
                "tags": ["runs"],
                "parameters": [RUN],
                "responses": {"200": {"description": "The run"}, **_errors(401, 403, 404)},
            },
            "delete": {
                "summary": "Move a run to the ledger's trash (labledger rm): folder and index rows; "
                "`labledger restore` brings it back",
                "operationId": "delete_run",
                "tags": ["runs"],
                "parameters": [RUN],
                "security": BEARER,
                "responses": {
                    "200": {"description": "The run moved to the trash, and the files kept for other runs"},
                    **_errors(401, 403, 404, 409, 503),
                },
            },
        },
        "/api/runs/{run}/batches": _page("batches", 100, 1000, "Microbatch records with their samples"),
        "/api/runs/{run}/scalars": _page("scalars", 1000, 10000, "Per-step scalar records"),
        "/api/runs/{run}/history": _page("history", 1000, 10000, "Trainer logging-interval entries"),
        "/api/runs/{run}/checkpoints": _page("checkpoints", 1000, 10000, "Checkpoint records"),
        "/api/runs/{run}/notes": _page("notes", 1000, 10000, "Notes"),
        "/api/runs/{run}/evals": {
            "get": {
                "summary": "Evaluations and result sets of a run",
                "operationId": "list_evals",
                "tags": ["evaluations"],
                "parameters": [RUN],
                "responses": {"200": {"description": "Names"}, **_errors(401, 403, 404)},
            }
        },
        "/api/runs/{run}/evals/{name}": {
            "get": {
                "summary": "A stored evaluation: its documents (evaluation.json, sweep.json, ...) and its result set",
                "operationId": "get_eval",
                "tags": ["evaluations"],
                "parameters": [RUN, _p("name", "Evaluation name")],
                "responses": {"200": {"description": "Documents and results meta"}, **_errors(400, 401, 403, 404)},
            }
        },
        "/api/runs/{run}/evals/{name}/results": {
            "get": {
                "summary": "Stored per-item result rows, a page at a time",
                "operationId": "get_results",
                "tags": ["evaluations"],
                "parameters": [
                    RUN,
                    _p("name", "Result set name"),
                    OFFSET,
                    _q("limit", "Rows per page", {"type": "integer", "minimum": 1, "maximum": 10000}),
                ],
                "responses": {"200": _json("#/components/schemas/Page", "Rows"), **_errors(400, 401, 403, 404)},
            }
        },
        "/api/table": {
            "get": {
                "summary": "Version table of the benchmark ledger (models x benchmarks, mean row, deltas)",
                "operationId": "get_table",
                "tags": ["benchmarks"],
                "parameters": [
                    _q("suite", "Benchmark suite (default: public)"),
                    _q("models", "Comma-separated models, in column order (default: all)"),
                    _q("variant", "Comma-separated variants (default: raw)"),
                    _q("delta_from", "MODEL[:VARIANT]: add a delta column, last column minus this one"),
                ],
                "responses": {"200": {"description": "The table as JSON and Markdown"}, **_errors(400, 401, 403, 404)},
            }
        },
        "/api/runs/{run}/finish": {
            "post": {
                "summary": "Finish a run started through the API",
                "operationId": "finish_run",
                "tags": ["logging"],
                "security": BEARER,
                "parameters": [_p("run", "Run id")],
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "status": {"type": "string", "enum": ["finished", "failed", "killed"]},
                                    "error": {"type": "string"},
                                    "summary": {"type": "object"},
                                },
                            }
                        }
                    },
                },
                "responses": {"200": {"description": "The finished run"}, **_errors(400, 401, 403, 404, 409)},
            }
        },
        "/api/uploads": {
            "get": {
                "summary": "Every upload with its size, sha256 and content type",
                "operationId": "list_uploads",
                "tags": ["uploads"],
                "responses": {"200": {"description": "Uploads"}, **_errors(401, 403)},
            }
        },
        "/api": {
            "get": {
                "summary": "Server information and links",
                "operationId": "api_root",
                "tags": ["server"],
                "responses": {"200": {"description": "Links"}},
            }
        },
        "/upload": {
            "post": {
                "summary": "Upload a file (the body is the file, as in `curl --data-binary @FILE`)",
                "operationId": "upload",
                "tags": ["uploads"],
                "security": BEARER,
                "parameters": [
                    _q(
                        "filename",
                        "One name of letters, digits, '.', '-', '_' (no '/', no '..', not hidden)",
                        required=True,
                    ),
                    _q(
                        "overwrite",
                        "1 to replace an existing upload of that name",
                        {"type": "string", "enum": ["0", "1"]},
                    ),
                ],
                "requestBody": {
                    "required": True,
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                "responses": {
                    "201": _json("#/components/schemas/Upload", "Stored (sha256 of the bytes received)"),
                    "200": _json("#/components/schemas/Upload", "Replaced (with overwrite=1)"),
                    **_errors(400, 401, 403, 409, 413),
                },
            }
        },
        "/uploads/{name}": {
            "get": {
                "summary": "Download an upload (ETag = its sha256)",
                "operationId": "get_upload",
                "tags": ["uploads"],
                "parameters": [_p("name", "Upload name")],
                "responses": {
                    "200": {
                        "description": "The file's bytes",
                        "headers": {
                            "ETag": {"schema": {"type": "string"}},
                            "Content-Length": {"schema": {"type": "integer"}},
                        },
                    },
                    "304": {"description": "Not modified (If-None-Match)"},
                    **_errors(400, 401, 403, 404),
                },
            },
            "head": {
                "summary": "Size, type and sha256 (ETag) of an upload",
                "operationId": "head_upload",
                "tags": ["uploads"],
                "parameters": [_p("name", "Upload name")],
                "responses": {"200": {"description": "Headers only"}, **_errors(400, 401, 403, 404)},
            },
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "operationId": "openapi",
                "tags": ["server"],
                "responses": {"200": {"description": "OpenAPI 3.1"}},
            }
        },
    }
    for kind, text in (
        ("scalars", "Log per-step scalars: objects with an integer 'step' and numbers"),
        ("batches", "Log microbatch records (validated like Run.log_batch)"),
        ("history", "Log trainer history entries"),
    ):
        paths[f"/api/runs/{{run}}/{kind}"].update(_post_records(kind, text))
    paths["/api/runs/{run}/notes"]["post"] = {
        "summary": "Add a note",
        "operationId": "post_note",
        "tags": ["logging"],
        "security": BEARER,
        "parameters": [_p("run", "Run id")],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
                }
            },
        },
        "responses": {"200": _json("#/components/schemas/Accepted", "Stored"), **_errors(400, 401, 403, 404, 409)},
    }
    sync_headers = [
        {
            "name": "X-Labledger-Origin",
            "in": "header",
            "required": True,
            "schema": {"type": "string"},
            "description": "The id of the local ledger that owns the run (16-64 hex digits)",
        },
    ]
    paths["/api/sync/state"] = {
        "post": {
            "summary": "labledger sync: what the server holds of some runs (files, chunk sha256s, index digest)",
            "operationId": "sync_state",
            "tags": ["sync"],
            "security": BEARER,
            "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
            "responses": {
                "200": {"description": "Per run: null, {foreign: true} or its manifest"},
                **_errors(400, 401, 403, 413),
            },
        }
    }
    paths["/api/sync/runs/{run}/files"] = {
        "put": {
            "summary": "labledger sync: the bytes [offset, size) of one run file, streamed and hashed per 1 MiB chunk",
            "operationId": "sync_put_file",
            "tags": ["sync"],
            "security": BEARER,
            "parameters": [
                _p("run", "Run id"),
                _q("path", "The file's path in the run folder", required=True),
                _q("offset", "First byte sent (a multiple of 1 MiB)", {"type": "integer", "minimum": 0}),
                _q("size", "The file's whole size", {"type": "integer", "minimum": 0}, required=True),
                *sync_headers,
                {
                    "name": "X-Prefix-Digest",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "With offset > 0: the digest of the client's chunks before offset (a server copy "
                    "that differs there is a 409)",
                },
                {
                    "name": "X-Digest",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "description": "The whole file's digest (sha256 of its chunk hashes, one per line), when the "
                    "client knows it before sending: bytes whose digest is another are refused (422), none kept",
                },
            ],
            "requestBody": {"required": True, "content": {"application/octet-stream": {"schema": {"type": "string"}}}},
            "responses": {
                "200": {"description": "Stored: the digest of the server's copy"},
                **_errors(400, 401, 403, 409, 413, 422),
            },
        },
        "get": {
            "summary": "One synced run file, streamed (from object storage with --artifacts s3://, each chunk checked)",
            "operationId": "sync_get_file",
            "tags": ["sync"],
            "parameters": [_p("run", "Run id"), _q("path", "The file's path in the run folder", required=True)],
            "responses": {
                "200": {"description": "The file's bytes", "content": {"application/octet-stream": {}}},
                **_errors(400, 401, 404, 502),
            },
        },
    }
    paths["/api/sync/runs/{run}/batch"] = {
        "post": {
            "summary": "labledger sync: many small files of one run in one request, each checked by its digest "
            "before any is written (a 4-byte length, a JSON head naming each file's path, offset, size and "
            "digest, then their bytes); one that differs refuses the batch (422), nothing kept",
            "operationId": "sync_put_batch",
            "tags": ["sync"],
            "security": BEARER,
            "parameters": [_p("run", "Run id"), *sync_headers],
            "requestBody": {"required": True, "content": {"application/octet-stream": {"schema": {"type": "string"}}}},
            "responses": {
                "200": {"description": "Stored: per file the digest of the server's copy"},
                **_errors(400, 401, 403, 409, 413, 422),
            },
        }
    }
    paths["/api/sync/runs/{run}/index"] = {
        "post": {
            "summary": "labledger sync: replace the run's index rows",
            "operationId": "sync_put_index",
            "tags": ["sync"],
            "security": BEARER,
            "parameters": [_p("run", "Run id"), *sync_headers],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
            "responses": {"200": {"description": "Stored"}, **_errors(400, 401, 403, 409, 413, 503)},
        }
    }
    schemas = {
        "Error": {
            "type": "object",
            "required": ["ok", "status", "error"],
            "additionalProperties": False,
            "properties": {"ok": {"const": False}, "status": {"type": "integer"}, "error": {"type": "string"}},
        },
        "RunList": {
            "type": "object",
            "properties": {
                "ok": {"const": True},
                "total": {"type": "integer", "description": "every matching run (paging by offset)"},
                "count": {"type": "integer", "description": "runs in this page (paging by cursor)"},
                "next": {"type": ["string", "null"], "description": "the cursor of the next page (null: none)"},
                "runs": {"type": "array", "items": {"type": "object"}},
            },
        },
        "Page": {
            "type": "object",
            "properties": {
                "ok": {"const": True},
                "run": {"type": "string"},
                "offset": {"type": "integer"},
                "limit": {"type": "integer"},
                "total": {"type": "integer"},
                "count": {"type": "integer"},
                "next": {"type": "integer", "description": "The cursor to pass as `since` for what comes next"},
            },
        },
        "Accepted": {
            "type": "object",
            "properties": {"ok": {"const": True}, "run": {"type": "string"}, "accepted": {"type": "integer"}},
        },
        "Started": {
            "type": "object",
            "properties": {"ok": {"const": True}, "run": {"type": "object"}, "links": {"type": "object"}},
        },
        "Upload": {
            "type": "object",
            "properties": {
                "ok": {"const": True},
                "name": {"type": "string"},
                "size": {"type": "integer"},
                "sha256": {"type": "string"},
                "content_type": {"type": "string"},
                "url": {"type": "string"},
                "replaced": {"type": "boolean"},
            },
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "labledger server",
            "version": version,
            "description": "Runs, records, evaluations and uploads of one labledger ledger. Every failure "
            'answers {"ok": false, "status": <HTTP status>, "error": <message>}.',
        },
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
