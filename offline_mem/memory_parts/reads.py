"""The reads of `Memory`: get, get_all, search, search_messages and history.

`MemoryReader` validates their arguments like the writes do, runs no transaction of its own
beyond the store's snapshot reads, and returns Mem0's shapes; the searches themselves are the
retrieval layer's (retrieval/retriever.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import MemoryNotFoundError, ValidationError, shown
from ..pinned.embedder import Embedder
from ..pinned.entities import EntityExtractor
from ..retrieval.evidence import MESSAGE_WEIGHTS
from ..retrieval.ranking import Ranked, Weights
from ..retrieval.retriever import Retriever
from ..retrieval.search import SearchRequest
from ..store.filters import compile_filters
from ..store.interface import MemoryStore
from ..store.messages import StoredMessage
from ..store.records import MemoryRecord
from ..timeutil import is_expired, parse_as_of, utc_now
from ..validation import (
    check_memory_id,
    check_offset,
    check_text,
    check_threshold,
    check_top_k,
    make_scope,
    reject_unknown_kwargs,
)
from ..values import Scope

DEFAULT_SEARCH_THRESHOLD = 0.1


class MemoryReader:
    """The read half of a `Memory` (whose methods document the arguments and results)."""

    def __init__(
        self,
        store: MemoryStore,
        retriever: Retriever,
        query_embedder: Embedder,
        entities: EntityExtractor,
        weights: Weights,
        *,
        messages_ready: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.retriever = retriever
        self.query_embedder = query_embedder  # caches the last queries' vectors
        self.entities = entities
        self.weights = weights
        # blocks until this process's async adds' messages are indexed (message_indexing.py)
        self.messages_ready = messages_ready

    def require(
        self, memory_id: object, user_id: object, agent_id: object, run_id: object
    ) -> MemoryRecord:
        """The memory of that id in the scope named; MemoryNotFoundError otherwise."""
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
        as_of: Any = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        reject_unknown_kwargs("get_all", unknown)
        where = compile_filters(filters)
        moment = None if as_of is None else parse_as_of(as_of)
        records = self.store.list_memories(
            where, limit=check_top_k(top_k), offset=check_offset(offset),
            include_expired=bool(show_expired), include_superseded=bool(include_superseded),
            as_of=moment,
        )  # fmt: skip
        now = moment or utc_now()
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
        as_of: Any = None,
        reference_date: Any = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        reject_unknown_kwargs("search", unknown)
        check_text(query, "query")
        moment = _moment(as_of, reference_date)
        request = SearchRequest(
            query=query,
            where=compile_filters(filters),
            top_k=check_top_k(top_k),
            threshold=check_threshold(threshold),
            include_expired=bool(show_expired),
            include_superseded=bool(include_superseded),
            as_of=moment,
            weights=self.weights,
        )
        # The embedder first: loading its weights briefly holds two copies of them (~180 MB),
        # and with spaCy's pipeline not loaded yet that peak is ~80 MB lower (measured RSS of a
        # cold search: 307 -> 225 MB). The vector is kept for the searches below.
        self.query_embedder.embed(query)
        mentions = self.entities.extract_query(query)
        if resolve_references:
            outcome, resolved = self.retriever.facts_resolving(request, mentions)
        else:
            outcome, resolved = self.retriever.facts(request, mentions), None
        facts = {record.rowid: (record, ranked) for record, ranked in outcome.hits}
        scope = _exact_scope(filters) if include_messages else None
        if scope is not None:
            self.messages_ready()
        ranking, messages = self.retriever.rank_with_messages(request, outcome, scope)
        now = moment or utc_now()
        results = []
        for evidence in ranking:
            if evidence.kind == "fact":
                record, ranked = facts[evidence.key]
                item = {"kind": "fact"} | record.to_dict(
                    score=round(evidence.score, 6),
                    expired=is_expired(record.expiration_date, now),
                )
                if explain:
                    item["score_details"] = self._fact_details(ranked, request.threshold)
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

    def _fact_details(self, ranked: Ranked, threshold: float | None) -> dict[str, Any]:
        """A fact's `score_details`; a score carried from a memory it replaced names that one
        (retrieval/ranking.carry_to_replacements): the signals are that memory's."""
        details: dict[str, Any] = ranked.explain(self.weights, threshold)
        if ranked.carried_from is not None:
            replaced = self.store.records_by_rowid([ranked.carried_from]).get(ranked.carried_from)
            details["score_carried_from"] = None if replaced is None else replaced.id
        return details

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
        reject_unknown_kwargs("search_messages", unknown)
        check_text(query, "query")
        scope = _message_scope(filters)
        limit = check_top_k(top_k)
        floor = check_threshold(threshold)
        self.messages_ready()
        if resolve_references:
            hits = self.retriever.message_hits_resolving(query, scope, limit, floor)
        else:
            hits = self.retriever.message_hits(query, scope, limit, floor)
        results = []
        for hit in hits:
            item = hit.record.to_dict()
            item["score"] = round(hit.score, 6)
            item["memory_ids"] = list(hit.memory_ids)
            results.append(item)
        return {"results": results}

    def history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> list[dict[str, Any]]:
        reject_unknown_kwargs("history", unknown)
        key = check_memory_id(memory_id)
        scope = make_scope(user_id, agent_id, run_id, required=False)
        if not scope.is_empty():
            record = self.store.get(key)
            if record is None or not in_scope(record, scope):
                return []
        return [row.to_dict() for row in self.store.history(key)]


def _moment(as_of: Any, reference_date: Any) -> Any:
    """The moment a search asks about: `as_of`, or Mem0's `reference_date` for the same."""
    if as_of is not None and reference_date is not None:
        raise ValidationError("give as_of= or reference_date= (the same thing), not both")
    if reference_date is not None:
        return parse_as_of(reference_date, what="reference_date")
    return None if as_of is None else parse_as_of(as_of)


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
