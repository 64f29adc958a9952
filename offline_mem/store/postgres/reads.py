"""The PostgreSQL store's reads of memories, their history and sources, and a scope's messages.

The same queries as store/reads.py in PostgreSQL's dialect; rows come back in the same typed
records (records.py), so the layers above cannot tell the stores apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ...timeutil import iso, utc_now
from ...values import Scope
from ..filters import CompiledFilter
from ..messages import StoredMessage
from ..records import HistoryRecord, MemoryRecord, MessageRecord
from .connection import PgDatabase
from .filters import pg_condition

_BEYOND = 2**63 - 1  # a seq after every message
MEMORY_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MemoryRecord.COLUMNS.split(","))
MESSAGE_COLUMNS = ", ".join(f"msg.{c.strip()}" for c in MessageRecord.COLUMNS.split(","))


def visibility(
    *,
    now: datetime,
    include_expired: bool,
    include_superseded: bool,
    as_of: datetime | None = None,
) -> tuple[str, list[str]]:
    """State, expiry and `as_of` over alias m, as candidates.visibility states them for SQLite:
    an expiration is a date (YYYY-MM-DD, through that day) or an ISO instant."""
    parts: list[str] = []
    params: list[str] = []
    if as_of is not None:
        parts.append(
            "COALESCE(m.observed_at, m.created_at) <= %s"
            " AND (m.valid_to IS NULL OR m.valid_to > %s)"
        )
        params += [iso(as_of), iso(as_of)]
        now = as_of
    elif not include_superseded:
        parts.append("m.state = 'active'")
    if not include_expired:
        parts.append(
            "(m.expiration_date IS NULL"
            " OR (length(m.expiration_date) = 10 AND m.expiration_date >= %s)"
            " OR (length(m.expiration_date) > 10 AND m.expiration_date > %s))"
        )
        params += [now.date().isoformat(), iso(now)]
    return (" AND ".join(parts) or "TRUE"), params


class PgReads:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, memory_id: str) -> MemoryRecord | None:
        row = self.db.query_one(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = %s", (memory_id,)
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
        """Newest first, as Mem0's get_all."""
        condition, params = pg_condition(where)
        visible, vparams = visibility(
            now=now or utc_now(), include_expired=include_expired,
            include_superseded=include_superseded, as_of=as_of,
        )  # fmt: skip
        rows = self.db.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {condition} AND {visible} "
            "ORDER BY m.created_at DESC, m.rowid DESC LIMIT %s OFFSET %s",
            (*params, *vparams, limit, offset),
        )
        return [MemoryRecord.from_row(row) for row in rows]

    def records_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryRecord]:
        if not rowids:
            return {}
        rows = self.db.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.rowid = ANY(%s)",
            ([int(r) for r in rowids],),
        )
        return {row[0]: MemoryRecord.from_row(row) for row in rows}

    def history(self, memory_id: str) -> list[HistoryRecord]:
        rows = self.db.query(
            f"SELECT {HistoryRecord.COLUMNS} FROM history WHERE memory_id = %s ORDER BY rowid",
            (memory_id,),
        )
        return [HistoryRecord(*row) for row in rows]

    def recent_messages(
        self, scope: Scope, limit: int = 10, *, before: int | None = None
    ) -> list[MessageRecord]:
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS} FROM messages msg WHERE msg.scope = %s AND msg.seq < %s "
            "ORDER BY msg.seq DESC LIMIT %s",
            (scope.key, _BEYOND if before is None else before, limit),
        )
        return [MessageRecord(*row) for row in reversed(rows)]

    def message_count(self, scope: Scope, *, before: int | None = None) -> int:
        row = self.db.query_one(
            "SELECT count(*) FROM messages WHERE scope = %s AND seq < %s",
            (scope.key, _BEYOND if before is None else before),
        )
        return int(row[0])

    def messages_by_id(self, ids: Sequence[str]) -> dict[str, MessageRecord]:
        if not ids:
            return {}
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS} FROM messages msg WHERE msg.id = ANY(%s)", (list(ids),)
        )
        return {row[1]: MessageRecord(*row) for row in rows}

    def sources(self, memory_rowid: int) -> list[MessageRecord]:
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS} FROM provenance p JOIN messages msg "
            "ON msg.seq = p.message_seq WHERE p.memory_rowid = %s ORDER BY msg.seq",
            (memory_rowid,),
        )
        return [MessageRecord(*row) for row in rows]

    def find_message(self, message_id: str) -> StoredMessage | None:
        """A message with its scope ids and the memories that cite it."""
        row = self.db.query_one(
            f"SELECT {MESSAGE_COLUMNS}, msg.user_id, msg.agent_id, msg.run_id FROM messages msg "
            "WHERE msg.id = %s",
            (message_id,),
        )
        if row is None:
            return None
        width = len(MessageRecord.COLUMNS.split(","))
        record = MessageRecord(*row[:width])
        cited = self.db.query(
            "SELECT m.id FROM provenance p JOIN memories m ON m.rowid = p.memory_rowid "
            "WHERE p.message_seq = %s ORDER BY m.rowid",
            (record.seq,),
        )
        user_id, agent_id, run_id = row[width:]
        return StoredMessage(record, user_id, agent_id, run_id, tuple(r[0] for r in cited))

    def hashes_in_scope(self, scope: Scope, hashes: Sequence[str]) -> dict[str, str]:
        """hash -> the id of the oldest active memory of exactly this scope with it."""
        if not hashes:
            return {}
        rows = self.db.query(
            "SELECT hash, id FROM memories WHERE scope = %s AND state = 'active' "
            "AND hash = ANY(%s) ORDER BY rowid DESC",
            (scope.key, list(hashes)),
        )
        return dict(rows)

    def counts(self) -> dict[str, int]:
        tables = ("memories", "keyword_docs", "keyword_postings", "message_keyword_docs",
                  "message_keyword_postings", "entities", "entity_links", "history", "messages",
                  "provenance")  # fmt: skip
        found = {t: int(self.db.query_one(f"SELECT count(*) FROM {t}")[0]) for t in tables}
        # the file's vector tables' counts: here the vectors are columns of their rows
        found["memory_vectors"] = found["memories"]
        (indexed,) = self.db.query_one("SELECT count(*) FROM messages WHERE embedding IS NOT NULL")
        return {**found, "message_vectors": int(indexed)}
