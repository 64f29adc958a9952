"""Importing a checked export into a memory file: the models run first (vectors, keyword terms),
then every row goes in with the store's own SQL shapes in ONE transaction, the extraction jobs
last (queued ones run as on a file opened with queued jobs)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..store import keyword_index
from ..store.db import Database
from ..store.messages import INDEX_STATE_KEY, is_indexed_message, message_embedding_text
from ..store.migrations import fill_validity
from ..store.records import keyword_text
from ..store.store import Store
from ..values import content_hash
from .format import (
    HISTORY_COLUMNS,
    MEMORY_COLUMNS,
    MESSAGE_COLUMNS,
    ORDER,
    ExportData,
    ImportRefusedError,
    Progress,
    line_counts,
)
from .jobs import check_targets, insert_jobs


@dataclass(frozen=True)
class ImportReport:
    counts: dict[str, int]  # rows written per type
    reembedded: bool  # vectors computed by the target's embedder (else taken from the file)
    embedder: str  # the target's embedder name

    def to_dict(self) -> dict[str, Any]:
        return {"imported": self.counts, "reembedded": self.reembedded, "embedder": self.embedder}


def import_data(
    memory: Any, data: ExportData, *, progress: Progress | None = None, batch_size: int = 64
) -> ImportReport:
    """Write an export into `memory`'s file (a `Memory`): vectors from the file when it carries
    them and was written by the same embedder, else computed by the target's embedder; keyword
    terms by the target's analyzer. The models run first; the rows go in one transaction."""
    check, insert = _for_store(memory)
    check(memory.store.db, data)
    memories = data.rows["memory"]
    target = memory.embedder.identity
    same = (data.embedder.sha256, data.embedder.dimension) == (target.sha256, target.dimension)
    reuse = same and data.header["vectors"]
    vectors: list[np.ndarray] = []
    for start in range(0, len(memories), batch_size):
        chunk = memories[start : start + batch_size]
        if reuse:
            vectors += [
                np.frombuffer(base64.b64decode(r["vector"]), dtype=np.float32) for r in chunk
            ]
        else:
            vectors += list(memory.embedder.embed_batch([r["text"] for r in chunk]))
        if progress is not None:
            progress(len(chunk))
    analyses = memory.analyzer.analyze_batch([keyword_text(r["text"]) for r in memories])
    terms = [a.terms for a in analyses]
    message_vectors = _message_vectors(memory, data.rows["message"], batch_size)
    message_terms = _message_terms(memory, data.rows["message"])
    embedder_sha = None if same else target.sha256
    with memory._lock:
        insert(
            memory.store, data, vectors, terms, embedder_sha256=embedder_sha,
            message_vectors=message_vectors, message_terms=message_terms,
        )  # fmt: skip
    if memory.config.job_worker and any(r["state"] == "queued" for r in data.rows["job"]):
        memory._worker.start()  # as on opening a file with queued jobs
    counts = line_counts({kind: data.count(kind) for kind in ORDER})
    return ImportReport(counts=counts, reembedded=not reuse, embedder=target.name)


def _for_store(memory: Any) -> tuple[Any, Any]:
    """The target check and the bulk insert of `memory`'s store: a memory file's (below), or a
    PostgreSQL database's (postgres.py, imported only then)."""
    if getattr(memory, "store_url", None) is None:
        return check_against_target, bulk_insert
    from . import postgres

    return postgres.check_against_target, postgres.bulk_insert


def _message_vectors(
    memory: Any, rows: list[dict[str, Any]], batch_size: int
) -> dict[str, np.ndarray]:
    """Vectors of the indexed messages, by message id (exports carry none for messages)."""
    indexed = [r for r in rows if is_indexed_message(r["role"], r["content"])]
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(indexed), batch_size):
        chunk = indexed[start : start + batch_size]
        vectors = memory.embedder.embed_batch(
            [message_embedding_text(r.get("name"), r["content"]) for r in chunk]
        )
        found.update((r["id"], v) for r, v in zip(chunk, vectors, strict=True))
    return found


def _message_terms(memory: Any, rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Keyword terms of the indexed messages, by message id (of the text their vector is of)."""
    indexed = [r for r in rows if is_indexed_message(r["role"], r["content"])]
    texts = [message_embedding_text(r.get("name"), r["content"]) for r in indexed]
    analyses = memory.analyzer.analyze_terms(texts)
    return {r["id"]: a.terms for r, a in zip(indexed, analyses, strict=True)}


def _clashes(db: Database, table: str, ids: list[str]) -> list[str]:
    found: list[str] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        found += [r[0] for r in db.query(f"SELECT id FROM {table} WHERE id IN ({marks})", chunk)]
    return found


def check_against_target(db: Database, data: ExportData) -> None:
    """Refuse a file whose ids the target already holds, whose history names a memory of the
    target (its rows would join that memory's history), or whose jobs name a message neither
    file holds in the job's scope. Read-only: run before the models, and again inside the
    write's transaction."""
    for table, kind in (
        ("messages", "message"),
        ("memories", "memory"),
        ("history", "history"),
        ("jobs", "job"),
    ):
        clash = _clashes(db, table, [r["id"] for r in data.rows[kind]])
        if clash:
            raise ImportRefusedError(
                f"the target file already holds {len(clash)} of the file's {kind} ids "
                f"(e.g. {clash[0]}); import into a fresh file"
            )
    in_file = {r["id"] for r in data.rows["memory"]}
    named = sorted({r["memory_id"] for r in data.rows["history"]} - in_file)
    foreign = _clashes(db, "memories", named)
    if foreign:
        raise ImportRefusedError(
            f"the file's history names {len(foreign)} memory id(s) that the target file holds "
            f"(e.g. {foreign[0]}); import into a fresh file"
        )
    check_targets(db, data.rows["job"], {r["id"] for r in data.rows["message"]})


def bulk_insert(
    store: Store,
    data: ExportData,
    vectors: list[np.ndarray],
    terms: list[list[str]],
    *,
    embedder_sha256: str | None = None,
    message_vectors: dict[str, np.ndarray] | None = None,
    message_terms: dict[str, list[str]] | None = None,
) -> None:
    """Insert every row of `data` in ONE transaction, with the store's own SQL shapes: messages,
    entities, memories with their vector, keyword, provenance and entity rows, the messages'
    vector (or link to a raw memory's) and keyword rows, then history, then the jobs (queued or
    failed). `embedder_sha256`, when given,
    replaces each memory's pin (its vector was re-computed). Messages without a vector or
    keyword terms leave the message index marked pending (the next `Memory` to open the file
    fills it). Refuses (and writes nothing) when an id already exists in the target, or when a
    job names a message that is neither in the file nor in the target."""
    db = store.db
    with store.atomic():
        check_against_target(db, data)
        seqs = _insert_messages(db, data.rows["message"])
        for row in data.rows["entity"]:
            db.execute(
                "INSERT INTO entities (scope, name, norm, kind) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(scope, norm) DO NOTHING",
                (row["scope"], row["name"], row["norm"], row["kind"]),
            )
        for row, vector, row_terms in zip(data.rows["memory"], vectors, terms, strict=True):
            _insert_memory(db, row, vector, row_terms, seqs, embedder_sha256)
        # After the memories: a raw memory's message links to its vector (same bytes).
        _index_messages(store, data.rows["message"], seqs, message_vectors, message_terms)
        marks = ", ".join("?" for _ in HISTORY_COLUMNS)
        db.executemany(
            f"INSERT INTO history ({', '.join(HISTORY_COLUMNS)}) VALUES ({marks})",
            [
                [int(r[c]) if c == "is_deleted" else r[c] for c in HISTORY_COLUMNS]
                for r in data.rows["history"]
            ],
        )
        insert_jobs(db, data.rows["job"])
        fill_validity(db)  # the rows of an export made before validity was recorded


def _index_messages(
    store: Store,
    rows: list[dict[str, Any]],
    seqs: dict[str, int],
    vectors_of: dict[str, np.ndarray] | None,
    terms_of: dict[str, list[str]] | None,
) -> None:
    """The indexed messages' vector and keyword rows; the index is marked pending when some
    lack them (the next `Memory` to open the file fills it)."""
    vectors_of, terms_of = vectors_of or {}, terms_of or {}
    unindexed = False
    for row in rows:
        if not is_indexed_message(row["role"], row["content"]):
            continue
        if row["id"] in vectors_of and row["id"] in terms_of:
            seq = seqs[row["id"]]
            store.insert_message_vector(seq, vectors_of[row["id"]])
            store.insert_message_terms(seq, row["user_id"], terms_of[row["id"]])
        else:
            unindexed = True
    if unindexed:
        store.db.execute(
            "INSERT INTO meta (key, value) VALUES (?, 'pending') "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (INDEX_STATE_KEY,),
        )


def _insert_messages(db: Database, rows: list[dict[str, Any]]) -> dict[str, int]:
    columns = [*MESSAGE_COLUMNS, "hash"]
    marks = ", ".join("?" for _ in columns)
    sql = f"INSERT INTO messages ({', '.join(columns)}) VALUES ({marks})"
    return {
        row["id"]: db.execute(
            sql, [*(row[c] for c in MESSAGE_COLUMNS), content_hash(row["content"])]
        ).lastrowid
        for row in rows
    }


def _insert_memory(
    db: Database,
    row: dict[str, Any],
    vector: np.ndarray,
    terms: list[str],
    seqs: dict[str, int],
    embedder_sha256: str | None,
) -> None:
    values = {**row, "metadata": json.dumps(row["metadata"], ensure_ascii=False)}
    if embedder_sha256 is not None:
        values["embedder_sha256"] = embedder_sha256
    marks = ", ".join("?" for _ in MEMORY_COLUMNS)
    rowid = db.execute(
        f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}) VALUES ({marks})",
        [values[c] for c in MEMORY_COLUMNS],
    ).lastrowid
    db.execute(
        "INSERT INTO memory_vectors (rowid, embedding) VALUES (?, ?)",
        (rowid, np.asarray(vector, dtype=np.float32).tobytes()),
    )
    keyword_index.index_terms(db, rowid, keyword_index.partition_of(row["user_id"]), terms)
    for message_id in row["sources"]:
        db.execute(
            "INSERT OR IGNORE INTO provenance (memory_rowid, message_seq) VALUES (?, ?)",
            (rowid, seqs[message_id]),
        )
    for norm in row["entities"]:
        db.execute(
            "INSERT OR IGNORE INTO entity_links (entity_rowid, memory_rowid) "
            "SELECT rowid, ? FROM entities WHERE scope = ? AND norm = ?",
            (rowid, row["scope"], norm),
        )
