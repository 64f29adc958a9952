"""Export a memory file to JSONL and import it back, losslessly.

The first line is a header: format name and version, the schema version and embedder of the file
that was exported, whether vectors are included, and how many lines of each kind follow (so a
truncated file is refused). Then one JSON object per line, each with a "type":

  message  every stored message, in insertion order
  entity   every entity (scope, name, norm, kind)
  memory   every memory row (active and superseded) with its metadata, model pins, the ids of
           the messages it came from ("sources"), the norms of its entities and, with
           `vectors=True`, its vector (base64 of little-endian float32)
  history  every history row, including those of deleted memories

No internal row numbers are written: rows refer to each other by id, so an export can be imported
into a fresh file or merged into one that holds other memories, and export -> import -> export
gives the same bytes. Keyword rows are derived data: import rebuilds them with the target's
analyzer. Import validates the whole file before it writes anything, re-embeds the texts when the
file's vectors are absent or come from another embedder, then writes every row in ONE transaction.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from . import keyword_index
from .db import Database
from .embedder import EmbedderIdentity
from .errors import OfflineMemError, StoreError
from .migrations import SCHEMA_VERSION
from .store import Store, keyword_text
from .store_messages import INDEX_STATE_KEY, is_indexed_message
from .validation import Scope

FORMAT = "offline_mem-export"
FORMAT_VERSION = 1

Progress = Callable[[int], None]  # called with the number of items just done


class ImportRefusedError(OfflineMemError, ValueError):
    """The export file cannot be trusted (bad header, unknown version, inconsistent rows), or it
    clashes with the target file. Nothing was written."""


# -- row shapes --------------------------------------------------------------------------------

_STR = (str,)
_OPT = (str, type(None))
_INT = (int,)

MESSAGE_FIELDS: dict[str, tuple[type, ...]] = {
    "id": _STR,
    "scope": _STR,
    "user_id": _OPT,
    "agent_id": _OPT,
    "run_id": _OPT,
    "role": _STR,
    "name": _OPT,
    "content": _STR,
    "created_at": _STR,
    "observed_at": _OPT,
}
ENTITY_FIELDS: dict[str, tuple[type, ...]] = {
    "scope": _STR,
    "name": _STR,
    "norm": _STR,
    "kind": _STR,
}
MEMORY_FIELDS: dict[str, tuple[type, ...]] = {
    "id": _STR,
    "text": _STR,
    "hash": _STR,
    "user_id": _OPT,
    "agent_id": _OPT,
    "run_id": _OPT,
    "scope": _STR,
    "metadata": (dict,),
    "role": _OPT,
    "actor_id": _OPT,
    "attributed_to": _OPT,
    "memory_type": _OPT,
    "state": _STR,
    "superseded_by": _OPT,
    "created_at": _STR,
    "updated_at": _OPT,
    "observed_at": _OPT,
    "expiration_date": _OPT,
    "embedder_sha256": _STR,
    "extractor_sha256": _OPT,
    "prompt_version": _OPT,
    "sources": (list,),
    "entities": (list,),
}
HISTORY_FIELDS: dict[str, tuple[type, ...]] = {
    "id": _STR,
    "memory_id": _STR,
    "old_memory": _OPT,
    "new_memory": _OPT,
    "event": _STR,
    "related_memory_id": _OPT,
    "created_at": _STR,
    "updated_at": _OPT,
    "is_deleted": (bool,),
    "actor_id": _OPT,
    "role": _OPT,
}
KINDS = {
    "message": MESSAGE_FIELDS,
    "entity": ENTITY_FIELDS,
    "memory": MEMORY_FIELDS,
    "history": HISTORY_FIELDS,
}
ORDER = ("message", "entity", "memory", "history")  # the order of the lines in a file

# The memory columns written as they are (everything but rowid, metadata and the extra keys).
_MEMORY_COLUMNS = [
    "id",
    "text",
    "hash",
    "user_id",
    "agent_id",
    "run_id",
    "scope",
    "metadata",
    "role",
    "actor_id",
    "attributed_to",
    "memory_type",
    "state",
    "superseded_by",
    "created_at",
    "updated_at",
    "observed_at",
    "expiration_date",
    "embedder_sha256",
    "extractor_sha256",
    "prompt_version",
]
_MESSAGE_COLUMNS = list(MESSAGE_FIELDS)
_HISTORY_COLUMNS = list(HISTORY_FIELDS)


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def encode_vector(blob: bytes) -> str:
    return base64.b64encode(blob).decode("ascii")


# -- export ------------------------------------------------------------------------------------


def open_existing(path: str) -> Database:
    """A connection to an existing memory file, for reading (export, stats, verify): never
    creates a file, never pins an embedder, so a file of any embedder can be read."""
    import os

    if path == ":memory:" or not os.path.isfile(path):
        raise StoreError(f"no memory file at {path!r}")
    db = Database(path)
    if db.query_one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'") is None:
        db.close()
        raise StoreError(f"{path!r} is not an offline_mem memory file (no meta table)")
    return db


def file_header(db: Database, *, vectors: bool) -> dict[str, Any]:
    meta = dict(db.query("SELECT key, value FROM meta"))
    counts = {
        "message": db.query_one("SELECT count(*) FROM messages")[0],
        "entity": db.query_one("SELECT count(*) FROM entities")[0],
        "memory": db.query_one("SELECT count(*) FROM memories")[0],
        "history": db.query_one("SELECT count(*) FROM history")[0],
    }
    return {
        "type": "header",
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "schema_version": int(meta.get("schema_version", SCHEMA_VERSION)),
        "embedder": {
            "name": meta.get("embedder_name"),
            "sha256": meta.get("embedder_sha256"),
            "dimension": int(meta.get("embedder_dimension") or 0),
        },
        "vectors": vectors,
        "counts": counts,
    }


def export_lines(db: Database, *, vectors: bool = False) -> Iterator[str]:
    """The lines of the export (without newlines), read in one consistent snapshot. The header
    comes first; its counts say how many lines of each type follow."""
    with db.snapshot():
        yield _line(file_header(db, vectors=vectors))
        cols = ", ".join(_MESSAGE_COLUMNS)
        for row in db.query(f"SELECT {cols} FROM messages ORDER BY seq"):
            yield _line({"type": "message", **dict(zip(_MESSAGE_COLUMNS, row, strict=True))})
        for scope, name, norm, kind in db.query(
            "SELECT scope, name, norm, kind FROM entities ORDER BY rowid"
        ):
            yield _line(
                {"type": "entity", "scope": scope, "name": name, "norm": norm, "kind": kind}
            )
        yield from _memory_lines(db, vectors)
        cols = ", ".join(_HISTORY_COLUMNS)
        for row in db.query(f"SELECT {cols} FROM history ORDER BY rowid"):
            item = dict(zip(_HISTORY_COLUMNS, row, strict=True))
            item["is_deleted"] = bool(item["is_deleted"])
            yield _line({"type": "history", **item})


def _memory_lines(db: Database, vectors: bool) -> Iterator[str]:
    sources: dict[int, list[str]] = {}
    for rowid, message_id in db.query(
        "SELECT p.memory_rowid, m.id FROM provenance p JOIN messages m ON m.seq = p.message_seq "
        "ORDER BY p.memory_rowid, m.seq"
    ):
        sources.setdefault(rowid, []).append(message_id)
    entities: dict[int, list[str]] = {}
    for rowid, norm in db.query(
        "SELECT l.memory_rowid, e.norm FROM entity_links l JOIN entities e "
        "ON e.rowid = l.entity_rowid ORDER BY l.memory_rowid, e.norm"
    ):
        entities.setdefault(rowid, []).append(norm)
    cols = ", ".join(_MEMORY_COLUMNS)
    for row in db.query(f"SELECT rowid, {cols} FROM memories ORDER BY rowid"):
        rowid = row[0]
        item: dict[str, Any] = {
            "type": "memory",
            **dict(zip(_MEMORY_COLUMNS, row[1:], strict=True)),
        }
        item["metadata"] = json.loads(item["metadata"])
        item["sources"] = sources.get(rowid, [])
        item["entities"] = entities.get(rowid, [])
        if vectors:
            found = db.query_one("SELECT embedding FROM memory_vectors WHERE rowid = ?", (rowid,))
            if found is None:
                raise StoreError(
                    f"memory {item['id']} has no vector; run `offline-mem verify`, or export "
                    "without vectors"
                )
            item["vector"] = encode_vector(bytes(found[0]))
        yield _line(item)


def export_file(
    db: Database, out: IO[str], *, vectors: bool = False, progress: Progress | None = None
) -> dict[str, int]:
    """Write the export to `out`; returns the number of lines of each type written."""
    lines = export_lines(db, vectors=vectors)
    header = next(lines)
    out.write(header + "\n")
    announced = json.loads(header)["counts"]
    counts = {kind: int(announced[kind]) for kind in ORDER}
    for line in lines:
        out.write(line + "\n")
        if progress is not None:
            progress(1)
    return counts


# -- reading an export -------------------------------------------------------------------------


@dataclass
class ExportData:
    """An export file, parsed and checked line by line and as a whole."""

    header: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {k: [] for k in ORDER})

    @property
    def embedder(self) -> EmbedderIdentity:
        e = self.header["embedder"]
        return EmbedderIdentity(name=e["name"], sha256=e["sha256"], dimension=e["dimension"])

    def count(self, kind: str) -> int:
        return len(self.rows[kind])


def _refuse(where: str, why: str) -> ImportRefusedError:
    return ImportRefusedError(f"refusing the export file: {where}: {why}")


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
        and embedder["dimension"] > 0
    ):
        raise _refuse("line 1", "the embedder must have a name, a sha256 and a dimension")
    counts = header.get("counts")
    if (
        not isinstance(counts, dict)
        or set(counts) != set(ORDER)
        or not all(isinstance(v, int) and v >= 0 for v in counts.values())
    ):
        raise _refuse("line 1", f"'counts' must give a number for each of {list(ORDER)}")
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
    if kind not in KINDS:
        raise _refuse(where, f"unknown type {kind!r}")
    position = ORDER.index(kind)
    if position < last_kind:
        raise _refuse(where, f"a {kind} line after the {ORDER[last_kind]} lines")
    fields = KINDS[kind]
    allowed = {"type", *fields} | ({"vector"} if kind == "memory" else set())
    missing, unknown = set(fields) - set(row), set(row) - allowed
    if missing or unknown:
        raise _refuse(
            where, f"{kind} with missing keys {sorted(missing)} / unknown keys {sorted(unknown)}"
        )
    for key, types in fields.items():
        value = row[key]
        if not isinstance(value, types) or (types == _INT and isinstance(value, bool)):
            raise _refuse(where, f"{kind} {key!r} has the wrong type ({type(value).__name__})")
    return kind, position


def read_export(lines: Iterable[str]) -> ExportData:
    """Parse and check an export. Raises ImportRefusedError on anything it cannot trust."""
    data: ExportData | None = None
    last_kind = 0
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            raise _refuse(f"line {number}", "empty line")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise _refuse(f"line {number}", f"not JSON ({exc})") from None
        if data is None:
            data = ExportData(header=_check_header(value))
            continue
        kind, last_kind = _check_row(number, value, last_kind)
        data.rows[kind].append(value)
    if data is None:
        raise _refuse("line 1", "the file is empty")
    for kind in ORDER:
        if data.count(kind) != data.header["counts"][kind]:
            raise _refuse(
                "counts",
                f"the header announces {data.header['counts'][kind]} {kind} "
                f"lines, the file holds {data.count(kind)} (truncated?)",
            )
    _check_consistency(data)
    return data


def _unique(
    rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any], what: str
) -> set[Any]:
    seen: set[Any] = set()
    for row in rows:
        value = key(row)
        if value in seen:
            raise _refuse(what, f"{value!r} appears twice")
        seen.add(value)
    return seen


def _check_scope(row: dict[str, Any], what: str) -> None:
    scope = Scope(row["user_id"], row["agent_id"], row["run_id"])
    if scope.is_empty() or scope.key != row["scope"]:
        raise _refuse(what, f"scope {row['scope']!r} does not match its ids")


def _check_consistency(data: ExportData) -> None:
    """Rows must agree with each other: ids unique, references resolvable, scopes and hashes
    matching their fields, vectors of the announced dimension."""
    from .memory import content_hash

    message_ids = _unique(data.rows["message"], lambda r: r["id"], "message id")
    entity_keys = _unique(data.rows["entity"], lambda r: (r["scope"], r["norm"]), "entity")
    _unique(data.rows["memory"], lambda r: r["id"], "memory id")
    _unique(data.rows["history"], lambda r: r["id"], "history id")
    for row in data.rows["message"]:
        _check_scope(row, f"message {row['id']}")
    dimension = data.embedder.dimension
    for row in data.rows["memory"]:
        what = f"memory {row['id']}"
        _check_scope(row, what)
        if row["state"] not in ("active", "superseded"):
            raise _refuse(what, f"unknown state {row['state']!r}")
        if row["hash"] != content_hash(row["text"]):
            raise _refuse(what, "its hash does not match its text")
        for source in row["sources"]:
            if source not in message_ids:
                raise _refuse(what, f"source message {source!r} is not in the file")
        for norm in row["entities"]:
            if (row["scope"], norm) not in entity_keys:
                raise _refuse(what, f"entity {norm!r} is not in the file for its scope")
        vector = row.get("vector")
        if data.header["vectors"] != (vector is not None):
            raise _refuse(what, "vectors must be given for every memory or for none")
        if vector is not None:
            try:
                blob = base64.b64decode(vector, validate=True)
            except (ValueError, TypeError):
                raise _refuse(what, "its vector is not base64") from None
            if len(blob) != 4 * dimension:
                raise _refuse(what, f"its vector does not have {dimension} float32 values")
    for row in data.rows["history"]:
        if row["event"] not in ("ADD", "UPDATE", "DELETE", "SUPERSEDE"):
            raise _refuse(f"history {row['id']}", f"unknown event {row['event']!r}")


# -- import ------------------------------------------------------------------------------------


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
    embedder_sha = None if same else target.sha256
    with memory._lock:
        bulk_insert(
            memory.store, data, vectors, terms,
            embedder_sha256=embedder_sha, message_vectors=message_vectors,
        )  # fmt: skip
    counts = {kind: data.count(kind) for kind in ORDER}
    return ImportReport(counts=counts, reembedded=not reuse, embedder=target.name)


def _message_vectors(
    memory: Any, rows: list[dict[str, Any]], batch_size: int
) -> dict[str, np.ndarray]:
    """Vectors of the indexed messages, by message id (exports carry none for messages)."""
    indexed = [r for r in rows if is_indexed_message(r["role"], r["content"])]
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(indexed), batch_size):
        chunk = indexed[start : start + batch_size]
        vectors = memory.embedder.embed_batch([r["content"] for r in chunk])
        found.update((r["id"], v) for r, v in zip(chunk, vectors, strict=True))
    return found


def _clashes(db: Database, table: str, ids: list[str]) -> list[str]:
    found: list[str] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        found += [r[0] for r in db.query(f"SELECT id FROM {table} WHERE id IN ({marks})", chunk)]
    return found


def bulk_insert(
    store: Store,
    data: ExportData,
    vectors: list[np.ndarray],
    terms: list[list[str]],
    *,
    embedder_sha256: str | None = None,
    message_vectors: dict[str, np.ndarray] | None = None,
) -> None:
    """Insert every row of `data` in ONE transaction, with the store's own SQL shapes: messages
    with their vector, entities, memories with their vector, keyword, provenance and entity
    rows, then history. `embedder_sha256`, when given, replaces each memory's pin (its vector
    was re-computed). Messages without a vector leave the message index marked pending (the
    next `Memory` to open the file fills it). Refuses (and writes nothing) when an id already
    exists in the target."""
    db = store.db
    with store.atomic():
        for table, kind in (
            ("messages", "message"),
            ("memories", "memory"),
            ("history", "history"),
        ):
            clash = _clashes(db, table, [r["id"] for r in data.rows[kind]])
            if clash:
                raise ImportRefusedError(
                    f"the target file already holds {len(clash)} of the file's {kind} ids "
                    f"(e.g. {clash[0]}); import into a fresh file"
                )
        seqs = _insert_messages(db, data.rows["message"])
        vectors_of = message_vectors or {}
        unindexed = False
        for row in data.rows["message"]:
            if not is_indexed_message(row["role"], row["content"]):
                continue
            if row["id"] in vectors_of:
                store.insert_message_vector(seqs[row["id"]], row["user_id"], vectors_of[row["id"]])
            else:
                unindexed = True
        if unindexed:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, 'pending') "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (INDEX_STATE_KEY,),
            )
        for row in data.rows["entity"]:
            db.execute(
                "INSERT INTO entities (scope, name, norm, kind) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(scope, norm) DO NOTHING",
                (row["scope"], row["name"], row["norm"], row["kind"]),
            )
        for row, vector, row_terms in zip(data.rows["memory"], vectors, terms, strict=True):
            _insert_memory(db, row, vector, row_terms, seqs, embedder_sha256)
        marks = ", ".join("?" for _ in _HISTORY_COLUMNS)
        db.executemany(
            f"INSERT INTO history ({', '.join(_HISTORY_COLUMNS)}) VALUES ({marks})",
            [
                [int(r[c]) if c == "is_deleted" else r[c] for c in _HISTORY_COLUMNS]
                for r in data.rows["history"]
            ],
        )


def _insert_messages(db: Database, rows: list[dict[str, Any]]) -> dict[str, int]:
    marks = ", ".join("?" for _ in _MESSAGE_COLUMNS)
    sql = f"INSERT INTO messages ({', '.join(_MESSAGE_COLUMNS)}) VALUES ({marks})"
    return {
        row["id"]: db.execute(sql, [row[c] for c in _MESSAGE_COLUMNS]).lastrowid for row in rows
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
    marks = ", ".join("?" for _ in _MEMORY_COLUMNS)
    rowid = db.execute(
        f"INSERT INTO memories ({', '.join(_MEMORY_COLUMNS)}) VALUES ({marks})",
        [values[c] for c in _MEMORY_COLUMNS],
    ).lastrowid
    db.execute(
        "INSERT INTO memory_vectors (rowid, user_id, embedding) VALUES (?, ?, ?)",
        (rowid, row["user_id"] or "", np.asarray(vector, dtype=np.float32).tobytes()),
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


def backup_file(db: Database, dest: str) -> None:
    """A consistent copy of a live file (VACUUM INTO: one read transaction, compacted)."""
    import os

    if os.path.exists(dest):
        raise StoreError(f"{dest!r} already exists; choose a new file for the backup")
    db.execute("VACUUM INTO ?", (dest,))
