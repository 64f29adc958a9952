"""`search` and `search_messages` give the same results on PostgreSQL as on SQLite: the same adds
on both stores, then the same queries; ids differ (new uuids), so results are compared by kind,
text and score, in order. BM25 must be the same float (same postings, same arithmetic: bm25.py);
cosines agree to float32 rounding (pgvector and sqlite-vec sum in their own orders)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from offline_mem import Memory
from offline_mem.retrieval.search import overfetch
from offline_mem.store.filters import compile_filters
from offline_mem.testing import FakeEmbedder, FakeEntities

pytestmark = pytest.mark.postgres

COSINE_TOLERANCE = 1e-5


@pytest.fixture
def both(postgres_url: str, db_path: str) -> Iterator[tuple[Memory, Memory]]:
    """A SQLite Memory and a PostgreSQL one, with the same fake models."""
    lite = Memory({"path": db_path}, embedder=FakeEmbedder(), entities=FakeEntities())
    pg = Memory({"store": postgres_url}, embedder=FakeEmbedder(), entities=FakeEntities(),
                analyzer=lite.analyzer)  # fmt: skip
    try:
        yield lite, pg
    finally:
        pg.close()
        lite.close()


def on_both(both: tuple[Memory, Memory], call: str, *args: Any, **kwargs: Any) -> list[Any]:
    return [getattr(mem, call)(*args, **kwargs) for mem in both]


def fill(both: tuple[Memory, Memory]) -> None:
    """The same adds, in the same order, on both stores: several users and agents, names and
    dates, duplicates (their messages stay as messages only), tool turns (messages that are no
    memory), and more keyword matches than a search's over-fetch."""
    for i in range(overfetch(10) + 12):
        on_both(both, "add", f"the gym locker number {i} by the blue door holds my towel",
                user_id="u1", infer=False)  # fmt: skip
    on_both(both, "add", [
        {"role": "user", "content": "My sister Marta is a doctor in Porto", "name": "Rui"},
        {"role": "assistant", "content": "Porto is lovely in spring"},
        {"role": "tool", "content": "weather Porto: sunny, 24 degrees"},
        {"role": "user", "content": "Zyphrax is the wifi password at the cabin",
         "timestamp": "2023-05-08T13:56:00Z"},
    ], user_id="u1", infer=False, metadata={"topic": "family", "n": 3})  # fmt: skip
    on_both(both, "add", [
        {"role": "user", "content": "Marta moved to Lisbon last year"},
        {"role": "user", "content": "My sister Marta is a doctor in Porto"},  # a duplicate
        {"role": "user", "content": "Do you remember where the towel is?"},
        {"role": "assistant", "content": "In the gym locker by the blue door"},
    ], user_id="u1", agent_id="coach", infer=False)  # fmt: skip
    on_both(both, "add", "Bruno plays the cello in Porto", user_id="u2", infer=False)
    on_both(both, "add", "Marta lives in Porto with her cat", user_id="u2", infer=False,
            expiration_date="2020-01-01")  # fmt: skip
    on_both(both, "add", "Marta runs marathons", user_id="u1", run_id="r1", infer=False)


def shown(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    """A result's items as comparable across stores: kind, text, and for facts the exact BM25."""
    rows = []
    for item in result["results"]:
        details = item.get("score_details") or {}
        text = item.get("memory", item.get("content"))  # search_messages' items have content
        rows.append((item.get("kind"), text, details.get("bm25_score")))
    return rows


def assert_same(results: list[dict[str, Any]]) -> None:
    lite, pg = results
    assert shown(pg) == shown(lite)
    for a, b in zip(lite["results"], pg["results"], strict=True):
        assert b["score"] == pytest.approx(a["score"], abs=COSINE_TOLERANCE)
        if a.get("kind") == "message":
            fields = ("role", "name", "observed_at")
            assert [b.get(f) for f in fields] == [a.get(f) for f in fields]
            assert len(b["memory_ids"]) == len(a["memory_ids"])


QUERIES = [
    ("Where does Marta work as a doctor?", {"user_id": "u1"}),
    ("gym locker blue door towel zyphrax", {"user_id": "u1"}),
    ("towel", {"user_id": "u1"}),
    ("Who plays music in Porto?", {"user_id": "u2"}),
    ("Marta Porto", {"user_id": "u1", "agent_id": "coach"}),
    ("Marta", {"user_id": "u1", "run_id": "r1"}),
    ("weather sunny", {"user_id": "u1"}),
    ("Porto", {"user_id": "u1", "topic": "family"}),
    ("doctor", {"user_id": "u1", "n": {"in": [3, 4]}}),
    ("nothing matches these words", {"user_id": "u1"}),
]


@pytest.mark.parametrize(("query", "filters"), QUERIES)
def test_search_gives_the_same_results(
    both: tuple[Memory, Memory], query: str, filters: dict[str, Any]
) -> None:
    fill(both)
    for top_k in (3, 10):
        kwargs: dict[str, Any] = {"filters": filters, "top_k": top_k, "explain": True}
        assert_same(on_both(both, "search", query, threshold=None, **kwargs))
        assert_same(on_both(both, "search", query, **kwargs))
    assert_same(on_both(both, "search", query, filters=filters, include_messages=False,
                        threshold=None, explain=True))  # fmt: skip
    assert_same(on_both(both, "search", query, filters=filters, show_expired=True,
                        threshold=None, explain=True))  # fmt: skip
    scope = {k: v for k, v in filters.items() if k in ("user_id", "agent_id", "run_id")}
    assert_same(on_both(both, "search_messages", query, filters=scope, top_k=8))


def test_search_as_of_and_include_sources(both: tuple[Memory, Memory]) -> None:
    fill(both)
    query = "Zyphrax wifi password"
    for as_of in ("2023-05-07", "2023-05-09"):
        assert_same(on_both(both, "search", query, filters={"user_id": "u1"}, as_of=as_of,
                            threshold=None, explain=True))  # fmt: skip
    lite, pg = on_both(both, "search", query, filters={"user_id": "u1"}, include_sources=True,
                       include_messages=False)  # fmt: skip
    assert shown(pg) == shown(lite)
    for a, b in zip(lite["results"], pg["results"], strict=True):
        assert [s["content"] for s in b["sources"]] == [s["content"] for s in a["sources"]]


def test_every_keyword_score_is_the_same_float(both: tuple[Memory, Memory]) -> None:
    """The store calls themselves: the same rowids (both stores number rows from 1 in add
    order) get bit-identical BM25 scores, for the top N and for the scores of given rows."""
    fill(both)
    lite, pg = (mem.store for mem in both)
    where = compile_filters({"user_id": "u1"})
    analysis = both[0].analyzer.analyze_query("Marta gym towel door cabin doctor")
    stats = [s.keyword_stats(analysis.terms, where) for s in (lite, pg)]
    assert stats[0] == stats[1]
    for limit in (1, 5, 60, 200):
        found = [
            s.keyword_candidates(
                st, where, s.search_filter(where), limit=limit, also_rowids=[1, 70]
            )
            for s, st in zip((lite, pg), stats, strict=True)
        ]
        assert found[0] == found[1]
    everything = [
        s.keyword_candidates(st, where, s.search_filter(where))
        for s, st in zip((lite, pg), stats, strict=True)
    ]
    assert everything[0] == everything[1] and len(everything[0]) > overfetch(10)
    unscoped = compile_filters({"agent_id": "coach"})
    stats = [s.keyword_stats(analysis.terms, unscoped) for s in (lite, pg)]
    assert stats[0] == stats[1]
    found = [
        s.keyword_candidates(st, unscoped, s.search_filter(unscoped), limit=3)
        for s, st in zip((lite, pg), stats, strict=True)
    ]
    assert found[0] == found[1] and found[0]


def test_entity_signal_is_the_same(both: tuple[Memory, Memory]) -> None:
    fill(both)
    lite, pg = (mem.store for mem in both)
    where = compile_filters({"user_id": "u1"})
    signals = [
        s.entity_candidates(["marta", "porto", "nobody"], where, s.search_filter(where), limit=2)
        for s in (lite, pg)
    ]
    assert signals[0] == signals[1] and signals[0].known == {"marta", "porto"}


def test_delete_message_on_both(both: tuple[Memory, Memory]) -> None:
    fill(both)
    for mem in both:
        found = mem.search_messages("weather sunny", filters={"user_id": "u1"}, top_k=1)
        (hit,) = found["results"]
        assert hit["content"] == "weather Porto: sunny, 24 degrees"
        deleted = mem.delete(hit["id"])
        assert (deleted["kind"], deleted["event"]) == ("message", "DELETE")
        assert mem.get(hit["id"]) is None
    assert_same(on_both(both, "search_messages", "weather sunny", filters={"user_id": "u1"}))
    assert_same(on_both(both, "search", "weather sunny", filters={"user_id": "u1"},
                        threshold=None, explain=True))  # fmt: skip
