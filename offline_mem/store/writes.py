"""The writes of a memory file: every public method here is exactly one transaction.

Memories, vectors, keyword rows, entity links, history, messages and provenance change together
or not at all (`Database.atomic`). `MemoryWrites` is the `Store`'s part that writes them; it
uses the job queue and message index parts for their rows within the same transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from ..errors import MemoryNotFoundError
from ..timeutil import iso, utc_now
from ..values import EntityMention, Scope, content_hash
from . import keyword_index
from .candidates import scope_match, vector_blob
from .db import Database
from .jobs import JobClaim, JobQueue, NewJob
from .messages import MessageIndex
from .reads import StoreReads
from .records import AddPlan, MemoryRecord, NewMemory
from .writer import current_writer


class MemoryWrites:
    def __init__(
        self, db: Database, reads: StoreReads, messages: MessageIndex, jobs: JobQueue
    ) -> None:
        self.db = db
        self.reads = reads
        self.messages = messages
        self.jobs = jobs

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
            # After the memories: a raw memory's message links to its vector (same bytes).
            for message, seq in zip(plan.messages, seqs, strict=True):
                if message.vector is not None and seq is not None:
                    self.messages.insert_message_vector(seq, message.vector)
            self._merge(plan, seqs, now)
            if job is not None:
                self.jobs.insert_job(plan.scope, job, iso(now))
        return [m.id for m in plan.memories]

    def finish_job(self, claim: JobClaim, plan: AddPlan, results: Sequence[dict[str, Any]]) -> bool:
        """Write a job's memories (its messages are stored already) and mark it done, in one
        transaction; False, with nothing written, when the claim is no longer ours. A message
        deleted since the job was queued is left out of the memories' sources."""
        now = utc_now()
        with self.db.atomic():
            if not self.jobs.holds(claim):
                return False
            found = self.reads.messages_by_id([m.id for m in plan.messages])
            seqs = [found[m.id].seq if m.id in found else None for m in plan.messages]
            for memory in plan.memories:
                self._insert_memory(plan, memory, seqs, now)
            self._merge(plan, seqs, now)
            self.jobs.mark_job_done(claim, results)
        return True

    def _insert_messages(self, plan: AddPlan, now: datetime) -> list[int]:
        """Insert the messages and their keyword rows (their vectors come after the memories)."""
        # The newest message's stamp, by seq: stamps grow with seq, as new messages are
        # stamped here. max(created_at) read every message (no index on it: 59 ms at
        # 100,000 messages).
        newest = self.db.query_one("SELECT created_at FROM messages ORDER BY seq DESC LIMIT 1")
        last = None if newest is None else newest[0]
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
            if message.terms is not None:
                self.messages.insert_message_terms(
                    cursor.lastrowid, plan.scope.user_id, message.terms
                )
        return seqs

    def _insert_memory(
        self, plan: AddPlan, memory: NewMemory, seqs: Sequence[int | None], now: datetime
    ) -> None:
        scope = plan.scope
        stamp = iso(now)
        happened = memory.observed_at or stamp  # the date of the message it came from
        cursor = self.db.execute(
            "INSERT INTO memories (id, text, hash, user_id, agent_id, run_id, scope, metadata,"
            " role, actor_id, attributed_to, memory_type, state, created_at, updated_at,"
            " observed_at, expiration_date, embedder_sha256, extractor_sha256, prompt_version,"
            " valid_from)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?)",
            (memory.id, memory.text, memory.hash, scope.user_id, scope.agent_id, scope.run_id,
             scope.key, json.dumps(memory.metadata, ensure_ascii=False), memory.role,
             memory.actor_id, memory.attributed_to, memory.memory_type, stamp, stamp,
             memory.observed_at, memory.expiration_date, plan.embedder_sha256,
             plan.extractor_sha256, plan.prompt_version, memory.valid_from or happened),
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
        self._history(memory.id, None, memory.text, "ADD", stamp, memory.actor_id, memory.role,
                      happened=happened)  # fmt: skip
        for old_id in memory.supersedes:
            self._supersede(old_id, memory.id, stamp, happened)

    def _merge(self, plan: AddPlan, seqs: Sequence[int | None], now: datetime) -> None:
        """Each merged fact's messages become sources of the memory that said it already, with a
        MERGE history row (old_memory: its text, new_memory: the new wording). A memory deleted
        or superseded since the extraction read it gains nothing."""
        stamp = iso(now)
        for merge in plan.merges:
            row = self.db.query_one(
                "SELECT rowid, text, actor_id, role FROM memories "
                "WHERE id = ? AND scope = ? AND state = 'active'",
                (merge.memory_id, plan.scope.key),
            )
            if row is None:
                continue
            rowid, text, actor_id, role = row
            for index in merge.source_messages:
                if seqs[index] is not None:
                    self.db.execute(
                        "INSERT OR IGNORE INTO provenance (memory_rowid, message_seq) "
                        "VALUES (?, ?)",
                        (rowid, seqs[index]),
                    )
            self._history(merge.memory_id, text, merge.text, "MERGE", stamp, actor_id, role,
                          happened=merge.happened)  # fmt: skip

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

    def _supersede(self, old_id: str, new_id: str, stamp: str, happened: str) -> None:
        """`old_id` stops holding at `happened`, the date of the message that replaced it (never
        before it began: messages may be added out of their dates' order)."""
        row = self.db.query_one(
            "SELECT text FROM memories WHERE id = ? AND state = 'active'", (old_id,)
        )
        if row is None:
            return  # already superseded within this batch
        self.db.execute(
            "UPDATE memories SET state = 'superseded', superseded_by = ?, updated_at = ?, "
            "valid_to = max(COALESCE(valid_from, ?), ?) WHERE id = ?",
            (new_id, stamp, happened, happened, old_id),
        )
        self._history(old_id, row[0], row[0], "SUPERSEDE", stamp, None, None, related=new_id,
                      happened=happened)  # fmt: skip

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
        happened: str | None = None,
    ) -> None:
        """One history row: recorded at `stamp`, happened at `happened` (the message's date;
        the same as `stamp` for a change made through the API)."""
        self.db.execute(
            "INSERT INTO history (id, memory_id, old_memory, new_memory, event, related_memory_id,"
            " created_at, updated_at, is_deleted, actor_id, role, written_by, happened_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (str(uuid.uuid4()), memory_id, old, new, event, related, stamp, stamp,
             int(is_deleted), actor_id, role, current_writer(), happened or stamp),
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
            updated = self.reads.get(current.id)
        assert updated is not None
        return updated

    def _require_same(self, record: MemoryRecord) -> MemoryRecord:
        """Re-read inside the transaction: another process may have deleted it meanwhile."""
        current = self.reads.get(record.id)
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
            # The messages first: a vector they share with the memory is then not copied
            # to them on its way out (migration 012's trigger).
            self._delete_messages(verbatim)
            self.db.execute("DELETE FROM memory_vectors WHERE rowid = ?", (record.rowid,))
            keyword_index.unindex(self.db, record.rowid)
            # entity_links and provenance go with the row (ON DELETE CASCADE)
            self.db.execute("DELETE FROM memories WHERE rowid = ?", (record.rowid,))
            if not whole_scope:
                self.jobs.forget_job_results(record)
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
        self.messages.delete_message_index(seqs)
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
            seqs = [
                row[0] for row in self.db.query(f"SELECT seq FROM messages WHERE {where}", params)
            ]
            self.messages.delete_message_index(seqs)  # before the vectors they may share
            self._delete_rows(records, stamp, whole_scope=True)
            self.db.execute(f"DELETE FROM messages WHERE {where}", params)
            self.jobs.delete_jobs(scope)
        return len(records)

    def reset(self) -> None:
        """Remove every memory, message, entity, history row and job; the schema and meta stay."""
        with self.db.atomic():
            for table in ("provenance", "entity_links", "entities", "message_vector_links",
                          "memory_vectors", "message_vectors", "message_keyword_postings",
                          "message_keyword_terms",
                          "message_keyword_docs", "message_keyword_partitions",
                          "keyword_postings", "keyword_terms", "keyword_docs", "keyword_partitions",
                          "memories", "messages", "history"):  # fmt: skip
                self.db.execute(f"DELETE FROM {table}")
            self.jobs.delete_jobs(None)
