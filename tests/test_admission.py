"""Admission is pure: answers in, memories and results out."""

from __future__ import annotations

import hashlib

import numpy as np

from offline_mem.extraction.admission import (
    NEAR_DUPLICATE_THRESHOLD,
    AdmissionContext,
    admit,
    read_facts,
)
from offline_mem.extraction.checks.content_words import share_a_content_word
from offline_mem.store.records import MemoryRecord, NewMessage
from offline_mem.testing import FakeEmbedder, answer
from offline_mem.values import content_hash

EMBED = FakeEmbedder()


def record(i: int, text: str) -> MemoryRecord:
    return MemoryRecord(
        rowid=i + 1, id=f"mem-{i}", text=text, hash=content_hash(text), user_id="u", agent_id=None,
        run_id=None, metadata={}, role=None, actor_id=None, attributed_to="user",
        memory_type=None, state="active", superseded_by=None, created_at="2024-01-01T00:00:00",
        updated_at=None, observed_at=None, expiration_date=None,
    )  # fmt: skip


MESSAGES = [
    NewMessage("m0", "system", "be nice", None, None),
    NewMessage("m1", "user", "I moved to Porto", "ana", "2024-05-01T10:00:00+00:00"),
    NewMessage("m2", "assistant", "Nice!", None, "2024-05-01T10:01:00+00:00"),
]
SHOWN = [record(0, "User lives in Lisbon."), record(1, "User has a cat named Mia.")]


def run(reply: dict, *, existing_hashes: dict[str, str] | None = None, shown=SHOWN):
    roles = [m.role for m in MESSAGES]
    facts = read_facts(reply, shown_messages=[1, 2], roles=roles)
    ctx = AdmissionContext(
        messages=MESSAGES, existing_vectors=EMBED.embed_batch([m.text for m in shown]),
        existing_hashes=existing_hashes or {}, metadata={"k": "v"}, expiration_date="2030-01-01",
        new_id=iter(f"new-{i}" for i in range(100)).__next__, existing=shown,
    )  # fmt: skip
    vectors = EMBED.embed_batch([f.text for f in facts]) if facts else np.zeros((0, 384))
    return facts, admit(facts, vectors, ctx)


def test_the_hash_admission_uses_is_mem0_content_hash():
    """One content hash (values.content_hash): admission's duplicate check and a raw add's both
    use it, and it is Mem0's: the MD5 of the UTF-8 text."""
    assert content_hash("User likes tea.") == hashlib.md5(b"User likes tea.").hexdigest()
    _, out = run(answer("User likes tea."))
    assert [m.hash for m in out.memories] == [content_hash("User likes tea.")]


def test_message_numbers_map_to_plan_indexes_and_the_side_that_said_them():
    facts, _ = run(answer("User lives in Porto.", (2, "Assistant said nice.")))
    assert [(f.text, f.sources, f.attributed_to) for f in facts] == [
        ("User lives in Porto.", (1,), "user"),
        ("Assistant said nice.", (2,), "assistant"),
    ]


def test_keys_that_name_no_new_message_are_dropped():
    reply = {"0": ["a"], "3": ["b"], "x": ["c"], "²": ["d"], "-1": ["e"], "2": ["kept"]}
    facts, _ = run(reply)
    assert [f.text for f in facts] == ["kept"]


def test_junk_items_and_empty_texts_are_dropped():
    reply = {"1": [None, "   ", 3, {"text": "x"}, "  User  rides\n a bike. ", "a\x00b"]}
    facts, _ = run(reply)
    assert [f.text for f in facts] == ["User rides a bike."]
    assert run({"1": "nope"})[0] == [] and run({})[0] == []


def test_admission_builds_memory_and_results():
    _, out = run(answer("User moved from Lisbon to Porto."))
    (memory,) = out.memories
    assert memory.id == "new-0" and memory.supersedes == []
    assert memory.source_messages == [1] and memory.actor_id == "ana"
    assert memory.attributed_to == "user"
    assert memory.observed_at == "2024-05-01T10:00:00+00:00"
    assert memory.metadata == {"k": "v"} and memory.expiration_date == "2030-01-01"
    assert out.results == [
        {"id": "new-0", "memory": "User moved from Lisbon to Porto.", "event": "ADD"}
    ]


def test_exact_duplicates_merge_into_the_stored_memory_or_the_batch_s():
    reply = answer("User likes tea.", (2, "User likes tea."), "User likes jazz.")
    _, out = run(reply, existing_hashes={content_hash("User likes jazz."): "mem-jazz"})
    (tea,) = out.memories
    assert tea.text == "User likes tea." and tea.source_messages == [1, 2]  # said twice
    (merge,) = out.merges
    assert (merge.memory_id, merge.text, merge.source_messages) == (
        "mem-jazz", "User likes jazz.", [1])  # fmt: skip
    assert merge.happened == "2024-05-01T10:00:00+00:00" and out.dropped == []
    assert out.results == [
        {"id": "new-0", "memory": "User likes tea.", "event": "ADD"},
        {"id": "mem-jazz", "memory": "User likes jazz.", "event": "MERGE",
         "merged": "User likes jazz."},
    ]  # fmt: skip


def test_near_duplicates_merge_into_the_memory_that_says_it_already():
    # FakeEmbedder ignores case and punctuation: these embed identically (similarity 1.0).
    same = "user lives in lisbon"
    _, out = run(answer(same))
    assert out.memories == [] and out.dropped == []
    assert [(m.memory_id, m.text) for m in out.merges] == [("mem-0", same)]
    assert out.results == [
        {"id": "mem-0", "memory": "User lives in Lisbon.", "event": "MERGE", "merged": same}
    ]
    _, out = run(answer(same), shown=[])
    assert [m.text for m in out.memories] == [same] and out.merges == []
    _, out = run(answer("User likes tea", (2, "user likes TEA!")))
    (tea,) = out.memories
    assert tea.text == "User likes tea" and tea.source_messages == [1, 2]
    # two facts of one add that both restate a stored memory: one merge, both sources
    _, out = run(answer(same, (2, "User lives in Lisbon!")))
    (merge,) = out.merges
    assert merge.source_messages == [1, 2] and len(out.results) == 1
    assert 0.9 < NEAR_DUPLICATE_THRESHOLD < 1.0


def test_facts_that_differ_in_one_value_both_stay():
    _, out = run(answer("User lives in Porto."))
    assert [m.text for m in out.memories] == ["User lives in Porto."] and out.merges == []


def test_empty_answer_admits_nothing():
    facts, out = run({})
    assert facts == [] and out.memories == [] and out.results == []


def test_content_words_leave_out_names_numbers_and_months_and_join_living_and_moving():
    names = frozenset({"user", "assistant", "oskar"})
    assert share_a_content_word("Oskar lives in Ghent.", "User moved to Aarhus.", names)
    assert not share_a_content_word(
        "Oskar baked bread on 11 September 2023.",
        "Oskar had teeth out on 16 September 2023.",
        names,
    )
    assert share_a_content_word("User drives a Kia.", "User sold the Kia.", names)


def test_content_words_join_work_and_job_and_meet_across_plural_and_verb_endings():
    names = frozenset({"user", "assistant"})
    assert share_a_content_word(
        "User works as a nurse at Tidewater Bank.", "User started a new job at Halcyon Bio.", names
    )
    assert share_a_content_word("User has two kids.", "User's kid starts school.", names)
    assert share_a_content_word("User painted the fence.", "User is painting the shed.", names)
    assert share_a_content_word("User adopted a cat.", "User adopts cats.", names)
    # the endings come off whole words only: "class" keeps its "ss", short words stay
    assert not share_a_content_word("User takes a class.", "User likes cla music.", names)
    assert not share_a_content_word("User rides the bus.", "User bought a bu.", names)


def test_stems_meet_across_a_final_e():
    names = frozenset({"user", "assistant"})
    assert share_a_content_word("User baked bread.", "User likes to bake.", names)
    assert share_a_content_word("User's son is named Leo.", "User chose the name Leo.", names)


def test_near_duplicates_about_another_subject_both_stay():
    # the fake embedder embeds a bag of words: the two facts embed identically, but the first
    # is about Ana and the second about Rui
    shown = [record(0, "Ana thanks Rui for his help.")]
    _, out = run(answer("Rui thanks Ana for his help."), shown=shown)
    assert [m.text for m in out.memories] == ["Rui thanks Ana for his help."]
    assert out.merges == []
    _, out = run(answer("Ana thanks Rui for his help", (2, "Rui thanks Ana for his help")))
    assert len(out.memories) == 2 and out.merges == []
    _, out = run(answer("ana thanks rui for his help!"), shown=shown)
    assert [m.memory_id for m in out.merges] == ["mem-0"]
