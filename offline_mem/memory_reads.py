"""The read half of `Memory`: get, get_all, search, search_messages and history.

A mixin: `Memory` provides the store and the models. Reads validate their arguments like writes,
run no transaction of their own beyond the store's snapshot reads, and keep Mem0's shapes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .errors import MemoryNotFoundError, ValidationError, shown
from .pinned.embedder import Embedder
from .pinned.entities import EntityExtractor
from .pinned.nlp import TextAnalyzer
from .retrieval import evidence as evidence_ranking
from .retrieval.evidence import MESSAGE_WEIGHTS, Evidence, MessageSignals, asks, rank_evidence
from .retrieval.ranking import Ranked, Weights, keyword_share
from .retrieval.references import Candidate, search_resolving
from .retrieval.search import SearchOutcome, SearchRequest, overfetch, search_memories
from .store.filters import compile_filters
from .store.messages import MessageHit, StoredMessage, message_item
from .store.records import MemoryRecord
from .store.store import Store
from .timeutil import is_expired, utc_now
from .validation import (
    check_memory_id,
    check_offset,
    check_text,
    check_threshold,
    check_top_k,
    make_scope,
    reject_unknown_kwargs,
)
from .values import EntityMention, Scope

DEFAULT_SEARCH_THRESHOLD = 0.1
Hit = tuple[MemoryRecord, Ranked]


class MemoryReads:
    store: Store
    weights: Weights
    analyzer: TextAnalyzer
    entities: EntityExtractor
    _query_embedder: Embedder  # caches the last queries' vectors (both searches share them)

    def _require(
        self, memory_id: object, user_id: object, agent_id: object, run_id: object
    ) -> MemoryRecord:
        key = check_memory_id(memory_id)
        scope = make_scope(user_id, agent_id, run_id, required=False)
        record = self.store.get(key)
        if record is None or not in_scope(record, scope):
            raise MemoryNotFoundError(f"no memory with id {shown(key)} in the scope named")
        return record

    def get(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any] | None:
        """The memory, or None. Expired memories are returned marked `"expired": True`. The id
        of a stored message (a `"kind": "message"` search result) gives that message."""
        reject_unknown_kwargs("get", unknown)
        key = check_memory_id(memory_id)
        scope = make_scope(user_id, agent_id, run_id, required=False)
        record = self.store.get(key)
        if record is None:
            message = self.store.find_message(key)
            return message.to_item() if message and in_scope(message, scope) else None
        if not in_scope(record, scope):
            return None
        return record.to_dict(expired=is_expired(record.expiration_date, utc_now()))

    def get_all(
        self,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 20,
        offset: int = 0,
        show_expired: bool = False,
        include_superseded: bool = False,
        **unknown: Any,
    ) -> dict[str, Any]:
        reject_unknown_kwargs("get_all", unknown)
        where = compile_filters(filters)
        records = self.store.list_memories(
            where, limit=check_top_k(top_k), offset=check_offset(offset),
            include_expired=bool(show_expired), include_superseded=bool(include_superseded),
        )  # fmt: skip
        now = utc_now()
        return {"results": [r.to_dict(expired=is_expired(r.expiration_date, now)) for r in records]}

    def search(
        self,
        query: str,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 20,
        threshold: float | None = DEFAULT_SEARCH_THRESHOLD,
        show_expired: bool = False,
        include_superseded: bool = False,
        include_sources: bool = False,
        include_messages: bool = True,
        explain: bool = False,
        resolve_references: bool = True,
        **unknown: Any,
    ) -> dict[str, Any]:
        """The facts and stored messages of the filtered scope that best match `query`, in one
        ranking, best first. Every item has `"kind": "fact"` or `"kind": "message"`.

        Facts: candidates from vector similarity, keyword (BM25) and entity signals; `score` is
        their weighted sum on a fixed [0, 1] scale (see ranking.py). Messages: scored on the same
        scale by their own text (similarity and entities). Facts take at most 20% of the places
        (evidence.py says why). `threshold` drops lower scores. A message item
        has `id`, `memory` (the turn as "Name: content" when it has a name), `content`, `role`,
        `name`, `created_at`, `observed_at`, `memory_ids` (the facts extracted from it) and
        `score`. `include_messages=False` returns facts only; messages carry no metadata, so
        they are left out too when `filters` holds anything but exact scope ids.
        `explain=True` adds each signal's contribution as `score_details`.

        A query naming someone by relation ("Which city does Tiago's neighbour live in?") is
        searched again with the name its first results give ("... does Bruno live in?"). The
        facts are then the memory that gave the name, followed by the two rankings taken in
        turn (references.py); each keeps the score of the query that found it first, and
        `explain=True` adds `resolved_query`.
        `resolve_references=False` searches the query as given only."""
        reject_unknown_kwargs("search", unknown)
        check_text(query, "query")
        request = SearchRequest(
            query=query,
            where=compile_filters(filters),
            top_k=check_top_k(top_k),
            threshold=check_threshold(threshold),
            include_expired=bool(show_expired),
            include_superseded=bool(include_superseded),
            weights=self.weights,
        )
        # The embedder first: loading its weights briefly holds two copies of them (~180 MB),
        # and with spaCy's pipeline not loaded yet that peak is ~80 MB lower (measured RSS of a
        # cold search: 307 -> 225 MB). The vector is kept for the searches below.
        self._query_embedder.embed(query)
        mentions = self.entities.extract_query(query)
        if resolve_references:
            outcome, resolved = self._search_resolving(request, mentions)
        else:
            outcome, resolved = self._hybrid(request, mentions), None
        facts = {record.rowid: (record, ranked) for record, ranked in outcome.hits}
        scope = _exact_scope(filters) if include_messages else None
        ranking, messages = self._rank_with_messages(request, outcome, scope)
        now = utc_now()
        results = []
        for evidence in ranking:
            if evidence.kind == "fact":
                record, ranked = facts[evidence.key]
                item = {"kind": "fact"} | record.to_dict(
                    score=round(evidence.score, 6),
                    expired=is_expired(record.expiration_date, now),
                )
                if explain:
                    item["score_details"] = ranked.explain(self.weights, request.threshold)
                if include_sources:
                    item["sources"] = [m.to_dict() for m in self.store.sources(record.rowid)]
            else:
                item = messages[evidence.key]
                item["score"] = round(evidence.score, 6)
                if explain:
                    item["score_details"] = evidence.explain(MESSAGE_WEIGHTS, request.threshold)
            results.append(item)
        if explain:
            return {"results": results, "resolved_query": resolved}
        return {"results": results}

    def _rank_with_messages(
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
        vector = self._query_embedder.embed(request.query)
        n = overfetch(request.top_k)
        cosine = self.store.message_candidates(vector, scope, k=n)
        # Keyword candidates too, each scored on both signals (as search.py does for facts).
        stats = self.store.message_keyword_stats(
            self.analyzer.analyze_query(request.query).terms, scope
        )
        bm25 = self.store.message_keyword_candidates(
            stats, scope, limit=n, also_seqs=sorted(cosine)
        )
        cosine.update(self.store.message_similarities(vector, sorted(set(bm25) - set(cosine))))
        # A message stored verbatim as a memory (a raw add) is already in the ranking as that
        # memory; listing it twice would only take a place.
        hits = [hit for hit in self.store.message_hits(cosine) if not hit.stored_verbatim]
        # The replies to the candidates that ask something are candidates too, on their own
        # signals, and take a share of the question's score (evidence.REPLY_SHARE).
        replies: dict[int, int] = {}
        if evidence_ranking.REPLY_SHARE:
            replies = self.store.message_replies(
                [h.record.seq for h in hits if asks(h.record.content)]
            )
        new = sorted(set(replies.values()) - set(cosine))
        if new:
            found = self.store.message_similarities(vector, new)
            bm25.update(self.store.message_keyword_candidates(stats, scope, limit=0, also_seqs=new))
            hits += [hit for hit in self.store.message_hits(found) if not hit.stored_verbatim]
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

    def search_messages(
        self,
        query: str,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        threshold: float | None = None,
        resolve_references: bool = True,
        **unknown: Any,
    ) -> dict[str, Any]:
        """The stored messages (not memories) of a scope closest to `query`, best first.

        Extraction can miss what a later question needs; the messages themselves stay
        searchable. `filters` names the scope by `user_id`, `agent_id` and/or `run_id` (exact
        values; messages carry no metadata). `score` is the cosine similarity of the query to
        the message; `threshold` drops lower scores. Each result lists `memory_ids`, the
        memories extracted from that message. System messages are not indexed. Relational
        references are resolved as in `search` ("my neighbour" in a message counts only when
        its speaker is the person the query names)."""
        reject_unknown_kwargs("search_messages", unknown)
        check_text(query, "query")
        scope = _message_scope(filters)
        limit = check_top_k(top_k)
        floor = check_threshold(threshold)
        if resolve_references:
            hits = self._message_hits_resolving(query, scope, limit, floor)
        else:
            hits = self._message_hits(query, scope, limit, floor)
        results = []
        for hit in hits:
            item = hit.record.to_dict()
            item["score"] = round(hit.score, 6)
            item["memory_ids"] = list(hit.memory_ids)
            results.append(item)
        return {"results": results}

    def _hybrid(self, request: SearchRequest, mentions: list[EntityMention]) -> SearchOutcome:
        return search_memories(
            self.store, self._query_embedder, self.analyzer, request, mentions=mentions
        )

    def _search_resolving(
        self, request: SearchRequest, mentions: list[EntityMention]
    ) -> tuple[SearchOutcome, str | None]:
        """The memory search, with the query's relational references resolved
        (references.search_resolving); the entities known to the scope are those of every
        search it ran."""
        known: set[str] = set()

        def search(query: str, limit: int, floor: float | None) -> list[Hit]:
            asked = replace(request, query=query, top_k=limit, threshold=floor)
            said = mentions if query == request.query else self.entities.extract_query(query)
            found = self._hybrid(asked, said)
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

    def _message_hits_resolving(
        self, query: str, scope: Scope, limit: int, floor: float | None
    ) -> list[MessageHit]:
        """_message_hits, with relational references resolved as in _search_resolving ("my
        neighbour" in a message counts only when its speaker is the person the query names)."""
        hits, _ = search_resolving(
            query, lambda text, n, least: self._message_hits(text, scope, n, least),
            limit=limit, floor=floor, score=lambda hit: hit.score,
            candidate=lambda hit: Candidate(hit.record.content, hit.record.name,
                                            hit.record.role == "user"),
            key=lambda hit: hit.record.seq,
        )  # fmt: skip
        return hits

    def _message_hits(
        self, query: str, scope: Scope, limit: int, floor: float | None
    ) -> list[MessageHit]:
        vector = self._query_embedder.embed(query)
        scored = self.store.message_candidates(vector, scope, k=limit)
        if floor is not None:
            scored = {seq: score for seq, score in scored.items() if score >= floor}
        return self.store.message_hits(scored)

    def history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> list[dict[str, Any]]:
        """Every ADD/UPDATE/SUPERSEDE/DELETE of the memory, oldest first; kept after deletion.
        With a scope named (as for `get`), only the history of a live memory of that scope: a
        deleted memory's row, and the scope it had, are gone from the file, so its history is
        returned only to a call that names no scope."""
        reject_unknown_kwargs("history", unknown)
        key = check_memory_id(memory_id)
        scope = make_scope(user_id, agent_id, run_id, required=False)
        if not scope.is_empty():
            record = self.store.get(key)
            if record is None or not in_scope(record, scope):
                return []
        return [row.to_dict() for row in self.store.history(key)]


def _exact_scope(filters: dict[str, Any] | None) -> Scope | None:
    """The scope of filters that hold nothing but exact scope ids, else None (messages carry no
    metadata, role or date fields for other filters to test)."""
    if not isinstance(filters, dict) or not set(filters) <= {"user_id", "agent_id", "run_id"}:
        return None
    if any(value is None or value == "*" or isinstance(value, (dict, list)) for value in
           filters.values()):  # fmt: skip
        return None
    return make_scope(filters.get("user_id"), filters.get("agent_id"), filters.get("run_id"))


def _message_scope(filters: dict[str, Any] | None) -> Scope:
    if not isinstance(filters, dict):
        raise ValidationError(
            "search_messages() needs filters naming the scope, e.g. filters={'user_id': 'alice'}"
        )
    extra = sorted(set(filters) - {"user_id", "agent_id", "run_id"})
    if extra:
        raise ValidationError(
            f"search_messages() filters take only user_id, agent_id and run_id, not {extra}"
        )
    return make_scope(filters.get("user_id"), filters.get("agent_id"), filters.get("run_id"))


def in_scope(record: MemoryRecord | StoredMessage, scope: Scope) -> bool:
    """True when every id the caller named matches the memory's."""
    return all(
        wanted is None or wanted == have
        for wanted, have in (
            (scope.user_id, record.user_id),
            (scope.agent_id, record.agent_id),
            (scope.run_id, record.run_id),
        )
    )
