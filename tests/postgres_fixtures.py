"""Fixtures of the `postgres` tests: one real PostgreSQL + pgvector server per test session
(tests/postgres_server.py), and a fresh database in it for each test; and the fixtures that run
a public-API test once on a SQLite file and once on a PostgreSQL database, with the fake-model
Memories they open (`open_memory`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_memory import fake_memory
from postgres_server import PostgresServer

from offline_mem import Memory

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A new empty database's URL (over the server's unix socket)."""
    return postgres_server.create_database(f"test_{next(_names)}")


NewStore = Callable[[], dict[str, Any]]


def store_location(store: dict[str, Any]) -> str:
    """A store config's memory file path or database URL, as `--db` and OFFLINE_MEM_DB take it."""
    return str(store.get("path") or store["store"])


STORES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_store(store_kind: str, db_path: str, request: pytest.FixtureRequest) -> NewStore:
    """Makes the config of a new empty store of the test's kind at each call: a SQLite file
    (`db_path` first), or a fresh PostgreSQL database."""
    made = itertools.count()

    def make() -> dict[str, Any]:
        n = next(made)
        if store_kind == "sqlite":
            return {"path": db_path if n == 0 else db_path.replace(".db", f"{n}.db")}
        server = request.getfixturevalue("postgres_server")
        return {"store": server.create_database(f"test_{next(_names)}")}

    return make


@pytest.fixture
def store_config(new_store: NewStore) -> dict[str, Any]:
    """Where the memories live: a SQLite file, or a fresh PostgreSQL database."""
    return new_store()


@pytest.fixture(scope="module", params=STORES)
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`store_config` shared by a module's tests."""
    if request.param == "sqlite":
        return {"path": str(tmp_path_factory.mktemp("store") / "m.db")}
    server = request.getfixturevalue("postgres_server")
    return {"store": server.create_database(f"test_{next(_names)}")}


@pytest.fixture
def any_store(store_config: dict[str, Any]) -> dict[str, Any]:
    """`store_config` by the name the tests of merges, validity and evidence take."""
    return store_config


OpenMemory = Callable[..., Memory]


@pytest.fixture
def open_memory(store_config: dict[str, Any]) -> Iterator[OpenMemory]:
    """Opens fake-model Memories on the test's store (`fake_memory`'s arguments after the
    store); all are closed after the test."""
    opened: list[Memory] = []

    def make(*script: Any, **kwargs: Any) -> Memory:
        memory = fake_memory(store_config, *script, **kwargs)
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()
