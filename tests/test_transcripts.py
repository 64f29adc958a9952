"""Transcripts as agent frameworks write them (offline_mem/message_parts.py): content as a list
of parts, tool calls and tool results, and messages that cannot be used reported, not raised.
Fake models."""

from __future__ import annotations

import json

import pytest
from invariants import table_dump, violations

from offline_mem import Memory, ValidationError
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer
from offline_mem.transfer.export import export_lines
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export

PHOTO = "https://example.invalid/cat.jpg"
TRANSCRIPT = [
    {"role": "user", "content": [
        {"type": "text", "text": "This is my cat Miso."},
        {"type": "image_url", "image_url": {"url": PHOTO}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "text", "text": "She is three."},
    ]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "lookup_breed", "arguments": "{\"name\": \"Miso\"}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "breed: unknown"},
    {"role": "assistant", "content": "Miso is lovely!"},
]  # fmt: skip


def open_memory(path, *script) -> Memory:
    return Memory({"path": str(path)}, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(*script), entities=FakeEntities())  # fmt: skip


def stored_messages(memory: Memory) -> list[tuple]:
    return memory.store.db.query("SELECT role, content, metadata FROM messages ORDER BY seq")


def test_parts_tool_calls_and_tool_results_are_kept_but_only_text_is_extracted(tmp_path):
    m = open_memory(tmp_path / "m.db", answer("User has a three-year-old cat called Miso."))
    result = m.add(TRANSCRIPT, user_id="u1")
    facts = [r["memory"] for r in result["results"]]
    assert facts == ["User has a three-year-old cat called Miso."]
    assert "skipped" not in result
    (prompt,) = m.extractor.calls
    shown = prompt.messages[-1]["content"]
    assert "This is my cat Miso. She is three." in shown and "Miso is lovely!" in shown
    assert "breed: unknown" not in shown and "lookup_breed" not in shown  # tools: not extracted
    assert PHOTO not in shown
    rows = stored_messages(m)
    assert [(role, content) for role, content, _ in rows] == [
        ("user", "This is my cat Miso.\nShe is three."), ("assistant", ""),
        ("tool", "breed: unknown"), ("assistant", "Miso is lovely!"),
    ]  # fmt: skip
    found = m.search_messages("cat Miso", filters={"user_id": "u1"}, top_k=1)["results"][0]
    assert found["metadata"]["images"] == [PHOTO, "data:image/png (34 characters inline, not kept)"]
    assert m.get(found["id"])["metadata"] == found["metadata"]
    assert '"tool_calls"' in rows[1][2] and '"tool_call_id": "call_1"' in rows[2][2]
    assert violations(m.store.db) == []


def test_an_unusable_message_is_reported_and_the_rest_is_kept(tmp_path):
    m = open_memory(tmp_path / "m.db")
    result = m.add(
        [{"role": "user", "content": "I keep bees"}, {"role": "robot", "content": "beep"},
         {"role": "user", "content": 42}, "not a dict"],
        user_id="u1", infer=False,
    )  # fmt: skip
    assert [r["memory"] for r in result["results"]] == ["I keep bees"]
    assert [s["index"] for s in result["skipped"]] == [1, 2, 3]
    assert "role" in result["skipped"][0]["reason"] and "int" in result["skipped"][1]["reason"]
    before = table_dump(m.store.db)
    with pytest.raises(ValidationError, match="no usable message"):
        m.add([{"role": "robot", "content": "beep"}, {"role": "user"}], user_id="u1")
    assert table_dump(m.store.db) == before


def test_mem0_spellings(tmp_path):
    m = open_memory(tmp_path / "m.db")
    (item,) = m.add("I live in Lisbon", user_id="u1", infer=False)["results"]
    assert m.update(item["id"], data="I live in Porto")["memory"] == "I live in Porto"
    with pytest.raises(ValidationError, match="not both"):
        m.update(item["id"], "a", data="b")
    with pytest.raises(ValidationError, match=r"rerank=.*threshold"):
        m.search("where", filters={"user_id": "u1"}, rerank=True)
    # Mem0's reference_date= is as_of=: what was known and true on that date
    before = m.search("Porto", filters={"user_id": "u1"}, reference_date="2024-01-01")
    assert before["results"] == []
    assert m.search("Porto", filters={"user_id": "u1"}, reference_date="2999-01-01")["results"]
    with pytest.raises(ValidationError, match="not both"):
        m.search("where", filters={"user_id": "u1"}, as_of="2024-01-01", reference_date="2024")


def test_message_metadata_survives_export_and_import_and_old_files_still_import(tmp_path):
    m = open_memory(tmp_path / "a.db", answer("User has a cat called Miso."))
    m.add(TRANSCRIPT, user_id="u1")
    lines = list(export_lines(m.store.db))
    target = open_memory(tmp_path / "b.db")
    import_data(target, read_export(lines))
    assert list(export_lines(target.store.db)) == lines
    assert stored_messages(target) == stored_messages(m)
    # a file written before messages had metadata: the key is absent
    old = [json.dumps({k: v for k, v in row.items() if k != "metadata"})
           if (row := json.loads(line)).get("type") == "message" else line
           for line in lines]  # fmt: skip
    data = read_export(old)  # accepted
    assert all(row["metadata"] is None for row in data.rows["message"])
