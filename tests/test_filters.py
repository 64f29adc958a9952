"""Mem0's filter language over real rows: exact, '*', operators, AND/OR/NOT, metadata keys."""

from __future__ import annotations

import pytest

from offline_mem import Memory, ValidationError
from offline_mem.store.filters import compile_filters


@pytest.fixture
def seeded(memory: Memory) -> Memory:
    rows = [
        ("apple note", {"cat": "food", "n": 1, "tag": "Fruit-Red", "ok": True}, "a1"),
        ("banana note", {"cat": "food", "n": 5, "tag": "fruit-yellow", "ok": False}, "a2"),
        ("car note", {"cat": "vehicle", "n": 10}, None),
        ("desk note", {}, "a1"),
    ]
    for text, metadata, agent in rows:
        memory.add(text, user_id="u1", agent_id=agent, metadata=metadata, infer=False)
    memory.add("other user's apple note", user_id="u2", metadata={"cat": "food"}, infer=False)
    return memory


def texts(memory: Memory, filters: dict) -> list[str]:
    return sorted(r["memory"] for r in memory.get_all(filters=filters, top_k=100)["results"])


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, ["apple note", "banana note", "car note", "desk note"]),
        ({"cat": "food"}, ["apple note", "banana note"]),
        ({"cat": "*"}, ["apple note", "banana note", "car note"]),
        ({"agent_id": "a1"}, ["apple note", "desk note"]),
        ({"agent_id": "*"}, ["apple note", "banana note", "desk note"]),
        ({"n": {"gt": 1}}, ["banana note", "car note"]),
        ({"n": {"gte": 1, "lt": 10}}, ["apple note", "banana note"]),
        ({"n": {"lte": 5}}, ["apple note", "banana note"]),
        ({"n": {"eq": 10}}, ["car note"]),
        ({"cat": {"ne": "food"}}, ["car note", "desk note"]),
        ({"cat": {"in": ["vehicle", "x"]}}, ["car note"]),
        ({"cat": {"nin": ["food"]}}, ["car note", "desk note"]),
        ({"tag": {"contains": "fruit"}}, ["banana note"]),
        ({"tag": {"icontains": "FRUIT"}}, ["apple note", "banana note"]),
        ({"ok": True}, ["apple note"]),
        ({"OR": [{"cat": "vehicle"}, {"n": 1}]}, ["apple note", "car note"]),
        ({"AND": [{"cat": "food"}, {"n": {"gt": 2}}]}, ["banana note"]),
        ({"NOT": [{"cat": "food"}]}, ["car note", "desk note"]),
        ({"OR": [{"NOT": [{"cat": "*"}]}, {"n": 10}]}, ["car note", "desk note"]),
        ({"memory_type": None}, ["apple note", "banana note", "car note", "desk note"]),
    ],
)
def test_filter_forms(seeded: Memory, extra: dict, expected: list[str]) -> None:
    assert texts(seeded, {"user_id": "u1", **extra}) == expected


def test_filters_apply_to_search_too(seeded: Memory) -> None:
    found = seeded.search("apple", filters={"user_id": "u1", "cat": "vehicle"}, threshold=0)
    assert [r["memory"] for r in found["results"]] == ["car note"]


@pytest.mark.parametrize(
    "filters",
    [
        None,
        [],
        {"cat": "food"},
        {"user_id": "*"},
        {"user_id": "u1", "bad key!": 1},
        {"user_id": "u1", "n": {"between": [1, 2]}},
        {"user_id": "u1", "n": {"in": []}},
        {"user_id": "u1", "n": {"in": "abc"}},
        {"user_id": "u1", "n": {"gt": [1]}},
        {"user_id": "u1", "n": {"gt": None}},
        {"user_id": "u1", "tag": {"contains": 3}},
        {"user_id": "u1", "OR": {"cat": "x"}},
        {"user_id": "u1", "AND": []},
        {"user_id": "u1", "n": {}},
        {"user_id": "u1", "n": "a\x00b"},
        {"user_id": "u1", "n": float("nan")},
    ],
)
def test_bad_filters_are_validation_errors(filters: object) -> None:
    with pytest.raises(ValidationError):
        compile_filters(filters)


def test_values_are_bound_never_spliced() -> None:
    compiled = compile_filters({"user_id": "u1", "k": "x') OR 1=1 --"})
    assert "OR 1=1" not in compiled.sql
    assert "x') OR 1=1 --" in compiled.params


def test_deep_nesting_is_refused() -> None:
    nested: dict = {"cat": "x"}
    for _ in range(40):
        nested = {"NOT": [nested]}
    with pytest.raises(ValidationError):
        compile_filters({"user_id": "u1", **nested})
