"""Migration 010_history_writer: which application made each change."""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # Which application made each change (offline_mem/writer.py): NULL where none was named.
    db.execute("ALTER TABLE history ADD COLUMN written_by TEXT")
