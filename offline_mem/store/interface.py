"""What the layers above call on a memory store: the seam for a second implementation.

`Memory`, the retrieval layer, extraction and the job worker type against these Protocols, never
against the SQLite `Store`, so another store (another database) can sit beside it by providing
the same methods. Each Protocol is one part's operations; `MemoryStore` is all of them.

SQLite's own upkeep stays out: the `Database` connection, pragmas, the meta table, usage and
counts (`Store` keeps them for the CLI and tests); export and import read and write the file's
rows directly (transfer/). `compact` and `erase_freed` are here because `Memory` offers them:
another store may make them a VACUUM of its own or nothing.

Filters and search conditions (`CompiledFilter`, the `Condition` a store's `search_filter`
returns) pass through callers unopened: only the store that made them reads them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..values import EntityMention, Scope
from .candidates import EntitySignal
from .filters import CompiledFilter
from .jobs import JobClaim, JobRecord, NewJob
from .keyword_index import QueryStats
from .messages import MessageHit, StoredMessage
from .records import AddPlan, HistoryRecord, MemoryRecord, MessageRecord

Condition = tuple[str, list[Any]]  # a search's filter and visibility, as its store states it


class StoredRows(Protocol):
    """Rows as stored: memories, their history and sources, a scope's messages."""

    def get(self, memory_id: str) -> MemoryRecord | None: ...

    def list_memories(
        self,
        where: CompiledFilter,
        *,
        limit: int,
        offset: int = 0,
        include_expired: bool = False,
        include_superseded: bool = False,
        now: datetime | None = None,
        as_of: datetime | None = None,
    ) -> list[MemoryRecord]: ...

    def records_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryRecord]: ...

    def history(self, memory_id: str) -> list[HistoryRecord]: ...

    def sources(self, memory_rowid: int) -> list[MessageRecord]: ...

    def hashes_in_scope(self, scope: Scope, hashes: Sequence[str]) -> dict[str, str]: ...

    def recent_messages(
        self, scope: Scope, limit: int = 10, *, before: int | None = None
    ) -> list[MessageRecord]: ...

    def message_count(self, scope: Scope, *, before: int | None = None) -> int: ...

    def messages_by_id(self, ids: Sequence[str]) -> dict[str, MessageRecord]: ...

    def find_message(self, message_id: str) -> StoredMessage | None: ...


class CandidateQueries(Protocol):
    """The memories each search signal proposes, all under one condition."""

    def snapshot(self) -> AbstractContextManager[None]:
        """Reads that see one consistent state of the store."""
        ...

    def search_filter(
        self,
        where: CompiledFilter,
        *,
        include_expired: bool = False,
        include_superseded: bool = False,
        now: datetime | None = None,
        as_of: datetime | None = None,
    ) -> Condition: ...

    def vector_candidates(
        self, vector: np.ndarray, where: CompiledFilter, condition: Condition, *, k: int
    ) -> dict[int, float]: ...

    def vector_similarities(
        self, vector: np.ndarray, rowids: Sequence[int], *, user_id: str | None = None
    ) -> dict[int, float]: ...

    def keyword_stats(self, terms: Sequence[str], where: CompiledFilter) -> QueryStats: ...

    def keyword_candidates(
        self,
        stats: QueryStats,
        where: CompiledFilter,
        condition: Condition,
        *,
        limit: int | None = None,
        only_rowids: Sequence[int] | None = None,
        also_rowids: Sequence[int] = (),
    ) -> dict[int, float]: ...

    def entity_candidates(
        self, norms: Sequence[str], where: CompiledFilter, condition: Condition, *, limit: int
    ) -> EntitySignal: ...

    def replacements(self, rowids: Sequence[int], condition: Condition) -> dict[int, int | None]:
        """For each of `rowids` that a later memory superseded: the memory at the end of its
        chain of supersessions when that one passes `condition`, else None."""
        ...

    def records_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryRecord]: ...


class MessageSearch(Protocol):
    """A scope's stored messages, scored as the memories are."""

    def message_candidates(
        self, vector: np.ndarray, scope: Scope, *, k: int, as_of: datetime | None = None
    ) -> dict[int, float]: ...

    def message_keyword_stats(self, terms: Sequence[str], scope: Scope) -> QueryStats: ...

    def message_keyword_candidates(
        self,
        stats: QueryStats,
        scope: Scope,
        *,
        limit: int,
        also_seqs: Sequence[int] = (),
        as_of: datetime | None = None,
    ) -> dict[int, float]: ...

    def message_similarities(self, vector: np.ndarray, seqs: Sequence[int]) -> dict[int, float]: ...

    def message_replies(self, seqs: Sequence[int]) -> dict[int, int]: ...

    def message_hits(self, scored: dict[int, float]) -> list[MessageHit]: ...


class SearchStore(CandidateQueries, MessageSearch, Protocol):
    """What a search reads: the candidates, the messages and a memory's sources."""

    def sources(self, memory_rowid: int) -> list[MessageRecord]: ...


class ExtractionStore(Protocol):
    """What an add's extraction reads: the scope's recent messages and similar memories."""

    def search_filter(
        self,
        where: CompiledFilter,
        *,
        include_expired: bool = False,
        include_superseded: bool = False,
        now: datetime | None = None,
        as_of: datetime | None = None,
    ) -> Condition: ...

    def vector_candidates(
        self, vector: np.ndarray, where: CompiledFilter, condition: Condition, *, k: int
    ) -> dict[int, float]: ...

    def records_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryRecord]: ...

    def recent_messages(
        self, scope: Scope, limit: int = 10, *, before: int | None = None
    ) -> list[MessageRecord]: ...

    def message_count(self, scope: Scope, *, before: int | None = None) -> int: ...

    def hashes_in_scope(self, scope: Scope, hashes: Sequence[str]) -> dict[str, str]: ...


class MessageIndexing(Protocol):
    """Filling the message index: an async add's messages, indexed after the add returns
    (`unindexed_message_rows`, `index_messages`), and a store written before the index existed
    (or imported without vectors)."""

    def message_index_complete(self) -> bool: ...

    def pending_message_batches(
        self, batch_size: int = 256
    ) -> Iterator[list[tuple[int, str | None, str]]]: ...

    def index_messages(
        self,
        rows: Sequence[tuple[int, str | None]],
        vectors: Sequence[np.ndarray] | np.ndarray,
        terms: Sequence[Sequence[str]],
    ) -> None:
        """(Re)write the vector and keyword rows of the messages (seq, user_id), in one
        transaction; a message deleted meanwhile is left out."""
        ...

    def mark_message_index(self, state: str) -> None: ...

    def unindexed_message_rows(
        self, message_ids: Sequence[str]
    ) -> list[tuple[MessageRecord, str | None]]:
        """(record, user_id) of those of the messages that exist and are to be indexed (not
        system or empty) but lack their vector or keyword row, by seq."""
        ...


class Writes(Protocol):
    """Every public write is one transaction of the store."""

    def apply_add(
        self, plan: AddPlan, *, now: datetime | None = None, job: NewJob | None = None
    ) -> list[str]: ...

    def finish_job(
        self, claim: JobClaim, plan: AddPlan, results: Sequence[dict[str, Any]]
    ) -> bool: ...

    def update_memory(
        self,
        record: MemoryRecord,
        *,
        text: str | None,
        text_hash: str | None,
        vector: np.ndarray | None,
        terms: Sequence[str] | None = None,
        entities: Sequence[EntityMention] | None = None,
        metadata: dict[str, Any] | None,
        expiration_date: Any,  # a date string, None to clear, or Ellipsis to keep
        now: datetime | None = None,
    ) -> MemoryRecord: ...

    def delete_memory(self, record: MemoryRecord, *, now: datetime | None = None) -> None: ...

    def delete_message(self, message_id: str) -> StoredMessage | None: ...

    def delete_scope(self, scope: Scope, *, now: datetime | None = None) -> int: ...

    def reset(self) -> None: ...


class JobStore(Protocol):
    """The extraction job queue, as the job worker uses it."""

    @property
    def closed(self) -> bool: ...

    def claim_job(self, token: str, *, lease_s: float) -> JobRecord | None: ...

    def renew_claim(self, claim: JobClaim, *, lease_s: float) -> bool: ...

    def fail_job(
        self, claim: JobClaim, error: str, *, max_attempts: int, retry_s: float
    ) -> str: ...

    def pending_jobs(self, scope: Scope | None = None) -> int: ...


class JobReads(JobStore, Protocol):
    """The job queue, as `Memory` reports on it."""

    def job(self, job_id: str) -> JobRecord | None: ...

    def jobs_in_state(self, state: str, scope: Scope | None = None) -> list[JobRecord]: ...

    def scope_pending_jobs(self, scope: Scope) -> int: ...


class MemoryStore(
    StoredRows,
    SearchStore,
    ExtractionStore,
    MessageIndexing,
    Writes,
    JobReads,
    Protocol,
):
    """Everything `Memory` and the layers under it call on a store."""

    def compact(self) -> dict[str, int]: ...

    def erase_freed(self) -> bool: ...

    def close(self) -> None: ...
