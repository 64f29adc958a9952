"""A keyword doc lists its distinct terms (migration 013), so deleting it finds its postings by
primary key, without an index of postings by row (~200 bytes a memory and a message)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_shared_vectors import U1, answers, kill_inside, open_memory, said, sound
from writer_process import WordAnalyzer

from offline_mem.store.db import Database
from offline_mem.store.integrity import verify_file

INDEXES = (("keyword_docs", "keyword_postings", "memory_rowid", "keyword_postings_memory"),
           ("message_keyword_docs", "message_keyword_postings", "message_seq",
            "message_keyword_postings_seq"))  # fmt: skip
QUERIES = ["bees honey", "sail", "bees"]


def listed_and_held(db: Database) -> list[tuple[dict[int, list[str]], dict[int, list[str]]]]:
    out = []
    for docs, postings, key, _ in INDEXES:
        listed = {
            int(k): sorted(json.loads(t)) for k, t in db.query(f"SELECT {key}, terms FROM {docs}")
        }
        held: dict[int, list[str]] = {}
        for k, term in db.query(f"SELECT {key}, term FROM {postings} ORDER BY term"):
            held.setdefault(int(k), []).append(term)
        out.append((listed, held))
    return out


def indexes(db: Database) -> set[str]:
    return {r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'index'")}


def fill(memory: Any) -> None:
    memory.add(said("I keep bees bees", "I sail", "bees and honey"), user_id="u1", infer=False)
    memory.add([{"role": "user", "name": "Rui", "content": "honey cake"}], user_id="u1",
               infer=False)  # fmt: skip


def test_each_doc_lists_its_terms_and_a_delete_takes_exactly_its_postings(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        fill(memory)
        db = memory.store.db
        assert not indexes(db) & {index for *_, index in INDEXES}
        for listed, held in listed_and_held(db):
            assert listed == held and len(listed) == 4
        listed, _ = listed_and_held(db)[0]
        twice = sorted(set(WordAnalyzer().analyze("I keep bees bees").terms))
        assert twice in listed.values() and "bees" in twice  # distinct: each term once
        first = memory.get_all(filters=U1)["results"][0]["id"]
        memory.delete(first)  # the memory and its message
        memory.update(memory.get_all(filters=U1)["results"][0]["id"], "I row boats")
        for listed, held in listed_and_held(db):
            assert listed == held and len(listed) == 3
        sound(memory)


def test_verify_reports_a_doc_whose_list_differs_from_its_postings(tmp_path) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        fill(memory)
        db = memory.store.db
        with db.atomic():
            db.execute("UPDATE keyword_docs SET terms = '[\"bees\"]' WHERE memory_rowid = "
                       "(SELECT min(memory_rowid) FROM keyword_docs)")  # fmt: skip
            db.execute("UPDATE message_keyword_docs SET terms = 'not json' WHERE message_seq = "
                       "(SELECT min(message_seq) FROM message_keyword_docs)")  # fmt: skip
        report = verify_file(db, embedder=memory.embedder.identity)
        assert [p.check for p in report.problems] == [
            "keyword statistics", "message keyword statistics"]  # fmt: skip


def answers_as_before_and_deletes(memory: Any, want: list[Any]) -> None:
    """A migrated file answers every query as before, deletes a memory, and stays sound."""
    assert answers(memory, QUERIES) == want
    memory.delete(memory.get_all(filters=U1)["results"][0]["id"])
    sound(memory)


def schema_12_file(tmp_path: Path) -> tuple[Path, list[Any]]:
    """A file as schema 12 wrote it: no terms in the docs, postings indexed by row."""
    path = tmp_path / "old.db"
    with open_memory(path) as memory:
        fill(memory)
        want = answers(memory, QUERIES)
    db = Database(str(path))
    with db.atomic():
        for docs, postings, key, index in INDEXES:
            db.execute(f"ALTER TABLE {docs} DROP COLUMN terms")
            db.execute(f"CREATE INDEX {index} ON {postings}({key})")
        db.execute("DELETE FROM migrations WHERE name = '013_keyword_terms_in_docs'")
        db.execute("UPDATE meta SET value = '11' WHERE key = 'schema_version'")
    db.close()
    return path, want


def test_migration_013_lists_the_terms_and_drops_the_row_indexes(tmp_path) -> None:
    path, want = schema_12_file(tmp_path)
    with open_memory(path) as memory:
        db = memory.store.db
        assert not indexes(db) & {index for *_, index in INDEXES}
        for listed, held in listed_and_held(db):
            assert listed == held and len(listed) == 4
        answers_as_before_and_deletes(memory, want)


def test_a_kill_inside_migration_013_leaves_the_file_as_it_was(tmp_path) -> None:
    path, want = schema_12_file(tmp_path)
    kill_inside(path, "013_keyword_terms_in_docs")
    db = Database(str(path))
    assert {index for *_, index in INDEXES} <= indexes(db)
    assert "terms" not in {r[1] for r in db.query("PRAGMA table_info(keyword_docs)")}
    db.close()
    with open_memory(path) as memory:  # the old layout was intact: it migrates now
        assert answers(memory, QUERIES) == want
        sound(memory)
