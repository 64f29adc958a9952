"""What the MCP server's tools do, over one `Memory`, without the MCP SDK.

Each tool is a method that fills in the server's default scope, calls the public `Memory` API
and returns the result dict (the tool's structured content) with a short text rendering of it
(text.py). Errors are the library's own (`OfflineMemError` and subclasses); the server turns
them into tool errors. The SDK wiring is in server.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import MemoryNotFoundError, ValidationError, shown
from ..memory import Memory
from ..values import SCOPE_KEYS
from . import text as mcp_text


@dataclass(frozen=True)
class DefaultScope:
    """The ids a tool call gets when it passes none (`offline-mem mcp --user/--agent`)."""

    user_id: str | None = None
    agent_id: str | None = None

    def merged(
        self, user_id: str | None, agent_id: str | None, run_id: str | None
    ) -> dict[str, Any]:
        """The ids a call names, each falling back to the default when not passed."""
        return {
            "user_id": user_id if user_id is not None else self.user_id,
            "agent_id": agent_id if agent_id is not None else self.agent_id,
            "run_id": run_id,
        }


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result: the structured content and its short text rendering."""

    data: dict[str, Any]
    text: str


class MemoryTools:
    """The memory tools over one open `Memory` (which may be shared by threads): the seven of
    `offline-mem mcp`, and `search_messages` and `delete_all_memories` of `offline-mem serve`."""

    def __init__(self, memory: Memory, defaults: DefaultScope | None = None) -> None:
        self.memory = memory
        self.defaults = defaults or DefaultScope()

    def add_memory(
        self,
        text: str | None = None,
        messages: list[dict[str, Any]] | None = None,
        *,
        infer: bool = True,
        metadata: dict[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        async_mode: bool | None = None,
    ) -> ToolOutput:
        if (text is None) == (messages is None):
            raise ValidationError("give either text or messages, not both and not neither")
        scope = self.defaults.merged(user_id, agent_id, run_id)
        given: Any = text if messages is None else messages
        result = self.memory.add(
            given, metadata=metadata, infer=infer, async_mode=async_mode, **scope
        )
        return ToolOutput(result, mcp_text.added(result))

    def search_memory(
        self,
        query: str,
        *,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        as_of: str | None = None,
    ) -> ToolOutput:
        where = self._filters(filters, user_id, agent_id, run_id)
        result = self.memory.search(query, filters=where, top_k=top_k, as_of=as_of)
        return ToolOutput(result, mcp_text.found(result["results"]))

    def search_messages(
        self,
        query: str,
        *,
        top_k: int = 10,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> ToolOutput:
        where = self._filters(None, user_id, agent_id, run_id)
        result = self.memory.search_messages(query, filters=where, top_k=top_k)
        return ToolOutput(result, mcp_text.turns(result["results"]))

    def delete_all_memories(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> ToolOutput:
        """Every memory and message of the scope named (the ids given, or the defaults)."""
        scope = self.defaults.merged(user_id, agent_id, run_id)
        result = self.memory.delete_all(**scope)
        named = ", ".join(f"{k}={v}" for k, v in scope.items() if v is not None)
        return ToolOutput(result, f"deleted {result['deleted']} memories of {named}")

    def list_memories(
        self,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        as_of: str | None = None,
    ) -> ToolOutput:
        where = self._filters(filters, user_id, agent_id, run_id)
        extra: dict[str, Any] = {} if top_k is None else {"top_k": top_k}
        result = self.memory.get_all(filters=where, as_of=as_of, **extra)
        return ToolOutput(result, mcp_text.listed(result["results"]))

    def get_memory(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> ToolOutput:
        item = self.memory.get(memory_id, **self.defaults.merged(user_id, agent_id, run_id))
        if item is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id!r} in the scope named")
        return ToolOutput(item, mcp_text.item(item))

    def update_memory(
        self,
        memory_id: str,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> ToolOutput:
        scope = self.defaults.merged(user_id, agent_id, run_id)
        item = self.memory.update(memory_id, text, **scope)
        return ToolOutput(item, f"updated {item['id']}: {item['memory']}")

    def delete_memory(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> ToolOutput:
        result = self.memory.delete(memory_id, **self.defaults.merged(user_id, agent_id, run_id))
        return ToolOutput(result, f"deleted {result['id']}: {result['memory']}")

    def memory_history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> ToolOutput:
        """The memory's history, scoped as `Memory.history`: with the server's (or the call's)
        scope, only a live memory of that scope has one to show; a deleted memory's scope is
        gone from the file, so its history is not shown to a scoped call."""
        scope = self.defaults.merged(user_id, agent_id, run_id)
        rows = self.memory.history(memory_id, **scope)
        if not rows:
            raise MemoryNotFoundError(f"no history for memory id {memory_id!r} in the scope named")
        return ToolOutput({"results": rows}, mcp_text.history(rows))

    def _filters(
        self,
        filters: dict[str, Any] | None,
        user_id: str | None,
        agent_id: str | None,
        run_id: str | None,
    ) -> dict[str, Any]:
        """Filters with the scope ids: a passed id is added (a filter naming another value for it
        is an error), and a default fills a scope key the filters leave out."""
        if filters is not None and not isinstance(filters, dict):
            raise ValidationError(f"filters must be an object, got {type(filters).__name__}")
        where = dict(filters or {})
        passed = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        defaults = self.defaults.merged(None, None, None)
        for key in SCOPE_KEYS:
            value = passed[key]
            if value is not None:
                if key in where and where[key] != value:
                    raise ValidationError(
                        f"{key} is {shown(value)} but filters name {key} "
                        f"{shown(where[key])}; give one"
                    )
                where[key] = value
            elif key not in where and defaults[key] is not None:
                where[key] = defaults[key]
        return where
