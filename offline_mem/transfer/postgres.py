"""Export and import for the PostgreSQL store: the same file format as export.py/importer.py.

A database exports the same lines a memory file with the same rows does (rows in insertion
order, vectors as little-endian float32 in base64), so a memory file exported, imported into
PostgreSQL and exported again gives the same bytes, and back. The header's `schema_version`
is the memory file's schema whose rows the lines hold (store/migrations.py), not the
database's own migration count. Import writes every row in ONE transaction, after the same
checks against the target as a file's import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import IO, Any

import numpy as np

from ..errors import StoreError
from ..store.keyword_index import partition_of
from ..store.messages import is_indexed_message
from ..store.migrations import SCHEMA_VERSION
from ..store.postgres import PostgresStore
from ..store.postgres import keywords as pg_keywords
from ..store.postgres.connection import PgDatabase
from ..store.postgres.vectors import vector_literal
from ..values import content_hash
from .export import _line, encode_vector, write_lines
from .format import (
    FORMAT,
    FORMAT_VERSION,
    HISTORY_COLUMNS,
    JOB_COLUMNS,
    MEMORY_COLUMNS,
    MESSAGE_COLUMNS,
    ExportData,
    ImportRefusedError,
    Progress,
    line_counts,
    refusal,
)

_EXPORTED_JOBS = "state IN ('queued', 'running', 'failed')"


# -- export ------------------------------------------------------------------------------------


def open_database(url: str) -> PgDatabase:
    """A connection to an existing offline_mem database, for export: never creates a table,
    never pins an embedder."""
    db = PgDatabase(url)
    if db.query_one("SELECT to_regclass('meta') IS NOT NULL")[0] is not True:
        db.close()
        raise StoreError(
            f"the database at {db.shown} holds no offline_mem memories (no meta table)"
        )
    return db


def export_file(
    db: PgDatabase, out: IO[str], *, vectors: bool = False, progress: Progress | None = None
) -> dict[str, int]:
    """Write the export to `out`; the lines of each type written."""
    return write_lines(export_lines(db, vectors=vectors), out, progress=progress)


def export_total(db: PgDatabase, *, vectors: bool = False) -> int:
    """How many lines follow the header."""
    return sum(_header(db, vectors=vectors)["counts"].values())


def export_lines(db: PgDatabase, *, vectors: bool = False) -> Iterator[str]:
    """The lines of the export, read in one snapshot (export.export_lines' lines)."""
    with db.snapshot():
        yield _line(_header(db, vectors=vectors))
        cols = ", ".join(MESSAGE_COLUMNS)
        for row in db.query(f"SELECT {cols} FROM messages ORDER BY seq"):
            yield _line({"type": "message", **dict(zip(MESSAGE_COLUMNS, row, strict=True))})
        for scope, name, norm, kind in db.query(
            "SELECT scope, name, norm, kind FROM entities ORDER BY rowid"
        ):
            yield _line(
                {"type": "entity", "scope": scope, "name": name, "norm": norm, "kind": kind}
            )
        yield from _memory_lines(db, vectors)
        cols = ", ".join(HISTORY_COLUMNS)
        for row in db.query(f"SELECT {cols} FROM history ORDER BY rowid"):
            item = dict(zip(HISTORY_COLUMNS, row, strict=True))
            item["is_deleted"] = bool(item["is_deleted"])
            yield _line({"type": "history", **item})
        for job in _job_lines(db):
            yield _line(job)


def _header(db: PgDatabase, *, vectors: bool) -> dict[str, Any]:
    meta = dict(db.query("SELECT key, value FROM meta"))
    count = {
        table: int(db.query_one(f"SELECT count(*) FROM {table}")[0])
        for table in ("messages", "entities", "memories", "history")
    }
    jobs = int(db.query_one(f"SELECT count(*) FROM jobs WHERE {_EXPORTED_JOBS}")[0])
    counts = line_counts({"message": count["messages"], "entity": count["entities"],
                          "memory": count["memories"], "history": count["history"],
                          "job": jobs})  # fmt: skip
    return {
        "type": "header",
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "embedder": {
            "name": meta.get("embedder_name"),
            "sha256": meta.get("embedder_sha256"),
            "dimension": int(meta.get("embedder_dimension") or 0),
        },
        "vectors": vectors,
        "counts": counts,
    }


def _memory_lines(db: PgDatabase, vectors: bool) -> Iterator[str]:
    sources: dict[int, list[str]] = {}
    for rowid, message_id in db.query(
        "SELECT p.memory_rowid, m.id FROM provenance p JOIN messages m ON m.seq = p.message_seq "
        "ORDER BY p.memory_rowid, m.seq"
    ):
        sources.setdefault(rowid, []).append(message_id)
    entities: dict[int, list[str]] = {}
    for rowid, norm in db.query(
        "SELECT l.memory_rowid, e.norm FROM entity_links l JOIN entities e "
        'ON e.rowid = l.entity_rowid ORDER BY l.memory_rowid, e.norm COLLATE "C"'
    ):
        entities.setdefault(rowid, []).append(norm)
    cols = ", ".join(MEMORY_COLUMNS)
    for row in db.query(f"SELECT rowid, {cols}, embedding::text FROM memories ORDER BY rowid"):
        rowid = row[0]
        item: dict[str, Any] = {
            "type": "memory",
            **dict(zip(MEMORY_COLUMNS, row[1:-1], strict=True)),
        }
        item["metadata"] = json.loads(item["metadata"])
        item["sources"] = sources.get(rowid, [])
        item["entities"] = entities.get(rowid, [])
        if vectors:
            values = np.asarray(json.loads(row[-1]), dtype=np.float32)
            item["vector"] = encode_vector(values.astype("<f4").tobytes())
        yield _line(item)


def _job_lines(db: PgDatabase) -> Iterator[dict[str, Any]]:
    """As transfer/jobs.job_lines: unfinished and failed jobs, a running one as queued, with
    the messages deleted since the add left out of its request."""
    cols = ", ".join(JOB_COLUMNS)
    for row in db.query(f"SELECT {cols} FROM jobs WHERE {_EXPORTED_JOBS} ORDER BY seq"):
        item: dict[str, Any] = {"type": "job", **dict(zip(JOB_COLUMNS, row, strict=True))}
        request = json.loads(item["request"])
        named = [m["id"] for m in request["messages"]]
        kept = {r[0] for r in db.query("SELECT id FROM messages WHERE id = ANY(%s)", (named,))}
        item["request"] = {**request, "messages": [m for m in request["messages"]
                                                    if m["id"] in kept]}  # fmt: skip
        if item["state"] == "running":
            item["state"], item["finished_at"] = "queued", None
        yield item


# -- import ------------------------------------------------------------------------------------


def check_against_target(db: PgDatabase, data: ExportData) -> None:
    """importer.check_against_target for a database: no id of the file may exist in it, its
    history may name no memory of it, its jobs' messages must be in the file or the database."""
    for table, kind in (("messages", "message"), ("memories", "memory"), ("history", "history"),
                        ("jobs", "job")):  # fmt: skip
        clash = _existing(db, table, [r["id"] for r in data.rows[kind]])
        if clash:
            raise ImportRefusedError(
                f"the target database already holds {len(clash)} of the file's {kind} ids "
                f"(e.g. {clash[0]}); import into a fresh database"
            )
    in_file = {r["id"] for r in data.rows["memory"]}
    foreign = _existing(db, "memories", sorted({r["memory_id"] for r in data.rows["history"]}
                                               - in_file))  # fmt: skip
    if foreign:
        raise ImportRefusedError(
            f"the file's history names {len(foreign)} memory id(s) that the target database "
            f"holds (e.g. {foreign[0]}); import into a fresh database"
        )
    messages = {r["id"] for r in data.rows["message"]}
    for row in data.rows["job"]:
        for message in row["request"]["messages"]:
            if message["id"] in messages:
                continue
            found = db.query_one("SELECT scope FROM messages WHERE id = %s", (message["id"],))
            if found is None or found[0] != row["scope"]:
                why = "is neither in the file nor in the target" if found is None else (
                    "is in the target under another scope")  # fmt: skip
                raise refusal(f"job {row['id']}", f"message {message['id']!r} {why}")


def _existing(db: PgDatabase, table: str, ids: Sequence[str]) -> list[str]:
    if not ids:
        return []
    return [r[0] for r in db.query(f"SELECT id FROM {table} WHERE id = ANY(%s)", (list(ids),))]


def bulk_insert(
    store: PostgresStore,
    data: ExportData,
    vectors: Sequence[np.ndarray],
    terms: Sequence[Sequence[str]],
    *,
    embedder_sha256: str | None = None,
    message_vectors: dict[str, np.ndarray] | None = None,
    message_terms: dict[str, list[str]] | None = None,
) -> None:
    """importer.bulk_insert for a database: every row in ONE transaction. Messages without a
    vector or keyword terms are refused (the database's message index is always complete)."""
    db = store.db
    message_vectors, message_terms = message_vectors or {}, message_terms or {}
    with db.atomic():
        check_against_target(db, data)
        seqs = {
            row["id"]: _insert_message(db, row, message_vectors, message_terms)
            for row in data.rows["message"]
        }
        pg_keywords.index_many(db, [
            (seqs[row["id"]], partition_of(row["user_id"]), message_terms[row["id"]])
            for row in data.rows["message"] if is_indexed_message(row["role"], row["content"])
        ], pg_keywords.MESSAGE_KEYWORDS)  # fmt: skip
        db.executemany(
            "INSERT INTO entities (scope, name, norm, kind) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (scope, norm) DO NOTHING",
            [(r["scope"], r["name"], r["norm"], r["kind"]) for r in data.rows["entity"]],
        )
        rowids = [
            _insert_memory(db, row, vector, seqs, embedder_sha256)
            for row, vector in zip(data.rows["memory"], vectors, strict=True)
        ]
        pg_keywords.index_many(db, [
            (rowid, partition_of(row["user_id"]), row_terms)
            for rowid, row, row_terms in zip(rowids, data.rows["memory"], terms, strict=True)
        ], pg_keywords.MEMORY_KEYWORDS)  # fmt: skip
        marks = ", ".join("%s" for _ in HISTORY_COLUMNS)
        db.executemany(
            f"INSERT INTO history ({', '.join(HISTORY_COLUMNS)}) VALUES ({marks})",
            [[int(r[c]) if c == "is_deleted" else r[c] for c in HISTORY_COLUMNS]
             for r in data.rows["history"]],
        )  # fmt: skip
        marks = ", ".join("%s" for _ in JOB_COLUMNS)
        db.executemany(
            f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({marks})",
            [[json.dumps(r[c], ensure_ascii=False, sort_keys=True) if c == "request" else r[c]
              for c in JOB_COLUMNS] for r in data.rows["job"]],
        )  # fmt: skip
        _fill_validity(db)


def _insert_message(
    db: PgDatabase,
    row: dict[str, Any],
    vectors: dict[str, np.ndarray],
    terms: dict[str, list[str]],
) -> int:
    indexed = is_indexed_message(row["role"], row["content"])
    if indexed and (row["id"] not in vectors or row["id"] not in terms):
        raise ImportRefusedError(f"message {row['id']} has no vector or keyword terms")
    vector = vector_literal(vectors[row["id"]]) if indexed else None
    columns = [*MESSAGE_COLUMNS, "hash", "embedding"]
    marks = ", ".join(["%s"] * (len(columns) - 1) + ["%s::vector"])
    found = db.query_one(
        f"INSERT INTO messages ({', '.join(columns)}) VALUES ({marks}) RETURNING seq",
        [*(row[c] for c in MESSAGE_COLUMNS), content_hash(row["content"]), vector],
    )
    return int(found[0])


def _insert_memory(
    db: PgDatabase,
    row: dict[str, Any],
    vector: np.ndarray,
    seqs: dict[str, int],
    embedder_sha256: str | None,
) -> int:
    """The memory's row, provenance and entity links (its keyword rows: bulk_insert)."""
    values = {**row, "metadata": json.dumps(row["metadata"], ensure_ascii=False)}
    if embedder_sha256 is not None:
        values["embedder_sha256"] = embedder_sha256
    marks = ", ".join("%s" for _ in MEMORY_COLUMNS)
    found = db.query_one(
        f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}, embedding) "
        f"VALUES ({marks}, %s::vector) RETURNING rowid",
        [*(values[c] for c in MEMORY_COLUMNS), vector_literal(vector)],
    )
    rowid = int(found[0])
    db.executemany(
        "INSERT INTO provenance (memory_rowid, message_seq) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        [(rowid, seqs[message_id]) for message_id in row["sources"]],
    )
    db.executemany(
        "INSERT INTO entity_links (entity_rowid, memory_rowid) SELECT rowid, %s FROM entities "
        "WHERE scope = %s AND norm = %s ON CONFLICT DO NOTHING",
        [(rowid, row["scope"], norm) for norm in row["entities"]],
    )
    return rowid


def _fill_validity(db: PgDatabase) -> None:
    """migrations.fill_validity in PostgreSQL: the rows of an export made before validity and
    change dates were recorded."""
    db.execute(
        "UPDATE memories SET valid_from = COALESCE(observed_at, created_at) "
        "WHERE valid_from IS NULL"
    )
    db.execute(
        "UPDATE memories m SET valid_to = GREATEST(m.valid_from, "
        "COALESCE(n.observed_at, n.created_at)) FROM memories n "
        "WHERE n.id = m.superseded_by AND m.state = 'superseded' AND m.valid_to IS NULL"
    )
    db.execute(
        "UPDATE memories SET valid_to = GREATEST(valid_from, COALESCE(updated_at, created_at)) "
        "WHERE state = 'superseded' AND valid_to IS NULL"
    )
    db.execute(
        "UPDATE history h SET happened_at = COALESCE((SELECT m.observed_at FROM memories m "
        "WHERE m.id = h.memory_id AND h.event = 'ADD'), (SELECT n.observed_at FROM memories n "
        "WHERE n.id = h.related_memory_id AND h.event = 'SUPERSEDE'), h.created_at) "
        "WHERE h.happened_at IS NULL"
    )
