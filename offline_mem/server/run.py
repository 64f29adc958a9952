"""Running the server: bind the socket (so `--port 0` can say which port it got), then uvicorn
until SIGTERM or SIGINT, which let the requests in flight finish and stop the MCP sessions; the
caller then closes the `Memory` (a running extraction job finishes, queued ones stay in the
file and resume on the next start)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import uvicorn

from ..memory import Memory
from .app import build_app
from .security import Token


class _Server(uvicorn.Server):
    """uvicorn's server, except that a SIGTERM or SIGINT it caught is not raised again when it
    has stopped: the caller still has the `Memory` to close, then exits with status 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            self._captured_signals.clear()


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here rather than by uvicorn: uvicorn's `Config.bind_socket()`
    leaves proto at 0 in older releases that our `uvicorn>=0.30` allows (so no TCP_NODELAY, see
    below), and its host/port path binds only after the app has started, exits with a status of
    its own when the port is taken, and may bind "localhost" twice (IPv4 and IPv6: two ports
    under `--port 0`)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on connections whose
    # socket says TCP, and without it a reused connection's response waits ~40 ms (Nagle's
    # algorithm against the client's delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    return sock


def serve(
    memory: Memory,
    tokens: list[Token],
    *,
    host: str,
    port: int,
    log_level: str = "info",
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve until a signal; `on_listening(url)` once the socket is bound."""
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    app = build_app(memory, tokens, host=host)
    config = uvicorn.Config(
        app, log_level=log_level, access_log=log_level == "debug", server_header=False,
        lifespan="on", timeout_graceful_shutdown=10,
    )  # fmt: skip
    if on_listening is not None:
        on_listening(f"http://{shown}:{bound_port}")
    _Server(config).run(sockets=[sock])
