"""The in-memory vector caches (vector_cache.py) against the exact scan in SQL.

A cached partition must give exactly what sqlite-vec's distance over the rows gives: the same
top-k by cosine under every filter, after every kind of write by this connection or another
one, after a rolled-back write and after the change log was pruned, for memories' and messages'
vectors alike. Each test compares a Memory whose caches hold every partition (min_rows=1) with a
second Memory on the same file and no cache. The embedder gives each text a random unit vector,
so no two scores tie.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from offline_mem import Memory
from offline_mem.pinned.embedder import Embedder
from offline_mem.store.filters import compile_filters
from offline_mem.store.vector_cache import (
    MEMORY_VECTORS,
    MESSAGE_VECTORS,
    VectorCache,
    read_partition,
)
from offline_mem.values import EmbedderIdentity

DIM = 48


class RandomEmbedder(Embedder):
    """A unit vector drawn from a seed made of the text: stable, tie-free."""

    def __init__(self) -> None:
        self.identity = EmbedderIdentity(name="random", sha256="r" * 64, dimension=DIM)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            row = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows)


def open_memory(path: str, *, cached: bool) -> Memory:
    memory = Memory(
        {"path": path, "nlp": None, "vector_cache_mb": 64 if cached else 0},
        embedder=RandomEmbedder(),
    )
    if cached:
        memory.store.vector_cache = VectorCache(memory.store.db, min_rows=1)
        memory.store.message_vector_cache = VectorCache(
            memory.store.db, MESSAGE_VECTORS, min_rows=1
        )
    return memory


@pytest.fixture
def pair(tmp_path) -> Iterator[tuple[Memory, Memory]]:
    path = str(tmp_path / "m.db")
    cached, plain = open_memory(path, cached=True), open_memory(path, cached=False)
    fill(cached, "u1", 300)
    fill(cached, "u1", 5, start=5000, metadata={"tag": "rare"})
    fill(cached, "u2", 40)
    fill(cached, None, 30, agent_id="a1")
    yield cached, plain
    cached.close()
    plain.close()


def fill(
    memory: Memory,
    user: str | None,
    count: int,
    start: int = 0,
    metadata: dict[str, Any] | None = None,
    **ids: Any,
) -> list[str]:
    messages = [
        {"role": "user", "content": f"note {start + i} of {user} about topic {i % 7}"}
        for i in range(count)
    ]
    scope = {"user_id": user, **ids} if user else ids
    result = memory.add(messages, infer=False, metadata=metadata or {"tag": "common"}, **scope)
    return [r["id"] for r in result["results"]]


def knn(memory: Memory, text: str, filters: dict[str, Any], k: int = 10, **kw: Any):
    store = memory.store
    where = compile_filters(filters)
    condition = store.search_filter(where, **kw)
    vector = memory.embedder.embed(text)
    return list(store.vector_candidates(vector, where, condition, k=k).items())


def assert_same(cached: Memory, plain: Memory, filters: dict[str, Any], **kw: Any) -> None:
    for text in ("topic 3", "note 17 of u1", "something else entirely", "topic 6 again"):
        got, want = knn(cached, text, filters, **kw), knn(plain, text, filters, **kw)
        assert [r for r, _ in got] == [r for r, _ in want], (text, filters)
        assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
        hits = cached.search(text, filters=filters, top_k=8, threshold=None)["results"]
        expected = plain.search(text, filters=filters, top_k=8, threshold=None)["results"]
        assert [(h["id"], round(h["score"], 4)) for h in hits] == [
            (h["id"], round(h["score"], 4)) for h in expected
        ]


FILTERS = [
    {"user_id": "u1"},
    {"user_id": "u2"},
    {"user_id": "u1", "tag": "common"},
    # so narrow that the first fetch holds too few: the cache ranks the filter's rows instead
    {"user_id": "u1", "tag": "rare"},
]


@pytest.mark.parametrize("filters", FILTERS, ids=range(len(FILTERS)))
def test_cached_knn_is_the_exact_scan(pair, filters) -> None:
    cached, plain = pair
    assert_same(cached, plain, filters)
    assert cached.store.vector_cache.rows("u1") is not None  # the cache did answer
    assert cached.store.message_vector_cache.rows("u1") is not None


def test_the_narrow_filter_reaches_the_second_pass(pair) -> None:
    cached, _ = pair
    calls: list[Any] = []
    cache = cached.store.vector_cache
    original = cache.top_among

    def spy(*args: Any) -> Any:
        calls.append(args)
        return original(*args)

    cache.top_among = spy  # type: ignore[method-assign]
    assert len(knn(cached, "topic 3", FILTERS[3])) == 5
    assert calls, "the filter was not narrow enough to need the second pass"


def test_writes_of_both_connections_are_followed_without_reloading(pair) -> None:
    cached, plain = pair
    assert_same(cached, plain, {"user_id": "u1"})
    loads = cached.store.vector_cache.loads
    ids = [m["id"] for m in cached.get_all(filters={"user_id": "u1"}, top_k=400)["results"]]
    cached.delete(ids[0])
    cached.update(ids[1], "note rewritten about topic 3")
    plain.delete(ids[2])  # another connection, as another process would
    plain.update(ids[3], "another rewrite about topic 6")
    fill(plain, "u1", 25, start=1000)
    fill(cached, "u1", 5, start=2000)
    assert_same(cached, plain, {"user_id": "u1"})
    assert cached.store.vector_cache.loads == loads
    rows = cached.store.vector_cache.rows("u1")
    assert rows is not None and len(rows) == 305 - 2 + 30


def test_superseded_and_expired_memories_stay_out_as_in_the_scan(pair) -> None:
    cached, plain = pair
    ids = [m["id"] for m in cached.get_all(filters={"user_id": "u1"}, top_k=400)["results"]]
    for memory_id in ids[:40]:
        cached.update(memory_id, expiration_date="2001-01-01")
    cached.store.db.execute("UPDATE memories SET state = 'superseded' WHERE id IN (?, ?)",
                            (ids[50], ids[51]))  # fmt: skip
    assert_same(cached, plain, {"user_id": "u1"})
    assert_same(cached, plain, {"user_id": "u1"}, include_expired=True, include_superseded=True)


def test_a_rolled_back_write_is_never_learnt(pair) -> None:
    cached, plain = pair
    assert_same(cached, plain, {"user_id": "u1"})
    db = cached.store.db
    victim = cached.get_all(filters={"user_id": "u1"}, top_k=1)["results"][0]["id"]
    (rowid,) = db.query_one("SELECT rowid FROM memories WHERE id = ?", (victim,))
    other = RandomEmbedder().embed("a vector nobody has").astype(np.float32).tobytes()
    with pytest.raises(RuntimeError), db.atomic():
        db.execute("UPDATE memories SET text = 'changed' WHERE rowid = ?", (rowid,))
        db.execute("UPDATE memory_vectors SET embedding = ? WHERE rowid = ?", (other, rowid))
        # a search inside the transaction would see the uncommitted change: SQL answers it
        assert cached.store.vector_cache.top("u1", np.ones(DIM), 5) is None
        raise RuntimeError("fail the write")
    assert_same(cached, plain, {"user_id": "u1"})
    rows = cached.store.vector_cache.rows("u1")
    stored = db.query_one("SELECT embedding FROM memory_vectors WHERE rowid = ?", (rowid,))[0]
    assert rows is not None and np.allclose(rows[rowid], np.frombuffer(stored, np.float32))


def test_a_pruned_change_log_makes_it_reload(pair) -> None:
    cached, plain = pair
    assert_same(cached, plain, {"user_id": "u1"})
    loads = cached.store.vector_cache.loads
    fill(plain, "u1", 3, start=3000)
    # as if 50,000 newer changes had pushed these out: the cache cannot know what it missed
    plain.store.db.execute(
        "DELETE FROM vector_changes WHERE seq < (SELECT max(seq) - 1 FROM vector_changes)"
    )
    assert_same(cached, plain, {"user_id": "u1"})
    assert cached.store.vector_cache.loads == loads + 1


def test_the_change_log_follows_vector_changes_only(pair) -> None:
    cached, _ = pair
    db = cached.store.db
    before = db.query_one("SELECT max(seq) FROM vector_changes")[0]
    memory_id = cached.get_all(filters={"user_id": "u2"}, top_k=1)["results"][0]["id"]
    cached.update(memory_id, metadata={"x": 1})  # no vector change: no entry
    assert db.query_one("SELECT max(seq) FROM vector_changes")[0] == before
    cached.update(memory_id, "u2 changed text")
    cached.delete(memory_id)
    logged = db.query("SELECT partition FROM vector_changes WHERE seq > ?", (before,))
    assert [p for (p,) in logged] == ["u2", "u2", "u2"]  # update: old and new side; delete


def test_the_reader_reads_each_partitions_rows(pair) -> None:
    cached, _ = pair
    db = cached.store.db
    ids = [m["id"] for m in cached.get_all(filters={"user_id": "u1"}, top_k=400)["results"]]
    for memory_id in ids[::3]:
        cached.delete(memory_id)
    for partition, where in (("u1", "m.user_id = 'u1'"), ("u2", "m.user_id = 'u2'"),
                             ("", "m.user_id IS NULL"), ("nobody", "0")):  # fmt: skip
        rowids, matrix = read_partition(db, MEMORY_VECTORS, partition)
        want = dict(db.query("SELECT v.rowid, v.embedding FROM memory_vectors v JOIN memories m "
                             f"ON m.rowid = v.rowid WHERE {where}"))  # fmt: skip
        assert rowids.tolist() == sorted(want)
        for rowid, row in zip(rowids.tolist(), matrix, strict=True):
            assert row.tobytes() == want[rowid]


def test_message_vectors_are_followed_through_their_log(pair) -> None:
    cached, plain = pair
    assert_same(cached, plain, {"user_id": "u1"})
    cache = cached.store.message_vector_cache
    loads = cache.loads
    messages = cached.search_messages("topic 3", filters={"user_id": "u1"}, top_k=3)["results"]
    cached.delete(messages[0]["id"])  # a message by its id
    raw = cached.get_all(filters={"user_id": "u1"}, top_k=5)["results"]
    plain.delete(raw[0]["id"])  # a raw memory: its verbatim source message goes too
    fill(plain, "u1", 7, start=4000)
    assert_same(cached, plain, {"user_id": "u1"})
    assert cache.loads == loads
    held = cache.rows("u1")
    stored = cached.store.db.query_one("SELECT count(*) FROM messages WHERE user_id = 'u1'")[0]
    assert held is not None and len(held) == stored == 305 - 2 + 7


def test_a_shared_message_vector_is_followed_when_its_memory_changes(pair) -> None:
    cached, plain = pair

    def found(memory: Memory) -> list[list[tuple[str, float]]]:
        return [
            [
                (h["id"], round(h["score"], 5))
                for h in memory.search_messages(text, filters={"user_id": "u1"}, top_k=8)["results"]
            ]
            for text in ("note 3 of u1 about topic 3", "topic 5", "a new text")
        ]

    assert found(cached) == found(plain)
    cache = cached.store.message_vector_cache
    loads = cache.loads
    raw = plain.get_all(filters={"user_id": "u1"}, top_k=5)["results"]
    plain.update(raw[0]["id"], "a new text")  # its message keeps the old vector, as a copy
    plain.delete(raw[1]["id"])  # the memory and its message
    assert found(cached) == found(plain)
    assert cache.loads == loads
    db = cached.store.db
    own = db.query_one("SELECT count(*) FROM message_vectors v JOIN messages m ON m.seq = v.rowid "
                       "WHERE m.user_id = 'u1'")[0]  # fmt: skip
    assert own == 1 and len(cache.rows("u1") or {}) == 305 - 1


def test_a_small_budget_holds_the_most_recent_partition(pair) -> None:
    cached, plain = pair
    cache = VectorCache(cached.store.db, min_rows=1, budget_mb=300 * DIM * 4 * 1.2 / 2**20)
    cached.store.vector_cache = cache
    assert_same(cached, plain, {"user_id": "u1"})
    assert_same(cached, plain, {"user_id": "u2"})  # u1 goes out to make room
    assert cache.rows("u2") is not None and list(cache._held) == ["u2"]
    tiny = VectorCache(cached.store.db, min_rows=1, budget_mb=0.001)
    cached.store.vector_cache = tiny
    assert_same(cached, plain, {"user_id": "u1"})  # too large for it: SQL answers
    assert tiny.rows("u1") is None and tiny.loads == 1


def test_small_partitions_are_left_to_the_scan(pair) -> None:
    cached, plain = pair
    cached.store.vector_cache = VectorCache(cached.store.db, min_rows=100)
    assert_same(cached, plain, {"user_id": "u2"})  # 40 rows
    assert cached.store.vector_cache.rows("u2") is None
    assert cached.store.vector_cache.rows("u1") is not None  # 300 rows


def test_config_rejects_a_bad_budget(tmp_path) -> None:
    from offline_mem.errors import ConfigError

    for bad in (-1, "big", True):
        with pytest.raises(ConfigError, match="vector_cache_mb"):
            Memory({"path": str(tmp_path / "x.db"), "vector_cache_mb": bad, "nlp": None},
                   embedder=RandomEmbedder())  # fmt: skip
