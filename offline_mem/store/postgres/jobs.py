"""The extraction job queue in PostgreSQL, shared by the workers of every server on the
database: the same rows and states as store/jobs.py.

A claim is one transaction: the oldest claimable job whose scope has no older unfinished job,
`FOR UPDATE SKIP LOCKED` (two workers never wait on, or take, the same row), then owner token,
host, pid and lease set. Leases are measured on the database's clock, the one clock every
server shares. A running job is claimable again when its lease has run out, or at once when
its owner was a process of this host that has ended. `finish_job`, `renew_claim` and
`fail_job` lock the job row and check the token first, so a job taken over after its lease ran
out is never completed twice.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from typing import Any

from ...timeutil import iso, utc_now
from ...values import Scope
from .. import filters
from ..jobs import _COLUMNS, UNFINISHED, JobClaim, JobRecord, NewJob, _pid_alive
from .connection import PgDatabase

NOW = "extract(epoch FROM clock_timestamp())"  # seconds, on the database's clock


def scope_match(scope: Scope, alias: str = "") -> tuple[str, list[str]]:
    """The rows of every id the scope names (as delete_all matches them)."""
    return filters.scope_match(scope, alias, mark="%s", always="TRUE")


class PgJobs:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    @property
    def closed(self) -> bool:
        return self.db.closed

    def insert_job(self, scope: Scope, job: NewJob, now: str) -> None:
        """Call inside the transaction that writes the job's messages."""
        self.db.execute(
            "INSERT INTO jobs (id, scope, user_id, agent_id, run_id, kind, request, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (job.id, scope.key, scope.user_id, scope.agent_id, scope.run_id, job.kind,
             json.dumps(job.request, ensure_ascii=False, sort_keys=True), now),
        )  # fmt: skip

    def claim_job(self, token: str, *, lease_s: float) -> JobRecord | None:
        """Take the oldest claimable job, in one transaction; None when there is none."""
        host, pid = platform.node(), os.getpid()
        with self.db.atomic():
            orphans = self._orphans(host, pid)
            row = self.db.query_one(
                f"SELECT seq FROM jobs j WHERE ((j.state = 'queued' AND "
                f"coalesce(j.not_before, 0) <= {NOW}) OR (j.state = 'running' AND "
                f"(j.lease_until IS NULL OR j.lease_until < {NOW} OR j.seq = ANY(%s)))) "
                "AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.scope = j.scope AND e.seq < j.seq "
                "AND e.state IN ('queued', 'running')) "
                "ORDER BY j.seq LIMIT 1 FOR UPDATE SKIP LOCKED",
                (orphans,),
            )
            if row is None:
                return None
            claimed = self.db.query_one(
                "UPDATE jobs SET state = 'running', owner = %s, owner_host = %s, owner_pid = %s,"
                f" lease_until = {NOW} + %s, claims = claims + 1, started_at = %s WHERE seq = %s"
                f" RETURNING {_COLUMNS}",
                (token, host, pid, float(lease_s), iso(utc_now()), row[0]),
            )
        return JobRecord.from_row(claimed)

    def _orphans(self, host: str, pid: int) -> list[int]:
        """Running jobs whose owner was a process of this host that has ended."""
        rows = self.db.query(
            "SELECT seq, owner_pid FROM jobs WHERE state = 'running' AND owner_host = %s "
            "AND owner_pid IS NOT NULL AND owner_pid <> %s",
            (host, pid),
        )
        return [int(seq) for seq, owner in rows if not _pid_alive(int(owner))]

    def holds(self, claim: JobClaim) -> bool:
        """Inside a transaction: whether the job still runs under this claim; its row stays
        locked until the transaction ends."""
        row = self.db.query_one(
            "SELECT state, owner FROM jobs WHERE seq = %s FOR UPDATE", (claim.seq,)
        )
        return row is not None and tuple(row) == ("running", claim.token)

    def renew_claim(self, claim: JobClaim, *, lease_s: float) -> bool:
        with self.db.atomic():
            if not self.holds(claim):
                return False
            self.db.execute(
                f"UPDATE jobs SET lease_until = {NOW} + %s WHERE seq = %s",
                (float(lease_s), claim.seq),
            )
        return True

    def mark_job_done(self, claim: JobClaim, results: Sequence[dict[str, Any]]) -> None:
        """Call inside the transaction that writes the job's memories, after `holds`."""
        self.db.execute(
            "UPDATE jobs SET state = 'done', results = %s, finished_at = %s, lease_until = NULL,"
            " error = NULL WHERE seq = %s",
            (json.dumps(list(results), ensure_ascii=False), iso(utc_now()), claim.seq),
        )

    def fail_job(self, claim: JobClaim, error: str, *, max_attempts: int, retry_s: float) -> str:
        """A failed run: queued again after `retry_s`, or `failed` after `max_attempts` runs;
        the job's new state ("" when the claim was no longer ours)."""
        with self.db.atomic():
            if not self.holds(claim):
                return ""
            attempts = self.db.query_one("SELECT attempts FROM jobs WHERE seq = %s", (claim.seq,))
            failed = attempts[0] + 1 >= max_attempts
            state = "failed" if failed else "queued"
            self.db.execute(
                "UPDATE jobs SET state = %s, attempts = attempts + 1, error = %s, owner = NULL,"
                f" lease_until = NULL, not_before = {NOW} + %s, finished_at = %s WHERE seq = %s",
                (state, error, float(retry_s), iso(utc_now()) if failed else None, claim.seq),
            )
        return state

    def job_counts(self) -> dict[str, int]:
        counts = {state: 0 for state in ("queued", "running", "done", "failed")}
        counts.update(
            {s: int(n) for s, n in self.db.query("SELECT state, count(*) FROM jobs GROUP BY state")}
        )
        return counts

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
                    for key in ("memory", "old_memory", "previous_memory", "merged"):
                        if key in item:
                            item[key] = None
            self.db.execute(
                "UPDATE jobs SET results = %s WHERE seq = %s",
                (json.dumps(results, ensure_ascii=False), seq),
            )

    def lock_jobs(self, scope: Scope) -> None:
        """Lock the scope's job rows (a delete_all takes them before anything else)."""
        where, params = scope_match(scope)
        self.db.execute(f"SELECT 1 FROM jobs WHERE {where} ORDER BY seq FOR UPDATE", params)

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
