"""Results rendered for a prompt: one line per item with the date it was said and who said it,
so a model reading "last year" or "next month" has the date to count from.

    >>> print(format_memories(memory.search("When did she paint a sunrise?", filters=scope)))
    [8 May 2023 (Monday)] <speaker>: Yeah, I painted that lake sunrise last year!
    [8 May 2023 (Monday)] <speaker> painted a lake sunrise in 2022

Pure: no I/O, no import from the package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

UNKNOWN_DATE = "unknown date"


def format_memories(
    results: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    numbered: bool = False,
    dates: bool = True,
) -> str:
    """`search`/`get_all`'s answer (or its `results` list) as prompt lines, in the given order:
    `[DATE] TEXT` per item, a stored turn as `SPEAKER: TEXT`, a superseded fact marked as no
    longer current. `numbered` prefixes `1. `, `2. `...; `dates=False` leaves the dates out.
    Returns "" for no results."""
    items = results.get("results", []) if isinstance(results, Mapping) else results
    lines = [format_memory(item, dates=dates) for item in items]
    if numbered:
        lines = [f"{i}. {line}" for i, line in enumerate(lines, start=1)]
    return "\n".join(lines)


def format_memory(item: Mapping[str, Any], *, dates: bool = True) -> str:
    """One result as one prompt line (see `format_memories`)."""
    if item.get("kind") == "message" and "content" in item:
        speaker = item.get("name") or item.get("role") or ""
        text = f"{speaker}: {item['content']}" if speaker else str(item["content"])
    else:
        text = str(item.get("memory", ""))
    text = " ".join(text.split())  # one line, whatever the turn's own line breaks
    if item.get("state") == "superseded":
        text += " (no longer current)"
    return f"[{said_on(item)}] {text}" if dates else text


def said_on(item: Mapping[str, Any]) -> str:
    """The day an item was said (`observed_at`), else stored (`created_at`), written as
    '8 May 2023 (Monday)': the weekday lets a model resolve "last Friday"."""
    stamp = item.get("observed_at") or item.get("created_at")
    if not stamp:
        return UNKNOWN_DATE
    try:
        day = date.fromisoformat(str(stamp)[:10])
    except ValueError:
        return UNKNOWN_DATE
    return f"{day.day} {day:%B} {day.year} ({day:%A})"
