"""Shared fixtures. Every test runs with outbound connections blocked: any connect attempt to a
non-loopback address fails AND fails the test, even if the code under test swallowed the error.
Tests marked `network_local` may connect to loopback (the fetch tests' local endpoint)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from postgres_fixtures import (  # noqa: F401  (fixtures)
    any_store,
    module_store,
    new_store,
    open_memory,
    postgres_server,
    postgres_url,
    store_config,
    store_kind,
)

from offline_mem import Memory
from offline_mem.testing import FakeEmbedder

_blocked_attempts: list[str] = []
_allow_loopback = False
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    host = address[0] if isinstance(address, tuple) else None
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family == getattr(socket, "AF_UNIX", None):
        return
    if _allow_loopback and _is_loopback(address):
        return
    _blocked_attempts.append(repr(address))
    raise ConnectionRefusedError(f"offline_mem tests: outbound connection to {address!r} blocked")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def no_network(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Fails any test during which a blocked connection was attempted."""
    global _allow_loopback
    _allow_loopback = request.node.get_closest_marker("network_local") is not None
    start = len(_blocked_attempts)
    yield _blocked_attempts
    _allow_loopback = False
    attempts = _blocked_attempts[start:]
    if attempts:
        pytest.fail(f"the test attempted outbound connections: {attempts}")


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def db_path(tmp_path: Any) -> str:
    return str(tmp_path / "memory.db")


@pytest.fixture
def memory(db_path: str, embedder: FakeEmbedder) -> Iterator[Memory]:
    with Memory({"path": db_path}, embedder=embedder) as mem:
        yield mem
