"""The export format: its name and version, the fields of each kind of line, and the parsed
form of a file (`ExportData`). See export.py for the layout of a file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import OfflineMemError
from ..values import EmbedderIdentity

FORMAT = "offline_mem-export"
FORMAT_VERSION = 1

Progress = Callable[[int], None]  # called with the number of items just done


class ImportRefusedError(OfflineMemError, ValueError):
    """The export file cannot be trusted (bad header, unknown version, inconsistent rows), or it
    clashes with the target file. Nothing was written."""


# -- row shapes --------------------------------------------------------------------------------

_STR = (str,)
_OPT = (str, type(None))
INT_TYPE = (int,)

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
    "metadata": _OPT,  # JSON text; absent in files written before schema 5
}
# Fields a line may lack (files written by an older offline_mem): read as None.
OPTIONAL_FIELDS: dict[str, frozenset[str]] = {"message": frozenset({"metadata"})}
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
MEMORY_COLUMNS = [
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
MESSAGE_COLUMNS = list(MESSAGE_FIELDS)
HISTORY_COLUMNS = list(HISTORY_FIELDS)


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
