"""Short text renderings of the MCP tools' results, for clients that show a model only the text
content: one line per item with what a model needs to act on it (score, kind, id), then the item
as `format_memories` renders it for a prompt (its date, its speaker)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..retrieval.formatting import format_memory


def _count(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def found(results: Sequence[dict[str, Any]]) -> str:
    """search_memory: `score kind id  [date] text`, best first."""
    if not results:
        return "no memories found"
    lines = [f"{_count(len(results), 'result', 'results')} (score, kind, id, [date] text):"]
    for item in results:
        lines.append(
            f"{item.get('score', 0.0):.3f} {item.get('kind', 'fact')} {item['id']}  "
            f"{format_memory(item)}"
        )
    return "\n".join(lines)


def turns(results: Sequence[dict[str, Any]]) -> str:
    """search_messages: `score id  [date] name: content`, best first."""
    if not results:
        return "no messages found"
    lines = [f"{_count(len(results), 'message', 'messages')} (score, id, [date] speaker: text):"]
    for item in results:
        turn = {**item, "kind": "message"}
        lines.append(f"{item.get('score', 0.0):.3f} {item['id']}  {format_memory(turn)}")
    return "\n".join(lines)


def listed(results: Sequence[dict[str, Any]]) -> str:
    """list_memories: `id  [date] text`, newest first."""
    if not results:
        return "no memories"
    lines = [f"{_count(len(results), 'memory', 'memories')} (id, [date] text):"]
    for item in results:
        flag = " [expired]" if item.get("expired") else ""
        lines.append(f"{item['id']}{flag}  {format_memory(item)}")
    return "\n".join(lines)


def added(result: dict[str, Any]) -> str:
    """add_memory: one `EVENT id  text` line per memory written (or the queued job of an async
    add), then what was skipped."""
    lines = [f"{row['event']} {row['id']}  {row['memory']}" for row in result["results"]]
    if result.get("status") == "PENDING":
        lines = [f"queued as job {result['event_id']}: the messages are searchable now, the "
                 "facts follow in the background"]  # fmt: skip
    if not lines:
        lines = ["nothing new to remember"]
    for skipped in result.get("skipped", []):
        lines.append(f"skipped message {skipped['index']}: {skipped['reason']}")
    return "\n".join(lines)


def item(value: dict[str, Any]) -> str:
    """get_memory: the text, then the other fields one per line."""
    lines = [value["memory"]]
    for key, field in value.items():
        if key == "memory":
            continue
        if isinstance(field, (dict, list)):
            field = json.dumps(field, ensure_ascii=False)
        lines.append(f"{key}: {field}")
    return "\n".join(lines)


def history(rows: Sequence[dict[str, Any]]) -> str:
    """memory_history: `date EVENT change`, oldest first."""
    lines = []
    for row in rows:
        event = row["event"]
        if event == "UPDATE":
            change = f"{row['old_memory']} -> {row['new_memory']}"
        elif event == "SUPERSEDE":
            change = f"{row['old_memory']} (superseded by {row.get('related_memory_id')})"
        elif event == "ADD":
            change = str(row["new_memory"])
        elif event == "MERGE":
            change = f"{row['old_memory']} (said again: {row['new_memory']})"
        else:
            change = str(row["old_memory"])
        lines.append(f"{row['created_at']} {event} {change}")
    return "\n".join(lines)
