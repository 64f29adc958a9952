"""Prompt building is pure; the static part comes first so llama.cpp can reuse its KV cache."""

from __future__ import annotations

from datetime import datetime, timezone

from offline_mem.extractor import schema_to_gbnf
from offline_mem.procedural import PROCEDURAL_SCHEMA
from offline_mem.prompts import (
    FACTS_INSTRUCTIONS,
    FACTS_SCHEMA,
    PROMPT_VERSION,
    ExistingMemory,
    PromptMessage,
    build_facts_prompt,
)

NOW = datetime(2025, 3, 14, 9, 30, tzinfo=timezone.utc)


def build(**kw):
    args = {"new_messages": [PromptMessage("user", "I moved to Porto.")], "recent": [],
            "existing": [], "now": NOW}  # fmt: skip
    args.update(kw)
    return build_facts_prompt(**args)


def test_layout_static_first_then_variable_parts_in_order():
    prompt = build(
        recent=[PromptMessage("user", "hi"), PromptMessage("assistant", "x" * 500)],
        existing=[ExistingMemory("User lives in Lisbon."), ExistingMemory("User likes tea.")],
        new_messages=[PromptMessage("user", "I moved to Porto.", name="ana"),
                      PromptMessage("assistant", "Nice!")],
    )  # fmt: skip
    system, user = prompt.messages
    assert system == {"role": "system", "content": FACTS_INSTRUCTIONS}
    text = user["content"]
    assert text.index("Current date: 2025-03-14 (Friday)") < text.index("Recent messages")
    assert text.index("Recent messages") < text.index("Existing memories") < text.index("New mes")
    assert "0. User lives in Lisbon.\n1. User likes tea." in text
    assert "1. user (ana): I moved to Porto.\n2. assistant: Nice!" in text
    assert "x" * 299 + "…" in text and "x" * 300 not in text  # recent messages cut to 300
    assert prompt.kind == "facts" and prompt.schema == FACTS_SCHEMA
    assert PROMPT_VERSION


def test_same_static_prefix_whatever_the_inputs():
    a = build(new_messages=[PromptMessage("user", "one")])
    b = build(new_messages=[PromptMessage("user", "two")], existing=[ExistingMemory("m")])
    assert a.messages[0] == b.messages[0]


def test_instructions_follow_the_fixed_rules():
    system = build(instructions="Only record food preferences.").messages[0]["content"]
    assert system.startswith(FACTS_INSTRUCTIONS)
    assert system.endswith("Only record food preferences.")


def test_observation_date_from_message_timestamps():
    prompt = build(new_messages=[
        PromptMessage("user", "a", observed_at="2023-01-02T10:00:00+00:00"),
        PromptMessage("user", "b", observed_at="2023-01-05T10:00:00+00:00"),
    ])  # fmt: skip
    text = prompt.messages[1]["content"]
    assert "Observation date of the new messages: 2023-01-05 (Thursday)" in text
    assert "1. [2023-01-02 (Monday)] user: a" in text
    assert "Current date: 2025-03-14" in text


def test_empty_context_is_marked():
    text = build().messages[1]["content"]
    assert "Recent messages (context only):\n(none)" in text
    assert "Existing memories:\n(none)" in text


def test_schemas_bound_every_array_and_string():
    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "array":
                assert "maxItems" in node, node
            if node.get("type") == "string":
                assert "maxLength" in node, node
            for value in node.values():
                walk(value)

    walk(FACTS_SCHEMA)
    walk(PROCEDURAL_SCHEMA)


def test_schemas_compile_to_grammars_without_indentation():
    for schema in (FACTS_SCHEMA, PROCEDURAL_SCHEMA):
        gbnf = schema_to_gbnf(schema)
        assert "root ::=" in gbnf
        assert 'space ::= " "?' in gbnf
