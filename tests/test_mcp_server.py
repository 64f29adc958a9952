"""`offline-mem mcp` through the MCP SDK's real stdio client: the server runs as a subprocess (fake
models, so it is up in about a second), is initialised, lists its tools and serves every tool,
bad calls included, to one client and to two clients on the same store (a memory file, and a
PostgreSQL database). The real models serve a session in tests/test_no_network.py."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp_helpers import call, error, serve
from postgres_fixtures import store_location

from offline_mem.cli import main

TOOLS = {
    "add_memory", "search_memory", "list_memories", "get_memory", "update_memory",
    "delete_memory", "memory_history",
}  # fmt: skip


def run(
    db: Path | str,
    scenario: Callable[[ClientSession], Awaitable[None]],
    *args: str,
    workdir: Path | None = None,
) -> None:
    async def session() -> None:
        async with serve(db, *args, workdir=workdir) as client:
            await scenario(client)

    anyio.run(session)


def test_the_tools_are_listed_with_schemas_and_one_line_descriptions(tmp_path: Path) -> None:
    async def scenario(client: ClientSession) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.description and "\n" not in tool.description, tool.name
            assert tool.input_schema["type"] == "object"
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        add = listed["add_memory"].input_schema
        assert set(add["properties"]) == {
            "text", "messages", "infer", "metadata", "user_id", "agent_id", "run_id", "async_mode"
        }  # fmt: skip
        assert add["properties"]["infer"]["default"] is True
        assert "seconds" in listed["add_memory"].description
        search = listed["search_memory"].input_schema
        assert search["required"] == ["query"]
        assert search["properties"]["top_k"]["default"] == 10
        assert listed["search_memory"].annotations.read_only_hint is True
        assert listed["delete_memory"].annotations.destructive_hint is True
        for name in ("get_memory", "update_memory", "delete_memory", "memory_history"):
            assert "memory_id" in listed[name].input_schema["required"]

    run(tmp_path / "m.db", scenario)


def test_a_session_uses_every_tool(tmp_path: Path, store_config: dict[str, Any]) -> None:
    async def scenario(client: ClientSession) -> None:
        added = await call(client, "add_memory", text="I am allergic to peanuts", infer=False,
                           metadata={"topic": "health"})  # fmt: skip
        (fact,) = added["results"]
        assert fact["event"] == "ADD" and fact["memory"] == "I am allergic to peanuts"
        await call(client, "add_memory", infer=False, messages=[
            {"role": "user", "content": "My locker number is 4417", "timestamp": "2026-05-01"},
        ])  # fmt: skip

        found = await call(client, "search_memory", query="peanuts allergy", top_k=5)
        top = found["results"][0]
        assert top["id"] == fact["id"] and top["kind"] == "fact"
        assert 0 < top["score"] <= 1 and top["created_at"] and top["user_id"] == "ana"
        result = await client.call_tool("search_memory", {"query": "peanuts allergy"})
        text = result.content[0].text
        assert fact["id"] in text and f"{top['score']:.3f} fact" in text

        listed = await call(client, "list_memories")
        assert {m["memory"] for m in listed["results"]} == {
            "I am allergic to peanuts", "My locker number is 4417"
        }  # fmt: skip
        health = await call(client, "list_memories", filters={"topic": "health"}, top_k=5)
        assert [m["id"] for m in health["results"]] == [fact["id"]]

        got = await call(client, "get_memory", memory_id=fact["id"])
        assert got["memory"] == "I am allergic to peanuts"
        assert got["metadata"] == {"topic": "health"}
        updated = await call(client, "update_memory", memory_id=fact["id"],
                             text="I am allergic to peanuts and cashews")  # fmt: skip
        assert updated["event"] == "UPDATE"
        assert updated["memory"] == "I am allergic to peanuts and cashews"
        history = await call(client, "memory_history", memory_id=fact["id"])
        assert [row["event"] for row in history["results"]] == ["ADD", "UPDATE"]
        deleted = await call(client, "delete_memory", memory_id=fact["id"])
        assert deleted == {"id": fact["id"], "memory": updated["memory"], "event": "DELETE"}
        # its scope went with its row: a scoped server shows the history to no one now
        assert "no history" in await error(client, "memory_history", memory_id=fact["id"])
        assert "no memory with id" in await error(client, "get_memory", memory_id=fact["id"])

    run(store_location(store_config), scenario, "--user", "ana", workdir=tmp_path)
    assert "offline-mem mcp: serving" in (tmp_path / "server-stderr.log").read_text()


def test_bad_calls_are_tool_errors_with_the_library_message(tmp_path: Path) -> None:
    async def scenario(client: ClientSession) -> None:
        assert "ValidationError: query must not be empty" in await error(
            client, "search_memory", query="  "
        )
        message = await error(client, "get_memory", memory_id="no-such-id")
        assert "MemoryNotFoundError: no memory with id 'no-such-id'" in message
        assert "either text or messages" in await error(
            client, "add_memory", text="a", messages=[{"role": "user", "content": "b"}]
        )
        assert "top_k must be an integer from 1 to 10000" in await error(
            client, "search_memory", query="peanuts", top_k=0
        )
        assert "top_k" in await error(client, "search_memory", query="x", top_k="many")
        assert "extra" in await error(
            client, "add_memory", messages=[{"role": "user", "content": "b", "colour": "red"}]
        )
        # another scope's memory is not found from this one, whatever the call names
        bob = (await call(client, "add_memory", text="Bob's locker is 12", infer=False,
                          user_id="bob"))["results"][0]["id"]  # fmt: skip
        for tool in ("get_memory", "delete_memory"):
            assert "no memory with id" in await error(client, tool, memory_id=bob)
        assert "no history for memory id" in await error(client, "memory_history", memory_id=bob)
        assert "infer" in await error(client, "add_memory", text="x", infer="false")
        assert "top_k" in await error(client, "search_memory", query="x", top_k="5")
        assert "extra" in await error(client, "add_memory", text="x", colour="red")
        assert "no memory with id" in await error(
            client, "update_memory", memory_id=bob, text="Bob's locker is 13"
        )
        assert "give one" in await error(
            client, "search_memory", query="locker", user_id="bob", filters={"user_id": "eve"}
        )
        # the server is still up, and nothing above changed Bob's memory
        got = await call(client, "get_memory", memory_id=bob, user_id="bob")
        assert got["memory"] == "Bob's locker is 12"
        assert await call(client, "search_memory", query="locker") == {"results": []}

    run(tmp_path / "m.db", scenario, "--user", "ana")


def test_a_call_names_its_own_scope_over_the_defaults(tmp_path: Path) -> None:
    async def scenario(client: ClientSession) -> None:
        mine = (await call(client, "add_memory", text="Prefers tea", infer=False))["results"]
        other = await call(client, "add_memory", text="Prefers coffee", infer=False,
                           user_id="bob", run_id="r1")  # fmt: skip
        got = await call(client, "get_memory", memory_id=mine[0]["id"])
        assert (got["user_id"], got["agent_id"]) == ("ana", "helper")
        bob = await call(client, "get_memory", memory_id=other["results"][0]["id"],
                         user_id="bob")  # fmt: skip
        assert (bob["user_id"], bob["agent_id"], bob["run_id"]) == ("bob", "helper", "r1")
        ana = await call(client, "search_memory", query="prefers")
        assert [m["memory"] for m in ana["results"]] == ["Prefers tea"]
        run_r1 = await call(client, "list_memories", filters={"run_id": "r1", "user_id": "bob"})
        assert [m["memory"] for m in run_r1["results"]] == ["Prefers coffee"]

    run(tmp_path / "m.db", scenario, "--user", "ana", "--agent", "helper")


def test_an_inferred_add_goes_through_the_extractor(
    tmp_path: Path, store_config: dict[str, Any]
) -> None:
    async def session() -> None:
        async with serve(store_location(store_config), "--user", "ana", workdir=tmp_path,
                         facts=["User is allergic to peanuts"]) as client:  # fmt: skip
            added = await call(client, "add_memory", text="Peanuts make me ill, I'm allergic")
            assert [(r["event"], r["memory"]) for r in added["results"]] == [
                ("ADD", "User is allergic to peanuts")
            ]
            found = await call(client, "search_memory", query="allergic to peanuts")
            kinds = {(item["kind"], item["memory"]) for item in found["results"]}
            # the fact, and the turn it came from
            assert ("fact", "User is allergic to peanuts") in kinds
            assert ("message", "Peanuts make me ill, I'm allergic") in kinds

    anyio.run(session)


def test_two_clients_share_one_store(tmp_path: Path, store_config: dict[str, Any]) -> None:
    db = store_location(store_config)

    async def both() -> None:
        async with (
            serve(db, "--user", "ana", workdir=tmp_path) as first,
            serve(db, "--user", "ana", workdir=tmp_path) as second,
        ):
            added = await call(first, "add_memory", text="The spare key is under the mat",
                               infer=False)  # fmt: skip
            key = added["results"][0]["id"]
            found = await call(second, "search_memory", query="spare key")
            assert [item["id"] for item in found["results"]] == [key]
            await call(second, "update_memory", memory_id=key, text="The spare key is with Rui")
            got = await call(first, "get_memory", memory_id=key)
            assert got["memory"] == "The spare key is with Rui"
            await call(first, "delete_memory", memory_id=key)
            assert "no memory with id" in await error(second, "get_memory", memory_id=key)
            assert await call(second, "list_memories") == {"results": []}

    anyio.run(both)


def test_without_the_sdk_the_command_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "offline_mem.mcp.server", raising=False)
    result = CliRunner().invoke(main, ["--db", str(tmp_path / "m.db"), "mcp"])
    assert result.exit_code == 1
    assert "pip install 'offline_mem[mcp]'" in result.stderr
    assert not (tmp_path / "m.db").exists()
