"""`Memory`: the public, Mem0-compatible API over one memory file.

Each method validates everything first, runs the models outside any transaction, then hands the
store one write that is a single transaction. Results keep Mem0's shapes.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .config import MemoryConfig, resolve_db_path, resolve_models_dir
from .embedder import Embedder
from .errors import MemoryNotFoundError, ValidationError
from .filters import compile_filters
from .records import AddPlan, MemoryRecord, NewMemory, NewMessage
from .store import Store, keyword_text
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
    ) -> None:
        if not isinstance(config, MemoryConfig):
            config = MemoryConfig.from_dict(config)
        self.config = config
        self.path = resolve_db_path(config)
        self.models_dir = resolve_models_dir(config.models_dir)
        self.embedder = embedder or self._load_embedder()
        if self.path != ":memory:":
            from pathlib import Path

            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.store = Store.open(
            self.path, embedder=self.embedder.identity, busy_timeout_ms=config.busy_timeout_ms
        )
        self._lock = threading.RLock()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Memory:
        return cls(MemoryConfig.from_dict(config))

    def _load_embedder(self) -> Embedder:
        from .embedder import EmbedderIdentity, SentenceTransformerEmbedder
        from .model_files import model_identity, verified_model_dir

        name = self.config.embedder
        folder = verified_model_dir(name, self.models_dir)
        ident = model_identity(name, self.models_dir)
        identity = EmbedderIdentity(name=name, sha256=ident.sha256, dimension=ident.dimension)
        return SentenceTransformerEmbedder(folder, identity)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        self.store.close()
        self.embedder.close()

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
        if not infer:
            return self._add_raw(scope, parsed, new_messages, clean_metadata, expiry)
        raise ValidationError(
            "add(infer=True) needs the extractor, which is not available yet; pass infer=False"
        )

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
        vectors = self.embedder.embed_batch(texts) if texts else []
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
            self.store.apply_add(plan)
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
        vector = self.embedder.embed(text) if text is not None else None
        with self._lock:
            updated = self.store.update_memory(
                record, text=text, text_hash=None if text is None else content_hash(text),
                vector=vector, metadata=new_metadata, expiration_date=expiry,
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
        records = self.store.list(
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
        **unknown: Any,
    ) -> dict[str, Any]:
        """Memories of the filtered scope most similar to `query`, best first.
        `score` is cosine similarity clipped to [0, 1]; `threshold` drops lower scores."""
        _reject_unknown("search", unknown)
        check_text(query, "query")
        where = compile_filters(filters)
        k = check_top_k(top_k)
        floor = check_threshold(threshold)
        vector = self.embedder.embed(query)
        hits = self.store.vector_search(
            vector, where, k=k, include_expired=bool(show_expired),
            include_superseded=bool(include_superseded),
        )  # fmt: skip
        now = utc_now()
        results = []
        for record, similarity in hits:
            score = round(min(1.0, max(0.0, similarity)), 6)
            if floor is not None and score < floor:
                continue
            item = record.to_dict(score=score, expired=is_expired(record.expiration_date, now))
            if include_sources:
                item["sources"] = [m.to_dict() for m in self.store.sources(record.rowid)]
            results.append(item)
        return {"results": results}

    def history(self, memory_id: str, **unknown: Any) -> list[dict[str, Any]]:
        """Every ADD/UPDATE/SUPERSEDE/DELETE of the memory, oldest first; kept after deletion."""
        _reject_unknown("history", unknown)
        return [row.to_dict() for row in self.store.history(check_memory_id(memory_id))]

    def chat(self, query: str) -> Any:
        raise NotImplementedError("chat() is not part of the library API; see `offline-mem chat`")


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
