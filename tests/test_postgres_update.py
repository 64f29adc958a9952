"""`update` on PostgreSQL does what it does on SQLite: the same calls on both stores give the
same memory, history and search results, in one transaction (an injected failure leaves the
memory as it was)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from offline_mem import Memory, MemoryNotFoundError
from offline_mem.testing import FakeEmbedder, FakeEntities

pytestmark = pytest.mark.postgres

STAMPS = ("id", "created_at", "updated_at", "valid_from")


@pytest.fixture
def both(postgres_url: str, db_path: str) -> Iterator[tuple[Memory, Memory]]:
    lite = Memory({"path": db_path}, embedder=FakeEmbedder(), entities=FakeEntities())
    pg = Memory({"store": postgres_url}, embedder=FakeEmbedder(), entities=FakeEntities(),
                analyzer=lite.analyzer)  # fmt: skip
    try:
        yield lite, pg
    finally:
        pg.close()
        lite.close()


def comparable(item: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if item is None else {k: v for k, v in item.items() if k not in STAMPS}


def test_update_text_metadata_and_expiry_as_on_sqlite(both: tuple[Memory, Memory]) -> None:
    seen: list[list[Any]] = []
    for mem in both:
        ids = [
            mem.add(text, user_id="u1", infer=False, metadata={"a": 1})["results"][0]["id"]
            for text in ("Marta lives in Porto", "I like green tea", "Bruno plays cello")
        ]
        steps: list[Any] = [
            mem.update(ids[0], "Marta lives in Lisbon with Bruno"),
            mem.update(ids[1], metadata={"b": True}),
            mem.update(ids[1], data="I like black tea", expiration_date="2099-01-01"),
            mem.update(ids[2], expiration_date=None),
            mem.get(ids[0]),
            mem.get(ids[1]),
        ]
        history = [
            [(h["event"], h["old_memory"], h["new_memory"]) for h in mem.history(i)] for i in ids
        ]
        search = mem.search("Who lives in Lisbon? tea", filters={"user_id": "u1"},
                            threshold=None, explain=True, include_messages=False)  # fmt: skip
        ranked = [(r["memory"], r["score_details"]["bm25_score"]) for r in search["results"]]
        by_entity = mem.search("Bruno", filters={"user_id": "u1"}, threshold=None,
                               include_messages=False)["results"]  # fmt: skip
        with pytest.raises(MemoryNotFoundError):
            mem.update("00000000-0000-4000-8000-000000000000", "nothing")
        seen.append([[comparable(s) for s in steps], history, ranked,
                     [r["memory"] for r in by_entity]])  # fmt: skip
    lite, pg = seen
    assert pg == lite
    assert lite[0][4]["memory"] == "Marta lives in Lisbon with Bruno"


def test_an_update_that_fails_changes_nothing(
    both: tuple[Memory, Memory], postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg = both[1]
    memory_id = pg.add("Marta lives in Porto", user_id="u1", infer=False)["results"][0]["id"]
    from offline_mem.store.postgres import writes

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected after the row and its keywords changed")

    monkeypatch.setattr(writes.PgWrites, "_link_entities", fail)
    with pytest.raises(RuntimeError, match="injected"):
        pg.update(memory_id, "Marta lives in Lisbon")
    got = pg.get(memory_id)
    assert got is not None and got["memory"] == "Marta lives in Porto"
    assert [h["event"] for h in pg.history(memory_id)] == ["ADD"]
    with psycopg.connect(postgres_url) as conn:
        terms = conn.execute("SELECT term FROM keyword_postings ORDER BY term").fetchall()
    assert [t for (t,) in terms] == sorted(["marta", "live", "porto"])
