"""Vectors: one per memory and per indexed message (but a message of a job not done yet),
none orphaned, each finite and of unit length; a message shares only the vector of a raw memory
made from it."""

from __future__ import annotations

import json
from collections.abc import Iterable

import numpy as np

from ..db import Database
from ..messages import is_indexed_message
from .report import Checker

# How far from 1 a stored vector's length may be. The embedders normalise in float32, which
# leaves it within ~1e-7; a flipped bit in one of its values moves it further (1e-3 let a value
# changed by 0.03 pass as sound). A flipped sign bit keeps the length and is not seen.
UNIT_TOLERANCE = 1e-5


def memory_partitions(c: Checker) -> dict[int, tuple[str, str]]:
    """rowid -> (id, partition) of every memory row."""
    return {
        rowid: (mid, user or "")
        for rowid, mid, user in c.db.query("SELECT rowid, id, user_id FROM memories")
    }


def awaiting_index(c: Checker) -> set[str]:
    """The ids of the messages of jobs not done (queued, running or failed): an async add's
    messages are indexed just after it returns, and always before its job runs
    (memory_parts/message_indexing.py), so until then, or after a crash between the two, they
    may lack their vector and keyword rows. SQL both stores accept."""
    if isinstance(c.db, Database) and not _has_jobs(c.db):
        return set()  # a file from before the job queue (migration 007)
    ids: set[str] = set()
    for (request,) in c.db.query("SELECT request FROM jobs WHERE state <> 'done'"):
        try:
            ids.update(str(m["id"]) for m in json.loads(request)["messages"])
        except (TypeError, ValueError, KeyError):
            continue  # a damaged request: its messages are held to the rule of any other
    return ids


def _has_jobs(db: Database) -> bool:
    found = db.query_one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'")
    return found is not None


def vectors(c: Checker) -> None:
    memories = memory_partitions(c)
    vectors = {
        int(rowid): blob
        for rowid, blob in c.db.query("SELECT rowid, embedding FROM memory_vectors")
    }
    details = [
        f"memory {mid} has no vector row (memory_vectors)"
        for rowid, (mid, _) in memories.items()
        if rowid not in vectors
    ]
    details += [
        f"vector row {rowid} belongs to no memory (orphan in memory_vectors)"
        for rowid in vectors
        if rowid not in memories
    ]
    for rowid, blob in vectors.items():
        if rowid not in memories:
            continue
        mid, _ = memories[rowid]
        norm = float(np.linalg.norm(np.frombuffer(bytes(blob), dtype=np.float32)))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            details.append(f"memory {mid}'s vector has length {norm:.4f}, not 1")
    c.problems("vectors", details)


def message_vectors(c: Checker) -> None:
    """Each indexed message has one unit vector in its user's partition (once the index is
    complete; a message of a job not done may have none yet), and no vector belongs to a missing
    or system message."""
    state = c.db.query_one("SELECT value FROM meta WHERE key = 'message_vectors'")
    complete = state is None or state[0] == "complete"
    messages = {
        int(seq): (mid, user or "", is_indexed_message(role, content))
        for seq, mid, user, role, content in c.db.query(
            "SELECT seq, id, user_id, role, content FROM messages"
        )
    }
    details = []
    seen = set()
    for seq, blob in c.db.query(f"SELECT rowid, embedding FROM {_message_vector_values(c)}"):
        seq = int(seq)
        if seq in seen:
            details.append(f"message vector row {seq} is both its own and linked to a memory's")
            continue
        seen.add(seq)
        if seq not in messages:
            details.append(f"message vector row {seq} belongs to no message (orphan)")
            continue
        mid, _, indexed = messages[seq]
        if not indexed:
            details.append(f"message {mid} is a system or empty message but has a vector")
        norm = float(np.linalg.norm(np.frombuffer(bytes(blob), dtype=np.float32)))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            details.append(f"message {mid}'s vector has length {norm:.4f}, not 1")
    if complete:
        awaiting = awaiting_index(c)
        details += [
            f"message {mid} has no vector row (message_vectors)"
            for seq, (mid, _, indexed) in messages.items()
            if indexed and seq not in seen and mid not in awaiting
        ]
    details += _unsourced_links(c)
    c.problems("message vectors", details)


def _message_vector_values(c: Checker) -> str:
    """Every message's vector, own or linked to its raw memory's (migration 012), or the own
    ones alone in a file from before it."""
    found = c.db.query_one(
        "SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = 'message_vector_values'"
    )
    return "message_vectors" if found is None else "message_vector_values"


def _unsourced_links(c: Checker) -> list[str]:
    """A message shares the vector of a memory made from it (provenance), no other."""
    if _message_vector_values(c) == "message_vectors":
        return []
    return [
        f"message vector row {seq} is linked to memory row {rowid}, not made from it"
        for seq, rowid in c.db.query(
            "SELECT l.message_seq, l.memory_rowid FROM message_vector_links l WHERE NOT EXISTS "
            "(SELECT 1 FROM provenance p WHERE p.message_seq = l.message_seq "
            "AND p.memory_rowid = l.memory_rowid)"
        )
    ]


def vector_value_problems(kind: str, rows: Iterable[tuple[int, bytes]]) -> list[str]:
    """Vectors (rowid, float32 blob) that hold a NaN or an infinity or are not of unit length:
    either makes every search of their scope fail or rank at random."""
    details = []
    for rowid, blob in rows:
        vector = np.frombuffer(bytes(blob), dtype=np.float32).astype(np.float64)
        if not np.isfinite(vector).all():
            details.append(f"{kind} vector row {rowid} holds a NaN or an infinity")
            continue
        norm = float(np.linalg.norm(vector))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            details.append(f"{kind} vector row {rowid} has length {norm:.4f}, not 1")
    return details


def _vector_rows(c: Checker, table: str) -> list[tuple[int, bytes]]:
    """(rowid, blob) of every vector of a vector table: the one place that reads them here."""
    return [(int(r), bytes(b)) for r, b in c.db.query(f"SELECT rowid, embedding FROM {table}")]


def vector_values(c: Checker) -> None:
    details = vector_value_problems("memory", _vector_rows(c, "memory_vectors"))
    details += vector_value_problems("message", _vector_rows(c, "message_vectors"))
    c.problems("vector values", details)
