"""The HNSW option (`vector_index: "hnsw"`): pgvector's indexes (of the memories' and of the
messages' vectors) are built and used, and their recall@10 against the exact search is
measured on clustered vectors (as sentence embeddings are). Exact stays the default."""

from __future__ import annotations

import hashlib
import uuid

import numpy as np
import psycopg
import pytest

from offline_mem import ConfigError, Memory
from offline_mem.store.filters import compile_filters
from offline_mem.store.postgres import PostgresStore
from offline_mem.store.postgres.vectors import vector_literal
from offline_mem.testing import FakeEmbedder
from offline_mem.values import Scope

pytestmark = pytest.mark.postgres

ROWS, CENTRES, QUERIES, K = 6000, 60, 40, 10
MIN_RECALL = 0.95


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    picked = centres[rng.integers(0, len(centres), n)]
    points = picked + rng.normal(0, 0.35, picked.shape).astype(np.float32)
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def fill(url: str, vectors: np.ndarray, sha: str, users: list[str] | None = None) -> None:
    """Rows written directly (the API's adds would take minutes for this many)."""
    stamp = "2026-01-01T00:00:00.000000+00:00"
    users = users or ["big" if i % 5 else "other" for i in range(len(vectors))]
    rows = [
        (str(uuid.UUID(int=i + 1, version=4)), f"memory {i}",
         hashlib.md5(str(i).encode()).hexdigest(), user, f"user_id={user}", stamp, sha,
         vector_literal(v))
        for i, (user, v) in enumerate(zip(users, vectors, strict=True))
    ]  # fmt: skip
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO memories (id, text, hash, user_id, scope, created_at, embedder_sha256,"
            " embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s::vector)",
            rows,
        )


def test_hnsw_recall_at_10_against_exact(postgres_url: str) -> None:
    embedder = FakeEmbedder()
    rng = np.random.default_rng(7)
    centres = rng.normal(0, 1, (CENTRES, 384)).astype(np.float32)
    with Memory({"store": postgres_url}, embedder=embedder):
        pass  # creates the schema
    fill(postgres_url, clustered(rng, ROWS, centres), embedder.identity.sha256)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    exact = PostgresStore.open(postgres_url, embedder=embedder.identity)
    approx = PostgresStore.open(postgres_url, embedder=embedder.identity, vector_index="hnsw")
    try:
        where = compile_filters({"user_id": "big"})
        found = 0
        for query in clustered(rng, QUERIES, centres):
            truth = exact.vector_candidates(query, where, exact.search_filter(where), k=K)
            with approx.snapshot():
                got = approx.vector_candidates(query, where, approx.search_filter(where), k=K)
            assert len(got) == K
            found += len(set(got) & set(truth))
        recall = found / (QUERIES * K)
        plan = "\n".join(
            row[0]
            for row in approx.db.query(
                "EXPLAIN SELECT m.rowid FROM memories m WHERE m.user_id = 'big' "
                "ORDER BY m.embedding <=> %s::vector LIMIT 10",
                (vector_literal(query),),
            )
        )
    finally:
        exact.close()
        approx.close()
    print(f"hnsw recall@{K}: {recall:.3f} over {QUERIES} queries, {ROWS} rows")
    assert "memories_embedding_hnsw" in plan  # the index is what answered
    assert recall >= MIN_RECALL


def fill_messages(url: str, vectors: np.ndarray) -> set[int]:
    """Messages written directly, every 50th a system message (no vector: never a hit); the
    seqs of those."""
    stamp = "2026-01-01T00:00:00.000000+00:00"
    rows = []
    for i, v in enumerate(vectors):
        user = "big" if i % 5 else "other"
        system = i % 50 == 1
        rows.append((str(uuid.UUID(int=i + 1, version=4)), Scope(user).key, user,
                     "system" if system else "user", f"message {i}", stamp,
                     None if system else vector_literal(v)))  # fmt: skip
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO messages (id, scope, user_id, role, content, created_at, embedding)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s::vector)",
            rows,
        )
        found = cur.execute("SELECT seq FROM messages WHERE embedding IS NULL").fetchall()
    return {seq for (seq,) in found}


def test_hnsw_recall_at_10_for_messages(postgres_url: str) -> None:
    embedder = FakeEmbedder()
    rng = np.random.default_rng(11)
    centres = rng.normal(0, 1, (CENTRES, 384)).astype(np.float32)
    with Memory({"store": postgres_url}, embedder=embedder):
        pass  # creates the schema
    unindexed = fill_messages(postgres_url, clustered(rng, ROWS, centres))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE messages")
    exact = PostgresStore.open(postgres_url, embedder=embedder.identity)
    approx = PostgresStore.open(postgres_url, embedder=embedder.identity, vector_index="hnsw")
    scope = Scope("big")
    try:
        found = 0
        for query in clustered(rng, QUERIES, centres):
            truth = exact.message_candidates(query, scope, k=K)
            with approx.snapshot():
                got = approx.message_candidates(query, scope, k=K)
            assert len(got) == K and not set(got) & unindexed
            found += len(set(got) & set(truth))
            # the same similarities for the rows both found
            assert all(abs(got[s] - truth[s]) < 1e-6 for s in set(got) & set(truth))
        recall = found / (QUERIES * K)
        plan = "\n".join(
            row[0]
            for row in approx.db.query(
                "EXPLAIN SELECT m.seq FROM messages m WHERE m.embedding IS NOT NULL "
                "AND m.user_id = 'big' ORDER BY m.embedding <=> %s::vector LIMIT 10",
                (vector_literal(query),),
            )
        )
    finally:
        exact.close()
        approx.close()
    print(f"hnsw message recall@{K}: {recall:.3f} over {QUERIES} queries, {ROWS} rows")
    assert "messages_embedding_hnsw" in plan  # the index is what answered
    assert recall >= MIN_RECALL


def test_an_exact_search_never_goes_through_an_hnsw_index(postgres_url: str) -> None:
    """Another server (or an earlier open) built the HNSW indexes: a server configured exact
    still ranks every row its filter selects (planned through the index, a scope of 10 rows
    got 1 of them: the index's nearest rows overall, filtered), and one configured HNSW ranks
    a narrow filter's rows exactly."""
    embedder = FakeEmbedder()
    rng = np.random.default_rng(5)
    centres = rng.normal(0, 1, (CENTRES, 384)).astype(np.float32)
    with Memory({"store": postgres_url}, embedder=embedder):
        pass
    vectors = clustered(rng, ROWS, centres)
    users = [f"u{i % 600}" for i in range(ROWS)]  # 600 scopes of 10
    fill(postgres_url, vectors, embedder.identity.sha256, users)
    fill_messages(postgres_url, vectors)
    PostgresStore.open(postgres_url, embedder=embedder.identity, vector_index="hnsw").close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        ids = dict(conn.execute("SELECT text, rowid FROM memories").fetchall())
    exact = PostgresStore.open(postgres_url, embedder=embedder.identity)
    approx = PostgresStore.open(postgres_url, embedder=embedder.identity, vector_index="hnsw")
    # as on a large table (a 10-row scope of 100,000 rows went through the index and its scan
    # stopped at 20,000 tuples, docs/results/storage_scale.md): the planner made to prefer the
    # index, and its scan stopped at 1,000 of these 6,000 rows
    approx.db.execute("SET enable_sort = off")
    approx.db.execute("SET hnsw.max_scan_tuples = 1000")
    try:
        for query in clustered(rng, 10, centres):
            where = compile_filters({"user_id": "u7"})
            mine = [i for i, user in enumerate(users) if user == "u7"]
            want = sorted(mine, key=lambda i: -float(vectors[i] @ query))
            # a narrow filter is ranked exactly with the HNSW option too
            for store in (exact, approx):
                got = store.vector_candidates(query, where, store.search_filter(where), k=K)
                assert list(got) == [ids[f"memory {i}"] for i in want]
            said = exact.message_candidates(query, Scope("other"), k=K)
            assert len(said) == K
            (best,) = exact.db.query_one(
                "SELECT max(1 - (embedding <=> %s::vector)) FROM messages WHERE user_id = 'other'",
                (vector_literal(query),),
            )
            assert max(said.values()) == pytest.approx(best, abs=1e-6)
    finally:
        exact.close()
        approx.close()


def test_hnsw_is_refused_for_a_memory_file(db_path: str) -> None:
    with pytest.raises(ConfigError, match="needs a PostgreSQL"):
        Memory({"path": db_path, "vector_index": "hnsw"}, embedder=FakeEmbedder())
    with pytest.raises(ConfigError, match="vector_index"):
        Memory({"path": db_path, "vector_index": "ivf"}, embedder=FakeEmbedder())


def test_a_memory_searches_through_the_index(postgres_url: str) -> None:
    config = {"store": postgres_url, "vector_index": "hnsw"}
    with Memory(config, embedder=FakeEmbedder()) as memory:
        for text in ("I keep bees", "I like green tea", "My sister lives in Porto"):
            memory.add(text, user_id="u1", infer=False)
        found = memory.search("bees", filters={"user_id": "u1"}, include_messages=False)
        assert found["results"][0]["memory"] == "I keep bees"
        said = memory.search_messages("green tea", filters={"user_id": "u1"}, top_k=1)
        assert [hit["content"] for hit in said["results"]] == ["I like green tea"]
    with psycopg.connect(postgres_url) as conn:
        indexes = conn.execute("SELECT indexname FROM pg_indexes")
        names = {name for (name,) in indexes}
        assert {"memories_embedding_hnsw", "messages_embedding_hnsw"} <= names
