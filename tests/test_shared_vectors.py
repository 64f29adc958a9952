"""A raw memory and its source message share one vector row (migration 012).

The message keeps a link to the memory's row instead of a second copy of the same bytes. Every
write that changes or removes the memory's vector leaves the message its own copy first, so
neither ever loses a vector the other still needs; search answers as with two copies.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from invariants import violations
from writer_process import WordAnalyzer

from offline_mem import Memory
from offline_mem.store.db import Database
from offline_mem.store.integrity import verify_file
from offline_mem.testing import FakeEmbedder
from offline_mem.transfer.export import export_lines
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export

U1 = {"user_id": "u1"}


def said(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text} for text in texts]


def open_memory(path: Path | str) -> Memory:
    return Memory({"path": str(path), "nlp": None}, embedder=FakeEmbedder(),
                  analyzer=WordAnalyzer())  # fmt: skip


def rows(memory: Memory, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in memory.store.db.query(sql, params)]


def stored_vectors(memory: Memory) -> tuple[int, int, int]:
    """(memory vector rows, own message vector rows, message vector links)."""
    return tuple(  # type: ignore[return-value]
        rows(memory, f"SELECT count(*) FROM {t}")[0][0]
        for t in ("memory_vectors", "message_vectors", "message_vector_links")
    )


def source_message(memory: Memory, memory_id: str) -> str:
    return rows(
        memory,
        "SELECT g.id FROM messages g JOIN provenance p ON p.message_seq = g.seq "
        "JOIN memories m ON m.rowid = p.memory_rowid WHERE m.id = ?",
        (memory_id,),
    )[0][0]


def message_blob(memory: Memory, message_id: str) -> bytes:
    (blob,) = rows(memory, "SELECT v.embedding FROM message_vector_values v JOIN messages m "
                   "ON m.seq = v.rowid WHERE m.id = ?", (message_id,))[0]  # fmt: skip
    return bytes(blob)


def sound(memory: Memory) -> None:
    assert violations(memory.store.db) == []
    report = verify_file(memory.store.db, embedder=memory.embedder.identity)
    assert report.ok, report.problems


def answers(memory: Memory, queries: list[str]) -> list[Any]:
    out = []
    for query in queries:
        hits = memory.search(query, filters=U1, top_k=5, threshold=None)["results"]
        found = memory.search_messages(query, filters=U1, top_k=5)["results"]
        out.append([[(h["id"], round(h["score"], 6)) for h in hits],
                    [(h["id"], round(h["score"], 6)) for h in found]])  # fmt: skip
    return out


def test_a_raw_add_stores_one_vector_for_the_memory_and_its_message(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        memory.add("I keep bees in the garden", user_id="u1", infer=False)
        # A named speaker's message is embedded as "Name: text": a vector of its own.
        memory.add([{"role": "user", "name": "Rui", "content": "I sail on Sundays"}],
                   user_id="u1", infer=False)  # fmt: skip
        assert stored_vectors(memory) == (2, 1, 1)
        hit = memory.search_messages("I keep bees in the garden", filters=U1)["results"][0]
        assert hit["content"] == "I keep bees in the garden" and abs(hit["score"] - 1) < 1e-6
        assert memory.store.counts()["message_vectors"] == 2
        sound(memory)


def test_updating_the_memory_leaves_the_message_its_old_vector(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        memory_id = memory.add("I keep bees", user_id="u1", infer=False)["results"][0]["id"]
        message_id = source_message(memory, memory_id)
        before = message_blob(memory, message_id)
        memory.update(memory_id, "I keep goats now")
        assert stored_vectors(memory) == (1, 1, 0)
        assert message_blob(memory, message_id) == before
        assert message_blob(memory, message_id) != bytes(
            rows(memory, "SELECT embedding FROM memory_vectors")[0][0]
        )
        hit = memory.search_messages("I keep bees", filters=U1)["results"][0]
        assert hit["id"] == message_id and abs(hit["score"] - 1) < 1e-6
        sound(memory)


def test_deleting_the_message_keeps_the_memory_vector(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        memory_id = memory.add("I keep bees", user_id="u1", infer=False)["results"][0]["id"]
        message_id = source_message(memory, memory_id)
        before = message_blob(memory, message_id)
        memory.delete(message_id)
        assert stored_vectors(memory) == (1, 0, 0)
        assert bytes(rows(memory, "SELECT embedding FROM memory_vectors")[0][0]) == before
        hit = memory.search("I keep bees", filters=U1, threshold=None)["results"][0]
        assert hit["id"] == memory_id
        sound(memory)


def test_deleting_the_memory_copies_the_vector_to_a_message_that_stays(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        first = memory.add("I keep bees", user_id="u1", infer=False)["results"][0]["id"]
        second = memory.add("I sail", user_id="u1", infer=False)["results"][0]["id"]
        message_id = source_message(memory, first)
        before = message_blob(memory, message_id)
        db = memory.store.db
        with db.atomic():  # another memory cites the first one's message: it stays
            db.execute("INSERT INTO provenance (memory_rowid, message_seq) SELECT "
                       "(SELECT rowid FROM memories WHERE id = ?), seq FROM messages "
                       "WHERE id = ?", (second, message_id))  # fmt: skip
        memory.delete(first)
        assert stored_vectors(memory) == (1, 1, 1)
        assert message_blob(memory, message_id) == before
        hit = memory.search_messages("I keep bees", filters=U1)["results"][0]
        assert hit["id"] == message_id and abs(hit["score"] - 1) < 1e-6
        sound(memory)


def test_delete_all_and_reset_leave_no_vector_or_link(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        memory.add(said("I keep bees", "I sail"), user_id="u1", infer=False)
        memory.add("I knit", user_id="u2", infer=False)
        memory.delete_all(user_id="u1")
        assert stored_vectors(memory) == (1, 0, 1)
        sound(memory)
        memory.reset()
        assert stored_vectors(memory) == (0, 0, 0)


def test_a_failed_write_leaves_no_link(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        memory.add("I keep bees", user_id="u1", infer=False)

        def fail_on_link(sql: str, params: Any) -> None:
            if "message_vector_links" in sql:
                raise RuntimeError("injected")

        memory.store.db.tracer = fail_on_link
        with pytest.raises(RuntimeError, match="injected"):
            memory.add("I sail", user_id="u1", infer=False)
        memory.store.db.tracer = None
        assert stored_vectors(memory) == (1, 0, 1)
        assert rows(memory, "SELECT count(*) FROM messages")[0][0] == 1
        sound(memory)


def test_an_import_links_as_a_raw_add_does(tmp_path) -> None:
    with open_memory(tmp_path / "a.db") as source, open_memory(tmp_path / "b.db") as target:
        source.add(said("I keep bees", "I sail"), user_id="u1", infer=False)
        import_data(target, read_export(list(export_lines(source.store.db, vectors=True))))
        assert stored_vectors(target) == (2, 0, 2)
        queries = ["bees", "I sail", "garden"]
        assert answers(target, queries) == answers(source, queries)
        sound(target)


def unshare(path: Path) -> None:
    """Turn a file back into what schema 10 wrote: each message its own copy of the vector,
    none of migration 012's objects."""
    db = Database(str(path))
    with db.atomic():
        db.execute("INSERT INTO message_vectors (rowid, embedding) SELECT message_seq, "
                   "embedding FROM message_vector_links l JOIN memory_vectors v "
                   "ON v.rowid = l.memory_rowid")  # fmt: skip
        db.execute("DROP VIEW message_vector_values")
        for trigger in ("memory_vectors_unshare_delete", "memory_vectors_unshare_update"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE message_vector_links")
        db.execute("DELETE FROM migrations WHERE name = '012_shared_message_vectors'")
        db.execute("UPDATE meta SET value = '10' WHERE key = 'schema_version'")
    db.close()


def schema_10_file(tmp_path: Path) -> tuple[Path, list[Any]]:
    path = tmp_path / "old.db"
    queries = ["bees", "I sail", "knit"]
    with open_memory(path) as memory:
        memory.add(said("I keep bees", "I sail", "bees and honey"), user_id="u1", infer=False)
        memory.add([{"role": "user", "name": "Rui", "content": "I knit"}], user_id="u1",
                   infer=False)  # fmt: skip
        want = answers(memory, queries)
    unshare(path)
    db = Database(str(path))
    assert db.query_one("SELECT count(*) FROM message_vectors")[0] == 4
    db.close()
    return path, want


def test_migration_012_links_the_copies_and_answers_as_before(tmp_path) -> None:
    path, want = schema_10_file(tmp_path)
    with open_memory(path) as memory:
        assert stored_vectors(memory) == (4, 1, 3)  # the named message keeps its own
        assert answers(memory, ["bees", "I sail", "knit"]) == want
        sound(memory)


def kill_inside(path: Path, name: str) -> None:
    """Open `path` in a child that stops inside migration `name`, before its commit, and kill
    it there (SIGKILL)."""
    dying = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from offline_mem.store import migrations\n"
        f"name = {name!r}\n"
        "at = [n for n, _ in migrations.MIGRATIONS].index(name)\n"
        "step = migrations.MIGRATIONS[at][1]\n"
        "def stalled(db, ctx):\n"
        "    step(db, ctx)\n"
        "    print('migrated, not committed', flush=True)\n"
        "    time.sleep(60)\n"
        "migrations.MIGRATIONS[at] = (name, stalled)\n"
        "from test_shared_vectors import open_memory\n"
        "open_memory(sys.argv[1])\n"
    )
    process = subprocess.Popen([sys.executable, "-c", dying, str(path)], stdout=subprocess.PIPE,
                               text=True)  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "migrated, not committed"
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_a_kill_inside_migration_012_leaves_the_file_as_it_was(tmp_path) -> None:
    path, want = schema_10_file(tmp_path)
    kill_inside(path, "012_shared_message_vectors")
    db = Database(str(path))
    tables = {r[0] for r in db.query("SELECT name FROM sqlite_master")}
    assert "message_vector_links" not in tables
    assert db.query_one("SELECT count(*) FROM message_vectors")[0] == 4
    db.close()
    with open_memory(path) as memory:  # the old layout was intact: it migrates now
        assert stored_vectors(memory) == (4, 1, 3)
        assert answers(memory, ["bees", "I sail", "knit"]) == want
        sound(memory)
