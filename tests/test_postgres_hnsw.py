"""The HNSW option (`vector_index: "hnsw"`): pgvector's index is built and used, and its
recall@10 against the exact search is measured on clustered vectors (as sentence embeddings
are). Exact stays the default."""

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

pytestmark = pytest.mark.postgres

ROWS, CENTRES, QUERIES, K = 6000, 60, 40, 10
MIN_RECALL = 0.95


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    picked = centres[rng.integers(0, len(centres), n)]
    points = picked + rng.normal(0, 0.35, picked.shape).astype(np.float32)
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def fill(url: str, vectors: np.ndarray, sha: str) -> None:
    """Rows written directly (the API's adds would take minutes for this many)."""
    stamp = "2026-01-01T00:00:00.000000+00:00"
    users = ["big" if i % 5 else "other" for i in range(len(vectors))]
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
    with psycopg.connect(postgres_url) as conn:
        indexes = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")
        assert "memories_embedding_hnsw" in {name for (name,) in indexes}
