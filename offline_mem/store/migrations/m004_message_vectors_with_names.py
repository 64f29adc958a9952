"""Migration 004_message_vectors_with_names:
message vectors made from "<name>: <content>" (rebuilt on open).
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # Message vectors are now made from "<name>: <content>" (messages.message_embedding_text).
    # Vectors written before are dropped and rebuilt by `Memory` on open, like migration 002's.
    has_messages = db.query_one("SELECT 1 FROM messages LIMIT 1") is not None
    if has_messages:
        db.execute("DELETE FROM message_vectors")
    db.execute(
        "INSERT INTO meta (key, value) VALUES ('message_vectors', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        ("pending" if has_messages else "complete",),
    )
