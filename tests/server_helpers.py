"""Running `offline-mem serve` for the server tests: a subprocess (tests/mcp_server_process.py,
fake models unless asked) on a free loopback port, its URL read from its stderr."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HELPER = ROOT / "tests" / "mcp_server_process.py"
START_TIMEOUT_S = 120
_URL = re.compile(r"offline-mem serve: (http://\S+)")


@dataclass
class Running:
    url: str
    token: str
    process: subprocess.Popen[bytes]
    log: Path
    db: Path | str

    def client(self, token: str | None = None, **kwargs: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **kwargs)  # type: ignore[arg-type]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


@contextmanager
def serve(
    db: Path | str,
    *serve_args: str,
    facts: Sequence[str] = (),
    fakes: bool = True,
    slow: float = 0.0,
    extra_env: dict[str, str] | None = None,
    workdir: Path | None = None,
) -> Iterator[Running]:
    """`offline-mem --db DB serve --port 0 SERVE_ARGS`, until the block ends (SIGTERM). DB is a
    memory file, or a postgresql:// URL (then `workdir` holds the log)."""
    helper = ["--fakes"] if fakes else []
    helper += [arg for fact in facts for arg in ("--fact", fact)]
    helper += ["--slow", str(slow)] if slow else []
    if isinstance(db, str):
        assert workdir is not None, "a database URL needs a workdir for the server's log"
        log = workdir / "serve-postgres.log"
    else:
        workdir = db.parent
        log = db.parent / f"serve-{db.stem}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra_env or {})}
    args = [sys.executable, str(HELPER), *helper, "--", "--db", str(db), "serve", "--port", "0",
            *serve_args]  # fmt: skip
    with log.open("ab") as err:
        process = subprocess.Popen(args, stdout=err, stderr=err, env=env, cwd=workdir)
    running = None
    try:
        url = _wait_for_url(log, process)
        token_file = _token_file(serve_args, db)
        token = token_file.read_text().split()[0]
        running = Running(url, token, process, log, db)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _token_file(serve_args: Sequence[str], db: Path | str) -> Path:
    args = list(serve_args)
    if "--token-file" in args:
        return Path(args[args.index("--token-file") + 1])
    assert isinstance(db, Path), "serving a database needs --token-file"
    return db.with_name(db.name + ".token")


def _wait_for_url(log: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        found = _URL.search(text)
        if found and "Application startup complete" in text:
            return found.group(1)
        if process.poll() is not None:
            raise RuntimeError(f"serve exited with {process.returncode}:\n{text}")
        time.sleep(0.05)
    raise TimeoutError(f"serve did not start:\n{log.read_text(errors='replace')}")
