"""Fixtures of the `postgres` tests: one real PostgreSQL + pgvector server per test session
(tests/postgres_server.py), and a fresh database in it for each test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

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
