"""Migration 007_extraction_jobs: the queue of async adds (jobs, owners, leases)."""

from __future__ import annotations

from ..db import Database
from .context import MigrationContext


def apply(db: Database, ctx: MigrationContext) -> None:
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
