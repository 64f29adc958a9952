"""Fixtures of the `postgres` tests: one real PostgreSQL + pgvector server per test session
(tests/postgres_server.py), and a fresh database in it for each test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from postgres_server import PostgresServer

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


STORES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _config(request: pytest.FixtureRequest, make_dir: Any) -> dict[str, Any]:
    if request.param == "sqlite":
        return {"path": str(make_dir() / "m.db")}
    server = request.getfixturevalue("postgres_server")
    return {"store": server.create_database(f"test_{next(_names)}")}


@pytest.fixture(params=STORES)
def any_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Where a test's memories live, once on a SQLite file and once on a fresh PostgreSQL
    database: the config's `path` or `store`."""
    return _config(request, lambda: tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module", params=STORES)
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`any_store` shared by a module's tests."""
    return _config(request, lambda: tmp_path_factory.mktemp("store"))
