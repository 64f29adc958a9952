"""Mem0's filters as a PostgreSQL condition over the `memories` table (alias m). Pure.

`compile_filters` (store/filters.py) has validated the filters already and kept them as given
(`CompiledFilter.source`); this compiles the same dict to PostgreSQL, with the SQLite store's
semantics, which come from `json_extract` and SQLite's comparison of mixed types:

- a metadata value is NULL (missing, or JSON null), a number (JSON numbers; true and false are
  1 and 0) or text (strings; arrays and objects as their JSON text); a filter's booleans are 1
  and 0 too;
- a number and a text are never equal, and every text sorts after every number (so "abc" > 5);
  texts compare byte by byte (COLLATE "C", SQLite's BINARY);
- a memory column is TEXT: the filter's value is compared as text (SQLite's column affinity);
- NULL matches nothing, except `ne` (IS NOT) and `nin` (a missing value is in no list);
- contains/icontains search the value's text; icontains folds ASCII letters only, as SQLite's
  lower() does.

Known differences, on values the tests do not use: an array or object's JSON text is jsonb's
(spaces after separators, keys reordered), and a real number's text is PostgreSQL's
(`1e+20` reads 100000000000000000000; SQLite writes 1.0e+20).
"""

from __future__ import annotations

from typing import Any

from ...errors import ValidationError
from ..filters import _METADATA_KEY, COLUMN_KEYS, LOGICAL, CompiledFilter
from .jobs import scope_match

_COMPARE = {"eq": "=", "ne": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_C = 'COLLATE "C"'


def pg_condition(where: CompiledFilter) -> tuple[str, list[Any]]:
    """The filter as a condition over alias m. The scope's plain equalities go first: the
    filter's own form (coalesce, COLLATE "C") hides them from the planner's scope indexes."""
    scope_sql, params = scope_match(where.scope, "m")
    return f"{scope_sql} AND {_dict(where.source, params)}", params


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
    """Each operator's expression is TRUE or FALSE, never NULL (as SQLite's coalesce makes it),
    so NOT behaves as in the SQLite store."""
    if value == "*":
        return _column_present(key) if key in COLUMN_KEYS else _meta_present(key, params)
    ops = value if isinstance(value, dict) else {"eq": value}
    build = _column_op if key in COLUMN_KEYS else _meta_op
    return "(" + " AND ".join(build(key, op, operand, params) for op, operand in ops.items()) + ")"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float))  # bool included: SQLite binds it as 1 or 0


# -- memory columns (TEXT) ----------------------------------------------------------------------


def _column_present(key: str) -> str:
    return f"(m.{key} IS NOT NULL)"


def _text(value: Any) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)


def _column_op(key: str, op: str, operand: Any, params: list[Any]) -> str:
    col = f"m.{key}"
    if op in ("in", "nin"):
        values = [_text(v) for v in operand if v is not None]
        params.append(values)
        found = f"coalesce({col} = ANY(%s::text[]), FALSE)"
        return found if op == "in" else f"(NOT {found})"
    if operand is None:
        return f"({col} IS NULL)" if op == "eq" else f"({col} IS NOT NULL)"
    if op in ("contains", "icontains"):
        params.append(operand)
        if op == "contains":
            return f"coalesce(strpos({col}, %s::text) > 0, FALSE)"
        return f"coalesce(strpos(lower({col} {_C}), lower(%s::text {_C})) > 0, FALSE)"
    params.append(_text(operand))
    if op == "ne":
        return f"({col} IS DISTINCT FROM %s::text)"
    return f"coalesce({col} {_COMPARE[op]} %s::text {_C}, FALSE)"


# -- metadata values ----------------------------------------------------------------------------


def _json(key: str, params: list[Any]) -> str:
    """The value as jsonb. The key is written into the text (an expression may use it several
    times): compile_filters let through only keys of letters, digits, '_' and '-'."""
    if not _METADATA_KEY.match(key):
        raise ValidationError(f"filter key {key!r} is not a plain metadata key")
    return f"(m.metadata::jsonb -> '{key}')"


def _meta_present(key: str, params: list[Any]) -> str:
    return f"coalesce(jsonb_typeof({_json(key, params)}) <> 'null', FALSE)"


def _meta_op(key: str, op: str, operand: Any, params: list[Any]) -> str:
    if op in ("in", "nin"):
        values = [v for v in operand if v is not None]
        found = " OR ".join(_meta_equal(key, v, params) for v in values) or "FALSE"
        return f"({found})" if op == "in" else f"(NOT ({found}))"
    if op in ("contains", "icontains"):
        text = _meta_text(_json(key, params))
        params.append(operand)
        if op == "contains":
            return f"coalesce(strpos({text}, %s::text) > 0, FALSE)"
        return f"coalesce(strpos(lower({text} {_C}), lower(%s::text {_C})) > 0, FALSE)"
    if operand is None:
        missing = f"coalesce(jsonb_typeof({_json(key, params)}) = 'null', TRUE)"
        return missing if op == "eq" else f"(NOT {missing})"
    if op == "eq":
        return _meta_equal(key, operand, params)
    if op == "ne":
        return f"(NOT {_meta_equal(key, operand, params)})"
    return _meta_order(key, _COMPARE[op], operand, params)


def _meta_equal(key: str, operand: Any, params: list[Any]) -> str:
    j = _json(key, params)
    if _number(operand):
        params.append(_numeric(operand))
        return f"coalesce({_meta_number(j)} = %s, FALSE)"
    params.append(operand)
    return f"coalesce({_meta_string(j)} = %s::text, FALSE)"


def _meta_order(key: str, sign: str, operand: Any, params: list[Any]) -> str:
    """gt/gte/lt/lte: numbers by value, texts by bytes, every text after every number."""
    j = _json(key, params)
    above = sign.startswith(">")
    if _number(operand):
        params.append(_numeric(operand))
        texts = f" OR jsonb_typeof({j}) IN ('string', 'array', 'object')" if above else ""
        return f"coalesce({_meta_number(j)} {sign} %s{texts}, FALSE)"
    params.append(operand)
    numbers = "" if above else f" OR jsonb_typeof({j}) IN ('number', 'boolean')"
    return f"coalesce({_meta_string(j)} {sign} %s::text {_C}{numbers}, FALSE)"


def _numeric(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _meta_number(j: str) -> str:
    """The value as a number, NULL when it is not one (true and false are 1 and 0)."""
    return (
        f"(CASE jsonb_typeof({j}) WHEN 'number' THEN ({j})::numeric "
        f"WHEN 'boolean' THEN ({j})::boolean::int::numeric END)"
    )


def _meta_string(j: str) -> str:
    """The value as text when SQLite's is text (strings, arrays, objects); NULL otherwise."""
    return (
        f"(CASE jsonb_typeof({j}) WHEN 'string' THEN ({j} #>> '{{}}') "
        f"WHEN 'array' THEN ({j})::text WHEN 'object' THEN ({j})::text END)"
    )


def _meta_text(j: str) -> str:
    """The value as SQLite's CAST(... AS TEXT) writes it (true and false: 1 and 0)."""
    return (
        f"(CASE jsonb_typeof({j}) WHEN 'string' THEN ({j} #>> '{{}}') "
        f"WHEN 'boolean' THEN ({j})::boolean::int::text "
        f"WHEN 'null' THEN NULL ELSE ({j})::text END)"
    )
