"""An async add's messages are indexed after it returns (memory_parts/message_indexing.py): the
accept does not embed, a search of the same `Memory` waits for the indexing, a job never
extracts before its messages are indexed, and messages left unindexed (a process killed between
the accept and its indexing, a failed embedding) are indexed at the next open or by their job's
run; `verify` allows them while their job is not done, and reports them after.

Fake models (offline_mem/testing.py); each test runs on a SQLite file and on a PostgreSQL
database (the `store_config` fixture).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from fake_memory import fake_memory
from invariants import db_violations, store_violations
from postgres_fixtures import NewStore

from offline_mem import Memory
from offline_mem.errors import ModelError
from offline_mem.memory_parts.message_indexing import MessageIndexer
from offline_mem.store import job_worker
from offline_mem.store.db import Database
from offline_mem.store.integrity import VerifyReport, verify_file
from offline_mem.store.postgres.integrity import verify_database
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, Script, answer

TURN = "I adopted a grey cat called Pixel"
FACT = "User adopted a grey cat called Pixel"


class GatedEmbedder(FakeEmbedder):
    """Embeds a batch holding `held` only once `gate` is open (`entered` is set when one
    waits), or raises ModelError for it while `broken`."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held = held
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.broken = False

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if any(self.held in text for text in texts):
            if self.broken:
                raise ModelError("the embedder is out of memory")
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
        return super().embed_batch(texts)


def gated_memory(store: dict[str, Any], embedder: FakeEmbedder, *script: Script) -> Memory:
    return Memory({**store, "job_worker": False}, embedder=embedder,
                  extractor=FakeExtractor(*script), entities=FakeEntities())  # fmt: skip


def message_ids(memory: Memory) -> list[str]:
    return [row[0] for row in memory.store.db.query("SELECT id FROM messages ORDER BY seq")]


def unindexed(memory: Memory) -> list[str]:
    return [record.id for record, _ in memory.store.unindexed_message_rows(message_ids(memory))]


def found_turns(memory: Memory, query: str = "grey cat Pixel") -> list[str]:
    hits = memory.search(query, filters={"user_id": "u1"})["results"]
    return [hit["content"] for hit in hits if hit["kind"] == "message"]


def verified(memory: Memory) -> VerifyReport:
    db = memory.store.db
    if isinstance(db, Database):
        return verify_file(db, embedder=None)
    return verify_database(db, embedder=None)


@pytest.fixture
def no_indexer(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the process were killed between an async add's accept and its indexing."""
    monkeypatch.setattr(MessageIndexer, "submit", lambda self, ids: None)


def test_the_accept_does_not_embed_and_a_search_waits_for_the_indexing(
    store_config: dict[str, Any],
) -> None:
    embedder = GatedEmbedder(held="adopted")
    memory = gated_memory(store_config, embedder)
    result = memory.add(TURN, user_id="u1", async_mode=True)
    assert result["status"] == "PENDING"  # returned while the embedding waits at the gate
    assert embedder.entered.wait(30)  # the indexer's thread embeds it
    assert unindexed(memory) == message_ids(memory)  # committed, not indexed yet
    # a search that reads no message does not wait
    assert memory.search("grey cat", filters={"user_id": "u1"}, include_messages=False) == {
        "results": []
    }
    searches: list[list[str]] = []
    searching = threading.Thread(target=lambda: searches.append(found_turns(memory)))
    searching.start()
    time.sleep(0.2)
    assert searching.is_alive() and searches == []  # waits for the indexing
    embedder.gate.set()
    searching.join(30)
    assert searches == [[TURN]]
    assert unindexed(memory) == []
    (hit,) = memory.search_messages("grey cat", filters={"user_id": "u1"})["results"]
    assert hit["content"] == TURN
    assert store_violations(memory) == []
    memory.close()


def test_close_indexes_the_accepted_messages_first(store_config: dict[str, Any]) -> None:
    embedder = GatedEmbedder(held="adopted")
    memory = gated_memory(store_config, embedder)
    memory.add(TURN, user_id="u1", async_mode=True)
    assert embedder.entered.wait(30)
    closing = threading.Thread(target=memory.close)
    closing.start()
    time.sleep(0.2)
    assert closing.is_alive()  # waits for the indexing
    embedder.gate.set()
    closing.join(30)
    assert not closing.is_alive()
    reopened = gated_memory(store_config, FakeEmbedder())
    assert isinstance(reopened.embedder, FakeEmbedder)
    assert reopened.embedder.calls == [] and unindexed(reopened) == []  # nothing left to do
    reopened.close()


def test_messages_never_indexed_are_indexed_at_the_next_open(
    store_config: dict[str, Any], no_indexer: None
) -> None:
    memory = fake_memory(store_config, job_worker=False)
    memory.add(TURN, user_id="u1", async_mode=True)
    assert unindexed(memory) == message_ids(memory) != []
    assert found_turns(memory) == []  # nothing to wait for: not found until indexed
    # a message of a job not done yet may lack its index rows
    assert db_violations(memory.store.db) == []
    memory.close()
    reopened = fake_memory(store_config, job_worker=False)
    assert unindexed(reopened) == []
    assert found_turns(reopened) == [TURN]
    assert reopened.pending() == 1  # indexed, not extracted
    assert db_violations(reopened.store.db) == []
    reopened.close()


def test_a_job_indexes_its_messages_before_its_extraction(
    store_config: dict[str, Any], no_indexer: None
) -> None:
    left: list[list[str]] = []
    memory: Memory

    def extraction(prompt: Any) -> dict[str, Any]:
        left.append(unindexed(memory))
        return answer(FACT)

    memory = fake_memory(store_config, extraction, job_worker=False)
    memory.add(TURN, user_id="u1", async_mode=True)
    assert unindexed(memory) != []
    memory.flush(timeout=30)
    assert left == [[]]  # indexed when the extraction ran
    assert sorted(m["memory"] for m in memory.get_all(filters={"user_id": "u1"})["results"]) == [
        FACT
    ]
    assert found_turns(memory, "Pixel") == [TURN]
    assert db_violations(memory.store.db) == []
    memory.close()


def test_verify_reports_unindexed_messages_of_done_jobs_and_of_none(
    store_config: dict[str, Any], no_indexer: None
) -> None:
    memory = fake_memory(store_config, job_worker=False)
    memory.add(TURN, user_id="u1", async_mode=True)
    (message,) = message_ids(memory)
    for state in ("queued", "running", "failed"):
        with memory.store.atomic():
            memory.store.db.execute(f"UPDATE jobs SET state = '{state}'")
        assert verified(memory).ok, state
    with memory.store.atomic():
        memory.store.db.execute("UPDATE jobs SET state = 'done'")
    report = verified(memory)
    (no_vector,) = report.problems_of("message vectors")
    assert no_vector.detail.startswith(f"message {message} has no vector")
    assert [p.detail for p in report.problems_of("message keyword rows")] == [
        f"message {message} has no keyword row (message_keyword_docs)"
    ]
    with memory.store.atomic():
        memory.store.db.execute("DELETE FROM jobs")
    assert {p.check for p in verified(memory).problems} == {
        "message vectors",
        "message keyword rows",
    }
    memory.close()


def test_an_indexing_failure_is_logged_and_fails_the_jobs_run(
    store_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setattr(job_worker, "RETRY_AFTER_S", (0.0, 0.0))
    embedder = GatedEmbedder(held="adopted")
    embedder.gate.set()
    embedder.broken = True
    memory = gated_memory(store_config, embedder, answer(FACT))
    with caplog.at_level(logging.WARNING, logger="offline_mem.memory_parts.message_indexing"):
        event = memory.add(TURN, user_id="u1", async_mode=True)["event_id"]
        assert found_turns(memory) == []  # the search does not wait on a failed indexing
    assert "ModelError: the embedder is out of memory" in caplog.text
    assert TURN not in caplog.text  # no message text in the log
    assert unindexed(memory) == message_ids(memory)
    assert memory._worker.run_next()  # the job's run indexes first, and fails as the indexer did
    job = memory.job(event)
    assert job["status"] == "PENDING" and job["attempts"] == 1
    assert job["error"] == "ModelError: the embedder is out of memory"
    assert memory.get_all(filters={"user_id": "u1"})["results"] == []
    embedder.broken = False
    memory.flush(timeout=30)
    assert memory.job(event)["status"] == "SUCCEEDED"
    assert unindexed(memory) == [] and found_turns(memory) == [TURN]
    assert db_violations(memory.store.db) == []
    memory.close()


def index_rows(memory: Memory) -> dict[str, list[str]]:
    """Every message's vector and every row of the messages' keyword index, comparable across
    two stores written alike (seqs are the same; ids are not read)."""
    db = memory.store.db
    tables = ["message_keyword_docs", "message_keyword_postings", "message_keyword_terms",
              "message_keyword_partitions"]  # fmt: skip
    if isinstance(db, Database):
        vectors = "SELECT rowid, embedding FROM message_vector_values"
    else:
        vectors = "SELECT seq, embedding::text FROM messages WHERE embedding IS NOT NULL"
    rows = {"vectors": sorted(map(repr, db.query(vectors)))}
    for table in tables:
        rows[table] = sorted(map(repr, db.query(f"SELECT * FROM {table}")))
    return rows


def test_the_indexer_writes_the_rows_a_synchronous_add_writes(new_store: NewStore) -> None:
    turns = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "name": "Ana", "content": "I moved to Ghent with my two cats"},
        {"role": "assistant", "content": "Ghent is lovely; the cats will like it"},
    ]
    sync, queued = fake_memory(new_store()), fake_memory(new_store(), job_worker=False)
    for memory, async_mode in ((sync, False), (queued, True)):
        memory.add(turns, user_id="u1", async_mode=async_mode)  # no fact: the script is empty
        memory.add("The cats sleep a lot", user_id="u2", async_mode=async_mode)
        memory.add("I like Ghent's canals", user_id="u1", async_mode=async_mode)
    queued.search_messages("Ghent", filters={"user_id": "u1"})  # waits for the indexer
    assert queued.pending() == 3
    rows = index_rows(sync)
    assert len(rows["vectors"]) == 4 and len(rows["message_keyword_partitions"]) == 2
    assert index_rows(queued) == rows
    sync.close()
    queued.close()
