"""`search` ranks extracted facts and the stored turns in one list
(offline_mem/retrieval/evidence.py): every item says its kind, message ids work with get() and
delete(), and the ranking is pure and on the facts' [0, 1] scale. Fake models; the real embedder
has its own tests."""

from __future__ import annotations

import pytest
from invariants import violations

from offline_mem import Memory
from offline_mem.retrieval.evidence import (
    MESSAGE_WEIGHTS,
    REPLY_SHARE,
    MessageSignals,
    asks,
    entity_share,
    fact_places,
    rank_evidence,
)
from offline_mem.retrieval.ranking import Ranked, Weights
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer

DIALOGUE = [
    {"role": "user", "content": "I adopted a grey kitten called Pixel", "name": "Rui"},
    {"role": "assistant", "content": "Lovely! My own dog Bolt hates cats though", "name": "Ines"},
]


def open_memory(store, *script) -> Memory:
    """On a SQLite file or a PostgreSQL database (`any_store`)."""
    return Memory(store, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(*script), entities=FakeEntities())  # fmt: skip


@pytest.fixture
def memory(any_store):
    m = open_memory(any_store, answer("Rui adopted a grey kitten called Pixel."))
    m.add(DIALOGUE, user_id="rui", timestamp="2024-05-02T10:00:00")
    yield m
    m.close()


def test_search_returns_facts_and_turns_in_one_ranking(memory):
    found = memory.search("kitten Pixel", filters={"user_id": "rui"}, top_k=10, threshold=None)[
        "results"
    ]
    kinds = [item["kind"] for item in found]
    assert kinds.count("fact") == 1 and kinds.count("message") == 2
    scores = [item["score"] for item in found]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    fact = next(item for item in found if item["kind"] == "fact")
    turn = next(item for item in found if item["kind"] == "message" and item["name"] == "Rui")
    assert fact["memory"] == "Rui adopted a grey kitten called Pixel."
    assert turn["memory"] == "Rui: I adopted a grey kitten called Pixel"
    assert turn["content"] == DIALOGUE[0]["content"] and turn["role"] == "user"
    assert turn["observed_at"].startswith("2024-05-02")
    assert turn["memory_ids"] == [fact["id"]]


def test_a_turn_scores_on_its_own_text_when_that_is_higher(memory):
    found = memory.search("dog Bolt hates cats", filters={"user_id": "rui"}, explain=True)
    first = found["results"][0]
    assert first["kind"] == "message" and first["name"] == "Ines"
    assert first["memory_ids"] == []  # no fact came from it: found through its own text
    details = first["score_details"]
    assert details["keyword_score"] > 0  # the messages' own keyword index
    assert (details["semantic_weight"], details["keyword_weight"]) == (0.5, 0.5)
    assert details["final_score"] == pytest.approx(
        details["semantic_weight"] * details["semantic_score"]
        + details["keyword_weight"] * details["keyword_score"]
        + details["entity_weight"] * details["entity_score"]
    )


def test_facts_only_on_request_or_with_filters_messages_cannot_answer(memory):
    only = memory.search("kitten", filters={"user_id": "rui"}, include_messages=False)
    assert [item["kind"] for item in only["results"]] == ["fact"]
    # messages have no metadata or role fields: a filter on them leaves messages out
    by_role = memory.search("kitten", filters={"user_id": "rui", "role": "user"})
    assert {item["kind"] for item in by_role["results"]} <= {"fact"}


def test_a_raw_memory_is_not_listed_twice(any_store):
    m = open_memory(any_store)
    m.add("I keep bees on the roof", user_id="u1", infer=False)
    found = m.search("bees on the roof", filters={"user_id": "u1"})["results"]
    assert [item["kind"] for item in found] == ["fact"]


def test_get_and_delete_a_message_by_its_id(memory):
    found = memory.search("dog Bolt", filters={"user_id": "rui"})["results"]
    turn = next(item for item in found if item["kind"] == "message" and item["name"] == "Ines")
    got = memory.get(turn["id"])
    assert got["kind"] == "message" and got["memory"] == turn["memory"]
    assert got["user_id"] == "rui" and turn["user_id"] == "rui"
    assert memory.get(turn["id"], user_id="someone_else") is None
    kittens = memory.search("kitten Pixel", filters={"user_id": "rui"})["results"]
    kitten = next(item for item in kittens if item["kind"] == "message")
    fact_id = kitten["memory_ids"][0]

    deleted = memory.delete(kitten["id"])
    assert deleted == {"id": kitten["id"], "kind": "message", "memory": kitten["memory"],
                       "event": "DELETE"}  # fmt: skip
    assert memory.get(kitten["id"]) is None
    assert memory.get(fact_id)["memory"] == "Rui adopted a grey kitten called Pixel."
    assert memory.store.counts()["messages"] == 1
    assert memory.store.counts()["message_vectors"] == 1
    assert (
        memory.search_messages("kitten", filters={"user_id": "rui"})["results"][0]["id"]
        != (kitten["id"])
    )
    if memory.config.store is None:  # the file's invariants
        assert violations(memory.store.db) == []
    with pytest.raises(KeyError):
        memory.delete(kitten["id"])


def ranked(rowid: int, score: float) -> Ranked:
    return Ranked(rowid, score, semantic=score, keyword=0.0, entity=0.0, bm25=0.0)


def test_rank_evidence_is_one_scale_for_both_kinds():
    facts = [ranked(1, 0.50), ranked(2, 0.20)]
    messages = [
        MessageSignals(10, 0.9, "Ana: the bakery on Rua Nova", keyword=0.2),  # 0.45 + 0.10
        MessageSignals(11, 0.5, "Ana: I met Rui there"),  # 0.5 * 0.5 = 0.25
        MessageSignals(12, 0.05, "Rui: hello"),  # 0.025: under the threshold
    ]
    assert Weights(semantic=0.5, keyword=0.5, entity=0.0) == MESSAGE_WEIGHTS
    out = rank_evidence(facts, messages, known_entities=["rui"], threshold=0.1, top_k=10)
    assert [(e.kind, e.key) for e in out] == [
        ("message", 10),
        ("fact", 1),
        ("message", 11),
        ("fact", 2),
    ]
    assert out[0].score == pytest.approx(0.55) and out[2].score == pytest.approx(0.25)
    assert out[0].keyword == pytest.approx(0.2) and out[2].entity == 1.0  # known, weight 0
    # other message weights: the entity signal counts when weighted
    named = rank_evidence(facts, messages, known_entities=["rui"], threshold=0.1, top_k=10,
                          message_weights=Weights(0.6, 0.05, 0.35))  # fmt: skip
    assert named[0].key == 11 and named[0].score == pytest.approx(0.65)
    # the facts keep the order the memory search gave them (a resolved reference leads);
    # top 15 leaves facts 3 places
    led = rank_evidence(
        [ranked(3, 0.05), *facts], messages[:1], known_entities=[], threshold=0.1, top_k=15
    )
    assert [(e.kind, e.key) for e in led] == [
        ("message", 10),
        ("fact", 3),
        ("fact", 1),
        ("fact", 2),
    ]


def test_facts_take_at_most_two_places_in_ten_while_turns_remain():
    facts = [ranked(i, 0.9 - i / 100) for i in range(1, 9)]
    turns = [MessageSignals(100 + i, 0.5, f"turn {i}") for i in range(8)]
    out = rank_evidence(facts, turns, known_entities=[], threshold=None, top_k=10)
    assert [e.kind for e in out] == ["fact"] * 2 + ["message"] * 8
    assert fact_places(10) == 2 and fact_places(20) == 4 and fact_places(1) == 1
    alone = rank_evidence(facts, [], known_entities=[], threshold=None, top_k=10)
    assert len(alone) == 8  # no turns to rank (facts only): every fact keeps its place


def test_entity_share_counts_whole_words_of_known_entities():
    assert entity_share("Rui: I met Ana at the bakery", ["ana", "rui"]) == 1.0
    assert entity_share("Banana bread", ["ana"]) == 0.0
    assert entity_share("We saw New York!", ["new york", "lisbon"]) == 0.5
    assert entity_share("anything", []) == 0.0


def test_the_reply_to_a_question_takes_a_share_of_its_score():
    messages = [
        MessageSignals(20, 0.8, "Ines: Lovely! Where did you end up staying?"),  # 0.40
        MessageSignals(21, 0.1, "Rui: A cabin by the lake, with a tiny stove."),  # 0.05 own
        MessageSignals(30, 0.6, "Rui: I made ice cream on Sunday."),  # 0.30
        MessageSignals(31, 0.1, "Ines: Sounds good."),  # 0.05, the reply to no question
    ]
    plain = rank_evidence([], messages, known_entities=[], threshold=None, top_k=3)
    assert [e.key for e in plain] == [20, 30, 21]
    lent = rank_evidence(
        [], messages, known_entities=[], threshold=None, top_k=3, replies={20: 21, 30: 31}
    )
    assert [e.key for e in lent] == [20, 21, 30]  # right after its question
    assert lent[1].score == pytest.approx(REPLY_SHARE * 0.40) and lent[1].lent == lent[1].score
    assert lent[1].semantic == pytest.approx(0.1)  # its own signals stay as they were
    details = lent[1].explain(MESSAGE_WEIGHTS, None)
    assert details["final_score"] == pytest.approx(0.36)
    assert details["score_lent_by_question"] == pytest.approx(0.36)
    assert "score_lent_by_question" not in lent[0].explain(MESSAGE_WEIGHTS, None)
    # a reply that scores higher on its own keeps its own score; the threshold applies after
    own = rank_evidence([], messages[:2], known_entities=[], threshold=0.39, top_k=3,
                        replies={21: 20})  # fmt: skip
    assert [(e.key, e.lent) for e in own] == [(20, 0.0)]
    assert asks("Rui: which flavour?") and asks("Rui: 何味？") and not asks("Rui: mint.")


def test_search_returns_the_answer_to_a_question_that_matched(any_store):
    """The query matches the question turn; the reply holding the answer shares no word with
    the query, yet comes right after it."""
    m = open_memory(any_store, answer())  # no facts: the turns alone
    turns = [
        ("Ines", "Did you finally bake that rye sourdough loaf for the market?"),
        ("Rui", "Sadly it flopped, so I brought lemon tarts instead."),
        ("Ines", "The weather was awful all weekend."),
        ("Rui", "We stayed in and watched films about sailing."),
    ]
    messages = [{"role": "user" if name == "Rui" else "assistant", "content": text, "name": name}
                for name, text in turns]  # fmt: skip
    m.add(messages, user_id="rui")
    found = m.search("rye sourdough loaf for the market", filters={"user_id": "rui"}, top_k=2)
    contents = [item.get("content") for item in found["results"]]
    assert contents == [turns[0][1], turns[1][1]]
    assert found["results"][1]["score"] == pytest.approx(REPLY_SHARE * found["results"][0]["score"])
    m.close()
