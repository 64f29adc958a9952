"""The one-file store: every table of a memory file and the only code that writes them.

Each public write method is exactly one transaction (`Database.atomic`): memories, vectors,
keyword rows, entity links, history, messages and provenance change together or not at all.
Keep this interface narrow: a PostgreSQL + pgvector store would implement the same methods.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from ..errors import CorruptFileError, EmbedderMismatchError, MemoryNotFoundError
from ..timeutil import iso, utc_now
from ..values import EmbedderIdentity, EntityMention, Scope, content_hash
from . import keyword_index, vector_cache
from .db import Database, Tracer
from .jobs import JobClaim, JobQueue, NewJob
from .messages import MessageIndex
from .migrations import SCHEMA_VERSION, MigrationContext, migrate
from .reads import StoreReads
from .records import AddPlan, MemoryRecord, NewMemory
from .signals import SearchSignals, scope_match, vector_blob


def keyword_text(text: str) -> str:
    """The text analysed into keyword terms for a memory (its own text)."""
    return text


class Store(StoreReads, SearchSignals, MessageIndex, JobQueue):
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
        self.vector_cache, self.message_vector_cache = (
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

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with self.db.atomic():
            yield

    # -- meta ---------------------------------------------------------------------------------

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

    # -- writes -------------------------------------------------------------------------------

    def apply_add(
        self, plan: AddPlan, *, now: datetime | None = None, job: NewJob | None = None
    ) -> list[str]:
        """Write messages, memories and everything attached to them, and the extraction job of
        an async add when given; returns the new memories' ids."""
        now = now or utc_now()
        with self.db.atomic():
            seqs: list[int | None] = list(self._insert_messages(plan, now))
            for memory in plan.memories:
                self._insert_memory(plan, memory, seqs, now)
            if job is not None:
                self.insert_job(plan.scope, job, iso(now))
        return [m.id for m in plan.memories]

    def finish_job(self, claim: JobClaim, plan: AddPlan, results: Sequence[dict[str, Any]]) -> bool:
        """Write a job's memories (its messages are stored already) and mark it done, in one
        transaction; False, with nothing written, when the claim is no longer ours. A message
        deleted since the job was queued is left out of the memories' sources."""
        now = utc_now()
        with self.db.atomic():
            if not self._holds(claim):
                return False
            found = self.messages_by_id([m.id for m in plan.messages])
            seqs = [found[m.id].seq if m.id in found else None for m in plan.messages]
            for memory in plan.memories:
                self._insert_memory(plan, memory, seqs, now)
            self.mark_job_done(claim, results)
        return True

    def _insert_messages(self, plan: AddPlan, now: datetime) -> list[int]:
        last = self.db.query_one("SELECT max(created_at) FROM messages")[0]
        moment = now
        seqs = []
        for message in plan.messages:
            # Strictly increasing timestamps: no two messages share one, even in a batch.
            if last is not None and iso(moment) <= last:
                moment = datetime.fromisoformat(last) + timedelta(microseconds=1)
            stamp = iso(moment)
            last = stamp
            metadata = (
                None
                if not message.metadata
                else json.dumps(message.metadata, ensure_ascii=False, sort_keys=True)
            )
            cursor = self.db.execute(
                "INSERT INTO messages (id, scope, user_id, agent_id, run_id, role, name, content,"
                " hash, created_at, observed_at, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (message.id, plan.scope.key, plan.scope.user_id, plan.scope.agent_id,
                 plan.scope.run_id, message.role, message.name, message.content,
                 content_hash(message.content), stamp, message.observed_at, metadata),
            )  # fmt: skip
            seqs.append(cursor.lastrowid)
            if message.vector is not None:
                self.insert_message_vector(cursor.lastrowid, plan.scope.user_id, message.vector)
            if message.terms is not None:
                self.insert_message_terms(cursor.lastrowid, plan.scope.user_id, message.terms)
        return seqs

    def _insert_memory(
        self, plan: AddPlan, memory: NewMemory, seqs: Sequence[int | None], now: datetime
    ) -> None:
        scope = plan.scope
        stamp = iso(now)
        cursor = self.db.execute(
            "INSERT INTO memories (id, text, hash, user_id, agent_id, run_id, scope, metadata,"
            " role, actor_id, attributed_to, memory_type, state, created_at, updated_at,"
            " observed_at, expiration_date, embedder_sha256, extractor_sha256, prompt_version)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?)",
            (memory.id, memory.text, memory.hash, scope.user_id, scope.agent_id, scope.run_id,
             scope.key, json.dumps(memory.metadata, ensure_ascii=False), memory.role,
             memory.actor_id, memory.attributed_to, memory.memory_type, stamp, stamp,
             memory.observed_at, memory.expiration_date, plan.embedder_sha256,
             plan.extractor_sha256, plan.prompt_version),
        )  # fmt: skip
        rowid = cursor.lastrowid
        if memory.terms is None:
            raise ValueError("NewMemory.terms must be filled (Memory analyses texts first)")
        self._write_index_rows(rowid, scope.user_id, memory.vector, memory.terms)
        for index in memory.source_messages:
            if seqs[index] is None:
                continue
            self.db.execute(
                "INSERT OR IGNORE INTO provenance (memory_rowid, message_seq) VALUES (?, ?)",
                (rowid, seqs[index]),
            )
        self._link_entities(rowid, scope, memory.entities)
        self._history(memory.id, None, memory.text, "ADD", stamp, memory.actor_id, memory.role)
        for old_id in memory.supersedes:
            self._supersede(old_id, memory.id, stamp)

    def _write_index_rows(
        self, rowid: int, user_id: str | None, vector: np.ndarray, terms: Sequence[str]
    ) -> None:
        self.db.execute(
            "INSERT INTO memory_vectors (rowid, embedding) VALUES (?, ?)",
            (rowid, vector_blob(vector)),
        )
        keyword_index.index_terms(self.db, rowid, keyword_index.partition_of(user_id), terms)

    def _link_entities(self, rowid: int, scope: Scope, entities: Sequence[EntityMention]) -> None:
        for entity in entities:
            self.db.execute(
                "INSERT INTO entities (scope, name, norm, kind) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(scope, norm) DO NOTHING",
                (scope.key, entity.name, entity.norm, entity.kind),
            )
            self.db.execute(
                "INSERT OR IGNORE INTO entity_links (entity_rowid, memory_rowid) "
                "SELECT rowid, ? FROM entities WHERE scope = ? AND norm = ?",
                (rowid, scope.key, entity.norm),
            )

    def _supersede(self, old_id: str, new_id: str, stamp: str) -> None:
        row = self.db.query_one(
            "SELECT text FROM memories WHERE id = ? AND state = 'active'", (old_id,)
        )
        if row is None:
            return  # already superseded within this batch
        self.db.execute(
            "UPDATE memories SET state = 'superseded', superseded_by = ?, updated_at = ? "
            "WHERE id = ?",
            (new_id, stamp, old_id),
        )
        self._history(old_id, row[0], row[0], "SUPERSEDE", stamp, None, None, related=new_id)

    def _history(
        self,
        memory_id: str,
        old: str | None,
        new: str | None,
        event: str,
        stamp: str,
        actor_id: str | None,
        role: str | None,
        *,
        related: str | None = None,
        is_deleted: bool = False,
    ) -> None:
        self.db.execute(
            "INSERT INTO history (id, memory_id, old_memory, new_memory, event, related_memory_id,"
            " created_at, updated_at, is_deleted, actor_id, role)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (str(uuid.uuid4()), memory_id, old, new, event, related, stamp, stamp,
             int(is_deleted), actor_id, role),
        )  # fmt: skip

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
    ) -> MemoryRecord:
        """Apply the changes and return the memory as committed (read inside the transaction)."""
        stamp = iso(now or utc_now())
        with self.db.atomic():
            current = self._require_same(record)
            sets: list[str] = ["updated_at = ?"]
            params: list[Any] = [stamp]
            if text is not None:
                sets += ["text = ?", "hash = ?"]
                params += [text, text_hash]
            if metadata is not None:
                sets.append("metadata = ?")
                params.append(json.dumps(metadata, ensure_ascii=False))
            if expiration_date is not Ellipsis:
                sets.append("expiration_date = ?")
                params.append(expiration_date)
            self.db.execute(f"UPDATE memories SET {', '.join(sets)} WHERE rowid = ?",
                            (*params, current.rowid))  # fmt: skip
            if text is not None and vector is not None:
                self.db.execute(
                    "UPDATE memory_vectors SET embedding = ? WHERE rowid = ?",
                    (vector_blob(vector), current.rowid),
                )
                keyword_index.unindex(self.db, current.rowid)
                keyword_index.index_terms(
                    self.db, current.rowid, keyword_index.partition_of(current.user_id), terms or []
                )
                self.db.execute("DELETE FROM entity_links WHERE memory_rowid = ?", (current.rowid,))
                self._link_entities(current.rowid, current.scope, entities or [])
                self._drop_unlinked_entities()
            new_text = text if text is not None else current.text
            self._history(current.id, current.text, new_text, "UPDATE", stamp,
                          current.actor_id, current.role)  # fmt: skip
            updated = self.get(current.id)
        assert updated is not None
        return updated

    def _require_same(self, record: MemoryRecord) -> MemoryRecord:
        """Re-read inside the transaction: another process may have deleted it meanwhile."""
        current = self.get(record.id)
        if current is None:
            raise MemoryNotFoundError(f"memory {record.id!r} no longer exists")
        return current

    def delete_memory(self, record: MemoryRecord, *, now: datetime | None = None) -> None:
        stamp = iso(now or utc_now())
        with self.db.atomic():
            current = self._require_same(record)
            self._delete_rows([current], stamp, whole_scope=False)

    def _delete_rows(
        self, records: Sequence[MemoryRecord], stamp: str, *, whole_scope: bool
    ) -> None:
        """Delete memories and every copy of their text: vectors, keyword and entity rows go,
        their history rows keep ids, events and dates but lose the texts, a done job's results
        lose them too, and the messages it was stored from as given (a raw add) go when no
        other memory cites them. With secure_delete on, SQLite zeroes the freed bytes.
        `whole_scope`: the caller deletes the scope's messages and jobs itself."""
        for record in records:
            verbatim = [] if whole_scope else self._verbatim_sources(record)
            self.db.execute(
                "UPDATE history SET old_memory = NULL, new_memory = NULL WHERE memory_id = ?",
                (record.id,),
            )
            self._history(record.id, None, None, "DELETE", stamp, record.actor_id,
                          record.role, is_deleted=True)  # fmt: skip
            self.db.execute("DELETE FROM memory_vectors WHERE rowid = ?", (record.rowid,))
            keyword_index.unindex(self.db, record.rowid)
            # entity_links and provenance go with the row (ON DELETE CASCADE)
            self.db.execute("DELETE FROM memories WHERE rowid = ?", (record.rowid,))
            if not whole_scope:
                self.forget_job_results(record)
                self._delete_messages(verbatim)
        self._drop_unlinked_entities()

    def _verbatim_sources(self, record: MemoryRecord) -> list[int]:
        """The source messages that hold the memory's text: all of them for a memory stored as
        given (a raw add, whatever its text became since), those with the same content for an
        extracted one; a message another memory cites stays."""
        rows = self.db.query(
            "SELECT msg.seq FROM provenance p JOIN messages msg ON msg.seq = p.message_seq "
            "JOIN memories m ON m.rowid = p.memory_rowid "
            "WHERE p.memory_rowid = ? AND (m.extractor_sha256 IS NULL OR msg.content = m.text) "
            "AND NOT EXISTS (SELECT 1 FROM provenance o WHERE o.message_seq = msg.seq "
            "AND o.memory_rowid != p.memory_rowid)",
            (record.rowid,),
        )
        return [int(row[0]) for row in rows]

    def _delete_messages(self, seqs: Sequence[int]) -> None:
        if not seqs:
            return
        self.delete_message_index(seqs)
        for seq in seqs:
            self.db.execute("DELETE FROM provenance WHERE message_seq = ?", (seq,))
            self.db.execute("DELETE FROM messages WHERE seq = ?", (seq,))

    def _drop_unlinked_entities(self) -> None:
        self.db.execute(
            "DELETE FROM entities WHERE NOT EXISTS "
            "(SELECT 1 FROM entity_links l WHERE l.entity_rowid = entities.rowid)"
        )

    def delete_scope(self, scope: Scope, *, now: datetime | None = None) -> int:
        """Delete every memory and message whose ids match each id given (as Mem0's delete_all:
        user_id='u' removes all of u's memories, whatever their agent or run)."""
        stamp = iso(now or utc_now())
        where, params = scope_match(scope, "")
        with self.db.atomic():
            records = [
                MemoryRecord.from_row(row)
                for row in self.db.query(
                    f"SELECT {MemoryRecord.COLUMNS} FROM memories WHERE {where} ORDER BY rowid",
                    params,
                )
            ]
            self._delete_rows(records, stamp, whole_scope=True)
            seqs = [
                row[0] for row in self.db.query(f"SELECT seq FROM messages WHERE {where}", params)
            ]
            self.delete_message_index(seqs)
            self.db.execute(f"DELETE FROM messages WHERE {where}", params)
            self.delete_jobs(scope)
        return len(records)

    def reset(self) -> None:
        """Remove every memory, message, entity, history row and job; the schema and meta stay."""
        with self.db.atomic():
            for table in ("provenance", "entity_links", "entities", "memory_vectors",
                          "message_vectors", "message_keyword_postings", "message_keyword_terms",
                          "message_keyword_docs", "message_keyword_partitions",
                          "keyword_postings", "keyword_terms", "keyword_docs", "keyword_partitions",
                          "memories", "messages", "history"):  # fmt: skip
                self.db.execute(f"DELETE FROM {table}")
            self.delete_jobs(None)

    # -- space -------------------------------------------------------------------------------

    def usage(self) -> dict[str, int]:
        return self.db.usage()

    def erase_freed(self) -> bool:
        """After a delete: checkpoint the WAL and truncate it, so the page images written before
        the delete (which hold the deleted text) leave the disk; False when a reader's open
        snapshot kept the WAL, or when called inside a transaction (the next compact or
        checkpoint finishes it)."""
        if self.db.in_transaction:
            return False
        return self.db.checkpoint(wait=False)

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
