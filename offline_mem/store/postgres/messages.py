"""A scope's stored messages in PostgreSQL: their search and their deletion.

The same operations as store/messages.py's `MessageIndex`: exact cosine top-k over the
messages' own vectors (a column of their row; NULL for unindexed, system, messages), BM25 over
the messages' postings (bm25.py), the replies to questions and the hits with the memories that
cite them. The index is written with each message (writes.py), but for an async add's messages:
those are indexed just after the add returns, and always before its job runs
(`unindexed_message_rows`, `index_messages`; memory_parts/message_indexing.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ...timeutil import iso
from ...values import Scope
from ..keyword_index import QueryStats, partition_of, searched_partition
from ..messages import MessageHit, StoredMessage, is_indexed_message
from ..records import MessageRecord
from . import bm25, keywords
from .connection import PgDatabase
from .jobs import scope_match
from .keywords import MESSAGE_KEYWORDS
from .reads import MESSAGE_COLUMNS, PgReads
from .vectors import exact_nearest, hnsw_nearest, vector_literal


def message_condition(scope: Scope, as_of: datetime | None) -> tuple[str, list[Any]]:
    """The scope's messages (alias m), and when `as_of` is given only those said by then."""
    where, params = scope_match(scope, "m")
    if as_of is None:
        return where, list(params)
    return f"{where} AND COALESCE(m.observed_at, m.created_at) <= %s", [*params, iso(as_of)]


class PgMessages:
    def __init__(self, db: PgDatabase, reads: PgReads, *, hnsw: bool = False) -> None:
        self.db = db
        self.reads = reads
        self.hnsw = hnsw

    def delete_message(self, message_id: str) -> StoredMessage | None:
        """Remove a message with its vector, keyword rows and provenance links in one
        transaction; the memories extracted from it stay. None when there is no such message."""
        with self.db.atomic():
            row = self.db.query_one(
                "SELECT seq FROM messages WHERE id = %s FOR UPDATE", (message_id,)
            )
            if row is None:
                return None
            found = self.reads.find_message(message_id)
            assert found is not None  # locked above
            keywords.unindex(self.db, [found.record.seq], MESSAGE_KEYWORDS)
            # its vector is a column of the row; provenance cascades
            self.db.execute("DELETE FROM messages WHERE seq = %s", (found.record.seq,))
        return found

    def unindexed_message_rows(
        self, message_ids: Sequence[str]
    ) -> list[tuple[MessageRecord, str | None]]:
        """As the SQLite store's: the indexed messages of these ids without their vector or
        keyword document, with their user_id, by seq."""
        if not message_ids:
            return []
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS}, msg.user_id FROM messages msg WHERE msg.id = ANY(%s) "
            "AND (msg.embedding IS NULL OR NOT EXISTS (SELECT 1 FROM message_keyword_docs d "
            "WHERE d.message_seq = msg.seq)) ORDER BY msg.seq",
            (list(dict.fromkeys(message_ids)),),
        )
        width = len(MessageRecord.COLUMNS.split(","))
        found = [(MessageRecord(*row[:width]), row[width]) for row in rows]
        return [(r, user) for r, user in found if is_indexed_message(r.role, r.content)]

    def index_messages(
        self,
        rows: Sequence[tuple[int, str | None]],
        vectors: Sequence[np.ndarray] | np.ndarray,
        terms: Sequence[Sequence[str]],
    ) -> None:
        """(Re)write the vectors and keyword rows of existing messages, in one transaction; a
        message deleted meanwhile is left out. The messages' rows are locked first, then the
        keyword partitions in order: the lock order of every write (writes.py `_lock_changed`)."""
        wanted = {
            int(seq): (partition_of(user_id), vector, words)
            for (seq, user_id), vector, words in zip(rows, vectors, terms, strict=True)
        }
        with self.db.atomic():
            found = [int(r[0]) for r in self.db.query(
                "SELECT seq FROM messages WHERE seq = ANY(%s) ORDER BY seq FOR NO KEY UPDATE",
                (sorted(wanted),),
            )]  # fmt: skip
            if not found:
                return
            keywords.unindex(self.db, found, MESSAGE_KEYWORDS)  # a rewrite: nothing counted twice
            self.db.executemany(
                "UPDATE messages SET embedding = %s::vector WHERE seq = %s",
                [(vector_literal(wanted[seq][1]), seq) for seq in found],
            )
            for seq in sorted(found, key=lambda s: (wanted[s][0], s)):
                partition, _, words = wanted[seq]
                keywords.index_terms(self.db, seq, partition, words, MESSAGE_KEYWORDS)

    def message_candidates(
        self, vector: np.ndarray, scope: Scope, *, k: int, as_of: datetime | None = None
    ) -> dict[int, float]:
        """Top-k messages of the scope by cosine: seq -> similarity; exact, or through the
        HNSW index with the `hnsw` option."""
        where, params = message_condition(scope, as_of)
        condition = (f"m.embedding IS NOT NULL AND {where}", params)
        if self.hnsw:
            return hnsw_nearest(self.db, "messages", "seq", vector, condition, k=k)
        return exact_nearest(self.db, "messages", "seq", vector, condition, k=k)

    def message_keyword_stats(self, terms: Sequence[str], scope: Scope) -> QueryStats:
        return bm25.query_stats(self.db, terms, searched_partition(scope.user_id), MESSAGE_KEYWORDS)

    def message_keyword_candidates(
        self,
        stats: QueryStats,
        scope: Scope,
        *,
        limit: int,
        also_seqs: Sequence[int] = (),
        as_of: datetime | None = None,
    ) -> dict[int, float]:
        return bm25.bm25_scores(
            self.db, stats, searched_partition(scope.user_id), message_condition(scope, as_of),
            MESSAGE_KEYWORDS, limit=limit, also_rowids=also_seqs,
        )  # fmt: skip

    def message_similarities(self, vector: np.ndarray, seqs: Sequence[int]) -> dict[int, float]:
        if not seqs:
            return {}
        rows = self.db.query(
            "SELECT seq, 1 - (embedding <=> %s::vector) FROM messages "
            "WHERE seq = ANY(%s) AND embedding IS NOT NULL",
            (vector_literal(vector), [int(s) for s in seqs]),
        )
        return {int(seq): float(score) for seq, score in rows}

    def message_replies(self, seqs: Sequence[int]) -> dict[int, int]:
        """The next non-system message of the same scope after each of the given ones."""
        if not seqs:
            return {}
        rows = self.db.query(
            "SELECT m.seq, (SELECT r.seq FROM messages r WHERE r.scope = m.scope "
            "AND r.seq > m.seq AND r.role <> 'system' ORDER BY r.seq LIMIT 1) "
            "FROM messages m WHERE m.seq = ANY(%s)",
            ([int(s) for s in seqs],),
        )
        return {int(seq): int(reply) for seq, reply in rows if reply is not None}

    def message_hits(self, scored: dict[int, float]) -> list[MessageHit]:
        """The messages with their scores and citing memories, best first (ties: newest)."""
        if not scored:
            return []
        seqs = [int(s) for s in scored]
        rows = self.db.query(
            f"SELECT {MESSAGE_COLUMNS}, msg.user_id, msg.agent_id, msg.run_id FROM messages msg "
            "WHERE msg.seq = ANY(%s)",
            (seqs,),
        )
        width = len(MessageRecord.COLUMNS.split(","))
        records = {int(row[0]): MessageRecord(*row[:width]) for row in rows}
        scopes = {int(row[0]): tuple(row[width:]) for row in rows}
        cited: dict[int, list[str]] = {}
        verbatim: set[int] = set()
        for seq, memory_id, text in self.db.query(
            "SELECT p.message_seq, m.id, m.text FROM provenance p JOIN memories m "
            "ON m.rowid = p.memory_rowid WHERE p.message_seq = ANY(%s) ORDER BY m.rowid",
            (seqs,),
        ):
            cited.setdefault(int(seq), []).append(memory_id)
            if text == records[int(seq)].content:
                verbatim.add(int(seq))
        order = sorted(records, key=lambda seq: (-scored[seq], -seq))
        return [
            MessageHit(
                records[seq], scored[seq], tuple(cited.get(seq, ())), seq in verbatim, scopes[seq]
            )
            for seq in order
        ]
