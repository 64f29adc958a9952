"""Typed records: rows as read from the store, and the write plans the store applies.

Conversions to Mem0's result dicts live here too, so the shape is defined in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..values import EntityMention, Scope


@dataclass(frozen=True)
class MemoryRecord:
    rowid: int
    id: str
    text: str
    hash: str
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    metadata: dict[str, Any]
    role: str | None
    actor_id: str | None
    attributed_to: str | None
    memory_type: str | None
    state: str
    superseded_by: str | None
    created_at: str
    updated_at: str | None
    observed_at: str | None
    expiration_date: str | None
    valid_from: str | None = None  # when the fact became true (extraction/validity.py)
    valid_to: str | None = None  # when a later fact superseded it; None while it holds

    COLUMNS = (
        "rowid, id, text, hash, user_id, agent_id, run_id, metadata, role, actor_id, "
        "attributed_to, memory_type, state, superseded_by, created_at, updated_at, observed_at, "
        "expiration_date, valid_from, valid_to"
    )

    @classmethod
    def from_row(cls, row: Any) -> MemoryRecord:
        values = list(row)
        values[7] = json.loads(values[7])
        return cls(*values)

    @property
    def scope(self) -> Scope:
        return Scope(self.user_id, self.agent_id, self.run_id)

    def to_dict(self, *, score: float | None = None, expired: bool = False) -> dict[str, Any]:
        """Mem0's item shape; optional keys appear only when they have a value."""
        item: dict[str, Any] = {
            "id": self.id,
            "memory": self.text,
            "hash": self.hash,
            "metadata": dict(self.metadata),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if score is not None:
            item["score"] = score
        optional = {
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "actor_id": self.actor_id,
            "role": self.role,
            "attributed_to": self.attributed_to,
            "memory_type": self.memory_type,
            "expiration_date": self.expiration_date,
            "observed_at": self.observed_at,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "superseded_by": self.superseded_by,
        }
        item.update({k: v for k, v in optional.items() if v is not None})
        item["state"] = self.state
        if expired:
            item["expired"] = True
        return item


@dataclass(frozen=True)
class HistoryRecord:
    id: str
    memory_id: str
    old_memory: str | None
    new_memory: str | None
    event: str
    related_memory_id: str | None
    created_at: str
    updated_at: str | None
    is_deleted: int
    actor_id: str | None
    role: str | None
    written_by: str | None  # the application that made the change (offline_mem/writer.py)
    # when the change happened (the date of the message that made it), beside created_at,
    # when it was recorded
    happened_at: str | None = None

    COLUMNS = (
        "id, memory_id, old_memory, new_memory, event, related_memory_id, created_at, "
        "updated_at, is_deleted, actor_id, role, written_by, happened_at"
    )

    def to_dict(self) -> dict[str, Any]:
        item = {
            "id": self.id,
            "memory_id": self.memory_id,
            "old_memory": self.old_memory,
            "new_memory": self.new_memory,
            "event": self.event,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "is_deleted": bool(self.is_deleted),
            "actor_id": self.actor_id,
            "role": self.role,
        }
        if self.related_memory_id is not None:
            item["related_memory_id"] = self.related_memory_id
        if self.written_by is not None:
            item["written_by"] = self.written_by
        if self.happened_at is not None:
            item["happened_at"] = self.happened_at
        return item


@dataclass(frozen=True)
class MessageRecord:
    seq: int
    id: str
    role: str
    name: str | None
    content: str
    created_at: str
    observed_at: str | None
    metadata: str | None = None  # JSON: what the message carried besides text (images, tools)

    COLUMNS = "seq, id, role, name, content, created_at, observed_at, metadata"

    def to_dict(self) -> dict[str, Any]:
        item = {"id": self.id, "role": self.role, "content": self.content,
                "created_at": self.created_at}  # fmt: skip
        if self.name is not None:
            item["name"] = self.name
        if self.observed_at is not None:
            item["observed_at"] = self.observed_at
        if self.metadata is not None:
            item["metadata"] = json.loads(self.metadata)
        return item


# -- write plans --------------------------------------------------------------------------


def keyword_text(text: str) -> str:
    """The text analysed into keyword terms for a memory (its own text)."""
    return text


@dataclass(frozen=True)
class NewMessage:
    id: str
    role: str
    content: str
    name: str | None
    observed_at: str | None
    vector: np.ndarray | None = None  # set (by `replace`) before the write when indexed
    terms: list[str] | None = None  # keyword terms, set with the vector
    metadata: dict[str, Any] | None = None  # image references, tool calls (validation.py)
    extract: bool = True  # shown to the extractor (tool results and tool calls are not)


@dataclass(frozen=True)
class NewMemory:
    id: str
    text: str
    hash: str
    vector: np.ndarray
    keyword_text: str  # the text analysed into keyword terms (usually the memory text)
    metadata: dict[str, Any]
    role: str | None = None
    actor_id: str | None = None
    attributed_to: str | None = None
    memory_type: str | None = None
    observed_at: str | None = None
    valid_from: str | None = None  # the date its text names (validity.py); else observed_at
    expiration_date: str | None = None
    source_messages: list[int] = field(default_factory=list)  # indexes into AddPlan.messages
    entities: list[EntityMention] = field(default_factory=list)
    supersedes: list[str] = field(default_factory=list)  # ids of memories this one replaces
    terms: list[str] | None = None  # keyword terms of keyword_text; set before the write


@dataclass(frozen=True)
class MergedFact:
    """A new fact that says what an active memory of the scope already says: no memory is
    stored for it; the memory gains its messages as sources and a MERGE history row."""

    memory_id: str
    text: str  # the new wording
    source_messages: list[int]  # indexes into AddPlan.messages
    happened: str | None = None  # its messages' date


@dataclass(frozen=True)
class AddPlan:
    """Everything one `add` writes, applied by the store in one transaction. Each step that
    adds to a plan (vectors, keyword terms, entities) makes a new one with `replace`."""

    scope: Scope
    messages: list[NewMessage]
    memories: list[NewMemory]
    embedder_sha256: str
    extractor_sha256: str | None = None
    prompt_version: str | None = None
    merges: list[MergedFact] = field(default_factory=list)
