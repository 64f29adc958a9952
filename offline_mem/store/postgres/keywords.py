"""The keyword index's writes in PostgreSQL: the same postings tables and statistics as the
SQLite store (store/keyword_index.py), so BM25 scores are the same numbers on both stores
(search over them: bm25.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..keyword_index import term_frequencies
from .connection import PgDatabase


@dataclass(frozen=True)
class PgKeywordTables:
    prefix: str  # "" for memories, "message_" for messages
    key: str  # memory_rowid / message_seq
    owner: str  # the indexed rows' table, and its key
    owner_key: str


MEMORY_KEYWORDS = PgKeywordTables("", "memory_rowid", "memories", "rowid")
MESSAGE_KEYWORDS = PgKeywordTables("message_", "message_seq", "messages", "seq")


def index_terms(
    db: PgDatabase, rowid: int, partition: str, terms: Sequence[str], t: PgKeywordTables
) -> None:
    counts = term_frequencies(terms)
    length = sum(counts.values())
    p = t.prefix
    # The partition's row first: its lock orders every keyword write of the partition (adds,
    # updates and deletes of one user's rows take the term rows' locks one after another, so
    # they cannot deadlock on them).
    db.execute(
        f"INSERT INTO {p}keyword_partitions AS k (partition, docs, total_length) "
        "VALUES (%s, 1, %s) ON CONFLICT (partition) DO UPDATE SET docs = k.docs + 1, "
        "total_length = k.total_length + excluded.total_length",
        (partition, length),
    )
    db.execute(
        f"INSERT INTO {p}keyword_docs ({t.key}, partition, length) VALUES (%s, %s, %s)",
        (rowid, partition, length),
    )
    ordered = sorted(counts)
    db.executemany(
        f"INSERT INTO {p}keyword_postings (partition, term, {t.key}, tf) VALUES (%s, %s, %s, %s)",
        [(partition, term, rowid, counts[term]) for term in ordered],
    )
    db.executemany(
        f"INSERT INTO {p}keyword_terms AS k (partition, term, df) VALUES (%s, %s, 1) "
        "ON CONFLICT (partition, term) DO UPDATE SET df = k.df + 1",
        [(partition, term) for term in ordered],
    )


# Rows per statement of index_many: arrays of this many elements are a few MB of parameters.
_ROWS_PER_STATEMENT = 50_000


def index_many(
    db: PgDatabase, docs: Sequence[tuple[int, str, Sequence[str]]], t: PgKeywordTables
) -> None:
    """index_terms of many documents (key, partition, terms), for an import: a statement per
    table, not per row (an import of 10,000 memories ran ~400,000 statements and took about
    twice as long; benchmarks/storage/postgres_full.py). The same rows, locked in the same
    order: the partitions' rows first, sorted as unindex sorts them, then the terms' rows."""
    partitions: dict[str, list[int]] = {}
    df: dict[tuple[str, str], int] = {}
    doc_rows, postings = [], []
    for key, partition, terms in docs:
        counts = term_frequencies(terms)
        length = sum(counts.values())
        totals = partitions.setdefault(partition, [0, 0])
        totals[0] += 1
        totals[1] += length
        doc_rows.append((key, partition, length))
        for term, tf in counts.items():
            postings.append((partition, term, key, tf))
            df[partition, term] = df.get((partition, term), 0) + 1
    p = t.prefix
    ordered = sorted(partitions)
    _unnest(db,
        f"INSERT INTO {p}keyword_partitions AS k (partition, docs, total_length) "
        "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS u(p, n, total) "
        'ORDER BY p COLLATE "C" ON CONFLICT (partition) DO UPDATE SET docs = k.docs + '
        "excluded.docs, total_length = k.total_length + excluded.total_length",
        [(name, *partitions[name]) for name in ordered],
    )  # fmt: skip
    _unnest(db,
        f"INSERT INTO {p}keyword_docs ({t.key}, partition, length) "
        "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::bigint[])",
        doc_rows,
    )  # fmt: skip
    _unnest(db,
        f"INSERT INTO {p}keyword_postings (partition, term, {t.key}, tf) "
        "SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::bigint[])",
        postings,
    )  # fmt: skip
    _unnest(db,
        f"INSERT INTO {p}keyword_terms AS k (partition, term, df) "
        "SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS u(p, term, n) "
        'ORDER BY p COLLATE "C", term COLLATE "C" '
        "ON CONFLICT (partition, term) DO UPDATE SET df = k.df + excluded.df",
        [(partition, term, n) for (partition, term), n in sorted(df.items())],
    )  # fmt: skip


def _unnest(db: PgDatabase, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
    """Run an INSERT ... SELECT FROM unnest(one array per column) over the rows, in slices."""
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        part = rows[start : start + _ROWS_PER_STATEMENT]
        db.execute(sql, [list(column) for column in zip(*part, strict=True)])


def unindex(db: PgDatabase, rowids: Sequence[int], t: PgKeywordTables) -> None:
    """Remove rows from the index and their share of its statistics."""
    if not rowids:
        return
    p = t.prefix
    keys = [int(r) for r in rowids]
    parts = [r[0] for r in db.query(
        f"SELECT DISTINCT partition FROM {p}keyword_docs WHERE {t.key} = ANY(%s)", (keys,)
    )]  # fmt: skip
    # the partitions' rows first, in one order (see index_terms)
    db.execute(
        f"SELECT 1 FROM {p}keyword_partitions WHERE partition = ANY(%s) "
        'ORDER BY partition COLLATE "C" FOR UPDATE',
        (parts,),
    )
    db.execute(
        f"UPDATE {p}keyword_terms k SET df = k.df - d.n FROM (SELECT partition, term, count(*) n "
        f"FROM {p}keyword_postings WHERE {t.key} = ANY(%s) GROUP BY partition, term) d "
        "WHERE k.partition = d.partition AND k.term = d.term",
        (keys,),
    )
    db.execute(f"DELETE FROM {p}keyword_terms WHERE partition = ANY(%s) AND df <= 0", (parts,))
    db.execute(
        f"UPDATE {p}keyword_partitions k SET docs = k.docs - d.n, "
        "total_length = k.total_length - d.total FROM (SELECT partition, count(*) n, "
        f"sum(length) total FROM {p}keyword_docs WHERE {t.key} = ANY(%s) GROUP BY partition) d "
        "WHERE k.partition = d.partition",
        (keys,),
    )
    db.execute(
        f"DELETE FROM {p}keyword_partitions WHERE partition = ANY(%s) AND docs <= 0", (parts,)
    )
    # postings go with their docs row (ON DELETE CASCADE)
    db.execute(f"DELETE FROM {p}keyword_docs WHERE {t.key} = ANY(%s)", (keys,))
