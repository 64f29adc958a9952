"""Mem0's search filters compiled to one SQL condition over the `memories` table. Pure.

Forms: {"key": value} (equality), {"key": "*"} (key present), {"key": {op: value}} with
eq, ne, gt, gte, lt, lte, in, nin, contains, icontains, and {"AND"|"OR"|"NOT": [filters]}.
Keys naming a memory column (user_id, role, created_at, ...) filter that column; any other key
filters the memory's metadata. Values are always bound parameters, never spliced into SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError, shown
from ..validation import check_encodable, check_int, make_scope
from ..values import SCOPE_KEYS, Scope

COLUMN_KEYS = (
    "id", "user_id", "agent_id", "run_id", "actor_id", "role", "memory_type", "hash",
    "created_at", "updated_at", "expiration_date", "attributed_to", "state",
)  # fmt: skip
OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "icontains")
LOGICAL = ("AND", "OR", "NOT")
_METADATA_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,128}$")
_COMPARE = {"eq": "=", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
MAX_DEPTH = 16
MAX_IN_VALUES = 1000

Scalar = str | int | float | bool | None


@dataclass
class CompiledFilter:
    sql: str = "1"
    params: list[Any] = field(default_factory=list)
    scope: Scope = field(default_factory=Scope)
    # the validated filters as given, for a store of another SQL dialect to compile its own way
    source: dict[str, Any] = field(default_factory=dict)


def compile_filters(filters: object, *, alias: str = "m") -> CompiledFilter:
    """Validate and compile; at least one of user_id/agent_id/run_id must be an exact top-level
    value, so every read is confined to a scope the caller names."""
    if not isinstance(filters, dict):
        raise ValidationError(
            "filters must be a dict naming a scope, e.g. filters={'user_id': 'alice'}"
        )
    scope = make_scope(*(_exact_scope_value(filters, key) for key in SCOPE_KEYS), required=True)
    params: list[Any] = []
    sql = _compile_dict(filters, alias, params, depth=0)
    # The scope's plain equalities go first though the filter holds them: inside its coalesce()
    # SQLite's planner cannot use the scope's index and reads every memory of the file (a search
    # in a 10-memory scope cost 5 ms more at 20,000 memories, ~25 ms at 100,000).
    scope_sql, scope_params = scope_match(scope, alias)
    return CompiledFilter(
        sql=f"{scope_sql} AND {sql}", params=[*scope_params, *params], scope=scope, source=filters
    )


def scope_match(
    scope: Scope, alias: str, *, mark: str = "?", always: str = "1"
) -> tuple[str, list[str]]:
    """`alias.key = ?` for each id the scope names, joined by AND (`always` for none); `mark` is
    the driver's placeholder (PostgreSQL's store passes "%s" and "TRUE")."""
    prefix = f"{alias}." if alias else ""
    parts, params = [], []
    for key in SCOPE_KEYS:
        value = getattr(scope, key)
        if value is not None:
            parts.append(f"{prefix}{key} = {mark}")
            params.append(value)
    return " AND ".join(parts) or always, params


def _exact_scope_value(filters: dict[str, Any], key: str) -> Any:
    value = filters.get(key)
    if value is None or value == "*" or isinstance(value, dict):
        return None
    return value


def _compile_dict(filters: dict[str, Any], alias: str, params: list[Any], depth: int) -> str:
    if depth > MAX_DEPTH:
        raise ValidationError(f"filters are nested deeper than {MAX_DEPTH} levels")
    if not filters:
        return "1"
    parts = []
    for key, value in filters.items():
        if not isinstance(key, str):
            raise ValidationError(f"filter keys must be strings, got {shown(key)}")
        if key in LOGICAL:
            parts.append(_compile_logical(key, value, alias, params, depth))
        else:
            parts.append(_compile_field(key, value, alias, params))
    return "(" + " AND ".join(parts) + ")"


def _compile_logical(op: str, value: Any, alias: str, params: list[Any], depth: int) -> str:
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        raise ValidationError(f"{op} takes a non-empty list of filter dicts, got {shown(value)}")
    parts = [_compile_dict(item, alias, params, depth + 1) for item in value]
    if op == "OR":
        return "(" + " OR ".join(parts) + ")"
    joined = "(" + " AND ".join(parts) + ")"
    return f"(NOT {joined})" if op == "NOT" else joined


def _target(key: str, alias: str, params: list[Any]) -> str:
    if key in COLUMN_KEYS:
        return f"{alias}.{key}"
    if not _METADATA_KEY.match(key):
        raise ValidationError(
            f"filter key {shown(key)} is not a memory field and not a plain metadata key "
            "(letters, digits, '_' and '-' only)"
        )
    params.append(f'$."{key}"')
    return f"json_extract({alias}.metadata, ?)"


def _check_scalar(value: Any, key: str, op: str) -> Scalar:
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise ValidationError(
            f"filter {shown(key)} {op} needs a string, number or boolean, got {shown(value)}"
        )
    if isinstance(value, str) and "\x00" in value:
        raise ValidationError(f"filter {shown(key)} value contains a NUL character")
    if isinstance(value, str):
        check_encodable(value, f"filter {shown(key)} value")
    if isinstance(value, float) and value != value:
        raise ValidationError(f"filter {shown(key)} value must not be NaN")
    if isinstance(value, int) and not isinstance(value, bool):
        check_int(value, f"filter {shown(key)} value")
    return value


def _bind(value: Scalar) -> Any:
    return int(value) if isinstance(value, bool) else value


def _compile_field(key: str, value: Any, alias: str, params: list[Any]) -> str:
    if value == "*":
        target = _target(key, alias, params)
        return f"({target} IS NOT NULL)"
    if not isinstance(value, dict):
        value = {"eq": value}
    if not value:
        raise ValidationError(f"filter {shown(key)} has an empty operator dict")
    parts = []
    for op, operand in value.items():
        if op not in OPERATORS:
            raise ValidationError(
                f"unknown filter operator {shown(op)} for {shown(key)}; use one of {OPERATORS}"
            )
        parts.append(_compile_operator(key, op, operand, alias, params))
    # coalesce: a missing key compares as false, not NULL, so NOT behaves as users expect
    return "coalesce(" + " AND ".join(parts) + ", 0)"


def _compile_operator(key: str, op: str, operand: Any, alias: str, params: list[Any]) -> str:
    if op in ("in", "nin"):
        if not isinstance(operand, list) or not operand or len(operand) > MAX_IN_VALUES:
            raise ValidationError(
                f"filter {shown(key)} {op} takes a non-empty list of at most {MAX_IN_VALUES} values"
            )
        values = [_bind(_check_scalar(v, key, op)) for v in operand]
        target = _target(key, alias, params)
        params.extend(values)
        marks = ", ".join("?" for _ in values)
        if op == "in":
            return f"({target} IN ({marks}))"
        # A missing value is "not in" any list, so NULL counts as a match for nin.
        return f"(coalesce({target} NOT IN ({marks}), 1))"
    scalar = _check_scalar(operand, key, op)
    if op in ("contains", "icontains"):
        if not isinstance(scalar, str):
            raise ValidationError(f"filter {shown(key)} {op} needs a string")
        target = _target(key, alias, params)
        params.append(scalar)
        if op == "contains":
            return f"(instr(CAST({target} AS TEXT), ?) > 0)"
        return f"(instr(lower(CAST({target} AS TEXT)), lower(?)) > 0)"
    target = _target(key, alias, params)
    if scalar is None:
        if op == "eq":
            return f"({target} IS NULL)"
        if op == "ne":
            return f"({target} IS NOT NULL)"
        raise ValidationError(f"filter {shown(key)} {op} cannot compare with None")
    params.append(_bind(scalar))
    if op == "ne":
        return f"({target} IS NOT ?)"
    return f"({target} {_COMPARE[op]} ?)"
