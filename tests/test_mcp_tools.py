"""The MCP tools' logic in-process, without the SDK: default scope, filters, the history rule and
the text renderings (tests/test_mcp_server.py drives the same tools through a real client)."""

from __future__ import annotations

import pytest

from offline_mem import Memory, MemoryNotFoundError, ValidationError
from offline_mem.mcp.tools import DefaultScope, MemoryTools


@pytest.fixture
def tools(memory: Memory) -> MemoryTools:
    return MemoryTools(memory, DefaultScope(user_id="ana", agent_id="helper"))


def test_a_default_fills_each_scope_key_a_call_leaves_out(tools: MemoryTools) -> None:
    assert tools._filters(None, None, None, None) == {"user_id": "ana", "agent_id": "helper"}
    assert tools._filters({"topic": "x"}, "bob", None, "r1") == {
        "topic": "x", "user_id": "bob", "agent_id": "helper", "run_id": "r1"
    }  # fmt: skip
    # a filter naming a scope key replaces its default; naming it twice alike is fine
    assert tools._filters({"user_id": "eve"}, None, None, None)["user_id"] == "eve"
    assert tools._filters({"user_id": "eve"}, "eve", None, None)["user_id"] == "eve"
    with pytest.raises(ValidationError, match="give one"):
        tools._filters({"user_id": "eve"}, "bob", None, None)
    with pytest.raises(ValidationError, match="filters must be an object"):
        tools._filters(["user_id"], None, None, None)  # type: ignore[arg-type]


def test_add_takes_text_or_messages(tools: MemoryTools) -> None:
    for text, messages in [(None, None), ("a", [{"role": "user", "content": "b"}])]:
        with pytest.raises(ValidationError, match="either text or messages"):
            tools.add_memory(text, messages, infer=False)
    out = tools.add_memory(None, [{"role": "user", "content": "Owns a red kayak"}], infer=False)
    (row,) = out.data["results"]
    assert out.text == f"ADD {row['id']}  Owns a red kayak"
    stored = tools.memory.get(row["id"])
    assert stored is not None
    assert (stored["user_id"], stored["agent_id"]) == ("ana", "helper")


def test_history_is_scoped_like_get(tools: MemoryTools) -> None:
    other = tools.add_memory("Bob owns a canoe", infer=False, user_id="bob").data["results"][0]
    with pytest.raises(MemoryNotFoundError, match="in the scope named"):
        tools.memory_history(other["id"])
    assert tools.memory_history(other["id"], user_id="bob").data["results"][0]["event"] == "ADD"
    tools.delete_memory(other["id"], user_id="bob")
    # a deleted memory's scope is gone from the file: a scoped server shows its history to no one
    for user in (None, "bob"):
        with pytest.raises(MemoryNotFoundError, match="no history"):
            tools.memory_history(other["id"], user_id=user)
    events = [row["event"] for row in tools.memory.history(other["id"])]  # unscoped library call
    assert events == ["ADD", "DELETE"]
    with pytest.raises(MemoryNotFoundError, match="no history"):
        tools.memory_history("never-was")


def test_the_texts_carry_ids_scores_and_dates(tools: MemoryTools) -> None:
    tools.add_memory(None, [{"role": "user", "content": "Swims every Tuesday",
                             "timestamp": "2026-03-04T10:00:00Z"}], infer=False)  # fmt: skip
    found = tools.search_memory("swims tuesday")
    top = found.data["results"][0]
    lines = found.text.splitlines()
    said = "[4 March 2026 (Wednesday)] Swims every Tuesday"
    assert lines[0] == "1 result (score, kind, id, [date] text):"
    assert lines[1] == f"{top['score']:.3f} fact {top['id']}  {said}"
    listed = tools.list_memories()
    assert listed.text.splitlines()[1] == f"{top['id']}  {said}"
    got = tools.get_memory(top["id"]).text.splitlines()
    assert got[0] == "Swims every Tuesday" and f"id: {top['id']}" in got
    tools.update_memory(top["id"], "Swims every Thursday")
    history = tools.memory_history(top["id"]).text.splitlines()
    assert history[1].endswith("UPDATE Swims every Tuesday -> Swims every Thursday")
    assert tools.search_memory("kayak", filters={"user_id": "nobody"}).text == "no memories found"
    assert tools.list_memories(user_id="nobody").text == "no memories"


def test_search_and_list_take_as_of(tools: MemoryTools) -> None:
    said = [{"role": "user", "content": "Owns a red kayak", "timestamp": "2023-05-08T10:00:00Z"}]
    tools.add_memory(None, said, infer=False)
    assert tools.list_memories(as_of="2023-05-07").data["results"] == []
    listed = tools.list_memories(as_of="2023-05-08").data["results"]
    assert [item["memory"] for item in listed] == ["Owns a red kayak"]
    assert tools.search_memory("kayak", as_of="2023-05-07").data["results"] == []
    assert tools.search_memory("kayak", as_of="2023-05-08").data["results"]
