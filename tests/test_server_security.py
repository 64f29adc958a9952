"""The server's security pieces without a server: the bind check and the token file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from offline_mem.cli import main
from offline_mem.errors import ConfigError
from offline_mem.server.security import check_bind, load_or_create_tokens


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.5"])
def test_loopback_hosts_are_allowed(host: str) -> None:
    check_bind(host, allow_remote=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org"])
def test_other_hosts_need_allow_remote(host: str) -> None:
    with pytest.raises(ConfigError, match="--allow-remote"):
        check_bind(host, allow_remote=False)
    check_bind(host, allow_remote=True)


def test_serve_refuses_a_remote_host_before_opening_anything(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    result = CliRunner().invoke(main, ["--db", str(db), "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 1 and "--allow-remote" in result.output
    assert not db.exists() and not (tmp_path / "m.db.token").exists()


def test_the_token_file_is_made_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "t.token"
    tokens, created = load_or_create_tokens(path)
    assert created and len(tokens) == 1 and len(tokens[0].secret) >= 32
    assert path.stat().st_mode & 0o777 == 0o600
    again, created_again = load_or_create_tokens(path)
    assert again == tokens and not created_again


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.token"
    load_or_create_tokens(path)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_or_create_tokens(path)


def test_labels_and_short_tokens(tmp_path: Path) -> None:
    path = tmp_path / "t.token"
    path.write_text("# apps\n" + "a" * 20 + " ide-agent\n" + "b" * 20 + "\n")
    os.chmod(path, 0o600)
    tokens, _ = load_or_create_tokens(path)
    assert [t.label for t in tokens] == ["ide-agent", "default"]
    path.write_text("short label\n")
    with pytest.raises(ConfigError, match="16 characters"):
        load_or_create_tokens(path)


@pytest.mark.network_local
def test_served_connections_have_nagle_off() -> None:
    """The listening socket says TCP, so asyncio sets TCP_NODELAY on each connection: without
    it a reused connection's answer waited ~40 ms for the client's delayed ACK (44 ms for any
    request on a keep-alive connection, 1 ms after; benchmarks/server_costs.py)."""
    import asyncio
    import socket

    from offline_mem.server.run import bind

    async def nodelay_of_a_connection() -> int:
        listening = bind("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listening)
        _, writer = await asyncio.open_connection(*listening.getsockname()[:2])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(nodelay_of_a_connection()) == 1
