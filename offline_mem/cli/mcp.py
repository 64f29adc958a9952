"""`offline-mem mcp [--user NAME] [--agent NAME]`: the memory file as an MCP server over stdio
(offline_mem/mcp/server.py). Opens the memory once, then serves until the client closes stdin."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from ..mcp.tools import DefaultScope, MemoryTools
from ..validation import make_scope
from .common import CliState, open_memory, pass_state, shown_db


@click.command("mcp")
@click.option("--user", "user_id", metavar="NAME", help="The user id of calls that pass none.")
@click.option("--agent", "agent_id", metavar="NAME", help="The agent id of calls that pass none.")
@pass_state
def mcp(state: CliState, user_id: str | None, agent_id: str | None) -> None:
    """Serve the memory to an agent or desktop assistant as MCP tools over stdin/stdout
    (add, search, list, get, update, delete, history). Logs go to stderr."""
    try:
        from ..mcp.server import LogLevel, MemoryServer
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "mcp":
            raise
        raise click.ClickException(
            "the MCP server needs the mcp package: pip install 'offline_mem[mcp]'"
        ) from None
    scope = make_scope(user_id, agent_id, required=False)
    defaults = DefaultScope(user_id=scope.user_id, agent_id=scope.agent_id)
    with _stdout_to_stderr():
        memory = open_memory(state, job_worker=True)  # a session: it runs queued adds
    click.echo(f"offline-mem mcp: serving {shown_db(state)} over stdio", err=True)
    with memory:
        level: LogLevel = "DEBUG" if state.debug else "WARNING"
        MemoryServer(MemoryTools(memory, defaults), log_level=level).run()


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send whatever a model loader prints to stdout (Python or C code) to stderr instead: the
    client reads stdout as the protocol, and one stray line breaks it. (While serving, the SDK
    diverts fd 1 itself.)"""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
