"""Migration 012_shared_message_vectors:
a raw memory's message links to the memory's vector instead of a copy.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # A raw memory and its source message have the same text, so the same vector: the message
    # keeps a link to the memory's vector row instead of a second copy (1.6 KB of the ~5.6 KB a
    # raw memory cost; docs/storage.md). `message_vector_values` is every message's vector,
    # own or linked: readers use it, writers the two tables (messages.py).
    db.execute(
        """CREATE TABLE message_vector_links (
            message_seq INTEGER PRIMARY KEY REFERENCES messages(seq),
            memory_rowid INTEGER NOT NULL REFERENCES memory_vectors(rowid)
        )"""
    )
    db.execute("CREATE INDEX message_vector_links_memory ON message_vector_links(memory_rowid)")
    db.execute(
        "CREATE VIEW message_vector_values (rowid, embedding) AS "
        "SELECT rowid, embedding FROM message_vectors UNION ALL "
        "SELECT l.message_seq, v.embedding FROM message_vector_links l "
        "JOIN memory_vectors v ON v.rowid = l.memory_rowid"
    )
    # A memory vector that a message shares is copied to the message before it changes or
    # goes, whichever write path does it: a link never names a vector it does not hold.
    unshare = (
        "INSERT INTO message_vectors (rowid, embedding) SELECT message_seq, OLD.embedding "
        "FROM message_vector_links WHERE memory_rowid = OLD.rowid; "
        "DELETE FROM message_vector_links WHERE memory_rowid = OLD.rowid;"
    )
    db.execute(
        "CREATE TRIGGER memory_vectors_unshare_delete BEFORE DELETE ON memory_vectors "
        f"BEGIN {unshare} END"
    )
    db.execute(
        "CREATE TRIGGER memory_vectors_unshare_update BEFORE UPDATE OF embedding ON memory_vectors "
        f"BEGIN {unshare} END"
    )
    # A link added or removed changes the message's vector as far as a cache knows.
    log = "INSERT INTO message_vector_changes (partition, message_seq) VALUES"
    partition = "(SELECT coalesce(user_id, '') FROM messages WHERE seq = {row}.message_seq)"
    db.execute(
        "CREATE TRIGGER message_vector_links_insert AFTER INSERT ON message_vector_links BEGIN "
        f"{log} ({partition.format(row='NEW')}, NEW.message_seq); END"
    )
    db.execute(
        "CREATE TRIGGER message_vector_links_delete AFTER DELETE ON message_vector_links BEGIN "
        f"{log} ({partition.format(row='OLD')}, OLD.message_seq); END"
    )
    _share_message_vectors(db)


def _share_message_vectors(db: Database) -> None:
    """Replace the own vector of each message that a memory made from it holds byte for byte by
    a link to that memory's row (new writes link at once: messages.py)."""
    db.execute(
        "INSERT INTO message_vector_links (message_seq, memory_rowid) "
        "SELECT v.rowid, min(mv.rowid) FROM message_vectors v "
        "JOIN provenance p ON p.message_seq = v.rowid "
        "JOIN memory_vectors mv ON mv.rowid = p.memory_rowid AND mv.embedding = v.embedding "
        "GROUP BY v.rowid"
    )
    db.execute(
        "DELETE FROM message_vectors WHERE rowid IN (SELECT message_seq FROM message_vector_links)"
    )
