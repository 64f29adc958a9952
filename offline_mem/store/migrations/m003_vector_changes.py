"""Migration 003_vector_changes:
a log of changed vectors, so any process's vector cache catches up by re-reading those rows.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # A log of which memories' vectors changed, written by triggers in the same transaction as
    # the change, so the in-memory vector cache (vector_cache.py) of this or any other process
    # can catch up by re-reading those rows alone. Every write to memory_vectors goes with an
    # insert, a text update or a delete of the memory (vec0 tables take no triggers).
    # Only the newest 50,000 entries are kept; a cache older than that reloads.
    db.execute(
        """CREATE TABLE vector_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL
        )"""
    )
    db.execute("CREATE INDEX vector_changes_partition ON vector_changes(partition, seq)")
    log = "INSERT INTO vector_changes (partition, memory_rowid) VALUES"
    db.execute(
        "CREATE TRIGGER memories_vector_insert AFTER INSERT ON memories BEGIN "
        f"{log} (coalesce(NEW.user_id, ''), NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER memories_vector_delete AFTER DELETE ON memories BEGIN "
        f"{log} (coalesce(OLD.user_id, ''), OLD.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER memories_vector_update AFTER UPDATE OF text, user_id ON memories BEGIN "
        f"{log} (coalesce(OLD.user_id, ''), OLD.rowid); "
        f"{log} (coalesce(NEW.user_id, ''), NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER vector_changes_prune AFTER INSERT ON vector_changes BEGIN "
        "DELETE FROM vector_changes WHERE seq <= NEW.seq - 50000; END"
    )
