"""The inferred add path and the extraction job queue on PostgreSQL: extraction through the
planner gives the same memories as on SQLite (supersession and merges included); async adds
queue a job with their messages; workers of two `Memory` objects on one database claim with
`FOR UPDATE SKIP LOCKED` and do each job exactly once; leases and dead owners as in
store/jobs.py."""

from __future__ import annotations

import itertools
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from offline_mem import Memory
from offline_mem.errors import ExtractionError
from offline_mem.pinned.extractor import Prompt
from offline_mem.store import job_worker
from offline_mem.testing import (
    FakeEmbedder,
    FakeEntities,
    FakeExtractor,
    answer,
    changes,
    new_message_lines,
)

pytestmark = pytest.mark.postgres

KEEN = "User is keen on counseling."
AGAIN = "user is KEEN on counseling!"  # the same fact in other words: merged
LISBON = "User lives in Lisbon."
PORTO = "User lives in Porto."  # supersedes LISBON (the check says it changed)


class EchoExtractor(FakeExtractor):
    """Answers "User said <message>" for each new message of a facts prompt."""

    def extract(self, prompt: Prompt) -> Any:
        if prompt.kind == "facts":
            said = [line.split(": ", 1)[-1] for line in new_message_lines(prompt)]
            self.script.append(answer(*((i + 1, f"User said {s}") for i, s in enumerate(said))))
        return super().extract(prompt)


def pg(url: str, extractor: FakeExtractor | None = None, **config: Any) -> Memory:
    return Memory({"store": url, **config}, embedder=FakeEmbedder(),
                  extractor=extractor or FakeExtractor(), entities=FakeEntities())  # fmt: skip


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def facts(memory: Memory, user_id: str = "u1") -> list[str]:
    found = memory.get_all(filters={"user_id": user_id}, top_k=500)["results"]
    return sorted(item["memory"] for item in found)


SCRIPT = (answer(KEEN), answer(AGAIN), answer(LISBON), answer(PORTO))
TURNS = ("I am keen on counseling.", "Counseling, I am keen on it!", "I live in Lisbon.",
         "I moved to Porto.")  # fmt: skip


@pytest.fixture
def both(postgres_url: str, db_path: str) -> Iterator[tuple[Memory, Memory]]:
    made = [
        Memory(config, embedder=FakeEmbedder(), entities=FakeEntities(),
               extractor=FakeExtractor(*SCRIPT, still_true=changes((LISBON, PORTO))))
        for config in ({"path": db_path}, {"store": postgres_url})
    ]  # fmt: skip
    try:
        yield made[0], made[1]
    finally:
        for mem in made:
            mem.close()


def test_inferred_adds_give_the_same_memories_as_on_sqlite(both: tuple[Memory, Memory]) -> None:
    seen = []
    for mem in both:
        events = []
        for i, turn in enumerate(TURNS):
            out = mem.add(turn, user_id="lena", timestamp=f"2023-0{i + 1}-01T10:00:00Z")
            events.append([(r["event"], r["memory"], r.get("merged")) for r in out["results"]])
        listed = mem.get_all(filters={"user_id": "lena"}, include_superseded=True)["results"]
        history = sorted(
            (h["event"], h["old_memory"], h["new_memory"], h["happened_at"])
            for item in listed for h in mem.history(item["id"])
        )  # fmt: skip
        (keen,) = mem.search(
            "keen on counseling",
            filters={"user_id": "lena"},
            include_sources=True,
            include_messages=False,
            top_k=1,
        )["results"]
        sources = [s["content"] for s in keen["sources"]]
        states = sorted((item["memory"], item["state"]) for item in listed)
        seen.append((events, history, sources, states))
    assert seen[1] == seen[0]
    events, _, sources, states = seen[0]
    assert [e[0][0] for e in events] == ["ADD", "MERGE", "ADD", "ADD"]
    assert sources == [TURNS[0], TURNS[1]]
    assert states == [(KEEN, "active"), (LISBON, "superseded"), (PORTO, "active")]


def test_an_async_add_queues_then_the_worker_adds_its_facts(postgres_url: str) -> None:
    with pg(postgres_url, FakeExtractor(answer("User likes figs"))) as mem:
        out = mem.add("I like figs", user_id="u1", async_mode=True)
        assert out["status"] == "PENDING" and out["results"] == []
        found = mem.search("figs", filters={"user_id": "u1"})["results"]
        assert found[0]["content"] == "I like figs"  # the turn is searchable at once
        mem.flush(timeout=30)
        job = mem.job(out["event_id"])
        assert job is not None and job["status"] == "SUCCEEDED"
        assert [r["memory"] for r in job["results"]] == ["User likes figs"]
        assert facts(mem) == ["User likes figs"] and mem.pending() == 0


def test_a_failing_job_is_retried_then_kept_as_failed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_worker, "RETRY_AFTER_S", (0.0, 0.0))
    broken = ExtractionError("the model answered outside its schema")
    script = (broken, answer("User likes figs"), broken, broken, broken, answer("User likes plums"))
    with pg(postgres_url, FakeExtractor(*script)) as mem:
        first = mem.add("I like figs", user_id="u1", async_mode=True)
        second = mem.add("I like pears", user_id="u1", async_mode=True)
        third = mem.add("I like plums", user_id="u1", async_mode=True)
        mem.flush(timeout=30)
        assert mem.job(first["event_id"])["attempts"] == 1  # type: ignore[index]
        (failed,) = mem.failed_jobs()
        assert (failed["event_id"], failed["attempts"]) == (second["event_id"], 3)
        assert failed["error"] == "ExtractionError: the model answered outside its schema"
        assert mem.job(third["event_id"])["status"] == "SUCCEEDED"  # type: ignore[index]
        assert facts(mem) == ["User likes figs", "User likes plums"]


def test_two_workers_on_one_database_do_each_job_exactly_once(postgres_url: str) -> None:
    jobs = 60
    with pg(postgres_url, job_worker=False) as producer:
        for i in range(jobs):
            # words of their own: no fact is near another (none merges into another)
            text = f"note {i} about t{i}a and t{i}b"
            producer.add(text, user_id=f"u{i % 6}", async_mode=True)
        assert producer.pending() == jobs
    workers = [pg(postgres_url, EchoExtractor(), job_worker=False) for _ in range(2)]
    try:
        errors: list[BaseException] = []

        def drain(mem: Memory) -> None:
            try:
                mem.flush(timeout=120)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=drain, args=(w,)) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(150)
        assert errors == []
        done = [len(w.extractor.calls) for w in workers]  # type: ignore[attr-defined]
    finally:
        for w in workers:
            w.close()
    assert sum(done) == jobs and min(done) > 0  # both took part; no job was extracted twice
    assert rows(postgres_url, "SELECT state, count(*), max(claims) FROM jobs GROUP BY state") == [
        ("done", jobs, 1)
    ]
    added = Counter(text for (text,) in rows(
        postgres_url, "SELECT new_memory FROM history WHERE event = 'ADD'"
    ))  # fmt: skip
    assert len(added) == jobs and set(added.values()) == {1}
    # each scope's jobs ran in the order of its adds
    order = rows(postgres_url, "SELECT scope, seq, started_at FROM jobs ORDER BY scope, seq")
    for (scope, _, started), (next_scope, _, next_started) in itertools.pairwise(order):
        if scope == next_scope:
            assert started < next_started


def hold_job(url: str, *, pid: int, lease_s: float) -> None:
    """Make the unfinished job look claimed by process `pid` of this host, leased for `lease_s`."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE jobs SET state = 'running', owner = 'elsewhere', owner_host = %s, "
            "owner_pid = %s, lease_until = %s, claims = 1 WHERE state <> 'done'",
            (platform.node(), pid, time.time() + lease_s),
        )


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_dead_owners_and_run_out_leases(postgres_url: str) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pg(postgres_url, FakeExtractor(answer("User likes figs")), job_worker=False) as mem:
            mem.add("I like figs", user_id="u1", async_mode=True)
            hold_job(postgres_url, pid=owner.pid, lease_s=3600)
            assert mem._worker.run_next() is False  # alive and leased: not ours to take
            hold_job(postgres_url, pid=owner.pid, lease_s=-1)  # its lease ran out
            assert mem._worker.run_next() is True
            assert facts(mem) == ["User likes figs"]
            mem.add("I like plums", user_id="u2", async_mode=True)
            hold_job(postgres_url, pid=dead_pid(), lease_s=3600)  # owner gone: at once
            mem.extractor.script.append(answer("User likes plums"))  # type: ignore[attr-defined]
            assert mem._worker.run_next() is True
            assert facts(mem, "u2") == ["User likes plums"]
    finally:
        owner.kill()
        owner.wait()
    assert rows(postgres_url, "SELECT count(*) FROM jobs WHERE state = 'done'") == [(2,)]


def test_a_lost_claim_commits_nothing(postgres_url: str) -> None:
    with pg(postgres_url, FakeExtractor(answer("User likes figs")), job_worker=False) as mem:
        mem.add("I like figs", user_id="u1", async_mode=True)
        store = mem.store
        job = store.claim_job("worker-a", lease_s=0.0)  # claimed, and its lease over at once
        assert job is not None
        again = store.claim_job("worker-b", lease_s=60.0)  # taken over
        assert again is not None and again.seq == job.seq and again.claims == 2
        from offline_mem.store.jobs import JobClaim
        from offline_mem.store.records import AddPlan

        lost = JobClaim(job.seq, job.id, "worker-a")
        plan = AddPlan(job.scope, [], [], mem.embedder.identity.sha256)
        assert store.renew_claim(lost, lease_s=60.0) is False
        assert store.finish_job(lost, plan, []) is False
        assert store.fail_job(lost, "x", max_attempts=3, retry_s=0.0) == ""
        assert store.finish_job(JobClaim(job.seq, job.id, "worker-b"), plan, []) is True
        assert mem.job(job.id)["status"] == "SUCCEEDED"  # type: ignore[index]
