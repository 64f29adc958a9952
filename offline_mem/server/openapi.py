"""The OpenAPI 3.1 description of the REST routes (served at /openapi.json), written by hand
beside rest.py: the bodies are Mem0's server's, with our additions marked in their descriptions."""

from __future__ import annotations

from typing import Any

from .. import __version__

_STR = {"type": "string"}
_OPT_STR = {"type": ["string", "null"]}
_OBJ = {"type": "object"}
_IDS = {key: {**_OPT_STR, "description": f"The {key.split('_')[0]}'s id."}
        for key in ("user_id", "agent_id", "run_id")}  # fmt: skip

MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "role": {"type": "string", "description": "user, assistant, system or tool."},
        "content": _STR,
        "name": {**_STR, "description": "The speaker's name."},
        "timestamp": {**_STR, "description": "When it was said (ISO-8601)."},
    },
}
MEMORY_CREATE = {
    "type": "object",
    "required": ["messages"],
    "additionalProperties": False,
    "properties": {
        "messages": {"type": "array", "items": MESSAGE},
        **_IDS,
        "metadata": {"type": ["object", "null"]},
        "expiration_date": {**_OPT_STR, "description": "YYYY-MM-DD."},
        "infer": {"type": ["boolean", "null"], "description": "Extract facts (default true)."},
        "memory_type": {**_OPT_STR, "description": "procedural_memory, with an agent_id."},
        "prompt": {**_OPT_STR, "description": "Instructions for the extraction."},
        "async_mode": {
            "type": ["boolean", "null"],
            "description": "Ours: store the messages now, extract in the background; answered "
            "202 with the job's event_id (see GET /jobs/{event_id}). `async` is the same.",
        },
    },
}
MEMORY_UPDATE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "text": {**_OPT_STR, "description": "The memory's new text."},
        "metadata": {"type": ["object", "null"], "description": "Merged into the memory's."},
        "expiration_date": {**_OPT_STR, "description": "YYYY-MM-DD, or null to clear."},
    },
}
SEARCH = {
    "type": "object",
    "required": ["query"],
    "additionalProperties": False,
    "properties": {
        "query": _STR,
        **_IDS,
        "filters": {"type": ["object", "null"], "description": "Mem0's filters."},
        "top_k": {"type": ["integer", "null"]},
        "threshold": {"type": ["number", "null"], "description": "Least score, 0 to 1."},
        "explain": {"type": ["boolean", "null"]},
        "show_expired": {"type": ["boolean", "null"]},
        "include_messages": {
            "type": ["boolean", "null"],
            "description": "Ours: rank the stored messages with the facts (default true).",
        },
        "include_sources": {
            "type": ["boolean", "null"],
            "description": "Ours: each fact with the messages it came from.",
        },
        "include_superseded": {"type": ["boolean", "null"]},
        "resolve_references": {"type": ["boolean", "null"]},
        "as_of": {
            "type": ["string", "null"],
            "description": "Ours: what was true on that date (ISO 8601 date or datetime).",
        },
        "reference_date": {"type": ["string", "null"], "description": "Mem0's name for as_of."},
    },
}
MESSAGE_SEARCH = {
    "type": "object",
    "required": ["query"],
    "additionalProperties": False,
    "properties": {
        "query": _STR, **_IDS, "filters": {"type": ["object", "null"]},
        "top_k": {"type": ["integer", "null"]}, "threshold": {"type": ["number", "null"]},
    },
}  # fmt: skip
ERROR = {
    "type": "object",
    "properties": {
        "error": {**_STR, "description": "The error's type, e.g. ValidationError."},
        "detail": _STR,
    },
}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _ok(description: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    error = {"description": "Refused: the body names the error type",
             "content": {"application/json": {"schema": ERROR}}}  # fmt: skip
    return {
        "200": {"description": description, "content": {"application/json": {"schema": _OBJ}}},
        **(extra or {}),
        "400": error, "401": error, "404": error, "413": error,
    }  # fmt: skip


def _query(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "required": False, "schema": _STR} for n in names]


_PATH_ID = [{"name": "memory_id", "in": "path", "required": True, "schema": _STR}]
_SCOPE = _query("user_id", "agent_id", "run_id")


def openapi_schema() -> dict[str, Any]:
    accepted = {"202": {"description": "Queued (async_mode): {results: [], status: PENDING, "
                        "event_id}"}}  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "offline-mem REST API",
            "version": __version__,
            "description": "Mem0's server routes over one local memory file. Every request "
            "carries `Authorization: Bearer <token>` (or `X-API-Key: <token>`).",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/memories": {
                "post": {"summary": "Create memories", "requestBody": _body(MEMORY_CREATE),
                         "responses": _ok("{results: [{id, memory, event}]}", accepted)},
                "get": {"summary": "Get memories",
                        "parameters": [*_SCOPE, *_query("top_k", "offset", "show_expired",
                                                        "include_superseded", "as_of")],
                        "responses": _ok("{results: [memory]}")},
                "delete": {"summary": "Delete all memories of a scope", "parameters": _SCOPE,
                           "responses": _ok("{message, deleted}")},
            },
            "/memories/{memory_id}": {
                "get": {"summary": "Get a memory", "parameters": [*_PATH_ID, *_SCOPE],
                        "responses": _ok("The memory")},
                "put": {"summary": "Update a memory", "parameters": [*_PATH_ID, *_SCOPE],
                        "requestBody": _body(MEMORY_UPDATE),
                        "responses": _ok("The updated memory")},
                "delete": {"summary": "Delete a memory", "parameters": [*_PATH_ID, *_SCOPE],
                           "responses": _ok("{message, id, memory, event}")},
            },
            "/memories/{memory_id}/history": {
                "get": {"summary": "Get memory history", "parameters": [*_PATH_ID, *_SCOPE],
                        "responses": _ok("[history row], oldest first")},
            },
            "/search": {
                "post": {"summary": "Search memories", "requestBody": _body(SEARCH),
                         "responses": _ok("{results: [fact or message]}")},
            },
            "/messages/search": {
                "post": {"summary": "Search the stored messages of a scope (ours)",
                         "requestBody": _body(MESSAGE_SEARCH),
                         "responses": _ok("{results: [message]}")},
            },
            "/reset": {"post": {"summary": "Reset all memories", "responses": _ok("{message}")}},
            "/jobs/{event_id}": {
                "get": {"summary": "An async add's job (ours)",
                        "parameters": [{"name": "event_id", "in": "path", "required": True,
                                        "schema": _STR}],
                        "responses": _ok("{status: PENDING|RUNNING|SUCCEEDED|FAILED, ...}")},
            },
            "/healthz": {"get": {"summary": "Liveness (ours)",
                                 "responses": _ok("{status, version, pending_jobs}")}},
            "/configure": {
                "get": {"summary": "The pinned models", "responses": _ok("{embedder, ...}")},
                "post": {"summary": "Refused: the models are pinned",
                         "responses": {"403": {"description": "Always"}}},
            },
        },
    }  # fmt: skip
