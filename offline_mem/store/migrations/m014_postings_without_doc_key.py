"""Migration 014_postings_without_doc_key:
keyword postings no longer declare a foreign key to their document.

With foreign keys on, deleting a keyword document makes SQLite look for postings that still
point at it. Once 013 dropped the index of postings by row, that look was a scan of every
posting in the file: an update or delete of one memory took 1.2 s of CPU in a file of 100,000
memories (2 ms at 1,000), and `delete_all` of a scope as long per memory. The writes delete a
document's postings (found by its term list) before the document, and `verify` reports any
posting without its document, so the key's check is kept without its cost.

SQLite cannot drop a column's constraint: each postings table is copied into a new one without
it, inside the opening transaction like every migration.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext

TABLES = (
    # (postings table, its document key, the indexes it keeps)
    ("keyword_postings", "memory_rowid", ("CREATE INDEX keyword_postings_term ON {t}(term)",)),
    ("message_keyword_postings", "message_seq", ()),
)


def apply(db: Database, ctx: MigrationContext) -> None:
    for table, key, indexes in TABLES:
        db.execute(
            f"""CREATE TABLE {table}_new (
                partition TEXT NOT NULL,
                term TEXT NOT NULL,
                {key} INTEGER NOT NULL,
                tf INTEGER NOT NULL,
                PRIMARY KEY (partition, term, {key})
            ) WITHOUT ROWID"""
        )
        db.execute(
            f"INSERT INTO {table}_new (partition, term, {key}, tf) "
            f"SELECT partition, term, {key}, tf FROM {table}"
        )
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
        for index in indexes:
            db.execute(index.format(t=table))
