"""The PostgreSQL store's writes: every public method here is exactly one transaction.

The same write plans as store/writes.py, applied in PostgreSQL's dialect: messages, memories,
their vectors (columns of their rows), keyword rows, entity links, history and provenance change
together or not at all.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from ...errors import MemoryNotFoundError
from ...timeutil import iso, utc_now
from ...values import EntityMention, Scope, content_hash
from ..jobs import JobClaim, NewJob
from ..keyword_index import partition_of
from ..records import AddPlan, MemoryRecord, NewMemory
from ..writer import current_writer
from . import keywords
from .connection import PgDatabase
from .jobs import PgJobs, scope_match
from .reads import MEMORY_COLUMNS, PgReads
from .vectors import vector_literal

# one writer at a time per database for an add's messages: their created_at must increase
# strictly, as the SQLite file's single writer guarantees (transaction-scoped advisory lock)
MESSAGE_CLOCK_LOCK = 0x6F6D6D7367  # "ommsg"


class PgWrites:
    def __init__(self, db: PgDatabase, reads: PgReads, jobs: PgJobs) -> None:
        self.db = db
        self.reads = reads
        self.jobs = jobs

    def apply_add(
        self, plan: AddPlan, *, now: datetime | None = None, job: NewJob | None = None
    ) -> list[str]:
        """Write messages, memories and everything attached to them, and the extraction job of
        an async add when given; returns the new memories' ids."""
        now = now or utc_now()
        with self.db.atomic():
            self._lock_changed(plan)
            seqs: list[int | None] = list(self._insert_messages(plan, now))
            for memory in plan.memories:
                self._insert_memory(plan, memory, seqs, now)
            self._merge(plan, seqs, now)
            if job is not None:
                # after the messages, under their lock: jobs' seqs are in commit order, so a
                # scope's jobs run in the order of its adds
                self.jobs.insert_job(plan.scope, job, iso(now))
        return [m.id for m in plan.memories]

    def finish_job(self, claim: JobClaim, plan: AddPlan, results: Sequence[dict[str, Any]]) -> bool:
        """Write a job's memories and mark it done, in one transaction; False, with nothing
        written, when the claim is no longer ours (the job row is locked first, so no other
        server can take it over meanwhile)."""
        now = utc_now()
        with self.db.atomic():
            if not self.jobs.holds(claim):
                return False
            self._lock_changed(plan)
            found = self.reads.messages_by_id([m.id for m in plan.messages])
            seqs = [found[m.id].seq if m.id in found else None for m in plan.messages]
            for memory in plan.memories:
                self._insert_memory(plan, memory, seqs, now)
            self._merge(plan, seqs, now)
            self.jobs.mark_job_done(claim, results)
        return True

    def _lock_changed(self, plan: AddPlan) -> None:
        """Lock the existing memories the plan supersedes or merges into, in rowid order, before
        anything else of the write: the order every write takes locks in is job rows, memory
        rows, the messages' clock, message rows, keyword partitions (messages', then memories'),
        entities; so writes of several servers wait for each other but never deadlock."""
        ids = sorted({old for m in plan.memories for old in m.supersedes}
                     | {merge.memory_id for merge in plan.merges})  # fmt: skip
        if ids:
            self.db.execute(
                "SELECT 1 FROM memories WHERE id = ANY(%s) ORDER BY rowid FOR UPDATE", (ids,)
            )

    def _merge(self, plan: AddPlan, seqs: Sequence[int | None], now: datetime) -> None:
        """As store/writes.py: a merged fact's messages become sources of the active memory that
        says it already, with a MERGE history row; a memory gone or superseded gains nothing."""
        stamp = iso(now)
        for merge in plan.merges:
            row = self.db.query_one(
                "SELECT rowid, text, actor_id, role FROM memories "
                "WHERE id = %s AND scope = %s AND state = 'active' FOR UPDATE",
                (merge.memory_id, plan.scope.key),
            )
            if row is None:
                continue
            rowid, text, actor_id, role = row
            found = (seqs[i] for i in merge.source_messages)
            sources = sorted({seq for seq in found if seq is not None})
            self.db.executemany(
                "INSERT INTO provenance (memory_rowid, message_seq) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                [(rowid, seq) for seq in sources],
            )
            self._history(merge.memory_id, text, merge.text, "MERGE", stamp, actor_id, role,
                          happened=merge.happened)  # fmt: skip

    def _insert_messages(self, plan: AddPlan, now: datetime) -> list[int]:
        if not plan.messages:
            return []
        self.db.execute("SELECT pg_advisory_xact_lock(%s)", (MESSAGE_CLOCK_LOCK,))
        # The newest message's stamp, by seq: stamps grow with seq, as new messages are
        # stamped here under the lock (so their seqs are taken in turn). max(created_at) read
        # every message (no index on it).
        newest = self.db.query_one("SELECT created_at FROM messages ORDER BY seq DESC LIMIT 1")
        last = None if newest is None else newest[0]
        moment, seqs = now, []
        for message in plan.messages:
            if last is not None and iso(moment) <= last:
                moment = datetime.fromisoformat(last) + timedelta(microseconds=1)
            stamp = last = iso(moment)
            metadata = (
                None
                if not message.metadata
                else json.dumps(message.metadata, ensure_ascii=False, sort_keys=True)
            )
            vector = None if message.vector is None else vector_literal(message.vector)
            row = self.db.query_one(
                "INSERT INTO messages (id, scope, user_id, agent_id, run_id, role, name, content,"
                " hash, created_at, observed_at, metadata, embedding)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::vector)"
                " RETURNING seq",
                (message.id, plan.scope.key, plan.scope.user_id, plan.scope.agent_id,
                 plan.scope.run_id, message.role, message.name, message.content,
                 content_hash(message.content), stamp, message.observed_at, metadata, vector),
            )  # fmt: skip
            seq = int(row[0])
            seqs.append(seq)
            if message.terms is not None:
                keywords.index_terms(
                    self.db, seq, partition_of(plan.scope.user_id), message.terms,
                    keywords.MESSAGE_KEYWORDS,
                )  # fmt: skip
        return seqs

    def _insert_memory(
        self, plan: AddPlan, memory: NewMemory, seqs: Sequence[int | None], now: datetime
    ) -> None:
        if memory.terms is None:
            raise ValueError("NewMemory.terms must be filled (Memory analyses texts first)")
        scope, stamp = plan.scope, iso(now)
        happened = memory.observed_at or stamp  # the date of the message it came from
        row = self.db.query_one(
            "INSERT INTO memories (id, text, hash, user_id, agent_id, run_id, scope, metadata,"
            " role, actor_id, attributed_to, memory_type, state, created_at, updated_at,"
            " observed_at, expiration_date, embedder_sha256, extractor_sha256, prompt_version,"
            " valid_from, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
            " 'active', %s, %s, %s, %s, %s, %s, %s, %s, %s::vector) RETURNING rowid",
            (memory.id, memory.text, memory.hash, scope.user_id, scope.agent_id, scope.run_id,
             scope.key, json.dumps(memory.metadata, ensure_ascii=False), memory.role,
             memory.actor_id, memory.attributed_to, memory.memory_type, stamp, stamp,
             memory.observed_at, memory.expiration_date, plan.embedder_sha256,
             plan.extractor_sha256, plan.prompt_version, memory.valid_from or happened,
             vector_literal(memory.vector)),
        )  # fmt: skip
        rowid = int(row[0])
        keywords.index_terms(
            self.db, rowid, partition_of(scope.user_id), memory.terms, keywords.MEMORY_KEYWORDS
        )
        found = (seqs[i] for i in memory.source_messages)
        sources = sorted({seq for seq in found if seq is not None})
        self.db.executemany(
            "INSERT INTO provenance (memory_rowid, message_seq) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING",
            [(rowid, seq) for seq in sources],
        )
        self._link_entities(rowid, scope, memory.entities)
        self._history(memory.id, None, memory.text, "ADD", stamp, memory.actor_id, memory.role,
                      happened=happened)  # fmt: skip
        for old_id in memory.supersedes:
            self._supersede(old_id, memory.id, stamp, happened)

    def _link_entities(self, rowid: int, scope: Scope, entities: Sequence[EntityMention]) -> None:
        """The entity rows are taken with a lock (an upsert that rewrites nothing), so another
        server's `_drop_unlinked_entities` cannot remove one before its link is committed."""
        for entity in sorted(entities, key=lambda e: e.norm):
            row = self.db.query_one(
                "INSERT INTO entities AS e (scope, name, norm, kind) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (scope, norm) DO UPDATE SET name = e.name RETURNING rowid",
                (scope.key, entity.name, entity.norm, entity.kind),
            )
            self.db.execute(
                "INSERT INTO entity_links (entity_rowid, memory_rowid) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                (row[0], rowid),
            )

    def _supersede(self, old_id: str, new_id: str, stamp: str, happened: str) -> None:
        """As the SQLite store: `old_id` stops holding at `happened`, never before it began."""
        row = self.db.query_one(
            "UPDATE memories SET state = 'superseded', superseded_by = %s, updated_at = %s, "
            "valid_to = GREATEST(COALESCE(valid_from, %s), %s) "
            "WHERE id = %s AND state = 'active' RETURNING text",
            (new_id, stamp, happened, happened, old_id),
        )
        if row is not None:  # else already superseded within this batch
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
        self.db.execute(
            "INSERT INTO history (id, memory_id, old_memory, new_memory, event, related_memory_id,"
            " created_at, updated_at, is_deleted, actor_id, role, written_by, happened_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (str(uuid.uuid4()), memory_id, old, new, event, related, stamp, stamp,
             int(is_deleted), actor_id, role, current_writer(), happened or stamp),
        )  # fmt: skip

    def delete_memory(self, record: MemoryRecord, *, now: datetime | None = None) -> None:
        stamp = iso(now or utc_now())
        with self.db.atomic():
            current = self._locked(record.id)
            if current is None:
                raise MemoryNotFoundError(f"memory {record.id!r} no longer exists")
            self._delete_rows([current], stamp, whole_scope=False)

    def _locked(self, memory_id: str) -> MemoryRecord | None:
        """Re-read and lock the row inside the transaction: another server may change it."""
        row = self.db.query_one(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = %s FOR UPDATE", (memory_id,)
        )
        return None if row is None else MemoryRecord.from_row(row)

    def _delete_rows(
        self, records: Sequence[MemoryRecord], stamp: str, *, whole_scope: bool
    ) -> None:
        """As store/writes.py: every copy of the texts goes; history keeps events, not text."""
        for record in records:
            verbatim = [] if whole_scope else self._verbatim_sources(record)
            self.db.execute(
                "UPDATE history SET old_memory = NULL, new_memory = NULL WHERE memory_id = %s",
                (record.id,),
            )
            self._history(record.id, None, None, "DELETE", stamp, record.actor_id,
                          record.role, is_deleted=True)  # fmt: skip
            if not whole_scope:
                self.jobs.forget_job_results(record)
                self._delete_messages(verbatim)
        rowids = [r.rowid for r in records]
        keywords.unindex(self.db, rowids, keywords.MEMORY_KEYWORDS)
        # the vector is a column of the row; entity_links and provenance cascade
        self.db.execute("DELETE FROM memories WHERE rowid = ANY(%s)", (rowids,))
        self._drop_unlinked_entities([r.scope.key for r in records])

    def _verbatim_sources(self, record: MemoryRecord) -> list[int]:
        rows = self.db.query(
            "SELECT msg.seq FROM provenance p JOIN messages msg ON msg.seq = p.message_seq "
            "JOIN memories m ON m.rowid = p.memory_rowid "
            "WHERE p.memory_rowid = %s AND (m.extractor_sha256 IS NULL OR msg.content = m.text) "
            "AND NOT EXISTS (SELECT 1 FROM provenance o WHERE o.message_seq = msg.seq "
            "AND o.memory_rowid <> p.memory_rowid)",
            (record.rowid,),
        )
        return [int(row[0]) for row in rows]

    def _delete_messages(self, seqs: Sequence[int]) -> None:
        if seqs:
            # the rows before their keyword partitions, as the indexing of an async add's
            # messages locks them (messages.py `index_messages`)
            self.db.execute(
                "SELECT 1 FROM messages WHERE seq = ANY(%s) ORDER BY seq FOR UPDATE", (list(seqs),)
            )
            keywords.unindex(self.db, seqs, keywords.MESSAGE_KEYWORDS)
            self.db.execute("DELETE FROM messages WHERE seq = ANY(%s)", (list(seqs),))

    def _drop_unlinked_entities(self, scopes: Sequence[str]) -> None:
        """The entities of these scope keys that no memory links to any more (entities are
        per scope: other scopes' rows are not read)."""
        # SKIP LOCKED: an entity another write is linking right now is left alone (it will have
        # a link); this write never waits on an entity row, so never deadlocks on one
        self.db.execute(
            "DELETE FROM entities WHERE rowid IN (SELECT e.rowid FROM entities e "
            "WHERE e.scope = ANY(%s) AND NOT EXISTS (SELECT 1 FROM entity_links l "
            "WHERE l.entity_rowid = e.rowid) FOR UPDATE SKIP LOCKED)",
            (sorted(set(scopes)),),
        )

    def delete_scope(self, scope: Scope, *, now: datetime | None = None) -> int:
        """Every memory and message of the ids given (Mem0's delete_all)."""
        stamp = iso(now or utc_now())
        where, params = scope_match(scope, "m")
        with self.db.atomic():
            self.jobs.lock_jobs(scope)  # first: the lock order of _lock_changed
            rows = self.db.query(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY m.rowid "
                "FOR UPDATE",
                params,
            )
            records = [MemoryRecord.from_row(row) for row in rows]
            msg_where, msg_params = scope_match(scope)
            seqs = [r[0] for r in self.db.query(
                f"SELECT seq FROM messages WHERE {msg_where}", msg_params
            )]  # fmt: skip
            self._delete_messages(seqs)  # the messages' keyword rows before the memories'
            self._delete_rows(records, stamp, whole_scope=True)
            self.jobs.delete_jobs(scope)
        return len(records)

    def reset(self) -> None:
        """Remove every row but the schema's and meta's, in one transaction."""
        with self.db.atomic():
            self.db.execute(
                "TRUNCATE provenance, entity_links, entities, keyword_postings, keyword_terms, "
                "keyword_docs, keyword_partitions, message_keyword_postings, "
                "message_keyword_terms, message_keyword_docs, message_keyword_partitions, "
                "memories, messages, history, jobs"
            )

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
        """As store/writes.py: apply the changes and return the memory as committed."""
        stamp = iso(now or utc_now())
        with self.db.atomic():
            current = self._locked(record.id)
            if current is None:
                raise MemoryNotFoundError(f"memory {record.id!r} no longer exists")
            sets: list[str] = ["updated_at = %s"]
            params: list[Any] = [stamp]
            if text is not None:
                sets += ["text = %s", "hash = %s"]
                params += [text, text_hash]
            if metadata is not None:
                sets.append("metadata = %s")
                params.append(json.dumps(metadata, ensure_ascii=False))
            if expiration_date is not Ellipsis:
                sets.append("expiration_date = %s")
                params.append(expiration_date)
            if text is not None and vector is not None:
                sets.append("embedding = %s::vector")
                params.append(vector_literal(vector))
            self.db.execute(f"UPDATE memories SET {', '.join(sets)} WHERE rowid = %s",
                            (*params, current.rowid))  # fmt: skip
            if text is not None and vector is not None:
                keywords.unindex(self.db, [current.rowid], keywords.MEMORY_KEYWORDS)
                keywords.index_terms(
                    self.db, current.rowid, partition_of(current.user_id), terms or [],
                    keywords.MEMORY_KEYWORDS,
                )  # fmt: skip
                self.db.execute(
                    "DELETE FROM entity_links WHERE memory_rowid = %s", (current.rowid,)
                )
                self._link_entities(current.rowid, current.scope, entities or [])
                self._drop_unlinked_entities([current.scope.key])
            new_text = text if text is not None else current.text
            self._history(current.id, current.text, new_text, "UPDATE", stamp,
                          current.actor_id, current.role)  # fmt: skip
            updated = self.reads.get(current.id)
        assert updated is not None
        return updated
