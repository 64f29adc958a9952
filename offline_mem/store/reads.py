"""The store's reads of memories, their history, entities, sources and the scope's messages.

`StoreReads` is the `Store`'s part that reads rows; the writes, each one transaction, are in
writes.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..timeutil import utc_now
from ..values import Scope
from .candidates import visibility
from .db import Database
from .filters import CompiledFilter
from .records import HistoryRecord, MemoryRecord, MessageRecord

_BEYOND = 2**63 - 1  # a seq after every message


class StoreReads:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, memory_id: str) -> MemoryRecord | None:
        row = self.db.query_one(
            f"SELECT {MemoryRecord.COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        )
        return None if row is None else MemoryRecord.from_row(row)

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
        """Newest first, as Mem0's get_all (`as_of`: those true then, see `visibility`)."""
        visible, vparams = visibility(
            now=now or utc_now(), include_expired=include_expired,
            include_superseded=include_superseded, as_of=as_of,
        )  # fmt: skip
        columns = ", ".join(f"m.{c.strip()}" for c in MemoryRecord.COLUMNS.split(","))
        rows = self.db.query(
            f"SELECT {columns} FROM memories m WHERE {where.sql} AND {visible} "
            "ORDER BY m.created_at DESC, m.rowid DESC LIMIT ? OFFSET ?",
            (*where.params, *vparams, limit, offset),
        )
        return [MemoryRecord.from_row(row) for row in rows]

    def records_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryRecord]:
        if not rowids:
            return {}
        return self._records_by_rowid(rowids)

    def entities_of(self, rowid: int) -> list[tuple[str, str, str]]:
        """(name, norm, kind) of the entities a memory is linked to."""
        return [
            tuple(row)
            for row in self.db.query(
                "SELECT e.name, e.norm, e.kind FROM entity_links l "
                "JOIN entities e ON e.rowid = l.entity_rowid WHERE l.memory_rowid = ? "
                "ORDER BY e.norm",
                (rowid,),
            )
        ]

    def _records_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryRecord]:
        marks = ", ".join("?" for _ in rowids)
        rows = self.db.query(
            f"SELECT {MemoryRecord.COLUMNS} FROM memories WHERE rowid IN ({marks})", rowids
        )
        return {row[0]: MemoryRecord.from_row(row) for row in rows}

    def history(self, memory_id: str) -> list[HistoryRecord]:
        rows = self.db.query(
            f"SELECT {HistoryRecord.COLUMNS} FROM history WHERE memory_id = ? ORDER BY rowid",
            (memory_id,),
        )
        return [HistoryRecord(*row) for row in rows]

    def recent_messages(
        self, scope: Scope, limit: int = 10, *, before: int | None = None
    ) -> list[MessageRecord]:
        """The last `limit` messages of exactly this scope (stored before seq `before`, when
        given), oldest first."""
        rows = self.db.query(
            f"SELECT {MessageRecord.COLUMNS} FROM messages WHERE scope = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT ?",
            (scope.key, _BEYOND if before is None else before, limit),
        )
        return [MessageRecord(*row) for row in reversed(rows)]

    def message_count(self, scope: Scope, *, before: int | None = None) -> int:
        """How many messages exactly this scope holds (stored before seq `before`, when given)."""
        rows = self.db.query(
            "SELECT COUNT(*) FROM messages WHERE scope = ? AND seq < ?",
            (scope.key, _BEYOND if before is None else before),
        )
        return int(rows[0][0])

    def messages_by_id(self, ids: Sequence[str]) -> dict[str, MessageRecord]:
        """Those of these messages that exist, by id."""
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        rows = self.db.query(
            f"SELECT {MessageRecord.COLUMNS} FROM messages WHERE id IN ({marks})", list(ids)
        )
        return {row[1]: MessageRecord(*row) for row in rows}

    def sources(self, memory_rowid: int) -> list[MessageRecord]:
        """The messages a memory came from, in order."""
        columns = ", ".join(f"msg.{c.strip()}" for c in MessageRecord.COLUMNS.split(","))
        rows = self.db.query(
            f"SELECT {columns} FROM provenance p JOIN messages msg ON msg.seq = p.message_seq "
            "WHERE p.memory_rowid = ? ORDER BY msg.seq",
            (memory_rowid,),
        )
        return [MessageRecord(*row) for row in rows]

    def hashes_in_scope(self, scope: Scope, hashes: Sequence[str]) -> dict[str, str]:
        """Which of these content hashes an active memory of exactly this scope has: hash -> the
        id of one such memory (the oldest)."""
        if not hashes:
            return {}
        marks = ", ".join("?" for _ in hashes)
        rows = self.db.query(
            f"SELECT hash, id FROM memories WHERE scope = ? AND state = 'active' "
            f"AND hash IN ({marks}) ORDER BY rowid DESC",
            (scope.key, *hashes),
        )
        return dict(rows)

    def counts(self) -> dict[str, int]:
        tables = ("memories", "memory_vectors", "message_vectors", "keyword_docs",
                  "keyword_postings", "message_keyword_docs", "message_keyword_postings",
                  "entities", "entity_links", "history", "messages", "provenance")  # fmt: skip
        # A message's vector counts whether it is its own or its raw memory's (migration 012).
        read = {"message_vectors": "message_vector_values"}
        return {t: self.db.query_one(f"SELECT count(*) FROM {read.get(t, t)}")[0] for t in tables}
