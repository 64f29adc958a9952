"""`Memory`: the public, Mem0-compatible API over one memory file.

Each method validates everything first, runs the models outside any transaction, then hands the
store one write that is a single transaction. Results keep Mem0's shapes.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from . import inference
from .config import MemoryConfig, resolve_db_path, resolve_models_dir
from .embedder import Embedder, QueryVectorCache
from .entities import EntityExtractor, NoEntities, SpacyEntities
from .errors import MemoryNotFoundError, ModelError, ValidationError
from .extractor import Extractor, LlamaExtractor
from .filters import compile_filters
from .nlp import TextAnalyzer
from .ranking import Weights
from .records import AddPlan, MemoryRecord, NewMemory, NewMessage
from .search import SearchRequest, hybrid_search
from .store import Store, keyword_text
from .store_messages import is_indexed_message
from .timeutil import is_expired, iso, parse_datetime, parse_expiration, utc_now
from .validation import (
    Message,
    Scope,
    check_memory_id,
    check_metadata,
    check_offset,
    check_text,
    check_threshold,
    check_top_k,
    make_scope,
    normalize_messages,
)

_UNSET: Any = Ellipsis
DEFAULT_SEARCH_THRESHOLD = 0.1


def content_hash(text: str) -> str:
    """Mem0 uses MD5 of the text; so do we, for compatible `hash` values."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def _reject_unknown(method: str, unknown: dict[str, Any]) -> None:
    if not unknown:
        return
    scoped = sorted(set(unknown) & {"user_id", "agent_id", "run_id"})
    if scoped:
        raise ValidationError(
            f"{method}() takes {scoped} inside filters=, e.g. filters={{'user_id': 'alice'}}"
        )
    raise ValidationError(f"{method}() got unknown keyword argument(s) {sorted(unknown)}")


class Memory:
    """Durable, searchable memories in one SQLite file, with pinned local models."""

    def __init__(
        self,
        config: MemoryConfig | dict[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        extractor: Extractor | None = None,
        entities: EntityExtractor | None = None,
        analyzer: TextAnalyzer | None = None,
    ) -> None:
        if not isinstance(config, MemoryConfig):
            config = MemoryConfig.from_dict(config)
        self.config = config
        self.weights = Weights(**config.ranking_weights) if config.ranking_weights else Weights()
        self.path = resolve_db_path(config)
        self.models_dir = resolve_models_dir(config.models_dir)
        self.embedder = embedder or self._load_embedder()
        self._query_embedder = QueryVectorCache(self.embedder)  # shared by the two searches
        self.analyzer = analyzer or self._load_analyzer()
        # Both load their model lazily, on first use, and keep it for the life of the Memory.
        self.extractor = extractor or LlamaExtractor(
            config.extractor, self.models_dir, threads=config.threads
        )
        self.entities = entities or (
            NoEntities() if config.nlp is None else SpacyEntities(config.nlp, self.models_dir)
        )
        if self.path != ":memory:":
            from pathlib import Path

            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.store = Store.open(
            self.path, embedder=self.embedder.identity, busy_timeout_ms=config.busy_timeout_ms
        )
        self._lock = threading.RLock()
        self._index_pending_messages()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Memory:
        return cls(MemoryConfig.from_dict(config))

    def _load_embedder(self) -> Embedder:
        from .embedder import EmbedderIdentity, SentenceTransformerEmbedder
        from .model_files import model_identity, verified_model_dir

        name = self.config.embedder
        folder = verified_model_dir(name, self.models_dir)
        ident = model_identity(name, self.models_dir)
        if ident.dimension is None:
            raise ModelError(f"the manifest gives no dimension for embedder {name!r}")
        identity = EmbedderIdentity(name=name, sha256=ident.sha256, dimension=ident.dimension)
        return SentenceTransformerEmbedder(folder, identity)

    def _load_analyzer(self) -> TextAnalyzer:
        from .model_files import verified_model_dir
        from .nlp import SpacyAnalyzer

        return SpacyAnalyzer(
            verified_model_dir(self.config.nlp or "en_core_web_sm", self.models_dir)
        )

    def _prepare(self, memories: Sequence[NewMemory]) -> None:
        """Fill keyword terms, and entities where the caller found none, before the write, so
        the transaction itself runs no model."""
        pending = [m for m in memories if m.terms is None]
        analyses = self.analyzer.analyze_batch([m.keyword_text for m in pending])
        for memory, analysis in zip(pending, analyses, strict=True):
            memory.terms = analysis.terms
        unlinked = [m for m in memories if not m.entities]
        mentions = self.entities.extract_batch([m.text for m in unlinked])
        for memory, found in zip(unlinked, mentions, strict=True):
            memory.entities = list(found)

    def _apply(self, plan: AddPlan) -> None:
        """Analyse and embed what the plan lacks, then write it in one transaction."""
        self._prepare(plan.memories)
        plan.messages = self._embed_messages(plan.messages, plan.memories)
        self.store.apply_add(plan)

    def _embed_messages(
        self, messages: Sequence[NewMessage], memories: Sequence[NewMemory]
    ) -> list[NewMessage]:
        """Give every indexed message its vector; a raw add reuses its memory's (same text)."""
        known = {m.text: m.vector for m in memories}
        missing = sorted(
            {
                m.content
                for m in messages
                if m.vector is None
                and is_indexed_message(m.role, m.content)
                and m.content not in known
            }
        )
        if missing:
            known.update(zip(missing, self.embedder.embed_batch(missing), strict=True))
        return [
            replace(m, vector=known[m.content])
            if m.vector is None and is_indexed_message(m.role, m.content)
            else m
            for m in messages
        ]

    def _index_pending_messages(self) -> None:
        """Embed the messages of a file written before messages were indexed (or imported
        without vectors); each batch is one transaction, so an interrupted run resumes."""
        if self.store.message_index_complete():
            return
        with self._lock:
            for batch in self.store.pending_message_batches():
                vectors = self.embedder.embed_batch([content for _, _, content in batch])
                self.store.index_message_vectors([(seq, user) for seq, user, _ in batch], vectors)
            self.store.mark_message_index("complete")

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        self.store.close()
        self.embedder.close()
        self.extractor.close()
        self.entities.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -------------------------------------------------------------------------------

    def add(
        self,
        messages: str | dict[str, Any] | list[dict[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
        expiration_date: Any = None,
        timestamp: Any = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Store memories from messages. `infer=False` keeps one memory per non-system message."""
        _reject_unknown("add", unknown)
        scope = make_scope(user_id, agent_id, run_id)
        parsed = normalize_messages(messages)
        clean_metadata = check_metadata(metadata)
        expiry = None if expiration_date is None else parse_expiration(expiration_date)
        call_time = None if timestamp is None else parse_datetime(timestamp, what="timestamp")
        if memory_type is not None and memory_type != "procedural_memory":
            raise ValidationError(
                f"memory_type must be None or 'procedural_memory', got {memory_type!r}"
            )
        if prompt is not None:
            check_text(prompt, "prompt")
        if not isinstance(infer, bool):
            raise ValidationError(f"infer must be True or False, got {infer!r}")
        new_messages = [self._new_message(m, call_time) for m in parsed]
        if memory_type == "procedural_memory" and scope.agent_id is None:
            raise ValidationError("memory_type='procedural_memory' needs an agent_id")
        if not infer and memory_type is None:
            return self._add_raw(scope, parsed, new_messages, clean_metadata, expiry)
        request = inference.AddRequest(
            scope=scope, messages=new_messages, metadata=clean_metadata, expiration_date=expiry,
            instructions=prompt if prompt is not None else self.config.custom_instructions,
            now=utc_now(),
        )  # fmt: skip
        models = inference.Models(self.embedder, self.extractor, self.entities)
        plan_for = inference.plan_procedural if memory_type else inference.plan_facts
        with self._lock:  # the model runs first; nothing is written if it fails
            plan, results, _ = plan_for(self.store, models, request)
            self._apply(plan)
        return {"results": results}

    @staticmethod
    def _new_message(message: Message, call_time: datetime | None) -> NewMessage:
        observed = call_time
        if message.timestamp is not None:
            observed = parse_datetime(message.timestamp, what="message timestamp")
        return NewMessage(
            id=str(uuid.uuid4()),
            role=message.role,
            content=message.content,
            name=message.name,
            observed_at=None if observed is None else iso(observed),
        )

    def _add_raw(
        self,
        scope: Scope,
        parsed: Sequence[Message],
        new_messages: list[NewMessage],
        metadata: dict[str, Any],
        expiry: str | None,
    ) -> dict[str, Any]:
        chosen = [i for i, m in enumerate(parsed) if m.role != "system" and m.content.strip()]
        texts = [parsed[i].content for i in chosen]
        hashes = [content_hash(t) for t in texts]
        vectors = self.embedder.embed_batch(texts)
        with self._lock:
            existing = self.store.hashes_in_scope(scope, hashes)
            results, memories, seen = [], [], set(existing)
            for index, text, digest, vector in zip(chosen, texts, hashes, vectors, strict=False):
                message = parsed[index]
                if digest in seen:
                    continue  # exact duplicate of an active memory of this scope or this batch
                seen.add(digest)
                memory = NewMemory(
                    id=str(uuid.uuid4()), text=text, hash=digest, vector=vector,
                    keyword_text=keyword_text(text), metadata=dict(metadata),
                    role=message.role, actor_id=message.name,
                    observed_at=new_messages[index].observed_at,
                    expiration_date=expiry, source_messages=[index],
                )  # fmt: skip
                memories.append(memory)
                item = {"id": memory.id, "memory": text, "event": "ADD", "role": message.role}
                if message.name is not None:
                    item["actor_id"] = message.name
                results.append(item)
            mentions = self.entities.extract_batch([m.text for m in memories])
            for memory, found in zip(memories, mentions, strict=True):
                memory.entities = found
            plan = AddPlan(scope=scope, messages=new_messages, memories=memories,
                           embedder_sha256=self.embedder.identity.sha256)  # fmt: skip
            self._apply(plan)
        return {"results": results}

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        expiration_date: Any = _UNSET,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Change a memory's text (re-embedded), merge its metadata, or set/clear its expiry."""
        _reject_unknown("update", unknown)
        record = self._require(memory_id, user_id, agent_id, run_id)
        if text is not None:
            check_text(text, "text")
        new_metadata = None
        if metadata is not None:
            new_metadata = {**record.metadata, **check_metadata(metadata)}
        expiry = _UNSET
        if expiration_date is not _UNSET:
            expiry = None if expiration_date is None else parse_expiration(expiration_date)
        vector = terms = mentions = None
        if text is not None:
            vector = self.embedder.embed(text)
            terms = self.analyzer.analyze(keyword_text(text)).terms
            mentions = self.entities.extract(text)
        with self._lock:
            updated = self.store.update_memory(
                record, text=text, text_hash=None if text is None else content_hash(text),
                vector=vector, terms=terms, entities=mentions, metadata=new_metadata,
                expiration_date=expiry,
            )  # fmt: skip
        return {**updated.to_dict(), "event": "UPDATE"}

    def delete(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        _reject_unknown("delete", unknown)
        record = self._require(memory_id, user_id, agent_id, run_id)
        with self._lock:
            self.store.delete_memory(record)
        return {"id": record.id, "memory": record.text, "event": "DELETE"}

    def delete_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Delete every memory matching all the ids given, and those scopes' messages."""
        _reject_unknown("delete_all", unknown)
        scope = make_scope(user_id, agent_id, run_id)
        with self._lock:
            count = self.store.delete_scope(scope)
        return {"deleted": count}

    def reset(self) -> None:
        """Remove everything from the memory file (schema and model pins stay)."""
        with self._lock:
            self.store.reset()

    # -- reads --------------------------------------------------------------------------------

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
        _reject_unknown("get", unknown)
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
        _reject_unknown("get_all", unknown)
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
        _reject_unknown("search", unknown)
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
        mentions = self.entities.extract(query)
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
        _reject_unknown("search_messages", unknown)
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
        _reject_unknown("history", unknown)
        return [row.to_dict() for row in self.store.history(check_memory_id(memory_id))]

    def chat(self, query: str) -> Any:
        raise NotImplementedError("chat() is not part of the library API; see `offline-mem chat`")


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
