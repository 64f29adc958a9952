"""The PostgreSQL store: one database, held as parts that share its one `PgDatabase`.

`PostgresStore` is the `MemoryStore` interface (store/interface.py) over PostgreSQL + pgvector,
beside the SQLite `Store` and built the same way: it opens (and migrates) the database and hands
each call to its part (reads, candidates, messages, writes, jobs). What is not ported yet raises
NotImplementedInStoreError naming the operation, before reading or writing anything; the list
and the plan for each are in docs/design/postgresql.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, NoReturn

import numpy as np

from ...errors import EmbedderMismatchError, NotImplementedInStoreError
from ...values import EmbedderIdentity, EntityMention, Scope
from ..candidates import EntitySignal
from ..db import Tracer
from ..filters import CompiledFilter
from ..jobs import JobClaim, JobRecord, NewJob
from ..keyword_index import QueryStats
from ..messages import MessageHit, StoredMessage
from ..records import AddPlan, HistoryRecord, MemoryRecord, MessageRecord
from .candidates import PgCandidates
from .connection import PgDatabase
from .jobs import PgJobs
from .messages import PgMessages
from .migrations import SCHEMA_VERSION, MigrationContext, migrate
from .reads import PgReads
from .vectors import HNSW_INDEXES
from .writes import PgWrites

# every table that holds a memory's or a message's text, or rows derived from them
COMPACTED_TABLES = (
    "memories", "messages", "history", "jobs", "entities", "entity_links", "provenance",
    "keyword_docs", "keyword_postings", "keyword_terms", "keyword_partitions",
    "message_keyword_docs", "message_keyword_postings", "message_keyword_terms",
    "message_keyword_partitions",
)  # fmt: skip


def _not_yet(what: str) -> NoReturn:
    raise NotImplementedInStoreError(
        f"{what} is not implemented yet for the PostgreSQL store (docs/design/postgresql.md); "
        "use a SQLite memory file (config 'path') for it meanwhile"
    )


class PostgresStore:
    def __init__(
        self, db: PgDatabase, embedder: EmbedderIdentity, *, vector_index: str = "exact"
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.reads = PgReads(db)
        self.candidates = PgCandidates(db, hnsw=vector_index == "hnsw")
        self.messages = PgMessages(db, self.reads, hnsw=vector_index == "hnsw")
        self.jobs = PgJobs(db)
        self.writes = PgWrites(db, self.reads, self.jobs)

    @classmethod
    def open(
        cls, url: str, *, embedder: EmbedderIdentity, vector_index: str = "exact"
    ) -> PostgresStore:
        """Open (and migrate) the database; `vector_index` "hnsw" creates pgvector's HNSW
        indexes of the memories' and the messages' vectors when they are missing (a first open
        builds them over every row) and searches through them (PgCandidates, PgMessages)."""
        db = PgDatabase(url)
        try:
            with db.atomic():
                migrate(db, MigrationContext(dimension=embedder.dimension))
                _pin_embedder(db, embedder)
                if vector_index == "hnsw":
                    for index in HNSW_INDEXES:
                        db.execute(index)
        except BaseException:
            db.close()
            raise
        return cls(db, embedder, vector_index=vector_index)

    def close(self) -> None:
        self.db.close()

    @property
    def closed(self) -> bool:
        return self.db.closed

    @property
    def tracer(self) -> Tracer | None:
        return self.db.tracer

    @tracer.setter
    def tracer(self, value: Tracer | None) -> None:
        self.db.tracer = value

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with self.db.atomic():
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        with self.db.snapshot():
            yield

    def meta(self) -> dict[str, str]:
        return dict(self.db.query("SELECT key, value FROM meta ORDER BY key"))

    def counts(self) -> dict[str, int]:
        return self.reads.counts()

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

    def history(self, memory_id: str) -> list[HistoryRecord]:
        return self.reads.history(memory_id)

    def sources(self, memory_rowid: int) -> list[MessageRecord]:
        return self.reads.sources(memory_rowid)

    def hashes_in_scope(self, scope: Scope, hashes: Sequence[str]) -> dict[str, str]:
        return self.reads.hashes_in_scope(scope, hashes)

    def recent_messages(
        self, scope: Scope, limit: int = 10, *, before: int | None = None
    ) -> list[MessageRecord]:
        return self.reads.recent_messages(scope, limit, before=before)

    def message_count(self, scope: Scope, *, before: int | None = None) -> int:
        return self.reads.message_count(scope, before=before)

    def messages_by_id(self, ids: Sequence[str]) -> dict[str, MessageRecord]:
        return self.reads.messages_by_id(ids)

    def find_message(self, message_id: str) -> StoredMessage | None:
        return self.reads.find_message(message_id)

    # -- candidates: the vector signal ----------------------------------------------------------

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
        return self.candidates.vector_candidates(vector, condition, k=k)

    def vector_similarities(
        self, vector: np.ndarray, rowids: Sequence[int], *, user_id: str | None = None
    ) -> dict[int, float]:
        return self.candidates.vector_similarities(vector, rowids)

    def keyword_stats(self, terms: Sequence[str], where: CompiledFilter) -> QueryStats:
        return self.candidates.keyword_stats(terms, where)

    def keyword_candidates(
        self,
        stats: QueryStats,
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

    def message_keyword_stats(self, terms: Sequence[str], scope: Scope) -> QueryStats:
        return self.messages.message_keyword_stats(terms, scope)

    def message_keyword_candidates(
        self,
        stats: QueryStats,
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

    # -- the message index: an async add's messages are indexed after it returns ---------------

    def message_index_complete(self) -> bool:
        return True  # no database predates the index: nothing to fill on open

    def pending_message_batches(
        self, batch_size: int = 256
    ) -> Iterator[list[tuple[int, str | None, str]]]:
        return iter(())

    def index_messages(
        self,
        rows: Sequence[tuple[int, str | None]],
        vectors: Sequence[np.ndarray] | np.ndarray,
        terms: Sequence[Sequence[str]],
    ) -> None:
        self.messages.index_messages(rows, vectors, terms)

    def mark_message_index(self, state: str) -> None:
        _not_yet("re-indexing messages (import without vectors)")

    def unindexed_message_rows(
        self, message_ids: Sequence[str]
    ) -> list[tuple[MessageRecord, str | None]]:
        return self.messages.unindexed_message_rows(message_ids)

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

    # -- the job queue, shared by every server's workers -----------------------------------------

    def claim_job(self, token: str, *, lease_s: float) -> JobRecord | None:
        return self.jobs.claim_job(token, lease_s=lease_s)

    def renew_claim(self, claim: JobClaim, *, lease_s: float) -> bool:
        return self.jobs.renew_claim(claim, lease_s=lease_s)

    def fail_job(self, claim: JobClaim, error: str, *, max_attempts: int, retry_s: float) -> str:
        return self.jobs.fail_job(claim, error, max_attempts=max_attempts, retry_s=retry_s)

    def job_counts(self) -> dict[str, int]:
        return self.jobs.job_counts()

    def job(self, job_id: str) -> JobRecord | None:
        return self.jobs.job(job_id)

    def jobs_in_state(self, state: str, scope: Scope | None = None) -> list[JobRecord]:
        return self.jobs.jobs_in_state(state, scope)

    def pending_jobs(self, scope: Scope | None = None) -> int:
        return self.jobs.pending_jobs(scope)

    def scope_pending_jobs(self, scope: Scope) -> int:
        return self.jobs.scope_pending_jobs(scope)

    # -- upkeep ---------------------------------------------------------------------------------

    def erase_freed(self) -> bool:
        """False: a delete leaves its rows' old versions in the tables' pages until VACUUM
        FULL rewrites them (`compact`); the server's autovacuum reuses the space but does not
        erase it (docs/design/postgresql.md)."""
        return False

    def compact(self) -> dict[str, int]:
        """VACUUM FULL of this store's tables: each is rewritten without the dead row versions
        (the deleted texts among them) and its file given back. Each table is locked against
        every other session while it is rewritten. `free_bytes_before` is what the rewrite
        gave back (PostgreSQL keeps no free-page count as SQLite does)."""
        before = self._table_bytes()
        for table in COMPACTED_TABLES:
            self.db.execute(f"VACUUM (FULL) {table}")  # autocommit: outside any transaction
        after = self._table_bytes()
        return {"bytes_before": before, "bytes_after": after,
                "free_bytes_before": max(0, before - after)}  # fmt: skip

    def _table_bytes(self) -> int:
        row = self.db.query_one(
            "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) AS t",
            (list(COMPACTED_TABLES),),
        )
        return int(row[0] or 0)


def _pin_embedder(db: PgDatabase, embedder: EmbedderIdentity) -> None:
    """First open records the embedder; later opens must use the same one (as store.py)."""
    meta = dict(db.query("SELECT key, value FROM meta"))
    wanted = {
        "embedder_name": embedder.name,
        "embedder_sha256": embedder.sha256,
        "embedder_dimension": str(embedder.dimension),
    }
    pinned = (meta.get("embedder_sha256"), meta.get("embedder_dimension"))
    if "embedder_sha256" in meta and pinned != (wanted["embedder_sha256"],
                                                 wanted["embedder_dimension"]):  # fmt: skip
        raise EmbedderMismatchError(
            f"this database was written with embedder {meta.get('embedder_name')!r} "
            f"(sha256 {meta['embedder_sha256']}, {meta.get('embedder_dimension')} dims); "
            f"the configured embedder is {embedder.name!r} (sha256 {embedder.sha256}, "
            f"{embedder.dimension} dims). Configure the original embedder"
        )
    if embedder.files_sha256 is not None:
        files = meta.get("embedder_files_sha256")
        if files is not None and files != embedder.files_sha256:
            raise EmbedderMismatchError(
                f"this database was written with embedder {meta.get('embedder_name')!r} made "
                f"of other files (digest {files}) than the configured one's "
                f"({embedder.files_sha256})"
            )
        wanted["embedder_files_sha256"] = embedder.files_sha256
    for key, value in {**wanted, "schema_version": str(SCHEMA_VERSION)}.items():
        if meta.get(key) != value:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
