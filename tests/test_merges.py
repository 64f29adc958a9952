"""A fact said again in other words merges into the memory that says it already: no second
memory; the memory gains the new message as a source and a MERGE history row. Fake models
(FakeEmbedder ignores case and punctuation, so the paraphrases below embed as their originals).
Each test runs on a SQLite file and on a PostgreSQL database (`any_store`)."""

from __future__ import annotations

from typing import Any

import pytest
from store_export import export_lines

from offline_mem.memory import Memory
from offline_mem.store.integrity import verify_file
from offline_mem.store.postgres.integrity import verify_database
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer, changes
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export

KEEN = "User is keen on counseling."
AGAIN = "user is KEEN on counseling!"  # the same fact in other words (similarity 1.0 here)
PORTO = "User lives in Porto."
LISBON = "User lives in Lisbon."  # differs in one value: never merged


def memory(
    store: dict[str, Any], *script: Any, async_mode: bool = False, still_true: Any = None
) -> Memory:
    return Memory({**store, "async_mode": async_mode}, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(*script, still_true=still_true),
                  entities=FakeEntities())  # fmt: skip


def verified(m: Memory) -> bool:
    """`verify` of the memory file, or of the PostgreSQL database."""
    verify = verify_file if m.config.store is None else verify_database
    return verify(m.store.db, embedder=m.embedder.identity).ok


def test_a_paraphrase_merges_into_the_stored_memory(any_store) -> None:
    m = memory(any_store, answer(KEEN), answer(AGAIN))
    first = m.add("I am keen on counseling.", user_id="lena", timestamp="2023-05-08T10:00:00Z")
    (added,) = first["results"]
    out = m.add("Counseling, I am keen on it!", user_id="lena", timestamp="2023-06-01T10:00:00Z")
    assert out["results"] == [
        {"id": added["id"], "memory": KEEN, "event": "MERGE", "merged": AGAIN}
    ]
    (stored,) = m.get_all(filters={"user_id": "lena"})["results"]
    assert stored["id"] == added["id"] and stored["memory"] == KEEN
    (found,) = m.search("counseling", filters={"user_id": "lena"}, include_sources=True,
                        include_messages=False)["results"]  # fmt: skip
    assert [s["content"] for s in found["sources"]] == [
        "I am keen on counseling.", "Counseling, I am keen on it!"]  # fmt: skip
    add, merge = m.history(added["id"])
    assert add["event"] == "ADD"
    assert (merge["event"], merge["old_memory"], merge["new_memory"]) == ("MERGE", KEEN, AGAIN)
    assert merge["happened_at"] == "2023-06-01T10:00:00.000000+00:00"
    assert verified(m)


def test_facts_that_differ_in_one_value_are_not_merged(any_store) -> None:
    m = memory(any_store, answer(LISBON), answer(PORTO))
    m.add("I live in Lisbon.", user_id="lena")
    out = m.add("I live in Porto too.", user_id="lena")
    assert [r["event"] for r in out["results"]] == ["ADD"]
    assert {i["memory"] for i in m.get_all(filters={"user_id": "lena"})["results"]} == {
        LISBON, PORTO}  # fmt: skip


def test_another_scope_s_memory_is_never_merged_into(any_store) -> None:
    m = memory(any_store, answer(KEEN), answer(AGAIN))
    m.add("I am keen on counseling.", user_id="lena")
    out = m.add("I am keen on counseling!", user_id="oskar")
    assert [r["event"] for r in out["results"]] == ["ADD"]
    assert len(m.get_all(filters={"user_id": "oskar"})["results"]) == 1


def test_a_queued_add_merges_too_and_a_deleted_memory_takes_its_merges_text(any_store) -> None:
    m = memory(any_store, answer(KEEN), answer(AGAIN), async_mode=True)
    m.add("I am keen on counseling.", user_id="lena")
    m.add("Counseling, I am keen on it!", user_id="lena")
    m.flush(timeout=60)
    (stored,) = m.get_all(filters={"user_id": "lena"})["results"]
    assert [h["event"] for h in m.history(stored["id"])] == ["ADD", "MERGE"]
    m.delete(stored["id"])
    rows = m.store.db.query("SELECT old_memory, new_memory FROM history")
    assert all(old is None and new is None for old, new in rows)
    jobs = " ".join(r[0] for r in m.store.db.query("SELECT results FROM jobs"))
    assert "counseling" not in jobs.lower()  # the done jobs' results kept ids and events only


def test_merges_survive_export_and_import(any_store, tmp_path) -> None:
    """Exported from either store, imported into a new file."""
    m = memory(any_store, answer(KEEN), answer(AGAIN))
    m.add("I am keen on counseling.", user_id="lena")
    m.add("Counseling, I am keen on it!", user_id="lena")
    lines = list(export_lines(m))
    target = Memory({"path": str(tmp_path / "b.db")}, embedder=FakeEmbedder(),
                    entities=FakeEntities())  # fmt: skip
    import_data(target, read_export(lines))
    (stored,) = target.get_all(filters={"user_id": "lena"})["results"]
    assert [h["event"] for h in target.history(stored["id"])] == ["ADD", "MERGE"]
    assert len(target.store.sources(target.store.get(stored["id"]).rowid)) == 2


MOVED = "User lives in Porto now, not in Lisbon."


@pytest.mark.parametrize("narrower", [{"agent_id": "tutor"}, {"run_id": "trip"}])
def test_a_fact_links_only_to_memories_of_exactly_its_scope(any_store, narrower, tmp_path) -> None:
    """A user's add reads the memories of the user's agents and runs (as Mem0's does), but it
    merges into and supersedes only the user's own: a link across scopes would outlive the
    other scope's delete_all, and `verify` and `import` refuse it."""
    m = memory(any_store, answer(LISBON), answer(KEEN), answer(AGAIN), answer(MOVED),
               still_true=changes((LISBON, MOVED)))  # fmt: skip
    lisbon = m.add("I live in Lisbon.", user_id="lena", **narrower)["results"][0]["id"]
    keen = m.add("I am keen on counseling.", user_id="lena", **narrower)["results"][0]["id"]
    said_again = m.add("Counseling, I am keen on it!", user_id="lena")["results"]
    moved = m.add("I live in Porto now, not in Lisbon.", user_id="lena")["results"]
    assert [r["event"] for r in said_again] == ["ADD"] and [r["event"] for r in moved] == ["ADD"]
    assert "supersedes" not in moved[0]
    assert m.get(lisbon)["state"] == "active" and m.get(keen)["state"] == "active"
    assert verified(m)
    target = Memory({"path": str(tmp_path / "b.db")}, embedder=FakeEmbedder(),
                    entities=FakeEntities())  # fmt: skip
    import_data(target, read_export(list(export_lines(m))))
    assert len(target.get_all(filters={"user_id": "lena"})["results"]) == 4


def test_a_fact_still_supersedes_its_own_scope_s_memory_with_other_scopes_around(any_store):
    m = memory(any_store, answer(LISBON), answer(LISBON), answer(MOVED),
               still_true=changes((LISBON, MOVED)))  # fmt: skip
    other = m.add("I live in Lisbon.", user_id="lena", agent_id="tutor")["results"][0]["id"]
    own = m.add("I live in Lisbon.", user_id="lena")["results"][0]["id"]
    moved = m.add("I live in Porto now, not in Lisbon.", user_id="lena")["results"]
    assert moved[0]["supersedes"] == [own]
    assert m.get(own)["state"] == "superseded" and m.get(other)["state"] == "active"
    assert verified(m)
