"""Vectors as pgvector takes them: a text literal cast to `vector`, exact to the float32; and
the nearest rows through pgvector's HNSW index (the `vector_index: "hnsw"` option)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .connection import PgDatabase

# The HNSW search's candidate list: pgvector's ef_search, at least this and twice the k asked
HNSW_EF_SEARCH = 100
# A filter that selects at most this many rows is ranked exactly even with the HNSW option:
# through the index, a 10-row scope among 100,000 rows got recall@10 0.185 at 2.5x the time
# (docs/results/storage_scale.md), and exact over 2,000 rows is a few milliseconds.
HNSW_EXACT_UP_TO = 2000

# The option's indexes, one per table with vectors; a NULL vector (an unindexed message) is
# left out of its index by pgvector.
HNSW_INDEXES = (
    "CREATE INDEX IF NOT EXISTS memories_embedding_hnsw ON memories "
    "USING hnsw (embedding vector_cosine_ops)",
    "CREATE INDEX IF NOT EXISTS messages_embedding_hnsw ON messages "
    "USING hnsw (embedding vector_cosine_ops)",
)


def vector_literal(vector: np.ndarray) -> str:
    """'[x,y,...]': each float32 written as the shortest decimal that reads back to it."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ",".join(repr(v) for v in values) + "]"


def exact_nearest(
    db: PgDatabase,
    table: str,
    key: str,
    vector: np.ndarray,
    condition: tuple[str, list[Any]],
    *,
    k: int,
) -> dict[int, float]:
    """`key` -> cosine similarity of the k nearest rows of `table` (alias m) passing the
    condition, exactly: every selected row's distance, ties by `key`. The distances are taken
    in a materialized step so that the planner cannot answer through an HNSW index that another
    server (or an earlier `vector_index: "hnsw"` open) built: with ORDER BY d, key it would
    read the index's nearest rows globally, filter them, and return fewer than k (measured: 1
    row of a scope's 10, benchmarks/storage/postgres_scale.py)."""
    literal = vector_literal(vector)
    sql, params = condition
    rows = db.query(
        f"WITH scored AS MATERIALIZED (SELECT m.{key} AS key, m.embedding <=> %s::vector AS d "
        f"FROM {table} m WHERE {sql}) SELECT key, d FROM scored ORDER BY d, key LIMIT %s",
        (literal, *params, int(k)),
    )
    return {int(found): 1.0 - float(d) for found, d in rows}


def hnsw_nearest(
    db: PgDatabase,
    table: str,
    key: str,
    vector: np.ndarray,
    condition: tuple[str, list[Any]],
    *,
    k: int,
) -> dict[int, float]:
    """`key` -> cosine similarity of the k nearest rows of `table` (alias m) passing the
    condition, by pgvector's HNSW index: approximate; a filter that selects at most
    HNSW_EXACT_UP_TO rows is ranked exactly. The scan goes on past
    filtered-out rows (iterative_scan) so a selective filter still fills k. Ordered by distance
    alone, as the index needs; ties are broken by `key` afterwards."""
    sql, params = condition
    (selected,) = db.query_one(
        f"SELECT count(*) FROM (SELECT 1 FROM {table} m WHERE {sql} LIMIT %s) AS few",
        (*params, HNSW_EXACT_UP_TO + 1),
    )
    if selected <= HNSW_EXACT_UP_TO:
        return exact_nearest(db, table, key, vector, condition, k=k)
    literal = vector_literal(vector)
    with db.atomic():  # SET LOCAL lasts to the end of this (or the search's) transaction
        db.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            (str(max(HNSW_EF_SEARCH, 2 * int(k))),),
        )
        rows = db.query(
            f"WITH hits AS MATERIALIZED (SELECT m.{key} AS key, m.embedding <=> %s::vector AS d "
            f"FROM {table} m WHERE {sql} ORDER BY m.embedding <=> %s::vector LIMIT %s) "
            "SELECT key, d FROM hits ORDER BY d, key",
            (literal, *params, literal, int(k)),
        )
    return {int(found): 1.0 - float(d) for found, d in rows}
