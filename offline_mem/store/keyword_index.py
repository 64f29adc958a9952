"""The keyword index: BM25 over lemmatised terms, with each partition's own corpus statistics.

Tables of the memories' index (all in the memory file, written in the caller's transaction);
the messages' index has the same four, prefixed `message_` and keyed by `message_seq`:
  keyword_docs(memory_rowid, partition, length, terms) one row per indexed memory (its distinct
                                                      terms as JSON: its postings' keys)
  keyword_postings(partition, term, memory_rowid, tf) the inverted index
  keyword_terms(partition, term, df)                  document frequency per partition
  keyword_partitions(partition, docs, total_length)   N and total length per partition

A partition is a user_id ('' for memories without one), as for the vectors, so the statistics are
the user's own corpus and a query reads only that user's postings. BM25 is Okapi BM25 (k1=1.5,
b=0.75, the defaults of rank-bm25's BM25Okapi; scored in bm25.py). The idf is Lucene's,
ln(1 + (N - df + 0.5) / (df + 0.5)), which is always positive: Okapi's ln((N - df + 0.5) /
(df + 0.5)) is zero or negative for any term in half the documents or more, so in a small scope
(a user with two memories) a word found in one of them would carry no evidence at all.
`okapi_idf` is kept so a test can check the rest of the formula against rank-bm25's BM25Okapi.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .db import Database


def partition_of(user_id: str | None) -> str:
    """The partition of a user's rows, in the keyword index and in the vector tables alike."""
    return user_id or ""


def searched_partition(user_id: str | None) -> str | None:
    """The partition a search names: the user's, or None (every partition) without a user."""
    return None if user_id is None else partition_of(user_id)


@dataclass(frozen=True)
class KeywordTables:
    """The four tables of one index and the table whose rows it indexes (`owner`, by
    `owner_key`). Memories and messages each have their own index, so each has its own corpus
    statistics: a chatty turn's length does not change a short fact's BM25."""

    docs: str
    postings: str
    terms: str
    partitions: str
    key: str  # the indexed row's column in docs and postings
    owner: str
    owner_key: str
    # SQLite's name for the postings' primary key (partition, term, key); see bm25._ranked.
    postings_key: str


MEMORY_KEYWORDS = KeywordTables(
    "keyword_docs", "keyword_postings", "keyword_terms", "keyword_partitions",
    key="memory_rowid", owner="memories", owner_key="rowid",
    postings_key="sqlite_autoindex_keyword_postings_1",
)  # fmt: skip
MESSAGE_KEYWORDS = KeywordTables(
    "message_keyword_docs", "message_keyword_postings", "message_keyword_terms",
    "message_keyword_partitions", key="message_seq", owner="messages", owner_key="seq",
    postings_key="sqlite_autoindex_message_keyword_postings_1",
)  # fmt: skip


def term_frequencies(terms: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for term in terms:
        counts[term] = counts.get(term, 0) + 1
    return counts


def index_terms(
    db: Database,
    rowid: int,
    partition: str,
    terms: Sequence[str],
    t: KeywordTables = MEMORY_KEYWORDS,
) -> None:
    counts = term_frequencies(terms)
    length = sum(counts.values())
    db.execute(
        f"INSERT INTO {t.docs} ({t.key}, partition, length, terms) VALUES (?, ?, ?, ?)",
        (rowid, partition, length, _terms_json(counts)),
    )
    if counts:
        db.executemany(
            f"INSERT INTO {t.postings} (partition, term, {t.key}, tf) VALUES (?, ?, ?, ?)",
            [(partition, term, rowid, tf) for term, tf in counts.items()],
        )
        db.executemany(
            f"INSERT INTO {t.terms} (partition, term, df) VALUES (?, ?, 1) "
            "ON CONFLICT(partition, term) DO UPDATE SET df = df + 1",
            [(partition, term) for term in counts],
        )
    db.execute(
        f"INSERT INTO {t.partitions} (partition, docs, total_length) VALUES (?, 1, ?) "
        "ON CONFLICT(partition) DO UPDATE SET docs = docs + 1, "
        "total_length = total_length + excluded.total_length",
        (partition, length),
    )


def _terms_json(counts: dict[str, int]) -> str:
    """A doc's distinct terms, as its row keeps them to find its postings when it goes."""
    return json.dumps(list(counts), ensure_ascii=False, separators=(",", ":"))


def unindex(db: Database, rowid: int, t: KeywordTables = MEMORY_KEYWORDS) -> None:
    row = db.query_one(f"SELECT partition, length, terms FROM {t.docs} WHERE {t.key} = ?", (rowid,))
    if row is None:
        return
    partition, length, listed = row
    terms = json.loads(listed)
    if terms:
        db.executemany(
            f"UPDATE {t.terms} SET df = df - 1 WHERE partition = ? AND term = ?",
            [(partition, term) for term in terms],
        )
        db.execute(f"DELETE FROM {t.terms} WHERE partition = ? AND df <= 0", (partition,))
        # by primary key: the doc lists its terms (no index of postings by row: migration 013)
        db.executemany(
            f"DELETE FROM {t.postings} WHERE partition = ? AND term = ? AND {t.key} = ?",
            [(partition, term, rowid) for term in terms],
        )
    db.execute(f"DELETE FROM {t.docs} WHERE {t.key} = ?", (rowid,))
    db.execute(
        f"UPDATE {t.partitions} SET docs = docs - 1, total_length = total_length - ? "
        "WHERE partition = ?",
        (length, partition),
    )
    db.execute(f"DELETE FROM {t.partitions} WHERE partition = ? AND docs <= 0", (partition,))


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
    df: dict[str, int] = field(default_factory=dict)  # document frequency of the terms in idf


def lucene_idf(docs: int, df: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def okapi_idf(docs: int, df: int) -> float:
    return math.log((docs - df + 0.5) / (df + 0.5))


IdfFunction = Callable[[int, int], float]


def query_stats(
    db: Database,
    terms: Sequence[str],
    partition: str | None,
    *,
    idf: IdfFunction = lucene_idf,
    t: KeywordTables = MEMORY_KEYWORDS,
) -> QueryStats:
    """Corpus statistics for the query terms: of one partition, or of all when None."""
    unique = sorted(set(terms))
    if partition is None:
        totals = db.query_one(f"SELECT sum(docs), sum(total_length) FROM {t.partitions}")
        term_sql = f"SELECT term, sum(df) FROM {t.terms} WHERE term IN ({{}}) GROUP BY term"
        params: list[Any] = []
    else:
        totals = db.query_one(
            f"SELECT docs, total_length FROM {t.partitions} WHERE partition = ?", (partition,)
        )
        term_sql = f"SELECT term, df FROM {t.terms} WHERE partition = ? AND term IN ({{}})"
        params = [partition]
    docs, total = totals or (0, 0)
    docs, total = int(docs or 0), int(total or 0)
    if not docs or not unique:
        return QueryStats(0, 0.0, {})
    marks = ", ".join("?" for _ in unique)
    dfs = dict(db.query(term_sql.format(marks), (*params, *unique)))
    found = {term: int(df) for term, df in dfs.items() if df}
    weights = {term: idf(docs, df) for term, df in found.items()}
    ideal = sum(weights.values()) + (len(unique) - len(weights)) * idf(docs, 0)
    return QueryStats(docs=docs, avg_length=total / docs, idf=weights, ideal=ideal, df=found)
