"""add(infer=True) through the public API, with fake models: results, supersession, failures.
Every test runs on a SQLite file and on a PostgreSQL database (the `open_memory` fixture opens
its memories on `store_config`)."""

from __future__ import annotations

import pytest

from offline_mem.errors import ExtractionError
from offline_mem.extraction.prompts import PROMPT_VERSION
from offline_mem.testing import FakeEntities, answer, changes


def test_add_infers_facts_with_provenance_and_entities(open_memory):
    m = open_memory(answer("User lives in Lisbon.", "User likes Tea."))
    out = m.add([{"role": "user", "content": "I live in Lisbon and like tea."},
                 {"role": "assistant", "content": "Noted!"}], user_id="u")  # fmt: skip
    assert [(r["memory"], r["event"]) for r in out["results"]] == [
        ("User lives in Lisbon.", "ADD"), ("User likes Tea.", "ADD")]  # fmt: skip
    item = m.get(out["results"][0]["id"])
    assert item["attributed_to"] == "user" and item["user_id"] == "u"
    counts = m.store.counts()
    assert counts["messages"] == 2 and counts["provenance"] == 2
    assert counts["entities"] == 2  # "Lisbon", "Tea"; "User" is never an entity
    sources = m.search("Lisbon", filters={"user_id": "u"}, include_sources=True)["results"]
    assert sources[0]["sources"][0]["content"] == "I live in Lisbon and like tea."
    row = m.store.db.query_one("SELECT extractor_sha256, prompt_version FROM memories LIMIT 1")
    assert row == (m.extractor.identity.sha256, PROMPT_VERSION)


MOVED = "User lives in Porto now, not in Lisbon."


def test_supersession_through_the_api(open_memory):
    m = open_memory(answer("User lives in Lisbon."), answer(MOVED),
                    still_true=changes(("User lives in Lisbon.", MOVED)))  # fmt: skip
    old = m.add("I live in Lisbon.", user_id="u")["results"][0]["id"]
    out = m.add("I live in Porto now, not in Lisbon.", user_id="u")["results"]
    new = out[0]["id"]
    assert out == [
        {"id": new, "memory": MOVED, "event": "ADD", "supersedes": [old]},
        {"id": old, "memory": "User lives in Lisbon.", "event": "SUPERSEDE", "superseded_by": new},
    ]  # fmt: skip
    # the facts call saw the scope's recent messages, not the memory; the check saw the memory,
    # never its id
    prompt = m.extractor.calls[1].messages[1]["content"]
    assert "User lives in Lisbon." not in prompt and old not in prompt
    assert "1. user: I live in Lisbon.\n2. user: I live in Porto now" in prompt
    (check,) = m.extractor.check_calls
    assert "User lives in Lisbon." in check.messages[1]["content"] and old not in str(check)
    assert m.get(old)["state"] == "superseded" and m.get(old)["superseded_by"] == new
    assert [r["id"] for r in m.get_all(filters={"user_id": "u"})["results"]] == [new]
    events = [(h["event"], h.get("related_memory_id")) for h in m.history(old)]
    assert events == [("ADD", None), ("SUPERSEDE", new)]


def test_a_check_that_says_still_true_supersedes_nothing(open_memory):
    m = open_memory(answer("User lives in Lisbon."), answer(MOVED))
    m.add("I live in Lisbon.", user_id="u")
    out = m.add("I live in Porto now, not in Lisbon.", user_id="u")["results"]
    assert [r["event"] for r in out] == ["ADD"] and len(m.extractor.check_calls) == 1
    assert len(m.get_all(filters={"user_id": "u"})["results"]) == 2


def test_stored_memories_are_not_shown_to_the_model(open_memory):
    """The prompt shows the conversation only (prompts.py says why); a fact said again is still
    merged into the memory it repeats, found after the call."""
    m = open_memory(answer("User lives in Lisbon."), answer("User lives in Lisbon."))
    first = m.add("I live in Lisbon.", user_id="u")["results"]
    again = m.add("Lisbon is where I live.", user_id="u")["results"]
    prompt = m.extractor.calls[1].messages[1]["content"]
    assert "User lives in Lisbon" not in prompt and "memor" not in prompt
    assert "I live in Lisbon." in prompt  # the earlier message, as context
    assert [r["event"] for r in first] == ["ADD"] and [r["event"] for r in again] == ["MERGE"]
    assert len(m.get_all(filters={"user_id": "u"})["results"]) == 1


def test_model_error_leaves_the_file_unchanged(open_memory):
    m = open_memory(answer("User likes tea."), ExtractionError("boom"))
    m.add("I like tea", user_id="u")
    before = m.store.counts()
    with pytest.raises(ExtractionError, match="boom"):
        m.add("I like coffee", user_id="u")
    assert m.store.counts() == before


def test_empty_extraction_still_records_the_messages(open_memory):
    m = open_memory({})
    assert m.add("Hello!", user_id="u") == {"results": []}
    assert m.store.counts()["messages"] == 1 and m.store.counts()["memories"] == 0


def test_exact_duplicates_of_the_scope_are_not_added_again(open_memory):
    m = open_memory(answer("User likes tea."), answer("User likes tea."))
    m.add("tea", user_id="u")
    assert m.add("tea again", user_id="u") == {"results": []}


def test_timestamps_are_the_observation_date(open_memory):
    m = open_memory(answer("User went to Rome on 2023-04-01."))
    out = m.add([{"role": "user", "content": "Yesterday I went to Rome",
                  "timestamp": "2023-04-02T12:00:00Z"}], user_id="u")  # fmt: skip
    prompt = m.extractor.calls[0].messages[1]["content"]
    assert "1. [2023-04-02 (Sunday)] user: Yesterday I went to Rome" in prompt
    assert "New message: 1 (2023-04-02 (Sunday))." in prompt
    assert m.get(out["results"][0]["id"])["observed_at"].startswith("2023-04-02T12:00:00")


def test_prompt_and_custom_instructions(open_memory):
    m = open_memory(custom_instructions="Only food.")
    m.add("x", user_id="u")
    m.add("y", user_id="u", prompt="Only travel.")
    assert m.extractor.calls[0].messages[0]["content"].endswith("Only food.")
    assert m.extractor.calls[1].messages[0]["content"].endswith("Only travel.")


def test_system_only_messages_skip_the_model(open_memory):
    m = open_memory()
    assert m.add({"role": "system", "content": "be nice"}, user_id="u") == {"results": []}
    assert m.extractor.calls == [] and m.store.counts()["messages"] == 1


def test_raw_adds_get_entity_links(open_memory):
    m = open_memory()
    m.add("I met Ana in Porto", user_id="u", infer=False)
    names = {row[0] for row in m.store.db.query("SELECT norm FROM entities")}
    assert names == {"ana", "porto"}
    assert m.store.counts()["entity_links"] == 2


def test_close_releases_the_extractor(open_memory):
    m = open_memory()
    m.close()
    assert m.extractor.closed


def test_recent_messages_shown_are_the_scope_messages_since_the_window_start(open_memory):
    """Each add shows the scope's messages since `recent_window_start`, oldest first, so that
    consecutive prompts share the recent block (and llama.cpp's KV cache serves it)."""
    from offline_mem.extraction.prompts import recent_window_start

    m = open_memory(*[{}] * 14)
    for i in range(14):
        m.add(f"message {i}", user_id="u")
        m.add(f"other scope {i}", user_id="v")
    for i, call in enumerate(m.extractor.calls[::2]):  # user u's calls
        text = call.messages[1]["content"]
        recent = text[text.index("Conversation:") : text.index("\n\nNew message")]
        expected = [f"message {j}" for j in range(recent_window_start(i), i)]
        lines = recent.strip().splitlines()[1:]  # after "Conversation:"
        shown = [line.split(": ", 1)[1] for line in lines]
        assert shown == [*expected, f"message {i}"]  # the new message last
        assert lines[0].startswith("1. ")
        assert "other scope" not in recent


def test_each_memory_is_read_for_entities_once(open_memory):
    """A raw add and an inferred add read each new memory's text for entities once, in one
    batch, a memory that names nobody included (it used to be read a second time)."""
    m = open_memory(answer("User lives in Lisbon.", "User likes tea."))
    entities = m.entities
    assert isinstance(entities, FakeEntities)
    m.add("my cat sleeps a lot", user_id="u", infer=False)
    assert entities.calls == [["my cat sleeps a lot"]]
    m.add([{"role": "user", "content": "I live in Lisbon and like tea."}], user_id="u")
    # (the fact checks read the message's sentence for names: not a memory's text)
    assert entities.calls[-1] == ["User lives in Lisbon.", "User likes tea."]
    read = [text for batch in entities.calls for text in batch]
    assert read.count("User lives in Lisbon.") == read.count("User likes tea.") == 1
