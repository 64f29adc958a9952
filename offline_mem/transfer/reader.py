"""Reading an export: every line checked on its own, then the file as a whole (counts, ids,
references, scopes), before anything is written. Any problem is an `ImportRefusedError`."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from typing import Any

from ..store.migrations import SCHEMA_VERSION
from ..values import Scope, content_hash
from .format import (
    FORMAT,
    FORMAT_VERSION,
    INT_TYPE,
    KINDS,
    OPTIONAL_FIELDS,
    OPTIONAL_KINDS,
    ORDER,
    ExportData,
)
from .format import refusal as _refuse
from .jobs import check_job


def _check_header(header: Any) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _refuse("line 1", f"not an offline_mem export (no header with format {FORMAT!r})")
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        raise _refuse(
            "line 1", f"format version {version!r}; this offline_mem reads version {FORMAT_VERSION}"
        )
    schema = header.get("schema_version")
    if not isinstance(schema, int) or schema < 1 or schema > SCHEMA_VERSION:
        raise _refuse(
            "line 1",
            f"schema version {schema!r} is newer than this offline_mem's "
            f"{SCHEMA_VERSION}; upgrade offline_mem",
        )
    embedder = header.get("embedder")
    if not (
        isinstance(embedder, dict)
        and isinstance(embedder.get("name"), str)
        and isinstance(embedder.get("sha256"), str)
        and isinstance(embedder.get("dimension"), int)
        and embedder["dimension"] > 0
    ):
        raise _refuse("line 1", "the embedder must have a name, a sha256 and a dimension")
    counts = header.get("counts")
    required = [kind for kind in ORDER if kind not in OPTIONAL_KINDS]
    if (
        not isinstance(counts, dict)
        or not set(required) <= set(counts) <= set(ORDER)
        or not all(isinstance(v, int) and v >= 0 for v in counts.values())
    ):
        raise _refuse(
            "line 1",
            f"'counts' must give a number for each of {required} (and may for "
            f"{sorted(OPTIONAL_KINDS)})",
        )
    if not isinstance(header.get("vectors"), bool):
        raise _refuse("line 1", "'vectors' must be true or false")
    expected = {
        "type",
        "format",
        "format_version",
        "schema_version",
        "embedder",
        "vectors",
        "counts",
    }
    if set(header) != expected:
        raise _refuse("line 1", f"unexpected header keys {sorted(set(header) ^ expected)}")
    return header


def _check_row(number: int, row: Any, last_kind: int) -> tuple[str, int]:
    where = f"line {number}"
    if not isinstance(row, dict):
        raise _refuse(where, "not a JSON object")
    kind = row.get("type")
    if kind not in KINDS:
        raise _refuse(where, f"unknown type {kind!r}")
    position = ORDER.index(kind)
    if position < last_kind:
        raise _refuse(where, f"a {kind} line after the {ORDER[last_kind]} lines")
    fields = KINDS[kind]
    allowed = {"type", *fields} | ({"vector"} if kind == "memory" else set())
    for key in OPTIONAL_FIELDS.get(kind, ()):
        row.setdefault(key, None)
    missing, unknown = set(fields) - set(row), set(row) - allowed
    if missing or unknown:
        raise _refuse(
            where, f"{kind} with missing keys {sorted(missing)} / unknown keys {sorted(unknown)}"
        )
    for key, types in fields.items():
        value = row[key]
        if not isinstance(value, types) or (types == INT_TYPE and isinstance(value, bool)):
            raise _refuse(where, f"{kind} {key!r} has the wrong type ({type(value).__name__})")
    return kind, position


def read_export(lines: Iterable[str]) -> ExportData:
    """Parse and check an export. Raises ImportRefusedError on anything it cannot trust."""
    data: ExportData | None = None
    last_kind = 0
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            raise _refuse(f"line {number}", "empty line")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise _refuse(f"line {number}", f"not JSON ({exc})") from None
        if data is None:
            data = ExportData(header=_check_header(value))
            continue
        kind, last_kind = _check_row(number, value, last_kind)
        data.rows[kind].append(value)
    if data is None:
        raise _refuse("line 1", "the file is empty")
    for kind in ORDER:
        announced = data.header["counts"].get(kind, 0)
        if data.count(kind) != announced:
            raise _refuse(
                "counts",
                f"the header announces {announced} {kind} "
                f"lines, the file holds {data.count(kind)} (truncated?)",
            )
    _check_consistency(data)
    return data


def _unique(
    rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any], what: str
) -> set[Any]:
    seen: set[Any] = set()
    for row in rows:
        value = key(row)
        if value in seen:
            raise _refuse(what, f"{value!r} appears twice")
        seen.add(value)
    return seen


def _check_scope(row: dict[str, Any], what: str) -> None:
    scope = Scope(row["user_id"], row["agent_id"], row["run_id"])
    if scope.is_empty() or scope.key != row["scope"]:
        raise _refuse(what, f"scope {row['scope']!r} does not match its ids")


def _check_consistency(data: ExportData) -> None:
    """Rows must agree with each other: ids unique, references resolvable, scopes and hashes
    matching their fields, vectors of the announced dimension, jobs' requests well formed."""
    message_ids = _unique(data.rows["message"], lambda r: r["id"], "message id")
    entity_keys = _unique(data.rows["entity"], lambda r: (r["scope"], r["norm"]), "entity")
    _unique(data.rows["memory"], lambda r: r["id"], "memory id")
    _unique(data.rows["history"], lambda r: r["id"], "history id")
    for row in data.rows["message"]:
        _check_scope(row, f"message {row['id']}")
    dimension = data.embedder.dimension
    for row in data.rows["memory"]:
        what = f"memory {row['id']}"
        _check_scope(row, what)
        if row["state"] not in ("active", "superseded"):
            raise _refuse(what, f"unknown state {row['state']!r}")
        if row["hash"] != content_hash(row["text"]):
            raise _refuse(what, "its hash does not match its text")
        for source in row["sources"]:
            if source not in message_ids:
                raise _refuse(what, f"source message {source!r} is not in the file")
        for norm in row["entities"]:
            if (row["scope"], norm) not in entity_keys:
                raise _refuse(what, f"entity {norm!r} is not in the file for its scope")
        vector = row.get("vector")
        if data.header["vectors"] != (vector is not None):
            raise _refuse(what, "vectors must be given for every memory or for none")
        if vector is not None:
            try:
                blob = base64.b64decode(vector, validate=True)
            except (ValueError, TypeError):
                raise _refuse(what, "its vector is not base64") from None
            if len(blob) != 4 * dimension:
                raise _refuse(what, f"its vector does not have {dimension} float32 values")
    for row in data.rows["history"]:
        if row["event"] not in ("ADD", "UPDATE", "DELETE", "SUPERSEDE"):
            raise _refuse(f"history {row['id']}", f"unknown event {row['event']!r}")
    _unique(data.rows["job"], lambda r: r["id"], "job id")
    message_scopes = {r["id"]: r["scope"] for r in data.rows["message"]}
    for row in data.rows["job"]:
        _check_scope(row, f"job {row['id']}")
        check_job(row, message_scopes)
