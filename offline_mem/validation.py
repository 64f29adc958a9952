"""Checks on public arguments: scope ids, messages, metadata, ranges. Pure; raises ValidationError.

Mem0's rules are kept (ids are str-converted and trimmed, empty or whitespace ids are refused, at
least one scope id) and tightened where Mem0 is lax (message shapes, NUL bytes, sizes).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from .errors import ScopeRequiredError, ValidationError, shown
from .values import Scope

log = logging.getLogger(__name__)

MESSAGE_ROLES = ("system", "user", "assistant", "tool")
MAX_TEXT_CHARS = 100_000
MAX_ID_CHARS = 256
RESERVED_METADATA_KEYS = ("user_id", "agent_id", "run_id", "actor_id")
MAX_METADATA_DEPTH = 32  # nesting of dicts and lists in metadata
# SQLite stores and compares integers as signed 64-bit: a larger one in metadata could never be
# filtered exactly, so it is refused where it comes in (metadata and filter values alike).
MIN_INT, MAX_INT = -(2**63), 2**63 - 1


def check_encodable(value: str, name: str) -> str:
    """Refuse text that has no UTF-8 form (lone surrogates): SQLite and hashing need UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{name} is not valid Unicode (lone surrogate at position {exc.start})"
        ) from None
    return value


def check_id(value: object, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise ValidationError(f"{name} must not be empty")
    if any(ch.isspace() for ch in text) or any(ord(ch) < 32 for ch in text):
        raise ValidationError(
            f"{name} must not contain whitespace or control characters: {shown(text)}"
        )
    check_encodable(text, name)
    if len(text) > MAX_ID_CHARS:
        raise ValidationError(f"{name} is longer than {MAX_ID_CHARS} characters")
    return text


def make_scope(
    user_id: object = None, agent_id: object = None, run_id: object = None, *, required: bool = True
) -> Scope:
    scope = Scope(
        user_id=None if user_id is None else check_id(user_id, "user_id"),
        agent_id=None if agent_id is None else check_id(agent_id, "agent_id"),
        run_id=None if run_id is None else check_id(run_id, "run_id"),
    )
    if required and scope.is_empty():
        raise ScopeRequiredError(
            "at least one of user_id, agent_id or run_id is required, "
            "e.g. add(..., user_id='alice')"
        )
    return scope


def check_memory_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"memory_id must be a non-empty string, got {shown(value)}")
    # No stored id holds one (import refuses them), and PostgreSQL cannot even compare a NUL.
    if any(ord(ch) < 32 for ch in value.strip()):
        raise ValidationError(f"memory_id must not contain control characters: {shown(value)}")
    return check_encodable(value.strip(), "memory_id")


def check_text(value: object, name: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise ValidationError(f"{name} contains a NUL character")
    check_encodable(value, name)
    if len(value) > MAX_TEXT_CHARS:
        raise ValidationError(f"{name} is longer than {MAX_TEXT_CHARS} characters")
    if not allow_empty and not value.strip():
        raise ValidationError(f"{name} must not be empty")
    return value


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    name: str | None = None
    timestamp: object = None  # raw; parsed by the caller against the call's timestamp
    metadata: dict[str, Any] | None = None  # image references, tool calls (message_parts.py)
    extract: bool = True  # shown to the extractor: not a tool result nor a tool call


@dataclass(frozen=True)
class Skipped:
    """A message that could not be used, reported in the add's result instead of failing it."""

    index: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "reason": self.reason}


def normalize_messages(messages: object) -> tuple[list[Message], list[Skipped]]:
    """The usable messages and those skipped, with the reason. A str is one user message, a
    dict a one-item list; each item needs a role and a content: a string, None or a list of
    parts (message_parts.py). A message that cannot be used is skipped, unless none can: then
    the whole call is refused (ValidationError)."""
    if isinstance(messages, str):
        items: list[Any] = [{"role": "user", "content": messages}]
    elif isinstance(messages, dict):
        items = [messages]
    elif isinstance(messages, list):
        items = messages
    else:
        raise ValidationError(
            "messages must be a string, a message dict or a list of message dicts, "
            f"got {type(messages).__name__}"
        )
    if not items:
        raise ValidationError("messages must not be empty")
    result: list[Message] = []
    skipped: list[Skipped] = []
    for index, item in enumerate(items):
        try:
            result.append(_message(item, f"messages[{index}]"))
        except ValidationError as exc:
            skipped.append(Skipped(index, str(exc)))
    if not result:
        reasons = "; ".join(s.reason for s in skipped[:3])
        raise ValidationError(f"no usable message: {reasons}")
    return result, skipped


def _message(item: object, where: str) -> Message:
    from .message_parts import read_content, tool_metadata

    if not isinstance(item, dict):
        raise ValidationError(f"{where} must be a dict with 'role' and 'content'")
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        raise ValidationError(f"{where}['role'] must be one of {MESSAGE_ROLES}, got {shown(role)}")
    if "content" not in item:
        raise ValidationError(f"{where} has no 'content'")
    content, metadata = read_content(item["content"], where)
    content = check_text(content, f"{where}['content']", allow_empty=True)
    tools = {key: item.get(key) for key in ("tool_calls", "tool_call_id")}
    check_json_shape(tools, f"{where} tool fields")
    metadata |= tool_metadata(item, where)
    if metadata:
        _check_stored_json(metadata, f"{where} tool fields")
    name = item.get("name")
    if name is not None:
        name = check_id(name, f"{where}['name']")
    extract = role != "tool" and "tool_calls" not in metadata
    return Message(role=role, content=content, name=name, timestamp=item.get("timestamp"),
                   metadata=metadata or None, extract=extract)  # fmt: skip


def check_int(value: int, name: str) -> int:
    """An integer SQLite can hold (signed 64-bit)."""
    if not MIN_INT <= value <= MAX_INT:
        raise ValidationError(f"{name} is outside the signed 64-bit range SQLite stores: {value}")
    return value


def check_json_shape(value: object, name: str, *, max_depth: int = MAX_METADATA_DEPTH) -> None:
    """Refuse a JSON-like value nested deeper than `max_depth` or holding an integer beyond 64
    bits; walked without recursion, so any depth (or a cycle) ends in a ValidationError."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > max_depth:
                raise ValidationError(f"{name} is nested deeper than {max_depth} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, int) and not isinstance(item, bool):
            check_int(item, f"an integer in {name}")


def check_metadata(metadata: object) -> dict[str, Any]:
    """A JSON-serialisable dict with string keys, at most MAX_METADATA_DEPTH deep, integers
    within 64 bits; scope keys are dropped with a warning (Mem0)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
    check_json_shape(metadata, "metadata")
    clean = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise ValidationError(f"metadata keys must be non-empty strings, got {shown(key)}")
        if "\x00" in key:
            raise ValidationError("metadata keys must not contain NUL characters")
        if key in RESERVED_METADATA_KEYS:
            log.warning("metadata key %r is reserved and was dropped; pass it as an argument", key)
            continue
        clean[key] = value
    try:
        text = json.dumps(clean, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"metadata must be JSON-serialisable without NaN/inf: {exc}"
        ) from None
    if "\\u0000" in text:
        raise ValidationError("metadata values must not contain NUL characters")
    check_encodable(text, "metadata")
    if len(text) > MAX_TEXT_CHARS:
        raise ValidationError(f"metadata is larger than {MAX_TEXT_CHARS} characters of JSON")
    return clean


def _check_stored_json(value: dict[str, Any], name: str) -> None:
    """A JSON value kept as text: no NUL, valid Unicode, within MAX_TEXT_CHARS."""
    text = json.dumps(value, ensure_ascii=False)
    if "\\u0000" in text:
        raise ValidationError(f"{name} contain a NUL character")
    check_encodable(text, name)
    if len(text) > MAX_TEXT_CHARS:
        raise ValidationError(f"{name} are larger than {MAX_TEXT_CHARS} characters of JSON")


def check_top_k(value: object, *, name: str = "top_k") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise ValidationError(f"{name} must be an integer from 1 to 10000, got {shown(value)}")
    return value


def check_offset(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"offset must be a non-negative integer, got {shown(value)}")
    return value


def check_threshold(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValidationError(f"threshold must be a number from 0 to 1, got {shown(value)}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValidationError(f"threshold must be a number from 0 to 1, got {shown(value)}")
    return float(value)


def reject_unknown_kwargs(method: str, unknown: dict[str, Any]) -> None:
    """Mem0 takes scope ids inside `filters=` for reads; say so instead of a bare TypeError."""
    if not unknown:
        return
    scoped = sorted(set(unknown) & {"user_id", "agent_id", "run_id"})
    if scoped:
        raise ValidationError(
            f"{method}() takes {scoped} inside filters=, e.g. filters={{'user_id': 'alice'}}"
        )
    for name, alternative in UNSUPPORTED_MEM0_ARGUMENTS.items():
        if name in unknown:
            raise ValidationError(f"{method}() does not support Mem0's {name}=: {alternative}")
    raise ValidationError(f"{method}() got unknown keyword argument(s) {sorted(unknown)}")


# Mem0 keyword arguments this library does not take, and what to use instead.
UNSUPPORTED_MEM0_ARGUMENTS = {
    "rerank": "no reranker model is pinned; the score already combines similarity, keywords "
    "and entities on a fixed scale (use threshold= and top_k=)",
}
