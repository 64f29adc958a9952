"""The test server itself: a real PostgreSQL with pgvector, as scripts/test starts it. Proves what
the PostgreSQL store relies on (docs/design/postgresql.md)."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from postgres_server import PostgresServer

pytestmark = pytest.mark.postgres


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(v) for v in vector.astype(np.float32).tolist()) + "]"


def test_pgvector_cosine_search_and_hnsw_on_384_dims(postgres_url: str) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, e vector(384) NOT NULL)")
        with conn.cursor().copy("COPY t (id, e) FROM STDIN") as copy:
            for i, vector in enumerate(vectors):
                copy.write_row((i, _literal(vector)))
        query = _literal(vectors[42])
        exact = conn.execute(
            "SELECT id, 1 - (e <=> %s::vector) FROM t ORDER BY e <=> %s::vector, id LIMIT 5",
            (query, query),
        ).fetchall()
        expected = np.argsort(-(vectors @ vectors[42]), kind="stable")[:5]
        assert [row[0] for row in exact] == expected.tolist()
        assert exact[0][1] == pytest.approx(1.0, abs=1e-6)
        conn.execute("CREATE INDEX t_hnsw ON t USING hnsw (e vector_cosine_ops)")
        conn.execute("SET enable_seqscan = off")
        plan = " ".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT id FROM t ORDER BY e <=> %s::vector LIMIT 5", (query,)
        ).fetchall())  # fmt: skip
        assert "t_hnsw" in plan
        found = conn.execute(
            "SELECT id FROM t ORDER BY e <=> %s::vector LIMIT 1", (query,)
        ).fetchone()
        assert found == (42,)


def test_the_server_listens_on_loopback_with_a_password(postgres_server: PostgresServer) -> None:
    with psycopg.connect(postgres_server.url(tcp=True)) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(postgres_server.url(tcp=True, password="wrong")).close()
