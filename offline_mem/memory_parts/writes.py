"""The write side of `Memory.add`: complete write plans, each handed to the store as one
transaction.

`AddWriter` turns an add's messages into a plan the store can write without running a model:
raw adds (one memory per message), the extraction of an inferred add (synchronous or a queued
job's), each memory's keyword terms, entities and `valid_from`, each indexed message's vector
and terms. The models run before the write lock is taken, so other threads' reads and writes go
on meanwhile, and nothing is written if one of them fails.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..extraction.lexicon import lexicon_for
from ..extraction.validity import valid_from
from ..pinned.embedder import Embedder
from ..pinned.entities import EntityExtractor
from ..pinned.extractor import Extractor
from ..pinned.nlp import TextAnalyzer
from ..store.interface import MemoryStore
from ..store.messages import is_indexed_message, message_embedding_text
from ..store.records import AddPlan, NewMemory, NewMessage, keyword_text
from ..timeutil import iso, parse_datetime
from ..validation import Message
from ..values import Scope, content_hash

if TYPE_CHECKING:
    from ..extraction.planner import AddRequest


class AddWriter:
    """Builds and writes the plans of a `Memory`'s adds (whose methods document the arguments)."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        embedder: Embedder,
        analyzer: TextAnalyzer,
        entities: EntityExtractor,
        extractor: Extractor,
        nlp: str | None,
        lock: threading.RLock,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.analyzer = analyzer
        self.entities = entities
        self.extractor = extractor
        self.lexicon = lexicon_for(nlp)  # dates and the fact checks' words, in nlp's language
        self.lock = lock  # the Memory's: one write at a time from this process

    @staticmethod
    def new_message(message: Message, call_time: datetime | None) -> NewMessage:
        """A validated message as the store keeps it; its own timestamp wins over the call's."""
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

    def add_raw(
        self,
        scope: Scope,
        parsed: Sequence[Message],
        new_messages: list[NewMessage],
        metadata: dict[str, Any],
        expiry: str | None,
    ) -> dict[str, Any]:
        """`add(..., infer=False)`: one memory per non-system message with text, except exact
        duplicates of an active memory of the scope or of an earlier message of the batch."""
        chosen = [
            i
            for i, m in enumerate(parsed)
            if m.role != "system" and m.extract and m.content.strip()
        ]
        texts = [parsed[i].content for i in chosen]
        hashes = [content_hash(t) for t in texts]
        vectors = self.embedder.embed_batch(texts)
        with self.lock:
            existing = self.store.hashes_in_scope(scope, hashes)
            results, memories, seen = [], [], set(existing)
            for index, text, digest, vector in zip(chosen, texts, hashes, vectors, strict=False):
                message = parsed[index]
                if digest in seen:
                    continue
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
            self.apply(self.prepared(plan))
        return {"results": results}

    def extract(self, kind: str, request: AddRequest) -> tuple[AddPlan, list[dict[str, Any]]]:
        """The extraction of an add, synchronous or queued: the write plan (its memories
        analysed) and its results. Nothing is written here, so nothing is written if it fails."""
        from ..extraction import planner  # a search or raw add never loads extraction's modules

        models = planner.Models(self.embedder, self.extractor, self.entities, self.lexicon)
        plan_for = planner.plan_procedural if kind == "procedural" else planner.plan_facts
        plan, results, _ = plan_for(self.store, models, request)
        return self.prepared(plan), results

    def prepared(self, plan: AddPlan) -> AddPlan:
        """The plan with its memories' keyword terms, their entities where the caller found none,
        and their `valid_from`, so the transaction itself runs no model; one batch per model,
        each text read once."""
        memories = list(plan.memories)
        pending = [i for i, m in enumerate(memories) if m.terms is None]
        analyses = self.analyzer.analyze_batch([memories[i].keyword_text for i in pending])
        for i, analysis in zip(pending, analyses, strict=True):
            memories[i] = replace(memories[i], terms=analysis.terms)
        unlinked = [i for i, m in enumerate(memories) if not m.entities]
        mentions = self.entities.extract_batch([memories[i].text for i in unlinked])
        for i, found in zip(unlinked, mentions, strict=True):
            memories[i] = replace(memories[i], entities=list(found))
        for i, m in enumerate(memories):
            memories[i] = replace(m, valid_from=valid_from(m.text, m.observed_at, self.lexicon))
        return replace(plan, memories=memories)

    def apply(self, plan: AddPlan) -> None:
        """Embed the plan's messages, then write it in one transaction (its memories are
        `prepared` already)."""
        plan = replace(plan, messages=self.embed_messages(plan.messages, plan.memories))
        with self.lock:
            self.store.apply_add(plan)

    def embed_messages(
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
            for text, analysis in zip(distinct, self.analyzer.analyze_terms(distinct), strict=True)
        }
        return [
            replace(m, vector=known[texts[m.id]], terms=terms[texts[m.id]]) if m.id in texts else m
            for m in messages
        ]

    def index_pending_messages(self) -> None:
        """Embed and keyword-index the messages of a file written before messages were indexed
        (or imported without vectors); each batch is one transaction, so an interrupted run
        resumes."""
        if self.store.message_index_complete():
            return
        with self.lock:
            for batch in self.store.pending_message_batches():
                texts = [text for _, _, text in batch]
                vectors = self.embedder.embed_batch(texts)
                terms = [a.terms for a in self.analyzer.analyze_terms(texts)]
                rows = [(seq, user) for seq, user, _ in batch]
                self.store.index_messages(rows, vectors, terms)
            self.store.mark_message_index("complete")
