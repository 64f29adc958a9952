"""Hybrid search: candidates from every signal, then one pure ranking.

Candidates are the union of the vector top-N, the keyword (BM25) top-N and the memories linked to
the query's entities (N = max(4 * top_k, 60), Mem0's over-fetch), all under the same filter,
state and expiry condition. Each candidate then gets all three signals — a keyword-only hit is
scored for similarity too and vice versa — so the final score never depends on which signal
happened to find it.

A search of what is true now (no `as_of`, superseded memories hidden) also scores the memories a
later one replaced, and gives the replacing memory the higher of the two scores
(ranking.carry_to_replacements).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..pinned.embedder import Embedder
from ..pinned.nlp import TextAnalyzer
from ..store.candidates import EntitySignal
from ..store.filters import CompiledFilter
from ..store.interface import CandidateQueries
from ..store.records import MemoryRecord
from ..values import EntityMention
from .ranking import Ranked, Signals, Weights, carry_to_replacements, score_and_rank

MIN_OVERFETCH = 60


@dataclass(frozen=True)
class SearchRequest:
    query: str
    where: CompiledFilter
    top_k: int
    threshold: float | None
    include_expired: bool = False
    include_superseded: bool = False
    as_of: datetime | None = None  # what was true then (candidates.visibility)
    weights: Weights = field(default_factory=Weights)
    signals: tuple[str, ...] = ("semantic", "keyword", "entity")


def overfetch(top_k: int) -> int:
    return max(4 * top_k, MIN_OVERFETCH)


@dataclass(frozen=True)
class SearchOutcome:
    hits: list[tuple[MemoryRecord, Ranked]]
    known_entities: frozenset[str]  # the query's entity norms linked to a visible memory


def hybrid_search(
    store: CandidateQueries,
    embedder: Embedder,
    analyzer: TextAnalyzer,
    request: SearchRequest,
    *,
    query_vector: np.ndarray | None = None,
    mentions: Sequence[EntityMention] = (),
) -> list[tuple[MemoryRecord, Ranked]]:
    """The ranked memories (see `search_memories`)."""
    return search_memories(
        store, embedder, analyzer, request, query_vector=query_vector, mentions=mentions
    ).hits


def search_memories(
    store: CandidateQueries,
    embedder: Embedder,
    analyzer: TextAnalyzer,
    request: SearchRequest,
    *,
    query_vector: np.ndarray | None = None,
    mentions: Sequence[EntityMention] = (),
) -> SearchOutcome:
    analysis = analyzer.analyze_query(request.query)
    vector = embedder.embed(request.query) if query_vector is None else query_vector
    norms = analyzer.query_entity_norms(analysis, mentions)
    n = overfetch(request.top_k)
    use = set(request.signals)
    # What is true now is searched among the replaced memories too, each standing in for the
    # memory that replaces it (ranking.carry_to_replacements).
    current = not request.include_superseded and request.as_of is None
    with store.snapshot():
        visible = store.search_filter(
            request.where,
            include_expired=request.include_expired,
            include_superseded=request.include_superseded,
            as_of=request.as_of,
        )
        condition = (
            store.search_filter(
                request.where, include_expired=request.include_expired, include_superseded=True
            )
            if current
            else visible
        )
        cosine = (
            store.vector_candidates(vector, request.where, condition, k=n)
            if "semantic" in use
            else {}
        )
        entities = (
            store.entity_candidates(norms, request.where, condition, limit=n)
            if "entity" in use
            else EntitySignal(set(), [], {})
        )
        known, entity_hits, best_entity = entities.known, entities.counts, entities.best
        stats = store.keyword_stats(analysis.terms, request.where)
        bm25: dict[int, float] = {}
        if "keyword" in use:  # the top N, and the other signals' candidates in the same reads
            others = sorted(set(cosine) | set(best_entity))
            bm25 = store.keyword_candidates(
                stats, request.where, condition, limit=n, also_rowids=others
            )
        candidates = set(cosine) | set(bm25) | set(best_entity)
        if "semantic" in use:
            missing = sorted(candidates - set(cosine))
            cosine.update(
                store.vector_similarities(vector, missing, user_id=request.where.scope.user_id)
            )
        weights = _only(request.weights, use)
        ranked = score_and_rank(
            (
                Signals(
                    rowid,
                    cosine=cosine.get(rowid),
                    bm25=bm25.get(rowid),
                    entity_matches=entity_hits.get(rowid, 0),
                )
                for rowid in candidates
            ),
            keyword_ideal=stats.ideal,
            query_entities=len(known),
            weights=weights,
            threshold=request.threshold,
            top_k=len(candidates) if current else request.top_k,
        )
        if current:
            replaced = store.replacements([r.rowid for r in ranked], visible)
            ranked = carry_to_replacements(ranked, replaced, request.top_k)
        records = store.records_by_rowid([r.rowid for r in ranked])
    return SearchOutcome([(records[r.rowid], r) for r in ranked], frozenset(known))


def _only(weights: Weights, use: set[str]) -> Weights:
    """Weights for a single-signal search (benchmarks compare signals alone): that signal gets 1."""
    if use == {"semantic", "keyword", "entity"}:
        return weights
    if len(use) != 1:
        raise ValueError(f"signals must be all three or exactly one, got {sorted(use)}")
    (only,) = use
    return Weights(
        **{name: 1.0 if name == only else 0.0 for name in ("semantic", "keyword", "entity")}
    )
