"""Migration 011_validity:
when each fact was true (valid_from, valid_to) and when each change happened.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # When each fact was true (validity.py): from the date its text names or its message's date,
    # to the date of the message that superseded it; and when each change happened beside when
    # it was recorded. A file from before gets its messages' dates (its texts are not re-read).
    db.execute("ALTER TABLE memories ADD COLUMN valid_from TEXT")
    db.execute("ALTER TABLE memories ADD COLUMN valid_to TEXT")
    # History gains happened_at and the MERGE event (a fact said again in other words): SQLite
    # cannot change a CHECK, so the table is made anew and its rows copied, rowids kept.
    db.execute(
        """CREATE TABLE history_011 (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            memory_id TEXT NOT NULL,
            old_memory TEXT,
            new_memory TEXT,
            event TEXT NOT NULL
                CHECK (event IN ('ADD', 'UPDATE', 'DELETE', 'SUPERSEDE', 'MERGE')),
            related_memory_id TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT,
            is_deleted INTEGER NOT NULL DEFAULT 0,
            actor_id TEXT,
            role TEXT,
            written_by TEXT,
            happened_at TEXT
        )"""
    )
    db.execute(
        "INSERT INTO history_011 (rowid, id, memory_id, old_memory, new_memory, event, "
        "related_memory_id, created_at, updated_at, is_deleted, actor_id, role, written_by) "
        "SELECT rowid, id, memory_id, old_memory, new_memory, event, related_memory_id, "
        "created_at, updated_at, is_deleted, actor_id, role, written_by FROM history"
    )
    db.execute("DROP TABLE history")
    db.execute("ALTER TABLE history_011 RENAME TO history")
    db.execute("CREATE INDEX history_memory ON history(memory_id, rowid)")
    fill_validity(db)


def fill_validity(db: Database) -> None:
    """Give the rows that lack them (an older file or export) their validity and change dates:
    a fact is valid from its message's date (else when it was stored) until its successor's."""
    db.execute(
        "UPDATE memories SET valid_from = COALESCE(observed_at, created_at) "
        "WHERE valid_from IS NULL"
    )
    db.execute(
        "UPDATE memories SET valid_to = (SELECT max(memories.valid_from, "
        "COALESCE(n.observed_at, n.created_at)) FROM memories n "
        "WHERE n.id = memories.superseded_by) WHERE state = 'superseded' AND valid_to IS NULL"
    )
    db.execute(  # a successor deleted since: the fact stopped when it was superseded
        "UPDATE memories SET valid_to = max(valid_from, COALESCE(updated_at, created_at)) "
        "WHERE state = 'superseded' AND valid_to IS NULL"
    )
    db.execute(
        "UPDATE history SET happened_at = COALESCE((SELECT m.observed_at FROM memories m "
        "WHERE m.id = history.memory_id AND history.event = 'ADD'), (SELECT n.observed_at "
        "FROM memories n WHERE n.id = history.related_memory_id AND history.event = 'SUPERSEDE'),"
        " created_at) WHERE happened_at IS NULL"
    )
