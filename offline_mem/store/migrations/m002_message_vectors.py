"""Migration 002_message_vectors:
every non-system message gets a vector, so the turns behind the facts stay retrievable.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # Every non-system message is embedded, so the text behind the facts stays retrievable
    # (`Memory.search_messages`). rowid = messages.seq; partitioned by user_id like memories.
    db.execute(
        "CREATE VIRTUAL TABLE message_vectors USING vec0("
        "user_id TEXT PARTITION KEY, "
        f"embedding FLOAT[{int(ctx.dimension)}] distance_metric=cosine)"
    )
    # A file that already holds messages gets their vectors from `Memory` when it opens
    # (migrations run no model); until then the flag says the index is incomplete.
    has_messages = db.query_one("SELECT 1 FROM messages LIMIT 1") is not None
    db.execute(
        "INSERT INTO meta (key, value) VALUES ('message_vectors', ?)",
        ("pending" if has_messages else "complete",),
    )
