"""Per-kind KV snapshots on the pinned 1.5B extractor (runs in CI, never skipped): a supersession
check between two facts prompts must change neither the second facts answer nor how much of it
the KV cache serves."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import pytest

from offline_mem.config import DEFAULT_EXTRACTOR, resolve_models_dir
from offline_mem.extraction.prompts import PromptMessage, build_facts_prompt
from offline_mem.extraction.supersession import build_check_prompt
from offline_mem.pinned.extractor import LlamaExtractor

pytestmark = pytest.mark.real_model

DAY = "2025-03-12T10:00:00+00:00"
TURNS = [
    "I live in Ghent with two roommates.", "Nice city!", "I work as a nurse.", "Tiring job.",
    "I adopted a cat called Pepper.", "Cute!", "My sister Ana visits on Sunday.", "Enjoy!",
]  # fmt: skip
HISTORY = [
    PromptMessage("user" if i % 2 == 0 else "assistant", text, observed_at=DAY)
    for i, text in enumerate(TURNS)
]


def facts_after(count: int):
    """The facts prompt of the add of messages count..count+1, as consecutive adds build it."""
    return build_facts_prompt(
        new_messages=HISTORY[count : count + 2], recent=HISTORY[:count],
        now=datetime.fromisoformat(DAY),
    )  # fmt: skip


def check(old: str, new: str):
    return build_check_prompt(
        SimpleNamespace(text=old, observed_at=DAY, created_at=None),  # type: ignore[arg-type]
        SimpleNamespace(text=new, observed_at=DAY),  # type: ignore[arg-type]
        now_day=None, instructions=None,
    )  # fmt: skip


def run(calls):
    extractor = LlamaExtractor(DEFAULT_EXTRACTOR, resolve_models_dir(), threads=2)
    try:
        outputs = [extractor.extract(prompt) for prompt in calls]
        return outputs, extractor._loaded.slots.restored  # type: ignore[union-attr]
    finally:
        extractor.close()


def test_a_check_between_two_adds_leaves_the_facts_cache_and_answer_as_they_were():
    first_check = check("User lives in Ghent.", "User moved to Aarhus.")
    second_check = check("User works as a nurse.", "User is a nurse at Ghent hospital.")
    plain, plain_restores = run([facts_after(4), facts_after(6)])
    mixed, restores = run([facts_after(4), first_check, facts_after(6), second_check])
    assert plain_restores == 0 and restores == 2  # facts restored once, the check once
    # the second add reads the same answer from the same cached prefix, check or no check
    assert mixed[2].text == plain[1].text
    assert mixed[2].cached_tokens == plain[1].cached_tokens
    # the second check finds the first check's fixed question in the cache: only the pair is new
    assert mixed[3].cached_tokens > mixed[1].cached_tokens
    assert mixed[3].prompt_tokens - mixed[3].cached_tokens < 80
