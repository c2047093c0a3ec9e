"""The JSON API: read runs, their records and evaluations, the benchmark table; log runs through HTTP.

Reads (public unless ``--private``)::

    GET  /api/runs?group=&tag=&status=&name=&where=&sort=&offset=&limit=   where/sort: the query language
    GET  /api/runs?cursor=&limit=&...   newest first, paged by key: each answer's "next" is the next cursor
    GET  /api/runs/{run}                      run = id, unique id prefix or unique name
    GET  /api/runs/{run}/{kind}?offset=&limit=   kind = batches | scalars | history | checkpoints | notes
    GET  /api/runs/{run}/{kind}?since=N       only what was logged after the first N (``next`` of the last page)
    GET  /api/runs/{run}/evals
    GET  /api/runs/{run}/evals/{name}         stored documents and the result set's meta
    GET  /api/runs/{run}/evals/{name}/results?offset=&limit=
    GET  /api/table?suite=&models=&variant=&delta_from=

Writes (``Authorization: Bearer <token>``)::

    POST /api/runs                            {"name", "group", "tags", "config", "notes"} -> 201
    POST /api/runs/{id}/scalars               JSON list or JSON lines of {"step": int, <name>: number}
    POST /api/runs/{id}/batches               JSON list or JSON lines of microbatch records
    POST /api/runs/{id}/history               JSON list or JSON lines of objects
    POST /api/runs/{id}/notes                 {"text": "..."}
    POST /api/runs/{id}/finish                {"status": "finished" | "failed" | "killed", "error": ...}
    DELETE /api/runs/{run}                    to the ledger's trash, as ``labledger rm``

With ``--artifacts s3://bucket/prefix`` a run that finishes through the API gets its files of the open
dataset (``labledger query``, ``docs/query.md``) as a synced run does: the answer's ``dataset``
says how many were written, or why none was (the run has finished either way); a deleted run's
files are removed.

Records are validated with the library's own checks (:func:`labledger.inputs.records.validate_batch`,
``clean_scalars``) before anything is written: a bad record answers 400 naming the record
(``request body:<n>``) and the field, and none of the request's records is stored.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from labledger.errors import LedgerError, RecordError
from labledger.inputs.records import clean_scalars, validate_batch
from labledger.schema import STORED_KINDS, NewerDocumentError, decode
from labledger.server.context import OpenRun, ServerContext
from labledger.server.envelope import ApiError, JSONResponse, dumps, ok
from labledger.store.jsonl import read_json
from labledger.store.ledger import RUN_STATUSES
from labledger.store.run import Run, check_name

log = logging.getLogger("labledger.server")

#: Record kinds readable page by page: file, default page size, largest page.
RECORD_KINDS = {
    "batches": ("batches.jsonl", 100, 1000),
    "scalars": ("metrics.jsonl", 1000, 10000),
    "history": ("history.jsonl", 1000, 10000),
    "checkpoints": ("checkpoints.jsonl", 1000, 10000),
    "notes": ("notes.jsonl", 1000, 10000),
}
BODY_SOURCE = "request body"
_KIND_NAMES: dict[type, str] = {str: "string", dict: "JSON object", list: "list"}


def ctx_of(request: Request) -> ServerContext:
    return request.app.state.ctx


def reader_ctx(request: Request) -> ServerContext:
    """The server's context, once the request may read (see :meth:`ServerContext.require_read`)."""
    ctx = ctx_of(request)
    ctx.require_read(request)
    return ctx


def run_info_dict(info) -> dict[str, Any]:
    d = info.to_dict()
    d.pop("dir", None)  # a path on the server: nothing a client can use
    return d


# -- parameters and bodies ---------------------------------------------------------------------
def int_param(request: Request, name: str, default: int, *, low: int, high: int) -> int:
    """An integer query parameter within ``[low, high]``; 400 otherwise."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"query parameter '{name}' must be an integer; got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise ApiError(400, f"query parameter '{name}' must be between {low} and {high}; got {value}")
    return value


def csv_param(request: Request, name: str) -> list[str]:
    raw = request.query_params.get(name) or ""
    return [x.strip() for x in raw.split(",") if x.strip()]


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 once it passes ``limit`` bytes (never buffered past it)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "Content-Length must be a number of bytes")
        if int(declared) > limit:
            raise ApiError(413, f"the body is {int(declared)} bytes; this server takes at most {limit}")
    chunks = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"the body passed {limit} bytes, the most this server takes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "the client disconnected before the body was complete") from None
    return b"".join(chunks)


def parse_object(body: bytes, *, required: bool = True) -> dict[str, Any]:
    """A JSON object from the body (400 naming the fault otherwise)."""
    if not body.strip():
        if required:
            raise ApiError(400, "the request body must be a JSON object; it is empty")
        return {}
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"{BODY_SOURCE}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ApiError(400, f"{BODY_SOURCE}: must be a JSON object; got {type(doc).__name__}")
    return doc


def parse_records(body: bytes) -> list[dict[str, Any]]:
    """Records from a JSON list, one JSON object, or JSON lines (400 naming the line)."""
    text = body.strip()
    if not text:
        raise ApiError(400, f"{BODY_SOURCE}: no records (send a JSON list or JSON lines)")
    if text[:1] == b"[":
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ApiError(400, f"{BODY_SOURCE}: not valid JSON ({exc})") from None
        records = doc
    else:
        records = []
        for lineno, line in enumerate(text.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise ApiError(400, f"{BODY_SOURCE}:{lineno}: not valid JSON ({exc})") from None
    for i, rec in enumerate(records, 1):
        if not isinstance(rec, dict):
            raise ApiError(400, f"{BODY_SOURCE}:{i}: a record must be a JSON object; got {type(rec).__name__}")
    return records


def _field(doc: dict[str, Any], name: str, kinds: tuple[type, ...], *, required: bool = False) -> Any:
    value = doc.get(name)
    if value is None:
        if required:
            raise ApiError(400, f"{BODY_SOURCE}: field '{name}' is required")
        return None
    if not isinstance(value, kinds) or isinstance(value, bool):
        expected = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
        raise ApiError(400, f"{BODY_SOURCE}: field '{name}' must be a {expected}; got {type(value).__name__}")
    return value


# -- reads -------------------------------------------------------------------------------------
#: Query parameters of ``GET /api/runs``; any other is refused with 400, never ignored.
LIST_RUNS_PARAMS = ("group", "tag", "status", "name", "where", "sort", "offset", "limit", "cursor")


def encode_cursor(started: float, run_id: str) -> str:
    """The cursor of the page after the run ``(started, run_id)`` (opaque to clients).

    >>> decode_cursor(encode_cursor(1.5, "20261201-000000-abc"))
    (1.5, '20261201-000000-abc')
    """
    import base64

    return base64.urlsafe_b64encode(orjson.dumps([started, run_id])).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[float, str]:
    """``(started, id)`` of a cursor from :func:`encode_cursor`; a 400 for anything else."""
    import base64

    try:
        started, run_id = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if isinstance(started, (int, float)) and not isinstance(started, bool) and isinstance(run_id, str):
            return float(started), run_id
    except (ValueError, TypeError):
        pass
    raise ApiError(400, f"query parameter 'cursor' is not a cursor this server gave ({text[:40]!r})")


async def list_runs(request: Request) -> Response:
    ctx = reader_ctx(request)
    q = request.query_params
    unknown = [k for k in q if k not in LIST_RUNS_PARAMS]
    if unknown:
        hint = " (filter on fields with where=, e.g. where=config.lr < 1e-3)" if "." in unknown[0] else ""
        raise ApiError(400, f"unknown query parameter '{unknown[0][:40]}'{hint}; known: {', '.join(LIST_RUNS_PARAMS)}")
    status = q.get("status") or None
    if status is not None and status not in RUN_STATUSES:
        raise ApiError(400, f"query parameter 'status' must be one of {', '.join(RUN_STATUSES)}; got {status[:40]!r}")
    offset = int_param(request, "offset", 0, low=0, high=10**9)
    limit = int_param(request, "limit", 1000, low=1, high=10000)
    if "cursor" in q:  # paging by key (#46): only this page's rows are read from the index
        if q.get("sort") or q.get("offset"):
            raise ApiError(400, "'cursor' pages in the default order (newest first): pass no 'sort' or 'offset'")
        after = decode_cursor(q["cursor"]) if q["cursor"] else None

        def page():
            docs = ctx.ledger().run_dicts(
                name=q.get("name") or None,
                group=q.get("group") or None,
                tag=q.get("tag") or None,
                status=status,
                where=q.get("where") or None,
                after=after,
                limit=limit + 1,
            )
            more = len(docs) > limit
            docs = docs[:limit]
            for d in docs:
                d.pop("dir")
            last = docs[-1] if docs else None
            nxt = encode_cursor(last["started"], last["id"]) if more and last else None
            return {"limit": limit, "count": len(docs), "next": nxt, "runs": docs}

        return ok(await run_in_threadpool(page))

    def work():
        docs = ctx.ledger().run_dicts(  # the index rows straight to dicts (#12)
            name=q.get("name") or None,
            group=q.get("group") or None,
            tag=q.get("tag") or None,
            status=status,
            where=q.get("where") or None,
            sort=q.get("sort") or None,
        )
        page = docs[offset : offset + limit]
        for d in page:
            d.pop("dir")  # a path on the server: nothing a client can use
        return {"total": len(docs), "offset": offset, "limit": limit, "runs": page}

    return ok(await run_in_threadpool(work))


async def get_run(request: Request) -> Response:
    ctx = reader_ctx(request)
    ref = request.path_params["run"]

    def work():
        book = ctx.ledger()
        run_id, note = book.resolve_with_note(ref)
        view = book.run(run_id)
        counters = view.counters()  # from the index: no scan of the run's records
        return {
            "run": run_info_dict(view.info),
            **({"note": note} if note else {}),
            "meta": ctx.meta_for(request, view.meta),
            "config": view.config,
            "counts": view.counts(counters),
            "results": view.results_names(),
            "evaluations": _indexed_evaluations(book, view.id),
            "files": view.files()[:1000],
            "last": view.last_scalars(counters),
        }

    return ok(await run_in_threadpool(work))


async def delete_run(request: Request) -> Response:
    """``DELETE /api/runs/{run}``: move a run to the ledger's trash, as ``labledger rm`` does (its
    folder and index rows in one step; files other runs use kept). A write: the token is needed. A
    running run is refused (409), one this server holds open too; ``labledger restore`` on the
    server's ledger brings it back."""
    ctx = ctx_of(request)
    ctx.require_write(request)
    ref = request.path_params["run"]

    def work():
        book = ctx.ledger()
        run_id, note = book.resolve_with_note(ref)
        with ctx.open_runs_lock:
            if run_id in ctx.open_runs:
                raise ApiError(409, f"run {run_id} is running on this server; finish it before removing it")
        entry = book.delete_run(run_id)
        ctx.unpublish(run_id)
        return {
            "run": {"id": entry.id, "name": entry.name, "status": entry.status},
            **({"note": note} if note else {}),
            "trash": f".trash/{entry.id}",
            "kept": entry.kept,
        }

    return ok(await run_in_threadpool(work))


def _indexed_evaluations(book, run_id: str) -> list[dict[str, Any]]:
    """The run's indexed evaluations without their server path (nothing a client can use)."""
    return [{k: v for k, v in e.to_dict().items() if k != "path"} for e in book.evaluations(run_id)]


async def run_records(request: Request) -> Response:
    ctx = reader_ctx(request)
    kind = request.path_params["kind"]
    if kind not in RECORD_KINDS:
        raise ApiError(404, f"no record kind '{kind[:40]}' (known: {', '.join(RECORD_KINDS)}, evals)")
    fname, default, high = RECORD_KINDS[kind]
    # ``since`` is a cursor (a live page passes the ``next`` of its last fetch and gets only what was
    # logged after it); records are only ever appended, so it is the index of the first record sent
    if request.query_params.get("since") and request.query_params.get("offset"):
        raise ApiError(400, "pass 'since' (a cursor) or 'offset', not both")
    offset = int_param(request, "since", 0, low=0, high=10**12) or int_param(request, "offset", 0, low=0, high=10**12)
    limit = int_param(request, "limit", default, low=1, high=high)
    ref = request.path_params["run"]

    def work():
        book = ctx.ledger()
        run_id = book.resolve(ref)
        return run_id, *_page(ctx, book.run_dir(run_id) / fname, offset, limit)

    run_id, lines, total = await run_in_threadpool(work)
    head = {"run": run_id, "offset": offset, "limit": limit, "total": total, "count": len(lines)}
    return _page_response({**head, "next": offset + len(lines)}, kind, lines)


def _server_read(ctx: ServerContext, read, *args: Any) -> Any:
    """``read(*args)`` of a ledger file; a damaged file is the server's fault (500), not the client's."""
    try:
        return read(*args)
    except (RecordError, NewerDocumentError) as exc:
        raise ApiError(500, ctx.redact(str(exc))) from None


def _page(ctx: ServerContext, path, offset: int, limit: int) -> tuple[list[bytes], int]:
    return _server_read(ctx, ctx.lines.page, path, offset, limit)


def _page_response(head: dict[str, Any], key: str, lines: list[bytes]) -> Response:
    body = dumps({"ok": True, **head})[:-1] + b"," + orjson.dumps(key) + b":[" + b",".join(lines) + b"]}"
    return JSONResponse(body)


async def list_evals(request: Request) -> Response:
    ctx = reader_ctx(request)
    ref = request.path_params["run"]

    def work():
        book = ctx.ledger()
        view = book.run(ref)
        names = (
            sorted({p.name for p in (view.dir / "evals").iterdir() if p.is_dir()})
            if (view.dir / "evals").is_dir()
            else []
        )
        return {
            "run": view.id,
            "evals": names,
            "results": view.results_names(),
            "indexed": _indexed_evaluations(book, view.id),
        }

    return ok(await run_in_threadpool(work))


async def get_eval(request: Request) -> Response:
    ctx = reader_ctx(request)
    ref, name = request.path_params["run"], request.path_params["name"]
    check_name(name, "evaluation name")

    def work():
        book = ctx.ledger()
        run_id = book.resolve(ref)
        folder = book.run_dir(run_id) / "evals" / name
        if not folder.is_dir():
            raise ApiError(404, f"run {run_id} has no evaluation or result set '{name}'")
        documents = {}
        for path in sorted(folder.glob("*.json")):
            if path.name == "meta.json":
                continue
            if path.stem in STORED_KINDS:  # typed documents: decoded, version-checked, answered as today's version
                documents[path.stem] = _server_read(ctx, _read_document, path)
            else:
                documents[path.stem] = _server_read(ctx, read_json, path)
        results = None
        if (folder / "results.jsonl").exists():
            meta_path = folder / "meta.json"
            meta = _server_read(ctx, read_json, meta_path) if meta_path.exists() else {}
            results = {
                "rows": meta.get("rows"),
                "sha256": meta.get("sha256"),
                "meta": meta,
                "url": f"/api/runs/{run_id}/evals/{name}/results",
            }
        return {
            "run": run_id,
            "name": name,
            "evaluation": documents.get("evaluation"),
            "documents": documents,
            "results": results,
        }

    return ok(await run_in_threadpool(work))


def _read_document(path: Any) -> dict[str, Any]:
    out: dict[str, Any] = decode(path.read_bytes(), kind=path.stem, source=str(path)).to_dict()
    return out


async def eval_results(request: Request) -> Response:
    ctx = reader_ctx(request)
    ref, name = request.path_params["run"], request.path_params["name"]
    check_name(name, "result set name")
    offset = int_param(request, "offset", 0, low=0, high=10**12)
    limit = int_param(request, "limit", 1000, low=1, high=10000)

    def work():
        book = ctx.ledger()
        run_id = book.resolve(ref)
        path = book.run_dir(run_id) / "evals" / name / "results.jsonl"
        if not path.exists():
            raise ApiError(404, f"run {run_id} has no result set '{name}'")
        return run_id, *_page(ctx, path, offset, limit)

    run_id, lines, total = await run_in_threadpool(work)
    return _page_response(
        {"run": run_id, "name": name, "offset": offset, "limit": limit, "total": total, "count": len(lines)},
        "rows",
        lines,
    )


async def get_table(request: Request) -> Response:
    ctx = reader_ctx(request)
    suite = request.query_params.get("suite") or "public"
    models = csv_param(request, "models")
    variants = csv_param(request, "variant") or ["raw"]
    delta_from = request.query_params.get("delta_from") or None

    def work():
        from labledger.analysis.benchmarks import read_entries, version_table
        from labledger.analysis.groups import paired_entry_test

        entries = read_entries(ctx.ledger(), suite=suite, models=models or None, variants=variants)
        if not entries:
            raise ApiError(
                404, f"no benchmark entries in suite '{suite}'" + (f" for models {', '.join(models)}" if models else "")
            )
        model_list = models or list(dict.fromkeys(e.model for e in entries))
        table = version_table(
            entries,
            suite=suite,
            models=model_list,
            variants=variants,
            delta_from=delta_from,
            paired_test=paired_entry_test,
        )
        return {"table": table.to_dict(), "markdown": table.to_markdown()}

    return ok(await run_in_threadpool(work))


# -- writes ------------------------------------------------------------------------------------
async def start_run(request: Request) -> Response:
    ctx = ctx_of(request)
    ctx.require_write(request)
    doc = parse_object(await read_body(request, ctx.max_body))
    name = _field(doc, "name", (str,), required=True)
    group = _field(doc, "group", (str,))
    tags = _field(doc, "tags", (list,)) or []
    if not all(isinstance(t, str) for t in tags):
        raise ApiError(400, f"{BODY_SOURCE}: field 'tags' must be a list of strings")
    config = _field(doc, "config", (dict,)) or {}
    notes = _field(doc, "notes", (str,))
    unknown = sorted(set(doc) - {"name", "group", "tags", "config", "notes"})
    if unknown:
        raise ApiError(400, f"{BODY_SOURCE}: unknown field '{unknown[0]}' (known: name, group, tags, config, notes)")

    def work():
        book = ctx.new_ledger()
        try:
            run = Run(name, group=group, tags=tags, config=config, notes=notes, ledger=book)
        except BaseException:
            book.close()
            raise
        with ctx.open_runs_lock:
            ctx.open_runs[run.id] = OpenRun(run=run, ledger=book)
        return run

    run = await run_in_threadpool(work)
    body = {
        "run": {
            "id": run.id,
            "name": run.name,
            "group": run.group,
            "tags": run.tags,
            "status": run.status,
            "started": run.meta["started"],
        },
        "links": {k: f"/api/runs/{run.id}/{k}" for k in ("scalars", "batches", "history", "notes", "finish")},
    }
    return ok(body, status=201, headers={"Location": f"/api/runs/{run.id}"})


def _with_source(exc: RecordError, line: int) -> RecordError:
    return RecordError(exc.detail, source=BODY_SOURCE, line=line, field=exc.field)


async def _open_entry(request: Request) -> tuple[ServerContext, OpenRun]:
    """The context and the open run a write request names (after the token check)."""
    ctx = ctx_of(request)
    ctx.require_write(request)
    return ctx, await run_in_threadpool(_entry, ctx, request.path_params["run"])


async def _records_for(request: Request) -> tuple[OpenRun, list[dict[str, Any]]]:
    ctx, entry = await _open_entry(request)
    return entry, parse_records(await read_body(request, ctx.max_body))


def _entry(ctx: ServerContext, run_id: str) -> OpenRun:
    with ctx.open_runs_lock:
        entry = ctx.open_runs.get(run_id)
    if entry is None:
        ctx.ledger().resolve(run_id)  # 404 for a run that does not exist at all
        return ctx.open_run(run_id)  # 409 for one this server does not hold
    return entry


async def _apply(entry: OpenRun, fn) -> None:
    def work():
        with entry.lock:
            if entry.run.status != "running":
                raise ApiError(409, f"run {entry.run.id} is {entry.run.status}; it takes no more records")
            fn(entry.run)

    await run_in_threadpool(work)


async def post_scalars(request: Request) -> Response:
    entry, records = await _records_for(request)
    clean = []
    for i, rec in enumerate(records, 1):
        step = rec.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            raise RecordError(f"must be an integer; got {step!r:.40}", source=BODY_SOURCE, line=i, field="step")
        try:
            values = clean_scalars({k: v for k, v in rec.items() if k != "step"})
        except RecordError as exc:
            raise _with_source(exc, i) from None
        clean.append((step, values))

    def log_all(run: Run) -> None:
        for step, values in clean:
            run.log(step, **values)

    await _apply(entry, log_all)
    return ok({"run": entry.run.id, "accepted": len(clean)})


async def post_batches(request: Request) -> Response:
    entry, records = await _records_for(request)
    last = None
    for i, rec in enumerate(records, 1):
        last = validate_batch(rec, last_microbatch=last, source=BODY_SOURCE, line=i)

    def log_all(run: Run) -> None:
        for i, rec in enumerate(records, 1):
            try:
                run.log_batch(rec)
            except RecordError as exc:  # only the first can fail: it follows the previous request's
                raise _with_source(exc, i) from None

    await _apply(entry, log_all)
    return ok({"run": entry.run.id, "accepted": len(records)})


async def post_history(request: Request) -> Response:
    entry, records = await _records_for(request)

    def log_all(run: Run) -> None:
        for rec in records:
            run.log_history(rec)

    await _apply(entry, log_all)
    return ok({"run": entry.run.id, "accepted": len(records)})


async def post_note(request: Request) -> Response:
    ctx, entry = await _open_entry(request)
    doc = parse_object(await read_body(request, ctx.max_body))
    text = _field(doc, "text", (str,), required=True)
    await _apply(entry, lambda run: run.note(text))
    return ok({"run": entry.run.id, "accepted": 1})


async def finish_run(request: Request) -> Response:
    ctx, entry = await _open_entry(request)
    doc = parse_object(await read_body(request, ctx.max_body), required=False)
    status = _field(doc, "status", (str,)) or "finished"
    if status not in ("finished", "failed", "killed"):
        raise ApiError(400, f"{BODY_SOURCE}: field 'status' must be finished, failed or killed; got {status[:40]!r}")
    error = _field(doc, "error", (str,))
    summary = _field(doc, "summary", (dict,))

    def work():
        with entry.lock:
            run = entry.run
            if run.status != "running":
                raise ApiError(409, f"run {run.id} is already {run.status}")
            try:
                if summary:
                    try:
                        run.set_summary(**summary)
                    except RecordError as exc:
                        raise ApiError(400, f"{BODY_SOURCE}: summary: {exc}") from None
                run.finish(status, error=error)
            finally:
                if run.status != "running":
                    with ctx.open_runs_lock:
                        ctx.open_runs.pop(run.id, None)
                    entry.ledger.close()
            return {"id": run.id, "status": run.status, "ended": run.meta["ended"]}

    done = await run_in_threadpool(work)
    body: dict[str, Any] = {"run": done}
    if ctx.objects is not None:  # the ended run's files of the open dataset (#46), as a sync's are
        try:
            body["dataset"] = {"files": await run_in_threadpool(ctx.publish, done["id"])}
        except (ApiError, LedgerError) as exc:  # the run has ended all the same: say what was not written
            message = exc.message if isinstance(exc, ApiError) else str(exc)
            log.warning("run %s ended but its dataset files were not written: %s", done["id"], message)
            body["dataset"] = {"files": 0, "error": ctx.redact(message)}
    return ok(body)
