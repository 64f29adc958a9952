"""The memory as an MCP server over stdio, built on the official `mcp` SDK (`MCPServer`).

Seven tools (tools.py does the work): each has a JSON schema for its arguments and its
structured result, a one-line description written for a model, and returns the result dict as
structured content with a short text rendering (text.py). An `OfflineMemError` becomes a
tool error carrying the library's message; the server stays up. The SDK runs each call in a
worker thread; one `Memory` serves them all (it is thread-safe), so the models load once.

Needs the `mcp` extra (`pip install 'offline_mem[mcp]'`). Logging goes to stderr only: stdout is
the protocol stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import NotRequired, TypedDict

from .. import __version__
from ..errors import OfflineMemError
from ..store.writer import written_by
from .tools import MemoryTools, ToolOutput

INSTRUCTIONS = (
    "Long-term memory of the user, kept in one file on this machine. Call search_memory before "
    "answering anything that may depend on what the user said in earlier conversations; call "
    "add_memory when the user states something worth remembering (facts about them, "
    "preferences, plans, people). Results carry ids for get/update/delete/history."
)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

# -- argument types (their descriptions are what a model reads) ------------------------------

MemoryId = Annotated[str, Field(description="The id of a memory (or of a stored message).")]
UserId = Annotated[str | None, Field(description="Whose memories; default: the server's --user.")]
AgentId = Annotated[
    str | None, Field(description="The agent's memories; default: the server's --agent.")
]
RunId = Annotated[str | None, Field(description="Limit to one run or session; default: none.")]
AsOf = Annotated[
    str | None,
    Field(
        description="Only what was true on this date (ISO 8601, e.g. 2024-03-01), superseded "
        "facts included if they held then; default: now."
    ),
]
Filters = Annotated[
    dict[str, Any] | None,
    Field(
        description="Mem0-style filters on metadata and fields, e.g. "
        '{"topic": "health"} or {"created_at": {"gte": "2026-01-01"}}.'
    ),
]


class ChatMessage(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    role: Annotated[str, Field(description="user, assistant, system or tool.")]
    content: str
    name: NotRequired[Annotated[str, Field(description="The speaker's name.")]]
    timestamp: NotRequired[Annotated[str, Field(description="When it was said (ISO-8601).")]]


# -- result types (the tools' output schemas; items may carry more fields) -------------------


class Item(TypedDict):
    id: str
    memory: Annotated[str, Field(description="The fact, or the turn as 'Name: content'.")]
    kind: NotRequired[Literal["fact", "message"]]
    score: NotRequired[Annotated[float, Field(description="Relevance from 0 to 1.")]]
    created_at: NotRequired[str | None]
    updated_at: NotRequired[str | None]
    observed_at: NotRequired[Annotated[str | None, Field(description="When it was said.")]]
    user_id: NotRequired[str]
    agent_id: NotRequired[str]
    run_id: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]
    state: NotRequired[str]
    memory_ids: NotRequired[
        Annotated[list[str], Field(description="The facts extracted from this message.")]
    ]


class Results(TypedDict):
    results: list[Item]


class Turn(TypedDict):
    id: str
    role: str
    content: str
    name: NotRequired[str | None]
    score: NotRequired[Annotated[float, Field(description="Similarity to the query, 0 to 1.")]]
    created_at: NotRequired[str | None]
    observed_at: NotRequired[Annotated[str | None, Field(description="When it was said.")]]
    memory_ids: NotRequired[
        Annotated[list[str], Field(description="The facts extracted from this message.")]
    ]


class Turns(TypedDict):
    results: list[Turn]


class AddEvent(TypedDict):
    id: str
    memory: str
    event: Annotated[str, Field(description="ADD, or SUPERSEDE for a replaced memory.")]


class Skipped(TypedDict):
    index: int
    reason: str


class AddResults(TypedDict):
    results: list[AddEvent]
    skipped: NotRequired[list[Skipped]]
    status: NotRequired[Annotated[str, Field(description="PENDING: the extraction is queued.")]]
    event_id: NotRequired[Annotated[str, Field(description="The queued extraction job's id.")]]


class Changed(TypedDict):
    id: str
    memory: str
    event: str


class Deleted(TypedDict):
    deleted: Annotated[int, Field(description="How many memories were deleted.")]


class HistoryRow(TypedDict):
    id: str
    memory_id: str
    event: Annotated[str, Field(description="ADD, UPDATE, SUPERSEDE or DELETE.")]
    old_memory: str | None
    new_memory: str | None
    created_at: str


class History(TypedDict):
    results: list[HistoryRow]


def writer_of(ctx: Context | None) -> str | None:
    """Who a write is recorded as written by: over HTTP the label of the request's token
    (`offline-mem serve`), over stdio the name the client gave at initialisation."""
    if ctx is None:
        return None
    try:
        request = ctx.request_context.request
        session = ctx.request_context.session
    except (ValueError, AttributeError):
        return None
    state = getattr(request, "scope", {}).get("state") or {}
    if state.get("actor"):
        return str(state["actor"])
    params = getattr(session, "client_params", None)
    name = getattr(getattr(params, "client_info", None), "name", None)
    return name if isinstance(name, str) and name.strip() else None


def _result(call: Callable[[], ToolOutput], ctx: Context | None = None) -> CallToolResult:
    """Run a tool (a write recorded as the client's); the library's errors become tool errors
    with the library's message."""
    try:
        with written_by(writer_of(ctx)):
            out = call()
    except OfflineMemError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc
    return CallToolResult(
        content=[TextContent(type="text", text=out.text)], structured_content=out.data
    )


class _StrictMetadata(FuncMetadata):
    """Arguments taken as sent: the SDK would parse a JSON string given for an object or list
    argument; the library takes no string for those."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return dict(data)


def strict_tool(tool: Tool) -> Tool:
    """`tool` validating its arguments as the library does: an unknown argument is refused and
    nothing is coerced ("false" is not False, "5" is not 5); its schema says so
    (additionalProperties: false)."""
    loose = tool.fn_metadata.arg_model
    model: type[BaseModel] = type(
        loose.__name__,
        (loose,),
        {"model_config": ConfigDict(extra="forbid", strict=True), "__module__": __name__},
    )
    fields = {name: getattr(tool.fn_metadata, name) for name in FuncMetadata.model_fields}
    metadata = _StrictMetadata(**{**fields, "arg_model": model})
    schema = model.model_json_schema(by_alias=True)
    return tool.model_copy(update={"fn_metadata": metadata, "parameters": schema})


class MemoryServer:
    """The MCP tools of one `MemoryTools`, registered on an `MCPServer`."""

    def __init__(
        self, tools: MemoryTools, *, log_level: LogLevel = "WARNING", extended: bool = False
    ) -> None:
        """`extended`: also the tools of `offline-mem serve` (search_messages,
        delete_all_memories)."""
        self.tools = tools
        # Every tool reads or writes only the memory file: a closed world.
        read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
        adds = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
        changes = adds.model_copy(update={"destructive_hint": True})
        registered: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
            (self.add_memory, ADD, adds),
            (self.search_memory, SEARCH, read_only),
            (self.list_memories, LIST, read_only),
            (self.get_memory, GET, read_only),
            (self.update_memory, UPDATE, changes),
            (self.delete_memory, DELETE, changes),
            (self.memory_history, HISTORY, read_only),
        ]
        if extended:
            registered += [
                (self.search_messages, SEARCH_MESSAGES, read_only),
                (self.delete_all_memories, DELETE_ALL, changes),
            ]
        self.registered = [
            strict_tool(Tool.from_function(method, description=description, annotations=hints))
            for method, description, hints in registered
        ]
        self.server: MCPServer[Any] = MCPServer(
            "offline-mem",
            version=__version__,
            instructions=INSTRUCTIONS,
            log_level=log_level,
            tools=self.registered,
        )

    def run(self) -> None:
        """Serve over stdin/stdout until the client closes stdin."""
        self.server.run("stdio")

    # -- the tools ----------------------------------------------------------------------------

    def add_memory(
        self,
        text: Annotated[
            str | None, Field(description="What to remember, as the user said it.")
        ] = None,
        messages: Annotated[
            list[ChatMessage] | None, Field(description="A conversation, instead of text.")
        ] = None,
        infer: Annotated[
            bool, Field(description="Extract facts with the local model (false: store verbatim).")
        ] = True,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Stored with each memory, e.g. a topic.")
        ] = None,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        async_mode: Annotated[
            bool | None,
            Field(
                description="Store the messages now and extract the facts in the background "
                "(returns at once); default: the server's configuration."
            ),
        ] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, AddResults]:
        given = None if messages is None else [dict(m) for m in messages]
        return _result(lambda: self.tools.add_memory(
            text, given, infer=infer, metadata=metadata,
            user_id=user_id, agent_id=agent_id, run_id=run_id, async_mode=async_mode,
        ), ctx)  # fmt: skip

    def search_memory(
        self,
        query: Annotated[str, Field(description="A question or keywords, in natural language.")],
        top_k: Annotated[int, Field(description="How many results.")] = 10,
        filters: Filters = None,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        as_of: AsOf = None,
    ) -> Annotated[CallToolResult, Results]:
        return _result(lambda: self.tools.search_memory(
            query, top_k=top_k, filters=filters,
            user_id=user_id, agent_id=agent_id, run_id=run_id, as_of=as_of,
        ))  # fmt: skip

    def search_messages(
        self,
        query: Annotated[str, Field(description="A question or keywords, in natural language.")],
        top_k: Annotated[int, Field(description="How many results.")] = 10,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
    ) -> Annotated[CallToolResult, Turns]:
        return _result(lambda: self.tools.search_messages(
            query, top_k=top_k, user_id=user_id, agent_id=agent_id, run_id=run_id,
        ))  # fmt: skip

    def delete_all_memories(
        self,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, Deleted]:
        return _result(lambda: self.tools.delete_all_memories(
            user_id=user_id, agent_id=agent_id, run_id=run_id
        ), ctx)  # fmt: skip

    def list_memories(
        self,
        filters: Filters = None,
        top_k: Annotated[int | None, Field(description="How many (default 20).")] = None,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        as_of: AsOf = None,
    ) -> Annotated[CallToolResult, Results]:
        return _result(lambda: self.tools.list_memories(
            filters=filters, top_k=top_k, user_id=user_id, agent_id=agent_id, run_id=run_id,
            as_of=as_of,
        ))  # fmt: skip

    def get_memory(
        self,
        memory_id: MemoryId,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
    ) -> Annotated[CallToolResult, Item]:
        return _result(lambda: self.tools.get_memory(
            memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id
        ))  # fmt: skip

    def update_memory(
        self,
        memory_id: MemoryId,
        text: Annotated[str, Field(description="The memory's new text.")],
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, Item]:
        return _result(lambda: self.tools.update_memory(
            memory_id, text, user_id=user_id, agent_id=agent_id, run_id=run_id
        ), ctx)  # fmt: skip

    def delete_memory(
        self,
        memory_id: MemoryId,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, Changed]:
        return _result(lambda: self.tools.delete_memory(
            memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id
        ), ctx)  # fmt: skip

    def memory_history(
        self,
        memory_id: MemoryId,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
    ) -> Annotated[CallToolResult, History]:
        return _result(lambda: self.tools.memory_history(
            memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id
        ))  # fmt: skip


# One line each, for a model choosing a tool.
ADD = (
    "Remember something the user said: a text or chat messages. With infer=true (default) a "
    "local model extracts the facts, which may take some seconds; infer=false stores it verbatim."
)
SEARCH = (
    "Search the memory: the facts and past conversation turns most relevant to a query, best "
    "first, each with its id, kind (fact or message), score (0-1) and date."
)
LIST = "List the stored memories (facts) of the user, newest first."
GET = "Get one memory (or stored message) by id, with all its fields."
UPDATE = "Replace the text of a memory, by id; the old text stays in its history."
DELETE = "Delete a memory (or stored message) by id; its history is kept."
SEARCH_MESSAGES = (
    "Search only the stored conversation turns (not the extracted facts) of one scope, closest "
    "to a query first, each with the ids of the facts extracted from it."
)
DELETE_ALL = "Delete every memory and stored message of a scope (user, agent or run); irreversible."
HISTORY = "Show how a memory changed over time: its ADD, UPDATE, SUPERSEDE and DELETE events."
