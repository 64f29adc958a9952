"""The export lines of a Memory's store, whichever it is: a memory file's (transfer/export.py)
or a PostgreSQL database's (transfer/postgres.py), the same format from both."""

from __future__ import annotations

from collections.abc import Iterator

from offline_mem.memory import Memory
from offline_mem.transfer import export, postgres


def export_lines(memory: Memory, *, vectors: bool = False) -> Iterator[str]:
    if memory.config.store is not None:
        return postgres.export_lines(memory.store.db, vectors=vectors)  # type: ignore[arg-type]
    return export.export_lines(memory.store.db, vectors=vectors)  # type: ignore[arg-type]
