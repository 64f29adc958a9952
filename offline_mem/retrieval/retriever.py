"""The searches behind `Memory.search` and `Memory.search_messages`: facts and a scope's
stored messages, found through the store interface and ranked as one list (evidence.py).

Relational references ("<owner>'s neighbour") are resolved for both (references.py). The query's
vector is embedded once: the embedder given is expected to cache it (QueryVectorCache).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..pinned.embedder import Embedder
from ..pinned.entities import EntityExtractor
from ..pinned.nlp import TextAnalyzer
from ..store.interface import SearchStore
from ..store.messages import MessageHit, message_item
from ..store.records import MemoryRecord
from ..timeutil import iso
from ..values import EntityMention, Scope
from . import evidence as evidence_ranking
from .evidence import Evidence, MessageSignals, asks, rank_evidence
from .ranking import Ranked, keyword_share
from .references import Candidate, search_resolving
from .search import SearchOutcome, SearchRequest, overfetch, search_memories

Hit = tuple[MemoryRecord, Ranked]


class Retriever:
    """Searches one store with the query models; holds no state of its own between calls."""

    def __init__(
        self,
        store: SearchStore,
        embedder: Embedder,
        analyzer: TextAnalyzer,
        entities: EntityExtractor,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.analyzer = analyzer
        self.entities = entities

    def facts(self, request: SearchRequest, mentions: list[EntityMention]) -> SearchOutcome:
        """The memory search of the query as asked (search.py)."""
        return search_memories(self.store, self.embedder, self.analyzer, request, mentions=mentions)

    def facts_resolving(
        self, request: SearchRequest, mentions: list[EntityMention]
    ) -> tuple[SearchOutcome, str | None]:
        """The memory search, with the query's relational references resolved
        (references.search_resolving); the entities known to the scope are those of every
        search it ran."""
        known: set[str] = set()

        def search(query: str, limit: int, floor: float | None) -> list[Hit]:
            asked = replace(request, query=query, top_k=limit, threshold=floor)
            said = mentions if query == request.query else self.entities.extract_query(query)
            found = self.facts(asked, said)
            known.update(found.known_entities)
            return found.hits

        hits, resolved = search_resolving(
            request.query, search, limit=request.top_k, floor=request.threshold,
            score=lambda hit: hit[1].score,
            candidate=lambda hit: Candidate(
                hit[0].text, hit[0].actor_id, hit[0].role != "assistant"
            ),
            key=lambda hit: hit[0].rowid,
        )  # fmt: skip
        return SearchOutcome(hits, frozenset(known)), resolved

    def rank_with_messages(
        self, request: SearchRequest, outcome: SearchOutcome, scope: Scope | None
    ) -> tuple[list[Evidence], dict[int, dict[str, Any]]]:
        """The facts of `outcome` and, when `scope` is given, the scope's messages, ranked as
        one list (evidence.py); and the message items by seq."""
        ranked_facts = [ranked for _, ranked in outcome.hits]
        if scope is None:
            facts_only = rank_evidence(
                ranked_facts, [], known_entities=(),
                threshold=request.threshold, top_k=request.top_k,
            )  # fmt: skip
            return facts_only, {}
        store = self.store
        vector = self.embedder.embed(request.query)
        n = overfetch(request.top_k)
        as_of = request.as_of
        cosine = store.message_candidates(vector, scope, k=n, as_of=as_of)
        # Keyword candidates too, each scored on both signals (as search.py does for facts).
        stats = store.message_keyword_stats(self.analyzer.analyze_query(request.query).terms, scope)
        bm25 = store.message_keyword_candidates(
            stats, scope, limit=n, also_seqs=sorted(cosine), as_of=as_of
        )
        cosine.update(store.message_similarities(vector, sorted(set(bm25) - set(cosine))))
        # A message stored verbatim as a memory (a raw add) is already in the ranking as that
        # memory; listing it twice would only take a place.
        hits = [hit for hit in store.message_hits(cosine) if not hit.stored_verbatim]
        # The replies to the candidates that ask something are candidates too, on their own
        # signals, and take a share of the question's score (evidence.REPLY_SHARE).
        replies: dict[int, int] = {}
        if evidence_ranking.REPLY_SHARE:
            replies = store.message_replies([h.record.seq for h in hits if asks(h.record.content)])
        new = sorted(set(replies.values()) - set(cosine))
        if new:
            found = store.message_similarities(vector, new)
            bm25.update(
                store.message_keyword_candidates(stats, scope, limit=0, also_seqs=new, as_of=as_of)
            )
            hits += [hit for hit in store.message_hits(found) if not hit.stored_verbatim]
        if as_of is not None:  # a reply said after that moment is not evidence of it
            stamp = iso(as_of)
            hits = [h for h in hits if (h.record.observed_at or h.record.created_at) <= stamp]
            kept = {h.record.seq for h in hits}
            replies = {q: r for q, r in replies.items() if q in kept and r in kept}
        items = {
            hit.record.seq: message_item(hit.record, hit.memory_ids, hit.scope_ids) for hit in hits
        }
        signals = [
            MessageSignals(
                h.record.seq,
                h.score,
                items[h.record.seq]["memory"],
                keyword_share(bm25.get(h.record.seq, 0.0), stats.ideal),
            )
            for h in hits
        ]
        ranking = rank_evidence(
            ranked_facts, signals, known_entities=outcome.known_entities,
            threshold=request.threshold, top_k=request.top_k, replies=replies,
        )  # fmt: skip
        return ranking, items

    def message_hits(
        self, query: str, scope: Scope, limit: int, floor: float | None
    ) -> list[MessageHit]:
        """The scope's messages closest to the query by cosine, best first."""
        vector = self.embedder.embed(query)
        scored = self.store.message_candidates(vector, scope, k=limit)
        if floor is not None:
            scored = {seq: score for seq, score in scored.items() if score >= floor}
        return self.store.message_hits(scored)

    def message_hits_resolving(
        self, query: str, scope: Scope, limit: int, floor: float | None
    ) -> list[MessageHit]:
        """message_hits, with relational references resolved as in facts_resolving ("my
        neighbour" in a message counts only when its speaker is the person the query names)."""
        hits, _ = search_resolving(
            query, lambda text, n, least: self.message_hits(text, scope, n, least),
            limit=limit, floor=floor, score=lambda hit: hit.score,
            candidate=lambda hit: Candidate(hit.record.content, hit.record.name,
                                            hit.record.role == "user"),
            key=lambda hit: hit.record.seq,
        )  # fmt: skip
        return hits
