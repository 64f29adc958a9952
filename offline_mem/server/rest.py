"""Mem0's REST routes over one `Memory` (mem0ai/mem0 `server/main.py`: the same paths, bodies and
query parameters), plus ours: async adds answered 202 with the job's `event_id`, `GET /jobs/{id}`,
`POST /messages/search`, `GET /healthz`.

Each route checks the JSON's shape (an object, known keys), then hands the values to the
library, which validates them as it validates a Python caller's arguments. The library runs in
Starlette's thread pool; `Memory` is thread-safe, so the routes share it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import __version__
from ..errors import (
    ExtractionError,
    FlushTimeoutError,
    MemoryNotFoundError,
    ModelError,
    OfflineMemError,
    StoreError,
    ValidationError,
)
from ..memory import Memory
from .security import error_body

log = logging.getLogger("offline_mem.server")

SCOPE_PARAMS = ("user_id", "agent_id", "run_id")
MAX_DEPTH = 32  # of a body's JSON: deeper is refused before the library sees it
# Mem0's MemoryCreate, and ours: async_mode ("async" for short)
ADD_KEYS = frozenset({
    "messages", "user_id", "agent_id", "run_id", "metadata", "expiration_date", "infer",
    "memory_type", "prompt", "async_mode", "async", "timestamp",
})  # fmt: skip
# Mem0's SearchRequest, and ours
SEARCH_KEYS = frozenset({
    "query", "user_id", "agent_id", "run_id", "filters", "top_k", "threshold", "explain",
    "show_expired", "include_messages", "include_sources", "include_superseded",
    "resolve_references", "as_of", "reference_date",
})  # fmt: skip
MESSAGE_SEARCH_KEYS = frozenset({"query", "user_id", "agent_id", "run_id", "filters", "top_k",
                                 "threshold"})  # fmt: skip
UPDATE_KEYS = frozenset({"text", "metadata", "expiration_date"})


class BadRequest(Exception):
    """The request itself is malformed (not JSON, not an object, an unknown key)."""

    def __init__(self, detail: str, status: int = 400, kind: str = "BadRequest") -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind


def status_of(exc: OfflineMemError) -> int:
    """The HTTP status of a library error: always a 4xx, the error's type in the body."""
    if isinstance(exc, MemoryNotFoundError):
        return 404
    if isinstance(exc, ValidationError):
        return 400
    if isinstance(exc, FlushTimeoutError):
        return 408
    if isinstance(exc, (ExtractionError, ModelError)):
        return 422  # the add could not be processed; nothing was written
    if isinstance(exc, StoreError):
        return 409  # the file's state refuses it (another embedder, a newer schema)
    return 400


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: an error message may quote the input, and
    a lone surrogate in it must not break the response."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def library_error(exc: OfflineMemError) -> JSONResponse:
    body = error_body(type(exc).__name__, str(exc))
    return AsciiJSONResponse(body, status_code=status_of(exc))


def bad_request(exc: BadRequest) -> JSONResponse:
    return AsciiJSONResponse(error_body(exc.kind, str(exc)), status_code=exc.status)


def check_value(value: Any, what: str = "the body") -> None:
    """Refuse JSON nested deeper than MAX_DEPTH and text that is not valid Unicode (a lone
    surrogate, which no UTF-8 file can store), walking the value without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadRequest(f"{what} nests deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            check_text_param(item, what)
        elif isinstance(item, dict):
            for key, field in item.items():
                check_text_param(key, what)
                stack.append((field, depth + 1))
        elif isinstance(item, list):
            stack.extend((field, depth + 1) for field in item)


def check_text_param(text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"{what} holds text that is not valid Unicode") from None
    return text


async def read_object(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    """The body as a JSON object holding only `allowed` keys."""
    raw = await request.body()
    try:
        value = json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadRequest(f"the body nests deeper than {MAX_DEPTH} levels") from None
    check_value(value)
    if not isinstance(value, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise BadRequest(f"unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    return value


def scope_params(request: Request) -> dict[str, str]:
    """The scope ids of the query string (a missing or empty one is left out, as Mem0 does)."""
    return {
        key: check_text_param(request.query_params[key], key)
        for key in SCOPE_PARAMS
        if request.query_params.get(key)
    }


def path_param(request: Request, name: str) -> str:
    return check_text_param(request.path_params[name], name)


def int_param(request: Request, name: str) -> int | None:
    given = request.query_params.get(name)
    if given is None:
        return None
    try:
        return int(given)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {given!r}") from None


def bool_param(request: Request, name: str, default: bool = False) -> bool:
    given = request.query_params.get(name)
    if given is None:
        return default
    if given.lower() in ("true", "1", "yes"):
        return True
    if given.lower() in ("false", "0", "no"):
        return False
    raise BadRequest(f"{name} must be true or false, got {given!r}")


class RestApi:
    """The routes of one `Memory`."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        # The library's calls are CPU-bound and hold the GIL most of the time: more of them at
        # once than there are cores only makes each slower (docs/server.md, "What one server
        # saves"). Waiting requests queue here instead of thrashing.
        self.limiter = anyio.CapacityLimiter(max(1, os.cpu_count() or 1))

    def routes(self) -> list[Route]:
        return [
            Route("/memories", self.add, methods=["POST"]),
            Route("/memories", self.get_all, methods=["GET"]),
            Route("/memories", self.delete_all, methods=["DELETE"]),
            Route("/memories/{memory_id}", self.get, methods=["GET"]),
            Route("/memories/{memory_id}", self.update, methods=["PUT"]),
            Route("/memories/{memory_id}", self.delete, methods=["DELETE"]),
            Route("/memories/{memory_id}/history", self.history, methods=["GET"]),
            Route("/search", self.search, methods=["POST"]),
            Route("/messages/search", self.search_messages, methods=["POST"]),
            Route("/reset", self.reset, methods=["POST"]),
            Route("/jobs/{event_id}", self.job, methods=["GET"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/configure", self.configure, methods=["GET", "POST"]),
        ]

    async def _call(
        self, work: Callable[[], Any], status: Callable[[Any], int] = lambda result: 200
    ) -> Response:
        """`work()` in the thread pool, its result as JSON; a library error as its 4xx."""
        try:
            result = await anyio.to_thread.run_sync(work, limiter=self.limiter)
        except OfflineMemError as exc:
            return library_error(exc)
        return JSONResponse(result, status_code=status(result))

    # -- Mem0's routes --------------------------------------------------------------------------

    async def add(self, request: Request) -> Response:
        body = await read_object(request, ADD_KEYS)
        if "async" in body:
            if "async_mode" in body:
                raise BadRequest("give async or async_mode, not both")
            body["async_mode"] = body.pop("async")
        messages = body.pop("messages", None)
        if messages is None:
            raise BadRequest("messages is required")
        params = {k: v for k, v in body.items() if v is not None}
        return await self._call(
            lambda: self.memory.add(messages, **params),
            status=lambda result: 202 if result.get("status") == "PENDING" else 200,
        )

    async def get_all(self, request: Request) -> Response:
        top_k = int_param(request, "top_k")
        extra: dict[str, Any] = {} if top_k is None else {"top_k": top_k}
        offset = int_param(request, "offset")
        if offset is not None:
            extra["offset"] = offset
        show_expired = bool_param(request, "show_expired")
        superseded = bool_param(request, "include_superseded")
        as_of = request.query_params.get("as_of")
        if as_of is not None:
            extra["as_of"] = as_of
        filters = scope_params(request)
        return await self._call(lambda: self.memory.get_all(
            filters=filters, show_expired=show_expired, include_superseded=superseded, **extra
        ))  # fmt: skip

    async def get(self, request: Request) -> Response:
        memory_id = path_param(request, "memory_id")
        scope = scope_params(request)

        def work() -> Any:
            item = self.memory.get(memory_id, **scope)
            if item is None:
                raise MemoryNotFoundError(f"no memory with id {memory_id!r} in the scope named")
            return item

        return await self._call(work)

    async def update(self, request: Request) -> Response:
        memory_id = path_param(request, "memory_id")
        body = await read_object(request, UPDATE_KEYS)
        params: dict[str, Any] = {}
        if "text" in body and body["text"] is not None:
            params["text"] = body["text"]
        if "metadata" in body and body["metadata"] is not None:
            params["metadata"] = body["metadata"]
        if "expiration_date" in body:
            params["expiration_date"] = body["expiration_date"]
        params.update(scope_params(request))
        return await self._call(lambda: self.memory.update(memory_id, **params))

    async def delete(self, request: Request) -> Response:
        memory_id = path_param(request, "memory_id")
        scope = scope_params(request)

        def work() -> dict[str, Any]:
            # Mem0's MessageResponse, with what was deleted
            return {"message": "Memory deleted", **self.memory.delete(memory_id, **scope)}

        return await self._call(work)

    async def delete_all(self, request: Request) -> Response:
        scope = scope_params(request)
        if not scope:
            raise BadRequest("at least one of user_id, agent_id, run_id is required")

        def work() -> dict[str, Any]:
            return {"message": "All relevant memories deleted", **self.memory.delete_all(**scope)}

        return await self._call(work)

    async def history(self, request: Request) -> Response:
        memory_id = path_param(request, "memory_id")
        scope = scope_params(request)

        def work() -> list[dict[str, Any]]:
            # a live memory must be in the scope named; a deleted one's scope is not recorded
            live = scope and self.memory.get(memory_id) is not None
            if live and self.memory.get(memory_id, **scope) is None:
                raise MemoryNotFoundError(f"no memory with id {memory_id!r} in the scope named")
            return self.memory.history(memory_id)

        return await self._call(work)

    async def search(self, request: Request) -> Response:
        body = await read_object(request, SEARCH_KEYS)
        query = body.pop("query", None)
        filters = _filters_with_ids(body)
        params = {k: v for k, v in body.items() if v is not None}
        return await self._call(lambda: self.memory.search(query, filters=filters, **params))

    async def reset(self, request: Request) -> Response:
        def work() -> dict[str, Any]:
            self.memory.reset()
            return {"message": "All memories reset"}

        return await self._call(work)

    async def configure(self, request: Request) -> Response:
        if request.method == "POST":
            return JSONResponse(error_body(
                "Forbidden", "the models are pinned; configure them when starting the server"),
                status_code=403)  # fmt: skip
        config = self.memory.config
        return JSONResponse({
            "embedder": config.embedder, "extractor": config.extractor, "nlp": config.nlp,
            "path": self.memory.path, "version": __version__,
        })  # fmt: skip

    # -- ours -----------------------------------------------------------------------------------

    async def search_messages(self, request: Request) -> Response:
        body = await read_object(request, MESSAGE_SEARCH_KEYS)
        query = body.pop("query", None)
        filters = _filters_with_ids(body)
        params = {k: v for k, v in body.items() if v is not None}
        return await self._call(
            lambda: self.memory.search_messages(query, filters=filters, **params)
        )

    async def job(self, request: Request) -> Response:
        event_id = path_param(request, "event_id")

        def work() -> dict[str, Any]:
            found = self.memory.job(event_id)
            if found is None:
                raise MemoryNotFoundError(f"no job with id {event_id!r}")
            return found

        return await self._call(work)

    async def healthz(self, request: Request) -> Response:
        pending = await run_in_threadpool(self.memory.pending)
        return JSONResponse({"status": "ok", "version": __version__, "pending_jobs": pending})


def _filters_with_ids(body: dict[str, Any]) -> dict[str, Any]:
    """Mem0's search body: `filters`, and the deprecated top-level ids merged into it (a
    top-level id naming another value than the filters' is an error)."""
    filters = body.pop("filters", None)
    if filters is None:
        filters = {}
    if not isinstance(filters, dict):
        raise BadRequest("filters must be a JSON object")
    filters = dict(filters)
    for key in SCOPE_PARAMS:
        value = body.pop(key, None)
        if value is None:
            continue
        if key in filters and filters[key] != value:
            raise BadRequest(f"{key} is {value!r} but filters name {key} {filters[key]!r}")
        filters[key] = value
    return filters
