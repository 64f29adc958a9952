"""The arguments of one `Memory.add` call, checked before anything runs or is written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import ValidationError, shown
from ..timeutil import parse_datetime, parse_expiration
from ..validation import (
    Message,
    Skipped,
    check_metadata,
    check_text,
    make_scope,
    normalize_messages,
)
from ..values import Scope


@dataclass(frozen=True)
class AddCall:
    scope: Scope
    messages: list[Message]
    skipped: Sequence[Skipped]  # the messages that could not be used, and why
    metadata: dict[str, Any]
    expiration_date: str | None
    call_time: datetime | None  # the call's `timestamp`: the messages' date when they have none
    infer: bool
    kind: str | None  # "facts" or "procedural" for an add that extracts, None for a raw add
    instructions: str | None  # the call's `prompt`, else the config's custom instructions
    async_mode: bool

    def reported(self, result: dict[str, Any]) -> dict[str, Any]:
        """The add's result, with the skipped messages and why (when any)."""
        if self.skipped:
            result["skipped"] = [s.to_dict() for s in self.skipped]
        return result


def check_add_call(
    messages: object,
    *,
    user_id: object,
    agent_id: object,
    run_id: object,
    metadata: object,
    infer: object,
    memory_type: object,
    prompt: object,
    expiration_date: object,
    timestamp: object,
    async_mode: object,
    default_async: bool,
    default_instructions: str | None,
) -> AddCall:
    """Every argument of an add checked (ValidationError naming the first bad one)."""
    scope = make_scope(user_id, agent_id, run_id)
    parsed, skipped = normalize_messages(messages)
    clean_metadata = check_metadata(metadata)
    expiry = None if expiration_date is None else parse_expiration(expiration_date)
    call_time = None if timestamp is None else parse_datetime(timestamp, what="timestamp")
    if memory_type is not None and memory_type != "procedural_memory":
        raise ValidationError(
            f"memory_type must be None or 'procedural_memory', got {shown(memory_type)}"
        )
    instructions = default_instructions if prompt is None else check_text(prompt, "prompt")
    if not isinstance(infer, bool):
        raise ValidationError(f"infer must be True or False, got {shown(infer)}")
    if async_mode is None:
        async_mode = default_async
    elif not isinstance(async_mode, bool):
        raise ValidationError(f"async_mode must be True, False or None, got {shown(async_mode)}")
    if memory_type == "procedural_memory" and scope.agent_id is None:
        raise ValidationError("memory_type='procedural_memory' needs an agent_id")
    kind = None
    if infer or memory_type is not None:
        kind = "procedural" if memory_type else "facts"
    return AddCall(
        scope=scope, messages=parsed, skipped=skipped, metadata=clean_metadata,
        expiration_date=expiry, call_time=call_time, infer=infer, kind=kind,
        instructions=instructions, async_mode=async_mode,
    )  # fmt: skip
