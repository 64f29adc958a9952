"""The Mem0-compatible API over memories stored as given (infer=False), with a fake embedder."""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from postgres_fixtures import NewStore, store_location

from offline_mem import (
    ConfigError,
    EmbedderMismatchError,
    Memory,
    MemoryNotFoundError,
    OfflineMemError,
    ScopeRequiredError,
    ValidationError,
)
from offline_mem.testing import FakeEmbedder

U1 = {"user_id": "u1"}


def test_add_str_dict_and_list_shapes(memory: Memory) -> None:
    r1 = memory.add("I like tea", user_id="u1", infer=False)
    r2 = memory.add({"role": "user", "content": "I live in Lisbon"}, user_id="u1", infer=False)
    r3 = memory.add(
        [
            {"role": "system", "content": "You are helpful"},
            {"role": "user", "content": "My dog is Rex", "name": "ana"},
            {"role": "assistant", "content": "Rex is a good name"},
        ],
        user_id="u1",
        infer=False,
    )
    assert [r["memory"] for r in r1["results"]] == ["I like tea"]
    assert [r["memory"] for r in r2["results"]] == ["I live in Lisbon"]
    assert [(r["memory"], r["role"], r["event"]) for r in r3["results"]] == [
        ("My dog is Rex", "user", "ADD"),
        ("Rex is a good name", "assistant", "ADD"),
    ]
    assert r3["results"][0]["actor_id"] == "ana"
    assert "actor_id" not in r3["results"][1]
    stored = memory.get(r3["results"][0]["id"])
    assert stored is not None
    assert stored["memory"] == "My dog is Rex"
    assert stored["actor_id"] == "ana"
    assert stored["user_id"] == "u1"
    assert stored["state"] == "active"
    assert "agent_id" not in stored
    assert stored["hash"] == hashlib.md5(b"My dog is Rex").hexdigest()
    assert memory.store.counts()["messages"] == 5  # the system message is kept as a message


def test_item_shape_matches_mem0(memory: Memory) -> None:
    added = memory.add("Blue is my favourite colour", user_id="u1", agent_id="a1", infer=False)
    item = memory.get(added["results"][0]["id"])
    assert item is not None
    assert set(item) >= {"id", "memory", "hash", "metadata", "created_at", "updated_at"}
    assert item["agent_id"] == "a1"
    created = datetime.fromisoformat(item["created_at"])
    assert created.tzinfo is not None and created.utcoffset() == timedelta(0)


def test_exact_duplicate_in_scope_is_not_stored_twice(memory: Memory) -> None:
    memory.add("I like tea", user_id="u1", infer=False)
    again = memory.add(["I like tea"][0], user_id="u1", infer=False)
    assert again["results"] == []
    other_scope = memory.add("I like tea", user_id="u2", infer=False)
    assert len(other_scope["results"]) == 1
    assert len(memory.get_all(filters=U1)["results"]) == 1


def test_search_ranks_by_similarity_and_respects_threshold(memory: Memory) -> None:
    memory.add(
        [
            {"role": "user", "content": "My locker number is 4417"},
            {"role": "user", "content": "I enjoy hiking in the mountains"},
            {"role": "user", "content": "Pizza with olives is my favourite food"},
        ],
        user_id="u1",
        infer=False,
    )
    found = memory.search("hiking mountains", filters=U1, top_k=3)["results"]
    assert found[0]["memory"] == "I enjoy hiking in the mountains"
    assert all(0.0 <= r["score"] <= 1.0 for r in found)
    assert [r["score"] for r in found] == sorted((r["score"] for r in found), reverse=True)
    strict = memory.search("hiking mountains", filters=U1, threshold=0.99)["results"]
    assert strict == []
    top1 = memory.search("hiking mountains", filters=U1, top_k=1, threshold=0)["results"]
    assert len(top1) == 1


def test_search_include_sources_returns_the_messages(memory: Memory) -> None:
    memory.add({"role": "user", "content": "I parked on level 3"}, user_id="u1", infer=False)
    hit = memory.search("parked level", filters=U1, include_sources=True)["results"][0]
    assert [s["content"] for s in hit["sources"]] == ["I parked on level 3"]


def test_get_all_pagination_newest_first(memory: Memory) -> None:
    for i in range(5):
        memory.add(f"fact number {i}", user_id="u1", infer=False)
    page1 = memory.get_all(filters=U1, top_k=2)["results"]
    page2 = memory.get_all(filters=U1, top_k=2, offset=2)["results"]
    assert [r["memory"] for r in page1] == ["fact number 4", "fact number 3"]
    assert [r["memory"] for r in page2] == ["fact number 2", "fact number 1"]


def test_update_reembeds_merges_metadata_and_records_history(memory: Memory) -> None:
    mid = memory.add("I live in Lisbon", user_id="u1", metadata={"a": 1}, infer=False)["results"][
        0
    ]["id"]
    calls_before = len(memory.embedder.calls)  # type: ignore[attr-defined]
    updated = memory.update(mid, "I live in Porto", metadata={"b": 2})
    assert len(memory.embedder.calls) == calls_before + 1  # type: ignore[attr-defined]
    assert updated["memory"] == "I live in Porto"
    assert updated["metadata"] == {"a": 1, "b": 2}
    assert updated["event"] == "UPDATE"
    assert memory.search("Porto", filters=U1, top_k=1)["results"][0]["id"] == mid
    events = [(h["event"], h["old_memory"], h["new_memory"]) for h in memory.history(mid)]
    assert events == [
        ("ADD", None, "I live in Lisbon"),
        ("UPDATE", "I live in Lisbon", "I live in Porto"),
    ]


def test_delete_keeps_history_and_removes_everything_else(memory: Memory) -> None:
    mid = memory.add("temporary fact", user_id="u1", infer=False)["results"][0]["id"]
    assert memory.delete(mid)["event"] == "DELETE"
    assert memory.get(mid) is None
    assert [h["event"] for h in memory.history(mid)] == ["ADD", "DELETE"]
    assert memory.history(mid)[-1]["is_deleted"] is True
    counts = memory.store.counts()
    assert counts["memories"] == counts["memory_vectors"] == counts["keyword_docs"] == 0
    assert counts["provenance"] == 0
    with pytest.raises(MemoryNotFoundError):
        memory.delete(mid)


def test_delete_all_clears_scope_memories_and_messages_only(memory: Memory) -> None:
    memory.add("u1 fact", user_id="u1", infer=False)
    memory.add("u1 agent fact", user_id="u1", agent_id="a", infer=False)
    keep = memory.add("u2 fact", user_id="u2", infer=False)["results"][0]["id"]
    assert memory.delete_all(user_id="u1") == {"deleted": 2}
    assert memory.get_all(filters=U1)["results"] == []
    assert memory.store.recent_messages(memory_scope("u1")) == []
    assert memory.get(keep) is not None
    assert [m.content for m in memory.store.recent_messages(memory_scope("u2"))] == ["u2 fact"]


def memory_scope(user: str):
    from offline_mem.validation import make_scope

    return make_scope(user)


def test_reset_empties_the_file(memory: Memory) -> None:
    memory.add("a fact", user_id="u1", infer=False)
    memory.reset()
    assert all(v == 0 for v in memory.store.counts().values())
    memory.add("after reset", user_id="u1", infer=False)
    assert len(memory.get_all(filters=U1)["results"]) == 1


def test_expiry_is_honoured_on_every_read_path(memory: Memory) -> None:
    yesterday = (datetime.now(timezone.utc) - timedelta(days=1)).date()
    old = memory.add("expired coupon code", user_id="u1", infer=False, expiration_date=yesterday)
    live = memory.add(
        "valid coupon code", user_id="u1", infer=False, expiration_date=date.today().isoformat()
    )
    old_id, live_id = old["results"][0]["id"], live["results"][0]["id"]
    assert [r["id"] for r in memory.get_all(filters=U1)["results"]] == [live_id]
    assert [r["id"] for r in memory.search("coupon code", filters=U1)["results"]] == [live_id]
    shown = memory.search("coupon code", filters=U1, show_expired=True)["results"]
    assert {r["id"] for r in shown} == {old_id, live_id}
    got = memory.get(old_id)
    assert got is not None and got["expired"] is True
    live_item = memory.get(live_id)
    assert live_item is not None and "expired" not in live_item
    memory.update(old_id, expiration_date=None)
    assert {r["id"] for r in memory.get_all(filters=U1)["results"]} == {old_id, live_id}


def test_timestamps_are_stored_as_observation_dates(memory: Memory) -> None:
    res = memory.add(
        [{"role": "user", "content": "I met Ana", "timestamp": "2025-03-01T10:00:00Z"}],
        user_id="u1",
        infer=False,
    )
    item = memory.get(res["results"][0]["id"])
    assert item is not None and item["observed_at"] == "2025-03-01T10:00:00.000000+00:00"
    res2 = memory.add("I met Bo", user_id="u1", infer=False, timestamp=date(2024, 1, 2))
    item2 = memory.get(res2["results"][0]["id"])
    assert item2 is not None and item2["observed_at"].startswith("2024-01-02T00:00:00")


def test_messages_have_strictly_increasing_timestamps(memory: Memory) -> None:
    memory.add([{"role": "user", "content": f"m{i}"} for i in range(50)], user_id="u1", infer=False)
    rows = memory.store.db.query("SELECT seq, created_at FROM messages ORDER BY seq")
    stamps = [r[1] for r in rows]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    recent = memory.store.recent_messages(memory_scope("u1"))
    assert [m.content for m in recent] == [f"m{i}" for i in range(40, 50)]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda m: m.add("x", infer=False), ScopeRequiredError),
        (lambda m: m.add("x", user_id="", infer=False), ValidationError),
        (lambda m: m.add("x", user_id="a b", infer=False), ValidationError),
        (lambda m: m.add(42, user_id="u1", infer=False), ValidationError),
        (lambda m: m.add([{"role": "robot", "content": "x"}], user_id="u1"), ValidationError),
        (lambda m: m.add([{"role": "user"}], user_id="u1", infer=False), ValidationError),
        (lambda m: m.add([], user_id="u1", infer=False), ValidationError),
        (lambda m: m.add("a\x00b", user_id="u1", infer=False), ValidationError),
        (lambda m: m.add("x", user_id="u1", infer=False, metadata=[1]), ValidationError),
        (
            lambda m: m.add("x", user_id="u1", infer=False, metadata={"f": float("nan")}),
            ValidationError,
        ),
        (lambda m: m.add("x", user_id="u1", infer=False, expiration_date="soon"), ValidationError),
        (lambda m: m.add("x", user_id="u1", infer=False, timestamp="yesterday"), ValidationError),
        (lambda m: m.add("x", user_id="u1", infer=False, memory_type="episodic"), ValidationError),
        (lambda m: m.add("x", user_id="u1", infer=False, colour="red"), ValidationError),
        (lambda m: m.search("x", user_id="u1"), ValidationError),
        (lambda m: m.search("x"), ValidationError),
        (lambda m: m.search("x", filters={"agent_id": "*"}), ScopeRequiredError),
        (lambda m: m.search("x", filters=U1, top_k=0), ValidationError),
        (lambda m: m.search("x", filters=U1, threshold=1.5), ValidationError),
        (lambda m: m.search("", filters=U1), ValidationError),
        (lambda m: m.get_all(filters=U1, offset=-1), ValidationError),
        (lambda m: m.get_all(filters={"user_id": "u1", "k": {"like": "x"}}), ValidationError),
        (lambda m: m.get(""), ValidationError),
        (lambda m: m.update("no-such-id", "text"), MemoryNotFoundError),
        (lambda m: m.delete_all(), ScopeRequiredError),
    ],
)
def test_bad_input_raises_typed_error_and_changes_nothing(memory: Memory, call, error) -> None:
    memory.add("existing fact", user_id="u1", infer=False)
    before = memory.store.counts()
    with pytest.raises(error) as info:
        call(memory)
    assert isinstance(info.value, OfflineMemError)
    assert str(info.value)
    assert memory.store.counts() == before


def test_validation_errors_are_value_errors_as_in_mem0() -> None:  # no store: runs once
    assert issubclass(ValidationError, ValueError)
    assert issubclass(MemoryNotFoundError, KeyError)


def test_metadata_reserved_keys_are_dropped(memory: Memory) -> None:
    res = memory.add("x1", user_id="u1", infer=False, metadata={"user_id": "evil", "k": "v"})
    item = memory.get(res["results"][0]["id"])
    assert item is not None and item["metadata"] == {"k": "v"} and item["user_id"] == "u1"


def test_config_resolution_and_unknown_keys(new_store: NewStore, monkeypatch) -> None:
    with pytest.raises(ConfigError):
        Memory.from_config({**new_store(), "vector_store": {}})
    env, cfg = new_store(), new_store()
    monkeypatch.setenv("OFFLINE_MEM_DB", store_location(env))
    with Memory(embedder=FakeEmbedder()) as mem:
        assert mem.path == store_location(env)
    with Memory(cfg, embedder=FakeEmbedder()) as mem:
        assert mem.path == store_location(cfg)
    if "path" in cfg:  # a file is created; a database exists before
        assert Path(cfg["path"]).exists()


def test_reopen_keeps_data(store_config: dict[str, str]) -> None:
    with Memory(store_config, embedder=FakeEmbedder()) as mem:
        mem.add("persistent fact", user_id="u1", infer=False)
    with Memory(store_config, embedder=FakeEmbedder()) as mem:
        assert [r["memory"] for r in mem.get_all(filters=U1)["results"]] == ["persistent fact"]
        assert mem.store.meta()["embedder_dimension"] == "384"


def test_a_reopened_memory_file_keeps_its_schema_version_and_wal_mode(db_path: str) -> None:
    # SQLite only: the file's own schema number and journal pragma
    Memory({"path": db_path}, embedder=FakeEmbedder()).close()
    with Memory({"path": db_path}, embedder=FakeEmbedder()) as mem:
        assert mem.store.meta()["schema_version"] == "14"
        journal = mem.store.db.query_one("PRAGMA journal_mode")[0]
        assert journal == "wal"


def test_other_embedder_is_refused_naming_both(store_config: dict[str, str]) -> None:
    with Memory(store_config, embedder=FakeEmbedder()) as mem:
        mem.add("a fact", user_id="u1", infer=False)
    with pytest.raises(EmbedderMismatchError) as info:
        Memory(store_config, embedder=FakeEmbedder(name="other-embedder"))
    assert "fake-embedder" in str(info.value) and "other-embedder" in str(info.value)
    with pytest.raises(EmbedderMismatchError):
        Memory(store_config, embedder=FakeEmbedder(dimension=128))


def test_scope_check_on_get_update_delete(memory: Memory) -> None:
    mid = memory.add("u1 secret", user_id="u1", infer=False)["results"][0]["id"]
    assert memory.get(mid, user_id="u2") is None
    with pytest.raises(MemoryNotFoundError):
        memory.update(mid, "stolen", user_id="u2")
    with pytest.raises(MemoryNotFoundError):
        memory.delete(mid, user_id="u2")
    item = memory.get(mid, user_id="u1")
    assert item is not None and item["memory"] == "u1 secret"


def test_history_rows_are_json_serialisable(memory: Memory) -> None:
    mid = memory.add("a fact", user_id="u1", infer=False)["results"][0]["id"]
    json.dumps(memory.history(mid))
    json.dumps(memory.get_all(filters=U1))


def test_the_extractor_runs_at_background_priority_when_extraction_is_queued(
    store_config: dict[str, str],
) -> None:
    """`extractor_nice`: 0 by default, BACKGROUND_NICE when the config queues extraction
    (async_mode), or as given; anything but an integer 0-19 is a config error."""
    from offline_mem.config import BACKGROUND_NICE, MemoryConfig

    assert MemoryConfig.from_dict({}).model_nice == 0
    assert MemoryConfig.from_dict({"async_mode": True}).model_nice == BACKGROUND_NICE > 0
    assert MemoryConfig.from_dict({"async_mode": True, "extractor_nice": 0}).model_nice == 0
    assert MemoryConfig.from_dict({"extractor_nice": 4}).model_nice == 4
    for bad in (-1, 20, 2.5, True, "5"):
        with pytest.raises(ConfigError, match="extractor_nice"):
            MemoryConfig.from_dict({"extractor_nice": bad})
    config = {**store_config, "async_mode": True, "nlp": None}
    with Memory(config, embedder=FakeEmbedder()) as mem:
        assert mem.extractor._thread._nice == BACKGROUND_NICE


def test_only_an_own_process_config_allows_process_wide_settings(
    new_store: NewStore, monkeypatch
) -> None:
    """`own_process`: false by default, and a Memory then leaves the process's settings alone;
    true allows them for the rest of the process; anything but a bool is a config error."""
    from offline_mem.config import MemoryConfig
    from offline_mem.pinned import process_tuning

    monkeypatch.setattr(process_tuning, "_owned", False)
    assert MemoryConfig.from_dict({}).own_process is False
    with pytest.raises(ConfigError, match="own_process"):
        MemoryConfig.from_dict({"own_process": "yes"})
    with Memory({**new_store(), "nlp": None}, embedder=FakeEmbedder()):
        assert not process_tuning.process_claimed()
    config = {**new_store(), "nlp": None, "own_process": True}
    with Memory(config, embedder=FakeEmbedder()):
        assert process_tuning.process_claimed()
