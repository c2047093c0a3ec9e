"""``labledger serve``: the ledger over HTTP; ``labledger push``: upload a file to such a server."""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import socket
from pathlib import Path

import click

from labledger.cli.base import (
    console,
    emit_json,
    err_console,
    handle_errors,
    json_option,
    ledger_option,
    main,
    resolve_ledger_path,
    warn,
)
from labledger.errors import LedgerError, LedgerNotFoundError
from labledger.server.timeouts import BODY_TIMEOUT_S, HEAD_TIMEOUT_S

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.I)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """Bytes from ``100MB``, ``1.5G``, ``512k`` or ``1048576`` (K/M/G are binary: 1 MB = 2**20 bytes).

    >>> parse_size("100MB"), parse_size("1.5GiB"), parse_size("512")
    (104857600, 1610612736, 512)
    """
    m = _SIZE.match(str(text))
    if not m:
        raise click.BadParameter(f"{text!r} is not a size (examples: 100MB, 1.5GiB, 512k, 1048576)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise click.BadParameter("must be more than 0 bytes")
    return value


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server on this machine.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _allowed_hosts(host: str, port: int) -> list[str] | None:
    """Host headers a loopback server answers (refuses DNS-rebinding pages); None = any (a public bind)."""
    if not is_loopback(host):
        return None
    names = {"127.0.0.1", "localhost", "[::1]", host if ":" not in host else f"[{host.strip('[]')}]"}
    return sorted({f"{n}:{port}" for n in names} | names)


@main.command("serve")
@ledger_option
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind. Anything but loopback needs a token."
)
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option(
    "--uploads",
    "uploads_dir",
    default=None,
    metavar="DIR",
    help="Folder for POST /upload (default: uploads/ in the ledger folder, or in --artifacts).",
)
@click.option(
    "--max-upload",
    default="100MB",
    show_default=True,
    metavar="SIZE",
    help="Largest upload (K/M/G are binary: 100MB = 100 MiB).",
)
@click.option(
    "--token",
    default=None,
    envvar="LABLEDGER_TOKEN",
    show_envvar=True,
    help="Token for uploads and API writes (Authorization: Bearer ...). Without one the server is read-only.",
)
@click.option(
    "--private", is_flag=True, help="Reads need the token too (browsers sign in at /login); the default off loopback."
)
@click.option(
    "--public-reads", is_flag=True, help="Off loopback with a token: let anyone read (writes still need the token)."
)
@click.option("--create", is_flag=True, help="Create the ledger if it does not exist (else serving one is refused).")
@click.option(
    "--artifacts",
    default=None,
    envvar="LABLEDGER_ARTIFACTS",
    metavar="DIR|s3://BUCKET/PREFIX",
    help="Where run files live: team mode's shared folder (--ledger postgresql://...), or S3-compatible "
    "object storage for synced runs (s3://...; endpoint and credentials from the AWS environment).",
)
@click.option(
    "--site-cache",
    default=None,
    metavar="DIR",
    help="Folder for the live site's generated files (default: a temporary folder).",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="Server log level (requests and errors go to stderr).",
)
@click.option(
    "--head-timeout",
    default=HEAD_TIMEOUT_S,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds a client may take to send a request's line and headers; slower connections are closed.",
)
@click.option(
    "--body-timeout",
    default=BODY_TIMEOUT_S,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds the server waits for each piece of a request body; a stalled body is answered 408.",
)
@handle_errors
def serve_cmd(
    ledger_path,
    host,
    port,
    uploads_dir,
    max_upload,
    token,
    private,
    public_reads,
    create,
    artifacts,
    site_cache,
    log_level,
    head_timeout,
    body_timeout,
):
    """Serve the ledger: live pages at /, a JSON API at /api, uploads at /upload and /uploads/NAME.

    The pages are the static site's, rendered from the ledger on request (a new run shows on
    reload). The API is described at /openapi.json; every failure answers
    {"ok": false, "status": ..., "error": ...}. Upload a report with
    `labledger push FILE --to http://HOST:PORT` or
    `curl -H "Authorization: Bearer $TOKEN" --data-binary @FILE "http://HOST:PORT/upload?filename=FILE"`.

    --ledger may be postgresql://user@host/db (team mode) with --artifacts DIR; --artifacts s3://BUCKET/PREFIX
    keeps synced run files in object storage.
    """
    import uvicorn

    from labledger.server import create_app
    from labledger.server.timeouts import BodyTimeout, head_timeout_protocol
    from labledger.store.dialect import display_url, is_database_url

    limit = parse_size(max_upload)
    location = resolve_ledger_path(ledger_path)
    token = token or None
    if not is_loopback(host) and not token:
        raise click.UsageError(
            f"refusing to serve on {host} without a token: anyone who can reach it could upload. "
            f"Pass --token T (or set LABLEDGER_TOKEN), or bind to 127.0.0.1."
        )
    if private and not token:
        raise click.UsageError("--private needs a token (--token T or LABLEDGER_TOKEN)")
    if token and len(token) < 16 and not is_loopback(host):
        warn(
            "the token is shorter than 16 characters; use a long random one (python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    if private and public_reads:
        raise click.UsageError("--private and --public-reads contradict each other; pass one")
    if token and not is_loopback(host) and not public_reads:
        private = True  # off loopback, a token guards reads too unless --public-reads says otherwise
    team = is_database_url(location)
    from labledger.store.ledger import DB_NAME

    if not team and not create and not (Path(location) / DB_NAME).exists():
        raise LedgerNotFoundError(
            f"No ledger at {os.path.abspath(location)} (no {DB_NAME}); pass --create to serve a new empty one"
        )
    sock = _bind(host, port)
    objects = bool(artifacts) and str(artifacts).startswith("s3://")
    if team and not artifacts:
        raise click.UsageError("team mode (--ledger postgresql://...) needs --artifacts DIR or s3://BUCKET/PREFIX")
    if uploads_dir is None:
        base = location if objects or not team else artifacts
        if team and objects:
            from labledger.server.context import spool_dir

            base = spool_dir(artifacts)
        uploads_dir = os.path.join(base, "uploads")
    app = create_app(
        location,
        uploads_dir=uploads_dir,
        token=token,
        private=private,
        max_upload=limit,
        artifacts=artifacts if team or objects else None,
        site_cache=site_cache,
        allowed_hosts=_allowed_hosts(host, port),
        build_site_at_start=True,
    )
    app.add_middleware(BodyTimeout, body_timeout=body_timeout)
    protocol = head_timeout_protocol(head_timeout, MAX_HEADER_BYTES, body_timeout)
    where = display_url(location) if team else os.path.abspath(location)
    shown = f"[{host}]" if ":" in host else host
    console.print(f"labledger serving {where} at http://{shown}:{port}/")
    console.print(f"  uploads: {os.path.abspath(uploads_dir)} (at most {limit:,} bytes each)")
    console.print(
        "  writes:  "
        + ("token required" if token else "disabled (no --token: read-only)")
        + ("; reads need the token too" if private else "; reads are public")
    )
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=log_level == "debug",
        server_header=False,
        timeout_keep_alive=REQUEST_IDLE_S,
        limit_concurrency=MAX_CONNECTIONS,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        http=protocol,
    )
    uvicorn.Server(config).run(sockets=[sock])


#: Seconds an idle keep-alive connection is held open.
REQUEST_IDLE_S = 5
#: Connections served at once; past it, new ones get 503 (so idle sockets cannot starve the server).
MAX_CONNECTIONS = 256
#: Largest request head (request line + headers) in bytes.
MAX_HEADER_BYTES = 64 * 1024


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a busy port or a bad address is a one-line LedgerError."""
    addr = host.strip("[]")
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((addr, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise LedgerError(f"port {port} on {host} is already in use; pick another with --port") from None
        raise LedgerError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    sock.set_inheritable(True)
    return sock


@main.command("push")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, readable=True))
@click.option(
    "--to", "to", required=True, metavar="URL", help="The server (http://HOST:PORT), or its upload URL (.../upload)."
)
@click.option("--token", default=None, envvar="LABLEDGER_TOKEN", show_envvar=True, help="The server's token.")
@click.option("--name", default=None, help="Name on the server (default: the file's name).")
@click.option("--overwrite", is_flag=True, help="Replace an upload of the same name.")
@json_option
@handle_errors
def push_cmd(file, to, token, name, overwrite, as_json):
    """Upload FILE to a labledger server and verify the sha256 it stored.

    Exit 0 only when the server stored exactly the bytes of FILE.
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from labledger.server.client import push_file

    size = os.path.getsize(file)
    show = not as_json and err_console.is_terminal
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err_console,
        disable=not show,
        transient=True,
    ) as progress:
        task = progress.add_task(f"push {os.path.basename(file)}", total=size)
        result = push_file(
            file,
            to,
            token=token,
            name=name,
            overwrite=overwrite,
            on_progress=lambda sent, total: progress.update(task, completed=sent),
        )
    if as_json:
        emit_json(result)
        return
    base = to.split("?", 1)[0].rstrip("/")
    base = base[: -len("/upload")] if base.endswith("/upload") else base
    console.print(f"Pushed   {result['name']} ({result['size']:,} bytes, {result['content_type']})")
    console.print(f"sha256   {result['sha256']} (verified)")
    console.print(f"URL      {base}{result['url']}")
