"""Migration 001_core:
the first schema: memories, vectors, keyword index, entities, messages, provenance, history.
"""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
    db.execute(
        """CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            text TEXT NOT NULL,
            hash TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            run_id TEXT,
            scope TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            role TEXT,
            actor_id TEXT,
            attributed_to TEXT,
            memory_type TEXT,
            state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'superseded')),
            superseded_by TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT,
            observed_at TEXT,
            expiration_date TEXT,
            embedder_sha256 TEXT NOT NULL,
            extractor_sha256 TEXT,
            prompt_version TEXT
        )"""
    )
    db.execute("CREATE INDEX memories_user ON memories(user_id, state)")
    db.execute("CREATE INDEX memories_agent ON memories(agent_id, state)")
    db.execute("CREATE INDEX memories_run ON memories(run_id, state)")
    db.execute("CREATE INDEX memories_scope_hash ON memories(scope, hash)")
    # Vectors: rowid = memories.rowid. Partitioned by user_id ('' when none) so a user's
    # search scans only that user's chunks; every other filter is applied inside the KNN
    # through `rowid IN (SELECT ... FROM memories WHERE ...)`.
    db.execute(
        "CREATE VIRTUAL TABLE memory_vectors USING vec0("
        "user_id TEXT PARTITION KEY, "
        f"embedding FLOAT[{int(ctx.dimension)}] distance_metric=cosine)"
    )
    # Keyword index (see keyword_index.py): BM25 over lemmatised terms with per-partition
    # statistics. No FTS5: its bm25() uses whole-file statistics, not the user's corpus.
    db.execute(
        """CREATE TABLE keyword_docs (
            memory_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid),
            partition TEXT NOT NULL,
            length INTEGER NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE keyword_postings (
            partition TEXT NOT NULL,
            term TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL REFERENCES keyword_docs(memory_rowid),
            tf INTEGER NOT NULL,
            PRIMARY KEY (partition, term, memory_rowid)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX keyword_postings_memory ON keyword_postings(memory_rowid)")
    db.execute("CREATE INDEX keyword_postings_term ON keyword_postings(term)")
    db.execute(
        """CREATE TABLE keyword_terms (
            partition TEXT NOT NULL,
            term TEXT NOT NULL,
            df INTEGER NOT NULL,
            PRIMARY KEY (partition, term)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX keyword_terms_term ON keyword_terms(term)")
    db.execute(
        """CREATE TABLE keyword_partitions (
            partition TEXT PRIMARY KEY,
            docs INTEGER NOT NULL,
            total_length INTEGER NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE entities (
            rowid INTEGER PRIMARY KEY,
            scope TEXT NOT NULL,
            name TEXT NOT NULL,
            norm TEXT NOT NULL,
            kind TEXT NOT NULL,
            UNIQUE (scope, norm)
        )"""
    )
    db.execute(
        """CREATE TABLE entity_links (
            entity_rowid INTEGER NOT NULL REFERENCES entities(rowid) ON DELETE CASCADE,
            memory_rowid INTEGER NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
            PRIMARY KEY (entity_rowid, memory_rowid)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX entity_links_memory ON entity_links(memory_rowid)")
    db.execute(
        """CREATE TABLE history (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            memory_id TEXT NOT NULL,
            old_memory TEXT,
            new_memory TEXT,
            event TEXT NOT NULL CHECK (event IN ('ADD', 'UPDATE', 'DELETE', 'SUPERSEDE')),
            related_memory_id TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT,
            is_deleted INTEGER NOT NULL DEFAULT 0,
            actor_id TEXT,
            role TEXT
        )"""
    )
    db.execute("CREATE INDEX history_memory ON history(memory_id, rowid)")
    # Every message ever added, in insertion order: seq is AUTOINCREMENT, so it never repeats
    # or goes backwards, and ordering never depends on timestamps.
    db.execute(
        """CREATE TABLE messages (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            scope TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            run_id TEXT,
            role TEXT NOT NULL,
            name TEXT,
            content TEXT NOT NULL,
            created_at TEXT NOT NULL,
            observed_at TEXT
        )"""
    )
    db.execute("CREATE INDEX messages_scope ON messages(scope, seq)")
    db.execute(
        """CREATE TABLE provenance (
            memory_rowid INTEGER NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
            message_seq INTEGER NOT NULL REFERENCES messages(seq) ON DELETE CASCADE,
            PRIMARY KEY (memory_rowid, message_seq)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX provenance_message ON provenance(message_seq)")
