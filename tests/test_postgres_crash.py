"""SIGKILL on PostgreSQL, beyond the crash and concurrency proofs both stores share
(tests/test_crash.py, tests/test_concurrency.py): a job worker killed while running jobs loses
none of them, and none is done twice; writers of one user killed together leave every
acknowledged add; two workers drain 510 jobs through a kill. Writers are subprocesses
(tests/pg_writer_process.py) with fake models."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from invariants import PG_INVARIANTS

from offline_mem import Memory
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor

pytestmark = pytest.mark.postgres

WRITER = Path(__file__).with_name("pg_writer_process.py")


def start_writer(url: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    out, err = log.open("wb"), log.with_suffix(".err").open("wb")
    proc = subprocess.Popen([sys.executable, str(WRITER), url, *args], stdout=out, stderr=err)
    deadline = time.monotonic() + 60
    while b'"ready"' not in log.read_bytes():
        assert proc.poll() is None, f"the writer exited: {log.read_text()}"
        assert time.monotonic() < deadline, "the writer did not start"
        time.sleep(0.05)
    return proc


def lines(log: Path) -> list[dict[str, Any]]:
    text = log.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]


def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params or None).fetchall()


# Each query returns the rows that break one invariant: the store's (tests/invariants.py), and
# two of these writers' memories.
INVARIANTS = {
    **PG_INVARIANTS,
    "raw memory without its message": "SELECT m.id FROM memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM provenance p JOIN messages g ON g.seq = p.message_seq "
    "WHERE p.memory_rowid = m.rowid AND g.content = m.text) AND m.extractor_sha256 IS NULL "
    "AND m.text NOT LIKE '%updated text'",
    "memory naming Lisbon without its entity link": "SELECT m.id FROM memories m "
    "WHERE m.text LIKE '%Lisbon%' AND NOT EXISTS (SELECT 1 FROM entity_links l JOIN entities e "
    "ON e.rowid = l.entity_rowid WHERE l.memory_rowid = m.rowid AND e.norm = 'lisbon')",
}


def broken(url: str) -> dict[str, list[Any]]:
    found = {name: query(url, sql) for name, sql in INVARIANTS.items()}
    return {name: rows for name, rows in found.items() if rows}


def stored(url: str, user: str) -> dict[str, str]:
    return dict(query(url, "SELECT id, text FROM memories WHERE user_id = %s", (user,)))


def test_sigkill_of_a_job_worker_loses_no_job(postgres_url: str, tmp_path: Path) -> None:
    jobs = 24
    with Memory({"store": postgres_url, "job_worker": False}, embedder=FakeEmbedder(),
                extractor=FakeExtractor(), entities=FakeEntities()) as producer:  # fmt: skip
        for i in range(jobs):
            producer.add(f"note {i} about t{i}a and t{i}b", user_id=f"u{i % 3}", async_mode=True)
    log = tmp_path / "drain.jsonl"
    worker = start_writer(postgres_url, log, "drain", "--extract-ms", "150")
    deadline = time.monotonic() + 60
    while query(postgres_url, "SELECT count(*) FROM jobs WHERE state = 'done'")[0][0] < 3:
        assert time.monotonic() < deadline and worker.poll() is None
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    states = Counter(dict(query(postgres_url, "SELECT state, count(*) FROM jobs GROUP BY state")))
    assert states["done"] < jobs and states["failed"] == 0
    assert broken(postgres_url) == {}
    # a done job's facts are committed with it; a running one's not at all
    assert query(postgres_url, "SELECT count(*) FROM memories")[0][0] == states["done"]
    drain = tmp_path / "drain2.jsonl"
    again = start_writer(postgres_url, drain, "drain")  # resumes the killed worker's job at once
    assert again.wait(120) == 0 and '"drained"' in drain.read_text()
    assert query(postgres_url, "SELECT state, count(*) FROM jobs GROUP BY state") == [
        ("done", jobs)
    ]
    adds = query(postgres_url, "SELECT new_memory FROM history WHERE event = 'ADD'")
    added = Counter(text for (text,) in adds)
    assert len(added) == jobs and set(added.values()) == {1}
    assert broken(postgres_url) == {}


def test_concurrent_writers_on_one_user_lose_nothing(postgres_url: str, tmp_path: Path) -> None:
    """Three writers add, update and delete the same user's memories at once, then all are
    killed: no writer failed (no deadlock; a memory another writer deleted first is a typed
    MemoryNotFoundError), every acknowledged add is there unless some writer deleted it, and
    the store's invariants hold (entity links included)."""
    logs = [tmp_path / f"shared{k}.jsonl" for k in range(3)]
    writers = [
        start_writer(postgres_url, log, "adds", "--proc", str(k), "--user", "shared")
        for k, log in enumerate(logs)
    ]
    time.sleep(4)
    for writer, log in zip(writers, logs, strict=True):
        assert writer.poll() is None, log.with_suffix(".err").read_text()
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    events = [e for log in logs for e in lines(log)]
    added = {i for e in events if e["t"] == "ack" and "ids" in e for i in e["ids"]}
    deleted = {e["id"] for e in events if e["t"] == "intent" and e["op"] == "delete"}
    now = set(stored(postgres_url, "shared"))
    assert added - deleted <= now
    assert len([e for e in events if e["t"] == "ack"]) > 30
    updated = {e["text"] for e in events if e["t"] == "intent" and e["op"] == "update"}
    assert {t for t in stored(postgres_url, "shared").values() if "updated" in t} <= updated
    assert broken(postgres_url) == {}


def test_two_worker_processes_drain_500_jobs_once_through_a_sigkill(
    postgres_url: str, tmp_path: Path
) -> None:
    """Two worker processes drain 510 jobs over 30 scopes from one database; one of them is
    SIGKILLed while it holds a claim (it stalls inside its 101st extraction), then restarted.
    Every job is done, its fact committed once; only the killed claim was extracted twice,
    and its first extraction committed nothing."""
    jobs, scopes = 510, 30
    with Memory({"store": postgres_url, "job_worker": False}, embedder=FakeEmbedder(),
                extractor=FakeExtractor(), entities=FakeEntities()) as producer:  # fmt: skip
        for i in range(jobs):
            producer.add(f"note {i} about t{i}a and t{i}b", user_id=f"u{i % scopes}",
                         async_mode=True)  # fmt: skip
    logs = [tmp_path / f"worker{k}.jsonl" for k in ("a", "b", "a2")]
    killed = start_writer(postgres_url, logs[0], "drain", "--log-jobs", "--stall-after", "100")
    other = start_writer(postgres_url, logs[1], "drain", "--log-jobs")
    deadline = time.monotonic() + 120
    while '"stalled"' not in logs[0].read_text():
        assert time.monotonic() < deadline and killed.poll() is None
        time.sleep(0.05)
    held = query(postgres_url, "SELECT seq FROM jobs WHERE state = 'running' AND owner_pid = %s",
                 (killed.pid,))  # fmt: skip
    assert len(held) == 1  # it dies holding a claim, mid-extraction
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert query(postgres_url, "SELECT count(*) FROM jobs WHERE state = 'done'")[0][0] < jobs
    restarted = start_writer(postgres_url, logs[2], "drain", "--log-jobs")
    for worker, log in ((other, logs[1]), (restarted, logs[2])):
        assert worker.wait(120) == 0, log.with_suffix(".err").read_text()
        assert '"drained"' in log.read_text()
    assert query(postgres_url, "SELECT state, count(*) FROM jobs GROUP BY state") == [
        ("done", jobs)
    ]
    extracted = [[e["said"] for e in lines(log) if e["t"] == "extract"] for log in logs]
    (stalled,) = [e["said"] for e in lines(logs[0]) if e["t"] == "stalled"]
    runs = Counter(said for per_worker in extracted for said in per_worker)
    assert len(runs) == jobs and runs[stalled] == 2  # the killed claim was run again, once
    assert {n for said, n in runs.items() if said != stalled} == {1}
    assert len(extracted[0]) == 101 and len(extracted[1]) > 100  # both drained a share
    # the killed claim was claimed twice, every other job once; each fact was added once
    claims = Counter(n for (n,) in query(postgres_url, "SELECT claims FROM jobs"))
    assert claims == Counter({1: jobs - 1, 2: 1})
    assert query(postgres_url, "SELECT claims FROM jobs WHERE seq = %s", held[0]) == [(2,)]
    added = Counter(text for (text,) in query(
        postgres_url, "SELECT new_memory FROM history WHERE event = 'ADD'"
    ))  # fmt: skip
    assert len(added) == jobs and set(added.values()) == {1}
    assert f"User said {stalled}" in added
    assert query(postgres_url, "SELECT count(*) FROM memories")[0][0] == jobs
    # each scope's jobs ran in the order of its adds, across the three workers
    order = query(postgres_url, "SELECT scope, seq, finished_at FROM jobs ORDER BY scope, seq")
    for (scope, _, done), (next_scope, _, next_done) in itertools.pairwise(order):
        if scope == next_scope:
            assert done < next_done
    assert broken(postgres_url) == {}
