"""Reading an export: every line checked on its own (its length, its JSON, its fields as the
API checks them), then the file as a whole (counts, ids, references, scopes), before anything
is written and before any model runs. Any problem is one `ImportRefusedError` naming the line."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from ..errors import ValidationError, shown
from ..store.migrations import SCHEMA_VERSION
from ..validation import check_json_shape
from ..values import SCOPE_KEYS, Scope, content_hash
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
from .rows import ROW_CHECKS, check_scope_ids, check_vector

# The longest line read: a memory's text or a message's content (at most 100,000 characters)
# written with every character escaped (6 characters each), twice over for a history row, plus
# metadata. A longer line is refused after reading this much of it, never held whole.
MAX_LINE_CHARS = 4_000_000
MAX_LINE_DEPTH = 40  # JSON nesting of a line: metadata's own limit (32) inside a row
MAX_DIMENSION = 65_536


def bounded_lines(stream: IO[str], max_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of a text stream without their newline, each read with a bound: a line longer
    than `max_chars` is refused when that much of it has been read."""
    number = 0
    while True:
        number += 1
        try:
            text = stream.readline(max_chars + 1)
        except UnicodeDecodeError as exc:
            raise _refuse(f"line {number}", f"not UTF-8 text ({exc.reason})") from None
        if not text:
            return
        if len(text) > max_chars and not (len(text) == max_chars + 1 and text.endswith("\n")):
            raise _refuse(f"line {number}", f"longer than {max_chars} characters")
        yield text.rstrip("\n").rstrip("\r")


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("an object names a key twice")
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_finite, object_pairs_hook=_pairs)


def parse_line(number: int, text: str) -> Any:
    """One line's JSON: strict (no NaN or infinity, no key twice, no integer beyond 64 bits, at
    most MAX_LINE_DEPTH deep); a line nested past Python's recursion limit is refused too."""
    where = f"line {number}"
    if len(text) > MAX_LINE_CHARS:
        raise _refuse(where, f"longer than {MAX_LINE_CHARS} characters")
    if not text.strip():
        raise _refuse(where, "empty line")
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise _refuse(where, "JSON nested too deep") from None
    except ValueError as exc:
        raise _refuse(where, f"not JSON ({str(exc)[:200]})") from None
    try:
        check_json_shape(value, "the line", max_depth=MAX_LINE_DEPTH)
    except ValidationError as exc:
        raise _refuse(where, str(exc)) from None
    return value


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
        and 0 < embedder["dimension"] <= MAX_DIMENSION
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
    if not isinstance(kind, str) or kind not in KINDS:
        raise _refuse(where, f"unknown type {shown(kind)}")
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
    try:
        ROW_CHECKS[kind](row)
    except ValidationError as exc:
        raise _refuse(_where(number, kind, row), str(exc)) from None
    return kind, position


def _where(number: int, kind: str, row: dict[str, Any]) -> str:
    named = row.get("id") if kind != "entity" else row.get("norm")
    return f"line {number} ({kind} {str(named)[:80]!r})"


def read_export(lines: Iterable[str] | IO[str]) -> ExportData:
    """Parse and check an export: the lines of a file (without newlines), or a text stream,
    read with a bound on each line's length. Raises ImportRefusedError on anything it cannot
    trust; nothing else escapes."""
    if hasattr(lines, "readline"):
        lines = bounded_lines(lines)  # type: ignore[arg-type]
    data: ExportData | None = None
    last_kind = 0
    for number, text in enumerate(lines, start=1):
        value = parse_line(number, text)
        if data is None:
            data = ExportData(header=_check_header(value))
            continue
        kind, last_kind = _check_row(number, value, last_kind)
        if data.count(kind) >= data.header["counts"].get(kind, 0):
            announced = data.header["counts"].get(kind, 0)
            raise _refuse(
                f"line {number}", f"the header announces {announced} {kind} lines; one more"
            )
        data.rows[kind].append(value)
        data.lines[kind].append(number)
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


def _unique(data: ExportData, kind: str, key: Callable[[dict[str, Any]], Any]) -> set[Any]:
    seen: set[Any] = set()
    what = "entity" if kind == "entity" else f"{kind} id"
    for row, number in zip(data.rows[kind], data.lines[kind], strict=True):
        value = key(row)
        if value in seen:
            raise _refuse(_where(number, kind, row), f"{what}: {value!r} appears twice")
        seen.add(value)
    return seen


def _check_scope(row: dict[str, Any], where: str) -> None:
    scope = Scope(row["user_id"], row["agent_id"], row["run_id"])
    if scope.is_empty() or scope.key != row["scope"]:
        raise _refuse(where, f"scope {row['scope'][:200]!r} does not match its ids")


def _check_scope_key(key: str, where: str) -> None:
    """An entity's scope: the key of a scope the API accepts."""
    try:
        ids = json.loads(key)
    except ValueError:
        ids = None
    if not isinstance(ids, dict) or not set(ids) <= set(SCOPE_KEYS):
        raise _refuse(where, f"scope {key[:200]!r} is not a scope")
    row = {k: ids.get(k) for k in SCOPE_KEYS}
    try:
        check_scope_ids(row)
    except ValidationError as exc:
        raise _refuse(where, str(exc)) from None
    if Scope(**row).key != key:
        raise _refuse(where, f"scope {key[:200]!r} is not written as offline_mem writes it")


def _rows(data: ExportData, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for row, number in zip(data.rows[kind], data.lines[kind], strict=True):
        yield _where(number, kind, row), row


def _check_consistency(data: ExportData) -> None:
    """Rows must agree with each other: ids unique, references resolvable and within the row's
    own scope, scopes and hashes matching their fields, vectors finite, of unit length and of
    the announced dimension, jobs' requests well formed."""
    message_ids = _unique(data, "message", lambda r: r["id"])
    entity_keys = _unique(data, "entity", lambda r: (r["scope"], r["norm"]))
    memory_ids = _unique(data, "memory", lambda r: r["id"])
    _unique(data, "history", lambda r: r["id"])
    message_scopes = {r["id"]: r["scope"] for r in data.rows["message"]}
    memory_scopes = {r["id"]: r["scope"] for r in data.rows["memory"]}
    for where, row in _rows(data, "message"):
        _check_scope(row, where)
    for where, row in _rows(data, "entity"):
        _check_scope_key(row["scope"], where)
    dimension = data.embedder.dimension
    for where, row in _rows(data, "memory"):
        _check_memory_links(row, where, message_ids, message_scopes, entity_keys, memory_scopes)
        vector = row.get("vector")
        if data.header["vectors"] != (vector is not None):
            raise _refuse(where, "vectors must be given for every memory or for none")
        if vector is not None:
            try:
                check_vector(vector, dimension)
            except ValidationError as exc:
                raise _refuse(where, str(exc)) from None
    for where, row in _rows(data, "history"):
        owner, related = row["memory_id"], row["related_memory_id"]
        linked = owner in memory_ids and related in memory_ids
        if linked and memory_scopes[owner] != memory_scopes[related]:
            raise _refuse(where, f"related_memory_id {related!r} is of another scope")
    _unique(data, "job", lambda r: r["id"])
    for where, row in _rows(data, "job"):
        _check_scope(row, where)
        check_job(row, message_scopes)


def _check_memory_links(
    row: dict[str, Any],
    where: str,
    message_ids: set[str],
    message_scopes: dict[str, str],
    entity_keys: set[tuple[str, str]],
    memory_scopes: dict[str, str],
) -> None:
    """A memory's scope, state, hash, and its sources, entities and successor: in the file and
    of its own scope (a source of another scope would show that scope's message in its
    results)."""
    _check_scope(row, where)
    if row["state"] not in ("active", "superseded"):
        raise _refuse(where, f"unknown state {row['state']!r}")
    if row["hash"] != content_hash(row["text"]):
        raise _refuse(where, "its hash does not match its text")
    for source in row["sources"]:
        if source not in message_ids:
            raise _refuse(where, f"source message {source!r} is not in the file")
        if message_scopes[source] != row["scope"]:
            raise _refuse(where, f"source message {source!r} is of another scope")
    for norm in row["entities"]:
        if (row["scope"], norm) not in entity_keys:
            raise _refuse(where, f"entity {norm[:80]!r} is not in the file for its scope")
    successor = row["superseded_by"]
    if successor is not None:
        if successor not in memory_scopes:
            raise _refuse(where, f"superseded_by {successor!r} is not in the file")
        if memory_scopes[successor] != row["scope"]:
            raise _refuse(where, f"superseded_by {successor!r} is a memory of another scope")
