"""Named, append-only schema migrations. Never edit or reorder one that has shipped: add a new one.

Each migration runs once, inside the opening transaction, and is recorded in `migrations`.
`MigrationContext` carries what DDL needs to know (the embedder's dimension for the vector table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..values import content_hash
from .db import Database


@dataclass(frozen=True)
class MigrationContext:
    dimension: int


def _m001_core(db: Database, ctx: MigrationContext) -> None:
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


def _m002_message_vectors(db: Database, ctx: MigrationContext) -> None:
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


def _m003_vector_changes(db: Database, ctx: MigrationContext) -> None:
    # A log of which memories' vectors changed, written by triggers in the same transaction as
    # the change, so the in-memory vector cache (vector_cache.py) of this or any other process
    # can catch up by re-reading those rows alone. Every write to memory_vectors goes with an
    # insert, a text update or a delete of the memory (vec0 tables take no triggers).
    # Only the newest 50,000 entries are kept; a cache older than that reloads.
    db.execute(
        """CREATE TABLE vector_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL
        )"""
    )
    db.execute("CREATE INDEX vector_changes_partition ON vector_changes(partition, seq)")
    log = "INSERT INTO vector_changes (partition, memory_rowid) VALUES"
    db.execute(
        "CREATE TRIGGER memories_vector_insert AFTER INSERT ON memories BEGIN "
        f"{log} (coalesce(NEW.user_id, ''), NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER memories_vector_delete AFTER DELETE ON memories BEGIN "
        f"{log} (coalesce(OLD.user_id, ''), OLD.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER memories_vector_update AFTER UPDATE OF text, user_id ON memories BEGIN "
        f"{log} (coalesce(OLD.user_id, ''), OLD.rowid); "
        f"{log} (coalesce(NEW.user_id, ''), NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER vector_changes_prune AFTER INSERT ON vector_changes BEGIN "
        "DELETE FROM vector_changes WHERE seq <= NEW.seq - 50000; END"
    )


def _m004_message_vectors_with_names(db: Database, ctx: MigrationContext) -> None:
    # Message vectors are now made from "<name>: <content>" (messages.message_embedding_text).
    # Vectors written before are dropped and rebuilt by `Memory` on open, like migration 002's.
    has_messages = db.query_one("SELECT 1 FROM messages LIMIT 1") is not None
    if has_messages:
        db.execute("DELETE FROM message_vectors")
    db.execute(
        "INSERT INTO meta (key, value) VALUES ('message_vectors', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        ("pending" if has_messages else "complete",),
    )


def _m005_message_metadata(db: Database, ctx: MigrationContext) -> None:
    # What a message carried besides its text (image references, tool calls), as JSON; NULL
    # when nothing (validation.normalize_messages).
    db.execute("ALTER TABLE messages ADD COLUMN metadata TEXT")


def _m006_message_keywords(db: Database, ctx: MigrationContext) -> None:
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


def _m007_extraction_jobs(db: Database, ctx: MigrationContext) -> None:
    # The queue of `add(..., async_mode=True)` (jobs.py): the add commits its messages and
    # one job row together; a worker claims the job (owner + lease), runs the extraction, and
    # commits the memories with the job marked done in one transaction. Jobs of one scope run in
    # seq order. `request` is JSON: the kind's inputs (message ids, metadata, the add's time).
    db.execute(
        """CREATE TABLE jobs (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            scope TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            run_id TEXT,
            kind TEXT NOT NULL CHECK (kind IN ('facts', 'procedural')),
            request TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'running', 'done', 'failed')),
            attempts INTEGER NOT NULL DEFAULT 0,
            claims INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            owner TEXT,
            owner_host TEXT,
            owner_pid INTEGER,
            lease_until REAL,
            not_before REAL,
            results TEXT,
            created_at TEXT NOT NULL,
            started_at TEXT,
            finished_at TEXT
        )"""
    )
    db.execute("CREATE INDEX jobs_state ON jobs(state, seq)")
    db.execute("CREATE INDEX jobs_scope ON jobs(scope, seq)")


def _m008_vectors_by_row(db: Database, ctx: MigrationContext) -> None:
    # Vectors move from vec0 tables partitioned by user_id, which preallocate a 1,024-vector
    # chunk (1.6 MB) per user and table, to plain tables of one BLOB per row: a scope costs
    # nothing beyond its rows (docs/design/vector-storage.md). The scope comes from the owning
    # row (memories / messages) by rowid; exact KNN is sqlite-vec's vec_distance_cosine over the
    # rows a filter selects, or the in-memory cache for a large partition (vector_cache.py).
    for table in ("memory_vectors", "message_vectors"):
        db.execute(
            f"CREATE TABLE {table}_rows ("
            "rowid INTEGER PRIMARY KEY, "
            "embedding BLOB NOT NULL CHECK (length(embedding) = "
            f"{4 * int(ctx.dimension)}))"
        )
        db.execute(
            f"INSERT INTO {table}_rows (rowid, embedding) SELECT rowid, embedding FROM {table}"
        )
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {table}_rows RENAME TO {table}")
    # A user's messages without the vec0 partition: the index that finds them.
    db.execute("CREATE INDEX messages_user ON messages(user_id, seq)")
    # Message vectors are cached like the memories' (vector_cache.py); their change log is
    # written by triggers on the vector table, since a message's vector can be rewritten while
    # its row stays (the index fill of older files). The partition is read from the message,
    # which exists whenever its vector is written or deleted (both happen before the message's
    # own delete); NULL would mean unknown, and a cache then checks the row in every partition.
    db.execute(
        """CREATE TABLE message_vector_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT,
            message_seq INTEGER NOT NULL
        )"""
    )
    db.execute(
        "CREATE INDEX message_vector_changes_partition ON message_vector_changes(partition, seq)"
    )
    log = "INSERT INTO message_vector_changes (partition, message_seq) VALUES"
    partition = "(SELECT coalesce(user_id, '') FROM messages WHERE seq = {row}.rowid)"
    db.execute(
        "CREATE TRIGGER message_vectors_insert AFTER INSERT ON message_vectors BEGIN "
        f"{log} ({partition.format(row='NEW')}, NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER message_vectors_delete AFTER DELETE ON message_vectors BEGIN "
        f"{log} ({partition.format(row='OLD')}, OLD.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER message_vectors_update AFTER UPDATE ON message_vectors BEGIN "
        f"{log} ({partition.format(row='OLD')}, OLD.rowid); "
        f"{log} ({partition.format(row='NEW')}, NEW.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER message_vector_changes_prune AFTER INSERT ON message_vector_changes "
        "BEGIN DELETE FROM message_vector_changes WHERE seq <= NEW.seq - 50000; END"
    )


def _m009_message_hashes(db: Database, ctx: MigrationContext) -> None:
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


def _m010_history_writer(db: Database, ctx: MigrationContext) -> None:
    # Which application made each change (offline_mem/writer.py): NULL where none was named.
    db.execute("ALTER TABLE history ADD COLUMN written_by TEXT")


def _m011_validity(db: Database, ctx: MigrationContext) -> None:
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


def _m012_shared_message_vectors(db: Database, ctx: MigrationContext) -> None:
    # A raw memory and its source message have the same text, so the same vector: the message
    # keeps a link to the memory's vector row instead of a second copy (1.6 KB of the ~5.6 KB a
    # raw memory cost; docs/storage.md). `message_vector_values` is every message's vector,
    # own or linked: readers use it, writers the two tables (messages.py).
    db.execute(
        """CREATE TABLE message_vector_links (
            message_seq INTEGER PRIMARY KEY REFERENCES messages(seq),
            memory_rowid INTEGER NOT NULL REFERENCES memory_vectors(rowid)
        )"""
    )
    db.execute("CREATE INDEX message_vector_links_memory ON message_vector_links(memory_rowid)")
    db.execute(
        "CREATE VIEW message_vector_values (rowid, embedding) AS "
        "SELECT rowid, embedding FROM message_vectors UNION ALL "
        "SELECT l.message_seq, v.embedding FROM message_vector_links l "
        "JOIN memory_vectors v ON v.rowid = l.memory_rowid"
    )
    # A memory vector that a message shares is copied to the message before it changes or
    # goes, whichever write path does it: a link never names a vector it does not hold.
    unshare = (
        "INSERT INTO message_vectors (rowid, embedding) SELECT message_seq, OLD.embedding "
        "FROM message_vector_links WHERE memory_rowid = OLD.rowid; "
        "DELETE FROM message_vector_links WHERE memory_rowid = OLD.rowid;"
    )
    db.execute(
        "CREATE TRIGGER memory_vectors_unshare_delete BEFORE DELETE ON memory_vectors "
        f"BEGIN {unshare} END"
    )
    db.execute(
        "CREATE TRIGGER memory_vectors_unshare_update BEFORE UPDATE OF embedding ON memory_vectors "
        f"BEGIN {unshare} END"
    )
    # A link added or removed changes the message's vector as far as a cache knows.
    log = "INSERT INTO message_vector_changes (partition, message_seq) VALUES"
    partition = "(SELECT coalesce(user_id, '') FROM messages WHERE seq = {row}.message_seq)"
    db.execute(
        "CREATE TRIGGER message_vector_links_insert AFTER INSERT ON message_vector_links BEGIN "
        f"{log} ({partition.format(row='NEW')}, NEW.message_seq); END"
    )
    db.execute(
        "CREATE TRIGGER message_vector_links_delete AFTER DELETE ON message_vector_links BEGIN "
        f"{log} ({partition.format(row='OLD')}, OLD.message_seq); END"
    )
    _share_message_vectors(db)


def _m013_keyword_terms_in_docs(db: Database, ctx: MigrationContext) -> None:
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


def _share_message_vectors(db: Database) -> None:
    """Replace the own vector of each message that a memory made from it holds byte for byte by
    a link to that memory's row (new writes link at once: messages.py)."""
    db.execute(
        "INSERT INTO message_vector_links (message_seq, memory_rowid) "
        "SELECT v.rowid, min(mv.rowid) FROM message_vectors v "
        "JOIN provenance p ON p.message_seq = v.rowid "
        "JOIN memory_vectors mv ON mv.rowid = p.memory_rowid AND mv.embedding = v.embedding "
        "GROUP BY v.rowid"
    )
    db.execute(
        "DELETE FROM message_vectors WHERE rowid IN (SELECT message_seq FROM message_vector_links)"
    )


Migration = Callable[[Database, MigrationContext], None]

MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_core", _m001_core),
    ("002_message_vectors", _m002_message_vectors),
    ("003_vector_changes", _m003_vector_changes),
    ("004_message_vectors_with_names", _m004_message_vectors_with_names),
    ("005_message_metadata", _m005_message_metadata),
    ("006_message_keywords", _m006_message_keywords),
    ("007_extraction_jobs", _m007_extraction_jobs),
    ("008_vectors_by_row", _m008_vectors_by_row),
    ("009_message_hashes", _m009_message_hashes),
    ("010_history_writer", _m010_history_writer),
    ("011_validity", _m011_validity),
    ("012_shared_message_vectors", _m012_shared_message_vectors),
    ("013_keyword_terms_in_docs", _m013_keyword_terms_in_docs),
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
        from ..errors import SchemaVersionError

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
