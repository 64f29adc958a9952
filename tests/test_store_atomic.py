"""Every public write is one transaction: fail it after each of its statements in turn and the
file must be row-for-row as before — every table. On a SQLite file and on a PostgreSQL
database (its statements fail the same way, through PgDatabase's tracer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from invariants import pg_table_dump

from offline_mem import Memory
from offline_mem.testing import FakeEmbedder, FakeExtractor, answer, changes

MOVED = "I live in Porto now, not in Lisbon"


def fake_extractor() -> FakeExtractor:
    """A fake whose supersession check finds that the Lisbon memory changed."""
    return FakeExtractor(still_true=changes(("I live in Lisbon", MOVED)))


class InjectedFault(Exception):
    pass


def dump(memory: Memory) -> dict[str, list[tuple[Any, ...]]]:
    if memory.config.store is not None:
        return pg_table_dump(memory.store.db)
    db = memory.store.db
    names = [
        row[0]
        for row in db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    ]
    return {
        name: sorted(map(tuple, db.query(f'SELECT * FROM "{name}"')), key=repr) for name in names
    }


def count_statements(memory: Memory, action: Callable[[Memory], Any]) -> int:
    seen: list[str] = []
    memory.store.tracer = lambda sql, params: seen.append(sql)
    try:
        action(memory)
    finally:
        memory.store.tracer = None
    return len(seen)


def seed(memory: Memory) -> dict[str, str]:
    first = memory.add(
        [
            {"role": "user", "content": "I live in Lisbon"},
            {"role": "user", "content": "I own a cat"},
        ],
        user_id="u1",
        metadata={"k": "v"},
        infer=False,
    )
    other = memory.add("I like jazz", user_id="u1", agent_id="a1", infer=False)
    memory.add("u2 keeps this", user_id="u2", infer=False)
    (cat_message,) = memory.store.db.query_one(
        "SELECT id FROM messages WHERE content = 'I own a cat'"
    )
    return {
        "lisbon": first["results"][0]["id"],
        "jazz": other["results"][0]["id"],
        "cat_message": cat_message,
    }


def add_inferred(memory: Memory, ids: dict[str, str]) -> Any:
    """An extraction add that creates two facts and supersedes the Lisbon memory."""
    assert isinstance(memory.extractor, FakeExtractor)
    memory.extractor.script[:] = [answer(MOVED, "User's locker number is 4417.")]
    result = memory.add("I moved to Porto. My locker is 4417.", user_id="u1")
    assert [r["event"] for r in result["results"]] == ["ADD", "SUPERSEDE", "ADD"]
    return result


WRITES: dict[str, Callable[[Memory, dict[str, str]], Any]] = {
    "add": lambda m, ids: m.add(
        [
            {"role": "user", "content": "My locker is 4417"},
            {"role": "assistant", "content": "Noted"},
        ],
        user_id="u1",
        infer=False,
    ),
    "add_inferred": lambda m, ids: add_inferred(m, ids),
    "update_text": lambda m, ids: m.update(ids["lisbon"], "I live in Porto", metadata={"x": 1}),
    "update_expiry": lambda m, ids: m.update(ids["jazz"], expiration_date="2030-01-01"),
    "delete": lambda m, ids: m.delete(ids["lisbon"]),
    "delete_message": lambda m, ids: m.delete(ids["cat_message"]),
    "delete_all": lambda m, ids: m.delete_all(user_id="u1"),
    "reset": lambda m, ids: m.reset(),
}


def idle(memory: Memory) -> bool:
    """No transaction left open on the connection."""
    if memory.config.store is None:
        return not memory.store.db.conn.in_transaction
    return bool(memory.store.db.conn.info.transaction_status.name == "IDLE")


@pytest.mark.parametrize("write", sorted(WRITES))
def test_failure_after_any_statement_changes_nothing(
    tmp_path, write: str, any_store: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    action = WRITES[write]
    # Count the statements of a successful run on an identical store.
    if "path" in any_store:
        probe_store = {"path": str(tmp_path / "probe.db")}
    else:
        server = request.getfixturevalue("postgres_server")
        probe_store = {"store": server.create_database(f"probe_{write}_{tmp_path.name}")}
    with Memory(
        probe_store,
        embedder=FakeEmbedder(),
        extractor=fake_extractor(),
    ) as probe:
        probe_ids = seed(probe)
        total = count_statements(probe, lambda m: action(m, probe_ids))
    # PostgreSQL's reset is one TRUNCATE of every table: failing that one statement is the test
    least = 1 if (write, "store" in any_store) == ("reset", True) else 3
    assert total >= least, f"{write} ran only {total} statements"

    with Memory(
        any_store,
        embedder=FakeEmbedder(),
        extractor=fake_extractor(),
    ) as memory:
        ids = seed(memory)
        before = dump(memory)
        for fail_at in range(1, total + 1):
            calls = {"n": 0}

            def tracer(
                sql: str, params: Any, fail_at: int = fail_at, calls: dict[str, int] = calls
            ) -> None:
                calls["n"] += 1
                if calls["n"] == fail_at:
                    raise InjectedFault(f"statement {fail_at}: {sql[:60]}")

            memory.store.tracer = tracer
            with pytest.raises(InjectedFault):
                action(memory, ids)
            memory.store.tracer = None
            assert dump(memory) == before, (
                f"{write}: state changed after failing statement {fail_at}"
            )
            assert idle(memory)
        action(memory, ids)  # and without a fault the write does change the file
        assert dump(memory) != before
