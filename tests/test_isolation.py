"""No read path returns another scope's data; by-id calls refuse memories outside a named scope.

Hypothesis builds a history of raw adds, inferred adds (with supersession), updates and deletes
across overlapping scopes (a user alone, with an agent, with a run; an agent alone; a run alone).
Every text carries a mark naming its exact scope, and every text shares words and entity names
with the other scopes, so that vector, keyword and entity signals all reach across scopes if the
filter ever lets them. Then:
- search (with sources) and get_all under a filter return exactly memories whose ids match every
  id the filter names — and get_all returns all of them;
- each memory's sources (provenance) are messages of its own exact scope;
- what the extractor was shown (recent messages and existing memories) came only from the
  add's scope: recent messages of exactly that scope, memories matching its ids;
- the store's recent messages of a scope are that scope's, and entity links never cross scopes;
- get/update/delete by id naming a scope the memory is outside of: None / MemoryNotFoundError,
  and nothing changes.

As Mem0, a filter naming only user_id covers that user's memories with any agent or run.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import pg_table_dump, table_dump, violations

from offline_mem import Memory
from offline_mem.errors import MemoryNotFoundError
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer, changed_when
from offline_mem.values import Scope

EXAMPLES = int(os.environ.get("OFFLINE_MEM_FUZZ_EXAMPLES", "100")) // 2
SCOPES: list[dict[str, str]] = [
    {"user_id": "alice"},
    {"user_id": "alice", "agent_id": "bot"},
    {"user_id": "alice", "run_id": "r1"},
    {"user_id": "bob"},
    {"user_id": "bob", "agent_id": "bot"},
    {"agent_id": "bot"},
    {"run_id": "r1"},
]
WORDS = ["Lisbon", "Marta", "garden", "coffee", "piano", "Porto", "harbour", "Kenji"]
MARK = re.compile(r"scope(\d+)mark")


# The fake's supersession check: an old memory changed when the new fact ends in " now".
NOW_CHANGES = changed_when(lambda old, new: new.endswith(" now"))


def mark(index: int) -> str:
    return f"scope{index}mark"


def marks_in(text: str) -> set[int]:
    return {int(m) for m in MARK.findall(text)}


def covers(filters: dict[str, str], item: dict[str, Any]) -> bool:
    """A filter naming ids covers a memory whose ids equal each of them."""
    return all(item.get(key) == value for key, value in filters.items())


def index_covers(filter_index: int, scope_index: int) -> bool:
    return covers(SCOPES[filter_index], SCOPES[scope_index])


words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
scope_index = st.integers(0, len(SCOPES) - 1)
operation = st.one_of(
    st.tuples(st.just("add_raw"), scope_index, words),
    st.tuples(st.just("add_infer"), scope_index, words, st.booleans()),
    st.tuples(st.just("update"), scope_index, words, st.integers(0, 50)),
    st.tuples(st.just("delete"), scope_index, st.integers(0, 50)),
)


_databases = itertools.count()


@contextmanager
def fresh_memory(server: Any = None) -> Iterator[Memory]:
    """A new SQLite file, or with a PostgreSQL `server`, a new database in it."""
    folder = tempfile.mkdtemp(prefix="isolation")
    name = f"isolation_{next(_databases)}"
    where = {"path": os.path.join(folder, "m.db")} if server is None else {
        "store": server.create_database(name)}  # fmt: skip
    try:
        with Memory(
            where, embedder=FakeEmbedder(),
            extractor=FakeExtractor(still_true=NOW_CHANGES), entities=FakeEntities(),
        ) as memory:  # fmt: skip
            yield memory
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if server is not None:
            server.drop_database(name)


def dump(memory: Memory) -> dict[str, list[tuple[Any, ...]]]:
    if memory.config.store is None:
        return table_dump(memory.store.db)
    return pg_table_dump(memory.store.db)


def own_ids(memory: Memory, index: int) -> list[str]:
    """Ids of the memories of exactly this scope (the filter also covers narrower scopes)."""
    items = memory.get_all(filters=SCOPES[index], top_k=1000, include_superseded=True)["results"]
    return sorted(item["id"] for item in items if marks_in(item["memory"]) == {index})


def run(memory: Memory, op: tuple[Any, ...], infer_scopes: list[int]) -> None:
    kind, index = op[0], op[1]
    scope, tag = SCOPES[index], mark(index)
    if kind == "add_raw":
        memory.add([{"role": "user", "content": f"{tag} {op[2]}"},
                    {"role": "assistant", "content": f"{tag} noted {op[2]}"}],
                   **scope, infer=False)  # fmt: skip
    elif kind == "add_infer":
        # A fact ending in " now" tells the fake's check that the old memory changed.
        text = f"User {tag} {op[2]}" + (" now" if op[3] else "")
        assert isinstance(memory.extractor, FakeExtractor)
        memory.extractor.script.append(answer(text))
        memory.add(f"{tag} I like {op[2]}", **scope, infer=True)
        infer_scopes.append(index)
    else:
        own = own_ids(memory, index)
        if not own:
            return
        target = own[op[-1] % len(own)]
        if kind == "update":
            memory.update(target, f"{tag} now {op[2]}", **scope)
        else:
            memory.delete(target, **scope)


def check_reads(memory: Memory) -> None:
    everything = {
        row[0]: {"user_id": row[1], "agent_id": row[2], "run_id": row[3], "text": row[4]}
        for row in memory.store.db.query("SELECT id, user_id, agent_id, run_id, text FROM memories")
    }
    for item in everything.values():  # each text names exactly its own scope
        (own,) = marks_in(item["text"])
        assert {k: v for k, v in item.items() if k != "text" and v} == SCOPES[own]
    messages = {
        row[0]: {"user_id": row[1], "agent_id": row[2], "run_id": row[3]}
        for row in memory.store.db.query("SELECT id, user_id, agent_id, run_id FROM messages")
    }
    for f_index, filters in enumerate(SCOPES):
        expected = {mid for mid, item in everything.items() if covers(filters, item)}
        expected_messages = {mid for mid, item in messages.items() if covers(filters, item)}
        listed = memory.get_all(filters=filters, top_k=1000, include_superseded=True,
                                show_expired=True)["results"]  # fmt: skip
        assert {item["id"] for item in listed} == expected
        for query in ("Lisbon Marta garden piano", "coffee Porto Kenji harbour"):
            found = memory.search(
                query, filters=filters, threshold=None, top_k=100, include_superseded=True,
                include_sources=True,
            )["results"]  # fmt: skip
            for item in found:
                (own,) = marks_in(item["memory"])
                assert index_covers(f_index, own)
                if item["kind"] == "message":  # a stored turn: the scope's own, by id too
                    assert item["id"] in expected_messages, (filters, item)
                    assert memory.get(item["id"], **filters)["memory"] == item["memory"]
                    continue
                assert item["id"] in expected, (filters, item)
                for source in item["sources"]:
                    assert marks_in(source["content"]) == {own}, (item, source)
        recent = memory.store.recent_messages(Scope(**filters), limit=1000)
        assert all(marks_in(m.content) == {f_index} for m in recent)


def check_extraction_context(memory: Memory, infer_scopes: list[int]) -> None:
    assert isinstance(memory.extractor, FakeExtractor)
    calls = memory.extractor.calls
    assert len(calls) == len(infer_scopes)
    for prompt, index in zip(calls, infer_scopes, strict=True):
        context = prompt.messages[1]["content"]
        recent = context.split("Conversation:")[1].split("\n\nNew message")[0]
        assert marks_in(recent) <= {index}, (SCOPES[index], recent)
        assert marks_in(context) <= {index}, (SCOPES[index], context)  # nothing of another scope


def check_by_id(memory: Memory) -> None:
    rows = memory.store.db.query("SELECT id, user_id, agent_id, run_id FROM memories")
    before = dump(memory)
    for mid, user, agent, run_id in rows:
        item = {"user_id": user, "agent_id": agent, "run_id": run_id}
        for scope in SCOPES:
            if covers(scope, item):
                assert memory.get(mid, **scope)["id"] == mid
                continue
            assert memory.get(mid, **scope) is None
            with pytest.raises(MemoryNotFoundError):
                memory.update(mid, "stolen", **scope)
            with pytest.raises(MemoryNotFoundError):
                memory.delete(mid, **scope)
    assert dump(memory) == before


@pytest.mark.parametrize(
    "store", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(ops=st.lists(operation, min_size=1, max_size=20))
def test_no_read_path_crosses_scopes(
    store: str, request: pytest.FixtureRequest, ops: list[tuple[Any, ...]]
) -> None:
    """On a SQLite file and on a PostgreSQL database (one new database per example)."""
    server = request.getfixturevalue("postgres_server") if store == "postgresql" else None
    with fresh_memory(server) as memory:
        infer_scopes: list[int] = []
        for op in ops:
            run(memory, op, infer_scopes)
        check_reads(memory)
        check_extraction_context(memory, infer_scopes)
        if server is None:  # the file's invariants; a database's are its constraints
            assert violations(memory.store.db) == []
        check_by_id(memory)
