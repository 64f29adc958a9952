"""The memory file's structural invariants, and a comparable snapshot of its logical state.

`violations(db)` lists every broken invariant (empty when the file is sound):
- SQLite's integrity check and foreign-key check pass;
- every memory (active or superseded) has exactly one vector row and one keyword_docs row (in its
  user's partition), its scope key matches its ids, and its history starts with one ADD row;
- no orphans: vectors, keyword docs and postings, entity links, provenance, unlinked entities;
- a message's vector is its own or linked to a memory made from it, never both;
- keyword statistics (df per term, docs and total length per partition, each doc's length and
  listed terms) equal what the postings and docs imply;
- an entity link never crosses scopes.

`pg_violations(db)` checks a PostgreSQL database's counterparts (keyword statistics, history,
provenance, entities); `db_violations(db)` adds the library's own `verify` to the check of the
database's store, and `store_violations(memory)` picks the check of the memory's store. A
location (`open_db`, `schema_committed`, `check_path`) is a memory file's path or a PostgreSQL
database's URL.

`logical_state(db)` is what a user can observe (memories, history events, messages), for
comparing a file with a model of the operations acknowledged to have happened.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from offline_mem.config import is_postgres_url
from offline_mem.store.db import Database
from offline_mem.store.integrity import verify_file
from offline_mem.store.postgres.connection import PgDatabase
from offline_mem.store.postgres.integrity import verify_database
from offline_mem.values import Scope


def open_db(location: str) -> Any:
    """The memory file at a path (a `Database`), or the PostgreSQL database at a URL."""
    if is_postgres_url(str(location)):
        return PgDatabase(str(location))
    return Database(str(location), busy_timeout_ms=30_000)


def schema_committed(location: str) -> bool:
    """Whether the store holds a committed schema. A process killed during its first open leaves
    a file that exists (SQLite creates it at once), or a database, whose migration never
    committed: to the library that is an empty store, and the checks here must not read it as
    a broken one."""
    db = open_db(location)
    try:
        if isinstance(db, PgDatabase):
            return bool(db.query_one("SELECT to_regclass('memories') IS NOT NULL")[0])
        tables = {row[0] for row in db.query("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()
    return "memories" in tables


def _rows(db: Database, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in db.query(sql, params)]


def _awaiting_index(db: Database) -> set[str]:
    """The messages of jobs not done: an async add's are indexed after it returns, always
    before its job runs (offline_mem/memory_parts/message_indexing.py)."""
    requests = _rows(db, "SELECT request FROM jobs WHERE state != 'done'")
    return {m["id"] for (request,) in requests for m in json.loads(request)["messages"]}


def _message_vector_violations(db: Database, found: list[str]) -> None:
    """Every non-system, non-empty message has exactly one vector and one keyword document (in
    its user's partition), or neither while its job is not done; no other message vector or
    document exists."""
    awaiting = _awaiting_index(db)
    messages = _rows(db, "SELECT seq, id, user_id, role, content FROM messages")
    # own or linked to its raw memory's vector (migration 012): one of the two, never both
    vectors = Counter(row[0] for row in _rows(db, "SELECT rowid FROM message_vector_values"))
    unsourced = _rows(
        db,
        "SELECT l.message_seq FROM message_vector_links l WHERE NOT EXISTS (SELECT 1 FROM "
        "provenance p WHERE p.message_seq = l.message_seq AND p.memory_rowid = l.memory_rowid)",
    )
    if unsourced:
        found.append(f"message vectors linked to a memory not made from them: {unsourced[:5]}")
    docs = dict(_rows(db, "SELECT message_seq, partition FROM message_keyword_docs"))
    known = set()
    for seq, mid, user, role, content in messages:
        known.add(seq)
        wanted = 1 if role != "system" and content.strip() else 0
        if mid in awaiting and vectors[seq] == 0 and seq not in docs:
            continue  # not indexed yet, wholly
        if vectors[seq] != wanted:
            found.append(f"message {mid} ({role}): {vectors[seq]} vector rows, expected {wanted}")
        if (seq in docs) != bool(wanted):
            found.append(f"message {mid} ({role}): keyword doc {seq in docs}, expected {wanted}")
        elif wanted and docs[seq] != (user or ""):
            found.append(f"message {mid}: keyword doc in partition {docs[seq]!r}")
    orphans = sorted(set(vectors) - known)
    if orphans:
        found.append(f"orphan message vectors: {orphans[:5]}")
    if set(docs) - known:
        found.append(f"orphan message keyword docs: {sorted(set(docs) - known)[:5]}")
    # the messages' keyword statistics agree with their postings
    checks = {
        "message postings without their doc": "SELECT p.message_seq FROM "
        "message_keyword_postings p LEFT JOIN message_keyword_docs d ON d.message_seq = "
        "p.message_seq WHERE d.message_seq IS NULL OR d.partition != p.partition",
        "message doc length != sum(tf)": "SELECT d.message_seq FROM message_keyword_docs d "
        "LEFT JOIN message_keyword_postings p ON p.message_seq = d.message_seq "
        "GROUP BY d.message_seq HAVING d.length != coalesce(sum(p.tf), 0)",
        "message term df != postings": "SELECT t.term FROM message_keyword_terms t WHERE t.df != "
        "(SELECT count(*) FROM message_keyword_postings p WHERE p.partition = t.partition "
        "AND p.term = t.term)",
        "message posting terms without df": "SELECT p.term FROM message_keyword_postings p "
        "WHERE NOT EXISTS (SELECT 1 FROM message_keyword_terms t WHERE "
        "t.partition = p.partition AND t.term = p.term)",
        "message partition totals != docs": "SELECT k.partition FROM message_keyword_partitions k "
        "WHERE (k.docs, k.total_length) != (SELECT count(*), coalesce(sum(length), 0) FROM "
        "message_keyword_docs d WHERE d.partition = k.partition) UNION SELECT d.partition "
        "FROM message_keyword_docs d WHERE d.partition NOT IN "
        "(SELECT partition FROM message_keyword_partitions)",
    }
    for what, sql in checks.items():
        rows = _rows(db, sql)
        if rows:
            found.append(f"{what}: {rows[:5]}")


def _listed_terms_violations(db: Database, found: list[str]) -> None:
    """Each keyword doc lists exactly its postings' terms (its delete finds them by the list)."""
    for docs, postings, key in (("keyword_docs", "keyword_postings", "memory_rowid"),
                                ("message_keyword_docs", "message_keyword_postings",
                                 "message_seq")):  # fmt: skip
        held: dict[int, set[str]] = {}
        for rowid, term in _rows(db, f"SELECT {key}, term FROM {postings}"):
            held.setdefault(rowid, set()).add(term)
        wrong = [
            rowid
            for rowid, terms in _rows(db, f"SELECT {key}, terms FROM {docs}")
            if sorted(json.loads(terms)) != sorted(held.get(rowid, set()))
        ]
        if wrong:
            found.append(f"{docs} listing other terms than their postings: {wrong[:5]}")


def violations(db: Database) -> list[str]:
    """Every broken invariant of the file, as readable lines (empty when sound)."""
    found: list[str] = []

    def expect_none(what: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            found.append(f"{what}: {rows[:5]}{' ...' if len(rows) > 5 else ''}")

    integrity = [r[0] for r in db.query("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        found.append(f"integrity_check: {integrity[:5]}")
    expect_none("foreign_key_check", _rows(db, "PRAGMA foreign_key_check"))

    memories = _rows(db, "SELECT rowid, id, user_id, agent_id, run_id, scope, state FROM memories")
    by_rowid = {row[0]: row for row in memories}
    vectors = Counter(row[0] for row in _rows(db, "SELECT rowid FROM memory_vectors"))
    docs = {
        r[0]: r[1:] for r in _rows(db, "SELECT memory_rowid, partition, length FROM keyword_docs")
    }
    adds = Counter(r[0] for r in _rows(db, "SELECT memory_id FROM history WHERE event = 'ADD'"))
    first_event = dict(
        _rows(
            db,
            "SELECT memory_id, event FROM history h WHERE rowid = "
            "(SELECT min(rowid) FROM history WHERE memory_id = h.memory_id)",
        )
    )
    for rowid, mid, user, agent, run, scope, state in memories:
        partition = user or ""
        if state not in ("active", "superseded"):
            found.append(f"memory {mid}: state {state!r}")
        if scope != Scope(user, agent, run).key:
            found.append(f"memory {mid}: scope key {scope!r} does not match its ids")
        if vectors[rowid] != 1:
            found.append(f"memory {mid}: {vectors[rowid]} vector rows")
        if rowid not in docs:
            found.append(f"memory {mid}: no keyword_docs row")
        elif docs[rowid][0] != partition:
            found.append(f"memory {mid}: keyword doc in partition {docs[rowid][0]!r}")
        if adds[mid] != 1 or first_event.get(mid) != "ADD":
            found.append(
                f"memory {mid}: {adds[mid]} ADD history rows, first {first_event.get(mid)}"
            )

    expect_none("orphan vectors", sorted(set(vectors) - set(by_rowid)))
    _message_vector_violations(db, found)
    _listed_terms_violations(db, found)
    expect_none("orphan keyword_docs", sorted(set(docs) - set(by_rowid)))
    expect_none(
        "orphan or misplaced postings",
        _rows(
            db,
            "SELECT p.partition, p.term, p.memory_rowid FROM keyword_postings p "
            "LEFT JOIN keyword_docs d ON d.memory_rowid = p.memory_rowid "
            "WHERE d.memory_rowid IS NULL OR d.partition != p.partition",
        ),
    )
    expect_none(
        "postings with tf < 1",
        _rows(db, "SELECT partition, term, memory_rowid FROM keyword_postings WHERE tf < 1"),
    )
    expect_none(
        "keyword_docs length != sum(tf)",
        _rows(
            db,
            "SELECT d.memory_rowid, d.length, coalesce(sum(p.tf), 0) FROM keyword_docs d "
            "LEFT JOIN keyword_postings p ON p.memory_rowid = d.memory_rowid "
            "GROUP BY d.memory_rowid HAVING d.length != coalesce(sum(p.tf), 0)",
        ),
    )
    df_sql = "SELECT partition, term, count(*) FROM keyword_postings GROUP BY partition, term"
    df_implied = {(p, t): n for p, t, n in _rows(db, df_sql)}
    df_stored = {
        (p, t): df for p, t, df in _rows(db, "SELECT partition, term, df FROM keyword_terms")
    }
    expect_none(
        "keyword_terms df != postings",
        sorted(
            (key, df_stored.get(key), df_implied.get(key))
            for key in set(df_implied) | set(df_stored)
            if df_stored.get(key) != df_implied.get(key)
        ),
    )
    parts_implied = {
        p: (n, total)
        for p, n, total in _rows(
            db, "SELECT partition, count(*), sum(length) FROM keyword_docs GROUP BY partition"
        )
    }
    parts_stored = {
        p: (n, total)
        for p, n, total in _rows(db, "SELECT partition, docs, total_length FROM keyword_partitions")
    }
    expect_none(
        "keyword_partitions != docs",
        sorted(
            (p, parts_stored.get(p), parts_implied.get(p))
            for p in set(parts_stored) | set(parts_implied)
            if parts_stored.get(p) != parts_implied.get(p)
        ),
    )
    expect_none(
        "orphan entity_links",
        _rows(
            db,
            "SELECT l.entity_rowid, l.memory_rowid FROM entity_links l "
            "LEFT JOIN entities e ON e.rowid = l.entity_rowid "
            "LEFT JOIN memories m ON m.rowid = l.memory_rowid "
            "WHERE e.rowid IS NULL OR m.rowid IS NULL",
        ),
    )
    expect_none(
        "entity links across scopes",
        _rows(
            db,
            "SELECT e.scope, m.scope, e.norm FROM entity_links l "
            "JOIN entities e ON e.rowid = l.entity_rowid "
            "JOIN memories m ON m.rowid = l.memory_rowid WHERE e.scope != m.scope",
        ),
    )
    expect_none(
        "entities without links",
        _rows(
            db,
            "SELECT scope, norm FROM entities e WHERE NOT EXISTS "
            "(SELECT 1 FROM entity_links l WHERE l.entity_rowid = e.rowid)",
        ),
    )
    expect_none(
        "orphan provenance",
        _rows(
            db,
            "SELECT p.memory_rowid, p.message_seq FROM provenance p "
            "LEFT JOIN memories m ON m.rowid = p.memory_rowid "
            "LEFT JOIN messages g ON g.seq = p.message_seq "
            "WHERE m.rowid IS NULL OR g.seq IS NULL OR g.scope != m.scope",
        ),
    )
    expect_none(
        "superseded memories without a successor",
        _rows(db, "SELECT id FROM memories WHERE state = 'superseded' AND superseded_by IS NULL"),
    )
    _job_violations(db, expect_none)
    expect_none(
        "messages with a wrong scope key",
        [
            row
            for row in _rows(db, "SELECT seq, scope, user_id, agent_id, run_id FROM messages")
            if row[1] != Scope(*row[2:]).key
        ],
    )
    return found


def _job_violations(db: Database, expect_none: Any) -> None:
    """The extraction queue: claims only on running jobs, results only on done ones, and a
    scope's jobs finish in queue order (no unfinished job before a finished one)."""
    if db.query_one("SELECT 1 FROM sqlite_master WHERE name = 'jobs'") is None:
        return
    expect_none(
        "running jobs without an owner and lease, or other jobs with an owner",
        _rows(
            db,
            "SELECT id, state, owner, lease_until FROM jobs WHERE (state = 'running') != "
            "(owner IS NOT NULL AND lease_until IS NOT NULL)",
        ),
    )
    expect_none(
        "done jobs without results or end time, or others with results",
        _rows(
            db,
            "SELECT id, state FROM jobs WHERE (state = 'done') != "
            "(results IS NOT NULL AND finished_at IS NOT NULL)",
        ),
    )
    expect_none(
        "jobs finished out of queue order",
        _rows(
            db,
            "SELECT u.id, f.id FROM jobs u JOIN jobs f ON f.scope = u.scope AND f.seq > u.seq "
            "WHERE u.state IN ('queued', 'running') AND f.state IN ('done', 'failed')",
        ),
    )


def check_path(location: str) -> list[str]:
    db = open_db(location)
    try:
        return db_violations(db)
    finally:
        db.close()


# -- logical state ---------------------------------------------------------------------------


@dataclass
class LogicalState:
    """What the user can observe: memories by id, history events per id, messages as a bag."""

    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, list[str]] = field(default_factory=dict)
    messages: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    # a raw memory's source message: deleting the memory deletes that message too (not part
    # of the comparison)
    verbatim_source: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def copy(self) -> LogicalState:
        return LogicalState(
            memories={k: dict(v) for k, v in self.memories.items()},
            history={k: list(v) for k, v in self.history.items()},
            messages=Counter(self.messages),
            verbatim_source=dict(self.verbatim_source),
        )

    def forget_verbatim_source(self, memory_id: str) -> None:
        key = self.verbatim_source.pop(memory_id, None)
        if key is not None:
            self.messages[key] -= 1
            if self.messages[key] <= 0:
                del self.messages[key]

    def differences(self, other: LogicalState, *, limit: int = 8) -> list[str]:
        out = []
        for key in sorted(set(self.memories) | set(other.memories)):
            mine, theirs = self.memories.get(key), other.memories.get(key)
            if mine != theirs:
                out.append(f"memory {key}: expected {mine}, file has {theirs}")
        for key in sorted(set(self.history) | set(other.history)):
            if self.history.get(key, []) != other.history.get(key, []):
                out.append(
                    f"history {key}: expected {self.history.get(key)}, file has "
                    f"{other.history.get(key)}"
                )
        if self.messages != other.messages:
            out.append(
                f"messages: expected extra {dict(self.messages - other.messages)}, "
                f"file extra {dict(other.messages - self.messages)}"
            )
        return out[:limit]


def memory_view(
    text: str,
    state: str,
    superseded_by: str | None,
    scope: dict[str, str | None],
    metadata: dict[str, Any],
) -> dict[str, Any]:
    return {
        "text": text,
        "state": state,
        "superseded_by": superseded_by,
        "user_id": scope.get("user_id"),
        "agent_id": scope.get("agent_id"),
        "run_id": scope.get("run_id"),
        "metadata": metadata,
    }


def message_key(scope: dict[str, str | None], role: str, content: str) -> tuple[Any, ...]:
    return (scope.get("user_id"), scope.get("agent_id"), scope.get("run_id"), role, content)


def logical_state(db: Database) -> LogicalState:
    state = LogicalState()
    for mid, text, st, succ, user, agent, run, meta in _rows(
        db,
        "SELECT id, text, state, superseded_by, user_id, agent_id, run_id, metadata FROM memories",
    ):
        scope = {"user_id": user, "agent_id": agent, "run_id": run}
        state.memories[mid] = memory_view(text, st, succ, scope, json.loads(meta))
    for mid, event in _rows(db, "SELECT memory_id, event FROM history ORDER BY rowid"):
        state.history.setdefault(mid, []).append(event)
    for user, agent, run, role, content in _rows(
        db, "SELECT user_id, agent_id, run_id, role, content FROM messages"
    ):
        scope = {"user_id": user, "agent_id": agent, "run_id": run}
        state.messages[message_key(scope, role, content)] += 1
    return state


def table_dump(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows (sqlite-vec's shadow tables included), for before/after comparisons."""
    names = [
        row[0]
        for row in db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    ]
    return {
        name: sorted((tuple(map(_digest, row)) for row in db.query(f'SELECT * FROM "{name}"')),
                     key=repr)
        for name in names
    }  # fmt: skip


def pg_table_dump(db: Any) -> dict[str, list[tuple[Any, ...]]]:
    """`table_dump` of a PostgreSQL store's database (its `PgDatabase`)."""
    names = [
        row[0]
        for row in db.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"
        )
    ]
    return {
        name: sorted((tuple(map(_digest, row)) for row in db.query(f'SELECT * FROM "{name}"')),
                     key=repr)
        for name in names
    }  # fmt: skip


def _digest(value: Any) -> Any:
    """Blobs (sqlite-vec's chunks are megabytes) compare by their sha256."""
    if isinstance(value, bytes):
        return "blob:" + hashlib.sha256(value).hexdigest()
    return value


# -- the model of acknowledged operations ------------------------------------------------------


class LostWrite(AssertionError):
    """An acknowledged result disagrees with what the operation asked for."""


def _matches(view: dict[str, Any], scope: dict[str, str]) -> bool:
    return all(view.get(key) == value for key, value in scope.items())


def expected_add_texts(op: dict[str, Any]) -> Counter[str]:
    """The memories an add must create (its texts carry a unique token, so none pre-exist)."""
    if op["op"] in ("add_infer", "add_async"):
        return Counter(op["facts"])
    chosen = [
        m["content"] for m in op["messages"] if m["role"] != "system" and m["content"].strip()
    ]
    return Counter(dict.fromkeys(chosen, 1))


def _apply_added(state: LogicalState, op: dict[str, Any], result: Any) -> None:
    """An add's new memories and supersessions, as its result names them."""
    added = [item for item in result["results"] if item["event"] == "ADD"]
    if Counter(item["memory"] for item in added) != expected_add_texts(op):
        raise LostWrite(f"op {op['i']}: added {added}, expected {expected_add_texts(op)}")
    for item in added:
        state.memories[item["id"]] = memory_view(
            item["memory"], "active", None, op["scope"], dict(op["metadata"])
        )
        state.history[item["id"]] = ["ADD"]
        if op["op"] == "add_raw":
            state.verbatim_source[item["id"]] = message_key(
                op["scope"], item.get("role", "user"), item["memory"]
            )
    for item in result["results"]:
        if item["event"] != "SUPERSEDE":
            continue
        if op["op"] not in ("add_infer", "add_async") or not op["supersede"]:
            raise LostWrite(f"op {op['i']}: unexpected supersession {item}")
        old = state.memories[item["id"]]
        if old["state"] != "active" or not _matches(old, op["scope"]):
            raise LostWrite(f"op {op['i']}: superseded {old} outside the scope or inactive")
        old["state"], old["superseded_by"] = "superseded", item["superseded_by"]
        state.history[item["id"]].append("SUPERSEDE")


def apply_job(state: LogicalState, op: dict[str, Any], result: Any) -> None:
    """The memories of an async add (`op`), when its job is done with `result`."""
    _apply_added(state, op, result)


@dataclass
class JobBook:
    """The model of the async adds' jobs: each is pending, done or deleted (by a delete_all of
    its scope), and is completed at most once."""

    ops: dict[str, dict[str, Any]] = field(default_factory=dict)  # event_id -> its add_async op
    states: dict[str, str] = field(default_factory=dict)
    completions: Counter[str] = field(default_factory=Counter)

    def queued(self, event_id: str, op: dict[str, Any]) -> None:
        self.ops[event_id], self.states[event_id] = op, "pending"

    def done(self, state: LogicalState, event_id: str, result: Any) -> None:
        self.completions[event_id] += 1
        if self.states.get(event_id) != "pending":
            raise LostWrite(f"job {event_id} completed while {self.states.get(event_id)}")
        apply_job(state, self.ops[event_id], result)
        self.states[event_id] = "done"

    def delete_scope(self, scope: dict[str, str]) -> None:
        for event_id, op in self.ops.items():
            if all(op["scope"].get(key) == value for key, value in scope.items()):
                self.states[event_id] = "deleted"

    def pending(self) -> list[str]:
        return [e for e, s in self.states.items() if s == "pending"]

    def differences(self, db: Database) -> list[str]:
        """Jobs lost (pending or done in the model, missing or otherwise in the file), jobs the
        model does not know, and jobs completed twice."""
        rows = {r[0]: r[1] for r in _rows(db, "SELECT id, state FROM jobs")}
        out = []
        for event_id, wanted in self.states.items():
            found = rows.pop(event_id, None)
            ok = {"pending": found in ("queued", "running"), "done": found == "done",
                  "deleted": found is None}[wanted]  # fmt: skip
            if not ok:
                out.append(f"job {event_id}: {wanted} in the model, {found} in the file")
        out += [f"job {event_id}: {state} in the file, unknown" for event_id, state in rows.items()]
        out += [f"job {e} completed {n} times" for e, n in self.completions.items() if n > 1]
        return out


def apply_logged(state: LogicalState, book: JobBook, op: dict[str, Any], result: Any) -> None:
    """An acknowledged operation, its effect on the jobs included."""
    apply_operation(state, op, result)
    if op["op"] == "add_async":
        book.queued(result["event_id"], op)
    elif op["op"] == "delete_all":
        book.delete_scope(op["scope"])


def apply_operation(state: LogicalState, op: dict[str, Any], result: Any) -> None:
    """Apply one operation (as planned by writer_process.py, with its result) to the model.

    For adds, `result` gives the new ids: the call's return value, or one rebuilt from the file.
    Raises LostWrite when the result contradicts the operation."""
    kind = op["op"]
    if kind == "add_async":  # the messages now; the memories when its job is done (apply_job)
        for message in op["messages"]:
            state.messages[message_key(op["scope"], message["role"], message["content"])] += 1
    elif kind == "flush":
        pass
    elif kind in ("add_raw", "add_infer"):
        _apply_added(state, op, result)
        for message in op["messages"]:
            state.messages[message_key(op["scope"], message["role"], message["content"])] += 1
    elif kind == "update":
        view = state.memories[op["id"]]
        if op["text"] is not None:
            view["text"] = op["text"]
        view["metadata"] = {**view["metadata"], **op["metadata"]}
        state.history[op["id"]].append("UPDATE")
        if result is not None and (result["memory"], result["metadata"]) != (
            view["text"],
            view["metadata"],
        ):
            raise LostWrite(f"op {op['i']}: update returned {result}, expected {view}")
    elif kind == "delete":
        del state.memories[op["id"]]
        state.history[op["id"]].append("DELETE")
        state.forget_verbatim_source(op["id"])
    elif kind == "delete_all":
        gone = [mid for mid, view in state.memories.items() if _matches(view, op["scope"])]
        for mid in gone:
            del state.memories[mid]
            state.history[mid].append("DELETE")
            state.verbatim_source.pop(mid, None)
        keys = ("user_id", "agent_id", "run_id")
        for key in list(state.messages):
            if all(op["scope"].get(k) in (None, v) for k, v in zip(keys, key[:3], strict=True)):
                del state.messages[key]
        if result is not None and result["deleted"] != len(gone):
            raise LostWrite(
                f"op {op['i']}: delete_all deleted {result['deleted']}, not {len(gone)}"
            )
    elif kind == "search":
        for item in result["results"] if result is not None else []:
            if not _matches(item, op["scope"]):
                raise LostWrite(f"op {op['i']}: search in {op['scope']} returned {item}")
    else:
        raise ValueError(kind)


# Each query returns the rows of a PostgreSQL database that break one invariant of its tables.
PG_INVARIANTS = {
    "memory without its keyword row": "SELECT m.id FROM memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM keyword_docs d WHERE d.memory_rowid = m.rowid)",
    "memory without its ADD": "SELECT m.id FROM memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM history h WHERE h.memory_id = m.id AND h.event = 'ADD')",
    "indexed message without its keyword row": "SELECT id FROM messages g WHERE g.embedding IS "
    "NOT NULL AND NOT EXISTS (SELECT 1 FROM message_keyword_docs d WHERE d.message_seq = g.seq)",
    # a message of whitespace only is empty too (store/messages.py `is_indexed_message`)
    # but a message of a job not done: indexed after its add returns, before its job runs
    "unindexed message other than a system or empty one": "SELECT id FROM messages g WHERE "
    "embedding IS NULL AND role <> 'system' AND content ~ '\\S' AND NOT EXISTS (SELECT 1 FROM "
    "jobs j WHERE j.state <> 'done' AND j.request::jsonb -> 'messages' @> "
    "jsonb_build_array(jsonb_build_object('id', g.id)))",
    "document frequency off": "SELECT t.term FROM keyword_terms t WHERE t.df <> (SELECT count(*) "
    "FROM keyword_postings p WHERE p.partition = t.partition AND p.term = t.term)",
    "partition totals off": "SELECT p.partition FROM keyword_partitions p WHERE (p.docs, "
    "p.total_length) <> (SELECT count(*), coalesce(sum(length), 0) FROM keyword_docs d "
    "WHERE d.partition = p.partition)",
    "message partition totals off": "SELECT p.partition FROM message_keyword_partitions p "
    "WHERE (p.docs, p.total_length) <> (SELECT count(*), coalesce(sum(length), 0) "
    "FROM message_keyword_docs d WHERE d.partition = p.partition)",
    "entity linked to no memory": "SELECT e.norm FROM entities e WHERE NOT EXISTS "
    "(SELECT 1 FROM entity_links l WHERE l.entity_rowid = e.rowid)",
    "extracted memory without a source": "SELECT m.id FROM memories m WHERE NOT EXISTS "
    "(SELECT 1 FROM provenance p WHERE p.memory_rowid = m.rowid) "
    "AND m.extractor_sha256 IS NOT NULL",
}


def pg_violations(db: Any, extra: dict[str, str] | None = None) -> list[str]:
    """Every broken invariant of a PostgreSQL database (a PgDatabase), as readable lines."""
    found = []
    for what, sql in {**PG_INVARIANTS, **(extra or {})}.items():
        rows = _rows(db, sql)
        if rows:
            found.append(f"{what}: {rows[:5]}")
    return found


def store_violations(memory: Any) -> list[str]:
    """The broken invariants of a Memory's store, SQLite file or PostgreSQL database."""
    if isinstance(memory.store.db, Database):
        return violations(memory.store.db)
    return pg_violations(memory.store.db)


def db_violations(db: Any) -> list[str]:
    """The broken invariants of an open memory file or PostgreSQL database, and the problems
    the library's own `verify` finds in it (with no embedder: its pin is checked for presence)."""
    if isinstance(db, Database):
        found, report = violations(db), verify_file(db, embedder=None)
    else:
        found, report = pg_violations(db), verify_database(db, embedder=None)
    return found + [f"verify {p.check}: {p.detail}" for p in report.problems]
