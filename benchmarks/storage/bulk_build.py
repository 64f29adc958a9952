"""Building a large store through the product's import path instead of one add per scope.

`export_lines(first, last)` writes the export file (offline_mem/transfer/export.py's format,
vectors included) that a store built by `postgres_scale.build` holds for scopes first..last-1:
per scope one raw add of 10 messages (`text_of`, user `u<scope>`), i.e. 10 messages, 10 active
memories each citing its message, 10 ADD history rows; vectors by the same stand-in embedder,
so the importer takes them instead of re-embedding. Ids are UUIDs derived from (kind, scope,
index) and dates are the generation's clock, one microsecond a message as an add writes them.

`import_scopes` reads such a file back with `read_export` and writes it with `import_data`, as
`offline-mem import` does, a chunk of scopes per import (one transaction each) into a store
that may already hold other chunks. `self_check` proves on a small scale that a store built so
equals one built by the adds: the same export once ids and dates are set aside, the same rows
in every table (the store's derived rows: keyword postings, message vector links) and the same
search results.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks.storage.scale import SeededEmbedder, build, text_of
from offline_mem import Memory
from offline_mem.store.migrations import SCHEMA_VERSION
from offline_mem.transfer.export import _line
from offline_mem.transfer.format import FORMAT, FORMAT_VERSION
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export
from offline_mem.values import Scope, content_hash

PER_SCOPE = 10
_EMBEDDER = SeededEmbedder()


def _id(kind: str, scope: int, index: int) -> str:
    digest = hashlib.md5(f"{kind}:{scope}:{index}".encode()).digest()
    return str(uuid.UUID(bytes=digest, version=4))


def _scope_rows(scope: int, clock: datetime) -> tuple[list[Any], list[Any], list[Any]]:
    """The message, memory and history lines of one raw add of PER_SCOPE messages."""
    user = f"u{scope}"
    key = Scope(user_id=user).key
    texts = [text_of(scope, i) for i in range(PER_SCOPE)]
    vectors = _EMBEDDER.embed_batch(texts)
    stamp = (clock + timedelta(microseconds=PER_SCOPE)).isoformat(timespec="microseconds")
    messages, memories, history = [], [], []
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        message_id, memory_id = _id("message", scope, i), _id("memory", scope, i)
        messages.append({
            "type": "message", "id": message_id, "scope": key, "user_id": user,
            "agent_id": None, "run_id": None, "role": "user", "name": None, "content": text,
            "created_at": (clock + timedelta(microseconds=i)).isoformat(timespec="microseconds"),
            "observed_at": None, "metadata": None,
        })  # fmt: skip
        memories.append({
            "type": "memory", "id": memory_id, "text": text, "hash": content_hash(text),
            "user_id": user, "agent_id": None, "run_id": None, "scope": key, "metadata": {},
            "role": "user", "actor_id": None, "attributed_to": None, "memory_type": None,
            "state": "active", "superseded_by": None, "created_at": stamp, "updated_at": stamp,
            "observed_at": None, "expiration_date": None,
            "embedder_sha256": _EMBEDDER.identity.sha256, "extractor_sha256": None,
            "prompt_version": None, "valid_from": stamp, "valid_to": None,
            "sources": [message_id], "entities": [],
            "vector": base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii"),
        })  # fmt: skip
        history.append({
            "type": "history", "id": _id("history", scope, i), "memory_id": memory_id,
            "old_memory": None, "new_memory": text, "event": "ADD", "related_memory_id": None,
            "created_at": stamp, "updated_at": stamp, "is_deleted": False, "actor_id": None,
            "role": "user", "written_by": None, "happened_at": stamp,
        })  # fmt: skip
    return messages, memories, history


def export_lines(first: int, last: int) -> Iterator[str]:
    """The export file's lines (header first) of scopes first..last-1."""
    clock = datetime.now(timezone.utc)
    kinds: dict[str, list[Any]] = {"message": [], "memory": [], "history": []}
    for scope in range(first, last):
        rows = _scope_rows(scope, clock + timedelta(microseconds=(scope - first) * 100))
        for kind, found in zip(kinds, rows, strict=True):
            kinds[kind] += found
    n = (last - first) * PER_SCOPE
    identity = _EMBEDDER.identity
    yield _line({
        "type": "header", "format": FORMAT, "format_version": FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION, "vectors": True,
        "embedder": {"name": identity.name, "sha256": identity.sha256,
                     "dimension": identity.dimension},
        "counts": {"message": n, "entity": 0, "memory": n, "history": n},
    })  # fmt: skip
    for kind in ("message", "memory", "history"):
        for row in kinds[kind]:
            yield _line(row)


def import_scopes(memory: Memory, first: int, last: int, folder: Path) -> None:
    """Write the export file of scopes first..last-1 and import it into `memory`."""
    path = folder / f"scopes{first}-{last}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for line in export_lines(first, last):
            out.write(line + "\n")
    with path.open(encoding="utf-8") as source:
        data = read_export(source)
    import_data(memory, data)
    path.unlink()


# -- the self-check --------------------------------------------------------------------------

_DATE = re.compile(r'"\d{4}-\d\d-\d\dT[0-9:.]+\+00:00"')
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalised_export(memory: Memory) -> list[str]:
    """The store's export with vectors, dates replaced by a mark and ids by their order of
    first appearance (so two stores with the same rows in the same order compare equal)."""
    if getattr(memory, "store_url", None) is None:
        from offline_mem.transfer.export import export_lines as lines_of
    else:
        from offline_mem.transfer.postgres import export_lines as lines_of
    names: dict[str, str] = {}
    out = []
    for line in lines_of(memory.store.db, vectors=True):
        line = _DATE.sub('"<date>"', line)
        out.append(_UUID.sub(lambda m: names.setdefault(m.group(), f"id{len(names)}"), line))
    return out


def table_rows(memory: Memory) -> dict[str, int]:
    """Rows in each of the store's tables (derived ones included)."""
    db = memory.store.db
    if getattr(memory, "store_url", None) is None:
        tables = [r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
    else:
        tables = [r[0] for r in db.query("SELECT tablename FROM pg_tables "
                                         "WHERE schemaname = current_schema()")]  # fmt: skip
    return {t: int(db.query_one(f'SELECT count(*) FROM "{t}"')[0]) for t in sorted(tables)}


def self_check(open_store: Any, searches: Any, folder: Path, scopes: int = 100) -> dict[str, Any]:
    """Build `scopes` scopes by the adds and, in two imports, by this module; compare.
    `open_store(name)` opens a fresh empty store; `searches(memory)` gives each query's top
    10. Raises AssertionError on any difference."""
    with open_store("by_adds") as by_adds, open_store("by_import") as by_import:
        build(by_adds, scopes, PER_SCOPE)
        import_scopes(by_import, 0, scopes // 2, folder)
        import_scopes(by_import, scopes // 2, scopes, folder)  # into a non-empty store
        exports = normalised_export(by_adds), normalised_export(by_import)
        assert exports[0] == exports[1], _first_difference(*exports)
        rows = table_rows(by_adds), table_rows(by_import)
        assert rows[0] == rows[1], rows
        tops = searches(by_adds), searches(by_import)
        assert tops[0] == tops[1], "search results differ"
    return {"scopes": scopes, "export_lines": len(exports[0]), "tables": rows[0],
            "searches": len(tops[0]), "identical": True}  # fmt: skip


def _first_difference(a: list[str], b: list[str]) -> str:
    for number, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"line {number}:\n{x}\n{y}"
    return f"lengths {len(a)} and {len(b)}"
