"""The SQLite store: one memory file, held as parts that share its one `Database`.

`Store` opens (and migrates) the file and holds its parts: the reads (reads.py), the candidate
queries of a search (candidates.py), the message index (messages.py), the job queue (jobs.py)
and the writes, each public one a single transaction (writes.py). It offers them to the layers
above as the `MemoryStore` interface (interface.py), which is all those layers know of it. The
SQLite upkeep (the WAL, VACUUM, the meta table, usage and counts for the CLI) is the `Store`'s
own, outside that interface.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import CorruptFileError, EmbedderMismatchError
from ..values import EmbedderIdentity, EntityMention, Scope
from . import keyword_index, vector_cache
from .candidates import CandidateQueries, EntitySignal
from .db import Database, Tracer
from .filters import CompiledFilter
from .jobs import JobClaim, JobQueue, JobRecord, NewJob
from .messages import MessageHit, MessageIndex, StoredMessage
from .migrations import SCHEMA_VERSION, MigrationContext, migrate
from .reads import StoreReads
from .records import AddPlan, HistoryRecord, MemoryRecord, MessageRecord
from .vector_cache import VectorCache
from .writes import MemoryWrites

# Checkpoints after a delete, ERASE_RETRY_S apart (1 s at most, only while a reader's snapshot
# holds the WAL): 0.2 s was too short on a loaded 2-core machine, where a suite run once found a
# deleted message's text still in the file (the job worker's poll is such a reader).
ERASE_TRIES = 21
ERASE_RETRY_S = 0.05
log = logging.getLogger(__name__)


class Store:
    def __init__(
        self,
        db: Database,
        embedder: EmbedderIdentity,
        *,
        vector_cache_mb: float = 2 * vector_cache.DEFAULT_BUDGET_MB,
    ) -> None:
        self.db = db
        self.embedder = embedder
        # The budget is shared: half for memories' vectors, half for messages'.
        memory_cache, message_cache = (
            (
                vector_cache.VectorCache(
                    db, vector_cache.MEMORY_VECTORS, budget_mb=vector_cache_mb / 2
                ),
                vector_cache.VectorCache(
                    db, vector_cache.MESSAGE_VECTORS, budget_mb=vector_cache_mb / 2
                ),
            )
            if vector_cache_mb > 0
            else (None, None)
        )
        self.reads = StoreReads(db)
        self.candidates = CandidateQueries(db, memory_cache)
        self.messages = MessageIndex(db, message_cache)
        self.jobs = JobQueue(db)
        self.writes = MemoryWrites(db, self.reads, self.messages, self.jobs)

    @classmethod
    def open(
        cls,
        path: str,
        *,
        embedder: EmbedderIdentity,
        busy_timeout_ms: int = 30_000,
        vector_cache_mb: float = 2 * vector_cache.DEFAULT_BUDGET_MB,
        init_empty: bool = False,
    ) -> Store:
        db = Database(path, busy_timeout_ms=busy_timeout_ms, init_empty=init_empty)
        try:
            with db.atomic():
                migrate(db, MigrationContext(dimension=embedder.dimension))
                _pin_embedder(db, embedder)
        except CorruptFileError:
            db.close()
            raise
        except Exception as exc:
            db.close()
            if isinstance(exc, (EmbedderMismatchError,)) or exc.__class__.__module__.startswith(
                "offline_mem"
            ):
                raise
            raise CorruptFileError(f"cannot use {path!r} as a memory file: {exc}") from exc
        return cls(db, embedder, vector_cache_mb=vector_cache_mb)

    def close(self) -> None:
        self.db.close()

    @property
    def tracer(self) -> Tracer | None:
        return self.db.tracer

    @tracer.setter
    def tracer(self, value: Tracer | None) -> None:
        self.db.tracer = value

    @property
    def vector_cache(self) -> VectorCache | None:
        """The memories' vectors of large users, held in memory (vector_cache.py)."""
        return self.candidates.vector_cache

    @vector_cache.setter
    def vector_cache(self, cache: VectorCache | None) -> None:
        self.candidates.vector_cache = cache

    @property
    def message_vector_cache(self) -> VectorCache | None:
        return self.messages.message_vector_cache

    @message_vector_cache.setter
    def message_vector_cache(self, cache: VectorCache | None) -> None:
        self.messages.message_vector_cache = cache

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with self.db.atomic():
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self.db.snapshot():
            yield

    # -- reads --------------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord | None:
        return self.reads.get(memory_id)

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
    ) -> list[MemoryRecord]:
        return self.reads.list_memories(
            where, limit=limit, offset=offset, include_expired=include_expired,
            include_superseded=include_superseded, now=now, as_of=as_of,
        )  # fmt: skip

    def records_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryRecord]:
        return self.reads.records_by_rowid(rowids)

    def entities_of(self, rowid: int) -> list[tuple[str, str, str]]:
        return self.reads.entities_of(rowid)

    def history(self, memory_id: str) -> list[HistoryRecord]:
        return self.reads.history(memory_id)

    def recent_messages(
        self, scope: Scope, limit: int = 10, *, before: int | None = None
    ) -> list[MessageRecord]:
        return self.reads.recent_messages(scope, limit, before=before)

    def message_count(self, scope: Scope, *, before: int | None = None) -> int:
        return self.reads.message_count(scope, before=before)

    def messages_by_id(self, ids: Sequence[str]) -> dict[str, MessageRecord]:
        return self.reads.messages_by_id(ids)

    def sources(self, memory_rowid: int) -> list[MessageRecord]:
        return self.reads.sources(memory_rowid)

    def hashes_in_scope(self, scope: Scope, hashes: Sequence[str]) -> dict[str, str]:
        return self.reads.hashes_in_scope(scope, hashes)

    def find_message(self, message_id: str) -> StoredMessage | None:
        return self.messages.find_message(message_id)

    # -- candidate queries ----------------------------------------------------------------------

    def search_filter(
        self,
        where: CompiledFilter,
        *,
        include_expired: bool = False,
        include_superseded: bool = False,
        now: datetime | None = None,
        as_of: datetime | None = None,
    ) -> tuple[str, list[Any]]:
        return self.candidates.search_filter(
            where, include_expired=include_expired, include_superseded=include_superseded,
            now=now, as_of=as_of,
        )  # fmt: skip

    def vector_candidates(
        self, vector: np.ndarray, where: CompiledFilter, condition: tuple[str, list[Any]], *, k: int
    ) -> dict[int, float]:
        return self.candidates.vector_candidates(vector, where, condition, k=k)

    def vector_similarities(
        self, vector: np.ndarray, rowids: Sequence[int], *, user_id: str | None = None
    ) -> dict[int, float]:
        return self.candidates.vector_similarities(vector, rowids, user_id=user_id)

    def keyword_stats(
        self, terms: Sequence[str], where: CompiledFilter
    ) -> keyword_index.QueryStats:
        return self.candidates.keyword_stats(terms, where)

    def keyword_candidates(
        self,
        stats: keyword_index.QueryStats,
        where: CompiledFilter,
        condition: tuple[str, list[Any]],
        *,
        limit: int | None = None,
        only_rowids: Sequence[int] | None = None,
        also_rowids: Sequence[int] = (),
    ) -> dict[int, float]:
        return self.candidates.keyword_candidates(
            stats, where, condition, limit=limit, only_rowids=only_rowids,
            also_rowids=also_rowids,
        )  # fmt: skip

    def entity_candidates(
        self,
        norms: Sequence[str],
        where: CompiledFilter,
        condition: tuple[str, list[Any]],
        *,
        limit: int,
    ) -> EntitySignal:
        return self.candidates.entity_candidates(norms, where, condition, limit=limit)

    def replacements(
        self, rowids: Sequence[int], condition: tuple[str, list[Any]]
    ) -> dict[int, int | None]:
        return self.candidates.replacements(rowids, condition)

    # -- message search -------------------------------------------------------------------------

    def message_candidates(
        self, vector: np.ndarray, scope: Scope, *, k: int, as_of: datetime | None = None
    ) -> dict[int, float]:
        return self.messages.message_candidates(vector, scope, k=k, as_of=as_of)

    def message_keyword_stats(self, terms: Sequence[str], scope: Scope) -> keyword_index.QueryStats:
        return self.messages.message_keyword_stats(terms, scope)

    def message_keyword_candidates(
        self,
        stats: keyword_index.QueryStats,
        scope: Scope,
        *,
        limit: int,
        also_seqs: Sequence[int] = (),
        as_of: datetime | None = None,
    ) -> dict[int, float]:
        return self.messages.message_keyword_candidates(
            stats, scope, limit=limit, also_seqs=also_seqs, as_of=as_of
        )

    def message_similarities(self, vector: np.ndarray, seqs: Sequence[int]) -> dict[int, float]:
        return self.messages.message_similarities(vector, seqs)

    def message_replies(self, seqs: Sequence[int]) -> dict[int, int]:
        return self.messages.message_replies(seqs)

    def message_hits(self, scored: dict[int, float]) -> list[MessageHit]:
        return self.messages.message_hits(scored)

    # -- the message index: async adds' messages, and files written before it existed ----------

    def message_index_complete(self) -> bool:
        return self.messages.message_index_complete()

    def pending_message_batches(
        self, batch_size: int = 256
    ) -> Iterator[list[tuple[int, str | None, str]]]:
        return self.messages.pending_message_batches(batch_size)

    def index_messages(
        self,
        rows: Sequence[tuple[int, str | None]],
        vectors: Sequence[np.ndarray] | np.ndarray,
        terms: Sequence[Sequence[str]],
    ) -> None:
        self.messages.index_messages(rows, vectors, terms)

    def mark_message_index(self, state: str) -> None:
        self.messages.mark_message_index(state)

    def unindexed_message_rows(
        self, message_ids: Sequence[str]
    ) -> list[tuple[MessageRecord, str | None]]:
        return self.messages.unindexed_message_rows(message_ids)

    def insert_message_vector(self, seq: int, vector: np.ndarray) -> None:
        self.messages.insert_message_vector(seq, vector)

    def insert_message_terms(self, seq: int, user_id: str | None, terms: Sequence[str]) -> None:
        self.messages.insert_message_terms(seq, user_id, terms)

    # -- writes, each one transaction ----------------------------------------------------------

    def apply_add(
        self, plan: AddPlan, *, now: datetime | None = None, job: NewJob | None = None
    ) -> list[str]:
        return self.writes.apply_add(plan, now=now, job=job)

    def finish_job(self, claim: JobClaim, plan: AddPlan, results: Sequence[dict[str, Any]]) -> bool:
        return self.writes.finish_job(claim, plan, results)

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
        expiration_date: Any,
        now: datetime | None = None,
    ) -> MemoryRecord:
        return self.writes.update_memory(
            record, text=text, text_hash=text_hash, vector=vector, terms=terms,
            entities=entities, metadata=metadata, expiration_date=expiration_date, now=now,
        )  # fmt: skip

    def delete_memory(self, record: MemoryRecord, *, now: datetime | None = None) -> None:
        self.writes.delete_memory(record, now=now)

    def delete_message(self, message_id: str) -> StoredMessage | None:
        return self.messages.delete_message(message_id)

    def delete_scope(self, scope: Scope, *, now: datetime | None = None) -> int:
        return self.writes.delete_scope(scope, now=now)

    def reset(self) -> None:
        self.writes.reset()

    # -- the job queue --------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.jobs.closed

    def claim_job(self, token: str, *, lease_s: float) -> JobRecord | None:
        return self.jobs.claim_job(token, lease_s=lease_s)

    def renew_claim(self, claim: JobClaim, *, lease_s: float) -> bool:
        return self.jobs.renew_claim(claim, lease_s=lease_s)

    def fail_job(self, claim: JobClaim, error: str, *, max_attempts: int, retry_s: float) -> str:
        return self.jobs.fail_job(claim, error, max_attempts=max_attempts, retry_s=retry_s)

    def job(self, job_id: str) -> JobRecord | None:
        return self.jobs.job(job_id)

    def jobs_in_state(self, state: str, scope: Scope | None = None) -> list[JobRecord]:
        return self.jobs.jobs_in_state(state, scope)

    def pending_jobs(self, scope: Scope | None = None) -> int:
        return self.jobs.pending_jobs(scope)

    def scope_pending_jobs(self, scope: Scope) -> int:
        return self.jobs.scope_pending_jobs(scope)

    def job_counts(self) -> dict[str, int]:
        return self.jobs.job_counts()

    # -- SQLite upkeep (outside the interface) ---------------------------------------------------

    def meta(self) -> dict[str, str]:
        return dict(self.db.query("SELECT key, value FROM meta ORDER BY key"))

    def set_meta(self, values: dict[str, str]) -> None:
        with self.db.atomic():
            for key, value in values.items():
                self.db.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )

    def counts(self) -> dict[str, int]:
        return self.reads.counts()

    def usage(self) -> dict[str, int]:
        return self.db.usage()

    def erase_freed(self) -> bool:
        """After a delete: checkpoint the WAL and truncate it, so the page images written before
        the delete (which hold the deleted text) leave the disk; False when a reader's open
        snapshot kept the WAL, or when called inside a transaction (the next compact or
        checkpoint finishes it)."""
        if self.db.in_transaction:
            return False
        # A reader's snapshot (often a short one: another thread's search, the job worker's
        # poll) keeps the frames written before the delete; try again a few times rather than
        # leave the text on disk until the next checkpoint, but never stall a delete for long.
        for _ in range(ERASE_TRIES - 1):
            if self.db.checkpoint(wait=False):
                return True
            time.sleep(ERASE_RETRY_S)
        if self.db.checkpoint(wait=False):
            return True
        log.warning(
            "deleted text stays in the WAL until the next checkpoint or compact: a reader's "
            "snapshot kept it (checkpoint: %s)",
            self.db.last_checkpoint,
        )
        return False

    def compact(self) -> dict[str, int]:
        return self.db.compact()


def _pin_embedder(db: Database, embedder: EmbedderIdentity) -> None:
    """First open records the embedder; later opens must use the same one."""
    meta = dict(db.query("SELECT key, value FROM meta"))
    wanted = {
        "embedder_name": embedder.name,
        "embedder_sha256": embedder.sha256,
        "embedder_dimension": str(embedder.dimension),
    }
    pinned = (meta.get("embedder_sha256"), meta.get("embedder_dimension"))
    if "embedder_sha256" in meta and pinned != (
        wanted["embedder_sha256"],
        wanted["embedder_dimension"],
    ):
        raise EmbedderMismatchError(
            f"this memory file was written with embedder {meta.get('embedder_name')!r} "
            f"(sha256 {meta['embedder_sha256']}, {meta.get('embedder_dimension')} dims); "
            f"the configured embedder is {embedder.name!r} (sha256 {embedder.sha256}, "
            f"{embedder.dimension} dims). Configure the original embedder, or export and "
            "re-import the memories to re-embed them"
        )
    files = meta.get("embedder_files_sha256")
    if embedder.files_sha256 is not None:
        if files is not None and files != embedder.files_sha256:
            raise EmbedderMismatchError(
                f"this memory file was written with embedder {meta.get('embedder_name')!r} "
                f"made of other files (files digest {files}) than the configured one's "
                f"({embedder.files_sha256}): its tokenizer or configuration differs, so its "
                "vectors would not match. Configure the original embedder's files, or export "
                "and re-import the memories to re-embed them"
            )
        wanted["embedder_files_sha256"] = embedder.files_sha256
    for key, value in {**wanted, "schema_version": str(SCHEMA_VERSION)}.items():
        if meta.get(key) != value:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
