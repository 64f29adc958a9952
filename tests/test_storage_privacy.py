"""Deleted means gone: after delete, delete_all, reset and compact, no byte of a deleted text is
left in the memory file or its WAL, history keeps the events without the text, and compact
gives the freed pages back.

Each test writes a unique marker, deletes what holds it, and reads the raw bytes of the .db and
-wal files (the marker's UTF-8 bytes; SQLite stores text as UTF-8 in these files)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from offline_mem import Memory
from offline_mem.testing import FakeEmbedder, FakeExtractor, answer


class _StoreWarnings(logging.Handler):
    """The store's warnings (a checkpoint after a delete that a reader's snapshot kept), so a
    failure below says why the text stayed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


STORE_WARNINGS = _StoreWarnings()
logging.getLogger("offline_mem.store").addHandler(STORE_WARNINGS)


def on_disk(path: str, marker: str) -> list[str]:
    """The files of the memory (main, WAL) that hold the marker's bytes, each with the WAL's
    size and the store's last warning."""
    needle = marker.encode()
    wal = path + "-wal"
    why = (
        f" (WAL {os.path.getsize(wal) if os.path.isfile(wal) else 0} bytes; "
        f"store warned: {STORE_WARNINGS.seen[-1:]})"
    )
    return [p + why for p in (path, wal) if os.path.isfile(p) and needle in Path(p).read_bytes()]


def marker() -> str:
    return f"zq{uuid.uuid4().hex[:12]}xk"


def open_memory(path: str, *script) -> Memory:
    return Memory({"path": path, "nlp": None}, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(*script))  # fmt: skip


def filler(memory: Memory, user: str, count: int = 30) -> None:
    memory.add([{"role": "user", "content": f"ordinary note {i} of {user}"} for i in range(count)],
               user_id=user, infer=False)  # fmt: skip


def test_a_deleted_raw_memory_leaves_no_byte_behind(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    secret = marker()
    with open_memory(path) as memory:
        filler(memory, "ana")
        added = memory.add(f"my door code is {secret}", user_id="ana", infer=False)
        memory_id = added["results"][0]["id"]
        assert on_disk(path, secret)  # the test can see it while it is stored
        memory.delete(memory_id)
        assert on_disk(path, secret) == []  # secure_delete + WAL truncated, before any compact
        hits = memory.search(f"door code {secret}", filters={"user_id": "ana"}, top_k=50)
        assert all(secret not in h["memory"] for h in hits["results"])
        rows = memory.history(memory_id)
        assert [r["event"] for r in rows] == ["ADD", "DELETE"]
        assert all(r["old_memory"] is None and r["new_memory"] is None for r in rows)
        assert rows[-1]["is_deleted"] is True or rows[-1]["is_deleted"] == 1
        memory.compact()
    assert on_disk(path, secret) == []


def test_an_updated_then_deleted_memory_loses_every_version(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    first, second = marker(), marker()
    with open_memory(path) as memory:
        filler(memory, "ana")
        memory_id = memory.add(f"likes {first}", user_id="ana", infer=False)["results"][0]["id"]
        memory.update(memory_id, f"likes {second} now")
        assert [r["event"] for r in memory.history(memory_id)] == ["ADD", "UPDATE"]
        memory.delete(memory_id)
        assert on_disk(path, first) == [] and on_disk(path, second) == []
        assert [r["event"] for r in memory.history(memory_id)] == ["ADD", "UPDATE", "DELETE"]


def test_delete_all_and_reset_leave_no_text(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    gone, kept, reset_away = marker(), marker(), marker()
    with open_memory(path) as memory:
        filler(memory, "ana")
        filler(memory, "bo")
        memory.add([{"role": "user", "content": f"note {gone} one"},
                    {"role": "assistant", "content": f"reply {gone} two"}],
                   user_id="ana", infer=False)  # fmt: skip
        memory.add(f"note {kept}", user_id="bo", infer=False)
        memory.delete_all(user_id="ana")
        assert on_disk(path, gone) == []
        assert on_disk(path, kept)  # another scope's text stays
        memory.add(f"note {reset_away}", user_id="bo", infer=False)
        memory.reset()
        assert on_disk(path, kept) == [] and on_disk(path, reset_away) == []


def test_a_deleted_message_and_an_extracted_fact_leave_no_text(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    said, fact = marker(), marker()
    with open_memory(path, answer(f"Ana keeps a {fact} in the shed")) as memory:
        filler(memory, "ana")
        result = memory.add(f"I keep a {said} in the shed", user_id="ana")
        fact_id = result["results"][0]["id"]
        memory.delete(fact_id)
        assert on_disk(path, fact) == []
        assert on_disk(path, said)  # the turn is its own item: deleting the fact keeps it
        message = memory.search_messages(said, filters={"user_id": "ana"}, top_k=1)["results"][0]
        memory.delete(message["id"])
        assert on_disk(path, said) == []


def test_a_done_jobs_results_forget_a_deleted_fact(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    name = marker()
    fact = f"User owns a boat with a blue {name} sail"  # the message words it otherwise
    with open_memory(path, answer(fact)) as memory:
        queued = memory.add(f"I own a boat with a blue {name} sail, bought last week",
                            user_id="ana", async_mode=True)  # fmt: skip
        memory.flush()
        (item,) = memory.job(queued["event_id"])["results"]
        assert item["memory"] == fact and on_disk(path, fact)
        memory.delete(item["id"])
        assert memory.job(queued["event_id"])["results"] == [{**item, "memory": None}]
        assert on_disk(path, fact) == []
        assert on_disk(path, name)  # the turn stays, an item of its own


def test_compact_gives_freed_pages_back(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    with open_memory(path) as memory:
        for user in range(40):
            filler(memory, f"u{user}", 25)
        memory.store.db.checkpoint()
        full = os.path.getsize(path)
        for user in range(0, 40, 2):
            memory.delete_all(user_id=f"u{user}")
        # wholly freed pages only: pages left half full by the other users' rows count as used
        assert memory.store.usage()["free_bytes"] > 0.1 * full
        report = memory.compact()
        assert report["bytes_after"] < 0.65 * report["bytes_before"]
        assert os.path.getsize(path) == report["bytes_after"]
        assert memory.store.usage()["free_bytes"] == 0
        assert len(memory.get_all(filters={"user_id": "u1"}, top_k=100)["results"]) == 25


def test_compact_refuses_to_run_inside_a_write(tmp_path) -> None:
    from offline_mem.errors import StoreError

    with (
        open_memory(str(tmp_path / "m.db")) as memory,
        memory.store.atomic(),
        pytest.raises(StoreError, match="inside a transaction"),
    ):
        memory.store.compact()


def test_async_memory_compacts_too(tmp_path) -> None:
    import asyncio

    from offline_mem import AsyncMemory

    async def run() -> dict[str, int]:
        config = {"path": str(tmp_path / "m.db"), "nlp": None}
        async with AsyncMemory(config, embedder=FakeEmbedder()) as memory:
            await memory.add("a note to drop", user_id="ana", infer=False)
            await memory.delete_all(user_id="ana")
            return await memory.compact()

    report = asyncio.run(run())
    assert report["bytes_after"] <= report["bytes_before"]


def test_a_new_file_has_8_kib_pages_and_a_vector_costs_a_fifth_of_one(tmp_path) -> None:
    """A 1,536-byte vector row fits twice in a 4 KiB page (half of it wasted) and five times in
    an 8 KiB one (docs/storage.md)."""
    from offline_mem.store.db import PAGE_SIZE

    with open_memory(str(tmp_path / "m.db")) as memory:
        for i in range(40):
            memory.add(f"note number {i}", user_id="u", infer=False)
        db = memory.store.db
        assert db.query_one("PRAGMA page_size")[0] == PAGE_SIZE == 8192
        pages, cells = db.query_one(
            "SELECT count(*), sum(ncell) FROM dbstat WHERE name = 'memory_vectors' "
            "AND pagetype = 'leaf'"
        )
    assert cells == 40 and pages <= 9, (pages, cells)


READER = """
import sqlite3, sys
reader = sqlite3.connect(sys.argv[1], isolation_level=None)
reader.execute("BEGIN")
reader.execute("SELECT count(*) FROM memories").fetchone()
print("reading", flush=True)
sys.stdin.readline()
reader.execute("COMMIT")
"""


def test_a_reader_holding_a_snapshot_keeps_the_text_until_compact_and_says_so(tmp_path) -> None:
    """Another process reading through a delete keeps the WAL frames that hold the text: the
    delete does not wait for it (it retries for up to a second), warns, and the next compact,
    once the reader is gone, erases the text."""
    path = str(tmp_path / "m.db")
    secret = marker()
    with open_memory(path) as memory:
        filler(memory, "ana")
        added = memory.add(f"my door code is {secret}", user_id="ana", infer=False)
        # another process: SQLite's locks are the process's, so a reader in this one would not
        # hold the checkpoint back
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            assert reader.stdout is not None and reader.stdout.readline().strip() == b"reading"
            before = len(STORE_WARNINGS.seen)
            memory.delete(added["results"][0]["id"])
            assert len(STORE_WARNINGS.seen) == before + 1
            assert "a reader's snapshot kept it" in STORE_WARNINGS.seen[-1]
            assert on_disk(path, secret)
        finally:
            reader.communicate(b"done\n", timeout=30)
        memory.compact()
        assert on_disk(path, secret) == []
