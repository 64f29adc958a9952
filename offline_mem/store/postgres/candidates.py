"""The candidate queries of a search in PostgreSQL: one condition and the three signals.

pgvector's `<=>` is the cosine distance; the vector query ranks exactly the rows the condition
selects (through the scope indexes), never a global top-k filtered afterwards, as the SQLite
store does. The keyword signal is BM25 over the same postings as SQLite's (bm25.py), the
entity signal candidates.py's queries in this dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ...timeutil import utc_now
from ..candidates import ENTITY_CHUNK, EntitySignal, visible_replacements
from ..filters import CompiledFilter
from ..keyword_index import QueryStats, searched_partition
from . import bm25
from .connection import PgDatabase
from .filters import pg_condition
from .jobs import scope_match
from .keywords import MEMORY_KEYWORDS
from .reads import visibility
from .vectors import exact_nearest, hnsw_nearest, vector_literal


class PgCandidates:
    def __init__(self, db: PgDatabase, *, hnsw: bool = False) -> None:
        self.db = db
        self.hnsw = hnsw

    def search_filter(
        self,
        where: CompiledFilter,
        *,
        include_expired: bool = False,
        include_superseded: bool = False,
        now: datetime | None = None,
        as_of: datetime | None = None,
    ) -> tuple[str, list[Any]]:
        """The caller's filter plus visibility, as PostgreSQL over alias m."""
        condition, params = pg_condition(where)
        visible, vparams = visibility(
            now=now or utc_now(), include_expired=include_expired,
            include_superseded=include_superseded, as_of=as_of,
        )  # fmt: skip
        return f"{condition} AND {visible}", [*params, *vparams]

    def vector_candidates(
        self, vector: np.ndarray, condition: tuple[str, list[Any]], *, k: int
    ) -> dict[int, float]:
        """rowid -> cosine similarity of the k nearest memories passing the condition."""
        if self.hnsw:
            return hnsw_nearest(self.db, "memories", "rowid", vector, condition, k=k)
        return exact_nearest(self.db, "memories", "rowid", vector, condition, k=k)

    def vector_similarities(self, vector: np.ndarray, rowids: Sequence[int]) -> dict[int, float]:
        if not rowids:
            return {}
        rows = self.db.query(
            "SELECT rowid, 1 - (embedding <=> %s::vector) FROM memories WHERE rowid = ANY(%s)",
            (vector_literal(vector), [int(r) for r in rowids]),
        )
        return {int(rowid): float(score) for rowid, score in rows}

    def passing(self, rowids: Sequence[int], condition: tuple[str, list[Any]]) -> set[int]:
        """Which of the rowids pass the condition (primary-key lookups)."""
        if not rowids:
            return set()
        sql, params = condition
        rows = self.db.query(
            f"SELECT m.rowid FROM memories m WHERE m.rowid = ANY(%s) AND {sql}",
            ([int(r) for r in rowids], *params),
        )
        return {int(row[0]) for row in rows}

    def replacements(
        self, rowids: Sequence[int], condition: tuple[str, list[Any]]
    ) -> dict[int, int | None]:
        """As candidates.CandidateQueries.replacements."""
        return visible_replacements(
            rowids, self._superseded_by, lambda ends: self.passing(ends, condition)
        )

    def _superseded_by(self, rowids: list[int]) -> dict[int, int | None]:
        rows = self.db.query(
            "SELECT m.rowid, s.rowid FROM memories m"
            " LEFT JOIN memories s ON s.id = m.superseded_by"
            " WHERE m.state = 'superseded' AND m.rowid = ANY(%s)",
            (rowids,),
        )
        return {int(old): None if new is None else int(new) for old, new in rows}

    def keyword_stats(self, terms: Sequence[str], where: CompiledFilter) -> QueryStats:
        return bm25.query_stats(
            self.db, terms, searched_partition(where.scope.user_id), MEMORY_KEYWORDS
        )

    def keyword_candidates(
        self,
        stats: QueryStats,
        where: CompiledFilter,
        condition: tuple[str, list[Any]],
        *,
        limit: int | None = None,
        only_rowids: Sequence[int] | None = None,
        also_rowids: Sequence[int] = (),
    ) -> dict[int, float]:
        return bm25.bm25_scores(
            self.db, stats, searched_partition(where.scope.user_id), condition, MEMORY_KEYWORDS,
            limit=limit, only_rowids=only_rowids, also_rowids=also_rowids,
        )  # fmt: skip

    def entity_candidates(
        self,
        norms: Sequence[str],
        where: CompiledFilter,
        condition: tuple[str, list[Any]],
        *,
        limit: int,
    ) -> EntitySignal:
        """As candidates.CandidateQueries.entity_candidates: the entities of the scope keys the
        filter's ids select, their linked memories ranked by how many query entities each is
        linked to (ties by rowid), visibility checked on the few rows needed."""
        if not norms:
            return EntitySignal(set(), [], {})
        scope_where, scope_params = scope_match(where.scope)
        scopes = [row[0] for row in self.db.query(
            f"SELECT DISTINCT scope FROM memories WHERE {scope_where}", scope_params
        )]  # fmt: skip
        if not scopes:
            return EntitySignal(set(), [], {})
        rows = self.db.query(
            "SELECT l.memory_rowid, e.norm FROM entities e "
            "JOIN entity_links l ON l.entity_rowid = e.rowid "
            "WHERE e.scope = ANY(%s) AND e.norm = ANY(%s)",
            (scopes, list(norms)),
        )
        linked: dict[int, set[str]] = {}
        for rowid, norm in rows:
            linked.setdefault(int(rowid), set()).add(norm)
        counts = {rowid: len(found) for rowid, found in linked.items()}
        ranked = sorted(counts, key=lambda r: (-counts[r], r))
        best: list[int] = []
        known: set[str] = set()
        unseen = {norm for found in linked.values() for norm in found}
        for start in range(0, len(ranked), ENTITY_CHUNK):
            if len(best) >= limit and not unseen:
                break
            chunk = ranked[start : start + ENTITY_CHUNK]
            visible = self.passing(chunk, condition)
            for rowid in chunk:
                if rowid in visible:
                    if len(best) < limit:
                        best.append(rowid)
                    known |= linked[rowid]
                    unseen -= linked[rowid]
        return EntitySignal(known, best, counts)
