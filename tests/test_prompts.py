"""Prompt building is pure; the static part comes first so llama.cpp can reuse its KV cache."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from offline_mem.extraction.procedural import PROCEDURAL_SCHEMA
from offline_mem.extraction.prompts import (
    FACTS_INSTRUCTIONS,
    MAX_RECENT,
    PROMPT_VERSION,
    RECENT_MIN,
    RECENT_STEP,
    PromptMessage,
    build_facts_prompt,
    fact_subject,
    facts_schema,
    first_new_number,
    recent_window_start,
)
from offline_mem.pinned.extractor import schema_to_gbnf

NOW = datetime(2025, 3, 14, 9, 30, tzinfo=timezone.utc)


def build(**kw):
    args = {"new_messages": [PromptMessage("user", "I moved to Porto.")], "recent": [],
            "now": NOW}  # fmt: skip
    args.update(kw)
    return build_facts_prompt(**args)


def test_layout_static_first_then_variable_parts_in_order():
    prompt = build(
        recent=[PromptMessage("user", "hi"), PromptMessage("assistant", "x" * 500)],
        new_messages=[PromptMessage("user", "I moved to Porto.", name="ana"),
                      PromptMessage("assistant", "Nice!")],
    )  # fmt: skip
    system, user = prompt.messages
    assert system == {"role": "system", "content": FACTS_INSTRUCTIONS}
    text = user["content"]
    assert text.startswith("Conversation:\n1. user: hi\n2. assistant: xxx")
    assert "2025-03-14" not in text.split("New mes")[0]  # messages without a date: none shown
    assert text.index("Conversation") < text.index("New mes")
    assert "\n3. user (ana): I moved to Porto.\n4. assistant: Nice!\n\nNew messages" in text
    assert "memor" not in text  # stored memories are not shown (prompts.py says why)
    assert "New messages: 3 and 4 (2025-03-14 (Friday)).\nWrite only facts stated in mes" in text
    assert "x" * 299 + "…" in text and "x" * 300 not in text  # earlier messages cut to 300
    assert prompt.kind == "facts" and prompt.schema == facts_schema(2, ["ana", None], first=3)
    assert list(prompt.schema["properties"]) == ["3", "4"] and first_new_number(prompt) == 3
    assert 'start it with their name: message 3 with "ana".\nAnswer:' in text
    assert PROMPT_VERSION


def test_facts_of_a_named_speaker_must_start_with_the_name():
    """The grammar, not the model, decides whose fact it is: a named speaker's message gets a
    pattern that opens with the name; a message without a (plain) name keeps free text."""
    messages = [PromptMessage("user", "I play the cello.", name="Priya"),
                PromptMessage("assistant", "Me too!", name="Tomasz"),
                PromptMessage("user", "Hello", name="user_42"),
                PromptMessage("assistant", "Hi")]  # fmt: skip
    assert [fact_subject(m) for m in messages] == ["Priya", "Tomasz", None, None]
    schema = build(new_messages=messages).schema
    items = {key: value["items"] for key, value in schema["properties"].items()}
    assert items["1"]["pattern"].startswith("^Priya") and items["2"]["pattern"].startswith(
        "^Tomasz"
    )
    assert "pattern" not in items["3"] and "pattern" not in items["4"]
    assert re.fullmatch(items["1"]["pattern"], "Priya plays the cello.")
    assert not re.fullmatch(items["1"]["pattern"], "Tomasz plays the cello.")
    assert not re.fullmatch(items["1"]["pattern"], 'Priya says "hi".')  # no escapes to go wrong
    assert re.fullmatch(items["1"]["pattern"], "Priya's cello is from 1920.")  # her cello
    assert not re.fullmatch(items["1"]["pattern"], "Priya: I play the cello.")  # the turn itself
    assert not re.fullmatch(items["1"]["pattern"], "Priyanka plays the cello.")
    assert schema_to_gbnf(schema)  # compiles
    unnamed = build().schema
    assert unnamed == facts_schema(1) and "start it with" not in build().messages[1]["content"]


def test_same_static_prefix_whatever_the_inputs():
    a = build(new_messages=[PromptMessage("user", "one")])
    b = build(new_messages=[PromptMessage("user", "two")], recent=[PromptMessage("user", "x")])
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
    stamped = "1. [2023-01-02 (Monday)] user: a\n2. [2023-01-05 (Thursday)] user: b"
    assert stamped in text and "\nNew messages: 1 and 2.\n" in text  # two days: in the lines
    assert "2025-03-14" not in text  # the clock is shown only for messages with no timestamp
    one_day = build(new_messages=[PromptMessage("user", "a", observed_at="2023-01-02T10:00:00")])
    one_text = one_day.messages[1]["content"]
    assert "1. [2023-01-02 (Monday)] user: a" in one_text
    assert "New message: 1 (2023-01-02 (Monday))." in one_text


def test_recent_messages_are_stamped_when_the_day_changes():
    recent = [PromptMessage("user", "a", observed_at="2023-01-02T10:00:00"),
              PromptMessage("assistant", "b", observed_at="2023-01-02T10:01:00"),
              PromptMessage("user", "c", observed_at="2023-01-04T09:00:00")]  # fmt: skip
    text = build(recent=recent).messages[1]["content"]
    expected = (
        "1. [2023-01-02 (Monday)] user: a\n2. assistant: b\n3. [2023-01-04 (Wednesday)] user: c"
    )
    assert expected in text


def test_recent_window_moves_in_steps_and_keeps_at_least_the_minimum():
    starts = [recent_window_start(n) for n in range(60)]
    assert starts[: RECENT_MIN + RECENT_STEP] == [0] * (RECENT_MIN + RECENT_STEP)
    for count, start in enumerate(starts):
        assert start % RECENT_STEP == 0
        assert min(count, RECENT_MIN) <= count - start <= MAX_RECENT
    assert len(set(starts)) > 5  # it moves


def test_consecutive_prompts_share_everything_up_to_the_end_of_the_new_messages():
    """The KV cache serves what two prompts share from the start: with the window fixed, the
    next add's prompt begins with the previous one's up to its last new message, so no
    message is evaluated twice."""
    history = [PromptMessage("user" if i % 2 == 0 else "assistant", f"message {i}",
                             observed_at="2023-01-02T10:00:00") for i in range(12)]  # fmt: skip

    def prompt_after(count: int) -> str:
        start = recent_window_start(count)
        built = build(recent=history[start:count], new_messages=history[count : count + 2])
        return built.messages[1]["content"]

    first, second = prompt_after(4), prompt_after(6)
    assert recent_window_start(4) == recent_window_start(6)
    shared = first[: first.index("\n\nNew messages")]
    assert second.startswith(shared) and shared.endswith("6. assistant: message 5")


def test_a_new_message_longer_than_an_earlier_one_is_shown_whole_and_cut_later():
    """A new message is shown up to NEW_MESSAGE_CHARS, an earlier one up to RECENT_CHARS: only
    then does the next prompt differ from that line on."""
    long = PromptMessage("user", "y" * 400)
    new = build(new_messages=[long]).messages[1]["content"]
    later = build(recent=[long], new_messages=[PromptMessage("user", "ok")]).messages[1]["content"]
    assert "1. user: " + "y" * 400 + "\n" in new
    assert "1. user: " + "y" * 299 + "…\n2. user: ok" in later


def test_without_context_the_conversation_is_the_new_message():
    text = build().messages[1]["content"]
    assert text.startswith("Conversation:\n1. user: I moved to Porto.\n\nNew message: 1 ")


def test_schemas_bound_every_array_and_string():
    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "array":
                assert "maxItems" in node, node
            if node.get("type") == "string":
                assert "maxLength" in node, node
            for value in node.values():
                walk(value)

    walk(facts_schema(3))
    walk(PROCEDURAL_SCHEMA)


def test_schemas_compile_to_grammars_without_indentation():
    for schema in (facts_schema(1), facts_schema(4), PROCEDURAL_SCHEMA):
        gbnf = schema_to_gbnf(schema)
        assert "root ::=" in gbnf
        assert 'space ::= " "?' in gbnf


def test_the_answer_is_keyed_by_new_message_and_may_be_empty():
    schema = facts_schema(2)
    assert list(schema["properties"]) == ["1", "2"] and "required" not in schema
    assert schema["additionalProperties"] is False
    assert build(new_messages=[PromptMessage("user", "a")] * 3).schema == facts_schema(3)
