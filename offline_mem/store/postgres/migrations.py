"""The PostgreSQL schema: named, append-only migrations, numbered like the SQLite ones.

The numbers are this store's own: 001 creates the schema the SQLite file has after its 010
(messages with metadata and hashes, message keywords, jobs, history.written_by), with vectors as
pgvector columns of their rows instead of side tables. Timestamps and metadata stay TEXT, as
in the file, so both stores return and export byte-identical values
(docs/design/postgresql.md). Migrations run in the opening transaction under an advisory lock,
so two servers opening a new database at once apply each migration once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import MissingExtensionError, SchemaVersionError
from .connection import PgDatabase

MIGRATION_LOCK = 0x6F66666C6D656D  # pg_advisory_xact_lock key: "offlmem"


@dataclass(frozen=True)
class MigrationContext:
    dimension: int


def _keyword_tables(prefix: str, key: str, owner: str) -> list[str]:
    """The four tables of one keyword index (keyword_index.py describes them)."""
    return [
        f"""CREATE TABLE {prefix}keyword_docs (
            {key} BIGINT PRIMARY KEY REFERENCES {owner} ON DELETE CASCADE,
            partition TEXT NOT NULL,
            length INTEGER NOT NULL)""",
        f"""CREATE TABLE {prefix}keyword_postings (
            partition TEXT NOT NULL,
            term TEXT NOT NULL,
            {key} BIGINT NOT NULL REFERENCES {prefix}keyword_docs ON DELETE CASCADE,
            tf INTEGER NOT NULL,
            PRIMARY KEY (partition, term, {key}))""",
        f"CREATE INDEX {prefix}keyword_postings_key ON {prefix}keyword_postings ({key})",
        f"""CREATE TABLE {prefix}keyword_terms (
            partition TEXT NOT NULL,
            term TEXT NOT NULL,
            df INTEGER NOT NULL,
            PRIMARY KEY (partition, term))""",
        f"""CREATE TABLE {prefix}keyword_partitions (
            partition TEXT PRIMARY KEY,
            docs INTEGER NOT NULL,
            total_length BIGINT NOT NULL)""",
    ]


def _m001_core(db: PgDatabase, ctx: MigrationContext) -> None:
    dim = int(ctx.dimension)
    statements = [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE memories (
            rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            text TEXT NOT NULL,
            hash TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            run_id TEXT,
            scope TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{{}}',
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
            prompt_version TEXT,
            valid_from TEXT,
            valid_to TEXT,
            embedding vector({dim}) NOT NULL)""",
        # a scope's search reads its rows through these, then ranks them exactly (no ANN index
        # by default: exact within a scope is the SQLite store's semantics)
        "CREATE INDEX memories_user ON memories (user_id, state)",
        "CREATE INDEX memories_agent ON memories (agent_id, state)",
        "CREATE INDEX memories_run ON memories (run_id, state)",
        "CREATE INDEX memories_scope_hash ON memories (scope, hash)",
        """CREATE TABLE entities (
            rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            scope TEXT NOT NULL,
            name TEXT NOT NULL,
            norm TEXT NOT NULL,
            kind TEXT NOT NULL,
            UNIQUE (scope, norm))""",
        """CREATE TABLE entity_links (
            entity_rowid BIGINT NOT NULL REFERENCES entities ON DELETE CASCADE,
            memory_rowid BIGINT NOT NULL REFERENCES memories ON DELETE CASCADE,
            PRIMARY KEY (entity_rowid, memory_rowid))""",
        "CREATE INDEX entity_links_memory ON entity_links (memory_rowid)",
        """CREATE TABLE history (
            rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
            happened_at TEXT)""",
        "CREATE INDEX history_memory ON history (memory_id, rowid)",
        # seq is an identity: it never repeats; under concurrent writers it is not commit order
        # (SQLite's is), which the job queue and recent_messages must allow for (design doc)
        f"""CREATE TABLE messages (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            scope TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            run_id TEXT,
            role TEXT NOT NULL,
            name TEXT,
            content TEXT NOT NULL,
            hash TEXT,
            created_at TEXT NOT NULL,
            observed_at TEXT,
            metadata TEXT,
            embedding vector({dim}))""",
        "CREATE INDEX messages_scope ON messages (scope, seq)",
        "CREATE INDEX messages_user ON messages (user_id, seq)",
        """CREATE TABLE provenance (
            memory_rowid BIGINT NOT NULL REFERENCES memories ON DELETE CASCADE,
            message_seq BIGINT NOT NULL REFERENCES messages ON DELETE CASCADE,
            PRIMARY KEY (memory_rowid, message_seq))""",
        "CREATE INDEX provenance_message ON provenance (message_seq)",
        *_keyword_tables("", "memory_rowid", "memories"),
        *_keyword_tables("message_", "message_seq", "messages"),
        """CREATE TABLE jobs (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
            lease_until DOUBLE PRECISION,
            not_before DOUBLE PRECISION,
            results TEXT,
            created_at TEXT NOT NULL,
            started_at TEXT,
            finished_at TEXT)""",
        "CREATE INDEX jobs_state ON jobs (state, seq)",
        "CREATE INDEX jobs_scope ON jobs (scope, seq)",
        "INSERT INTO meta (key, value) VALUES ('message_vectors', 'complete')",
    ]
    for sql in statements:
        db.execute(sql)


Migration = Callable[[PgDatabase, MigrationContext], None]

MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_core", _m001_core),
]

SCHEMA_VERSION = len(MIGRATIONS)


def ensure_vector_extension(db: PgDatabase) -> None:
    """pgvector's `vector` type, created when the server has it and this login may; else a
    MissingExtensionError that says what to install or whom to ask. Inside migrate's lock."""
    if db.query_one("SELECT 1 FROM pg_extension WHERE extname = 'vector'"):
        return
    if not db.query_one("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):
        major = db.query_one("SHOW server_version_num")[0][:2]
        raise MissingExtensionError(
            f"the PostgreSQL server at {db.shown} has no pgvector extension: install pgvector "
            f"for PostgreSQL {major} on the server (Debian/Ubuntu: postgresql-{major}-pgvector; "
            "or build it from https://github.com/pgvector/pgvector), then open again"
        )
    import psycopg

    try:
        db.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege as exc:
        raise MissingExtensionError(
            f"the database at {db.shown} has pgvector available but not created, and this login "
            "may not create it: ask its owner to run CREATE EXTENSION vector in it"
        ) from exc


def migrate(db: PgDatabase, ctx: MigrationContext) -> list[str]:
    """Apply the migrations this database lacks, in order; returns their names. Call inside
    atomic()."""
    db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    ensure_vector_extension(db)
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in db.query("SELECT name FROM migrations")}
    unknown = done - {name for name, _ in MIGRATIONS}
    if unknown:
        raise SchemaVersionError(
            f"the database has migrations this offline_mem does not know: {sorted(unknown)}; "
            "upgrade offline_mem to open it"
        )
    applied = []
    for name, step in MIGRATIONS:
        if name in done:
            continue
        step(db, ctx)
        db.execute(
            "INSERT INTO migrations (name, applied_at) VALUES "
            "(%s, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))",
            (name,),
        )
        applied.append(name)
    return applied
