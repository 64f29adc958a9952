"""Hybrid search: candidates from every signal, one fixed-scale score, explain, and the same
filter/expiry/state rules for every signal. Fake embedder, real spaCy analyzer and entities."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from offline_mem import Memory
from offline_mem.retrieval.ranking import Ranked, Weights, carry_to_replacements
from offline_mem.retrieval.search import SearchRequest, hybrid_search, overfetch
from offline_mem.store.filters import compile_filters

U1 = {"user_id": "u1"}


def add(memory: Memory, text: str, **kwargs: object) -> str:
    result = memory.add(text, infer=False, **{"user_id": "u1", **kwargs})  # type: ignore[arg-type]
    return str(result["results"][0]["id"])


def only(memory: Memory, query: str, signal: str, top_k: int = 10) -> list[str]:
    request = SearchRequest(
        query=query, where=compile_filters(U1), top_k=top_k, threshold=None, signals=(signal,)
    )
    hits = hybrid_search(memory.store, memory.embedder, memory.analyzer, request)
    return [record.id for record, ranked in hits if ranked.score > 0]


def test_a_keyword_only_match_surfaces(memory: Memory) -> None:
    # More near-duplicates of the query's wording than the vector over-fetch can hold...
    for i in range(overfetch(10) + 10):
        add(memory, f"the gym locker by the blue door number {i} holds my towel")
    # ...and one memory that shares only a rare word with the query.
    target = add(memory, "Zyphrax is the wifi password at the cabin")
    query = "gym locker blue door towel zyphrax"
    assert target not in only(memory, query, "semantic", top_k=overfetch(10))
    assert target in only(memory, query, "keyword")
    results = memory.search(query, filters=U1, top_k=10, threshold=None, explain=True)
    hit = next(r for r in results["results"] if r["id"] == target)
    details = hit["score_details"]
    assert details["keyword_score"] > 0 and details["bm25_score"] > 0


def test_explain_adds_up_on_a_fixed_scale(memory: Memory) -> None:
    add(memory, "My sister Marta is a doctor in Porto")
    add(memory, "I bought a red bicycle")
    results = memory.search("Where does Marta work as a doctor?", filters=U1, explain=True)
    top = results["results"][0]
    d = top["score_details"]
    assert top["memory"] == "My sister Marta is a doctor in Porto"
    expected = (
        d["semantic_weight"] * d["semantic_score"]
        + d["keyword_weight"] * d["keyword_score"]
        + d["entity_weight"] * d["entity_score"]
    )
    assert d["final_score"] == pytest.approx(expected, abs=1e-5)
    assert top["score"] == pytest.approx(d["final_score"], abs=1e-5)
    assert d["max_possible_score"] == 1.0
    assert 0.0 <= top["score"] <= 1.0
    assert d["entity_score"] == 1.0  # the query's only known entity, Marta, is linked to it


def test_entity_signal_finds_memories_linked_to_a_query_entity(memory: Memory) -> None:
    marta = [add(memory, "Marta loves sailing"), add(memory, "Marta's birthday is in May")]
    add(memory, "The bakery sells rye bread")
    found = only(memory, "tell me about marta", "entity")
    assert sorted(found) == sorted(marta)


def test_threshold_applies_to_the_final_score(memory: Memory) -> None:
    add(memory, "I bought a red bicycle")
    everything = memory.search("red bicycle", filters=U1, threshold=0)["results"]
    assert everything
    score = everything[0]["score"]
    assert (
        memory.search("red bicycle", filters=U1, threshold=min(1.0, score + 0.01))["results"] == []
    )
    assert memory.search("red bicycle", filters=U1, threshold=score)["results"]


@pytest.mark.parametrize("signal", ["semantic", "keyword", "entity"])
def test_filters_expiry_and_scope_hold_for_every_signal(memory: Memory, signal: str) -> None:
    visible = add(memory, "Quillon visited Reykjavik", metadata={"kind": "trip"})
    add(memory, "Quillon visited Reykjavik again", metadata={"kind": "dream"})
    add(
        memory,
        "Quillon visited Reykjavik last year",
        expiration_date=date.today() - timedelta(days=2),
    )
    add(memory, "Quillon visited Reykjavik with Bo", user_id="u2")
    request = SearchRequest(
        query="Quillon Reykjavik",
        where=compile_filters({"user_id": "u1", "kind": "trip"}),
        top_k=10,
        threshold=None,
        signals=(signal,),
    )
    hits = hybrid_search(memory.store, memory.embedder, memory.analyzer, request)
    assert [record.id for record, ranked in hits if ranked.score > 0] == [visible]


def test_weights_are_configurable_and_validated(store_config, embedder) -> None:
    weights = {"semantic": 0.0, "keyword": 1.0, "entity": 0.0}
    with Memory({**store_config, "ranking_weights": weights}, embedder=embedder) as memory:
        add(memory, "Zyphrax is the wifi password")
        add(memory, "the wifi at home is slow")
        top = memory.search("zyphrax", filters=U1, explain=True)["results"][0]
        assert top["memory"] == "Zyphrax is the wifi password"
        assert top["score_details"]["semantic_weight"] == 0.0
    with pytest.raises(ValueError):
        Weights(0.5, 0.5, 0.5)


@pytest.mark.parametrize("kind_count", [3, 150])
def test_vector_knn_is_exact_under_selective_and_broad_filters(
    memory: Memory, kind_count: int
) -> None:
    """The partition-first KNN and its fallback give the exact top-k among filtered memories."""
    import numpy as np

    texts = [f"note {i} about topic {i % 17} and colour {i % 5}" for i in range(300)]
    for i, text in enumerate(texts):
        add(memory, text, metadata={"kind": "x" if i < kind_count else "y"})
    query = "topic 3 colour 2"
    request = SearchRequest(
        query=query, where=compile_filters({"user_id": "u1", "kind": "x"}), top_k=10,
        threshold=None, signals=("semantic",),
    )  # fmt: skip
    got = [
        r.text for r, _ in hybrid_search(memory.store, memory.embedder, memory.analyzer, request)
    ]
    pool = texts[:kind_count]
    sims = memory.embedder.embed_batch(pool) @ memory.embedder.embed(query)
    best = sorted(sims, reverse=True)[: min(10, kind_count)]
    got_sims = sorted((float(sims[pool.index(t)]) for t in got), reverse=True)
    assert len(got) == min(10, kind_count)
    assert np.allclose(got_sims, best, atol=1e-5)  # ties may swap texts, never similarities


def test_a_replacement_takes_the_higher_score_of_itself_and_what_it_replaced() -> None:
    def item(rowid: int, score: float) -> Ranked:
        return Ranked(rowid, score, score, 0.0, 0.0, 0.0)

    ranked = [item(1, 0.9), item(2, 0.8), item(3, 0.7), item(4, 0.6), item(5, 0.2)]
    # 1 was replaced by 5, 2 by 3 (whose own score is lower), 4's replacement is not visible
    out = carry_to_replacements(ranked, {1: 5, 2: 3, 4: None}, top_k=10)
    assert [(r.rowid, r.score, r.carried_from) for r in out] == [(5, 0.9, 1), (3, 0.8, 2)]
    assert carry_to_replacements(ranked, {1: 5, 2: 3, 4: None}, top_k=1)[0].rowid == 5
    assert carry_to_replacements(ranked, {}, top_k=2) == ranked[:2]
