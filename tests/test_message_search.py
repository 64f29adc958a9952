"""search_messages: every non-system message is embedded with its write, and stays searchable
even when extraction kept nothing from it. Fake models; the real embedder has its own tests.

Each test runs on a SQLite file and on a PostgreSQL database (the `store_config` fixture) but
those that rewrite a file into what an older schema wrote and reopen it: the database has one
migration (store/postgres/migrations.py), no older schema to come from."""

from __future__ import annotations

import numpy as np
import pytest
from invariants import store_violations, violations

from offline_mem import Memory, ValidationError
from offline_mem.store.db import Database
from offline_mem.store.migrations import SCHEMA_VERSION
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer
from offline_mem.transfer.export import export_lines
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export


def open_memory(store, *script) -> Memory:
    """On a store's config, or on a SQLite file's path."""
    config = store if isinstance(store, dict) else {"path": str(store)}
    return Memory(config, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(*script), entities=FakeEntities())  # fmt: skip


def contents(result) -> list[str]:
    return [item["content"] for item in result["results"]]


def test_a_message_extraction_skipped_is_still_found(store_config):
    m = open_memory(store_config, answer("User lives in Lisbon."), {})
    first = m.add([{"role": "user", "content": "I live in Lisbon."}], user_id="u1")
    m.add(
        [{"role": "user", "content": "My locker code is 4417 at the gym."},
         {"role": "assistant", "content": "Noted."}],
        user_id="u1", timestamp="2024-03-01T10:00:00",
    )  # fmt: skip
    found = m.search_messages("locker code gym", filters={"user_id": "u1"}, top_k=1)
    assert contents(found) == ["My locker code is 4417 at the gym."]
    hit = found["results"][0]
    assert hit["role"] == "user"
    assert hit["observed_at"].startswith("2024-03-01")
    assert hit["memory_ids"] == []  # no fact came from it
    lisbon = m.search_messages("live in Lisbon", filters={"user_id": "u1"}, top_k=1)
    assert lisbon["results"][0]["memory_ids"] == [first["results"][0]["id"]]
    assert 0.0 < lisbon["results"][0]["score"] <= 1.0
    assert store_violations(m) == []


def test_scopes_are_isolated_and_agent_ids_narrow(store_config):
    m = open_memory(store_config)
    m.add("The blue door is mine", user_id="u1", infer=False)
    m.add("The blue door is hers", user_id="u2", infer=False)
    # many messages of another agent in u1's partition: the filtered KNN must still find a1's
    for i in range(60):
        m.add(f"blue door number {i}", user_id="u1", agent_id="other", infer=False)
    m.add("A blue door for the agent", user_id="u1", agent_id="a1", infer=False)
    assert "The blue door is hers" not in contents(
        m.search_messages("blue door", filters={"user_id": "u1"}, top_k=100)
    )
    narrowed = m.search_messages("blue door", filters={"user_id": "u1", "agent_id": "a1"})
    assert contents(narrowed) == ["A blue door for the agent"]
    by_agent = m.search_messages("blue door", filters={"agent_id": "a1"})
    assert contents(by_agent) == ["A blue door for the agent"]
    assert len(m.search_messages("door", filters={"user_id": "u1"}, top_k=5)["results"]) == 5


def test_system_messages_are_kept_but_not_indexed(store_config):
    m = open_memory(store_config)
    m.add([{"role": "system", "content": "Speak like a pirate about treasure"},
           {"role": "user", "content": "I had toast for breakfast"}],
          user_id="u1", infer=False)  # fmt: skip
    found = m.search_messages("pirate treasure", filters={"user_id": "u1"})
    assert contents(found) == ["I had toast for breakfast"]
    assert m.store.counts()["messages"] == 2
    assert m.store.counts()["message_vectors"] == 1


def test_threshold_top_k_and_bad_filters(store_config):
    m = open_memory(store_config)
    m.add("I collect vintage stamps", user_id="u1", infer=False)
    m.add("Completely unrelated words here", user_id="u1", infer=False)
    strict = m.search_messages(
        "I collect vintage stamps", filters={"user_id": "u1"}, threshold=0.99
    )
    assert contents(strict) == ["I collect vintage stamps"]
    assert len(m.search_messages("x", filters={"user_id": "u1"}, top_k=1)["results"]) == 1
    with pytest.raises(ValidationError, match="only user_id"):
        m.search_messages("x", filters={"user_id": "u1", "category": "a"})
    with pytest.raises(ValidationError):
        m.search_messages("x", filters=None)
    with pytest.raises(ValidationError):
        m.search_messages("x", filters={"user_id": "u1"}, top_k=0)
    with pytest.raises(ValidationError):
        m.search_messages("x", filters={"user_id": "u1"}, threshold=2)
    with pytest.raises(ValidationError):
        m.search_messages("x", user_id="u1")


def test_raw_add_embeds_each_text_once(store_config):
    embedder = FakeEmbedder()
    m = Memory(store_config, embedder=embedder, entities=FakeEntities())
    embedder.calls.clear()
    m.add([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}],
          user_id="u1", infer=False)  # fmt: skip
    assert embedder.calls == [["one", "two"]]


def test_delete_all_and_reset_remove_message_vectors(store_config):
    m = open_memory(store_config)
    m.add("keep me", user_id="u2", infer=False)
    m.add("drop me", user_id="u1", infer=False)
    m.delete_all(user_id="u1")
    assert m.store.counts()["message_vectors"] == 1
    assert m.search_messages("drop me", filters={"user_id": "u1"})["results"] == []
    assert store_violations(m) == []
    m.reset()
    assert m.store.counts()["message_vectors"] == 0


def test_a_file_from_before_the_index_is_filled_when_opened(tmp_path):
    path = tmp_path / "old.db"
    m = open_memory(path)
    m.add([{"role": "user", "content": "I play the cello"},
           {"role": "system", "content": "be brief"}], user_id="u1", infer=False)  # fmt: skip
    m.close()
    # Turn the file back into what schema 1 wrote: no message index, no migrations 002, 003.
    db = Database(str(path))
    with db.atomic():
        db.execute("DROP VIEW message_vector_values")  # and what migration 012 made
        db.execute("DROP TABLE message_vector_links")
        for trigger in ("memory_vectors_unshare_delete", "memory_vectors_unshare_update"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE message_vectors")
        for trigger in ("memories_vector_insert", "memories_vector_delete",
                        "memories_vector_update", "vector_changes_prune"):  # fmt: skip
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE vector_changes")
        db.execute("DROP TABLE message_vector_changes")  # and what migration 008 made
        db.execute("DROP INDEX messages_user")
        db.execute(
            "DELETE FROM migrations WHERE name IN ('002_message_vectors', '003_vector_changes',"
            " '008_vectors_by_row', '012_shared_message_vectors')"
        )
        db.execute("DELETE FROM meta WHERE key = 'message_vectors'")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.close()
    reopened = open_memory(path)
    assert reopened.store.meta()["message_vectors"] == "complete"
    assert reopened.store.meta()["schema_version"] == str(SCHEMA_VERSION) == "14"
    assert contents(reopened.search_messages("cello", filters={"user_id": "u1"})) == [
        "I play the cello"
    ]
    assert violations(reopened.store.db) == []


def test_an_imported_file_has_its_messages_indexed(tmp_path, store_config):
    source = open_memory(tmp_path / "a.db", answer("User owns a red kayak."))
    source.add([{"role": "user", "content": "I bought a red kayak"},
                {"role": "assistant", "content": "Enjoy paddling!"}], user_id="u1")  # fmt: skip
    lines = list(export_lines(source.store.db))
    target = open_memory(store_config)
    import_data(target, read_export(lines))
    found = target.search_messages("paddling", filters={"user_id": "u1"}, top_k=1)
    assert contents(found) == ["Enjoy paddling!"]
    kayak = target.search_messages("red kayak", filters={"user_id": "u1"}, top_k=1)
    assert len(kayak["results"][0]["memory_ids"]) == 1
    assert store_violations(target) == []


def test_a_query_searched_twice_is_embedded_once(store_config):
    embedder = FakeEmbedder()
    m = Memory(store_config, embedder=embedder, entities=FakeEntities())
    m.add("I swim on Mondays", user_id="u1", infer=False)
    embedder.calls.clear()
    memories = m.search("when do I swim", filters={"user_id": "u1"})
    messages = m.search_messages("when do I swim", filters={"user_id": "u1"})
    assert embedder.calls == [["when do I swim"]]
    assert [r["memory"] for r in memories["results"]] == ["I swim on Mondays"]
    assert contents(messages) == ["I swim on Mondays"]


def test_the_speakers_name_is_part_of_what_is_searched(store_config):
    m = open_memory(store_config)
    m.add(
        [{"role": "user", "name": "Oskar", "content": "I moved to a new flat"},
         {"role": "assistant", "name": "Alex", "content": "I moved to a new flat too"}],
        user_id="u1", infer=False,
    )  # fmt: skip
    found = m.search_messages("Where did Oskar move?", filters={"user_id": "u1"}, top_k=2)
    assert contents(found) == ["I moved to a new flat", "I moved to a new flat too"]
    assert [hit["name"] for hit in found["results"]] == ["Oskar", "Alex"]
    found = m.search_messages("Where did Alex move?", filters={"user_id": "u1"}, top_k=2)
    assert [hit["name"] for hit in found["results"]] == ["Alex", "Oskar"]
    # the stored vector is the one of "<name>: <content>"
    db = m.store.db
    if isinstance(db, Database):
        (blob,) = db.query_one(
            "SELECT v.embedding FROM message_vectors v JOIN messages g ON g.seq = v.rowid "
            "WHERE g.name = 'Oskar'"
        )
        stored = np.frombuffer(blob, dtype=np.float32)
    else:  # PostgreSQL: a vector column of the message's row
        (values,) = db.query_one("SELECT embedding::real[] FROM messages WHERE name = 'Oskar'")
        stored = np.array(values, dtype=np.float32)
    want = FakeEmbedder().embed("Oskar: I moved to a new flat")
    assert np.allclose(stored, want)


def test_vectors_from_before_names_counted_are_rebuilt_when_opened(tmp_path):
    path = tmp_path / "old.db"
    m = open_memory(path)
    m.add([{"role": "user", "name": "Oskar", "content": "I play the cello"}], user_id="u1",
          infer=False)  # fmt: skip
    m.close()
    # What schema 3 wrote: the vector of the content alone, and no migration 004.
    db = Database(str(path))
    old = FakeEmbedder().embed("I play the cello").astype(np.float32).tobytes()
    with db.atomic():
        (seq,) = db.query_one("SELECT rowid FROM message_vectors")
        db.execute("UPDATE message_vectors SET embedding = ? WHERE rowid = ?", (old, seq))
        db.execute("DELETE FROM migrations WHERE name = '004_message_vectors_with_names'")
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.close()
    reopened = open_memory(path)
    assert reopened.store.meta()["message_vectors"] == "complete"
    (blob,) = reopened.store.db.query_one("SELECT embedding FROM message_vectors")
    want = FakeEmbedder().embed("Oskar: I play the cello")
    assert np.allclose(np.frombuffer(blob, dtype=np.float32), want)
    assert violations(reopened.store.db) == []


class SameVector(FakeEmbedder):
    """Every text gets one vector: similarity cannot tell messages apart, only words can."""

    def embed_batch(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.identity.dimension), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def keyword_rows(m: Memory) -> dict[str, int]:
    tables = ("message_keyword_docs", "message_keyword_postings", "message_keyword_terms",
              "message_keyword_partitions")  # fmt: skip
    return {t: m.store.db.query_one(f"SELECT count(*) FROM {t}")[0] for t in tables}


def test_search_finds_a_turn_by_a_word_the_embedder_misses(store_config):
    m = Memory(store_config, embedder=SameVector(),
               extractor=FakeExtractor(*[answer() for _ in range(81)]),
               entities=FakeEntities())  # fmt: skip
    m.add([{"role": "user", "name": "Noor", "content": "We saw a film called Brightwater"}],
          user_id="u1")  # fmt: skip
    for i in range(80):
        m.add([{"role": "assistant", "content": f"Filler turn number {i} about the weather"}],
              user_id="u1")  # fmt: skip
    found = m.search("Which film, Brightwater?", filters={"user_id": "u1"}, top_k=5,
                     threshold=None, explain=True)["results"]  # fmt: skip
    first = found[0]
    assert first["kind"] == "message" and first["name"] == "Noor"
    assert first["score_details"]["keyword_score"] > 0
    assert all(item["score_details"]["keyword_score"] == 0 for item in found[1:])
    assert store_violations(m) == []


def test_message_keyword_rows_go_with_their_messages(store_config):
    m = open_memory(store_config, answer(), answer())
    m.add([{"role": "user", "content": "I keep bees on the roof"},
           {"role": "system", "content": "be brief"}], user_id="u1")  # fmt: skip
    m.add([{"role": "user", "content": "Honey harvest in June"}], user_id="u2")
    rows = keyword_rows(m)
    assert rows["message_keyword_docs"] == 2  # the system message is not indexed
    assert rows["message_keyword_partitions"] == 2
    turn = m.search("bees roof", filters={"user_id": "u1"})["results"][0]
    assert turn["kind"] == "message"
    m.delete(turn["id"])
    assert keyword_rows(m)["message_keyword_docs"] == 1
    assert store_violations(m) == []
    m.delete_all(user_id="u2")
    assert keyword_rows(m) == dict.fromkeys(keyword_rows(m), 0)
    assert store_violations(m) == []
    m.add([{"role": "user", "content": "A new hive"}], user_id="u1")
    m.reset()
    assert keyword_rows(m) == dict.fromkeys(keyword_rows(m), 0)


def test_messages_of_a_file_from_before_their_keyword_index_are_indexed_when_opened(tmp_path):
    path = tmp_path / "old.db"
    m = open_memory(path, answer())
    m.add([{"role": "user", "name": "Noor", "content": "We saw a film called Brightwater"},
           {"role": "system", "content": "be brief"}], user_id="u1")  # fmt: skip
    m.close()
    db = Database(str(path))  # back to schema 5: no message keyword index
    with db.atomic():
        for table in ("message_keyword_postings", "message_keyword_terms",
                      "message_keyword_docs", "message_keyword_partitions"):  # fmt: skip
            db.execute(f"DROP TABLE {table}")
        db.execute("ALTER TABLE keyword_docs DROP COLUMN terms")  # and what 013 made
        db.execute("CREATE INDEX keyword_postings_memory ON keyword_postings(memory_rowid)")
        db.execute("DELETE FROM migrations WHERE name IN ('006_message_keywords', "
                   "'013_keyword_terms_in_docs')")  # fmt: skip
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    db.close()
    reopened = open_memory(path)
    assert reopened.store.meta()["message_vectors"] == "complete"
    assert keyword_rows(reopened)["message_keyword_docs"] == 1
    found = reopened.search("Brightwater", filters={"user_id": "u1"}, explain=True)["results"]
    assert found[0]["name"] == "Noor" and found[0]["score_details"]["keyword_score"] > 0
    assert violations(reopened.store.db) == []
