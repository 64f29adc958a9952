"""MCP over streamable HTTP at `offline-mem serve`'s /mcp, driven by the MCP SDK's own client:
the tools of `offline-mem mcp` plus search_messages and delete_all_memories, the token required
as on every other route."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from server_helpers import Running, serve

pytestmark = pytest.mark.network_local

FACT = "User is allergic to peanuts"
STDIO_TOOLS = {"add_memory", "search_memory", "list_memories", "get_memory", "update_memory",
               "delete_memory", "memory_history"}  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    db = tmp_path_factory.mktemp("serve-mcp") / "memory.db"
    with serve(db, facts=[FACT]) as running:
        yield running


@asynccontextmanager
async def connect(server: Running, token: str | None = None) -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token or server.token}"})
    async with (
        http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def test_tools_over_http(server: Running) -> None:
    async def scenario() -> None:
        async with connect(server) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == STDIO_TOOLS | {"search_messages", "delete_all_memories"}
            added = await call(session, "add_memory", text="Peanuts make me ill, I'm allergic",
                               user_id="alice")  # fmt: skip
            assert [r["memory"] for r in added["results"]] == [FACT]
            found = await call(session, "search_memory", query="peanuts", user_id="alice")
            assert FACT in [item["memory"] for item in found["results"]]
            turns = await call(session, "search_messages", query="peanuts", user_id="alice")
            assert [t["content"] for t in turns["results"]] == ["Peanuts make me ill, I'm allergic"]
            gone = await call(session, "delete_all_memories", user_id="alice")
            assert gone["deleted"] == 1
            listed = await call(session, "list_memories", user_id="alice")
            assert listed["results"] == []
            bad = await session.call_tool("get_memory", {"memory_id": "nope", "user_id": "alice"})
            assert bad.is_error and "MemoryNotFoundError" in json.dumps(bad.model_dump(mode="json"))

    anyio.run(scenario)


def test_a_write_over_mcp_is_seen_over_rest(server: Running) -> None:
    async def scenario() -> str:
        async with connect(server) as session:
            added = await call(session, "add_memory", text="I play the cello", infer=False,
                               user_id="bob")  # fmt: skip
            return str(added["results"][0]["id"])

    memory_id = anyio.run(scenario)
    with server.client() as api:
        assert api.get(f"/memories/{memory_id}").json()["memory"] == "I play the cello"


def test_mcp_needs_the_token(server: Running) -> None:
    async def scenario() -> None:
        # the SDK's client reports the 401 as an error response, inside its task groups
        with pytest.raises(BaseException, match="unhandled errors"):
            async with connect(server, token="w" * 43):
                pass

    anyio.run(scenario)
    request = httpx2.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert request.status_code == 401
