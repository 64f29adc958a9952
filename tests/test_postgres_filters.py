"""Metadata and column filters select the same memories on PostgreSQL as on SQLite, whose
semantics (json_extract, SQLite's ordering of mixed types) the PostgreSQL compiler reproduces
(store/postgres/filters.py): the same memories on both stores, then every filter below."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from offline_mem import Memory
from offline_mem.testing import FakeEmbedder, FakeEntities

pytestmark = pytest.mark.postgres

METADATA: list[dict[str, Any]] = [
    {"n": 1, "tag": "alpha", "flag": True},
    {"n": 2.5, "tag": "Beta", "flag": False},
    {"n": 10, "tag": "gamma", "note": None},
    {"n": "10", "tag": "ÉCOLE é", "flag": 1},
    {"n": "abc", "tag": "alphabet"},
    {"n": 0, "tag": "", "flag": 0, "list": ["a", "b"]},
    {"tag": "delta", "big": 12345678901},
    {"n": -3, "nested": {"k": "v"}},
    {},
]

FILTERS: list[dict[str, Any]] = [
    {"n": 1}, {"n": 1.0}, {"n": True}, {"n": "10"}, {"n": 10}, {"n": None}, {"note": None},
    {"flag": True}, {"flag": False}, {"flag": 1}, {"flag": "1"}, {"flag": {"ne": True}},
    {"n": {"gt": 1}}, {"n": {"gte": 1}}, {"n": {"lt": 10}}, {"n": {"lte": 10}},
    {"n": {"gt": "1"}}, {"n": {"lt": "b"}}, {"n": {"gte": "10"}}, {"n": {"lte": "abc"}},
    {"n": {"gt": 0, "lt": 10}}, {"n": {"ne": 10}}, {"n": {"ne": "10"}}, {"n": {"ne": None}},
    {"n": {"in": [1, "10", None]}}, {"n": {"nin": [1, "10"]}}, {"n": {"nin": [None, 2.5]}},
    {"n": {"in": [True]}}, {"tag": {"contains": "alpha"}}, {"tag": {"contains": ""}},
    {"tag": {"icontains": "BETA"}}, {"tag": {"icontains": "école"}},
    {"tag": {"icontains": "ÉCOLE"}}, {"n": {"contains": "1"}}, {"n": {"contains": ".5"}},
    {"flag": {"contains": "1"}}, {"list": {"contains": "a"}}, {"big": {"gt": 12345678900}},
    {"tag": {"gt": "b"}}, {"tag": {"lt": "a"}}, {"tag": {"gte": "delta"}}, {"n": "*"},
    {"NOT": [{"n": {"gt": 1}}]}, {"NOT": [{"flag": True}]}, {"NOT": [{"n": {"nin": [1]}}]},
    {"OR": [{"flag": True}, {"tag": {"icontains": "gamma"}}]},
    {"AND": [{"n": {"gte": 0}}, {"NOT": [{"tag": {"contains": "a"}}]}]},
    {"role": {"contains": "se"}}, {"role": {"gt": "a"}}, {"role": {"icontains": "USER"}},
    {"actor_id": {"ne": "Rui"}}, {"actor_id": None}, {"actor_id": {"nin": ["Rui", None]}},
    {"actor_id": {"in": ["Rui", None]}}, {"created_at": {"gt": "2000-01-01"}},
    {"agent_id": {"lt": "b"}}, {"agent_id": {"ne": None}},
]  # fmt: skip


@pytest.fixture
def both(postgres_url: str, db_path: str) -> Iterator[tuple[Memory, Memory]]:
    lite = Memory({"path": db_path}, embedder=FakeEmbedder(), entities=FakeEntities())
    pg = Memory({"store": postgres_url}, embedder=FakeEmbedder(), entities=FakeEntities(),
                analyzer=lite.analyzer)  # fmt: skip
    try:
        for mem in (lite, pg):
            for i, metadata in enumerate(METADATA):
                message = {"role": "user", "content": f"memory number {i}"}
                if i % 3 == 0:
                    message["name"] = "Rui"
                agent = "a1" if i % 2 else None
                mem.add([message], user_id="u1", agent_id=agent, metadata=metadata, infer=False)
        yield lite, pg
    finally:
        pg.close()
        lite.close()


def texts(result: dict[str, Any]) -> list[str]:
    return [item["memory"] for item in result["results"]]


def test_every_filter_selects_the_same_memories(both: tuple[Memory, Memory]) -> None:
    """One store pair for all the filters (each add runs the analyzer); every mismatch is
    reported at once."""
    wrong = []
    for where in FILTERS:
        filters = {"user_id": "u1", **where}
        lite, pg = (sorted(texts(m.get_all(filters=filters, top_k=100))) for m in both)
        searched = [
            texts(
                m.search(
                    "memory number",
                    filters=filters,
                    top_k=100,
                    threshold=None,
                    include_messages=False,
                )
            )
            for m in both
        ]
        if pg != lite or searched[1] != searched[0]:
            wrong.append((where, lite, pg))
    assert wrong == []


def test_the_filters_select_different_sets(both: tuple[Memory, Memory]) -> None:
    """The list above is a real test: its filters do not all select everything or nothing."""
    lite = both[0]
    sizes = {len(lite.get_all(filters={"user_id": "u1", **f}, top_k=100)["results"])
             for f in FILTERS}  # fmt: skip
    assert len(sizes) >= 6
