"""The message index: every non-system message's vector, so the text behind the facts stays
retrievable (`Memory.search_messages`).

A mixin of `Store` (it uses `self.db`). Vectors live in `message_vectors` (rowid = messages.seq,
partitioned by user_id as the memories' are) and are written in the same transaction as their
message. Files created before the index existed are filled by `Memory` when it opens
(`pending_message_batches` / `index_message_vectors`), tracked by meta `message_vectors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import keyword_index
from .db import Database
from .records import MessageRecord
from .store_search import filtered_knn, scope_match, vector_blob
from .validation import Scope

INDEX_STATE_KEY = "message_vectors"  # meta key: "complete" or "pending"


def is_indexed_message(role: str, content: str) -> bool:
    """System messages are instructions, not conversation: they are kept but not indexed."""
    return role != "system" and bool(content.strip())


def message_embedding_text(name: str | None, content: str) -> str:
    """What a message's vector is made from: with its speaker's name when it has one, so "I moved
    to Aarhus" said by Rui is near "Where does Rui live?" and far from what Alex said."""
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
    db: Database

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
            self.delete_message_vectors([seq])
            self.db.execute("DELETE FROM provenance WHERE message_seq = ?", (seq,))
            self.db.execute("DELETE FROM messages WHERE seq = ?", (seq,))
        return found

    def insert_message_vector(self, seq: int, user_id: str | None, vector: np.ndarray) -> None:
        """Call inside the transaction that inserts the message."""
        self.db.execute(
            "INSERT INTO message_vectors (rowid, user_id, embedding) VALUES (?, ?, ?)",
            (seq, keyword_index.partition_of(user_id), vector_blob(vector)),
        )

    def delete_message_vectors(self, seqs: Sequence[int]) -> None:
        """Point deletes: `rowid IN (...)` on a vec0 table scans every partition."""
        self.db.executemany("DELETE FROM message_vectors WHERE rowid = ?", [(s,) for s in seqs])

    # -- filling a file written before the index existed --------------------------------------

    def message_index_complete(self) -> bool:
        row = self.db.query_one("SELECT value FROM meta WHERE key = ?", (INDEX_STATE_KEY,))
        return row is None or row[0] == "complete"

    def pending_message_batches(
        self, batch_size: int = 256
    ) -> Iterator[list[tuple[int, str | None, str]]]:
        """(seq, user_id, text to embed) of indexable messages without a vector, in batches."""
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
                if is_indexed_message(role, content)
                and self.db.query_one("SELECT 1 FROM message_vectors WHERE rowid = ?", (seq,))
                is None
            ]
            if batch:
                yield batch

    def index_message_vectors(
        self, rows: Sequence[tuple[int, str | None]], vectors: Sequence[np.ndarray] | np.ndarray
    ) -> None:
        """Add vectors for existing messages, in one transaction."""
        with self.db.atomic():
            for (seq, user_id), vector in zip(rows, vectors, strict=True):
                exists = self.db.query_one("SELECT 1 FROM messages WHERE seq = ?", (seq,))
                if exists is not None:
                    self.insert_message_vector(seq, user_id, vector)

    def mark_message_index(self, state: str) -> None:
        with self.db.atomic():
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (INDEX_STATE_KEY, state),
            )

    # -- search -------------------------------------------------------------------------------

    def message_candidates(self, vector: np.ndarray, scope: Scope, *, k: int) -> dict[int, float]:
        """Exact top-k messages of the scope by cosine: seq -> similarity (see
        `filtered_knn`; agent and run ids are the condition)."""
        where, params = scope_match(scope, "")
        return filtered_knn(
            self.db, "message_vectors", vector, k=k, user_id=scope.user_id,
            passing=lambda seqs: self._messages_in_scope(seqs, where, params),
            allowed_sql=f"SELECT seq FROM messages WHERE {where}", allowed_params=params,
        )  # fmt: skip

    def _messages_in_scope(self, seqs: Sequence[int], where: str, params: list[str]) -> set[int]:
        if not seqs:
            return set()
        marks = ", ".join("?" for _ in seqs)
        rows = self.db.query(
            f"SELECT seq FROM messages WHERE seq IN ({marks}) AND {where}", (*seqs, *params)
        )
        return {int(row[0]) for row in rows}

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
