"""`format_memories`: results rendered for a prompt, each line with the day it was said and who
said it, as the README's tour, `offline-mem chat`, the MCP tools' text and the answer benchmark
use them."""

from __future__ import annotations

from writer_process import WordAnalyzer

from offline_mem import Memory, format_memories
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor


def test_a_turn_and_a_fact_from_a_search_carry_their_day_and_speaker(any_store: dict) -> None:
    extractor = FakeExtractor({"1": ["Melanie painted a lake sunrise last year"]})
    with Memory({**any_store, "job_worker": False}, embedder=FakeEmbedder(),
                extractor=extractor, entities=FakeEntities(),
                analyzer=WordAnalyzer()) as memory:  # fmt: skip
        said = [{"role": "user", "name": "Melanie",
                 "content": "Yeah, I painted that\nlake sunrise last year!"}]  # fmt: skip
        memory.add(said, user_id="mel", timestamp="2023-05-08T13:56:00")
        found = memory.search("lake sunrise", filters={"user_id": "mel"})
    lines = format_memories(found).splitlines()
    assert len(lines) == len(found["results"]) == 2
    assert "[8 May 2023 (Monday)] Melanie: Yeah, I painted that lake sunrise last year!" in lines
    facts = [line for line in lines if "Melanie painted" in line]
    assert facts and facts[0].startswith("[8 May 2023 (Monday)] Melanie painted a lake sunrise")
    assert format_memories(found["results"]) == "\n".join(lines)  # the list alone, the same


def test_numbered_undated_superseded_stored_only_and_empty() -> None:
    items = [
        {"kind": "fact", "memory": "Lives in Oslo", "state": "superseded",
         "created_at": "2024-02-29T23:59:59+00:00"},
        {"kind": "message", "role": "assistant", "content": "Noted.",
         "memory": "assistant: Noted."},
        {"kind": "fact", "memory": "Likes tea", "observed_at": "not a date"},
    ]  # fmt: skip
    assert format_memories(items, numbered=True).splitlines() == [
        "1. [29 February 2024 (Thursday)] Lives in Oslo (no longer current)",
        "2. [unknown date] assistant: Noted.",
        "3. [unknown date] Likes tea",
    ]
    assert format_memories(items, dates=False).splitlines()[1] == "assistant: Noted."
    assert format_memories({"results": []}) == "" == format_memories([])
