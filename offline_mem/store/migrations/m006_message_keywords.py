"""Migration 006_message_keywords:
a keyword index of the messages, with its own corpus statistics.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # A keyword index of the messages (keyword_index.MESSAGE_KEYWORDS), so `search` ranks a turn
    # by its words as well as its vector. Its own corpus statistics: turns are longer than facts.
    db.execute(
        """CREATE TABLE message_keyword_docs (
            message_seq INTEGER PRIMARY KEY REFERENCES messages(seq),
            partition TEXT NOT NULL,
            length INTEGER NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE message_keyword_postings (
            partition TEXT NOT NULL,
            term TEXT NOT NULL,
            message_seq INTEGER NOT NULL REFERENCES message_keyword_docs(message_seq),
            tf INTEGER NOT NULL,
            PRIMARY KEY (partition, term, message_seq)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX message_keyword_postings_seq ON message_keyword_postings(message_seq)")
    db.execute(
        """CREATE TABLE message_keyword_terms (
            partition TEXT NOT NULL,
            term TEXT NOT NULL,
            df INTEGER NOT NULL,
            PRIMARY KEY (partition, term)
        ) WITHOUT ROWID"""
    )
    db.execute(
        """CREATE TABLE message_keyword_partitions (
            partition TEXT PRIMARY KEY,
            docs INTEGER NOT NULL,
            total_length INTEGER NOT NULL
        )"""
    )
    # Messages already in the file get their keyword rows from `Memory` when it opens, with
    # the vectors: the message index is pending until every message has both.
    if db.query_one("SELECT 1 FROM messages LIMIT 1") is not None:
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('message_vectors', 'pending') "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        )
