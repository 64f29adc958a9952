"""The message index of async adds: their messages' vectors and keyword rows, written after the
add has returned.

An async add commits its messages without their index rows, with its job, and hands their ids to
this `Memory`'s `MessageIndexer`: one daemon thread that embeds and keyword-analyses them
(`AddWriter.embed_messages`) and writes their rows in one transaction (`index_messages`). The
accept so skips the embedding, which the extractor running beside it slows several-fold
(docs/server.md). What makes the delay invisible:
- in this process, a search that reads the messages' index first waits for the messages
  handed in before it (`wait`; nothing to wait for when idle);
- a job's messages are always indexed before its extraction runs (`ExtractionJobs.run_job`
  calls `index`), which also covers a process killed before its indexer ran and a job claimed
  by another process; and `Memory` indexes the messages of the jobs not done when it opens;
- `verify` does not hold a message of a job not done to the index's rule
  (store/integrity/vectors.py `awaiting_index`).
An indexing that fails here (the embedder raised) is logged and left to the job's run, where
the same failure fails the job's run.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence

from ..store.interface import MemoryStore
from ..store.records import NewMessage
from .writes import AddWriter

log = logging.getLogger(__name__)

UNFINISHED_STATES = ("queued", "running", "failed")  # a job whose messages may lack index rows


class MessageIndexer:
    """Indexes the messages of a `Memory`'s async adds, in a thread of its own or the caller's."""

    def __init__(self, store: MemoryStore, writer: AddWriter, *, lock: threading.RLock) -> None:
        self.store = store
        self.writer = writer
        self.lock = lock  # the Memory's: one write at a time from this process
        self._changed = threading.Condition()
        self._queued: deque[list[str]] = deque()  # message ids, an add's per entry
        self._submitted = 0  # adds handed in, ever
        self._finished = 0  # of them, indexed or failed
        self._thread: threading.Thread | None = None
        self._closing = False

    def index(self, message_ids: Sequence[str]) -> int:
        """Index those of the messages that exist and lack their index rows, in one transaction
        (the models run before it); how many. Raises what the models or the store raise."""
        rows = self.store.unindexed_message_rows(message_ids)
        if not rows:
            return 0
        messages = [
            NewMessage(id=r.id, role=r.role, content=r.content, name=r.name, observed_at=None)
            for r, _ in rows
        ]
        indexed = self.writer.embed_messages(messages, [])
        vectors = [m.vector for m in indexed if m.vector is not None]
        terms = [m.terms for m in indexed if m.terms is not None]
        with self.lock:
            self.store.index_messages([(r.seq, user) for r, user in rows], vectors, terms)
        return len(rows)

    def index_unfinished_jobs(self) -> int:
        """Index the messages of the jobs not done: those of an add whose process ended before
        its indexer ran, or whose indexing failed. Few: most jobs are done. A failure is logged
        (their jobs' runs index them)."""
        ids = [
            message["id"]
            for state in UNFINISHED_STATES
            for job in self.store.jobs_in_state(state)
            for message in job.request["messages"]
        ]
        try:
            return self.index(ids) if ids else 0
        except Exception as exc:
            log.warning(
                "indexing the messages of the jobs not done failed (%s: %s); their runs index "
                "them", type(exc).__name__, exc,
            )  # fmt: skip
            return 0

    def submit(self, message_ids: Sequence[str]) -> None:
        """Index the messages in the indexer's thread (started on first use)."""
        with self._changed:
            if self._closing:
                return  # their job's run indexes them
            self._queued.append(list(message_ids))
            self._submitted += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="offline_mem-message-index", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def wait(self) -> None:
        """Block until the messages submitted before this call are indexed (or failed to be)."""
        with self._changed:
            target = self._submitted
            while self._finished < target:
                self._changed.wait()

    def close(self) -> None:
        """Index what was submitted, then end the thread."""
        with self._changed:
            self._closing = True
            thread = self._thread
            self._changed.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _loop(self) -> None:
        while True:
            with self._changed:
                while not self._queued and not self._closing:
                    self._changed.wait()
                if not self._queued:
                    self._thread = None
                    return
                # everything queued meanwhile, in one transaction: fewer commits under load
                batches = list(self._queued)
                self._queued.clear()
            try:
                self.index([i for batch in batches for i in batch])
            except Exception as exc:
                log.warning(
                    "indexing the messages of %d async add(s) failed (%s: %s); their jobs' runs "
                    "index them", len(batches), type(exc).__name__, exc,
                )  # fmt: skip
            finally:
                with self._changed:
                    self._finished += len(batches)
                    self._changed.notify_all()
