"""Migration 009_message_hashes:
a message's content gets a digest, as a memory's text has, for `verify`.
"""

from __future__ import annotations

from ...values import content_hash
from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # A message's content gets the digest a memory's text has, so `verify` can tell a changed
    # byte of a stored message (SQLite checks a file's structure, never its values).
    db.execute("ALTER TABLE messages ADD COLUMN hash TEXT")
    db.executemany(
        "UPDATE messages SET hash = ? WHERE seq = ?",
        [
            (content_hash(content), seq)
            for seq, content in db.query("SELECT seq, content FROM messages")
        ],
    )
