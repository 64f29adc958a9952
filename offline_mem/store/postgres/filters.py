"""Mem0's filters as a PostgreSQL condition over the `memories` table (alias m). Pure.

`compile_filters` (store/filters.py) has validated the filters already and kept them as given
(`CompiledFilter.source`); this compiles the same dict to PostgreSQL's dialect. Implemented so
far: AND/OR/NOT, "*" (present), and eq/ne/in/nin on memory columns and on metadata values that
are strings or numbers. Other operators (gt/gte/lt/lte on metadata, contains, icontains) and
boolean metadata values raise NotImplementedInStoreError until their semantics are proved equal
to SQLite's json_extract comparisons (docs/design/postgresql.md).
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import NotImplementedInStoreError
from ..filters import COLUMN_KEYS, LOGICAL, CompiledFilter

_COMPARE = {"eq": "=", "ne": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def pg_condition(where: CompiledFilter) -> tuple[str, list[Any]]:
    params: list[Any] = []
    return _dict(where.source, params), params


def _dict(filters: dict[str, Any], params: list[Any]) -> str:
    if not filters:
        return "TRUE"
    parts = []
    for key, value in filters.items():
        if key in LOGICAL:
            inner = [_dict(item, params) for item in value]
            joined = "(" + (" OR " if key == "OR" else " AND ").join(inner) + ")"
            parts.append(f"(NOT {joined})" if key == "NOT" else joined)
        else:
            parts.append(_field(key, value, params))
    return "(" + " AND ".join(parts) + ")"


def _field(key: str, value: Any, params: list[Any]) -> str:
    column = key in COLUMN_KEYS
    target = f"m.{key}" if column else "(m.metadata::jsonb -> %s)"
    if value == "*":
        if not column:
            params.append(key)
        return f"({target} IS NOT NULL)"
    ops = value if isinstance(value, dict) else {"eq": value}
    parts = [_operator(key, column, target, op, operand, params) for op, operand in ops.items()]
    # a missing value compares as false, not NULL, so NOT behaves as in the SQLite store
    return "coalesce(" + " AND ".join(parts) + ", FALSE)"


def _operator(key: str, column: bool, target: str, op: str, operand: Any, params: list[Any]) -> str:
    values = operand if op in ("in", "nin") else [operand]
    if op in ("contains", "icontains") or (not column and op not in ("eq", "ne", "in", "nin")):
        raise NotImplementedInStoreError(
            f"filter operator {op!r} on {key!r} is not implemented yet for PostgreSQL"
        )
    if not column and any(isinstance(v, bool) for v in values):
        raise NotImplementedInStoreError(
            f"boolean metadata filters ({key!r}) are not implemented yet for PostgreSQL"
        )
    if operand is None:
        if not column:
            params.append(key)
        return f"({target} IS NULL)" if op == "eq" else f"({target} IS NOT NULL)"
    # a TEXT column compares with the value's text, as SQLite's column affinity does
    bound: list[Any] = [_text(v) for v in values] if column else [json.dumps(v) for v in values]
    cast = "" if column else "::jsonb"
    if not column:
        params.append(key)
    if op in ("in", "nin"):
        params.extend(bound)
        marks = ", ".join(f"%s{cast}" for _ in bound)
        if op == "in":
            return f"({target} IN ({marks}))"
        return f"(coalesce({target} NOT IN ({marks}), TRUE))"
    params.append(bound[0])
    if op == "ne":
        return f"({target} IS DISTINCT FROM %s{cast})"
    return f"({target} {_COMPARE[op]} %s{cast})"


def _text(value: Any) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)
