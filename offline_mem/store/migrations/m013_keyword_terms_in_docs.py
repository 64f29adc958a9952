"""Migration 013_keyword_terms_in_docs:
a keyword doc lists its terms; the index of postings by row goes.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    # A doc's row lists its distinct terms (JSON), so that deleting it finds its postings by
    # primary key; the index of postings by row, which only deletes read, goes: ~200 bytes a
    # memory and as much a message (docs/storage.md).
    for docs, postings, key, index in (
        ("keyword_docs", "keyword_postings", "memory_rowid", "keyword_postings_memory"),
        ("message_keyword_docs", "message_keyword_postings", "message_seq",
         "message_keyword_postings_seq"),
    ):  # fmt: skip
        db.execute(f"ALTER TABLE {docs} ADD COLUMN terms TEXT NOT NULL DEFAULT '[]'")
        db.execute(
            f"UPDATE {docs} SET terms = (SELECT json_group_array(p.term) FROM {postings} p "
            f"WHERE p.{key} = {docs}.{key})"
        )
        db.execute(f"DROP INDEX {index}")
