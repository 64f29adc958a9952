"""The file as SQLite and offline_mem see it: SQLite's own checks, every row readable and every
date a date, each fact's validity as the store writes it, and the schema and embedder pins."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from ...errors import OfflineMemError
from ..migrations import SCHEMA_VERSION
from .report import CheckedDatabase, Checker


def sqlite(c: Checker) -> None:
    rows = [r[0] for r in c.db.query("PRAGMA integrity_check")]
    c.problems("sqlite", [] if rows == ["ok"] else [f"integrity_check: {r}" for r in rows])
    fks = c.db.query("PRAGMA foreign_key_check")
    c.problems("sqlite", [f"foreign_key_check: {r[0]} row {r[1]} -> missing {r[2]}" for r in fks])


ROWS_PER_READ = 2000


DAY_START = "____-__-__T00:00:00.000000+00:00"  # a LIKE pattern: the start of a day, UTC


# Each table's date columns, with the key that names its row in a report (the same columns on
# both stores: messages.seq is the file's rowid)
DATE_COLUMNS = {
    "memories": ("rowid", ("created_at", "updated_at", "observed_at", "expiration_date",
                           "valid_from", "valid_to")),
    "messages": ("seq", ("created_at", "observed_at")),
    "history": ("rowid", ("created_at", "updated_at", "happened_at")),
}  # fmt: skip


def rows(c: Checker) -> None:
    """Every row of every table reads back (each text decodes as UTF-8), and every date of a
    memory or message parses: a changed byte there passes SQLite's structural checks."""
    details = []
    tables = [
        name
        for (name,) in c.db.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"  # a report in the same order whatever order the tables were made
        )
    ]
    unreadable = set()
    for table in tables:
        try:
            _read_all(c.db, table)
        except OfflineMemError as exc:
            details.append(f"table {table}: a row cannot be read ({exc})")
            unreadable.add(table)
    details += date_problems(c, skip=unreadable)
    c.problems("rows", details)


def date_problems(c: Checker, *, skip: Collection[str] = ()) -> list[str]:
    """Every date of a memory, message or history row (tables in `skip` aside) parses."""
    details = []
    for table, (key, columns) in sorted(DATE_COLUMNS.items()):
        if table in skip:
            continue
        for column in columns:
            details += [
                f"{table} row {row}: {column} {value!r} is not a date"
                for row, value in c.db.query(
                    f"SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL"
                )
                if not _is_date(value)
            ]
    return details


# A fact's validity as writes.py records it: valid_from is its message's date (else when it was
# stored) or the start of an earlier day its text names; valid_to is set exactly when it is
# superseded, to its successor's date (never before valid_from). `{greatest}` is the dialect's
# larger-of-two function: SQLite's max, PostgreSQL's GREATEST.
_VALIDITY = f"""
SELECT m.id, m.state, m.valid_from, m.valid_to, COALESCE(m.observed_at, m.created_at)
FROM memories m WHERE NOT (
    (m.valid_from = COALESCE(m.observed_at, m.created_at)
     OR (m.valid_from < COALESCE(m.observed_at, m.created_at) AND m.valid_from LIKE '{DAY_START}'))
    AND (m.state = 'active') = (m.valid_to IS NULL)
    AND (m.valid_to IS NULL OR m.valid_to >= m.valid_from)
)"""


_SUCCESSOR_DATE = """
SELECT m.id, m.valid_to, {greatest}(m.valid_from, COALESCE(n.observed_at, n.created_at))
FROM memories m JOIN memories n ON n.id = m.superseded_by
WHERE m.valid_to != {greatest}(m.valid_from, COALESCE(n.observed_at, n.created_at))"""


def validity(c: Checker) -> None:
    c.problems("validity", validity_problems(c, greatest="max"))


def validity_problems(c: Checker, *, greatest: str) -> list[str]:
    details = [
        f"memory {mid} ({state}): valid_from {start!r}, valid_to {end!r} do not fit its "
        f"date {said!r}"
        for mid, state, start, end, said in c.db.query(_VALIDITY)
    ]
    details += [
        f"memory {mid}: valid_to {end!r} is not its successor's date {expected!r}"
        for mid, end, expected in c.db.query(_SUCCESSOR_DATE.format(greatest=greatest))
    ]
    return details


def _read_all(db: CheckedDatabase, table: str) -> None:
    """Read a table's rows a chunk at a time (by rowid where it has one), so a large file is
    checked in bounded memory."""
    has_rowid = not db.query_one(
        "SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_master WHERE name = ?", (table,)
    )[0]
    if not has_rowid:
        db.query(f'SELECT * FROM "{table}"')
        return
    last = None
    while True:
        rows = db.query(
            f'SELECT rowid, * FROM "{table}" WHERE ? IS NULL OR rowid > ? ORDER BY rowid LIMIT ?',
            (last, last, ROWS_PER_READ),
        )
        if len(rows) < ROWS_PER_READ:
            return
        last = rows[-1][0]


def _is_date(value: Any) -> bool:
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return False
    return True


def models(c: Checker) -> None:
    c.problems("models", pin_problems(c, SCHEMA_VERSION))


def pin_problems(c: Checker, schema_version: int) -> list[str]:
    """The schema version and the embedder pinned in meta against this offline_mem's
    `schema_version` and the configured embedder; every memory written by the pinned one."""
    meta = dict(c.db.query("SELECT key, value FROM meta"))
    details = []
    if meta.get("schema_version") != str(schema_version):
        details.append(
            f"schema version {meta.get('schema_version')!r}, this offline_mem "
            f"writes {schema_version}"
        )
    pinned = meta.get("embedder_sha256")
    embedder = c.embedder
    if pinned is None:
        details.append("no embedder is pinned in meta")
    elif embedder is not None and (pinned, meta.get("embedder_dimension")) != (
        embedder.sha256,
        str(embedder.dimension),
    ):
        details.append(
            f"meta pins embedder {meta.get('embedder_name')!r} (sha256 {pinned}, "
            f"{meta.get('embedder_dimension')} dims); the configured one is {embedder.name!r} "
            f"(sha256 {embedder.sha256}, {embedder.dimension} dims)"
        )
    for sha, count in c.db.query(
        "SELECT embedder_sha256, count(*) FROM memories GROUP BY embedder_sha256 ORDER BY 1"
    ):
        if sha != pinned:
            details.append(
                f"{count} memor{'y' if count == 1 else 'ies'} written by another "
                f"embedder (sha256 {sha}) than the pinned one"
            )
    return details
