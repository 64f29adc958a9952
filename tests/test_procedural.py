"""Procedural memory: prompt, rendering, and the API path with a fake extractor."""

from __future__ import annotations

import pytest

from offline_mem.errors import ValidationError
from offline_mem.extraction.procedural import (
    PROCEDURAL_INSTRUCTIONS,
    build_procedural_prompt,
    render_summary,
)
from offline_mem.extraction.prompts import PromptMessage
from offline_mem.memory import Memory
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor

ANSWER = {
    "task_objective": "Scrape product prices from shop.example",
    "progress_status": "1 of 2 pages done",
    "steps": [
        {"action": "Opened https://shop.example/p1", "result": "200 OK\n  price: 9.99",
         "key_findings": "Prices are in EUR", "errors": "", "current_context": "On page 1"},
    ],
}  # fmt: skip


def test_prompt_system_is_replaced_by_the_callers_prompt():
    msgs = [PromptMessage("user", "scrape it"), PromptMessage("assistant", "opened p1")]
    default = build_procedural_prompt(msgs)
    assert default.messages[0]["content"] == PROCEDURAL_INSTRUCTIONS
    assert "1. user: scrape it\n2. assistant: opened p1" in default.messages[1]["content"]
    custom = build_procedural_prompt(msgs, system_prompt="Summarise tersely.")
    assert custom.messages[0]["content"] == "Summarise tersely."
    assert custom.messages[1] == default.messages[1]


def test_render_keeps_mem0_structure_and_results_verbatim():
    text = render_summary(ANSWER)
    assert text.startswith("## Summary of the agent's execution history")
    assert "**Task Objective**: Scrape product prices from shop.example" in text
    assert "**Progress Status**: 1 of 2 pages done" in text
    assert "1. **Agent Action**: Opened https://shop.example/p1" in text
    assert "**Action Result**: 200 OK\n  price: 9.99" in text
    assert "**Errors and Challenges**: None" in text
    assert render_summary({"steps": []}) == ""


def test_add_procedural_writes_one_memory(any_store):
    extractor = FakeExtractor(ANSWER)
    m = Memory(any_store, embedder=FakeEmbedder(), extractor=extractor,
               entities=FakeEntities())  # fmt: skip
    out = m.add([{"role": "user", "content": "scrape it"},
                 {"role": "assistant", "content": "opened p1"}],
                agent_id="bot", memory_type="procedural_memory", prompt="Be brief.")  # fmt: skip
    (item,) = out["results"]
    assert item["event"] == "ADD" and item["memory"] == render_summary(ANSWER)
    assert extractor.calls[0].kind == "procedural"
    assert extractor.calls[0].messages[0]["content"] == "Be brief."
    stored = m.get(item["id"])
    assert stored["memory_type"] == "procedural_memory" and stored["agent_id"] == "bot"
    assert m.store.counts()["provenance"] == 2


def test_procedural_needs_an_agent_id(any_store):
    m = Memory(any_store, embedder=FakeEmbedder(),
               extractor=FakeExtractor(), entities=FakeEntities())  # fmt: skip
    with pytest.raises(ValidationError, match="agent_id"):
        m.add("x", user_id="u", memory_type="procedural_memory")
