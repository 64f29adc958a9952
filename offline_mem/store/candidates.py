"""The candidate queries behind hybrid search: one filter condition and the three signals'
candidates (vector, keyword, entity).

`CandidateQueries` is the `Store`'s part that reads them; the write path is elsewhere. Every
signal takes the same condition from `search_filter`, so filters, state and expiry behave
identically for all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ..timeutil import iso, unexpired_clause, utc_now
from . import bm25, keyword_index
from .db import Database
from .filters import CompiledFilter, scope_match
from .vector_cache import MEMORY_VECTORS, VectorCache, VectorTable

POINT_CHUNK = 500  # rowids per `IN (...)` lookup, well under SQLite's variable limit
ENTITY_CHUNK = 64  # linked memories checked for visibility per primary-key read


@dataclass(frozen=True)
class EntitySignal:
    known: set[str]  # query entity norms linked to at least one visible memory
    best: list[int]  # the visible memories linked to most query entities, best first
    # how many query entities each linked memory is linked to; visible or not, so read it only
    # for memories another signal (or `best`) found visible
    counts: dict[int, int]


def vector_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def point_similarities(
    db: Database, table: str, vector: np.ndarray, rowids: Sequence[int]
) -> dict[int, float]:
    """Cosine similarity of `vector` (unit length) to the stored vectors of the given rows of a
    vector `table` (or view: `VectorTable.values`); rows without a vector, or with a damaged
    (NaN) one, are left out."""
    query = np.asarray(vector, dtype=np.float32)
    found: dict[int, float] = {}
    for start in range(0, len(rowids), POINT_CHUNK):
        chunk = [int(r) for r in rowids[start : start + POINT_CHUNK]]
        marks = ", ".join("?" for _ in chunk)
        for rowid, blob in db.query(
            f"SELECT rowid, embedding FROM {table} WHERE rowid IN ({marks})", chunk
        ):
            score = float(np.frombuffer(blob, dtype=np.float32) @ query)
            if np.isfinite(score):
                found[int(rowid)] = score
    return found


MAX_SUPERSESSIONS = 64  # links followed from one memory; a longer chain is a damaged file


def follow_supersessions(
    rowids: Sequence[int], superseded_by: Callable[[list[int]], dict[int, int | None]]
) -> dict[int, int | None]:
    """For each of `rowids` that was superseded: the memory at the end of its chain (the one
    that superseded it, the one that superseded that, ...), or None when the chain breaks (a
    memory that superseded another was deleted) or does not end. `superseded_by(rowids)` gives,
    for the superseded ones among them, the rowid of the memory that superseded each, None
    where that one is gone (one read per step of the chains)."""
    ends: dict[int, int | None] = {}
    at = {rowid: rowid for rowid in dict.fromkeys(int(r) for r in rowids)}
    for _ in range(MAX_SUPERSESSIONS):
        if not at:
            return ends
        step = superseded_by(sorted(set(at.values())))
        following: dict[int, int] = {}
        for start, rowid in at.items():
            if rowid not in step:  # not superseded: the end of the chain, or no chain at all
                if rowid != start:
                    ends[start] = rowid
                continue
            successor = step[rowid]
            if successor is None:
                ends[start] = None
            else:
                following[start] = successor
        at = following
    return ends | dict.fromkeys(at)


def visible_replacements(
    rowids: Sequence[int],
    superseded_by: Callable[[list[int]], dict[int, int | None]],
    passing: Callable[[list[int]], set[int]],
) -> dict[int, int | None]:
    """For each of `rowids` that was superseded, the end of its chain (`follow_supersessions`)
    when `passing` accepts it, else None: a store's `replacements`."""
    ends = follow_supersessions(rowids, superseded_by)
    visible = passing(sorted({end for end in ends.values() if end is not None}))
    return {rowid: end if end in visible else None for rowid, end in ends.items()}


def filtered_knn(
    db: Database,
    table: VectorTable,
    vector: np.ndarray,
    *,
    k: int,
    user_id: str | None,
    passing: Callable[[list[int]], set[int]],
    allowed_sql: str,
    allowed_params: Sequence[Any],
    cache: VectorCache | None = None,
) -> dict[int, float]:
    """Exact top-k by cosine over a vector `table`, among the owner rows `allowed_sql` selects
    (it must select the owner keys): rowid -> similarity. A user's partition that the `cache`
    holds is answered from memory: its best rows that `passing` accepts, or, when a narrow
    filter leaves fewer than k of them, the best among the rows the filter selects. Otherwise
    sqlite-vec's distance runs over exactly the selected rows in SQL."""
    if user_id is not None and cache is not None:
        partition = keyword_index.partition_of(user_id)
        fetch = max(2 * k, k + 32)
        cached = cache.top(partition, vector, fetch)
        if cached is not None:
            allowed = passing([rowid for rowid, _ in cached])
            kept = [(rowid, score) for rowid, score in cached if rowid in allowed]
            if len(kept) >= k or len(cached) < fetch:  # enough, or the partition is exhausted
                return dict(kept[:k])
            rows = db.query(allowed_sql, allowed_params)  # a narrow filter: its rows, then rank
            among = cache.top_among(partition, vector, k, [int(r[0]) for r in rows])
            if among is not None:
                return dict(among)
    # A damaged vector (NaN) has no distance: it is left out rather than ranked first
    # (`verify` reports it; import refuses it).
    hits = db.query(
        f"SELECT rowid, d FROM (SELECT v.rowid, vec_distance_cosine(v.embedding, ?) AS d"
        f" FROM {table.values} v WHERE v.rowid IN ({allowed_sql}))"
        " WHERE d IS NOT NULL ORDER BY d, rowid LIMIT ?",
        (vector_blob(vector), *allowed_params, int(k)),
    )
    return {int(rowid): 1.0 - float(d) for rowid, d in hits}


def visibility(
    *,
    now: datetime,
    include_expired: bool,
    include_superseded: bool,
    as_of: datetime | None = None,
) -> tuple[str, list[Any]]:
    """State and expiry as SQL over alias m: which memories a read sees. `as_of`: those that
    were true then, superseded or not (recorded by then, and not yet replaced), with expiry
    judged at that moment."""
    parts: list[str] = []
    params: list[Any] = []
    if as_of is not None:
        stamp = iso(as_of)
        parts.append(RECORDED_BY + " AND (m.valid_to IS NULL OR m.valid_to > ?)")
        params += [stamp, stamp]
        now = as_of
    elif not include_superseded:
        parts.append("m.state = 'active'")
    if not include_expired:
        clause, clause_params = unexpired_clause("m.expiration_date", now)
        parts.append(clause)
        params += clause_params
    return (" AND ".join(parts) or "1"), params


# A memory or message was known at a moment when its message's date (else the day it was
# stored) is not after it.
RECORDED_BY = "COALESCE(m.observed_at, m.created_at) <= ?"


class CandidateQueries:
    """The memories each search signal proposes, under one condition."""

    def __init__(self, db: Database, vector_cache: VectorCache | None) -> None:
        self.db = db
        self.vector_cache = vector_cache

    def search_filter(
        self,
        where: CompiledFilter,
        *,
        include_expired: bool = False,
        include_superseded: bool = False,
        now: datetime | None = None,
        as_of: datetime | None = None,
    ) -> tuple[str, list[Any]]:
        """The caller's filter plus visibility (state, expiry, `as_of`), as SQL over alias m.
        Every signal of a search uses this same condition."""
        visible, vparams = visibility(
            now=now or utc_now(), include_expired=include_expired,
            include_superseded=include_superseded, as_of=as_of,
        )  # fmt: skip
        return f"{where.sql} AND {visible}", [*where.params, *vparams]

    def vector_candidates(
        self, vector: np.ndarray, where: CompiledFilter, condition: tuple[str, list[Any]], *, k: int
    ) -> dict[int, float]:
        """Exact top-k by cosine among the memories that pass the condition; never a global top-k
        filtered afterwards (see `filtered_knn`). Returns rowid -> cosine similarity."""
        sql, params = condition
        return filtered_knn(
            self.db, MEMORY_VECTORS, vector, k=k, user_id=where.scope.user_id,
            passing=lambda rowids: self._passing(rowids, condition),
            allowed_sql=f"SELECT m.rowid FROM memories m WHERE {sql}", allowed_params=params,
            cache=self.vector_cache,
        )  # fmt: skip

    def _passing(self, rowids: Sequence[int], condition: tuple[str, list[Any]]) -> set[int]:
        """Which of the rowids pass the condition (primary-key lookups)."""
        if not rowids:
            return set()
        sql, params = condition
        marks = ", ".join("?" for _ in rowids)
        rows = self.db.query(
            f"SELECT m.rowid FROM memories m WHERE m.rowid IN ({marks}) AND {sql}",
            (*rowids, *params),
        )
        return {int(row[0]) for row in rows}

    def replacements(
        self, rowids: Sequence[int], condition: tuple[str, list[Any]]
    ) -> dict[int, int | None]:
        """For each of `rowids` that was superseded, the end of its chain of supersessions when
        that passes the condition, else None (`visible_replacements`)."""
        return visible_replacements(
            rowids, self._superseded_by, lambda ends: self._passing(ends, condition)
        )

    def _superseded_by(self, rowids: list[int]) -> dict[int, int | None]:
        found: dict[int, int | None] = {}
        for start in range(0, len(rowids), POINT_CHUNK):
            chunk = rowids[start : start + POINT_CHUNK]
            marks = ", ".join("?" for _ in chunk)
            rows = self.db.query(
                "SELECT m.rowid, s.rowid FROM memories m"
                " LEFT JOIN memories s ON s.id = m.superseded_by"
                f" WHERE m.state = 'superseded' AND m.rowid IN ({marks})",
                chunk,
            )
            found.update({int(old): None if new is None else int(new) for old, new in rows})
        return found

    def vector_similarities(
        self, vector: np.ndarray, rowids: Sequence[int], *, user_id: str | None = None
    ) -> dict[int, float]:
        """Cosine similarity of the query to the given memories' stored vectors: from the cache
        when it holds the user's partition, else by primary key."""
        query = np.asarray(vector, dtype=np.float32)
        found: dict[int, float] = {}
        if user_id is not None and self.vector_cache is not None:
            partition = keyword_index.partition_of(user_id)
            found = self.vector_cache.similarities(partition, query, rowids) or {}
        missing = [rowid for rowid in rowids if rowid not in found]
        return found | point_similarities(self.db, "memory_vectors", query, missing)

    def keyword_stats(
        self, terms: Sequence[str], where: CompiledFilter
    ) -> keyword_index.QueryStats:
        return keyword_index.query_stats(self.db, terms, self._keyword_partition(where))

    def keyword_candidates(
        self,
        stats: keyword_index.QueryStats,
        where: CompiledFilter,
        condition: tuple[str, list[Any]],
        *,
        limit: int | None = None,
        only_rowids: Sequence[int] | None = None,
        also_rowids: Sequence[int] = (),
    ) -> dict[int, float]:
        """BM25 of the memories passing the condition that hold a query term: the best `limit`
        plus those of `also_rowids`, exactly those of `only_rowids`, or all (bm25_scores)."""
        sql, params = condition
        return bm25.bm25_scores(
            self.db, stats, self._keyword_partition(where), sql, params,
            limit=limit, only_rowids=only_rowids, also_rowids=also_rowids,
        )  # fmt: skip

    @staticmethod
    def _keyword_partition(where: CompiledFilter) -> str | None:
        return keyword_index.searched_partition(where.scope.user_id)

    def entity_candidates(
        self,
        norms: Sequence[str],
        where: CompiledFilter,
        condition: tuple[str, list[Any]],
        *,
        limit: int,
    ) -> EntitySignal:
        """The entity signal: which of `norms` name entities linked to a visible memory, the
        `limit` visible memories linked to most of them, and how many of them each linked
        memory is linked to.

        The links are read through their indexes alone; visibility (the condition) is checked
        by primary key on the few rows needed, not on every link: a name known to a thousand
        of the user's memories costs a thousand index entries, not a thousand row reads."""
        if not norms:
            return EntitySignal(set(), [], {})
        # Entities are stored per scope key: look up only the keys of the memories the filter's
        # ids select, through the (scope, norm) index, not the same name in every other scope.
        scope_where, scope_params = scope_match(where.scope, "")
        scopes = [
            row[0]
            for row in self.db.query(
                f"SELECT DISTINCT scope FROM memories WHERE {scope_where}", scope_params
            )
        ]
        if not scopes:
            return EntitySignal(set(), [], {})
        marks = ", ".join("?" for _ in norms)
        scope_marks = ", ".join("?" for _ in scopes)
        rows = self.db.query(
            "SELECT l.memory_rowid, e.norm FROM entities e "
            "JOIN entity_links l ON l.entity_rowid = e.rowid "
            f"WHERE e.scope IN ({scope_marks}) AND e.norm IN ({marks})",
            (*scopes, *norms),
        )
        linked: dict[int, set[str]] = {}
        for rowid, norm in rows:
            linked.setdefault(int(rowid), set()).add(norm)
        counts = {rowid: len(found) for rowid, found in linked.items()}
        ranked = sorted(counts, key=lambda r: (-counts[r], r))
        best: list[int] = []
        known: set[str] = set()
        unseen = {norm for found in linked.values() for norm in found}
        # Walk the ranking in chunks until `limit` visible memories are found and every norm is
        # known to be linked to a visible memory or not.
        for start in range(0, len(ranked), ENTITY_CHUNK):
            if len(best) >= limit and not unseen:
                break
            chunk = ranked[start : start + ENTITY_CHUNK]
            visible = self._passing(chunk, condition)
            for rowid in chunk:
                if rowid in visible:
                    if len(best) < limit:
                        best.append(rowid)
                    known |= linked[rowid]
                    unseen -= linked[rowid]
        return EntitySignal(known, best, counts)
