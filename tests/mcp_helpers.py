"""Driving `offline-mem mcp` with the MCP SDK's own stdio client: `serve()` starts the server as a
subprocess (tests/mcp_server_process.py) and yields an initialised `ClientSession`."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "mcp_server_process.py"
TIMEOUT_S = 300  # a hung server fails the test instead of hanging it


def server_env() -> dict[str, str]:
    """What the server needs beyond the SDK's minimal default environment (HOME, PATH, ...), which
    holds no Hugging Face offline variable: the library must not depend on them."""
    env = {"PYTHONPATH": str(ROOT)}
    if "OFFLINE_MEM_MODELS" in os.environ:
        env["OFFLINE_MEM_MODELS"] = os.environ["OFFLINE_MEM_MODELS"]
    return env


@asynccontextmanager
async def serve(
    db: Path | str,
    *mcp_args: str,
    fakes: bool = True,
    facts: Sequence[str] = (),
    audit: Path | None = None,
    stderr: Path | None = None,
    env: dict[str, str] | None = None,
    workdir: Path | None = None,
) -> AsyncIterator[ClientSession]:
    """`offline-mem --db DB mcp MCP_ARGS` with fake models (or the pinned ones), initialised.
    DB is a memory file or a database's URL; the server runs in `workdir` (default: the file's
    folder), where its stderr goes unless `stderr` is given."""
    folder = workdir if workdir is not None else Path(db).parent
    helper = ["--fakes"] if fakes else []
    helper += [arg for fact in facts for arg in ("--fact", fact)]
    helper += ["--audit", str(audit)] if audit is not None else []
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER), *helper, "--", "--db", str(db), "mcp", *mcp_args],
        env=env if env is not None else server_env(),
        cwd=str(folder),
    )
    log_path = stderr if stderr is not None else folder / "server-stderr.log"
    with log_path.open("a", encoding="utf-8") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write, read_timeout_seconds=TIMEOUT_S) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured content of a successful call (its text rendering checked to be there)."""
    result = await session.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert not result.is_error, text_of(result)
    assert text_of(result)
    assert result.structured_content is not None
    return result.structured_content


async def error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of a call that must fail as a tool error."""
    result = await session.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert result.is_error, result
    return text_of(result)


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")
