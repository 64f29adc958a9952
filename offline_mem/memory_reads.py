"""The read half of `Memory`: get, get_all, search, search_messages and history.

A mixin: `Memory` provides the store and the models. Reads validate their arguments like writes,
run no transaction of their own beyond the store's snapshot reads, and keep Mem0's shapes.
"""

from __future__ import annotations

from typing import Any

from .embedder import Embedder
from .entities import EntityExtractor
from .errors import MemoryNotFoundError, ValidationError
from .filters import compile_filters
from .nlp import TextAnalyzer
from .ranking import Weights
from .records import MemoryRecord
from .search import SearchRequest, hybrid_search
from .store import Store
from .timeutil import is_expired, utc_now
from .validation import (
    Scope,
    check_memory_id,
    check_offset,
    check_text,
    check_threshold,
    check_top_k,
    make_scope,
    reject_unknown_kwargs,
)

DEFAULT_SEARCH_THRESHOLD = 0.1


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
        if record is None or not _in_scope(record, scope):
            raise MemoryNotFoundError(f"no memory with id {key!r} in the scope named")
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
        """The memory, or None. Expired memories are returned marked `"expired": True`."""
        reject_unknown_kwargs("get", unknown)
        key = check_memory_id(memory_id)
        scope = make_scope(user_id, agent_id, run_id, required=False)
        record = self.store.get(key)
        if record is None or not _in_scope(record, scope):
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
        explain: bool = False,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Memories of the filtered scope that best match `query`, best first.

        Candidates come from vector similarity, keyword (BM25) and entity signals; `score` is
        their weighted sum on a fixed [0, 1] scale (see ranking.py), and `threshold` drops lower
        scores. `explain=True` adds each signal's contribution as `score_details`."""
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
        mentions = self.entities.extract_query(query)
        hits = hybrid_search(
            self.store, self._query_embedder, self.analyzer, request, mentions=mentions
        )
        now = utc_now()
        results = []
        for record, ranked in hits:
            item = record.to_dict(
                score=round(ranked.score, 6), expired=is_expired(record.expiration_date, now)
            )
            if explain:
                item["score_details"] = ranked.explain(self.weights, request.threshold)
            if include_sources:
                item["sources"] = [m.to_dict() for m in self.store.sources(record.rowid)]
            results.append(item)
        return {"results": results}

    def search_messages(
        self,
        query: str,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        threshold: float | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """The stored messages (not memories) of a scope closest to `query`, best first.

        Extraction can miss what a later question needs; the messages themselves stay
        searchable. `filters` names the scope by `user_id`, `agent_id` and/or `run_id` (exact
        values; messages carry no metadata). `score` is the cosine similarity of the query to
        the message; `threshold` drops lower scores. Each result lists `memory_ids`, the
        memories extracted from that message. System messages are not indexed."""
        reject_unknown_kwargs("search_messages", unknown)
        check_text(query, "query")
        scope = _message_scope(filters)
        limit = check_top_k(top_k)
        floor = check_threshold(threshold)
        vector = self._query_embedder.embed(query)
        scored = self.store.message_candidates(vector, scope, k=limit)
        if floor is not None:
            scored = {seq: score for seq, score in scored.items() if score >= floor}
        results = []
        for hit in self.store.message_hits(scored):
            item = hit.record.to_dict()
            item["score"] = round(hit.score, 6)
            item["memory_ids"] = list(hit.memory_ids)
            results.append(item)
        return {"results": results}

    def history(self, memory_id: str, **unknown: Any) -> list[dict[str, Any]]:
        """Every ADD/UPDATE/SUPERSEDE/DELETE of the memory, oldest first; kept after deletion."""
        reject_unknown_kwargs("history", unknown)
        return [row.to_dict() for row in self.store.history(check_memory_id(memory_id))]


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


def _in_scope(record: MemoryRecord, scope: Scope) -> bool:
    """True when every id the caller named matches the memory's."""
    return all(
        wanted is None or wanted == have
        for wanted, have in (
            (scope.user_id, record.user_id),
            (scope.agent_id, record.agent_id),
            (scope.run_id, record.run_id),
        )
    )
