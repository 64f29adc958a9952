"""One `Memory` shared by many threads, and `AsyncMemory` under asyncio.gather: no error reaches a
caller, no acknowledged write is lost, the file's invariants hold, and a read snapshot open in
one thread never swallows another thread's write.

The operations are the crash and concurrency tests' seeded mix (tests/writer_process.py), each
thread on its own scopes plus one scope all share. OFFLINE_MEM_THREAD_OPS sets the operations
per thread (default 40, the CI size; the long variant is 500).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import threading
import time
from typing import Any

import pytest
from invariants import LogicalState, apply_operation, logical_state, table_dump, violations
from writer_process import WordAnalyzer, perform, plan_operation

from offline_mem import AsyncMemory, Memory
from offline_mem.pinned.extractor import ExtractionOutput, Prompt
from offline_mem.testing import (
    FakeEmbedder,
    FakeEntities,
    FakeExtractor,
    answer,
    changed_when,
    new_message_lines,
)

THREADS = 8
OPS = int(os.environ.get("OFFLINE_MEM_THREAD_OPS", "40"))
SEED = 20261201
TOKEN = re.compile(r"op\d+x\d+")


class KeyedExtractor(FakeExtractor):
    """Answers each facts prompt with the answer registered for the operation token of its last
    new message: threads share the extractor, so a script in call order would mix them up."""

    def __init__(self) -> None:
        super().__init__(still_true=changed_when(lambda old, new: new.endswith(" now")))
        self.answers: dict[str, dict[str, list[str]]] = {}

    def extract(self, prompt: Prompt) -> ExtractionOutput:
        if prompt.kind == "facts":
            tokens = TOKEN.findall("\n".join(new_message_lines(prompt)))
            self.script.append(self.answers.get(tokens[-1], {}) if tokens else {})
        return super().extract(prompt)


def shared_memory(path: str) -> Memory:
    return Memory({"path": path}, embedder=FakeEmbedder(), extractor=KeyedExtractor(),
                  entities=FakeEntities(), analyzer=WordAnalyzer())  # fmt: skip


def run_operation(memory: Memory, op: dict[str, Any]) -> Any:
    if op["op"] == "add_infer":
        memory.extractor.answers[op["token"]] = answer(*op["facts"])  # type: ignore[attr-defined]
        return memory.add(op["messages"], **op["scope"], metadata=op["metadata"], infer=True)
    return perform(memory, op)


def check_acknowledged(memory: Memory, logs: list[list[tuple[dict[str, Any], Any]]]) -> None:
    """Each thread's acknowledged operations, applied in its order (threads own disjoint
    scopes; the shared scope only gains raw adds), equal the file."""
    model = LogicalState()
    for log in logs:
        for op, result in log:
            apply_operation(model, op, result)
    assert violations(memory.store.db) == []
    assert model.differences(logical_state(memory.store.db)) == []


def test_eight_threads_of_mixed_operations_lose_nothing(tmp_path):
    memory = shared_memory(str(tmp_path / "m.db"))
    logs: list[list[tuple[dict[str, Any], Any]]] = [[] for _ in range(THREADS)]
    errors: list[str] = []
    start = threading.Barrier(THREADS)

    def worker(proc: int) -> None:
        start.wait()
        try:
            for i in range(OPS):
                op = plan_operation(memory, random.Random(f"{SEED}:{proc}:{i}"), proc, i, True)
                op["i"] = i
                logs[proc].append((op, run_operation(memory, op)))
        except Exception as exc:  # any error that reached a caller fails the test
            errors.append(f"thread {proc}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(p,)) for p in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert errors == []
    assert sum(len(log) for log in logs) == THREADS * OPS
    check_acknowledged(memory, logs)
    memory.close()


def test_async_memory_under_gather_loses_nothing_and_keeps_the_loop_turning(tmp_path):
    lags: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - before - 0.005)

    async def main() -> list[list[tuple[dict[str, Any], Any]]]:
        async with AsyncMemory(
            {"path": str(tmp_path / "m.db")}, embedder=FakeEmbedder(),
            extractor=KeyedExtractor(), entities=FakeEntities(), analyzer=WordAnalyzer(),
        ) as memory:  # fmt: skip
            logs: list[list[tuple[dict[str, Any], Any]]] = [[] for _ in range(THREADS)]

            async def worker(proc: int) -> None:
                for i in range(OPS // 2):
                    rng = random.Random(f"{SEED}:{proc}:{i}")
                    op = await memory._run(plan_operation, memory.sync, rng, proc, i, True)
                    op["i"] = i
                    logs[proc].append((op, await memory._run(run_operation, memory.sync, op)))

            async def searcher(k: int) -> None:
                found = await memory.search(f"word {k}", filters={"user_id": "shared"})
                assert all(item.get("user_id") == "shared" for item in found["results"])

            stop = asyncio.Event()
            tick = asyncio.create_task(ticker(stop))
            # 50 coroutines at once: the 8 workers and 42 searches
            await asyncio.gather(*(worker(p) for p in range(THREADS)),
                                 *(searcher(k) for k in range(42)))  # fmt: skip
            stop.set()
            await tick
            await asyncio.to_thread(check_acknowledged, memory.sync, logs)
            added = await memory.add("I keep bees", user_id="solo", infer=False)
            assert (await memory.get(added["results"][0]["id"]))["memory"] == "I keep bees"
            return logs

    logs = asyncio.run(main())
    assert sum(len(log) for log in logs) == THREADS * (OPS // 2)
    # The loop kept turning while the calls ran in the pool. How long it ever waited is a
    # timing, measured in benchmarks/threads_latency.py, not asserted here.
    print(f"event loop lag: max {1000 * max(lags):.1f} ms over {len(lags)} ticks")
    assert len(lags) >= 10


class InjectedFault(Exception):
    pass


@pytest.mark.parametrize("fail_at", [1, 2, 3, 5, 8, 13])
def test_a_failing_write_beside_an_open_read_leaves_nothing(tmp_path, fail_at):
    """The failure a shared connection allowed: thread R holds a read snapshot; thread W's write
    is halfway (statement `fail_at`) when R's snapshot ends, then fails. W's write must be its
    own transaction: R saw none of it, R's COMMIT committed none of it, and its failure left
    the file exactly as it was."""
    memory = shared_memory(str(tmp_path / "m.db"))
    memory.add("I live in Lisbon", user_id="u1", infer=False)
    before = table_dump(memory.store.db)
    reading, halfway, read_done = threading.Event(), threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def reader() -> None:
        with memory.store.db.snapshot():
            outcome["before"] = memory.store.db.query("SELECT count(*) FROM memories")[0][0]
            reading.set()
            halfway.wait(timeout=30)
            outcome["during"] = memory.store.db.query("SELECT count(*) FROM messages")[0][0]
        read_done.set()

    def tracer(sql: str, params: Any) -> None:
        if threading.current_thread() is not thread_w:
            return
        calls["n"] += 1
        if calls["n"] == fail_at:
            halfway.set()
            read_done.wait(timeout=5)  # the read's COMMIT happens in the middle of this write
            raise InjectedFault(sql)

    def writer() -> None:
        reading.wait(timeout=30)
        try:
            memory.add([{"role": "user", "content": "I own a cat"},
                        {"role": "user", "content": "My bike is red"}],
                       user_id="u1", infer=False)  # fmt: skip
            outcome["write"] = "committed"
        except InjectedFault:
            outcome["write"] = "failed"
        except Exception as exc:  # e.g. a RELEASE with no transaction left to release
            outcome["write"] = f"{type(exc).__name__}: {exc}"

    calls = {"n": 0}
    memory.store.tracer = tracer
    thread_r = threading.Thread(target=reader)
    thread_w = threading.Thread(target=writer)
    thread_r.start()
    thread_w.start()
    thread_r.join(timeout=60)
    thread_w.join(timeout=60)
    memory.store.tracer = None
    assert outcome["write"] == "failed"
    assert outcome["before"] == 1 and outcome["during"] == 1  # the snapshot saw no new message
    assert table_dump(memory.store.db) == before
    assert violations(memory.store.db) == []
    memory.add("I own a cat", user_id="u1", infer=False)  # and the file still takes writes
    memory.close()
