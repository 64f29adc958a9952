"""`verify`: is a memory file sound? Read-only; every check reports what it found, by name.

Checks: SQLite's own integrity and foreign-key checks; every memory row (active or superseded) has
exactly one vector row and one keyword document in its user's partition; no vector, keyword,
entity-link or provenance row points at a missing memory, message or entity; the keyword
statistics (document lengths, document frequencies, partition totals) agree with the postings;
every vector is unit-length; every indexed message has a vector (its own, or linked to the one
of the raw memory made from it) and a keyword document, and the messages' keyword index is as
sound as the memories' (each document lists its postings' terms); the schema version and the
embedder pinned in `meta` match this offline_mem and the configured embedder, and every memory
was written by the pinned embedder; every stored vector is finite and of unit length; a
memory's newest history row holds its text; no provenance, entity link or supersession joins
rows of two scopes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import OfflineMemError
from ..values import EmbedderIdentity, Scope, content_hash
from .db import Database
from .keyword_index import MEMORY_KEYWORDS, MESSAGE_KEYWORDS, KeywordTables
from .messages import is_indexed_message
from .migrations import SCHEMA_VERSION

MAX_LISTED = 20  # problems listed per check; the rest are counted


@dataclass(frozen=True)
class Problem:
    check: str
    detail: str


@dataclass
class VerifyReport:
    path: str
    checks: list[str] = field(default_factory=list)  # the checks that ran, in order
    problems: list[Problem] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # check -> why it could not run

    @property
    def ok(self) -> bool:
        return not self.problems

    def problems_of(self, check: str) -> list[Problem]:
        return [p for p in self.problems if p.check == check]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "checks": {name: [p.detail for p in self.problems_of(name)] for name in self.checks},
            "skipped": dict(self.skipped),
        }


class _Checker:
    def __init__(self, db: Database, report: VerifyReport) -> None:
        self.db = db
        self.report = report

    def problems(self, check: str, details: list[str]) -> None:
        listed = details[:MAX_LISTED]
        self.report.problems += [Problem(check, d) for d in listed]
        if len(details) > MAX_LISTED:
            more = len(details) - MAX_LISTED
            self.report.problems.append(Problem(check, f"... and {more} more"))


def _sqlite(c: _Checker) -> None:
    rows = [r[0] for r in c.db.query("PRAGMA integrity_check")]
    c.problems("sqlite", [] if rows == ["ok"] else [f"integrity_check: {r}" for r in rows])
    fks = c.db.query("PRAGMA foreign_key_check")
    c.problems("sqlite", [f"foreign_key_check: {r[0]} row {r[1]} -> missing {r[2]}" for r in fks])


# How far from 1 a stored vector's length may be. The embedders normalise in float32, which
# leaves it within ~1e-7; a flipped bit in one of its values moves it further (1e-3 let a value
# changed by 0.03 pass as sound). A flipped sign bit keeps the length and is not seen.
UNIT_TOLERANCE = 1e-5

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


def _rows(c: _Checker) -> None:
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


def _validity(c: _Checker) -> None:
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


def _memories(c: _Checker) -> dict[int, tuple[str, str]]:
    """rowid -> (id, partition) of every memory row."""
    return {
        rowid: (mid, user or "")
        for rowid, mid, user in c.db.query("SELECT rowid, id, user_id FROM memories")
    }


def _vectors(c: _Checker) -> None:
    memories = _memories(c)
    vectors = {
        int(rowid): blob
        for rowid, blob in c.db.query("SELECT rowid, embedding FROM memory_vectors")
    }
    details = [
        f"memory {mid} has no vector row (memory_vectors)"
        for rowid, (mid, _) in memories.items()
        if rowid not in vectors
    ]
    details += [
        f"vector row {rowid} belongs to no memory (orphan in memory_vectors)"
        for rowid in vectors
        if rowid not in memories
    ]
    for rowid, blob in vectors.items():
        if rowid not in memories:
            continue
        mid, _ = memories[rowid]
        norm = float(np.linalg.norm(np.frombuffer(bytes(blob), dtype=np.float32)))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            details.append(f"memory {mid}'s vector has length {norm:.4f}, not 1")
    c.problems("vectors", details)


def _message_vectors(c: _Checker) -> None:
    """Each indexed message has one unit vector in its user's partition (once the index is
    complete), and no vector belongs to a missing or system message."""
    state = c.db.query_one("SELECT value FROM meta WHERE key = 'message_vectors'")
    complete = state is None or state[0] == "complete"
    messages = {
        int(seq): (mid, user or "", is_indexed_message(role, content))
        for seq, mid, user, role, content in c.db.query(
            "SELECT seq, id, user_id, role, content FROM messages"
        )
    }
    details = []
    seen = set()
    for seq, blob in c.db.query(f"SELECT rowid, embedding FROM {_message_vector_values(c)}"):
        seq = int(seq)
        if seq in seen:
            details.append(f"message vector row {seq} is both its own and linked to a memory's")
            continue
        seen.add(seq)
        if seq not in messages:
            details.append(f"message vector row {seq} belongs to no message (orphan)")
            continue
        mid, _, indexed = messages[seq]
        if not indexed:
            details.append(f"message {mid} is a system or empty message but has a vector")
        norm = float(np.linalg.norm(np.frombuffer(bytes(blob), dtype=np.float32)))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            details.append(f"message {mid}'s vector has length {norm:.4f}, not 1")
    if complete:
        details += [
            f"message {mid} has no vector row (message_vectors)"
            for seq, (mid, _, indexed) in messages.items()
            if indexed and seq not in seen
        ]
    details += _unsourced_links(c)
    c.problems("message vectors", details)


def _message_vector_values(c: _Checker) -> str:
    """Every message's vector, own or linked to its raw memory's (migration 012), or the own
    ones alone in a file from before it."""
    found = c.db.query_one(
        "SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = 'message_vector_values'"
    )
    return "message_vectors" if found is None else "message_vector_values"


def _unsourced_links(c: _Checker) -> list[str]:
    """A message shares the vector of a memory made from it (provenance), no other."""
    if _message_vector_values(c) == "message_vectors":
        return []
    return [
        f"message vector row {seq} is linked to memory row {rowid}, not made from it"
        for seq, rowid in c.db.query(
            "SELECT l.message_seq, l.memory_rowid FROM message_vector_links l WHERE NOT EXISTS "
            "(SELECT 1 FROM provenance p WHERE p.message_seq = l.message_seq "
            "AND p.memory_rowid = l.memory_rowid)"
        )
    ]


def _keyword_rows(c: _Checker) -> None:
    memories = _memories(c)
    c.problems("keyword rows", _index_rows(c, MEMORY_KEYWORDS, "memory", memories, True))


def _message_keyword_rows(c: _Checker) -> None:
    """As the memories' (each indexed message has one keyword row once the index is complete)."""
    state = c.db.query_one("SELECT value FROM meta WHERE key = 'message_vectors'")
    complete = state is None or state[0] == "complete"
    messages = {
        int(seq): (mid, user or "")
        for seq, mid, user, role, content in c.db.query(
            "SELECT seq, id, user_id, role, content FROM messages"
        )
        if is_indexed_message(role, content)
    }
    details = _index_rows(c, MESSAGE_KEYWORDS, "message", messages, complete)
    c.problems("message keyword rows", details)


def _index_rows(
    c: _Checker,
    t: KeywordTables,
    kind: str,
    owners: dict[int, tuple[str, str]],
    required: bool,
) -> list[str]:
    """Keyword rows of index `t` against its indexed rows (key -> (id, partition)): one doc row
    each (when `required`), none for a missing row, in the row's partition; no orphan postings."""
    docs = dict(c.db.query(f"SELECT {t.key}, partition FROM {t.docs}"))
    details = []
    if required:
        details += [
            f"{kind} {mid} has no keyword row ({t.docs})"
            for key, (mid, _) in owners.items()
            if key not in docs
        ]
    details += [f"{t.docs} row for {kind} {r} belongs to no {kind} (orphan)" for r in docs
                if r not in owners]  # fmt: skip
    details += [
        f"{kind} {owners[r][0]}'s keyword row is in partition {p!r}, not {owners[r][1]!r}"
        for r, p in docs.items()
        if r in owners and p != owners[r][1]
    ]
    for key, count in c.db.query(
        f"SELECT {t.key}, count(*) FROM {t.postings} p WHERE NOT EXISTS "
        f"(SELECT 1 FROM {t.docs} d WHERE d.{t.key} = p.{t.key} "
        f"AND d.partition = p.partition) GROUP BY {t.key}"
    ):
        details.append(
            f"{count} {t.postings} row(s) of {kind} {key} have no {t.docs} "
            "row in their partition (orphans)"
        )
    return details


def _keyword_stats(c: _Checker) -> None:
    c.problems("keyword statistics", _index_stats(c, MEMORY_KEYWORDS))


def _message_keyword_stats(c: _Checker) -> None:
    c.problems("message keyword statistics", _index_stats(c, MESSAGE_KEYWORDS))


def _listed_terms(c: _Checker, t: KeywordTables) -> list[str]:
    """Each doc lists the terms of its postings (a delete finds them by that list)."""
    held: dict[int, set[str]] = {}
    for key, term in c.db.query(f"SELECT {t.key}, term FROM {t.postings}"):
        held.setdefault(int(key), set()).add(term)
    details = []
    for key, listed in c.db.query(f"SELECT {t.key}, terms FROM {t.docs}"):
        try:
            terms = json.loads(listed)
        except (TypeError, ValueError):
            terms = None
        if not isinstance(terms, list) or set(terms) != held.get(int(key), set()):
            details.append(f"{t.docs} row {key} lists other terms than its postings hold")
    return details


def _index_stats(c: _Checker, t: KeywordTables) -> list[str]:
    """Lengths, document frequencies and partition totals of index `t` agree with its rows."""
    details = []
    for key, length, total in c.db.query(
        f"SELECT d.{t.key}, d.length, coalesce(sum(p.tf), 0) FROM {t.docs} d "
        f"LEFT JOIN {t.postings} p ON p.{t.key} = d.{t.key} "
        f"GROUP BY d.{t.key} HAVING d.length != coalesce(sum(p.tf), 0)"
    ):
        details.append(f"{t.docs} length {length} of {key} != its postings' {total}")
    for partition, term, df, actual in c.db.query(
        f"SELECT t.partition, t.term, t.df, (SELECT count(*) FROM {t.postings} p "
        f"WHERE p.partition = t.partition AND p.term = t.term) AS n FROM {t.terms} t "
        "WHERE t.df != n"
    ):
        details.append(f"term {term!r} in partition {partition!r}: df {df}, postings {actual}")
    for partition, term in c.db.query(
        f"SELECT DISTINCT p.partition, p.term FROM {t.postings} p WHERE NOT EXISTS "
        f"(SELECT 1 FROM {t.terms} t WHERE t.partition = p.partition AND t.term = p.term)"
    ):
        details.append(f"term {term!r} in partition {partition!r} has postings but no df row")
    details += _listed_terms(c, t)
    stored = {
        p: (d, n)
        for p, d, n in c.db.query(f"SELECT partition, docs, total_length FROM {t.partitions}")
    }
    actual = {
        p: (d, n)
        for p, d, n in c.db.query(
            f"SELECT partition, count(*), sum(length) FROM {t.docs} GROUP BY partition"
        )
    }
    for partition in sorted(set(stored) | set(actual)):
        have, want = stored.get(partition, (0, 0)), actual.get(partition, (0, 0))
        if have != want:
            details.append(f"partition {partition!r}: stored docs/length {have}, actual {want}")
    return details


def _links(c: _Checker) -> None:
    details = [
        f"entity_links row ({e}, {m}) points at a missing "
        + ("memory" if missing_memory else "entity")
        for e, m, missing_memory in c.db.query(
            "SELECT l.entity_rowid, l.memory_rowid, m.rowid IS NULL FROM entity_links l "
            "LEFT JOIN memories m ON m.rowid = l.memory_rowid "
            "LEFT JOIN entities e ON e.rowid = l.entity_rowid "
            "WHERE m.rowid IS NULL OR e.rowid IS NULL"
        )
    ]
    details += [
        f"provenance row ({m}, {s}) points at a missing " + ("memory" if no_memory else "message")
        for m, s, no_memory in c.db.query(
            "SELECT p.memory_rowid, p.message_seq, m.rowid IS NULL FROM provenance p "
            "LEFT JOIN memories m ON m.rowid = p.memory_rowid "
            "LEFT JOIN messages g ON g.seq = p.message_seq "
            "WHERE m.rowid IS NULL OR g.seq IS NULL"
        )
    ]
    c.problems("links", details)


def vector_value_problems(kind: str, rows: Iterable[tuple[int, bytes]]) -> list[str]:
    """Vectors (rowid, float32 blob) that hold a NaN or an infinity or are not of unit length:
    either makes every search of their scope fail or rank at random."""
    details = []
    for rowid, blob in rows:
        vector = np.frombuffer(bytes(blob), dtype=np.float32).astype(np.float64)
        if not np.isfinite(vector).all():
            details.append(f"{kind} vector row {rowid} holds a NaN or an infinity")
            continue
        norm = float(np.linalg.norm(vector))
        if abs(norm - 1.0) > UNIT_TOLERANCE:
            details.append(f"{kind} vector row {rowid} has length {norm:.4f}, not 1")
    return details


def _vector_rows(c: _Checker, table: str) -> list[tuple[int, bytes]]:
    """(rowid, blob) of every vector of a vector table: the one place that reads them here."""
    return [(int(r), bytes(b)) for r, b in c.db.query(f"SELECT rowid, embedding FROM {table}")]


def _vector_values(c: _Checker) -> None:
    details = vector_value_problems("memory", _vector_rows(c, "memory_vectors"))
    details += vector_value_problems("message", _vector_rows(c, "message_vectors"))
    c.problems("vector values", details)


def _texts(c: _Checker) -> None:
    """Each memory's text and each message's content still hashes to its `hash`, the newest
    history row of a memory holds its text, and each row's scope names its own user, agent and
    run: SQLite checks a file's structure, never its values, so a changed byte of a text or an
    owner shows only here."""
    details = [
        f"memory {mid}'s text does not match its hash"
        for mid, text, digest in c.db.query("SELECT id, text, hash FROM memories")
        if not _hashes_to(text, digest)
    ]
    details += [
        f"message {mid}'s content does not match its hash"
        for mid, content, digest in c.db.query("SELECT id, content, hash FROM messages")
        if not _hashes_to(content, digest)
    ]
    # Every write of a memory's text adds a history row holding it (ADD, UPDATE, SUPERSEDE):
    # the newest one holds the memory's text. A MERGE row holds it as old_memory (its
    # new_memory is the wording said again, which the memory did not take).
    details += [
        f"memory {mid}'s newest history row holds another text than the memory"
        for mid, text, last in c.db.query(
            "SELECT m.id, m.text, (SELECT CASE h.event WHEN 'MERGE' THEN h.old_memory "
            "ELSE h.new_memory END FROM history h WHERE h.memory_id = m.id "
            "ORDER BY h.rowid DESC LIMIT 1) FROM memories m"
        )
        if last is not None and last != text
    ]
    for table, kind in (("memories", "memory"), ("messages", "message")):
        details += [
            f"{kind} {mid}'s scope {scope!r} does not name its user, agent and run"
            for mid, scope, user, agent, run in c.db.query(
                f"SELECT id, scope, user_id, agent_id, run_id FROM {table}"
            )
            if scope != Scope(user, agent, run).key
        ]
    c.problems("texts", details)


def _hashes_to(text: Any, digest: Any) -> bool:
    try:
        return isinstance(text, str) and content_hash(text) == digest
    except UnicodeEncodeError:
        return False


def _scopes(c: _Checker) -> None:
    """Provenance, entity links and supersession stay within one scope: a link across scopes
    would show one scope's messages or memories in another's results."""
    details = [
        f"memory {mid} cites message {msg} of another scope"
        for mid, msg in c.db.query(
            "SELECT m.id, g.id FROM provenance p JOIN memories m ON m.rowid = p.memory_rowid "
            "JOIN messages g ON g.seq = p.message_seq WHERE g.scope != m.scope"
        )
    ]
    details += [
        f"memory {mid} is linked to entity {norm!r} of another scope"
        for mid, norm in c.db.query(
            "SELECT m.id, e.norm FROM entity_links l JOIN memories m ON m.rowid = l.memory_rowid "
            "JOIN entities e ON e.rowid = l.entity_rowid WHERE e.scope != m.scope"
        )
    ]
    details += [
        f"memory {mid} is superseded by memory {by} of another scope"
        for mid, by in c.db.query(
            "SELECT m.id, n.id FROM memories m JOIN memories n ON n.id = m.superseded_by "
            "WHERE n.scope != m.scope"
        )
    ]
    c.problems("scopes", details)


def _models(c: _Checker, embedder: EmbedderIdentity | None) -> None:
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


CHECKS: list[tuple[str, Callable[..., None]]] = [
    ("sqlite", _sqlite),
    ("rows", _rows),
    ("validity", _validity),
    ("vectors", _vectors),
    ("message vectors", _message_vectors),
    ("keyword rows", _keyword_rows),
    ("keyword statistics", _keyword_stats),
    ("message keyword rows", _message_keyword_rows),
    ("message keyword statistics", _message_keyword_stats),
    ("links", _links),
    ("vector values", _vector_values),
    ("texts", _texts),
    ("scopes", _scopes),
    ("models", _models),
]


def verify_file(
    db: Database,
    *,
    embedder: EmbedderIdentity | None,
    embedder_unavailable: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Run every check over the file; `embedder` is the configured one (None: the pin is checked
    for presence only, and `embedder_unavailable` says why)."""
    report = VerifyReport(path=db.path)
    checker = _Checker(db, report)
    with db.snapshot():
        for name, check in CHECKS:
            if progress is not None:
                progress(name)
            report.checks.append(name)
            try:
                if name == "models":
                    check(checker, embedder)
                else:
                    check(checker)
            except OfflineMemError as exc:  # a damaged row stops this check, not the others
                checker.problems(name, [f"could not run: {exc}"])
    if embedder is None and embedder_unavailable:
        report.skipped["configured embedder"] = embedder_unavailable
    return report
