"""`offline-mem add | search | list | get | update | delete | delete-all | history`: the Memory API
from a terminal. Human-readable lines by default, the API's own result dicts with --json."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import MemoryNotFoundError, ValidationError
from .common import CliState, echo_json, open_memory, pass_state

F = TypeVar("F", bound=Callable[..., Any])


def scope_options(func: F) -> F:
    """--user/--agent/--run, passed on as user_id/agent_id/run_id."""
    for flag, key, what in reversed(
        [
            ("--user", "user_id", "user"),
            ("--agent", "agent_id", "agent"),
            ("--run", "run_id", "run"),
        ]
    ):
        func = click.option(flag, key, metavar="ID", help=f"The {what} id.")(func)
    return func


def _json_option(value: str | None, what: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ValidationError(f"{what} is not valid JSON: {exc}") from None


def _json_object(value: str | None, what: str) -> dict[str, Any] | None:
    parsed = _json_option(value, what)
    if parsed is not None and not isinstance(parsed, dict):
        raise ValidationError(f"{what} must be a JSON object, got {value!r}")
    return parsed


def _filters(
    raw: str | None, user_id: str | None, agent_id: str | None, run_id: str | None
) -> dict[str, Any] | None:
    filters = _json_object(raw, "--filters") or {}
    for key, value in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
        if value is not None:
            filters[key] = value
    return filters or None


def _line(item: dict[str, Any], *, score: bool = False) -> str:
    """One memory on one line: [score] id [state] text."""
    parts = []
    if score:
        parts.append(f"{item['score']:.3f}")
    parts.append(item["id"])
    flags = [] if item.get("state", "active") == "active" else [item["state"]]
    if item.get("kind") == "message":
        flags.append("message")
    if item.get("expired"):
        flags.append("expired")
    if flags:
        parts.append(f"[{', '.join(flags)}]")
    parts.append(item["memory"])
    return "  ".join(parts)


def _echo_item(item: dict[str, Any]) -> None:
    click.echo(item["memory"])
    for key, value in item.items():
        if key in ("memory", "sources"):
            continue
        if isinstance(value, dict):
            value = json.dumps(value, ensure_ascii=False)
        click.echo(f"  {key}: {value}")
    for source in item.get("sources", []):
        click.echo(f"  source: [{source['role']}] {source['content']}")


# -- commands -----------------------------------------------------------------------------------


@click.command("add")
@click.argument("text", required=False)
@click.option(
    "--messages",
    "messages_file",
    type=click.File("r"),
    metavar="FILE",
    help="Messages as JSON (a list of {role, content}), from FILE or - for stdin.",
)
@scope_options
@click.option("--no-infer", is_flag=True, help="Store each message as it is; no extraction model.")
@click.option("--metadata", metavar="JSON", help="A JSON object stored with each memory.")
@click.option("--expires", metavar="DATE", help="Expiration date or datetime (ISO-8601).")
@click.option(
    "--procedural",
    is_flag=True,
    help="Summarise the messages as the agent's procedural memory (needs --agent).",
)
@click.option(
    "--extractor", metavar="NAME", help="The extractor model (default: the configured one)."
)
@click.option(
    "--async",
    "async_mode",
    is_flag=True,
    help="Store the messages and queue the extraction; `offline-mem flush` runs it.",
)
@pass_state
def add(
    state: CliState,
    text: str | None,
    messages_file: Any,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    no_infer: bool,
    metadata: str | None,
    expires: str | None,
    procedural: bool,
    extractor: str | None,
    async_mode: bool,
) -> None:
    """Remember TEXT (one user message), or the messages of --messages. With extraction (the
    default) the local model turns them into facts; --no-infer keeps each message as a memory;
    --async stores the messages at once and queues the extraction."""
    if (text is None) == (messages_file is None):
        raise click.UsageError("give either TEXT or --messages FILE (- for stdin)")
    messages: Any = text
    if messages_file is not None:
        messages = _json_option(messages_file.read(), "--messages")
    with open_memory(state, extractor=extractor) as memory:
        result = memory.add(
            messages,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            metadata=_json_object(metadata, "--metadata"),
            infer=not no_infer,
            expiration_date=expires,
            memory_type="procedural_memory" if procedural else None,
            async_mode=async_mode,
        )
    if state.json:
        echo_json(result)
        return
    if result.get("status") == "PENDING":
        click.echo(f"queued as job {result['event_id']}; `offline-mem flush` runs it")
        return
    if not result["results"]:
        click.echo("nothing new to remember")
    for item in result["results"]:
        click.echo(f"{item['event']:<9} {item['id']}  {item['memory']}")


@click.command("search")
@click.argument("query")
@scope_options
@click.option("--filters", metavar="JSON", help='Mem0-style filters, e.g. \'{"topic": "wifi"}\'.')
@click.option("-k", "--top-k", default=10, show_default=True, help="How many results.")
@click.option(
    "--threshold",
    type=float,
    default=0.1,
    show_default=True,
    help="Drop results scoring below this (0-1).",
)
@click.option("--all", "include_superseded", is_flag=True, help="Include superseded memories.")
@click.option("--show-expired", is_flag=True, help="Include expired memories.")
@click.option("--explain", is_flag=True, help="Show each signal's part of the score.")
@click.option("--sources", is_flag=True, help="Show the messages each memory came from.")
@click.option("--facts-only", is_flag=True, help="Only extracted facts, not the stored messages.")
@click.option("--as-of", metavar="DATE", help="What was true on this date (ISO 8601).")
@pass_state
def search(
    state: CliState,
    query: str,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    filters: str | None,
    top_k: int,
    threshold: float,
    include_superseded: bool,
    show_expired: bool,
    explain: bool,
    sources: bool,
    facts_only: bool,
    as_of: str | None,
) -> None:
    """Facts and stored messages that best match QUERY, best first, with their scores."""
    with open_memory(state, existing=True) as memory:
        result = memory.search(
            query,
            filters=_filters(filters, user_id, agent_id, run_id),
            top_k=top_k,
            threshold=threshold,
            include_superseded=include_superseded,
            show_expired=show_expired,
            explain=explain,
            include_sources=sources,
            include_messages=not facts_only,
            as_of=as_of,
        )
    if state.json:
        echo_json(result)
        return
    if result.get("resolved_query"):
        click.echo(f"also searched as: {result['resolved_query']}")
    if not result["results"]:
        click.echo("no memories found")
    for item in result["results"]:
        click.echo(_line(item, score=True))
        if explain:
            details = item["score_details"]
            click.echo(
                "       "
                + ", ".join(
                    f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in details.items()
                )
            )
        for source in item.get("sources", []):
            click.echo(f"       source: [{source['role']}] {source['content']}")


@click.command("list")
@scope_options
@click.option("--filters", metavar="JSON", help="Mem0-style filters.")
@click.option("-n", "--limit", default=100, show_default=True, help="How many memories.")
@click.option("--offset", default=0, show_default=True, help="Skip this many first.")
@click.option("--all", "include_superseded", is_flag=True, help="Include superseded memories.")
@click.option("--show-expired", is_flag=True, help="Include expired memories.")
@click.option("--as-of", metavar="DATE", help="What was true on this date (ISO 8601).")
@pass_state
def list_memories(
    state: CliState,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    filters: str | None,
    limit: int,
    offset: int,
    include_superseded: bool,
    show_expired: bool,
    as_of: str | None,
) -> None:
    """The memories of a scope, newest first."""
    with open_memory(state, existing=True) as memory:
        result = memory.get_all(
            filters=_filters(filters, user_id, agent_id, run_id),
            top_k=limit,
            offset=offset,
            include_superseded=include_superseded,
            show_expired=show_expired,
            as_of=as_of,
        )
    if state.json:
        echo_json(result)
        return
    if not result["results"]:
        click.echo("no memories")
    for item in result["results"]:
        click.echo(_line(item))


@click.command("get")
@click.argument("memory_id")
@click.option("--sources", is_flag=True, help="Show the messages the memory came from.")
@pass_state
def get(state: CliState, memory_id: str, sources: bool) -> None:
    """One memory with all its fields."""
    with open_memory(state, existing=True) as memory:
        item = memory.get(memory_id)
        if item is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id!r}")
        if sources:
            record = memory.store.get(item["id"])
            assert record is not None
            item["sources"] = [m.to_dict() for m in memory.store.sources(record.rowid)]
    if state.json:
        echo_json(item)
    else:
        _echo_item(item)


@click.command("update")
@click.argument("memory_id")
@click.argument("text", required=False)
@click.option("--metadata", metavar="JSON", help="Merged into the memory's metadata.")
@click.option("--expires", metavar="DATE", help="New expiration date or datetime (ISO-8601).")
@click.option("--no-expiry", is_flag=True, help="Remove the expiration date.")
@pass_state
def update(
    state: CliState,
    memory_id: str,
    text: str | None,
    metadata: str | None,
    expires: str | None,
    no_expiry: bool,
) -> None:
    """Change a memory's TEXT (re-embedded), metadata or expiry; recorded in its history."""
    if expires is not None and no_expiry:
        raise click.UsageError("--expires and --no-expiry exclude each other")
    changes: dict[str, Any] = {"metadata": _json_object(metadata, "--metadata")}
    if expires is not None or no_expiry:
        changes["expiration_date"] = expires
    if text is None and changes["metadata"] is None and len(changes) == 1:
        raise click.UsageError("nothing to change: give TEXT, --metadata, --expires or --no-expiry")
    with open_memory(state, existing=True) as memory:
        item = memory.update(memory_id, text, **changes)
    if state.json:
        echo_json(item)
    else:
        click.echo(f"updated {item['id']}  {item['memory']}")


@click.command("delete")
@click.argument("memory_id")
@scope_options
@pass_state
def delete(
    state: CliState, memory_id: str, user_id: str | None, agent_id: str | None, run_id: str | None
) -> None:
    """Delete one memory (its history stays). With a scope option, only if it is in that scope."""
    with open_memory(state, existing=True) as memory:
        result = memory.delete(memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
    if state.json:
        echo_json(result)
    else:
        click.echo(f"deleted {result['id']}  {result['memory']}")


@click.command("delete-all")
@scope_options
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_state
def delete_all(
    state: CliState, user_id: str | None, agent_id: str | None, run_id: str | None, yes: bool
) -> None:
    """Delete every memory (and message) matching all the scope ids given."""
    if user_id is None and agent_id is None and run_id is None:
        raise click.UsageError("name a scope: --user, --agent and/or --run")
    if not yes:
        named = ", ".join(
            f"{k} {v}" for k, v in (("user", user_id), ("agent", agent_id), ("run", run_id)) if v
        )
        click.confirm(f"Delete every memory of {named}?", abort=True, err=True)
    with open_memory(state, existing=True) as memory:
        result = memory.delete_all(user_id=user_id, agent_id=agent_id, run_id=run_id)
    if state.json:
        echo_json(result)
    else:
        click.echo(f"deleted {result['deleted']} memor{'y' if result['deleted'] == 1 else 'ies'}")


@click.command("history")
@click.argument("memory_id")
@scope_options
@pass_state
def history(state: CliState, memory_id: str, **scope: Any) -> None:
    """Every ADD, UPDATE, SUPERSEDE and DELETE of a memory, oldest first (kept after deletion).
    With a scope option, only if it is a live memory of that scope."""
    with open_memory(state, existing=True) as memory:
        rows = memory.history(memory_id, **scope)
    if state.json:
        echo_json(rows)
        return
    if not rows:
        raise MemoryNotFoundError(f"no history for memory id {memory_id!r}")
    for row in rows:
        if row["event"] == "UPDATE":
            change = f"{row['old_memory']} -> {row['new_memory']}"
        elif row["event"] == "SUPERSEDE":
            change = f"{row['old_memory']} (by {row.get('related_memory_id')})"
        elif row["event"] == "MERGE":
            change = f"{row['old_memory']} (said again: {row['new_memory']})"
        else:
            change = row["new_memory"] if row["event"] == "ADD" else row["old_memory"]
        by = f"  (by {row['written_by']})" if row.get("written_by") else ""
        click.echo(f"{row['created_at']}  {row['event']:<9}  {change}{by}")


COMMANDS = [add, search, list_memories, get, update, delete, delete_all, history]


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
