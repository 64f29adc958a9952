"""The keyword index: BM25 over lemmatised terms, with each partition's own corpus statistics.

Tables (all in the memory file, written in the caller's transaction):
  keyword_docs(memory_rowid, partition, length)       one row per indexed memory
  keyword_postings(partition, term, memory_rowid, tf) the inverted index
  keyword_terms(partition, term, df)                  document frequency per partition
  keyword_partitions(partition, docs, total_length)   N and total length per partition

A partition is a user_id ('' for memories without one), as for the vectors, so the statistics are
the user's own corpus and a query reads only that user's postings. BM25 is Okapi BM25 (k1=1.5,
b=0.75, the defaults of rank-bm25's BM25Okapi). The idf is Lucene's,
ln(1 + (N - df + 0.5) / (df + 0.5)), which is always positive: Okapi's ln((N - df + 0.5) /
(df + 0.5)) is zero or negative for any term in half the documents or more, so in a small scope
(a user with two memories) a word found in one of them would carry no evidence at all.
`okapi_idf` is kept so a test can check the rest of the formula against rank-bm25's BM25Okapi.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .db import Database
from .nlp import term_frequencies

K1 = 1.5
B = 0.75


def partition_of(user_id: str | None) -> str:
    return user_id or ""


def index_terms(db: Database, rowid: int, partition: str, terms: Sequence[str]) -> None:
    counts = term_frequencies(terms)
    length = sum(counts.values())
    db.execute(
        "INSERT INTO keyword_docs (memory_rowid, partition, length) VALUES (?, ?, ?)",
        (rowid, partition, length),
    )
    if counts:
        db.executemany(
            "INSERT INTO keyword_postings (partition, term, memory_rowid, tf) VALUES (?, ?, ?, ?)",
            [(partition, term, rowid, tf) for term, tf in counts.items()],
        )
        db.executemany(
            "INSERT INTO keyword_terms (partition, term, df) VALUES (?, ?, 1) "
            "ON CONFLICT(partition, term) DO UPDATE SET df = df + 1",
            [(partition, term) for term in counts],
        )
    db.execute(
        "INSERT INTO keyword_partitions (partition, docs, total_length) VALUES (?, 1, ?) "
        "ON CONFLICT(partition) DO UPDATE SET docs = docs + 1, "
        "total_length = total_length + excluded.total_length",
        (partition, length),
    )


def unindex(db: Database, rowid: int) -> None:
    row = db.query_one(
        "SELECT partition, length FROM keyword_docs WHERE memory_rowid = ?", (rowid,)
    )
    if row is None:
        return
    partition, length = row
    terms = [r[0] for r in db.query(
        "SELECT term FROM keyword_postings WHERE memory_rowid = ?", (rowid,)
    )]  # fmt: skip
    if terms:
        db.executemany(
            "UPDATE keyword_terms SET df = df - 1 WHERE partition = ? AND term = ?",
            [(partition, term) for term in terms],
        )
        db.execute("DELETE FROM keyword_terms WHERE partition = ? AND df <= 0", (partition,))
        db.execute("DELETE FROM keyword_postings WHERE memory_rowid = ?", (rowid,))
    db.execute("DELETE FROM keyword_docs WHERE memory_rowid = ?", (rowid,))
    db.execute(
        "UPDATE keyword_partitions SET docs = docs - 1, total_length = total_length - ? "
        "WHERE partition = ?",
        (length, partition),
    )
    db.execute("DELETE FROM keyword_partitions WHERE partition = ? AND docs <= 0", (partition,))


@dataclass(frozen=True)
class QueryStats:
    docs: int
    avg_length: float
    idf: dict[str, float]  # only terms that occur in the partition
    # The BM25 of an average-length document holding each query term once — terms absent from
    # the partition included, at the idf of df = 0 — the scale on which a keyword score is
    # reported in [0, 1]. Counting absent terms matters: otherwise "Do we still have the dog?"
    # gives any memory that mentions a dog the full keyword score (measured: paraphrase recall@5
    # 0.72 -> 0.88 on benchmarks/retrieval).
    ideal: float = 0.0


def lucene_idf(docs: int, df: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def okapi_idf(docs: int, df: int) -> float:
    return math.log((docs - df + 0.5) / (df + 0.5))


IdfFunction = Callable[[int, int], float]


def query_stats(
    db: Database, terms: Sequence[str], partition: str | None, *, idf: IdfFunction = lucene_idf
) -> QueryStats:
    """Corpus statistics for the query terms: of one partition, or of all when None."""
    unique = sorted(set(terms))
    if partition is None:
        totals = db.query_one("SELECT sum(docs), sum(total_length) FROM keyword_partitions")
        term_sql = "SELECT term, sum(df) FROM keyword_terms WHERE term IN ({}) GROUP BY term"
        params: list[Any] = []
    else:
        totals = db.query_one(
            "SELECT docs, total_length FROM keyword_partitions WHERE partition = ?", (partition,)
        )
        term_sql = "SELECT term, df FROM keyword_terms WHERE partition = ? AND term IN ({})"
        params = [partition]
    docs, total = totals or (0, 0)
    docs, total = int(docs or 0), int(total or 0)
    if not docs or not unique:
        return QueryStats(0, 0.0, {})
    marks = ", ".join("?" for _ in unique)
    dfs = dict(db.query(term_sql.format(marks), (*params, *unique)))
    weights = {term: idf(docs, int(df)) for term, df in dfs.items() if df}
    ideal = sum(weights.values()) + (len(unique) - len(weights)) * idf(docs, 0)
    return QueryStats(docs=docs, avg_length=total / docs, idf=weights, ideal=ideal)


def bm25_scores(
    db: Database,
    stats: QueryStats,
    partition: str | None,
    where_sql: str,
    where_params: Sequence[Any],
    *,
    limit: int | None = None,
    only_rowids: Sequence[int] | None = None,
) -> dict[int, float]:
    """BM25 of the memories passing `where_sql` (over alias m) that hold a query term:
    the best `limit`, or exactly those in `only_rowids`."""
    weighted = {t: w for t, w in stats.idf.items() if w != 0}
    if not weighted or stats.avg_length <= 0:
        return {}
    values = ", ".join("(?, ?)" for _ in weighted)
    # bound in the order the placeholders appear in the SQL text
    params: list[Any] = [x for item in weighted.items() for x in item]
    params += [K1 + 1, K1, B, B, stats.avg_length]
    partition_sql = ""
    if partition is not None:
        partition_sql = "kp.partition = ? AND "
        params.append(partition)
    restrict = ""
    if only_rowids is not None:
        if not only_rowids:
            return {}
        restrict = f" AND kp.memory_rowid IN ({', '.join('?' for _ in only_rowids)})"
    sql = (
        f"WITH q(term, idf) AS (VALUES {values}) "
        "SELECT kp.memory_rowid, sum(q.idf * kp.tf * ? / "
        "(kp.tf + ? * (1 - ? + ? * kd.length / ?))) AS score "
        "FROM q JOIN keyword_postings kp ON "
        f"{partition_sql}kp.term = q.term "
        "JOIN keyword_docs kd ON kd.memory_rowid = kp.memory_rowid "
        "JOIN memories m ON m.rowid = kp.memory_rowid "
        f"WHERE {where_sql}{restrict} "
        "GROUP BY kp.memory_rowid ORDER BY score DESC, kp.memory_rowid"
    )
    params += list(where_params)
    if only_rowids is not None:
        params += list(only_rowids)
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return {int(rowid): float(score) for rowid, score in db.query(sql, params)}
