"""The public API over both stores: every test here runs once on a SQLite file and once on a
PostgreSQL database (tests/postgres_server.py), through one parametrised fixture
(`store_config`, tests/postgres_fixtures.py; test_extraction_api.py, test_async_add.py and
test_message_search.py take it too).

The store-agnostic tests of tests/test_api_raw.py and tests/test_search_hybrid.py are collected
here again (imported below), so they run with this module's `memory` fixture, on both stores;
the rest are written here. Fake
models (offline_mem/testing.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from postgres_fixtures import OpenMemory

# store-agnostic API tests of the raw (infer=False) path, run here on both stores
from test_api_raw import (  # noqa: F401
    test_add_str_dict_and_list_shapes,
    test_bad_input_raises_typed_error_and_changes_nothing,
    test_delete_all_clears_scope_memories_and_messages_only,
    test_delete_keeps_history_and_removes_everything_else,
    test_exact_duplicate_in_scope_is_not_stored_twice,
    test_expiry_is_honoured_on_every_read_path,
    test_get_all_pagination_newest_first,
    test_history_rows_are_json_serialisable,
    test_item_shape_matches_mem0,
    test_messages_have_strictly_increasing_timestamps,
    test_metadata_reserved_keys_are_dropped,
    test_reset_empties_the_file,
    test_scope_check_on_get_update_delete,
    test_search_include_sources_returns_the_messages,
    test_search_ranks_by_similarity_and_respects_threshold,
    test_timestamps_are_stored_as_observation_dates,
    test_update_reembeds_merges_metadata_and_records_history,
)
from test_async_add import CONVERSATION, GatedExtractor

# the hybrid search's signals, filters and exact KNN, on both stores
from test_search_hybrid import (  # noqa: F401
    test_a_keyword_only_match_surfaces,
    test_entity_signal_finds_memories_linked_to_a_query_entity,
    test_explain_adds_up_on_a_fixed_scale,
    test_filters_expiry_and_scope_hold_for_every_signal,
    test_threshold_applies_to_the_final_score,
    test_vector_knn_is_exact_under_selective_and_broad_filters,
)

from offline_mem import Memory, MemoryNotFoundError
from offline_mem.errors import ExtractionError, FlushTimeoutError
from offline_mem.store import job_worker
from offline_mem.testing import FakeEmbedder, FakeExtractor, answer, changes

U1 = {"user_id": "u1"}


@pytest.fixture
def memory(store_config: dict[str, Any], embedder: FakeEmbedder) -> Iterator[Memory]:
    """The fixture test_api_raw.py's tests take: here on each store in turn."""
    with Memory(store_config, embedder=embedder) as mem:
        yield mem


def texts(result: dict[str, Any], key: str = "memory") -> list[str]:
    return [item[key] for item in result["results"]]


def test_add_infers_facts_with_sources(open_memory: OpenMemory) -> None:
    m = open_memory(answer("User lives in Lisbon.", "User likes Tea."))
    out = m.add([{"role": "user", "content": "I live in Lisbon and like tea."},
                 {"role": "assistant", "content": "Noted!"}], user_id="u")  # fmt: skip
    assert [(r["memory"], r["event"]) for r in out["results"]] == [
        ("User lives in Lisbon.", "ADD"), ("User likes Tea.", "ADD")]  # fmt: skip
    item = m.get(out["results"][0]["id"])
    assert item is not None and item["attributed_to"] == "user" and item["user_id"] == "u"
    found = m.search("Lisbon", filters={"user_id": "u"}, include_sources=True,
                     include_messages=False)["results"]  # fmt: skip
    assert found[0]["sources"][0]["content"] == "I live in Lisbon and like tea."
    # the assistant's turn is a message of its own, found by search_messages
    assert texts(m.search_messages("Noted", filters={"user_id": "u"}, top_k=1), "content") == [
        "Noted!"
    ]


MOVED = "User lives in Porto now, not in Lisbon."


def test_supersession_keeps_the_old_fact_in_history(open_memory: OpenMemory) -> None:
    m = open_memory(answer("User lives in Lisbon."), answer(MOVED),
                    still_true=changes(("User lives in Lisbon.", MOVED)))  # fmt: skip
    old = m.add("I live in Lisbon.", user_id="u")["results"][0]["id"]
    out = m.add("I live in Porto now, not in Lisbon.", user_id="u")["results"]
    new = out[0]["id"]
    assert out == [
        {"id": new, "memory": MOVED, "event": "ADD", "supersedes": [old]},
        {"id": old, "memory": "User lives in Lisbon.", "event": "SUPERSEDE", "superseded_by": new},
    ]  # fmt: skip
    assert m.get(old)["state"] == "superseded"  # type: ignore[index]
    assert [r["id"] for r in m.get_all(filters={"user_id": "u"})["results"]] == [new]
    listed = m.get_all(filters={"user_id": "u"}, include_superseded=True)["results"]
    assert {r["id"] for r in listed} == {old, new}
    assert [h["event"] for h in m.history(old)] == ["ADD", "SUPERSEDE"]


def test_a_paraphrase_merges_into_the_stored_memory(open_memory: OpenMemory) -> None:
    keen, again = "User is keen on counseling.", "user is KEEN on counseling!"
    m = open_memory(answer(keen), answer(again))
    (added,) = m.add("I am keen on counseling.", user_id="lena")["results"]
    out = m.add("Counseling, I am keen on it!", user_id="lena")
    assert out["results"] == [
        {"id": added["id"], "memory": keen, "event": "MERGE", "merged": again}
    ]
    assert [h["event"] for h in m.history(added["id"])] == ["ADD", "MERGE"]


def test_a_model_error_changes_nothing(open_memory: OpenMemory) -> None:
    m = open_memory(ExtractionError("bad answer"))
    with pytest.raises(ExtractionError):
        m.add("I live in Lisbon.", user_id="u")
    assert m.get_all(filters={"user_id": "u"})["results"] == []
    assert m.search_messages("Lisbon", filters={"user_id": "u"})["results"] == []


def test_async_adds_are_done_by_the_worker(
    open_memory: OpenMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_worker, "RETRY_AFTER_S", (0.0, 0.0))
    broken = ExtractionError("outside its schema")
    m = open_memory(answer("User likes figs"), broken, broken, broken, answer("User likes plums"))
    first = m.add("I like figs", user_id="u1", async_mode=True)
    second = m.add("I like pears", user_id="u1", async_mode=True)
    third = m.add("I like plums", user_id="u1", async_mode=True)
    assert first["status"] == "PENDING" and first["results"] == []
    m.flush(timeout=30)
    assert m.pending() == 0
    assert [m.job(e["event_id"])["status"] for e in (first, second, third)] == [  # type: ignore[index]
        "SUCCEEDED", "FAILED", "SUCCEEDED"]  # fmt: skip
    assert [j["event_id"] for j in m.failed_jobs()] == [second["event_id"]]
    assert sorted(texts(m.get_all(filters=U1))) == ["User likes figs", "User likes plums"]
    assert texts(m.search("pears", filters=U1), "content")[0] == "I like pears"


def test_messages_search_get_and_delete(open_memory: OpenMemory) -> None:
    m = open_memory()
    m.add([{"role": "user", "content": "I collect vintage stamps"},
           {"role": "tool", "content": "stamp catalogue: 1,204 entries"}],
          user_id="u1", infer=False)  # fmt: skip
    m.add("I collect vintage stamps", user_id="u2", infer=False)
    found = m.search_messages("stamp catalogue", filters=U1, top_k=1)["results"]
    assert [f["content"] for f in found] == ["stamp catalogue: 1,204 entries"]
    message_id = found[0]["id"]
    got = m.get(message_id)
    assert got is not None and got["kind"] == "message" and got["user_id"] == "u1"
    assert m.get(message_id, user_id="u2") is None
    with pytest.raises(MemoryNotFoundError):
        m.delete(message_id, user_id="u2")
    assert m.delete(message_id)["kind"] == "message"
    assert m.get(message_id) is None
    assert texts(m.search_messages("stamp catalogue", filters=U1), "content") == [
        "I collect vintage stamps"
    ]
    assert len(m.search_messages("stamps", filters={"user_id": "u2"})["results"]) == 1


def test_search_ranks_facts_and_messages_in_one_list(open_memory: OpenMemory) -> None:
    m = open_memory()
    m.add([{"role": "user", "content": "My sister Marta is a doctor in Porto"},
           {"role": "tool", "content": "Porto clinic hours: 9 to 17"}],
          user_id="u1", infer=False, metadata={"topic": "family"})  # fmt: skip
    m.add("I bought a red bicycle", user_id="u1", infer=False)
    out = m.search("Marta doctor Porto clinic", filters=U1, threshold=None, explain=True)
    kinds = [(r["kind"], r["memory"]) for r in out["results"]]
    assert kinds[0] == ("fact", "My sister Marta is a doctor in Porto")
    assert ("message", "Porto clinic hours: 9 to 17") in kinds
    details = out["results"][0]["score_details"]
    assert details["bm25_score"] > 0 and details["entity_score"] > 0
    narrowed = m.search("Porto", filters={**U1, "topic": {"icontains": "FAM"}}, threshold=None)
    assert [r["memory"] for r in narrowed["results"] if r["kind"] == "fact"] == [
        "My sister Marta is a doctor in Porto"
    ]


def test_as_of_reads_what_was_true_then(open_memory: OpenMemory) -> None:
    m = open_memory()
    said = {"role": "user", "content": "I painted that lake sunrise last year!",
            "timestamp": "2023-05-08T13:56:00Z"}  # fmt: skip
    (item,) = m.add([said], user_id="u1", infer=False)["results"]
    assert m.get_all(filters=U1, as_of="2023-05-07")["results"] == []
    assert texts(m.get_all(filters=U1, as_of="2023-05-08")) == [said["content"]]
    found = m.search("lake sunrise", filters=U1, as_of="2023-05-07", threshold=None)
    assert found["results"] == []
    later = m.search("lake sunrise", filters=U1, as_of="2023-06-01", include_messages=False)
    assert [r["id"] for r in later["results"]] == [item["id"]]


def test_scopes_are_isolated(open_memory: OpenMemory) -> None:
    m = open_memory()
    for user in ("u1", "u2"):
        m.add(f"the locker code of {user} is 4417", user_id=user, infer=False)
    m.add("the agent keeps the locker key", user_id="u1", agent_id="a1", infer=False)
    for user in ("u1", "u2"):
        found = m.search("locker code", filters={"user_id": user}, threshold=None)["results"]
        assert all(r.get("user_id") == user for r in found)
        assert any(user in r["memory"] for r in found)
    agent = m.search("locker", filters={"agent_id": "a1"}, threshold=None)["results"]
    assert {r["memory"] for r in agent} == {"the agent keeps the locker key"}
    assert m.delete_all(agent_id="a1") == {"deleted": 1}
    assert len(m.get_all(filters=U1)["results"]) == 1


def prompts(memory: Memory) -> list[str]:
    assert isinstance(memory.extractor, FakeExtractor)
    return [p.messages[-1]["content"] for p in memory.extractor.calls]


def test_queued_adds_see_what_synchronous_adds_would_have_seen(open_memory: OpenMemory) -> None:
    script = [answer(fact) for _, fact in CONVERSATION]
    sync = open_memory(*script)
    for text, _ in CONVERSATION:
        sync.add(text, user_id="u1")
    queued = open_memory(*script, job_worker=False)
    for text, _ in CONVERSATION:
        queued.add(text, user_id="u2", async_mode=True)
    assert queued.pending(user_id="u2") == 3
    queued.flush(timeout=30)
    assert [p.replace("u2", "u1") for p in prompts(queued)] == prompts(sync)
    assert sorted(texts(queued.get_all(filters={"user_id": "u2"}))) == sorted(
        texts(sync.get_all(filters=U1)))  # fmt: skip


def test_a_synchronous_add_runs_its_scopes_queued_jobs_first(open_memory: OpenMemory) -> None:
    m = open_memory(*(answer(fact) for _, fact in CONVERSATION[:2]), job_worker=False)
    m.add(CONVERSATION[0][0], user_id="u1", async_mode=True)
    m.add(CONVERSATION[1][0], user_id="u1")
    assert m.pending(user_id="u1") == 0
    first, second = prompts(m)[:2]
    assert CONVERSATION[0][0] in first and CONVERSATION[1][0] in second


def test_flush_times_out_then_close_leaves_the_rest_queued(open_memory: OpenMemory) -> None:
    m = open_memory(extractor=GatedExtractor())
    gate = m.extractor
    assert isinstance(gate, GatedExtractor)
    for fruit in ("figs", "pears", "plums"):
        m.add(f"I like {fruit}", user_id="u1", async_mode=True)
    with pytest.raises(FlushTimeoutError, match="3 extraction job"):
        m.flush(timeout=0.2)
    assert gate.entered.wait(30)  # the first job is running
    closing = threading.Thread(target=m.close)  # waits for the running job, takes no other
    closing.start()
    time.sleep(0.2)
    assert closing.is_alive()
    gate.gate.set()
    closing.join(30)
    assert not closing.is_alive()
    again = open_memory(extractor=GatedExtractor(), job_worker=False)
    assert texts(again.get_all(filters=U1)) == ["User I like figs"]
    assert again.pending() == 2
    again.extractor.gate.set()  # type: ignore[attr-defined]
    again.flush(timeout=30)
    assert sorted(texts(again.get_all(filters=U1))) == [
        "User I like figs", "User I like pears", "User I like plums"]  # fmt: skip


def test_a_job_whose_scope_was_deleted_while_it_ran_commits_nothing(
    open_memory: OpenMemory,
) -> None:
    m = open_memory(extractor=GatedExtractor())
    gate = m.extractor
    assert isinstance(gate, GatedExtractor)
    event = m.add("I like figs", user_id="u1", async_mode=True)["event_id"]
    assert gate.entered.wait(30)
    m.delete_all(user_id="u1")
    gate.gate.set()
    m.flush(timeout=30)
    assert m.job(event) is None and m.get_all(filters=U1)["results"] == []


def test_a_message_deleted_before_its_job_ran_is_left_out(open_memory: OpenMemory) -> None:
    m = open_memory(answer("User likes figs"), job_worker=False)
    turns = [{"role": "user", "content": "I like figs"}, {"role": "user", "content": "and plums"}]
    m.add(turns, user_id="u1", async_mode=True)
    (plums,) = m.search_messages("and plums", filters=U1, top_k=1)["results"]
    assert plums["content"] == "and plums"
    m.delete(plums["id"])
    m.flush(timeout=30)
    assert prompts(m)[0].count("plums") == 0
    assert texts(m.get_all(filters=U1)) == ["User likes figs"]
