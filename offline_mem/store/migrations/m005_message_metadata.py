"""Migration 005_message_metadata:
what a message carried besides its text (image references, tool calls).
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # What a message carried besides its text (image references, tool calls), as JSON; NULL
    # when nothing (validation.normalize_messages).
    db.execute("ALTER TABLE messages ADD COLUMN metadata TEXT")
