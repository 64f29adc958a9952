"""A writer for the crash and concurrency tests: a seeded mix of operations on one store.

    python tests/writer_process.py DB --seed S [--proc K --start N --count C --shared --stall-ms M
                                               --async-share P --extract-ms E --drain]

DB is a memory file's path or a PostgreSQL database's postgresql:// URL. Operation i is drawn
from random.Random(f"{S}:{K}:{i}") and the store's current contents (targets of update/delete
are chosen among the memories the public API lists), so a writer restarted at operation N
continues the same sequence. For each operation it prints, flushed, one JSON line
{"t": "intent", ...} with everything needed to recognise the operation's effects BEFORE the call,
and {"t": "ack", "i": i, "result": ...} AFTER the call returned. Any exception is fatal: it prints
{"t": "error", ...} and exits 1. Every text carries the token "op<K>x<i>", unique per operation.

With --async-share P, that share of the extraction adds is queued (`async_mode=True`, op
"add_async", in the writer's async scope with --shared) and some operations are a "flush". The
Memory's worker runs the jobs; each job's run, from before its extraction to after its commit,
holds the same lock as an operation's intent..ack, and prints {"t": "job_intent", "event_id"}
before and {"t": "job_done", "event_id", "result"} (or "job_lost") after, so the log is the order
in which the file changed. --drain only runs the queued jobs (flush) and exits.

The models are fakes (FakeEmbedder, an extractor that reads the facts out of the new message's
"op<K>x<i>f<j>" tokens, FakeEntities, WordAnalyzer), so a start takes a fraction of a second and
any process can run any process's queued jobs.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from offline_mem import Memory
from offline_mem.config import is_postgres_url
from offline_mem.pinned.extractor import ExtractionOutput, Prompt
from offline_mem.pinned.nlp import Analysis, TextAnalyzer
from offline_mem.store.jobs import JobClaim, JobRecord
from offline_mem.testing import (
    FakeEmbedder,
    FakeEntities,
    FakeExtractor,
    answer,
    changed_when,
    new_message_lines,
)

WORDS = [
    "coffee",
    "tea",
    "garden",
    "piano",
    "violin",
    "bicycle",
    "marathon",
    "recipe",
    "novel",
    "museum",
    "harbour",
    "lantern",
    "orchard",
    "pepper",
    "saffron",
    "cobalt",
    "meadow",
    "glacier",
    "canyon",
    "falcon",
    "otter",
    "walnut",
    "quartz",
    "velvet",
    "ember",
    "willow",
    "tundra",
    "sonnet",
    "fresco",
    "mosaic",
    "compass",
    "beacon",
    "anchor",
    "summit",
    "prairie",
    "lagoon",
]
NAMES = ("Lisbon", "Marta", "Porto", "Kenji", "Oslo", "Amara", "Quito", "Tobias")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(["a", "an", "the", "is", "in", "of", "to", "and", "user"])


class WordAnalyzer(TextAnalyzer):
    """Lowercase words minus a few stop words: a fast, deterministic stand-in for spaCy."""

    def analyze_batch(self, texts: Sequence[str]) -> list[Analysis]:
        out = []
        for text in texts:
            tokens = _WORD.findall(text.lower())
            out.append(Analysis(terms=[t for t in tokens if t not in _STOP], tokens=tokens))
        return out


# The fake's supersession check: an old memory changed when the new fact ends in " now".
NOW_CHANGES = changed_when(lambda old, new: new.endswith(" now"))
FACT_TOKEN = re.compile(r"\bop\d+x\d+f\d+\b")


class TokenFactsExtractor(FakeExtractor):
    """States the facts its first new message spells out: each "op<K>x<i>f<j>" token and the
    words after it (up to the next token) are a fact "User <token> <words>". Needs no script,
    so a job queued by one process can be run by any other."""

    def __init__(self) -> None:
        super().__init__(still_true=NOW_CHANGES)

    def extract(self, prompt: Prompt) -> ExtractionOutput:
        if prompt.kind == "facts":
            first = new_message_lines(prompt)[0]
            starts = [m.start() for m in FACT_TOKEN.finditer(first)]
            facts = [first[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
            self.script.append(answer(*[f"User {fact}" for fact in facts]))
        return super().extract(prompt)


class LoggedMemory(Memory):
    """Runs each queued job under `log_lock`, between a job_intent and a job_done line, after
    `job_delay_s` of "model time" spent claimed but outside the lock (the writer goes on)."""

    log_lock = threading.Lock()
    job_delay_s = 0.0

    def _run_job(self, job: JobRecord, claim: JobClaim) -> bool:
        time.sleep(self.job_delay_s)
        with self.log_lock:
            emit({"t": "job_intent", "event_id": job.id})
            done = super()._run_job(job, claim)
            found = self.store.job(job.id) if done else None
            results = None if found is None else found.results
            emit({"t": "job_done" if done else "job_lost", "event_id": job.id,
                  "result": {"results": results}})  # fmt: skip
        return done


def make_memory(location: str, *, extract_ms: float = 0.0) -> Memory:
    """A Memory on the file or database at `location`, with the default configuration (30 s
    busy timeout) and fake models."""
    memory = LoggedMemory(
        {"store": location} if is_postgres_url(location) else {"path": location},
        embedder=FakeEmbedder(),
        extractor=TokenFactsExtractor(),
        entities=FakeEntities(),
        analyzer=WordAnalyzer(),
    )
    memory.job_delay_s = extract_ms / 1000
    return memory


def scopes_of(proc: int) -> list[dict[str, str]]:
    """The writer's own scopes: two users (one also with an agent) and an agent alone."""
    return [
        {"user_id": f"p{proc}u0"},
        {"user_id": f"p{proc}u0", "agent_id": "ag"},
        {"user_id": f"p{proc}u1"},
        {"agent_id": f"p{proc}solo"},
    ]


SHARED_SCOPE = {"user_id": "shared"}


def async_scope(proc: int) -> dict[str, str]:
    """With --shared, where a writer queues its async adds: no other operation touches it, so
    the jobs' results may be applied in queue order whichever process ran them."""
    return {"user_id": f"p{proc}async"}


def sentence(rng: random.Random, token: str) -> str:
    words = rng.sample(WORDS, 4)
    if rng.random() < 0.6:
        words.insert(rng.randrange(len(words) + 1), rng.choice(NAMES))
    return f"{token} " + " ".join(words)


def targets(memory: Memory, rng: random.Random, scopes: list[dict[str, str]]) -> list[str]:
    scope = rng.choice(scopes)
    found = memory.get_all(
        filters=dict(scope), top_k=500, show_expired=True, include_superseded=True
    )["results"]
    return sorted(
        item["id"]
        for item in found
        if all(item.get(k) == scope.get(k) for k in ("user_id", "agent_id", "run_id"))
    )


def plan_operation(
    memory: Memory,
    rng: random.Random,
    proc: int,
    i: int,
    shared: bool,
    async_share: float = 0.0,
) -> dict[str, Any]:
    """The operation's full description (what the test needs to check its effects)."""
    token = f"op{proc}x{i}"
    scopes = scopes_of(proc)
    if async_share and rng.random() < 0.03:
        return {"op": "flush"}
    roll = rng.random()
    if shared and roll < 0.15:
        return {"op": "add_raw", "scope": SHARED_SCOPE, "token": token,
                "messages": [{"role": "user", "content": sentence(rng, token)}],
                "metadata": {"proc": proc}}  # fmt: skip
    if roll < 0.08:
        return {"op": "search", "scope": rng.choice(scopes), "query": sentence(rng, "q")}
    if roll < 0.30:
        ids = targets(memory, rng, scopes)
        if ids:
            text = sentence(rng, token) if rng.random() < 0.8 else None
            return {"op": "update", "id": rng.choice(ids), "text": text,
                    "metadata": {"op": i, "tag": token}}  # fmt: skip
    elif roll < 0.42:
        ids = targets(memory, rng, scopes)
        if ids:
            return {"op": "delete", "id": rng.choice(ids)}
    elif roll < 0.45:
        return {"op": "delete_all", "scope": rng.choice(scopes[:2] + scopes[3:])}
    scope = rng.choice(scopes)
    if rng.random() < 0.45:
        facts = [f"User {sentence(rng, f'{token}f{j}')}" for j in range(rng.randint(1, 3))]
        answer_at = rng.random()
        supersede = rng.random() < 0.35
        if supersede:  # the fake's check (NOW_CHANGES) finds the memory paired with it changed
            facts[0] += " now"
        # The message holds the facts' words: a fact naming what no message says is dropped.
        said = " ".join(fact.removeprefix("User ") for fact in facts)
        messages = [{"role": "user", "content": f"{sentence(rng, token)} {said}"}]
        if answer_at < 0.5:
            messages.append({"role": "assistant", "content": f"{token} noted"})
        queued = bool(async_share) and rng.random() < async_share
        if queued and shared:
            scope = async_scope(proc)
        return {"op": "add_async" if queued else "add_infer", "scope": scope, "token": token,
                "messages": messages, "facts": facts, "supersede": supersede,
                "metadata": {"kind": "infer"}}  # fmt: skip
    first = sentence(rng, token)
    messages = [{"role": "user", "content": first}]
    for _ in range(rng.randint(0, 2)):
        role = rng.choice(["user", "assistant", "system"])
        messages.append({"role": role, "content": sentence(rng, token + "m")})
    if rng.random() < 0.2:
        messages.append({"role": "user", "content": first})  # a duplicate within the batch
    if rng.random() < 0.1:
        messages.append({"role": "user", "content": "   "})  # kept as a message, not a memory
    return {"op": "add_raw", "scope": scope, "token": token, "messages": messages,
            "metadata": {"kind": "raw", "n": i} if rng.random() < 0.5 else {}}  # fmt: skip


def perform(memory: Memory, op: dict[str, Any]) -> Any:
    kind = op["op"]
    if kind == "add_raw":
        return memory.add(op["messages"], **op["scope"], metadata=op["metadata"], infer=False)
    if kind in ("add_infer", "add_async"):
        queued = kind == "add_async"
        return memory.add(op["messages"], **op["scope"], metadata=op["metadata"], async_mode=queued)
    if kind == "update":
        return memory.update(op["id"], op["text"], metadata=op["metadata"])
    if kind == "delete":
        return memory.delete(op["id"])
    if kind == "delete_all":
        return memory.delete_all(**op["scope"])
    if kind == "search":
        found = memory.search(op["query"], filters=dict(op["scope"]), threshold=None)
        return {"results": [
            {k: item.get(k) for k in ("id", "user_id", "agent_id", "run_id")}
            for item in found["results"]
        ]}  # fmt: skip
    raise ValueError(kind)


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--proc", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=10**9)
    parser.add_argument("--shared", action="store_true", help="also add to a shared scope")
    parser.add_argument(
        "--stall-ms", type=float, default=0.0,
        help="sleep this long before each SQL statement, so kills land inside transactions",
    )  # fmt: skip
    parser.add_argument("--async-share", type=float, default=0.0)
    parser.add_argument("--extract-ms", type=float, default=0.0, help="model time per job")
    parser.add_argument("--drain", action="store_true", help="run the queued jobs, then exit")
    args = parser.parse_args(argv)
    try:
        memory = make_memory(args.db, extract_ms=args.extract_ms)
        if args.stall_ms:
            memory.store.tracer = lambda sql, params: time.sleep(args.stall_ms / 1000)
        emit({"t": "ready"})
        if args.drain:
            memory.flush(timeout=300)
            args.count = 0
        lock = LoggedMemory.log_lock
        for i in range(args.start, args.start + args.count):
            rng = random.Random(f"{args.seed}:{args.proc}:{i}")
            with lock:
                op = plan_operation(memory, rng, args.proc, i, args.shared, args.async_share)
                emit({"t": "intent", "i": i, **op})
                if op["op"] != "flush":
                    emit({"t": "ack", "i": i, "result": perform(memory, op)})
            if op["op"] == "flush":  # outside the lock: the worker takes it for each job
                memory.flush(timeout=300)
                with lock:
                    emit({"t": "ack", "i": i, "result": None})
            time.sleep(0)  # let a waiting job have the lock
        memory.close()
    except Exception as exc:  # report any error that reached the caller, then fail
        emit({"t": "error", "type": type(exc).__name__, "message": str(exc),
              "traceback": traceback.format_exc()})  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
