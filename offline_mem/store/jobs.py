"""The extraction job queue of `add(..., async_mode=True)`: the `jobs` table and its claims.

`JobQueue` is the `Store`'s part for them. An async add writes its messages and one `queued`
job in one transaction (`Store.apply_add(plan, job=...)`). A worker (job_worker.py) claims the
oldest claimable job in a transaction, runs the extraction outside any transaction, and commits
the memories with the job marked `done` in one transaction (`Store.finish_job`), which first
checks that the claim is still its own. So a job is completed at most once, and a process killed
halfway leaves the job `running` with nothing of its work committed.

Claims: a job's owner is a random token, with the owner's host and pid and a lease that the
owner renews while it works. A `running` job may be claimed again when its lease has run out or
when its owner is a process of this host that no longer exists (a crash: resumed at once).
Order: a scope's jobs run one at a time, oldest first; failed jobs do not hold the others back.
"""

from __future__ import annotations

import json
import os
import platform
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..timeutil import iso, utc_now
from ..values import Scope
from .candidates import scope_match
from .db import Database

UNFINISHED = ("queued", "running")
# what `Memory.job` reports for each state (the words of Mem0's platform events)
STATUS = {"queued": "PENDING", "running": "RUNNING", "done": "SUCCEEDED", "failed": "FAILED"}
_COLUMNS = (
    "seq, id, user_id, agent_id, run_id, kind, request, state, attempts, claims, error, results,"
    " created_at, started_at, finished_at"
)


@dataclass(frozen=True)
class NewJob:
    """The job an async add queues, written in the add's transaction."""

    id: str
    kind: str  # "facts" or "procedural"
    request: dict[str, Any]  # JSON-able: what the extraction needs besides the stored messages


@dataclass(frozen=True)
class JobRecord:
    seq: int
    id: str
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    kind: str
    request: dict[str, Any]
    state: str
    attempts: int  # failed runs so far
    claims: int  # times a worker took it (a crashed owner's job is claimed again)
    error: str | None  # the last failure
    results: list[dict[str, Any]] | None  # the add's results, once done
    created_at: str
    started_at: str | None
    finished_at: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> JobRecord:
        values = list(row)
        values[6] = json.loads(values[6])
        values[11] = None if values[11] is None else json.loads(values[11])
        return cls(*values)

    @property
    def scope(self) -> Scope:
        return Scope(self.user_id, self.agent_id, self.run_id)

    def to_dict(self) -> dict[str, Any]:
        """The job as `Memory.job` and `Memory.failed_jobs` return it."""
        item: dict[str, Any] = {"event_id": self.id, "status": STATUS[self.state]}
        item.update({k: v for k, v in self.scope.as_dict().items() if v is not None})
        item |= {"kind": self.kind, "attempts": self.attempts, "created_at": self.created_at}
        optional = {"started_at": self.started_at, "finished_at": self.finished_at,
                    "error": self.error, "results": self.results}  # fmt: skip
        return item | {k: v for k, v in optional.items() if v is not None}


@dataclass(frozen=True)
class JobClaim:
    """A worker's hold on a running job: only this token may finish, fail or renew it."""

    seq: int
    job_id: str
    token: str


def new_owner_token() -> str:
    return uuid.uuid4().hex


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    except OSError:
        return True  # cannot tell: wait for the lease
    return True


class JobQueue:
    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def closed(self) -> bool:
        """Whether the file was closed (under a worker that still runs)."""
        return self.db.closed

    def insert_job(self, scope: Scope, job: NewJob, now: str) -> None:
        """Call inside the transaction that writes the job's messages."""
        self.db.execute(
            "INSERT INTO jobs (id, scope, user_id, agent_id, run_id, kind, request, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (job.id, scope.key, scope.user_id, scope.agent_id, scope.run_id, job.kind,
             json.dumps(job.request, ensure_ascii=False, sort_keys=True), now),
        )  # fmt: skip

    def claim_job(self, token: str, *, lease_s: float) -> JobRecord | None:
        """Take the oldest claimable job, in one transaction; None when there is none."""
        now = time.time()
        host, pid = platform.node(), os.getpid()
        with self.db.atomic():
            rows = self.db.query(
                f"SELECT {_COLUMNS}, owner_host, owner_pid, lease_until, not_before FROM jobs j "
                "WHERE state IN ('queued', 'running') AND NOT EXISTS (SELECT 1 FROM jobs e "
                "WHERE e.scope = j.scope AND e.seq < j.seq AND e.state IN ('queued', 'running'))"
                " ORDER BY seq"
            )
            for row in rows:
                job = JobRecord.from_row(row[:15])
                owner_host, owner_pid, lease_until, not_before = row[15:]
                if job.state == "queued" and (not_before or 0) > now:
                    continue  # waiting before a retry
                if job.state == "running" and not _abandoned(
                    owner_host, owner_pid, lease_until, now, host
                ):
                    continue
                self.db.execute(
                    "UPDATE jobs SET state = 'running', owner = ?, owner_host = ?, owner_pid = ?,"
                    " lease_until = ?, claims = claims + 1, started_at = ? WHERE seq = ?",
                    (token, host, pid, now + lease_s, iso(utc_now()), job.seq),
                )
                return JobRecord.from_row(
                    self.db.query_one(f"SELECT {_COLUMNS} FROM jobs WHERE seq = ?", (job.seq,))
                )
        return None

    def holds(self, claim: JobClaim) -> bool:
        """Inside a transaction: whether the job is still running under this claim (a job whose
        scope was deleted, or that another worker took over after our lease ran out, is not)."""
        row = self.db.query_one("SELECT state, owner FROM jobs WHERE seq = ?", (claim.seq,))
        return row is not None and tuple(row) == ("running", claim.token)

    def renew_claim(self, claim: JobClaim, *, lease_s: float) -> bool:
        with self.db.atomic():
            if not self.holds(claim):
                return False
            self.db.execute(
                "UPDATE jobs SET lease_until = ? WHERE seq = ?", (time.time() + lease_s, claim.seq)
            )
        return True

    def mark_job_done(self, claim: JobClaim, results: Sequence[dict[str, Any]]) -> None:
        """Call inside the transaction that writes the job's memories, after `holds`."""
        self.db.execute(
            "UPDATE jobs SET state = 'done', results = ?, finished_at = ?, lease_until = NULL,"
            " error = NULL WHERE seq = ?",
            (json.dumps(list(results), ensure_ascii=False), iso(utc_now()), claim.seq),
        )

    def fail_job(self, claim: JobClaim, error: str, *, max_attempts: int, retry_s: float) -> str:
        """Record a failed run: queued again after `retry_s`, or `failed` after `max_attempts`
        runs. Returns the job's new state ("" when the claim was no longer ours)."""
        with self.db.atomic():
            if not self.holds(claim):
                return ""
            attempts = self.db.query_one("SELECT attempts FROM jobs WHERE seq = ?", (claim.seq,))
            failed = attempts[0] + 1 >= max_attempts
            state = "failed" if failed else "queued"
            self.db.execute(
                "UPDATE jobs SET state = ?, attempts = attempts + 1, error = ?, owner = NULL,"
                " lease_until = NULL, not_before = ?, finished_at = ? WHERE seq = ?",
                (state, error, time.time() + retry_s, iso(utc_now()) if failed else None,
                 claim.seq),
            )  # fmt: skip
        return state

    def forget_job_results(self, memory: Any) -> None:
        """Inside a delete's transaction: the deleted memory's text leaves the results of the
        scope's done jobs (its id and event stay)."""
        rows = self.db.query(
            "SELECT seq, results FROM jobs WHERE scope = ? AND results LIKE ?",
            (memory.scope.key, f"%{memory.id}%"),
        )
        for seq, text in rows:
            results = json.loads(text)
            for item in results:
                if isinstance(item, dict) and item.get("id") == memory.id:
                    for key in ("memory", "old_memory", "previous_memory", "merged"):
                        if key in item:
                            item[key] = None
            self.db.execute(
                "UPDATE jobs SET results = ? WHERE seq = ?",
                (json.dumps(results, ensure_ascii=False), seq),
            )

    def delete_jobs(self, scope: Scope | None) -> None:
        """Inside a delete_all's (or reset's, with None) transaction: the scope's jobs go with
        its messages; a worker running one of them finds its claim gone and commits nothing."""
        if scope is None:
            self.db.execute("DELETE FROM jobs")
            return
        where, params = scope_match(scope, "")
        self.db.execute(f"DELETE FROM jobs WHERE {where}", params)

    # -- reads ---------------------------------------------------------------------------------

    def job(self, job_id: str) -> JobRecord | None:
        row = self.db.query_one(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return None if row is None else JobRecord.from_row(row)

    def jobs_in_state(self, state: str, scope: Scope | None = None) -> list[JobRecord]:
        where, params = ("1", []) if scope is None else scope_match(scope, "")
        rows = self.db.query(
            f"SELECT {_COLUMNS} FROM jobs WHERE state = ? AND {where} ORDER BY seq",
            (state, *params),
        )
        return [JobRecord.from_row(row) for row in rows]

    def pending_jobs(self, scope: Scope | None = None) -> int:
        """Queued and running jobs (of the scope's ids, as delete_all matches them)."""
        where, params = ("1", []) if scope is None else scope_match(scope, "")
        row = self.db.query_one(
            f"SELECT count(*) FROM jobs WHERE state IN ('queued', 'running') AND {where}", params
        )
        return int(row[0])

    def scope_pending_jobs(self, scope: Scope) -> int:
        """Queued and running jobs of exactly this scope (the ones that run in order with it)."""
        row = self.db.query_one(
            "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running') AND scope = ?",
            (scope.key,),
        )
        return int(row[0])

    def job_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUS, 0)
        counts.update(dict(self.db.query("SELECT state, count(*) FROM jobs GROUP BY state")))
        return counts


def _abandoned(
    host: str | None, pid: int | None, lease_until: float | None, now: float, this_host: str
) -> bool:
    """Whether a running job's owner is gone: its lease ran out, or it was a process of this
    host that has ended (a pid reused since then looks alive: the lease decides then)."""
    if lease_until is None or lease_until < now:
        return True
    return host == this_host and pid is not None and pid != os.getpid() and not _pid_alive(pid)
