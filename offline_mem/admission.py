"""Admission: the model's answer turned into memories to write. Pure: no I/O, no model calls.

Two steps, with the embedding done by the caller in between:

1. `read_facts` checks the answer item by item (the grammar already guarantees its shape; this
   guards the guarantee): texts trimmed, empty texts dropped, message numbers and memory aliases
   mapped back to plan indexes and real ids, anything out of range dropped. The model never sees
   or writes a real id.
2. `admit` drops exact duplicates (the MD5 of the text, as Mem0, against the scope's active
   memories and the batch) and near-duplicates (cosine similarity of the embeddings at or above
   `NEAR_DUPLICATE_THRESHOLD`, against the memories shown to the model and the batch), keeps only
   supersessions of memories that are plausibly about the same thing
   (similarity at or above `SUPERSEDE_MIN_SIMILARITY`), and builds the `NewMemory` objects and
   Mem0-shaped result items.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .content_words import share_a_content_word
from .records import MemoryRecord, NewMemory, NewMessage
from .store import keyword_text

# all-MiniLM-L6-v2 cosine similarity at or above which two facts say the same thing. Measured on
# the extraction benchmark: rephrasings such as "User lives in Porto." / "User lives in Porto,
# Portugal." score 0.93-0.99, while facts that differ in one value ("lives in Porto" / "lives in
# Lisbon") score 0.75-0.90 and must both survive (one may supersede the other).
NEAR_DUPLICATE_THRESHOLD = 0.95

# A 1.5B model sometimes lists an unrelated memory under "supersedes" (e.g. the user's name for
# "User moved to Berlin"). A supersession is kept only when the new fact and the old memory are at
# least this similar; unrelated pairs score below 0.2, real replacements 0.35 and above.
SUPERSEDE_MIN_SIMILARITY = 0.3

# ...and it often names the wrong alias while meaning to supersede something (the demo: "User
# moved from Lisbon to Porto" with supersedes [0] = "User is named Joana", when "User lives in
# Lisbon" was memory 1). When every alias it names is rejected by the floor above, the shown
# memory most similar to the new fact is superseded instead, if it is at least this similar.
SUPERSEDE_RETARGET_SIMILARITY = 0.55

ATTRIBUTIONS = ("user", "assistant")


def fact_hash(text: str) -> str:
    """MD5 of the text, the same as `offline_mem.memory.content_hash` (Mem0's `hash`)."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Fact:
    """One fact of the model's answer, checked and mapped back to real references."""

    text: str
    attributed_to: str | None
    sources: tuple[int, ...]  # indexes into the plan's messages
    supersedes: tuple[str, ...]  # memory ids


@dataclass
class Admission:
    memories: list[NewMemory] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (text, reason)

    def record_supersession(self, index: int, old: MemoryRecord) -> None:
        """memories[index] supersedes `old`: mark it, and add the SUPERSEDE row after the
        memory's ADD row, with the ADD row listing it (the shape `admit` produces)."""
        memory = self.memories[index]
        memory.supersedes.append(old.id)
        at = next(i for i, r in enumerate(self.results) if r["id"] == memory.id)
        self.results[at]["supersedes"] = list(memory.supersedes)
        while at + 1 < len(self.results) and self.results[at + 1]["event"] == "SUPERSEDE":
            at += 1
        row = {"id": old.id, "memory": old.text, "event": "SUPERSEDE", "superseded_by": memory.id}
        self.results.insert(at + 1, row)

    def withdraw_supersession(self, index: int, old_id: str) -> None:
        """Undo `memories[index]` superseding `old_id`: the reverse of `record_supersession`."""
        memory = self.memories[index]
        memory.supersedes.remove(old_id)
        self.results = [
            r
            for r in self.results
            if not (r["event"] == "SUPERSEDE" and r["id"] == old_id
                    and r.get("superseded_by") == memory.id)
        ]  # fmt: skip
        row = next(r for r in self.results if r["id"] == memory.id)
        if memory.supersedes:
            row["supersedes"] = list(memory.supersedes)
        else:
            row.pop("supersedes", None)


def _clean_text(value: object) -> str:
    """Whitespace collapsed; text with no UTF-8 form (a lone surrogate from a JSON escape) or a
    NUL is not a fact we can store, so it becomes empty and is dropped."""
    if not isinstance(value, str) or "\x00" in value:
        return ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return ""
    return " ".join(value.split())


def _indexes(value: object) -> list[int]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]


def _unique(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def _aliases(value: object, shown: Sequence[MemoryRecord]) -> tuple[str, ...]:
    """Memory aliases mapped back to real ids; out-of-range aliases are dropped."""
    return _unique([shown[a].id for a in _indexes(value) if 0 <= a < len(shown)])


def read_facts(
    answer: Mapping[str, Any],
    *,
    shown_messages: Sequence[int],
    shown_memories: Sequence[MemoryRecord],
    roles: Sequence[str],
) -> list[Fact]:
    """The answer's facts. `shown_messages[n - 1]` is the plan index of new message n;
    `shown_memories[i]` is the memory shown as alias i; `roles[i]` is the role of plan message
    i. A fact is attributed to the side that said the messages it cites (no side when it cites
    both): the answer carries no speaker of its own, which saves generated tokens."""
    raw = answer.get("facts")
    if not isinstance(raw, list):
        return []
    facts = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        text = _clean_text(item.get("text"))
        if not text:
            continue
        numbers = [n for n in _indexes(item.get("from_messages")) if 1 <= n <= len(shown_messages)]
        # A fact that names no valid message is credited to every message shown.
        sources = _unique([shown_messages[n - 1] for n in numbers]) or _unique(shown_messages)
        sides = {roles[i] for i in sources} & set(ATTRIBUTIONS)
        facts.append(
            Fact(
                text=text,
                attributed_to=sides.pop() if len(sides) == 1 else None,
                sources=sources,
                supersedes=_aliases(item.get("supersedes"), shown_memories),
            )
        )
    return facts


@dataclass(frozen=True)
class AdmissionContext:
    """What admission needs to know about the scope and the call."""

    messages: Sequence[NewMessage]  # the plan's messages
    shown_memories: Sequence[MemoryRecord]
    shown_vectors: np.ndarray  # embeddings of shown_memories' texts, same order
    existing_hashes: frozenset[str]  # hashes of the scope's active memories among the candidates
    metadata: Mapping[str, Any]
    expiration_date: str | None = None
    new_id: Callable[[], str] = lambda: str(uuid.uuid4())
    # words that name the speakers ("user", "Oskar"): they say who, not what a fact is about
    names: frozenset[str] = frozenset({"user", "assistant"})


def _supersession_targets(
    fact: Fact,
    similar: np.ndarray,
    shown: Sequence[MemoryRecord],
    by_id: dict[str, int],
    superseded: set[str],
    names: frozenset[str],
) -> list[str]:
    """The shown memories a fact supersedes: those the model named that pass the similarity
    floor and share a content word with it (measured on the side-by-side benchmark: the model
    had "moved to Aarhus" supersede "finished reading The Overstory"); if it named some and
    none passed, the most similar shown memory above the retarget threshold, on the same
    condition."""

    def about_the_same(old: MemoryRecord) -> bool:
        return share_a_content_word(fact.text, old.text, names)

    named = [old for old in fact.supersedes if old not in superseded]
    kept = [
        old
        for old in named
        if similar[by_id[old]] >= SUPERSEDE_MIN_SIMILARITY and about_the_same(shown[by_id[old]])
    ]
    if kept or not named or not len(similar):
        return kept
    best = int(np.argmax(similar))
    if (
        similar[best] >= SUPERSEDE_RETARGET_SIMILARITY
        and shown[best].id not in superseded
        and about_the_same(shown[best])
    ):
        return [shown[best].id]
    return []


def admit(facts: Sequence[Fact], vectors: np.ndarray, ctx: AdmissionContext) -> Admission:
    """Decide which facts become memories; `vectors[i]` is the unit embedding of facts[i]."""
    out = Admission()
    by_id = {m.id: i for i, m in enumerate(ctx.shown_memories)}
    kept_hashes: set[str] = set()
    kept_vectors: list[np.ndarray] = []
    superseded: set[str] = set()
    for fact, vector in zip(facts, vectors, strict=True):
        digest = fact_hash(fact.text)
        if digest in ctx.existing_hashes or digest in kept_hashes:
            out.dropped.append((fact.text, "duplicate"))
            continue
        similar = _similarities(vector, ctx.shown_vectors)
        replaces = _supersession_targets(
            fact, similar, ctx.shown_memories, by_id, superseded, ctx.names
        )
        near = [
            ctx.shown_memories[int(i)].id
            for i in np.flatnonzero(similar >= NEAR_DUPLICATE_THRESHOLD)
            if ctx.shown_memories[int(i)].id not in replaces
        ]
        batch = _similarities(vector, np.asarray(kept_vectors)) if kept_vectors else similar[:0]
        if near or (batch >= NEAR_DUPLICATE_THRESHOLD).any():
            out.dropped.append((fact.text, "near duplicate"))
            continue
        memory = _new_memory(fact, digest, vector, replaces, ctx)
        kept_hashes.add(digest)
        kept_vectors.append(vector)
        superseded.update(replaces)
        out.memories.append(memory)
        item: dict[str, Any] = {"id": memory.id, "memory": memory.text, "event": "ADD"}
        if replaces:
            item["supersedes"] = list(replaces)
        out.results.append(item)
        for old in replaces:
            record = ctx.shown_memories[by_id[old]]
            out.results.append(
                {"id": old, "memory": record.text, "event": "SUPERSEDE", "superseded_by": memory.id}
            )
    return out


def _similarities(vector: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    if matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    return np.asarray(matrix, dtype=np.float32) @ np.asarray(vector, dtype=np.float32)


def _new_memory(
    fact: Fact, digest: str, vector: np.ndarray, replaces: list[str], ctx: AdmissionContext
) -> NewMemory:
    sources = [ctx.messages[i] for i in fact.sources]
    speakers = {m.name for m in sources if m.role == fact.attributed_to and m.name is not None}
    stamps = [m.observed_at for m in sources if m.observed_at is not None]
    return NewMemory(
        id=ctx.new_id(),
        text=fact.text,
        hash=digest,
        vector=vector,
        keyword_text=keyword_text(fact.text),
        metadata=dict(ctx.metadata),
        actor_id=speakers.pop() if len(speakers) == 1 else None,
        attributed_to=fact.attributed_to,
        observed_at=max(stamps) if stamps else None,
        expiration_date=ctx.expiration_date,
        source_messages=list(fact.sources),
        supersedes=list(replaces),
    )
