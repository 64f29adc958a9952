"""The edits of `Memory`: update, delete, delete_all, reset and compact.

Each validates its call, runs the models it needs (an update's new text is embedded and
analysed) before taking the write lock, and hands the store one write that is a single
transaction. Deletes then erase the freed pages' bytes (`erase_freed`), outside the lock.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import ValidationError
from ..pinned.embedder import Embedder
from ..pinned.entities import EntityExtractor
from ..pinned.nlp import TextAnalyzer
from ..store.interface import MemoryStore
from ..store.records import keyword_text
from ..timeutil import parse_expiration
from ..validation import check_memory_id, check_metadata, check_text, make_scope
from ..values import content_hash
from .reads import MemoryReader, in_scope

UNSET: Any = Ellipsis  # an argument not given, where None means "clear it"


class MemoryEditor:
    """Changes and removes what a `Memory` holds (whose methods document the arguments)."""

    def __init__(
        self,
        store: MemoryStore,
        reader: MemoryReader,
        *,
        embedder: Embedder,
        analyzer: TextAnalyzer,
        entities: EntityExtractor,
        lock: threading.RLock,
    ) -> None:
        self.store = store
        self.reader = reader
        self.embedder = embedder
        self.analyzer = analyzer
        self.entities = entities
        self.lock = lock  # the Memory's: one write at a time from this process

    def update(
        self,
        memory_id: object,
        text: str | None,
        *,
        data: str | None,
        metadata: dict[str, Any] | None,
        expiration_date: Any,
        user_id: object,
        agent_id: object,
        run_id: object,
    ) -> dict[str, Any]:
        if data is not None:
            if text is not None:
                raise ValidationError("update() takes the new text as text= or data=, not both")
            text = data
        record = self.reader.require(memory_id, user_id, agent_id, run_id)
        if text is not None:
            check_text(text, "text")
        new_metadata = None
        if metadata is not None:
            new_metadata = {**record.metadata, **check_metadata(metadata)}
        expiry = UNSET
        if expiration_date is not UNSET:
            expiry = None if expiration_date is None else parse_expiration(expiration_date)
        vector = terms = mentions = None
        if text is not None:
            vector = self.embedder.embed(text)
            terms = self.analyzer.analyze(keyword_text(text)).terms
            mentions = self.entities.extract(text)
        with self.lock:
            updated = self.store.update_memory(
                record, text=text, text_hash=None if text is None else content_hash(text),
                vector=vector, terms=terms, entities=mentions, metadata=new_metadata,
                expiration_date=expiry,
            )  # fmt: skip
        return {**updated.to_dict(), "event": "UPDATE"}

    def delete(
        self, memory_id: object, *, user_id: object, agent_id: object, run_id: object
    ) -> dict[str, Any]:
        key = check_memory_id(memory_id)
        if self.store.get(key) is None:
            message = self.store.find_message(key)
            if message is not None and in_scope(message, make_scope(
                    user_id, agent_id, run_id, required=False)):  # fmt: skip
                with self.lock:
                    deleted = self.store.delete_message(key)
                self.store.erase_freed()
                if deleted is not None:
                    text = deleted.to_item()["memory"]
                    return {"id": key, "kind": "message", "memory": text, "event": "DELETE"}
        record = self.reader.require(memory_id, user_id, agent_id, run_id)
        with self.lock:
            self.store.delete_memory(record)
        self.store.erase_freed()
        return {"id": record.id, "memory": record.text, "event": "DELETE"}

    def delete_all(self, *, user_id: object, agent_id: object, run_id: object) -> dict[str, Any]:
        scope = make_scope(user_id, agent_id, run_id)
        with self.lock:
            count = self.store.delete_scope(scope)
        self.store.erase_freed()
        return {"deleted": count}

    def reset(self) -> None:
        with self.lock:
            self.store.reset()
        self.store.erase_freed()

    def compact(self) -> dict[str, int]:
        with self.lock:
            return self.store.compact()
