"""Named, append-only schema migrations, one module each (`m<NNN>_<name>.py`, its `apply`).
Never edit or reorder one that has shipped: add a new module and name it in `MIGRATIONS`.

Each migration runs once, inside the opening transaction, and is recorded in `migrations`.
`MigrationContext` carries what DDL needs to know (the embedder's dimension for the vector table).
"""

from __future__ import annotations

from ..db import Database
from . import (
    m001_core,
    m002_message_vectors,
    m003_vector_changes,
    m004_message_vectors_with_names,
    m005_message_metadata,
    m006_message_keywords,
    m007_extraction_jobs,
    m008_vectors_by_row,
    m009_message_hashes,
    m010_history_writer,
    m011_validity,
    m012_shared_message_vectors,
    m013_keyword_terms_in_docs,
    m014_postings_without_doc_key,
)
from .context import Migration, MigrationContext
from .m011_validity import fill_validity

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "MigrationContext",
    "applied_migrations",
    "fill_validity",
    "migrate",
]

MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_core", m001_core.apply),
    ("002_message_vectors", m002_message_vectors.apply),
    ("003_vector_changes", m003_vector_changes.apply),
    ("004_message_vectors_with_names", m004_message_vectors_with_names.apply),
    ("005_message_metadata", m005_message_metadata.apply),
    ("006_message_keywords", m006_message_keywords.apply),
    ("007_extraction_jobs", m007_extraction_jobs.apply),
    ("008_vectors_by_row", m008_vectors_by_row.apply),
    ("009_message_hashes", m009_message_hashes.apply),
    ("010_history_writer", m010_history_writer.apply),
    ("011_validity", m011_validity.apply),
    ("012_shared_message_vectors", m012_shared_message_vectors.apply),
    ("013_keyword_terms_in_docs", m013_keyword_terms_in_docs.apply),
    ("014_postings_without_doc_key", m014_postings_without_doc_key.apply),
]

SCHEMA_VERSION = len(MIGRATIONS)


def applied_migrations(db: Database) -> list[str]:
    exists = db.query_one(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
    )
    if not exists:
        return []
    return [row[0] for row in db.query("SELECT name FROM migrations ORDER BY rowid")]


def migrate(db: Database, ctx: MigrationContext) -> list[str]:
    """Apply the migrations this file lacks, in order; returns their names. Call inside atomic()."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = set(applied_migrations(db))
    unknown = done - {name for name, _ in MIGRATIONS}
    if unknown:
        from ...errors import SchemaVersionError

        raise SchemaVersionError(
            f"the memory file has migrations this offline_mem does not know: {sorted(unknown)}; "
            "upgrade offline_mem to open it"
        )
    applied = []
    for name, step in MIGRATIONS:
        if name in done:
            continue
        step(db, ctx)
        db.execute(
            "INSERT INTO migrations (name, applied_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ'))",
            (name,),
        )
        applied.append(name)
    return applied
