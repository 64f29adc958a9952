"""The export format: its name and version, the fields of each kind of line, and the parsed
form of a file (`ExportData`). See export.py for the layout of a file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ImportRefusedError
from ..values import EmbedderIdentity

FORMAT = "offline_mem-export"
FORMAT_VERSION = 1

Progress = Callable[[int], None]  # called with the number of items just done


def refusal(where: str, why: str) -> ImportRefusedError:
    return ImportRefusedError(f"refusing the export file: {where}: {why}")


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
OPTIONAL_FIELDS: dict[str, frozenset[str]] = {
    "message": frozenset({"metadata"}),
    # exports made before the columns existed (import gives them what migration 011 gives)
    "memory": frozenset({"valid_from", "valid_to"}),
    "history": frozenset({"written_by", "happened_at"}),
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
    "valid_from": _OPT,
    "valid_to": _OPT,
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
    "written_by": _OPT,
    "happened_at": _OPT,
}
JOB_FIELDS: dict[str, tuple[type, ...]] = {
    "id": _STR,
    "scope": _STR,
    "user_id": _OPT,
    "agent_id": _OPT,
    "run_id": _OPT,
    "kind": _STR,
    "request": (dict,),  # the job's inputs: the ids of its messages, metadata, the add's time
    "state": _STR,  # queued or failed
    "attempts": INT_TYPE,
    "error": _OPT,
    "created_at": _STR,
    "finished_at": _OPT,
}
# What a job's run reads from its request (memory_parts/jobs.py `ExtractionJobs.new_job` writes it).
JOB_REQUEST_FIELDS: dict[str, tuple[type, ...]] = {
    "messages": (list,),  # [{"id": message id, "extract": bool}]
    "metadata": (dict,),
    "expiration_date": _OPT,
    "instructions": _OPT,
    "now": _STR,
}
KINDS = {
    "message": MESSAGE_FIELDS,
    "entity": ENTITY_FIELDS,
    "memory": MEMORY_FIELDS,
    "history": HISTORY_FIELDS,
    "job": JOB_FIELDS,
}
ORDER = ("message", "entity", "memory", "history", "job")  # the order of the lines in a file
# Kinds the header's counts name only when the file has such lines: a file without jobs is
# what an offline_mem from before jobs were exported writes and reads, and one with jobs is
# refused by such an offline_mem (an unknown count) rather than imported without them.
OPTIONAL_KINDS = frozenset({"job"})

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
    "valid_from",
    "valid_to",
]
MESSAGE_COLUMNS = list(MESSAGE_FIELDS)
HISTORY_COLUMNS = list(HISTORY_FIELDS)
JOB_COLUMNS = list(JOB_FIELDS)


def line_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """The counts as a header (and an import's report) gives them: each kind in file order,
    less the optional kinds without lines."""
    return {k: counts.get(k, 0) for k in ORDER if k not in OPTIONAL_KINDS or counts.get(k, 0)}


@dataclass
class ExportData:
    """An export file, parsed and checked line by line and as a whole."""

    header: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {k: [] for k in ORDER})
    # the line number of each row, parallel to `rows`, so a refusal names the line
    lines: dict[str, list[int]] = field(default_factory=lambda: {k: [] for k in ORDER})

    @property
    def embedder(self) -> EmbedderIdentity:
        e = self.header["embedder"]
        return EmbedderIdentity(name=e["name"], sha256=e["sha256"], dimension=e["dimension"])

    def count(self, kind: str) -> int:
        return len(self.rows[kind])
