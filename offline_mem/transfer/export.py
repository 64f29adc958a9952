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
  job      every extraction job of `add(..., async_mode=True)` not done yet: queued (a running
           one as queued) or failed, with its request, whose message ids are in the file (see
           jobs.py); the header counts jobs only when there are some

No internal row numbers are written: rows refer to each other by id, so an export can be imported
into a fresh file or merged into one that holds other memories, and export -> import -> export
gives the same bytes. Keyword rows are derived data: import rebuilds them with the target's
analyzer. Import validates the whole file before it writes anything, re-embeds the texts when the
file's vectors are absent or come from another embedder, then writes every row in ONE transaction.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import IO, Any

from ..errors import StoreError
from ..store.db import Database
from ..store.migrations import SCHEMA_VERSION
from .format import (
    FORMAT,
    FORMAT_VERSION,
    HISTORY_COLUMNS,
    MEMORY_COLUMNS,
    MESSAGE_COLUMNS,
    ORDER,
    Progress,
    line_counts,
)
from .jobs import job_count, job_lines


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def encode_vector(blob: bytes) -> str:
    return base64.b64encode(blob).decode("ascii")


# -- export ------------------------------------------------------------------------------------


def open_existing(path: str, *, check: bool = True) -> Database:
    """A connection to an existing memory file, for reading (export, stats, verify): never
    creates a file, never pins an embedder, so a file of any embedder can be read. `check`
    False (verify) opens a damaged file too, to report on it."""
    import os

    if path == ":memory:" or not os.path.isfile(path):
        raise StoreError(f"no memory file at {path!r}")
    db = Database(path, check=check)
    if db.query_one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'") is None:
        db.close()
        raise StoreError(f"{path!r} is not an offline_mem memory file (no meta table)")
    return db


def file_header(db: Database, *, vectors: bool) -> dict[str, Any]:
    meta = dict(db.query("SELECT key, value FROM meta"))
    counts = line_counts(
        {
            "message": db.query_one("SELECT count(*) FROM messages")[0],
            "entity": db.query_one("SELECT count(*) FROM entities")[0],
            "memory": db.query_one("SELECT count(*) FROM memories")[0],
            "history": db.query_one("SELECT count(*) FROM history")[0],
            "job": job_count(db),
        }
    )
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
        for job in job_lines(db):
            yield _line(job)


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
    cols = ", ".join(MEMORY_COLUMNS)
    for row in db.query(f"SELECT rowid, {cols} FROM memories ORDER BY rowid"):
        rowid = row[0]
        item: dict[str, Any] = {
            "type": "memory",
            **dict(zip(MEMORY_COLUMNS, row[1:], strict=True)),
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
    return write_lines(export_lines(db, vectors=vectors), out, progress=progress)


def write_lines(
    lines: Iterator[str], out: IO[str], *, progress: Progress | None = None
) -> dict[str, int]:
    """Write an export's lines (its header first) to `out`; the lines of each type written."""
    header = next(lines)
    out.write(header + "\n")
    announced = json.loads(header)["counts"]
    counts = {kind: int(announced[kind]) for kind in ORDER if kind in announced}
    for line in lines:
        out.write(line + "\n")
        if progress is not None:
            progress(1)
    return counts


def backup_file(db: Database, dest: str) -> None:
    """A consistent copy of a live file (VACUUM INTO: one read transaction, compacted)."""
    import os

    if os.path.exists(dest):
        raise StoreError(f"{dest!r} already exists; choose a new file for the backup")
    db.execute("VACUUM INTO ?", (dest,))
