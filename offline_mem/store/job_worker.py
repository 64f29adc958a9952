"""The background worker of a `Memory`: runs the extraction jobs of async adds (jobs.py).

One daemon thread per `Memory`, started when there is work (an async add; a file opened with
jobs left by a process that ended; `flush()`), and ended when the file has no job left. It
claims a job, runs it through `execute` while a heartbeat renews the claim's lease, and gives a
failed job MAX_ATTEMPTS runs before marking it failed (kept, with its error). `stop()` lets the
running job finish and leaves the others queued.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .interface import JobStore
from .jobs import JobClaim, JobRecord, new_owner_token

log = logging.getLogger(__name__)

LEASE_S = 60.0  # a claim not renewed for this long may be taken over (an owner stuck or gone)
POLL_S = 0.5  # how often to look again while jobs exist that cannot be claimed yet
MAX_ATTEMPTS = 3
RETRY_AFTER_S = (1.0, 4.0)  # the wait before the 2nd and the 3rd run of a failed job

# Runs a claimed job and commits its result; False when the claim turned out lost.
Execute = Callable[[JobRecord, JobClaim], bool]


class JobWorker:
    def __init__(self, queue: JobStore, execute: Execute, *, lease_s: float = LEASE_S) -> None:
        self._queue = queue
        self._execute = execute
        self._token = new_owner_token()
        self.lease_s = lease_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._kicked = False  # work was announced since the loop last looked
        self._stopping = False
        self._wake = threading.Event()
        self._progress = threading.Condition()

    @property
    def alive(self) -> bool:
        with self._lock:
            return self._thread is not None

    def start(self) -> None:
        """Make sure the thread runs (it may be ending: then a new one starts)."""
        with self._lock:
            if self._stopping:
                return
            self._kicked = True
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="offline_mem-jobs", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        """Let the running job finish, then end the thread; queued jobs stay queued."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def wait_progress(self, timeout: float) -> None:
        """Wait until a job ends (done, failed or lost) or `timeout` seconds pass."""
        with self._progress:
            self._progress.wait(timeout)

    def run_next(self) -> bool:
        """Claim one job and run it in the calling thread; False when none can be claimed."""
        job = self._queue.claim_job(self._token, lease_s=self.lease_s)
        if job is None:
            return False
        claim = JobClaim(job.seq, job.id, self._token)
        heartbeat = _Heartbeat(self._queue, claim, self.lease_s)
        try:
            if not self._execute(job, claim):
                log.info("extraction job %s was taken over or deleted: result dropped", job.id)
        except Exception as exc:
            wait = RETRY_AFTER_S[min(job.attempts, len(RETRY_AFTER_S) - 1)]
            state = self._queue.fail_job(
                claim, f"{type(exc).__name__}: {exc}", max_attempts=MAX_ATTEMPTS, retry_s=wait
            )
            log.warning(
                "extraction job %s failed (%s, run %d of %d)%s", job.id, type(exc).__name__,
                job.attempts + 1, MAX_ATTEMPTS, "; marked failed" if state == "failed" else "",
            )  # fmt: skip
        finally:
            heartbeat.stop()
            with self._progress:
                self._progress.notify_all()
        return True

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    self._thread = None
                    return
                self._kicked = False
            try:
                if self.run_next():
                    continue
                pending = self._queue.pending_jobs()
            except Exception as exc:  # the file is busy: look again later
                if self._queue.closed:  # closed under the worker (Memory.store.close())
                    with self._lock:
                        self._thread = None
                    return
                log.warning("extraction worker: %s: %s", type(exc).__name__, exc)
                pending = 1
            with self._lock:
                if self._stopping or (pending == 0 and not self._kicked):
                    self._thread = None
                    return
            self._wake.wait(POLL_S)
            self._wake.clear()


class _Heartbeat:
    """Renews a claim's lease every quarter lease while its job runs (a model call may take
    longer than the lease), in a thread of its own; stops when the claim is lost."""

    def __init__(self, queue: JobStore, claim: JobClaim, lease_s: float) -> None:
        self._queue = queue
        self._claim = claim
        self._lease_s = lease_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="offline_mem-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._lease_s / 4):
            try:
                if not self._queue.renew_claim(self._claim, lease_s=self._lease_s):
                    return
            except Exception as exc:  # a busy file: the next beat tries again
                log.warning("extraction job lease: %s: %s", type(exc).__name__, exc)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
