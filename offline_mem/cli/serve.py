"""`offline-mem serve`: the memory file as one local service for every app on the machine
(offline_mem/server/): Mem0's REST routes, MCP over streamable HTTP at /mcp, a browser at /."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from ..config import BACKGROUND_NICE
from .common import CliState, db_path, open_memory, pass_state, shown_db, store_url


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="The port (0: any free one).")  # fmt: skip
@click.option("--allow-remote", is_flag=True,
              help="Allow a --host that other machines can reach.")  # fmt: skip
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="The bearer tokens (default: the memory file's path + .token; made on first "
                   "start, mode 0600; required for a postgresql:// --db).")  # fmt: skip
@pass_state
def serve(
    state: CliState, host: str, port: int, allow_remote: bool, token_file: Path | None
) -> None:
    """Serve the memory to every app on this machine: Mem0's REST API, MCP over HTTP at /mcp
    and a memory browser at /, with the models loaded once. Every request needs the token.
    Logs go to stderr; SIGTERM or Ctrl-C stops it (queued extractions stay in the file)."""
    try:
        from ..server.run import serve as run_server
        from ..server.security import check_bind, load_or_create_tokens, token_path_for
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("uvicorn", "starlette", "mcp"):
            raise
        raise click.ClickException(
            "the server needs its extra: pip install 'offline_mem[server]'"
        ) from None
    check_bind(host, allow_remote)
    logging.basicConfig(
        stream=sys.stderr, level=logging.DEBUG if state.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )  # fmt: skip
    if token_file is None and store_url(state) is not None:
        raise click.UsageError("serving a PostgreSQL database needs --token-file (where to keep "
                               "the bearer tokens: a database has no file beside it)")  # fmt: skip
    path = shown_db(state)
    tokens_at = token_file if token_file is not None else token_path_for(db_path(state))
    tokens, created = load_or_create_tokens(tokens_at)
    # Runs queued adds, this process's and earlier ones; the extraction yields the cores to the
    # requests (a server always has other clients waiting), as a queued add does in a library.
    memory = open_memory(state, job_worker=True, extractor_nice=BACKGROUND_NICE)

    def listening(url: str) -> None:
        click.echo(f"offline-mem serve: {url} (memory {path})", err=True)
        made = "created" if created else "read"
        click.echo(f"token: {tokens_at} ({made}; send 'Authorization: Bearer <token>')", err=True)

    level = "debug" if state.debug else "info"
    with memory:
        run_server(memory, tokens, host=host, port=port, log_level=level, on_listening=listening)
