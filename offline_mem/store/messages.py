"""The message index: every non-system message's vector and keyword terms, so the text behind
the facts stays retrievable (`Memory.search`, `Memory.search_messages`).

`MessageIndex` is the `Store`'s part for them. Vectors live in `message_vectors` (rowid =
messages.seq) or, for a message whose raw memory holds the same vector, in that memory's row
through `message_vector_links` (read both as `message_vector_values`; a large user's are held
in memory by `message_vector_cache`); keyword rows in the messages' own BM25 index
(keyword_index.MESSAGE_KEYWORDS). Both are written in the same transaction as their message,
but for an async add's: those are indexed just after it returns, and always before its job runs
(`unindexed_message_rows` / `index_messages`; memory_parts/message_indexing.py). Files created
before the index existed are filled by `Memory` when it opens (`pending_message_batches` /
`index_messages`), tracked by meta `message_vectors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ..timeutil import iso
from ..values import Scope
from . import bm25, keyword_index
from .candidates import filtered_knn, point_similarities, scope_match, vector_blob
from .db import Database
from .keyword_index import MESSAGE_KEYWORDS
from .records import MessageRecord
from .vector_cache import MESSAGE_VECTORS, VectorCache

INDEX_STATE_KEY = "message_vectors"  # meta key: "complete" or "pending"
ID_BATCH = 500  # ids per statement: well under SQLite's limit on a statement's parameters


def is_indexed_message(role: str, content: str) -> bool:
    """System messages are instructions, not conversation: they are kept but not indexed."""
    return role != "system" and bool(content.strip())


def message_embedding_text(name: str | None, content: str) -> str:
    """What a message's vector is made from: with its speaker's name when it has one, so "I moved
    to Aarhus" said by one speaker is near "Where does <speaker> live?" and far from what the other
    speaker said."""
    return f"{name}: {content}" if name else content


@dataclass(frozen=True)
class MessageHit:
    record: MessageRecord
    score: float  # cosine similarity of the query to the message, in [-1, 1]
    memory_ids: tuple[str, ...]  # the memories that cite this message as a source
    stored_verbatim: bool = False  # one of them holds its content as is (a raw add)
    scope_ids: tuple[str | None, str | None, str | None] = (None, None, None)  # user, agent, run


@dataclass(frozen=True)
class StoredMessage:
    """A message with its scope ids and the memories extracted from it."""

    record: MessageRecord
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    memory_ids: tuple[str, ...]

    def to_item(self) -> dict[str, Any]:
        """The message as `get` and `search` return it (see `message_item`)."""
        scope = (self.user_id, self.agent_id, self.run_id)
        return message_item(self.record, self.memory_ids, scope)


def message_item(
    record: MessageRecord,
    memory_ids: Sequence[str],
    scope_ids: tuple[str | None, str | None, str | None],
) -> dict[str, Any]:
    """A message as a result item: `"kind": "message"`, `memory` as it was embedded ("Name:
    content" when it has a name), its fields, its scope ids (those it has) and the ids of the
    memories extracted from it."""
    item: dict[str, Any] = {
        "kind": "message",
        "memory": message_embedding_text(record.name, record.content),
    }
    item |= record.to_dict()
    for key, value in zip(("user_id", "agent_id", "run_id"), scope_ids, strict=True):
        if value is not None:
            item[key] = value
    return item | {"memory_ids": list(memory_ids)}


class MessageIndex:
    """The stored messages: their index rows, their search, their deletion."""

    def __init__(self, db: Database, vector_cache: VectorCache | None) -> None:
        self.db = db
        self.message_vector_cache = vector_cache

    def find_message(self, message_id: str) -> StoredMessage | None:
        columns = ", ".join(f"msg.{c.strip()}" for c in MessageRecord.COLUMNS.split(","))
        row = self.db.query_one(
            f"SELECT {columns}, msg.user_id, msg.agent_id, msg.run_id FROM messages msg "
            "WHERE msg.id = ?",
            (message_id,),
        )
        if row is None:
            return None
        width = len(MessageRecord.COLUMNS.split(","))
        record = MessageRecord(*row[:width])
        cited = self.db.query(
            "SELECT m.id FROM provenance p JOIN memories m ON m.rowid = p.memory_rowid "
            "WHERE p.message_seq = ? ORDER BY m.rowid",
            (record.seq,),
        )
        user_id, agent_id, run_id = row[width:]
        return StoredMessage(record, user_id, agent_id, run_id, tuple(r[0] for r in cited))

    def delete_message(self, message_id: str) -> StoredMessage | None:
        """Remove a message, its vector and its provenance links in one transaction; the memories
        extracted from it stay (they no longer cite it). None when no such message exists."""
        with self.db.atomic():
            found = self.find_message(message_id)
            if found is None:
                return None
            seq = found.record.seq
            self.delete_message_index([seq])
            self.db.execute("DELETE FROM provenance WHERE message_seq = ?", (seq,))
            self.db.execute("DELETE FROM messages WHERE seq = ?", (seq,))
        return found

    def insert_message_vector(self, seq: int, vector: np.ndarray) -> None:
        """The message's vector, or a link to the vector of a memory made from it that holds the
        same bytes (a raw add: one copy, not two). Call inside the transaction that inserts the
        message, after the memories made from it."""
        blob = vector_blob(vector)
        same = self.db.query_one(
            "SELECT p.memory_rowid FROM provenance p JOIN memory_vectors v "
            "ON v.rowid = p.memory_rowid WHERE p.message_seq = ? AND v.embedding = ? "
            "ORDER BY p.memory_rowid LIMIT 1",
            (seq, blob),
        )
        if same is not None:
            self.db.execute(
                "INSERT INTO message_vector_links (message_seq, memory_rowid) VALUES (?, ?)",
                (seq, same[0]),
            )
        else:
            self.db.execute(
                "INSERT INTO message_vectors (rowid, embedding) VALUES (?, ?)", (seq, blob)
            )

    def insert_message_terms(self, seq: int, user_id: str | None, terms: Sequence[str]) -> None:
        """Call inside the transaction that inserts the message."""
        keyword_index.index_terms(
            self.db, seq, keyword_index.partition_of(user_id), terms, MESSAGE_KEYWORDS
        )

    def delete_message_index(self, seqs: Sequence[int]) -> None:
        """The messages' vectors (own or linked) and keyword rows."""
        rows = [(s,) for s in seqs]
        self.db.executemany("DELETE FROM message_vector_links WHERE message_seq = ?", rows)
        self.db.executemany("DELETE FROM message_vectors WHERE rowid = ?", rows)
        for seq in seqs:
            keyword_index.unindex(self.db, seq, MESSAGE_KEYWORDS)

    # -- filling a file written before the index existed --------------------------------------

    def message_index_complete(self) -> bool:
        row = self.db.query_one("SELECT value FROM meta WHERE key = ?", (INDEX_STATE_KEY,))
        return row is None or row[0] == "complete"

    def pending_message_batches(
        self, batch_size: int = 256
    ) -> Iterator[list[tuple[int, str | None, str]]]:
        """(seq, user_id, text to index) of indexable messages without a vector or keyword
        row, in batches."""
        after = 0
        while True:
            rows = self.db.query(
                "SELECT seq, user_id, role, name, content FROM messages WHERE seq > ? "
                "ORDER BY seq LIMIT ?",
                (after, batch_size),
            )
            if not rows:
                return
            after = int(rows[-1][0])
            batch = [
                (int(seq), user, message_embedding_text(name, content))
                for seq, user, role, name, content in rows
                if is_indexed_message(role, content) and not self._message_indexed(int(seq))
            ]
            if batch:
                yield batch

    def unindexed_message_rows(
        self, message_ids: Sequence[str]
    ) -> list[tuple[MessageRecord, str | None]]:
        """(record, user_id) of those of the messages that exist and are to be indexed (not
        system or empty) but lack their vector or keyword row, by seq."""
        found = []
        ids = list(dict.fromkeys(message_ids))
        for start in range(0, len(ids), ID_BATCH):
            chunk = ids[start : start + ID_BATCH]
            marks = ", ".join("?" for _ in chunk)
            found += self.db.query(
                f"SELECT {MessageRecord.COLUMNS}, user_id FROM messages WHERE id IN ({marks})",
                chunk,
            )
        width = len(MessageRecord.COLUMNS.split(","))
        pairs = [(MessageRecord(*row[:width]), row[width]) for row in found]
        pairs.sort(key=lambda pair: pair[0].seq)
        return [
            (record, user_id)
            for record, user_id in pairs
            if is_indexed_message(record.role, record.content)
            and not self._message_indexed(record.seq)
        ]

    def _message_indexed(self, seq: int) -> bool:
        has_vector = self.db.query_one(
            f"SELECT 1 FROM {MESSAGE_VECTORS.values} WHERE rowid = ?", (seq,)
        )
        has_terms = self.db.query_one(
            f"SELECT 1 FROM {MESSAGE_KEYWORDS.docs} WHERE {MESSAGE_KEYWORDS.key} = ?", (seq,)
        )
        return has_vector is not None and has_terms is not None

    def index_messages(
        self,
        rows: Sequence[tuple[int, str | None]],
        vectors: Sequence[np.ndarray] | np.ndarray,
        terms: Sequence[Sequence[str]],
    ) -> None:
        """(Re)write the vector and keyword rows of existing messages, in one transaction."""
        with self.db.atomic():
            for (seq, user_id), vector, words in zip(rows, vectors, terms, strict=True):
                exists = self.db.query_one("SELECT 1 FROM messages WHERE seq = ?", (seq,))
                if exists is not None:
                    self.delete_message_index([seq])
                    self.insert_message_vector(seq, vector)
                    self.insert_message_terms(seq, user_id, words)

    def mark_message_index(self, state: str) -> None:
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (INDEX_STATE_KEY, state),
            )

    # -- search -------------------------------------------------------------------------------

    def message_candidates(
        self, vector: np.ndarray, scope: Scope, *, k: int, as_of: datetime | None = None
    ) -> dict[int, float]:
        """Exact top-k messages of the scope by cosine: seq -> similarity (see
        `filtered_knn`; agent and run ids are the condition, and `as_of` the date)."""
        where, params = _message_condition(scope, "", as_of)
        return filtered_knn(
            self.db, MESSAGE_VECTORS, vector, k=k, user_id=scope.user_id,
            passing=lambda seqs: self._messages_in_scope(seqs, where, params),
            allowed_sql=f"SELECT seq FROM messages WHERE {where}", allowed_params=params,
            cache=self.message_vector_cache,
        )  # fmt: skip

    def message_keyword_stats(self, terms: Sequence[str], scope: Scope) -> keyword_index.QueryStats:
        """The messages' corpus statistics for the query terms: the user's, or all users' when
        the scope names none."""
        return keyword_index.query_stats(
            self.db, terms, keyword_index.searched_partition(scope.user_id), t=MESSAGE_KEYWORDS
        )

    def message_keyword_candidates(
        self,
        stats: keyword_index.QueryStats,
        scope: Scope,
        *,
        limit: int,
        also_seqs: Sequence[int] = (),
        as_of: datetime | None = None,
    ) -> dict[int, float]:
        """BM25 of the scope's messages (those recorded by `as_of`): the best `limit` plus those
        of `also_seqs` that hold a query term (bm25.bm25_scores)."""
        where, params = _message_condition(scope, "m", as_of)
        return bm25.bm25_scores(
            self.db, stats, keyword_index.searched_partition(scope.user_id), where, params,
            limit=limit, also_rowids=also_seqs, t=MESSAGE_KEYWORDS,
        )  # fmt: skip

    def message_similarities(self, vector: np.ndarray, seqs: Sequence[int]) -> dict[int, float]:
        """Cosine similarity of the query to the given messages' vectors."""
        return point_similarities(self.db, MESSAGE_VECTORS.values, vector, seqs)

    def _messages_in_scope(self, seqs: Sequence[int], where: str, params: list[str]) -> set[int]:
        if not seqs:
            return set()
        marks = ", ".join("?" for _ in seqs)
        rows = self.db.query(
            f"SELECT seq FROM messages WHERE seq IN ({marks}) AND {where}", (*seqs, *params)
        )
        return {int(row[0]) for row in rows}

    def message_replies(self, seqs: Sequence[int]) -> dict[int, int]:
        """The reply to each of the given messages: the next indexed (non-system) message of
        the same scope, by seq; messages with none are left out."""
        if not seqs:
            return {}
        marks = ", ".join("?" for _ in seqs)
        rows = self.db.query(
            "SELECT m.seq, (SELECT r.seq FROM messages r WHERE r.scope = m.scope "
            "AND r.seq > m.seq AND r.role != 'system' ORDER BY r.seq LIMIT 1) "
            f"FROM messages m WHERE m.seq IN ({marks})",
            list(seqs),
        )
        return {int(seq): int(reply) for seq, reply in rows if reply is not None}

    def message_hits(self, scored: dict[int, float]) -> list[MessageHit]:
        """The messages with their scores and citing memories, best first (ties: newest)."""
        if not scored:
            return []
        seqs = list(scored)
        marks = ", ".join("?" for _ in seqs)
        rows = self.db.query(
            f"SELECT {MessageRecord.COLUMNS}, user_id, agent_id, run_id FROM messages "
            f"WHERE seq IN ({marks})",
            seqs,
        )
        width = len(MessageRecord.COLUMNS.split(","))
        records = {int(row[0]): MessageRecord(*row[:width]) for row in rows}
        scopes = {int(row[0]): tuple(row[width:]) for row in rows}
        cited: dict[int, list[str]] = {}
        verbatim: set[int] = set()
        for seq, memory_id, text in self.db.query(
            "SELECT p.message_seq, m.id, m.text FROM provenance p JOIN memories m "
            f"ON m.rowid = p.memory_rowid WHERE p.message_seq IN ({marks}) ORDER BY m.rowid",
            seqs,
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


def _message_condition(scope: Scope, alias: str, as_of: datetime | None) -> tuple[str, list[str]]:
    """The scope's messages, and when `as_of` is given only those said by then."""
    where, params = scope_match(scope, alias)
    if as_of is None:
        return where, params
    prefix = f"{alias}." if alias else ""
    recorded = f"COALESCE({prefix}observed_at, {prefix}created_at) <= ?"
    return " AND ".join(part for part in (where, recorded) if part), [*params, iso(as_of)]
