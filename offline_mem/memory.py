"""`Memory`: the public, Mem0-compatible API over one memory file.

Each method validates everything first, runs the models outside any transaction, then hands the
store one write that is a single transaction. Results keep Mem0's shapes. The reads (get,
get_all, search, search_messages, history) are in memory_reads.py.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .config import MemoryConfig, resolve_db_path, resolve_models_dir
from .errors import ModelError, ValidationError, shown
from .memory_jobs import MemoryJobs
from .memory_reads import MemoryReads, in_scope
from .pinned.embedder import Embedder, QueryVectorCache
from .pinned.entities import EntityExtractor, NoEntities, SpacyEntities
from .pinned.extractor import Extractor, LlamaExtractor
from .pinned.nlp import TextAnalyzer
from .pinned.process_tuning import claim_process
from .retrieval.ranking import Weights
from .store.job_worker import JobWorker
from .store.messages import is_indexed_message, message_embedding_text
from .store.records import AddPlan, NewMemory, NewMessage
from .store.store import Store, keyword_text
from .timeutil import iso, parse_datetime, parse_expiration, utc_now
from .validation import (
    Message,
    Skipped,
    check_memory_id,
    check_metadata,
    check_text,
    make_scope,
    normalize_messages,
    reject_unknown_kwargs,
)
from .values import EmbedderIdentity, Scope, content_hash

if TYPE_CHECKING:
    from .extraction.inference import AddRequest

_UNSET: Any = Ellipsis


def _reported(result: dict[str, Any], skipped: Sequence[Skipped]) -> dict[str, Any]:
    """An add's result, with the messages that could not be used and why (when any)."""
    if skipped:
        result["skipped"] = [s.to_dict() for s in skipped]
    return result


class Memory(MemoryReads, MemoryJobs):
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
        if config.own_process:
            claim_process()
        self.embedder = embedder or self._load_embedder()
        self._query_embedder = QueryVectorCache(self.embedder)  # shared by the two searches
        self.analyzer = analyzer or self._load_analyzer()
        # Both load their model lazily, on first use, and keep it for the life of the Memory.
        self.extractor = extractor or LlamaExtractor(
            config.extractor,
            self.models_dir,
            threads=config.threads,
            reproducible=config.reproducible,
            nice=config.model_nice,
        )
        self.entities = entities or (
            NoEntities() if config.nlp is None else SpacyEntities(config.nlp, self.models_dir)
        )
        if self.path != ":memory:":
            from pathlib import Path

            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.store = Store.open(
            self.path,
            embedder=self.embedder.identity,
            busy_timeout_ms=config.busy_timeout_ms,
            vector_cache_mb=config.vector_cache_mb,
            init_empty=config.init_empty_file,
        )
        self._lock = threading.RLock()
        self._index_pending_messages()
        self._worker = JobWorker(self.store, self._run_job)
        if config.job_worker and self.store.pending_jobs():
            self._worker.start()  # jobs left by a process that ended, or another one's

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Memory:
        return cls(MemoryConfig.from_dict(config))

    def _load_embedder(self) -> Embedder:
        from .pinned.embedder import SentenceTransformerEmbedder
        from .pinned.model_files import model_identity, verified_model_dir

        name = self.config.embedder
        folder = verified_model_dir(name, self.models_dir)
        ident = model_identity(name, self.models_dir)
        if ident.dimension is None:
            raise ModelError(f"the manifest gives no dimension for embedder {shown(name)}")
        identity = EmbedderIdentity(
            name=name,
            sha256=ident.sha256,
            dimension=ident.dimension,
            files_sha256=ident.files_sha256,
        )
        return SentenceTransformerEmbedder(folder, identity)

    def _load_analyzer(self) -> TextAnalyzer:
        from .pinned.model_files import verified_model_dir
        from .pinned.nlp import SpacyAnalyzer

        return SpacyAnalyzer(
            verified_model_dir(self.config.nlp or "en_core_web_sm", self.models_dir)
        )

    def _prepare(self, memories: Sequence[NewMemory]) -> None:
        """Fill keyword terms, and entities where the caller found none, before the write, so
        the transaction itself runs no model. Every add's memories get their entities here, one
        batch, each text read once."""
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
        with self._lock:
            self.store.apply_add(plan)

    def _embed_messages(
        self, messages: Sequence[NewMessage], memories: Sequence[NewMemory]
    ) -> list[NewMessage]:
        """Give every indexed message its vector and keyword terms (both of
        `message_embedding_text`); a raw add of a message without a name reuses its memory's
        vector (same text)."""
        known = {m.text: m.vector for m in memories}
        texts = {
            m.id: message_embedding_text(m.name, m.content)
            for m in messages
            if m.vector is None and is_indexed_message(m.role, m.content)
        }
        missing = sorted(set(texts.values()) - set(known))
        if missing:
            known.update(zip(missing, self.embedder.embed_batch(missing), strict=True))
        distinct = sorted(set(texts.values()))
        terms = {
            text: analysis.terms
            for text, analysis in zip(distinct, self.analyzer.analyze_batch(distinct), strict=True)
        }
        return [
            replace(m, vector=known[texts[m.id]], terms=terms[texts[m.id]]) if m.id in texts else m
            for m in messages
        ]

    def _index_pending_messages(self) -> None:
        """Embed and keyword-index the messages of a file written before messages were indexed
        (or imported without vectors); each batch is one transaction, so an interrupted run
        resumes."""
        if self.store.message_index_complete():
            return
        with self._lock:
            for batch in self.store.pending_message_batches():
                texts = [text for _, _, text in batch]
                vectors = self.embedder.embed_batch(texts)
                terms = [a.terms for a in self.analyzer.analyze_batch(texts)]
                rows = [(seq, user) for seq, user, _ in batch]
                self.store.index_messages(rows, vectors, terms)
            self.store.mark_message_index("complete")

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Let a running extraction job finish (queued ones stay queued in the file), then close
        the file and release the models."""
        self._worker.stop()
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
        async_mode: bool | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Store memories from messages. `infer=False` keeps one memory per non-system message.

        With `async_mode=True` (default: the config's `async_mode`) an add that runs the
        extractor stores its messages and queues the extraction in one transaction, and returns
        `{"results": [], "status": "PENDING", "event_id": <job id>}` at once; the messages are
        searchable from then on, and the worker thread adds the facts (see `flush`, `job`)."""
        reject_unknown_kwargs("add", unknown)
        scope = make_scope(user_id, agent_id, run_id)
        parsed, skipped = normalize_messages(messages)
        clean_metadata = check_metadata(metadata)
        expiry = None if expiration_date is None else parse_expiration(expiration_date)
        call_time = None if timestamp is None else parse_datetime(timestamp, what="timestamp")
        if memory_type is not None and memory_type != "procedural_memory":
            raise ValidationError(
                f"memory_type must be None or 'procedural_memory', got {shown(memory_type)}"
            )
        if prompt is not None:
            check_text(prompt, "prompt")
        if not isinstance(infer, bool):
            raise ValidationError(f"infer must be True or False, got {shown(infer)}")
        if async_mode is None:
            async_mode = self.config.async_mode
        elif not isinstance(async_mode, bool):
            raise ValidationError(
                f"async_mode must be True, False or None, got {shown(async_mode)}"
            )
        new_messages = [self._new_message(m, call_time) for m in parsed]
        if memory_type == "procedural_memory" and scope.agent_id is None:
            raise ValidationError("memory_type='procedural_memory' needs an agent_id")
        if not infer and memory_type is None:
            return _reported(
                self._add_raw(scope, parsed, new_messages, clean_metadata, expiry), skipped
            )
        kind = "procedural" if memory_type else "facts"
        instructions = prompt if prompt is not None else self.config.custom_instructions
        if async_mode:
            plan = AddPlan(scope=scope, messages=new_messages, memories=[],
                           embedder_sha256=self.embedder.identity.sha256)  # fmt: skip
            queued = self._enqueue(plan, kind, clean_metadata, expiry, instructions)
            return _reported(queued, skipped)
        # extraction's modules: a search or raw add never loads them
        from .extraction import inference

        request = inference.AddRequest(
            scope=scope, messages=new_messages, metadata=clean_metadata, expiration_date=expiry,
            instructions=instructions, now=utc_now(),
        )  # fmt: skip
        self._wait_for_queued(scope)  # the scope's async adds came first: extract theirs first
        plan, results = self._infer(kind, request)
        self._apply(plan)
        return _reported({"results": results}, skipped)

    def _infer(self, kind: str, request: AddRequest) -> tuple[AddPlan, list[dict[str, Any]]]:
        """The extraction of an add, synchronous or queued: the write plan and its results.
        The model runs outside any lock, so other threads' reads and writes go on meanwhile;
        nothing is written here, so nothing is written if it fails."""
        from .extraction import inference
        from .extraction.lexicon import lexicon_for

        lexicon = lexicon_for(self.config.nlp)  # the fact checks' words, in the pipeline's language
        models = inference.Models(self.embedder, self.extractor, self.entities, lexicon)
        plan_for = inference.plan_procedural if kind == "procedural" else inference.plan_facts
        plan, results, _ = plan_for(self.store, models, request)
        return plan, results

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
            metadata=message.metadata,
            extract=message.extract,
        )

    def _add_raw(
        self,
        scope: Scope,
        parsed: Sequence[Message],
        new_messages: list[NewMessage],
        metadata: dict[str, Any],
        expiry: str | None,
    ) -> dict[str, Any]:
        chosen = [
            i
            for i, m in enumerate(parsed)
            if m.role != "system" and m.extract and m.content.strip()
        ]
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
            plan = AddPlan(scope=scope, messages=new_messages, memories=memories,
                           embedder_sha256=self.embedder.identity.sha256)  # fmt: skip
            self._apply(plan)
        return {"results": results}

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        *,
        data: str | None = None,
        metadata: dict[str, Any] | None = None,
        expiration_date: Any = _UNSET,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Change a memory's text (re-embedded), merge its metadata, or set/clear its expiry.
        `data=` is Mem0's name for the text."""
        reject_unknown_kwargs("update", unknown)
        if data is not None:
            if text is not None:
                raise ValidationError("update() takes the new text as text= or data=, not both")
            text = data
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
        """Delete a memory (a DELETE history row is kept), or a stored message by its id (its
        vector and provenance links go with it; the memories extracted from it stay)."""
        reject_unknown_kwargs("delete", unknown)
        key = check_memory_id(memory_id)
        if self.store.get(key) is None:
            message = self.store.find_message(key)
            if message is not None and in_scope(message, make_scope(
                    user_id, agent_id, run_id, required=False)):  # fmt: skip
                with self._lock:
                    deleted = self.store.delete_message(key)
                self.store.erase_freed()
                if deleted is not None:
                    text = deleted.to_item()["memory"]
                    return {"id": key, "kind": "message", "memory": text, "event": "DELETE"}
        record = self._require(memory_id, user_id, agent_id, run_id)
        with self._lock:
            self.store.delete_memory(record)
        self.store.erase_freed()
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
        reject_unknown_kwargs("delete_all", unknown)
        scope = make_scope(user_id, agent_id, run_id)
        with self._lock:
            count = self.store.delete_scope(scope)
        self.store.erase_freed()
        return {"deleted": count}

    def reset(self) -> None:
        """Remove everything from the memory file (schema and model pins stay)."""
        with self._lock:
            self.store.reset()
        self.store.erase_freed()

    def compact(self) -> dict[str, int]:
        """Give the file's free pages back to the file system (after deletes), and leave no
        deleted text in the file or its WAL. Safe to interrupt: the file stays as it was or is
        compacted whole. Returns `{"bytes_before", "bytes_after", "free_bytes_before"}`."""
        with self._lock:
            return self.store.compact()

    def chat(self, query: str) -> Any:
        raise NotImplementedError("chat() is not part of the library API; see `offline-mem chat`")
