"""BM25 over the keyword index's postings (keyword_index.py): a query's best rows, their scores.

Search asks for the best N memories (`bm25_scores` with a limit) and then for the scores of the
other signals' candidates (`only_rowids`). Every returned score is `postings_scores` over the
memory's own postings, the arithmetic both stores share, so a memory gets the same float on each.
The top-N pass avoids the two costs that dominated (10,000 memories: 18 ms -> 4 ms): it skips
the postings of terms in more than half the partition, with a bound that is checked, and checks
the caller's filter on the rows it ranks, not on every posting; see `_top`. The result is
exactly the top N: tests/test_keyword_topk.py compares it with brute force on corpora built to
take every path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .db import Database
from .keyword_index import MEMORY_KEYWORDS, KeywordTables, QueryStats

K1 = 1.5
B = 0.75


def postings_scores(
    rows: Iterable[Sequence[Any]], weights: dict[str, float], avg: float
) -> dict[int, float]:
    """BM25 of each document from its postings rows (key, length, term, tf), `avg` the average
    document length, summed in term order: both stores score with it, so a memory gets the same
    float on each."""
    found: dict[int, tuple[int, dict[str, int]]] = {}
    for rowid, length, term, tf in rows:
        found.setdefault(int(rowid), (int(length), {}))[1][term] = int(tf)
    terms = sorted(weights)
    scores = {}
    for rowid, (length, tfs) in found.items():
        score = 0.0
        for term in terms:
            tf = tfs.get(term)
            if tf:  # the same operations, in the same order, as the SQL of `_ranked`
                score += weights[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))
        scores[rowid] = score
    return scores


def bm25_scores(
    db: Database,
    stats: QueryStats,
    partition: str | None,
    where_sql: str,
    where_params: Sequence[Any],
    *,
    limit: int | None = None,
    only_rowids: Sequence[int] | None = None,
    also_rowids: Sequence[int] = (),
    t: KeywordTables = MEMORY_KEYWORDS,
) -> dict[int, float]:
    """BM25 of the memories passing `where_sql` (over alias m) that hold a query term:
    the best `limit` (ties by rowid) plus those of `also_rowids`, exactly those in
    `only_rowids`, or all of them.

    Every returned score is computed by `_exact_scores` from the memory's own postings, so it
    does not depend on which path selected the memory. `also_rowids` lets search score the
    other signals' candidates in the same reads as the top."""
    condition = (where_sql, list(where_params))
    return answer_request(
        SQLITE_READS, db, stats, partition, condition, t,
        limit=limit, only_rowids=only_rowids, also_rowids=also_rowids,
    )  # fmt: skip


@dataclass(frozen=True)
class Bm25Reads:
    """One store's reads for BM25, each `(db, ..., condition, t)` over its own SQL dialect:
    which rowids pass the filter, the exact scores of given rows from their postings, every
    passing row holding a term ranked best first, and the best `limit` plus given rows."""

    passing: Callable[..., set[int]]
    exact_scores: Callable[..., dict[int, float]]
    ranked: Callable[..., list[tuple[int, float]]]
    top: Callable[..., dict[int, float]]


def answer_request(
    reads: Bm25Reads,
    db: Any,
    stats: QueryStats,
    partition: str | None,
    condition: tuple[str, list[Any]],
    t: Any,
    *,
    limit: int | None,
    only_rowids: Sequence[int] | None,
    also_rowids: Sequence[int],
) -> dict[int, float]:
    """Which rows a `bm25_scores` call scores, the same on both stores (see `bm25_scores`)."""
    weights = {t: w for t, w in stats.idf.items() if w != 0}
    if not weights or stats.avg_length <= 0:
        return {}
    if only_rowids is not None:
        passing = reads.passing(db, only_rowids, condition, t)
        return reads.exact_scores(db, stats, weights, partition, sorted(passing), t)
    if limit is None:
        rows = reads.ranked(db, stats, weights, partition, condition, t, limit=None)
        return reads.exact_scores(db, stats, weights, partition, [r for r, _ in rows], t)
    also = sorted(reads.passing(db, also_rowids, condition, t))
    if limit <= 0:
        return reads.exact_scores(db, stats, weights, partition, also, t)
    return reads.top(db, stats, weights, partition, condition, limit, also, t)


def _common_terms(stats: QueryStats, weights: dict[str, float]) -> set[str]:
    """The query terms whose postings the top-k pass may skip: those in more than half the
    partition's documents (where Okapi's idf is <= 0 and Lucene's is below ln 2), when every
    weight is positive and at least one term is rarer. Skipping them is checked, not assumed:
    see `_top`."""
    if any(w <= 0 for w in weights.values()):
        return set()
    common = {t for t in weights if 2 * stats.df.get(t, 0) > stats.docs}
    return common if len(common) < len(weights) else set()


def _top(
    db: Database,
    stats: QueryStats,
    weights: dict[str, float],
    partition: str | None,
    condition: tuple[str, list[Any]],
    limit: int,
    also: Sequence[int] = (),
    t: KeywordTables = MEMORY_KEYWORDS,
) -> dict[int, float]:
    """The best `limit` memories by exact BM25 (ties by rowid), found without reading every
    posting of every term, plus the scores of `also` (memories known to pass the filter).

    1. Common terms are left out of the ranking pass (MaxScore): a memory's BM25 is its score
       over the other ("rare") terms, s_R, plus at most U = sum of (k1 + 1) * idf over the
       common ones (tf / (tf + k1 * (1 - b + b * len / avgdl)) < 1). With theta_R the
       limit-th best s_R among memories that pass the filter, the limit-th best full score is
       >= theta_R, so only memories with s_R > theta_R - U can be in the top: those are scored
       exactly (common terms included), and if U >= theta_R (a memory holding only common
       terms might qualify) the pass is redone with every term.
    2. With a partition (a user_id), the ranking pass reads postings and lengths only and the
       filter (scope, state, expiry, metadata) is checked on the rows it returns: any memory
       ranked below `limit` passing ones cannot be in the top. When fewer than `limit` of the
       fetched rows pass while more rows exist, the pass is redone with the filter inside it.
    Both checks use a margin for floating-point rounding, which only widens the exact set."""
    common = _common_terms(stats, weights)
    filtered = partition is None  # without a partition the postings span every user
    # the largest possible score, for the rounding margin (SQL and Python sum in other orders)
    eps = 1e-9 * (1.0 + sum(abs(w) for w in weights.values()) * (K1 + 1))
    first = 2 * limit + 32  # rows whose filter is checked first
    for _ in range(3):  # each fallback happens at most once: pruning off, filter inside
        rare = {t: w for t, w in weights.items() if t not in common}
        slack = sum(weights[t] for t in common) * (K1 + 1)
        inside, after = (condition, None) if filtered else (None, condition)
        # A margin far below every rare term's weight keeps the top within about `limit` rows;
        # a wider one may reach deeper: fetch more at once rather than repeat the pass (which
        # costs the same whatever it returns).
        fetch = first if not common or slack <= 0.01 * min(rare.values()) else 8 * limit + 32
        rows = _ranked(db, stats, rare, partition, inside, t, limit=fetch)
        exhausted = len(rows) < fetch
        checked = len(rows) if filtered else min(len(rows), first)
        visible = _keep_passing(db, rows[:checked], after, t)
        if len(visible) < limit and checked < len(rows):
            visible += _keep_passing(db, rows[checked:], after, t)
            checked = len(rows)
        if len(visible) < limit:
            if not exhausted:
                filtered = True  # the filter rejects too many: rank with it inside
                continue
            if common:
                common = set()  # memories holding only common terms may fill the top
                continue
            keep = visible
        else:
            cutoff = visible[limit - 1][1] - slack - eps
            if common and cutoff <= 0:  # a memory holding only common terms might qualify
                common = set()
                continue
            seen = {rowid for rowid, _ in rows[:checked]}
            if not exhausted and rows[-1][1] > cutoff:  # the fetch may stop inside the margin
                rows = _ranked(db, stats, rare, partition, inside, t, limit=None, above=cutoff)
            deeper = [row for row in rows if row[1] > cutoff and row[0] not in seen]
            visible += _keep_passing(db, deeper, after, t)
            keep = [row for row in visible if row[1] > cutoff]
        # one read for both; the top is chosen among `keep` alone
        kept = {rowid for rowid, _ in keep}
        exact = _exact_scores(db, stats, weights, partition, sorted(kept.union(also)), t)
        top = sorted((item for item in exact.items() if item[0] in kept),
                     key=lambda item: (-item[1], item[0]))[:limit]  # fmt: skip
        return {**dict(top), **{rowid: exact[rowid] for rowid in also if rowid in exact}}
    raise AssertionError("unreachable: the last attempt is unpruned and filtered")


# The postings are read through their primary key (KeywordTables.postings_key) so a term's
# postings are one range of the table, tf included, and not through the index on term alone,
# which lacks tf and so costs one more B-tree search per posting (measured: 10,000 postings
# summed in 0.6 ms vs 4.4 ms).
POSTINGS_KEY = MEMORY_KEYWORDS.postings_key


def _ranked(
    db: Database,
    stats: QueryStats,
    weights: dict[str, float],
    partition: str | None,
    condition: tuple[str, list[Any]] | None,
    t: KeywordTables,
    *,
    limit: int | None,
    above: float | None = None,
) -> list[tuple[int, float]]:
    """(rowid, BM25 over `weights`' terms) of the memories holding one of them, best first
    (ties by rowid); with `condition`, only those passing it, else every one in the partition.
    The joins are in the order written (CROSS JOIN): terms, their postings, lengths."""
    values = ", ".join("(?, ?)" for _ in weights)
    # bound in the order the placeholders appear in the SQL text
    params: list[Any] = [x for item in weights.items() for x in item]
    params += [K1 + 1, K1, B, B, stats.avg_length]
    if partition is None:
        postings = f"{t.postings} kp ON kp.term = q.term"
    else:
        postings = (
            f"{t.postings} kp INDEXED BY {t.postings_key} ON kp.partition = ? AND kp.term = q.term"
        )
        params.append(partition)
    memories = where = ""
    if condition is not None:
        memories = f"CROSS JOIN {t.owner} m ON m.{t.owner_key} = kp.{t.key} "
        where = f"WHERE {condition[0]} "
        params += condition[1]
    sql = (
        f"WITH q(term, idf) AS (VALUES {values}) "
        f"SELECT kp.{t.key}, sum(q.idf * kp.tf * ? / "
        "(kp.tf + ? * (1 - ? + ? * kd.length / ?))) AS score "
        f"FROM q CROSS JOIN {postings} "
        f"CROSS JOIN {t.docs} kd ON kd.{t.key} = kp.{t.key} "
        f"{memories}{where}"
        f"GROUP BY kp.{t.key} "
    )
    if above is not None:
        sql += "HAVING score > ? "
        params.append(above)
    sql += f"ORDER BY score DESC, kp.{t.key}"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [(int(rowid), float(score)) for rowid, score in db.query(sql, params)]


def _passing(
    db: Database, rowids: Sequence[int], condition: tuple[str, list[Any]], t: KeywordTables
) -> set[int]:
    """Which of the rowids pass the condition (primary-key lookups)."""
    if not rowids:
        return set()
    sql, params = condition
    rows = db.query(
        f"SELECT m.{t.owner_key} FROM {t.owner} m "
        f"WHERE m.{t.owner_key} IN (SELECT value FROM json_each(?)) AND {sql}",
        (json.dumps([int(r) for r in rowids]), *params),
    )
    return {int(row[0]) for row in rows}


def _keep_passing(
    db: Database,
    rows: list[tuple[int, float]],
    condition: tuple[str, list[Any]] | None,
    t: KeywordTables,
) -> list[tuple[int, float]]:
    """The rows whose memory passes `condition`, in order; all of them when it is None (they
    were ranked with the condition inside)."""
    if condition is None:
        return list(rows)
    passing = _passing(db, [rowid for rowid, _ in rows], condition, t)
    return [row for row in rows if row[0] in passing]


def _exact_scores(
    db: Database,
    stats: QueryStats,
    weights: dict[str, float],
    partition: str | None,
    rowids: Sequence[int],
    t: KeywordTables,
) -> dict[int, float]:
    """BM25 over every weighted term of the given memories (of `partition`, holding a query
    term), from their postings read by primary key, summed in term order."""
    if not rowids:
        return {}
    terms = sorted(weights)
    term_marks = ", ".join("?" for _ in terms)
    # bound in the order the placeholders appear in the SQL text
    params: list[Any] = [*terms, json.dumps([int(r) for r in rowids])]
    partition_sql = ""
    if partition is not None:
        partition_sql = " AND kd.partition = ?"
        params.append(partition)
    rows = db.query(
        f"SELECT kd.{t.key}, kd.length, kp.term, kp.tf "
        f"FROM {t.docs} kd CROSS JOIN {t.postings} kp INDEXED BY {t.postings_key} "
        f"ON kp.partition = kd.partition AND kp.term IN ({term_marks}) "
        f"AND kp.{t.key} = kd.{t.key} "
        f"WHERE kd.{t.key} IN (SELECT value FROM json_each(?)){partition_sql}",
        params,
    )
    return postings_scores(rows, weights, stats.avg_length)


SQLITE_READS = Bm25Reads(_passing, _exact_scores, _ranked, _top)
