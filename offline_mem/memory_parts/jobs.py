"""The extraction jobs of `Memory`: queued adds (`add(..., async_mode=True)`), `flush`,
`pending`, `failed_jobs` and `job`.

`ExtractionJobs` holds the store, the worker (job_worker.py), the message indexer
(message_indexing.py) and the extraction it shares with synchronous adds. A queued add commits
its messages and its job in one transaction, and hands the messages to the indexer; the worker
runs the job later, its messages indexed first, with the same extraction as a synchronous add,
and commits the memories with the job marked done in one transaction (writes.py `finish_job`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import FlushTimeoutError, ValidationError, shown
from ..store.interface import MemoryStore
from ..store.job_worker import POLL_S, JobWorker
from ..store.jobs import JobClaim, JobRecord, NewJob
from ..store.records import AddPlan, MessageRecord, NewMessage
from ..store.writer import current_writer, written_by
from ..timeutil import iso, parse_datetime, utc_now
from ..validation import check_memory_id, make_scope
from ..values import Scope
from .message_indexing import MessageIndexer

if TYPE_CHECKING:
    from ..extraction.planner import AddRequest

# An add's extraction: its write plan, complete but for the messages' index rows, and results.
Extract = Callable[[str, "AddRequest"], tuple[AddPlan, list[dict[str, Any]]]]


class ExtractionJobs:
    """The queue of a `Memory`'s async adds (whose methods document the arguments)."""

    def __init__(
        self,
        store: MemoryStore,
        worker: JobWorker,
        extract: Extract,
        *,
        indexer: MessageIndexer,
        lock: threading.RLock,
        embedder_sha256: str,
        start_worker: bool,
    ) -> None:
        self.store = store
        self.worker = worker
        self.extract = extract
        self.indexer = indexer
        self.lock = lock  # the Memory's: one write at a time from this process
        self.embedder_sha256 = embedder_sha256
        self.start_worker = start_worker  # the config's job_worker

    @staticmethod
    def new_job(
        messages: Sequence[NewMessage],
        kind: str,
        metadata: dict[str, Any],
        expiry: str | None,
        instructions: str | None,
    ) -> NewJob:
        """The job of an async add: what its extraction needs besides the stored messages."""
        request = {
            "messages": [{"id": m.id, "extract": m.extract} for m in messages],
            "metadata": metadata, "expiration_date": expiry, "instructions": instructions,
            "now": iso(utc_now()),
        }  # fmt: skip
        writer = current_writer()
        if writer is not None:  # the job's history rows name the app that queued it
            request["written_by"] = writer
        return NewJob(id=str(uuid.uuid4()), kind=kind, request=request)

    def enqueue(self, plan: AddPlan, job: NewJob) -> dict[str, Any]:
        """Store the plan's messages (without their index rows) and the job, in one transaction;
        then hand the messages to the indexer, and wake the worker."""
        with self.lock:
            self.store.apply_add(plan, job=job)
        # before the worker: its run of the job then waits for this indexing, not repeats it
        self.indexer.submit([m.id for m in plan.messages])
        if self.start_worker:
            self.worker.start()
        return {"results": [], "status": "PENDING", "event_id": job.id}

    def run_job(self, job: JobRecord, claim: JobClaim) -> bool:
        """Index the job's messages that lack their index rows, run it with the synchronous
        add's extraction, and commit its memories with the job marked done in one transaction;
        False when the claim was lost meanwhile. An indexing error fails the run as an
        extraction error does."""
        from ..extraction import planner

        given = job.request
        ids = [m["id"] for m in given["messages"]]
        self.indexer.wait()  # this process's indexing of its own adds
        self.indexer.index(ids)  # an add of a process that ended before, or of another one
        stored = self.store.messages_by_id(ids)
        messages = [
            _stored_message(stored[m["id"]], m["extract"])
            for m in given["messages"]
            if m["id"] in stored  # a message deleted since the add is left out
        ]
        request = planner.AddRequest(
            scope=job.scope, messages=messages, metadata=given["metadata"],
            expiration_date=given["expiration_date"], instructions=given["instructions"],
            now=parse_datetime(given["now"], what="job time"),
            context_before=min((stored[m.id].seq for m in messages), default=None),
        )  # fmt: skip
        if messages:
            plan, results = self.extract(job.kind, request)
        else:
            plan, results = AddPlan(job.scope, [], [], self.embedder_sha256), []
        with self.lock, written_by(given.get("written_by")):
            return self.store.finish_job(claim, plan, results)

    def wait_for_queued(self, scope: Scope) -> None:
        """Block until the scope has no queued or running job, running them in this Memory's
        worker. A synchronous add waits so, and its facts are extracted after those of the
        scope's earlier async adds, as the adds were made (a later fact may supersede one of
        theirs, and their prompts show the facts before them). Failed jobs do not count."""
        while self.store.scope_pending_jobs(scope) > 0:
            self.worker.start()
            self.worker.wait_progress(POLL_S)

    def flush(self, timeout: float | None = None) -> None:
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0
        ):
            raise ValidationError(f"timeout must be None or a number >= 0, got {shown(timeout)}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while (left := self.store.pending_jobs()) > 0:
            remaining = POLL_S if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise FlushTimeoutError(
                    f"{left} extraction job(s) still queued or running after {timeout} s; "
                    "they stay queued"
                )
            self.worker.start()
            self.worker.wait_progress(min(POLL_S, remaining))

    def pending(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> int:
        scope = make_scope(user_id, agent_id, run_id, required=False)
        return self.store.pending_jobs(None if scope.is_empty() else scope)

    def failed_jobs(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        scope = make_scope(user_id, agent_id, run_id, required=False)
        failed = self.store.jobs_in_state("failed", None if scope.is_empty() else scope)
        return [job.to_dict() for job in failed]

    def job(self, event_id: str) -> dict[str, Any] | None:
        found = self.store.job(check_memory_id(event_id))
        return None if found is None else found.to_dict()


def _stored_message(record: MessageRecord, extract: bool) -> NewMessage:
    """A queued job's message as its add gave it (it is stored already: no vector needed)."""
    return NewMessage(
        id=record.id, role=record.role, content=record.content, name=record.name,
        observed_at=record.observed_at,
        metadata=None if record.metadata is None else json.loads(record.metadata),
        extract=extract,
    )  # fmt: skip
