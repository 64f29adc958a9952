"""Migration 008_vectors_by_row:
vectors in plain tables of one BLOB per row instead of vec0 partitions per user.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # Vectors move from vec0 tables partitioned by user_id, which preallocate a 1,024-vector
    # chunk (1.6 MB) per user and table, to plain tables of one BLOB per row: a scope costs
    # nothing beyond its rows (docs/design/vector-storage.md). The scope comes from the owning
    # row (memories / messages) by rowid; exact KNN is sqlite-vec's vec_distance_cosine over the
    # rows a filter selects, or the in-memory cache for a large partition (vector_cache.py).
    for table in ("memory_vectors", "message_vectors"):
        db.execute(
            f"CREATE TABLE {table}_rows ("
            "rowid INTEGER PRIMARY KEY, "
            "embedding BLOB NOT NULL CHECK (length(embedding) = "
            f"{4 * int(ctx.dimension)}))"
        )
        db.execute(
            f"INSERT INTO {table}_rows (rowid, embedding) SELECT rowid, embedding FROM {table}"
        )
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {table}_rows RENAME TO {table}")
    # A user's messages without the vec0 partition: the index that finds them.
    db.execute("CREATE INDEX messages_user ON messages(user_id, seq)")
    # Message vectors are cached like the memories' (vector_cache.py); their change log is
    # written by triggers on the vector table, since a message's vector can be rewritten while
    # its row stays (the index fill of older files). The partition is read from the message,
    # which exists whenever its vector is written or deleted (both happen before the message's
    # own delete); NULL would mean unknown, and a cache then checks the row in every partition.
    db.execute(
        """CREATE TABLE message_vector_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT,
            message_seq INTEGER NOT NULL
        )"""
    )
    db.execute(
        "CREATE INDEX message_vector_changes_partition ON message_vector_changes(partition, seq)"
    )
    log = "INSERT INTO message_vector_changes (partition, message_seq) VALUES"
    partition = "(SELECT coalesce(user_id, '') FROM messages WHERE seq = {row}.rowid)"
    db.execute(
        "CREATE TRIGGER message_vectors_insert AFTER INSERT ON message_vectors BEGIN "
        f"{log} ({partition.format(row='NEW')}, NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER message_vectors_delete AFTER DELETE ON message_vectors BEGIN "
        f"{log} ({partition.format(row='OLD')}, OLD.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER message_vectors_update AFTER UPDATE ON message_vectors BEGIN "
        f"{log} ({partition.format(row='OLD')}, OLD.rowid); "
        f"{log} ({partition.format(row='NEW')}, NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER message_vector_changes_prune AFTER INSERT ON message_vector_changes "
        "BEGIN DELETE FROM message_vector_changes WHERE seq <= NEW.seq - 50000; END"
    )
