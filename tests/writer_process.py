"""A writer for the crash and concurrency tests: a seeded mix of operations on one memory file.

    python tests/writer_process.py DB --seed S [--proc K --start N --count C --shared --stall-ms M]

Operation i is drawn from random.Random(f"{S}:{K}:{i}") and the file's current contents (targets
of update/delete are chosen among the memories the public API lists), so a writer restarted at
operation N continues the same sequence. For each operation it prints, flushed, one JSON line
{"t": "intent", ...} with everything needed to recognise the operation's effects BEFORE the call,
and {"t": "ack", "i": i, "result": ...} AFTER the call returned. Any exception is fatal: it prints
{"t": "error", ...} and exits 1. Every text carries the token "op<K>x<i>", unique per operation.

The models are fakes (FakeEmbedder, a scripted FakeExtractor, FakeEntities, WordAnalyzer), so a
start takes a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from offline_mem import Memory
from offline_mem.nlp import Analysis, TextAnalyzer
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer, changed_when

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


def make_memory(path: str) -> Memory:
    """A Memory with the default configuration (30 s busy timeout) and fake models."""
    return Memory(
        {"path": path},
        embedder=FakeEmbedder(),
        extractor=FakeExtractor(still_true=NOW_CHANGES),
        entities=FakeEntities(),
        analyzer=WordAnalyzer(),
    )


def scopes_of(proc: int) -> list[dict[str, str]]:
    """The writer's own scopes: two users (one also with an agent) and an agent alone."""
    return [
        {"user_id": f"p{proc}u0"},
        {"user_id": f"p{proc}u0", "agent_id": "ag"},
        {"user_id": f"p{proc}u1"},
        {"agent_id": f"p{proc}solo"},
    ]


SHARED_SCOPE = {"user_id": "shared"}


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
    memory: Memory, rng: random.Random, proc: int, i: int, shared: bool
) -> dict[str, Any]:
    """The operation's full description (what the test needs to check its effects)."""
    token = f"op{proc}x{i}"
    scopes = scopes_of(proc)
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
        # The message holds the facts' words: a fact naming what no message says is dropped.
        said = " ".join(fact.removeprefix("User ") for fact in facts)
        messages = [{"role": "user", "content": f"{sentence(rng, token)} {said}"}]
        if rng.random() < 0.5:
            messages.append({"role": "assistant", "content": f"{token} noted"})
        supersede = rng.random() < 0.35
        if supersede:  # the fake's check (NOW_CHANGES) finds the memory paired with it changed
            facts[0] += " now"
        return {"op": "add_infer", "scope": scope, "token": token, "messages": messages,
                "facts": facts, "supersede": supersede, "metadata": {"kind": "infer"}}  # fmt: skip
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
    if kind == "add_infer":
        assert isinstance(memory.extractor, FakeExtractor)
        memory.extractor.script.append(answer(*op["facts"]))
        return memory.add(op["messages"], **op["scope"], metadata=op["metadata"], infer=True)
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
    args = parser.parse_args(argv)
    try:
        memory = make_memory(args.db)
        if args.stall_ms:
            memory.store.tracer = lambda sql, params: time.sleep(args.stall_ms / 1000)
        emit({"t": "ready"})
        for i in range(args.start, args.start + args.count):
            rng = random.Random(f"{args.seed}:{args.proc}:{i}")
            op = plan_operation(memory, rng, args.proc, i, args.shared)
            emit({"t": "intent", "i": i, **op})
            result = perform(memory, op)
            emit({"t": "ack", "i": i, "result": result})
        memory.close()
    except Exception as exc:  # report any error that reached the caller, then fail
        emit({"t": "error", "type": type(exc).__name__, "message": str(exc),
              "traceback": traceback.format_exc()})  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
