"""Value types that every layer may import: a memory's scope, the content hash of a text, the
identity of an embedder, an entity mention. Pure: no I/O, and no import from the package.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

SCOPE_KEYS = ("user_id", "agent_id", "run_id")


@dataclass(frozen=True)
class Scope:
    """The owner of a memory: any non-empty combination of user, agent and run ids."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    @property
    def key(self) -> str:
        """A canonical string naming exactly this combination (for messages and entities)."""
        parts = {k: v for k, v in self.as_dict().items() if v is not None}
        return json.dumps(parts, sort_keys=True, separators=(",", ":"))

    def as_dict(self) -> dict[str, str | None]:
        return {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}

    def is_empty(self) -> bool:
        return self.user_id is None and self.agent_id is None and self.run_id is None


def content_hash(text: str) -> str:
    """A memory's `hash`: the MD5 of its text, as Mem0 computes it, so the values are
    compatible. Exact duplicates in a scope are found by it."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EmbedderIdentity:
    """What the memory file pins: a vector from another identity is never mixed in."""

    name: str
    sha256: str
    dimension: int
    # one digest of every file that shapes a vector (tokenizer, configs, weights); None where
    # unknown (a fake, an embedder built in code): then only `sha256` is pinned
    files_sha256: str | None = None


@dataclass(frozen=True)
class EntityMention:
    """An entity named in a text: as written, its normalised form (entities.normalize_entity),
    and its kind (a spaCy label, "PROPER" or "QUOTED")."""

    name: str
    norm: str
    kind: str
