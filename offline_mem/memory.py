"""`Memory`: the public, Mem0-compatible API over one memory file.

Each method validates everything first, runs the models outside any transaction, then hands the
store one write that is a single transaction. Results keep Mem0's shapes. `Memory` holds its
collaborators and hands them their calls: the reads (get, get_all, search, search_messages,
history) go to a `MemoryReader` (memory_parts/reads.py); an add's arguments are checked by
memory_parts/add_call.py and its write plan built by an `AddWriter` (memory_parts/writes.py);
the extraction jobs of async adds go to `ExtractionJobs` (memory_parts/jobs.py), and their
messages' indexing to a `MessageIndexer` (memory_parts/message_indexing.py); update,
delete, delete_all, reset and compact to a `MemoryEditor` (memory_parts/edits.py). What is
left here is the public signatures, their documentation and which collaborator runs a call.
The store and the models a caller does not hand in are made by memory_parts/components.py.
"""

from __future__ import annotations

import threading
from datetime import date, datetime
from typing import Any

from .config import (
    MemoryConfig,
    redacted_url,
    resolve_db_path,
    resolve_models_dir,
    resolve_store_url,
)
from .memory_parts import components
from .memory_parts.add_call import check_add_call
from .memory_parts.edits import UNSET, MemoryEditor
from .memory_parts.jobs import ExtractionJobs
from .memory_parts.message_indexing import MessageIndexer
from .memory_parts.reads import DEFAULT_SEARCH_THRESHOLD, MemoryReader
from .memory_parts.writes import AddWriter
from .pinned.embedder import Embedder, QueryVectorCache
from .pinned.entities import EntityExtractor
from .pinned.extractor import Extractor
from .pinned.nlp import TextAnalyzer
from .pinned.process_tuning import claim_process
from .retrieval.ranking import Weights
from .retrieval.retriever import Retriever
from .store.interface import MemoryStore
from .store.job_worker import JobWorker
from .store.jobs import JobClaim, JobRecord
from .store.records import AddPlan
from .timeutil import utc_now
from .validation import reject_unknown_kwargs


class Memory:
    """Durable, searchable memories in one SQLite file, with pinned local models."""

    def __init__(
        self,
        config: MemoryConfig | dict[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        extractor: Extractor | None = None,
        entities: EntityExtractor | None = None,
        analyzer: TextAnalyzer | None = None,
    ) -> None:
        if not isinstance(config, MemoryConfig):
            config = MemoryConfig.from_dict(config)
        self.config = config
        self.weights = Weights(**config.ranking_weights) if config.ranking_weights else Weights()
        self.store_url = resolve_store_url(config)
        # what status and errors show: the file, or the database URL without its password
        self.path = (
            resolve_db_path(config) if self.store_url is None else redacted_url(self.store_url)
        )
        self.models_dir = resolve_models_dir(config.models_dir)
        if config.own_process:
            claim_process()
        self.embedder = embedder or components.load_embedder(config.embedder, self.models_dir)
        self._query_embedder = QueryVectorCache(self.embedder)  # shared by the two searches
        self.analyzer = analyzer or components.load_analyzer(config.nlp, self.models_dir)
        # Both load their model lazily, on first use, and keep it for the life of the Memory.
        self.extractor = extractor or components.default_extractor(config, self.models_dir)
        self.entities = entities or components.default_entities(config, self.models_dir)
        self.store: MemoryStore = components.open_store(
            config, store_url=self.store_url, path=self.path, embedder=self.embedder.identity
        )
        self._lock = threading.RLock()
        self._writer = AddWriter(
            self.store, embedder=self.embedder, analyzer=self.analyzer, entities=self.entities,
            extractor=self.extractor, nlp=config.nlp, lock=self._lock,
        )  # fmt: skip
        self._writer.index_pending_messages()
        self._indexer = MessageIndexer(self.store, self._writer, lock=self._lock)
        self._indexer.index_unfinished_jobs()
        self._worker = JobWorker(self.store, self._run_job)
        self._reader = MemoryReader(
            self.store,
            Retriever(self.store, self._query_embedder, self.analyzer, self.entities),
            self._query_embedder,
            self.entities,
            self.weights,
            messages_ready=self._indexer.wait,
        )
        self._editor = MemoryEditor(
            self.store, self._reader, embedder=self.embedder, analyzer=self.analyzer,
            entities=self.entities, lock=self._lock,
        )  # fmt: skip
        self._jobs = ExtractionJobs(
            self.store, self._worker, self._writer.extract, indexer=self._indexer, lock=self._lock,
            embedder_sha256=self.embedder.identity.sha256, start_worker=config.job_worker,
        )  # fmt: skip
        if config.job_worker and self.store.pending_jobs():
            self._worker.start()  # jobs left by a process that ended, or another one's

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Memory:
        return cls(MemoryConfig.from_dict(config))

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Index the async adds' messages, let a running extraction job finish (queued ones stay
        queued in the file), then close the file and release the models."""
        self._indexer.close()
        self._worker.stop()
        self.store.close()
        self.embedder.close()
        self.extractor.close()
        self.entities.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -------------------------------------------------------------------------------

    def add(
        self,
        messages: str | dict[str, Any] | list[dict[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
        expiration_date: Any = None,
        timestamp: Any = None,
        async_mode: bool | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Store memories from messages. `infer=False` keeps one memory per non-system message.

        With `async_mode=True` (default: the config's `async_mode`) an add that runs the
        extractor stores its messages and queues the extraction in one transaction, and returns
        `{"results": [], "status": "PENDING", "event_id": <job id>}` at once; the worker thread
        adds the facts later (see `flush`, `job`). The messages are embedded and indexed just
        after the call returns, in a thread of this Memory: its searches wait for that, so they
        find the messages from then on; another process finds them once indexed (normally tens
        of milliseconds later). A job's extraction never runs before its messages are indexed."""
        reject_unknown_kwargs("add", unknown)
        call = check_add_call(
            messages, user_id=user_id, agent_id=agent_id, run_id=run_id, metadata=metadata,
            infer=infer, memory_type=memory_type, prompt=prompt, expiration_date=expiration_date,
            timestamp=timestamp, async_mode=async_mode, default_async=self.config.async_mode,
            default_instructions=self.config.custom_instructions,
        )  # fmt: skip
        new_messages = [self._writer.new_message(m, call.call_time) for m in call.messages]
        if call.kind is None:
            return call.reported(self._writer.add_raw(
                call.scope, call.messages, new_messages, call.metadata, call.expiration_date
            ))  # fmt: skip
        if call.async_mode:
            job = self._jobs.new_job(
                new_messages, call.kind, call.metadata, call.expiration_date, call.instructions
            )
            # the messages without their index rows: the indexer writes those after the return
            plan = AddPlan(scope=call.scope, messages=new_messages, memories=[],
                           embedder_sha256=self.embedder.identity.sha256)  # fmt: skip
            return call.reported(self._jobs.enqueue(plan, job))
        # extraction's modules: a search or raw add never loads them
        from .extraction import planner

        request = planner.AddRequest(
            scope=call.scope, messages=new_messages, metadata=call.metadata,
            expiration_date=call.expiration_date, instructions=call.instructions, now=utc_now(),
        )  # fmt: skip
        self._jobs.wait_for_queued(call.scope)  # the scope's async adds came first: theirs first
        plan, results = self._writer.extract(call.kind, request)
        self._writer.apply(plan)
        return call.reported({"results": results})

    def _run_job(self, job: JobRecord, claim: JobClaim) -> bool:
        """The worker's call: run a claimed job (ExtractionJobs.run_job)."""
        return self._jobs.run_job(job, claim)

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        *,
        data: str | None = None,
        metadata: dict[str, Any] | None = None,
        expiration_date: Any = UNSET,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Change a memory's text (re-embedded), merge its metadata, or set/clear its expiry.
        `data=` is Mem0's name for the text."""
        reject_unknown_kwargs("update", unknown)
        return self._editor.update(
            memory_id, text, data=data, metadata=metadata, expiration_date=expiration_date,
            user_id=user_id, agent_id=agent_id, run_id=run_id,
        )  # fmt: skip

    def delete(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Delete a memory (a DELETE history row is kept), or a stored message by its id (its
        vector and provenance links go with it; the memories extracted from it stay)."""
        reject_unknown_kwargs("delete", unknown)
        return self._editor.delete(memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id)

    def delete_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """Delete every memory matching all the ids given, and those scopes' messages."""
        reject_unknown_kwargs("delete_all", unknown)
        return self._editor.delete_all(user_id=user_id, agent_id=agent_id, run_id=run_id)

    def reset(self) -> None:
        """Remove everything from the memory file (schema and model pins stay)."""
        self._editor.reset()

    def compact(self) -> dict[str, int]:
        """Give the file's free pages back to the file system (after deletes), and leave no
        deleted text in the file or its WAL. Safe to interrupt: the file stays as it was or is
        compacted whole. Returns `{"bytes_before", "bytes_after", "free_bytes_before"}`."""
        return self._editor.compact()

    # -- reads (MemoryReader) ----------------------------------------------------------------

    def get(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> dict[str, Any] | None:
        """The memory, or None. Expired memories are returned marked `"expired": True`. The id
        of a stored message (a `"kind": "message"` search result) gives that message."""
        return self._reader.get(
            memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id, **unknown
        )

    def get_all(
        self,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 20,
        offset: int = 0,
        show_expired: bool = False,
        include_superseded: bool = False,
        as_of: str | date | datetime | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """The memories that match `filters`, newest first: `top_k` of them from `offset`.

        `as_of` (a date, a datetime or an ISO 8601 string; a date means the end of that day,
        UTC): the memories that were true then, as this file knew it then. A fact counts when
        its message's date (else the day it was stored) is not after it and no fact that
        superseded it had been said by then; superseded facts come back in that case, and
        expiry is judged at that moment. A text changed with `update` reads as it is now."""
        return self._reader.get_all(
            filters=filters, top_k=top_k, offset=offset, show_expired=show_expired,
            include_superseded=include_superseded, as_of=as_of, **unknown,
        )  # fmt: skip

    def search(
        self,
        query: str,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 20,
        threshold: float | None = DEFAULT_SEARCH_THRESHOLD,
        show_expired: bool = False,
        include_superseded: bool = False,
        include_sources: bool = False,
        include_messages: bool = True,
        explain: bool = False,
        resolve_references: bool = True,
        as_of: str | date | datetime | None = None,
        reference_date: str | date | datetime | None = None,
        **unknown: Any,
    ) -> dict[str, Any]:
        """The facts and stored messages of the filtered scope that best match `query`, in one
        ranking, best first. Every item has `"kind": "fact"` or `"kind": "message"`.

        Facts: candidates from vector similarity, keyword (BM25) and entity signals; `score` is
        their weighted sum on a fixed [0, 1] scale (see ranking.py). Messages: scored on the same
        scale by their own text (similarity and entities). Facts take at most 20% of the places
        (evidence.py says why). `threshold` drops lower scores. A message item
        has `id`, `memory` (the turn as "Name: content" when it has a name), `content`, `role`,
        `name`, `created_at`, `observed_at`, `memory_ids` (the facts extracted from it) and
        `score`. `include_messages=False` returns facts only; messages carry no metadata, so
        they are left out too when `filters` holds anything but exact scope ids.
        `explain=True` adds each signal's contribution as `score_details`.

        A query naming someone by relation ("Which city does my neighbour live in?") is
        searched again with the name its first results give ("... does <name> live in?"). The
        facts are then the memory that gave the name, followed by the two rankings taken in
        turn (references.py); each keeps the score of the query that found it first, and
        `explain=True` adds `resolved_query`.
        `resolve_references=False` searches the query as given only.

        `as_of`: search what was true on that date, as `get_all(as_of=...)` reads it; messages
        said after it are left out too. `reference_date` is Mem0's name for the same."""
        return self._reader.search(
            query, filters=filters, top_k=top_k, threshold=threshold, show_expired=show_expired,
            include_superseded=include_superseded, include_sources=include_sources,
            include_messages=include_messages, explain=explain,
            resolve_references=resolve_references, as_of=as_of, reference_date=reference_date,
            **unknown,
        )  # fmt: skip

    def search_messages(
        self,
        query: str,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        threshold: float | None = None,
        resolve_references: bool = True,
        **unknown: Any,
    ) -> dict[str, Any]:
        """The stored messages (not memories) of a scope closest to `query`, best first.

        Extraction can miss what a later question needs; the messages themselves stay
        searchable. `filters` names the scope by `user_id`, `agent_id` and/or `run_id` (exact
        values; messages carry no metadata). `score` is the cosine similarity of the query to
        the message; `threshold` drops lower scores. Each result lists `memory_ids`, the
        memories extracted from that message. System messages are not indexed. Relational
        references are resolved as in `search` ("my neighbour" in a message counts only when
        its speaker is the person the query names)."""
        return self._reader.search_messages(
            query, filters=filters, top_k=top_k, threshold=threshold,
            resolve_references=resolve_references, **unknown,
        )  # fmt: skip

    def history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        **unknown: Any,
    ) -> list[dict[str, Any]]:
        """Every ADD/UPDATE/SUPERSEDE/DELETE of the memory, oldest first; kept after deletion.
        With a scope named (as for `get`), only the history of a live memory of that scope: a
        deleted memory's row, and the scope it had, are gone from the file, so its history is
        returned only to a call that names no scope."""
        return self._reader.history(
            memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id, **unknown
        )

    # -- extraction jobs (ExtractionJobs) ------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Block until the memory file has no queued or running extraction job (of this or any
        process), starting this Memory's worker even when the config's `job_worker` is false;
        `FlushTimeoutError` after `timeout` seconds (the jobs stay queued). Failed jobs do not
        count: see `failed_jobs`."""
        self._jobs.flush(timeout)

    def pending(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> int:
        """How many extraction jobs are queued or running (of the ids given, matched as
        delete_all matches them; of the whole file when none is given)."""
        return self._jobs.pending(user_id=user_id, agent_id=agent_id, run_id=run_id)

    def failed_jobs(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """The jobs that failed every run (oldest first), with their last error; their
        messages are stored and searchable, only their facts are missing."""
        return self._jobs.failed_jobs(user_id=user_id, agent_id=agent_id, run_id=run_id)

    def job(self, event_id: str) -> dict[str, Any] | None:
        """An async add's job by its `event_id`: `status` PENDING, RUNNING, SUCCEEDED (with the
        add's `results`) or FAILED (with its `error`); None when unknown or deleted."""
        return self._jobs.job(event_id)

    def chat(self, query: str) -> Any:
        raise NotImplementedError("chat() is not part of the library API; see `offline-mem chat`")
