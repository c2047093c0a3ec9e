"""A throwaway PostgreSQL cluster for the team-mode tests (initdb + pg_ctl on 127.0.0.1, a free port).

Debian's server binaries live in /usr/lib/postgresql/<version>/bin (``apt-get install postgresql``;
.ci/run installs it). PostgreSQL refuses to run as root, so as root the cluster runs as the
``postgres`` user through ``runuser``. Without the binaries the tests that need it are skipped with
a message saying how to install them.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
    "`apt-get install -y postgresql` (Debian/Ubuntu) or set LABLEDGER_PG_BIN to their folder"
)


def find_bin() -> Path | None:
    """The folder with ``initdb`` and ``pg_ctl`` ($LABLEDGER_PG_BIN, Debian's, or on $PATH)."""
    candidates = []
    if os.environ.get("LABLEDGER_PG_BIN"):
        candidates.append(Path(os.environ["LABLEDGER_PG_BIN"]))
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    candidates += [Path(p) for p in reversed(versions)]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One PostgreSQL server in a temporary folder; ``new_database()`` gives each test its own."""

    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.base = Path(tempfile.mkdtemp(prefix="labledger-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.base, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-locale", "-E", "UTF8")
        self.start()

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / tool), *args]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if check and res.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed ({res.returncode}): {res.stderr or res.stdout}\n{log}")
        return res

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=150"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", opts, "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = "t_" + secrets.token_hex(5)
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_cluster():
    """A running throwaway PostgreSQL cluster for the whole session (skipped when not installed)."""
    pytest.importorskip("psycopg", reason='psycopg 3 is not installed: pip install "labledger[team]"')
    bin_dir = find_bin()
    if bin_dir is None:
        pytest.skip(INSTALL_HINT)
    cluster = Cluster(bin_dir)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def pg_url(postgres_cluster):
    """The URL of a fresh database on the session's cluster."""
    return postgres_cluster.new_database()
