"""BM25 over the PostgreSQL postings tables: the same numbers as the SQLite store's.

The tables and statistics are keyword_index.py's, the formula store/bm25.py's (Okapi BM25 with
Lucene's idf, per partition). Every score returned is computed here in Python from the memory's
own postings, in store/bm25.postings_scores, as in the SQLite store, so a memory gets the same
float on both stores. PostgreSQL only ranks: the top `limit` by its own (float8) sum, then every
row within a rounding margin of the limit-th score is re-scored exactly and the top chosen among
them, so the top is exactly SQLite's (ties by rowid) whatever the summation order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..bm25 import K1, B, Bm25Reads, answer_request, postings_scores
from ..keyword_index import IdfFunction, QueryStats, lucene_idf
from .connection import PgDatabase
from .keywords import PgKeywordTables

Condition = tuple[str, list[Any]]
EXTRA_FETCH = 32  # rows ranked beyond `limit`, so the margin rarely needs a second query


def query_stats(
    db: PgDatabase,
    terms: Sequence[str],
    partition: str | None,
    t: PgKeywordTables,
    *,
    idf: IdfFunction = lucene_idf,
) -> QueryStats:
    """Corpus statistics for the query terms: of one partition, or of all when None."""
    unique = sorted(set(terms))
    p = t.prefix
    if partition is None:
        totals = db.query_one(f"SELECT sum(docs), sum(total_length) FROM {p}keyword_partitions")
        term_sql = f"SELECT term, sum(df) FROM {p}keyword_terms WHERE term = ANY(%s) GROUP BY term"
        params: list[Any] = [unique]
    else:
        totals = db.query_one(
            f"SELECT docs, total_length FROM {p}keyword_partitions WHERE partition = %s",
            (partition,),
        )
        term_sql = f"SELECT term, df FROM {p}keyword_terms WHERE partition = %s AND term = ANY(%s)"
        params = [partition, unique]
    docs, total = totals or (0, 0)
    docs, total = int(docs or 0), int(total or 0)
    if not docs or not unique:
        return QueryStats(0, 0.0, {})
    # in SQLite's order (byte order of the terms: its index), so the sums below add the same
    # floats in the same order
    dfs = {term: int(df) for term, df in db.query(f'{term_sql} ORDER BY term COLLATE "C"', params)}
    found = {term: df for term, df in dfs.items() if df}
    weights = {term: idf(docs, df) for term, df in found.items()}
    ideal = sum(weights.values()) + (len(unique) - len(weights)) * idf(docs, 0)
    return QueryStats(docs=docs, avg_length=total / docs, idf=weights, ideal=ideal, df=found)


def bm25_scores(
    db: PgDatabase,
    stats: QueryStats,
    partition: str | None,
    condition: Condition,
    t: PgKeywordTables,
    *,
    limit: int | None = None,
    only_rowids: Sequence[int] | None = None,
    also_rowids: Sequence[int] = (),
) -> dict[int, float]:
    """As store/bm25.bm25_scores: the best `limit` rows passing `condition` (over alias m of
    the indexed table) that hold a query term, plus those of `also_rowids`; exactly those of
    `only_rowids`; or all of them."""
    return answer_request(
        PG_READS, db, stats, partition, condition, t,
        limit=limit, only_rowids=only_rowids, also_rowids=also_rowids,
    )  # fmt: skip


def _top(
    db: PgDatabase,
    stats: QueryStats,
    weights: dict[str, float],
    partition: str | None,
    condition: Condition,
    limit: int,
    also: Sequence[int],
    t: PgKeywordTables,
) -> dict[int, float]:
    """The best `limit` by exact score (ties by rowid), plus the scores of `also`."""
    # the largest possible score, for the rounding margin (SQL and Python sum in other orders)
    eps = 1e-9 * (1.0 + sum(abs(w) for w in weights.values()) * (K1 + 1))
    fetch = limit + EXTRA_FETCH
    rows = _ranked(db, stats, weights, partition, condition, t, limit=fetch)
    if len(rows) >= limit:
        cutoff = rows[limit - 1][1] - eps
        if len(rows) == fetch and rows[-1][1] > cutoff:  # the margin goes past the fetch
            rows = _ranked(db, stats, weights, partition, condition, t, limit=None, above=cutoff)
        rows = [row for row in rows if row[1] > cutoff]
    kept = {rowid for rowid, _ in rows}
    exact = _exact_scores(db, stats, weights, partition, sorted(kept.union(also)), t)
    top = sorted((item for item in exact.items() if item[0] in kept),
                 key=lambda item: (-item[1], item[0]))[:limit]  # fmt: skip
    return {**dict(top), **{rowid: exact[rowid] for rowid in also if rowid in exact}}


# BM25 of one posting as PostgreSQL sums it; its five parameters are K1 + 1, K1, B, B, avgdl
_POSTING_SCORE = (
    "q.idf * kp.tf * %s::float8 / (kp.tf + %s::float8 * "
    "(1 - %s::float8 + %s::float8 * kd.length / %s::float8))"
)


def _ranked(
    db: PgDatabase,
    stats: QueryStats,
    weights: dict[str, float],
    partition: str | None,
    condition: Condition,
    t: PgKeywordTables,
    *,
    limit: int | None,
    above: float | None = None,
) -> list[tuple[int, float]]:
    """(rowid, BM25 as PostgreSQL sums it) of the rows passing `condition` that hold a query
    term, best first (ties by rowid). Parameters are bound in the order the text shows them."""
    p, key = t.prefix, t.key
    shape = [K1 + 1, K1, B, B, stats.avg_length]
    terms = list(weights)
    params: list[Any] = [*shape, terms, [weights[term] for term in terms]]
    partition_sql = ""
    if partition is not None:
        partition_sql = " AND kp.partition = %s"
        params.append(partition)
    sql, cparams = condition
    params += cparams
    query = (
        f"SELECT kp.{key}, sum({_POSTING_SCORE}) AS score "
        "FROM unnest(%s::text[], %s::float8[]) AS q(term, idf) "
        f"JOIN {p}keyword_postings kp ON kp.term = q.term{partition_sql} "
        f"JOIN {p}keyword_docs kd ON kd.{key} = kp.{key} "
        f"JOIN {t.owner} m ON m.{t.owner_key} = kp.{key} WHERE {sql} GROUP BY kp.{key} "
    )
    if above is not None:
        query += f"HAVING sum({_POSTING_SCORE}) > %s "
        params += [*shape, above]
    query += f"ORDER BY score DESC, kp.{key}"
    if limit is not None:
        query += " LIMIT %s"
        params.append(limit)
    return [(int(rowid), float(score)) for rowid, score in db.query(query, params)]


def _passing(
    db: PgDatabase, rowids: Sequence[int], condition: Condition, t: PgKeywordTables
) -> set[int]:
    """Which of the rowids pass the condition (primary-key lookups)."""
    if not rowids:
        return set()
    sql, params = condition
    rows = db.query(
        f"SELECT m.{t.owner_key} FROM {t.owner} m WHERE m.{t.owner_key} = ANY(%s) AND {sql}",
        ([int(r) for r in rowids], *params),
    )
    return {int(row[0]) for row in rows}


def _exact_scores(
    db: PgDatabase,
    stats: QueryStats,
    weights: dict[str, float],
    partition: str | None,
    rowids: Sequence[int],
    t: PgKeywordTables,
) -> dict[int, float]:
    """BM25 over every weighted term of the given rows, from their postings, summed in term
    order: store/bm25.postings_scores, as the SQLite store scores them."""
    if not rowids:
        return {}
    terms = sorted(weights)
    p, key = t.prefix, t.key
    params: list[Any] = [terms, [int(r) for r in rowids]]
    partition_sql = ""
    if partition is not None:
        partition_sql = " AND kd.partition = %s"
        params.append(partition)
    rows = db.query(
        f"SELECT kd.{key}, kd.length, kp.term, kp.tf FROM {p}keyword_docs kd "
        f"JOIN {p}keyword_postings kp ON kp.partition = kd.partition "
        f"AND kp.term = ANY(%s) AND kp.{key} = kd.{key} "
        f"WHERE kd.{key} = ANY(%s){partition_sql}",
        params,
    )
    return postings_scores(rows, weights, stats.avg_length)


PG_READS = Bm25Reads(_passing, _exact_scores, _ranked, _top)
