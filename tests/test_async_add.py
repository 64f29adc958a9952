"""`add(..., async_mode=True)`: the messages and an extraction job commit together, the call
returns at once, and the worker adds the facts later with the synchronous add's extraction.

Fake models (offline_mem/testing.py); tests/test_extraction_real.py runs one async add with the
real extractor, tests/test_crash.py and tests/test_concurrency.py kill and race the workers.
Each test runs on a SQLite file and on a PostgreSQL database (the `new_store` fixture) but
the last statement-by-statement fault injection, which traces SQLite's statements.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fake_memory import fake_memory
from invariants import store_violations
from postgres_fixtures import NewStore

from offline_mem import Memory, OfflineMemError, ValidationError
from offline_mem.errors import ExtractionError, FlushTimeoutError
from offline_mem.pinned.extractor import Prompt
from offline_mem.store import job_worker
from offline_mem.store.db import Database
from offline_mem.testing import (
    FakeEmbedder,
    FakeEntities,
    FakeExtractor,
    answer,
    new_message_lines,
)

CONVERSATION = [
    ("I adopted a grey cat called Pixel", "User adopted a grey cat called Pixel"),
    ("Pixel sleeps on my keyboard every morning", "Pixel sleeps on the user's keyboard"),
    ("I work as a ferry engineer in Setubal", "User works as a ferry engineer in Setubal"),
]


def facts(memory: Memory, user_id: str = "u1") -> list[str]:
    found = memory.get_all(filters={"user_id": user_id}, top_k=100)["results"]
    return sorted(item["memory"] for item in found)


def prompts(memory: Memory) -> list[str]:
    assert isinstance(memory.extractor, FakeExtractor)
    return [p.messages[-1]["content"] for p in memory.extractor.calls]


def test_the_call_returns_pending_and_the_turns_are_searchable_at_once(
    store_config: dict[str, Any],
) -> None:
    memory = fake_memory(store_config, answer(CONVERSATION[0][1]), job_worker=False)
    turns = [{"role": "user", "content": CONVERSATION[0][0]},
             {"role": "assistant", "content": "What a lovely name"}]  # fmt: skip
    result = memory.add(turns, user_id="u1", async_mode=True)
    assert result["results"] == [] and result["status"] == "PENDING"
    assert memory.pending() == memory.pending(user_id="u1") == 1
    assert memory.pending(user_id="u2") == 0
    assert memory.job(result["event_id"])["status"] == "PENDING"
    found = memory.search("grey cat Pixel", filters={"user_id": "u1"})["results"]
    assert [(hit["kind"], hit["content"]) for hit in found[:1]] == [("message", CONVERSATION[0][0])]
    assert facts(memory) == [] and prompts(memory) == []  # no model ran
    memory.flush(timeout=30)
    assert facts(memory) == [CONVERSATION[0][1]]
    job = memory.job(result["event_id"])
    assert job["status"] == "SUCCEEDED" and job["attempts"] == 0
    assert [r["memory"] for r in job["results"]] == [CONVERSATION[0][1]]
    assert memory.pending() == 0
    # the fact cites the turn it came from, as a synchronous add's would
    fact = memory.search("grey cat", filters={"user_id": "u1"}, include_messages=False)
    assert fact["results"][0]["memory"] == CONVERSATION[0][1]
    (message,) = [m for m in memory.store.db.query("SELECT id FROM messages WHERE role = 'user'")]
    assert memory.get(message[0])["memory_ids"] == [fact["results"][0]["id"]]
    assert store_violations(memory) == []
    memory.close()


def test_queued_adds_see_what_synchronous_adds_would_have_seen(new_store: NewStore) -> None:
    """Three adds queued before any job runs give the same prompts and memories as the same
    adds made synchronously: each job's context is the scope's messages before its own."""
    script = [answer(fact) for _, fact in CONVERSATION]
    sync = fake_memory(new_store(), *script)
    queued = fake_memory(new_store(), *script, job_worker=False)
    for text, _ in CONVERSATION:
        sync.add(text, user_id="u1")
        queued.add(text, user_id="u1", async_mode=True)
    assert queued.pending() == 3
    queued.flush()
    assert prompts(queued) == prompts(sync) and len(prompts(sync)) == 3
    assert facts(queued) == facts(sync) == sorted(fact for _, fact in CONVERSATION)
    sync.close()
    queued.close()


def test_a_synchronous_add_runs_its_scopes_queued_jobs_first(
    store_config: dict[str, Any],
) -> None:
    """Mixed adds in one scope are extracted in the order they were made: the synchronous add
    waits for the async one queued before it, whose fact is stored first."""
    script = [answer(fact) for _, fact in CONVERSATION[:2]]
    memory = fake_memory(store_config, *script, job_worker=False)
    memory.add(CONVERSATION[0][0], user_id="u1", async_mode=True)
    memory.add(CONVERSATION[1][0], user_id="u1")
    assert memory.pending(user_id="u1") == 0
    first, second = prompts(memory)[:2]
    assert CONVERSATION[0][0] in first and CONVERSATION[1][0] in second
    stored = [row[0] for row in memory.store.db.query("SELECT text FROM memories ORDER BY rowid")]
    assert stored == [fact for _, fact in CONVERSATION[:2]]
    memory.close()


def test_config_async_mode_and_the_per_call_override(store_config: dict[str, Any]) -> None:
    memory = fake_memory(store_config, answer("User likes figs"), async_mode=True)
    assert memory.add("I like figs", user_id="u1")["status"] == "PENDING"
    memory.flush()
    result = memory.add("I like dates", user_id="u1", async_mode=False)
    assert "status" not in result and result["results"] == []  # the script ran out: no fact
    raw = memory.add("I like kiwis", user_id="u1", infer=False)  # no model: done at once
    assert [r["memory"] for r in raw["results"]] == ["I like kiwis"] and "status" not in raw
    assert facts(memory) == ["I like kiwis", "User likes figs"]
    memory.close()


def test_bad_arguments_change_nothing(store_config: dict[str, Any]) -> None:
    memory = fake_memory(store_config, job_worker=False)
    with pytest.raises(ValidationError, match="async_mode"):
        memory.add("I like figs", user_id="u1", async_mode="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="timeout"):
        memory.flush(timeout=-1)
    with pytest.raises(ValidationError, match="user"):
        memory.add("I like figs", async_mode=True)
    assert memory.store.counts()["messages"] == 0 and memory.pending() == 0
    memory.close()


def test_a_failing_job_is_retried_then_kept_as_failed(
    store_config: dict[str, Any], monkeypatch
) -> None:
    monkeypatch.setattr(job_worker, "RETRY_AFTER_S", (0.0, 0.0))
    broken = ExtractionError("the model answered outside its schema")
    memory = fake_memory(
        store_config, broken, answer("User likes figs"),  # first job: fails once
        broken, broken, broken,  # second job: fails every run
        answer("User likes plums"),  # third job
    )  # fmt: skip
    first = memory.add("I like figs", user_id="u1", async_mode=True)
    second = memory.add("I like pears", user_id="u1", async_mode=True)
    third = memory.add("I like plums", user_id="u1", async_mode=True)
    memory.flush(timeout=30)
    assert memory.job(first["event_id"])["status"] == "SUCCEEDED"
    assert memory.job(first["event_id"])["attempts"] == 1
    (failed,) = memory.failed_jobs()
    assert failed["event_id"] == second["event_id"] and failed["status"] == "FAILED"
    assert failed["attempts"] == job_worker.MAX_ATTEMPTS == 3
    assert failed["error"] == "ExtractionError: the model answered outside its schema"
    assert memory.failed_jobs(user_id="u2") == []
    # a failed job does not hold its scope's later jobs back, and its turns stay searchable
    assert memory.job(third["event_id"])["status"] == "SUCCEEDED"
    assert facts(memory) == ["User likes figs", "User likes plums"]
    hits = memory.search("pears", filters={"user_id": "u1"})["results"]
    assert hits[0]["content"] == "I like pears"
    memory.close()


class GatedExtractor(FakeExtractor):
    """Answers "User <message>" for each prompt, but only once `gate` is open; `entered` is set
    when a call is waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def extract(self, prompt: Prompt) -> Any:
        if prompt.kind == "facts":
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
            said = new_message_lines(prompt)[0]
            self.script.append(answer("User " + said.split(": ", 1)[1]))
        return super().extract(prompt)


def gated(store: dict[str, Any], **config: Any) -> Memory:
    return Memory({**store, **config}, embedder=FakeEmbedder(),
                  extractor=GatedExtractor(), entities=FakeEntities())  # fmt: skip


def test_flush_times_out_with_a_typed_error_and_the_job_still_queued(
    store_config: dict[str, Any],
) -> None:
    memory = gated(store_config)
    assert isinstance(memory.extractor, GatedExtractor)
    memory.add("I like figs", user_id="u1", async_mode=True)
    with pytest.raises(FlushTimeoutError, match="1 extraction job") as raised:
        memory.flush(timeout=0.2)
    assert isinstance(raised.value, OfflineMemError) and isinstance(raised.value, TimeoutError)
    assert memory.pending() == 1
    memory.extractor.gate.set()
    memory.flush(timeout=30)
    assert facts(memory) == ["User I like figs"]
    memory.close()


def test_close_finishes_the_running_job_and_leaves_the_rest_queued(
    store_config: dict[str, Any],
) -> None:
    memory = gated(store_config)
    assert isinstance(memory.extractor, GatedExtractor)
    for fruit in ("figs", "pears", "plums"):
        memory.add(f"I like {fruit}", user_id="u1", async_mode=True)
    assert memory.extractor.entered.wait(30)  # the first job is running
    closing = threading.Thread(target=memory.close)
    closing.start()
    time.sleep(0.2)
    assert closing.is_alive()  # waits for the running job
    memory.extractor.gate.set()
    closing.join(30)
    assert not closing.is_alive()
    reopened = gated(store_config, job_worker=False)
    assert facts(reopened) == ["User I like figs"]
    assert reopened.pending() == 2
    assert isinstance(reopened.extractor, GatedExtractor)
    reopened.extractor.gate.set()
    reopened.flush(timeout=30)
    assert facts(reopened) == ["User I like figs", "User I like pears", "User I like plums"]
    reopened.close()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def hold_job(memory: Memory, *, pid: int, lease_s: float) -> None:
    """Make the queued job look claimed by process `pid` of this host, leased for `lease_s`."""
    import platform

    mark = "?" if isinstance(memory.store.db, Database) else "%s"  # SQLite's or psycopg's
    with memory.store.atomic():
        memory.store.db.execute(
            f"UPDATE jobs SET state = 'running', owner = 'elsewhere', owner_host = {mark}, "
            f"owner_pid = {mark}, lease_until = {mark}, claims = 1",
            (platform.node(), pid, time.time() + lease_s),
        )


def test_a_job_whose_owner_died_is_resumed_at_once(store_config: dict[str, Any]) -> None:
    first = fake_memory(store_config, job_worker=False)
    event = first.add("I like figs", user_id="u1", async_mode=True)["event_id"]
    hold_job(first, pid=dead_pid(), lease_s=3600)  # a lease far from over: the pid decides
    first.close()
    second = fake_memory(store_config, answer("User likes figs"))  # resumes on open
    second.flush(timeout=30)
    job = second.job(event)
    assert job["status"] == "SUCCEEDED" and facts(second) == ["User likes figs"]
    (claims,) = second.store.db.query_one("SELECT claims FROM jobs")
    assert claims == 2
    second.close()


def test_a_live_owners_job_is_left_alone_until_its_lease_runs_out(
    store_config: dict[str, Any],
) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        memory = fake_memory(store_config, answer("User likes figs"), job_worker=False)
        memory.add("I like figs", user_id="u1", async_mode=True)
        hold_job(memory, pid=owner.pid, lease_s=3600)
        assert memory._worker.run_next() is False  # alive and leased: not ours to take
        assert memory.pending() == 1 and facts(memory) == []
        hold_job(memory, pid=owner.pid, lease_s=-1)  # its lease ran out: stuck, taken over
        assert memory._worker.run_next() is True
        assert facts(memory) == ["User likes figs"]
        memory.close()
    finally:
        owner.kill()
        owner.wait()
    if "path" in store_config:  # a SQLite file
        assert os.path.exists(store_config["path"])


def test_a_job_whose_scope_was_deleted_while_it_ran_commits_nothing(
    store_config: dict[str, Any],
) -> None:
    memory = gated(store_config)
    assert isinstance(memory.extractor, GatedExtractor)
    event = memory.add("I like figs", user_id="u1", async_mode=True)["event_id"]
    assert memory.extractor.entered.wait(30)
    memory.delete_all(user_id="u1")  # the job row goes with the scope's messages
    memory.extractor.gate.set()
    memory.flush(timeout=30)
    assert memory.job(event) is None and facts(memory) == []
    assert memory.store.counts()["memories"] == 0
    assert store_violations(memory) == []
    memory.close()


def test_a_message_deleted_before_its_job_ran_is_left_out(store_config: dict[str, Any]) -> None:
    memory = fake_memory(store_config, answer("User likes figs"), job_worker=False)
    turns = [{"role": "user", "content": "I like figs"}, {"role": "user", "content": "and plums"}]
    memory.add(turns, user_id="u1", async_mode=True)
    (plums,) = memory.store.db.query_one("SELECT id FROM messages WHERE content = 'and plums'")
    memory.delete(plums)
    memory.flush(timeout=30)
    assert prompts(memory)[0].count("plums") == 0
    assert facts(memory) == ["User likes figs"]
    assert store_violations(memory) == []
    memory.close()


class Fault(Exception):
    pass


def test_a_job_commits_its_memories_and_done_mark_in_one_transaction(
    tmp_path: Path, monkeypatch
) -> None:
    """Fail each statement of a job's run in turn: the file keeps no memory of it, and the job
    stays to be run again; without a fault it completes. SQLite only: the store's `tracer`
    hook sees each statement of the file (tests/test_postgres_update.py and
    tests/test_postgres_jobs.py inject failures into a database's writes)."""
    monkeypatch.setattr(job_worker, "RETRY_AFTER_S", (0.0, 0.0))
    memory = fake_memory({"path": str(tmp_path / "m.db")}, job_worker=False)
    assert isinstance(memory.extractor, FakeExtractor)
    memory.add("I like figs", user_id="u1", infer=False)
    memory.add("I like figs and plums now", user_id="u1", async_mode=True)
    memory._indexer.wait()  # its message indexed (just after the add returned)

    def tables() -> dict[str, list[Any]]:
        db = memory.store.db
        names = [r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: sorted(map(repr, db.query(f'SELECT * FROM "{n}"'))) for n in names
                if n not in ("jobs", "sqlite_sequence")}  # fmt: skip

    before = tables()
    seen: list[str] = []
    probe = fake_memory(
        {"path": str(tmp_path / "probe.db")}, answer("User likes plums"), job_worker=False
    )
    probe.add("I like figs", user_id="u1", infer=False)
    probe.add("I like figs and plums now", user_id="u1", async_mode=True)
    probe._indexer.wait()
    probe.store.tracer = lambda sql, params: seen.append(sql)
    assert probe._worker.run_next()
    probe.store.tracer = None
    total = len(seen)
    assert total > 10 and probe.job(_only_job(probe))["status"] == "SUCCEEDED"
    probe.close()
    for fail_at in range(1, total + 1):
        calls = {"n": 0}

        def tracer(sql: str, params: Any, fail_at: int = fail_at, calls: dict = calls) -> None:
            calls["n"] += 1
            if calls["n"] == fail_at:
                raise Fault(f"statement {fail_at}: {sql[:60]}")

        memory.extractor.script[:] = [answer("User likes plums")]
        memory.store.tracer = tracer
        with contextlib.suppress(Fault):  # raised when the claim itself failed
            memory._worker.run_next()
        memory.store.tracer = None
        assert tables() == before, f"a memory of the job remains after statement {fail_at}"
        (state,) = memory.store.db.query_one("SELECT state FROM jobs")
        assert state in ("queued", "running"), (fail_at, state)
        with memory.store.atomic():  # put it back for the next round
            memory.store.db.execute(
                "UPDATE jobs SET state = 'queued', attempts = 0, owner = NULL, not_before = NULL"
            )
    memory.extractor.script[:] = [answer("User likes plums")]
    assert memory._worker.run_next()
    assert facts(memory) == ["I like figs", "User likes plums"]
    assert memory.pending() == 0
    memory.close()


def _only_job(memory: Memory) -> str:
    (event,) = memory.store.db.query_one("SELECT id FROM jobs")
    return str(event)


def test_async_memory_forwards_flush_and_pending(store_config: dict[str, Any]) -> None:
    import asyncio

    from offline_mem import AsyncMemory

    async def scenario() -> None:
        config = {**store_config, "job_worker": False}
        extractor = FakeExtractor(answer("User likes figs"))
        models = {"embedder": FakeEmbedder(), "entities": FakeEntities(), "extractor": extractor}
        async with AsyncMemory(config, **models) as memory:
            queued = await memory.add("I like figs", user_id="u1", async_mode=True)
            assert await memory.pending() == 1
            await memory.flush(timeout=30)
            assert await memory.pending() == 0
            assert (await memory.job(queued["event_id"]))["status"] == "SUCCEEDED"
            assert await memory.failed_jobs() == []

    asyncio.run(scenario())
