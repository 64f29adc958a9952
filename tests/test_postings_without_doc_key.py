"""Keyword postings declare no foreign key to their document (migration 014): with foreign keys
on, deleting a document made SQLite look for postings pointing at it, and with no index of
postings by row (013) that was a scan of every posting in the file, on every update and delete.
A structural check keeps the lesson for every table: each foreign key has an index to check it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_keyword_terms_in_docs import (
    QUERIES,
    answers_as_before_and_deletes,
    fill,
    listed_and_held,
)
from test_shared_vectors import answers, kill_inside, open_memory

from offline_mem.store.db import Database

POSTINGS = (("keyword_postings", "memory_rowid", "keyword_docs"),
            ("message_keyword_postings", "message_seq", "message_keyword_docs"))  # fmt: skip


def foreign_keys(db: Database, table: str) -> list[tuple[str, str]]:
    """(column, parent table) of each foreign key the table declares."""
    return [(r[3], r[2]) for r in db.query(f"PRAGMA foreign_key_list({table})")]


def leading_columns(db: Database, table: str) -> set[str]:
    """The columns some index of the table (its primary key included) starts with."""
    found = {r[1] for r in db.query(f"PRAGMA table_info({table})")
             if r[5] == 1 and str(r[2]).upper() == "INTEGER"}  # a rowid alias  # fmt: skip
    for index in db.query(f"PRAGMA index_list({table})"):
        first = db.query_one(f"PRAGMA index_info({index[1]!r})")
        if first is not None:
            found.add(first[2])
    return found


def test_every_foreign_key_has_an_index_to_check_it(tmp_path) -> None:
    """Deleting a parent row checks its children through an index on the child's key, or reads
    the whole child table."""
    with open_memory(tmp_path / "m.db") as memory:
        db = memory.store.db
        tables = [r[0] for r in db.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )]  # fmt: skip
        unindexed = [
            (table, column, parent)
            for table in tables
            for column, parent in foreign_keys(db, table)
            if column not in leading_columns(db, table)
        ]
        assert unindexed == []
        for postings, _, _ in POSTINGS:
            assert foreign_keys(db, postings) == []


def schema_13_file(tmp_path: Path) -> tuple[Path, list[Any]]:
    """A file as schema 13 wrote it: postings with a foreign key to their document."""
    path = tmp_path / "old.db"
    with open_memory(path) as memory:
        fill(memory)
        want = answers(memory, QUERIES)
    db = Database(str(path))
    with db.atomic():
        for postings, key, docs in POSTINGS:
            db.execute(f"ALTER TABLE {postings} RENAME TO {postings}_014")
            db.execute(
                f"CREATE TABLE {postings} (partition TEXT NOT NULL, term TEXT NOT NULL, "
                f"{key} INTEGER NOT NULL REFERENCES {docs}({key}), tf INTEGER NOT NULL, "
                f"PRIMARY KEY (partition, term, {key})) WITHOUT ROWID"
            )
            db.execute(f"INSERT INTO {postings} SELECT * FROM {postings}_014")
            db.execute(f"DROP TABLE {postings}_014")
        db.execute("CREATE INDEX IF NOT EXISTS keyword_postings_term ON keyword_postings(term)")
        db.execute("DELETE FROM migrations WHERE name = '014_postings_without_doc_key'")
        db.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")
    db.close()
    return path, want


def test_migration_014_keeps_every_posting_and_drops_the_keys(tmp_path) -> None:
    path, want = schema_13_file(tmp_path)
    db = Database(str(path))
    assert all(foreign_keys(db, postings) for postings, _, _ in POSTINGS)  # the old layout
    before = listed_and_held(db)
    db.close()
    with open_memory(path) as memory:
        db = memory.store.db
        assert memory.store.meta()["schema_version"] == "14"
        assert [foreign_keys(db, postings) for postings, _, _ in POSTINGS] == [[], []]
        assert "keyword_postings_term" in {r[1] for r in db.query(
            "PRAGMA index_list(keyword_postings)")}  # fmt: skip
        assert listed_and_held(db) == before
        answers_as_before_and_deletes(memory, want)


def test_a_kill_inside_migration_014_leaves_the_file_as_it_was(tmp_path) -> None:
    path, want = schema_13_file(tmp_path)
    kill_inside(path, "014_postings_without_doc_key")
    db = Database(str(path))
    assert all(foreign_keys(db, postings) for postings, _, _ in POSTINGS)
    assert not {r[0] for r in db.query("SELECT name FROM sqlite_master")} & {
        f"{postings}_new" for postings, _, _ in POSTINGS}  # fmt: skip
    db.close()
    with open_memory(path) as memory:  # the old layout was intact: it migrates now
        answers_as_before_and_deletes(memory, want)
