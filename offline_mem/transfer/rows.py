"""Each row of an export checked as the public API checks its arguments: ids, texts, dates,
roles, metadata and vectors. A row the API could not have written is refused, so an edited file
cannot plant what no call can reach, read or repair. Pure; raises ValidationError, which the
reader turns into an `ImportRefusedError` naming the line."""

from __future__ import annotations

import base64
import json
import math
import uuid
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..store.integrity import UNIT_TOLERANCE
from ..timeutil import iso, parse_datetime, parse_expiration
from ..validation import (
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    MESSAGE_ROLES,
    RESERVED_METADATA_KEYS,
    check_id,
    check_json_shape,
    check_metadata,
    check_text,
    make_scope,
)

MEMORY_STATES = ("active", "superseded")
HISTORY_EVENTS = ("ADD", "UPDATE", "DELETE", "SUPERSEDE", "MERGE")
MEMORY_TYPES = (None, "procedural_memory")


def check_uuid(value: str, name: str) -> str:
    """The ids of messages, memories and history rows are uuid4 strings, as the API makes them."""
    try:
        canonical = str(uuid.UUID(value))
    except ValueError:
        raise ValidationError(f"{name} {value!r} is not a UUID") from None
    if canonical != value:
        raise ValidationError(f"{name} {value!r} is not a UUID in canonical form")
    return value


def check_token(value: str | None, name: str) -> None:
    """A short identifier (a scope id, a name, a model hash, a prompt version) the API accepts."""
    if value is not None and check_id(value, name) != value:
        raise ValidationError(f"{name} {value!r} has surrounding whitespace")


def check_timestamp(value: str | None, name: str) -> None:
    """A timestamp as the store writes it (ISO-8601 UTC with microseconds), so that string order
    is time order."""
    if value is None:
        return
    if len(value) > 64 or iso(parse_datetime(value, what=name)) != value:
        raise ValidationError(
            f"{name} {value[:64]!r} is not a timestamp as offline_mem writes it "
            "(e.g. '2026-05-01T09:30:00.000000+00:00')"
        )


def check_scope_ids(row: dict[str, Any]) -> None:
    make_scope(row["user_id"], row["agent_id"], row["run_id"])
    for key in ("user_id", "agent_id", "run_id"):
        check_token(row[key], key)


def check_role(value: str | None, name: str) -> None:
    if value is not None and value not in MESSAGE_ROLES:
        raise ValidationError(f"{name} must be one of {MESSAGE_ROLES}, got {value!r}")


def check_stored_metadata(value: Any, name: str) -> dict[str, Any]:
    """Metadata as `add` stores it: a JSON object within the API's limits, no reserved key."""
    if not isinstance(value, dict):
        raise ValidationError(f"{name} must be a JSON object")
    reserved = sorted(set(value) & set(RESERVED_METADATA_KEYS))
    if reserved:
        raise ValidationError(f"{name} holds the reserved key(s) {reserved}")
    if check_metadata(value) != value:
        raise ValidationError(f"{name} is not as the API stores it")
    return value


def check_message(row: dict[str, Any]) -> None:
    check_uuid(row["id"], "message id")
    check_scope_ids(row)
    if row["role"] not in MESSAGE_ROLES:
        raise ValidationError(f"role must be one of {MESSAGE_ROLES}, got {row['role']!r}")
    check_token(row["name"], "name")
    check_text(row["content"], "content", allow_empty=True)
    check_timestamp(row["created_at"], "created_at")
    check_timestamp(row["observed_at"], "observed_at")
    if row["metadata"] is not None:
        check_text(row["metadata"], "metadata")
        try:
            parsed = json.loads(row["metadata"])
        except (ValueError, RecursionError):
            raise ValidationError("metadata is not JSON text") from None
        if not isinstance(parsed, dict):
            raise ValidationError("metadata must be the JSON text of an object")
        check_json_shape(parsed, "metadata")


def check_memory(row: dict[str, Any]) -> None:
    check_uuid(row["id"], "memory id")
    check_scope_ids(row)
    check_text(row["text"], "text")
    check_stored_metadata(row["metadata"], "metadata")
    check_role(row["role"], "role")
    check_role(row["attributed_to"], "attributed_to")
    check_token(row["actor_id"], "actor_id")
    if row["memory_type"] not in MEMORY_TYPES:
        raise ValidationError("memory_type must be None or 'procedural_memory'")
    if row["superseded_by"] is not None:
        check_uuid(row["superseded_by"], "superseded_by")
    for key in ("created_at", "updated_at", "observed_at", "valid_from", "valid_to"):
        check_timestamp(row[key], key)
    _check_validity(row)
    expiry = row["expiration_date"]
    if expiry is not None and (len(expiry) > 64 or parse_expiration(expiry) != expiry):
        raise ValidationError(f"expiration_date {expiry[:64]!r} is not as offline_mem writes it")
    for key in ("embedder_sha256", "extractor_sha256", "prompt_version"):
        check_token(row[key], key)
    for source in row["sources"]:
        if not isinstance(source, str):
            raise ValidationError("sources must be message ids")
        check_uuid(source, "source")
    for norm in row["entities"]:
        if not isinstance(norm, str) or len(norm) > MAX_ID_CHARS * 4:
            raise ValidationError("entities must be short strings")
        check_text(norm, "entity")


def check_vector(encoded: Any, dimension: int) -> np.ndarray:
    """A memory's vector: base64 of `dimension` little-endian float32, finite, unit length."""
    if not isinstance(encoded, str) or len(encoded) > 8 * dimension:
        raise ValidationError("its vector is not a base64 string of the right size")
    try:
        blob = base64.b64decode(encoded, validate=True)
    except (ValueError, TypeError):
        raise ValidationError("its vector is not base64") from None
    if len(blob) != 4 * dimension:
        raise ValidationError(f"its vector does not have {dimension} float32 values")
    vector = np.frombuffer(blob, dtype="<f4")
    if not np.isfinite(vector).all():
        raise ValidationError("its vector holds a NaN or an infinity")
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if not math.isclose(norm, 1.0, abs_tol=UNIT_TOLERANCE):
        raise ValidationError(f"its vector has length {norm:.4f}, not 1")
    return vector


def check_entity(row: dict[str, Any]) -> None:
    for key in ("name", "norm", "kind"):
        check_text(row[key], key)
        if len(row[key]) > MAX_TEXT_CHARS // 10:
            raise ValidationError(f"entity {key} is too long")


def check_history(row: dict[str, Any]) -> None:
    check_uuid(row["id"], "history id")
    check_uuid(row["memory_id"], "memory_id")
    if row["related_memory_id"] is not None:
        check_uuid(row["related_memory_id"], "related_memory_id")
    if row["event"] not in HISTORY_EVENTS:
        raise ValidationError(f"unknown event {row['event']!r}")
    for key in ("old_memory", "new_memory"):
        if row[key] is not None:
            check_text(row[key], key, allow_empty=True)
    check_timestamp(row["created_at"], "created_at")
    check_timestamp(row["updated_at"], "updated_at")
    check_timestamp(row["happened_at"], "happened_at")
    check_token(row["actor_id"], "actor_id")
    check_role(row["role"], "role")
    if row["written_by"] is not None:
        check_text(row["written_by"], "written_by")


def check_job_fields(row: dict[str, Any]) -> None:
    check_token(row["id"], "job id")
    check_scope_ids(row)
    check_timestamp(row["created_at"], "created_at")
    check_timestamp(row["finished_at"], "finished_at")
    if row["error"] is not None:
        check_text(row["error"], "error", allow_empty=True)
    request = row["request"]
    check_json_shape(request, "request")
    if isinstance(request.get("metadata"), dict):
        check_stored_metadata(request["metadata"], "request metadata")
    if isinstance(request.get("instructions"), str):
        check_text(request["instructions"], "request instructions", allow_empty=True)
    if isinstance(request.get("messages"), list):
        for message in request["messages"]:
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                check_uuid(message["id"], "request message id")


ROW_CHECKS = {
    "message": check_message,
    "entity": check_entity,
    "memory": check_memory,
    "history": check_history,
    "job": check_job_fields,
}


def _check_validity(row: dict[str, Any]) -> None:
    """valid_from and valid_to as a store writes them (store/integrity/rows.py `validity`); an
    export from before they existed has neither (import gives the message's date)."""
    start, end = row["valid_from"], row["valid_to"]
    if start is None:
        if end is not None:
            raise ValidationError("valid_to without valid_from")
        return
    said = row["observed_at"] or row["created_at"]
    if start != said and not (start < said and start.endswith("T00:00:00.000000+00:00")):
        raise ValidationError("valid_from is neither the message's date nor an earlier day")
    if (row["state"] == "active") != (end is None):
        raise ValidationError("valid_to must be set exactly when the memory is superseded")
    if end is not None and end < start:
        raise ValidationError("valid_to is before valid_from")
