"""The file as SQLite and offline_mem see it: SQLite's own checks, every row readable and every
date a date, each fact's validity as the store writes it, and the schema and embedder pins."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...errors import OfflineMemError
from ...values import EmbedderIdentity
from ..db import Database
from ..migrations import SCHEMA_VERSION
from .report import Checker


def sqlite(c: Checker) -> None:
    rows = [r[0] for r in c.db.query("PRAGMA integrity_check")]
    c.problems("sqlite", [] if rows == ["ok"] else [f"integrity_check: {r}" for r in rows])
    fks = c.db.query("PRAGMA foreign_key_check")
    c.problems("sqlite", [f"foreign_key_check: {r[0]} row {r[1]} -> missing {r[2]}" for r in fks])


ROWS_PER_READ = 2000


DAY_START = "____-__-__T00:00:00.000000+00:00"  # a LIKE pattern: the start of a day, UTC


DATE_COLUMNS = {
    "memories": (
        "created_at",
        "updated_at",
        "observed_at",
        "expiration_date",
        "valid_from",
        "valid_to",
    ),
    "messages": ("created_at", "observed_at"),
    "history": ("created_at", "updated_at", "happened_at"),
}


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
    for table in tables:
        try:
            _read_all(c.db, table)
        except OfflineMemError as exc:
            details.append(f"table {table}: a row cannot be read ({exc})")
            continue
        for column in DATE_COLUMNS.get(table, ()):
            details += [
                f"{table} row {rowid}: {column} {value!r} is not a date"
                for rowid, value in c.db.query(
                    f"SELECT rowid, {column} FROM {table} WHERE {column} IS NOT NULL"
                )
                if not _is_date(value)
            ]
    c.problems("rows", details)


# A fact's validity as writes.py records it: valid_from is its message's date (else when it was
# stored) or the start of an earlier day its text names; valid_to is set exactly when it is
# superseded, to its successor's date (never before valid_from).
_VALIDITY = f"""
SELECT m.id, m.state, m.valid_from, m.valid_to, COALESCE(m.observed_at, m.created_at),
       (SELECT max(m.valid_from, COALESCE(n.observed_at, n.created_at))
          FROM memories n WHERE n.id = m.superseded_by)
FROM memories m WHERE NOT (
    (m.valid_from = COALESCE(m.observed_at, m.created_at)
     OR (m.valid_from < COALESCE(m.observed_at, m.created_at) AND m.valid_from LIKE '{DAY_START}'))
    AND (m.state = 'active') = (m.valid_to IS NULL)
    AND (m.valid_to IS NULL OR m.valid_to >= m.valid_from)
)"""


_SUCCESSOR_DATE = """
SELECT m.id, m.valid_to, max(m.valid_from, COALESCE(n.observed_at, n.created_at))
FROM memories m JOIN memories n ON n.id = m.superseded_by
WHERE m.valid_to != max(m.valid_from, COALESCE(n.observed_at, n.created_at))"""


def validity(c: Checker) -> None:
    details = [
        f"memory {mid} ({state}): valid_from {start!r}, valid_to {end!r} do not fit its "
        f"date {said!r}"
        for mid, state, start, end, said, _ in c.db.query(_VALIDITY)
    ]
    details += [
        f"memory {mid}: valid_to {end!r} is not its successor's date {expected!r}"
        for mid, end, expected in c.db.query(_SUCCESSOR_DATE)
    ]
    c.problems("validity", details)


def _read_all(db: Database, table: str) -> None:
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


def models(c: Checker, embedder: EmbedderIdentity | None) -> None:
    meta = dict(c.db.query("SELECT key, value FROM meta"))
    details = []
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        details.append(
            f"schema version {meta.get('schema_version')!r}, this offline_mem "
            f"writes {SCHEMA_VERSION}"
        )
    pinned = meta.get("embedder_sha256")
    if pinned is None:
        details.append("no embedder is pinned in meta")
    elif embedder is not None and (pinned, meta.get("embedder_dimension")) != (
        embedder.sha256,
        str(embedder.dimension),
    ):
        details.append(
            f"the file pins embedder {meta.get('embedder_name')!r} (sha256 {pinned}, "
            f"{meta.get('embedder_dimension')} dims); the configured one is {embedder.name!r} "
            f"(sha256 {embedder.sha256}, {embedder.dimension} dims)"
        )
    for sha, count in c.db.query(
        "SELECT embedder_sha256, count(*) FROM memories WHERE embedder_sha256 IS NOT ? "
        "GROUP BY embedder_sha256",
        (pinned,),
    ):
        details.append(
            f"{count} memor{'y' if count == 1 else 'ies'} written by another "
            f"embedder (sha256 {sha}) than the pinned one"
        )
    c.problems("models", details)
