"""The extraction job queue's rows in PostgreSQL: what deletes and reports need so far.

Queueing and claiming (async adds, the worker with `FOR UPDATE SKIP LOCKED` and leases) are not
implemented yet; docs/design/postgresql.md gives their design.
"""

from __future__ import annotations

import json
from typing import Any

from ...values import SCOPE_KEYS, Scope
from ..jobs import _COLUMNS, UNFINISHED, JobRecord
from .connection import PgDatabase


def scope_match(scope: Scope, alias: str = "") -> tuple[str, list[str]]:
    """The rows of every id the scope names (as delete_all matches them)."""
    prefix = f"{alias}." if alias else ""
    parts, params = [], []
    for key in SCOPE_KEYS:
        value = getattr(scope, key)
        if value is not None:
            parts.append(f"{prefix}{key} = %s")
            params.append(value)
    return " AND ".join(parts) or "TRUE", params


class PgJobs:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def forget_job_results(self, memory: Any) -> None:
        """Inside a delete's transaction: the memory's text leaves its scope's job results."""
        rows = self.db.query(
            "SELECT seq, results FROM jobs WHERE scope = %s AND strpos(results, %s) > 0",
            (memory.scope.key, memory.id),
        )
        for seq, text in rows:
            results = json.loads(text)
            for item in results:
                if isinstance(item, dict) and item.get("id") == memory.id:
                    for key in ("memory", "old_memory", "previous_memory"):
                        if key in item:
                            item[key] = None
            self.db.execute(
                "UPDATE jobs SET results = %s WHERE seq = %s",
                (json.dumps(results, ensure_ascii=False), seq),
            )

    def delete_jobs(self, scope: Scope | None) -> None:
        where, params = ("TRUE", []) if scope is None else scope_match(scope)
        self.db.execute(f"DELETE FROM jobs WHERE {where}", params)

    def job(self, job_id: str) -> JobRecord | None:
        row = self.db.query_one(f"SELECT {_COLUMNS} FROM jobs WHERE id = %s", (job_id,))
        return None if row is None else JobRecord.from_row(row)

    def jobs_in_state(self, state: str, scope: Scope | None = None) -> list[JobRecord]:
        where, params = ("TRUE", []) if scope is None else scope_match(scope)
        rows = self.db.query(
            f"SELECT {_COLUMNS} FROM jobs WHERE state = %s AND {where} ORDER BY seq",
            (state, *params),
        )
        return [JobRecord.from_row(row) for row in rows]

    def pending_jobs(self, scope: Scope | None = None) -> int:
        where, params = ("TRUE", []) if scope is None else scope_match(scope)
        row = self.db.query_one(
            f"SELECT count(*) FROM jobs WHERE state = ANY(%s) AND {where}",
            (list(UNFINISHED), *params),
        )
        return int(row[0])

    def scope_pending_jobs(self, scope: Scope) -> int:
        row = self.db.query_one(
            "SELECT count(*) FROM jobs WHERE scope = %s AND state = ANY(%s)",
            (scope.key, list(UNFINISHED)),
        )
        return int(row[0])
