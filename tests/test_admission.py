"""Admission is pure: answers in, memories and results out."""

from __future__ import annotations

import numpy as np

from offline_mem.admission import (
    NEAR_DUPLICATE_THRESHOLD,
    AdmissionContext,
    admit,
    fact_hash,
    read_facts,
)
from offline_mem.content_words import share_a_content_word
from offline_mem.memory import content_hash
from offline_mem.records import MemoryRecord, NewMessage
from offline_mem.testing import FakeEmbedder, fact

EMBED = FakeEmbedder()


def record(i: int, text: str) -> MemoryRecord:
    return MemoryRecord(
        rowid=i + 1, id=f"mem-{i}", text=text, hash=fact_hash(text), user_id="u", agent_id=None,
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


def run(answer: dict, *, existing_hashes: frozenset[str] = frozenset(), shown=SHOWN):
    roles = [m.role for m in MESSAGES]
    facts = read_facts(answer, shown_messages=[1, 2], shown_memories=shown, roles=roles)
    ctx = AdmissionContext(
        messages=MESSAGES, shown_memories=shown,
        shown_vectors=EMBED.embed_batch([m.text for m in shown]),
        existing_hashes=existing_hashes, metadata={"k": "v"}, expiration_date="2030-01-01",
        new_id=iter(f"new-{i}" for i in range(100)).__next__,
    )  # fmt: skip
    vectors = EMBED.embed_batch([f.text for f in facts]) if facts else np.zeros((0, 384))
    return facts, admit(facts, vectors, ctx)


def test_fact_hash_is_mem0_content_hash():
    assert fact_hash("User likes tea.") == content_hash("User likes tea.")


def test_aliases_map_to_real_ids_and_out_of_range_is_dropped():
    facts, _ = run({"facts": [fact("User lives in Porto.", from_messages=[1, 7, 0],
                                   supersedes=[0, -1, 2])]})  # fmt: skip
    assert facts[0].sources == (1,)
    assert facts[0].supersedes == ("mem-0",)


def test_a_fact_is_attributed_to_the_side_whose_messages_it_cites():
    facts, _ = run({"facts": [fact("User lives in Porto.", from_messages=[1]),
                              fact("Assistant said nice.", from_messages=[2]),
                              fact("Both said it.", from_messages=[1, 2])]})  # fmt: skip
    assert [f.attributed_to for f in facts] == ["user", "assistant", None]


def test_no_valid_message_number_credits_every_shown_message():
    facts, _ = run({"facts": [fact("User lives in Porto.", from_messages=[9])]})
    assert facts[0].sources == (1, 2)
    assert facts[0].attributed_to is None  # the two messages were said by both sides


def test_junk_items_and_empty_texts_are_dropped():
    answer = {
        "facts": ["text", None, {"text": "   "}, {"text": 3}, fact("  User  rides\n a bike. ")]
    }
    facts, _ = run(answer)
    assert [f.text for f in facts] == ["User rides a bike."]
    assert run({"facts": "nope"})[0] == [] and run({})[0] == []


def test_supersession_builds_memory_and_results():
    _, out = run({"facts": [fact("User moved from Lisbon to Porto.", supersedes=[0])]})
    (memory,) = out.memories
    assert memory.id == "new-0" and memory.supersedes == ["mem-0"]
    assert memory.source_messages == [1] and memory.actor_id == "ana"
    assert memory.observed_at == "2024-05-01T10:00:00+00:00"
    assert memory.metadata == {"k": "v"} and memory.expiration_date == "2030-01-01"
    assert out.results == [
        {"id": "new-0", "memory": "User moved from Lisbon to Porto.", "event": "ADD",
         "supersedes": ["mem-0"]},
        {"id": "mem-0", "memory": "User lives in Lisbon.", "event": "SUPERSEDE",
         "superseded_by": "new-0"},
    ]  # fmt: skip


def test_unrelated_supersession_is_ignored():
    _, out = run({"facts": [fact("Congratulations on the new job!", supersedes=[1])]})
    assert out.memories[0].supersedes == []
    assert [r["event"] for r in out.results] == ["ADD"]


def test_a_memory_is_superseded_once_per_batch():
    _, out = run({"facts": [fact("User lives in Porto now, not Lisbon.", supersedes=[0]),
                            fact("User left Lisbon.", supersedes=[0])]})  # fmt: skip
    assert [r["event"] for r in out.results] == ["ADD", "SUPERSEDE", "ADD"]


def test_exact_duplicates_against_scope_and_batch():
    answer = {"facts": [fact("User likes tea."), fact("User likes tea."), fact("User likes jazz.")]}
    _, out = run(answer, existing_hashes=frozenset({fact_hash("User likes jazz.")}))
    assert [m.text for m in out.memories] == ["User likes tea."]
    assert out.dropped == [("User likes tea.", "duplicate"), ("User likes jazz.", "duplicate")]


def test_near_duplicates_are_dropped_unless_superseding():
    # FakeEmbedder ignores case and punctuation: these embed identically (similarity 1.0).
    same = "user lives in lisbon"
    _, out = run({"facts": [fact(same)]})
    assert out.memories == [] and out.dropped == [(same, "near duplicate")]
    _, out = run({"facts": [fact(same, supersedes=[0])]})
    assert [m.text for m in out.memories] == [same]
    _, out = run({"facts": [fact("User likes tea"), fact("user likes TEA!")]})
    assert [m.text for m in out.memories] == ["User likes tea"]
    assert 0.9 < NEAR_DUPLICATE_THRESHOLD < 1.0


def test_empty_answer_admits_nothing():
    facts, out = run({"facts": []})
    assert facts == [] and out.memories == [] and out.results == []


def test_a_wrong_alias_is_retargeted_to_the_most_similar_memory():
    """The model meant to supersede (it named alias 1, the cat) but the fact is about Lisbon:
    the most similar shown memory is superseded instead, when it is similar enough."""
    _, out = run({"facts": [fact("User lives in Porto, not in Lisbon.", supersedes=[1])]})
    assert out.memories[0].supersedes == ["mem-0"]
    assert [r["event"] for r in out.results] == ["ADD", "SUPERSEDE"]


def test_no_retarget_when_nothing_shown_is_similar_enough():
    _, out = run({"facts": [fact("Congratulations on the new job!", supersedes=[1])]})
    assert out.memories[0].supersedes == []


def test_a_supersession_needs_the_two_facts_to_share_a_content_word():
    shown = [record(0, "User finished reading The Overstory."), record(1, "User lives in Ghent.")]
    # the model names the book as replaced by the move: nothing in common, so it stays
    _, out = run({"facts": [fact("User moved to Aarhus last weekend.", supersedes=[0])]},
                 shown=shown)  # fmt: skip
    assert out.memories[0].supersedes == []
    _, out = run({"facts": [fact("User moved from Ghent to Aarhus.", supersedes=[1])]},
                 shown=shown)  # fmt: skip
    assert out.memories[0].supersedes == ["mem-1"]


def test_content_words_leave_out_names_numbers_and_months_and_join_living_and_moving():
    names = frozenset({"user", "assistant", "oskar"})
    assert share_a_content_word("Oskar lives in Ghent.", "User moved to Aarhus.", names)
    assert not share_a_content_word(
        "Oskar baked bread on 11 September 2023.",
        "Oskar had teeth out on 16 September 2023.",
        names,
    )
    assert share_a_content_word("User drives a Kia.", "User sold the Kia.", names)
