"""The three systems behind one interface: add a chunk of turns, search a question.

Every system receives the same chunks (the same turns, roles, speaker names and session date)
and returns, for each retrieved memory, its text, a date to show the answer model and the dia_ids
of the turns it came from (provenance, for evidence recall):

    offline_mem  Memory.add(infer=True, timestamp=session date); top-k of `Memory.search`
                 (facts and stored turns in one ranking, as a user gets it); a fact's source
                 messages and a turn's content map back to dia_ids by their exact content
    naive        every turn stored verbatim ("Speaker: text"), top-k by cosine of the pinned
                 embedder's vectors; no model at write time
    mem0         Mem0 2.2.1 local (see mem0_peer.py); Mem0 keeps no per-memory provenance, so
                 each add carries its chunk's dia_ids in metadata and a memory is credited with
                 every turn of the chunk that produced it (generous to Mem0)
"""

from __future__ import annotations

import functools
import json
import os
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from .loader import Turn

TRACE_ENV = "OFFLINE_MEM_BENCH_TRACE"  # set: offline_mem's model calls go to <workdir>/trace.jsonl


@dataclass(frozen=True)
class ChunkMessage:
    turn: Turn
    role: str  # "user" for speaker_a, "assistant" for speaker_b
    name: str  # the speaker, as a message name (no whitespace)


@dataclass
class AddOutcome:
    seconds: float
    stored: int = 0  # memories this add created
    error: str | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    hit_max_tokens: bool = False


@dataclass(frozen=True)
class Hit:
    text: str
    date: str | None  # YYYY-MM-DD shown to the answer model
    dia_ids: tuple[str, ...]


@dataclass
class LlmCall:
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    error: str | None = None


@dataclass
class CallLog:
    calls: list[LlmCall] = field(default_factory=list)

    def since(self, start: int) -> list[LlmCall]:
        return self.calls[start:]


def summarize_calls(outcome: AddOutcome, calls: list[LlmCall]) -> AddOutcome:
    outcome.llm_calls = len(calls)
    outcome.prompt_tokens = sum(c.prompt_tokens for c in calls)
    outcome.completion_tokens = sum(c.completion_tokens for c in calls)
    outcome.hit_max_tokens = any(c.finish_reason == "length" for c in calls)
    return outcome


class System(ABC):
    name: str
    uses_llm_at_write: bool = True

    @abstractmethod
    def add(self, user_id: str, chunk: list[ChunkMessage], when: datetime | None) -> AddOutcome:
        """Store one chunk of turns, observed at `when`."""

    @abstractmethod
    def search(self, user_id: str, query: str, top_k: int) -> list[Hit]:
        """The top-k memories of `user_id` for `query`, best first."""

    @abstractmethod
    def memory_count(self) -> int: ...

    @abstractmethod
    def storage_bytes(self) -> int: ...

    def warm_up(self) -> None:  # noqa: B027 - optional hook
        """Load what searches need (embedder, spaCy) before anything is timed."""

    def can_reuse(self) -> bool:
        """Whether the system's storage already holds a previous run's adds (--reuse-ingest)."""
        return False

    def index_chunk(self, user_id: str, chunk: list[ChunkMessage]) -> None:  # noqa: B027
        """Learn a chunk's dia_ids without adding it (with --reuse-ingest)."""

    def finish_ingest(self) -> None:  # noqa: B027 - optional hook
        """Release what only writes need (e.g. the extraction model)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


def _day(when: datetime | None) -> str | None:
    return None if when is None else when.date().isoformat()


def _files_size(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        if path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        elif path.exists():
            total += path.stat().st_size
    return total


# -- offline_mem ------------------------------------------------------------------------------


def _trace(trace: Path | None, record: dict[str, Any]) -> None:
    if trace is not None:
        with trace.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def make_recording_extractor(inner: Any, log: CallLog, trace: Path | None = None) -> Any:
    """An Extractor that records each call's tokens and failure, then delegates to `inner`;
    with `trace`, each extraction call's prompt, answer, tokens and seconds (of which prompt
    evaluation), each check's seconds and each add's wall time are appended to that JSONL file
    (dataset text: it stays in the workdir, for replaying checks on the model's raw facts and
    splitting an add's time)."""
    from offline_mem.errors import ExtractionError
    from offline_mem.pinned.extractor import Extractor

    class RecordingExtractor(Extractor):
        @property  # type: ignore[override]
        def identity(self) -> Any:
            return inner.identity

        def extract(self, prompt: Any) -> Any:
            try:
                out = inner.extract(prompt)
            except ExtractionError as exc:
                reason = "length" if "did not end within" in str(exc) else "error"
                log.calls.append(LlmCall(0, 0, reason, error=str(exc)))
                raise
            finish = "length" if out.truncated else "stop"  # cut: the finished part was kept
            log.calls.append(LlmCall(out.prompt_tokens, out.completion_tokens, finish))
            _trace(trace, {
                "kind": prompt.kind, "messages": list(prompt.messages), "data": out.data,
                "truncated": out.truncated,
                "prompt_tokens": out.prompt_tokens, "cached_tokens": out.cached_tokens,
                "completion_tokens": out.completion_tokens, "seconds": out.seconds,
                "prompt_seconds": out.prompt_seconds, "guessed_tokens": out.guessed_tokens,
            })  # fmt: skip
            return out

        def choose(self, prompt: Any, prefix: str, options: Any) -> dict[str, float]:
            started = time.perf_counter()
            chosen = inner.choose(prompt, prefix, options)
            log.calls.append(LlmCall(0, 0, "stop"))  # one forward pass, nothing written
            _trace(trace, {
                "kind": "choose", "seconds": time.perf_counter() - started,
                "messages": list(prompt.messages), "prefix": prefix, "options": list(options),
                "chosen": chosen,
            })  # fmt: skip
            return chosen

        def close(self) -> None:
            inner.close()

    return RecordingExtractor()


def _choose_key(messages: Any, prefix: str, options: Any) -> str:
    return json.dumps([list(messages), prefix, list(options)], ensure_ascii=False, sort_keys=True)


class TraceReplay:
    """The model's answers of an earlier traced run (OFFLINE_MEM_BENCH_TRACE), served again in
    the same order, so the checks can be left out one at a time (--without) on the same model
    output without paying for the model: the i-th add of a user gets the facts answers of that
    user's i-th traced add, call by call, whatever its prompt (a prompt shows existing memories,
    which change when a check does). A supersession question (`choose`) is answered from the
    trace only when its prompt is the traced one, else by the model; `fallbacks` counts those.
    A traced add that failed in a model call (an answer cut at max_tokens is not traced) fails
    again at that call with ExtractionError (the report's failed adds count them)."""

    def __init__(self, trace: Path) -> None:
        self.adds: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
        self.errors: dict[str, list[str | None]] = defaultdict(list)
        self.chosen: dict[str, dict[str, float]] = {}
        calls: list[dict[str, Any]] = []
        for line in trace.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["kind"] == "add":
                if "user_id" not in record:
                    raise ValueError(f"{trace}: add records without user_id (an older trace)")
                self.adds[record["user_id"]].append(calls)
                # traces written before the field say no error: an add of theirs that runs
                # out of traced answers is taken as one that failed ("unknown")
                self.errors[record["user_id"]].append(record.get("error", "unknown"))
                calls = []
            elif record["kind"] == "choose":
                key = _choose_key(record["messages"], record["prefix"], record["options"])
                self.chosen[key] = record["chosen"]
            else:
                calls.append(record)
        self.cursor: dict[str, int] = defaultdict(int)
        self.pending: list[dict[str, Any]] = []
        self.fallbacks = 0
        self.error: str | None = None  # the current add's traced error

    def begin_add(self, user_id: str) -> None:
        if self.pending:
            raise RuntimeError(f"{len(self.pending)} traced answers of the last add were not used")
        self.pending = list(self.adds[user_id][self.cursor[user_id]])
        self.error = self.errors[user_id][self.cursor[user_id]]
        self.cursor[user_id] += 1

    def extractor(self, inner: Any) -> Any:
        from offline_mem.errors import ExtractionError
        from offline_mem.pinned.extractor import ExtractionOutput, Extractor

        replay = self

        class ReplayExtractor(Extractor):
            @property  # type: ignore[override]
            def identity(self) -> Any:
                return inner.identity

            def extract(self, prompt: Any) -> Any:
                if not replay.pending and replay.error is not None:  # it failed here
                    raise ExtractionError(f"replayed from the trace: {replay.error}")
                if not replay.pending or replay.pending[0]["kind"] != prompt.kind:
                    raise RuntimeError(f"no traced {prompt.kind} answer left for this add")
                r = replay.pending.pop(0)
                return ExtractionOutput(
                    data=r["data"], text=json.dumps(r["data"], ensure_ascii=False),
                    prompt_tokens=r["prompt_tokens"], cached_tokens=r["cached_tokens"],
                    completion_tokens=r["completion_tokens"],
                    truncated=r.get("truncated", False),
                )  # fmt: skip

            def choose(self, prompt: Any, prefix: str, options: Any) -> dict[str, float]:
                key = _choose_key(prompt.messages, prefix, options)
                if key in replay.chosen:
                    return replay.chosen[key]
                replay.fallbacks += 1
                return dict(inner.choose(prompt, prefix, options))

            def close(self) -> None:
                inner.close()

        return ReplayExtractor()


def leave_out(check: str) -> None:
    """Run offline_mem without one of its fact checks (a class name in
    `checks.pipeline.FACT_CHECKS`), or with `ChangeGate` without the supersession gate (every
    fact is then asked whether it changed an older one): for the per-check ablation."""
    from offline_mem.extraction import planner, supersession
    from offline_mem.extraction.checks import pipeline

    if check == "ChangeGate":
        supersession.states_a_change = lambda text, lexicon=None: True  # type: ignore[assignment]
        return
    kept = tuple(c for c in pipeline.FACT_CHECKS if type(c).__name__ != check)
    if len(kept) == len(pipeline.FACT_CHECKS):
        names = [type(c).__name__ for c in pipeline.FACT_CHECKS]
        raise ValueError(f"no fact check named {check!r}; there are {names} and ChangeGate")
    planner.check_facts = functools.partial(pipeline.check_facts, checks=kept)  # type: ignore[assignment]


class OfflineMemSystem(System):
    name = "offline_mem"

    def __init__(
        self,
        workdir: Path,
        *,
        extractor: str,
        threads: int,
        infer: bool = True,
        replay: Path | None = None,
        without: str | None = None,
    ) -> None:
        from offline_mem import Memory
        from offline_mem.config import resolve_models_dir
        from offline_mem.pinned.extractor import LlamaExtractor

        self.path = workdir / "offline_mem.db"
        self.infer = infer
        self.log = CallLog()
        self.inner = LlamaExtractor(extractor, resolve_models_dir(None), threads=threads)
        self.trace = workdir / "trace.jsonl" if os.environ.get(TRACE_ENV) else None
        self.replay = TraceReplay(replay) if replay else None
        if without:
            leave_out(without)
        model = self.replay.extractor(self.inner) if self.replay else self.inner
        self.memory = Memory(
            {"path": str(self.path), "extractor": extractor, "threads": threads},
            extractor=make_recording_extractor(model, self.log, self.trace),
        )
        self.by_content: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.users: set[str] = set()

    def add(self, user_id: str, chunk: list[ChunkMessage], when: datetime | None) -> AddOutcome:
        from offline_mem.errors import OfflineMemError

        self.index_chunk(user_id, chunk)
        messages = [{"role": m.role, "content": m.turn.text, "name": m.name} for m in chunk]
        start_call = len(self.log.calls)
        if self.replay:
            self.replay.begin_add(user_id)
        started = time.perf_counter()
        error, stored = None, 0
        try:
            result = self.memory.add(
                messages,
                user_id=user_id,
                infer=self.infer,
                timestamp=None if when is None else when.isoformat(),
            )
            stored = sum(1 for r in result["results"] if r.get("event") == "ADD")
        except OfflineMemError as exc:
            error = f"{type(exc).__name__}: {exc}"
        outcome = AddOutcome(seconds=time.perf_counter() - started, stored=stored, error=error)
        # after its model calls: the calls since the previous "add" record are this add's
        _trace(
            self.trace,
            {"kind": "add", "user_id": user_id, "seconds": outcome.seconds, "error": error},
        )
        return summarize_calls(outcome, self.log.since(start_call))

    def search(self, user_id: str, query: str, top_k: int) -> list[Hit]:
        """`Memory.search` as a user calls it: facts and stored turns in one ranking. A fact's
        source messages and a turn's own content map back to dia_ids."""
        found = self.memory.search(
            query, filters={"user_id": user_id}, top_k=top_k, include_sources=True
        )
        index = self.by_content[user_id]
        hits = []
        for item in found["results"]:
            if item["kind"] == "message":
                ids = set(index.get(item["content"], set()))
            else:
                ids = set()
                for source in item.get("sources", []):
                    ids |= index.get(source.get("content", ""), set())
            hits.append(Hit(item["memory"], _observed_day(item), tuple(sorted(ids))))
        return hits

    def warm_up(self) -> None:
        self.memory.search("warm up", filters={"user_id": "warm-up"}, top_k=1)

    def can_reuse(self) -> bool:
        return self.memory.store.counts()["messages"] > 0

    def index_chunk(self, user_id: str, chunk: list[ChunkMessage]) -> None:
        self.users.add(user_id)
        for m in chunk:
            self.by_content[user_id][m.turn.text].add(m.turn.dia_id)

    def memory_count(self) -> int:
        return sum(
            len(self.memory.get_all(filters={"user_id": u}, top_k=10_000)["results"])
            for u in self.users
        )

    def storage_bytes(self) -> int:
        base = str(self.path)
        return _files_size([Path(base), Path(base + "-wal"), Path(base + "-shm")])

    def finish_ingest(self) -> None:
        self.inner.close()  # frees the GGUF; search needs only the embedder and spaCy

    def close(self) -> None:
        self.memory.close()


def _observed_day(item: dict[str, Any]) -> str | None:
    observed = item.get("observed_at") or item.get("created_at")
    return observed[:10] if observed else None


# -- naive ------------------------------------------------------------------------------------


def load_pinned_embedder(name: str = "all-MiniLM-L6-v2") -> Any:
    from offline_mem.pinned.embedder import SentenceTransformerEmbedder
    from offline_mem.pinned.model_files import model_identity, verified_model_dir
    from offline_mem.values import EmbedderIdentity

    ident = model_identity(name)
    identity = EmbedderIdentity(name=name, sha256=ident.sha256, dimension=ident.dimension or 0)
    return SentenceTransformerEmbedder(verified_model_dir(name), identity)


class NaiveSystem(System):
    """Every turn verbatim, exact cosine top-k over the pinned embedder's unit vectors."""

    name = "naive"
    uses_llm_at_write = False

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.rows: dict[str, list[Hit]] = defaultdict(list)
        self.vectors: dict[str, list[np.ndarray]] = defaultdict(list)

    def warm_up(self) -> None:
        self.embedder.embed_batch(["warm up"])

    def add(self, user_id: str, chunk: list[ChunkMessage], when: datetime | None) -> AddOutcome:
        started = time.perf_counter()
        texts = [f"{m.turn.speaker}: {m.turn.text}" for m in chunk if m.turn.text.strip()]
        ids = [m.turn.dia_id for m in chunk if m.turn.text.strip()]
        vectors = self.embedder.embed_batch(texts)
        for text, dia_id, vector in zip(texts, ids, vectors, strict=True):
            self.rows[user_id].append(Hit(text, _day(when), (dia_id,)))
            self.vectors[user_id].append(np.asarray(vector, dtype=np.float32))
        return AddOutcome(seconds=time.perf_counter() - started, stored=len(texts))

    def search(self, user_id: str, query: str, top_k: int) -> list[Hit]:
        if not self.rows[user_id]:
            return []
        matrix = np.vstack(self.vectors[user_id])
        scores = matrix @ np.asarray(self.embedder.embed_batch([query])[0], dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [self.rows[user_id][i] for i in order]

    def memory_count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())

    def storage_bytes(self) -> int:
        """What it holds in memory: float32 vectors plus UTF-8 texts (it writes no file)."""
        vectors = sum(v.nbytes for vs in self.vectors.values() for v in vs)
        texts = sum(len(h.text.encode()) for rows in self.rows.values() for h in rows)
        return vectors + texts


# -- Mem0 -------------------------------------------------------------------------------------


class Mem0System(System):
    name = "mem0"

    def __init__(self, workdir: Path, *, model_name: str, threads: int, n_ctx: int = 16384) -> None:
        from offline_mem.pinned.manifest import load_manifest
        from offline_mem.pinned.model_files import verified_model_dir

        from . import mem0_peer

        self.workdir = workdir
        mem0_peer.prepare_environment(workdir)
        mem0_peer.install_spacy_shim(workdir / "spacy_shim", verified_model_dir("en_core_web_sm"))
        spec = load_manifest().get(model_name)
        self.server = mem0_peer.LlamaServer(
            verified_model_dir(model_name) / spec.primary,
            chat_format=spec.chat_format or "",
            alias=model_name,
            n_ctx=n_ctx,
            threads=threads,
            log_path=workdir / "server.log",
        )
        self.server.start()
        self.log = CallLog()
        embedder_name = "all-MiniLM-L6-v2"
        from mem0 import Memory as Mem0Memory

        config = mem0_peer.mem0_config(
            base_url=self.server.base_url,
            alias=model_name,
            embedder_dir=verified_model_dir(embedder_name),
            dimension=load_manifest().get(embedder_name).dimension or 384,
            workdir=workdir,
            callback=self._record,
        )
        self.memory = Mem0Memory.from_config(config)
        mem0_peer.patient_client(self.memory)
        self.users: set[str] = set()

    def warm_up(self) -> None:
        self.memory.search("warm up", filters={"user_id": "warm-up"}, top_k=1)

    def _record(self, _llm: Any, response: Any, _params: Any) -> None:
        usage = getattr(response, "usage", None)
        choice = response.choices[0] if getattr(response, "choices", None) else None
        self.log.calls.append(
            LlmCall(
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                finish_reason=getattr(choice, "finish_reason", None),
            )
        )

    def add(self, user_id: str, chunk: list[ChunkMessage], when: datetime | None) -> AddOutcome:
        self.users.add(user_id)
        messages = [{"role": m.role, "content": m.turn.text, "name": m.name} for m in chunk]
        metadata = {"dia_ids": [m.turn.dia_id for m in chunk], "session_date": _day(when) or ""}
        start_call = len(self.log.calls)
        started = time.perf_counter()
        error, stored = None, 0
        try:
            result = self.memory.add(messages, user_id=user_id, metadata=metadata)
            stored = sum(1 for r in result.get("results", []) if r.get("event") == "ADD")
        except Exception as exc:  # the peer's failures are data here, not a reason to stop
            error = f"{type(exc).__name__}: {exc}"
        outcome = AddOutcome(seconds=time.perf_counter() - started, stored=stored, error=error)
        return summarize_calls(outcome, self.log.since(start_call))

    def search(self, user_id: str, query: str, top_k: int) -> list[Hit]:
        found = self.memory.search(query, filters={"user_id": user_id}, top_k=top_k)
        hits = []
        for item in found.get("results", []):
            meta = item.get("metadata") or {}
            date = meta.get("session_date") or (item.get("created_at") or "")[:10] or None
            hits.append(Hit(item["memory"], date, tuple(meta.get("dia_ids") or ())))
        return hits

    def memory_count(self) -> int:
        return sum(
            len(self.memory.get_all(filters={"user_id": u}, top_k=10_000).get("results", []))
            for u in self.users
        )

    def storage_bytes(self) -> int:
        return _files_size([self.workdir / "qdrant", self.workdir / "history.db"])

    def can_reuse(self) -> bool:
        """Whether the Qdrant collection holds memories of an earlier run in this workdir."""
        store = getattr(self.memory, "vector_store", None)
        client, collection = getattr(store, "client", None), getattr(store, "collection_name", "")
        if client is None or not collection:
            return False
        try:
            return int(client.count(collection_name=collection).count) > 0
        except Exception:  # no collection yet
            return False

    def index_chunk(self, user_id: str, chunk: list[ChunkMessage]) -> None:
        self.users.add(user_id)  # its dia_ids travel in each memory's metadata

    def finish_ingest(self) -> None:
        self.server.stop()  # search embeds the query locally; it never calls the LLM

    def close(self) -> None:
        self.server.stop()
        close = getattr(self.memory, "close", None)
        if close is not None:
            close()
