"""The server's ASGI application: the REST routes (rest.py), the OpenAPI schema, MCP over
streamable HTTP at /mcp (the SDK's transport, the tools of mcp/), the memory browser at /, all
behind the token and body-size guard (security.py). No CORS headers are sent: a page of another
origin cannot read the answers."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ..memory import Memory
from .openapi import openapi_schema
from .rest import AsciiJSONResponse, BadRequest, RestApi, bad_request
from .security import MAX_BODY_BYTES, Guard, Token, error_body

log = logging.getLogger("offline_mem.server")

PAGE = Path(__file__).with_name("browser.html")


async def _unexpected(request: Request, exc: Exception) -> Response:
    """A bug, not bad input: logged with its traceback; the client gets a JSON 500 and the
    server goes on."""
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body("InternalError", type(exc).__name__), status_code=500)


async def _not_found(request: Request, exc: Exception) -> Response:
    body = error_body("NotFound", f"no route {request.url.path}")
    return AsciiJSONResponse(body, status_code=404)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return AsciiJSONResponse(
        error_body("MethodNotAllowed", f"{request.method} is not allowed on {request.url.path}"),
        status_code=405,
    )


async def _bad_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BadRequest)
    return bad_request(exc)


def build_app(
    memory: Memory,
    tokens: list[Token],
    *,
    host: str = "127.0.0.1",
    mcp: bool = True,
    max_body: int = MAX_BODY_BYTES,
) -> Guard:
    """The whole server over one open `Memory`. `mcp=False` leaves /mcp out (the `mcp` SDK is
    then not imported)."""
    api = RestApi(memory)
    schema = openapi_schema()

    async def openapi(request: Request) -> Response:
        return JSONResponse(schema)

    async def page(request: Request) -> Response:
        return FileResponse(PAGE, media_type="text/html; charset=utf-8")

    routes: list[Any] = [
        Route("/", page, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        *api.routes(),
    ]
    manager: Any = None
    if mcp:
        from ..mcp.server import MemoryServer
        from ..mcp.tools import MemoryTools

        server = MemoryServer(MemoryTools(memory), extended=True).server
        mcp_app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
        manager = server.session_manager
        routes += list(mcp_app.routes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manager is None:
            yield
            return
        async with manager.run():
            yield

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            BadRequest: _bad_request,
            404: _not_found,
            405: _not_allowed,
            Exception: _unexpected,
        },
    )
    return Guard(app, tokens, max_body=max_body)
